// Fail closed: when no backend can confine, the command never runs (a sentinel file proves
// it) and the outcome is 125 SANDBOX_UNAVAILABLE, or the runner's own refusal, which the
// plan's rules recognize as a runner failure. Covered: bubblewrap missing, bubblewrap
// refusing (a fake runner, and a real run inside `unshare -U`), no Landlock (a seccomp filter
// makes its syscalls fail with ENOSYS: the Landlock runner, and the bubblewrap stage's signal
// scope), and a probe that hangs.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

using e2e::exists;

struct Scene {
    e2e::TempDir home;
    e2e::TempDir dir{"/var/tmp"};
    std::string sentinel = dir / "ran";
    e2e::RunOptions options;

    Scene() {
        options.env = e2e::isolated_env(home.path());
        options.cwd = dir.path();
    }
    void config(const std::string& text) {
        mkdir((home / "config").c_str(), 0700);
        mkdir((home / "config/dsh-confine").c_str(), 0700);
        e2e::write_file(home / "config/dsh-confine/config.toml", text);
    }
    // A runner script, made executable. It lies outside the workspace (`dir`): a runner inside
    // a root the command may write is refused before anything is tried.
    std::string fake(const std::string& name, const std::string& body) {
        mkdir((home / "bin").c_str(), 0755);
        const std::string path = home / ("bin/" + name);
        e2e::write_file(path, "#!/bin/sh\n" + body);
        chmod(path.c_str(), 0755);
        return path;
    }
    std::vector<std::string> confined(const std::vector<std::string>& options_before) const {
        std::vector<std::string> args = options_before;
        args.insert(args.end(), {"--mode", "workspace-write", "--workspace-root", dir.path(), "--", "/usr/bin/touch", sentinel});
        return args;
    }
    // A read-only call whose command says on stdout that it ran (a sentinel file cannot be
    // written in read-only mode, so only its output proves it ran).
    std::vector<std::string> read_only(const std::vector<std::string>& options_before) const {
        std::vector<std::string> args = options_before;
        args.insert(args.end(), {"--mode", "read-only", "--workspace-root", dir.path(), "--", "/bin/sh", "-c", "echo ran"});
        return args;
    }
};

