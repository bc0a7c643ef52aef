#include "proxy_companion.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../lib/host_pattern.hpp"
#include "../posix/process.hpp"
#include "raw_syscall.hpp"
#include "proxy.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace dsh::proxy {
namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Up to this many listening sockets arrive over the channel (the stage sends two).
constexpr std::size_t kMaxListeners = 4;

// Waits for the listeners on `channel`, or for the owner to end first: empty then.
std::vector<int> receive_listeners(int channel, int owner) {
    pollfd fds[2] = {{channel, POLLIN, 0}, {owner, POLLIN, 0}};
    while (poll(fds, 2, -1) < 0)
        if (errno != EINTR) return {};
    if (!(fds[0].revents & POLLIN)) return {};
    char byte = 0;
    iovec part{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxListeners)] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    if (recvmsg(channel, &message, MSG_CMSG_CLOEXEC) <= 0) return {};
    std::vector<int> out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd = -1;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            out.push_back(fd);
        }
    }
    return out;
}

// Parses a descriptor's number as `__proxy` takes it ("-" for none): false when it is neither.
bool parse_fd(const char* text, int& fd) {
    if (std::strcmp(text, "-") == 0) {
        fd = -1;
        return true;
    }
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 3 || value > 1 << 20) return false;
    fd = static_cast<int>(value);
    return true;
}

std::string fd_text(int fd) { return fd < 0 ? "-" : std::to_string(fd); }

// Closes every descriptor above 2 but those in `keep` (ascending).
void close_all_but(const std::vector<int>& keep) noexcept {
    int from = 3;
    for (int fd : keep) {
        if (fd < from) continue;
        if (fd > from) linux_sys::call_with(SYS_close_range, from, fd - 1, 0);
        from = fd + 1;
    }
    linux_sys::call_with(SYS_close_range, from, ~0U, 0);
}

// What the proxy's launch needs, all of it made before the first clone: the two clones below
// share this process's memory (CLONE_VM, as posix_spawn's child does) and make only system calls
// in it, while the process that cloned each waits (CLONE_VFORK). No page table is copied, which
// is what two forks of this process cost (about 1.5 ms on the reference VM, on the caller's path).
struct Launch {
    std::vector<std::string> words;  // the proxy's argv
    std::vector<std::string> environment;
    std::vector<char*> argv, envp;
    std::vector<int> keep;   // passed on, in ascending order
    int null = -1;           // /dev/null, for stdin and stdout
    char* grandchildStack = nullptr;
    int failure = 0;         // the errno of the step that failed in a clone, read once both are gone
    const char* failedStep = nullptr;
};

// The proxy's process until it executes the proxy: in a session of its own (a terminal's or a
// harness's signal to the caller's process group does not reach it), in /, with stdin and stdout
// on /dev/null (a pipe `run` reads to its end must not stay open here) and no descriptor but
// stderr and the kept ones (a status pipe, the caller's kept descriptors, a ruleset are none of
// the proxy's). Every signal stays blocked through execve (the caller's handlers are this
// memory's code): the proxy unblocks them once it runs (serve_proxy).
int launch_proxy(void* arg) {
    auto* l = static_cast<Launch*>(arg);
    const auto failed = [l](const char* step) {
        l->failure = errno;
        l->failedStep = step;
        _exit(127);
    };
    if (setsid() < 0) failed("setsid");
    if (chdir("/") != 0) failed("chdir /");
    if (dup2(l->null, 0) < 0 || dup2(l->null, 1) < 0) failed("dup2 /dev/null");
    for (int fd : l->keep)
        if (fcntl(fd, F_SETFD, 0) != 0) failed("fcntl (a kept descriptor)");
    close_all_but(l->keep);
    // The binary this process runs, by the kernel's own reference to it: no path is walked, so
    // no directory anyone could write is in the way, and a binary replaced on disk since (an
    // upgrade) does not change what runs.
    execve("/proc/self/exe", l->argv.data(), l->envp.data());
    failed("execve /proc/self/exe");
    return 127;
}

