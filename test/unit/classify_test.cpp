// The contract's classification algorithm: success, runner-failure rules with their exit gate
// and informational lines, denial, failure; the evidence; streaming over arbitrary bytes.
#include "lib/classify.hpp"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/error.hpp"

namespace dsh {
namespace {

using namespace std::string_literals;

// One gated rule with an informational line its fatal signature would match, and a denial.
Dialect sample_dialect() {
    Dialect dialect;
    dialect.denialSignatures = {"Permission denied"};
    RunnerFailureRule rule;
    rule.allowedExitCodes = std::vector<int>{125};
    rule.fatalSignatures = {"runner: "};
    rule.informationalLines = {"runner: notice only"};
    dialect.runnerFailureRules = {rule};
    return dialect;
}

// Two rules without exit gates, for which rule matched.
Dialect two_rule_dialect() {
    Dialect dialect;
    dialect.denialSignatures = {"denied"};
    RunnerFailureRule first;
    first.fatalSignatures = {"first: boom"};
    RunnerFailureRule second;
    second.fatalSignatures = {"second: boom", "second: crash"};
    dialect.runnerFailureRules = {first, second};
    return dialect;
}

std::string plan_error(const Dialect& dialect) {
    try {
        validate_dialect(dialect);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "PLAN") << e.what();
        return e.what();
    }
    ADD_FAILURE() << "validate_dialect accepted the dialect";
    return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Classify, ExitZeroIsSuccessEvenWithFatalText) {
    const Classification result = classify(sample_dialect(), "runner: fatal\nPermission denied\n", 0);
    EXPECT_EQ(result.verdict, Verdict::Success);
    EXPECT_EQ(result.exitCode, 0);
    EXPECT_FALSE(result.line.has_value());
}

TEST(Classify, FatalLineOnAnAllowedExitIsRunnerFailure) {
    EXPECT_EQ(classify(sample_dialect(), "runner: cannot start\n", 125).verdict, Verdict::RunnerFailure);
}

TEST(Classify, ExitGateBlocksTheRuleOnAnUnlistedExit) {
    EXPECT_EQ(classify(sample_dialect(), "runner: cannot start\n", 1).verdict, Verdict::Failure);
}

TEST(Classify, RuleWithoutExitGateMatchesAnyNonzeroExit) {
    EXPECT_EQ(classify(two_rule_dialect(), "first: boom\n", 77).verdict, Verdict::RunnerFailure);
}

TEST(Classify, InformationalLineIsRemovedBeforeFatalMatching) {
    EXPECT_EQ(classify(sample_dialect(), "runner: notice only\n", 125).verdict, Verdict::Failure);
}

TEST(Classify, InformationalEqualityIgnoresCase) {
    EXPECT_EQ(classify(sample_dialect(), "RUNNER: Notice ONLY\n", 125).verdict, Verdict::Failure);
}

TEST(Classify, InformationalEqualityIgnoresATrailingCarriageReturn) {
    EXPECT_EQ(classify(sample_dialect(), "runner: notice only\r\n", 125).verdict, Verdict::Failure);
}

TEST(Classify, InformationalLineWithoutFinalNewlineIsRemoved) {
    EXPECT_EQ(classify(sample_dialect(), "runner: notice only", 125).verdict, Verdict::Failure);
}

TEST(Classify, LineThatMerelyContainsInformationalTextStillCounts) {
    const Classification result = classify(sample_dialect(), "x runner: notice only\n", 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.line, "x runner: notice only");
}

TEST(Classify, InformationalLineWithExtraTrailingTextStillCounts) {
    EXPECT_EQ(classify(sample_dialect(), "runner: notice only, then died\n", 125).verdict, Verdict::RunnerFailure);
}

TEST(Classify, InformationalLineDoesNotHideALaterFatalLine) {
    const Classification result = classify(sample_dialect(), "runner: notice only\nrunner: real failure\n", 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.line, "runner: real failure");
}

TEST(Classify, FatalSignatureIsACaseInsensitiveSubstring) {
    const Classification result = classify(two_rule_dialect(), "prefix FIRST: BOOM suffix\n", 1);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.signature, "first: boom");
}

