// The policy service over an in-memory SessionStorage: the precedence of mode and root as a
// call sees it (request, session log, config, process cwd), the session override, and the
// errors of a contradicting root and an unknown session.
#include "lib/policy_service.hpp"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "fakes.hpp"
#include "temp_dir.hpp"

#include "lib/error.hpp"

namespace dsh {
namespace {

using unit::FakeSessionStorage;
using unit::TempDir;

// The Error `action` throws, checked for `code`; its message.
template <typename Action>
std::string error_of(const std::string& code, Action action) {
    try {
        action();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error was thrown";
    return "";
}

class PolicyService : public ::testing::Test {
protected:
    TempDir tmp;
    const std::string sessionCwd = tmp.dir("session");
    const std::string requestRoot = tmp.dir("request");
    const std::string configRoot = tmp.dir("config");
    const std::string processCwd = tmp.dir("process");
    FakeSessionStorage storage;
    Sessions sessions{storage};
    std::vector<std::string> warnings;
    int cwdReads = 0;

    PolicyService() { sessions.start("s1", sessionCwd); }

    SandboxPolicyService service(Config config = {}) {
        return SandboxPolicyService(
            std::move(config), &storage,
            [this] {
                ++cwdReads;
                return processCwd;
            },
            [this](const std::string& warning) { warnings.push_back(warning); });
    }

    static Config config_with(std::optional<SandboxMode> mode, std::optional<std::string> root) {
        Config config;
        config.defaultMode = mode;
        config.workspaceRoot = std::move(root);
        return config;
    }

    static SandboxPolicyRequest request(std::optional<SandboxMode> mode, std::optional<std::string> root,
                                        std::optional<std::string> session) {
        SandboxPolicyRequest out;
        out.mode = mode;
        out.workspaceRoot = std::move(root);
        out.sessionId = std::move(session);
        return out;
    }
};

TEST_F(PolicyService, ExplicitModeOutranksTheSessionsLastMode) {
    sessions.set_mode("s1", SandboxMode::WorkspaceWrite, "t");
    const auto policy = service(config_with(SandboxMode::ReadOnly, {}))
                            .resolve(request(SandboxMode::DangerFullAccess, {}, "s1"));
    EXPECT_EQ(policy.mode, SandboxMode::DangerFullAccess);
}

TEST_F(PolicyService, SessionsLastModeOutranksTheConfigDefault) {
    sessions.set_mode("s1", SandboxMode::DangerFullAccess, "t1");
    sessions.set_mode("s1", SandboxMode::WorkspaceWrite, "t2");
    const auto policy = service(config_with(SandboxMode::ReadOnly, {})).resolve(request({}, {}, "s1"));
    EXPECT_EQ(policy.mode, SandboxMode::WorkspaceWrite);
}

TEST_F(PolicyService, SessionWithoutModeEventsFallsBackToTheConfigDefault) {
    const auto policy = service(config_with(SandboxMode::WorkspaceWrite, {})).resolve(request({}, {}, "s1"));
    EXPECT_EQ(policy.mode, SandboxMode::WorkspaceWrite);
}

TEST_F(PolicyService, ConfigDefaultModeOutranksTheBuiltIn) {
    EXPECT_EQ(service(config_with(SandboxMode::WorkspaceWrite, {})).resolve({}).mode, SandboxMode::WorkspaceWrite);
}

TEST_F(PolicyService, BuiltInModeIsReadOnly) { EXPECT_EQ(service().resolve({}).mode, SandboxMode::ReadOnly); }

TEST_F(PolicyService, SessionCwdOutranksTheConfigRootAndTheProcessCwd) {
    const auto policy = service(config_with({}, configRoot)).resolve(request({}, {}, "s1"));
    EXPECT_EQ(policy.workspaceRoot, sessionCwd);
}

TEST_F(PolicyService, ExplicitRootOutranksTheConfigRoot) {
    const auto policy = service(config_with({}, configRoot)).resolve(request({}, requestRoot, {}));
    EXPECT_EQ(policy.workspaceRoot, requestRoot);
}

TEST_F(PolicyService, ConfigRootOutranksTheProcessCwd) {
    EXPECT_EQ(service(config_with({}, configRoot)).resolve({}).workspaceRoot, configRoot);
}

TEST_F(PolicyService, ProcessCwdIsTheLastFallback) { EXPECT_EQ(service().resolve({}).workspaceRoot, processCwd); }

TEST_F(PolicyService, ProcessCwdIsReadWhicheverRootWins) {
    service(config_with({}, configRoot)).resolve(request({}, requestRoot, {}));
    EXPECT_EQ(cwdReads, 1);
}

TEST_F(PolicyService, UnreadableProcessCwdFailsTheCall) {
    const SandboxPolicyService failing(Config{}, &storage, []() -> std::string {
        throw Error(code::WorkspaceRoot, "the current directory cannot be read: gone");
    });
    const std::string message = error_of("WORKSPACE_ROOT", [&] { failing.resolve(request({}, requestRoot, {})); });
    EXPECT_EQ(message, "the current directory cannot be read: gone");
}

TEST_F(PolicyService, ExplicitRootEqualToTheSessionCwdIsAccepted) {
    EXPECT_EQ(service().resolve(request({}, sessionCwd, "s1")).workspaceRoot, sessionCwd);
}

TEST_F(PolicyService, ExplicitRootContradictingTheSessionIsAWorkspaceRootError) {
    const std::string message = error_of("WORKSPACE_ROOT", [&] { service().resolve(request({}, requestRoot, "s1")); });
    EXPECT_EQ(message, "--workspace-root '" + requestRoot + "' contradicts session 's1' whose cwd is '" + sessionCwd + "'");
}

TEST_F(PolicyService, SessionIdIsCarriedIntoThePolicy) {
    EXPECT_EQ(service().resolve(request({}, {}, "s1")).sessionId, "s1");
    EXPECT_EQ(service().resolve({}).sessionId, std::nullopt);
}

TEST_F(PolicyService, UnknownSessionSaysHowToStartIt) {
    const std::string message = error_of("SESSION", [&] { service().resolve(request({}, {}, "nope")); });
    EXPECT_EQ(message, "unknown session 'nope' (start it with 'dsh-confine session start')");
}

TEST_F(PolicyService, InvalidSessionIdIsASessionError) {
    error_of("SESSION", [&] { service().resolve(request({}, {}, "..")); });
}

TEST_F(PolicyService, DamagedSessionRecordKeepsItsOwnMessage) {
    storage.records["s1"] = "not json";
    const std::string message = error_of("SESSION", [&] { service().resolve(request({}, {}, "s1")); });
    EXPECT_EQ(message, "session 's1': its record is damaged");
}

TEST_F(PolicyService, SessionWithoutStorageIsAnInternalError) {
    const SandboxPolicyService agentless(Config{}, nullptr, [this] { return processCwd; });
    EXPECT_EQ(agentless.resolve({}).workspaceRoot, processCwd);
    error_of("INTERNAL", [&] { agentless.resolve(request({}, {}, "s1")); });
}

TEST_F(PolicyService, TornLastLineIsAWarningAndTheEarlierEventsStillCount) {
    sessions.set_mode("s1", SandboxMode::WorkspaceWrite, "t");
    storage.logs["s1"] += R"({"type":"sandbox/mode","mode":"danger-full)";
    const auto policy = service().resolve(request({}, {}, "s1"));
    EXPECT_EQ(policy.mode, SandboxMode::WorkspaceWrite);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings.front().find("torn"), std::string::npos) << warnings.front();
}

TEST_F(PolicyService, OverrideOfIsTheLastLoggedMode) {
    sessions.set_mode("s1", SandboxMode::DangerFullAccess, "t1");
    sessions.set_mode("s1", SandboxMode::ReadOnly, "t2");
    EXPECT_EQ(service(config_with(SandboxMode::WorkspaceWrite, {})).overrideOf("s1"), SandboxMode::ReadOnly);
}

TEST_F(PolicyService, OverrideOfIgnoresTheConfigDefault) {
    EXPECT_EQ(service(config_with(SandboxMode::WorkspaceWrite, {})).overrideOf("s1"), std::nullopt);
}

TEST_F(PolicyService, OverrideOfAnUnknownSessionIsASessionError) {
    error_of("SESSION", [&] { service().overrideOf("nope"); });
}

}  // namespace
}  // namespace dsh

