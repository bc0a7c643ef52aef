// The confine step over fake backends and a fake host: which chain is tried, the order of its
// checks (a bad --backend, then PROGRAM, then the mode), the session's temp area, the
// fail-closed end with every candidate's reason, and --require-full.
#include "lib/confine.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fakes.hpp"
#include "temp_dir.hpp"

#include "lib/error.hpp"
#include "lib/git_protection.hpp"

namespace dsh {
namespace {

using unit::FakeBackend;
using unit::FakeProbeCache;
using unit::FakeSessionStorage;

// The backends of a system called "TestOS": the ones a test registered; any other name
// belongs to another system.
class FakeBackendFactory : public BackendFactory {
public:
    std::map<std::string, std::shared_ptr<FakeBackend>> backends;
    int made = 0;

    std::shared_ptr<FakeBackend> add(const std::string& name) {
        auto backend = std::make_shared<FakeBackend>(name);
        backends[name] = backend;
        return backend;
    }
    std::shared_ptr<const Backend> make(const std::string& name, const SandboxPolicy&) override {
        ++made;
        auto it = backends.find(name);
        return it == backends.end() ? nullptr : it->second;
    }
    std::string system_name() const override { return "TestOS"; }
};

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

class Confine : public ::testing::Test {
protected:
    FakeBackendFactory factory;
    FakeSessionStorage storage;
    FakeProbeCache cache;
    std::vector<std::string> lookedUp;
    ProgramLocation program{ProgramStatus::Found, "/usr/bin/make"};
    Config config;

    unit::TempDir sessionCwd;  // any existing absolute directory, on every system

    Confine() { Sessions(storage).start("s1", sessionCwd.root()); }

    ConfineHost host(std::vector<std::string> default_chain = {"bwrap", "landlock"}) {
        return ConfineHost{factory, std::move(default_chain),
                           [this](const std::string& name) {
                               lookedUp.push_back(name);
                               return program;
                           },
                           &storage, &cache};
    }

