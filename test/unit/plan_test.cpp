// The plan's JSON (field order, determinism, the unconfined shape), reading a dialect back out
// of a plan, and the POSIX shell quoting of --format shell, checked against a real /bin/sh.
#include "lib/plan.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/error.hpp"

namespace dsh {
namespace {

using ojson = nlohmann::ordered_json;

SandboxExecutionPolicy sample_policy(std::optional<std::string> session = "s1") {
    SandboxExecutionPolicy policy;
    policy.mode = SandboxMode::WorkspaceWrite;
    policy.workspaceRoot = "/abs/ws";
    policy.sessionId = std::move(session);
    return policy;
}

ConfinedArgv sample_confined() {
    ConfinedArgv c;
    c.argv = {"bwrap", "--ro-bind", "/", "/", "--", "bash", "-c", "echo hi"};
    c.backend = "bwrap";
    c.enforcement = SandboxEnforcement::Partial;
    c.enforcementGaps = {"chmod: not governed"};
    c.denialSignatures = {"read-only file system", "Permission denied"};
    RunnerFailureRule gated;
    gated.allowedExitCodes = std::vector<int>{1, 125};
    gated.fatalSignatures = {"bwrap: "};
    gated.informationalLines = {"bwrap: Only the last --chdir option will take effect"};
    RunnerFailureRule open;
    open.fatalSignatures = {"runner: fatal", "runner: died"};
    c.runnerFailureRules = {gated, open};
    c.writableRoots = {"/abs/ws", "/tmp", "/dev/null"};
    return c;
}

std::vector<std::string> keys_of(const ojson& object) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : object.items()) {
        (void)value;
        keys.push_back(key);
    }
    return keys;
}

// The message of the PLAN error parse_dialect throws for `document`.
std::string plan_error(const std::string& document) {
    try {
        parse_dialect(document, "plan.json");
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "PLAN") << e.what();
        return e.what();
    }
    ADD_FAILURE() << "parse_dialect accepted: " << document;
    return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A plan document around one runner-failure rule, for the rule's error cases.
std::string plan_with_rule(const std::string& rule) {
    return R"({"denialSignatures": ["denied"], "runnerFailureRules": [)" + rule + "]}";
}

TEST(RenderPlanJson, IsByteIdenticalWhenRenderedTwice) {
    const Plan plan = confined_plan(sample_policy(), sample_confined());
    EXPECT_EQ(render_plan_json(plan), render_plan_json(plan));
    EXPECT_EQ(render_plan_json(plan), render_plan_json(confined_plan(sample_policy(), sample_confined())));
}

TEST(RenderPlanJson, IsOneLineEndingInNewline) {
    const std::string text = render_plan_json(confined_plan(sample_policy(), sample_confined()));
    EXPECT_EQ(text.find('\n'), text.size() - 1);
}

TEST(RenderPlanJson, FieldsComeInTheContractOrder) {
    const ojson doc = ojson::parse(render_plan_json(confined_plan(sample_policy(), sample_confined())));
    EXPECT_EQ(keys_of(doc), (std::vector<std::string>{"argv", "backend", "enforcement", "enforcementGaps",
                                                      "denialSignatures", "runnerFailureRules", "policy",
                                                      "writableRoots", "passedFds", "protectedPaths",
                                                      "unreadablePaths", "network", "git"}));
}

TEST(RenderPlanJson, UnconfinedFieldsComeInTheSameOrder) {
    const ojson doc = ojson::parse(render_plan_json(unconfined_plan(sample_policy(), {"ls"})));
    EXPECT_EQ(keys_of(doc), (std::vector<std::string>{"argv", "backend", "enforcement", "enforcementGaps",
                                                      "denialSignatures", "runnerFailureRules", "policy",
                                                      "writableRoots", "passedFds", "protectedPaths",
                                                      "unreadablePaths", "network", "git"}));
}

TEST(RenderPlanJson, CarriesTheConfinedFacts) {
    const ojson doc = ojson::parse(render_plan_json(confined_plan(sample_policy(), sample_confined())));
    EXPECT_EQ(doc["argv"], ojson(sample_confined().argv));
    EXPECT_EQ(doc["backend"], "bwrap");
    EXPECT_EQ(doc["enforcement"], "partial");
    EXPECT_EQ(doc["enforcementGaps"], ojson::array({"chmod: not governed"}));
    EXPECT_EQ(doc["writableRoots"], ojson::array({"/abs/ws", "/tmp", "/dev/null"}));
    EXPECT_EQ(doc["policy"]["workspaceRoot"], "/abs/ws");
}

