// The pure builders of the Linux backends: bwrap's argv, writable roots and dialect, and the
// Landlock access masks, grants, gaps, runner argv and dialect.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/classify.hpp"
#include "platform/linux/bwrap_argv.hpp"
#include "platform/linux/landlock_rules.hpp"

namespace dsh {
namespace {

using Argv = std::vector<std::string>;

const Argv kCommand = {"bash", "-c", "echo '--tmpfs' -- \"$x\"", "--", "--bind", ""};

SandboxPolicy policy_of(ConfinedSandboxMode mode, std::optional<std::string> temp = std::nullopt) {
    SandboxPolicy policy;
    policy.mode = mode;
    policy.workspaceRoot = "/home/u/ws";
    policy.sessionTempDir = std::move(temp);
    return policy;
}

bwrap::Layout layout_of(bool root = false) {
    bwrap::Layout layout;
    layout.runner = "/usr/bin/bwrap";
    layout.stage = "/usr/bin/dsh-confine";
    layout.cwd = "/home/u/ws/sub";
    layout.root = root;
    layout.workspaceRootId = "2049:11";
    layout.tempDirId = "2049:22";
    layout.privateTemp = "/tmp/dsh-confine-1000";
    return layout;
}

// As the backend builds it: a read-only call has no temp area.
Argv bwrap_argv(ConfinedSandboxMode mode, std::optional<std::string> temp = std::nullopt, bool root = false) {
    bwrap::Layout layout = layout_of(root);
    if (mode == ConfinedSandboxMode::ReadOnly) layout.privateTemp = layout.tempDirId = "";
    return bwrap::build_argv(layout, kCommand, policy_of(mode, std::move(temp)));
}

// bwrap's own options: everything between the runner and the first "--".
Argv runner_options(const Argv& argv) {
    const auto separator = std::find(argv.begin(), argv.end(), "--");
    EXPECT_NE(separator, argv.end());
    return Argv(argv.begin() + 1, separator);
}

// The stage's options: between `bwrap-stage` and the "--" before the caller's argv.
Argv stage_options(const Argv& argv) {
    const auto stage = std::find(argv.begin(), argv.end(), "bwrap-stage");
    EXPECT_NE(stage, argv.end());
    return Argv(stage + 1, argv.end() - static_cast<std::ptrdiff_t>(kCommand.size()) - 1);
}

// Where `sequence` starts inside `argv`, or -1.
std::ptrdiff_t find_sequence(const Argv& argv, const Argv& sequence) {
    auto it = std::search(argv.begin(), argv.end(), sequence.begin(), sequence.end());
    return it == argv.end() ? -1 : it - argv.begin();
}

bool has(const Argv& argv, const Argv& sequence) { return find_sequence(argv, sequence) >= 0; }

TEST(BwrapArgv, StartsWithTheRunnerAndAReadOnlyHost) {
    const Argv argv = bwrap_argv(ConfinedSandboxMode::ReadOnly);
    ASSERT_GE(argv.size(), 4u);
    EXPECT_EQ(Argv(argv.begin(), argv.begin() + 4), (Argv{"/usr/bin/bwrap", "--ro-bind", "/", "/"}));
}

TEST(BwrapArgv, ReadOnlyHasNoWritableBindAndNoTmpfs) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly));
    EXPECT_EQ(std::count(options.begin(), options.end(), "--bind"), 0);
    EXPECT_EQ(std::count(options.begin(), options.end(), "--tmpfs"), 0);
    EXPECT_EQ(std::count(options.begin(), options.end(), "/home/u/ws"), 0);
    EXPECT_EQ(std::count(options.begin(), options.end(), "--cap-add"), 0);
}

// The class of escape this layout closes: bubblewrap creates and mounts onto destinations while
// following symlinks, so no destination may lie where a confined command could have written.
TEST(BwrapArgv, EveryDestinationIsFixedOrInBubblewrapsOwnDev) {
    for (auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite})
        for (std::optional<std::string> temp : {std::optional<std::string>(), std::optional<std::string>("/state/s1/tmp")}) {
            const Argv options = runner_options(bwrap_argv(mode, temp));
            for (std::size_t i = 0; i < options.size(); ++i) {
                const std::string& o = options[i];
                std::string dest;
                if ((o == "--bind" || o == "--ro-bind" || o == "--dev-bind" || o == "--bind-try" || o == "--ro-bind-try") &&
                    i + 2 < options.size())
                    dest = options[i + 2];
                else if ((o == "--tmpfs" || o == "--dev" || o == "--proc" || o == "--dir" || o == "--remount-ro") &&
                         i + 1 < options.size())
                    dest = options[i + 1];
                else
                    continue;
                const bool fixed = dest == "/" || dest == "/dev" || dest == "/proc" || dest.rfind("/dev/", 0) == 0;
                EXPECT_TRUE(fixed) << o << " " << dest;
            }
        }
}

TEST(BwrapArgv, WorkspaceWriteStagesTheRootAndNamesItsIdentity) {
    const Argv argv = bwrap_argv(ConfinedSandboxMode::WorkspaceWrite);
    EXPECT_TRUE(has(runner_options(argv), {"--bind", "/home/u/ws", "/dev/.dsh-confine/0"}));
    EXPECT_TRUE(has(stage_options(argv), {"--root", "2049:11@/home/u/ws"}));
}

TEST(BwrapArgv, WithoutASessionTheTempAreaIsAPrivateTmpfsOverTheBase) {
    const Argv argv = bwrap_argv(ConfinedSandboxMode::WorkspaceWrite);
    EXPECT_TRUE(has(runner_options(argv), {"--perms", "0700", "--tmpfs", "/dev/.dsh-confine/temp"}));
    EXPECT_TRUE(has(stage_options(argv), {"--temp-tmpfs", "2049:22@/tmp/dsh-confine-1000"}));
}