    static ConfineRequest request(SandboxMode mode, std::optional<std::string> session = std::nullopt) {
        ConfineRequest out;
        out.policy = SandboxExecutionPolicy{mode, "/ws", std::move(session)};
        out.argv = {"make", "-j2"};
        return out;
    }
};

TEST_F(Confine, ChainIsTheForcedBackendAlone) {
    config.backends = std::vector<std::string>{"landlock"};
    EXPECT_EQ(backend_chain("bwrap", config, {"landlock", "bwrap"}), std::vector<std::string>{"bwrap"});
}

TEST_F(Confine, ChainIsTheConfigsWithoutAForcedBackend) {
    config.backends = std::vector<std::string>{"landlock", "bwrap"};
    EXPECT_EQ(backend_chain(std::nullopt, config, {"bwrap"}), (std::vector<std::string>{"landlock", "bwrap"}));
}

TEST_F(Confine, ChainIsTheCallersDefaultWithoutConfig) {
    EXPECT_EQ(backend_chain(std::nullopt, config, {"seatbelt"}), std::vector<std::string>{"seatbelt"});
}

TEST_F(Confine, UnknownForcedBackendIsAUsageErrorWithASuggestion) {
    const std::string message = error_of("USAGE", [&] { backend_chain("bwarp", config, {}); });
    EXPECT_EQ(message, "unknown backend 'bwarp' (did you mean 'bwrap'?); backends: bwrap, landlock, seatbelt, restricted-token");
}

TEST_F(Confine, BadBackendIsAnErrorBeforeProgramLookupInEveryMode) {
    ConfineRequest r = request(SandboxMode::DangerFullAccess);
    r.backend = "nonsense";
    program.status = ProgramStatus::NotFound;
    error_of("USAGE", [&] { confine_call(r, config, host()); });
    EXPECT_TRUE(lookedUp.empty());
}

TEST_F(Confine, MissingProgramIsCommandNotFoundAndNothingIsBuilt) {
    program = {ProgramStatus::NotFound, ""};
    const ConfineOutcome out = confine_call(request(SandboxMode::ReadOnly), config, host());
    ASSERT_TRUE(out.failure);
    EXPECT_FALSE(out.plan);
    EXPECT_EQ(out.failure->code, "COMMAND_NOT_FOUND");
    EXPECT_EQ(out.failure->message, "make: not found");
    EXPECT_EQ(lookedUp, std::vector<std::string>{"make"});
    EXPECT_EQ(factory.made, 0);
}

TEST_F(Confine, ProgramThatIsNotExecutableNamesTheFileFound) {
    program = {ProgramStatus::NotExecutable, "/opt/bin/make"};
    const ConfineOutcome out = confine_call(request(SandboxMode::DangerFullAccess), config, host());
    ASSERT_TRUE(out.failure);
    EXPECT_EQ(out.failure->code, "COMMAND_NOT_EXECUTABLE");
    EXPECT_EQ(out.failure->message, "/opt/bin/make: permission denied");
}

TEST_F(Confine, DangerFullAccessIsTheOriginalArgvWithoutABackend) {
    factory.add("bwrap");
    const ConfineRequest r = request(SandboxMode::DangerFullAccess, "s1");
    const ConfineOutcome out = confine_call(r, config, host());
    ASSERT_TRUE(out.plan);
    EXPECT_FALSE(out.plan->confined);
    EXPECT_EQ(out.plan->argv, r.argv);
    EXPECT_EQ(out.plan->policy, r.policy);
    EXPECT_FALSE(out.providerPolicy);
    EXPECT_EQ(factory.made, 0);
    EXPECT_EQ(storage.tempDirs, 0);
}

TEST_F(Confine, ConfinedPlanComesFromTheFirstUsableBackend) {
    factory.add("bwrap")->checkFailure = "bwrap not found";
    factory.add("landlock");
    const ConfineRequest r = request(SandboxMode::ReadOnly);
    const ConfineOutcome out = confine_call(r, config, host());
    ASSERT_TRUE(out.plan) << out.failure->message;
    ASSERT_TRUE(out.plan->confined);
    EXPECT_EQ(out.plan->confined->backend, "landlock");
    EXPECT_EQ(out.plan->argv, (std::vector<std::string>{"landlock", "/ws", "--", "make", "-j2"}));
    EXPECT_EQ(out.plan->policy, r.policy);
    ASSERT_TRUE(out.providerPolicy);
    EXPECT_EQ(out.providerPolicy->mode, ConfinedSandboxMode::ReadOnly);
    EXPECT_EQ(out.providerPolicy->workspaceRoot, "/ws");
}

TEST_F(Confine, ChainOfSeveralIsProbedThroughTheCacheWithTheConfiguredTimeout) {
    auto bwrap = factory.add("bwrap");
    factory.add("landlock");
    config.probeTimeoutMs = 1234;
    ASSERT_TRUE(confine_call(request(SandboxMode::ReadOnly), config, host()).plan);
    EXPECT_EQ(bwrap->probes, 1);
    EXPECT_EQ(bwrap->lastTimeoutMs, 1234);
    EXPECT_EQ(cache.writes, 1);
}

TEST_F(Confine, SoleForcedBackendIsNotProbed) {
    auto bwrap = factory.add("bwrap");
    ConfineRequest r = request(SandboxMode::ReadOnly);
    r.backend = "bwrap";
    ASSERT_TRUE(confine_call(r, config, host()).plan);
    EXPECT_EQ(bwrap->probes, 0);
}

TEST_F(Confine, WorkspaceWriteWithASessionMakesItsTempArea) {
    auto bwrap = factory.add("bwrap");
    const ConfineOutcome out = confine_call(request(SandboxMode::WorkspaceWrite, "s1"), config, host({"bwrap"}));
    ASSERT_TRUE(out.providerPolicy);
    EXPECT_EQ(out.providerPolicy->sessionTempDir, "/fake/tmp/s1");
    EXPECT_EQ(out.providerPolicy->sessionId, "s1");
    ASSERT_TRUE(bwrap->lastPolicy);
    EXPECT_EQ(bwrap->lastPolicy->sessionTempDir, "/fake/tmp/s1");
    EXPECT_EQ(storage.tempDirs, 1);
}

TEST_F(Confine, ReadOnlyWithASessionMakesNoTempArea) {
    factory.add("bwrap");
    const ConfineOutcome out = confine_call(request(SandboxMode::ReadOnly, "s1"), config, host({"bwrap"}));
    ASSERT_TRUE(out.providerPolicy);
    EXPECT_EQ(out.providerPolicy->sessionTempDir, std::nullopt);
    EXPECT_EQ(storage.tempDirs, 0);
}

TEST_F(Confine, TempAreaOfASessionThatIsGoneIsASessionError) {
    factory.add("bwrap");
    error_of("SESSION", [&] { confine_call(request(SandboxMode::WorkspaceWrite, "ended"), config, host({"bwrap"})); });
}

TEST_F(Confine, NoUsableBackendIsSandboxUnavailableWithEveryCandidatesReason) {
    factory.add("bwrap")->checkFailure = "bwrap not found";
    factory.add("landlock")->probeFailure = "ABI 0";
    const ConfineOutcome out = confine_call(request(SandboxMode::WorkspaceWrite), config, host());
    ASSERT_TRUE(out.failure);
    EXPECT_FALSE(out.plan);
    EXPECT_EQ(out.failure->code, "SANDBOX_UNAVAILABLE");
    EXPECT_EQ(out.failure->message, "no usable backend: bwrap: bwrap not found; landlock: probe failed: ABI 0");
    ASSERT_EQ(out.failure->candidates.size(), 2u);
    EXPECT_EQ(out.failure->candidates[0].backend, "bwrap");
    EXPECT_EQ(out.failure->candidates[0].reason, "bwrap not found");
    EXPECT_EQ(out.failure->candidates[1].backend, "landlock");
}

TEST_F(Confine, AnotherSystemsBackendIsACandidateWithItsReasonListedFirst) {
    factory.add("bwrap")->checkFailure = "bwrap not found";
    config.backends = std::vector<std::string>{"bwrap", "seatbelt"};
    const ConfineOutcome out = confine_call(request(SandboxMode::ReadOnly), config, host());
    ASSERT_TRUE(out.failure);
    EXPECT_EQ(out.failure->code, "SANDBOX_UNAVAILABLE");
    EXPECT_EQ(out.failure->message, "no usable backend: seatbelt: not available on TestOS; bwrap: bwrap not found");
    ASSERT_EQ(out.failure->candidates.size(), 2u);
    EXPECT_EQ(out.failure->candidates[0].backend, "seatbelt");
    EXPECT_EQ(out.failure->candidates[0].reason, "not available on TestOS");
}

TEST_F(Confine, ForcedBackendOfAnotherSystemIsUnavailableNotUsage) {
    ConfineRequest r = request(SandboxMode::ReadOnly);
    r.backend = "restricted-token";
    const ConfineOutcome out = confine_call(r, config, host());
    ASSERT_TRUE(out.failure);
    EXPECT_EQ(out.failure->code, "SANDBOX_UNAVAILABLE");
    EXPECT_EQ(out.failure->message, "no usable backend: restricted-token: not available on TestOS");
}

TEST_F(Confine, RequireFullRefusesPartialEnforcementNamingTheGaps) {
    auto landlock = factory.add("landlock");
    landlock->enforcement = SandboxEnforcement::Partial;
    landlock->enforcementGaps = {"truncate", "ioctl on devices"};
    ConfineRequest r = request(SandboxMode::WorkspaceWrite);
    r.requireFull = true;
    const ConfineOutcome out = confine_call(r, config, host({"landlock"}));
    ASSERT_TRUE(out.failure);
    EXPECT_FALSE(out.plan);
    EXPECT_EQ(out.failure->code, "ENFORCEMENT_PARTIAL");
    EXPECT_EQ(out.failure->message,
              "--require-full: backend landlock enforces this policy only partially: truncate; ioctl on devices");
}

TEST_F(Confine, RequireFullAcceptsFullEnforcement) {
    factory.add("bwrap");
    ConfineRequest r = request(SandboxMode::WorkspaceWrite);
    r.requireFull = true;
    EXPECT_TRUE(confine_call(r, config, host({"bwrap"})).plan);
}

TEST_F(Confine, PartialEnforcementWithoutRequireFullIsAPlan) {
    factory.add("landlock")->enforcement = SandboxEnforcement::Partial;
    const ConfineOutcome out = confine_call(request(SandboxMode::ReadOnly), config, host({"landlock"}));
    ASSERT_TRUE(out.plan);
    EXPECT_EQ(out.plan->confined->enforcement, SandboxEnforcement::Partial);
}

}  // namespace
}  // namespace dsh

