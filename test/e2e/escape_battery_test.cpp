// The escape battery: every class of file effect the modes promise to govern, attempted by a
// real command under each Linux backend, in both modes, as root and as an unprivileged user,
// with the workspace under /tmp and elsewhere. Each attempt is judged from the host's side
// (snapshots of the tree, the pseudo-file's value, the terminal's input queue), never by the
// command's exit status alone. A `full` backend must hold everything; every escape of a
// `partial` backend must be one of the gaps its plan names; nothing allowed is over-blocked.
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <functional>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

using e2e::exists;
using e2e::host_snapshot;
using e2e::read_file;

enum class Kind {
    Outside,      // denied in both modes: OUT must be untouched
    WorkspaceRoot,// denied in both modes: the root's own entry in its parent
    Pseudo,       // denied in both modes: a device, /proc, /sys or the terminal
    Workspace,    // allowed in workspace-write, denied in read-only
    WriteOnly,    // allowed in workspace-write only (not attempted in read-only)
    Always,       // allowed in both modes
};

struct Context {
    std::string base, ws, out, token;
    e2e::Result result;
    std::string before;  // a snapshot or a value taken before the attempt
};

struct Effect {
    const char* name;
    const char* script;  // sh -c SCRIPT sh OUT WS GID BINARY TOKEN
    Kind kind;
    const char* gap = "";        // the enforcement gap that would explain an escape
    bool rootOnly = false;
    std::function<std::string(const Context&)> observe = nullptr;  // host-side state to compare
    std::function<bool(const Context&)> tookPlace = nullptr;       // for allowed effects
    bool pty = false;
};

