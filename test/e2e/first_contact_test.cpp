// First contact (issue #22): what a new user meets when they type the command. Help shows how
// PROGRAM is given and every subcommand's logging options; a misspelt subcommand, mode or value
// gets a hint; options that cannot apply are refused before anything runs; `--print --format
// json` answers every failure in JSON too; messages say what was wrong; a config too large and
// a bad $SPDLOG_LEVEL are refused; -q and -v; `classify --plan -`. A sentinel file the command
// would create proves whether anything ran.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::IsError;
using nlohmann::json;

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

json parse(const std::string& text) { return json::parse(text, nullptr, false); }

class FirstContact : public ::testing::Test {
protected:
    e2e::TempDir home;     // HOME, XDG dirs and the state dir
    e2e::TempDir scratch;  // workspaces, configs, sentinels

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.env["DSH_CONFINE_STATE_DIR"] = home / "st";
        o.cwd = scratch.path();
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }
    e2e::Result dsh(const std::vector<std::string>& args, const e2e::RunOptions& o) const { return e2e::run(args, o); }

    std::string config(const std::string& text, const std::string& name = "config.toml") const {
        const std::string path = scratch / name;
        e2e::write_file(path, text);
        return path;
    }
    std::string sentinel() const { return scratch / "sentinel"; }
    // A command that would prove it ran, in danger-full-access unless the call says otherwise.
    std::vector<std::string> touch() const { return {"--", "touch", sentinel()}; }
};

std::vector<std::string> operator+(std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
}

// --- help ----------------------------------------------------------------------------------------

TEST_F(FirstContact, RunHelpShowsProgramAfterItsOptions) {
    const e2e::Result r = dsh({"run", "--help"});
    EXPECT_EQ(r.status, 0) << r.err;
    const std::size_t usage = r.out.find("Usage: dsh-confine run [OPTIONS]");
    ASSERT_NE(usage, std::string::npos) << r.out;
    EXPECT_TRUE(contains(e2e::first_line(r.out.substr(usage)), "[--] PROGRAM [ARG...]")) << r.out;
}

TEST_F(FirstContact, EverySubcommandsHelpListsVerboseQuietAndLogLevel) {
    const std::vector<std::vector<std::string>> subcommands = {
        {"run"},           {"policy"},          {"classify"},        {"doctor"},          {"session"},
        {"session", "start"}, {"session", "mode"}, {"session", "network"}, {"session", "show"}, {"session", "end"}};
    for (const auto& words : subcommands) {
        const e2e::Result r = dsh(words + std::vector<std::string>{"--help"});
        const std::string name = words.size() == 1 ? words[0] : words[0] + " " + words[1];
        EXPECT_EQ(r.status, 0) << name << ": " << r.err;
        for (const char* option : {"-v,--verbose", "-q,--quiet", "--log-level"})
            EXPECT_TRUE(contains(r.out, option)) << name << " --help lacks " << option << ":\n" << r.out;
    }
}

// --- a hint for what was probably meant ---------------------------------------------------------

TEST_F(FirstContact, HelpAsAProgramIs127WithAHintToDashDashHelp) {
    const e2e::Result r = dsh({"help"});
    EXPECT_TRUE(IsError(r, "COMMAND_NOT_FOUND", 127));
    EXPECT_TRUE(contains(r.err, "dsh-confine --help")) << r.err;
}

TEST_F(FirstContact, AMisspeltSubcommandIs127WithDidYouMean) {
    const e2e::Result r = dsh({"doctr"});
    EXPECT_TRUE(IsError(r, "COMMAND_NOT_FOUND", 127));
    EXPECT_TRUE(contains(r.err, "the subcommand 'doctor'")) << r.err;
}

TEST_F(FirstContact, AMisspeltModeGetsDidYouMean) {
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "read-onyl"} + touch());
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "did you mean 'read-only'")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(FirstContact, AnUnknownNetworkIsOneLineNamingTheValues) {
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "danger-full-access", "--network", "maybe"} + touch());
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "'maybe'")) << r.err;
    EXPECT_TRUE(contains(r.err, "allow, deny")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

// --- options that cannot apply are refused -----------------------------------------------------

TEST_F(FirstContact, FormatWithoutPrintIsRefusedAndNothingRuns) {
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "danger-full-access", "--format", "shell"} + touch());
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "--print")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(FirstContact, RequireFullInDangerFullAccessIsRefusedAndNothingRuns) {
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "danger-full-access", "--require-full"} + touch());
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "--require-full")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(FirstContact, BackendInDangerFullAccessIsRefusedAndNothingRuns) {
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "danger-full-access", "--backend", "bwrap"} + touch());
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "--backend")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