namespace dsh {
namespace {

class ConfineOwnPaths : public Confine {
protected:
    int asked = 0;
    ConfineHost host_with_own(std::vector<std::string> own) {
        ConfineHost h = host();
        h.ownPaths = [this, own] {
            ++asked;
            return own;
        };
        return h;
    }
};

TEST_F(ConfineOwnPaths, ARootThatContainsAnOwnPathIsRefusedBeforeAnyBackend) {
    factory.add("bwrap");
    const std::string message = error_of(code::OwnStateInRoot, [&] {
        confine_call(request(SandboxMode::WorkspaceWrite), config, host_with_own({"/elsewhere", "/ws/.local/state/dsh-confine"}));
    });
    EXPECT_NE(message.find("/ws/.local/state/dsh-confine"), std::string::npos) << message;
    EXPECT_EQ(factory.made, 0);
}

TEST_F(ConfineOwnPaths, TheRootItselfCountsAsContaining) {
    error_of(code::OwnStateInRoot, [&] { confine_call(request(SandboxMode::WorkspaceWrite), config, host_with_own({"/ws"})); });
}

TEST_F(ConfineOwnPaths, APathBesideTheRootIsNotContained) {
    factory.add("bwrap");
    const ConfineOutcome out = confine_call(request(SandboxMode::WorkspaceWrite), config, host_with_own({"/ws2/state", "/"}));
    EXPECT_TRUE(out.plan.has_value());
}

TEST_F(ConfineOwnPaths, ReadOnlyDoesNotAsk) {
    factory.add("bwrap");
    const ConfineOutcome out = confine_call(request(SandboxMode::ReadOnly), config, host_with_own({"/ws/state"}));
    EXPECT_TRUE(out.plan.has_value());
    EXPECT_EQ(asked, 0);
}

TEST_F(ConfineOwnPaths, TheSessionsTempAreaIsNotMadeForARefusedRoot) {
    factory.add("bwrap");
    error_of(code::OwnStateInRoot, [&] {
        confine_call(request(SandboxMode::WorkspaceWrite, "s1"), config, host_with_own({"/ws/state"}));
    });
    EXPECT_EQ(storage.tempDirs, 0);
}

TEST_F(ConfineOwnPaths, KeptDescriptorsReachTheBackendSortedAndOnce) {
    auto backend = factory.add("bwrap");
    ConfineRequest r = request(SandboxMode::ReadOnly);
    r.keepFds = {7, 3, 7};
    confine_call(r, config, host());
    ASSERT_TRUE(backend->lastPolicy.has_value());
    EXPECT_EQ(backend->lastPolicy->keepFds, (std::vector<int>{3, 7}));
}

// --- broad roots and protected paths --------------------------------------------------------

TEST(BroadRoot, SlashTheHomeDirectoryAndItsAncestorsAreBroad) {
    const std::optional<std::string> home = "/home/u";
    EXPECT_TRUE(broad_root("/", home));
    EXPECT_TRUE(broad_root("/home/u", home));
    EXPECT_TRUE(broad_root("/home", home));
    EXPECT_FALSE(broad_root("/home/u/src", home));
    EXPECT_FALSE(broad_root("/home/u2", home));
    EXPECT_FALSE(broad_root("/srv", home));
    EXPECT_TRUE(broad_root("/", std::nullopt));
    EXPECT_FALSE(broad_root("/home", std::nullopt));
}

TEST_F(Confine, ABroadRootIsRefusedBeforeAnyBackendUnlessOptedIn) {
    factory.add("bwrap");
    ConfineHost h = host();
    h.home = "/ws/home";
    error_of(code::BroadRoot, [&] { confine_call(request(SandboxMode::WorkspaceWrite), config, h); });
    ConfineRequest extra = request(SandboxMode::WorkspaceWrite);
    extra.policy.workspaceRoot = "/srv/ws";
    extra.policy.writableRoots = {"/"};
    const std::string message = error_of(code::BroadRoot, [&] { confine_call(extra, config, h); });
    EXPECT_NE(message.find("the writable root / is the whole file system"), std::string::npos) << message;
    EXPECT_EQ(factory.made, 0);
    // Read-only writes nothing: no root is too broad to read.
    EXPECT_TRUE(confine_call(request(SandboxMode::ReadOnly), config, h).plan.has_value());
    ConfineRequest opted = request(SandboxMode::WorkspaceWrite);
    opted.allowBroadRoots = true;
    EXPECT_TRUE(confine_call(opted, config, h).plan.has_value());
}

TEST(RefusedRoot, TheOperatingSystemsDirectoriesAreRefusedLikeBroadRoots) {
    const std::optional<std::string> home = "/home/u";
    const auto kind = [&](const std::string& root) { return refused_root(root, home).value_or(RootRefusal{}).kind; };
    const auto refused = [&](const std::string& root) { return refused_root(root, home).has_value(); };
    // The directory itself.
    for (const char* root : {"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/usr", "/var",
                             "/opt", "/srv", "/run", "/root", "/mnt", "/media"}) {
        EXPECT_TRUE(refused(root)) << root;
        EXPECT_EQ(kind(root), RootRefusal::Kind::System) << root;
    }
    // `/home` is above the home directory: broad, and so is `/`.
    EXPECT_EQ(kind("/home"), RootRefusal::Kind::Broad);
    EXPECT_EQ(kind("/"), RootRefusal::Kind::Broad);
    EXPECT_EQ(refused_root("/home", std::nullopt).value_or(RootRefusal{}).kind, RootRefusal::Kind::System);
    // Everything under these.
    for (const char* root : {"/usr/local", "/usr/local/src/x", "/etc/ssh", "/boot/efi", "/lib/modules", "/sbin/x",
                             "/var/lib/dpkg", "/var/log/journal", "/var/cache/apt", "/var/spool/cron", "/var/mail/u",
                             "/var/backups/x", "/run/user/1000", "/run/systemd"}) {
        EXPECT_TRUE(refused(root)) << root;
        EXPECT_EQ(kind(root), RootRefusal::Kind::System) << root;
    }
    // Where builds live, and names that only start like a system directory.
    for (const char* root : {"/var/tmp", "/var/tmp/build", "/srv/x", "/opt/x", "/home/u/project", "/home/u2", "/root/src",
                             "/mnt/data", "/media/usb/x", "/tmp/ws", "/usrx", "/etcetera", "/var/library", "/variable",
                             "/runner/ws", "/devel", "/process", "/system"})
        EXPECT_FALSE(refused(root)) << root;
    // The root caller's home is /root: broad itself, its subtree accepted.
    EXPECT_EQ(refused_root("/root", std::string("/root")).value_or(RootRefusal{}).kind, RootRefusal::Kind::Broad);
    EXPECT_FALSE(refused_root("/root/src", std::string("/root")).has_value());
}

TEST(RefusedRoot, TheKernelsFileSystemsAreRefusedWhateverTheHome) {
    for (const char* root : {"/proc", "/proc/sys", "/proc/1/root", "/sys", "/sys/kernel", "/dev", "/dev/shm", "/dev/pts"}) {
        for (const std::optional<std::string>& home : {std::optional<std::string>("/home/u"), std::optional<std::string>(),
                                                       std::optional<std::string>(root)}) {
            const auto refusal = refused_root(root, home);
            ASSERT_TRUE(refusal.has_value()) << root;
            EXPECT_EQ(refusal->kind, RootRefusal::Kind::Kernel) << root;
            EXPECT_NE(refusal->why.find("refused even with --allow-broad-root"), std::string::npos) << refusal->why;
        }
    }
}

TEST_F(Confine, SystemRootsAreBroadRootsAndKernelRootsAreRefusedEvenOptedIn) {
    factory.add("bwrap");
    ConfineHost h = host();
    h.home = "/home/u";
    ConfineRequest etc = request(SandboxMode::WorkspaceWrite);
    etc.policy.writableRoots = {"/etc"};
    std::string message = error_of(code::BroadRoot, [&] { confine_call(etc, config, h); });
    EXPECT_NE(message.find("the writable root /etc is one of the operating system's own directories, holding"), std::string::npos)
        << message;
    EXPECT_NE(message.find("--allow-broad-root"), std::string::npos) << message;
    ConfineRequest usr_local = request(SandboxMode::WorkspaceWrite);
    usr_local.policy.workspaceRoot = "/usr/local";
    message = error_of(code::BroadRoot, [&] { confine_call(usr_local, config, h); });
    EXPECT_NE(message.find("the workspace root /usr/local lies in /usr, one of the operating system's own"), std::string::npos) << message;
    ConfineRequest proc = request(SandboxMode::WorkspaceWrite);
    proc.policy.writableRoots = {"/proc"};
    proc.allowBroadRoots = true;
    message = error_of(code::BroadRoot, [&] { confine_call(proc, config, h); });
    EXPECT_NE(message.find("the writable root /proc is one of the kernel's own file systems"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("opt in"), std::string::npos) << message;
    EXPECT_EQ(factory.made, 0);
    // Opted in, a system directory is accepted; read-only writes nothing and refuses none.
    etc.allowBroadRoots = true;
    EXPECT_TRUE(confine_call(etc, config, h).plan.has_value());
    ConfineRequest read_only = request(SandboxMode::ReadOnly);
    read_only.policy.workspaceRoot = "/proc";
    EXPECT_TRUE(confine_call(read_only, config, h).plan.has_value());
}

// Protected paths are found on the file system as bubblewrap will see them: POSIX paths.
#if !defined(_WIN32)
namespace fs = std::filesystem;

class ProtectedPathsFound : public ::testing::Test {
protected:
    unit::TempDir tmp;
    const std::vector<std::string> defaults = {".git/hooks", ".git/config"};

    // A git directory as `git init` leaves it (HEAD, config, objects/, refs/, hooks/).
    std::string repository(const std::string& gitdir, bool hooks = true) {
        const std::string path = tmp.dir(gitdir);
        tmp.file(gitdir + "/HEAD", "ref: refs/heads/main\n");
        tmp.file(gitdir + "/config", "[core]\n\trepositoryformatversion = 0\n");
        tmp.dir(gitdir + "/objects");
        tmp.dir(gitdir + "/refs");
        if (hooks) tmp.dir(gitdir + "/hooks");
        return path;
    }
};

TEST_F(ProtectedPathsFound, ARootsRepositoryItsNamingPathsReadOnlyItsLayoutKeptAndChecked) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    repository("ws/sub/.git");  // a nested repository that is not a submodule: not looked for
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_EQ(plan.repositories, std::vector<std::string>{git});
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{git + "/config", git + "/hooks"}));
    EXPECT_EQ(plan.keptInPlace, (std::vector<std::string>{git + "/objects", git + "/refs"}));
    EXPECT_EQ(plan.checkedAtEnd, std::vector<std::string>{git});
    EXPECT_TRUE(plan.madeDirectories.empty());
    EXPECT_FALSE(plan.notes.empty());
    EXPECT_FALSE(plan.bounded);
}

