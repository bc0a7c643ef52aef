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

Argv bwrap_argv(ConfinedSandboxMode mode, std::optional<std::string> temp = std::nullopt) {
    return bwrap::build_argv({"/usr/bin/bwrap", "/home/u/ws/sub"}, kCommand, policy_of(mode, std::move(temp)));
}

// bwrap's own options: everything between the runner and the "--" before the caller's argv.
Argv runner_options(const Argv& argv) {
    EXPECT_GE(argv.size(), kCommand.size() + 2);
    return Argv(argv.begin() + 1, argv.end() - static_cast<std::ptrdiff_t>(kCommand.size()) - 1);
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
}

TEST(BwrapArgv, WorkspaceWriteBindsTheRootReadWrite) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite)),
                    {"--bind", "/home/u/ws", "/home/u/ws"}));
}

TEST(BwrapArgv, WorkspaceWriteMountsTmpfsBeforeTheWorkspaceBind) {
    // A workspace under /tmp would be hidden by a tmpfs mounted after its bind.
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite));
    const auto tmpfs = find_sequence(options, {"--tmpfs", "/tmp"});
    const auto bind = find_sequence(options, {"--bind", "/home/u/ws", "/home/u/ws"});
    ASSERT_GE(tmpfs, 0);
    ASSERT_GE(bind, 0);
    EXPECT_LT(tmpfs, bind);
}

TEST(BwrapArgv, SessionTempDirIsBoundOnTmpInsteadOfATmpfs) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp"));
    EXPECT_TRUE(has(options, {"--bind", "/state/s1/tmp", "/tmp"}));
    EXPECT_EQ(std::count(options.begin(), options.end(), "--tmpfs"), 0);
}

TEST(BwrapArgv, SessionTempBindComesBeforeTheWorkspaceBind) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp"));
    EXPECT_LT(find_sequence(options, {"--bind", "/state/s1/tmp", "/tmp"}),
              find_sequence(options, {"--bind", "/home/u/ws", "/home/u/ws"}));
}

TEST(BwrapArgv, ReadOnlyIgnoresTheSessionTempDir) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly, "/state/s1/tmp"));
    EXPECT_EQ(std::count(options.begin(), options.end(), "/state/s1/tmp"), 0);
}

TEST(BwrapArgv, WorkspaceWriteSetsTmpdir) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite)), {"--setenv", "TMPDIR", "/tmp"}));
}

TEST(BwrapArgv, EndsWithTheSeparatorAndTheCallersArgvVerbatim) {
    for (auto mode : {ConfinedSandboxMode::ReadOnly, ConfinedSandboxMode::WorkspaceWrite}) {
        const Argv argv = bwrap_argv(mode);
        ASSERT_GT(argv.size(), kCommand.size());
        EXPECT_EQ(argv[argv.size() - kCommand.size() - 1], "--");
        EXPECT_EQ(Argv(argv.end() - static_cast<std::ptrdiff_t>(kCommand.size()), argv.end()), kCommand);
    }
}

TEST(BwrapArgv, SeparatorIsTheFirstDoubleDash) {
    // Nothing of bwrap's own follows the separator, so the caller's "--" cannot be mistaken for it.
    const Argv argv = bwrap_argv(ConfinedSandboxMode::WorkspaceWrite);
    const auto first = std::find(argv.begin(), argv.end(), "--") - argv.begin();
    EXPECT_EQ(static_cast<std::size_t>(first), argv.size() - kCommand.size() - 1);
}

TEST(BwrapArgv, ChangesToTheLayoutCwd) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--chdir", "/home/u/ws/sub"}));
}

TEST(BwrapArgv, DropsEveryCapability) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--cap-drop", "ALL"}));
}

TEST(BwrapArgv, StartsANewSession) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--new-session"}));
}

TEST(BwrapArgv, UnsharesThePidNamespace) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--unshare-pid"}));
}

TEST(BwrapArgv, DiesWithItsParent) {
    EXPECT_TRUE(has(runner_options(bwrap_argv(ConfinedSandboxMode::ReadOnly)), {"--die-with-parent"}));
}

