#include "supervise.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__linux__)
#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>

#include <new>

#include "../linux/host.hpp"
#include "../linux/raw_syscall.hpp"
#endif


#include "process.hpp"

namespace dsh::posix {
namespace {

// The buffer stderr is read into. Not in supervise's frame, where 64 KiB would put every call
// below it on stack pages touched for the first time, nor on the heap: only what is read into
// it is touched (nothing, when the command writes nothing to stderr). One call at a time.
char g_err_buffer[65536];

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};
#if defined(__linux__)
// The other signals below 32 that would end dsh-confine as they found it (their default action),
// and the real-time ones (SignalWatch::start): it ends the tree on one instead, so that what is
// checked at the end is checked (bubblewrap's git directories), then dies of it
// (SupervisedRun::endedBySignal).
constexpr int kEnding[] = {SIGALRM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR,
                           SIGSYS,  SIGILL,    SIGTRAP, SIGABRT, SIGBUS,    SIGFPE,  SIGSEGV};
#endif
#if !defined(__linux__)
constexpr std::size_t kForwardedCount = sizeof kForwarded / sizeof kForwarded[0];
#endif

// The caller's signal state, which the command gets: its mask, and the dispositions dsh-confine
// changes while it watches (SIGPIPE, and SIGCHLD where the caller ignored it).
struct CallerSignals {
    sigset_t mask;
    struct sigaction pipe, chld;
#if !defined(__linux__)
    struct sigaction forwarded[kForwardedCount];
#endif
};

#if !defined(__linux__)
std::atomic<unsigned> g_pending{0};
int g_wake[2] = {-1, -1};

// Whether a process sent the signal (kill, sigqueue), rather than the terminal or the kernel.
// What kill(2) puts in si_code has varied on macOS; a sender's pid is there either way, and a
// signal the terminal raised has none.
bool sent_by_a_process(const siginfo_t* info) {
    return info == nullptr || info->si_pid != 0 || info->si_code == SI_USER || info->si_code == SI_QUEUE;
}

// A signal some process sent us is noted here and forwarded by the main loop, which knows
// the command's pid. One the terminal raised has already reached the command, which shares
// our process group, so it is not sent twice. SIGCHLD only wakes the loop, which then reaps:
// a self-pipe, so the wait for a child needs nothing beyond POSIX (no pidfd, no kqueue).
void note_signal(int sig, siginfo_t* info, void*) {
    const int saved = errno;
    if (sig != SIGCHLD && sent_by_a_process(info)) g_pending.fetch_or(1U << sig);
    if (g_wake[1] >= 0) (void)!write(g_wake[1], "s", 1);
    errno = saved;
}
#endif

// Appends what `fd` holds now, without waiting for more; false once it reached its end.
bool read_available(int fd, std::string& into) {
    if (fd < 0) return false;
    char buffer[512];
    for (;;) {
        pollfd ready{fd, POLLIN, 0};
        if (poll(&ready, 1, 0) <= 0) return true;
        const ssize_t n = read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        into.append(buffer, static_cast<std::size_t>(n));
    }
}

#if !defined(__linux__)
void drain(int fd) {
    char buffer[256];
    while (read(fd, buffer, sizeof buffer) > 0) {
    }
}
#endif

#if defined(__linux__)
// The first child the kernel lists for `pid`, or 0.
pid_t first_child(pid_t pid) {
    long child = 0;
    return children_of(pid, &child, 1) == 1 ? static_cast<pid_t>(child) : 0;
}
#endif

}  // namespace

// The process a forwarded signal is for. Under bubblewrap that is not bwrap (which dies of
// most signals without passing them on) nor the sandbox's pid 1 (which ignores them), but
// pid 1's child: the command itself, bwrap's grandchild. Until it exists, the runner.
pid_t signal_target(pid_t runner, bool grandchild) {
#if defined(__linux__)
    if (grandchild)
        if (const pid_t init = first_child(runner))
            if (const pid_t command = first_child(init)) return command;
#else
    (void)grandchild;
#endif
    return runner;
}

namespace {

// Whether descriptors 1 and 2 are one open file: the same open file description where the kernel
// can say (kcmp), else the same file.
bool stdout_is_stderr() {
#if defined(__linux__)
    const long same = syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 1, 2);
    if (same >= 0) return same == 0;
#endif
    struct stat out {}, err {};
    return fstat(1, &out) == 0 && fstat(2, &err) == 0 && out.st_dev == err.st_dev && out.st_ino == err.st_ino;
}

bool write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

std::optional<bool> judge_start(StartProof proof, const std::string& status) {
    if (proof == StartProof::ExecMarker) return !status.empty() && status.front() == 'S';
    return std::nullopt;
}

// The keeper's reports to dsh-confine, one fixed-size record each: the command's pid once it
// is started, on a pipe of its own that dsh-confine reads only when it has a signal to forward
// (so the report does not wake it), then the command's wait status once it and all it left are
// gone, on the pipe dsh-confine watches.
struct KeeperReport {
    char kind;  // 'P': pid, 'W': wait status
    int value;
};

