#include "bwrap_argv.hpp"

#include <algorithm>
#include <iterator>

#include "../../lib/denial_words.hpp"

namespace dsh::bwrap {

std::vector<std::string> stage_arguments(const StageRequest& request) {
    std::vector<std::string> out;
    if (!request.tempBind.empty()) out.insert(out.end(), {"--temp-bind", request.tempBind});
    if (!request.tempTmpfs.empty()) out.insert(out.end(), {"--temp-tmpfs", request.tempTmpfs});
    for (const auto& root : request.roots) out.insert(out.end(), {"--root", root});
    for (const auto& path : request.protect) out.insert(out.end(), {"--protect", path});
    for (const auto& path : request.protectDirs) out.insert(out.end(), {"--protect-dir", path});
    for (const auto& path : request.protectFiles) out.insert(out.end(), {"--protect-file", path});
    for (const auto& path : request.pin) out.insert(out.end(), {"--pin", path});
    for (const auto& path : request.gitCheck) out.insert(out.end(), {"--git-check", path});
    for (const auto& path : request.hide) out.insert(out.end(), {"--hide", path});
    if (request.denyNetwork) out.insert(out.end(), {"--network", "deny"});
    if (request.hostsNetwork) out.insert(out.end(), {"--network", "hosts"});
    if (request.proxyFd >= 0) out.insert(out.end(), {"--proxy-fd", std::to_string(request.proxyFd)});
    if (request.landlockScope) out.push_back("--landlock-scope");
    out.insert(out.end(), {"--chdir", request.chdir});
    if (request.statusFd >= 0) out.insert(out.end(), {"--status-fd", std::to_string(request.statusFd)});
    for (int fd : request.keepFds) out.insert(out.end(), {"--keep-fd", std::to_string(fd)});
    return out;
}

std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy) {
    const std::string staging = kStagingDir;
    std::vector<std::string> out = {layout.runner, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"};
    StageRequest stage;
    stage.chdir = layout.cwd;
    stage.keepFds = layout.keepFds;
    const bool writes = policy.mode == ConfinedSandboxMode::WorkspaceWrite;
    if (writes) {
        // Every destination below is in bubblewrap's own fresh /dev tmpfs: nothing a confined
        // command could have written lies on its way.
        out.insert(out.end(), {"--tmpfs", "/dev/shm"});
        if (policy.sessionTempDir) {
            out.insert(out.end(), {"--bind", *policy.sessionTempDir, staging + "/temp"});
            stage.tempBind = layout.tempDirId + "@" + *policy.sessionTempDir;
        } else {
            out.insert(out.end(), {"--perms", "0700", "--tmpfs", staging + "/temp"});
            stage.tempTmpfs = layout.tempDirId + "@" + layout.privateTemp;
        }
        out.insert(out.end(), {"--bind", policy.workspaceRoot, staging + "/0"});
        stage.roots.push_back(layout.workspaceRootId + "@" + policy.workspaceRoot);
        for (std::size_t i = 0; i < policy.writableRoots.size() && i < layout.writableRootIds.size(); ++i) {
            out.insert(out.end(), {"--bind", policy.writableRoots[i], staging + "/" + std::to_string(i + 1)});
            stage.roots.push_back(layout.writableRootIds[i] + "@" + policy.writableRoots[i]);
        }
        const auto made = [&](const std::string& path) {
            const auto& dirs = policy.git.madeDirectories;
            const auto& files = policy.git.madeFiles;
            return std::find(dirs.begin(), dirs.end(), path) != dirs.end() ||
                   std::find(files.begin(), files.end(), path) != files.end();
        };
        for (const auto& path : policy.protectedPaths)
            if (!made(path)) stage.protect.push_back(path);
        stage.protectDirs = policy.git.madeDirectories;
        stage.protectFiles = policy.git.madeFiles;
        stage.pin = policy.git.keptInPlace;
        stage.gitCheck = policy.git.checkedAtEnd;
    } else if (!layout.privateTemp.empty()) {  // the probe: the stage's mount path, tried on a tmpfs
        out.insert(out.end(), {"--perms", "0700", "--tmpfs", staging + "/temp"});
        stage.tempTmpfs = layout.tempDirId + "@" + layout.privateTemp;
    }
    stage.hide = policy.unreadablePaths;
    stage.denyNetwork = policy.network == NetworkPolicy::Deny;
    stage.hostsNetwork = policy.network == NetworkPolicy::Hosts;
    stage.landlockScope = layout.landlockScope;
    const bool mounts = !stage.roots.empty() || !stage.tempBind.empty() || !stage.tempTmpfs.empty() || !stage.hide.empty();
    out.insert(out.end(), {"--remount-ro", "/dev"});
    // With mounts to make, an unprivileged stage must first write its uid and gid maps in /proc:
    // it remounts /proc read-only itself, before the command runs (bwrap_stage.cpp).
    if (!mounts) out.insert(out.end(), {"--remount-ro", "/proc"});
    out.insert(out.end(), {"--unshare-pid", "--unshare-ipc"});
    // A new network namespace holds only its own loopback: no route out, and the host's abstract
    // Unix sockets live in the host's namespace. Sockets by path are the stage's filter's job.
    if (stage.denyNetwork || stage.hostsNetwork) out.push_back("--unshare-net");
    out.insert(out.end(), {"--die-with-parent", "--cap-drop", "ALL"});
    // A root caller's stage keeps CAP_SETPCAP (bubblewrap leaves the bounding set full; the stage
    // empties it and locks root's exec-time grant off) and, for the mounts, CAP_SYS_ADMIN; it
    // drops both before the command runs.
    if (layout.root) {
        out.insert(out.end(), {"--cap-add", "CAP_SETPCAP"});
        if (mounts) out.insert(out.end(), {"--cap-add", "CAP_SYS_ADMIN"});
    }
    out.insert(out.end(), {"--chdir", "/", "--", layout.stage, "bwrap-stage"});
    const std::vector<std::string> stage_args = stage_arguments(stage);
    out.insert(out.end(), stage_args.begin(), stage_args.end());
    out.push_back("--");
    out.insert(out.end(), argv.begin(), argv.end());
    if (stage.hostsNetwork) {
        // The launcher starts the proxy outside, then execs bubblewrap (proxy_companion.hpp).
        std::vector<std::string> launcher;
        launcher.reserve(3 + 2 * policy.allowHosts.size() + out.size());
        launcher.insert(launcher.end(), {layout.stage, "net-proxy"});
        for (const auto& host : policy.allowHosts) {
            launcher.emplace_back("--allow-host");
            launcher.push_back(host);
        }
        launcher.emplace_back("--");
        launcher.insert(launcher.end(), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
        return launcher;
    }
    return out;
}

std::vector<std::string> writable_roots(const SandboxPolicy& policy, const Layout& layout) {
    std::vector<std::string> roots;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        roots.push_back(policy.workspaceRoot);
        roots.insert(roots.end(), policy.writableRoots.begin(), policy.writableRoots.end());
        roots.push_back(policy.sessionTempDir ? *policy.sessionTempDir : layout.privateTemp);
        roots.push_back("/dev/shm");  // a private tmpfs
    }
    for (const auto& sink : posix_shell_sinks()) roots.push_back(sink);
    roots.push_back("/dev/pts");  // a private devpts instance: new ptys, none of the host's
    return roots;
}

std::vector<std::string> enforcement_gaps(const Layout& layout) {
    if (layout.landlockScope) return {};
    return {"signals: where the call has a controlling terminal, the command can signal every process of its "
            "process group outside the sandbox with kill(0, ...): bubblewrap itself and, when a script runs "
            "dsh-confine (no job control), the script's shell and its other children (without a controlling "
            "terminal the command runs in a session of its own; the stage scopes signals with Landlock from ABI 6)"};
}

std::vector<std::string> denial_signatures(const SandboxPolicy& policy) {
    std::vector<std::string> out;
    add_denial_words(out, DeniedErrno::Erofs);
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) add_denial_words(out, DeniedErrno::Exdev);
    // A hidden path is an empty directory or file of mode 000: reading it is EACCES.
    if (!policy.unreadablePaths.empty()) add_denial_words(out, DeniedErrno::Eacces);
    // A protected path is a mount point: renaming or removing it is EBUSY, linking across it EXDEV.
    if (!policy.protectedPaths.empty() || !policy.git.keptInPlace.empty()) {
        add_denial_words(out, DeniedErrno::Ebusy);
        add_denial_words(out, DeniedErrno::Exdev);
    }
    // The proxy's refusal, on stderr and in the client's 403 (or SOCKS reply 2).
    if (policy.network == NetworkPolicy::Hosts) add_denial_words(out, DeniedErrno::ProxyRefused);
    // The stage's filter refuses sockets with EPERM; the namespace has no route out.
    if (policy.network == NetworkPolicy::Deny || policy.network == NetworkPolicy::Hosts) {
        add_denial_words(out, DeniedErrno::Eperm);
        add_denial_words(out, DeniedErrno::Enetunreach);
    }
    return out;
}

Dialect dialect(const std::vector<std::string>& extra_informational_lines) {
    Dialect out;
    // Without a plan, the words of every call that writes and protects (git's paths by default):
    // a rename or removal of a protected path is EBUSY whatever the call's other options.
    SandboxPolicy common;
    common.mode = ConfinedSandboxMode::WorkspaceWrite;
    common.protectedPaths = {".git/config"};
    out.denialSignatures = denial_signatures(common);
    // The allow-list proxy's refusal is its own words, printed only in the hosts network.
    add_denial_words(out.denialSignatures, DeniedErrno::ProxyRefused);
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
    // The stage (bwrap_stage.hpp) refuses before the command starts with its own line and 125, and
    // so does the hosts network's launcher when it cannot start the proxy (proxy_companion.hpp).
    RunnerFailureRule stage;
    stage.allowedExitCodes = std::vector<int>{125};
    stage.fatalSignatures = {"dsh-confine: error: BWRAP_STAGE: ", "dsh-confine: error: PROXY: "};
    stage.informationalLines = extra_informational_lines;
    out.runnerFailureRules.push_back(std::move(stage));
    return out;
}

}  // namespace dsh::bwrap