// The middle process: it clones the proxy and ends once the proxy runs its own image, so that
// the proxy is nobody's child that anyone waits for (`run` waits for its own children, and the
// proxy must outlive none of them; it is reparented to init or the nearest subreaper).
int launch_middle(void* arg) {
    auto* l = static_cast<Launch*>(arg);
    if (clone(launch_proxy, l->grandchildStack, CLONE_VM | CLONE_VFORK | SIGCHLD, l) < 0) {
        l->failure = errno;
        l->failedStep = "clone (the proxy)";
    }
    _exit(0);
}

// What the proxy's process serves, and with what (start_proxy hands it over by argv or in memory).
struct Serving {
    std::vector<HostPattern> allow;
    SharedList unparsed;  // canonical patterns still to parse into `allow` (the caller's list, shared)
    std::vector<int> listenFds;
    int owner = -1;
    int channel = -1;
    int refusals = -1;
};

// Waits until a client is waiting on one of `listeners` (true), or one of `lifetimes` is
// readable or hung up first (false: the call ended without a connection to the proxy).
bool await_first_client(const std::vector<int>& listeners, const std::vector<int>& lifetimes) {
    std::vector<pollfd> fds;
    fds.reserve(listeners.size() + lifetimes.size());
    for (int fd : listeners) fds.push_back({fd, POLLIN, 0});
    for (int fd : lifetimes) fds.push_back({fd, POLLIN, 0});
    for (;;) {
        if (poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            return true;  // the event loop reports what is wrong
        }
        for (std::size_t i = listeners.size(); i < fds.size(); ++i)
            if (fds[i].revents != 0) return false;
        return true;
    }
}

// The proxy until its owner ends: 0, or 1 with a PROXY line on stderr. Every signal still
// blocked on entry (start_proxy keeps them so), and the process in its own session already.
//
// Its own start-up (the patterns parsed, the event loop and the resolver's thread made) waits
// for the first client: most calls never connect, and a start-up running beside the command as
// it starts slowed the command itself, though on another core (0.3 to 0.6 ms of a 5 to 7 ms
// `true` on this project's VM, whose page faults each trap to the hypervisor;
// docs/performance.md). The cost moves to the first connection's set-up.
int serve(const Serving& serving) {
    const int owner = serving.owner, channel = serving.channel, refusals = serving.refusals;
    // Signals: what a process started afresh has (an ignored SIGHUP or SIGTERM of the caller's
    // parent is not the proxy's), then unblocked (start_proxy kept them blocked).
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);

    ProxyOptions options;
    options.listenFds = serving.listenFds;
    if (channel >= 0) {
        // The stage sends them just before it starts the command. None: the stage failed, or
        // the sandbox ended, first.
        options.listenFds = receive_listeners(channel, owner);
        close(channel);
        if (options.listenFds.empty()) return 0;
    }
    options.lifetimeFds = {owner};
    if (refusals >= 0) options.lifetimeFds.push_back(refusals);  // `run` shut its side down, or is gone
    if (!await_first_client(options.listenFds, options.lifetimeFds)) return 0;
    options.allow = serving.allow;
    for (const auto& text : serving.unparsed)
        if (auto pattern = parse_host_pattern(text)) options.allow.push_back(*pattern);
    unsigned long long undelivered = 0;
    options.onRefused = [refusals, &undelivered](const ProxyRefusal& refusal) {
        const std::string where = (refusal.host.find(':') == std::string::npos ? refusal.host : "[" + refusal.host + "]") +
                                  ":" + std::to_string(refusal.port);
        const std::string line = std::string(kRefusedHostPrefix) + where + ", " + refusal.reason + " (--allow-host " + where +
                                 " would allow it)\n";
        [[maybe_unused]] const ssize_t n = write(2, line.data(), line.size());
        // One record in one datagram of a SOCK_SEQPACKET socket, whole or not at all: `run` reads
        // them as they come, and the proxy never waits for it. One that finds `run`'s side full
        // is counted instead, and the count sent when the proxy ends, so that a flood of
        // refusals can make run's list incomplete but never silently so.
        if (refusals >= 0) {
            const std::string record = where + "\n";
            if (send(refusals, record.data(), record.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) ++undelivered;
        }
    };
    std::string error;
    const int status = run_proxy(options, &error);
    if (refusals >= 0 && undelivered > 0) {
        // `run` reads to the end once it has shut its side down: this one may wait for it.
        const std::string record = std::string(kUndeliveredRefusals) + std::to_string(undelivered) + "\n";
        [[maybe_unused]] const ssize_t sent = send(refusals, record.data(), record.size(), MSG_NOSIGNAL);
    }
    if (status != 0) {
        const std::string line = "dsh-confine: error: PROXY: " + error + "\n";
        [[maybe_unused]] const ssize_t n = write(2, line.data(), line.size());
        return 1;
    }
    return 0;
}