bool read_report(int fd, KeeperReport& report) {
    std::size_t got = 0;
    auto* bytes = reinterpret_cast<char*>(&report);
    while (got < sizeof report) {
        const ssize_t n = read(fd, bytes + got, sizeof report - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += static_cast<std::size_t>(n);
    }
    return true;
}

// What the runner's process is given: its argv (or the code to run in its place), where its
// stderr goes, the start-proof descriptors it alone inherits, and the signal state to restore.
struct RunnerSetup {
    char* const* args;
    const Launch* launch;  // the runner's own code, prepared (null: exec args)
    bool merge;  // stdout is stderr: both go to the stderr pipe
    int errWrite, statusWrite;
    int passWrite;  // SuperviseOptions::passFd, inherited by the runner alone (-1: none)
    const CallerSignals* caller;
    const int* join;  // cgroup.procs files to write "0" to (SuperviseOptions::joinFds)
    std::size_t joinCount;
    const ResourceLimit* limits;
    std::size_t limitCount;
};

// What the keeper is given: the runner's setup, its own ends of the pipes to dsh-confine, and
// dsh-confine's ends, which it closes (-1: none).
struct KeeperSetup {
    RunnerSetup runner;
    int alive, pidReport, report;
    int others[8];
};

// What runs on a stack of its own (the runner's clone, the keeper's) is left out of
// AddressSanitizer's instrumentation: ASan takes a stack it did not make for a stack overflow
// and warns on stderr.
#if defined(__GNUC__)
#define DSH_OWN_STACK __attribute__((no_sanitize("address")))
#else
#define DSH_OWN_STACK
#endif

#if !defined(__linux__)
// SIGCHLD open whatever the caller's mask had: the waits depend on it.
void open_sigchld(const sigset_t& previous) {
    sigset_t waiting = previous;
    sigdelset(&waiting, SIGCHLD);
    sigprocmask(SIG_SETMASK, &waiting, nullptr);
}
#endif

void block_all_signals() {
    sigset_t all;
    sigfillset(&all);
#if defined(__linux__)
    all.__val[0] = ~0UL;  // 32 and 33 too, which the C library's sigset functions leave out
    linux_sys::call_with(SYS_rt_sigprocmask, SIG_SETMASK, &all, nullptr, sizeof all.__val[0]);
#else
    sigprocmask(SIG_SETMASK, &all, nullptr);
#endif
}

// How dsh-confine watches the signals while the command runs. It forwards those a process sent
// it to the command; one the terminal raised has already reached the command, which shares its
// process group, and is not sent twice. It is woken when a child may have ended. SIGPIPE is
// ignored (a reader of its stderr that goes away must not kill it). Every signal is blocked
// while a child is started (hold, release), so none reaches the child before it has set its own.
#if defined(__linux__)
// On Linux the watched signals stay blocked and are read from a signalfd. No handler is
// installed, so no disposition of the caller's changes but SIGPIPE's and an ignored SIGCHLD's
// (the default while dsh-confine waits for its children): the keeper and the runner's process
// inherit the caller's dispositions as they are and have next to nothing to reset. A forwarded
// signal the caller blocked is not watched: it waits, as it waited before.
class SignalWatch {
public:
    // Takes the signals over (SIGCHLD too when `children`: without a keeper, dsh-confine waits
    // for the runner itself); false, errno set, if it cannot.
    bool start(bool children) {
        sigset_t blocked;
        sigemptyset(&blocked);
        for (int sig : kForwarded) sigaddset(&blocked, sig);
        if (children) sigaddset(&blocked, SIGCHLD);
        sigprocmask(SIG_BLOCK, &blocked, &caller_.mask);
        held_ = caller_.mask;
        sigset_t watched;
        sigemptyset(&watched);
        for (int sig : kForwarded) {
            sigaddset(&held_, sig);
            if (!sigismember(&caller_.mask, sig)) sigaddset(&watched, sig);
        }
        if (children) sigaddset(&held_, SIGCHLD), sigaddset(&watched, SIGCHLD);
        // Those the caller left to their default action and did not block (a fault of this
        // process's own is still delivered: the kernel forces it).
        // The real-time signals too (32 to 64), whose default action ends a process: in the
        // kernel's word of the sets, as the C library's sigset functions leave out 32 and 33
        // (its own, default here: this process starts no thread).
        const auto left_to_default = [&](int sig) {
            if (caller_.mask.__val[0] & (1UL << (sig - 1))) return false;
            if (sig < SIGRTMIN && sig >= 32) return true;
            struct sigaction now {};
            return sigaction(sig, nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) == 0 && now.sa_handler == SIG_DFL;
        };
        std::vector<int> ending(std::begin(kEnding), std::end(kEnding));
        for (int sig = 32; sig <= 64; ++sig) ending.push_back(sig);
        for (int sig : ending) {
            if (!left_to_default(sig)) continue;
            for (sigset_t* set : {&blocked, &held_, &watched}) set->__val[0] |= 1UL << (sig - 1);
        }
        linux_sys::call_with(SYS_rt_sigprocmask, SIG_BLOCK, &blocked, nullptr, sizeof blocked.__val[0]);
        fd_ = signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd_ < 0) {
            const int error = errno;
            sigprocmask(SIG_SETMASK, &caller_.mask, nullptr);
            errno = error;
            return false;
        }
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigemptyset(&ignore.sa_mask);
        sigaction(SIGPIPE, &ignore, &caller_.pipe);
        sigaction(SIGCHLD, nullptr, &caller_.chld);
        if (caller_.chld.sa_handler == SIG_IGN) {
            struct sigaction fallback {};
            fallback.sa_handler = SIG_DFL;
            sigemptyset(&fallback.sa_mask);
            sigaction(SIGCHLD, &fallback, nullptr);
        }
        return true;
    }
    const CallerSignals& caller() const { return caller_; }
    void hold() const { block_all_signals(); }
    void release() const { linux_sys::call_with(SYS_rt_sigprocmask, SIG_SETMASK, &held_, nullptr, sizeof held_.__val[0]); }
    int fd() const { return fd_; }
    int other_fd() const { return -1; }
    // What arrived since: the forwarded signals a process sent (bit N: signal N), and `child` set
    // when a child may have ended.
    unsigned take(bool& child) {
        unsigned pending = 0;
        signalfd_siginfo info[8];
        ssize_t n = 0;
        while ((n = read(fd_, info, sizeof info)) > 0)
            for (std::size_t i = 0; i < static_cast<std::size_t>(n) / sizeof info[0]; ++i) {
                const int sig = static_cast<int>(info[i].ssi_signo);
                if (sig == SIGCHLD) child = true;
                else if (std::find(std::begin(kForwarded), std::end(kForwarded), sig) == std::end(kForwarded)) ending_ = ending_ ? ending_ : sig;
                else if (info[i].ssi_code != SI_KERNEL) pending |= 1U << sig;
            }
        return pending;
    }
    // The first of kEnding that arrived, or 0.
    int ending() const { return ending_; }
    // The caller's state back. What arrived and was not forwarded is dropped, as a handler
    // would have dropped it; SIGPIPE stays ignored (what the caller does next, the report and
    // its last stderr line, must not die of a reader that went away either).
    void stop() {
        bool child = false;
        (void)take(child);
        sigprocmask(SIG_SETMASK, &caller_.mask, nullptr);
        if (caller_.chld.sa_handler == SIG_IGN) sigaction(SIGCHLD, &caller_.chld, nullptr);
        close(fd_);
        fd_ = -1;
    }

private:
    CallerSignals caller_{};
    sigset_t held_{};  // the mask while dsh-confine watches
    int fd_ = -1;
    int ending_ = 0;
};
#else
// Elsewhere (macOS) a handler notes each watched signal and wakes the loop through a pipe.
class SignalWatch {
public:
    bool start(bool /*children*/) {
        if (!make_pipe(g_wake, true)) return false;
        sigset_t blocked;
        sigemptyset(&blocked);
        for (int sig : kForwarded) sigaddset(&blocked, sig);
        sigaddset(&blocked, SIGCHLD);
        sigprocmask(SIG_BLOCK, &blocked, &caller_.mask);
        struct sigaction action {};
        action.sa_sigaction = note_signal;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&action.sa_mask);
        for (std::size_t i = 0; i < kForwardedCount; ++i) sigaction(kForwarded[i], &action, &caller_.forwarded[i]);
        struct sigaction chld = action;
        chld.sa_flags |= SA_NOCLDSTOP;
        sigaction(SIGCHLD, &chld, &caller_.chld);
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        sigemptyset(&ignore.sa_mask);
        sigaction(SIGPIPE, &ignore, &caller_.pipe);
        return true;
    }
    const CallerSignals& caller() const { return caller_; }
    void hold() const { block_all_signals(); }
    void release() const { open_sigchld(caller_.mask); }  // SIGCHLD open until the end
    int fd() const { return g_wake[0]; }
    int other_fd() const { return g_wake[1]; }
    int ending() const { return 0; }
    unsigned take(bool& child) const {
        drain(g_wake[0]);
        child = true;
        return g_pending.exchange(0);
    }
    void stop() {
        for (std::size_t i = 0; i < kForwardedCount; ++i) sigaction(kForwarded[i], &caller_.forwarded[i], nullptr);
        sigaction(SIGCHLD, &caller_.chld, nullptr);
        sigprocmask(SIG_SETMASK, &caller_.mask, nullptr);
        for (int& end : g_wake)
            if (end >= 0) close(end), end = -1;
    }