// What the config points at is followed through its includes (a hooks path in an included file
// is kept), a missing hooks path is made with its missing parents, and a file that includes
// itself a thousand times is read once: the plan is made at once, not after 1000^10 reads.
TEST_F(ProtectedPathsFound, IncludesAreFollowedOnceAndMissingHooksPathsMade) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    std::string loop = "[core]\n\thooksPath = kept-hooks\n";
    for (int i = 0; i < 1000; ++i) loop += "[include]\n\tpath = loop.gitconfig\n";
    tmp.file("ws/loop.gitconfig", loop);
    tmp.dir("ws/kept-hooks");
    tmp.file("ws/.git/config", "[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../loop.gitconfig\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_NE(std::find(plan.readOnly.begin(), plan.readOnly.end(), ws + "/kept-hooks"), plan.readOnly.end());
    EXPECT_NE(std::find(plan.readOnly.begin(), plan.readOnly.end(), ws + "/loop.gitconfig"), plan.readOnly.end());
    EXPECT_EQ(plan.madeDirectories, (std::vector<std::string>{ws + "/.husky", ws + "/.husky/_"}));
    (void)git;
}

// Red team pass 12: an include whose directory is missing is made with it; a hooks path ten
// directories deep is made whole, one deeper than the bound is named; what a file names is read
// where git reads it (a byte order mark first, a tab before the subsection); and a bare root's
// relative hooks path is relative to the git directory, the root itself.
TEST_F(ProtectedPathsFound, MissingTargetsAreMadeWithTheirParentsAndTheReaderReadsAsGitDoes) {
    const auto has = [](const std::vector<std::string>& list, const std::string& path) {
        return std::find(list.begin(), list.end(), path) != list.end();
    };
    const std::string ws = tmp.dir("ws");
    repository("ws/.git");
    std::string deep = "tools";
    for (int i = 0; i < 10; ++i) deep += "/" + std::to_string(i);
    tmp.file("ws/.git/config", "\xef\xbb\xbf[core]\n\thooksPath = " + deep + "/hooks\n[includeIf\t\"onbranch:**\"]\n"
                               "\tpath = ../conf/local.gitconfig\n");
    GitPlan plan = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_TRUE(has(plan.madeDirectories, ws + "/conf")) << ::testing::PrintToString(plan.madeDirectories);
    EXPECT_TRUE(has(plan.madeFiles, ws + "/conf/local.gitconfig")) << ::testing::PrintToString(plan.madeFiles);
    EXPECT_TRUE(has(plan.madeDirectories, ws + "/tools"));
    EXPECT_TRUE(has(plan.madeDirectories, ws + "/" + deep + "/hooks"));
    EXPECT_FALSE(plan.bounded);

    std::string deeper = "tools";
    for (int i = 0; i < 70; ++i) deeper += "/" + std::to_string(i);
    tmp.file("ws/.git/config", "[core]\n\thooksPath = " + deeper + "\n");
    plan = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_TRUE(plan.bounded);
    EXPECT_TRUE(std::any_of(plan.notes.begin(), plan.notes.end(), [&](const std::string& note) {
        return note.find("missing directories on the way to " + ws + "/" + deeper) != std::string::npos;
    })) << ::testing::PrintToString(plan.notes);

    const std::string bare = repository("bare.git");
    tmp.dir("bare.git/custom-hooks");
    tmp.file("bare.git/config", "[core]\n\tbare = true\n\thooksPath = custom-hooks\n");
    plan = plan_git_protection({bare}, GitMode::Protect, defaults);
    EXPECT_TRUE(has(plan.readOnly, bare + "/custom-hooks")) << ::testing::PrintToString(plan.readOnly);
}

