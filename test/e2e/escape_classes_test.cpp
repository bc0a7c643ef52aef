// The escape classes: the attacks an outside review found against earlier layouts (mount points
// made inside directories a command could write, a report written through a planted symlink, a
// runner taken from PATH, inherited descriptors, inode-flag ioctls, a faked start, host IPC, a
// replaced session cwd), each attempted by a real command under each Linux backend, as root and
// as an unprivileged user, with the workspace under /tmp and under /var/tmp. As in the escape
// battery, every verdict comes from the host's side (snapshots, file contents, inode flags, the
// host's IPC objects), never from an exit status alone.
#include <fcntl.h>
#include <linux/fs.h>
#include <mqueue.h>
#include <sys/ioctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::exists;
using e2e::host_snapshot;
using e2e::read_file;
using nlohmann::json;

using Param = e2e::BackendCaller;  // backend, caller, where the workspace lies

std::vector<Param> every_combination() { return e2e::backends_and_callers({"tmp", "vartmp"}); }

std::string canonical(const std::string& path) {
    std::error_code ec;
    const fs::path resolved = fs::canonical(path, ec);
    return ec ? path : resolved.string();
}

bool is_symlink_to(const std::string& link, const std::string& target) {
    struct stat st {};
    std::error_code ec;
    return lstat(link.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && fs::read_symlink(link, ec).string() == target;
}

bool is_real_directory(const std::string& path) {
    struct stat st {};
    return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The scene every class starts from: an isolated home (state, cache, config), and a base
// directory under /tmp or /var/tmp holding the workspace and OUTSIDE, all owned by the caller.
class EscapeClass : public ::testing::TestWithParam<Param> {
protected:
    std::string backend = std::get<0>(GetParam());
    bool asRoot = std::get<1>(GetParam()) == "root";
    std::optional<unsigned> uid = asRoot ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    e2e::TempDir home{"/tmp", uid};
    e2e::TempDir base{std::get<2>(GetParam()) == "tmp" ? "/tmp" : "/var/tmp", uid};
    std::string ws = base / "ws";
    std::string out = base / "outside";
    std::string self = canonical(e2e::binary());

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "the escape classes run as root, and as nobody through setpriv");
        make_dir(ws);
        make_dir(out);
        make_dir(out + "/dir");
        make_file(out + "/file", "original\n");
        make_file(out + "/victim", "victim content\n");
        const e2e::Result plan = dsh({"--print", "--backend", backend, "--", "true"}, ws);
        E2E_REQUIRE(plan.status == 0, backend + " cannot confine here as " + std::get<1>(GetParam()) + ": " +
                                          e2e::first_line(plan.err));
    }

    void make_dir(const std::string& path) const {
        mkdir(path.c_str(), 0755);
        own(path);
    }
    void make_file(const std::string& path, const std::string& content, mode_t mode = 0644) const {
        e2e::write_file(path, content);
        chmod(path.c_str(), mode);
        own(path);
    }
    void own(const std::string& path) const {
        if (uid) {
            ASSERT_EQ(lchown(path.c_str(), *uid, *uid), 0) << path;
        }
    }

    e2e::RunOptions options(const std::string& cwd) const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.uid = uid;
        o.cwd = cwd;
        o.timeoutMs = 20000;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args, const std::string& cwd) const {
        return e2e::run(args, options(cwd));
    }

    // A session on `cwd` in workspace-write; its temp area, as docs/sessions.md places it.
    std::string start_session(const std::string& id, const std::string& cwd) const {
        EXPECT_EQ(dsh({"session", "start", id, "--cwd", cwd}, cwd).status, 0);
        EXPECT_EQ(dsh({"session", "mode", id, "workspace-write"}, cwd).status, 0);
        return home / ("state/dsh-confine/sessions/" + id + "/tmp");
    }
};

// --- 1 and 2: poisoning a session's later calls -------------------------------------------

// A program outside the workspace, named by its absolute path (the old layout bound such a
// program, the caller's cwd and dsh-confine itself onto a private /tmp). It tries to write
// through every path it is given, then records that it ran, in the workspace and in $TMPDIR.
const char* const kProgram =
    "#!/bin/sh\n"
    "tag=$1; ws=$2; shift 2\n"
    "for p in \"$@\"; do echo poison > \"$p\"; mkdir \"$p/made\"; true > \"$p/made-file\"; done 2>/dev/null\n"
    "echo \"$tag\" > \"$ws/ran-$tag\" && echo \"$tag\" > \"$TMPDIR/ran-$tag\"\n";

// The old layout put the session's temp area at /tmp: a host path /tmp/X had its mount point
// made at $TMPDIR/X, any other path P at $TMPDIR/P.
std::string mirrored(const std::string& root, const std::string& path) {
    return root + (path.rfind("/tmp/", 0) == 0 ? path.substr(4) : path);
}

class SessionPoisoning : public EscapeClass {
protected:
    std::string elsewhere = base / "elsewhere";  // the caller's cwd, outside the workspace
    std::string program = base / "tools/prog";   // the program, outside the workspace
    std::string temp;                            // the session's temp area

    void SetUp() override {
        EscapeClass::SetUp();
        if (HasFatalFailure() || IsSkipped()) return;
        make_dir(ws + "/sub");
        make_file(ws + "/sub/keep", "keep\n");
        make_dir(elsewhere);
        make_dir(base / "tools");
        make_file(program, kProgram, 0755);
        temp = start_session("s", ws);
    }

    // Every place a mount point used to be made, in the temp area and in the workspace, each
    // paired with what a hostile command would point it at: an existing directory, a missing
    // name, an existing file, a missing file, all in OUTSIDE.
    std::vector<std::pair<std::string, std::string>> mount_point_places() const {
        const std::vector<std::pair<std::string, std::string>> paths = {
            {ws, out + "/dir"},            {elsewhere, out + "/newdir"},  {program, out + "/file"},
            {self, out + "/newfile"},      {out + "/dir", out + "/newdir2"}};  // the last: the `run` call's cwd
        std::vector<std::pair<std::string, std::string>> places;
        for (const auto& [path, target] : paths) {
            places.emplace_back(mirrored(temp, path), target);
            places.emplace_back(ws + path, target);
        }
        return places;
    }
};

class CrossCallPoisoning : public SessionPoisoning {};