// Given after the subcommand's name, the advice to put it there would be wrong.
TEST_F(FirstContact, ModeAfterDoctorDoesNotApplyToDoctor) {
    const e2e::Result r = dsh({"doctor", "--mode", "read-only"});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "does not apply to 'dsh-confine doctor'")) << r.err;
    EXPECT_FALSE(contains(r.err, "go after its name")) << r.err;
}

// --- --print --format json answers every failure in JSON -----------------------------------------

struct JsonFailure {
    std::string name;
    std::vector<std::string> args;  // before `--print --format json -- PROGRAM`
    std::string program;
    std::string code;
    int status;
};

void PrintTo(const JsonFailure& failure, std::ostream* out) { *out << failure.name; }

class PrintJsonFailure : public FirstContact, public ::testing::WithParamInterface<JsonFailure> {};

TEST_P(PrintJsonFailure, IsOneJsonErrorOnStdoutAndTheLineOnStderr) {
    const JsonFailure& failure = GetParam();
    if (failure.code == "ENFORCEMENT_PARTIAL")
        E2E_REQUIRE(e2e::backend_usable("landlock"), "Landlock is not usable on this host");
    std::vector<std::string> args;
    for (const std::string& arg : failure.args) args.push_back(arg == "CONFIG_FILE" ? scratch / "config.toml" : arg);
    config(failure.code == "CONFIG" ? "[sandbox\n" : "[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = dsh(args + std::vector<std::string>{"--print", "--format", "json", "--", failure.program});
    EXPECT_EQ(r.status, failure.status) << r.err;
    EXPECT_EQ(r.err.rfind("dsh-confine: error: " + failure.code + ": ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "not one line: " << r.out;
    const json answer = parse(r.out);
    ASSERT_TRUE(answer.is_object()) << r.out;
    EXPECT_EQ(answer["error"]["code"], failure.code) << r.out;
    ASSERT_TRUE(answer["error"]["message"].is_string()) << r.out;
    // The message on stdout is the one on stderr.
    EXPECT_EQ("dsh-confine: error: " + failure.code + ": " + answer["error"]["message"].get<std::string>() + "\n", r.err);
}

INSTANTIATE_TEST_SUITE_P(
    Failures, PrintJsonFailure,
    ::testing::Values(
        JsonFailure{"SandboxUnavailable", {"--config", "CONFIG_FILE", "--backend", "bwrap"}, "true", "SANDBOX_UNAVAILABLE", 125},
        JsonFailure{"EnforcementPartial", {"--backend", "landlock", "--require-full"}, "true", "ENFORCEMENT_PARTIAL", 125},
        JsonFailure{"UsageAfterParsing", {"--mode", "bogus"}, "true", "USAGE", 125},
        JsonFailure{"UsageOfAnOptionThatCannotApply", {"--mode", "read-only", "--writable-root", "/var/tmp"}, "true", "USAGE", 125},
        JsonFailure{"CommandNotFound", {}, "dsh-e2e-no-such-program", "COMMAND_NOT_FOUND", 127},
        JsonFailure{"BadConfig", {"--config", "CONFIG_FILE"}, "true", "CONFIG", 125}),
    [](const ::testing::TestParamInfo<JsonFailure>& failure) { return failure.param.name; });

// JSON holds UTF-8 only: a working directory named otherwise is a WORKSPACE_ROOT error that says
// so, not an INTERNAL one.
TEST_F(FirstContact, ANonUtf8WorkingDirectoryIsWorkspaceRootWithARealMessage) {
    const std::string cwd = scratch / "not-utf8-\xff";
    fs::create_directory(cwd);
    e2e::RunOptions o = options();
    o.cwd = cwd;
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"policy"}, std::vector<std::string>{"--mode", "danger-full-access", "--", "touch", sentinel()}}) {
        const e2e::Result r = dsh(args, o);
        EXPECT_TRUE(IsError(r, "WORKSPACE_ROOT")) << args[0];
        EXPECT_TRUE(contains(r.err, "UTF-8")) << r.err;
    }
    const e2e::Result printed = dsh({"--print", "--format", "json", "--", "true"}, o);
    EXPECT_EQ(printed.status, 125);
    EXPECT_EQ(parse(printed.out)["error"]["code"], "WORKSPACE_ROOT") << printed.out;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

// --- messages ------------------------------------------------------------------------------------

TEST_F(FirstContact, AnUnknownSessionActionListsTheActionsWithDidYouMean) {
    const e2e::Result r = dsh({"session", "stop", "s1"});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "unknown session action 'stop'")) << r.err;
    EXPECT_TRUE(contains(r.err, "did you mean 'show'")) << r.err;
    EXPECT_TRUE(contains(r.err, "start, mode, network, show, end")) << r.err;
}