// Red team pass 14: what a config names is found as git finds it. `~/` is the home directory; a
// backslash before CRLF continues the line and unquoted whitespace inside a value is a space; a
// `..` is taken after the components before it (the directory it leaves is kept in place); and
// each link of a symlink chain on the way is kept in place, not only the first.
TEST_F(ProtectedPathsFound, PathsInTheConfigAreFoundAsGitFindsThem) {
    const auto has = [](const std::vector<std::string>& list, const std::string& path) {
        return std::find(list.begin(), list.end(), path) != list.end();
    };
    const std::string ws = tmp.dir("ws");
    repository("ws/.git");
    tmp.dir("ws/conf/x");
    tmp.dir("ws/tools/hooks");
    std::filesystem::create_symlink("l2", ws + "/.husky");
    std::filesystem::create_symlink("tools/hooks", ws + "/l2");
    const char* home = std::getenv("HOME");
    const std::string saved = home ? home : "";
    setenv("HOME", ws.c_str(), 1);
    tmp.file("ws/.git/config", "[core]\n\thooksPath = .husky\n[include]\n\tpath = ~/home.inc\n"
                               "\tpath = ../conf/lo\\\r\ncal.inc\n\tpath = ../conf/a\tb.inc\n\tpath = ../conf/x/../up.inc\n"
                               "\tpath = /proc/self/cwd/p.inc\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, defaults);
    if (home) setenv("HOME", saved.c_str(), 1);
    else unsetenv("HOME");
    EXPECT_TRUE(has(plan.madeFiles, ws + "/home.inc")) << ::testing::PrintToString(plan.madeFiles);
    EXPECT_TRUE(has(plan.madeFiles, ws + "/conf/local.inc"));
    EXPECT_TRUE(has(plan.madeFiles, ws + "/conf/a b.inc"));
    EXPECT_TRUE(has(plan.madeFiles, ws + "/conf/up.inc"));
    EXPECT_TRUE(has(plan.keptInPlace, ws + "/conf/x")) << ::testing::PrintToString(plan.keptInPlace);
    EXPECT_TRUE(has(plan.keptInPlace, ws + "/.husky"));
    EXPECT_TRUE(has(plan.keptInPlace, ws + "/l2"));
    EXPECT_TRUE(has(plan.readOnly, ws + "/tools/hooks")) << ::testing::PrintToString(plan.readOnly);
    EXPECT_TRUE(std::any_of(plan.notes.begin(), plan.notes.end(), [](const std::string& note) {
        return note.find("/proc/") != std::string::npos;
    })) << ::testing::PrintToString(plan.notes);
}

// A submodule a call took out of .gitmodules is still found through its git directory, whose
// core.worktree names its checkout (red team pass 11: 05): its .git file stays read-only.
TEST_F(ProtectedPathsFound, ASubmoduleIsFoundByItsGitDirectoryToo) {
    const std::string ws = tmp.dir("ws");
    repository("ws/.git");
    const std::string module = repository("ws/.git/modules/lib");
    tmp.file("ws/.git/modules/lib/config", "[core]\n\tworktree = ../../../vendor/lib\n");
    tmp.dir("ws/vendor/lib");
    tmp.file("ws/vendor/lib/.git", "gitdir: ../../.git/modules/lib\n");
    tmp.file("ws/.gitmodules", "");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_NE(std::find(plan.readOnly.begin(), plan.readOnly.end(), ws + "/vendor/lib/.git"), plan.readOnly.end())
        << ::testing::PrintToString(plan.readOnly);
    EXPECT_NE(std::find(plan.repositories.begin(), plan.repositories.end(), module), plan.repositories.end());
}

// A root with no repository in it may lie inside one (a monorepo's project), which is not looked
// for: the plan says so, and only then.
TEST_F(ProtectedPathsFound, ARootWithoutARepositorySaysWhatARepositoryAboveItGets) {
    const auto says_so = [](const GitPlan& plan) {
        return std::any_of(plan.notes.begin(), plan.notes.end(),
                           [](const std::string& note) { return note.find("no repository was found") != std::string::npos; });
    };
    const std::string ws = tmp.dir("monorepo/project");
    repository("monorepo/.git");
    EXPECT_TRUE(says_so(plan_git_protection({ws}, GitMode::Protect, defaults)));
    repository("monorepo/project/.git");
    EXPECT_FALSE(says_so(plan_git_protection({ws}, GitMode::Protect, defaults)));
}

// A submodule .gitmodules registers but not checked out (a clone without --recursive) has no
// repository to protect yet: its directory is kept read-only (no repository can be made in it),
// and a missing modules/ is made read-only (none under it either). Where modules/ exists, the
// plan names the submodule instead; once checked out, it is protected as any.
TEST_F(ProtectedPathsFound, ASubmoduleNotCheckedOutIsKeptEmpty) {
    const auto named = [](const GitPlan& plan, const std::string& path) {
        return std::any_of(plan.notes.begin(), plan.notes.end(), [&](const std::string& note) {
            return note.find("not checked out") != std::string::npos && note.find(path) != std::string::npos;
        });
    };
    const auto has = [](const std::vector<std::string>& list, const std::string& path) {
        return std::find(list.begin(), list.end(), path) != list.end();
    };
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    tmp.file("ws/.gitmodules", "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = https://example.org/lib.git\n");
    const std::string sub = tmp.dir("ws/vendor/lib");
    const GitPlan fresh = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_TRUE(has(fresh.readOnly, sub));
    EXPECT_TRUE(has(fresh.madeDirectories, git + "/modules"));
    EXPECT_FALSE(named(fresh, sub));
    tmp.dir("ws/.git/modules/other");
    const GitPlan mixed = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_TRUE(has(mixed.readOnly, sub));
    EXPECT_FALSE(has(mixed.madeDirectories, git + "/modules"));
    EXPECT_TRUE(named(mixed, sub));
    tmp.file("ws/vendor/lib/.git", "gitdir: ../../.git/modules/lib\n");
    const GitPlan checked_out = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_FALSE(has(checked_out.readOnly, sub));
    EXPECT_FALSE(named(checked_out, sub));
}

TEST_F(ProtectedPathsFound, AMissingHooksDirectoryIsMadeAndAWorktreeConfigGitWouldReadToo) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git", false);
    tmp.file("ws/.git/config", "[core]\n\tbare = false\n[Extensions]\n\tworktreeConfig = yes\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {});
    EXPECT_EQ(plan.madeDirectories, std::vector<std::string>{git + "/hooks"});
    EXPECT_EQ(plan.madeFiles, std::vector<std::string>{git + "/config.worktree"});
    tmp.file("ws/.git/config", "[core]\n\tworktreeConfig = true\n");  // not in [extensions]: git ignores it
    EXPECT_TRUE(plan_git_protection({ws}, GitMode::Protect, {}).madeFiles.empty());
}

TEST_F(ProtectedPathsFound, PatternsApplyAtEachRootsTopAndWritableDropsGitsOwn) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    tmp.file("ws/.envrc", "");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {".envrc", ".missing"});
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{ws + "/.envrc", git + "/config", git + "/hooks"}));
    const GitPlan writable = plan_git_protection({ws}, GitMode::Writable, {".envrc", ".git/config", ".git"});
    EXPECT_EQ(writable.readOnly, std::vector<std::string>{ws + "/.envrc"});
    EXPECT_TRUE(writable.repositories.empty());
    EXPECT_TRUE(writable.keptInPlace.empty());
    EXPECT_TRUE(writable.checkedAtEnd.empty());
    EXPECT_EQ(protected_patterns_for(GitMode::Writable, {".git", ".git/hooks", ".gitignore", ".envrc"}),
              (std::vector<std::string>{".gitignore", ".envrc"}));
}