TEST(RenderPlanJson, RuleFieldsComeInSeedOrder) {
    const ojson doc = ojson::parse(render_plan_json(confined_plan(sample_policy(), sample_confined())));
    EXPECT_EQ(keys_of(doc["runnerFailureRules"][0]),
              (std::vector<std::string>{"allowedExitCodes", "fatalSignatures", "informationalLines"}));
    EXPECT_EQ(doc["runnerFailureRules"][0]["allowedExitCodes"], ojson::array({1, 125}));
}

TEST(RenderPlanJson, RuleWithoutExitGateOmitsAllowedExitCodes) {
    const ojson doc = ojson::parse(render_plan_json(confined_plan(sample_policy(), sample_confined())));
    EXPECT_FALSE(doc["runnerFailureRules"][1].contains("allowedExitCodes"));
}

TEST(RenderPlanJson, UnconfinedPlanHasNullBackendAndEnforcement) {
    const ojson doc = ojson::parse(render_plan_json(unconfined_plan(sample_policy(), {"bash", "-c", "echo hi"})));
    EXPECT_TRUE(doc["backend"].is_null());
    EXPECT_TRUE(doc["enforcement"].is_null());
}

TEST(RenderPlanJson, UnconfinedPlanRunsTheOriginalArgv) {
    const std::vector<std::string> argv = {"bash", "-c", "echo hi"};
    const Plan plan = unconfined_plan(sample_policy(), argv);
    EXPECT_EQ(plan.argv, argv);
    EXPECT_EQ(ojson::parse(render_plan_json(plan))["argv"], ojson(argv));
}

TEST(RenderPlanJson, UnconfinedPlanHasNoRules) {
    const ojson doc = ojson::parse(render_plan_json(unconfined_plan(sample_policy(), {"ls"})));
    EXPECT_EQ(doc["denialSignatures"], ojson::array());
    EXPECT_EQ(doc["runnerFailureRules"], ojson::array());
    EXPECT_EQ(doc["enforcementGaps"], ojson::array());
}

TEST(RenderPlanJson, InvalidUtf8InArgvDoesNotThrow) {
    const Plan plan = unconfined_plan(sample_policy(), {"printf", "\xff\xfe"});
    std::string text;
    EXPECT_NO_THROW(text = render_plan_json(plan));
    EXPECT_TRUE(contains(text, "\"argv\"")) << text;
}

TEST(ConfinedPlan, RunsTheConfinedArgv) {
    EXPECT_EQ(confined_plan(sample_policy(), sample_confined()).argv, sample_confined().argv);
}

TEST(PolicyJson, OmitsSessionIdWhenAgentless) {
    const ojson doc = policy_json(sample_policy(std::nullopt));
    EXPECT_EQ(keys_of(doc), (std::vector<std::string>{"mode", "workspaceRoot", "writableRoots", "protectedPaths",
                                                      "unreadablePaths", "network", "git"}));
}

TEST(PolicyJson, CarriesModeRootAndSessionInOrder) {
    const ojson doc = policy_json(sample_policy("s1"));
    EXPECT_EQ(doc.dump(), R"({"mode":"workspace-write","workspaceRoot":"/abs/ws","sessionId":"s1","writableRoots":[],)"
                          R"("protectedPaths":[".git/hooks",".git/config"],"unreadablePaths":[],"network":"allow","git":"protect"})");
}

TEST(ParseDialect, RejectsANonJsonDocument) {
    EXPECT_TRUE(contains(plan_error("{\"denialSignatures\": ["), "is not JSON"));
}

TEST(ParseDialect, RejectsANonObjectDocument) {
    EXPECT_TRUE(contains(plan_error("[1, 2]"), "is not a JSON object"));
}

TEST(ParseDialect, RejectsAMissingDenialSignatures) {
    EXPECT_TRUE(contains(plan_error(R"({"runnerFailureRules": []})"), "lacks the field denialSignatures"));
}

TEST(ParseDialect, RejectsAMissingRunnerFailureRules) {
    EXPECT_TRUE(contains(plan_error(R"({"denialSignatures": []})"), "lacks the field runnerFailureRules"));
}

