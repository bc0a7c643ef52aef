// Every JSON document dsh-confine prints, taken from the built binary and validated against
// its schema in docs/schemas by test/e2e/validate_json.py (Debian's python3-jsonschema). The
// schemas are strict, so a renamed, missing or retyped field fails here; the last tests prove
// that by mutating real output and expecting the schema to refuse it.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const std::string kPython = "/usr/bin/python3";  // Debian's: its jsonschema is the one .ci/setup installs
const std::string kValidator = std::string(DSH_SOURCE_DIR) + "/test/e2e/validate_json.py";
const std::string kSchemas = std::string(DSH_SOURCE_DIR) + "/docs/schemas";

std::string schema(const std::string& name, const std::string& pointer = "") {
    return kSchemas + "/" + name + (pointer.empty() ? "" : "#" + pointer);
}

bool validator_available() {
    static const bool available = e2e::run_program({kPython, "-c", "import jsonschema"}).status == 0;
    return available;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

class JsonSchema : public ::testing::Test {
protected:
    e2e::TempDir home;
    e2e::TempDir scratch;
    int documents = 0;

    void SetUp() override {
        E2E_REQUIRE(validator_available(), kPython + " cannot import jsonschema (Debian: apt-get install python3-jsonschema)");
        fs::create_directories(scratch / "ws");
    }

    e2e::RunOptions options() const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.env["DSH_CONFINE_STATE_DIR"] = home / "st";
        o.cwd = scratch / "ws";
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args) const { return e2e::run(args, options()); }

    std::string config(const std::string& text) const {
        const std::string path = scratch / "config.toml";
        e2e::write_file(path, text);
        return path;
    }

    // stdout of a command that must succeed (or exit with `status`).
    std::string output(const std::vector<std::string>& args, int status = 0) const {
        const e2e::Result r = dsh(args);
        EXPECT_EQ(r.status, status) << r.err;
        return r.out;
    }

    // Whether the backend is usable here, as doctor's fresh probe says.
    bool usable(const std::string& backend) const {
        const ordered_json doctor = ordered_json::parse(output({"doctor", "--json"}), nullptr, false);
        if (!doctor.is_object()) return false;
        for (const auto& item : doctor["backends"])
            if (item.value("name", "") == backend) return item.value("usable", false);
        return false;
    }

    ::testing::AssertionResult check(const std::string& schema_ref, const std::string& document, bool expect_valid) {
        if (document.empty()) return ::testing::AssertionFailure() << "no document to validate";
        const std::string path = scratch / ("document-" + std::to_string(++documents) + ".json");
        e2e::write_file(path, document);
        std::vector<std::string> argv = {kPython, kValidator};
        if (!expect_valid) argv.push_back("--expect-invalid");
        argv.insert(argv.end(), {schema_ref, path});
        const e2e::Result r = e2e::run_program(argv);
        if (r.status == 0) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "validator exit " << r.status << "\n" << r.err << "document: " << document;
    }
    ::testing::AssertionResult Valid(const std::string& schema_ref, const std::string& document) {
        return check(schema_ref, document, true);
    }
    ::testing::AssertionResult Invalid(const std::string& schema_ref, const std::string& document) {
        return check(schema_ref, document, false);
    }

    std::string rules_plan() const {
        const std::string plan = scratch / "rules.json";
        e2e::write_file(plan, R"({"denialSignatures":["read-only file system"],)"
                              R"("runnerFailureRules":[{"allowedExitCodes":[1],"fatalSignatures":["runner: "],"informationalLines":[]}]})");
        return plan;
    }

    // A fake bwrap that refuses the way a host without user namespaces makes it refuse.
    std::string refusing_bwrap_config() const {
        const std::string fake = scratch / "fake-bwrap";
        e2e::write_file(fake,
                        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace, likely because the kernel "
                        "does not allow non-privileged user namespaces.' >&2\nexit 1\n");
        chmod(fake.c_str(), 0755);
        return config("[provider]\nbackends = [\"bwrap\"]\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    }
};

TEST_F(JsonSchema, SchemasAreValidDraft202012) {
    const e2e::Result r = e2e::run_program({kPython, kValidator, "--check-schemas", kSchemas});
    EXPECT_EQ(r.status, 0) << r.err;
}

// --- policy and session -----------------------------------------------------------------

TEST_F(JsonSchema, PolicyAgentlessAndWithSession) {
    EXPECT_TRUE(Valid(schema("policy.schema.json"), output({"policy"})));
    output({"session", "start", "s1", "--cwd", scratch / "ws"});
    const std::string with_session = output({"policy", "--session", "s1", "--mode", "workspace-write"});
    EXPECT_TRUE(contains(with_session, "\"sessionId\":\"s1\"")) << with_session;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), with_session));
}

