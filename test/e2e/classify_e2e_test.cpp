// `classify` through the built binary: each verdict from a backend's dialect or a printed
// plan, both output formats, stdin and --stderr FILE, the usage and plan errors, hostile
// bytes, and bounded memory on streams far larger than any buffer.
#include <fstream>
#include <string>
#include <vector>

#include <malloc.h>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

using nlohmann::json;

using e2e::IsError;

json parse(const std::string& text) { return json::parse(text, nullptr, false); }

constexpr const char* kBwrapFatal = "bwrap: Creating new namespace failed: Operation not permitted";

class Classify : public ::testing::Test {
protected:
    e2e::TempDir home;
    e2e::TempDir scratch;

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        return o;
    }
    // classify with `stderr_text` on stdin.
    e2e::Result classify(const std::vector<std::string>& args, const std::string& stderr_text) const {
        std::vector<std::string> all = {"classify"};
        all.insert(all.end(), args.begin(), args.end());
        e2e::RunOptions o = options();
        o.input = stderr_text;
        return e2e::run(all, o);
    }
    std::string file(const std::string& name, const std::string& content) const {
        e2e::write_file(scratch / name, content);
        return scratch / name;
    }
    std::string first_line_of(const e2e::Result& r) const { return e2e::first_line(r.out); }
    // classify's peak RSS on a one-line input with the arguments the bounded tests use: the
    // baseline they measure growth from (taken as they take theirs, this process trimmed).
    long baseline_rss_kb(const std::string& line) const {
        const std::string path = file("one-line.txt", line + "\n");
        malloc_trim(0);
        const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--stderr", path, "--format", "json"}, "");
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_GT(r.maxRssKb, 0);
        return r.maxRssKb;
    }
};

// --- verdicts ---------------------------------------------------------------------------

TEST_F(Classify, BwrapFatalLineWithExit1IsRunnerFailure) {
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1"}, std::string(kBwrapFatal) + "\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "runner-failure");
}

TEST_F(Classify, JsonOutputCarriesTheEvidence) {
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--format", "json"},
                                   std::string("some noise\n") + kBwrapFatal + "\n");
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    ASSERT_TRUE(v.is_object()) << r.out;
    EXPECT_EQ(v["verdict"], "runner-failure");
    EXPECT_EQ(v["exitCode"], 1);
    EXPECT_EQ(v["line"], kBwrapFatal);
    EXPECT_EQ(v["signature"], "bwrap: Creating new namespace failed");
    EXPECT_EQ(v["rule"], 0);
}

TEST_F(Classify, Exit0IsSuccessWhateverStderrSays) {
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "0"}, std::string(kBwrapFatal) + "\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "success");
}

TEST_F(Classify, FatalLineOnAnExitOutsideAllowedCodesIsNotRunnerFailure) {
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "2"}, std::string(kBwrapFatal) + "\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "failure");
}

TEST_F(Classify, ExecvpFailureOfTheCommandIsAnOrdinaryFailure) {
    const e2e::Result r =
        classify({"--backend", "bwrap", "--exit-code", "1"}, "bwrap: execvp foo: No such file or directory\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "failure");
}

TEST_F(Classify, ExitStatusAloneIsNeverRunnerFailure) {
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1"}, "");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "failure");
}

TEST_F(Classify, ReadOnlyFileSystemIsDenialForBwrap) {
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--format", "json"},
                                   "touch: cannot touch '/usr/x': Read-only file system\n");
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    EXPECT_EQ(v["verdict"], "denial");
    EXPECT_EQ(v["signature"], "read-only file system");
    EXPECT_TRUE(v["rule"].is_null());
}

TEST_F(Classify, PermissionDeniedIsDenialForLandlock) {
    const e2e::Result r =
        classify({"--backend", "landlock", "--exit-code", "1"}, "touch: cannot touch '/usr/x': Permission denied\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "denial");
}

TEST_F(Classify, StderrFileReplacesStdin) {
    const std::string err = file("err.txt", std::string(kBwrapFatal) + "\n");
    // stdin says nothing of note: only the file can give the verdict.
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--stderr", err}, "all fine\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "runner-failure");
}

TEST_F(Classify, MissingStderrFileIsError) {
    EXPECT_TRUE(IsError(classify({"--backend", "bwrap", "--exit-code", "1", "--stderr", scratch / "missing"}, ""), "INPUT"));
}

TEST_F(Classify, PlanPrintedByPrintGivesTheRules) {
    e2e::RunOptions o = options();
    const e2e::Result printed = e2e::run({"--backend", "bwrap", "--print", "--format", "json", "--", "true"}, o);
    ASSERT_EQ(printed.status, 0) << printed.err;
    const std::string plan = file("plan.json", printed.out);
    const e2e::Result r = classify({"--plan", plan, "--exit-code", "1", "--format", "json"}, std::string(kBwrapFatal) + "\n");
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    EXPECT_EQ(v["verdict"], "runner-failure");
    EXPECT_EQ(v["rule"], 0);
}