TEST_F(FirstContact, AnUnknownOptionOfSessionStartIsNamed) {
    const e2e::Result r = dsh({"session", "start", "-x", "--cwd", "/tmp"});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "unknown option '-x'")) << r.err;
    EXPECT_FALSE(e2e::exists(home / "st/sessions"));
}

// The same unknown option gets the same words whether or not the subcommand lacks something
// else: named as an option of that subcommand (a nested one included), with did-you-mean.
TEST_F(FirstContact, AnUnknownOptionAfterACompleteSubcommandIsNamed) {
    const e2e::Result policy = dsh({"policy", "--mdoe", "read-only"});
    EXPECT_TRUE(IsError(policy, "USAGE"));
    EXPECT_TRUE(contains(policy.err, "unknown option '--mdoe' for 'dsh-confine policy' (did you mean '--mode'?)")) << policy.err;
    const e2e::Result start = dsh({"session", "start", "s1", "--cwd", scratch.path(), "-x"});
    EXPECT_TRUE(IsError(start, "USAGE"));
    EXPECT_TRUE(contains(start.err, "unknown option '-x' for 'dsh-confine session start'")) << start.err;
    EXPECT_FALSE(e2e::exists(home / "st/sessions/s1"));
}

TEST_F(FirstContact, AnOptionGivenTwiceIsSaidSo) {
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "danger-full-access", "--mode", "read-only"} + touch());
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "--mode is given 2 times")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(FirstContact, AnExitCodeBeyondEveryIntegerIsOutOfRange) {
    const e2e::Result r = dsh({"classify", "--backend", "bwrap", "--exit-code", "99999999999999999999"});
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "out of range")) << r.err;
}

TEST_F(FirstContact, ADirectoryAsClassifysStderrIsSaidSo) {
    const e2e::Result r = dsh({"classify", "--backend", "bwrap", "--exit-code", "1", "--stderr", "/tmp"});
    EXPECT_TRUE(IsError(r, "INPUT"));
    EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;
}

// A root-owned 0600 file, read by nobody: the errno's text, not a bare "cannot be read".
TEST_F(FirstContact, AnUnreadableConfigGivesTheErrnoText) {
    E2E_REQUIRE(getuid() == 0, "runs as root, and as nobody through setpriv");
    chmod(scratch.path().c_str(), 0755);
    const std::string file = config("[sandbox]\ndefault_mode = \"danger-full-access\"\n");
    chmod(file.c_str(), 0600);
    e2e::RunOptions o = options();
    o.uid = e2e::kNobody;
    o.cwd = "/";
    const e2e::Result r = dsh({"policy", "--config", file}, o);
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, file + ": cannot be read: Permission denied")) << r.err;
}

TEST_F(FirstContact, SessionStartCwdDotIsTheCurrentDirectory) {
    const std::string ws = scratch / "ws";
    fs::create_directory(ws);
    e2e::RunOptions o = options();
    o.cwd = ws;
    const e2e::Result started = dsh({"session", "start", "s1", "--cwd", "."}, o);
    ASSERT_EQ(started.status, 0) << started.err;
    const e2e::Result shown = dsh({"session", "show", "s1"});
    EXPECT_EQ(parse(shown.out)["cwd"], fs::canonical(ws).string()) << shown.out;
}

// --- limits --------------------------------------------------------------------------------------

// 2 MiB of one comment: refused by its size, without parsing it.
TEST_F(FirstContact, AConfigOverOneMebibyteIsRefusedQuickly) {
    const std::string file = config("#" + std::string(2 << 20, 'x') + "\n");
    const auto began = std::chrono::steady_clock::now();
    const e2e::Result r = dsh(std::vector<std::string>{"--config", file} + touch());
    const auto took = std::chrono::steady_clock::now() - began;
    EXPECT_TRUE(IsError(r, "CONFIG"));
    EXPECT_TRUE(contains(r.err, "1 MiB")) << r.err;
    // Refused by its size: well within what a parse of 2 MiB would take, with room for an
    // instrumented build on a loaded host (a hang guard with a margin, not a measurement).
    EXPECT_LT(took, std::chrono::seconds(10));
    EXPECT_FALSE(e2e::exists(sentinel()));
}

