// What both Linux runners (the Landlock runner and the stage inside bubblewrap) do last, in the
// same way: drop every capability, keep only the descriptors the caller chose to pass on, give
// proof of start, and exec the command.
#pragma once

#include <string>
#include <vector>

namespace dsh::linux_runner {

// The per-user base for private temp areas (/tmp/dsh-confine-UID): made 0700, and refused
// unless it is a real directory of this user that nobody else can write (the /tmp squatting
// problem), or when this uid is unmapped in its user namespace (every unmapped owner then looks
// alike, so ownership proves nothing).
bool prepare_private_base(const std::string& base, std::string& why);

// The same, returning the base opened (O_RDONLY | O_DIRECTORY, close-on-exec) for work relative
// to it, or -1 with `why`.
int open_private_base(const std::string& base, std::string& why);

// Every capability goes: bounding, ambient, effective, permitted, inheritable; and root's
// exec-time grant is locked off (securebits), so the command cannot regain any.
bool drop_capabilities(std::string& why);

// Marks every descriptor above 2 close-on-exec except `keep`: after the exec the command holds
// stdin, stdout, stderr and the kept ones only. A kept descriptor that is not open is an error.
// Costs the same whatever RLIMIT_NOFILE is (close_range, or /proc/self/fd where it is missing).
bool pass_only(const std::vector<int>& keep, std::string& why);

// Whether the effective set holds CAP_SYS_ADMIN (over this process's own namespaces).
bool has_sys_admin();

// Resolves argv[0] on PATH, passes on only `keep`, writes 'S' to `status_fd` (when >= 0) just
// before execve and 'F' if execve failed, then execs. Returns only on failure, with the exit
// status to use (125 for a descriptor error, 126/127 as env(1)); the message is printed with
// `error_code` (e.g. "LANDLOCK") where dsh-confine itself failed.
int exec_command(const std::vector<std::string>& argv, int status_fd, const std::vector<int>& keep,
                 const char* error_code);

}  // namespace dsh::linux_runner