TEST(FailClosed, BwrapMissingAsSoleBackendIsUnavailable) {
    Scene s;
    s.config("[provider]\nbackends = [\"bwrap\"]\n[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = e2e::run(s.confined({}), s.options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("dsh-confine: error: SANDBOX_UNAVAILABLE: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bwrap: "), std::string::npos) << "the candidate's reason is named: " << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, ForcedMissingBwrapIsUnavailableEvenWithLandlockPresent) {
    Scene s;
    s.config("[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = e2e::run(s.confined({"--backend", "bwrap"}), s.options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("SANDBOX_UNAVAILABLE"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, PrintWithNoUsableBackendPrintsAnErrorObject) {
    Scene s;
    s.config("[provider]\nbackends = [\"bwrap\"]\n[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    const e2e::Result r = e2e::run(s.confined({"--print", "--format", "json"}), s.options);
    EXPECT_EQ(r.status, 125);
    nlohmann::json error = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(error.is_object()) << r.out;
    EXPECT_EQ(error["error"]["code"], "SANDBOX_UNAVAILABLE");
    EXPECT_EQ(error["error"]["candidates"][0]["backend"], "bwrap");
}

TEST(FailClosed, RefusingBwrapAsSoleCandidateIsRecognizedAsRunnerFailure) {
    Scene s;
    const std::string fake = s.fake("bwrap", "echo 'bwrap: No permissions to create a new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n");
    s.config("[provider]\nbackends = [\"bwrap\"]\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    // The sole candidate skips the probe: its refusal at run time is the fail-closed end.
    const e2e::Result r = e2e::run(s.confined({}), s.options);
    EXPECT_EQ(r.status, 1);
    EXPECT_FALSE(exists(s.sentinel));
    const e2e::Result plan = e2e::run(s.confined({"--print"}), s.options);
    ASSERT_EQ(plan.status, 0) << plan.err;
    e2e::write_file(s.dir / "plan.json", plan.out);
    e2e::RunOptions classify = s.options;
    classify.input = r.err;
    const e2e::Result verdict = e2e::run({"classify", "--plan", s.dir / "plan.json", "--exit-code", "1"}, classify);
    EXPECT_EQ(verdict.status, 0);
    EXPECT_EQ(e2e::first_line(verdict.out), "runner-failure") << r.err;
}

TEST(FailClosed, RefusingBwrapInAChainFallsBackToLandlockStillConfined) {
    Scene s;
    const std::string fake = s.fake("bwrap", "echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n");
    s.config("[provider]\nbackends = [\"bwrap\", \"landlock\"]\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    e2e::TempDir elsewhere("/var/tmp");
    const std::string outside = elsewhere / "outside";
    const e2e::Result r = e2e::run({"--mode", "workspace-write", "--workspace-root", s.dir.path(), "--", "/usr/bin/touch", outside},
                                   s.options);
    EXPECT_NE(r.status, 0);
    EXPECT_FALSE(exists(outside)) << "the fallback ran the command unconfined";
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << "Landlock's denial: " << r.err;
}

TEST(FailClosed, RealBwrapInsideAnUnmappedUserNamespaceFailsClosed) {
    Scene s;
    E2E_REQUIRE(e2e::run_program({"/usr/bin/unshare", "-U", "/bin/true"}).status == 0, "unshare -U is not permitted here");
    s.config("[provider]\nbackends = [\"bwrap\"]\n");
    e2e::RunOptions options = s.options;
    options.prefix = {"/usr/bin/unshare", "-U"};
    const e2e::Result r = e2e::run(s.read_only({"run"}), options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("RUNNER_FAILURE"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
}

// In workspace-write it fails earlier: an unmapped uid cannot prove the private temp base its
// own, so bubblewrap is not even tried.
TEST(FailClosed, RealBwrapInsideAnUnmappedUserNamespaceRefusesWorkspaceWriteBeforeRunning) {
    Scene s;
    E2E_REQUIRE(e2e::run_program({"/usr/bin/unshare", "-U", "/bin/true"}).status == 0, "unshare -U is not permitted here");
    s.config("[provider]\nbackends = [\"bwrap\"]\n");
    e2e::RunOptions options = s.options;
    options.prefix = {"/usr/bin/unshare", "-U"};
    const e2e::Result r = e2e::run(s.confined({"run"}), options);
    EXPECT_TRUE(e2e::IsError(r, "SANDBOX_UNAVAILABLE"));
    EXPECT_NE(r.err.find("is not mapped"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, RealBwrapInsideAnUnmappedUserNamespaceExecPathIsClassifiedRunnerFailure) {
    Scene s;
    E2E_REQUIRE(e2e::run_program({"/usr/bin/unshare", "-U", "/bin/true"}).status == 0, "unshare -U is not permitted here");
    e2e::RunOptions options = s.options;
    options.prefix = {"/usr/bin/unshare", "-U"};
    const e2e::Result r = e2e::run(s.read_only({"--backend", "bwrap"}), options);
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.out, "");
    e2e::RunOptions classify = s.options;
    classify.input = r.err;
    const e2e::Result verdict =
        e2e::run({"classify", "--backend", "bwrap", "--exit-code", std::to_string(r.status)}, classify);
    EXPECT_EQ(e2e::first_line(verdict.out), "runner-failure") << r.err;
}

TEST(FailClosed, DefaultChainInsideAnUnmappedUserNamespaceStillConfines) {
    Scene s;
    E2E_REQUIRE(e2e::run_program({"/usr/bin/unshare", "-U", "/bin/true"}).status == 0, "unshare -U is not permitted here");
    e2e::RunOptions options = s.options;
    options.prefix = {"/usr/bin/unshare", "-U"};
    const std::string outside = s.dir / "outside";
    const e2e::Result r = e2e::run({"--mode", "read-only", "--", "/bin/sh", "-c", "echo ran; touch " + outside}, options);
    EXPECT_EQ(e2e::first_line(r.out), "ran") << r.err;  // it ran, under Landlock (bwrap cannot here)
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(outside));
}

// An unmapped caller sees itself as the overflow uid (nobody's): the private temp base
// /tmp/dsh-confine-65534 would be nobody's name, and its ownership check would pass for any
// unmapped owner. The runner refuses it before making anything.
TEST(FailClosed, WorkspaceWriteInsideAnUnmappedUserNamespaceMakesNoTempBase) {
    Scene s;
    E2E_REQUIRE(e2e::run_program({"/usr/bin/unshare", "-U", "/bin/true"}).status == 0, "unshare -U is not permitted here");
    const std::string base = "/tmp/dsh-confine-" + e2e::first_line(e2e::run_program({"/usr/bin/unshare", "-U", "/usr/bin/id", "-u"}).out);
    struct stat before {};
    const bool existed = lstat(base.c_str(), &before) == 0;
    e2e::RunOptions options = s.options;
    options.prefix = {"/usr/bin/unshare", "-U"};
    const e2e::Result r = e2e::run(s.confined({"--backend", "landlock"}), options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("is not mapped in this user namespace"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
    struct stat after {};
    if (existed) {
        ASSERT_EQ(lstat(base.c_str(), &after), 0);
        EXPECT_EQ(after.st_ino, before.st_ino);
        EXPECT_EQ(after.st_uid, before.st_uid);
    } else {
        EXPECT_NE(lstat(base.c_str(), &after), 0) << base << " was made by an unmapped caller";
    }
}

TEST(FailClosed, NoLandlockIsUnavailable) {
    Scene s;
    e2e::RunOptions options = s.options;
    options.prefix = {NO_LANDLOCK_BINARY};
    const e2e::Result r = e2e::run(s.confined({"--backend", "landlock"}), options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("SANDBOX_UNAVAILABLE"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ENOSYS"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, NoLandlockRunnerRefusesAPrintedPlan) {
    Scene s;
    const e2e::Result plan = e2e::run(s.confined({"--backend", "landlock", "--print"}), s.options);
    ASSERT_EQ(plan.status, 0) << plan.err;
    std::vector<std::string> argv = nlohmann::json::parse(plan.out)["argv"].get<std::vector<std::string>>();
    argv.insert(argv.begin(), NO_LANDLOCK_BINARY);
    const e2e::Result r = e2e::run_program(argv, s.options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("dsh-confine: error: LANDLOCK: "), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

// Without Landlock the bubblewrap stage cannot scope signals: the plan says so (partial, the
// signals gap, no --landlock-scope for the stage), and --require-full refuses it.
TEST(FailClosed, NoLandlockBwrapPlanNamesTheSignalsGap) {
    Scene s;
    e2e::RunOptions options = s.options;
    options.prefix = {NO_LANDLOCK_BINARY};
    const e2e::Result plan = e2e::run(s.confined({"--backend", "bwrap", "--print"}), options);
    ASSERT_EQ(plan.status, 0) << plan.err;
    const nlohmann::json parsed = nlohmann::json::parse(plan.out);
    EXPECT_EQ(parsed["enforcement"], "partial");
    ASSERT_EQ(parsed["enforcementGaps"].size(), 1u) << plan.out;
    EXPECT_EQ(parsed["enforcementGaps"][0].get<std::string>().rfind("signals: ", 0), 0u) << plan.out;
    for (const auto& word : parsed["argv"]) EXPECT_NE(word, "--landlock-scope");
    const e2e::Result full = e2e::run(s.confined({"--backend", "bwrap", "--require-full"}), options);
    EXPECT_TRUE(e2e::IsError(full, "ENFORCEMENT_PARTIAL"));
    EXPECT_FALSE(exists(s.sentinel));
}

// A plan that relies on the scopes, run where Landlock is missing: the stage refuses.
TEST(FailClosed, NoLandlockStageRefusesAPlanThatReliesOnItsScopes) {
    Scene s;
    const e2e::Result plan = e2e::run(s.confined({"--backend", "bwrap", "--print"}), s.options);
    ASSERT_EQ(plan.status, 0) << plan.err;
    std::vector<std::string> argv = nlohmann::json::parse(plan.out)["argv"].get<std::vector<std::string>>();
    ASSERT_NE(std::find(argv.begin(), argv.end(), "--landlock-scope"), argv.end()) << plan.out;
    argv.insert(argv.begin(), NO_LANDLOCK_BINARY);
    const e2e::Result r = e2e::run_program(argv, s.options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("dsh-confine: error: BWRAP_STAGE: the plan relies on Landlock's scopes: "), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, NoBackendAtAllNamesEveryCandidate) {
    Scene s;
    s.config("[backend.bwrap]\npath = \"/nonexistent/bwrap\"\n");
    e2e::RunOptions options = s.options;
    options.prefix = {NO_LANDLOCK_BINARY};
    const e2e::Result r = e2e::run(s.confined({}), options);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("bwrap: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("landlock: "), std::string::npos) << r.err;
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, HangingProbeTimesOutAndCountsAsUnusable) {
    Scene s;
    const std::string fake = s.fake("bwrap", "exec sleep 60\n");
    s.config("[provider]\nbackends = [\"bwrap\", \"landlock\"]\nprobe_timeout_ms = 300\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    e2e::RunOptions options = s.options;
    options.prefix = {NO_LANDLOCK_BINARY};
    options.timeoutMs = 20000;
    const auto began = std::chrono::steady_clock::now();
    const e2e::Result r = e2e::run(s.confined({}), options);
    const auto took = std::chrono::steady_clock::now() - began;
    EXPECT_FALSE(r.timedOut);
    EXPECT_EQ(r.status, 125);
    EXPECT_NE(r.err.find("did not finish"), std::string::npos) << r.err;
    EXPECT_LT(took, std::chrono::seconds(15)) << "the hanging probe was not cut off";
    EXPECT_FALSE(exists(s.sentinel));
}

TEST(FailClosed, WarmProbeCacheSpawnsNoProbeUntilTheRunnerChanges) {
    Scene s;
    const std::string count = s.dir / "probes";
    const std::string fake = s.fake("bwrap", "echo probe >> '" + count + "'\nexit 1\n");
    s.config("[provider]\nbackends = [\"bwrap\", \"landlock\"]\n[backend.bwrap]\npath = \"" + fake + "\"\n");
    const e2e::Result first = e2e::run(s.confined({"--print"}), s.options);
    ASSERT_EQ(first.status, 0) << first.err;
    EXPECT_EQ(nlohmann::json::parse(first.out)["backend"], "landlock");
    EXPECT_EQ(e2e::read_file(count), "probe\n");
    const e2e::Result second = e2e::run(s.confined({"--print"}), s.options);
    EXPECT_EQ(second.out, first.out);
    EXPECT_EQ(e2e::read_file(count), "probe\n") << "a warm cache spawned a probe";
    // A changed runner is a different identity: probed anew.
    s.fake("bwrap", "echo probe >> '" + count + "'\nexit 1\n\n");
    const e2e::Result third = e2e::run(s.confined({"--print"}), s.options);
    EXPECT_EQ(third.status, 0);
    EXPECT_EQ(e2e::read_file(count), "probe\nprobe\n");
}

}  // namespace

namespace {

// `doctor --verify` starts about a hundred confined calls. Under the sanitizers, beside the
// 16-caller load test that ctest -j2 may run at the same time, it took over the harness's default
// minute on a slow host (20 s alone): a wider hang guard, not a measurement.
constexpr int kVerifyTimeoutMs = 240000;

// `doctor --verify`, the CI smoke check: on this host every usable backend holds what it
// promises (a full backend lets nothing through; a partial one only its named gaps).
TEST(DoctorVerify, EveryUsableBackendHoldsItsPromiseHere) {
    e2e::TempDir home;
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.timeoutMs = kVerifyTimeoutMs;
    const e2e::Result r = e2e::run({"doctor", "--verify", "--json"}, options);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    const nlohmann::json doctor = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(doctor.is_object()) << r.out;
    ASSERT_FALSE(doctor["verify"].empty());
    for (const auto& report : doctor["verify"]) {
        EXPECT_TRUE(report["ok"].get<bool>()) << report.dump(2);
        EXPECT_GT(report["effects"].size(), 40u);
        if (report["enforcement"] == "full") {
            for (const auto& effect : report["effects"]) EXPECT_TRUE(effect["held"].get<bool>()) << effect.dump();
        }
    }
}

// What a command could reach without naming a path: descriptors dsh-confine itself holds open
// when it starts the runner (a directory and a file open for writing, outside), and an inode
// flag set by ioctl. Each is attempted in both modes under every usable backend, and held.
TEST(DoctorVerify, InheritedDescriptorsAndInodeFlagsAreAttemptedAndHeld) {
    e2e::TempDir home;
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.timeoutMs = kVerifyTimeoutMs;
    const e2e::Result r = e2e::run({"doctor", "--verify", "--json"}, options);
    const nlohmann::json doctor = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(doctor.is_object()) << r.out << r.err;
    ASSERT_FALSE(doctor["verify"].empty());
    for (const auto& report : doctor["verify"])
        for (const char* mode : {"read-only", "workspace-write"})
            for (const char* name : {"create a file through an inherited directory descriptor",
                                     "write through an inherited file descriptor",
                                     "set an inode flag outside (FS_IOC_SETFLAGS)"}) {
                int found = 0;
                for (const auto& effect : report["effects"])
                    if (effect["effect"] == name && effect["mode"] == mode) {
                        ++found;
                        EXPECT_EQ(effect["expected"], "denied") << effect.dump();
                        EXPECT_TRUE(effect["held"].get<bool>()) << report["backend"] << ": " << effect.dump();
                    }
                EXPECT_EQ(found, 1) << report["backend"] << " " << mode << ": " << name;
            }
}

TEST(DoctorVerify, TextOutputNamesEachEffect) {
    e2e::TempDir home;
    e2e::RunOptions options;
    options.env = e2e::isolated_env(home.path());
    options.timeoutMs = kVerifyTimeoutMs;
    const e2e::Result r = e2e::run({"doctor", "--verify"}, options);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("verify bwrap (full): ok"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("denied: rename the workspace root itself"), std::string::npos) << r.out;
}

}  // namespace