TEST_P(CrossCallPoisoning, PlantedSymlinksInTheTempAreaAndWorkspaceDoNothingToLaterCalls) {
    auto places = mount_point_places();
    // The whole /tmp mirror as one directory link, where no other plant lies below it.
    const std::string tmp_mirror = temp + "/tmp";
    bool free = true;
    for (const auto& place : places) free = free && place.first.rfind(tmp_mirror + "/", 0) != 0;
    if (free) places.emplace_back(tmp_mirror, out + "/dir");
    places.emplace_back(ws + "/sub", out + "/dir");  // a workspace subdirectory replaced by a link

    std::vector<std::string> plant = {"--session", "s", "--backend", backend, "--", "/bin/sh", "-c",
                                      "echo \"$TMPDIR\"; rm -rf \"$0/sub\"; status=0\n"
                                      "while [ $# -ge 2 ]; do mkdir -p \"$(dirname \"$1\")\" && ln -sfn \"$2\" \"$1\" "
                                      "|| status=1; shift 2; done; exit $status",
                                      ws};
    std::vector<std::string> links;
    for (const auto& [link, target] : places) {
        plant.insert(plant.end(), {link, target});
        links.push_back(link);
    }
    const std::string before = host_snapshot(out);

    const e2e::Result first = dsh(plant, ws + "/sub");
    ASSERT_EQ(first.status, 0) << "call 1 could not plant: " << first.err;
    EXPECT_EQ(e2e::first_line(first.out), temp);
    for (const auto& [link, target] : places) EXPECT_TRUE(is_symlink_to(link, target)) << link << " was not planted";

    // Call 2 on the exec path: the caller's cwd and the program outside the workspace; the
    // program also tries to write through every planted link.
    std::vector<std::string> second_call = {"--session", "s", "--backend", backend, "--", program, "2", ws};
    second_call.insert(second_call.end(), links.begin(), links.end());
    const e2e::Result second = dsh(second_call, elsewhere);
    EXPECT_EQ(second.status, 0) << second.err;
    EXPECT_EQ(read_file(ws + "/ran-2"), "2\n") << second.err;
    EXPECT_EQ(read_file(temp + "/ran-2"), "2\n") << second.err;

    // A `run` call, from the replaced subdirectory (its cwd is now OUTSIDE/dir).
    std::vector<std::string> run_call = {"run", "--session", "s", "--backend", backend, "--report", ws + "/report.json",
                                         "--", program, "run", ws};
    run_call.insert(run_call.end(), links.begin(), links.end());
    const e2e::Result ran = dsh(run_call, ws + "/sub");
    EXPECT_EQ(ran.status, 0) << ran.err;
    EXPECT_EQ(read_file(ws + "/ran-run"), "run\n") << ran.err;
    const json report = json::parse(read_file(ws + "/report.json"), nullptr, false);
    EXPECT_EQ(report.value("started", json()), json(true)) << report.dump();

    EXPECT_EQ(host_snapshot(out), before) << "OUTSIDE changed";
}