TEST_F(Classify, PlanRulesAreUsedNotABuiltInDialect) {
    const std::string plan = file("plan.json", R"({"denialSignatures": ["nope, not allowed"],
        "runnerFailureRules": [{"allowedExitCodes": [3], "fatalSignatures": ["runner exploded"]}]})");
    const e2e::Result r = classify({"--plan", plan, "--exit-code", "3", "--format", "json"},
                                   "x: nope, NOT allowed\nRunner Exploded here\n");
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    EXPECT_EQ(v["verdict"], "runner-failure");
    EXPECT_EQ(v["line"], "Runner Exploded here");
    EXPECT_EQ(v["signature"], "runner exploded");
}

TEST_F(Classify, InformationalLineWithCrlfIsRemovedBeforeMatching) {
    // An extra informational line that contains a fatal signature, arriving with CRLF.
    const std::string config =
        file("config.toml", "[backend.bwrap]\ninformational_lines = [\"bwrap: Can't mount proc on /proc: benign\"]\n");
    const e2e::Result r = classify({"--backend", "bwrap", "--config", config, "--exit-code", "1"},
                                   "BWRAP: can't mount proc on /proc: BENIGN\r\n");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "failure");
}

// --- usage and plan errors --------------------------------------------------------------

TEST_F(Classify, NonNumericExitCodeIsUsageError) {
    EXPECT_TRUE(IsError(classify({"--backend", "bwrap", "--exit-code", "abc"}, ""), "USAGE"));
}

TEST_F(Classify, ExitCode256IsUsageError) {
    EXPECT_TRUE(IsError(classify({"--backend", "bwrap", "--exit-code", "256"}, ""), "USAGE"));
}

TEST_F(Classify, NegativeExitCodeIsUsageError) {
    EXPECT_TRUE(IsError(classify({"--backend", "bwrap", "--exit-code", "-1"}, ""), "USAGE"));
}

TEST_F(Classify, MissingExitCodeIsUsageError) { EXPECT_TRUE(IsError(classify({"--backend", "bwrap"}, ""), "USAGE")); }

TEST_F(Classify, NeitherPlanNorBackendIsUsageError) {
    EXPECT_TRUE(IsError(classify({"--exit-code", "1"}, ""), "USAGE"));
}

TEST_F(Classify, BothPlanAndBackendIsUsageError) {
    const std::string plan = file("plan.json", R"({"denialSignatures": [], "runnerFailureRules": []})");
    EXPECT_TRUE(IsError(classify({"--plan", plan, "--backend", "bwrap", "--exit-code", "1"}, ""), "USAGE"));
}

TEST_F(Classify, UnknownBackendIsUsageError) {
    const e2e::Result r = classify({"--backend", "bwarp", "--exit-code", "1"}, "");
    EXPECT_TRUE(IsError(r, "USAGE"));
    EXPECT_NE(r.err.find("did you mean 'bwrap'"), std::string::npos) << r.err;
}

TEST_F(Classify, UnknownFormatIsUsageError) {
    EXPECT_TRUE(IsError(classify({"--backend", "bwrap", "--exit-code", "1", "--format", "xml"}, ""), "USAGE"));
}

TEST_F(Classify, PlanThatIsNotJsonIsPlanError) {
    const std::string plan = file("plan.json", "{\"denialSignatures\": [");
    EXPECT_TRUE(IsError(classify({"--plan", plan, "--exit-code", "1"}, ""), "PLAN"));
}

TEST_F(Classify, PlanLackingRunnerFailureRulesIsPlanError) {
    const std::string plan = file("plan.json", R"({"denialSignatures": ["read-only file system"]})");
    const e2e::Result r = classify({"--plan", plan, "--exit-code", "1"}, "");
    EXPECT_TRUE(IsError(r, "PLAN"));
    EXPECT_NE(r.err.find("runnerFailureRules"), std::string::npos) << r.err;
}

TEST_F(Classify, PlanWithAnEmptyFatalSignatureIsPlanError) {
    const std::string plan =
        file("plan.json", R"({"denialSignatures": [], "runnerFailureRules": [{"fatalSignatures": ["bwrap: ", ""]}]})");
    EXPECT_TRUE(IsError(classify({"--plan", plan, "--exit-code", "1"}, ""), "PLAN"));
}

TEST_F(Classify, PlanWithAnEmptyDenialSignatureIsPlanError) {
    const std::string plan = file("plan.json", R"({"denialSignatures": [""], "runnerFailureRules": []})");
    EXPECT_TRUE(IsError(classify({"--plan", plan, "--exit-code", "1"}, ""), "PLAN"));
}

