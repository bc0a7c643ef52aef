// What both Linux runners (the Landlock runner and the stage inside bubblewrap) do last, in the
// same way: set no_new_privs, install the guard, drop every capability, apply the Landlock
// ruleset when there is one, keep only the descriptors the caller chose to pass on, give proof
// of start, and exec the command.
#pragma once

#include <csignal>
#include <memory>
#include <sys/types.h>
#include <span>
#include <string>
#include <vector>

#include <linux/filter.h>

#include "tty_guard.hpp"

namespace dsh::linux_runner {

// The per-user base for private temp areas (/tmp/dsh-confine-UID): made 0700, and refused
// unless it is a real directory of this user that nobody else can write (the /tmp squatting
// problem), or when this uid is unmapped in its user namespace (every unmapped owner then looks
// alike, so ownership proves nothing).
bool prepare_private_base(const std::string& base, std::string& why);

// The same, returning the base opened (O_RDONLY | O_DIRECTORY, close-on-exec) for work relative
// to it, or -1 with `why`.
int open_private_base(const std::string& base, std::string& why);

// Whether the effective set holds CAP_SYS_ADMIN (over this process's own namespaces).
bool has_sys_admin();

// Every capability dropped now, as Launch::run() drops them (for a process that stays beside the
// command, such as the stage holding a call open): 0, or -errno.
long drop_all_capabilities() noexcept;

// A process in front of the command, which waits for it (the stage holding a call open, the
// exec path's front below) passes on the signals some process sends it with kill (a harness's,
// `run`'s; not the kernel's to its group): SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and
// SIGWINCH, to `command`'s process group, or to `command` alone while it leads none. Installs
// the handlers, then sets this process's mask to `mask` (the caller's, as it was before the
// fork) with those signals unblocked: a caller that blocked one (a mask survives execve) still
// has it passed on. The caller keeps every signal blocked from its fork until this returns.
void pass_signals_on(pid_t command, const sigset_t& mask);

// Once the command is reaped: its pid is free for another process, to which nothing is passed.
void stop_passing_signals();

// Ends this process the way the wait status `status` says the command ended: with its exit
// status, or killed by the same signal (without a core dump).
[[noreturn]] void end_as(int status);

// Those last steps, made ready in two parts. In run(), in this order: a session of its own
// where the call has no controlling terminal (runner.cpp says why); no_new_privs; the guard
// (tty_guard.hpp); every capability dropped (bounding, ambient, effective, permitted,
// inheritable, and root's exec-time grant locked off by securebits, so the command cannot
// regain any); the ruleset; every descriptor above 2 but the kept ones marked close-on-exec
// (close_range, or the list in /proc/self/fd where it is missing: the same cost whatever
// RLIMIT_NOFILE is); 'S' on the proof's descriptor just before execve, 'F' if it failed.
//
// The two parts: prepare_launch() does everything that may allocate or fail with a message of
// its own: the PATH lookup, the choice of the seccomp program, the check of each kept
// descriptor, the argv array, every message's text. Launch::run() then makes system calls only, without the C
// library's wrappers (raw_syscall.hpp: no errno, no allocation, no lock, no stdio): so it may
// run in a clone that shares the preparing process's memory until its execve, as posix_spawn's
// child does, which spares `run` under Landlock a copy of dsh-confine's address space.
class Launch {
public:
    // A launch that only reports a failure found while preparing: run() writes
    // `dsh-confine: error: CODE: message` and returns `status`.
    static Launch failed(const char* error_code, const std::string& message, int status = 125);

    // Returns only on failure, with the exit status to use (125 when confinement could not be
    // set up, 126/127 as env(1) when the command cannot be run), the message written to stderr.
    int run() const noexcept;

private:
    friend Launch prepare_launch(const std::vector<std::string>&, int, const std::vector<int>&, const char*,
                                 const linux_guard::GuardOptions&, int);
    std::string failure_;  // non-empty: the whole message line, and run() does nothing else
    int failureStatus_ = 125;
    const char* errorCode_ = "";
    int ruleset_ = -1;  // restricted to last (landlock_restrict_self), then closed
    std::span<const sock_filter> guard_;  // static data (tty_guard.hpp): nothing built per call
    bool found_ = false;  // false: the command is missing (127, after the proof "SF")
    std::string program_;
    std::shared_ptr<const std::vector<std::string>> args_;  // what argv_ points into
    std::vector<char*> argv_;
    int statusFd_ = -1;
    std::vector<int> keep_;
};

// The launch of argv under `guard` (and `ruleset`, a Landlock ruleset, or -1), with `keep`
// passed on and the proof of start on `status_fd` (-1: none). A failure it can see now (a kept
// descriptor that is not open) becomes a failed launch; `error_code` names dsh-confine's own
// failures in the messages (e.g. "LANDLOCK").
Launch prepare_launch(const std::vector<std::string>& argv, int status_fd, const std::vector<int>& keep,
                      const char* error_code, const linux_guard::GuardOptions& guard, int ruleset);

// For the exec path, where this process becomes the command: the command gets a session of its
// own in run() by setsid, which fails where this process leads a process group (a caller made it
// one, or exec'd it as its session's leader). There, unless the call has a controlling terminal
// or this process's session holds no other process (a caller that started it as a session
// alone: every process of it will be the command's), this process must stand in front. Alone is
// what /proc shows, so where /proc hides processes (hidepid) or is another PID namespace's, it
// stands in front.
bool stands_in_front();

// Runs `launch` in a new process, which then gets its session, with this process in front of
// it: every capability dropped, no descriptor but stderr, signals passed on (pass_signals_on),
// and ending as the command ends (end_as). Returns only if the process could not be started,
// with the status of that failure (its message written).
int run_in_front(const Launch& launch);

// Starts `fn(arg)` in a new process as `run` starts its runner: a clone that shares this
// memory, on a stack of its own, while this process waits for its execve or its end (no page
// table copied; `fn` makes system calls only), or under AddressSanitizer a forked copy. The
// child's pid, or -1 with errno set.
pid_t start_sharing_memory(int (*fn)(void*), void* arg);

}  // namespace dsh::linux_runner
