// The bubblewrap argv and dialect: pure string building, compiled and unit-tested on every
// system. The binds realize the promise of docs/backends/linux.md:
//   - the host is bound read-only, recursively (/sys included);
//   - /dev is a fresh minimal tree, remounted read-only: only its device sinks and a private
//     devpts instance can be written;
//   - /proc is a new procfs for a new PID namespace, remounted read-only (bubblewrap 0.8
//     leaves /proc/sys writable to a root caller otherwise);
//   - every capability is dropped (bubblewrap keeps them for a root caller), so mounts cannot
//     be undone from inside;
//   - --new-session detaches the caller's terminal, so TIOCSTI cannot push keystrokes into it;
//   - workspace-write adds a private /tmp (a tmpfs, or the session's temp area) and a
//     read-write bind of the workspace root; the root's own entry in its parent stays
//     read-only, as it is a mount point in a read-only parent.
// Not governed: IPC with host daemons through sockets (a daemon may write on the command's
// behalf), network, and process visibility outside the PID namespace's /proc.
#pragma once

#include <string>
#include <vector>

#include "../../lib/types.hpp"

namespace dsh::bwrap {

struct Layout {
    std::string runner;  // absolute path of bwrap
    std::string cwd;     // where the command runs
    // dsh-confine's own files: bound read-only again where they lie inside a writable root.
    std::vector<std::string> protectedPaths = {};
    std::string self = {};  // dsh-confine's own binary, kept visible for nested calls
};


std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy);
std::vector<std::string> writable_roots(const SandboxPolicy& policy);

// The denial text (EROFS) and the runner-failure rules for every message bubblewrap prints
// when it fails before executing the command, gated to its exit status 1. `bwrap: execvp`
// (the command missing inside the sandbox) is deliberately absent: that is the command's
// own failure, not the runner's.
Dialect dialect(const std::vector<std::string>& extra_informational_lines);

}  // namespace dsh::bwrap