// The second way in (ProxyStart::CallersImage), for a caller that executes its next program
// (the command, or bubblewrap) right after: the proxy's process is a clone that shares the
// caller's memory and waits, running no code of the caller's, until the caller has executed that
// program. The kernel then leaves the caller's old image to the clone alone, already started up:
// no page table copied, no second start-up of dsh-confine, and the caller never waits.
struct Beside {
    Serving serving;  // its patterns unparsed: parsed by the proxy, once a client comes
    std::vector<int> keep;  // in ascending order
    int null = -1;
    long caller = 0;  // the caller's pid
    // The futex word the caller names with set_tid_address: the kernel zeroes it, and wakes its
    // waiter, when the caller's memory stops being the caller's (its execve, or its end).
    int gate = 0;
};

// Set by the caller right before its execve (arm_for_exec), cleared if the execve returned: the
// clone serves only an image its caller left by execve, with nothing of the C library's held
// half-changed. A caller that ended otherwise (a failed runner, a signal) may have left its heap
// or environment locked mid-change: the clone then ends without running any of it.
int exec_armed = 0;

using linux_sys::call_with;

// The proxy once the gate is open and the caller left by execve: this memory is its alone.
[[gnu::noinline]] void serve_beside(Beside* b) {
    if (chdir("/") != 0 || dup2(b->null, 0) < 0 || dup2(b->null, 1) < 0) call_with(SYS_exit_group, 1);
    close_all_but(b->keep);
    // The caller's handlers are the caller's business: the defaults, as after an execve. A signal
    // that reached the caller's process group before the clone's setsid, held pending since, is
    // not the proxy's: ignoring it discards it.
    sigset_t pending;
    sigpending(&pending);
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction was {};
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, nullptr, &was) != 0) continue;
        const bool handled = (was.sa_flags & SA_SIGINFO) != 0 ? was.sa_sigaction != nullptr
                                                              : was.sa_handler != SIG_DFL && was.sa_handler != SIG_IGN;
        const bool ignored = (was.sa_flags & SA_SIGINFO) == 0 && was.sa_handler == SIG_IGN;
        if (sigismember(&pending, sig) == 1) signal(sig, SIG_IGN);
        if (handled || (sigismember(&pending, sig) == 1 && !ignored)) signal(sig, SIG_DFL);
    }
    setenv("LOCALDOMAIN", "", 1);  // as start_proxy's other way (it says why)
    // exit_group itself, not _exit: this stack is none the C library or a sanitizer knows of.
    call_with(SYS_exit_group, serve(b->serving));
}

