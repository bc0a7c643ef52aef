// `run` and real workloads (issue #21), under each Linux backend, as root and as nobody: output
// merged into one open file keeps its order, a reader of stderr that goes away, SIGTERM to
// `run`, a report for every outcome, a call nested in a Landlock-confined one, /dev/shm and new
// terminals. Each verdict is what the user sees: the exit status, the error line, stdout, the
// report, and files as the host sees them.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::exists;
using e2e::IsError;
using e2e::read_file;
using nlohmann::json;

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

json parse(const std::string& text) { return json::parse(text, nullptr, false); }

// Whether the plan names a gap NAME (each gap reads "NAME: what is not governed").
bool names_gap(const json& plan, const std::string& name) {
    if (!plan.is_object() || !plan["enforcementGaps"].is_array()) return false;
    for (const auto& gap : plan["enforcementGaps"])
        if (gap.is_string() && gap.get<std::string>().rfind(name + ":", 0) == 0) return true;
    return false;
}

// A command that interleaves 200 lines on stdout and stderr, and what one file holding both gets.
const std::string kInterleave = "i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done";

std::string interleaved() {
    std::string out;
    for (int i = 0; i < 200; ++i) out += "out" + std::to_string(i) + "\nerr" + std::to_string(i) + "\n";
    return out;
}

std::vector<std::string> operator+(std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
}

// The caller ("root", or "nobody" through setpriv), with its own home and scratch directory.
class Caller {
protected:
    explicit Caller(const std::string& caller)
        : uid(caller == "root" ? std::nullopt : std::optional<unsigned>(e2e::kNobody)) {}

    std::optional<unsigned> uid;
    e2e::TempDir home{"/tmp", uid};     // HOME, XDG dirs: state, cache, config
    e2e::TempDir scratch{"/tmp", uid};  // workspaces, reports, logs

    void make_dir(const std::string& path) const {
        fs::create_directories(path);
        if (uid) {
            EXPECT_EQ(chown(path.c_str(), *uid, *uid), 0) << path;
        }
    }

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.uid = uid;
        o.cwd = scratch.path();
        o.timeoutMs = 30000;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }
    e2e::Result dsh(const std::vector<std::string>& args, const e2e::RunOptions& o) const { return e2e::run(args, o); }

    // `SHELL -c SCRIPT sh LEADING... BINARY ARGS...` as the caller: the script gets LEADING first.
    e2e::Result through(const std::string& shell, const std::string& script, const std::vector<std::string>& leading,
                        const std::vector<std::string>& args) const {
        return e2e::run_program(std::vector<std::string>{shell, "-c", script, "sh"} + leading +
                                    std::vector<std::string>{e2e::binary()} + args,
                                options());
    }

    bool confines(const std::string& backend) const { return dsh({"--print", "--backend", backend, "--", "true"}).status == 0; }
};

using Param = e2e::BackendCaller;  // backend, caller

class Workload : public Caller, public ::testing::TestWithParam<Param> {
protected:
    Workload() : Caller(std::get<1>(GetParam())) {}

    std::string backend = std::get<0>(GetParam());
    std::string ws = scratch / "ws";
    std::string report_path = scratch / "report.json";

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "these tests run as root, and as nobody through setpriv");
        make_dir(ws);
        E2E_REQUIRE(confines(backend), backend + " cannot confine here as " + std::get<1>(GetParam()));
    }

    std::vector<std::string> run_args(const std::string& mode, const std::vector<std::string>& argv) const {
        return std::vector<std::string>{"run", "--backend", backend, "--mode", mode, "--workspace-root", ws, "--report",
                                        report_path, "--"} +
               argv;
    }
    std::vector<std::string> exec_args(const std::string& mode, const std::vector<std::string>& argv) const {
        return std::vector<std::string>{"--backend", backend, "--mode", mode, "--workspace-root", ws, "--"} + argv;
    }
    json report() const { return parse(read_file(report_path)); }
    json plan(const std::string& mode) const {
        const e2e::Result r = dsh({"--print", "--backend", backend, "--mode", mode, "--workspace-root", ws, "--", "true"});
        EXPECT_EQ(r.status, 0) << r.err;
        return parse(r.out);
    }
};

INSTANTIATE_TEST_SUITE_P(Linux, Workload, ::testing::ValuesIn(e2e::backends_and_callers()), e2e::backend_caller_name);

// --- 1: stdout and stderr one open file ------------------------------------------------------