std::string first_line_of_file(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// The workspace root's own entry: the same inode at the same name, and nothing beside it.
std::string root_entry(const Context& c) {
    struct stat st {};
    const bool there = stat(c.ws.c_str(), &st) == 0;
    return (there ? std::to_string(st.st_ino) : std::string("gone")) + (exists(c.ws + ".moved") ? " moved" : "");
}

const std::vector<Effect>& effects() {
    static const std::vector<Effect> list = {
        {"CreateOutside", "echo x > \"$1/new\"", Kind::Outside},
        {"OverwriteOutside", "echo x > \"$1/file\"", Kind::Outside},
        {"AppendOutside", "echo x >> \"$1/file\"", Kind::Outside},
        {"TruncateOutside", "truncate -s 0 \"$1/file\"", Kind::Outside, "truncate"},
        {"FallocateOutside", "fallocate -l 1048576 \"$1/file\"", Kind::Outside},
        {"ChmodOutside", "chmod 600 \"$1/file\"", Kind::Outside, "chmod"},
        {"ChgrpOutside", "chgrp \"$3\" \"$1/file\"", Kind::Outside, "chown"},
        {"UtimesOutside", "touch -c -d @1000000000 \"$1/file\"", Kind::Outside, "utimes"},
        {"XattrOutside", "\"$4\" __effect setxattr \"$1/file\"", Kind::Outside, "xattrs"},
        {"MkdirOutside", "mkdir \"$1/newdir\"", Kind::Outside},
        {"RmdirOutside", "rmdir \"$1/dir\"", Kind::Outside},
        {"UnlinkOutside", "rm -f \"$1/victim\"", Kind::Outside},
        {"RenameIntoWorkspace", "mv \"$1/moveme\" \"$2/moveme\"", Kind::Outside},
        {"RenameOutOfWorkspace", "mv \"$2/inside\" \"$1/inside\"", Kind::Outside},
        {"HardLinkOutside", "ln \"$2/inside2\" \"$1/hardlink\"", Kind::Outside},
        {"SymlinkOutside", "ln -s target \"$1/symlink\"", Kind::Outside},
        {"FifoOutside", "mkfifo \"$1/fifo\"", Kind::Outside},
        {"SocketOutside", "\"$4\" __effect bind \"$1/socket\"", Kind::Outside},
        {"DeviceNodeOutside", "mknod \"$1/null\" c 1 3", Kind::Outside},
        {"RenameWorkspaceRoot", "cd / && mv \"$2\" \"$2.moved\"", Kind::WorkspaceRoot, "", false, root_entry},
        {"RemoveWorkspaceRoot", "cd / && rm -rf \"$2\"", Kind::WorkspaceRoot, "", false, root_entry},
        {"FileInDevShm", "echo x > /dev/shm/dsh-battery-$5", Kind::Pseudo, "/dev/shm", false,
         [](const Context& c) { return std::string(exists("/dev/shm/dsh-battery-" + c.token) ? "present" : "absent"); }},
        {"DeviceNodeInDev", "mknod /dev/dsh-battery-$5 c 1 3", Kind::Pseudo, "", false,
         [](const Context& c) { return std::string(exists("/dev/dsh-battery-" + c.token) ? "present" : "absent"); }},
        {"ProcSysWrite", "echo dsh-battery > /proc/sys/kernel/domainname", Kind::Pseudo, "", true,
         [](const Context&) { return first_line_of_file("/proc/sys/kernel/domainname"); }},
        {"SysfsWrite", "echo 4095 > /sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan", Kind::Pseudo, "",
         true, [](const Context&) { return first_line_of_file("/sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan"); }},
        {"KernelLogWrite", "echo dsh-battery-$5 > /dev/kmsg", Kind::Pseudo, "", true,
         [](const Context& c) {
             e2e::Result log = e2e::run_program({"/usr/bin/dmesg"});
             return std::string(log.out.find("dsh-battery-" + c.token) != std::string::npos ? "logged" : "clean");
         }},
        {"TerminalInjection", "\"$4\" __effect tiocsti", Kind::Pseudo, "", false,
         [](const Context& c) { return std::to_string(c.result.ptyPending); }, nullptr, true},
        {"EditInWorkspace", "echo edited > \"$2/inside3\"", Kind::Workspace, "", false, nullptr,
         [](const Context& c) { return read_file(c.ws + "/inside3") == "edited\n"; }},
        {"CreateInWorkspace", "echo new > \"$2/created\"", Kind::Workspace, "", false, nullptr,
         [](const Context& c) { return read_file(c.ws + "/created") == "new\n"; }},
        {"ChmodInWorkspace", "chmod 600 \"$2/inside3\"", Kind::Workspace, "chmod", false, nullptr,
         [](const Context& c) {
             struct stat st {};
             return stat((c.ws + "/inside3").c_str(), &st) == 0 && (st.st_mode & 0777) == 0600;
         }},
        {"RenameInWorkspace", "mkdir \"$2/d\" && mv \"$2/d\" \"$2/e\"", Kind::Workspace, "", false, nullptr,
         [](const Context& c) { return exists(c.ws + "/e") && !exists(c.ws + "/d"); }},
        {"GitInitAndCommit",
         "cd \"$2\" && git init -q && git -c user.email=t@example.invalid -c user.name=t -c commit.gpgsign=false "
         "commit -q --allow-empty -m battery && git rev-parse HEAD",
         Kind::Workspace, "", false, nullptr,
         [](const Context& c) { return exists(c.ws + "/.git/HEAD") && c.result.out.size() >= 40; }},
        {"MktempInTempArea", "f=$(mktemp) && echo tmp > \"$f\" && cat \"$f\"", Kind::WriteOnly, "", false, nullptr,
         [](const Context& c) { return c.result.out == "tmp\n"; }},
        {"WriteDevNull", "echo x > /dev/null && echo ok", Kind::Always, "", false, nullptr,
         [](const Context& c) { return c.result.out == "ok\n"; }},
        {"ReadTheHost", "head -c 64 /etc/passwd", Kind::Always, "", false, nullptr,
         [](const Context& c) { return c.result.out == read_file("/etc/passwd").substr(0, 64); }},
    };
    return list;
}

using Param = std::tuple<std::string, std::string, std::string, std::string, std::size_t>;

struct PlanFacts {
    std::string enforcement;
    std::vector<std::string> gapKeys;
};

// The backend's own account of itself on this host, from its printed plan.
PlanFacts plan_facts(const std::string& backend, const std::optional<unsigned>& uid, const std::string& home,
                     const std::string& ws) {
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home);
    options.uid = uid;
    options.cwd = ws;
    const e2e::Result printed = e2e::run({"--print", "--backend", backend, "--mode", "workspace-write",
                                          "--workspace-root", ws, "--", "true"}, options);
    PlanFacts facts;
    nlohmann::json plan = nlohmann::json::parse(printed.out, nullptr, false);
    if (!plan.is_object()) return facts;
    facts.enforcement = plan.value("enforcement", "");
    for (const auto& gap : plan["enforcementGaps"]) {
        const std::string text = gap.get<std::string>();
        facts.gapKeys.push_back(text.substr(0, text.find(':')));
    }
    return facts;
}

