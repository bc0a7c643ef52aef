// Policy resolution: the one place that decides mode and workspace root for a call, with
// the contract's precedence, so no subcommand repeats it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config.hpp"
#include "types.hpp"

namespace dsh {

struct SandboxPolicyRequest {
    std::optional<SandboxMode> mode;            // --mode: an approved explicit mode
    std::optional<std::string> workspaceRoot;   // --workspace-root: agentless calls
    std::optional<std::string> sessionId;
    std::optional<std::vector<std::string>> writableRoots = std::nullopt;  // --writable-root (absolute)
    std::optional<std::vector<std::string>> unreadablePaths = std::nullopt;  // --deny-read (absolute)
    std::optional<NetworkPolicy> network = std::nullopt;                    // --network
    std::optional<GitMode> git = std::nullopt;                              // --git
    std::vector<std::string> allowHosts = {};                               // --allow-host (as given)
    // $HOME, for `~/` in the config's paths; absent: such a path is an error.
    std::optional<std::string> home = std::nullopt;
};

// What a session contributes: its immutable cwd (and extra roots), and the last mode and
// network it logged.
struct SessionPolicyView {
    std::string cwd;
    std::optional<SandboxMode> lastMode;
    std::optional<std::string> cwdId = std::nullopt;  // as recorded and checked
    std::vector<std::string> writableRoots = {};      // recorded at `session start`
    std::optional<NetworkPolicy> lastNetwork = std::nullopt;
    std::vector<std::string> lastAllowHosts = {};  // with `hosts`
};

// mode: request > session's last event > config default > read-only.
// root: session cwd > request root (an error when it contradicts the session) > config >
// the process's cwd. The root is canonicalized with filesystem semantics.
// writable roots: request > the session's > config > none; each canonical, existing, a directory.
// unreadable paths: request > config > none; canonical where they exist.
// protected paths: config > [".git/hooks", ".git/config"]. network: request > the session's last
// network event > config > allow; `hosts` comes with its patterns from the same source
// (--allow-host is the request's; --network hosts takes the session's or the config's list),
// and --allow-host with --network allow or deny is a conflict (USAGE). git: request > config >
// protect.
SandboxExecutionPolicy resolve_policy(const SandboxPolicyRequest& request,
                                      const std::optional<SessionPolicyView>& session,
                                      const Config& config, const std::string& process_cwd);

// Whether PATH is absolute by the host's rules: on POSIX systems a leading '/'; on Windows a drive
// letter followed by a separator (`C:\src`, `C:/src`) or a UNC path (`\\server\share`, `\\?\C:\src`).
// `/src` and `C:src` are not absolute on Windows: they depend on the current drive or directory.
bool is_absolute_path(std::string_view path);

// realpath semantics: symlinks resolved before `..`, so `link/..` is the physical parent of
// the link's target. The path must be absolute, exist, and be a directory. `what` names the
// path's origin in messages.
std::string canonical_directory(const std::string& path, const std::string& what);

// The paths (absolute, canonical, POSIX: '/'-separated whatever the host, as Seatbelt's are)
// that lie inside `root` or are it.
std::vector<std::string> paths_within(const std::vector<std::string>& paths, const std::string& root);

}  // namespace dsh