TEST_F(JsonSchema, SessionShowBeforeAndAfterAModeEvent) {
    output({"session", "start", "s1", "--cwd", scratch / "ws"});
    EXPECT_TRUE(Valid(schema("session.schema.json"), output({"session", "show", "s1"})));
    output({"session", "mode", "s1", "workspace-write"});
    output({"session", "mode", "s1", "danger-full-access"});
    EXPECT_TRUE(Valid(schema("session.schema.json"), output({"session", "show", "s1"})));
}

// Every dimension beside the mode, from the command line and from the configuration.
TEST_F(JsonSchema, PolicyWithEveryDimension) {
    fs::create_directories(scratch / "extra");
    fs::create_directories(scratch / "from-config");
    e2e::write_file(scratch / "secret", "x\n");
    const std::string file = config("[sandbox]\nwritable_roots = [\"" + (scratch / "from-config") +
                                    "\"]\nprotected_paths = [\".git/hooks\", \".envrc\"]\ndeny_read = [\"" +
                                    (scratch / "secret") + "\", \"" + (scratch / "missing") + "\"]\nnetwork = \"deny\"\n");
    const std::string from_config = output({"policy", "--config", file, "--mode", "workspace-write"});
    const ordered_json parsed = ordered_json::parse(from_config);
    EXPECT_EQ(parsed["writableRoots"], ordered_json::array({scratch / "from-config"})) << from_config;
    EXPECT_EQ(parsed["protectedPaths"], ordered_json::array({".git/hooks", ".envrc"})) << from_config;
    EXPECT_EQ(parsed["unreadablePaths"], ordered_json::array({scratch / "missing", scratch / "secret"})) << from_config;
    EXPECT_EQ(parsed["network"], "deny") << from_config;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), from_config));

    const std::string flags = output({"policy", "--config", file, "--mode", "workspace-write", "--writable-root",
                                      scratch / "extra", "--deny-read", scratch / "secret", "--network", "allow"});
    EXPECT_TRUE(contains(flags, "\"writableRoots\":[\"" + (scratch / "extra") + "\"]")) << flags;
    EXPECT_TRUE(contains(flags, "\"network\":\"allow\"")) << flags;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), flags));
    EXPECT_TRUE(contains(output({"policy"}), "\"writableRoots\":[],\"protectedPaths\":[\".git/hooks\",\".git/config\"],"
                                              "\"unreadablePaths\":[],\"network\":\"allow\",\"git\":\"protect\"}"));
    const std::string strict = output({"policy", "--git", "read-only"});
    EXPECT_TRUE(contains(strict, "\"git\":\"read-only\"")) << strict;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), strict));
}

TEST_F(JsonSchema, SessionShowWithWritableRootsAndNetworkEvents) {
    fs::create_directories(scratch / "extra");
    output({"session", "start", "s1", "--cwd", scratch / "ws", "--writable-root", scratch / "extra"});
    const std::string started = output({"session", "show", "s1"});
    EXPECT_TRUE(contains(started, "\"writableRoots\":[\"" + (scratch / "extra") + "\"],\"network\":null")) << started;
    EXPECT_TRUE(Valid(schema("session.schema.json"), started));
    output({"session", "network", "s1", "deny"});
    output({"session", "mode", "s1", "workspace-write"});
    const std::string shown = output({"session", "show", "s1"});
    const ordered_json parsed = ordered_json::parse(shown);
    EXPECT_EQ(parsed["network"], "deny") << shown;
    ASSERT_EQ(parsed["events"].size(), 2u) << shown;
    EXPECT_EQ(parsed["events"][0]["type"], "sandbox/network") << shown;
    EXPECT_EQ(parsed["events"][1]["type"], "sandbox/mode") << shown;
    EXPECT_TRUE(Valid(schema("session.schema.json"), shown));
    const std::string policy = output({"policy", "--session", "s1"});
    EXPECT_TRUE(contains(policy, "\"network\":\"deny\"")) << policy;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), policy));
}