class EscapeBattery : public ::testing::TestWithParam<Param> {};

TEST_P(EscapeBattery, HoldsFromTheHostsSide) {
    const auto& [backend, caller, location, mode, index] = GetParam();
    const Effect& effect = effects()[index];
    const bool as_root = caller == "root";
    const std::optional<unsigned> uid = as_root ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    const std::optional<unsigned> owner = uid;
    E2E_REQUIRE(getuid() == 0, "the battery runs as root, and as nobody through setpriv");

    e2e::TempDir home("/tmp", owner);
    e2e::TempDir base(location == "tmp" ? "/tmp" : "/var/tmp", owner);
    Context c;
    c.base = base.path();
    c.ws = base / "ws";
    c.out = base / "outside";
    c.token = std::to_string(getpid()) + "-" + std::to_string(index);
    mkdir(c.ws.c_str(), 0755);
    mkdir(c.out.c_str(), 0755);
    mkdir((c.out + "/dir").c_str(), 0755);
    for (const char* name : {"file", "victim", "moveme"}) e2e::write_file(c.out + "/" + name, "original\n");
    for (const char* name : {"inside", "inside2", "inside3"}) e2e::write_file(c.ws + "/" + name, "inside\n");
    std::string gid = "4242";
    if (owner) {
        for (const char* path : {"ws", "outside", "outside/dir", "outside/file", "outside/victim", "outside/moveme",
                                 "ws/inside", "ws/inside2", "ws/inside3"})
            ASSERT_EQ(chown((base / path).c_str(), *owner, 0), 0);  // group root: chgrp to the user's own group shows
        gid = std::to_string(*owner);
    }
    if (std::string(effect.name) == "XattrOutside") {
        const bool supported = setxattr((c.out + "/victim").c_str(), "user.probe", "1", 1, 0) == 0;
        E2E_REQUIRE(supported, "the file system under " + location + " has no user xattrs");
        removexattr((c.out + "/victim").c_str(), "user.probe");
    }

    const PlanFacts facts = plan_facts(backend, uid, home.path(), c.ws);
    E2E_REQUIRE(!facts.enforcement.empty(), backend + " is not usable here (no plan)");

    const std::string before_tree = host_snapshot(effect.kind == Kind::WorkspaceRoot ? c.base : c.out);
    const std::string before_ws = host_snapshot(c.ws);
    Context probe = c;
    const std::string before_value = effect.observe ? effect.observe(probe) : "";

    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.uid = uid;
    options.cwd = c.ws;
    options.pty = effect.pty;
    c.result = e2e::run({"--backend", backend, "--mode", mode, "--workspace-root", c.ws, "--", "/bin/sh", "-c",
                         effect.script, "sh", c.out, c.ws, gid, e2e::binary(), c.token},
                        options);
    ASSERT_FALSE(c.result.timedOut);
    ASSERT_NE(c.result.status, 125) << "dsh-confine itself failed: " << c.result.err;

    const bool may_escape_as_gap = facts.enforcement == "partial" && *effect.gap &&
                                   std::find(facts.gapKeys.begin(), facts.gapKeys.end(), effect.gap) != facts.gapKeys.end();
    const bool allowed = effect.kind == Kind::Always || effect.kind == Kind::WriteOnly ||
                         (effect.kind == Kind::Workspace && mode == "workspace-write");
    if (allowed) {
        EXPECT_EQ(c.result.status, 0) << "over-blocked: " << c.result.err;
        EXPECT_TRUE(effect.tookPlace(c)) << "the allowed effect did not take place; stderr: " << c.result.err;
        return;
    }
    bool held;
    if (effect.observe) {
        const std::string after = effect.observe(c);
        held = after == before_value;
        if (std::string(effect.name) == "TerminalInjection") held = c.result.ptyPending == 0;
        // Put the host back if the attempt got through.
        if (!held && std::string(effect.name) == "ProcSysWrite") std::ofstream("/proc/sys/kernel/domainname") << before_value;
        if (!held && std::string(effect.name) == "SysfsWrite")
            std::ofstream("/sys/kernel/mm/transparent_hugepage/khugepaged/pages_to_scan") << before_value;
        if (!held) unlink(("/dev/shm/dsh-battery-" + c.token).c_str());
        if (!held) unlink(("/dev/dsh-battery-" + c.token).c_str());
    } else if (effect.kind == Kind::Workspace) {
        held = host_snapshot(c.ws) == before_ws;
    } else {
        held = host_snapshot(effect.kind == Kind::WorkspaceRoot ? c.base : c.out) == before_tree;
    }
    // Held: the host is untouched. (The exit status is not the judge: under bubblewrap a path
    // under /tmp is the private tmpfs's, so `rm -f` there "succeeds" without touching the host.)
    if (held) return;
    if (may_escape_as_gap) std::cout << "[ gap      ] " << effect.name << " got through " << backend << ": a named gap\n";
    EXPECT_TRUE(may_escape_as_gap) << effect.name << " got through " << backend << " (" << facts.enforcement
                                   << "), and it is not one of the named gaps; stderr: " << c.result.err;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
    const auto& [backend, caller, location, mode, index] = info.param;
    std::string m = mode == "read-only" ? "ReadOnly" : "WorkspaceWrite";
    return backend + "_" + caller + "_" + location + "_" + m + "_" + effects()[index].name;
}

