// The Seatbelt profile, sandbox-exec argv and dialect: pure string building, compiled and
// unit-tested on every system (with golden files). The profiles (profiles/*.sbpl) realize
// the promise of docs/backends/macos.md:
//   - every read, every exec, and everything that is not a file effect stays as the host
//     allows it (`allow default`): the modes govern file effects only;
//   - every file write is denied (`deny file-write*`: data, create, unlink, rename, mode,
//     owner, flags, times, ACLs, xattrs), hard links are denied, and so are preference writes
//     through cfprefsd, except the device sinks and /dev/fd;
//   - workspace-write adds every file effect under the workspace root and the temp area, hard
//     links between names already there, and keeps the root's own entry (no unlink/rename);
//   - dsh-confine's own files inside the workspace are denied again, and each directory
//     between the root and them cannot be unlinked or renamed away.
// Every variable path goes in as a parameter (`-D NAME=VALUE`), so no quoting of paths in
// the profile text exists to get wrong: a path with quotes, parentheses or newlines is a
// plain argv element.
//   - extra writable roots are allowed as the workspace is; protected paths inside the roots
//     (.git/hooks, .git/config) are denied again; unreadable paths are denied file-read*;
//     with the network denied, `(deny network*)` refuses every socket connect, bind and
//     listen, Unix-domain ones by path included.
// Not governed: IPC with host daemons through Mach and XPC services and Apple Events (which
// may write on the command's behalf), TIOCSTI on the caller's terminal (the command shares
// it), file descriptors inherited already open, and process visibility.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "../../lib/types.hpp"

namespace dsh::seatbelt {

// Where the host side's facts go in. All paths absolute and canonical (realpath), since
// Seatbelt matches the resolved path: /tmp must be given as /private/tmp.
struct Layout {
    std::string runner;   // /usr/bin/sandbox-exec, or [backend.seatbelt] path
    std::string tempDir;  // workspace-write: the session's temp area or the per-user one
    std::vector<std::string> protectedPaths = {};  // dsh-confine's own files
    std::string env = "/usr/bin/env";  // sets TMPDIR for the command in workspace-write
};

struct Parameter {
    std::string name;
    std::string value;
};

// What a profile is made of beyond its mode: how many of each parameterized rule it carries.
struct ProfileShape {
    ConfinedSandboxMode mode = ConfinedSandboxMode::ReadOnly;
    std::size_t writableRoots = 0;    // WRITABLE_ROOT_i: allowed as the workspace is
    std::size_t protectedPaths = 0;   // PROTECTED_i: denied again inside the roots
    std::size_t anchors = 0;          // ANCHOR_i: not unlinked or renamed away
    std::size_t unreadablePaths = 0;  // UNREADABLE_i: file-read* denied
    bool denyNetwork = false;         // (deny network*)
};

// The profile text: profiles/read-only.sbpl, then profiles/workspace-write.sbpl for
// workspace-write, then one generated rule per extra root, protected path (and its anchors)
// and unreadable path, and the network's, with comment lines and blank lines left out so the
// argv stays short.
std::string profile(const ProfileShape& shape);
std::string profile(ConfinedSandboxMode mode, std::size_t protected_count, std::size_t anchor_count);

// The parameters the profile of `policy` refers to, in the order they are passed.
std::vector<Parameter> parameters(const Layout& layout, const SandboxPolicy& policy);

// `sandbox-exec -p PROFILE -D NAME=VALUE ... -- [env TMPDIR=DIR] argv`
std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy);

std::vector<std::string> writable_roots(const Layout& layout, const SandboxPolicy& policy);

// What a Seatbelt plan for `policy` does not govern as the policy asks. The hosts network has no
// allow-list proxy here: the profile denies the network as `--network deny` does, so nothing
// leaves, and the allowed hosts are not reachable either (named, so the plan is `partial`).
std::vector<std::string> enforcement_gaps(const SandboxPolicy& policy);

// The full-line comments and blank lines of an SBPL text removed; every other line kept.
std::string strip_comments(std::string_view text);

// EPERM (Seatbelt's denial) and sandbox-exec's own failures: a usage or profile error (exit 64
// or 65) and sandbox_apply refusing, e.g. when dsh-confine already runs inside a sandbox
// (exit 71). "sandbox-exec: execvp() of ..." (exit 71 as well) is deliberately absent: the
// command could not be executed, which is its own failure, as bwrap's execvp is.
Dialect dialect(const std::vector<std::string>& extra_informational_lines);

}  // namespace dsh::seatbelt