// The clone's entry: raw system calls only, on its own stack, until the gate opens (no C library
// state of the caller's is touched, no errno written, nothing instrumented).
__attribute__((no_sanitize("address"))) int proxy_beside(void* arg) {
    auto* b = static_cast<Beside*>(arg);
    // First, before anyone can know its pid: a session of its own (so the command, its parent
    // once the caller has executed it, can no longer move it between process groups), and death
    // with the caller, for a caller that ends leaving the gate closed (one that dumps core).
    call_with(SYS_setsid);
    call_with(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (call_with(SYS_getppid) != b->caller) call_with(SYS_exit_group, 0);
    for (int seen; (seen = __atomic_load_n(&b->gate, __ATOMIC_ACQUIRE)) != 0;)
        call_with(SYS_futex, &b->gate, FUTEX_WAIT, seen, nullptr, nullptr, 0);
    if (__atomic_load_n(&exec_armed, __ATOMIC_ACQUIRE) == 0) call_with(SYS_exit_group, 0);
    // The owner's pidfd governs from here (a command whose first thread ends early keeps its proxy).
    call_with(SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0);
    serve_beside(b);
    return 0;
}

// The proxy's stack in the caller's image: a thread's (the proxy runs on it), with a guard page.
constexpr std::size_t kBesideStack = std::size_t{8} * 1024 * 1024;
constexpr std::size_t kGuard = 4096;

bool start_beside(const SharedList& allow, const std::vector<int>& listen_fds, int channel, int owner,
                  std::string& why) {
    // Never freed: once the caller has gone on it is the proxy's, and until then it must stay.
    // Held by a static pointer, so that a caller that ends instead (a runner that failed) ends
    // with it reachable, not leaked.
    static Beside* kept = nullptr;
    auto* b = kept = new Beside;
    b->serving.unparsed = allow;
    b->serving.listenFds = listen_fds;
    b->serving.owner = owner;
    b->serving.channel = channel;
    b->keep = listen_fds;
    b->keep.push_back(owner);
    if (channel >= 0) b->keep.push_back(channel);
    std::sort(b->keep.begin(), b->keep.end());
    b->null = open("/dev/null", O_RDWR | O_CLOEXEC);
    b->caller = getpid();
    void* stack = mmap(nullptr, kBesideStack + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE,
                       -1, 0);
    if (b->null < 0 || stack == MAP_FAILED) {
        why = errno_text(b->null < 0 ? "open /dev/null (the proxy's stdin)" : "mmap (the proxy's stack)");
        if (b->null >= 0) close(b->null);
        if (stack != MAP_FAILED) munmap(stack, kBesideStack + kGuard);
        return false;
    }
    mprotect(stack, kGuard, PROT_NONE);
    b->gate = static_cast<int>(syscall(SYS_gettid));
    syscall(SYS_set_tid_address, &b->gate);
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    // No exit signal: nothing is sent to the caller (by then the command) when the proxy ends,
    // and wait(2) without __WALL does not see it; once the command has ended, the proxy is
    // reparented like any orphan, with SIGCHLD for its new parent.
    const pid_t proxy = clone(proxy_beside, static_cast<char*>(stack) + kGuard + kBesideStack, CLONE_VM, b);
    const int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &was, nullptr);
    close(b->null);  // the clone has its own copy, as of every descriptor open now
    if (proxy < 0) {
        munmap(stack, kBesideStack + kGuard);
        errno = clone_errno;
        why = errno_text("clone (the proxy)");
        return false;
    }
    return true;
}

constexpr std::size_t kLaunchStack = std::size_t{64} * 1024;  // each clone's stack; they call nothing deep

}  // namespace