TEST(ParseDialect, RejectsAnEmptyDenialSignature) {
    EXPECT_TRUE(contains(plan_error(R"({"denialSignatures": [""], "runnerFailureRules": []})"), "empty signature"));
}

TEST(ParseDialect, RejectsANonStringDenialSignature) {
    plan_error(R"({"denialSignatures": [3], "runnerFailureRules": []})");
}

TEST(ParseDialect, RejectsAnEmptyFatalSignature) {
    EXPECT_TRUE(contains(plan_error(plan_with_rule(R"({"fatalSignatures": ["ok", ""]})")), "empty signature"));
}

TEST(ParseDialect, RejectsAnEmptyFatalSignatures) {
    EXPECT_TRUE(contains(plan_error(plan_with_rule(R"({"fatalSignatures": []})")), "fatalSignatures is empty"));
}

TEST(ParseDialect, RejectsAMissingFatalSignatures) {
    EXPECT_TRUE(contains(plan_error(plan_with_rule(R"({"informationalLines": []})")), "lacks the field fatalSignatures"));
}

TEST(ParseDialect, RejectsExitCodeZero) {
    const std::string message = plan_error(plan_with_rule(R"({"allowedExitCodes": [0], "fatalSignatures": ["x"]})"));
    EXPECT_TRUE(contains(message, "holds 0")) << message;
}

TEST(ParseDialect, RejectsExitCode256) {
    const std::string message = plan_error(plan_with_rule(R"({"allowedExitCodes": [256], "fatalSignatures": ["x"]})"));
    EXPECT_TRUE(contains(message, "holds 256")) << message;
}

TEST(ParseDialect, RejectsAnEmptyAllowedExitCodes) {
    plan_error(plan_with_rule(R"({"allowedExitCodes": [], "fatalSignatures": ["x"]})"));
}

TEST(ParseDialect, RejectsAFractionalExitCode) {
    plan_error(plan_with_rule(R"({"allowedExitCodes": [1.5], "fatalSignatures": ["x"]})"));
}

TEST(ParseDialect, RejectsAnUnknownFieldInARule) {
    const std::string message = plan_error(plan_with_rule(R"({"fatalSignatures": ["x"], "fatalSignature": ["y"]})"));
    EXPECT_TRUE(contains(message, "runnerFailureRules[0] has an unknown field 'fatalSignature'")) << message;
}

TEST(ParseDialect, RejectsARuleThatIsNotAnObject) {
    plan_error(plan_with_rule(R"("bwrap: ")"));
}

TEST(ParseDialect, ErrorsNameTheSource) {
    EXPECT_TRUE(contains(plan_error("nope"), "plan.json: "));
}

TEST(ParseDialect, RoundTripsTheDialectOfARenderedPlan) {
    const ConfinedArgv confined = sample_confined();
    const Dialect dialect = parse_dialect(render_plan_json(confined_plan(sample_policy(), confined)), "plan.json");
    EXPECT_EQ(dialect, (Dialect{confined.denialSignatures, confined.runnerFailureRules}));
}

TEST(ParseDialect, ReadsTheDialectOfAnUnconfinedPlanAsEmpty) {
    const Dialect dialect = parse_dialect(render_plan_json(unconfined_plan(sample_policy(), {"ls"})), "plan.json");
    EXPECT_EQ(dialect, Dialect{});
}

TEST(ShellQuote, LeavesASafeWordBare) { EXPECT_EQ(shell_quote("/usr/bin/env"), "/usr/bin/env"); }

TEST(ShellQuote, QuotesTheEmptyString) { EXPECT_EQ(shell_quote(""), "''"); }

TEST(ShellQuote, QuotesSpaces) { EXPECT_EQ(shell_quote("echo hi"), "'echo hi'"); }

TEST(ShellQuote, EscapesSingleQuotes) { EXPECT_EQ(shell_quote("it's"), "'it'\\''s'"); }

TEST(ShellQuote, QuotesDoubleQuotes) { EXPECT_EQ(shell_quote("say \"hi\""), "'say \"hi\"'"); }

TEST(ShellQuote, QuotesDollar) { EXPECT_EQ(shell_quote("$HOME"), "'$HOME'"); }

TEST(ShellQuote, QuotesBackslashes) { EXPECT_EQ(shell_quote("a\\b"), "'a\\b'"); }