namespace dsh {
namespace {

// A directory identity that answers from a table the test changes, as the host would after a
// command renamed a component away or planted a symlink on the path.
class TableIdentity : public DirectoryIdentity {
public:
    std::map<std::string, std::string> ids;
    std::optional<std::string> of(const std::string& path, std::string& why) const override {
        auto it = ids.find(path);
        if (it == ids.end()) {
            why = path + ": a component is a symlink";
            return std::nullopt;
        }
        return it->second;
    }
};

class SessionCwdIdentity : public ::testing::Test {
protected:
    TempDir tmp;
    const std::string cwd = tmp.dir("ws");
    unit::FakeSessionStorage storage;
    TableIdentity identity;

    SessionCwdIdentity() {
        identity.ids[cwd] = "1:100";
        Sessions(storage, &identity).start("s1", cwd);
    }
    SandboxExecutionPolicy resolve() {
        SandboxPolicyService service(Config{}, &storage, [this] { return cwd; }, {}, &identity);
        SandboxPolicyRequest request;
        request.sessionId = "s1";
        return service.resolve(request);
    }
    std::string code_of_resolve() {
        try {
            resolve();
        } catch (const Error& e) {
            return e.code();
        }
        return "";
    }
};

TEST_F(SessionCwdIdentity, TheRecordCarriesTheIdentityAndThePolicyToo) {
    EXPECT_EQ(decode_session_cwd_id(storage.records["s1"], "s1"), std::optional<std::string>("1:100"));
    EXPECT_EQ(resolve().workspaceRootId, std::optional<std::string>("1:100"));
}

TEST_F(SessionCwdIdentity, AReplacedDirectoryIsSessionCwdChanged) {
    identity.ids[cwd] = "1:200";  // renamed away, and another directory made at the same path
    EXPECT_EQ(code_of_resolve(), code::SessionCwdChanged);
}

TEST_F(SessionCwdIdentity, ASymlinkOnThePathIsSessionCwdChanged) {
    identity.ids.erase(cwd);
    EXPECT_EQ(code_of_resolve(), code::SessionCwdChanged);
}

TEST_F(SessionCwdIdentity, ARecordWithoutIdentityIsRefused) {
    storage.records["s2"] = encode_session_record("s2", cwd);
    SandboxPolicyService service(Config{}, &storage, [this] { return cwd; }, {}, &identity);
    SandboxPolicyRequest request;
    request.sessionId = "s2";
    try {
        service.resolve(request);
        ADD_FAILURE() << "resolved";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), code::Session);
        EXPECT_NE(std::string(e.what()).find("start it again"), std::string::npos) << e.what();
    }
}