// `>log 2>&1`: the log holds the lines in the order the command wrote them, as under the exec path.
TEST_P(Workload, OneFileForStdoutAndStderrKeepsTheOrderByteForByte) {
    const std::string to_log = "log=$1; shift; exec \"$@\" >\"$log\" 2>&1";
    const e2e::Result exec = through("/bin/sh", to_log, {scratch / "exec.log"}, exec_args("read-only", {"/bin/sh", "-c", kInterleave}));
    ASSERT_EQ(exec.status, 0) << exec.err;
    ASSERT_EQ(read_file(scratch / "exec.log"), interleaved());
    const e2e::Result run = through("/bin/sh", to_log, {scratch / "run.log"}, run_args("read-only", {"/bin/sh", "-c", kInterleave}));
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(read_file(scratch / "run.log"), read_file(scratch / "exec.log"));
}

// `2>&1 | reader`: one pipe for both, the same order.
TEST_P(Workload, OnePipeForStdoutAndStderrKeepsTheOrderByteForByte) {
    const std::string to_pipe = "exec \"$@\" 2>&1";
    const e2e::Result exec = through("/bin/sh", to_pipe, {}, exec_args("read-only", {"/bin/sh", "-c", kInterleave}));
    ASSERT_EQ(exec.status, 0) << exec.err;
    ASSERT_EQ(exec.out, interleaved());
    const e2e::Result run = through("/bin/sh", to_pipe, {}, run_args("read-only", {"/bin/sh", "-c", kInterleave}));
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, exec.out);
}

// --- 2: a reader of stderr that goes away ------------------------------------------------------

// `run ... 2>&1 >/dev/null | head -1`: head leaves after the first line, the command goes on
// writing to stderr, more than a pipe holds (so run's writes meet the closed pipe whenever head
// leaves). run is not killed by SIGPIPE: it exits with the command's status, writes the report,
// and removes its own temp area.
TEST_P(Workload, AReaderOfStderrThatGoesAwayDoesNotKillRun) {
    const std::string command =
        "echo \"$TMPDIR\" > \"$1/tmpdir\"; echo first >&2; yes more-output-on-stderr | head -n 20000 >&2; exit 3";
    const e2e::Result r = through("/bin/bash", "\"$@\" 2>&1 >/dev/null | head -1; echo \"status=${PIPESTATUS[0]}\"", {},
                                  run_args("workspace-write", {"/bin/sh", "-c", command, "sh", ws}));
    EXPECT_EQ(r.out, "first\nstatus=3\n") << r.err;
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << "no report: " << read_file(report_path);
    EXPECT_EQ(rep["exitCode"], 3) << rep.dump();
    EXPECT_EQ(rep["started"], true) << rep.dump();
    if (backend == "landlock") {
        // A per-call area under /tmp/dsh-confine-UID, which run removes once the command is done.
        const std::string tmpdir = e2e::first_line(read_file(ws + "/tmpdir"));
        EXPECT_NE(tmpdir.find("/call-"), std::string::npos) << tmpdir;
        EXPECT_FALSE(exists(tmpdir)) << tmpdir << " outlived run";
    }
}

// --- 3: SIGTERM to run -----------------------------------------------------------------------

// Sent while the command runs: forwarded to it, and the same report under either backend.
TEST_P(Workload, SigtermToRunIsReportedAsTheCommandsDeathBySignal15) {
    const std::string ready = ws + "/ready";
    const std::string script =
        "ready=$1; shift; \"$@\" & pid=$!; i=0; "
        "while [ ! -e \"$ready\" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; "
        "kill -TERM $pid; wait $pid; echo \"status=$?\"";
    const e2e::Result r =
        through("/bin/sh", script, {ready}, run_args("workspace-write", {"/bin/sh", "-c", "touch \"$1\"; exec sleep 30", "sh", ready}));
    EXPECT_EQ(r.out, "status=143\n") << r.err;
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << "no report: " << read_file(report_path);
    EXPECT_TRUE(rep["exitCode"].is_null()) << rep.dump();
    EXPECT_EQ(rep["signal"], 15) << rep.dump();
}

// --- 4: a report for every outcome -------------------------------------------------------------

TEST_P(Workload, ProgramNotFoundIs127WithAReport) {
    const e2e::Result r = dsh(run_args("workspace-write", {"dsh-e2e-no-such-program"}));
    EXPECT_TRUE(IsError(r, "COMMAND_NOT_FOUND", 127));
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << "no report: " << read_file(report_path);
    EXPECT_EQ(rep["error"]["code"], "COMMAND_NOT_FOUND") << rep.dump();
    EXPECT_EQ(rep["exitCode"], 127) << rep.dump();
    EXPECT_EQ(rep["started"], false) << rep.dump();
}