INSTANTIATE_TEST_SUITE_P(Linux, CrossCallPoisoning, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// Two calls in one session at once: one command keeps turning each old mount-point place (and
// a workspace subdirectory) into a missing name, a link to a missing name in OUTSIDE, a link to
// a file in OUTSIDE (the victim), and a real directory, while calls keep starting beside it.
class ConcurrentPoisoning : public SessionPoisoning {};

TEST_P(ConcurrentPoisoning, SwappingPathsWhileCallsStartReachesNothingOutside) {
    std::vector<std::string> swapped;
    for (const auto& place : mount_point_places()) swapped.push_back(place.first);
    swapped.push_back(ws + "/sub");
    const std::string stop = ws + "/stop";
    const std::string ready = ws + "/ready";
    // perl (Debian's perl-base, always there) swaps with one syscall each, many rounds a
    // second; a shell would spawn a process for each. Bounded on its own too (5 s), should the
    // test die before it writes the stop file.
    E2E_REQUIRE(exists("/usr/bin/perl"), "no /usr/bin/perl to swap paths quickly");
    std::vector<std::string> swapper = {
        "--session", "s", "--backend", backend, "--", "/usr/bin/perl", "-e",
        "my ($stop, $ready, $victim, $missing, @paths) = @ARGV;\n"
        "sub parents { my $d = ''; for my $c (grep { length } split m{/}, $_[0]) { last if \"$d/$c\" eq $_[0]; "
        "$d .= \"/$c\"; mkdir $d } }\n"
        "sub clear { unlink $_[0]; rmdir $_[0] }\n"
        "parents($_) for @paths;\n"
        "open(my $f, '>', $ready) or die \"$ready: $!\"; close $f;\n"
        "my ($n, $end) = (0, time + 5);\n"
        "while (!-e $stop && time < $end) {\n"
        "  clear($_) for @paths;\n"
        "  symlink($missing, $_) for @paths; clear($_) for @paths;\n"
        "  symlink($victim, $_) for @paths; clear($_) for @paths;\n"
        "  mkdir $_ for @paths;\n"
        "  $n++;\n"
        "}\n"
        "print \"$n\\n\";\n",
        stop, ready, out + "/victim", out + "/missing"};
    swapper.insert(swapper.end(), swapped.begin(), swapped.end());
    const std::string before = host_snapshot(out);

    e2e::Result swapper_result;
    std::thread swapping([&] { swapper_result = dsh(swapper, ws); });
    for (int i = 0; i < 6000 && !exists(ready); ++i) usleep(10000);  // a hang guard: 60 s
    EXPECT_TRUE(exists(ready)) << "the swapping command did not start";

    int calls = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
    while (exists(ready) && (calls < 4 || std::chrono::steady_clock::now() < until) && calls < 40) {
        const std::string tag = std::to_string(++calls);
        const bool run = calls % 2 == 0;
        std::vector<std::string> call = {"--session", "s", "--backend", backend, "--", program, tag, ws};
        if (run) call.insert(call.begin(), "run");
        const e2e::Result r = dsh(call, elsewhere);
        EXPECT_EQ(r.status, 0) << (run ? "run" : "exec") << " call " << tag << ": " << r.err;
        EXPECT_EQ(read_file(ws + "/ran-" + tag), tag + "\n") << "call " << tag << ": " << r.err;
    }
    e2e::write_file(stop, "");
    swapping.join();
    EXPECT_EQ(swapper_result.status, 0) << swapper_result.err;
    std::cout << "[ swapped  ] " << e2e::first_line(swapper_result.out) << " rounds over " << swapped.size()
              << " paths, beside " << calls << " calls\n";
    EXPECT_GT(std::atoi(swapper_result.out.c_str()), 0) << "the paths were never swapped";

    EXPECT_EQ(read_file(out + "/victim"), "victim content\n");
    EXPECT_EQ(fs::file_size(out + "/victim"), 15u);
    EXPECT_EQ(host_snapshot(out), before) << "OUTSIDE changed";
}

INSTANTIATE_TEST_SUITE_P(Linux, ConcurrentPoisoning, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 3: nested roots across sessions ---------------------------------------------------------

// Session A's workspace contains session B's. A's command keeps renaming a component of B's
// path away and putting a symlink to OUTSIDE (which holds a directory of the same name) in its
// place. Every B call must either run in B's real workspace, or be refused before its command
// starts (SESSION_CWD_CHANGED, or the runner's identity check); nothing it writes reaches OUTSIDE.
class NestedSessions : public EscapeClass {};

TEST_P(NestedSessions, SwappingAComponentOfAnInnerSessionsPathNeverRedirectsItsWrites) {
    const std::string ws_a = ws;
    const std::string ws_b = ws_a + "/inner/wsB";
    make_dir(ws_a + "/inner");
    make_dir(ws_b);
    make_dir(out + "/wsB");  // what B's path names while `inner` is the link
    start_session("a", ws_a);
    start_session("b", ws_b);
    const std::string stop = base / "stop";
    const std::string ready = ws_a + "/ready";
    const std::vector<std::string> swapper = {
        "--session", "a", "--backend", backend, "--", "/bin/sh", "-c",
        "stop=$1; ready=$2; out=$3; end=$(( $(date +%s) + 60 )); : > \"$ready\"\n"
        "while [ ! -e \"$stop\" ] && [ \"$(date +%s)\" -lt \"$end\" ]; do\n"
        "  for i in 1 2 3 4 5 6 7 8 9 10; do\n"
        "    mv inner inner.real && ln -s \"$out\" inner; sleep 0.01\n"
        "    rm inner && mv inner.real inner; sleep 0.01\n"
        "  done; sleep 0.4\n"
        "done; exit 0",
        "sh", stop, ready, out};
    const std::string before = host_snapshot(out);

    e2e::Result swapper_result;
    // The swapper runs until told to stop (after the calls' 25 s cap at most), or 60 s: the
    // harness's hang guard for it is longer still, so that it is never killed mid-swap with
    // B's path left a link.
    std::thread swapping([&] {
        e2e::RunOptions o = options(ws_a);
        o.timeoutMs = 120000;
        swapper_result = e2e::run(swapper, o);
    });
    for (int i = 0; i < 6000 && !exists(ready); ++i) usleep(10000);  // a hang guard: 60 s
    EXPECT_TRUE(exists(ready)) << "the swapping command did not start";

    // The swapper alternates a burst of swaps (about 0.2 s) with a quiet 0.4 s, so that on a
    // loaded machine, where one call can outlast a whole swap cycle, some calls still start and
    // finish in a quiet interval. Calls go on until both outcomes were seen (or a cap).
    int calls = 0, ran = 0;
    std::map<std::string, int> refusals;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
    const auto cap = std::chrono::steady_clock::now() + std::chrono::seconds(25);
    const auto both_seen = [&] { return ran > 0 && !refusals.empty(); };
    while (exists(ready) && (calls < 6 || std::chrono::steady_clock::now() < until || !both_seen()) && calls < 120 &&
           std::chrono::steady_clock::now() < cap) {
        const std::string tag = std::to_string(++calls);
        std::vector<std::string> call = {"--session", "b", "--backend", backend, "--", "/bin/sh", "-c",
                                         "echo b > \"rel-$1\"; echo b > \"$2/abs-$1\"; echo b > \"$TMPDIR/t-$1\"; exit 0",
                                         "sh", tag, ws_b};
        if (calls % 2 == 0) call.insert(call.begin(), "run");
        const e2e::Result r = dsh(call, ws_b);
        if (r.status == 0) {
            ++ran;
            continue;
        }
        // 121: the harness itself found no directory at B's path to start in (between the
        // rename and the link), so nothing was started.
        if (r.status == 121) continue;
        // Refused before the command started: the session's cwd check; its resolution, when the
        // cwd vanished just after that check (WORKSPACE_ROOT); the stage's or the Landlock
        // runner's identity check; or bubblewrap itself, which found no source to bind (exit 1
        // on the exec path, RUNNER_FAILURE under `run`). The command itself always exits 0.
        std::string refusal;
        for (const char* code : {"SESSION_CWD_CHANGED", "WORKSPACE_ROOT", "BWRAP_STAGE", "LANDLOCK"})
            if (r.status == 125 && r.err.find(std::string("dsh-confine: error: ") + code + ": ") != std::string::npos)
                refusal = code;
        if (backend == "bwrap" && r.err.rfind("bwrap: ", 0) == 0 && r.err.find("execvp") == std::string::npos &&
            (r.status == 1 || (r.status == 125 && r.err.find("dsh-confine: error: RUNNER_FAILURE: ") != std::string::npos)))
            refusal = "bwrap";
        if (!refusal.empty()) ++refusals[refusal];
        EXPECT_FALSE(refusal.empty()) << "call " << tag << " exited " << r.status << ": " << r.err;
    }
    e2e::write_file(stop, "");
    swapping.join();
    EXPECT_EQ(swapper_result.status, 0) << swapper_result.err;
    ASSERT_TRUE(is_real_directory(ws_a + "/inner")) << "the swapper did not put B's path back";

    std::cout << "[ nested   ] " << calls << " calls: " << ran << " ran";
    for (const auto& [code, count] : refusals) std::cout << ", " << count << " " << code;
    std::cout << "\n";
    EXPECT_GT(ran, 0) << "no call of B ran at all: the race was not exercised";
    EXPECT_EQ(host_snapshot(out), before) << "OUTSIDE changed";
}

INSTANTIATE_TEST_SUITE_P(Linux, NestedSessions, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 4: a runner planted on PATH -------------------------------------------------------------

// PATH starts with a directory in the workspace (a virtualenv's bin). A workspace-write call
// plants `bwrap` and `dsh-confine` there, each of which would leave a sentinel in OUTSIDE; the
// next call, read-only with the same PATH, must run neither: the runner is never looked up on
// PATH, and the plan names it by an absolute system path.
class RunnerOnPath : public EscapeClass {};

TEST_P(RunnerOnPath, ARunnerPlantedInAWorkspaceDirectoryOnPathIsNeverRun) {
    const std::string bin = ws + "/venv/bin";
    make_dir(ws + "/venv");
    make_dir(bin);
    e2e::RunOptions o = options(ws);
    o.env["PATH"] = bin + ":" + o.env["PATH"];
    const std::string sentinel = out + "/sentinel";
    const std::string fake = "#!/bin/sh\necho \"$0 ran\" >> '" + sentinel + "'\nexit 0\n";
    const e2e::Result plant = e2e::run({"--backend", backend, "--mode", "workspace-write", "--workspace-root", ws, "--",
                                        "/bin/sh", "-c",
                                        "for name in bwrap dsh-confine; do printf '%s' \"$2\" > \"$1/$name\" && "
                                        "chmod 755 \"$1/$name\" || exit 1; done",
                                        "sh", bin, fake},
                                       o);
    ASSERT_EQ(plant.status, 0) << plant.err;
    ASSERT_TRUE(exists(bin + "/bwrap") && exists(bin + "/dsh-confine"));

    const e2e::Result printed = e2e::run({"--print", "--backend", backend, "--mode", "read-only", "--", "true"}, o);
    ASSERT_EQ(printed.status, 0) << printed.err;
    const json plan = json::parse(printed.out, nullptr, false);
    ASSERT_TRUE(plan.is_object()) << printed.out;
    const std::string runner = plan["argv"][0].get<std::string>();
    if (backend == "bwrap") {
        const std::set<std::string> system = {"/usr/local/bin/bwrap", "/usr/bin/bwrap", "/bin/bwrap",
                                              "/usr/local/sbin/bwrap", "/usr/sbin/bwrap", "/sbin/bwrap"};
        EXPECT_TRUE(system.count(runner)) << "argv[0] " << runner << " is not bwrap in a system directory";
        // The stage bubblewrap runs inside is dsh-confine itself, by its own path.
        const auto& argv = plan["argv"];
        bool stage_is_self = false;
        for (std::size_t i = 1; i < argv.size(); ++i)
            if (argv[i] == "bwrap-stage") stage_is_self = argv[i - 1] == self;
        EXPECT_TRUE(stage_is_self) << printed.out;
    } else {
        EXPECT_EQ(runner, self) << "argv[0] is not dsh-confine itself";
    }
    EXPECT_EQ(runner.rfind(ws, 0), std::string::npos) << runner;

    const e2e::Result exec = e2e::run({"--backend", backend, "--mode", "read-only", "--", "/bin/sh", "-c", "echo ran"}, o);
    EXPECT_EQ(exec.status, 0) << exec.err;
    EXPECT_EQ(exec.out, "ran\n");
    const e2e::Result run = e2e::run({"run", "--backend", backend, "--mode", "read-only", "--", "/bin/sh", "-c", "echo ran"}, o);
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out, "ran\n");
    EXPECT_FALSE(exists(sentinel)) << read_file(sentinel);
}

INSTANTIATE_TEST_SUITE_P(Linux, RunnerOnPath, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 5: the report path ----------------------------------------------------------------------

class ReportPath : public EscapeClass {
protected:
    std::vector<std::string> run_args(const std::string& report, const std::vector<std::string>& argv) const {
        std::vector<std::string> args = {"run", "--backend", backend, "--mode", "workspace-write", "--workspace-root",
                                         ws, "--report", report, "--"};
        args.insert(args.end(), argv.begin(), argv.end());
        return args;
    }
};

// The command turns the report's name, and then its directory, into links to OUTSIDE while it
// runs: the report still goes to the file opened before it started, nothing in OUTSIDE changes.
TEST_P(ReportPath, ReplacingTheReportOrItsDirectoryDuringTheCallWritesNothingOutside) {
    make_dir(ws + "/reports");
    const std::string before = host_snapshot(out);
    const e2e::Result file = dsh(run_args(ws + "/report.json",
                                          {"/bin/sh", "-c", "rm -f \"$1/report.json\" && ln -s \"$2/file\" \"$1/report.json\"",
                                           "sh", ws, out}),
                                 ws);
    EXPECT_EQ(file.status, 0) << file.err;
    EXPECT_TRUE(is_symlink_to(ws + "/report.json", out + "/file"));
    const e2e::Result dir = dsh(run_args(ws + "/reports/r.json",
                                         {"/bin/sh", "-c", "mv \"$1/reports\" \"$1/reports.old\" && ln -s \"$2/dir\" \"$1/reports\"",
                                          "sh", ws, out}),
                                ws);
    EXPECT_EQ(dir.status, 0) << dir.err;
    EXPECT_TRUE(is_symlink_to(ws + "/reports", out + "/dir"));
    // The report reached the file that was opened, now under its old directory's new name.
    const json report = json::parse(read_file(ws + "/reports.old/r.json"), nullptr, false);
    EXPECT_EQ(report.value("started", json()), json(true)) << read_file(ws + "/reports.old/r.json");
    EXPECT_EQ(host_snapshot(out), before) << "OUTSIDE changed";
}

// A symlink planted before the call, at the report's name or at a directory on its path
// (pointing at an existing file, a missing one, a directory): `run` refuses (REPORT, 125)
// before anything runs.
TEST_P(ReportPath, ASymlinkOnTheReportPathIsRefusedAndNothingRuns) {
    make_dir(ws + "/real");
    const std::vector<std::pair<std::string, std::string>> links = {
        {ws + "/existing.json", out + "/file"},
        {ws + "/missing.json", out + "/created.json"},
        {ws + "/reports", out + "/dir"},
        {ws + "/real/up", ".."},
    };
    for (const auto& [link, target] : links) {
        ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0) << link;
        own(link);
    }
    const std::string before = host_snapshot(out);
    for (const std::string& report :
         {ws + "/existing.json", ws + "/missing.json", ws + "/reports/r.json", ws + "/real/up/real/r.json"}) {
        const e2e::Result r = dsh(run_args(report, {"/bin/sh", "-c", "echo ran; echo ran > \"$1/sentinel\"", "sh", ws}), ws);
        EXPECT_TRUE(e2e::IsError(r, "REPORT")) << report;
        EXPECT_FALSE(exists(ws + "/sentinel")) << report << ": the command ran";
    }
    EXPECT_FALSE(exists(ws + "/real/r.json"));
    EXPECT_EQ(host_snapshot(out), before) << "OUTSIDE changed";
}

// A hard link at the report's name: planted by an earlier call's command to a file of the
// workspace (the review's was the repository's config, which bubblewrap keeps out of reach; any
// other file will do), or made on the host to a file outside. `run` refuses it (REPORT, 125)
// before anything runs, and the file behind the other name keeps its content.
TEST_P(ReportPath, AHardLinkAtTheReportsNameIsRefusedAndNothingRuns) {
    make_file(ws + "/Makefile", "all:\n\ttrue\n");
    const e2e::Result plant =
        dsh(run_args(ws + "/plant.json", {"/bin/sh", "-c", "ln \"$1/Makefile\" \"$1/report.json\"", "sh", ws}), ws);
    ASSERT_EQ(plant.status, 0) << plant.err;
    ASSERT_EQ(link((out + "/victim").c_str(), (ws + "/outside.json").c_str()), 0);
    const std::string makefile_before = host_snapshot(ws + "/Makefile");
    const std::string before = host_snapshot(out);
    for (const std::string& report : {ws + "/report.json", ws + "/outside.json"}) {
        const e2e::Result r = dsh(run_args(report, {"/bin/sh", "-c", "echo ran > \"$1/sentinel\"", "sh", ws}), ws);
        EXPECT_TRUE(e2e::IsError(r, "REPORT")) << report;
        EXPECT_NE(r.err.find("has 2 links"), std::string::npos) << r.err;
        EXPECT_FALSE(exists(ws + "/sentinel")) << report << ": the command ran";
    }
    EXPECT_EQ(read_file(ws + "/Makefile"), "all:\n\ttrue\n");
    EXPECT_EQ(host_snapshot(ws + "/Makefile"), makefile_before);
    EXPECT_EQ(read_file(out + "/victim"), "victim content\n");
    EXPECT_EQ(host_snapshot(out), before) << "OUTSIDE changed";
}

// A link the command makes to the report file while it runs: the report is not written through
// it (a REPORT line on stderr), and `run` still exits with the command's status.
TEST_P(ReportPath, AHardLinkMadeDuringTheCallIsNotWrittenThrough) {
    const e2e::Result r =
        dsh(run_args(ws + "/report.json", {"/bin/sh", "-c", "ln \"$1/report.json\" \"$1/other-name\" && exit 3", "sh", ws}), ws);
    EXPECT_EQ(r.status, 3) << r.err;
    EXPECT_NE(r.err.find("dsh-confine: error: REPORT: " + ws + "/report.json gained another name during the call"),
              std::string::npos)
        << r.err;
    ASSERT_TRUE(exists(ws + "/other-name")) << "the link was not made, so this proves nothing";
    EXPECT_EQ(read_file(ws + "/other-name"), "");
    // The control: without the link the same call writes its report.
    const e2e::Result control = dsh(run_args(ws + "/control.json", {"/bin/sh", "-c", "exit 3"}), ws);
    EXPECT_EQ(control.status, 3) << control.err;
    EXPECT_EQ(json::parse(read_file(ws + "/control.json"), nullptr, false).value("exitCode", json()), json(3));
}

// Reports of dsh-confine's own failures, validated against docs/schemas/report.schema.json by
// test/e2e/validate_json.py (as test/e2e/json_schema_test.cpp does), next to a successful one.
const std::string kPython = "/usr/bin/python3";  // Debian's: its jsonschema is the one .ci/setup installs

::testing::AssertionResult ValidReports(const std::vector<std::string>& files) {
    std::vector<std::string> argv = {kPython, std::string(DSH_SOURCE_DIR) + "/test/e2e/validate_json.py",
                                     std::string(DSH_SOURCE_DIR) + "/docs/schemas/report.schema.json"};
    argv.insert(argv.end(), files.begin(), files.end());
    const e2e::Result r = e2e::run_program(argv);
    if (r.status == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "validator exit " << r.status << "\n" << r.err;
}

TEST_P(ReportPath, OwnFailuresGetAReportThatValidates) {
    E2E_REQUIRE(e2e::run_program({kPython, "-c", "import jsonschema"}).status == 0,
                kPython + " cannot import jsonschema (Debian: apt-get install python3-jsonschema)");
    std::vector<std::string> reports;
    auto report = [&] { return ws + "/report-" + std::to_string(reports.size()) + ".json"; };
    auto check = [&](const e2e::Result& r, const std::string& code, int status) {
        EXPECT_EQ(r.status, status) << r.err;
        const json parsed = json::parse(read_file(report()), nullptr, false);
        EXPECT_TRUE(parsed.is_object()) << code << ": " << read_file(report());
        if (parsed.is_object()) {
            EXPECT_EQ(parsed["error"]["code"], code) << parsed.dump();
            EXPECT_EQ(parsed["exitCode"], status) << parsed.dump();
            EXPECT_EQ(parsed["started"], false) << parsed.dump();
            EXPECT_TRUE(parsed["verdict"].is_null()) << parsed.dump();
        }
        EXPECT_FALSE(exists(ws + "/sentinel")) << "the command ran";
        reports.push_back(report());
    };
    const std::vector<std::string> command = {"/bin/sh", "-c", "echo ran > \"$1/sentinel\"", "sh", ws};

    // SANDBOX_UNAVAILABLE: bwrap at a path that does not exist; Landlock on a "kernel" without it.
    e2e::RunOptions o = options(ws);
    if (backend == "bwrap") {
        make_file(base / "config.toml", "[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
        o.env["DSH_CONFINE_CONFIG"] = base / "config.toml";
    } else {
        o.prefix = {NO_LANDLOCK_BINARY};
    }
    check(e2e::run(run_args(report(), command), o), "SANDBOX_UNAVAILABLE", 125);

    // Not found (127) and not executable (126), in a confined mode and unconfined.
    make_file(ws + "/not-executable", "#!/bin/sh\necho ran > sentinel\n", 0644);
    // (danger-full-access takes no --backend: a backend cannot apply where nothing is confined.)
    const auto unconfined = [](std::vector<std::string> args) {
        const auto backend_at = std::find(args.begin(), args.end(), "--backend");
        if (backend_at != args.end()) args.erase(backend_at, backend_at + 2);
        return args;
    };
    for (const std::string mode : {"workspace-write", "danger-full-access"}) {
        std::vector<std::string> args = run_args(report(), {"dsh-confine-no-such-program"});
        args[4] = mode;
        if (mode == "danger-full-access") args = unconfined(args);
        check(dsh(args, ws), "COMMAND_NOT_FOUND", 127);
        args = run_args(report(), {ws + "/not-executable"});
        args[4] = mode;
        if (mode == "danger-full-access") args = unconfined(args);
        check(dsh(args, ws), "COMMAND_NOT_EXECUTABLE", 126);
    }
    // Before any policy: a config that does not parse (policy null), and no PROGRAM (argv empty).
    make_file(base / "broken.toml", "[sandbox\n");
    o = options(ws);
    o.env["DSH_CONFINE_CONFIG"] = base / "broken.toml";
    check(e2e::run(run_args(report(), command), o), "CONFIG", 125);
    check(dsh(run_args(report(), {}), ws), "USAGE", 125);

    // And runs that did start still validate: the command's failure, a denial, success.
    for (const std::string script : {"exit 3", "echo x > /etc/dsh-confine-denied", "true"}) {
        const e2e::Result r = dsh(run_args(report(), {"/bin/sh", "-c", script}), ws);
        EXPECT_NE(r.status, 125) << r.err;
        EXPECT_EQ(read_file(report()).find("\"error\""), std::string::npos) << read_file(report());
        reports.push_back(report());
    }
    EXPECT_TRUE(ValidReports(reports));
}

INSTANTIATE_TEST_SUITE_P(Linux, ReportPath, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 6: inherited descriptors ----------------------------------------------------------------

// dsh-confine started with descriptor 3 a directory in OUTSIDE (read-only) and 4 a file in
// OUTSIDE opened for writing, as a careless parent would leave them. Unless kept, neither
// reaches the command: no file made through openat(3, ...), no write through 4.
class InheritedDescriptors : public EscapeClass {
protected:
    // dsh-confine ARGS, as the caller, with descriptors 3 and 4 open on OUTSIDE.
    e2e::Result with_descriptors(const std::vector<std::string>& args) const {
        std::vector<std::string> argv;
        if (uid)
            argv = {"/usr/bin/setpriv", "--reuid=" + std::to_string(*uid), "--regid=" + std::to_string(*uid),
                    "--clear-groups", "--"};
        argv.insert(argv.end(), {"/bin/sh", "-c", "exec 3<\"$1\" 4>>\"$2\" || exit 120; shift 2; exec \"$@\"", "sh", out,
                                 out + "/file", e2e::binary()});
        argv.insert(argv.end(), args.begin(), args.end());
        e2e::RunOptions o = options(ws);
        o.uid.reset();
        return e2e::run_program(argv, o);
    }
    std::vector<std::string> attempt() const {
        return {"/bin/sh", "-c", "\"$0\" __effect openat-create 3 made; \"$0\" __effect write-fd 4; exit 0", self};
    }
};

TEST_P(InheritedDescriptors, AreClosedInTheCommandUnlessKept) {
    const std::string before = host_snapshot(out);
    for (const std::string mode : {"read-only", "workspace-write"})
        for (const bool run : {false, true}) {
            std::vector<std::string> args = {"--backend", backend, "--mode", mode, "--workspace-root", ws, "--"};
            if (run) args.insert(args.begin(), "run");
            const std::vector<std::string> command = attempt();
            args.insert(args.end(), command.begin(), command.end());
            const e2e::Result r = with_descriptors(args);
            EXPECT_EQ(r.status, 0) << mode << (run ? " run" : " exec") << ": " << r.err;
            EXPECT_NE(r.err.find("openat 3 made: Bad file descriptor"), std::string::npos) << r.err;
            EXPECT_NE(r.err.find("write to descriptor 4: Bad file descriptor"), std::string::npos) << r.err;
            EXPECT_EQ(host_snapshot(out), before) << mode << (run ? " run" : " exec") << ": OUTSIDE changed";
        }
}

TEST_P(InheritedDescriptors, AKeptDescriptorIsPassedOnAndListed) {
    const std::string before = host_snapshot(out + "/dir");
    std::vector<std::string> args = {"--backend", backend, "--mode", "read-only", "--keep-fd", "4", "--"};
    const std::vector<std::string> command = attempt();
    args.insert(args.end(), command.begin(), command.end());
    // Through the exec path, then `run` (whose runner under Landlock is a clone that prepared
    // nothing itself: the kept descriptor must still reach the command, and only it).
    for (const bool run : {false, true}) {
        make_file(out + "/file", "original\n");
        std::vector<std::string> call = args;
        if (run) call.insert(call.begin(), "run");
        const e2e::Result r = with_descriptors(call);
        EXPECT_EQ(r.status, 0) << (run ? "run: " : "exec: ") << r.err;
        // Deliberate: the caller passed it on. Descriptor 3 was not kept, so it is still closed.
        EXPECT_EQ(read_file(out + "/file"), "original\nwritten through an inherited descriptor\n") << r.err;
        EXPECT_NE(r.err.find("openat 3 made: Bad file descriptor"), std::string::npos) << r.err;
        EXPECT_FALSE(exists(out + "/made"));
        EXPECT_EQ(host_snapshot(out + "/dir"), before);
    }

    args.insert(args.begin(), "--print");
    const e2e::Result printed = with_descriptors(args);
    ASSERT_EQ(printed.status, 0) << printed.err;
    const json plan = json::parse(printed.out, nullptr, false);
    ASSERT_TRUE(plan.is_object()) << printed.out;
    EXPECT_EQ(plan["passedFds"], json({0, 1, 2, 4})) << printed.out;
}

INSTANTIATE_TEST_SUITE_P(Linux, InheritedDescriptors, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- capabilities ----------------------------------------------------------------------

// The command holds no capability and cannot gain one by exec (no_new_privs), whoever called,
// through the exec path and `run`, under each backend; a root caller's command has an empty
// bounding set too. (A caller without capabilities cannot shrink its bounding set under
// Landlock, which needs CAP_SETPCAP; with nothing permitted and no_new_privs set, the set
// grants nothing. bubblewrap's user namespace empties it for everyone.) Read from the
// kernel's own view of the command (/proc/self/status).
class Capabilities : public EscapeClass {};

TEST_P(Capabilities, TheCommandHoldsNoneAndCanGainNone) {
    for (const std::string mode : {"read-only", "workspace-write"})
        for (const bool run : {false, true}) {
            std::vector<std::string> args = {"--backend", backend, "--mode", mode, "--workspace-root", ws, "--",
                                             "/bin/grep", "-E", "^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):", "/proc/self/status"};
            if (run) args.insert(args.begin(), "run");
            const std::string where = mode + (run ? " run" : " exec");
            const e2e::Result r = dsh(args, ws);
            ASSERT_EQ(r.status, 0) << where << ": " << r.err;
            std::istringstream lines(r.out);
            std::map<std::string, std::string> fields;
            for (std::string line; std::getline(lines, line);) {
                const std::size_t colon = line.find(':');
                if (colon == std::string::npos) continue;
                std::string value = line.substr(colon + 1);
                value.erase(0, value.find_first_not_of(" \t"));
                fields[line.substr(0, colon)] = value;
            }
            for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapAmb"})
                EXPECT_EQ(fields[set], "0000000000000000") << where << ": " << set << " in\n" << r.out;
            if (asRoot || backend == "bwrap")
                EXPECT_EQ(fields["CapBnd"], "0000000000000000") << where << ": CapBnd in\n" << r.out;
            else
                EXPECT_EQ(fields["CapBnd"].size(), 16U) << where << ":\n" << r.out;
            EXPECT_EQ(fields["NoNewPrivs"], "1") << where << ":\n" << r.out;
        }
}

INSTANTIATE_TEST_SUITE_P(Linux, Capabilities, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 7: inode flags through ioctl ------------------------------------------------------------

unsigned inode_flags(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int flags = -1;
    if (fd < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) flags = -1;
    if (fd >= 0) close(fd);
    return static_cast<unsigned>(flags);
}

unsigned inode_xflags(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    fsxattr attr{};
    if (fd < 0 || ioctl(fd, FS_IOC_FSGETXATTR, &attr) != 0) attr.fsx_xflags = ~0U;
    if (fd >= 0) close(fd);
    return attr.fsx_xflags;
}

// Whether the file system holding `path` takes the no-dump flag (FS_IOC_SETFLAGS) and the
// no-atime xflag (FS_IOC_FSSETXATTR): set from the host, then cleared.
bool supports_inode_flags(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    int flags = 0;
    fsxattr attr{};
    bool ok = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    const int plain = flags;
    flags |= FS_NODUMP_FL;
    ok = ok && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0 && ioctl(fd, FS_IOC_SETFLAGS, &plain) == 0;
    ok = ok && ioctl(fd, FS_IOC_FSGETXATTR, &attr) == 0;
    const fsxattr original = attr;
    attr.fsx_xflags |= FS_XFLAG_NOATIME;
    ok = ok && ioctl(fd, FS_IOC_FSSETXATTR, &attr) == 0 && ioctl(fd, FS_IOC_FSSETXATTR, &original) == 0;
    close(fd);
    return ok;
}

// The owner of a file may set its no-dump and no-atime flags without any write access to it.
// Outside the writable roots both backends refuse it (bubblewrap: a read-only mount, EROFS;
// Landlock: its runner's filter, EPERM). Inside the workspace bubblewrap lets it through, and
// Landlock's filter refuses it too: a named over-block (the plan's "file ioctls" gap says why).
class InodeFlags : public EscapeClass {};

TEST_P(InodeFlags, OutsideTheyAreRefusedAndInTheWorkspaceOnlyLandlockRefusesThem) {
    make_file(out + "/owned", "owned\n");
    make_file(ws + "/inside", "inside\n");
    E2E_REQUIRE(supports_inode_flags(out + "/owned"), "the file system under " + base.path() + " has no inode flags");
    const unsigned flags_out = inode_flags(out + "/owned"), xflags_out = inode_xflags(out + "/owned");
    const unsigned flags_in = inode_flags(ws + "/inside"), xflags_in = inode_xflags(ws + "/inside");
    ASSERT_EQ(flags_out & FS_NODUMP_FL, 0u);
    ASSERT_EQ(xflags_out & FS_XFLAG_NOATIME, 0u);

    for (const std::string mode : {"read-only", "workspace-write"}) {
        const e2e::Result r = dsh({"--backend", backend, "--mode", mode, "--workspace-root", ws, "--", "/bin/sh", "-c",
                                   "\"$0\" __effect setflags \"$1\"; \"$0\" __effect fssetxattr \"$1\"; exit 0", self,
                                   out + "/owned"},
                                  ws);
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(inode_flags(out + "/owned"), flags_out) << mode << ": FS_IOC_SETFLAGS got through: " << r.err;
        EXPECT_EQ(inode_xflags(out + "/owned"), xflags_out) << mode << ": FS_IOC_FSSETXATTR got through: " << r.err;
    }

    const e2e::Result r = dsh({"--backend", backend, "--mode", "workspace-write", "--workspace-root", ws, "--", "/bin/sh",
                               "-c", "\"$0\" __effect setflags \"$1\"; \"$0\" __effect fssetxattr \"$1\"; exit 0", self,
                               ws + "/inside"},
                              ws);
    EXPECT_EQ(r.status, 0) << r.err;
    if (backend == "bwrap") {
        EXPECT_EQ(inode_flags(ws + "/inside") & FS_NODUMP_FL, unsigned(FS_NODUMP_FL)) << "over-blocked: " << r.err;
        EXPECT_EQ(inode_xflags(ws + "/inside") & FS_XFLAG_NOATIME, unsigned(FS_XFLAG_NOATIME)) << "over-blocked: " << r.err;
    } else {
        EXPECT_EQ(inode_flags(ws + "/inside"), flags_in) << r.err;
        EXPECT_EQ(inode_xflags(ws + "/inside"), xflags_in) << r.err;
        EXPECT_NE(r.err.find("ioctl setflags " + ws + "/inside: Operation not permitted"), std::string::npos) << r.err;
        const json plan = json::parse(dsh({"--print", "--backend", backend, "--mode", "workspace-write",
                                           "--workspace-root", ws, "--", "true"}, ws).out, nullptr, false);
        bool named = false;
        for (const auto& gap : plan.value("enforcementGaps", json::array()))
            named = named || gap.get<std::string>().rfind("file ioctls: ", 0) == 0;
        EXPECT_TRUE(named) << "the plan does not name the file ioctls: " << plan.dump();
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, InodeFlags, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 8: `started` comes from the runner's proof, not from text ------------------------------

// A command that did start, writes in the workspace, then prints what bubblewrap prints when
// the command is missing (and each backend's runner-failure lines), and exits with the status
// a runner failure would have: `run` still says it started and that this is its own failure.
class StartedProof : public EscapeClass {};

TEST_P(StartedProof, ARunnerLookalikeOnStderrDoesNotUndoTheStart) {
    for (const int status : {1, 125}) {
        const std::string report = ws + "/report.json";
        const std::string marker = ws + "/written-" + std::to_string(status);
        const e2e::Result r = dsh({"run", "--backend", backend, "--mode", "workspace-write", "--workspace-root", ws,
                                   "--report", report, "--", "/bin/sh", "-c",
                                   "echo written > \"$1\"; echo 'bwrap: execvp foo: No such file or directory' >&2; "
                                   "echo \"bwrap: Can't mkdir /x: Permission denied\" >&2; "
                                   "echo 'dsh-confine: error: LANDLOCK: made up' >&2; "
                                   "echo 'dsh-confine: error: BWRAP_STAGE: made up' >&2; exit \"$2\"",
                                   "sh", marker, std::to_string(status)},
                                  ws);
        EXPECT_EQ(r.status, status) << r.err;
        EXPECT_EQ(r.err.find("RUNNER_FAILURE"), std::string::npos) << r.err;
        EXPECT_EQ(read_file(marker), "written\n");
        const json parsed = json::parse(read_file(report), nullptr, false);
        ASSERT_TRUE(parsed.is_object()) << read_file(report);
        EXPECT_EQ(parsed["started"], true) << parsed.dump();
        EXPECT_EQ(parsed["exitCode"], status) << parsed.dump();
        EXPECT_NE(parsed["verdict"]["verdict"], "runner-failure") << parsed.dump();
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, StartedProof, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

// --- 9: host IPC -----------------------------------------------------------------------------

// The key of every SysV shared memory segment on the host, by id.
std::map<int, long long> host_segments() {
    std::map<int, long long> out;
    std::ifstream in("/proc/sysvipc/shm");
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        long long key = 0;
        int id = -1;
        if (fields >> key >> id) out[id] = key;
    }
    return out;
}

// A SysV segment (ipcmk -M) and a POSIX message queue made inside. bubblewrap gives the command
// an IPC namespace of its own, so neither outlives the call on the host. Under Landlock the
// host's IPC namespace is shared, so both persist: asserted, so that docs/backends/linux.md
// stays true, then removed. (IPC objects have no path in the workspace: the workspace's
// location changes nothing here, so only /var/tmp is tried.)
class HostIpc : public EscapeClass {};

TEST_P(HostIpc, IpcObjectsMadeInsideOutliveTheCallOnlyUnderLandlock) {
    E2E_REQUIRE(exists("/usr/bin/ipcmk"), "no ipcmk (util-linux)");
    const std::string queue = "/dsh-classes-" + std::to_string(getpid()) + "-" + std::get<1>(GetParam());
    const e2e::Result r = dsh({"--backend", backend, "--mode", "read-only", "--", "/bin/sh", "-c",
                               "id=$(ipcmk -M 4096 | awk '{print $NF}') && "
                               "awk -v id=\"$id\" '$2 == id {print $1}' /proc/sysvipc/shm; "
                               "\"$0\" __effect mq-create \"$1\"; exit 0",
                               self, queue},
                              ws);
    EXPECT_EQ(r.status, 0) << r.err;
    const std::string key_text = e2e::first_line(r.out);
    ASSERT_FALSE(key_text.empty()) << "no segment was made inside: " << r.err;
    const long long key = std::stoll(key_text);

    int segment = -1;
    for (const auto& [id, host_key] : host_segments())
        if (host_key == key) segment = id;
    const mqd_t opened = mq_open(queue.c_str(), O_RDONLY | O_CLOEXEC);
    const int mq_error = errno;
    if (segment >= 0) shmctl(segment, IPC_RMID, nullptr);
    if (opened != static_cast<mqd_t>(-1)) {
        mq_close(opened);
        mq_unlink(queue.c_str());
    }
    // What got through must be a gap the plan names: every Landlock plan names the IPC gap.
    const json plan = json::parse(dsh({"--print", "--backend", backend, "--mode", "read-only", "--", "true"}, ws).out,
                                  nullptr, false);
    bool named = false;
    for (const auto& gap : plan.value("enforcementGaps", json::array())) named = named || gap.get<std::string>().rfind("IPC: ", 0) == 0;
    if (backend == "bwrap") {
        EXPECT_EQ(segment, -1) << "the segment with key " << key << " reached the host";
        EXPECT_EQ(opened, static_cast<mqd_t>(-1)) << queue << " reached the host";
        EXPECT_EQ(mq_error, ENOENT);
        EXPECT_FALSE(named) << plan.dump();
    } else {
        EXPECT_GE(segment, 0) << "the segment with key " << key << " did not persist: docs/backends/linux.md is wrong";
        // Landlock refuses to open the new queue's file (EACCES), but mq_open made it first.
        EXPECT_NE(opened, static_cast<mqd_t>(-1)) << queue << " did not persist: docs/backends/linux.md is wrong";
        EXPECT_TRUE(named) << "the plan does not name the IPC gap: " << plan.dump();
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, HostIpc, ::testing::ValuesIn(e2e::backends_and_callers({"vartmp"})), e2e::backend_caller_name);

// --- 10: a session's cwd replaced -----------------------------------------------------------

// A component of the session's cwd replaced by a symlink to another directory that holds the
// same tail, or the cwd renamed away and made again: the same string, another directory. Every
// kind of call refuses with SESSION_CWD_CHANGED, and nothing runs.
class SessionCwdReplaced : public EscapeClass {
protected:
    void expect_refused() const {
        for (const char* kind : {"exec", "run", "print"}) {
            std::vector<std::string> args = {"--session", "s", "--backend", backend, "--", "/bin/sh", "-c",
                                             "echo ran; echo ran > \"$1/sentinel\"", "sh", base / "a/ws"};
            if (std::string(kind) == "run") args.insert(args.begin(), "run");
            if (std::string(kind) == "print") args.insert(args.begin(), "--print");
            e2e::Result r = dsh(args, base.path());
            if (std::string(kind) == "print") {  // --print --format json answers in JSON on stdout too
                EXPECT_NE(r.out.find("\"code\":\"SESSION_CWD_CHANGED\""), std::string::npos) << r.out;
                r.out.clear();
            }
            EXPECT_TRUE(e2e::IsError(r, "SESSION_CWD_CHANGED")) << kind;
        }
        EXPECT_FALSE(exists(base / "a/ws/sentinel"));
        EXPECT_FALSE(exists(base / "a.old/ws/sentinel"));
        EXPECT_FALSE(exists(base / "b/ws/sentinel"));
        EXPECT_FALSE(exists(base / "a/ws.old/sentinel"));
    }
};

TEST_P(SessionCwdReplaced, AComponentReplacedByASymlinkToTheSameTail) {
    make_dir(base / "a");
    make_dir(base / "a/ws");
    make_dir(base / "b");
    make_dir(base / "b/ws");
    start_session("s", base / "a/ws");
    ASSERT_EQ(rename((base / "a").c_str(), (base / "a.old").c_str()), 0);
    ASSERT_EQ(symlink((base / "b").c_str(), (base / "a").c_str()), 0);
    own(base / "a");
    expect_refused();
}

TEST_P(SessionCwdReplaced, TheCwdRenamedAwayAndMadeAgain) {
    make_dir(base / "a");
    make_dir(base / "a/ws");
    start_session("s", base / "a/ws");
    ASSERT_EQ(rename((base / "a/ws").c_str(), (base / "a/ws.old").c_str()), 0);
    make_dir(base / "a/ws");
    expect_refused();
}

INSTANTIATE_TEST_SUITE_P(Linux, SessionCwdReplaced, ::testing::ValuesIn(every_combination()), e2e::backend_caller_name);

}  // namespace
