// The vocabulary of dsh-confine, with the seed's names (seed/process-sandbox.md): modes,
// enforcement, per-call policies, runner-failure rules and the confined argv a backend returns.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsh {

// A list of strings made once and then only passed on: a call's allow-list goes from the resolved
// policy to the backend's policy, the plan, the runner's arguments and the proxy. A copy shares the
// one vector, which nobody changes once made (a hundred patterns copied at each hand were a
// measurable part of the exec path; docs/performance.md).
class SharedList {
public:
    using value_type = std::string;
    using const_iterator = std::vector<std::string>::const_iterator;
    using iterator = const_iterator;
    using size_type = std::size_t;

    SharedList() = default;
    SharedList(std::vector<std::string> items)  // implicit: a vector is a list
        : items_(items.empty() ? nullptr : std::make_shared<const std::vector<std::string>>(std::move(items))) {}
    SharedList(std::initializer_list<std::string> items) : SharedList(std::vector<std::string>(items)) {}

    const std::vector<std::string>& get() const {
        static const std::vector<std::string> kEmpty;
        return items_ ? *items_ : kEmpty;
    }
    operator const std::vector<std::string>&() const { return get(); }
    const_iterator begin() const { return get().begin(); }
    const_iterator end() const { return get().end(); }
    std::size_t size() const { return items_ ? items_->size() : 0; }
    bool empty() const { return items_ == nullptr; }

    friend bool operator==(const SharedList& a, const SharedList& b) { return a.get() == b.get(); }
    friend bool operator==(const SharedList& a, const std::vector<std::string>& b) { return a.get() == b; }

private:
    std::shared_ptr<const std::vector<std::string>> items_;  // null when empty
};

// File-effect policy. Network and process visibility are outside this vocabulary.
enum class SandboxMode { ReadOnly, WorkspaceWrite, DangerFullAccess };

// The modes a SandboxPolicy can carry: only these reach a backend.
enum class ConfinedSandboxMode { ReadOnly, WorkspaceWrite };

enum class SandboxEnforcement { Full, Partial };

// The network, a dimension of the policy beside the mode (the seed keeps it out of SandboxMode):
// `deny` keeps the command from IP traffic and from host daemons' sockets; `hosts` lets it reach
// the hosts an allow-list names (`allowHosts`), through a proxy outside the sandbox, and nothing
// else.
enum class NetworkPolicy { Allow, Deny, Hosts };

std::string_view to_string(SandboxMode mode);
std::string_view to_string(ConfinedSandboxMode mode);
std::string_view to_string(SandboxEnforcement enforcement);
std::string_view to_string(NetworkPolicy network);
std::optional<NetworkPolicy> parse_network_policy(std::string_view text);

// What the call may do to git's repositories inside the writable roots (lib/git_protection.hpp).
enum class GitMode { Protect, ReadOnly, Writable };
std::string_view to_string(GitMode mode);
std::optional<GitMode> parse_git_mode(std::string_view text);

// The git protection planned for one call (lib/git_protection.hpp finds it): absolute paths.
struct GitPlan {
    GitMode mode = GitMode::Protect;
    std::vector<std::string> repositories = {};  // the git directories found inside the writable roots
    std::vector<std::string> readOnly = {};      // kept read-only (also in protectedPaths)
    std::vector<std::string> madeDirectories = {};  // read-only, made empty first where missing (a .git/hooks)
    std::vector<std::string> madeFiles = {};        // the same for files (a config.worktree git would read)
    std::vector<std::string> keptInPlace = {};   // writable, but not removable, renamable or replaceable
    std::vector<std::string> checkedAtEnd = {};  // git directories whose validity is restored when the call ends
    std::vector<std::string> notes = {};         // what the protection does not cover here
    bool bounded = false;  // more repositories than one plan looks at: those beyond are not protected (a gap)

    bool operator==(const GitPlan&) const = default;
};
std::optional<SandboxMode> parse_sandbox_mode(std::string_view text);
std::optional<ConfinedSandboxMode> confined(SandboxMode mode);

