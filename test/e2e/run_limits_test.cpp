// run's timeout and resource limits, end to end under each Linux backend, as root and as an
// unprivileged user (nobody), each proved from the host's side: the daemonized grandchild's pid
// gone on the host after run returns (its pid comes from the host's end of a Unix socket, not
// from the command), files' sizes on the host, no process of a fork bomb left behind, and the
// limit that ended a command read by run from the call's cgroup on the host (an OOM kill, a
// refused fork), never from the command's status. As root this host's cgroups are made for
// real (v1 memory and pids, the v2 hierarchy for CPU time); nobody may make none here (v1 is not
// delegated), so it gets the rlimits and the named gaps, and those are what its tests check.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

using Param = e2e::BackendCaller;  // backend, caller

// A listening Unix socket on the host. A process that connects to it is named by its pid as the
// host sees it (SO_PEERCRED, taken at connect and kept while the connection waits to be
// accepted, after the process is gone too).
class HostSocket {
public:
    explicit HostSocket(const std::string& path) : path_(path) {
        fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
        if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(fd_, 8) != 0) {
            close(fd_);
            fd_ = -1;
        }
        chmod(path.c_str(), 0777);  // nobody connects too
    }
    ~HostSocket() {
        if (fd_ >= 0) close(fd_);
    }
    HostSocket(const HostSocket&) = delete;
    HostSocket& operator=(const HostSocket&) = delete;
    bool ok() const { return fd_ >= 0; }

    // The host pid of the process whose connection waits, or 0 when none came.
    pid_t peer() const {
        const int connection = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) return 0;
        ucred credentials{};
        socklen_t size = sizeof credentials;
        const bool got = getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0;
        close(connection);
        return got ? credentials.pid : 0;
    }

private:
    std::string path_;
    int fd_ = -1;
};

// Whether the process the helper left behind still runs: its pid is taken, and by a tree_helper
// (a pid reused since by something else does not count).
bool helper_runs(pid_t pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return false;
    const std::string cmdline = e2e::read_file("/proc/" + std::to_string(pid) + "/cmdline");
    return contains(cmdline, "tree_helper");
}

class RunLimits : public ::testing::TestWithParam<Param> {
protected:
    std::string backend = std::get<0>(GetParam());
    bool asRoot = std::get<1>(GetParam()) == "root";
    std::optional<unsigned> uid = asRoot ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    e2e::TempDir home{"/tmp", uid};
    e2e::TempDir scratch{"/tmp", uid};
    std::string ws = scratch / "ws";

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "the limit tests run as root, and as nobody through setpriv");
        E2E_REQUIRE(e2e::backend_usable(backend), backend + " is not usable on this host");
        fs::create_directory(ws);
        if (uid) {
            ASSERT_EQ(chown(ws.c_str(), *uid, *uid), 0);
        }
    }

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.uid = uid;
        o.cwd = ws;
        o.timeoutMs = 60000;
        return o;
    }
    // `run` with this test's backend, its report on stdout (descriptor 3 is stdout).
    e2e::Result run(const std::vector<std::string>& args) const {
        std::vector<std::string> all = {"run", "--backend", backend, "--report", report_path()};
        all.insert(all.end(), args.begin(), args.end());
        return e2e::run(all, options());
    }
    std::string report_path() const { return scratch / "report.json"; }
    json report() const { return json::parse(e2e::read_file(report_path()), nullptr, false); }

    // The report's entry for limit `name`.
    json limit(const json& rep, const std::string& name) const {
        for (const auto& entry : rep["limits"])
            if (entry["name"] == name) return entry;
        return json();
    }
};

// --- the timeout -------------------------------------------------------------------------