TEST_F(ProtectedPathsFound, ReadOnlyKeepsTheWholeGitDirectory) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    const GitPlan plan = plan_git_protection({ws}, GitMode::ReadOnly, defaults);
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{git, git + "/config", git + "/hooks"}));
    EXPECT_TRUE(plan.keptInPlace.empty());
    EXPECT_TRUE(plan.checkedAtEnd.empty());
}

TEST_F(ProtectedPathsFound, ASymlinkOnTheWayIsKeptInPlaceAndItsTargetProtected) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/store/real.git");
    fs::create_symlink("store/real.git", ws + "/.git");
    tmp.file("elsewhere", "");
    fs::create_symlink(tmp.path("elsewhere"), git + "/info");  // outside every root: kept, nothing else
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {".git/info"});
    EXPECT_EQ(plan.keptInPlace, (std::vector<std::string>{ws + "/.git", git + "/info", git + "/objects", git + "/refs"}));
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{git + "/config", git + "/hooks"}));
    EXPECT_EQ(plan.checkedAtEnd, std::vector<std::string>{git});
}

TEST_F(ProtectedPathsFound, AGitFileBringsItsGitDirCommonDirAndItself) {
    const std::string ws = tmp.dir("wt");
    const std::string common = repository("main/.git");
    tmp.dir("main/.git/worktrees/wt");
    tmp.file("main/.git/worktrees/wt/HEAD", "ref: refs/heads/wt\n");
    tmp.file("main/.git/worktrees/wt/commondir", "../..\n");
    tmp.file("main/.git/worktrees/wt/gitdir", ws + "/.git\n");
    tmp.file("wt/.git", "gitdir: " + common + "/worktrees/wt\n");
    // The repository's git directory outside every root: only the `.git` file is in reach.
    const GitPlan outside = plan_git_protection({ws}, GitMode::Protect, defaults);
    EXPECT_EQ(outside.readOnly, std::vector<std::string>{ws + "/.git"});
    EXPECT_TRUE(outside.checkedAtEnd.empty());
    const GitPlan inside = plan_git_protection({ws, common}, GitMode::Protect, defaults);
    EXPECT_EQ(inside.readOnly, (std::vector<std::string>{common + "/config", common + "/hooks", common + "/worktrees/wt/commondir",
                                                         common + "/worktrees/wt/gitdir", ws + "/.git"}));
    EXPECT_EQ(inside.keptInPlace, (std::vector<std::string>{common + "/objects", common + "/refs"}));
    // The repository's git directory is checked; the worktree's own is not (git stops at an
    // invalid one reached through a .git file, and its commondir is kept read-only).
    EXPECT_EQ(inside.checkedAtEnd, std::vector<std::string>{common});
}

