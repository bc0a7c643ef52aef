#include "runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <csignal>
#include <fstream>
#include <iterator>
#include <string_view>
#include <string>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../posix/process.hpp"
#include "cgroup.hpp"
#include "landlock_abi.hpp"
#include "proxy_companion.hpp"
#include "raw_syscall.hpp"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace dsh::linux_runner {
namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Whether `uid` (as this process sees it) is mapped in its user namespace. An unmapped caller
// (`unshare -U` without a map) sees itself, and every other unmapped owner, as the overflow uid:
// an ownership check then proves nothing, and a base it made would squat the real user's name.
// In the initial user namespace (inode 0xEFFFFFFD, fixed by the kernel) every uid is mapped.
bool uid_is_mapped(uid_t uid) {
    char link[64] = {};
    if (readlink("/proc/self/ns/user", link, sizeof link - 1) > 0 && std::strcmp(link, "user:[4026531837]") == 0)
        return true;
    std::ifstream map("/proc/self/uid_map");
    if (!map) return true;  // no /proc: no user namespaces to be unmapped in
    unsigned long inside = 0, outside = 0, count = 0;
    while (map >> inside >> outside >> count)
        if (uid >= inside && uid - inside < count) return true;
    return false;
}

}  // namespace

// The per-user base for private temp areas: made 0700, and refused unless it is a real
// directory of ours that nobody else can write (the /tmp squatting problem). Who could have
// written each directory on the way: /tmp, every user (sticky: nobody can rename or remove what
// another made there, so a name we made stays ours); the base, only this user, outside any
// sandbox (no confined command is granted it, only an area inside it).
int open_private_base(const std::string& base, std::string& why) {
    if (const uid_t uid = geteuid(); !uid_is_mapped(uid)) {
        why = "uid " + std::to_string(uid) + " is not mapped in this user namespace, so " + base +
              " cannot be proven private (give the call a session, whose temp area is its own, or use read-only)";
        return -1;
    }
    // O_NOFOLLOW on the base itself, as lstat would judge it; a symlinked /tmp is followed.
    constexpr int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(base.c_str(), flags);
    if (fd < 0 && errno == ENOENT) {
        if (mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) {
            why = errno_text(("mkdir " + base).c_str());
            return -1;
        }
        fd = open(base.c_str(), flags);
    }
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) {
        // ELOOP or ENOTDIR: a symlink or a file squats the name.
        why = errno == ELOOP || errno == ENOTDIR
                  ? base + " is not a private directory of this user (refusing it as a temp base)"
                  : errno_text(("open " + base).c_str());
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        why = base + " is not a private directory of this user (refusing it as a temp base)";
        return -1;
    }
    return fd;
}

bool prepare_private_base(const std::string& base, std::string& why) {
    const int fd = open_private_base(base, why);
    if (fd < 0) return false;
    close(fd);
    return true;
}

