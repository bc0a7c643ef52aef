// The Seatbelt builders: the embedded profiles, the sandbox-exec argv (golden files, with
// paths full of quotes, spaces, parentheses, backslashes and non-ASCII), the writable roots
// and the dialect. Set DSH_UPDATE_GOLDEN=1 to rewrite the golden files after a deliberate change.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/classify.hpp"
#include "platform/macos/seatbelt_argv.hpp"
#include "platform/macos/seatbelt_profiles.hpp"

namespace dsh {
namespace {

using Argv = std::vector<std::string>;

const std::string kNastyRoot = "/Users/u/my \"quoted\" (ws) \\back\\slash 'single' ünïcødé 日本 $HOME `x` ;";
const std::string kNastyTemp = "/private/var/folders/x y/T/dsh-confine (tmp) \"q\"";
const Argv kNastyCommand = {"bash", "-c", "echo \"$1\" > 'out file' ; (exit 3)", "--", "-D", "X=(param \"Y\")", ""};

SandboxPolicy policy_of(ConfinedSandboxMode mode, const std::string& root) {
    SandboxPolicy policy;
    policy.mode = mode;
    policy.workspaceRoot = root;
    return policy;
}

seatbelt::Layout layout_of(const std::string& temp, std::vector<std::string> protected_paths = {}) {
    return {"/usr/bin/sandbox-exec", temp, std::move(protected_paths)};
}

std::string golden_path(const std::string& name) { return std::string(DSH_SOURCE_DIR) + "/test/unit/golden/" + name; }

// Compares `actual` with the golden file, or rewrites it under DSH_UPDATE_GOLDEN.
void expect_golden(const std::string& name, const std::string& actual) {
    const std::string path = golden_path(name);
    if (std::getenv("DSH_UPDATE_GOLDEN")) {
        std::ofstream(path, std::ios::binary) << actual;
        return;
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path << " is missing (run with DSH_UPDATE_GOLDEN=1 to create it)";
    const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(actual, expected) << "golden file " << path << " differs";
}

std::string as_golden(const Argv& argv) { return nlohmann::json(argv).dump(2) + "\n"; }

// The names of every (param "NAME") the profile refers to.
std::set<std::string> referenced_params(const std::string& profile) {
    std::set<std::string> names;
    const std::regex param("\\(param \"([A-Z_0-9]+)\"\\)");
    for (auto it = std::sregex_iterator(profile.begin(), profile.end(), param); it != std::sregex_iterator(); ++it)
        names.insert((*it)[1]);
    return names;
}

// The names given with -D NAME=VALUE, checking each value is what `expected` says.
std::set<std::string> given_params(const Argv& argv) {
    std::set<std::string> names;
    const auto end = std::find(argv.begin(), argv.end(), "--");
    for (auto it = argv.begin(); it != end; ++it)
        if (*it == "-D" && it + 1 != end) names.insert((it + 1)->substr(0, (it + 1)->find('=')));
    return names;
}

TEST(SeatbeltProfiles, BothAreEmbedded) {
    ASSERT_TRUE(seatbelt::embedded_profile("read-only"));
    ASSERT_TRUE(seatbelt::embedded_profile("workspace-write"));
    EXPECT_FALSE(seatbelt::embedded_profile("nonesuch"));
    EXPECT_NE(seatbelt::embedded_profile("read-only")->find("(version 1)"), std::string_view::npos);
}

// Each rule that grants something says why, on the comment lines just above it.
TEST(SeatbeltProfiles, EveryAllowIsCommented) {
    for (const char* name : {"read-only", "workspace-write"}) {
        const std::string text(*seatbelt::embedded_profile(name));
        std::string previous;
        std::size_t start = 0;
        while (start < text.size()) {
            std::size_t end = text.find('\n', start);
            if (end == std::string::npos) end = text.size();
            const std::string line = text.substr(start, end - start);
            if (line.rfind("(allow", 0) == 0 || line.rfind("(deny", 0) == 0) {
                EXPECT_EQ(previous.rfind(";", 0), 0u) << name << ": no comment above " << line;
            }
            if (!line.empty() && line.front() != ' ') previous = line;
            start = end + 1;
        }
    }
}

// Variables come in as parameters only: the profile files name no path but fixed devices.
TEST(SeatbeltProfiles, NameNoVariablePath) {
    for (const char* name : {"read-only", "workspace-write"}) {
        const std::string text = seatbelt::strip_comments(*seatbelt::embedded_profile(name));
        const std::regex literal("\"(/[^\"]*)\"");
        for (auto it = std::sregex_iterator(text.begin(), text.end(), literal); it != std::sregex_iterator(); ++it)
            EXPECT_EQ((*it)[1].str().rfind("/dev/", 0), 0u) << name << " pastes a path: " << (*it)[1];
    }
}

TEST(SeatbeltProfiles, SinksAreExactlyThePosixShellSinks) {
    const std::string text(*seatbelt::embedded_profile("read-only"));
    std::vector<std::string> literals;
    const std::regex literal("\\(literal \"(/dev/[a-z]+)\"\\)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), literal); it != std::sregex_iterator(); ++it)
        literals.push_back((*it)[1]);
    EXPECT_EQ(literals, posix_shell_sinks());
}

TEST(SeatbeltProfiles, ParenthesesBalance) {
    for (auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite}) {
        const std::string text = seatbelt::profile(mode, 2, 3);
        int depth = 0;
        bool in_string = false;
        for (std::size_t i = 0; i < text.size(); ++i) {
            const char c = text[i];
            if (in_string) {
                if (c == '\\') ++i;
                else if (c == '"') in_string = false;
                continue;
            }
            if (c == '"') in_string = true;
            else if (c == '(') ++depth;
            else if (c == ')') --depth;
            ASSERT_GE(depth, 0) << text;
        }
        EXPECT_EQ(depth, 0) << text;
        EXPECT_FALSE(in_string);
    }
}

TEST(SeatbeltProfiles, StripCommentsKeepsRulesOnly) {
    EXPECT_EQ(seatbelt::strip_comments("; a\n\n(version 1)\n  ; b\n(allow default)\n   \n"), "(version 1)\n(allow default)\n");
    EXPECT_EQ(seatbelt::strip_comments("(deny file-write*)"), "(deny file-write*)\n");
}

TEST(SeatbeltArgv, ReadOnlyGolden) {
    const Argv argv = seatbelt::build_argv(layout_of(kNastyTemp), kNastyCommand,
                                           policy_of(ConfinedSandboxMode::ReadOnly, kNastyRoot));
    expect_golden("seatbelt-read-only.json", as_golden(argv));
}

TEST(SeatbeltArgv, WorkspaceWriteGolden) {
    const std::vector<std::string> own = {kNastyRoot + "/.state/dsh-confine", kNastyRoot + "/.config/dsh (cfg)/x.toml",
                                          "/Users/u/.cache/dsh-confine"};
    const Argv argv = seatbelt::build_argv(layout_of(kNastyTemp, own), kNastyCommand,
                                           policy_of(ConfinedSandboxMode::WorkspaceWrite, kNastyRoot));
    expect_golden("seatbelt-workspace-write.json", as_golden(argv));
}

TEST(SeatbeltArgv, ProfilesGolden) {
    expect_golden("seatbelt-read-only.sbpl", seatbelt::profile(ConfinedSandboxMode::ReadOnly, 0, 0));
    expect_golden("seatbelt-workspace-write.sbpl", seatbelt::profile(ConfinedSandboxMode::WorkspaceWrite, 2, 2));
}

TEST(SeatbeltArgv, ShapeIsRunnerProfileParamsSeparatorCommand) {
    const Argv argv = seatbelt::build_argv(layout_of(kNastyTemp), kNastyCommand,
                                           policy_of(ConfinedSandboxMode::ReadOnly, kNastyRoot));
    ASSERT_GE(argv.size(), 4 + kNastyCommand.size());
    EXPECT_EQ(argv[0], "/usr/bin/sandbox-exec");
    EXPECT_EQ(argv[1], "-p");
    EXPECT_EQ(argv[2], seatbelt::profile(ConfinedSandboxMode::ReadOnly, 0, 0));
    EXPECT_EQ(argv[3], "--");
    EXPECT_EQ(Argv(argv.begin() + 4, argv.end()), kNastyCommand);
}

// Every path travels as the value of a -D argument, byte for byte, and never in the profile.
TEST(SeatbeltArgv, PathsTravelAsParameterValuesOnly) {
    const std::vector<std::string> own = {kNastyRoot + "/.state/dsh-confine"};
    const Argv argv = seatbelt::build_argv(layout_of(kNastyTemp, own), kNastyCommand,
                                           policy_of(ConfinedSandboxMode::WorkspaceWrite, kNastyRoot));
    EXPECT_EQ(argv[2].find(kNastyRoot), std::string::npos);
    EXPECT_EQ(argv[2].find("ünïcødé"), std::string::npos);
    EXPECT_NE(std::find(argv.begin(), argv.end(), "WORKSPACE_ROOT=" + kNastyRoot), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "TEMP_DIR=" + kNastyTemp), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "PROTECTED_0=" + kNastyRoot + "/.state/dsh-confine"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "ANCHOR_0=" + kNastyRoot + "/.state"), argv.end());
}

// The profile refers to exactly the parameters the argv gives: an unbound one is a profile
// error at run time, an unused one a sign the builders disagree.
TEST(SeatbeltArgv, ParametersGivenAreExactlyThoseReferenced) {
    const std::vector<std::string> own = {kNastyRoot + "/a/b/state", kNastyRoot + "/c", "/elsewhere"};
    for (auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite}) {
        const Argv argv = seatbelt::build_argv(layout_of(kNastyTemp, own), kNastyCommand, policy_of(mode, kNastyRoot));
        EXPECT_EQ(referenced_params(argv[2]), given_params(argv)) << to_string(mode);
    }
}