TEST_F(ProtectedPathsFound, ARelativeGitDirIsTakenFromTheFilesDirectory) {
    const std::string ws = tmp.dir("sep");
    const std::string store = tmp.dir("store");
    const std::string git = repository("store/gd");
    tmp.file("sep/.git", "gitdir: ../store/gd\n");
    EXPECT_EQ(plan_git_protection({ws, store}, GitMode::Protect, defaults).readOnly,
              (std::vector<std::string>{ws + "/.git", git + "/config", git + "/hooks"}));
}

TEST_F(ProtectedPathsFound, SubmodulesTheirGitFilesAndTheirGitDirectories) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    const std::string module = repository("ws/.git/modules/vendor/lib");
    tmp.file("ws/.gitmodules", "[submodule \"vendor/lib\"]\n\tpath = vendor/lib\n\turl = ../lib\n"
                               "[submodule \"escape\"]\n\tpath = ../outside\n");
    tmp.dir("ws/vendor/lib");
    tmp.file("ws/vendor/lib/.git", "gitdir: ../../.git/modules/vendor/lib\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {});
    EXPECT_EQ(plan.repositories, (std::vector<std::string>{git, module}));
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{git + "/config", git + "/hooks", module + "/config", module + "/hooks",
                                                       ws + "/vendor/lib/.git"}));
    EXPECT_EQ(plan.checkedAtEnd, (std::vector<std::string>{git, module}));
}

// .gitmodules read as git reads it: quotes, comments and continuation lines change nothing.
TEST_F(ProtectedPathsFound, GitmodulesIsReadAsGitReadsIt) {
    const std::string ws = tmp.dir("ws");
    repository("ws/.git");
    for (const char* name : {"a", "b", "c", "d"}) {
        tmp.dir(std::string("ws/") + name);
        tmp.file(std::string("ws/") + name + "/.git", std::string("gitdir: ../.git/modules/") + name + "\n");
    }
    tmp.file("ws/.gitmodules", "[submodule \"a\"]\n\tpath = a ; a comment\n[submodule \"b\"]\n\tpath = \"b\"\n"
                               "[submodule \"c\"]\n\tpath = \\\n c\n[SubModule \"d\"] PATH=d # trailing\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {});
    for (const char* name : {"a", "b", "c", "d"})
        EXPECT_NE(std::find(plan.readOnly.begin(), plan.readOnly.end(), ws + "/" + name + "/.git"), plan.readOnly.end()) << name;
}

// A commondir in a git directory that is not a linked worktree's is a plant: not followed, and
// the directory is checked (the stage removes it when the call ends).
TEST_F(ProtectedPathsFound, APlantedCommondirIsNotFollowed) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    const std::string evil = repository("ws/evil");
    tmp.file("ws/.git/commondir", evil + "\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {});
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{git + "/config", git + "/hooks"}));
    EXPECT_EQ(plan.checkedAtEnd, std::vector<std::string>{git});
}

// A writable root that is itself a git directory (a bare repository, or a .git given as a root).
TEST_F(ProtectedPathsFound, ARootThatIsAGitDirectoryIsOne) {
    const std::string bare = repository("srv/x.git");
    const GitPlan plan = plan_git_protection({bare}, GitMode::Protect, {});
    EXPECT_EQ(plan.repositories, std::vector<std::string>{bare});
    EXPECT_EQ(plan.readOnly, (std::vector<std::string>{bare + "/config", bare + "/hooks"}));
    EXPECT_EQ(plan.checkedAtEnd, std::vector<std::string>{bare});
}

