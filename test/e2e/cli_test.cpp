// The command-line surface of the built binary: version and help, policy resolution as
// `policy` prints it, every bad input dsh-confine refuses (125, one error line, nothing run),
// PROGRAM lookup (126/127), the printed plan in both formats, and the exec path's real
// confinement. A sentinel file the command would create proves whether it ran.
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using e2e::IsError;

json parse(const std::string& text) { return json::parse(text, nullptr, false); }

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

std::string canonical(const std::string& path) { return fs::canonical(path).string(); }

using e2e::backend_usable;

class Cli : public ::testing::Test {
protected:
    e2e::TempDir home;     // HOME, XDG dirs and the state dir
    e2e::TempDir scratch;  // workspaces, configs, sentinels

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.env["DSH_CONFINE_STATE_DIR"] = home / "st";
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }
    e2e::Result dsh(const std::vector<std::string>& args, const e2e::RunOptions& o) const { return e2e::run(args, o); }

    std::string config(const std::string& text, const std::string& name = "config.toml") const {
        const std::string path = scratch / name;
        e2e::write_file(path, text);
        return path;
    }
    std::string dir(const std::string& name) const {
        fs::create_directories(scratch / name);
        return scratch / name;
    }
    std::string sentinel() const { return scratch / "sentinel"; }
    json policy(const std::vector<std::string>& extra) const {
        std::vector<std::string> args = {"policy"};
        args.insert(args.end(), extra.begin(), extra.end());
        const e2e::Result r = dsh(args);
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "");
        return parse(r.out);
    }
};

// --- version and help -------------------------------------------------------------------

TEST_F(Cli, VersionPrintsNameAndVersion) {
    const e2e::Result r = dsh({"--version"});
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(r.out.rfind("dsh-confine ", 0), 0u) << r.out;
    EXPECT_GT(r.out.size(), std::string("dsh-confine \n").size());
}

TEST_F(Cli, HelpShowsExamples) {
    const e2e::Result r = dsh({"--help"});
    EXPECT_EQ(r.status, 0);
    EXPECT_TRUE(contains(r.out, "Examples")) << r.out;
}

TEST_F(Cli, TopLevelHelpListsEverySubcommandHoweverItIsAsked) {
    // The main job is parsed without the subcommands defined (they cost start-up time); help,
    // however it is spelled, must still list them all.
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"--help"}, {"-h"}, {"-vh"}, {"--mode", "read-only", "--help"}, {"--print", "-h", "--", "ls"},
             {"--session", "doctor", "--help"}, {"--session", "session", "--mode", "classify", "-h"}}) {
        const e2e::Result r = dsh(args);
        EXPECT_EQ(r.status, 0) << args.front() << ": " << r.err;
        // Every one, in the same order whatever the command line named (here as option values).
        std::size_t previous = 0;
        for (const char* sub : {"run", "policy", "classify", "doctor", "session"}) {
            const std::size_t at = r.out.find(std::string("  ") + sub + " ");
            EXPECT_NE(at, std::string::npos) << sub << " missing from help:\n" << r.out;
            if (at == std::string::npos) continue;
            EXPECT_GT(at, previous) << sub << " out of order in help:\n" << r.out;
            previous = at;
        }
        EXPECT_FALSE(contains(r.out, "__effect")) << r.out;
        // The runners a printed plan invokes are not subcommands to type: not listed among them.
        for (const char* runner : {"  landlock-exec ", "  restricted-token-exec ", "  bwrap-stage "})
            EXPECT_FALSE(contains(r.out, runner)) << runner << " listed in help:\n" << r.out;
        EXPECT_TRUE(contains(r.out, "Usage: dsh-confine [OPTIONS] [--] PROGRAM [ARG...]")) << r.out;
    }
}