TEST(Classify, RunnerFailureIsCheckedBeforeDenial) {
    const Classification result = classify(sample_dialect(), "cat: x: Permission denied\nrunner: died\n", 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.line, "runner: died");
}

TEST(Classify, ExitStatusAloneNeverProvesRunnerFailure) {
    EXPECT_EQ(classify(sample_dialect(), "make: *** [all] Error 2\n", 125).verdict, Verdict::Failure);
}

TEST(Classify, SilentNonzeroExitIsFailure) {
    const Classification result = classify(sample_dialect(), "", 125);
    EXPECT_EQ(result.verdict, Verdict::Failure);
    EXPECT_EQ(result.exitCode, 125);
    EXPECT_FALSE(result.line.has_value());
    EXPECT_FALSE(result.signature.has_value());
    EXPECT_FALSE(result.rule.has_value());
}

TEST(Classify, DenialSignatureIsCaseInsensitive) {
    const Classification result = classify(sample_dialect(), "touch: /etc/x: PERMISSION DENIED\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.signature, "Permission denied");
    EXPECT_EQ(result.line, "touch: /etc/x: PERMISSION DENIED");
    EXPECT_FALSE(result.rule.has_value());
}

TEST(Classify, DenialMatchesOnAnyNonzeroExit) {
    EXPECT_EQ(classify(sample_dialect(), "Permission denied\n", 2).verdict, Verdict::Denial);
}

TEST(Classify, EvidenceCarriesLineSignatureAndRule) {
    const Classification result = classify(sample_dialect(), "ok\nrunner: cannot set up\nmore\n", 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.line, "runner: cannot set up");
    EXPECT_EQ(result.signature, "runner: ");
    EXPECT_EQ(result.rule, 0u);
    EXPECT_EQ(result.exitCode, 125);
}

TEST(Classify, SecondRuleMatchingGivesRuleIndexOne) {
    const Classification result = classify(two_rule_dialect(), "second: crash here\n", 3);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.rule, 1u);
    EXPECT_EQ(result.signature, "second: crash");
}

TEST(Classify, EarlierRuleWinsWhenBothMatch) {
    const Classification result = classify(two_rule_dialect(), "second: boom\nfirst: boom\n", 3);
    EXPECT_EQ(result.rule, 0u);
    EXPECT_EQ(result.line, "first: boom");
}

TEST(Classify, GatedOutRuleGivesWayToTheNextRule) {
    Dialect dialect = two_rule_dialect();
    dialect.runnerFailureRules[0].allowedExitCodes = std::vector<int>{125};
    const Classification result = classify(dialect, "first: boom\nsecond: boom\n", 1);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.rule, 1u);
}

TEST(Classify, FirstMatchingLineIsTheEvidence) {
    const Classification result = classify(two_rule_dialect(), "first: boom one\nfirst: boom two\n", 1);
    EXPECT_EQ(result.line, "first: boom one");
}

TEST(Classify, SignatureListedFirstIsReportedForALineWithTwo) {
    const Classification result = classify(two_rule_dialect(), "second: crash after second: boom\n", 1);
    EXPECT_EQ(result.signature, "second: boom");
}

TEST(Classify, CrlfLinesMatchAndLoseTheCarriageReturn) {
    const Classification result = classify(sample_dialect(), "starting\r\nrunner: died\r\n", 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.line, "runner: died");
}

TEST(Classify, SignatureIsNotMatchedAcrossLines) {
    EXPECT_EQ(classify(sample_dialect(), "Permission\ndenied\n", 1).verdict, Verdict::Failure);
}

TEST(Classify, NulBytesDoNotStopMatching) {
    const std::string text = "\0\0junk\0runner: died\0tail\n"s;
    const Classification result = classify(sample_dialect(), text, 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.line, "\0\0junk\0runner: died\0tail"s);
}