bool start_proxy(const SharedList& allow, const std::vector<int>& listen_fds, int channel, int refusals,
                 std::string& why, ProxyStart how) {
    const int owner = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
    if (owner < 0) {
        why = errno_text("pidfd_open (the proxy's lifetime; Linux 5.3 or later)");
        return false;
    }
    fcntl(owner, F_SETFD, FD_CLOEXEC);
    if (how == ProxyStart::CallersImage && refusals < 0) {
        const bool started = start_beside(allow, listen_fds, channel, owner, why);
        close(owner);
        return started;
    }
    Launch l;
    std::string listeners;
    for (int fd : listen_fds) listeners += (listeners.empty() ? "" : ",") + std::to_string(fd);
    l.words = {"dsh-confine", "__proxy", std::to_string(owner), fd_text(channel), fd_text(refusals),
               listeners.empty() ? "-" : listeners, "--"};
    l.words.insert(l.words.end(), allow.begin(), allow.end());
    // A name is resolved as the command gave it: with the resolver's search list (resolv.conf's
    // `search`, `domain`) a refused `intranet` would still be looked up, and reached, as
    // `intranet.corp.example`. An empty LOCALDOMAIN replaces that list with none.
    for (char** e = environ; e != nullptr && *e != nullptr; ++e)
        if (std::strncmp(*e, "LOCALDOMAIN=", 12) != 0) l.environment.emplace_back(*e);
    l.environment.emplace_back("LOCALDOMAIN=");
    l.argv = posix::c_argv(l.words);
    l.envp = posix::c_argv(l.environment);
    l.keep = listen_fds;
    l.keep.push_back(owner);
    if (channel >= 0) l.keep.push_back(channel);
    if (refusals >= 0) l.keep.push_back(refusals);
    std::sort(l.keep.begin(), l.keep.end());
    l.null = open("/dev/null", O_RDWR | O_CLOEXEC);
    void* stacks = mmap(nullptr, 2 * kLaunchStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (l.null < 0 || stacks == MAP_FAILED) {
        why = errno_text(l.null < 0 ? "open /dev/null (the proxy's stdin)" : "mmap (the proxy's launch)");
        if (l.null >= 0) close(l.null);
        if (stacks != MAP_FAILED) munmap(stacks, 2 * kLaunchStack);
        close(owner);
        return false;
    }
    char* base = static_cast<char*>(stacks);
    l.grandchildStack = base + 2 * kLaunchStack;
    // No handler of this process may run in a clone before execve: all blocked until then.
    sigset_t all, was;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    const pid_t middle = clone(launch_middle, base + kLaunchStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &l);
    const int clone_errno = errno;
    pthread_sigmask(SIG_SETMASK, &was, nullptr);
    close(l.null);
    close(owner);
    int status = 0;
    if (middle > 0)
        while (waitpid(middle, &status, 0) < 0 && errno == EINTR) {
        }
    munmap(stacks, 2 * kLaunchStack);
    if (middle < 0) {
        errno = clone_errno;
        why = errno_text("clone (the proxy's launch)");
        return false;
    }
    if (l.failedStep != nullptr) {
        why = std::string("starting the proxy: ") + l.failedStep + ": " + std::strerror(l.failure);
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        why = "the proxy's process could not be started";
        return false;
    }
    return true;
}

void arm_for_exec() noexcept { __atomic_store_n(&exec_armed, 1, __ATOMIC_RELEASE); }

void disarm_after_exec() noexcept { __atomic_store_n(&exec_armed, 0, __ATOMIC_RELEASE); }

int serve_proxy(int argc, char** argv) {
    const auto usage = [](const std::string& message) {
        std::fprintf(stderr, "dsh-confine: error: PROXY: __proxy: %s\n", message.c_str());
        return 125;
    };
    // dsh-confine __proxy OWNER CHANNEL REFUSALS LISTENERS -- PATTERN...
    if (argc < 7 || std::strcmp(argv[6], "--") != 0)
        return usage("the proxy's own process, started by dsh-confine: OWNER CHANNEL REFUSALS LISTENERS -- PATTERN...");
    Serving serving;
    if (!parse_fd(argv[2], serving.owner) || serving.owner < 0 || !parse_fd(argv[3], serving.channel) ||
        !parse_fd(argv[4], serving.refusals))
        return usage("a descriptor is not a number above 2");
    if (std::strcmp(argv[5], "-") != 0) {
        std::string list = argv[5];
        for (std::size_t at = 0; at <= list.size();) {
            const std::size_t comma = std::min(list.find(',', at), list.size());
            int fd = -1;
            if (!parse_fd(list.substr(at, comma - at).c_str(), fd) || fd < 0 || serving.listenFds.size() == kMaxListeners)
                return usage("LISTENERS is not a list of descriptors");
            serving.listenFds.push_back(fd);
            at = comma + 1;
        }
    }
    for (int i = 7; i < argc; ++i) {
        auto pattern = parse_host_pattern(argv[i]);
        if (!pattern) return usage(pattern.reason());
        serving.allow.push_back(*pattern);
    }
    // Named as the program that started it in `ps` and `top` (executed as /proc/self/exe, it would be "exe").
    prctl(PR_SET_NAME, "dsh-confine", 0, 0, 0);
    for (int fd : serving.listenFds) fcntl(fd, F_SETFD, FD_CLOEXEC);
    for (int fd : {serving.owner, serving.channel, serving.refusals})
        if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    return serve(serving);
}

int loopback_listener(int family, std::uint16_t port, std::string& why) {
    const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        why = errno_text("socket (the proxy's listener)");
        return -1;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    int bound = -1;
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
        sockaddr_in6 address{};
        address.sin6_family = AF_INET6;
        address.sin6_addr = in6addr_loopback;
        address.sin6_port = htons(port);
        bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    } else {
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(port);
        bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    }
    if (bound != 0 || listen(fd, 128) != 0) {
        why = errno_text(std::string("listening on the loopback address for the proxy (") +
                         (family == AF_INET6 ? "[::1]" : "127.0.0.1") + ":" + std::to_string(port) + ")");
        close(fd);
        return -1;
    }
    return fd;
}