TEST_F(Cli, EverySubcommandsHelpShowsItsOwnExamples) {
    // Each subcommand's --help carries examples of that subcommand, not the top-level ones.
    const std::vector<std::vector<std::string>> subcommands = {
        {"run"},          {"policy"},        {"classify"},      {"doctor"},
        {"session"},      {"session", "start"}, {"session", "mode"}, {"session", "show"},
        {"session", "end"}, {"landlock-exec"}, {"restricted-token-exec"}};
    for (const auto& words : subcommands) {
        std::vector<std::string> args = words;
        args.push_back("--help");
        const e2e::Result r = dsh(args);
        std::string name = "dsh-confine";
        for (const auto& w : words) name += " " + w;
        EXPECT_EQ(r.status, 0) << name << ": " << r.err;
        const std::size_t examples = r.out.find("Examples:");
        ASSERT_NE(examples, std::string::npos) << name << " --help has no examples:\n" << r.out;
        const std::string tail = r.out.substr(examples);
        EXPECT_TRUE(contains(tail, name + " ")) << name << " --help shows no example of itself:\n" << r.out;
        EXPECT_FALSE(contains(tail, "cat /etc/os-release"))
            << name << " --help repeats the top-level examples:\n" << r.out;
    }
}

// --- policy resolution ------------------------------------------------------------------

TEST_F(Cli, PolicyAgentlessHasModeAndRootButNoSessionId) {
    const std::string ws = dir("ws");
    const json p = policy({"--workspace-root", ws});
    ASSERT_TRUE(p.is_object());
    EXPECT_EQ(p["mode"], "read-only");  // the built-in default
    EXPECT_EQ(p["workspaceRoot"], canonical(ws));
    EXPECT_FALSE(p.contains("sessionId")) << p.dump();
}

TEST_F(Cli, PolicyModeOptionBeatsConfigDefaultMode) {
    const std::string file = config("[sandbox]\ndefault_mode = \"workspace-write\"\n");
    const json p = policy({"--config", file, "--mode", "read-only"});
    EXPECT_EQ(p["mode"], "read-only");
}

TEST_F(Cli, PolicyConfigDefaultModeAppliesWithoutModeOption) {
    // Found through the lookup order: $XDG_CONFIG_HOME/dsh-confine/config.toml.
    fs::create_directories(home / "config/dsh-confine");
    e2e::write_file(home / "config/dsh-confine/config.toml", "[sandbox]\ndefault_mode = \"workspace-write\"\n");
    const json p = policy({});
    EXPECT_EQ(p["mode"], "workspace-write");
}

TEST_F(Cli, PolicyConfigWorkspaceRootAppliesWithoutRootOption) {
    const std::string root = dir("configured");
    const std::string file = config("[sandbox]\nworkspace_root = \"" + root + "\"\n");
    const json p = policy({"--config", file});
    EXPECT_EQ(p["workspaceRoot"], canonical(root));
}

TEST_F(Cli, PolicyRootOptionBeatsConfigWorkspaceRoot) {
    const std::string configured = dir("configured");
    const std::string given = dir("given");
    const std::string file = config("[sandbox]\nworkspace_root = \"" + configured + "\"\n");
    const json p = policy({"--config", file, "--workspace-root", given});
    EXPECT_EQ(p["workspaceRoot"], canonical(given));
}

TEST_F(Cli, PolicyFallsBackToTheCanonicalCwd) {
    const std::string real = dir("real");
    fs::create_directory_symlink(real, scratch / "link");
    e2e::RunOptions o = options();
    o.cwd = scratch / "link";
    const e2e::Result r = dsh({"policy"}, o);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(parse(r.out)["workspaceRoot"], canonical(real));
}

TEST_F(Cli, PolicyLinkDotDotIsThePhysicalParentOfTheTarget) {
    const std::string target = dir("a/b");
    fs::create_directory_symlink(target, scratch / "link");
    // Lexically `link/..` is the scratch dir; physically it is the parent of a/b.
    const json p = policy({"--workspace-root", scratch / "link/.."});
    EXPECT_EQ(p["workspaceRoot"], canonical(scratch / "a"));
}

// --- bad input: 125, one line, nothing runs ---------------------------------------------
// The command is `touch SENTINEL` in danger-full-access (or a mode whose fallback would let
// it run), so only dsh-confine's refusal keeps the sentinel from appearing.