TEST(Classify, InvalidUtf8DoesNotStopMatching) {
    const Classification result = classify(sample_dialect(), "\xff\xfe\xc3 Permission denied \xe2\x82\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.line, "\xff\xfe\xc3 Permission denied \xe2\x82");
}

// Errno names (a signature of capitals and digits) match only as whole words.
Dialect errno_dialect() {
    Dialect dialect;
    dialect.denialSignatures = {"read-only file system", "EROFS", "EACCES"};
    return dialect;
}

TEST(WordSignature, IsCapitalsAndDigitsBeginningWithALetter) {
    EXPECT_TRUE(is_word_signature("EACCES"));
    EXPECT_TRUE(is_word_signature("E2BIG"));
    EXPECT_FALSE(is_word_signature("2BIG"));
    EXPECT_FALSE(is_word_signature("Eacces"));
    EXPECT_FALSE(is_word_signature("E_ACCES"));
    EXPECT_FALSE(is_word_signature("EACCES:"));
    EXPECT_FALSE(is_word_signature(""));
}

TEST(WordSignature, MatchesBetweenWordBoundaries) {
    for (const char* line : {"npm error code EACCES", "EACCES", "Error: EACCES: permission denied", "code: 'EACCES',",
                             "(EACCES)", "-EACCES\r", "errno=EACCES."}) {
        const Classification result = classify(errno_dialect(), std::string(line) + "\n", 1);
        EXPECT_EQ(result.verdict, Verdict::Denial) << line;
        EXPECT_EQ(result.signature, "EACCES") << line;
    }
}

TEST(WordSignature, DoesNotMatchInsideAWord) {
    for (const char* line : {"EACCESSIBLE", "XEROFS", "EROFS_MAGIC", "_EACCES", "EACCES2", "ISEACCES_OK", "erofs9"})
        EXPECT_EQ(classify(errno_dialect(), std::string(line) + "\n", 1).verdict, Verdict::Failure) << line;
}

TEST(WordSignature, FoldsCaseLikeEverySignature) {
    EXPECT_EQ(classify(errno_dialect(), "{error,eacces}\n", 1).verdict, Verdict::Denial);
}

TEST(WordSignature, ALaterWholeOccurrenceOnTheSameLineCounts) {
    const Classification result = classify(errno_dialect(), "XEROFS then EROFS\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.line, "XEROFS then EROFS");
}

TEST(WordSignature, ASubstringSignatureStillMatchesInsideWords) {
    EXPECT_EQ(classify(errno_dialect(), "xread-only file systems\n", 1).verdict, Verdict::Denial);
}

TEST(WordSignature, BoundariesAcrossFeedsOfEverySize) {
    const std::string texts[] = {"ok\nsay EROFS\n", "XEROFS\nEROFSX\n", "a EROFS", "EROFS", "aaEROFSbb EROFS!\n",
                                 "EACCESSIBLE EACCES\n", "xEACCES\n"};
    for (const std::string& text : texts) {
        const Classification whole = classify(errno_dialect(), text, 1);
        for (std::size_t piece = 1; piece <= text.size(); ++piece) {
            StreamClassifier stream(errno_dialect());
            for (std::size_t at = 0; at < text.size(); at += piece) stream.feed(std::string_view(text).substr(at, piece));
            const Classification result = stream.finish(1);
            EXPECT_EQ(result.verdict, whole.verdict) << text << " in pieces of " << piece;
            EXPECT_EQ(result.line, whole.line) << text << " in pieces of " << piece;
        }
    }
    EXPECT_EQ(classify(errno_dialect(), "a EROFS", 1).verdict, Verdict::Denial);
    EXPECT_EQ(classify(errno_dialect(), "XEROFS\nEROFSX\n", 1).verdict, Verdict::Failure);
    EXPECT_EQ(classify(errno_dialect(), "xEACCES\n", 1).verdict, Verdict::Failure);
}

TEST(WordSignature, WordBoundaryAfterALongLinePrefix) {
    StreamClassifier stream(errno_dialect());
    stream.feed(std::string(10000, 'x'));
    stream.feed(" ERO");
    stream.feed("FS");
    stream.feed("\n");
    EXPECT_EQ(stream.finish(1).verdict, Verdict::Denial);
    StreamClassifier glued(errno_dialect());
    glued.feed(std::string(10000, 'x'));
    glued.feed("ERO");
    glued.feed("FS\n");
    EXPECT_EQ(glued.finish(1).verdict, Verdict::Failure);
}

TEST(FindSignature, FollowsTheClassifiersRules) {
    EXPECT_EQ(find_signature("x: Read-Only File System", "read-only file system"), 3u);
    EXPECT_EQ(find_signature("XEROFS EROFS", "EROFS"), 7u);
    EXPECT_EQ(find_signature("XEROFS", "EROFS"), std::string_view::npos);
    EXPECT_EQ(find_signature("nothing", "EROFS"), std::string_view::npos);
}

TEST(StreamClassifier, OneByteFeedsGiveTheSameResultAsOneFeed) {
    const std::string text = "noise line\r\nrunner: notice only\nsome\0thing\nX RUNNER: DIED here\r\nPermission denied\n"s;
    const Classification whole = classify(sample_dialect(), text, 125);
    StreamClassifier stream(sample_dialect());
    for (char c : text) stream.feed(std::string_view(&c, 1));
    const Classification pieces = stream.finish(125);
    ASSERT_EQ(whole.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(pieces.verdict, whole.verdict);
    EXPECT_EQ(pieces.line, whole.line);
    EXPECT_EQ(pieces.signature, whole.signature);
    EXPECT_EQ(pieces.rule, whole.rule);
}

TEST(StreamClassifier, InformationalLineSplitAcrossFeedsIsStillRemoved) {
    StreamClassifier stream(sample_dialect());
    for (const char* piece : {"runn", "er: noti", "ce on", "ly\r", "\n"}) stream.feed(piece);
    EXPECT_EQ(stream.finish(125).verdict, Verdict::Failure);
}

TEST(StreamClassifier, EmptyFeedsChangeNothing) {
    StreamClassifier stream(sample_dialect());
    stream.feed("");
    stream.feed("Permission ");
    stream.feed("");
    stream.feed("denied");
    EXPECT_EQ(stream.finish(1).verdict, Verdict::Denial);
}

TEST(StreamClassifier, SettlesOnceEveryListHasEvidence) {
    StreamClassifier stream(sample_dialect());
    EXPECT_FALSE(stream.settled());
    stream.feed("runner: died\n");
    EXPECT_FALSE(stream.settled());
    stream.feed("Permission denied\n");
    EXPECT_TRUE(stream.settled());
}

TEST(StreamClassifier, RejectsAnInvalidDialect) {
    Dialect dialect = sample_dialect();
    dialect.denialSignatures.push_back("");
    EXPECT_THROW(StreamClassifier{dialect}, Error);
}

TEST(Classify, SignatureAtTheEndOfA20MegabyteLineIsMatched) {
    std::string text(20u << 20, 'x');
    text += "runner: died at last\n";
    const Classification result = classify(sample_dialect(), text, 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    ASSERT_TRUE(result.line.has_value());
    EXPECT_EQ(result.line->size(), kEvidenceBytes);
    EXPECT_EQ(*result.line, std::string(kEvidenceBytes, 'x'));
}

TEST(StreamClassifier, HugeLineFedInChunksMatchesAtTheEnd) {
    StreamClassifier stream(sample_dialect());
    const std::string chunk(64u << 10, 'y');
    for (int i = 0; i < 320; ++i) stream.feed(chunk);  // 20 MiB
    stream.feed("Permission den");
    stream.feed("ied");
    const Classification result = stream.finish(1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    ASSERT_TRUE(result.line.has_value());
    EXPECT_EQ(result.line->size(), kEvidenceBytes);
}

TEST(RenderJson, InvalidUtf8DoesNotThrow) {
    const Classification result = classify(sample_dialect(), "\xff\xfe Permission denied \xc3\n", 1);
    std::string json;
    ASSERT_NO_THROW(json = render_json(result));
    EXPECT_TRUE(contains(json, "\"verdict\"")) << json;
    const nlohmann::json parsed = nlohmann::json::parse(json);
    EXPECT_EQ(parsed["verdict"], "denial");
}

TEST(RenderJson, CarriesEveryFieldInOrder) {
    const Classification result = classify(sample_dialect(), "runner: died\n", 125);
    EXPECT_EQ(render_json(result),
              "{\"verdict\":\"runner-failure\",\"exitCode\":125,\"line\":\"runner: died\","
              "\"signature\":\"runner: \",\"rule\":0,\"path\":null,\"host\":null}\n");
}

TEST(RenderJson, AbsentEvidenceIsNull) {
    EXPECT_EQ(render_json(classify(sample_dialect(), "", 0)),
              "{\"verdict\":\"success\",\"exitCode\":0,\"line\":null,\"signature\":null,\"rule\":null,\"path\":null,"
              "\"host\":null}\n");
}

TEST(RenderJson, ADenialCarriesThePathItsLineNames) {
    EXPECT_EQ(render_json(classify(sample_dialect(), "ok\nsh: 1: cannot create /etc/x: Permission denied\n", 2)),
              "{\"verdict\":\"denial\",\"exitCode\":2,\"line\":\"sh: 1: cannot create /etc/x: Permission denied\","
              "\"signature\":\"Permission denied\",\"rule\":null,\"path\":\"/etc/x\",\"host\":null}\n");
}

// The allow-list proxy's refusal line names a host, not a path: the host is the evidence.
TEST(RenderJson, AProxyRefusalCarriesTheHostItsLineNames) {
    const Dialect dialect{{"dsh-confine: network: refused ", "not in allow_hosts"}, {}};
    const Classification result =
        classify(dialect, "npm error fetch failed\ndsh-confine: network: refused registry.npmjs.org:443, not in allow_hosts "
                          "(--allow-host registry.npmjs.org:443 would allow it)\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.host, "registry.npmjs.org:443");
    EXPECT_EQ(result.path, std::nullopt);
    EXPECT_TRUE(contains(render_json(result), "\"path\":null,\"host\":\"registry.npmjs.org:443\"}")) << render_json(result);
    EXPECT_TRUE(contains(render_text(result), "host: registry.npmjs.org:443\n")) << render_text(result);
    // The 403 page's words alone (a client printing the page's second line) name no host.
    const Classification page = classify(dialect, "Forbidden: [::1]:8080 not in allow_hosts\n", 22);
    EXPECT_EQ(page.verdict, Verdict::Denial);
    EXPECT_EQ(page.host, std::nullopt);
    // An IPv6 host keeps its brackets.
    EXPECT_EQ(classify(dialect, "dsh-confine: network: refused [::1]:8080, not in allow_hosts\n", 7).host, "[::1]:8080");
}

TEST(Classify, OnlyADenialGetsAPath) {
    EXPECT_EQ(classify(sample_dialect(), "cat: /x: Permission denied\n", 1).path, "/x");
    EXPECT_FALSE(classify(sample_dialect(), "runner: /x: Permission denied\n", 125).path.has_value());
    EXPECT_FALSE(classify(sample_dialect(), "cat: /x: Permission denied\n", 0).path.has_value());
    EXPECT_FALSE(classify(sample_dialect(), "Permission denied\n", 1).path.has_value());
}

TEST(RenderText, FirstLineIsTheVerdictWord) {
    const std::string denial = render_text(classify(sample_dialect(), "Permission denied\n", 1));
    EXPECT_EQ(denial.substr(0, denial.find('\n')), "denial");
    const std::string runner = render_text(classify(sample_dialect(), "runner: died\n", 125));
    EXPECT_EQ(runner.substr(0, runner.find('\n')), "runner-failure");
    EXPECT_EQ(render_text(classify(sample_dialect(), "", 0)), "success\n");
    EXPECT_EQ(render_text(classify(sample_dialect(), "", 2)), "failure\n");
}

TEST(RenderText, ListsTheEvidence) {
    EXPECT_EQ(render_text(classify(sample_dialect(), "runner: died\n", 125)),
              "runner-failure\nsignature: runner: \nrule: 0\nline: runner: died\n");
    EXPECT_EQ(render_text(classify(sample_dialect(), "cat: /x: Permission denied\n", 1)),
              "denial\nsignature: Permission denied\npath: /x\nline: cat: /x: Permission denied\n");
}

TEST(VerdictNames, AreTheContractWords) {
    EXPECT_EQ(to_string(Verdict::Success), "success");
    EXPECT_EQ(to_string(Verdict::RunnerFailure), "runner-failure");
    EXPECT_EQ(to_string(Verdict::Denial), "denial");
    EXPECT_EQ(to_string(Verdict::Failure), "failure");
}

TEST(ValidateDialect, AcceptsAWellFormedDialect) { EXPECT_NO_THROW(validate_dialect(sample_dialect())); }

TEST(ValidateDialect, RejectsAnEmptyDenialSignature) {
    Dialect dialect = sample_dialect();
    dialect.denialSignatures.push_back("");
    EXPECT_TRUE(contains(plan_error(dialect), "denialSignatures contains an empty signature"));
}

TEST(ValidateDialect, RejectsAnEmptyFatalSignatures) {
    Dialect dialect = sample_dialect();
    dialect.runnerFailureRules[0].fatalSignatures.clear();
    EXPECT_TRUE(contains(plan_error(dialect), "runnerFailureRules[0].fatalSignatures is empty"));
}

TEST(ValidateDialect, RejectsAnEmptyFatalSignature) {
    Dialect dialect = two_rule_dialect();
    dialect.runnerFailureRules[1].fatalSignatures.push_back("");
    EXPECT_TRUE(contains(plan_error(dialect), "runnerFailureRules[1].fatalSignatures contains an empty signature"));
}

TEST(ValidateDialect, RejectsAnEmptyAllowedExitCodes) {
    Dialect dialect = sample_dialect();
    dialect.runnerFailureRules[0].allowedExitCodes = std::vector<int>{};
    EXPECT_TRUE(contains(plan_error(dialect), "allowedExitCodes is empty"));
}

TEST(ValidateDialect, RejectsExitCodeZero) {
    Dialect dialect = sample_dialect();
    dialect.runnerFailureRules[0].allowedExitCodes = std::vector<int>{0};
    EXPECT_TRUE(contains(plan_error(dialect), "holds 0"));
}

TEST(ValidateDialect, RejectsExitCode256) {
    Dialect dialect = sample_dialect();
    dialect.runnerFailureRules[0].allowedExitCodes = std::vector<int>{1, 256};
    EXPECT_TRUE(contains(plan_error(dialect), "holds 256"));
}

}  // namespace
}  // namespace dsh

namespace {

// When the runner is known to have started the command, its rules are not applied, and the
// denial evidence of the same stream still counts.
TEST(ClassifyStarted, DenialSurvivesARunnerLookalikeLine) {
    dsh::Dialect dialect;
    dialect.denialSignatures = {"read-only file system"};
    dialect.runnerFailureRules.push_back({std::vector<int>{1}, {"bwrap: "}, {}});
    dsh::StreamClassifier classifier(dialect);
    classifier.feed("bwrap: Creating new namespace failed\ntouch: cannot touch 'x': Read-only file system\n");
    const dsh::Classification result = classifier.finish(1, false);
    EXPECT_EQ(result.verdict, dsh::Verdict::Denial);
    EXPECT_EQ(result.signature, "read-only file system");
}

}  // namespace

namespace {

// Past the first 64 KiB the scanner skips ahead between candidates: many lines in one feed,
// a signature split across two feeds, and the evidence on the right line.
TEST(ClassifySkipScan, ManyLinesPastTheSampleWithASignatureSplitAcrossFeeds) {
    dsh::Dialect dialect;
    dialect.denialSignatures = {"read-only file system"};
    dialect.runnerFailureRules.push_back({std::vector<int>{1}, {"bwrap: Can't mount"}, {}});
    std::string log;
    for (int i = 0; log.size() < 300 * 1024; ++i)
        log += "g++ -O2 -c src/file" + std::to_string(i) + ".cpp -o obj/file" + std::to_string(i) + ".o\n";
    const std::string denial = "touch: cannot touch 'x': READ-ONLY file system\n";
    const std::string runner = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n";
    const std::string text = log + denial + log + runner;
    const std::size_t split = log.size() + 20;  // inside the denial line's signature
    dsh::StreamClassifier classifier(dialect);
    classifier.feed(std::string_view(text).substr(0, split));
    classifier.feed(std::string_view(text).substr(split));
    const dsh::Classification result = classifier.finish(1);
    EXPECT_EQ(result.verdict, dsh::Verdict::RunnerFailure);
    EXPECT_EQ(result.line, runner.substr(0, runner.size() - 1));
    const dsh::Classification denied = dsh::classify(dialect, log + denial + log, 1);
    EXPECT_EQ(denied.verdict, dsh::Verdict::Denial);
    EXPECT_EQ(denied.line, denial.substr(0, denial.size() - 1));
    EXPECT_EQ(dsh::classify(dialect, log + log, 1).verdict, dsh::Verdict::Failure);
}

}  // namespace