// --- the plan ---------------------------------------------------------------------------

TEST_F(JsonSchema, PlanConfinedByBwrap) {
    const e2e::Result probe = dsh({"--print", "--backend", "bwrap", "--", "true"});
    E2E_REQUIRE(probe.status == 0, "bwrap cannot confine here: " + e2e::first_line(probe.err));
    output({"session", "start", "s1", "--cwd", scratch / "ws"});
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--print", "--backend", "bwrap", "--", "true"},
          std::vector<std::string>{"--print", "--backend", "bwrap", "--mode", "workspace-write", "--", "sh", "-c", "echo hi"},
          std::vector<std::string>{"--print", "--backend", "bwrap", "--session", "s1", "--mode", "workspace-write", "--", "true"}}) {
        const std::string plan = output(args);
        EXPECT_TRUE(contains(plan, "\"backend\":\"bwrap\"")) << plan;
        EXPECT_TRUE(Valid(schema("plan.schema.json"), plan));
        EXPECT_TRUE(Valid(schema("plan.schema.json", "/$defs/confinedPlan"), plan));
    }
}

TEST_F(JsonSchema, PlanConfinedByLandlockHasGaps) {
    const e2e::Result probe = dsh({"--print", "--backend", "landlock", "--", "true"});
    E2E_REQUIRE(probe.status == 0, "Landlock cannot confine here: " + e2e::first_line(probe.err));
    for (const char* mode : {"read-only", "workspace-write"}) {
        const std::string plan = output({"--print", "--backend", "landlock", "--mode", mode, "--", "true"});
        EXPECT_TRUE(contains(plan, "\"enforcement\":\"partial\"")) << plan;
        EXPECT_TRUE(Valid(schema("plan.schema.json"), plan));
        EXPECT_TRUE(Valid(schema("plan.schema.json", "/$defs/confinedPlan"), plan));
    }
}

// A plan with every dimension: an extra root, a repository's protected paths, an unreadable
// file, the network denied. Under Landlock the protected and unreadable paths are gaps.
TEST_F(JsonSchema, PlanWithEveryDimension) {
    fs::create_directories(scratch / "ws/.git/hooks");
    e2e::write_file(scratch / "ws/.git/config", "");
    fs::create_directories(scratch / "extra");
    e2e::write_file(scratch / "secret", "x\n");
    bool any = false;
    for (const char* backend : {"bwrap", "landlock"}) {
        const e2e::Result r = dsh({"--print", "--backend", backend, "--mode", "workspace-write", "--writable-root",
                                   scratch / "extra", "--deny-read", scratch / "secret", "--network", "deny", "--", "true"});
        if (r.status != 0) continue;  // not usable here
        any = true;
        const ordered_json plan = ordered_json::parse(r.out);
        EXPECT_EQ(plan["protectedPaths"], ordered_json::array({scratch / "ws/.git/config", scratch / "ws/.git/hooks"})) << r.out;
        EXPECT_EQ(plan["unreadablePaths"], ordered_json::array({scratch / "secret"})) << r.out;
        EXPECT_EQ(plan["network"], "deny") << r.out;
        EXPECT_EQ(plan["policy"]["network"], "deny") << r.out;
        EXPECT_TRUE(contains(r.out, "\"" + (scratch / "extra") + "\"")) << r.out;
        EXPECT_TRUE(contains(r.out, "\"operation not permitted\"")) << r.out;
        EXPECT_TRUE(Valid(schema("plan.schema.json", "/$defs/confinedPlan"), r.out));
        EXPECT_TRUE(Valid(schema("plan.schema.json"), r.out));
    }
    E2E_REQUIRE(any, "no backend can confine here");
    // Unconfined: the lists are empty and the network is not governed.
    const std::string unconfined = output({"--print", "--mode", "danger-full-access", "--", "true"});
    EXPECT_TRUE(contains(unconfined, "\"protectedPaths\":[],\"unreadablePaths\":[],\"network\":null")) << unconfined;
}