TEST(SeatbeltArgv, ProtectedPathsOutsideTheWorkspaceNeedNoRule) {
    const Argv argv = seatbelt::build_argv(layout_of(kNastyTemp, {"/Users/u/.local/state/dsh-confine"}), {"true"},
                                           policy_of(ConfinedSandboxMode::WorkspaceWrite, "/Users/u/ws"));
    EXPECT_EQ(argv[2].find("PROTECTED_"), std::string::npos);
}

TEST(SeatbeltArgv, WorkspaceWriteSetsTmpdirThroughEnv) {
    const Argv argv = seatbelt::build_argv(layout_of("/private/tmp/t"), {"make", "-j2"},
                                           policy_of(ConfinedSandboxMode::WorkspaceWrite, "/Users/u/ws"));
    const auto dashes = std::find(argv.begin(), argv.end(), "--");
    ASSERT_NE(dashes, argv.end());
    EXPECT_EQ(Argv(dashes + 1, argv.end()), (Argv{"/usr/bin/env", "TMPDIR=/private/tmp/t", "make", "-j2"}));
    const Argv read_only = seatbelt::build_argv(layout_of("/private/tmp/t"), {"make"},
                                                policy_of(ConfinedSandboxMode::ReadOnly, "/Users/u/ws"));
    EXPECT_EQ(std::count(read_only.begin(), read_only.end(), "/usr/bin/env"), 0);
}