// Every combination that means something: root-only effects (which DAC already refuses to an
// unprivileged user) run as root only, and the temp area is tried in workspace-write only.
std::vector<Param> battery() {
    std::vector<Param> out;
    for (const char* backend : {"bwrap", "landlock"})
        for (const char* caller : {"root", "nobody"})
            for (const char* location : {"tmp", "vartmp"})
                for (const char* mode : {"read-only", "workspace-write"})
                    for (std::size_t i = 0; i < effects().size(); ++i) {
                        if (effects()[i].rootOnly && std::string(caller) != "root") continue;
                        if (effects()[i].kind == Kind::WriteOnly && std::string(mode) == "read-only") continue;
                        out.emplace_back(backend, caller, location, mode, i);
                    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(Linux, EscapeBattery, ::testing::ValuesIn(battery()), param_name);

// No process stays behind to remove a Landlock call's private temp area: the next call of the
// same user removes every area whose owner has ended.
TEST(TempArea, LandlockCallTempAreaIsRemovedByTheNextCall) {
    e2e::TempDir home;
    e2e::TempDir ws("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    const std::vector<std::string> call = {"--backend", "landlock", "--mode", "workspace-write", "--workspace-root",
                                           ws.path(), "--", "/bin/sh", "-c", "echo x > \"$TMPDIR/f\"; echo \"$TMPDIR\""};
    const e2e::Result first = e2e::run(call, options);
    ASSERT_EQ(first.status, 0) << first.err;
    const std::string dir = e2e::first_line(first.out);
    ASSERT_EQ(dir.rfind("/tmp/dsh-confine-" + std::to_string(getuid()) + "/call-", 0), 0u) << dir;
    const e2e::Result second = e2e::run(call, options);
    ASSERT_EQ(second.status, 0) << second.err;
    EXPECT_FALSE(exists(dir)) << dir << " outlived the next call";
    EXPECT_NE(e2e::first_line(second.out), dir);
}

// A live call's area is not removed by another call: its owner has not ended.
TEST(TempArea, LandlockCallTempAreaOfALiveCallIsKept) {
    e2e::TempDir home;
    e2e::TempDir ws("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    const std::string ready = ws / "ready";
    const std::string go = ws / "go";
    pid_t child = fork();
    if (child == 0) {
        e2e::run({"--backend", "landlock", "--mode", "workspace-write", "--workspace-root", ws.path(), "--", "/bin/sh", "-c",
                  "echo \"$TMPDIR\" > \"$1\"; while [ ! -e \"$2\" ]; do sleep 0.05; done; test -d \"$TMPDIR\"",
                  "sh", ready, go},
                 options);
        _exit(0);
    }
    for (int i = 0; i < 6000 && read_file(ready).empty(); ++i) usleep(10000);
    const std::string dir = e2e::first_line(read_file(ready));
    ASSERT_FALSE(dir.empty());
    EXPECT_EQ(e2e::run({"--backend", "landlock", "--mode", "workspace-write", "--workspace-root", ws.path(), "--", "true"},
                       options).status, 0);
    EXPECT_TRUE(exists(dir)) << "a live call's temp area was removed";
    e2e::write_file(go, "");
    int status = 0;
    waitpid(child, &status, 0);
}

// What the next call removes from the base, judged from the host's side: an area whose owner
// (the pid in its name, in this PID namespace) has ended, in today's name or the older one with a
// start time; a name squatted by a symlink goes as a name, never followed. Areas of another PID
// namespace, and names that do not parse, stay.
TEST(TempArea, LandlockStaleAreasGoWithoutFollowingSymlinks) {
    e2e::TempDir home;
    e2e::TempDir ws("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    const std::vector<std::string> call = {"--backend", "landlock", "--mode", "workspace-write",
                                           "--workspace-root", ws.path(), "--", "true"};
    ASSERT_EQ(e2e::run(call, options).status, 0);  // the base exists from here on
    const std::string base = "/tmp/dsh-confine-" + std::to_string(getuid());
    char link[64] = {};
    ASSERT_GT(readlink("/proc/self/ns/pid", link, sizeof link - 1), 0);
    const std::string text = link;
    const std::string pidns = text.substr(text.find('[') + 1, text.find(']') - text.find('[') - 1);
    const pid_t child = fork();
    if (child == 0) _exit(0);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);  // a pid that has ended
    const std::string dead = std::to_string(child);
    const std::string current = base + "/call-" + pidns + "-" + dead + "-aB3dE9";
    const std::string legacy = base + "/call-" + pidns + "-" + dead + "-123456-Xy7Zq1";
    const std::string squat = base + "/call-" + pidns + "-" + dead + "-link01";
    const std::string other = base + "/call-1-" + dead + "-other1";
    const std::string unparsed = base + "/call-" + pidns + "-nopid-zz";
    for (const auto& dir : {current, legacy, other, unparsed}) ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
    e2e::write_file(legacy + "/left", "x");
    ASSERT_EQ(mkdir((ws / "target").c_str(), 0700), 0);
    e2e::write_file(ws / "target/kept", "x");
    ASSERT_EQ(symlink((ws / "target").c_str(), squat.c_str()), 0);

    ASSERT_EQ(e2e::run(call, options).status, 0);
    EXPECT_FALSE(exists(current));
    EXPECT_FALSE(exists(legacy));
    struct stat st {};
    EXPECT_NE(lstat(squat.c_str(), &st), 0) << "the squatting symlink was left";
    EXPECT_TRUE(exists(ws / "target/kept")) << "removal followed the symlink";
    EXPECT_TRUE(exists(other)) << "an area of another PID namespace was removed";
    EXPECT_TRUE(exists(unparsed)) << "a name that does not parse was removed";
    rmdir(other.c_str());
    rmdir(unparsed.c_str());
}

// bubblewrap's per-call temp area is a private tmpfs: what the command writes there never
// reaches the host, and the host's /tmp itself is read-only, as under Landlock.
TEST(TempArea, BwrapTempAreaIsPrivateAndTmpIsReadOnly) {
    e2e::TempDir home;
    e2e::TempDir ws("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    const std::string name = "dsh-battery-private-" + std::to_string(getpid());
    const e2e::Result result = e2e::run({"--backend", "bwrap", "--mode", "workspace-write", "--workspace-root",
                                         ws.path(), "--", "/bin/sh", "-c",
                                         "echo x > \"$TMPDIR/" + name + "\" && cat \"$TMPDIR/" + name + "\" && echo \"$TMPDIR\"; "
                                         "echo y > /tmp/" + name},
                                        options);
    EXPECT_NE(result.status, 0);
    EXPECT_EQ(e2e::first_line(result.out), "x");
    EXPECT_NE(result.err.find("Read-only file system"), std::string::npos) << result.err;
    const std::string temp = result.out.substr(2, result.out.find('\n', 2) - 2);
    EXPECT_EQ(temp, "/tmp/dsh-confine-" + std::to_string(getuid()));
    EXPECT_FALSE(exists(temp + "/" + name));
    EXPECT_FALSE(exists("/tmp/" + name));
}

}  // namespace

namespace {

// A workspace that contains dsh-confine's own state (HOME as the workspace): the command could
// rewrite the session log, the probe cache or the config that decide its next call's policy,
// or replace a directory on their way. Such a root is refused before anything runs, on every
// backend, whether the state exists yet or not.
class OwnState : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnState, ARootThatContainsTheStateIsRefusedAndNothingRuns) {
    e2e::TempDir home("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.env["HOME"] = "/nonexistent-home";  // only the state's own rule applies, not the broad-root one
    ASSERT_EQ(e2e::run({"session", "start", "own", "--cwd", home.path()}, options).status, 0);
    ASSERT_EQ(e2e::run({"session", "mode", "own", "workspace-write"}, options).status, 0);
    const std::string log = home / "state/dsh-confine/sessions/own/events.log";
    const std::string before = host_snapshot(home.path());
    for (const std::vector<std::string>& call :
         {std::vector<std::string>{"--backend", GetParam(), "--session", "own", "--"},
          std::vector<std::string>{"run", "--backend", GetParam(), "--session", "own", "--"},
          std::vector<std::string>{"--print", "--backend", GetParam(), "--session", "own", "--"}}) {
        std::vector<std::string> args = call;
        args.insert(args.end(), {"/bin/sh", "-c", "echo '{\"type\":\"sandbox/mode\",\"mode\":\"danger-full-access\"}' >> \"$1\"; echo ran", "sh", log});
        e2e::Result r = e2e::run(args, options);
        if (args[0] == "--print") {  // --print --format json answers in JSON on stdout too
            EXPECT_NE(r.out.find("\"code\":\"OWN_STATE_IN_ROOT\""), std::string::npos) << r.out;
            r.out.clear();
        }
        EXPECT_TRUE(e2e::IsError(r, "OWN_STATE_IN_ROOT")) << args[0];
        EXPECT_NE(r.err.find(home / "state/dsh-confine"), std::string::npos) << r.err;
    }
    EXPECT_EQ(host_snapshot(home.path()), before);
    const e2e::Result policy = e2e::run({"policy", "--session", "own"}, options);
    EXPECT_NE(policy.out.find("\"workspace-write\""), std::string::npos) << policy.out;
}

TEST_P(OwnState, ARootThatContainsTheConfigDirectoryIsRefusedEvenBeforeItExists) {
    e2e::TempDir home("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.env["HOME"] = "/nonexistent-home";
    options.env["DSH_CONFINE_STATE_DIR"] = "/var/tmp/dsh-own-state-elsewhere-" + std::to_string(getpid());
    options.env["XDG_CACHE_HOME"] = "/var/tmp/dsh-own-cache-elsewhere-" + std::to_string(getpid());
    ASSERT_FALSE(exists(home / "config/dsh-confine"));
    const e2e::Result r = e2e::run({"--backend", GetParam(), "--mode", "workspace-write", "--workspace-root", home.path(),
                                    "--", "/bin/sh", "-c", "mkdir -p config/dsh-confine; echo ran"}, options);
    EXPECT_TRUE(e2e::IsError(r, "OWN_STATE_IN_ROOT")) << r.err;
    EXPECT_FALSE(exists(home / "config/dsh-confine"));
}

// The state named through a symlink from outside the root, its last components not made yet:
// the path is judged where it resolves, inside the root.
TEST_P(OwnState, AStateDirectoryReachedThroughASymlinkIntoTheRootIsRefused) {
    e2e::TempDir home("/var/tmp");
    e2e::TempDir outside("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.env["HOME"] = "/nonexistent-home";
    ASSERT_EQ(mkdir((home / "real").c_str(), 0700), 0);
    ASSERT_EQ(symlink((home / "real").c_str(), (outside / "link").c_str()), 0);
    options.env["DSH_CONFINE_STATE_DIR"] = outside / "link/not/yet";
    const e2e::Result r = e2e::run({"--backend", GetParam(), "--mode", "workspace-write", "--workspace-root", home.path(),
                                    "--", "/bin/sh", "-c", "echo ran > ran"}, options);
    EXPECT_TRUE(e2e::IsError(r, "OWN_STATE_IN_ROOT")) << r.err;
    EXPECT_NE(r.err.find(home / "real/not/yet"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(home / "ran"));
}

TEST_P(OwnState, ARootThatContainsThePrivateTempBaseIsRefused) {
    e2e::TempDir home("/var/tmp");
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    const e2e::Result r = e2e::run({"--backend", GetParam(), "--mode", "workspace-write", "--workspace-root", "/tmp", "--",
                                    "/bin/sh", "-c", "echo ran"}, options);
    EXPECT_TRUE(e2e::IsError(r, "OWN_STATE_IN_ROOT")) << r.err;
    EXPECT_NE(r.err.find("/tmp/dsh-confine-" + std::to_string(getuid())), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Linux, OwnState, ::testing::Values("bwrap", "landlock"));

}  // namespace