TEST_F(JsonSchema, PlanUnconfined) {
    const std::string plan = output({"--print", "--mode", "danger-full-access", "--", "true"});
    EXPECT_TRUE(Valid(schema("plan.schema.json"), plan));
    EXPECT_TRUE(Valid(schema("plan.schema.json", "/$defs/unconfinedPlan"), plan));
    EXPECT_TRUE(Invalid(schema("plan.schema.json", "/$defs/confinedPlan"), plan));
}

TEST_F(JsonSchema, PlanSandboxUnavailableErrorObject) {
    const std::string file = config("[provider]\nbackends = [\"bwrap\"]\n[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = dsh({"--print", "--config", file, "--", "true"});
    EXPECT_EQ(r.status, 125);
    EXPECT_TRUE(contains(r.err, "SANDBOX_UNAVAILABLE")) << r.err;
    EXPECT_TRUE(Valid(schema("plan.schema.json"), r.out));
    EXPECT_TRUE(Valid(schema("plan.schema.json", "/$defs/sandboxUnavailable"), r.out));
}

// --- the verdict ------------------------------------------------------------------------

TEST_F(JsonSchema, VerdictOfEachKind) {
    const std::string plan = rules_plan();
    struct Case {
        std::string verdict, exitCode, stderrText;
    };
    for (const Case& c : {Case{"success", "0", ""}, Case{"failure", "2", "make: *** [all] Error 2\n"},
                          Case{"denial", "1", "touch: cannot touch 'x': Read-only file system\n"},
                          Case{"runner-failure", "1", "runner: cannot set up\n"}}) {
        const std::string input = scratch / ("stderr-" + c.verdict);
        e2e::write_file(input, c.stderrText);
        const std::string verdict =
            output({"classify", "--plan", plan, "--exit-code", c.exitCode, "--stderr", input, "--format", "json"});
        EXPECT_TRUE(contains(verdict, "\"verdict\":\"" + c.verdict + "\"")) << verdict;
        EXPECT_TRUE(Valid(schema("verdict.schema.json"), verdict));
    }
}

TEST_F(JsonSchema, VerdictPathOnlyForADenial) {
    const std::string input = scratch / "stderr-path";
    e2e::write_file(input, "touch: cannot touch '/etc/x': Read-only file system\n");
    const ordered_json denial = ordered_json::parse(
        output({"classify", "--plan", rules_plan(), "--exit-code", "1", "--stderr", input, "--format", "json"}));
    EXPECT_EQ(denial["path"], "/etc/x") << denial.dump();
    EXPECT_TRUE(Valid(schema("verdict.schema.json"), denial.dump()));
    ordered_json unnamed = denial;
    unnamed["path"] = nullptr;
    EXPECT_TRUE(Valid(schema("verdict.schema.json"), unnamed.dump()));
    ordered_json older = denial;  // a verdict printed before `path` existed
    older.erase("path");
    EXPECT_TRUE(Valid(schema("verdict.schema.json"), older.dump()));
    ordered_json empty = denial;
    empty["path"] = "";
    EXPECT_TRUE(Invalid(schema("verdict.schema.json"), empty.dump()));

    const ordered_json failure = ordered_json::parse(
        output({"classify", "--plan", rules_plan(), "--exit-code", "1", "--stderr", "/dev/null", "--format", "json"}));
    EXPECT_TRUE(failure.contains("path") && failure["path"].is_null()) << failure.dump();
    ordered_json misplaced = failure;
    misplaced["path"] = "/etc/x";
    EXPECT_TRUE(Invalid(schema("verdict.schema.json"), misplaced.dump()));
}

TEST_F(JsonSchema, VerdictFromABackendsDialect) {
    e2e::RunOptions o = options();
    o.input = "bwrap: Can't find source path /nix: No such file or directory\n";
    const e2e::Result r = e2e::run({"classify", "--backend", "bwrap", "--exit-code", "1", "--format", "json"}, o);
    E2E_REQUIRE(r.status == 0, "no bwrap dialect on this system: " + e2e::first_line(r.err));
    EXPECT_TRUE(contains(r.out, "runner-failure")) << r.out;
    EXPECT_TRUE(Valid(schema("verdict.schema.json"), r.out));
}

// --- the run report ---------------------------------------------------------------------

TEST_F(JsonSchema, RunReportOfAConfinedFailureAndDenial) {
    E2E_REQUIRE(usable("bwrap") || usable("landlock"), "no usable backend here");
    const std::string report = scratch / "report.json";
    dsh({"run", "--report", report, "--", "sh", "-c", "exit 3"});
    EXPECT_TRUE(contains(e2e::read_file(report), "\"exitCode\":3")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));

    dsh({"run", "--mode", "read-only", "--report", report, "--", "sh", "-c", "echo x > '" + (scratch / "ws/f") + "'"});
    EXPECT_TRUE(contains(e2e::read_file(report), "\"verdict\":\"denial\"")) << e2e::read_file(report);
    EXPECT_TRUE(contains(e2e::read_file(report), "\"path\":\"" + (scratch / "ws/f") + "\"")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
}

TEST_F(JsonSchema, RunReportOfASignalDeath) {
    const std::string report = scratch / "report.json";
    dsh({"run", "--mode", "danger-full-access", "--report", report, "--", "sh", "-c", "kill -TERM $$"});
    EXPECT_TRUE(contains(e2e::read_file(report), "\"signal\":15")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
    if (usable("landlock")) {  // Landlock execs the command in place: the signal is the command's own
        dsh({"run", "--backend", "landlock", "--report", report, "--", "sh", "-c", "kill -TERM $$"});
        EXPECT_TRUE(contains(e2e::read_file(report), "\"signal\":15")) << e2e::read_file(report);
        EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
    }
}

TEST_F(JsonSchema, RunReportOfARunnerFailure) {
    const std::string report = scratch / "report.json";
    const e2e::Result r = dsh({"run", "--config", refusing_bwrap_config(), "--report", report, "--", "true"});
    EXPECT_EQ(r.status, 125) << r.err;
    EXPECT_TRUE(contains(e2e::read_file(report), "\"verdict\":\"runner-failure\"")) << e2e::read_file(report);
    EXPECT_TRUE(contains(e2e::read_file(report), "\"started\":false")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
}

TEST_F(JsonSchema, RunReportUnconfined) {
    const std::string report = scratch / "report.json";
    dsh({"run", "--mode", "danger-full-access", "--report", report, "--", "true"});
    EXPECT_TRUE(contains(e2e::read_file(report), "\"backend\":null")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
}

// A timeout and a limit: the outcomes, the verdicts of the same names and the limits list are
// tied together, and a report that names a limit without that outcome is refused.
TEST_F(JsonSchema, RunReportOfATimeoutAndOfALimit) {
    E2E_REQUIRE(usable("bwrap") || usable("landlock"), "no usable backend here");
    const std::string report = scratch / "report.json";
    EXPECT_EQ(dsh({"run", "--timeout", "200ms", "--limit", "fsize=1M", "--report", report, "--", "sleep", "30"}).status, 124);
    EXPECT_TRUE(contains(e2e::read_file(report), "\"outcome\":\"timeout\"")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
    const ordered_json timed_out = ordered_json::parse(e2e::read_file(report));
    ordered_json no_timeout = timed_out;
    no_timeout["timeoutMs"] = nullptr;
    EXPECT_TRUE(Invalid(schema("report.schema.json"), no_timeout.dump()));
    ordered_json exited = timed_out;
    exited["outcome"] = "exited";
    EXPECT_TRUE(Invalid(schema("report.schema.json"), exited.dump())) << "a timeout verdict without the outcome";
    ordered_json named = timed_out;
    named["limit"] = "memory";
    EXPECT_TRUE(Invalid(schema("report.schema.json"), named.dump()));
    EXPECT_EQ(dsh({"run", "--mode", "danger-full-access", "--timeout", "200ms", "--report", report, "--", "sleep", "30"}).status, 124);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
    ordered_json unscoped = timed_out;
    unscoped["limits"][0]["scope"] = "none";
    EXPECT_TRUE(Invalid(schema("report.schema.json"), unscoped.dump())) << "an rlimit bounds something";

    E2E_REQUIRE(getuid() == 0, "the memory limit's cgroup is made as root here");
    EXPECT_NE(dsh({"run", "--limit", "memory=16M", "--limit", "pids=20", "--report", report, "--", "sh", "-c",
                   "head -c 64M /dev/zero | tail"})
                  .status,
              0);
    EXPECT_TRUE(contains(e2e::read_file(report), "\"outcome\":\"limit\",\"limit\":\"memory\"")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
    ordered_json unnamed = ordered_json::parse(e2e::read_file(report));
    unnamed["limit"] = nullptr;
    EXPECT_TRUE(Invalid(schema("report.schema.json"), unnamed.dump()));
}

// dsh-confine's own failure before anything ran: an `error` object instead of a verdict. The
// shape is strict both ways: an error report with a verdict, or a report that claims a start,
// is refused, and so is a report that has neither an error nor a verdict.
TEST_F(JsonSchema, RunReportOfItsOwnFailure) {
    const std::string report = scratch / "report.json";
    EXPECT_EQ(dsh({"run", "--backend", "seatbelt", "--report", report, "--", "true"}).status, 125);
    EXPECT_TRUE(contains(e2e::read_file(report), "\"code\":\"SANDBOX_UNAVAILABLE\"")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));
    const ordered_json error_report = ordered_json::parse(e2e::read_file(report));

    EXPECT_EQ(dsh({"run", "--config", scratch / "missing.toml", "--report", report, "--", "true"}).status, 125);
    EXPECT_TRUE(contains(e2e::read_file(report), "\"policy\":null")) << e2e::read_file(report);
    EXPECT_TRUE(Valid(schema("report.schema.json"), e2e::read_file(report)));

    ordered_json started = error_report;
    started["started"] = true;
    EXPECT_TRUE(Invalid(schema("report.schema.json"), started.dump()));
    ordered_json with_verdict = error_report;
    with_verdict["verdict"] = {{"verdict", "failure"}, {"exitCode", 125}, {"line", nullptr}, {"signature", nullptr}, {"rule", nullptr}};
    EXPECT_TRUE(Invalid(schema("report.schema.json"), with_verdict.dump()));
    ordered_json other_status = error_report;
    other_status["exitCode"] = 1;
    EXPECT_TRUE(Invalid(schema("report.schema.json"), other_status.dump()));
    ordered_json neither = error_report;
    neither.erase("error");
    EXPECT_TRUE(Invalid(schema("report.schema.json"), neither.dump()));
}

// --- doctor -----------------------------------------------------------------------------

TEST_F(JsonSchema, DoctorJson) {
    EXPECT_TRUE(Valid(schema("doctor.schema.json"), output({"doctor", "--json"})));
    // An unusable backend (no probe), and the probe cache turned off.
    const std::string file = config(
        "[provider]\nprobe_cache = false\nbackends = [\"bwrap\"]\n[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const std::string doctor = output({"doctor", "--json", "--config", file});
    EXPECT_TRUE(contains(doctor, "\"probe\":null")) << doctor;
    EXPECT_TRUE(Valid(schema("doctor.schema.json"), doctor));
}

TEST_F(JsonSchema, DoctorJsonVerify) {
    const e2e::Result r = dsh({"doctor", "--json", "--verify"});
    EXPECT_TRUE(r.status == 0 || r.status == 1) << r.status << " " << r.err;  // 1: a check failed; the shape is the same
    const ordered_json doctor = ordered_json::parse(r.out, nullptr, false);
    ASSERT_TRUE(doctor.is_object()) << r.out;
    EXPECT_TRUE(doctor.contains("verify")) << r.out;
    EXPECT_TRUE(Valid(schema("doctor.schema.json"), r.out));
}

// --- strictness: real output, one field renamed, retyped or added -------------------------

// --- the hosts network ----------------------------------------------------------------

// The hosts state in every document that shows it: the policy from flags, the configuration and
// a session; the session's event; the plan under each backend; a run whose request the proxy
// refused (the report's refusedHosts and the verdict's host); classify naming the host. The
// refused host is never contacted: only the loopback proxy sees the request.
TEST_F(JsonSchema, TheHostsNetworkInEveryDocument) {
    const ordered_json hosts = {{"mode", "hosts"}, {"allow", {"*.example.org", "[2001:db8::1]:443", "example.org"}}};
    const std::vector<std::string> allow = {"--allow-host", "Example.ORG.", "--allow-host", "*.example.org",
                                            "--allow-host", "[2001:DB8:0::1]:443"};
    std::vector<std::string> args = {"policy"};
    args.insert(args.end(), allow.begin(), allow.end());
    const std::string from_flags = output(args);
    EXPECT_EQ(ordered_json::parse(from_flags)["network"], hosts) << from_flags;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), from_flags));
    const std::string file = config("[network]\nallow_hosts = [\"example.org\", \"*.example.org\", \"[2001:db8::1]:443\"]\n");
    const std::string from_config = output({"policy", "--config", file});
    EXPECT_EQ(ordered_json::parse(from_config)["network"], hosts) << from_config;
    EXPECT_TRUE(Valid(schema("policy.schema.json"), from_config));

    output({"session", "start", "s1", "--cwd", scratch / "ws"});
    output({"session", "network", "s1", "hosts", "example.org", "*.example.org", "[2001:db8::1]:443"});
    const std::string shown = output({"session", "show", "s1"});
    const ordered_json session = ordered_json::parse(shown);
    EXPECT_EQ(session["network"], hosts) << shown;
    EXPECT_EQ(session["events"][0]["allow"], hosts["allow"]) << shown;
    EXPECT_TRUE(Valid(schema("session.schema.json"), shown));
    EXPECT_TRUE(Valid(schema("policy.schema.json"), output({"policy", "--session", "s1"})));

    bool any = false;
    for (const char* backend : {"bwrap", "landlock"}) {
        std::vector<std::string> print = {"--print", "--backend", backend};
        print.insert(print.end(), allow.begin(), allow.end());
        print.insert(print.end(), {"--", "true"});
        const e2e::Result r = dsh(print);
        if (r.status != 0) continue;  // not usable here
        any = true;
        const ordered_json plan = ordered_json::parse(r.out);
        EXPECT_EQ(plan["network"], hosts) << r.out;
        EXPECT_TRUE(contains(r.out, "\"dsh-confine: network: refused \"")) << r.out;
        EXPECT_TRUE(Valid(schema("plan.schema.json", "/$defs/confinedPlan"), r.out));
        EXPECT_TRUE(Valid(schema("plan.schema.json"), r.out));
    }
    E2E_REQUIRE(any, "no backend can confine in the hosts network here");

    // A CONNECT to a host the list does not name, through the proxy the environment names.
    const std::string client =
        "import os, socket, urllib.parse\n"
        "proxy = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])\n"
        "s = socket.create_connection((proxy.hostname, proxy.port))\n"
        "s.sendall(b'CONNECT refused.example:443 HTTP/1.1\\r\\nHost: refused.example:443\\r\\n\\r\\n')\n"
        "print(s.recv(200).split(b'\\r\\n')[0].decode())\n"
        "raise SystemExit(7)\n";
    const std::string report = scratch / "report.json";
    dsh({"run", "--allow-host", "example.org", "--report", report, "--", "/usr/bin/python3", "-c", client});
    const ordered_json parsed = ordered_json::parse(e2e::read_file(report));
    EXPECT_EQ(parsed["refusedHosts"], ordered_json::parse(R"([{"host":"refused.example:443","count":1}])")) << parsed.dump();
    EXPECT_EQ(parsed["verdict"]["verdict"], "denial") << parsed.dump();
    EXPECT_EQ(parsed["verdict"]["host"], "refused.example:443") << parsed.dump();
    EXPECT_TRUE(Valid(schema("report.schema.json"), parsed.dump()));
    ordered_json uncounted = parsed;
    uncounted["refusedHosts"][0]["count"] = 0;
    EXPECT_TRUE(Invalid(schema("report.schema.json"), uncounted.dump()));
    ordered_json both = parsed;
    both["verdict"]["path"] = "/etc/x";
    EXPECT_TRUE(Invalid(schema("report.schema.json"), both.dump())) << "a denial names a host or a path, not both";

    e2e::RunOptions o = options();
    o.input = "dsh-confine: network: refused refused.example:443, not in allow_hosts\n";
    const e2e::Result verdict = e2e::run({"classify", "--backend", "bwrap", "--exit-code", "1", "--format", "json"}, o);
    EXPECT_TRUE(contains(verdict.out, "\"host\":\"refused.example:443\"")) << verdict.out << verdict.err;
    EXPECT_TRUE(Valid(schema("verdict.schema.json"), verdict.out));

    // An empty allow-list is no hosts state, in the policy and in the session's event.
    ordered_json policy = ordered_json::parse(from_flags);
    policy["network"]["allow"] = ordered_json::array();
    EXPECT_TRUE(Invalid(schema("policy.schema.json"), policy.dump()));
    ordered_json event = session;
    event["events"][0].erase("allow");
    EXPECT_TRUE(Invalid(schema("session.schema.json"), event.dump()));
}

ordered_json renamed(ordered_json object, const std::string& from, const std::string& to) {
    ordered_json out = ordered_json::object();
    for (auto& [key, value] : object.items()) out[key == from ? to : key] = value;
    return out;
}

TEST_F(JsonSchema, ARenamedOrRetypedFieldFails) {
    const ordered_json plan = ordered_json::parse(output({"--print", "--mode", "danger-full-access", "--", "true"}));
    EXPECT_TRUE(Invalid(schema("plan.schema.json"), renamed(plan, "writableRoots", "writeableRoots").dump()));
    ordered_json plan_policy = plan;
    plan_policy["policy"] = renamed(plan["policy"], "workspaceRoot", "workspace_root");
    EXPECT_TRUE(Invalid(schema("plan.schema.json"), plan_policy.dump()));

    const ordered_json verdict = ordered_json::parse(
        output({"classify", "--plan", rules_plan(), "--exit-code", "1", "--stderr", "/dev/null", "--format", "json"}));
    EXPECT_TRUE(Valid(schema("verdict.schema.json"), verdict.dump()));
    EXPECT_TRUE(Invalid(schema("verdict.schema.json"), renamed(verdict, "rule", "ruleIndex").dump()));
    ordered_json retyped = verdict;
    retyped["exitCode"] = "1";
    EXPECT_TRUE(Invalid(schema("verdict.schema.json"), retyped.dump()));

    const std::string report_file = scratch / "report.json";
    dsh({"run", "--mode", "danger-full-access", "--report", report_file, "--", "true"});
    const ordered_json report = ordered_json::parse(e2e::read_file(report_file));
    EXPECT_TRUE(Invalid(schema("report.schema.json"), renamed(report, "durationMs", "duration").dump()));
    ordered_json extra = report;
    extra["stderr"] = "";
    EXPECT_TRUE(Invalid(schema("report.schema.json"), extra.dump()));

    ordered_json doctor = ordered_json::parse(output({"doctor", "--json"}));
    ASSERT_FALSE(doctor["backends"].empty());
    doctor["backends"][0] = renamed(doctor["backends"][0], "probe", "probes");
    EXPECT_TRUE(Invalid(schema("doctor.schema.json"), doctor.dump()));

    output({"session", "start", "s1", "--cwd", scratch / "ws"});
    const ordered_json session = ordered_json::parse(output({"session", "show", "s1"}));
    EXPECT_TRUE(Invalid(schema("session.schema.json"), renamed(session, "sessionId", "id").dump()));
    EXPECT_TRUE(Invalid(schema("session.schema.json"), renamed(session, "writableRoots", "roots").dump()));

    const ordered_json policy = ordered_json::parse(output({"policy"}));
    EXPECT_TRUE(Invalid(schema("policy.schema.json"), renamed(policy, "unreadablePaths", "denyRead").dump()));
    ordered_json network = policy;
    network["network"] = "maybe";
    EXPECT_TRUE(Invalid(schema("policy.schema.json"), network.dump()));
}

}  // namespace
