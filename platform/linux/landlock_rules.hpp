// The Landlock ruleset and dialect as data: which access rights each ABI can handle, which
// paths get which rights for a policy, and which promised effects an ABI cannot govern.
// Pure code, compiled and unit-tested on every system; landlock.cpp applies it.
//
// What Landlock does not govern, on any ABI (so the backend reports `partial`):
//   - metadata: chmod, chown/chgrp, utimes and extended attributes of files the caller owns
//     (Landlock has no hook for setattr or setxattr);
//   - ioctls on regular files and directories (ABI 5 governs device files only): the runner's
//     seccomp filter refuses the known metadata-changing ones (tty_guard.hpp), not all;
//   - SysV IPC and POSIX message queues: the host's IPC namespace is shared (a named gap);
//   - IPC with host daemons through sockets, network, process visibility (the runner's filter
//     governs sockets with the network denied);
//   - protected paths and git's protection (a granted root is granted whole) and unreadable paths
//     (the host is readable), which inside a writable root can also be renamed or removed: named
//     with their paths in the policy's gaps.
// By ABI: truncate(2) of existing files before ABI 3; ioctls on device files before ABI 5.
// Before ABI 2 every rename or link across directories is refused (EXDEV), even inside the
// workspace: an over-block, not a gap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../lib/types.hpp"

