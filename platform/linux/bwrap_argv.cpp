#include "bwrap_argv.hpp"

#include <set>

#include "../../lib/policy.hpp"

namespace dsh::bwrap {

std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy) {
    std::vector<std::string> out = {layout.runner, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"};
    const bool writes = policy.mode == ConfinedSandboxMode::WorkspaceWrite;
    if (writes) {
        if (policy.sessionTempDir) out.insert(out.end(), {"--bind", *policy.sessionTempDir, "/tmp"});
        else out.insert(out.end(), {"--tmpfs", "/tmp"});
        // What the private /tmp would hide but the call needs stays where it was, readable as the
        // rest of the host: the cwd, the program when named by an absolute path, dsh-confine.
        std::vector<std::string> keep = {layout.cwd};
        if (!argv.empty() && !argv.front().empty() && argv.front().front() == '/') keep.push_back(argv.front());
        if (!layout.self.empty()) keep.push_back(layout.self);
        std::set<std::string> kept;
        for (const auto& path : keep)
            if (path.rfind("/tmp/", 0) == 0 && paths_within({path}, policy.workspaceRoot).empty() && kept.insert(path).second)
                out.insert(out.end(), {"--ro-bind", path, path});
        out.insert(out.end(), {"--bind", policy.workspaceRoot, policy.workspaceRoot});
        // dsh-confine's own files inside the workspace are bound read-only, and every directory
        // between the root and them is bound onto itself: a mount point cannot be renamed or
        // removed, so the command cannot move the protected path aside and plant its own.
        const std::vector<std::string> guarded = paths_within(layout.protectedPaths, policy.workspaceRoot);
        std::set<std::string> anchors;
        for (const auto& path : guarded)
            for (std::size_t slash = path.find('/', policy.workspaceRoot.size() + 1); slash != std::string::npos;
                 slash = path.find('/', slash + 1))
                anchors.insert(path.substr(0, slash));
        for (const auto& anchor : anchors) out.insert(out.end(), {"--bind", anchor, anchor});
        for (const auto& path : guarded) out.insert(out.end(), {"--ro-bind-try", path, path});
    }
    out.insert(out.end(), {"--remount-ro", "/dev", "--remount-ro", "/proc", "--unshare-pid", "--new-session",
                           "--die-with-parent", "--cap-drop", "ALL"});
    if (writes) out.insert(out.end(), {"--setenv", "TMPDIR", "/tmp"});
    out.insert(out.end(), {"--chdir", layout.cwd, "--"});
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

std::vector<std::string> writable_roots(const SandboxPolicy& policy) {
    std::vector<std::string> roots;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        roots.push_back(policy.workspaceRoot);
        roots.push_back("/tmp");
    }
    for (const auto& sink : posix_shell_sinks()) roots.push_back(sink);
    roots.push_back("/dev/pts");  // a private devpts instance: new ptys, none of the host's
    return roots;
}

Dialect dialect(const std::vector<std::string>& extra_informational_lines) {
    Dialect out;
    out.denialSignatures = {"read-only file system"};
    RunnerFailureRule rule;
    rule.allowedExitCodes = std::vector<int>{1};
    // From bubblewrap's die() calls (0.1 to 0.13), each with the "bwrap: " prefix every
    // release since 0.2.1 prints; older and newer spellings side by side.
    rule.fatalSignatures = {
        // "...to creating new namespace" (<= 0.11.0), "...to create a new namespace" (>= 0.11.1),
        // "...to create new namespace" (Debian's 0.8.0)
        "bwrap: No permissions to creat",
        "bwrap: Creating new namespace failed",
        "bwrap: setting up uid map",
        "bwrap: setting up gid map",
        "bwrap: error writing to setgroups",
        "bwrap: unshare user ns",
        "bwrap: unshare pid ns",
        "bwrap: Joining the specified user namespace failed",
        "bwrap: Joining specified user namespace failed",
        "bwrap: Setting userns2 failed",
        "bwrap: Setting pidns failed",
        "bwrap: Cannot create new cgroup namespace",
        "bwrap: cannot open /proc/sys/user/max_user_namespaces",
        "bwrap: sysctl user.max_user_namespaces",
        "bwrap: creation of new user namespaces was not disabled",
        "bwrap: loopback: Failed",
        "bwrap: Failed to make / slave",
        "bwrap: Failed to mount tmpfs",
        "bwrap: Failed to make old root rprivate",
        "bwrap: setting up newroot bind",
        "bwrap: Creating newroot failed",
        "bwrap: Creating oldroot failed",
        "bwrap: pivot_root",
        "bwrap: chdir / (base path)",
        "bwrap: chhdir / (base path)",  // 0.1.x
        "bwrap: unmount old root",
        "bwrap: umount old root",
        "bwrap: Can't mount proc on",
        "bwrap: Can't mount tmpfs on",
        "bwrap: Can't mount devpts on",
        "bwrap: Can't mount mqueue on",
        "bwrap: Can't find source path",
        "bwrap: Can't get type of source",
        "bwrap: Can't mkdir parents for",
        "bwrap: Can't mkdir",
        "bwrap: Can't create file at",
        "bwrap: Can't make symlink at",
        "bwrap: Can't chmod",
        "bwrap: Can't access",
        "bwrap: Can't set hostname",
        "bwrap: Can't bind mount",
        "bwrap: Can't remount readonly on",
        "bwrap: Can't make overlay mount",
        "bwrap: Can't open /proc",
        "bwrap: Can't read /proc/sys/kernel/overflowuid",
        "bwrap: Can't chdir to",
        "bwrap: Can't read pid from socket",
        "bwrap: Cant read pid from socket",  // older spelling
        "bwrap: Unknown option",
        "bwrap: Invalid fd:",
        "bwrap: Invalid uid:",
        "bwrap: Invalid gid:",
        "bwrap: Specifying --uid requires",
        "bwrap: Specifying --gid requires",
        "bwrap: Specifying --hostname requires",
        "bwrap: --disable-userns requires",
        "bwrap: --userns not compatible",
        "bwrap: prctl(PR_SET_NO_NEW_PRIVS) failed",
        "bwrap: Unexpected capabilities but not setuid",
        "bwrap: capset failed",
        "bwrap: setsid",
        "bwrap: label_exec",
        "bwrap: Unable to set up system call filtering",
        "bwrap: prctl(PR_SET_SECCOMP)",
        "bwrap: Invalid seccomp data",
        "bwrap: Invalide seccomp data",  // 0.1.x
        "bwrap: Unable to open lock file",
        "bwrap: Unable to lock file",
        "bwrap: Unknown capability",
        "bwrap: Invalid capability",
    };
    // bubblewrap's warnings: benign, even where a fatal signature would match them.
    for (const char* option : {"--chdir", "--exec-label", "--file-label", "--sync-fd", "--block-fd",
                               "--userns-block-fd", "--info-fd", "--json-status-fd", "--seccomp", "--userns",
                               "--userns2", "--pidns", "--uid", "--gid", "--hostname"})
        rule.informationalLines.push_back(std::string("bwrap: Only the last ") + option + " option will take effect");
    rule.informationalLines.insert(rule.informationalLines.end(), extra_informational_lines.begin(),
                                   extra_informational_lines.end());
    out.runnerFailureRules.push_back(std::move(rule));
    return out;
}

}  // namespace dsh::bwrap