// What Launch::run() uses: system calls made without the C library's wrappers (no errno
// written: raw_syscall.hpp), nothing allocated, nothing written to memory but their own stack,
// every message's text made before or constant. So they may run in a clone that shares the
// memory of a process running beside it.
namespace {

using linux_sys::call_with;

// One message line, written in one writev (a null part is left out).
void say(std::initializer_list<const char*> parts) noexcept {
    iovec pieces[12];
    int count = 0;
    for (const char* part : parts)
        if (part != nullptr && count < 12) pieces[count++] = {const_cast<char*>(part), std::strlen(part)};
    call_with(SYS_writev, 2, pieces, count);
}

// The C library's text for an error number, as strerror gives it in the C locale, from a
// constant table: nothing allocated, no locale consulted.
const char* error_text(long error) noexcept {
    const char* text = strerrordesc_np(static_cast<int>(error));
    return text != nullptr ? text : "Unknown error";
}

// The failure of step `what` (a system call's -errno), as dsh-confine reports its own: 125.
int step_failed(const char* code, const char* what, long result) noexcept {
    say({"dsh-confine: error: ", code, ": ", what, ": ", error_text(-result), "\n"});
    return 125;
}

long prctl_raw(long option, long a = 0) noexcept { return call_with(SYS_prctl, option, a, 0, 0, 0); }

// This process's capability sets: 0, or -errno.
long capabilities(__user_cap_data_struct (&data)[2]) noexcept {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    return call_with(SYS_capget, &header, data);
}

// Every capability dropped: 0, or -errno with the step that failed in `what`.
long drop_capabilities(const char*& what) noexcept {
    __user_cap_data_struct data[2] = {};
    what = "capget";
    if (const long got = capabilities(data); got != 0) return got;
    const bool any = data[0].permitted || data[1].permitted || data[0].effective || data[1].effective;
    prctl_raw(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL);
    if (any) {
        what = "securebits";
        const long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED;
        if (const long set = prctl_raw(PR_SET_SECUREBITS, bits); set != 0) return set;
        // Every capability this kernel knows, up to the first number it refuses as invalid
        // (its CAP_LAST_CAP + 1), without reading /proc/sys/kernel/cap_last_cap.
        what = "dropping the capability bounding set";
        for (long cap = 0;; ++cap) {
            const long dropped = prctl_raw(PR_CAPBSET_DROP, cap);
            if (dropped == 0) continue;
            if (dropped == -EINVAL && cap > 0) break;
            return dropped;
        }
    }
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    what = "capset";
    return call_with(SYS_capset, &header, none);
}

// The command's own session, unless the call has a controlling terminal. In the caller's
// session the command could have the kernel signal the caller's process group, which no
// Landlock scope sees: a group left orphaned with a stopped member is sent SIGHUP and SIGCONT
// (kill_orphaned_pgrp), and setpgid(2) lets any process of the session join the caller's group
// to leave it so. A session is the boundary setpgid cannot cross. With a controlling terminal
// the command keeps the caller's session, so that the terminal's keys and job control reach it
// (docs/security.md names what that leaves). The terminal is known by /dev/tty, the kernel's
// name for it, answering TIOCGPGRP (which only the controlling terminal does): a /dev/tty that
// is missing, refused, or not that terminal (a container's /dev, a bind of /dev/null) is no
// evidence of one, and the command gets its session. Opening it reads nothing and takes no
// terminal (O_NOCTTY, O_NONBLOCK). setsid fails where this process leads a process group or
// its session (a caller that made it a group's leader, or exec'd it as its session's leader):
// the exec path stands a process in front there (stands_in_front, run_in_front).
bool has_controlling_terminal() noexcept {
    const long tty = call_with(SYS_openat, AT_FDCWD, "/dev/tty", O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    int group = 0;
    const bool terminal = tty >= 0 && call_with(SYS_ioctl, tty, TIOCGPGRP, &group) == 0;
    if (tty >= 0) call_with(SYS_close, tty);
    return terminal;
}

void leave_callers_session() noexcept {
    if (!has_controlling_terminal()) call_with(SYS_setsid);
}

// Every descriptor above 2 close-on-exec, but `keep`: 0 or -errno. Before Linux 5.11 (no
// close_range) the open descriptors are listed from /proc/self/fd, not every possible number
// tried: the same cost whatever RLIMIT_NOFILE is.
long pass_only(const std::vector<int>& keep) noexcept {
    if (call_with(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        const long dir = call_with(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) return dir;
        const long listed = linux_sys::for_each_entry(dir, [dir](const char* name) {
            const long fd = linux_sys::whole_number(name);
            if (fd > 2 && fd != dir) call_with(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
            return true;
        });
        call_with(SYS_close, dir);
        if (listed < 0) return listed;
    }
    for (int fd : keep) call_with(SYS_fcntl, fd, F_SETFD, 0);
    return 0;
}

}  // namespace

Launch Launch::failed(const char* error_code, const std::string& message, int status) {
    Launch launch;
    launch.failure_ = std::string("dsh-confine: error: ") + error_code + ": " + message + "\n";
    launch.failureStatus_ = status;
    return launch;
}

Launch prepare_launch(const std::vector<std::string>& argv, int status_fd, const std::vector<int>& keep,
                      const char* error_code, const linux_guard::GuardOptions& guard, int ruleset) {
    for (int fd : keep)
        if (fd < 3 || fcntl(fd, F_GETFD) < 0) {
            if (ruleset >= 0) close(ruleset);
            return Launch::failed(error_code, "--keep-fd " + std::to_string(fd) + ": not an open descriptor above 2");
        }
    Launch launch;
    launch.errorCode_ = error_code;
    launch.ruleset_ = ruleset;
    launch.guard_ = linux_guard::guard_program(guard);
    const posix::ProgramLookup program = posix::resolve_program(argv.front());
    launch.found_ = program.status != posix::Lookup::NotFound;
    launch.program_ = program.path;
    auto args = std::make_shared<std::vector<std::string>>(argv);
    for (const std::string& arg : *args) launch.argv_.push_back(const_cast<char*>(arg.c_str()));
    launch.argv_.push_back(nullptr);
    launch.args_ = std::move(args);
    launch.statusFd_ = status_fd;
    launch.keep_ = keep;
    return launch;
}

int Launch::run() const noexcept {
    if (!failure_.empty()) {
        call_with(SYS_write, 2, failure_.data(), failure_.size());
        return failureStatus_;
    }
    leave_callers_session();
    if (const long set = prctl_raw(PR_SET_NO_NEW_PRIVS, 1); set != 0) return step_failed(errorCode_, "no_new_privs", set);
    sock_fprog program{static_cast<unsigned short>(guard_.size()), const_cast<sock_filter*>(guard_.data())};
    if (const long set = call_with(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0); set != 0)
        return step_failed(errorCode_, "seccomp filter for the terminal", set);
    const char* step = nullptr;
    if (const long dropped = drop_capabilities(step); dropped != 0) return step_failed(errorCode_, step, dropped);
    if (ruleset_ >= 0) {
        if (const long restricted = call_with(SYS_landlock_restrict_self, ruleset_, 0); restricted != 0)
            return step_failed(errorCode_, "landlock_restrict_self", restricted);
        call_with(SYS_close, ruleset_);
    }
    if (!found_) {
        if (statusFd_ >= 0) call_with(SYS_write, statusFd_, "SF", 2);  // reached the command, which is missing
        say({"dsh-confine: error: COMMAND_NOT_FOUND: ", argv_.front(), ": not found\n"});
        return 127;
    }
    if (const long passed = pass_only(keep_); passed != 0) return step_failed(errorCode_, "/proc/self/fd", passed);
    if (statusFd_ >= 0) {
        // Closed by a successful execve, unless the caller passes it on to the command.
        if (std::find(keep_.begin(), keep_.end(), statusFd_) == keep_.end()) call_with(SYS_fcntl, statusFd_, F_SETFD, FD_CLOEXEC);
        call_with(SYS_write, statusFd_, "S", 1);
    }
    proxy::arm_for_exec();  // a proxy kept in this image serves once it is left (proxy_companion.hpp)
    const long error = -call_with(SYS_execve, program_.c_str(), argv_.data(), environ);
    proxy::disarm_after_exec();
    if (statusFd_ >= 0) call_with(SYS_write, statusFd_, "F", 1);
    say({"dsh-confine: error: COMMAND_NOT_EXECUTABLE: ", argv_.front(), ": ", error_text(error), "\n"});
    return error == ENOENT ? 127 : 126;
}

long drop_all_capabilities() noexcept {
    const char* step = nullptr;
    return drop_capabilities(step);
}

bool has_sys_admin() {
    __user_cap_data_struct data[2] = {};
    return capabilities(data) == 0 && (data[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32))) != 0;
}

// --- a process in front of the command -------------------------------------------------------

namespace {

volatile sig_atomic_t g_command = 0;
constexpr int kPassedOn[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

// A signal some process sent (kill, sigqueue, tgkill), not one the kernel sent this process's
// group (a terminal's, an orphaned group's): that one is not the command's business.
void pass_on(int sig, siginfo_t* info, void*) {
    if (g_command <= 0 || (info->si_code != SI_USER && info->si_code != SI_QUEUE && info->si_code != SI_TKILL)) return;
    const int saved = errno;
    if (kill(-g_command, sig) != 0) kill(g_command, sig);
    errno = saved;
}

// Whether the procfs on top at /proc in `mountinfo` (/proc/self/mountinfo's text) leaves out of
// its listing the processes the reader cannot trace: hidepid=invisible (2) or ptraceable (4).
bool proc_hides_processes(std::string_view mountinfo) {
    bool hides = false;
    for (const cgroup::Mount& mount : cgroup::parse_mountinfo(mountinfo, {"proc"})) {
        if (mount.mountPoint != "/proc") continue;
        hides = std::any_of(mount.options.begin(), mount.options.end(), [](const std::string& option) {
            return option == "hidepid=2" || option == "hidepid=invisible" || option == "hidepid=4" || option == "hidepid=ptraceable";
        });
    }
    return hides;
}

// Whether a process other than this one belongs to session `sid`, as /proc lists them (one that
// hidepid hides is not seen: see proc_hides_processes): one getsid(2) for each, no file opened, so a
// host of many processes costs a lone session's leader little. Unknown counts as yes.
bool others_in_session(pid_t sid) {
    const long proc = linux_sys::call_with(SYS_openat, AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc < 0) return true;
    // A /proc that is no procfs (a tmpfs a caller laid over it) lists what it was given.
    struct statfs fs {};
    if (fstatfs(static_cast<int>(proc), &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) {
        linux_sys::call_with(SYS_close, proc);
        return true;
    }
    const long self = getpid();
    bool found = false;
    const long listed = linux_sys::for_each_entry(proc, [&](const char* name) {
        const long pid = linux_sys::whole_number(name);
        if (pid > 0 && pid != self && linux_sys::call_with(SYS_getsid, pid) == sid) found = true;
        return !found;
    });
    linux_sys::call_with(SYS_close, proc);
    return found || listed < 0;
}

}  // namespace

void pass_signals_on(pid_t command, const sigset_t& mask) {
    g_command = command;
    struct sigaction action {};
    action.sa_sigaction = pass_on;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigset_t passed = mask;
    for (int sig : kPassedOn) {
        sigaction(sig, &action, nullptr);
        sigdelset(&passed, sig);  // a caller's blocked SIGTERM, kept across execve, must not stay so here
    }
    sigprocmask(SIG_SETMASK, &passed, nullptr);
}

void stop_passing_signals() { g_command = 0; }

void end_as(int status) {
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    const int sig = WTERMSIG(status);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    raise(sig);
    _exit(128 + sig);
}

bool stands_in_front() {
    const pid_t self = getpid();
    if (getpgid(0) != self || has_controlling_terminal()) return false;
    if (getsid(0) != self || others_in_session(self)) return true;
    // Alone as far as /proc shows; but where /proc hides the processes this one cannot trace
    // (hidepid=invisible or ptraceable: another user's, a non-dumpable one of its own), the
    // session may hold some it cannot see, and it stands in front (unreadable counts as hidden).
    // /proc/self/mountinfo is the kernel's. So where /proc is another PID namespace's (a
    // container's that left the host's mounted): its numbers are not this namespace's.
    char link[32] = {};
    const ssize_t length = readlink("/proc/self", link, sizeof link - 1);
    if (length <= 0 || std::string(link, static_cast<std::size_t>(length)) != std::to_string(self)) return true;
    std::ifstream in("/proc/self/mountinfo");
    const std::string mountinfo{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return !in || proc_hides_processes(mountinfo);
}

namespace {

// What the command's process needs from its front, read before its execve.
struct Behind {
    const Launch* launch;
    pid_t front;
    sigset_t mask;                 // the caller's
    struct sigaction childSignal;  // the caller's SIGCHLD disposition
};

// The command's process behind the front, until its execve: it dies with the front (a front
// killed by SIGKILL cannot pass that on), gets the caller's SIGCHLD and mask back, and runs the
// launch, which makes system calls only (it may share the front's memory, as posix_spawn's
// child does).
__attribute__((no_sanitize("address"))) int behind_front(void* arg) {
    const auto* b = static_cast<const Behind*>(arg);
    linux_sys::call_with(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (linux_sys::call(SYS_getppid) != b->front) linux_sys::call_with(SYS_exit_group, 125);
    sigaction(SIGCHLD, &b->childSignal, nullptr);
    pthread_sigmask(SIG_SETMASK, &b->mask, nullptr);
    linux_sys::call_with(SYS_exit_group, b->launch->run());
    return 125;
}

// The command's process's stack where it shares the front's memory: Launch::run and what it
// calls use a few KiB; a guard page below.
constexpr std::size_t kBehindStack = std::size_t{256} * 1024;
constexpr std::size_t kGuard = 4096;

}  // namespace

pid_t start_sharing_memory(int (*fn)(void*), void* arg) {
    if (!linux_sys::kClonesShareMemory) {
        const pid_t child = fork();
        if (child == 0) _exit(fn(arg));
        return child;
    }
    void* stack = mmap(nullptr, kBehindStack + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return -1;
    mprotect(stack, kGuard, PROT_NONE);
    const pid_t child = clone(fn, static_cast<char*>(stack) + kGuard + kBehindStack, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
    const int error = errno;
    munmap(stack, kBehindStack + kGuard);  // the clone has executed its program, or ended
    errno = error;
    return child;
}

int run_in_front(const Launch& launch) {
    sigset_t all, before;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &before);
    // The front waits for the command, which a caller's ignored SIGCHLD would have reaped
    // unseen; the command gets the caller's disposition back.
    struct sigaction child_default {};
    child_default.sa_handler = SIG_DFL;
    Behind behind{&launch, getpid(), before, {}};
    sigaction(SIGCHLD, &child_default, &behind.childSignal);
    const pid_t child = start_sharing_memory(behind_front, &behind);
    const int started = errno;
    if (child < 0) {
        sigaction(SIGCHLD, &behind.childSignal, nullptr);
        sigprocmask(SIG_SETMASK, &before, nullptr);
        return Launch::failed("LANDLOCK",
                              std::string("starting the command behind a process in front (this process leads its process "
                                          "group): ") + std::strerror(started))
            .run();
    }
    pass_signals_on(child, before);
    drop_all_capabilities();
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // Holding nothing of the call's: a reader of the caller's pipes, the proof of start's, sees
    // its end when the command's side closes.
    if (const int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    linux_sys::call_with(SYS_close_range, 3U, ~0U, 0);
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) _exit(125);
    stop_passing_signals();  // its pid is free now: a signal that comes late is not passed on to another
    end_as(status);
}

}  // namespace dsh::linux_runner