namespace dsh::landlock {

// Access-right bits, as the kernel numbers them.
namespace access {
inline constexpr std::uint64_t Execute = 1ULL << 0;
inline constexpr std::uint64_t WriteFile = 1ULL << 1;
inline constexpr std::uint64_t ReadFile = 1ULL << 2;
inline constexpr std::uint64_t ReadDir = 1ULL << 3;
inline constexpr std::uint64_t RemoveDir = 1ULL << 4;
inline constexpr std::uint64_t RemoveFile = 1ULL << 5;
inline constexpr std::uint64_t MakeChar = 1ULL << 6;
inline constexpr std::uint64_t MakeDir = 1ULL << 7;
inline constexpr std::uint64_t MakeReg = 1ULL << 8;
inline constexpr std::uint64_t MakeSock = 1ULL << 9;
inline constexpr std::uint64_t MakeFifo = 1ULL << 10;
inline constexpr std::uint64_t MakeBlock = 1ULL << 11;
inline constexpr std::uint64_t MakeSym = 1ULL << 12;
inline constexpr std::uint64_t Refer = 1ULL << 13;     // ABI 2
inline constexpr std::uint64_t Truncate = 1ULL << 14;  // ABI 3
inline constexpr std::uint64_t IoctlDev = 1ULL << 15;  // ABI 5
// The rights a rule on a file (not a directory) may carry.
inline constexpr std::uint64_t FileRights = Execute | WriteFile | ReadFile | Truncate | IoctlDev;
}  // namespace access

// Every filesystem right the given ABI knows.
std::uint64_t handled_access(int abi);

struct Grant {
    std::string path;
    std::uint64_t access;  // already masked to the ABI; file rules carry only file rights
};

// The rules for a policy: the whole host readable and executable; the shell sinks readable
// and writable; in workspace-write the root, every writable root and `temp_dir` with every right.
std::vector<Grant> grants(const SandboxPolicy& policy, const std::optional<std::string>& temp_dir,
                          const std::vector<std::string>& sinks, int abi);

// The promised effects this ABI cannot govern, named; empty means full enforcement.
std::vector<std::string> enforcement_gaps(int abi);
// The same for one policy: the ABI's gaps, then the policy's own (protected and unreadable
// paths, which Landlock cannot take back from a granted tree).
std::vector<std::string> enforcement_gaps(int abi, const SandboxPolicy& policy);
// What the `hosts` network leaves open under Landlock (part of the above for such a policy).
std::vector<std::string> hosts_network_gaps();

// Where a call's private temp area is made when the call has no session: one directory per
// call, inside this per-user base, which is what writableRoots names.
std::string private_temp_base(unsigned uid);

struct RunnerArgs {
    ConfinedSandboxMode mode = ConfinedSandboxMode::ReadOnly;
    std::string workspaceRoot;
    std::optional<std::string> workspaceRootId;  // "DEV:INO" the root must still have
    std::optional<std::string> tempDir;          // a session's temp area: used as is
    std::optional<std::string> tempDirId;        // "DEV:INO" it must still have
    std::optional<std::string> privateTempBase;  // make a per-call directory in here
    int statusFd = -1;  // proof of start: 'S' just before execve, 'F' when it failed
    std::optional<int> maxAbi;  // use at most this ABI, even where the kernel has a newer one
    std::vector<int> keepFds;   // descriptors above 2 passed on; every other one is closed
    std::vector<std::string> writableRoots;  // "DEV:INO@PATH" (or a bare PATH): writable beside the workspace
    bool denyNetwork = false;
    // The network through the allow-list proxy (not empty: the `hosts` state): the runner starts
    // the proxy on a loopback port the kernel picks, and the ruleset lets the command connect to
    // that TCP port alone (ABI 4).
    SharedList allowHosts;
    int refusalsFd = -1;  // with allowHosts, under `run`: the socket the proxy reports refusals on (proxy_companion.hpp)
    // With allowHosts: this process executes the command itself once prepared (exec_confined), so
    // the proxy may keep this process's image (proxy::ProxyStart::CallersImage).
    bool execsHere = false;
};

// The first ABI with TCP rules (the `hosts` network needs them: the proxy's port alone).
inline constexpr int kTcpAbi = 4;

// Network and scope rights, as the kernel numbers them.
namespace net_access {
inline constexpr std::uint64_t BindTcp = 1ULL << 0;     // ABI 4
inline constexpr std::uint64_t ConnectTcp = 1ULL << 1;  // ABI 4
}  // namespace net_access
namespace scope {
inline constexpr std::uint64_t AbstractUnixSocket = 1ULL << 0;  // ABI 6
inline constexpr std::uint64_t Signal = 1ULL << 1;              // ABI 6
}  // namespace scope

// The first ABI with scopes (signals, abstract Unix sockets).
inline constexpr int kScopeAbi = 6;

// What a ruleset handles beyond the file system for this ABI: TCP when the network is denied
// (ABI 4), signals always and abstract Unix sockets when the network is denied (ABI 6).
std::uint64_t handled_net_access(int abi, bool deny_network);
std::uint64_t scoped(int abi, bool deny_network);

// The ABI a ruleset is built for: the kernel's, capped by `max_abi`.
int effective_abi(int kernel_abi, const std::optional<int>& max_abi);

// `<runner> landlock-exec --mode M --workspace-root R [--workspace-root-id ID]
//  [--temp-dir D [--temp-dir-id ID] | --private-temp-base B] [--keep-fd N]... -- argv`
std::vector<std::string> build_argv(const std::string& runner, const RunnerArgs& args,
                                    const std::vector<std::string>& argv);
RunnerArgs runner_args(const SandboxPolicy& policy, unsigned uid, const std::optional<int>& max_abi = std::nullopt);
std::vector<std::string> writable_roots(const RunnerArgs& args);

// The denial text of a call with `policy`: EACCES (a denied open, create, truncate, TCP bind or
// connect) and EXDEV (a link or rename Landlock refuses to reparent) always; EPERM with the
// network denied (the runner's filter refuses sockets). The words of each: lib/denial_words.hpp.
std::vector<std::string> denial_signatures(const SandboxPolicy& policy);

// EACCES and EXDEV as every call has them; the runner's own
// failures carry `dsh-confine: error: LANDLOCK:` and exit 125 before the command starts.
Dialect dialect(const std::vector<std::string>& extra_informational_lines);

}  // namespace dsh::landlock
