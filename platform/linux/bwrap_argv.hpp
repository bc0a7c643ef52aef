// The bubblewrap argv and dialect: pure string building, compiled and unit-tested on every
// system. The binds realize the promise of docs/backends/linux.md:
//   - the host is bound read-only, recursively (/sys and the host's /tmp included);
//   - /dev is a fresh minimal tree, remounted read-only: only its device sinks, a private
//     devpts instance and (workspace-write) a private /dev/shm can be written;
//   - /proc is a new procfs for a new PID namespace, remounted read-only (bubblewrap 0.8
//     leaves /proc/sys writable to a root caller otherwise); IPC is a new namespace too, so
//     SysV objects and POSIX message queues made inside end with the sandbox;
//   - every writable root (the workspace, the temp area) is staged by bubblewrap in its own
//     /dev tmpfs and moved onto its real path by the stage (bwrap_stage.hpp says why): no
//     bubblewrap destination lies in a directory that any confined command can write;
//   - the command runs through the stage, which drops every capability, installs the
//     terminal guard (TIOCSTI, TIOCLINUX), and closes descriptors above 2 unless kept.
//   - the stage applies Landlock's scopes where the kernel has them (ABI 6): the command
//     signals only its own processes; before that, kill(0, ...) reaches the caller's process
//     group (a process group spans PID namespaces), a named gap.
// Not governed: IPC with host daemons through sockets unless the network is denied (a daemon
// may write on the command's behalf), network, and process visibility outside the PID
// namespace's /proc.
#pragma once

#include <string>
#include <vector>

#include "../../lib/types.hpp"

namespace dsh::bwrap {

// Where bubblewrap stages the writable mounts for the stage: inside its own /dev tmpfs.
inline constexpr const char* kStagingDir = "/dev/.dsh-confine";

// What the stage is told: each mount as "DEV:INO@PATH", the identity it must find at PATH.
struct StageRequest {
    std::vector<std::string> roots;  // staged at kStagingDir/0, /1, ... in this order
    std::string tempBind;            // a directory, staged at kStagingDir/temp
    std::string tempTmpfs;           // a fresh tmpfs staged there, mounted over PATH
    std::string chdir;               // where the command runs (absolute)
    int statusFd = -1;               // 'S' just before execve, 'F' if it failed
    std::vector<int> keepFds;
    std::vector<std::string> protect;  // inside the roots: kept read-only, with every directory between
    std::vector<std::string> protectDirs;   // the same, made an empty directory first where missing
    std::vector<std::string> protectFiles;  // the same, made an empty file first where missing
    std::vector<std::string> pin;      // inside the roots: kept in place (writable), with every directory between
    std::vector<std::string> gitCheck;  // git directories whose validity the stage restores when the call ends
    std::vector<std::string> hide;     // made unreadable: an empty mode-000 directory or file over each
    bool denyNetwork = false;          // the guard's socket rules (tty_guard.hpp)
    // The network through the allow-list proxy (proxy_companion.hpp): the stage listens on the
    // namespace's loopback and sends the listeners over `proxyFd` (which the plan's launcher,
    // `dsh-confine net-proxy`, inserts as `--proxy-fd N`: its number is known only then).
    bool hostsNetwork = false;
    int proxyFd = -1;
    // With git directories to check: a pipe the stage writes 'C' to once it has checked them all,
    // which dsh-confine, in front of bubblewrap on the exec path, inserts as `--checked-fd N`
    // (git_front.hpp): then it need not check again.
    int checkedFd = -1;
    // Apply Landlock's scopes (ABI 6) last: the command then signals only its own processes
    // (kill(0, ...) reaches the caller's process group across the PID namespace otherwise), and,
    // with the network denied, reaches no abstract Unix socket outside. The plan relies on it:
    // where the kernel lacks it, the stage refuses rather than run the command without.
    bool landlockScope = false;
};

// The stage's arguments after `SELF bwrap-stage`, up to (not including) the `--`.
std::vector<std::string> stage_arguments(const StageRequest& request);

struct Layout {
    std::string runner = {};  // absolute path of bwrap
    std::string stage = {};   // absolute path of dsh-confine, which runs inside as the stage
    std::string cwd = {};     // where the command runs
    bool root = false;        // the caller is uid 0 (bubblewrap keeps CAP_SETPCAP, CAP_SYS_ADMIN for the stage)
    std::string workspaceRootId = {};  // DEV:INO of the workspace root (workspace-write)
    std::string tempDirId = {};        // DEV:INO of the session's temp area, or of privateTemp
    std::string privateTemp = {};      // without a session: a tmpfs over this directory is the temp area
    std::vector<std::string> writableRootIds = {};  // DEV:INO of each of policy.writableRoots, in order
    std::vector<int> keepFds = {};
    bool landlockScope = false;        // the kernel has Landlock's scopes (ABI 6): the stage applies them
};

std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy);
std::vector<std::string> writable_roots(const SandboxPolicy& policy, const Layout& layout);

// What a plan cannot govern: nothing, unless the stage cannot apply Landlock's scopes (before
// ABI 6, or Landlock disabled): then the caller's process group is within the command's reach.
std::vector<std::string> enforcement_gaps(const Layout& layout);

// The denial text of a call with `policy`: EROFS always (every write outside the writable
// roots meets a read-only bind); in workspace-write, EXDEV (a hard link or rename between a
// writable root and another mount: each root is a bind mount of its own); EACCES where paths
// are hidden (each is an empty directory or file of mode 000); EBUSY and EXDEV with protected
// paths (each is a mount point: it cannot be renamed or removed, nor linked across); with the
// network denied, EPERM (the stage's filter refuses sockets) and ENETUNREACH (the namespace
// has no route out). The words of each: lib/denial_words.hpp.
std::vector<std::string> denial_signatures(const SandboxPolicy& policy);

// The denial text every call has (EROFS) and the runner-failure rules for every message bubblewrap prints
// when it fails before executing the command, gated to its exit status 1. `bwrap: execvp`
// (the command missing inside the sandbox) is deliberately absent: that is the command's
// own failure, not the runner's.
Dialect dialect(const std::vector<std::string>& extra_informational_lines);

}  // namespace dsh::bwrap