// bwrap at a path that does not exist; Landlock on a "kernel" without it.
TEST_P(Workload, NoUsableBackendIs125WithAReport) {
    e2e::RunOptions o = options();
    if (backend == "bwrap") {
        e2e::write_file(scratch / "config.toml", "[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
        o.env["DSH_CONFINE_CONFIG"] = scratch / "config.toml";
    } else {
        o.prefix = {NO_LANDLOCK_BINARY};
    }
    const e2e::Result r = dsh(run_args("workspace-write", {"/bin/sh", "-c", "echo ran > \"$1/sentinel\"", "sh", ws}), o);
    EXPECT_TRUE(IsError(r, "SANDBOX_UNAVAILABLE"));
    EXPECT_FALSE(exists(ws + "/sentinel")) << "the command ran";
    const json rep = report();
    ASSERT_TRUE(rep.is_object()) << "no report: " << read_file(report_path);
    EXPECT_EQ(rep["error"]["code"], "SANDBOX_UNAVAILABLE") << rep.dump();
    EXPECT_EQ(rep["exitCode"], 125) << rep.dump();
}

// A report path whose directory is missing, or with a directory in its place: REPORT, with the
// errno's text, before anything runs.
TEST_P(Workload, AReportPathThatCannotBeWrittenIsRefusedBeforeAnythingRuns) {
    make_dir(scratch / "a-directory");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {scratch / "missing/report.json", "No such file or directory"},
        {scratch / "a-directory", "Is a directory"},
    };
    for (const auto& [path, errno_text] : cases) {
        report_path = path;
        const e2e::Result r = dsh(run_args("workspace-write", {"/bin/sh", "-c", "echo ran > \"$1/sentinel\"", "sh", ws}));
        EXPECT_TRUE(IsError(r, "REPORT")) << path;
        EXPECT_TRUE(contains(r.err, errno_text)) << r.err;
        EXPECT_FALSE(exists(ws + "/sentinel")) << path << ": the command ran";
    }
    EXPECT_FALSE(exists(scratch / "missing"));
}

// --- 6: /dev/shm -------------------------------------------------------------------------------

const std::string kLock = "import multiprocessing; multiprocessing.Lock(); print('lock-ok')";

std::string shm_name(const std::string& backend, const std::optional<unsigned>& uid) {
    return "/dev/shm/dsh-e2e-" + std::to_string(getpid()) + "-" + backend + "-" + (uid ? "nobody" : "root");
}

// Writable in workspace-write (a Python multiprocessing lock, a file), not in read-only.
TEST_P(Workload, DevShmIsWritableInWorkspaceWriteOnly) {
    const std::string name = shm_name(backend, uid);
    const e2e::Result lock = dsh(exec_args("workspace-write", {"/usr/bin/python3", "-c", kLock}));
    EXPECT_EQ(lock.status, 0) << lock.err;
    EXPECT_EQ(lock.out, "lock-ok\n");
    const e2e::Result echo = dsh(exec_args("workspace-write", {"/bin/sh", "-c", "echo shm > \"$1\" && cat \"$1\"", "sh", name}));
    EXPECT_EQ(echo.status, 0) << echo.err;
    EXPECT_EQ(echo.out, "shm\n");
    unlink(name.c_str());

    const e2e::Result no_lock = dsh(exec_args("read-only", {"/usr/bin/python3", "-c", kLock}));
    EXPECT_NE(no_lock.status, 0);
    EXPECT_EQ(no_lock.out, "");
    const e2e::Result no_echo = dsh(exec_args("read-only", {"/bin/sh", "-c", "echo shm > \"$1\"", "sh", name}));
    EXPECT_NE(no_echo.status, 0);
    EXPECT_FALSE(exists(name)) << "written to the host's /dev/shm in read-only";
    EXPECT_FALSE(names_gap(plan("read-only"), "/dev/shm"));
    unlink(name.c_str());
}

// Under bubblewrap a private one, the host's untouched; under Landlock the host's, and the plan
// names that gap.
TEST_P(Workload, DevShmIsPrivateUnderBwrapAndTheHostsUnderLandlockANamedGap) {
    const std::string name = shm_name(backend, uid);
    const e2e::Result r = dsh(exec_args("workspace-write", {"/bin/sh", "-c", "echo shm > \"$1\"", "sh", name}));
    EXPECT_EQ(r.status, 0) << r.err;
    if (backend == "bwrap") {
        EXPECT_FALSE(exists(name)) << "the host's /dev/shm changed";
        EXPECT_FALSE(names_gap(plan("workspace-write"), "/dev/shm"));
    } else {
        EXPECT_EQ(read_file(name), "shm\n") << "not the host's /dev/shm";
        EXPECT_TRUE(names_gap(plan("workspace-write"), "/dev/shm")) << plan("workspace-write").dump();
    }
    unlink(name.c_str());
}

// --- 7: new terminals --------------------------------------------------------------------------