TEST(SeatbeltArgv, AProgramNamedWithAnEqualsSignIsNotTakenForAnAssignment) {
    const Argv argv = seatbelt::build_argv(layout_of("/private/tmp/t"), {"a=b", "x"},
                                           policy_of(ConfinedSandboxMode::WorkspaceWrite, "/Users/u/ws"));
    const auto dashes = std::find(argv.begin(), argv.end(), "--");
    EXPECT_EQ(Argv(dashes + 1, argv.end()),
              (Argv{"/usr/bin/env", "TMPDIR=/private/tmp/t", "/bin/sh", "-c", "exec \"$0\" \"$@\"", "a=b", "x"}));
}

TEST(SeatbeltWritableRoots, ReadOnlyIsTheSinksAndDevFd) {
    Argv expected = posix_shell_sinks();
    expected.push_back("/dev/fd");
    EXPECT_EQ(seatbelt::writable_roots(layout_of("/private/tmp/t"), policy_of(ConfinedSandboxMode::ReadOnly, "/Users/u/ws")),
              expected);
}

TEST(SeatbeltWritableRoots, WorkspaceWriteAddsTheRootAndTheTempArea) {
    const Argv roots = seatbelt::writable_roots(layout_of("/private/tmp/t"),
                                                policy_of(ConfinedSandboxMode::WorkspaceWrite, "/Users/u/ws"));
    ASSERT_GE(roots.size(), 2u);
    EXPECT_EQ(roots[0], "/Users/u/ws");
    EXPECT_EQ(roots[1], "/private/tmp/t");
}