class Timeout : public RunLimits {
protected:
    // The helper under `run --timeout 3s`: the daemonized grandchild it leaves must be gone on
    // the host once run returns, which it does with 124 and a report that says so. The deadline
    // counts from before the sandbox starts, and the helper must have daemonized and connected
    // within it: 3 s leave room for an instrumented build on a loaded 2-core host.
    void expect_tree_ended(const std::vector<std::string>& extra, bool ignore_term) {
        const std::string path = scratch / "grandchild.sock";
        HostSocket socket(path);
        ASSERT_TRUE(socket.ok()) << path;
        std::vector<std::string> args = {"--timeout", "3s"};
        args.insert(args.end(), extra.begin(), extra.end());
        args.insert(args.end(), {"--", TREE_HELPER_BINARY, path});
        if (ignore_term) args.emplace_back("ignore-term");
        const e2e::Result r = run(args);
        const pid_t grandchild = socket.peer();
        ASSERT_GT(grandchild, 0) << "the grandchild never connected; stderr: " << r.err;
        EXPECT_FALSE(helper_runs(grandchild)) << "the setsid grandchild " << grandchild << " outlived run";
        if (helper_runs(grandchild)) kill(grandchild, SIGKILL);
        EXPECT_EQ(r.status, 124) << r.err;
        EXPECT_EQ(r.out, "ready\n");
        const json rep = report();
        ASSERT_TRUE(rep.is_object()) << e2e::read_file(report_path());
        EXPECT_EQ(rep["outcome"], "timeout");
        EXPECT_EQ(rep["limit"], nullptr);
        EXPECT_EQ(rep["verdict"]["verdict"], "timeout");
        EXPECT_EQ(rep["verdict"]["exitCode"], 124);
        EXPECT_EQ(rep["timeoutMs"], 3000);
        EXPECT_EQ(rep["started"], true);
        EXPECT_GE(rep["durationMs"].get<long long>(), 3000);
    }
};

TEST_P(Timeout, EndsADaemonizedGrandchildAtTheDeadline) { expect_tree_ended({}, false); }

TEST_P(Timeout, EndsATreeThatIgnoresSigtermWithSigkillAfterKillAfter) {
    expect_tree_ended({"--kill-after", "300ms"}, true);
    EXPECT_EQ(report()["killAfterMs"], 300);
    EXPECT_GE(report()["durationMs"].get<long long>(), 3300);
}

TEST_P(Timeout, ACommandDoneBeforeTheDeadlineKeepsItsOwnStatus) {
    const e2e::Result r = run({"--timeout", "1h", "--", "sh", "-c", "exit 3"});
    EXPECT_EQ(r.status, 3) << r.err;
    EXPECT_EQ(report()["outcome"], "exited");
    EXPECT_EQ(report()["verdict"]["verdict"], "failure");
    EXPECT_EQ(report()["timeoutMs"], 3600000);
}

