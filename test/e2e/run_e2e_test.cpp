// `dsh-confine run` through the built binary: output and status pass through, the report
// attributes the result (denial, runner failure with and without the runner's text, a command
// that fakes a runner message), signals out (death by signal) and in (forwarded to the
// command), large streams, stdin, and run's own errors.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using e2e::IsError;

json parse(const std::string& text) { return json::parse(text, nullptr, false); }

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

using e2e::backend_usable;

// Whether a process whose command line matches `pattern` (pgrep -f) comes to be there
// (`present`) or gone, looked for every 50 ms: a hang guard of 30 s, no timing asserted.
bool pgrep_becomes(const std::string& pattern, bool present) {
    for (int i = 0; i < 600; ++i) {
        if ((e2e::run_program({"/usr/bin/pgrep", "-f", pattern}).status == 0) == present) return true;
        usleep(50000);
    }
    return false;
}

// dsh-confine spawned in the background, for tests that signal it while it runs: stdout is a
// pipe the test reads, stderr goes to a file, and the whole process group dies with the object.
class Background {
public:
    Background(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
               const std::string& stderr_path) {
        std::map<std::string, std::string> environment;
        for (char** e = environ; *e; ++e) {
            const std::string entry = *e;
            const auto eq = entry.find('=');
            if (eq != std::string::npos) environment[entry.substr(0, eq)] = entry.substr(eq + 1);
        }
        for (const char* name : {"DSH_CONFINE_CONFIG", "DSH_CONFINE_STATE_DIR", "SPDLOG_LEVEL", "TMPDIR"})
            environment.erase(name);
        for (const auto& [k, v] : env) environment[k] = v;
        std::vector<std::string> argv = {e2e::binary()};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<std::string> env_strings;
        for (const auto& [k, v] : environment) env_strings.push_back(k + "=" + v);
        std::vector<char*> c_args, c_env;
        for (auto& a : argv) c_args.push_back(a.data());
        c_args.push_back(nullptr);
        for (auto& e : env_strings) c_env.push_back(e.data());
        c_env.push_back(nullptr);

        int out[2];
        if (pipe2(out, O_CLOEXEC) != 0) return;
        const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        pid_ = fork();
        if (pid_ == 0) {
            setpgid(0, 0);
            dup2(null, 0);
            dup2(out[1], 1);
            dup2(err, 2);
            execve(c_args[0], c_args.data(), c_env.data());
            _exit(122);
        }
        close(out[1]);
        close(err);
        close(null);
        out_ = out[0];
    }