TEST_F(Classify, PlanWithNoFatalSignaturesIsPlanError) {
    const std::string plan =
        file("plan.json", R"({"denialSignatures": [], "runnerFailureRules": [{"fatalSignatures": []}]})");
    EXPECT_TRUE(IsError(classify({"--plan", plan, "--exit-code", "1"}, ""), "PLAN"));
}

TEST_F(Classify, MissingPlanFileIsPlanError) {
    EXPECT_TRUE(IsError(classify({"--plan", scratch / "missing.json", "--exit-code", "1"}, ""), "PLAN"));
}

// --- any bytes, any size ----------------------------------------------------------------

TEST_F(Classify, NulInvalidUtf8AndCrlfStillClassify) {
    std::string text("abc\0def\xff\xfe\r\n", 11);
    text += std::string("bwrap: Can't mount proc on /proc: \xc3\x28 x\0y\r\n", 42);
    text += std::string("\x80\x81\0\0\0\n", 6);
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--format", "json"}, text);
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    ASSERT_TRUE(v.is_object()) << r.out;
    EXPECT_EQ(v["verdict"], "runner-failure");
    EXPECT_EQ(v["signature"], "bwrap: Can't mount proc on");
    ASSERT_TRUE(v["line"].is_string());
    const std::string line = v["line"].get<std::string>();
    EXPECT_EQ(line.rfind("bwrap: Can't mount proc on /proc: ", 0), 0u) << line;
    EXPECT_NE(line.back(), '\r');  // the CR of CRLF is not part of the line
}

// What reading a large input may add to classify's peak RSS over reading one line. The bound
// is on the growth, not the total: a sanitizer build starts at about 32 MiB before it reads
// anything, an optimised one at about 2.5 MiB, and either would grow by the input's size if
// it held it.
constexpr long kRssGrowthLimitKb = 16 * 1024;

// The child's peak RSS (wait4) includes the pages it shared with this process between fork
// and exec, so this process must be small when it spawns: earlier tests leave freed heap
// resident, which malloc_trim hands back. Our own RSS goes into failure messages.
long own_rss_kb() {
    malloc_trim(0);
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

TEST_F(Classify, TwoHundredMegabyteStreamWithRunnerLineAtTheEnd) {
    const std::string path = scratch / "big.txt";
    {
        std::ofstream out(path, std::ios::binary);
        const std::string noise = std::string(1023, 'n') + "\n";
        std::string block;
        for (int i = 0; i < 1024; ++i) block += noise;  // 1 MiB
        for (int i = 0; i < 200; ++i) out << block;
        out << kBwrapFatal << "\n";
        ASSERT_TRUE(out.good());
    }
    const long base = baseline_rss_kb(kBwrapFatal);
    const long own = own_rss_kb();
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--stderr", path, "--format", "json"}, "");
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    EXPECT_EQ(v["verdict"], "runner-failure");
    EXPECT_EQ(v["line"], kBwrapFatal);
    EXPECT_GT(r.maxRssKb, 0);
    EXPECT_LT(r.maxRssKb - base, kRssGrowthLimitKb) << "one line: " << base << " kB; this process: " << own << " kB";
}

TEST_F(Classify, SixtyFourMegabyteLineWithoutNewlineStaysBounded) {
    const std::string path = scratch / "line.txt";
    {
        std::ofstream out(path, std::ios::binary);
        const std::string block(1 << 20, 'x');
        for (int i = 0; i < 64; ++i) out << block;
        out << " bwrap: Can't mount proc on /proc";  // the signature at the very end, no newline
        ASSERT_TRUE(out.good());
    }
    const long base = baseline_rss_kb("bwrap: Can't mount proc on /proc");
    const long own = own_rss_kb();
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1", "--stderr", path, "--format", "json"}, "");
    ASSERT_EQ(r.status, 0) << r.err;
    const json v = parse(r.out);
    EXPECT_EQ(v["verdict"], "runner-failure");
    ASSERT_TRUE(v["line"].is_string());
    EXPECT_LE(v["line"].get<std::string>().size(), 4096u);  // evidence, not the whole line
    EXPECT_LT(r.maxRssKb - base, kRssGrowthLimitKb) << "one line: " << base << " kB; this process: " << own << " kB";
}

TEST_F(Classify, LargeStreamOnStdinIsRead) {
    // 16 MiB through the pipe, the runner line last: stdin is streamed like a file.
    std::string text;
    text.reserve((16u << 20) + 100);
    const std::string noise = std::string(255, 'n') + "\n";
    while (text.size() < (16u << 20)) text += noise;
    text += std::string(kBwrapFatal) + "\n";
    const e2e::Result r = classify({"--backend", "bwrap", "--exit-code", "1"}, text);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_line_of(r), "runner-failure");
    // No memory bound here: the child's peak RSS includes this process's pages, text and all,
    // from before its exec. The bounded-memory tests above read from a file instead.
}

}  // namespace