Verdict verdict(const std::string& text, int exit_code) { return classify(seatbelt::dialect({}), text, exit_code).verdict; }

TEST(SeatbeltDialect, IsValid) { EXPECT_NO_THROW(validate_dialect(seatbelt::dialect({"x"}))); }

TEST(SeatbeltDialect, NestedSandboxIsARunnerFailure) {
    const Classification result =
        classify(seatbelt::dialect({}), "sandbox-exec: sandbox_apply: Operation not permitted\n", 71);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.rule, 1u);
}

TEST(SeatbeltDialect, ProfileAndUsageErrorsAreRunnerFailures) {
    EXPECT_EQ(verdict("sandbox-exec: unbound variable: TEMP_DIR\n", 65), Verdict::RunnerFailure);
    EXPECT_EQ(verdict("Usage: sandbox-exec [options] command [args]\n", 64), Verdict::RunnerFailure);
}

TEST(SeatbeltDialect, ExecvpFailureIsTheCommandsOwn) {
    EXPECT_EQ(verdict("sandbox-exec: execvp() of 'nope' failed: No such file or directory\n", 71), Verdict::Failure);
}

TEST(SeatbeltDialect, ExitStatusAloneProvesNothing) {
    EXPECT_EQ(verdict("make: *** [all] Error 71\n", 71), Verdict::Failure);
    EXPECT_EQ(verdict("sandbox-exec: sandbox_apply: Operation not permitted\n", 1), Verdict::Denial);
}

TEST(SeatbeltDialect, EpermIsADenial) {
    EXPECT_EQ(verdict("touch: /Users/u/x: Operation not permitted\n", 1), Verdict::Denial);
    EXPECT_EQ(verdict("go: open /x: operation not permitted\n", 1), Verdict::Denial);
    // npm names only the errno, which matches as a whole word.
    EXPECT_EQ(verdict("npm error code EPERM\n", 1), Verdict::Denial);
    EXPECT_EQ(verdict("error: EPERMANENT is not a code\n", 1), Verdict::Failure);
}

TEST(SeatbeltDialect, ExtraInformationalLinesAreKept) {
    const Dialect dialect = seatbelt::dialect({"sandbox-exec: benign"});
    for (const auto& rule : dialect.runnerFailureRules) EXPECT_EQ(rule.informationalLines, Argv{"sandbox-exec: benign"});
    EXPECT_NE(classify(dialect, "sandbox-exec: benign\n", 65).verdict, Verdict::RunnerFailure);
}

}  // namespace
}  // namespace dsh

namespace dsh {
namespace {

// The policy's dimensions beside the mode, each a parameterized rule after the mode's.
SandboxPolicy dimensions_policy() {
    SandboxPolicy policy;
    policy.mode = ConfinedSandboxMode::WorkspaceWrite;
    policy.workspaceRoot = "/Users/u/ws";
    policy.writableRoots = {"/Users/u/.npm"};
    policy.protectedPaths = {"/Users/u/ws/.git/hooks", "/Users/u/ws/.git/config"};
    policy.unreadablePaths = {"/Users/u/.ssh"};
    policy.network = NetworkPolicy::Deny;
    return policy;
}

std::string argument_after(const std::vector<std::string>& argv, const std::string& name) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "-D" && argv[i + 1].rfind(name + "=", 0) == 0) return argv[i + 1].substr(name.size() + 1);
    return "";
}