TEST_F(Cli, UnknownModeIsUsageError) {
    const std::string file = config("[sandbox]\ndefault_mode = \"danger-full-access\"\n");
    const e2e::Result r = dsh({"--config", file, "--mode", "bogus", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "bogus"));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, RelativeWorkspaceRootIsRefused) {
    const e2e::Result r =
        dsh({"--mode", "danger-full-access", "--workspace-root", "relative/dir", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT"));
    EXPECT_TRUE(contains(r.err, "not an absolute path")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, MissingWorkspaceRootIsRefused) {
    const e2e::Result r =
        dsh({"--mode", "danger-full-access", "--workspace-root", scratch / "missing", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT"));
    EXPECT_TRUE(contains(r.err, "does not exist")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, RegularFileWorkspaceRootIsRefused) {
    e2e::write_file(scratch / "file", "x");
    const e2e::Result r =
        dsh({"--mode", "danger-full-access", "--workspace-root", scratch / "file", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT"));
    EXPECT_TRUE(contains(r.err, "not a directory")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, DanglingSymlinkWorkspaceRootIsRefused) {
    fs::create_directory_symlink(scratch / "nowhere", scratch / "dangling");
    const e2e::Result r =
        dsh({"--mode", "danger-full-access", "--workspace-root", scratch / "dangling", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT"));
    EXPECT_TRUE(contains(r.err, "dangling symlink")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, SymlinkLoopWorkspaceRootIsRefused) {
    fs::create_directory_symlink(scratch / "loop-b", scratch / "loop-a");
    fs::create_directory_symlink(scratch / "loop-a", scratch / "loop-b");
    const e2e::Result r =
        dsh({"--mode", "danger-full-access", "--workspace-root", scratch / "loop-a", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT"));
    EXPECT_TRUE(contains(r.err, "symlink loop")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, NoProgramIsUsageError) {
    EXPECT_TRUE(IsError(dsh({"--mode", "danger-full-access"}), "USAGE"));
}

TEST_F(Cli, NoProgramAfterDashesIsUsageError) {
    EXPECT_TRUE(IsError(dsh({"--mode", "danger-full-access", "--"}), "USAGE"));
}

// The proxy's own process (what a call in the hosts network executes beside the command) takes
// descriptors it was given: by hand, each malformed form is one line and 125, and nothing serves.
TEST_F(Cli, TheProxysOwnProcessRefusesMalformedArguments) {
    const std::vector<std::vector<std::string>> cases = {
        {"__proxy"},
        {"__proxy", "4", "-", "-", "-"},                              // no "--"
        {"__proxy", "x", "-", "-", "-", "--", "example.org"},         // not a number
        {"__proxy", "1", "-", "-", "-", "--", "example.org"},         // stdout is no pidfd
        {"__proxy", "-", "-", "-", "-", "--", "example.org"},         // an owner is required
        {"__proxy", "4", "-", "-", "3,,5", "--", "example.org"},      // an empty listener
        {"__proxy", "4", "-", "-", "3,4,5,6,7", "--", "example.org"}, // more than the stage sends
        {"__proxy", "4", "-", "-", "-", "--", "*.org"},               // a pattern the CLI refuses
    };
    for (const auto& args : cases) {
        const e2e::Result r = dsh(args);
        EXPECT_EQ(r.status, 125) << args.size() << ": " << r.err;
        EXPECT_EQ(r.out, "");
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("dsh-confine: error: PROXY: __proxy: ", 0), 0u) << r.err;
    }
}

// A repeatable option takes one value each time, as `env` or `timeout` would read the line:
// the next word is the PROGRAM, without `--` too.
TEST_F(Cli, ARepeatableOptionTakesOneValueEachTime) {
    E2E_REQUIRE(backend_usable("bwrap") || backend_usable("landlock"), "no usable backend on this host");
    const std::string workspace = dir("ws"), beside = dir("beside");
    const std::vector<std::vector<std::string>> lines = {
        {"--mode", "read-only", "--deny-read", scratch / "absent", "printf", "ran"},
        {"--mode", "read-only", "--deny-read=" + (scratch / "absent"), "--deny-read", scratch / "other", "printf", "ran"},
        {"--mode", "read-only", "--allow-host", "a.example.test", "--allow-host", "b.example.test", "printf", "ran"},
        {"--mode", "workspace-write", "--workspace-root", workspace, "--writable-root", beside, "printf", "ran"},
        {"run", "--mode", "read-only", "--limit", "pids=256", "--limit", "fsize=1G", "printf", "ran"},
    };
    for (const auto& line : lines) {
        const e2e::Result r = dsh(line);
        EXPECT_EQ(r.status, 0) << line[2] << ": " << r.err;
        EXPECT_EQ(r.out, "ran") << line[2];
    }
    // Two words after one --allow-host: the second is the program (not found here), not a pattern.
    const e2e::Result two = dsh({"--mode", "read-only", "--allow-host", "a.example.test", "no-such-program-x", "true"});
    EXPECT_EQ(two.status, 127) << two.err;
    EXPECT_TRUE(contains(two.err, "COMMAND_NOT_FOUND")) << two.err;
    // A line written for a repeatable option that took every word up to the next option, with a
    // `--` still to come, is refused rather than run with its second value as the program.
    for (const std::vector<std::string>& line :
         {std::vector<std::string>{"--mode", "read-only", "--deny-read", scratch / "absent", "/usr/bin/touch", "--", sentinel()},
          std::vector<std::string>{"run", "--mode", "read-only", "--deny-read=" + (scratch / "absent"), "/usr/bin/touch", "--",
                                   sentinel()}}) {
        const e2e::Result refused = dsh(line);
        EXPECT_TRUE(IsError(refused, "USAGE")) << refused.err;
        EXPECT_TRUE(contains(refused.err, "follows the value of --deny-read")) << refused.err;
        EXPECT_FALSE(fs::exists(sentinel()));
    }
    const json plan = parse(dsh({"--print", "--mode", "read-only", "--allow-host", "a.example.test", "--allow-host",
                                 "b.example.test", "--", "true"}).out);
    EXPECT_EQ(plan["policy"]["network"], json({{"mode", "hosts"}, {"allow", {"a.example.test", "b.example.test"}}})) << plan.dump();
}

TEST_F(Cli, ConfigUnknownKeyNamesPositionAndSuggestion) {
    const std::string file = config("[sandbox]\ndefault_mode = \"danger-full-access\"\nworkspace_rot = \"/\"\n");
    const e2e::Result r = dsh({"--config", file, "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, file + ":3:1:")) << r.err;
    EXPECT_TRUE(contains(r.err, "did you mean 'workspace_root'")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, ConfigWrongTypeIsError) {
    const std::string file = config("[sandbox]\ndefault_mode = \"danger-full-access\"\nworkspace_root = 3\n");
    const e2e::Result r = dsh({"--config", file, "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, file + ":3:")) << r.err;
    EXPECT_TRUE(contains(r.err, "must be a string")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, ConfigSyntaxErrorNamesPosition) {
    const std::string file = config("[sandbox]\ndefault_mode = \"danger-full-access\"\n[provider\n");
    const e2e::Result r = dsh({"--config", file, "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, file + ":3:")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, ConfigOptionNamingMissingFileIsError) {
    const e2e::Result r =
        dsh({"--config", scratch / "missing.toml", "--mode", "danger-full-access", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, scratch / "missing.toml")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, ConfigEnvironmentNamingMissingFileIsError) {
    e2e::RunOptions o = options();
    o.env["DSH_CONFINE_CONFIG"] = scratch / "missing.toml";
    const e2e::Result r = dsh({"--mode", "danger-full-access", "--", "touch", sentinel()}, o);
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, "DSH_CONFINE_CONFIG")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, UnknownSessionIsError) {
    const e2e::Result r = dsh({"--session", "nope", "--mode", "danger-full-access", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "SESSION"));
    EXPECT_TRUE(contains(r.err, "'nope'")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, WorkspaceRootContradictingSessionCwdIsError) {
    const std::string ws = dir("ws");
    const std::string other = dir("other");
    ASSERT_EQ(dsh({"session", "start", "s1", "--cwd", ws}).status, 0);
    const e2e::Result r = dsh({"--session", "s1", "--workspace-root", other, "--mode", "danger-full-access", "--",
                               "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT"));
    EXPECT_TRUE(contains(r.err, "contradicts")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, UnknownBackendSuggestsTheClosestName) {
    const std::string ws = dir("ws");
    const e2e::Result r = dsh({"--mode", "workspace-write", "--workspace-root", ws, "--backend", "bwarp", "--", "touch",
                               ws + "/sentinel"});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "did you mean 'bwrap'")) << r.err;
    EXPECT_FALSE(e2e::exists(ws + "/sentinel"));
}

TEST_F(Cli, BadLogLevelIsUsageError) {
    const e2e::Result r = dsh({"--log-level", "bogus", "--mode", "danger-full-access", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

// Path-traversing session IDs, for --session and for `session start`.
class TraversingId : public Cli, public ::testing::WithParamInterface<std::string> {};

TEST_P(TraversingId, RefusedForSessionOption) {
    const e2e::Result r = dsh({"--session", GetParam(), "--mode", "danger-full-access", "--", "touch", sentinel()});
    EXPECT_TRUE(IsError(r, "SESSION"));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_P(TraversingId, RefusedForSessionStart) {
    const std::string ws = dir("ws");
    const e2e::Result r = dsh({"session", "start", GetParam(), "--cwd", ws});
    EXPECT_TRUE(IsError(r, "SESSION"));
    // Resolved against <state>/sessions/, the IDs would land here.
    EXPECT_FALSE(e2e::exists(home / "st/x"));
    EXPECT_FALSE(e2e::exists(home / "st/session.json"));
    EXPECT_FALSE(e2e::exists(home / "st/sessions/a"));
}

std::string traversing_id_name(const ::testing::TestParamInfo<std::string>& param) {
    const char* names[] = {"DotDotSlashX", "DotDot", "Slash"};
    return names[param.index];
}

INSTANTIATE_TEST_SUITE_P(Ids, TraversingId, ::testing::Values("../x", "..", "a/b"), traversing_id_name);

// An option given with an empty value is taken as not given: `--session "$S"` with S unset
// runs agentless (config's mode, cwd root) instead of failing. Found bug, see the report.
class EmptyValue : public Cli, public ::testing::WithParamInterface<std::string> {};

TEST_P(EmptyValue, IsRefusedNotIgnored) {
    const std::string file = config("[sandbox]\ndefault_mode = \"danger-full-access\"\n");
    const e2e::Result r = dsh({"--config", file, GetParam(), "", "--", "touch", sentinel()});
    EXPECT_EQ(r.status, 125) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

std::string empty_value_name(const ::testing::TestParamInfo<std::string>& param) {
    const char* names[] = {"Session", "WorkspaceRoot", "Mode"};
    return names[param.index];
}

INSTANTIATE_TEST_SUITE_P(Options, EmptyValue, ::testing::Values("--session", "--workspace-root", "--mode"),
                         empty_value_name);

// Policy options before a subcommand are accepted and then dropped: `dsh-confine --mode
// bogus policy` prints read-only and exits 0. Found bug, see the report.
TEST_F(Cli, PolicyOptionBeforeSubcommandIsNotIgnored) {
    const e2e::Result r = dsh({"--mode", "workspace-write", "policy"});
    const json p = parse(r.out);
    const bool applied = r.status == 0 && p.is_object() && p["mode"] == "workspace-write";
    const bool refused = r.status == 125 && r.err.rfind("dsh-confine: error: USAGE: ", 0) == 0;
    EXPECT_TRUE(applied || refused) << "status " << r.status << " stdout " << r.out << " stderr " << r.err;
}

// --- PROGRAM lookup ---------------------------------------------------------------------

// The same answer whatever enforces the call.
class ProgramLookup : public Cli, public ::testing::WithParamInterface<std::vector<std::string>> {};

TEST_P(ProgramLookup, NotFoundIs127AndNothingRuns) {
    // An executable `tool` in the cwd, which PATH does not name: a lookup that fell back to
    // the cwd would run it.
    const std::string cwd = dir("cwd");
    e2e::write_file(cwd + "/dsh-e2e-tool", "#!/bin/sh\ntouch " + sentinel() + "\n");
    fs::permissions(cwd + "/dsh-e2e-tool", fs::perms::owner_all);
    e2e::RunOptions o = options();
    o.cwd = cwd;
    std::vector<std::string> args = GetParam();
    args.insert(args.end(), {"--", "dsh-e2e-tool"});
    const e2e::Result r = dsh(args, o);
    EXPECT_TRUE(IsError(r, "COMMAND_NOT_FOUND", 127));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_P(ProgramLookup, NotExecutableIs126AndNothingRuns) {
    const std::string script = scratch / "not-executable";
    e2e::write_file(script, "#!/bin/sh\ntouch " + sentinel() + "\n");
    fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
    std::vector<std::string> args = GetParam();
    args.insert(args.end(), {"--", script});
    const e2e::Result r = dsh(args);
    EXPECT_TRUE(IsError(r, "COMMAND_NOT_EXECUTABLE", 126));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

const std::vector<std::vector<std::string>> kLookupPaths = {
    {}, {"--backend", "bwrap"}, {"--backend", "landlock"}, {"--mode", "danger-full-access"}};

std::string lookup_path_name(const ::testing::TestParamInfo<std::vector<std::string>>& param) {
    const char* names[] = {"DefaultChain", "Bwrap", "Landlock", "DangerFullAccess"};
    return names[param.index];
}

INSTANTIATE_TEST_SUITE_P(Paths, ProgramLookup, ::testing::ValuesIn(kLookupPaths), lookup_path_name);

// --- danger-full-access: the original argv, exec'd ---------------------------------------

TEST_F(Cli, DangerFullAccessPassesTheExitStatusThrough) {
    const e2e::Result r = dsh({"--mode", "danger-full-access", "--", "sh", "-c", "exit 7"});
    EXPECT_EQ(r.status, 7) << r.err;
    EXPECT_EQ(r.err, "");
}

TEST_F(Cli, DangerFullAccessRunsTheArgvUnchanged) {
    const e2e::Result r =
        dsh({"--mode", "danger-full-access", "--", "/usr/bin/printf", "%s|", "a b", "--", "-x", ""});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "a b|--|-x||");
}

// --- the printed plan -------------------------------------------------------------------

TEST_F(Cli, PrintRunsNothing) {
    const e2e::Result r = dsh({"--mode", "danger-full-access", "--print", "--", "touch", sentinel()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(Cli, PrintJsonIsByteIdenticalTwice) {
    E2E_REQUIRE(backend_usable("bwrap") || backend_usable("landlock"), "no usable backend on this host");
    const std::string ws = dir("ws");
    const std::vector<std::string> args = {"--mode", "workspace-write", "--workspace-root", ws, "--print",
                                           "--format", "json", "--", "sh", "-c", "echo hi"};
    const e2e::Result first = dsh(args);
    const e2e::Result second = dsh(args);
    ASSERT_EQ(first.status, 0) << first.err;
    EXPECT_FALSE(first.out.empty());
    EXPECT_EQ(first.out, second.out);
}

TEST_F(Cli, PrintJsonHasTheContractFields) {
    E2E_REQUIRE(backend_usable("bwrap") || backend_usable("landlock"), "no usable backend on this host");
    const std::string ws = dir("ws");
    const std::vector<std::string> argv = {"sh", "-c", "echo 'hi there'"};
    std::vector<std::string> args = {"--mode", "workspace-write", "--workspace-root", ws, "--print", "--format", "json", "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    const e2e::Result r = dsh(args);
    ASSERT_EQ(r.status, 0) << r.err;
    const json plan = parse(r.out);
    ASSERT_TRUE(plan.is_object()) << r.out;
    for (const char* field : {"argv", "backend", "enforcement", "enforcementGaps", "denialSignatures",
                              "runnerFailureRules", "policy", "writableRoots"})
        EXPECT_TRUE(plan.contains(field)) << field;
    ASSERT_TRUE(plan["argv"].is_array());
    const auto words = plan["argv"].get<std::vector<std::string>>();
    ASSERT_GE(words.size(), argv.size());
    EXPECT_TRUE(std::equal(argv.begin(), argv.end(), words.end() - static_cast<std::ptrdiff_t>(argv.size())));
    EXPECT_TRUE(plan["backend"].is_string());
    EXPECT_TRUE(plan["enforcement"] == "full" || plan["enforcement"] == "partial");
    EXPECT_EQ(plan["enforcement"] == "full", plan["enforcementGaps"].empty());
    ASSERT_TRUE(plan["policy"].is_object());
    EXPECT_EQ(plan["policy"]["mode"], "workspace-write");
    EXPECT_EQ(plan["policy"]["workspaceRoot"], canonical(ws));
    EXPECT_FALSE(plan["policy"].contains("sessionId"));
    ASSERT_TRUE(plan["runnerFailureRules"].is_array());
    ASSERT_FALSE(plan["runnerFailureRules"].empty());
    EXPECT_FALSE(plan["runnerFailureRules"][0]["fatalSignatures"].empty());
    const auto roots = plan["writableRoots"].get<std::vector<std::string>>();
    EXPECT_NE(std::find(roots.begin(), roots.end(), canonical(ws)), roots.end());
}

TEST_F(Cli, PrintJsonDangerFullAccessHasNoBackendAndNoEnforcement) {
    const e2e::Result r = dsh({"--mode", "danger-full-access", "--print", "--format", "json", "--", "true"});
    ASSERT_EQ(r.status, 0) << r.err;
    const json plan = parse(r.out);
    ASSERT_TRUE(plan.is_object()) << r.out;
    EXPECT_TRUE(plan["backend"].is_null());
    EXPECT_TRUE(plan["enforcement"].is_null());
    EXPECT_EQ(plan["argv"], json::array({"true"}));
    EXPECT_EQ(plan["policy"]["mode"], "danger-full-access");
}

TEST_F(Cli, PrintShellLineReproducesTheArgvUnderSh) {
    const std::vector<std::string> argv = {
        "/usr/bin/printf", "[%s]\\n", "a b", "it's", "\"dq\"", "$HOME", "`id`", "$(id)", "back\\slash", "new\nline",
        "", "-n", "--", "h\xc3\xa9llo \xe2\x9c\x93", "*", "~", "a;b|c&d>e", "tab\there", "!x", "'"};
    std::vector<std::string> args = {"--mode", "danger-full-access", "--print", "--format", "shell", "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    const e2e::Result printed = dsh(args);
    ASSERT_EQ(printed.status, 0) << printed.err;
    const e2e::Result direct = e2e::run_program(argv, options());
    const e2e::Result through_sh = e2e::run_program({"/bin/sh", "-c", printed.out}, options());
    ASSERT_EQ(direct.status, 0);
    EXPECT_EQ(through_sh.status, 0) << through_sh.err;
    EXPECT_EQ(through_sh.out, direct.out) << "printed: " << printed.out;
}

TEST_F(Cli, PrintJsonWithUnusableBackendReportsTheCandidates) {
    const std::string file = config("[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = dsh({"--config", file, "--backend", "bwrap", "--print", "--format", "json", "--", "true"});
    EXPECT_EQ(r.status, 125);
    EXPECT_EQ(r.err.rfind("dsh-confine: error: SANDBOX_UNAVAILABLE: ", 0), 0u) << r.err;
    const json error = parse(r.out);
    ASSERT_TRUE(error.is_object()) << r.out;
    EXPECT_EQ(error["error"]["code"], "SANDBOX_UNAVAILABLE");
    ASSERT_TRUE(error["error"]["candidates"].is_array());
    ASSERT_FALSE(error["error"]["candidates"].empty());
    EXPECT_EQ(error["error"]["candidates"][0]["backend"], "bwrap");
    EXPECT_TRUE(error["error"]["candidates"][0]["reason"].is_string());
}

TEST_F(Cli, UnusableSoleBackendFailsClosed) {
    const std::string ws = dir("ws");
    const std::string file = config("[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = dsh({"--config", file, "--backend", "bwrap", "--mode", "workspace-write", "--workspace-root",
                               ws, "--", "touch", ws + "/sentinel"});
    EXPECT_TRUE(IsError(r, "SANDBOX_UNAVAILABLE"));
    EXPECT_FALSE(e2e::exists(ws + "/sentinel"));
}

// --- logging ----------------------------------------------------------------------------

TEST_F(Cli, VerboseLogsGoToStderrOnly) {
    const e2e::Result r = dsh({"-vvv", "--mode", "danger-full-access", "--print", "--format", "json", "--", "true"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "dsh-confine: ")) << "no log line on stderr";
    const json plan = parse(r.out);
    EXPECT_TRUE(plan.is_object()) << r.out;
}

// --- the exec path confines (bwrap, the default) ----------------------------------------

class Confined : public Cli {
protected:
    void SetUp() override { E2E_REQUIRE(backend_usable("bwrap"), "bwrap is not usable on this host"); }
};

TEST_F(Confined, WorkspaceWriteAllowsAWriteInTheWorkspace) {
    const std::string ws = dir("ws");
    const e2e::Result r =
        dsh({"--mode", "workspace-write", "--workspace-root", ws, "--", "sh", "-c", "echo inside > " + ws + "/file"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(e2e::read_file(ws + "/file"), "inside\n");
}

TEST_F(Confined, WorkspaceWriteDeniesAWriteOutsideTheWorkspace) {
    const std::string ws = dir("ws");
    // Outside /tmp, which workspace-write replaces with a private one.
    e2e::TempDir outside("/var/tmp");
    const e2e::Result r = dsh({"--mode", "workspace-write", "--workspace-root", ws, "--", "sh", "-c",
                               "echo outside > " + outside / "file"});
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(contains(r.err, "Read-only file system")) << r.err;
    EXPECT_FALSE(e2e::exists(outside / "file"));
}

TEST_F(Confined, ReadOnlyDeniesAWriteInTheWorkspace) {
    const std::string ws = dir("ws");
    const e2e::Result r =
        dsh({"--mode", "read-only", "--workspace-root", ws, "--", "sh", "-c", "echo inside > " + ws + "/file"});
    EXPECT_NE(r.status, 0);
    EXPECT_TRUE(contains(r.err, "Read-only file system")) << r.err;
    EXPECT_FALSE(e2e::exists(ws + "/file"));
}

// bwrap_argv puts a fresh tmpfs (or the session's temp area) on /tmp, which hides a cwd
// under /tmp: bwrap fails with "Can't chdir to" and the command never runs, where Landlock
// runs it. Found bug, see the report.
TEST_F(Confined, WorkspaceWriteRunsFromACwdUnderTmpOutsideTheWorkspace) {
    e2e::TempDir ws("/var/tmp");
    e2e::RunOptions o = options();
    o.cwd = dir("cwd");  // under /tmp
    const e2e::Result r =
        dsh({"--mode", "workspace-write", "--workspace-root", ws.path(), "--", "touch", ws / "sentinel"}, o);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(e2e::exists(ws / "sentinel"));
}

TEST_F(Confined, RequireFullWithBwrapRuns) {
    const std::string ws = dir("ws");
    const e2e::Result r = dsh({"--mode", "workspace-write", "--workspace-root", ws, "--backend", "bwrap",
                               "--require-full", "--", "touch", ws + "/sentinel"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(e2e::exists(ws + "/sentinel"));
}

TEST_F(Cli, RequireFullRefusesLandlockAndNothingRuns) {
    E2E_REQUIRE(backend_usable("landlock"), "Landlock is not usable on this host");
    const std::string ws = dir("ws");
    const e2e::Result r = dsh({"--mode", "workspace-write", "--workspace-root", ws, "--backend", "landlock",
                               "--require-full", "--", "touch", ws + "/sentinel"});
    EXPECT_TRUE(IsError(r, "ENFORCEMENT_PARTIAL"));
    EXPECT_FALSE(e2e::exists(ws + "/sentinel"));
}

}  // namespace