TEST_P(Workload, ScriptGetsANewTerminalInEitherMode) {
    for (const std::string mode : {"read-only", "workspace-write"}) {
        const e2e::Result r = dsh(exec_args(mode, {"/usr/bin/script", "-qc", "echo in-a-pty", "/dev/null"}));
        EXPECT_EQ(r.status, 0) << mode << ": " << r.err;
        EXPECT_TRUE(contains(r.out, "in-a-pty")) << mode << ": " << r.out << r.err;
    }
}

const std::string kPtyFork =
    "import os, pty\n"
    "pid, fd = pty.fork()\n"
    "if pid == 0:\n"
    "    print('child-in-a-pty', flush=True)\n"
    "    os._exit(0)\n"
    "data = b''\n"
    "while True:\n"
    "    try:\n"
    "        chunk = os.read(fd, 1024)\n"
    "    except OSError:\n"
    "        break\n"
    "    if not chunk:\n"
    "        break\n"
    "    data += chunk\n"
    "os.waitpid(pid, 0)\n"
    "print(data.decode().strip())\n";

TEST_P(Workload, PythonPtyForkWorksInEitherMode) {
    for (const std::string mode : {"read-only", "workspace-write"}) {
        const e2e::Result r = dsh(exec_args(mode, {"/usr/bin/python3", "-c", kPtyFork}));
        EXPECT_EQ(r.status, 0) << mode << ": " << r.err;
        EXPECT_EQ(r.out, "child-in-a-pty\n") << mode << ": " << r.err;
    }
}

// Landlock cannot keep the command from the caller's other terminals once /dev/pts is open to
// it: the plan says so, in both modes. bubblewrap's terminals are its own.
TEST_P(Workload, ThePlanNamesATerminalsGapUnderLandlockOnly) {
    for (const std::string mode : {"read-only", "workspace-write"})
        EXPECT_EQ(names_gap(plan(mode), "terminals"), backend == "landlock") << mode << ": " << plan(mode).dump();
}

// --- 5: nested calls ---------------------------------------------------------------------------

// dsh-confine run inside a Landlock-confined call (workspace-write) whose probe cache, written
// outside, says bubblewrap works: the inner call probes again (bubblewrap cannot work inside
// Landlock), chooses Landlock, and confines its command to its own, smaller, workspace.
class Nested : public Caller, public ::testing::TestWithParam<std::string> {
protected:
    Nested() : Caller(GetParam()) {}

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "these tests run as root, and as nobody through setpriv");
        E2E_REQUIRE(confines("landlock"), "Landlock cannot confine here as " + GetParam());
        E2E_REQUIRE(confines("bwrap"), "bwrap cannot confine here as " + GetParam() + " (the cache would not say it works)");
    }
};

TEST_P(Nested, AnInnerCallChoosesLandlockAndConfinesItsCommand) {
    const std::string outer = scratch / "outer";
    const std::string inner = outer + "/inner";
    make_dir(inner);
    // A call outside fills the probe cache: bubblewrap works here.
    ASSERT_EQ(dsh({"--print", "--", "true"}).status, 0);
    bool cached_usable = false;
    for (const auto& entry : fs::directory_iterator(home / "cache/dsh-confine"))
        if (entry.path().filename().string().rfind("bwrap-", 0) == 0)
            cached_usable = parse(read_file(entry.path())).value("usable", false);
    ASSERT_TRUE(cached_usable) << "the cache outside does not say bubblewrap works";

    const std::string inner_report = inner + "/report.json";
    const e2e::Result r = dsh({"run", "--backend", "landlock", "--mode", "workspace-write", "--workspace-root", outer, "--",
                               e2e::binary(), "run", "--mode", "workspace-write", "--workspace-root", inner, "--report",
                               inner_report, "--", "/bin/sh", "-c",
                               "echo in > \"$1/in\"; echo out > \"$2/out\"; echo done", "sh", inner, outer});
    EXPECT_EQ(r.out, "done\n") << r.err;
    const json rep = parse(read_file(inner_report));
    ASSERT_TRUE(rep.is_object()) << "no inner report: " << r.err;
    EXPECT_EQ(rep["backend"], "landlock") << rep.dump();
    EXPECT_EQ(rep["started"], true) << rep.dump();
    EXPECT_EQ(read_file(inner + "/in"), "in\n") << "the write inside the inner workspace failed: " << r.err;
    EXPECT_FALSE(exists(outer + "/out")) << "the inner command wrote outside its workspace";
}

INSTANTIATE_TEST_SUITE_P(Linux, Nested, ::testing::Values("root", "nobody"),
                         [](const ::testing::TestParamInfo<std::string>& caller) { return caller.param; });

}  // namespace