TEST(BwrapArgv, RemountsProcReadOnly) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite));
    EXPECT_TRUE(has(options, {"--remount-ro", "/proc"}));
    EXPECT_LT(find_sequence(options, {"--proc", "/proc"}), find_sequence(options, {"--remount-ro", "/proc"}));
}

TEST(BwrapArgv, RemountsDevReadOnly) {
    const Argv options = runner_options(bwrap_argv(ConfinedSandboxMode::WorkspaceWrite));
    EXPECT_TRUE(has(options, {"--remount-ro", "/dev"}));
    EXPECT_LT(find_sequence(options, {"--dev", "/dev"}), find_sequence(options, {"--remount-ro", "/dev"}));
}

TEST(BwrapWritableRoots, ReadOnlyIsTheSinksAndDevPts) {
    Argv expected = posix_shell_sinks();
    expected.push_back("/dev/pts");
    EXPECT_EQ(bwrap::writable_roots(policy_of(ConfinedSandboxMode::ReadOnly)), expected);
}

TEST(BwrapWritableRoots, WorkspaceWriteAddsTheRootAndTmp) {
    Argv expected = {"/home/u/ws", "/tmp"};
    expected.insert(expected.end(), posix_shell_sinks().begin(), posix_shell_sinks().end());
    expected.push_back("/dev/pts");
    EXPECT_EQ(bwrap::writable_roots(policy_of(ConfinedSandboxMode::WorkspaceWrite)), expected);
}

TEST(BwrapWritableRoots, SessionTempDirIsSeenAsTmp) {
    const Argv roots = bwrap::writable_roots(policy_of(ConfinedSandboxMode::WorkspaceWrite, "/state/s1/tmp"));
    EXPECT_EQ(std::count(roots.begin(), roots.end(), "/tmp"), 1);
    EXPECT_EQ(std::count(roots.begin(), roots.end(), "/state/s1/tmp"), 0);
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

TEST(BwrapDialect, ReadOnlyFileSystemIsDenial) {
    const Classification result =
        classify(bwrap::dialect({}), "touch: cannot touch '/etc/x': Read-only file system\n", 1);
    EXPECT_EQ(result.verdict, Verdict::Denial);
    EXPECT_EQ(result.signature, "read-only file system");
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

bool is_sink(const std::string& path) { return std::find(kSinks.begin(), kSinks.end(), path) != kSinks.end(); }

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
    EXPECT_EQ(paths, (Argv{"/", "/dev/null", "/dev/zero"}));
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
            if (is_sink(grant.path)) {
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
    ASSERT_EQ(grants.size(), 5u);
    EXPECT_EQ(grants[3].path, "/home/u/ws");
    EXPECT_EQ(grants[3].access, landlock::handled_access(7));
    EXPECT_EQ(grants[4].path, "/state/tmp");
    EXPECT_EQ(grants[4].access, landlock::handled_access(7));
}

TEST(LandlockGrants, WorkspaceWriteWithoutTempGrantsOnlyTheRoot) {
    const auto grants = grants_for(ConfinedSandboxMode::WorkspaceWrite, 7);
    ASSERT_EQ(grants.size(), 4u);
    EXPECT_EQ(grants.back().path, "/home/u/ws");
}

bool any_gap_starts_with(const Argv& gaps, const std::string& prefix) {
    return std::any_of(gaps.begin(), gaps.end(), [&](const std::string& gap) { return gap.rfind(prefix, 0) == 0; });
}

TEST(LandlockGaps, AbiSevenNamesTheMetadataGaps) {
    const Argv gaps = landlock::enforcement_gaps(7);
    EXPECT_TRUE(any_gap_starts_with(gaps, "chmod:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "chown:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "utimes:"));
    EXPECT_TRUE(any_gap_starts_with(gaps, "xattrs:"));
    EXPECT_EQ(gaps.size(), 4u);
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
    EXPECT_EQ(landlock::writable_roots(landlock::runner_args(policy_of(ConfinedSandboxMode::ReadOnly), 1000)),
              posix_shell_sinks());
}

TEST(LandlockWritableRoots, WorkspaceWriteAddsTheRootAndTempArea) {
    Argv expected = {"/home/u/ws", "/state/s1/tmp"};
    expected.insert(expected.end(), posix_shell_sinks().begin(), posix_shell_sinks().end());
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

}  // namespace
}  // namespace dsh