TEST(SeatbeltDimensions, EachDimensionIsARuleWithItsParameter) {
    const auto argv = seatbelt::build_argv({"/usr/bin/sandbox-exec", "/private/tmp/t"}, {"true"}, dimensions_policy());
    const std::string& profile = argv[2];
    EXPECT_NE(profile.find("(allow file-write* (subpath (param \"WRITABLE_ROOT_0\")))"), std::string::npos) << profile;
    EXPECT_NE(profile.find("(deny file-write* file-link (subpath (param \"PROTECTED_1\")))"), std::string::npos) << profile;
    EXPECT_NE(profile.find("(deny file-write-unlink (literal (param \"ANCHOR_0\")))"), std::string::npos) << profile;
    EXPECT_NE(profile.find("(deny file-read* (subpath (param \"UNREADABLE_0\")))"), std::string::npos) << profile;
    EXPECT_NE(profile.find("(deny network*)"), std::string::npos) << profile;
    EXPECT_EQ(argument_after(argv, "WRITABLE_ROOT_0"), "/Users/u/.npm");
    EXPECT_EQ(argument_after(argv, "UNREADABLE_0"), "/Users/u/.ssh");
    EXPECT_EQ(argument_after(argv, "ANCHOR_0"), "/Users/u/ws/.git");
    EXPECT_EQ(referenced_params(profile), given_params(argv));
}

TEST(SeatbeltDimensions, TheDenialsComeAfterEveryAllow) {
    const std::string profile =
        seatbelt::build_argv({"/usr/bin/sandbox-exec", "/private/tmp/t"}, {"true"}, dimensions_policy())[2];
    const std::size_t last_allow = profile.rfind("(allow ");
    for (const char* rule : {"(param \"PROTECTED_0\")", "(param \"UNREADABLE_0\")", "(deny network*)"})
        EXPECT_GT(profile.find(rule), last_allow) << rule;
}

TEST(SeatbeltDimensions, NoneOfThemWithoutThePolicyAskingForIt) {
    SandboxPolicy plain;
    plain.mode = ConfinedSandboxMode::WorkspaceWrite;
    plain.workspaceRoot = "/Users/u/ws";
    const std::string profile = seatbelt::build_argv({"/usr/bin/sandbox-exec", "/private/tmp/t"}, {"true"}, plain)[2];
    for (const char* rule : {"WRITABLE_ROOT_", "PROTECTED_", "UNREADABLE_", "network"})
        EXPECT_EQ(profile.find(rule), std::string::npos) << rule;
}

TEST(SeatbeltDimensions, ReadOnlyHidesAndDeniesTheNetworkToo) {
    SandboxPolicy policy = dimensions_policy();
    policy.mode = ConfinedSandboxMode::ReadOnly;
    const auto argv = seatbelt::build_argv({"/usr/bin/sandbox-exec", "/private/tmp/t"}, {"true"}, policy);
    EXPECT_NE(argv[2].find("(deny network*)"), std::string::npos);
    EXPECT_EQ(argument_after(argv, "UNREADABLE_0"), "/Users/u/.ssh");
    EXPECT_EQ(argument_after(argv, "WRITABLE_ROOT_0"), "");  // read-only writes nothing
}

TEST(SeatbeltDimensions, TheHostsNetworkIsDeniedAndNamed) {
    // No allow-list proxy under Seatbelt: nothing leaves, and the plan says the hosts do not either.
    SandboxPolicy policy = dimensions_policy();
    policy.network = NetworkPolicy::Hosts;
    policy.allowHosts = {"registry.npmjs.org"};
    const auto argv = seatbelt::build_argv({"/usr/bin/sandbox-exec", "/private/tmp/t"}, {"true"}, policy);
    EXPECT_NE(argv[2].find("(deny network*)"), std::string::npos);
    const auto gaps = seatbelt::enforcement_gaps(policy);
    ASSERT_EQ(gaps.size(), 1u);
    EXPECT_EQ(gaps[0].rfind("network: Seatbelt has no allow-list proxy", 0), 0u) << gaps[0];
    policy.network = NetworkPolicy::Deny;
    EXPECT_TRUE(seatbelt::enforcement_gaps(policy).empty());
}

TEST(SeatbeltDimensions, WritableRootsListTheExtraRoots) {
    const auto roots = seatbelt::writable_roots({"/usr/bin/sandbox-exec", "/private/tmp/t"}, dimensions_policy());
    EXPECT_NE(std::find(roots.begin(), roots.end(), "/Users/u/.npm"), roots.end());
}

}  // namespace
}  // namespace dsh