TEST_F(FirstContact, ANonsenseSpdlogLevelIsRefusedLikeABadLogLevel) {
    e2e::RunOptions o = options();
    o.env["SPDLOG_LEVEL"] = "nonsense";
    const e2e::Result r = dsh(std::vector<std::string>{"--mode", "danger-full-access"} + touch(), o);
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "SPDLOG_LEVEL")) << r.err;
    EXPECT_TRUE(contains(r.err, "'nonsense'")) << r.err;
    EXPECT_FALSE(e2e::exists(sentinel()));
}

// --- -q, -v ----------------------------------------------------------------------------------------

// A torn last line in a session's log is a warning: printed by default, not with -q. An error
// still is.
TEST_F(FirstContact, QuietShowsErrorsOnly) {
    ASSERT_EQ(dsh({"session", "start", "s1", "--cwd", scratch.path()}).status, 0);
    ASSERT_EQ(dsh({"session", "mode", "s1", "workspace-write"}).status, 0);
    std::FILE* log = std::fopen((home / "st/sessions/s1/events.log").c_str(), "a");
    ASSERT_NE(log, nullptr);
    std::fputs("{\"type\":\"sandbox/mode\",\"mo", log);
    std::fclose(log);
    const e2e::Result loud = dsh({"session", "show", "s1"});
    ASSERT_EQ(loud.status, 0) << loud.err;
    ASSERT_EQ(loud.err.rfind("dsh-confine: warn", 0), 0u) << "no warning to hide: " << loud.err;
    const e2e::Result quiet = dsh({"session", "show", "s1", "-q"});
    EXPECT_EQ(quiet.status, 0) << quiet.err;
    EXPECT_EQ(quiet.err, "");
    EXPECT_EQ(quiet.out, loud.out);
    EXPECT_TRUE(IsError(dsh({"-q", "--mode", "bogus", "--", "true"}), "USAGE"));
}

// The exec path under -v: one info line naming the runner and the argv it executes.
TEST_F(FirstContact, VerboseNamesTheRunnerArgvItExecutes) {
    E2E_REQUIRE(e2e::backend_usable("landlock"), "Landlock is not usable on this host");
    const e2e::Result r = dsh({"-v", "--backend", "landlock", "--", "true"});
    EXPECT_EQ(r.status, 0) << r.err;
    const std::string runner = fs::canonical(e2e::binary()).string() + " landlock-exec ";
    EXPECT_TRUE(contains(r.err, "dsh-confine: info: exec through landlock: " + runner)) << r.err;
}

TEST_F(FirstContact, VerboseNamesBubblewrapWhenItExecutesIt) {
    E2E_REQUIRE(e2e::backend_usable("bwrap"), "bwrap is not usable on this host");
    const e2e::Result r = dsh({"-v", "--backend", "bwrap", "--", "true"});
    EXPECT_EQ(r.status, 0) << r.err;
    const std::size_t at = r.err.find("dsh-confine: info: exec through bwrap: /");
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string line = e2e::first_line(r.err.substr(at));
    EXPECT_TRUE(contains(line, "bwrap ")) << line;
    EXPECT_TRUE(contains(line, " bwrap-stage ")) << line;
}

// --- classify --plan - -----------------------------------------------------------------------------

TEST_F(FirstContact, ClassifyReadsThePlanFromStdinAndStderrFromAFile) {
    const std::string err = scratch / "stderr.txt";
    e2e::write_file(err, "touch: cannot touch 'x': Read-only file system\n");
    e2e::RunOptions o = options();
    o.input = R"({"denialSignatures": ["read-only file system"],
                  "runnerFailureRules": [{"allowedExitCodes": [1], "fatalSignatures": ["bwrap: "]}]})";
    const e2e::Result r = dsh({"classify", "--plan", "-", "--stderr", err, "--exit-code", "1"}, o);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "denial") << r.out;
}

TEST_F(FirstContact, ClassifyPlanFromStdinWithoutStderrFileIsUsage) {
    e2e::RunOptions o = options();
    o.input = R"({"denialSignatures": ["x"], "runnerFailureRules": [{"fatalSignatures": ["y"]}]})";
    const e2e::Result r = dsh({"classify", "--plan", "-", "--exit-code", "1"}, o);
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_TRUE(contains(r.err, "--stderr")) << r.err;
}

}  // namespace