private:
    CallerSignals caller_{};
};
#endif

#if defined(__linux__)
// On Linux the keeper and the runner's process run beside dsh-confine in its own memory, so
// everything they do is a system call made without the C library's wrappers (raw_syscall.hpp:
// no errno written, no lock, no allocation), on stacks of their own, reading only what
// dsh-confine set up before it started them and leaves alone until the keeper's last report.
using linux_sys::call;
using linux_sys::call_with;

// Before Linux 5.16 a signal that dumps core killed every process sharing the dying one's
// memory: a clone keeper would die with dsh-confine (or with a runner killed before its
// execve) and leave the command's tree behind. There both are forks.
bool clones_here() {
    if (!linux_sys::kClonesShareMemory) return false;
    static const bool recent = [] {
        int major = 0, minor = 0;
        return std::sscanf(linux_host::kernel_release().c_str(), "%d.%d", &major, &minor) == 2 &&
               (major > 5 || (major == 5 && minor >= 16));
    }();
    return recent;
}

[[noreturn]] void exit_now(int status) noexcept {
    call(SYS_exit_group, status);
    __builtin_unreachable();
}

// The kernel's struct sigaction (rt_sigaction), for SIG_DFL and SIG_IGN: no handler, no restorer.
struct KernelSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
};

void set_disposition(int sig, bool ignore) noexcept {
    const KernelSigaction action{ignore ? SIG_IGN : SIG_DFL, 0, nullptr, 0};
    call_with(SYS_rt_sigaction, sig, &action, nullptr, sizeof action.mask);
}

// Appends the decimal digits of `value` (>= 0) at `at`; returns the end.
char* put_number(char* at, long value) noexcept {
    char digits[24];
    int count = 0;
    do digits[count++] = static_cast<char>('0' + value % 10);
    while ((value /= 10) > 0);
    while (count > 0) *at++ = digits[--count];
    return at;
}

// The whole of a small file (up to `size` - 1 bytes), null-terminated; its length, or -1.
long read_small(const char* path, char* into, long size) noexcept {
    const long fd = call_with(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long length = 0;
    for (long n = 0; length < size - 1 && (n = call_with(SYS_read, fd, into + length, size - 1 - length)) > 0;) length += n;
    call_with(SYS_close, fd);
    into[length] = '\0';
    return length;
}

// The numbers in `text`, in order, up to `most`.
int numbers_in(const char* text, long* into, int most) noexcept {
    int count = 0;
    long value = 0;
    bool digit = false;
    for (const char* c = text;; ++c) {
        if (*c >= '0' && *c <= '9') {
            // Past what a long holds (a number in /proc/N/stat no caller reads): kept at the top.
            value = value > (LONG_MAX - 9) / 10 ? LONG_MAX : value * 10 + (*c - '0');
            digit = true;
        } else {
            if (digit && count < most) into[count++] = value;
            value = 0;
            digit = false;
            if (*c == '\0' || count == most) return count;
        }
    }
}

}  // namespace

// The children of `parent` (a single-threaded process) as the kernel lists them
// (/proc/PID/task/PID/children, with CONFIG_PROC_CHILDREN), or without that list every process
// whose parent /proc/N/stat names as it. Up to `most`; kill_leftovers' rounds find the rest.
int children_of(long parent, long* into, int most) noexcept {
    char path[64] = "/proc/";
    char* at = put_number(path + 6, parent);
    std::memcpy(at, "/task/", 6);
    at = put_number(at + 6, parent);
    std::memcpy(at, "/children", 10);
    char text[4096];
    if (read_small(path, text, sizeof text) >= 0) return numbers_in(text, into, most);
    int count = 0;
    const long proc = call_with(SYS_openat, AT_FDCWD, "/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (proc < 0) return 0;
    linux_sys::for_each_entry(proc, [&](const char* name) {
        const long candidate = linux_sys::whole_number(name);
        if (candidate <= 0) return true;
        at = put_number(path + 6, candidate);
        std::memcpy(at, "/stat", 6);
        // "PID (COMM) STATE PPID ...": the parent follows the last ')' and the state.
        if (read_small(path, text, 512) < 0) return true;
        const char* close_paren = std::strrchr(text, ')');
        long found_parent = 0;
        if (close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] != '\0' &&
            numbers_in(close_paren + 3, &found_parent, 1) == 1 && found_parent == parent)
            into[count++] = candidate;
        return count < most;
    });
    call_with(SYS_close, proc);
    return count;
}

