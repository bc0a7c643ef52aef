#include "landlock_rules.hpp"

#include "../../lib/denial_words.hpp"
#include "../../lib/policy.hpp"

namespace dsh::landlock {

std::uint64_t handled_access(int abi) {
    if (abi < 1) return 0;
    std::uint64_t rights = (access::MakeSym << 1) - 1;  // ABI 1: bits 0..12
    if (abi >= 2) rights |= access::Refer;
    if (abi >= 3) rights |= access::Truncate;
    if (abi >= 5) rights |= access::IoctlDev;
    return rights;
}

std::vector<Grant> grants(const SandboxPolicy& policy, const std::optional<std::string>& temp_dir,
                          const std::vector<std::string>& sinks, int abi) {
    const std::uint64_t handled = handled_access(abi);
    std::vector<Grant> out;
    out.push_back({"/", (access::ReadFile | access::ReadDir | access::Execute) & handled});
    for (const auto& sink : sinks)
        out.push_back({sink, (access::ReadFile | access::WriteFile | access::Truncate | access::IoctlDev) & handled});
    // New terminals (script, tmux, expect, pty.fork): the multiplexer and the pty slaves. The
    // caller's other terminals live in the same /dev/pts: a named gap (enforcement_gaps).
    out.push_back({"/dev/ptmx", (access::ReadFile | access::WriteFile | access::IoctlDev) & handled});
    out.push_back({"/dev/pts", (access::ReadFile | access::WriteFile | access::IoctlDev | access::ReadDir) & handled});
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        // POSIX shared memory and semaphores (Python multiprocessing, Chromium): the host's own
        // /dev/shm, shared with the caller's other processes, a named gap.
        out.push_back({"/dev/shm", handled});
        out.push_back({policy.workspaceRoot, handled});
        for (const auto& root : policy.writableRoots) out.push_back({root, handled});
        if (temp_dir) out.push_back({*temp_dir, handled});
    }
    return out;
}

std::vector<std::string> enforcement_gaps(int abi) {
    std::vector<std::string> gaps = {
        "chmod: file modes of files the caller owns can be changed (Landlock has no setattr hook)",
        "chown: group and owner changes the caller may make are not governed",
        "utimes: access and modification times of files the caller owns can be changed",
        "xattrs: extended attributes of files the caller owns can be set and removed",
        std::string("file ioctls: ioctls on regular files and directories are not governed by Landlock; the runner's ") +
            "filter refuses those known to change metadata (inode flags, FS_IOC_FSSETXATTR, the inode version, " +
            "an encryption policy, btrfs subvolumes and snapshots), not every file system's own",
        std::string("IPC: Landlock cannot govern SysV IPC or POSIX message queues, which are the host's: the ") +
            "command can use and remove the caller's SysV message queues, semaphores and shared memory and remove " +
            "its POSIX message queues, and what it makes persists after it ends",
        std::string("CPU affinity: the command can pin a process of the same user outside the sandbox to some CPUs ") +
            "(sched_setaffinity(2) has no Landlock scope; the runner's filter refuses the other scheduling changes)",
    };
    if (abi < 3) gaps.push_back("truncate: truncate(2) of existing files is not governed before Landlock ABI 3");
    if (abi < 5) gaps.push_back("device ioctls: ioctls on device files are not governed before Landlock ABI 5");
    return gaps;
}

std::vector<std::string> enforcement_gaps(int abi, const SandboxPolicy& policy) {
    std::vector<std::string> gaps = enforcement_gaps(abi);
    if (abi < kScopeAbi)
        gaps.push_back("signals: the command can signal the caller's other processes (Landlock scopes them from ABI 6)");
    gaps.push_back("terminals: the caller's other terminals under /dev/pts can be opened and written to (output only: "
                   "the runner's filter refuses TIOCSTI)");
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite)
        gaps.push_back("/dev/shm: the host's /dev/shm is shared: the command can create, change and remove files there, "
                       "the caller's other processes' included");
    const auto join = [](const std::vector<std::string>& paths) {
        std::string out;
        for (const auto& path : paths) out += (out.empty() ? "" : ", ") + path;
        return out;
    };
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite && !policy.protectedPaths.empty())
        gaps.push_back("protected paths: Landlock cannot take write access back inside a granted root, so " +
                       join(policy.protectedPaths) + " remain writable");
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite && policy.git.mode != GitMode::Writable &&
        !policy.git.repositories.empty())
        gaps.push_back("git: Landlock can neither keep a repository's files in place nor restore it when the call ends, so "
                       "the command can plant what a git you run later in " + join(policy.git.repositories) +
                       " (or in the directory above an invalid one) executes");
    if (!policy.unreadablePaths.empty()) {
        std::string gap = "unreadable paths: Landlock cannot take read access back from the readable host, so " +
                          join(policy.unreadablePaths) + " remain readable";
        // Nor can it keep them where they are: inside a granted root they can be renamed or removed,
        // as bubblewrap's mount points cannot.
        // A root itself is not movable: its parent is not granted.
        const auto below = [](const std::string& path, const std::string& root) {
            return path != root && !paths_within({path}, root).empty();
        };
        std::vector<std::string> movable;
        if (policy.mode == ConfinedSandboxMode::WorkspaceWrite)
            for (const auto& path : policy.unreadablePaths) {
                bool inside = below(path, policy.workspaceRoot);
                for (const auto& root : policy.writableRoots) inside = inside || below(path, root);
                if (inside) movable.push_back(path);
            }
        if (!movable.empty()) gap += ", and " + join(movable) + " (inside a writable root) can be renamed or removed";
        gaps.push_back(std::move(gap));
    }
    if (policy.network == NetworkPolicy::Hosts) {
        const auto network = hosts_network_gaps();
        gaps.insert(gaps.end(), network.begin(), network.end());
    }
    return gaps;
}