INSTANTIATE_TEST_SUITE_P(Linux, Timeout, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- memory --------------------------------------------------------------------------------

class Memory : public RunLimits {};

// The hog holds 128 MiB in one process (tail keeps its one endless line). With a cgroup the
// kernel's OOM killer ends it inside the call's group, and run reads the kill from the group's
// own counter. Without one (nobody here), RLIMIT_AS refuses its allocation: the report says the
// limit was per process, and nothing claims it ended the command.
TEST_P(Memory, AHogIsStoppedAtTheLimit) {
    const std::string marker = ws + "/hog-finished";
    const e2e::Result r =
        run({"--mode", "workspace-write", "--limit", "memory=32M", "--", "sh", "-c",
             "head -c 128M /dev/zero | tail > /dev/null && touch '" + marker + "'"});
    EXPECT_FALSE(e2e::exists(marker)) << "the hog got its memory";
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << e2e::read_file(report_path()) << r.err;
    const json entry = limit(rep, "memory");
    EXPECT_EQ(entry["value"], 32 << 20);
    if (asRoot) {
        EXPECT_EQ(entry["mechanism"], "cgroup-v1") << entry;
        EXPECT_EQ(entry["scope"], "tree");
        EXPECT_EQ(rep["outcome"], "limit") << rep;
        EXPECT_EQ(rep["limit"], "memory");
        EXPECT_EQ(rep["verdict"]["verdict"], "limit");
        EXPECT_EQ(r.status, 128 + SIGKILL) << "the OOM kill's status is the command's: " << r.err;
    } else {
#if defined(DSH_SANITIZED)
        // An instrumented stage reserves terabytes of address space as it starts: under bubblewrap
        // it cannot start under RLIMIT_AS, and the run fails closed (nothing ran).
        if (backend == "bwrap") {
            EXPECT_EQ(r.status, 125) << r.err;
            return;
        }
#endif
        EXPECT_EQ(entry["mechanism"], "rlimit") << entry;
        EXPECT_EQ(entry["scope"], "process");
        EXPECT_TRUE(contains(entry["note"], "RLIMIT_AS")) << entry;
        EXPECT_NE(rep["outcome"], "limit") << "an allocation refused by an rlimit leaves no counter: " << rep;
        EXPECT_EQ(rep["enforcement"], backend == "bwrap" ? "full" : "partial") << "memory is enforced, per process";
        EXPECT_NE(r.status, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, Memory, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- pids ----------------------------------------------------------------------------------

class Pids : public RunLimits {};

// A fork bomb, bounded (300 sleepers at most) so that a failure cannot take the host down. With
// the cgroup it stops at 64 processes: run reads the refused fork from the group, and nothing of
// the bomb is left once run returns (the host stays responsive: the next lines run). Without
// one, pids is a named gap, and --require-full refuses the call before anything runs.
TEST_P(Pids, AForkBombIsStoppedOrTheGapIsNamed) {
    const std::string sleeper = "29." + std::to_string(getpid());  // sleep's argument, to find them
    if (asRoot) {
        const e2e::Result r = run({"--limit", "pids=64", "--", "sh", "-c",
                                   "i=0; while [ $i -lt 300 ]; do sleep " + sleeper + " & i=$((i+1)); done; wait"});
        EXPECT_NE(r.status, 0) << r.err;
        const json rep = report();
        ASSERT_TRUE(rep.is_object()) << e2e::read_file(report_path());
        EXPECT_EQ(limit(rep, "pids")["mechanism"], "cgroup-v1");
        EXPECT_EQ(rep["outcome"], "limit") << rep;
        EXPECT_EQ(rep["limit"], "pids");
        EXPECT_EQ(rep["verdict"]["verdict"], "limit");
        const e2e::Result left = e2e::run_program({"/usr/bin/pgrep", "-f", "sleep " + sleeper});
        EXPECT_NE(left.status, 0) << "left running: " << left.out;
        if (left.status == 0) e2e::run_program({"/usr/bin/pkill", "-KILL", "-f", "sleep " + sleeper});
        return;
    }
    const std::string sentinel = ws + "/ran";
    e2e::Result r = run({"--mode", "workspace-write", "--limit", "pids=64", "--", "touch", sentinel});
    EXPECT_EQ(r.status, 0) << r.err;
    json rep = report();
    EXPECT_EQ(limit(rep, "pids")["mechanism"], "none");
    EXPECT_EQ(rep["enforcement"], "partial");
    bool named = false;
    for (const auto& gap : rep["enforcementGaps"]) named = named || contains(gap, "limit pids=64: not enforced");
    EXPECT_TRUE(named) << rep["enforcementGaps"];
    fs::remove(sentinel);

    r = run({"--mode", "workspace-write", "--require-full", "--limit", "pids=64", "--", "touch", sentinel});
    EXPECT_TRUE(e2e::IsError(r, "ENFORCEMENT_PARTIAL"));
    EXPECT_FALSE(e2e::exists(sentinel)) << "the command ran";
    rep = report();
    EXPECT_EQ(rep["error"]["code"], "ENFORCEMENT_PARTIAL");
    EXPECT_EQ(rep["outcome"], "not-started");
}

// The command first tries to lift the limit: a cgroupfs of its own mounted (in user, mount and
// cgroup namespaces it makes, its cgroup the root), pids.max written `max`, as root's command
// owns the files. The guard refuses the cgroup namespace under both backends, and the bomb still
// stops at the limit, read by run from the call's cgroup on the host.
class OwnLimit : public RunLimits {};

TEST_P(OwnLimit, TheCommandCannotLiftItsPidsLimit) {
    const std::string sleeper = "28." + std::to_string(getpid());
    const e2e::Result r = run({"--limit", "pids=64", "--", "sh", "-c",
                               std::string(e2e::binary()) + " __effect write-own-cgroup pids pids.max max; "
                               "i=0; while [ $i -lt 300 ]; do sleep " + sleeper + " & i=$((i+1)); done; wait"});
    EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
    EXPECT_TRUE(contains(r.err, "unshare(CLONE_NEWCGROUP)")) << r.err;
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << e2e::read_file(report_path());
    EXPECT_EQ(rep["limit"], "pids") << rep;
    const e2e::Result left = e2e::run_program({"/usr/bin/pgrep", "-f", "sleep " + sleeper});
    if (left.status == 0) e2e::run_program({"/usr/bin/pkill", "-KILL", "-f", "sleep " + sleeper});
}

// Only root's calls get a cgroup of their own here (and only root's command owns its files).
INSTANTIATE_TEST_SUITE_P(Linux, OwnLimit, ::testing::Values(Param{"bwrap", "root", ""}, Param{"landlock", "root", ""}),
                         e2e::backend_caller_name);

INSTANTIATE_TEST_SUITE_P(Linux, Pids, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- CPU time ------------------------------------------------------------------------------

class Cpu : public RunLimits {};

// A busy loop with one second of CPU time. With a cgroup (this host's v2 hierarchy, as root) run
// watches the group's count and ends the tree; without one, RLIMIT_CPU ends the process
// (SIGXCPU). Either way the loop is gone once run returns.
TEST_P(Cpu, ABusyLoopIsEndedAtItsCpuTime) {
    const std::string marker = "cpu-burner-" + std::to_string(getpid());
    const e2e::Result r = run({"--limit", "cpu=1", "--", "sh", "-c", "while :; do :; done; : " + marker});
    EXPECT_NE(r.status, 0) << r.err;
    const e2e::Result left = e2e::run_program({"/usr/bin/pgrep", "-f", marker});
    EXPECT_NE(left.status, 0) << "left running: " << left.out;
    if (left.status == 0) e2e::run_program({"/usr/bin/pkill", "-KILL", "-f", marker});
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << e2e::read_file(report_path());
    const json entry = limit(rep, "cpu");
    if (asRoot) {
        EXPECT_EQ(entry["mechanism"], "cgroup-v2") << entry;
        EXPECT_EQ(entry["scope"], "tree");
        EXPECT_EQ(rep["outcome"], "limit") << rep;
        EXPECT_EQ(rep["limit"], "cpu");
        EXPECT_EQ(rep["killAfterMs"], 5000);
    } else {
        EXPECT_EQ(entry["mechanism"], "rlimit") << entry;
        EXPECT_EQ(entry["scope"], "process");
        // The kernel's SIGXCPU ended it: the command's own status, not a limit run saw.
        EXPECT_EQ(rep["outcome"], backend == "bwrap" ? "exited" : "signaled") << rep;
        EXPECT_EQ(r.status, 128 + SIGXCPU);
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, Cpu, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- file size -----------------------------------------------------------------------------

class Fsize : public RunLimits {};

TEST_P(Fsize, NoFileGrowsPastTheLimit) {
    const std::string big = ws + "/big";
    const e2e::Result r = run({"--mode", "workspace-write", "--limit", "fsize=1M", "--", "sh", "-c",
                               "head -c 3M /dev/zero > '" + big + "'; echo wrote"});
    EXPECT_EQ(r.status, 0) << r.err;
    struct stat st {};
    ASSERT_EQ(stat(big.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 1 << 20) << "the file grew past 1M on the host";
    const json entry = limit(report(), "fsize");
    EXPECT_EQ(entry["mechanism"], "rlimit");
    EXPECT_EQ(entry["scope"], "file");
}

INSTANTIATE_TEST_SUITE_P(Linux, Fsize, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- the config, precedence and bad input ----------------------------------------------------

class RunBoundsCli : public ::testing::Test {
protected:
    e2e::TempDir home;
    e2e::TempDir scratch;

    void SetUp() override { E2E_REQUIRE(e2e::backend_usable("bwrap"), "bwrap is not usable on this host"); }
    e2e::Result dsh(const std::vector<std::string>& args) const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.cwd = scratch.path();
        return e2e::run(args, o);
    }
    std::string config(const std::string& text) const {
        e2e::write_file(scratch / "config.toml", text);
        return scratch / "config.toml";
    }
};

TEST_F(RunBoundsCli, TheConfigsTimeoutEndsTheTreeAndTheFlagWins) {
    e2e::Result r = dsh({"run", "--config", config("[run]\ntimeout = \"1s\"\n"), "--", "sleep", "60"});
    EXPECT_EQ(r.status, 124) << r.err;
    r = dsh({"run", "--config", config("[run]\ntimeout = \"1h\"\n"), "--timeout", "1", "--", "sleep", "60"});
    EXPECT_EQ(r.status, 124) << r.err;
    r = dsh({"run", "--config", config("[run]\ntimeout = 1\n"), "--timeout", "1h", "--", "sh", "-c", "sleep 2; exit 7"});
    EXPECT_EQ(r.status, 7) << r.err;
}

TEST_F(RunBoundsCli, TheConfigsLimitsApplyAndAFlagReplacesOneOfThem) {
    const std::string report = scratch / "report.json";
    const e2e::Result r = dsh({"run", "--config", config("[run.limits]\nmemory = \"1G\"\nfsize = 4096\n"), "--limit",
                               "memory=512M", "--report", report, "--", "true"});
    EXPECT_EQ(r.status, 0) << r.err;
    const json rep = json::parse(e2e::read_file(report));
    ASSERT_EQ(rep["limits"].size(), 2U) << rep;
    EXPECT_EQ(rep["limits"][0]["name"], "memory");
    EXPECT_EQ(rep["limits"][0]["value"], 512 << 20);
    EXPECT_EQ(rep["limits"][1]["name"], "fsize");
    EXPECT_EQ(rep["limits"][1]["value"], 4096);
}

// Each bad value: 125, one line naming the value and what is accepted, and nothing runs.
TEST_F(RunBoundsCli, BadInputIsOneLineAnd125AndNothingRuns) {
    const std::string sentinel = scratch / "ran";
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--timeout", "1.5s"}, "--timeout '1.5s' is not a duration; durations: a whole number with a unit, ms, s, m or h"},
        {{"--timeout", "-5"}, "'-5' is not a duration"},
        {{"--timeout", "0"}, "--timeout '0' is zero"},
        {{"--kill-after", "2s"}, "--kill-after applies with a timeout"},
        {{"--timeout", "1", "--kill-after", "soon"}, "--kill-after 'soon' is not a duration"},
        {{"--limit", "memory"}, "--limit 'memory' needs a value: --limit memory=SIZE"},
        {{"--limit", "memory=2X"}, "'2X' is not a size; sizes: a whole number of bytes, or with K, M, G or T"},
        {{"--limit", "memory=-1G"}, "'-1G' is not a size"},
        {{"--limit", "pids=0"}, "'0' is zero"},
        {{"--limit", "nofile=10"}, "unknown limit 'nofile'; limits: memory=SIZE, pids=N, cpu=DURATION, fsize=SIZE"},
        {{"--limit", "cpu=1", "--limit", "cpu=2"}, "--limit cpu is given twice"},
    };
    for (const auto& [options, message] : cases) {
        std::vector<std::string> args = {"run", "--mode", "danger-full-access"};
        args.insert(args.end(), options.begin(), options.end());
        args.insert(args.end(), {"--", "touch", sentinel});
        const e2e::Result r = dsh(args);
        EXPECT_TRUE(e2e::IsError(r, "USAGE")) << options[0];
        EXPECT_TRUE(contains(r.err, message)) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(e2e::exists(sentinel)) << "ran with " << options[0];
    }
    const e2e::Result r = dsh({"run", "--config", config("[run.limits]\npids = 10\nnofile = 3\n"), "--", "touch", sentinel});
    EXPECT_TRUE(e2e::IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, "config.toml:3:1: unknown key 'nofile' in [run.limits]")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel));
}

}  // namespace