TEST(ShellQuote, QuotesNewlines) { EXPECT_EQ(shell_quote("a\nb"), "'a\nb'"); }

TEST(ShellQuote, LeavesALeadingDashBare) { EXPECT_EQ(shell_quote("--flag"), "--flag"); }

TEST(ShellQuote, QuotesEqualsSoTheWordIsNoAssignment) { EXPECT_EQ(shell_quote("FOO=bar"), "'FOO=bar'"); }

TEST(ShellQuote, QuotesNonAscii) { EXPECT_EQ(shell_quote("caf\xc3\xa9"), "'caf\xc3\xa9'"); }

TEST(ShellQuote, QuotesGlobAndTilde) {
    EXPECT_EQ(shell_quote("*"), "'*'");
    EXPECT_EQ(shell_quote("~"), "'~'");
}

TEST(ShellJoin, SeparatesWordsWithOneSpace) {
    EXPECT_EQ(shell_join({"bash", "-c", "echo hi"}), "bash -c 'echo hi'");
}

TEST(ShellJoin, EmptyArgvIsEmpty) { EXPECT_EQ(shell_join({}), ""); }

TEST(RenderPlanShell, IsTheJoinedArgvAndANewline) {
    EXPECT_EQ(render_plan_shell(unconfined_plan(sample_policy(), {"echo", "a b"})), "echo 'a b'\n");
}

// What `sh -c` makes of `printf '%s\0' <joined argv>`: the words it received, NUL-separated.
std::vector<std::string> words_after_sh(const std::vector<std::string>& argv) {
    const std::string command = "printf '%s\\0' " + shell_join(argv);
    FILE* pipe = popen(command.c_str(), "r");  // popen runs `/bin/sh -c command`
    if (!pipe) {
        ADD_FAILURE() << "popen failed";
        return {};
    }
    std::string output;
    char buffer[4096];
    std::size_t n = 0;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
    EXPECT_EQ(pclose(pipe), 0) << command;
    std::vector<std::string> words;
    std::size_t start = 0;
    for (std::size_t end; (end = output.find('\0', start)) != std::string::npos; start = end + 1)
        words.push_back(output.substr(start, end - start));
    EXPECT_EQ(start, output.size()) << "output does not end in NUL";
    return words;
}

class ShellJoinRoundTrip : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(ShellJoinRoundTrip, ShReadsBackTheSameArgv) { EXPECT_EQ(words_after_sh(GetParam()), GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    NastyArgv, ShellJoinRoundTrip,
    ::testing::Values(std::vector<std::string>{"plain", "words"}, std::vector<std::string>{""},
                      std::vector<std::string>{"", "", ""}, std::vector<std::string>{"a b", " ", "  lead", "trail  "},
                      std::vector<std::string>{"'", "''", "it's", "'\\''", "a'b'c"},
                      std::vector<std::string>{"\"", "\"quoted\"", "\\\"", "\\'"},
                      std::vector<std::string>{"$HOME", "${PATH}", "$(echo pwned)", "`echo pwned`", "$'x'"},
                      std::vector<std::string>{"\\", "\\\\", "a\\nb", "trailing\\"},
                      std::vector<std::string>{"line\nbreak", "\n", "x\n", "\r\n", "\t"},
                      std::vector<std::string>{"-n", "-e", "--", "-", "--flag=value"},
                      std::vector<std::string>{"FOO=bar", "a=b", "=", "=x"},
                      std::vector<std::string>{"caf\xc3\xa9", "\xe2\x82\xac", "\xff\xfe invalid"},
                      std::vector<std::string>{"*", "?", "[a]", "~", "~root", "{a,b}", "!", "#comment"},
                      std::vector<std::string>{";", "&&", "|", "&", ">out", "<in", "(", ")", "a;b", "a|b"},
                      std::vector<std::string>{"\x01\x02\x7f", "%s", "%d%%"}));

}  // namespace
}  // namespace dsh

namespace {

TEST(ShellQuoteReserved, ReservedWordsAreQuoted) {
    EXPECT_EQ(dsh::shell_quote("if"), "'if'");
    EXPECT_EQ(dsh::shell_quote("done"), "'done'");
    EXPECT_EQ(dsh::shell_quote("!"), "'!'");
    EXPECT_EQ(dsh::shell_quote("iffy"), "iffy");
}

}  // namespace