TEST(BwrapArgv, SessionTempDirIsStagedAndBoundAtItsOwnPath) {
    const Argv argv = bwrap_argv(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp");
    EXPECT_TRUE(has(runner_options(argv), {"--bind", "/state/s1/tmp", "/dev/.dsh-confine/temp"}));
    EXPECT_TRUE(has(stage_options(argv), {"--temp-bind", "2049:22@/state/s1/tmp"}));
    EXPECT_FALSE(has(runner_options(argv), {"--tmpfs", "/dev/.dsh-confine/temp"}));
}

TEST(BwrapArgv, TheHostsTmpIsNotReplaced) {
    for (auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite}) {
        const Argv options = runner_options(bwrap_argv(mode));
        EXPECT_EQ(std::count(options.begin(), options.end(), "/tmp"), 0);
    }
}

TEST(BwrapArgv, TheProbeTriesTheStagesMountsOnAPrivateTmpfs) {
    // The probe is read-only, with a private temp area: the stage's namespace and mount path run.
    const Argv argv = bwrap::build_argv(layout_of(), kCommand, policy_of(ConfinedSandboxMode::ReadOnly));
    EXPECT_TRUE(has(runner_options(argv), {"--perms", "0700", "--tmpfs", "/dev/.dsh-confine/temp"}));
    EXPECT_TRUE(has(stage_options(argv), {"--temp-tmpfs", "2049:22@/tmp/dsh-confine-1000"}));
    EXPECT_FALSE(has(runner_options(argv), {"--bind"}));
}

TEST(BwrapArgv, WorkspaceWriteGivesAPrivateDevShm) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite)), {"--tmpfs", "/dev/shm"}));
    EXPECT_FALSE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--tmpfs", "/dev/shm"}));
}

TEST(BwrapArgv, ReadOnlyIgnoresTheSessionTempDir) {
    const Argv argv = bwrap_argv(ConfinedSandboxMode::ReadOnly, "/state/s1/tmp");
    EXPECT_EQ(std::count(argv.begin(), argv.end(), "/state/s1/tmp"), 0);
}

TEST(BwrapArgv, OnlyARootCallerKeepsCapabilitiesForTheStage) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite, std::nullopt, true)),
                    {"--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP", "--cap-add", "CAP_SYS_ADMIN"}));
    EXPECT_FALSE(has(runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite)), {"--cap-add"}));
    const Argv read_only_root = runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly, std::nullopt, true));
    EXPECT_TRUE(has(read_only_root, {"--cap-add", "CAP_SETPCAP"}));
    EXPECT_FALSE(has(read_only_root, {"--cap-add", "CAP_SYS_ADMIN"}));
}

TEST(BwrapArgv, RunsTheCommandThroughTheStage) {
    const Argv argv = bwrap_argv(ConfinedSandboxMode::ReadOnly);
    EXPECT_TRUE(has(argv, {"--", "/usr/bin/dsh-confine", "bwrap-stage"}));
    EXPECT_TRUE(has(stage_options(argv), {"--chdir", "/home/u/ws/sub"}));
}

TEST(BwrapArgv, KeptDescriptorsAreNamedToTheStage) {
    bwrap::Layout layout = layout_of();
    layout.keepFds = {3, 7};
    const Argv argv = bwrap::build_argv(layout, kCommand, policy_of(ConfinedSandboxMode::ReadOnly));
    EXPECT_TRUE(has(stage_options(argv), {"--keep-fd", "3", "--keep-fd", "7"}));
}

TEST(BwrapArgv, ReadOnlyRemountsProcReadOnly) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly));
    EXPECT_TRUE(has(options, {"--remount-ro", "/proc"}));
    EXPECT_LT(find_sequence(options, {"--proc", "/proc"}), find_sequence(options, {"--remount-ro", "/proc"}));
}

TEST(BwrapArgv, WithMountsTheStageRemountsProc) {
    // The stage writes its uid and gid maps in /proc first (bwrap_stage.cpp), then remounts it.
    EXPECT_FALSE(has(runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite)), {"--remount-ro", "/proc"}));
}

TEST(BwrapArgv, RemountsDevReadOnlyAfterStaging) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite));
    EXPECT_TRUE(has(options, {"--remount-ro", "/dev"}));
    EXPECT_LT(find_sequence(options, {"--dev", "/dev"}), find_sequence(options, {"--remount-ro", "/dev"}));
    EXPECT_LT(find_sequence(options, {"--bind", "/home/u/ws", "/dev/.dsh-confine/0"}), find_sequence(options, {"--remount-ro", "/dev"}));
}

TEST(BwrapArgv, EndsWithTheSeparatorAndTheCallersArgvVerbatim) {
    for (auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite}) {
        const Argv argv = bwrap_argv(mode);
        ASSERT_GT(argv.size(), kCommand.size());
        EXPECT_EQ(argv[argv.size() - kCommand.size() - 1], "--");
        EXPECT_EQ(Argv(argv.end() - static_cast<std::ptrdiff_t>(kCommand.size()), argv.end()), kCommand);
    }
}

TEST(BwrapArgv, TheCallersArgvFollowsTheStagesSeparator) {
    // Two separators, bwrap's and the stage's; the caller's own "--" comes only after both.
    const Argv argv = bwrap_argv(ConfinedSandboxMode::WorkspaceWrite);
    const auto first = std::find(argv.begin(), argv.end(), "--");
    const auto second = std::find(first + 1, argv.end(), "--");
    EXPECT_EQ(static_cast<std::size_t>(second - argv.begin()), argv.size() - kCommand.size() - 1);
}

