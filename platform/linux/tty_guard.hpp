// The guard: the seccomp filter both Linux runners install (runner.hpp's Launch). It refuses
// ioctl(TIOCSTI) and ioctl(TIOCLINUX), so a confined command cannot push keystrokes into the
// caller's terminal (they would run outside any sandbox) while it keeps that terminal as its
// controlling one (job control works); and every syscall of another architecture (32-bit entry
// points, x32), which could reach ioctl or socketcall by other numbers, with ENOSYS; and
// prlimit64() on any process but the caller itself (EPERM), which a process of the same user could
// otherwise use to starve a process outside the sandbox (its resource limits are not governed by
// signals' scope): the command's own limits stay its own to set. So are setpriority(),
// ioprio_set(), sched_setscheduler(), sched_setparam() and sched_setattr() on anything but the
// caller itself (pid 0; EPERM): a nice value, a scheduling policy (SCHED_IDLE) or an I/O class
// of the same user's processes outside, which no scope governs either. sched_setaffinity() is
// left to the command (its own threads, by their ids, are what it pins): a named gap.
//
// Under Landlock it also refuses the ioctls that change a file's metadata where Landlock has no
// hook (it governs ioctls on device files only): inode flags (chattr: append-only, no-dump,
// no-atime, ...), the project and extended-attribute flags (FS_IOC_FSSETXATTR), the inode
// generation, an encryption policy, and btrfs subvolume and snapshot creation, removal and
// flags. They are refused everywhere, the workspace included: a named over-block. Under
// bubblewrap a read-only mount already refuses them (EROFS) outside the writable roots. And
// since the Landlock runner executes the command in place, leaving the caller its parent, it
// refuses what would have that parent act for it (GuardOptions::callersChild).
//
// With the network denied it judges every syscall that makes a socket (the same filter under
// both backends):
//   - socket(): netlink with NETLINK_ROUTE only (glibc's getaddrinfo and getifaddrs ask it; an
//     unprivileged NETLINK_ROUTE socket can send to the kernel only); every other family
//     (IP, AF_UNIX, packet, vsock, ...) and every other netlink protocol is EPERM;
//   - socketpair(): AF_UNIX of type SOCK_STREAM or SOCK_SEQPACKET only; a connected stream or
//     seqpacket end refuses or ignores a destination address and can neither be connected
//     again nor listen, so it reaches nothing outside; SOCK_DGRAM (which can sendto() any named
//     socket, or be disconnected and bound as a listener) and SOCK_RAW (a datagram socket in
//     AF_UNIX) are EPERM;
//   - io_uring_setup() is ENOSYS: io_uring makes and connects sockets without socket(2).
// With the network limited to an allow-list (`hosts`), the same, and TCP over IPv4 and IPv6:
// socket() of AF_INET or AF_INET6 with type SOCK_STREAM and protocol 0 or IPPROTO_TCP, so the
// command can reach the proxy's loopback port (under bubblewrap its network namespace has
// nothing else; under Landlock its TCP rules allow the proxy's port alone); UDP, raw, SCTP and
// MPTCP sockets are EPERM; under Landlock (the host's network namespace) listen(2) is EPERM too.
// What the filter does not see: descriptors the command inherits (stdin, stdout, stderr, and
// those kept with --keep-fd), which keep working as they are.
//
// The filters are built with libseccomp when dsh-confine is built, not at run time (building
// one costs more than the rest of a call's setup): tty_guard_rules.cpp holds the rules, the
// generator tty_guard_gen.cpp writes every variant into the binary, and guard_program() picks
// one. The unit tests build each one again and compare.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include <linux/filter.h>

namespace dsh::linux_guard {

// What the filter does about sockets.
enum class SocketRules {
    Any,   // the network allowed: sockets are not the filter's concern
    Local,  // the network denied: NETLINK_ROUTE, and stream and seqpacket socketpairs only
    Proxied,  // the network through the proxy: Local's, and TCP over IPv4 and IPv6
    // The same in the host's network namespace (Landlock): and no listen(2), which would bind an
    // unbound TCP socket to an ephemeral port on every address (Landlock governs bind(2) only).
    ProxiedOnHost
};
inline constexpr std::array kSocketRules = {SocketRules::Any, SocketRules::Local, SocketRules::Proxied, SocketRules::ProxiedOnHost};

struct GuardOptions {
    bool metadataIoctls = false;            // also refuse the metadata-changing ioctls listed above (EPERM)
    SocketRules sockets = SocketRules::Any;
    // The command is executed in place by a process the caller started (the Landlock runner), so
    // its parent is the caller, outside the sandbox: refuse what would have that parent act for
    // the command. ptrace(PTRACE_TRACEME) (EPERM) would make the caller its tracer, every signal
    // to the command then a stop the caller's wait(2) reports (a harness takes it for the end,
    // and the command runs on once the caller is gone); clone(2) with CLONE_PARENT (EPERM) would
    // give the caller children it never started, their statuses for its wait(-1); clone3(2),
    // whose flags sit in memory no filter reads, is ENOSYS, on which the C library falls back
    // to clone(2).
    bool callersChild = false;
};

// Every variant, numbered: the generator writes them in this order, guard_program() finds one.
inline constexpr std::size_t kGuardVariants = 4 * kSocketRules.size();
constexpr std::size_t variant_index(const GuardOptions& options) {
    std::size_t rules = 0;
    while (kSocketRules[rules] != options.sockets) ++rules;
    return rules * 4 + (options.callersChild ? 2 : 0) + (options.metadataIoctls ? 1 : 0);
}
constexpr GuardOptions variant_options(std::size_t index) {
    return GuardOptions{index % 2 == 1, kSocketRules[index / 4], (index / 2) % 2 == 1};
}

// The filter's program, for prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) once no_new_privs is
// set: static data, nothing built or allocated.
std::span<const sock_filter> guard_program(const GuardOptions& options = {});

}  // namespace dsh::linux_guard