std::vector<std::string> hosts_network_gaps() {
    return {"network: Landlock's TCP rules go by port alone: the command can connect to the proxy's port (a loopback "
            "port picked when the call starts) on any address it can route to, not only the proxy's",
            "network: a process the command leaves running keeps that right after the call, when the port is "
            "no longer the proxy's and anything may listen on it (`run` ends the command's whole tree; the "
            "exec path and a printed plan do not)",
            "network: the proxy listens on the host's loopback: any local process can use it, within the same "
            "allow-list, while the call runs"};
}

std::uint64_t handled_net_access(int abi, bool deny_network) {
    return abi >= 4 && deny_network ? (net_access::BindTcp | net_access::ConnectTcp) : 0;
}

std::uint64_t scoped(int abi, bool deny_network) {
    if (abi < kScopeAbi) return 0;
    return scope::Signal | (deny_network ? scope::AbstractUnixSocket : 0);
}

std::string private_temp_base(unsigned uid) { return "/tmp/dsh-confine-" + std::to_string(uid); }

int effective_abi(int kernel_abi, const std::optional<int>& max_abi) {
    return max_abi && *max_abi < kernel_abi ? *max_abi : kernel_abi;
}

RunnerArgs runner_args(const SandboxPolicy& policy, unsigned uid, const std::optional<int>& max_abi) {
    RunnerArgs args;
    args.maxAbi = max_abi;
    args.mode = policy.mode;
    args.workspaceRoot = policy.workspaceRoot;
    args.keepFds = policy.keepFds;
    args.denyNetwork = policy.network == NetworkPolicy::Deny;
    if (policy.network == NetworkPolicy::Hosts) args.allowHosts = policy.allowHosts;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) args.writableRoots = policy.writableRoots;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) args.workspaceRootId = policy.workspaceRootId;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        if (policy.sessionTempDir) args.tempDir = policy.sessionTempDir;
        else args.privateTempBase = private_temp_base(uid);
    }
    return args;
}

std::vector<std::string> build_argv(const std::string& runner, const RunnerArgs& args,
                                    const std::vector<std::string>& argv) {
    std::vector<std::string> out;
    // Sized once: a long allow-list would otherwise be copied at every doubling.
    out.reserve(16 + 2 * (args.writableRoots.size() + args.allowHosts.size() + args.keepFds.size()) + argv.size());
    out.insert(out.end(), {runner, "landlock-exec", "--mode", std::string(to_string(args.mode)), "--workspace-root",
                           args.workspaceRoot});
    if (args.workspaceRootId) out.insert(out.end(), {"--workspace-root-id", *args.workspaceRootId});
    if (args.tempDir) out.insert(out.end(), {"--temp-dir", *args.tempDir});
    if (args.tempDirId) out.insert(out.end(), {"--temp-dir-id", *args.tempDirId});
    if (args.privateTempBase) out.insert(out.end(), {"--private-temp-base", *args.privateTempBase});
    if (args.maxAbi) out.insert(out.end(), {"--max-abi", std::to_string(*args.maxAbi)});
    for (const auto& root : args.writableRoots) out.insert(out.end(), {"--writable-root", root});
    if (args.denyNetwork) out.insert(out.end(), {"--network", "deny"});
    if (!args.allowHosts.empty()) {
        out.insert(out.end(), {"--network", "hosts"});
        for (const auto& host : args.allowHosts) {
            out.emplace_back("--allow-host");
            out.push_back(host);
        }
    }
    for (int fd : args.keepFds) out.insert(out.end(), {"--keep-fd", std::to_string(fd)});
    out.push_back("--");
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

std::vector<std::string> writable_roots(const RunnerArgs& args) {
    std::vector<std::string> roots;
    if (args.mode == ConfinedSandboxMode::WorkspaceWrite) {
        roots.push_back(args.workspaceRoot);
        for (const auto& root : args.writableRoots) roots.push_back(root.substr(root.find('@') == std::string::npos ? 0 : root.find('@') + 1));
        if (args.tempDir) roots.push_back(*args.tempDir);
        if (args.privateTempBase) roots.push_back(*args.privateTempBase);
    }
    for (const auto& sink : posix_shell_sinks()) roots.push_back(sink);
    roots.insert(roots.end(), {"/dev/ptmx", "/dev/pts"});
    if (args.mode == ConfinedSandboxMode::WorkspaceWrite) roots.push_back("/dev/shm");
    return roots;
}

std::vector<std::string> denial_signatures(const SandboxPolicy& policy) {
    std::vector<std::string> out;
    add_denial_words(out, DeniedErrno::Eacces);
    add_denial_words(out, DeniedErrno::Exdev);
    if (policy.network == NetworkPolicy::Deny || policy.network == NetworkPolicy::Hosts) add_denial_words(out, DeniedErrno::Eperm);
    if (policy.network == NetworkPolicy::Hosts) add_denial_words(out, DeniedErrno::ProxyRefused);
    return out;
}

Dialect dialect(const std::vector<std::string>& extra_informational_lines) {
    Dialect out;
    out.denialSignatures = denial_signatures(SandboxPolicy{});  // the network allowed
    // The allow-list proxy's refusal is its own words, printed only in the hosts network.
    add_denial_words(out.denialSignatures, DeniedErrno::ProxyRefused);
    RunnerFailureRule rule;
    rule.allowedExitCodes = std::vector<int>{125};
    rule.fatalSignatures = {"dsh-confine: error: LANDLOCK: "};
    rule.informationalLines = extra_informational_lines;
    out.runnerFailureRules.push_back(std::move(rule));
    return out;
}

}  // namespace dsh::landlock