TEST(BwrapArgv, DropsEveryCapability) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--cap-drop", "ALL"}));
}

TEST(BwrapArgv, UnsharesThePidAndIpcNamespaces) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--unshare-pid"}));
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--unshare-ipc"}));
}

TEST(BwrapArgv, DiesWithItsParent) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--die-with-parent"}));
}

TEST(BwrapWritableRoots, ReadOnlyIsTheSinksAndDevPts) {
    Argv expected = posix_shell_sinks();
    expected.push_back("/dev/pts");
    EXPECT_EQ(bwrap::writable_roots(policy_of(ConfinedSandboxMode::ReadOnly), layout_of()), expected);
}

TEST(BwrapWritableRoots, WorkspaceWriteAddsTheRootTheTempAreaAndDevShm) {
    Argv expected = {"/home/u/ws", "/tmp/dsh-confine-1000", "/dev/shm"};
    expected.insert(expected.end(), posix_shell_sinks().begin(), posix_shell_sinks().end());
    expected.push_back("/dev/pts");
    EXPECT_EQ(bwrap::writable_roots(policy_of(ConfinedSandboxMode::WorkspaceWrite), layout_of()), expected);
}

TEST(BwrapWritableRoots, SessionTempDirIsNamedByItsPath) {
    const Argv roots = bwrap::writable_roots(policy_of(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp"), layout_of());
    EXPECT_EQ(std::count(roots.begin(), roots.end(), "/tmp"), 0);
    EXPECT_EQ(std::count(roots.begin(), roots.end(), "/state/s1/tmp"), 1);
}

Verdict bwrap_verdict(const std::string& text, int exit_code) {
    return classify(bwrap::dialect({}), text, exit_code).verdict;
}

TEST(BwrapDialect, IsValid) { EXPECT_NO_THROW(validate_dialect(bwrap::dialect({"extra"}))); }

TEST(BwrapDialect, MissingCommandIsTheCommandsFailure) {
    EXPECT_EQ(bwrap_verdict("bwrap: execvp foo: No such file or directory\n", 1), Verdict::Failure);
}

TEST(BwrapDialect, NamespaceFailureOnExitOneIsRunnerFailure) {
    const Classification result =
        classify(bwrap::dialect({}), "bwrap: Creating new namespace failed: Operation not permitted\n", 1);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.signature, "bwrap: Creating new namespace failed");
    EXPECT_EQ(result.rule, 0u);
}

TEST(BwrapDialect, NamespaceFailureOnExitTwoIsNotRunnerFailure) {
    EXPECT_NE(bwrap_verdict("bwrap: Creating new namespace failed: Operation not permitted\n", 2),
              Verdict::RunnerFailure);
}

TEST(BwrapDialect, UidMapFailureIsRunnerFailure) {
    EXPECT_EQ(bwrap_verdict("bwrap: setting up uid map: Permission denied\n", 1), Verdict::RunnerFailure);
}

TEST(BwrapDialect, OnlyTheLastChdirWarningAloneIsNotRunnerFailure) {
    EXPECT_NE(bwrap_verdict("bwrap: Only the last --chdir option will take effect\n", 1), Verdict::RunnerFailure);
}

TEST(BwrapDialect, OnlyTheLastChdirWarningIsInformational) {
    const Dialect dialect = bwrap::dialect({});
    const auto& lines = dialect.runnerFailureRules.at(0).informationalLines;
    EXPECT_NE(std::find(lines.begin(), lines.end(), "bwrap: Only the last --chdir option will take effect"),
              lines.end());
}

TEST(BwrapDialect, WarningDoesNotHideARealFailure) {
    EXPECT_EQ(bwrap_verdict("bwrap: Only the last --chdir option will take effect\n"
                            "bwrap: Can't mkdir /x: Permission denied\n",
                            1),
              Verdict::RunnerFailure);
}

TEST(BwrapDialect, ExtraInformationalLineIsExcluded) {
    const std::string line = "bwrap: Can't mkdir /opt/x: benign here\n";
    ASSERT_EQ(bwrap_verdict(line, 1), Verdict::RunnerFailure);
    EXPECT_NE(classify(bwrap::dialect({"bwrap: Can't mkdir /opt/x: benign here"}), line, 1).verdict,
              Verdict::RunnerFailure);
}

// The hosts network's launcher refuses with its own line and 125 before bubblewrap runs.
TEST(BwrapDialect, TheLaunchersProxyFailureIsRunnerFailure) {
    EXPECT_EQ(bwrap_verdict("dsh-confine: error: PROXY: socketpair: Too many open files\n", 125), Verdict::RunnerFailure);
    EXPECT_NE(bwrap_verdict("dsh-confine: error: PROXY: socketpair: Too many open files\n", 1), Verdict::RunnerFailure);
}

// Without a plan, the proxy's refusal is a denial naming the host (its words are its own).
TEST(BwrapDialect, TheProxysRefusalIsADenialNamingTheHost) {
    const Classification result = classify(
        bwrap::dialect({}), "dsh-confine: network: refused example.org:443, not in allow_hosts (--allow-host ...)\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.host, "example.org:443");
}

TEST(BwrapDialect, ReadOnlyFileSystemIsDenial) {
    const Classification result =
        classify(bwrap::dialect({}), "touch: cannot touch '/etc/x': Read-only file system\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.signature, "read-only file system");
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

// Without a plan (classify --backend bwrap), the words of a call that writes and protects git's
// paths (the default): a refused write to a protected .git/config is EBUSY.
TEST(BwrapDialect, NamesOnlyWhatBubblewrapProduces) {
    const auto base = bwrap::dialect({}).denialSignatures;
    for (const char* word : {"read-only file system", "EROFS", "EXDEV", "device or resource busy", "EBUSY"})
        EXPECT_TRUE(contains(base, word)) << word;
    for (const char* other : {"permission denied", "EACCES", "EPERM", "operation not permitted"})
        EXPECT_FALSE(contains(base, other)) << other;
    const auto read_only = bwrap::denial_signatures(SandboxPolicy{});
    EXPECT_TRUE(contains(read_only, "EROFS"));
    EXPECT_FALSE(contains(read_only, "EXDEV"));
    EXPECT_FALSE(contains(read_only, "EBUSY"));
}

TEST(BwrapDialect, WorkspaceWriteAddsExdev) {
    SandboxPolicy policy;
    policy.mode = ConfinedSandboxMode::WorkspaceWrite;
    const auto signatures = bwrap::denial_signatures(policy);
    EXPECT_TRUE(contains(signatures, "invalid cross-device link"));
    EXPECT_TRUE(contains(signatures, "EXDEV"));
}

TEST(BwrapDialect, HiddenPathsAddEacces) {
    SandboxPolicy policy;
    policy.unreadablePaths = {"/secret"};
    const auto signatures = bwrap::denial_signatures(policy);
    EXPECT_TRUE(contains(signatures, "permission denied"));
    EXPECT_TRUE(contains(signatures, "EACCES"));
    EXPECT_FALSE(contains(signatures, "EPERM"));
    // Python's words for "no temp dir is writable" belong to both errnos, and appear once.
    EXPECT_EQ(std::count(signatures.begin(), signatures.end(), "no usable temporary directory"), 1);
}

TEST(BwrapDialect, ProtectedPathsAddEbusyAndExdev) {
    SandboxPolicy policy;  // read-only: EXDEV comes only from the protected path's mount
    policy.protectedPaths = {"/ws/.git/hooks"};
    const auto signatures = bwrap::denial_signatures(policy);
    for (const char* word : {"device or resource busy", "EBUSY", "invalid cross-device link", "EXDEV"})
        EXPECT_TRUE(contains(signatures, word)) << word;
    EXPECT_EQ(bwrap_verdict("error: could not write config file .git/config: Device or resource busy\n", 255), Verdict::Denial);
    SandboxPolicy kept;  // a path kept in place (git's objects/) is a mount point too
    kept.git.keptInPlace = {"/ws/.git/objects"};
    EXPECT_TRUE(contains(bwrap::denial_signatures(kept), "EBUSY"));
}

TEST(BwrapDialect, ADeniedNetworkAddsEpermAndEnetunreach) {
    SandboxPolicy policy;
    policy.network = NetworkPolicy::Deny;
    const auto signatures = bwrap::denial_signatures(policy);
    for (const char* word : {"operation not permitted", "EPERM", "network is unreachable", "ENETUNREACH"})
        EXPECT_TRUE(contains(signatures, word)) << word;
    EXPECT_FALSE(contains(signatures, "EACCES"));
}

TEST(BwrapDialect, ErrnoNamesAreWholeWords) {
    EXPECT_EQ(bwrap_verdict("Error: EROFS: read-only file system, open '/ws/x'\n", 1), Verdict::Denial);
    EXPECT_EQ(bwrap_verdict("npm error code EROFS\n", 1), Verdict::Denial);
    EXPECT_EQ(bwrap_verdict("mkfs.XEROFS: bad superblock\n", 1), Verdict::Failure);
    EXPECT_EQ(bwrap_verdict("npm error code EACCES\n", 1), Verdict::Failure);  // not bubblewrap's
}

TEST(LandlockHandledAccess, AbiZeroHandlesNothing) { EXPECT_EQ(landlock::handled_access(0), 0u); }

TEST(LandlockHandledAccess, AbiOneIsBitsZeroToTwelve) { EXPECT_EQ(landlock::handled_access(1), 0x1FFFu); }

TEST(LandlockHandledAccess, AbiTwoAddsRefer) {
    EXPECT_EQ(landlock::handled_access(2), 0x1FFFu | landlock::access::Refer);
    EXPECT_EQ(landlock::access::Refer, 1u << 13);
}

TEST(LandlockHandledAccess, AbiThreeAddsTruncate) {
    EXPECT_EQ(landlock::handled_access(3), 0x3FFFu | landlock::access::Truncate);
    EXPECT_EQ(landlock::access::Truncate, 1u << 14);
}

TEST(LandlockHandledAccess, AbiFourAddsNoFilesystemRight) {
    EXPECT_EQ(landlock::handled_access(4), landlock::handled_access(3));
}

TEST(LandlockHandledAccess, AbiFiveAddsDeviceIoctl) {
    EXPECT_EQ(landlock::handled_access(5), 0x7FFFu | landlock::access::IoctlDev);
    EXPECT_EQ(landlock::access::IoctlDev, 1u << 15);
}

TEST(LandlockHandledAccess, AbiSixAndSevenAddNoFilesystemRight) {
    EXPECT_EQ(landlock::handled_access(6), 0xFFFFu);
    EXPECT_EQ(landlock::handled_access(7), 0xFFFFu);
}

const Argv kSinks = {"/dev/null", "/dev/zero"};

std::vector<landlock::Grant> grants_for(ConfinedSandboxMode mode, int abi,
                                        std::optional<std::string> temp = std::nullopt) {
    return landlock::grants(policy_of(mode), temp, kSinks, abi);
}

// The sinks, and the terminals every mode may make and use (a named gap).
bool is_sink(const std::string& path) {
    return std::find(kSinks.begin(), kSinks.end(), path) != kSinks.end() || path == "/dev/ptmx" || path == "/dev/pts";
}

constexpr std::uint64_t kReadRights =
    landlock::access::ReadFile | landlock::access::ReadDir | landlock::access::Execute;

TEST(LandlockGrants, ReadOnlyGrantsNoWriteBesidesTheSinks) {
    for (const auto& grant : grants_for(ConfinedSandboxMode::ReadOnly, 7))
        if (!is_sink(grant.path)) {
            EXPECT_EQ(grant.access & ~kReadRights, 0u) << grant.path;
        }
}

TEST(LandlockGrants, ReadOnlyNamesOnlyTheHostAndTheSinks) {
    Argv paths;
    for (const auto& grant : grants_for(ConfinedSandboxMode::ReadOnly, 7, "/state/tmp")) paths.push_back(grant.path);
    EXPECT_EQ(paths, (Argv{"/", "/dev/null", "/dev/zero", "/dev/ptmx", "/dev/pts"}));
}

TEST(LandlockGrants, HostIsReadableAndExecutable) {
    const auto grants = grants_for(ConfinedSandboxMode::ReadOnly, 7);
    ASSERT_FALSE(grants.empty());
    EXPECT_EQ(grants[0].path, "/");
    EXPECT_EQ(grants[0].access, kReadRights);
}

TEST(LandlockGrants, SinksAreWritable) {
    for (const auto& grant : grants_for(ConfinedSandboxMode::ReadOnly, 7))
        if (is_sink(grant.path)) {
            EXPECT_NE(grant.access & landlock::access::WriteFile, 0u) << grant.path;
        }
}

TEST(LandlockGrants, SinkGrantsCarryOnlyFileRights) {
    for (int abi = 1; abi <= 7; ++abi)
        for (const auto& grant : grants_for(ConfinedSandboxMode::WorkspaceWrite, abi, "/state/tmp"))
            if (is_sink(grant.path) && grant.path != "/dev/pts") {  // /dev/pts is a directory: it may be listed
                EXPECT_EQ(grant.access & ~landlock::access::FileRights, 0u) << grant.path << " at ABI " << abi;
            }
}

TEST(LandlockGrants, GrantsAreMaskedToTheAbi) {
    for (int abi = 1; abi <= 7; ++abi)
        for (const auto& grant : grants_for(ConfinedSandboxMode::WorkspaceWrite, abi, "/state/tmp"))
            EXPECT_EQ(grant.access & ~landlock::handled_access(abi), 0u) << grant.path << " at ABI " << abi;
}

TEST(LandlockGrants, WorkspaceWriteGrantsTheRootAndTempEveryRight) {
    const auto grants = grants_for(ConfinedSandboxMode::WorkspaceWrite, 7, "/state/tmp");
    ASSERT_EQ(grants.size(), 8u);
    EXPECT_EQ(grants[5].path, "/dev/shm");  // the host's, shared: a named gap
    EXPECT_EQ(grants[6].path, "/home/u/ws");
    EXPECT_EQ(grants[6].access, landlock::handled_access(7));
    EXPECT_EQ(grants[7].path, "/state/tmp");
    EXPECT_EQ(grants[7].access, landlock::handled_access(7));
}

TEST(LandlockGrants, WorkspaceWriteWithoutTempGrantsOnlyTheRoot) {
    const auto grants = grants_for(ConfinedSandboxMode::WorkspaceWrite, 7);
    ASSERT_EQ(grants.size(), 7u);
    EXPECT_EQ(grants.back().path, "/home/u/ws");
}

bool any_gap_starts_with(const Argv& gaps, const std::string& prefix) {
    return std::any_of(gaps.begin(), gaps.end(), [&](const std::string& gap) { return gap.rfind(prefix, 0) == 0; });
}

TEST(LandlockGaps, AbiSevenNamesTheMetadataIpcAndAffinityGaps) {
    const Argv gaps = landlock::enforcement_gaps(7);
    EXPECT_TRUE(any_gap_starts_with(gaps, "chmod:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "chown:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "utimes:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "xattrs:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "file ioctls:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "IPC:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "CPU affinity:"));
    EXPECT_EQ(gaps.size(), 7u);
}


TEST(LandlockGaps, AbiSevenGovernsTruncateAndDeviceIoctls) {
    const Argv gaps = landlock::enforcement_gaps(7);
    EXPECT_FALSE(any_gap_starts_with(gaps, "truncate:"));
    EXPECT_FALSE(any_gap_starts_with(gaps, "device ioctls:"));
}

TEST(LandlockGaps, AbiTwoAddsTruncateAndDeviceIoctls) {
    const Argv gaps = landlock::enforcement_gaps(2);
    EXPECT_TRUE(any_gap_starts_with(gaps, "truncate:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "device ioctls:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "chmod:"));
}

TEST(LandlockGaps, AbiFourLacksOnlyDeviceIoctlsBeyondMetadata) {
    const Argv gaps = landlock::enforcement_gaps(4);
    EXPECT_FALSE(any_gap_starts_with(gaps, "truncate:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "device ioctls:"));
}

TEST(LandlockRunnerArgv, ReadOnlyLayout) {
    landlock::RunnerArgs args;
    args.mode = ConfinedSandboxMode::ReadOnly;
    args.workspaceRoot = "/home/u/ws";
    EXPECT_EQ(landlock::build_argv("/usr/bin/dsh-confine", args, {"ls", "-la"}),
              (Argv{"/usr/bin/dsh-confine", "landlock-exec", "--mode", "read-only", "--workspace-root", "/home/u/ws",
                    "--", "ls", "-la"}));
}

TEST(LandlockRunnerArgv, TempDirLayout) {
    landlock::RunnerArgs args;
    args.mode = ConfinedSandboxMode::WorkspaceWrite;
    args.workspaceRoot = "/home/u/ws";
    args.tempDir = "/state/s1/tmp";
    EXPECT_EQ(landlock::build_argv("/usr/bin/dsh-confine", args, {"--", "x"}),
              (Argv{"/usr/bin/dsh-confine", "landlock-exec", "--mode", "workspace-write", "--workspace-root",
                    "/home/u/ws", "--temp-dir", "/state/s1/tmp", "--", "--", "x"}));
}

TEST(LandlockRunnerArgv, PrivateTempBaseLayout) {
    landlock::RunnerArgs args;
    args.mode = ConfinedSandboxMode::WorkspaceWrite;
    args.workspaceRoot = "/home/u/ws";
    args.privateTempBase = "/tmp/dsh-confine-1000";
    EXPECT_EQ(landlock::build_argv("/r", args, {"true"}),
              (Argv{"/r", "landlock-exec", "--mode", "workspace-write", "--workspace-root", "/home/u/ws",
                    "--private-temp-base", "/tmp/dsh-confine-1000", "--", "true"}));
}

TEST(LandlockRunnerArgs, UseTheSessionTempDirWhenPresent) {
    const auto args = landlock::runner_args(policy_of(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp"), 1000);
    EXPECT_EQ(args.tempDir, "/state/s1/tmp");
    EXPECT_EQ(args.privateTempBase, std::nullopt);
    EXPECT_EQ(args.workspaceRoot, "/home/u/ws");
}

TEST(LandlockRunnerArgs, UseThePrivateTempBaseWithoutASession) {
    const auto args = landlock::runner_args(policy_of(ConfinedSandboxMode::WorkspaceWrite), 1000);
    EXPECT_EQ(args.tempDir, std::nullopt);
    EXPECT_EQ(args.privateTempBase, landlock::private_temp_base(1000));
    EXPECT_EQ(landlock::private_temp_base(1000), "/tmp/dsh-confine-1000");
}

TEST(LandlockRunnerArgs, ReadOnlyHasNoTempArea) {
    const auto args = landlock::runner_args(policy_of(ConfinedSandboxMode::ReadOnly, "/state/s1/tmp"), 1000);
    EXPECT_EQ(args.mode, ConfinedSandboxMode::ReadOnly);
    EXPECT_EQ(args.tempDir, std::nullopt);
    EXPECT_EQ(args.privateTempBase, std::nullopt);
}

TEST(LandlockWritableRoots, ReadOnlyIsTheSinks) {
    Argv expected = posix_shell_sinks();
    expected.insert(expected.end(), {"/dev/ptmx", "/dev/pts"});
    EXPECT_EQ(landlock::writable_roots(landlock::runner_args(policy_of(ConfinedSandboxMode::ReadOnly), 1000)), expected);
}

TEST(LandlockWritableRoots, WorkspaceWriteAddsTheRootAndTempArea) {
    Argv expected = {"/home/u/ws", "/state/s1/tmp"};
    expected.insert(expected.end(), posix_shell_sinks().begin(), posix_shell_sinks().end());
    expected.insert(expected.end(), {"/dev/ptmx", "/dev/pts", "/dev/shm"});
    EXPECT_EQ(landlock::writable_roots(
                  landlock::runner_args(policy_of(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp"), 1000)),
              expected);
}

TEST(LandlockWritableRoots, WithoutASessionNamesThePrivateTempBase) {
    const Argv roots =
        landlock::writable_roots(landlock::runner_args(policy_of(ConfinedSandboxMode::WorkspaceWrite), 1000));
    EXPECT_EQ(std::count(roots.begin(), roots.end(), "/tmp/dsh-confine-1000"), 1);
}

Verdict landlock_verdict(const std::string& text, int exit_code) {
    return classify(landlock::dialect({}), text, exit_code).verdict;
}

TEST(LandlockDialect, IsValid) { EXPECT_NO_THROW(validate_dialect(landlock::dialect({}))); }

TEST(LandlockDialect, PermissionDeniedIsDenial) {
    EXPECT_EQ(landlock_verdict("sh: 1: cannot create /etc/x: Permission denied\n", 2), Verdict::Denial);
}

TEST(LandlockDialect, CrossDeviceLinkIsDenial) {
    EXPECT_EQ(landlock_verdict("mv: cannot move 'a' to '/ws/b': Invalid cross-device link\n", 1), Verdict::Denial);
}

TEST(LandlockDialect, NamesOnlyWhatLandlockProduces) {
    const auto base = landlock::dialect({}).denialSignatures;
    for (const char* word : {"permission denied", "EACCES", "java.nio.file.AccessDeniedException", "invalid cross-device link",
                             "EXDEV"})
        EXPECT_TRUE(contains(base, word)) << word;
    for (const char* other : {"read-only file system", "EROFS", "EPERM", "operation not permitted"})
        EXPECT_FALSE(contains(base, other)) << other;
    // Without a plan: an allowed network's words, and the proxy's refusal (its own words).
    auto allowed = landlock::denial_signatures(SandboxPolicy{});
    allowed.insert(allowed.end(), {"dsh-confine: network: refused ", "not in allow_hosts"});
    EXPECT_EQ(allowed, base);
    SandboxPolicy policy;
    policy.network = NetworkPolicy::Deny;
    const auto denied = landlock::denial_signatures(policy);
    EXPECT_TRUE(contains(denied, "operation not permitted"));
    EXPECT_TRUE(contains(denied, "EPERM"));
}

TEST(LandlockDialect, ToolsOwnWordsAreDenials) {
    EXPECT_EQ(landlock_verdict("npm error code EACCES\n", 1), Verdict::Denial);
    EXPECT_EQ(landlock_verdict("Error: EXDEV: cross-device link not permitted, link '/a' -> '/b'\n", 1),
              Verdict::Denial);
    EXPECT_EQ(landlock_verdict("Exception in thread \"main\" java.nio.file.AccessDeniedException: /ws/x\n", 1),
              Verdict::Denial);
    EXPECT_EQ(landlock_verdict("EACCESSIBLE\n", 1), Verdict::Failure);
    EXPECT_EQ(landlock_verdict("Error: EROFS: read-only file system\n", 1), Verdict::Failure);  // not Landlock's
}

TEST(LandlockDialect, RunnerErrorOnExit125IsRunnerFailure) {
    const Classification result = classify(
        landlock::dialect({}), "dsh-confine: error: LANDLOCK: landlock_restrict_self: Operation not permitted\n", 125);
    EXPECT_EQ(result.verdict, Verdict::RunnerFailure);
    EXPECT_EQ(result.signature, "dsh-confine: error: LANDLOCK: ");
}

TEST(LandlockDialect, RunnerErrorOnExitOneIsNotRunnerFailure) {
    EXPECT_NE(landlock_verdict("dsh-confine: error: LANDLOCK: landlock_restrict_self: Operation not permitted\n", 1),
              Verdict::RunnerFailure);
}

TEST(LandlockDialect, OtherErrorCodesOfTheToolAreNotRunnerFailure) {
    EXPECT_NE(landlock_verdict("dsh-confine: error: USAGE: unknown option\n", 125), Verdict::RunnerFailure);
}

TEST(LandlockDialect, ExtraInformationalLineIsExcluded) {
    const std::string line = "dsh-confine: error: LANDLOCK: benign for this site\n";
    ASSERT_EQ(landlock_verdict(line, 125), Verdict::RunnerFailure);
    EXPECT_NE(classify(landlock::dialect({"dsh-confine: error: LANDLOCK: benign for this site"}), line, 125).verdict,
              Verdict::RunnerFailure);
}

// --- the dimensions beside the mode ---------------------------------------------------------

SandboxPolicy dimensions_policy(ConfinedSandboxMode mode, NetworkPolicy network = NetworkPolicy::Deny) {
    SandboxPolicy policy = policy_of(mode);
    if (mode == ConfinedSandboxMode::WorkspaceWrite) {
        policy.writableRoots = {"/home/u/extra"};
        policy.protectedPaths = {"/home/u/ws/.git/config", "/home/u/ws/.git/hooks"};
    }
    policy.unreadablePaths = {"/home/u/.ssh"};
    policy.network = network;
    return policy;
}

Argv dimensions_argv(ConfinedSandboxMode mode, NetworkPolicy network = NetworkPolicy::Deny) {
    bwrap::Layout layout = layout_of();
    if (mode == ConfinedSandboxMode::ReadOnly) layout.privateTemp = layout.tempDirId = "";
    else layout.writableRootIds = {"2049:33"};
    return bwrap::build_argv(layout, kCommand, dimensions_policy(mode, network));
}

TEST(BwrapDimensions, AnExtraRootIsStagedAndMovedLikeTheWorkspace) {
    const Argv argv = dimensions_argv(ConfinedSandboxMode::WorkspaceWrite);
    EXPECT_TRUE(has(runner_options(argv), {"--bind", "/home/u/extra", "/dev/.dsh-confine/1"}));
    EXPECT_TRUE(has(stage_options(argv), {"--root", "2049:33@/home/u/extra"}));
    EXPECT_EQ(bwrap::writable_roots(dimensions_policy(ConfinedSandboxMode::WorkspaceWrite), layout_of())[1], "/home/u/extra");
}

TEST(BwrapDimensions, ProtectedPathsAreTheStagesToBindInWorkspaceWriteOnly) {
    const Argv stage = stage_options(dimensions_argv(ConfinedSandboxMode::WorkspaceWrite));
    EXPECT_TRUE(has(stage, {"--protect", "/home/u/ws/.git/config", "--protect", "/home/u/ws/.git/hooks"}));
    const Argv read_only = stage_options(dimensions_argv(ConfinedSandboxMode::ReadOnly));
    EXPECT_EQ(std::count(read_only.begin(), read_only.end(), "--protect"), 0);
}

TEST(BwrapDimensions, UnreadablePathsAreHiddenByTheStageInEveryMode) {
    for (ConfinedSandboxMode mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite}) {
        const Argv argv = dimensions_argv(mode);
        EXPECT_TRUE(has(stage_options(argv), {"--hide", "/home/u/.ssh"}));
        // The stage mounts, so it remounts /proc itself (after its own uid map, unprivileged).
        EXPECT_FALSE(has(runner_options(argv), {"--remount-ro", "/proc"}));
    }
}

TEST(BwrapDimensions, ADeniedNetworkIsANewNamespaceAndTheStagesFilter) {
    const Argv denied = dimensions_argv(ConfinedSandboxMode::ReadOnly);
    EXPECT_TRUE(has(runner_options(denied), {"--unshare-net"}));
    EXPECT_TRUE(has(stage_options(denied), {"--network", "deny"}));
    const Argv allowed = dimensions_argv(ConfinedSandboxMode::ReadOnly, NetworkPolicy::Allow);
    EXPECT_FALSE(has(runner_options(allowed), {"--unshare-net"}));
    EXPECT_FALSE(has(stage_options(allowed), {"--network", "deny"}));
}

TEST(BwrapDimensions, TheStageScopesSignalsWhereTheKernelCanAndTheGapIsNamedWhereNot) {
    bwrap::Layout layout = layout_of();
    layout.landlockScope = true;
    EXPECT_TRUE(has(stage_options(bwrap::build_argv(layout, kCommand, dimensions_policy(ConfinedSandboxMode::ReadOnly))),
                    {"--landlock-scope"}));
    EXPECT_TRUE(bwrap::enforcement_gaps(layout).empty());
    layout.landlockScope = false;
    EXPECT_FALSE(has(stage_options(bwrap::build_argv(layout, kCommand, dimensions_policy(ConfinedSandboxMode::ReadOnly))),
                     {"--landlock-scope"}));
    const Argv gaps = bwrap::enforcement_gaps(layout);
    ASSERT_EQ(gaps.size(), 1u);
    EXPECT_TRUE(any_gap_starts_with(gaps, "signals:"));
    EXPECT_NE(gaps[0].find("kill(0, ...)"), std::string::npos) << gaps[0];
}

TEST(LandlockGaps, EveryPlanNamesTheIpcGap) {
    for (const int abi : {1, 5, 7})
        for (const auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite})
            EXPECT_TRUE(any_gap_starts_with(landlock::enforcement_gaps(abi, dimensions_policy(mode)), "IPC:")) << abi;
}

TEST(LandlockDimensions, TcpIsHandledFromAbiFourWhenTheNetworkIsDenied) {
    const std::uint64_t tcp = landlock::net_access::BindTcp | landlock::net_access::ConnectTcp;
    EXPECT_EQ(landlock::handled_net_access(3, true), 0u);
    EXPECT_EQ(landlock::handled_net_access(4, true), tcp);
    EXPECT_EQ(landlock::handled_net_access(7, true), tcp);
    EXPECT_EQ(landlock::handled_net_access(7, false), 0u);
}

TEST(LandlockDimensions, SignalsAreAlwaysScopedAndAbstractSocketsWhenDeniedFromAbiSix) {
    EXPECT_EQ(landlock::scoped(5, true), 0u);
    EXPECT_EQ(landlock::scoped(6, false), landlock::scope::Signal);
    EXPECT_EQ(landlock::scoped(6, true), landlock::scope::Signal | landlock::scope::AbstractUnixSocket);
}

TEST(LandlockDimensions, GapsNameTheSignalsBeforeAbiSixAndEveryPathItCannotKeep) {
    const Argv old_abi = landlock::enforcement_gaps(5, dimensions_policy(ConfinedSandboxMode::ReadOnly));
    EXPECT_TRUE(any_gap_starts_with(old_abi, "signals:"));
    const Argv gaps = landlock::enforcement_gaps(6, dimensions_policy(ConfinedSandboxMode::WorkspaceWrite));
    EXPECT_FALSE(any_gap_starts_with(gaps, "signals:"));
    const auto named = [&](const std::string& key, const std::string& path) {
        for (const auto& gap : gaps)
            if (gap.rfind(key + ":", 0) == 0 && gap.find(path) != std::string::npos) return true;
        return false;
    };
    EXPECT_TRUE(named("protected paths", "/home/u/ws/.git/config"));
    EXPECT_TRUE(named("protected paths", "/home/u/ws/.git/hooks"));
    EXPECT_TRUE(named("unreadable paths", "/home/u/.ssh"));
    // Nothing is writable in read-only, so nothing needs protecting there.
    EXPECT_FALSE(any_gap_starts_with(landlock::enforcement_gaps(6, dimensions_policy(ConfinedSandboxMode::ReadOnly)),
                                     "protected paths:"));
}

TEST(LandlockDimensions, TheUnreadablePathsGapSaysWhichCanBeMovedAsideInsideAWritableRoot) {
    SandboxPolicy policy = dimensions_policy(ConfinedSandboxMode::WorkspaceWrite);
    policy.workspaceRoot = "/home/u/ws";
    policy.unreadablePaths = {"/home/u/.ssh", "/home/u/extra/key", "/home/u/ws", "/home/u/ws/private/secret"};
    const auto gap_of = [](const Argv& gaps) {
        for (const auto& gap : gaps)
            if (gap.rfind("unreadable paths:", 0) == 0) return gap;
        return std::string();
    };
    const std::string gap = gap_of(landlock::enforcement_gaps(7, policy));
    EXPECT_NE(gap.find("/home/u/.ssh, /home/u/extra/key, /home/u/ws, /home/u/ws/private/secret remain readable"),
              std::string::npos)
        << gap;
    EXPECT_NE(gap.find(", and /home/u/extra/key, /home/u/ws/private/secret (inside a writable root) can be renamed or removed"),
              std::string::npos)
        << gap;
    // In read-only nothing can be moved.
    policy.mode = ConfinedSandboxMode::ReadOnly;
    EXPECT_EQ(gap_of(landlock::enforcement_gaps(7, policy)).find("renamed"), std::string::npos);
}

TEST(LandlockDimensions, RunnerArgvCarriesTheExtraRootsAndTheNetwork) {
    landlock::RunnerArgs args = landlock::runner_args(dimensions_policy(ConfinedSandboxMode::WorkspaceWrite), 1000);
    EXPECT_EQ(args.writableRoots, Argv{"/home/u/extra"});
    EXPECT_TRUE(args.denyNetwork);
    args.writableRoots = {"2049:33@/home/u/extra"};
    const Argv argv = landlock::build_argv("/r", args, {"true"});
    EXPECT_TRUE(has(argv, {"--writable-root", "2049:33@/home/u/extra"}));
    EXPECT_TRUE(has(argv, {"--network", "deny"}));
    const Argv roots = landlock::writable_roots(args);
    EXPECT_NE(std::find(roots.begin(), roots.end(), "/home/u/extra"), roots.end());
    // A read-only call is given no extra root.
    EXPECT_TRUE(landlock::runner_args(dimensions_policy(ConfinedSandboxMode::ReadOnly), 1000).writableRoots.empty());
}

}  // namespace
}  // namespace dsh