std::uint16_t listening_port(int fd) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
    if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    return 0;
}

bool send_listeners(int channel, const std::vector<int>& fds, std::string& why) {
    char byte = 'L';
    iovec part{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxListeners)] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    const bool sent = fds.size() <= kMaxListeners && sendmsg(channel, &message, MSG_NOSIGNAL) == 1;
    if (!sent) why = errno_text("sending the proxy its listeners");
    close(channel);
    return sent;
}

void set_proxy_environment(std::uint16_t port) {
    const std::string http = "http://127.0.0.1:" + std::to_string(port);
    const std::string socks = "socks5h://127.0.0.1:" + std::to_string(port);
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) setenv(name, http.c_str(), 1);
    for (const char* name : {"ALL_PROXY", "all_proxy"}) setenv(name, socks.c_str(), 1);
    for (const char* name : {"NO_PROXY", "no_proxy"}) setenv(name, "localhost,127.0.0.1,::1", 1);
    std::string java = "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=" + std::to_string(port) +
                       " -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=" + std::to_string(port) +
                       " -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]";
    if (const char* was = std::getenv("JAVA_TOOL_OPTIONS"); was && *was) java = std::string(was) + " " + java;
    setenv("JAVA_TOOL_OPTIONS", java.c_str(), 1);
}

int start_bwrap_proxy(const std::vector<std::string>& allow, std::vector<std::string>& bwrap_argv, int refusals,
                      std::string& why, ProxyStart how) {
    const auto stage = std::find(bwrap_argv.begin(), bwrap_argv.end(), "bwrap-stage");
    if (bwrap_argv.empty() || stage == bwrap_argv.end()) {
        why = "no bubblewrap plan with a stage follows";
        return -1;
    }
    int pair[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
        why = errno_text("socketpair");
        return -1;
    }
    const bool started = start_proxy(allow, {}, pair[0], refusals, why, how);
    close(pair[0]);
    if (!started) {
        close(pair[1]);
        return -1;
    }
    bwrap_argv.insert(stage + 1, {"--proxy-fd", std::to_string(pair[1])});
    return pair[1];
}

int exec_with_proxy(const std::vector<std::string>& allow, std::vector<std::string> bwrap_argv) {
    std::string why;
    const int channel = start_bwrap_proxy(allow, bwrap_argv, -1, why, ProxyStart::CallersImage);
    if (channel >= 0) {
        // Passed on through bubblewrap (which closes nothing) to the stage, which sends the
        // listeners over it and closes it before the command starts.
        fcntl(channel, F_SETFD, 0);
        const std::vector<char*> args = posix::c_argv(bwrap_argv);
        arm_for_exec();
        execv(args.front(), args.data());
        disarm_after_exec();
        why = errno_text("cannot execute " + bwrap_argv.front());
    }
    std::fprintf(stderr, "dsh-confine: error: PROXY: %s\n", why.c_str());
    return 125;
}

}  // namespace dsh::proxy