// The complete policy resolved for one call; the root is carried even when the mode
// does not use it, so a caller resolves once before choosing the enforcement path.
struct SandboxExecutionPolicy {
    SandboxMode mode = SandboxMode::ReadOnly;
    std::string workspaceRoot;  // absolute and canonical
    std::optional<std::string> sessionId;
    // The workspace root's identity ("DEV:INO") where resolution has it: a session's, recorded at
    // `session start` and checked at this call. Not part of the printed policy.
    std::optional<std::string> workspaceRootId = std::nullopt;
    // Directories writable beside the workspace in workspace-write (absolute, canonical).
    std::vector<std::string> writableRoots = {};
    // Paths, relative to each writable root, kept read-only where they exist.
    std::vector<std::string> protectedPaths = {".git/hooks", ".git/config"};
    // Paths the command must not read (absolute, canonical where they exist).
    std::vector<std::string> unreadablePaths = {};
    NetworkPolicy network = NetworkPolicy::Allow;
    SharedList allowHosts = {};  // with `hosts`: the patterns, canonical (lib/host_pattern.hpp)
    GitMode git = GitMode::Protect;

    bool operator==(const SandboxExecutionPolicy&) const = default;
};

// What one confined execution may touch, carried per call.
struct SandboxPolicy {
    ConfinedSandboxMode mode = ConfinedSandboxMode::ReadOnly;
    std::string workspaceRoot;
    std::optional<std::string> sessionId;
    // Where the session's private temp area lives, when the call has a session. Derived by the
    // caller from the state directory, so backends need not know where state is kept.
    std::optional<std::string> sessionTempDir;
    // The workspace root's identity ("DEV:INO") as resolution found it (a session's: as recorded
    // at `session start`). Backends hand it to their runners, which check it again where they
    // use the root, so a directory swapped in since is refused rather than confined to.
    std::optional<std::string> workspaceRootId = std::nullopt;
    // Descriptors above 2 passed on to the command (--keep-fd); every other one is closed.
    std::vector<int> keepFds = {};
    // Writable beside the workspace (workspace-write only): absolute, canonical.
    std::vector<std::string> writableRoots = {};
    // Absolute paths inside the writable roots, existing when the call was planned, that stay
    // read-only (protected_paths, found at each root's top level; confine_call finds them).
    std::vector<std::string> protectedPaths = {};
    // Absolute, canonical, existing paths the command must not read.
    std::vector<std::string> unreadablePaths = {};
    NetworkPolicy network = NetworkPolicy::Allow;
    SharedList allowHosts = {};  // with `hosts`: the patterns, canonical
    // Git's repositories inside the writable roots (workspace-write; its mode in read-only too).
    GitPlan git = {};

    bool operator==(const SandboxPolicy&) const = default;
};

// Evidence that a runner failed before executing the command.
struct RunnerFailureRule {
    std::optional<std::vector<int>> allowedExitCodes;  // absent: any nonzero exit
    std::vector<std::string> fatalSignatures;          // non-empty, each non-empty
    std::vector<std::string> informationalLines;       // removed by whole-line equality first

    bool operator==(const RunnerFailureRule&) const = default;
};

// A backend's classification dialect: the rules that come with its argv.
struct Dialect {
    std::vector<std::string> denialSignatures;
    std::vector<RunnerFailureRule> runnerFailureRules;

    bool operator==(const Dialect&) const = default;
};

// What a backend's confine() gives: the argv to spawn instead of the caller's, and the facts.
struct ConfinedArgv {
    std::vector<std::string> argv;
    std::string backend;
    SandboxEnforcement enforcement = SandboxEnforcement::Full;
    std::vector<std::string> enforcementGaps;  // empty exactly when enforcement is Full
    std::vector<std::string> denialSignatures;
    std::vector<RunnerFailureRule> runnerFailureRules;
    std::vector<std::string> writableRoots;  // every path the command can write, as it sees it
    std::vector<int> passedFds = {0, 1, 2};  // the descriptors the command inherits; all others are closed
    std::vector<std::string> protectedPaths = {};   // kept read-only by this backend (or named in a gap)
    std::vector<std::string> unreadablePaths = {};  // hidden by this backend (or named in a gap)
    NetworkPolicy network = NetworkPolicy::Allow;
    SharedList allowHosts = {};  // with `hosts`: the patterns the proxy allows
    GitPlan git = {};  // as planned; a backend that cannot keep it names that in enforcementGaps

    bool operator==(const ConfinedArgv&) const = default;
};

}  // namespace dsh

namespace dsh {

// The device sinks a POSIX shell and its tools write to; both Linux backends (and Seatbelt)
// keep exactly these writable in every confined mode, and list them in writableRoots.
inline const std::vector<std::string>& posix_shell_sinks() {
    static const std::vector<std::string> sinks = {"/dev/full", "/dev/null", "/dev/random",
                                                   "/dev/tty",  "/dev/urandom", "/dev/zero"};
    return sinks;
}

}  // namespace dsh