    ~Background() {
        if (pid_ > 0 && !reaped_) {
            kill(-pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (out_ >= 0) close(out_);
    }
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

    bool started() const { return pid_ > 0 && out_ >= 0; }
    pid_t pid() const { return pid_; }

    // Reads stdout until it holds `line` followed by a newline.
    bool wait_for_line(const std::string& line, int timeout_ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (!contains(out_text_, line + "\n")) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            if (left <= 0) return false;
            pollfd fd{out_, POLLIN, 0};
            if (poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
            char buffer[4096];
            const ssize_t n = read(out_, buffer, sizeof buffer);
            if (n <= 0) return false;
            out_text_.append(buffer, static_cast<std::size_t>(n));
        }
        return true;
    }

    // The exit status (128+signal when killed), or -1 when it did not end in time (it is killed).
    int wait(int timeout_ms) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        int status = 0;
        while (true) {
            const pid_t done = waitpid(pid_, &status, WNOHANG);
            if (done == pid_) break;
            if (done < 0 && errno != EINTR) return -1;
            if (std::chrono::steady_clock::now() >= deadline) {
                kill(-pid_, SIGKILL);
                waitpid(pid_, nullptr, 0);
                reaped_ = true;
                return -1;
            }
            usleep(10000);
        }
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

private:
    pid_t pid_ = -1;
    int out_ = -1;
    bool reaped_ = false;
    std::string out_text_;
};

class Run : public ::testing::Test {
protected:
    e2e::TempDir home;
    e2e::TempDir scratch;

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }
    e2e::Result dsh(const std::vector<std::string>& args, const e2e::RunOptions& o) const { return e2e::run(args, o); }

    std::string report_path() const { return scratch / "report.json"; }
    json report() const { return parse(e2e::read_file(report_path())); }
    std::string sentinel() const { return scratch / "sentinel"; }
    std::string dir(const std::string& name) const {
        fs::create_directories(scratch / name);
        return scratch / name;
    }

    // A stand-in for bwrap, configured as [backend.bwrap] path: prints `text` to stderr and
    // exits 1 without ever running the command. Returns the config file.
    std::string fake_bwrap(const std::string& text) const {
        const std::string script = scratch / "fake-bwrap";
        e2e::write_file(script, "#!/bin/sh\n" + (text.empty() ? "" : "echo '" + text + "' >&2\n") + "exit 1\n");
        fs::permissions(script, fs::perms::owner_all);
        const std::string config = scratch / "config.toml";
        e2e::write_file(config, "[backend.bwrap]\npath = \"" + script + "\"\n");
        return config;
    }
};

class RunBwrap : public Run {
protected:
    void SetUp() override { E2E_REQUIRE(backend_usable("bwrap"), "bwrap is not usable on this host"); }
};

class RunLandlock : public Run {
protected:
    void SetUp() override { E2E_REQUIRE(backend_usable("landlock"), "Landlock is not usable on this host"); }
};

// --- pass-through -----------------------------------------------------------------------

TEST_F(RunBwrap, SuccessExitsZeroAndPassesStdoutThrough) {
    const e2e::Result r = dsh({"run", "--", "echo", "hello from inside"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "hello from inside\n");
    EXPECT_EQ(r.err, "");
}

TEST_F(RunBwrap, SuccessReportSaysSuccessAndStarted) {
    const e2e::Result r = dsh({"run", "--report", report_path(), "--", "true"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << e2e::read_file(report_path());
    EXPECT_EQ(rep["verdict"]["verdict"], "success");
    EXPECT_EQ(rep["exitCode"], 0);
    EXPECT_EQ(rep["started"], true);
    EXPECT_EQ(rep["backend"], "bwrap");
    EXPECT_EQ(rep["argv"], json::array({"true"}));
}

TEST_F(RunBwrap, OrdinaryFailureStatusPassesThrough) {
    const e2e::Result r = dsh({"run", "--", "sh", "-c", "exit 3"});
    EXPECT_EQ(r.status, 3) << r.err;
    EXPECT_EQ(r.err, "");
}

TEST_F(RunBwrap, StdinPassesThrough) {
    e2e::RunOptions o = options();
    o.input = "hello\n";
    const e2e::Result r = dsh({"run", "--", "cat"}, o);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "hello\n");
}

TEST_F(RunBwrap, LargeFastStderrPassesThroughWhole) {
    constexpr std::size_t kSize = 50000000;
    const e2e::Result r = dsh({"run", "--", "sh", "-c", "head -c 50000000 /dev/zero | tr '\\0' x >&2"});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.err.size(), kSize);
    EXPECT_EQ(static_cast<std::size_t>(std::count(r.err.begin(), r.err.end(), 'x')), kSize);
    EXPECT_EQ(r.out, "");
}

TEST_F(Run, DangerFullAccessPassesStatusThroughWithoutABackend) {
    const e2e::Result r = dsh({"run", "--mode", "danger-full-access", "--report", report_path(), "--", "sh", "-c", "exit 4"});
    EXPECT_EQ(r.status, 4) << r.err;
    const json rep = report();
    EXPECT_TRUE(rep["backend"].is_null());
    EXPECT_EQ(rep["verdict"]["verdict"], "failure");
}

// --- attribution ------------------------------------------------------------------------

TEST_F(RunBwrap, DenialIsReportedAsDenialOfAStartedCommand) {
    const std::string ws = dir("ws");
    const e2e::Result r = dsh({"run", "--mode", "read-only", "--workspace-root", ws, "--report", report_path(), "--",
                               "touch", ws + "/file"});
    EXPECT_EQ(r.status, 1);
    EXPECT_TRUE(contains(r.err, "Read-only file system")) << r.err;
    EXPECT_FALSE(e2e::exists(ws + "/file"));
    const json rep = report();
    ASSERT_TRUE(rep.is_object());
    EXPECT_EQ(rep["verdict"]["verdict"], "denial");
    EXPECT_EQ(rep["verdict"]["signature"], "read-only file system");
    EXPECT_EQ(rep["started"], true);
}

TEST_F(Run, RunnerFailureWithTheRunnersTextIs125) {
    const std::string config = fake_bwrap("bwrap: Creating new namespace failed: Operation not permitted");
    const e2e::Result r = dsh({"run", "--config", config, "--backend", "bwrap", "--report", report_path(), "--", "touch",
                               sentinel()});
    EXPECT_EQ(r.status, 125);
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(contains(r.err, "dsh-confine: error: RUNNER_FAILURE: ")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
    const json rep = report();
    ASSERT_TRUE(rep.is_object());
    EXPECT_EQ(rep["verdict"]["verdict"], "runner-failure");
    EXPECT_EQ(rep["verdict"]["signature"], "bwrap: Creating new namespace failed");
    EXPECT_EQ(rep["started"], false);
}

TEST_F(Run, RunnerFailureWithoutAnyTextIsStill125) {
    const std::string config = fake_bwrap("");
    const e2e::Result r = dsh({"run", "--config", config, "--backend", "bwrap", "--report", report_path(), "--", "touch",
                               sentinel()});
    EXPECT_TRUE(IsError(r, "RUNNER_FAILURE"));
    EXPECT_FALSE(e2e::exists(sentinel()));
    const json rep = report();
    ASSERT_TRUE(rep.is_object());
    EXPECT_EQ(rep["verdict"]["verdict"], "runner-failure");
    EXPECT_EQ(rep["started"], false);
}

TEST_F(RunBwrap, CommandPrintingARunnerMessageIsAnOrdinaryFailure) {
    const e2e::Result r = dsh({"run", "--report", report_path(), "--", "sh", "-c",
                               "echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2; exit 1"});
    EXPECT_EQ(r.status, 1);
    EXPECT_FALSE(contains(r.err, "RUNNER_FAILURE")) << r.err;
    const json rep = report();
    ASSERT_TRUE(rep.is_object());
    EXPECT_EQ(rep["verdict"]["verdict"], "failure");
    EXPECT_EQ(rep["started"], true);
}

// --- signals out ------------------------------------------------------------------------

TEST_F(RunLandlock, DeathBySignalIs128PlusSignalAndReported) {
    const e2e::Result r = dsh({"run", "--backend", "landlock", "--report", report_path(), "--", "sh", "-c", "kill -TERM $$"});
    EXPECT_EQ(r.status, 143) << r.err;
    const json rep = report();
    ASSERT_TRUE(rep.is_object());
    EXPECT_EQ(rep["signal"], 15);
    EXPECT_TRUE(rep["exitCode"].is_null());
}

TEST_F(Run, DeathBySignalUnconfinedIsReported) {
    const e2e::Result r =
        dsh({"run", "--mode", "danger-full-access", "--report", report_path(), "--", "sh", "-c", "kill -TERM $$"});
    EXPECT_EQ(r.status, 143) << r.err;
    EXPECT_EQ(report()["signal"], 15);
}

// bubblewrap's pid-1 init turns the command's death by SIGTERM into its own exit(143): the
// status is the same 128+N, but the report can only say exitCode 143 (docs/json.md).
TEST_F(RunBwrap, DeathBySignalUnderBwrapIsItsExitStatus) {
    const e2e::Result r = dsh({"run", "--backend", "bwrap", "--report", report_path(), "--", "sh", "-c", "kill -TERM $$"});
    EXPECT_EQ(r.status, 143) << r.err;
    EXPECT_EQ(report()["exitCode"], 143) << e2e::read_file(report_path());
    EXPECT_EQ(report()["verdict"]["verdict"], "failure");
}

// --- signals in -------------------------------------------------------------------------

constexpr const char* kTrapScript = "trap 'exit 42' USR1; echo ready; while :; do sleep 0.05; done";

// Runs `run --backend BACKEND -- sh -c SCRIPT`, sends `sig` to dsh-confine once the command
// said "ready", and returns the exit status (-1: it did not end).
int signal_into_run(const std::string& backend, const std::string& script, int sig,
                    const e2e::RunOptions& options, const std::string& stderr_path) {
    Background child({"run", "--backend", backend, "--", "sh", "-c", script}, options.env, stderr_path);
    if (!child.started()) return -2;
    if (!child.wait_for_line("ready", 20000)) return -3;
    kill(child.pid(), sig);
    return child.wait(20000);
}

TEST_F(RunLandlock, SignalIsForwardedToTheCommand) {
    const int status = signal_into_run("landlock", kTrapScript, SIGUSR1, options(), scratch / "stderr");
    EXPECT_EQ(status, 42) << e2e::read_file(scratch / "stderr");
}

// Forwarded to the command inside the sandbox, not to bwrap (which would die of it).
TEST_F(RunBwrap, SignalIsForwardedToTheCommand) {
    const int status = signal_into_run("bwrap", kTrapScript, SIGUSR1, options(), scratch / "stderr");
    EXPECT_EQ(status, 42) << e2e::read_file(scratch / "stderr");
}

// The exec path where the caller made dsh-confine a process group's leader (as Background
// does): the runner stands in front of the command, which then gets a session of its own
// (runner.hpp). A signal sent to it reaches the command, it ends as the command does, and a
// SIGKILL to it ends the command too.
TEST_F(RunLandlock, TheExecPathsFrontPassesSignalsOnAndEndsAsTheCommand) {
    const std::string err = scratch / "stderr";
    const std::string loop = "echo ready; while :; do sleep 0.05; done";
    for (const auto& [sig, script, expected] : {std::tuple{SIGUSR1, std::string(kTrapScript), 42},
                                                std::tuple{SIGTERM, loop, 128 + SIGTERM}}) {
        Background child({"--backend", "landlock", "--mode", "read-only", "--", "/bin/sh", "-c", script}, options().env, err);
        ASSERT_TRUE(child.started());
        ASSERT_TRUE(child.wait_for_line("ready", 20000)) << e2e::read_file(err);
        kill(child.pid(), sig);
        EXPECT_EQ(child.wait(20000), expected) << "signal " << sig << ": " << e2e::read_file(err);
    }
    // A duration no other test sleeps; the pattern matches the command's own line only, not its
    // front's (dsh-confine's, which ends with the same words).
    const std::string duration = "30." + std::to_string(getpid());
    const std::string marker = "^/bin/sleep " + duration + "$";
    Background child({"--backend", "landlock", "--mode", "read-only", "--", "/bin/sleep", duration}, options().env, err);
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(pgrep_becomes(marker, true)) << "the command never ran: " << e2e::read_file(err);
    const std::string command_pid = e2e::first_line(e2e::run_program({"/usr/bin/pgrep", "-f", marker}).out);
    EXPECT_NE(command_pid, std::to_string(child.pid())) << "no process stood in front: the command is the caller's pid";
    kill(child.pid(), SIGKILL);
    EXPECT_EQ(child.wait(20000), 128 + SIGKILL);
    const bool gone = pgrep_becomes(marker, false);
    EXPECT_TRUE(gone) << "the command outlived its front";
    if (!gone) e2e::run_program({"/usr/bin/pkill", "-KILL", "-f", marker});
}

// A caller that blocked SIGTERM (a mask survives execve) and made the call a group's leader: the
// front still passes its SIGTERM on. The caller is a script that runs the call as its child and
// signals it once it said ready; the command (a dash loop, which starts with no signal blocked)
// gives up after 10 s, so a SIGTERM that stayed blocked in the front shows as status 0.
TEST_F(RunLandlock, TheFrontPassesOnASignalTheCallerBlocked) {
    const char* caller = R"(import os, signal, sys
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    os.dup2(w, 1)
    os.execv(sys.argv[1], sys.argv[1:])
os.close(w)
os.read(r, 6)
os.kill(pid, signal.SIGTERM)
print("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
)";
    const e2e::Result r = e2e::run_program({"/usr/bin/python3", "-c", caller, e2e::binary(), "--backend", "landlock", "--mode",
                                            "read-only", "--", "/bin/sh", "-c",
                                            "echo ready; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"},
                                           options());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(e2e::first_line(r.out), "status -" + std::to_string(SIGTERM)) << "not ended by the SIGTERM: " << r.out << r.err;
}

// A session's leader that holds no other process (a harness's start_new_session, setsid(1)):
// every process of that session will be the command's, so the exec path stays in place, and a
// killpg of the session's group still reaches the command's whole tree. The command's parent is
// then setsid(1), which waits; with a process in front it would be dsh-confine.
TEST_F(RunLandlock, TheExecPathStaysInPlaceForALoneSessionLeader) {
    E2E_REQUIRE(e2e::exists("/usr/bin/setsid"), "no setsid (util-linux)");
    const e2e::Result r = e2e::run_program({"/usr/bin/setsid", "--wait", e2e::binary(), "--backend", "landlock", "--mode",
                                            "read-only", "--", "/bin/sh", "-c", "cat /proc/$PPID/comm"},
                                           options());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(e2e::first_line(r.out), "setsid") << "the command's parent: " << r.out;
}

// Where /proc hides the processes a caller cannot trace (hidepid=invisible), a session that looks
// empty may not be: the runner stands in front. Here the session holds only dsh-confine, in a
// mount namespace whose /proc has hidepid=invisible; as root and as nobody. The session's leader
// says its pid, then executes the call: the command's pid is another where a process stands in
// front (in place, the command is that leader).
TEST_F(RunLandlock, TheExecPathStandsInFrontWhereProcHidesProcesses) {
    E2E_REQUIRE(e2e::exists("/usr/bin/setsid") && e2e::exists("/usr/bin/unshare") && e2e::exists("/usr/bin/setpriv"),
                "no setsid, unshare or setpriv (util-linux)");
    E2E_REQUIRE(getuid() == 0, "mounting a /proc with hidepid needs root");
    for (const std::string user : {"root", "nobody"}) {
        for (const std::string hidepid : {"invisible", "off"}) {
            const std::string as = user == "root" ? "" : "setpriv --reuid=65534 --regid=65534 --clear-groups ";
            const std::string leader = "echo \"leader $$\"; exec \"$0\" --backend landlock --mode read-only -- /bin/sh -c "
                                       "'echo \"command $$\"'";
            const std::string script = "mount -t proc -o hidepid=" + hidepid + " proc /proc || exit 99; exec " + as +
                                       "/usr/bin/setsid --wait /bin/sh -c '" + std::regex_replace(leader, std::regex("'"), "'\\''") + "' \"$0\"";
            const e2e::Result r = e2e::run_program(
                {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script, e2e::binary()}, options());
            ASSERT_EQ(r.status, 0) << user << " " << hidepid << ": " << r.err;
            const std::size_t l = r.out.find("leader "), c = r.out.find("command ");
            ASSERT_TRUE(l != std::string::npos && c != std::string::npos) << r.out;
            const std::string leader_pid = e2e::first_line(r.out.substr(l + 7)), command_pid = e2e::first_line(r.out.substr(c + 8));
            if (hidepid == "invisible")
                EXPECT_NE(command_pid, leader_pid) << user << ": the command ran in place, with no process in front: " << r.out;
            else
                EXPECT_EQ(command_pid, leader_pid) << user << ": a lone leader where /proc hides nothing stays in place: " << r.out;
        }
    }
}

// Where /proc is no procfs (a tmpfs laid over it, showing only the leader), the listing proves
// nothing: the runner stands in front.
TEST_F(RunLandlock, TheExecPathStandsInFrontWhereProcIsNoProcfs) {
    E2E_REQUIRE(e2e::exists("/usr/bin/setsid") && e2e::exists("/usr/bin/unshare"), "no setsid or unshare (util-linux)");
    E2E_REQUIRE(getuid() == 0, "a mount namespace of its own needs root here");
    E2E_REQUIRE(e2e::exists("/mnt"), "no /mnt to bind the real procfs on");
    // In a mount namespace of its own, the leader lays a tmpfs over /proc holding `self` and its
    // own entry (from the real procfs, bound on /mnt there first), then executes the call.
    const std::string leader =
        "mount --bind /proc /mnt && mount -t tmpfs tmpfs /proc && ln -s $$ /proc/self && ln -s /mnt/$$ /proc/$$ || exit 99; "
        "echo \"leader $$\"; exec \"$0\" --backend landlock --mode read-only -- /bin/sh -c 'echo \"command $$\"'";
    const e2e::Result r = e2e::run_program({"/usr/bin/unshare", "-m", "--propagation", "private", "/usr/bin/setsid", "--wait",
                                            "/bin/sh", "-c", leader, e2e::binary()},
                                           options());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::size_t l = r.out.find("leader "), c = r.out.find("command ");
    ASSERT_TRUE(l != std::string::npos && c != std::string::npos) << r.out;
    EXPECT_NE(e2e::first_line(r.out.substr(c + 8)), e2e::first_line(r.out.substr(l + 7)))
        << "the command ran in place, with no process in front: " << r.out;
}

// Where /proc is another PID namespace's (a new PID namespace that kept its parent's /proc), its
// numbers are not the runner's: it cannot tell whether it is alone, and stands in front.
TEST_F(RunLandlock, TheExecPathStandsInFrontWhereProcIsAnotherPidNamespaces) {
    E2E_REQUIRE(e2e::exists("/usr/bin/setsid") && e2e::exists("/usr/bin/unshare"), "no setsid or unshare (util-linux)");
    E2E_REQUIRE(getuid() == 0, "a PID namespace of its own needs root here");
    const std::string leader = "echo \"leader $$\"; exec \"$0\" --backend landlock --mode read-only -- /bin/sh -c 'echo \"command $$\"'";
    const e2e::Result r = e2e::run_program(
        {"/usr/bin/unshare", "-p", "-f", "/usr/bin/setsid", "--wait", "/bin/sh", "-c", leader, e2e::binary()}, options());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::size_t l = r.out.find("leader "), c = r.out.find("command ");
    ASSERT_TRUE(l != std::string::npos && c != std::string::npos) << r.out;
    EXPECT_NE(e2e::first_line(r.out.substr(c + 8)), e2e::first_line(r.out.substr(l + 7)))
        << "the command ran in place, with no process in front: " << r.out;
}

// Whatever the runner does with a signal, a command that already ran is never reported as a
// runner failure that "ran nothing".
TEST_F(RunBwrap, RunnerKilledAfterTheCommandStartedIsNotRunnerFailure) {
    const int status = signal_into_run("bwrap", "echo ready; while :; do sleep 0.05; done", SIGTERM, options(),
                                       scratch / "stderr");
    const std::string err = e2e::read_file(scratch / "stderr");
    EXPECT_EQ(status, 143) << err;
    EXPECT_FALSE(contains(err, "RUNNER_FAILURE")) << err;
}

// --- run's own errors -------------------------------------------------------------------

TEST_F(Run, RequireFullRefusesLandlockAndNothingRuns) {
    E2E_REQUIRE(backend_usable("landlock"), "Landlock is not usable on this host");
    const std::string ws = dir("ws");
    const e2e::Result r = dsh({"run", "--mode", "workspace-write", "--workspace-root", ws, "--backend", "landlock",
                               "--require-full", "--", "touch", ws + "/sentinel"});
    EXPECT_TRUE(IsError(r, "ENFORCEMENT_PARTIAL"));
    EXPECT_FALSE(e2e::exists(ws + "/sentinel"));
}

TEST_F(Run, BadReportFdIsUsageErrorAndNothingRuns) {
    const e2e::Result r =
        dsh({"run", "--mode", "danger-full-access", "--report-fd", "97", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Run, ReportAndReportFdTogetherIsUsageError) {
    const e2e::Result r = dsh({"run", "--mode", "danger-full-access", "--report", report_path(), "--report-fd", "2",
                               "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Run, ProgramNotFoundIs127) {
    EXPECT_TRUE(IsError(dsh({"run", "--", "dsh-e2e-no-such-program"}), "COMMAND_NOT_FOUND", 127));
}

TEST_F(Run, NoProgramIsUsageError) { EXPECT_TRUE(IsError(dsh({"run", "--mode", "danger-full-access"}), "USAGE")); }

}  // namespace

namespace {

// --- no orphans, no leftovers -----------------------------------------------------------

// A background process the command leaves behind dies when `run` ends, even while it holds
// the stderr pipe open (else `run` would wait for it). It is gone by the time `run` returns, not
// later: `run` answers only once what the command left was killed and reaped (by the keeper
// under Landlock; under bubblewrap by the end of the sandbox's pid namespace, which `run` waits for).
void expect_no_leftover(const std::string& backend, const e2e::RunOptions& options, const std::string& marker) {
    const auto began = std::chrono::steady_clock::now();
    const e2e::Result r = e2e::run({"run", "--backend", backend, "--mode", "read-only", "--", "/bin/sh", "-c",
                                    "(/bin/sh -c 'sleep 30; : " + marker + "' &); echo started"}, options);
    const auto took = std::chrono::steady_clock::now() - began;
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "started\n");
    EXPECT_LT(took, std::chrono::seconds(10)) << "run waited for the leftover";
    const e2e::Result found = e2e::run_program({"/usr/bin/pgrep", "-f", marker});
    EXPECT_NE(found.status, 0) << "left running: " << found.out;
}

TEST_F(RunLandlock, LeftoverProcessesDieWhenRunEnds) {
    expect_no_leftover("landlock", options(), "dsh-leftover-landlock-" + std::to_string(getpid()));
}

TEST_F(RunBwrap, LeftoverProcessesDieWhenRunEnds) {
    expect_no_leftover("bwrap", options(), "dsh-leftover-bwrap-" + std::to_string(getpid()));
}

// dsh-confine killed with SIGKILL (no chance to clean up): the whole confined tree still ends, a
// process that left the process group included (under Landlock the keeper between dsh-confine
// and the runner ends it; under bubblewrap the runner dies with dsh-confine, and the sandbox's
// pid namespace with it).
void expect_tree_dies_with_run(const std::string& backend, const e2e::RunOptions& options, const std::string& stderr_path,
                               const std::string& marker) {
    Background child({"run", "--backend", backend, "--mode", "read-only", "--", "/bin/sh", "-c",
                      "setsid /bin/sh -c 'sleep 30; : " + marker + "' & sleep 0.2; echo ready; wait"},
                     options.env, stderr_path);
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(child.wait_for_line("ready", 20000)) << e2e::read_file(stderr_path);
    ASSERT_EQ(e2e::run_program({"/usr/bin/pgrep", "-f", "sleep 30; : " + marker}).status, 0)
        << "the detached process never ran";
    kill(child.pid(), SIGKILL);
    EXPECT_EQ(child.wait(20000), 128 + SIGKILL);
    const bool gone = pgrep_becomes(marker, false);
    EXPECT_TRUE(gone) << "left running after dsh-confine was killed: "
                      << e2e::run_program({"/usr/bin/pgrep", "-a", "-f", marker}).out;
    if (!gone) e2e::run_program({"/usr/bin/pkill", "-KILL", "-f", marker});
}

// A caller that blocked SIGCHLD (a mask survives exec): run waits for the command by SIGCHLD,
// so it must open it for itself, and hand the command the caller's mask unchanged.
void expect_run_with_sigchld_blocked(const std::string& backend, e2e::RunOptions options) {
    options.prefix = {"/usr/bin/python3", "-c",
                      "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD}); "
                      "os.execv(sys.argv[1], sys.argv[1:])"};
    options.timeoutMs = 30000;
    // grep itself, not through a shell: dash clears the mask it starts with.
    const e2e::Result r =
        e2e::run({"run", "--backend", backend, "--mode", "read-only", "--", "/bin/grep", "SigBlk", "/proc/self/status"}, options);
    EXPECT_EQ(r.status, 0) << "stderr: " << r.err;
    if (backend == "landlock") {
        // SIGCHLD is signal 17: bit 16 of the mask, 0x10000.
        const std::size_t colon = r.out.find(':');
        ASSERT_NE(colon, std::string::npos) << r.out;
        const unsigned long long mask = std::stoull(r.out.substr(colon + 1), nullptr, 16);
        EXPECT_NE(mask & 0x10000ULL, 0ULL) << "the command did not get the caller's mask: " << r.out;
    }
}

// The caller's dispositions reach the command as it left them: what it ignored (nohup's SIGHUP,
// a SIGCHLD, a SIGPIPE) stays ignored, the rest is the default, though `run` ignores SIGPIPE and
// waits for its children while the command runs; and a caller that ignored SIGCHLD (whose
// children would be reaped unseen) still gets the command's result.
// (Under bubblewrap, which hangs when its children are reaped unseen, SIGCHLD is the default.)
unsigned long long ignored_by_command(const std::vector<std::string>& verb, const std::string& backend,
                                      e2e::RunOptions options, const std::string& setup) {
    options.prefix = {"/usr/bin/python3", "-c", "import os, signal, sys; " + setup + "; os.execv(sys.argv[1], sys.argv[1:])"};
    options.timeoutMs = 30000;
    std::vector<std::string> args = verb;
    for (const char* arg : {"--backend", backend.c_str(), "--mode", "read-only", "--", "/bin/grep", "SigIgn", "/proc/self/status"})
        args.emplace_back(arg);
    const e2e::Result r = e2e::run(args, options);
    EXPECT_EQ(r.status, 0) << "stderr: " << r.err;
    const std::size_t colon = r.out.find(':');
    if (colon == std::string::npos) {
        ADD_FAILURE() << "no SigIgn line: " << r.out;
        return 0;
    }
    return std::stoull(r.out.substr(colon + 1), nullptr, 16);
}

void expect_caller_dispositions(const std::vector<std::string>& verb, const std::string& backend,
                                const e2e::RunOptions& options) {
    constexpr auto bit = [](int sig) { return 1ULL << (sig - 1); };
    const unsigned long long first = ignored_by_command(
        verb, backend, options,
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL); signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)");
    EXPECT_EQ(first & bit(SIGPIPE), 0ULL) << std::hex << first;
    EXPECT_EQ(first & (bit(SIGINT) | bit(SIGTERM) | bit(SIGUSR1)), 0ULL) << std::hex << first;
    EXPECT_NE(first & bit(SIGHUP), 0ULL) << std::hex << first;
    EXPECT_EQ((first & bit(SIGCHLD)) != 0, backend == "landlock") << std::hex << first;
    const unsigned long long second =
        ignored_by_command(verb, backend, options, "signal.signal(signal.SIGPIPE, signal.SIG_IGN)");
    EXPECT_NE(second & bit(SIGPIPE), 0ULL) << std::hex << second;
    EXPECT_EQ(second & (bit(SIGHUP) | bit(SIGCHLD)), 0ULL) << std::hex << second;
}

TEST_F(RunLandlock, TheCommandGetsTheCallersSignalDispositions) { expect_caller_dispositions({"run"}, "landlock", options()); }

TEST_F(RunBwrap, TheCommandGetsTheCallersSignalDispositions) { expect_caller_dispositions({"run"}, "bwrap", options()); }

TEST_F(RunLandlock, TheExecPathGivesTheCommandTheCallersSignalDispositions) {
    expect_caller_dispositions({}, "landlock", options());
}

TEST_F(RunBwrap, TheExecPathGivesTheCommandTheCallersSignalDispositions) { expect_caller_dispositions({}, "bwrap", options()); }

TEST_F(RunLandlock, ACallerThatBlockedSigchldStillGetsTheResult) { expect_run_with_sigchld_blocked("landlock", options()); }

TEST_F(RunBwrap, ACallerThatBlockedSigchldStillGetsTheResult) { expect_run_with_sigchld_blocked("bwrap", options()); }

TEST_F(RunLandlock, TheConfinedTreeDiesWhenRunIsKilled) {
    expect_tree_dies_with_run("landlock", options(), scratch / "stderr", "dsh-orphan-landlock-" + std::to_string(getpid()));
}

TEST_F(RunBwrap, TheConfinedTreeDiesWhenRunIsKilled) {
    expect_tree_dies_with_run("bwrap", options(), scratch / "stderr", "dsh-orphan-bwrap-" + std::to_string(getpid()));
}

TEST_F(RunLandlock, PerCallTempAreaIsRemovedWhenRunEnds) {
    const std::string ws = scratch.path();
    const e2e::Result r = dsh({"run", "--backend", "landlock", "--mode", "workspace-write", "--workspace-root", ws, "--",
                               "/bin/sh", "-c", "echo \"$TMPDIR\"; echo x > \"$TMPDIR/f\""});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string dir = e2e::first_line(r.out);
    ASSERT_EQ(dir.rfind("/tmp/dsh-confine-" + std::to_string(getuid()) + "/call-", 0), 0u) << dir;
    EXPECT_FALSE(e2e::exists(dir)) << dir << " outlived run";
}

TEST_F(RunLandlock, SessionTempAreaIsSharedAcrossCallsAndRemovedBySessionEnd) {
    const std::string ws = scratch.path();
    ASSERT_EQ(dsh({"session", "start", "tmpshare", "--cwd", ws}).status, 0);
    const e2e::Result first = dsh({"run", "--backend", "landlock", "--session", "tmpshare", "--mode", "workspace-write",
                                   "--", "/bin/sh", "-c", "echo kept > \"$TMPDIR/note\"; echo \"$TMPDIR\""});
    ASSERT_EQ(first.status, 0) << first.err;
    const std::string dir = e2e::first_line(first.out);
    const e2e::Result second = dsh({"run", "--backend", "landlock", "--session", "tmpshare", "--mode", "workspace-write",
                                    "--", "/bin/sh", "-c", "cat \"$TMPDIR/note\""});
    EXPECT_EQ(second.out, "kept\n") << second.err;
    struct stat st {};
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(dsh({"session", "end", "tmpshare"}).status, 0);
    EXPECT_FALSE(e2e::exists(dir));
}

// The session's temp area is $TMPDIR at its own path, kept from call to call; the host's /tmp
// stays what it is, readable and not writable.
TEST_F(RunBwrap, SessionTempAreaIsTmpdirAndKept) {
    const std::string ws = scratch.path();
    ASSERT_EQ(dsh({"session", "start", "tmpbw", "--cwd", ws}).status, 0);
    const e2e::Result first = dsh({"run", "--backend", "bwrap", "--session", "tmpbw", "--mode", "workspace-write", "--",
                                   "/bin/sh", "-c", "echo kept > \"$TMPDIR/note\" && echo \"$TMPDIR\""});
    ASSERT_EQ(first.status, 0) << first.err;
    EXPECT_EQ(e2e::first_line(first.out), home / "state/dsh-confine/sessions/tmpbw/tmp");
    const e2e::Result second = dsh({"run", "--backend", "bwrap", "--session", "tmpbw", "--mode", "workspace-write", "--",
                                    "/bin/sh", "-c", "cat \"$TMPDIR/note\""});
    EXPECT_EQ(second.out, "kept\n") << second.err;
    EXPECT_TRUE(e2e::exists(home / "state/dsh-confine/sessions/tmpbw/tmp/note"));
    ASSERT_EQ(dsh({"session", "end", "tmpbw"}).status, 0);
    EXPECT_FALSE(e2e::exists(home / "state/dsh-confine/sessions/tmpbw"));
}

// --- the caller's terminal: job control kept, keystroke injection refused -------------------

// An interactive shell sets up job control only when it has a controlling terminal it can
// give its jobs; without one it says "no job control in this shell".
const std::vector<std::string> kJobControl = {"bash", "--norc", "-i", "-c", "sleep 0.1 & wait; echo jobs-ok"};

e2e::RunOptions in_terminal(e2e::RunOptions o) {
    o.pty = true;
    o.timeoutMs = 30000;
    return o;
}

void expect_job_control(const e2e::Result& r) {
    EXPECT_FALSE(r.timedOut);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "jobs-ok\n") << r.err;
    EXPECT_FALSE(contains(r.err, "no job control")) << r.err;
    EXPECT_FALSE(contains(r.err, "Inappropriate ioctl")) << r.err;
}

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
}

TEST_F(RunBwrap, InATerminalTheCommandKeepsJobControl) {
    expect_job_control(dsh(with({"run", "--backend", "bwrap", "--"}, kJobControl), in_terminal(options())));
}

TEST_F(RunLandlock, InATerminalTheCommandKeepsJobControl) {
    expect_job_control(dsh(with({"run", "--backend", "landlock", "--"}, kJobControl), in_terminal(options())));
}

TEST_F(RunBwrap, InATerminalTheExecPathKeepsJobControl) {
    expect_job_control(dsh(with({"--backend", "bwrap", "--"}, kJobControl), in_terminal(options())));
}

// The terminal the command keeps still refuses TIOCSTI: nothing is left in its input queue,
// which is where a pushed keystroke would wait for the caller's shell to run it.
void expect_injection_refused(const e2e::Result& r) {
    EXPECT_FALSE(r.timedOut);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "ioctl TIOCSTI: Operation not permitted")) << r.err;
    EXPECT_EQ(r.ptyPending, 0) << "keystrokes reached the caller's terminal";
}

TEST_F(RunBwrap, InATerminalKeystrokesCannotBeInjected) {
    expect_injection_refused(dsh({"run", "--backend", "bwrap", "--", e2e::binary(), "__effect", "tiocsti"}, in_terminal(options())));
}

TEST_F(RunLandlock, InATerminalKeystrokesCannotBeInjected) {
    expect_injection_refused(
        dsh({"run", "--backend", "landlock", "--", e2e::binary(), "__effect", "tiocsti"}, in_terminal(options())));
}

// The stage inside bubblewrap installs the terminal guard itself, so a printed plan keeps the
// terminal exactly as the exec path does: job control works, injection is refused.
TEST_F(RunBwrap, APrintedPlanInATerminalKeepsItAndRefusesInjection) {
    const std::string root = scratch.path();
    const e2e::Result plan = dsh({"--print", "--format", "shell", "--backend", "bwrap", "--workspace-root", root, "--",
                                  e2e::binary(), "__effect", "tiocsti"});
    ASSERT_EQ(plan.status, 0) << plan.err;
    EXPECT_FALSE(contains(plan.out, "--new-session")) << plan.out;
    e2e::RunOptions o = in_terminal(options());
    const e2e::Result r = e2e::run_program({"/bin/sh", "-c", plan.out}, o);
    expect_injection_refused(r);
    const e2e::Result jobs = dsh(with({"--print", "--format", "shell", "--backend", "bwrap", "--workspace-root", root, "--"},
                                      kJobControl));
    ASSERT_EQ(jobs.status, 0) << jobs.err;
    expect_job_control(e2e::run_program({"/bin/sh", "-c", jobs.out}, o));
}

}  // namespace