namespace {

// Kills and reaps what this process (the keeper, or dsh-confine as bubblewrap's subreaper) has
// as children now: what the command left behind was reparented to it. It is killed and
// reaped, and so is whatever that leaves in turn, until nothing remains. Each round kills the
// children there are now, then waits for each of them: a killed child's own children are
// reparented here when it dies, so the next round finds them. No round sleeps: the waits are
// for events, and the rounds end when a round finds nothing.
//
// The list and the reading of /proc are in a function of their own, whose frame (some 8 KiB) is
// made only when something was left: the usual call touches no stack page beyond the caller's.
//
// Without a keeper, this is dsh-confine itself, which a caller may have exec'd after starting
// processes of its own (a script's background jobs): those are its children too, and not the
// call's. They are listed before the call starts anything (spare_callers_children) and spared.
long g_spared[512];
int g_sparedCount = 0;

__attribute__((noinline)) int kill_children_once(long self) noexcept {
    long found[512];
    const int listed = children_of(self, found, 512);
    int count = 0;
    for (int i = 0; i < listed; ++i)
        if (std::find(g_spared, g_spared + g_sparedCount, found[i]) == g_spared + g_sparedCount) found[count++] = found[i];
    for (int i = 0; i < count; ++i) call(SYS_kill, found[i], SIGKILL);
    for (int i = 0; i < count; ++i)
        while (call_with(SYS_wait4, found[i], nullptr, 0, nullptr) == -EINTR) {
        }
    return count;
}

void spare_callers_children() noexcept { g_sparedCount = children_of(call(SYS_getpid), g_spared, 512); }

void kill_leftovers() noexcept {
    const long self = call(SYS_getpid);
    for (int round = 0; round < 64; ++round) {
        // No child at all (ECHILD): nothing is left, and the kernel's list need not be read.
        // That is the usual end of a round, and of a command that left nothing running.
        long reaped = 0;
        while ((reaped = call_with(SYS_wait4, -1, nullptr, WNOHANG, nullptr)) > 0) {
        }
        if (reaped == -ECHILD || kill_children_once(self) == 0) break;
    }
}

// A line on stderr and status 125 from the runner's process, before the runner ran.
[[noreturn]] void fail_setup(const char* what) noexcept {
    char line[160] = "dsh-confine: error: RUNNER_EXEC: ";
    std::size_t length = std::strlen(line);
    for (const char* c = what; *c != '\0' && length + 2 < sizeof line; ++c) line[length++] = *c;
    line[length++] = '\n';
    call_with(SYS_write, 2, line, length);
    exit_now(125);
}

// Sends `sig` to every process below `root`, from `depth` down (1: its children), as the kernel's
// child lists give them: every thread's, since a process's children may be a thread's. The tree
// is listed first and signalled after, so a parent that dies of the signal does not hide its
// children by their reparenting. A process forked meanwhile may be missed; SIGKILL's rounds
// (kill_leftovers, or bubblewrap's end) are what reach everything.
void signal_descendants(pid_t root, int depth, int sig) {
    std::vector<std::pair<long, int>> tree = {{root, 0}};
    for (std::size_t i = 0; i < tree.size() && tree.size() < 65536; ++i) {
        const auto [pid, level] = tree[i];
        const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
        DIR* threads = opendir(tasks.c_str());
        if (threads == nullptr) continue;
        bool listed = false;
        while (dirent* thread = readdir(threads)) {
            if (thread->d_name[0] == '.') continue;
            char text[4096];
            if (read_small((tasks + "/" + thread->d_name + "/children").c_str(), text, sizeof text) < 0) continue;
            listed = true;
            long children[512];
            const int count = numbers_in(text, children, 512);
            for (int k = 0; k < count; ++k) tree.emplace_back(children[k], level + 1);
        }
        closedir(threads);
        if (!listed) {  // no child lists in this kernel (CONFIG_PROC_CHILDREN): /proc/N/stat's parents
            long children[512];
            const int count = children_of(pid, children, 512);
            for (int k = 0; k < count; ++k) tree.emplace_back(children[k], level + 1);
        }
    }
    for (const auto& [pid, level] : tree)
        if (level >= depth) kill(static_cast<pid_t>(pid), sig);
}

// The runner's process: resets what it inherited and becomes the runner. It dies with its
// parent (parent-death signal), which it checks is still the one that started it. It gets the
// caller's dispositions and mask back: dsh-confine installs no handler (it reads the signals
// it watches from a signalfd), so every disposition it did not change is the caller's, the
// default or ignored, as the command finds it after execve. Only SIGPIPE (ignored while
// dsh-confine watches) and a SIGCHLD the caller ignored (the default while it watches) are set.
[[noreturn]] DSH_OWN_STACK void become_runner(const RunnerSetup& setup, long parent) noexcept {
    call_with(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (call(SYS_getppid) != parent) exit_now(125);
    if (setup.caller->pipe.sa_handler != SIG_IGN) set_disposition(SIGPIPE, false);  // an ignored SIGPIPE would survive the execve
    // An ignored SIGCHLD goes back only where the runner's own code execs the command: a runner
    // that is another program (bubblewrap) waits for its children and hangs if they are reaped
    // unseen, so under it the command gets the default.
    if (setup.launch != nullptr && setup.caller->chld.sa_handler == SIG_IGN) set_disposition(SIGCHLD, true);
    call_with(SYS_rt_sigprocmask, SIG_SETMASK, &setup.caller->mask, nullptr, 8);  // the caller's mask as it was
    call_with(SYS_dup3, setup.errWrite, 2, 0);
    if (setup.merge) call_with(SYS_dup3, setup.errWrite, 1, 0);
    // Into the call's cgroups, and under its rlimits, before anything of the runner runs: the
    // command and all it starts inherit both. Either failing is the runner's failure: nothing runs.
    for (std::size_t i = 0; i < setup.joinCount; ++i)
        if (call_with(SYS_write, setup.join[i], "0", 1) != 1) fail_setup("cannot join the call's cgroup");
    for (std::size_t i = 0; i < setup.limitCount; ++i) {
        const unsigned long long value[2] = {setup.limits[i].soft, setup.limits[i].hard};
        if (call_with(SYS_prlimit64, 0, setup.limits[i].resource, value, nullptr) != 0)
            fail_setup("cannot set the call's resource limits");
    }
    if (setup.statusWrite >= 0) call_with(SYS_fcntl, setup.statusWrite, F_SETFD, 0);  // inherited by the runner only
    if (setup.passWrite >= 0) call_with(SYS_fcntl, setup.passWrite, F_SETFD, 0);
    if (setup.launch != nullptr) exit_now((*setup.launch)());  // system calls only
    call_with(SYS_execve, setup.args[0], setup.args, environ);
    const char* message = "dsh-confine: error: RUNNER_EXEC: cannot execute the runner\n";
    call_with(SYS_write, 2, message, std::strlen(message));
    exit_now(125);
}

struct RunnerStart {
    const RunnerSetup* setup;
    long parent;
};

DSH_OWN_STACK int runner_entry(void* start) {
    const auto* what = static_cast<const RunnerStart*>(start);
    become_runner(*what->setup, what->parent);
}

// Starts the runner's process and returns its pid (< 0 if it could not be started). Every
// signal is blocked in the caller first. The runner's process is started as posix_spawn starts
// a program: a clone that shares the caller's memory, on a stack of its own, while the caller
// waits for its execve (CLONE_VM | CLONE_VFORK). No page tables are copied, no address space is
// made and torn down, and neither side takes copy-on-write faults afterwards; the child only
// reads the caller's memory and makes nothing but system calls (the launch of a runner whose
// code is this program's is made of them too). Under AddressSanitizer (kClonesShareMemory false) a runner
// of our own code gets a forked copy instead.
long start_runner(const RunnerSetup& setup) {
    RunnerStart start{&setup, call(SYS_getpid)};
    if (setup.launch == nullptr || clones_here()) {
        // The clone's stack lies in this frame, which stays put while the clone runs (the
        // caller waits for its execve), and is left uninitialized: the clone touches only the
        // few frames it uses at the top.
        alignas(16) char stack[std::size_t{64} * 1024];
        // glibc's clone() writes errno only when it fails, and a keeper's start of the runner
        // failing ends the call anyway (the keeper exits 125 without a report).
        return clone(runner_entry, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
    }
    const pid_t child = fork();
    if (child == 0) become_runner(setup, start.parent);
    return child;
}

// The keeper sits between dsh-confine and the runner. It is the subreaper of the confined tree,
// so whatever the command leaves behind is reparented to it, and it outlives dsh-confine: when
// dsh-confine dies, even of SIGKILL, the `alive` pipe reads end-of-file and the keeper kills the
// whole tree before it exits. (The runner also dies with the keeper, by its parent-death
// signal.) Every signal stays blocked in it, as dsh-confine blocked them before starting it:
// those dsh-confine forwards, which are for the command, never reach it, and SIGCHLD is read
// from a signalfd. It has dsh-confine's dispositions: SIGPIPE ignored (dsh-confine gone, the
// reports fail and the keeper goes on), SIGCHLD not (an ignored SIGCHLD would reap the command
// unseen). It keeps its copy of the stderr pipe's writing end until its last report, so that
// dsh-confine is woken once at the end, by the report, and not first by the end of stderr. It
// is a clone that shares dsh-confine's memory (not its descriptors nor its signal
// dispositions), on a stack of its own, or under AddressSanitizer a forked copy.
//
// Only the subreaper comes before the runner's start (the command may leave orphans from its
// first instant). The rest of its setup comes after, while the runner works on (or once it has
// exec'd the command): the runner starts sooner, and it loses nothing by inheriting dsh-
// confine's ends first, all close-on-exec. A SIGCHLD meanwhile stays pending, blocked, and the
// signalfd made afterwards reads it.
[[noreturn]] DSH_OWN_STACK void keep(const KeeperSetup& keeper) noexcept {
    call_with(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    const long command = start_runner(keeper.runner);
    for (int fd : keeper.others)
        if (fd >= 0) call(SYS_close, fd);
    const unsigned long chld = 1UL << (SIGCHLD - 1);
    const long wake = call_with(SYS_signalfd4, -1, &chld, sizeof chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (command < 0) exit_now(125);
    if (wake < 0) {  // the command may run already: it and what it started go, as at any end
        call(SYS_kill, command, SIGKILL);
        kill_leftovers();
        exit_now(125);
    }
    if (keeper.runner.statusWrite >= 0) call(SYS_close, keeper.runner.statusWrite);
    if (keeper.runner.passWrite >= 0) call(SYS_close, keeper.runner.passWrite);
    const KeeperReport started{'P', static_cast<int>(command)};
    call_with(SYS_write, keeper.pidReport, &started, sizeof started);

    int wait_status = 0;
    bool reaped = call_with(SYS_wait4, command, &wait_status, WNOHANG, nullptr) == command;
    while (!reaped) {
        pollfd fds[2] = {{keeper.alive, POLLIN, 0}, {static_cast<int>(wake), POLLIN, 0}};
        const long ready = call_with(SYS_ppoll, fds, 2, nullptr, nullptr, 0);
        if (ready < 0 && ready != -EINTR) break;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) break;  // dsh-confine is gone
        if (fds[1].revents & POLLIN) {
            char drained[512];
            while (call_with(SYS_read, wake, drained, sizeof drained) > 0) {
            }
        }
        if (call_with(SYS_wait4, command, &wait_status, WNOHANG, nullptr) == command) reaped = true;
    }
    if (!reaped) {
        // dsh-confine is gone, or ends the tree (a timeout's SIGKILL): the command goes first, and
        // its status is still the run's.
        call(SYS_kill, command, SIGKILL);
        long waited = 0;
        while ((waited = call_with(SYS_wait4, command, &wait_status, 0, nullptr)) == -EINTR) {
        }
        reaped = waited == command;
    }
    kill_leftovers();
    if (reaped) {
        const KeeperReport ended{'W', wait_status};
        call_with(SYS_write, keeper.report, &ended, sizeof ended);
    }
    exit_now(0);
}

DSH_OWN_STACK int keeper_entry(void* setup) { keep(*static_cast<const KeeperSetup*>(setup)); }

// The keeper's mapping: a guard page, its stack, its setup at the top (the keeper and the runner's
// process use about 80 KiB, of which they touch a few pages). Never unmapped once the keeper
// runs: it may still be making its last system calls when dsh-confine is done.
constexpr std::size_t kKeeperMapping = std::size_t{256} * 1024;
constexpr std::size_t kGuard = 4096;

// Starts the keeper: a clone sharing this memory (CLONE_VM, with its own descriptor table and
// signal dispositions), or a fork (under AddressSanitizer, or before Linux 5.16). Every signal
// is blocked here first.
long start_keeper(const KeeperSetup& setup) {
    if (!clones_here()) {
        const pid_t child = fork();
        if (child == 0) keep(setup);
        return child;
    }
    void* mapping = mmap(nullptr, kKeeperMapping, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mapping == MAP_FAILED) return -1;
    char* base = static_cast<char*>(mapping);
    if (mprotect(base, kGuard, PROT_NONE) != 0) {
        munmap(mapping, kKeeperMapping);
        return -1;
    }
    // The setup lies right above the stack's start, in the page the keeper's first frames use:
    // on a host where each first touch of a page is costly, one page fewer.
    constexpr std::size_t kSetupSpace = (sizeof(KeeperSetup) + 63) & ~std::size_t{63};
    auto* copy = new (base + kKeeperMapping - kSetupSpace) KeeperSetup(setup);
    const long keeper = clone(keeper_entry, base + kKeeperMapping - kSetupSpace, CLONE_VM | SIGCHLD, copy);
    if (keeper < 0) munmap(mapping, kKeeperMapping);
    return keeper;
}
#else
// Elsewhere (macOS) the keeper and the runner's process are forked copies. There is no
// subreaper: what the command left behind went to launchd and is out of the keeper's reach, so
// it only reaps (docs/backends/macos.md).
void kill_leftovers() {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
}

// The runner's process: resets what it inherited and becomes the runner.
[[noreturn]] void become_runner(const RunnerSetup& setup, pid_t parent) {
    if (getppid() != parent) _exit(125);
    close(g_wake[0]);
    close(g_wake[1]);
    for (std::size_t i = 0; i < kForwardedCount; ++i) sigaction(kForwarded[i], &setup.caller->forwarded[i], nullptr);
    sigaction(SIGCHLD, &setup.caller->chld, nullptr);
    sigaction(SIGPIPE, &setup.caller->pipe, nullptr);  // an ignored SIGPIPE would survive the execve
    sigprocmask(SIG_SETMASK, &setup.caller->mask, nullptr);  // the runner gets the caller's mask as it was
    dup2(setup.errWrite, 2);
    if (setup.merge) dup2(setup.errWrite, 1);
    for (std::size_t i = 0; i < setup.limitCount; ++i) {
        const struct rlimit value = {static_cast<rlim_t>(setup.limits[i].soft), static_cast<rlim_t>(setup.limits[i].hard)};
        if (setrlimit(setup.limits[i].resource, &value) != 0) {
            const char* message = "dsh-confine: error: RUNNER_EXEC: cannot set the call's resource limits\n";
            (void)!write(2, message, std::strlen(message));
            _exit(125);
        }
    }
    if (setup.statusWrite >= 0) fcntl(setup.statusWrite, F_SETFD, 0);  // inherited by the runner only
    if (setup.passWrite >= 0) fcntl(setup.passWrite, F_SETFD, 0);
    if (setup.launch != nullptr) {
        // The runner's own code: its stdio buffers start empty (the caller flushed before
        // forking), and exit is _exit, as after an execve.
        int status = 125;
        try {
            status = (*setup.launch)();
        } catch (...) {  // never back into the caller's code, which this process is a copy of
        }
        std::fflush(nullptr);
        _exit(status);
    }
    execv(setup.args[0], setup.args);
    const char* message = "dsh-confine: error: RUNNER_EXEC: cannot execute the runner\n";
    (void)!write(2, message, std::strlen(message));
    _exit(125);
}

pid_t start_runner(const RunnerSetup& setup) {
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child == 0) become_runner(setup, parent);
    return child;
}

// The keeper (see the Linux one above): it ignores the signals dsh-confine forwards, which are
// for the command, and kills what it can of the tree when dsh-confine goes.
[[noreturn]] void keep(const KeeperSetup& keeper) {
    for (int fd : keeper.others)
        if (fd >= 0) close(fd);
    // The keeper's own wake pipe: SIGCHLD (the handler is inherited, still blocked) says the
    // command may have ended.
    if (!make_pipe(g_wake, true)) _exit(125);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    for (int sig : kForwarded)
        if (sig != SIGWINCH) sigaction(sig, &ignore, nullptr);

    const pid_t command = start_runner(keeper.runner);
    open_sigchld(keeper.runner.caller->mask);
    if (command < 0) _exit(125);
    close(keeper.runner.errWrite);
    if (keeper.runner.statusWrite >= 0) close(keeper.runner.statusWrite);
    if (keeper.runner.passWrite >= 0) close(keeper.runner.passWrite);
    const KeeperReport started{'P', command};
    (void)!write(keeper.pidReport, &started, sizeof started);

    int wait_status = 0;
    bool reaped = waitpid(command, &wait_status, WNOHANG) == command;
    while (!reaped) {
        pollfd fds[2] = {{keeper.alive, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
        const int ready = poll(fds, 2, -1);
        if (ready < 0 && errno != EINTR) break;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) break;  // dsh-confine is gone
        if (fds[1].revents & POLLIN) drain(g_wake[0]);
        if (waitpid(command, &wait_status, WNOHANG) == command) reaped = true;
    }
    if (!reaped) {
        kill(command, SIGKILL);  // dsh-confine is gone, or ends the tree: the command's status is still the run's
        pid_t waited = 0;
        while ((waited = waitpid(command, &wait_status, 0)) < 0 && errno == EINTR) {
        }
        reaped = waited == command;
    }
    kill_leftovers();
    if (reaped) {
        const KeeperReport ended{'W', wait_status};
        (void)!write(keeper.report, &ended, sizeof ended);
    }
    _exit(0);
}

pid_t start_keeper(const KeeperSetup& setup) {
    const pid_t child = fork();
    if (child == 0) keep(setup);
    return child;
}
#endif

}  // namespace

std::vector<ResourceLimit> rlimits_for(const std::vector<LimitEnforcement>& enforcement) {
    std::vector<ResourceLimit> out;
    for (const auto& e : enforcement) {
        if (e.mechanism != LimitMechanism::Rlimit) continue;
        if (e.name == LimitName::Memory) out.push_back({RLIMIT_AS, e.value, e.value});
        if (e.name == LimitName::Fsize) out.push_back({RLIMIT_FSIZE, e.value, e.value});
        if (e.name == LimitName::Cpu) {
            const unsigned long long seconds = (e.value + 999) / 1000;
            out.push_back({RLIMIT_CPU, seconds, seconds + 1});
        }
    }
    return out;
}

SupervisedRun supervise(std::vector<std::string> argv, const SuperviseOptions& options,
                        const std::function<void(std::string_view)>& on_stderr) {
    SupervisedRun run;
    using Clock = std::chrono::steady_clock;
    // The clock is read only when the duration or a deadline is wanted: its first read touches a
    // page too.
    const bool clocked = options.timed || options.timeout || options.watch;
    const auto began = clocked ? Clock::now() : Clock::time_point{};
#if defined(__linux__)
    const bool direct = options.runnerEndsTree;
#else
    const bool direct = false;  // no subreaper to wait for what the runner leaves
#endif
    int err_pipe[2] = {-1, -1}, status_pipe[2] = {-1, -1}, alive[2] = {-1, -1}, report[2] = {-1, -1},
        pid_report[2] = {-1, -1};
    int pass = options.passFd;  // ours to close
    const auto close_pipes = [&] {
        for (int* pair : {err_pipe, status_pipe, alive, report, pid_report})
            for (int i = 0; i < 2; ++i)
                if (pair[i] >= 0) close(pair[i]), pair[i] = -1;
        if (pass >= 0) close(pass), pass = -1;
    };
    const auto pipe_failed = [&] {
        run.spawnError = std::string("pipe: ") + std::strerror(errno);
        close_pipes();
        return run;
    };
    if (!make_pipe(err_pipe)) return pipe_failed();
    if (options.proof != StartProof::None) {
        if (!make_pipe(status_pipe)) return pipe_failed();
        argv[static_cast<std::size_t>(options.statusFdSlot)] = std::to_string(status_pipe[1]);
    }
    if (!direct && (!make_pipe(alive) || !make_pipe(report) || !make_pipe(pid_report))) return pipe_failed();
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    // A runner of our own code is prepared here, before any process is started and before the
    // signals are taken over (a Ctrl-C meanwhile ends this process, as before a call starts):
    // all that may allocate or fail is done in this process, and the runner's process only
    // runs the launch. It stays here, untouched, until the keeper's last report.
    Launch launch;
    if (options.prepareHere) {
        try {
            launch = options.prepareHere(static_cast<int>(argv.size()), args.data());
        } catch (...) {  // the preparation reports its own failures; this is the last guard
            launch = [] { return 125; };
        }
    }

    SignalWatch signals;
    if (!signals.start(direct)) {
        run.spawnError = std::string("signals: ") + std::strerror(errno);
        close_pipes();
        return run;
    }
    run.merged = stdout_is_stderr();
    std::fflush(nullptr);  // nothing buffered is written twice by a child that returns to C++
    const RunnerSetup runner{args.data(),          options.prepareHere ? &launch : nullptr,
                             run.merged,           err_pipe[1],
                             status_pipe[1],       pass,
                             &signals.caller(),
                             options.joinFds.data(), options.joinFds.size(),
                             options.limits.data(), options.limits.size()};
    pid_t pid = -1;  // the keeper, or without one the runner itself
    if (direct) {
#if defined(__linux__)
        // No keeper: the runner ends the command's tree itself when it ends, and dies with
        // dsh-confine (bubblewrap's pid namespace and --die-with-parent: the sandbox's pid 1
        // dies with bubblewrap, and the kernel kills everything in its namespace). dsh-confine
        // becomes the subreaper so that pid 1 comes to it, and it waits for that namespace to
        // be gone before it answers.
        spare_callers_children();
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
        if (options.closeAllBut) close_on_exec_except(*options.closeAllBut);
        signals.hold();
        pid = start_runner(runner);
    } else {
        // Descriptors above 2 that the runner must not inherit are marked here, for the keeper's
        // copy of the table (a runner that closes nothing itself: macOS).
        if (options.closeAllBut) close_on_exec_except(*options.closeAllBut);
        const KeeperSetup keeper{runner,
                                 alive[0],
                                 pid_report[1],
                                 report[1],
                                 {alive[1], pid_report[0], report[0], err_pipe[0], status_pipe[0], signals.fd(),
                                  signals.other_fd(), options.watchFd}};
        signals.hold();
        pid = start_keeper(keeper);
    }
    signals.release();
    if (pid < 0) {
        run.spawnError = std::string("fork: ") + std::strerror(errno);
        signals.stop();
        close_pipes();
        return run;
    }
    run.spawned = true;
    // The child's ends (close_pipes closes the rest at the end).
    for (int* end : {&alive[0], &pid_report[1], &report[1], &err_pipe[1], &status_pipe[1], &pass})
        if (*end >= 0) close(*end), *end = -1;

    // Without a keeper, the runner is the command as far as forwarded signals go; with one,
    // the keeper reports the command's pid once it is started (forwarded signals never reach
    // the keeper), then the command's wait status once it and whatever it left behind are gone.
    pid_t command = direct ? pid : -1;
    std::optional<int> command_status;
    bool tree_done = false;  // the command and all it left are gone (or the keeper is, without a word)
    const auto read_keeper = [&] {
        KeeperReport record{};
        if (!read_report(report[0], record)) tree_done = true;
        else if (record.kind == 'W') command_status = record.value, tree_done = true;
    };
    // The command's pid, read when a signal is to be forwarded: it comes right after the
    // runner's start. Without it (the keeper ended first), the keeper, which has it blocked.
    const auto read_pid = [&] {
        KeeperReport record{};
        command = read_report(pid_report[0], record) && record.kind == 'P' ? record.value : pid;
    };

    // Ending the tree (a timeout, or the watch's word): SIGTERM to each of its processes, then, once
    // killAfter has passed, SIGKILL to all. Without a keeper the runner is bubblewrap, whose own
    // death ends its pid namespace; with one, the keeper kills and reaps all when dsh-confine
    // closes its end of `alive` (as at dsh-confine's death), then still reports the status.
    std::optional<Clock::time_point> timeout_at, watch_at, kill_at;
    if (options.timeout) timeout_at = began + *options.timeout;
    if (options.watch) watch_at = began;
    const auto signal_tree = [&](int sig) {
#if defined(__linux__)
        // Under bubblewrap not bubblewrap itself (it dies of SIGTERM and takes the sandbox at
        // once), nor the sandbox's pid 1 (which ignores it): the command and all below.
        signal_descendants(pid, direct && options.commandIsGrandchild ? 2 : 1, sig);
#else
        if (command < 0) read_pid();
        kill(command > 0 ? command : pid, sig);
#endif
        run.forwardedSignals |= 1U << sig;
    };
    const auto end_tree = [&](TreeEnd why, Clock::time_point now) {
        run.ended = why;
        timeout_at.reset();
        watch_at.reset();
        signal_tree(SIGTERM);
        kill_at = now + options.killAfter;
    };
    bool stage_spared = false;
    const auto kill_tree = [&] {
        kill_at.reset();
#if defined(__linux__)
        if (direct && options.commandIsGrandchild && options.stageHoldsCall && !stage_spared) {
            // bubblewrap, its pid 1, the stage, then the command and all below: those die now.
            signal_descendants(pid, 3, SIGKILL);
            stage_spared = true;
            kill_at = Clock::now() + std::chrono::seconds(2);
            return;
        }
#endif
        if (direct) kill(pid, SIGKILL);
        else if (alive[1] >= 0) close(alive[1]), alive[1] = -1;
    };
    // The deadlines that have passed, acted on; nothing is read (not even the clock) without one.
    const auto check_clock = [&] {
        if (tree_done || (!timeout_at && !watch_at && !kill_at)) return;
        const Clock::time_point now = Clock::now();
        if (kill_at && now >= *kill_at) kill_tree();
        if (timeout_at && now >= *timeout_at) {
            end_tree(TreeEnd::Timeout, now);
        } else if (watch_at && now >= *watch_at) {
            if (const auto next = options.watch()) watch_at = now + *next;
            else end_tree(TreeEnd::Watch, now);
        }
    };
    // How long poll may wait: until the next deadline, or for ever.
    const auto wait_ms = [&]() -> int {
        if (tree_done) return 0;
        std::optional<Clock::time_point> next;
        for (const auto& at : {timeout_at, watch_at, kill_at})
            if (at && (!next || *at < *next)) next = at;
        if (!next) return -1;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
        return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
    };

    // Only stderr, the keeper's reports and the signals are watched while the command runs.
    // The start proof is small and waits in its pipe until the command is done: a wake-up
    // fewer per call.
    std::string status;
    bool err_open = true;
    bool err_sink = true;  // our stderr still takes output (its reader may have gone away)
    int wait_status = 0;
    // Without a keeper the runner may be long gone before the first wait.
    const auto reap_runner = [&] {
        if (!direct || tree_done || waitpid(pid, &wait_status, WNOHANG) != pid) return;
        command_status = wait_status;
        kill_leftovers();  // the sandbox's pid 1, reparented here, and its namespace with it
        tree_done = true;
    };
    reap_runner();
    bool watch_open = options.watchFd >= 0;
    while (err_open || !tree_done) {
        pollfd fds[4] = {{err_open ? err_pipe[0] : -1, POLLIN, 0},
                         {tree_done || direct ? -1 : report[0], POLLIN, 0},
                         {signals.fd(), POLLIN, 0},
                         {watch_open ? options.watchFd : -1, POLLIN, 0}};
        // Once the tree is gone, what is left in stderr is read without waiting for its end:
        // on Linux every writer was killed first, but where it cannot be (macOS) a process the
        // command left behind may hold the pipe open.
        const int ready = poll(fds, 4, wait_ms());
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        check_clock();
        if (ready == 0) {
            if (tree_done) break;
            continue;
        }
        if (fds[2].revents & POLLIN) {
            bool child = false;
            const unsigned pending = signals.take(child);
            if (child) reap_runner();
            // Ended as dsh-confine's death would have ended it (the sandbox at once), but with
            // what checks its end given its moment (kill_tree spares the stage first).
            if (signals.ending() && run.endedBySignal == 0 && !tree_done) {
                run.endedBySignal = signals.ending();
                kill_tree();
            }
            if (pending) {
                if (command < 0) read_pid();
                const pid_t target = signal_target(command > 0 ? command : pid, options.commandIsGrandchild);
                for (int sig : kForwarded)
                    if (pending & (1U << sig)) kill(target, sig);
                run.forwardedSignals |= pending;
            }
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) read_keeper();
        if (watch_open && (fds[3].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buffer[4096];
            const ssize_t n = read(options.watchFd, buffer, sizeof buffer);
            if (n > 0) options.onWatched(std::string_view(buffer, static_cast<std::size_t>(n)));
            else if (n == 0 || errno != EINTR) watch_open = false;
        }
        if (err_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            const ssize_t n = read(err_pipe[0], g_err_buffer, sizeof g_err_buffer);
            if (n > 0) {
                // A reader that went away (EPIPE) ends the passthrough, not the watch: the rest is
                // still read, so the command is not blocked and its result still attributed.
                if (err_sink) err_sink = write_all(2, g_err_buffer, static_cast<std::size_t>(n));
                on_stderr(std::string_view(g_err_buffer, static_cast<std::size_t>(n)));
            } else if (n == 0 || errno != EINTR) {
                err_open = false;
            }
        }
    }
    if (!tree_done) {  // left early (poll failed): wait for the end all the same
        if (direct) {
            while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
            }
            command_status = wait_status;
            kill_leftovers();
        } else {
            while (!tree_done) read_keeper();
        }
    }
    read_available(status_pipe[0], status);
    // The command's own wait status, as the keeper saw it. Once it is reported, the keeper has
    // nothing left to do but exit, and is not waited for (whoever reaps dsh-confine's orphans
    // reaps it). Without a report the keeper itself was killed, and its death is the run's.
    if (command_status) wait_status = *command_status;
    else if (!direct)
        while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
        }
    // Still watching: a signal that comes meanwhile waits, and is dropped with the rest.
    if (options.afterTree) options.afterTree();
    signals.stop();
    close_pipes();

    if (WIFEXITED(wait_status)) run.exitCode = WEXITSTATUS(wait_status);
    else if (WIFSIGNALED(wait_status)) run.signal = WTERMSIG(wait_status);
    run.started = judge_start(options.proof, status);
    run.execFailed = options.proof == StartProof::ExecMarker && status == "SF";
    if (options.timed) run.durationMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
    return run;
}

void die_of(int sig) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(sig, &fallback, nullptr);
#if defined(__linux__)
    // By the kernel's word of the mask: the C library's sigset functions leave out 32 and 33.
    sigset_t only;
    sigemptyset(&only);
    only.__val[0] = 1UL << (sig - 1);
    linux_sys::call_with(SYS_rt_sigprocmask, SIG_UNBLOCK, &only, nullptr, sizeof only.__val[0]);
    linux_sys::call_with(SYS_kill, linux_sys::call(SYS_getpid), sig);
#else
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    raise(sig);
#endif
    _exit(128 + sig);
}

}  // namespace dsh::posix
