// Policy resolution: the precedence of mode and root, and canonical_directory's realpath
// semantics and refusals.
#include "lib/policy.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir.hpp"

#include "lib/error.hpp"

namespace dsh {
namespace {

namespace fs = std::filesystem;

using unit::TempDir;

// The message of the WORKSPACE_ROOT error `action` throws.
template <typename Action>
std::string workspace_root_error(Action action) {
    try {
        action();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "WORKSPACE_ROOT") << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error was thrown";
    return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every precedence test runs with the directories of one fixture.
class ResolvePolicy : public ::testing::Test {
protected:
    TempDir tmp;
    const std::string sessionCwd = tmp.dir("session");
    const std::string requestRoot = tmp.dir("request");
    const std::string configRoot = tmp.dir("config");
    const std::string processCwd = tmp.dir("process");

    Config config_with(std::optional<SandboxMode> mode, std::optional<std::string> root) const {
        Config config;
        config.defaultMode = mode;
        config.workspaceRoot = std::move(root);
        return config;
    }
};

TEST_F(ResolvePolicy, RequestModeOutranksSessionLastMode) {
    SandboxPolicyRequest request;
    request.mode = SandboxMode::DangerFullAccess;
    const SessionPolicyView session{sessionCwd, SandboxMode::WorkspaceWrite};
    const auto policy = resolve_policy(request, session, config_with(SandboxMode::ReadOnly, {}), processCwd);
    EXPECT_EQ(policy.mode, SandboxMode::DangerFullAccess);
}

TEST_F(ResolvePolicy, SessionLastModeOutranksConfigDefault) {
    const SessionPolicyView session{sessionCwd, SandboxMode::WorkspaceWrite};
    const auto policy = resolve_policy({}, session, config_with(SandboxMode::DangerFullAccess, {}), processCwd);
    EXPECT_EQ(policy.mode, SandboxMode::WorkspaceWrite);
}

TEST_F(ResolvePolicy, SessionWithoutModeEventsFallsBackToConfigDefault) {
    const SessionPolicyView session{sessionCwd, std::nullopt};
    const auto policy = resolve_policy({}, session, config_with(SandboxMode::WorkspaceWrite, {}), processCwd);
    EXPECT_EQ(policy.mode, SandboxMode::WorkspaceWrite);
}

TEST_F(ResolvePolicy, ConfigDefaultModeOutranksBuiltIn) {
    const auto policy = resolve_policy({}, std::nullopt, config_with(SandboxMode::WorkspaceWrite, {}), processCwd);
    EXPECT_EQ(policy.mode, SandboxMode::WorkspaceWrite);
}

TEST_F(ResolvePolicy, BuiltInModeIsReadOnly) {
    const auto policy = resolve_policy({}, std::nullopt, Config{}, processCwd);
    EXPECT_EQ(policy.mode, SandboxMode::ReadOnly);
}

TEST_F(ResolvePolicy, SessionCwdOutranksConfigRootAndProcessCwd) {
    const SessionPolicyView session{sessionCwd, std::nullopt};
    const auto policy = resolve_policy({}, session, config_with({}, configRoot), processCwd);
    EXPECT_EQ(policy.workspaceRoot, sessionCwd);
}

TEST_F(ResolvePolicy, RequestRootOutranksConfigRoot) {
    SandboxPolicyRequest request;
    request.workspaceRoot = requestRoot;
    const auto policy = resolve_policy(request, std::nullopt, config_with({}, configRoot), processCwd);
    EXPECT_EQ(policy.workspaceRoot, requestRoot);
}

TEST_F(ResolvePolicy, ConfigRootOutranksProcessCwd) {
    const auto policy = resolve_policy({}, std::nullopt, config_with({}, configRoot), processCwd);
    EXPECT_EQ(policy.workspaceRoot, configRoot);
}

TEST_F(ResolvePolicy, ProcessCwdIsTheLastFallback) {
    const auto policy = resolve_policy({}, std::nullopt, Config{}, processCwd);
    EXPECT_EQ(policy.workspaceRoot, processCwd);
}

TEST_F(ResolvePolicy, RequestRootEqualToSessionCwdIsAccepted) {
    SandboxPolicyRequest request;
    request.workspaceRoot = sessionCwd;
    const auto policy = resolve_policy(request, SessionPolicyView{sessionCwd, std::nullopt}, Config{}, processCwd);
    EXPECT_EQ(policy.workspaceRoot, sessionCwd);
}

TEST_F(ResolvePolicy, RequestRootContradictingSessionCwdIsAnError) {
    SandboxPolicyRequest request;
    request.workspaceRoot = requestRoot;
    request.sessionId = "s1";
    const std::string message = workspace_root_error([&] {
        resolve_policy(request, SessionPolicyView{sessionCwd, std::nullopt}, Config{}, processCwd);
    });
    EXPECT_TRUE(contains(message, "contradicts session 's1'")) << message;
}

TEST_F(ResolvePolicy, SameRootThroughASymlinkIsNoContradiction) {
    fs::create_directory_symlink(sessionCwd, tmp.path("session-link"));
    SandboxPolicyRequest request;
    request.workspaceRoot = tmp.path("session-link");
    const auto policy = resolve_policy(request, SessionPolicyView{sessionCwd, std::nullopt}, Config{}, processCwd);
    EXPECT_EQ(policy.workspaceRoot, sessionCwd);
}

TEST_F(ResolvePolicy, SameRootWithRedundantComponentsIsNoContradiction) {
    SandboxPolicyRequest request;
    request.workspaceRoot = tmp.root() + "/./request/../session/";
    const auto policy = resolve_policy(request, SessionPolicyView{sessionCwd, std::nullopt}, Config{}, processCwd);
    EXPECT_EQ(policy.workspaceRoot, sessionCwd);
}

TEST_F(ResolvePolicy, RootIsCanonicalized) {
    fs::create_directory_symlink(configRoot, tmp.path("config-link"));
    const auto policy = resolve_policy({}, std::nullopt, config_with({}, tmp.path("config-link")), processCwd);
    EXPECT_EQ(policy.workspaceRoot, configRoot);
}

TEST_F(ResolvePolicy, SessionIdIsCarriedFromTheRequest) {
    SandboxPolicyRequest request;
    request.sessionId = "s-42";
    const auto policy = resolve_policy(request, SessionPolicyView{sessionCwd, std::nullopt}, Config{}, processCwd);
    EXPECT_EQ(policy.sessionId, "s-42");
}

TEST_F(ResolvePolicy, AgentlessCallHasNoSessionId) {
    EXPECT_EQ(resolve_policy({}, std::nullopt, Config{}, processCwd).sessionId, std::nullopt);
}

TEST_F(ResolvePolicy, MissingSessionCwdIsAnError) {
    const std::string gone = tmp.path("gone");
    const std::string message = workspace_root_error(
        [&] { resolve_policy({}, SessionPolicyView{gone, std::nullopt}, Config{}, processCwd); });
    EXPECT_TRUE(contains(message, "does not exist")) << message;
}

// --- the dimensions beside the mode ---------------------------------------------------------

TEST_F(ResolvePolicy, WritableRootsComeFromTheRequestThenTheSessionThenTheConfig) {
    const std::string a = tmp.dir("a"), b = tmp.dir("b"), c = tmp.dir("c");
    Config config;
    config.writableRoots = std::vector<std::string>{c};
    SessionPolicyView session{sessionCwd, std::nullopt};
    session.writableRoots = {b};
    SandboxPolicyRequest request;
    request.writableRoots = std::vector<std::string>{a, a + "/."};
    EXPECT_EQ(resolve_policy(request, session, config, processCwd).writableRoots, std::vector<std::string>{a});
    EXPECT_EQ(resolve_policy({}, session, config, processCwd).writableRoots, std::vector<std::string>{b});
    EXPECT_EQ(resolve_policy({}, std::nullopt, config, processCwd).writableRoots, std::vector<std::string>{c});
    EXPECT_TRUE(resolve_policy({}, std::nullopt, Config{}, processCwd).writableRoots.empty());
}

TEST_F(ResolvePolicy, AWritableRootMustBeAnExistingDirectory) {
    SandboxPolicyRequest request;
    request.writableRoots = std::vector<std::string>{tmp.path("missing")};
    EXPECT_TRUE(contains(workspace_root_error([&] { resolve_policy(request, std::nullopt, Config{}, processCwd); }),
                         "--writable-root"));
    request.writableRoots = std::vector<std::string>{tmp.file("file", "x")};
    EXPECT_TRUE(contains(workspace_root_error([&] { resolve_policy(request, std::nullopt, Config{}, processCwd); }),
                         "is not a directory"));
}

TEST_F(ResolvePolicy, ConfigPathsUnderTheHomeDirectoryAreExpanded) {
    const std::string extra = tmp.dir("home/extra");
    Config config;
    config.writableRoots = std::vector<std::string>{"~/extra"};
    config.denyRead = std::vector<std::string>{"~/.ssh"};
    SandboxPolicyRequest request;
    request.home = tmp.path("home");
    const auto policy = resolve_policy(request, std::nullopt, config, processCwd);
    EXPECT_EQ(policy.writableRoots, std::vector<std::string>{fs::canonical(extra).string()});
    EXPECT_EQ(policy.unreadablePaths, std::vector<std::string>{(fs::path(tmp.path("home")) / ".ssh").string()});
    try {
        resolve_policy({}, std::nullopt, config, processCwd);
        ADD_FAILURE() << "~/ was expanded without a home directory";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG");
    }
}

TEST_F(ResolvePolicy, UnreadablePathsAreAbsoluteCanonicalAndOnce) {
    const std::string secret = tmp.file("secret", "x");
    SandboxPolicyRequest request;
    request.unreadablePaths = std::vector<std::string>{secret, tmp.root() + "/./secret", tmp.path("missing")};
    const auto policy = resolve_policy(request, std::nullopt, Config{}, processCwd);
    EXPECT_EQ(policy.unreadablePaths, (std::vector<std::string>{tmp.path("missing"), secret}));
    request.unreadablePaths = std::vector<std::string>{"secret"};
    try {
        resolve_policy(request, std::nullopt, Config{}, processCwd);
        ADD_FAILURE() << "a relative --deny-read was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "USAGE");
    }
}

TEST_F(ResolvePolicy, NetworkComesFromTheRequestThenTheSessionThenTheConfig) {
    Config config;
    config.network = NetworkPolicy::Deny;
    SessionPolicyView session{sessionCwd, std::nullopt};
    session.lastNetwork = NetworkPolicy::Allow;
    SandboxPolicyRequest request;
    request.network = NetworkPolicy::Deny;
    EXPECT_EQ(resolve_policy(request, session, Config{}, processCwd).network, NetworkPolicy::Deny);
    EXPECT_EQ(resolve_policy({}, session, config, processCwd).network, NetworkPolicy::Allow);
    EXPECT_EQ(resolve_policy({}, std::nullopt, config, processCwd).network, NetworkPolicy::Deny);
    EXPECT_EQ(resolve_policy({}, std::nullopt, Config{}, processCwd).network, NetworkPolicy::Allow);
}

TEST_F(ResolvePolicy, ProtectedPathsComeFromTheConfigElseTheGitDefaults) {
    EXPECT_EQ(resolve_policy({}, std::nullopt, Config{}, processCwd).protectedPaths,
              (std::vector<std::string>{".git/hooks", ".git/config"}));
    Config config;
    config.protectedPaths = std::vector<std::string>{};
    EXPECT_TRUE(resolve_policy({}, std::nullopt, config, processCwd).protectedPaths.empty());
}

TEST(IsAbsolutePath, FollowsTheHostsRules) {
    EXPECT_FALSE(is_absolute_path(""));
    EXPECT_FALSE(is_absolute_path("relative/dir"));
    EXPECT_FALSE(is_absolute_path("C:"));
    EXPECT_FALSE(is_absolute_path("C:src"));  // relative to drive C's current directory
#if defined(_WIN32)
    EXPECT_TRUE(is_absolute_path("C:\\src"));
    EXPECT_TRUE(is_absolute_path("c:/src"));
    EXPECT_TRUE(is_absolute_path("\\\\server\\share\\dir"));
    EXPECT_TRUE(is_absolute_path("\\\\?\\C:\\src"));
    EXPECT_FALSE(is_absolute_path("/srv/ws"));  // rooted, but on the current drive
    EXPECT_FALSE(is_absolute_path("\\srv"));
#else
    EXPECT_TRUE(is_absolute_path("/"));
    EXPECT_TRUE(is_absolute_path("/srv/ws"));
    EXPECT_FALSE(is_absolute_path("C:\\src"));
    EXPECT_FALSE(is_absolute_path("\\\\server\\share"));
#endif
}

TEST(CanonicalDirectory, RelativePathIsRefused) {
    const std::string message = workspace_root_error([] { canonical_directory("ws/project", "--workspace-root"); });
    EXPECT_TRUE(contains(message, "is not an absolute path")) << message;
    EXPECT_TRUE(contains(message, "--workspace-root 'ws/project'")) << message;
}

TEST(CanonicalDirectory, EmptyPathIsRefused) {
    const std::string message = workspace_root_error([] { canonical_directory("", "--workspace-root"); });
    EXPECT_TRUE(contains(message, "is not an absolute path")) << message;
}

TEST(CanonicalDirectory, MissingPathIsRefused) {
    TempDir tmp;
    const std::string message = workspace_root_error([&] { canonical_directory(tmp.path("missing"), "root"); });
    EXPECT_TRUE(contains(message, "does not exist")) << message;
}

TEST(CanonicalDirectory, RegularFileIsRefused) {
    TempDir tmp;
    std::ofstream(tmp.path("file")) << "x";
    const std::string message = workspace_root_error([&] { canonical_directory(tmp.path("file"), "root"); });
    EXPECT_TRUE(contains(message, "is not a directory")) << message;
}

TEST(CanonicalDirectory, PathThroughARegularFileIsRefused) {
    TempDir tmp;
    std::ofstream(tmp.path("file")) << "x";
    const std::string message = workspace_root_error([&] { canonical_directory(tmp.path("file") + "/sub", "root"); });
    EXPECT_TRUE(contains(message, "not a directory")) << message;
}

TEST(CanonicalDirectory, DanglingSymlinkIsRefused) {
    TempDir tmp;
    fs::create_directory_symlink(tmp.path("nowhere"), tmp.path("dangling"));
    const std::string message = workspace_root_error([&] { canonical_directory(tmp.path("dangling"), "root"); });
    EXPECT_TRUE(contains(message, "is a dangling symlink")) << message;
}

TEST(CanonicalDirectory, SymlinkLoopIsRefused) {
    TempDir tmp;
    fs::create_directory_symlink(tmp.path("loop-b"), tmp.path("loop-a"));
    fs::create_directory_symlink(tmp.path("loop-a"), tmp.path("loop-b"));
    const std::string message = workspace_root_error([&] { canonical_directory(tmp.path("loop-a"), "root"); });
    EXPECT_TRUE(contains(message, "is a symlink loop")) << message;
}

TEST(CanonicalDirectory, SymlinkToADirectoryResolvesToItsTarget) {
    TempDir tmp;
    const std::string target = tmp.dir("a/b");
    fs::create_directory_symlink("a/b", tmp.path("l"));
    EXPECT_EQ(canonical_directory(tmp.path("l"), "root"), target);
}

TEST(CanonicalDirectory, DotDotAfterASymlinkIsThePhysicalParentOfItsTarget) {
    TempDir tmp;
    tmp.dir("a/b");
    fs::create_directory_symlink("a/b", tmp.path("l"));
    // Lexically, tmp/l/.. would be tmp itself; physically it is the parent of a/b.
    EXPECT_EQ(canonical_directory(tmp.path("l") + "/..", "root"), tmp.path("a"));
}

TEST(CanonicalDirectory, TrailingSlashAndDotsAreRemoved) {
    TempDir tmp;
    const std::string target = tmp.dir("a");
    EXPECT_EQ(canonical_directory(tmp.root() + "/./a/", "root"), target);
}

}  // namespace
}  // namespace dsh