// What the config points into the worktree (a hooks directory, an included file) is kept.
TEST_F(ProtectedPathsFound, HooksPathAndIncludesIntoTheWorktreeAreKept) {
    const std::string ws = tmp.dir("ws");
    const std::string git = repository("ws/.git");
    tmp.dir("ws/.husky");
    tmp.file("ws/project.gitconfig", "");
    tmp.file("ws/.git/config", "[core]\n\thooksPath = .husky\n[include]\n\tpath = ../project.gitconfig\n"
                               "[includeIf \"gitdir:~/x\"]\n\tpath = /elsewhere/x\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {});
    EXPECT_NE(std::find(plan.readOnly.begin(), plan.readOnly.end(), ws + "/.husky"), plan.readOnly.end());
    EXPECT_NE(std::find(plan.readOnly.begin(), plan.readOnly.end(), ws + "/project.gitconfig"), plan.readOnly.end());
}

// Module directories are git directories only when git would take them for one, and a layout
// with more than one plan looks at is named, not silently cut.
TEST_F(ProtectedPathsFound, FakeModulesAreNotRepositoriesAndTheBoundIsSaid) {
    const std::string ws = tmp.dir("ws");
    repository("ws/.git");
    for (int i = 0; i < 50; ++i) tmp.file("ws/.git/modules/f" + std::to_string(i) + "/HEAD", "ref: refs/heads/x\n");
    const GitPlan plan = plan_git_protection({ws}, GitMode::Protect, {});
    EXPECT_EQ(plan.repositories.size(), 1U);
    EXPECT_FALSE(plan.bounded);
    for (int i = 0; i < 1100; ++i) repository("ws/.git/modules/m" + std::to_string(i), false);
    const GitPlan many = plan_git_protection({ws}, GitMode::Protect, {});
    EXPECT_TRUE(many.bounded);
    EXPECT_TRUE(std::any_of(many.notes.begin(), many.notes.end(),
                            [](const std::string& note) { return note.find("exceed what one plan looks at") != std::string::npos; }));
}

TEST(HostGit, TakesImplicitBareRepositoriesUnlessExplicitFrom238) {
    const auto unset = assess_host_git("git version 2.39.5\n", "");
    EXPECT_EQ(unset.version, "2.39.5");
    EXPECT_TRUE(unset.takesImplicitBareRepositories);
    EXPECT_EQ(unset.advice, "git config --global safe.bareRepository explicit");
    EXPECT_FALSE(assess_host_git("git version 2.38.0", "explicit\n").takesImplicitBareRepositories);
    EXPECT_FALSE(assess_host_git("git version 3.0.1", "Explicit").takesImplicitBareRepositories);
    EXPECT_TRUE(assess_host_git("git version 2.39.5", "all\n").takesImplicitBareRepositories);
    const auto old = assess_host_git("git version 2.30.2", "explicit");
    EXPECT_TRUE(old.takesImplicitBareRepositories);
    EXPECT_NE(old.advice.find("2.38"), std::string::npos) << old.advice;
    EXPECT_TRUE(assess_host_git("", "explicit").takesImplicitBareRepositories);
}

TEST(GitHead, ValidAsGitTakesIt) {
    EXPECT_TRUE(valid_git_head("ref: refs/heads/main\n", false));
    EXPECT_TRUE(valid_git_head("ref:refs/heads/main", false));
    EXPECT_TRUE(valid_git_head(std::string(40, 'a') + "\n", false));
    EXPECT_TRUE(valid_git_head(std::string(64, 'b'), false));
    EXPECT_TRUE(valid_git_head("refs/heads/main", true));
    EXPECT_FALSE(valid_git_head("", false));
    EXPECT_FALSE(valid_git_head("garbage\n", false));
    EXPECT_FALSE(valid_git_head("ref: heads/main", false));
    EXPECT_FALSE(valid_git_head(std::string(39, 'a'), false));
    // git's own white space only, and only what its 255-byte read sees (red team pass 11, 01).
    EXPECT_TRUE(valid_git_head("ref:\t\r\n refs/heads/main", false));
    EXPECT_FALSE(valid_git_head("ref:\vrefs/heads/main", false));
    EXPECT_FALSE(valid_git_head("ref:\frefs/heads/main", false));
    EXPECT_FALSE(valid_git_head("ref:" + std::string(251, ' ') + "refs/heads/main", false));
    EXPECT_TRUE(valid_git_head("ref:" + std::string(246, ' ') + "refs/", false));
    EXPECT_FALSE(valid_git_head(std::string(40, 'g'), false));
    EXPECT_FALSE(valid_git_head("/nowhere", true));
}

TEST_F(Confine, ProtectedPathsAreLookedForInWorkspaceWriteOnly) {
    unit::TempDir tmp;
    const std::string ws = tmp.dir("ws");
    tmp.dir("ws/.git/hooks");
    auto backend = factory.add("bwrap");
    ConfineRequest r = request(SandboxMode::WorkspaceWrite);
    r.policy.workspaceRoot = ws;
    confine_call(r, config, host());
    ASSERT_TRUE(backend->lastPolicy.has_value());
    EXPECT_EQ(backend->lastPolicy->protectedPaths, std::vector<std::string>{ws + "/.git/hooks"});
    r.policy.mode = SandboxMode::ReadOnly;
    confine_call(r, config, host());
    EXPECT_TRUE(backend->lastPolicy->protectedPaths.empty());
}

TEST_F(Confine, OnlyUnreadablePathsThatExistReachTheBackend) {
    unit::TempDir tmp;
    const std::string secret = tmp.file("secret", "x");
    auto backend = factory.add("bwrap");
    ConfineRequest r = request(SandboxMode::ReadOnly);
    r.policy.unreadablePaths = {secret, tmp.path("missing")};
    r.policy.network = NetworkPolicy::Deny;
    confine_call(r, config, host());
    ASSERT_TRUE(backend->lastPolicy.has_value());
    EXPECT_EQ(backend->lastPolicy->unreadablePaths, std::vector<std::string>{secret});
    EXPECT_EQ(backend->lastPolicy->network, NetworkPolicy::Deny);
}
#endif

}  // namespace
}  // namespace dsh