// A session's writable roots are as immutable as its cwd.
class SessionRootIdentity : public SessionCwdIdentity {
protected:
    const std::string extra = tmp.dir("extra");
    SessionRootIdentity() {
        identity.ids[extra] = "1:300";
        Sessions(storage, &identity).start("s3", cwd, {extra});
    }
    std::string code_of_resolve_s3() {
        SandboxPolicyService service(Config{}, &storage, [this] { return cwd; }, {}, &identity);
        SandboxPolicyRequest request;
        request.sessionId = "s3";
        try {
            EXPECT_EQ(service.resolve(request).writableRoots, std::vector<std::string>{extra});
        } catch (const Error& e) {
            return e.code();
        }
        return "";
    }
};

TEST_F(SessionRootIdentity, TheRecordedRootIsUsed) { EXPECT_EQ(code_of_resolve_s3(), ""); }

TEST_F(SessionRootIdentity, AReplacedRootIsSessionCwdChanged) {
    identity.ids[extra] = "1:301";
    EXPECT_EQ(code_of_resolve_s3(), code::SessionCwdChanged);
}

TEST_F(SessionRootIdentity, ARootReachedThroughASymlinkIsSessionCwdChanged) {
    identity.ids.erase(extra);
    EXPECT_EQ(code_of_resolve_s3(), code::SessionCwdChanged);
}

}  // namespace
}  // namespace dsh
