#include "tty_guard_rules.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <seccomp.h>

namespace dsh::linux_guard {
namespace {

// One refusal: `syscall` fails with `error` when every comparison holds (none: always).
struct Refusal {
    const char* syscall;
    int error;
    std::vector<scmp_arg_cmp> when;
};

// The kernel reads ioctl's request as an unsigned int: only the low 32 bits are compared, so
// no value above them makes a refused request look like another one.
scmp_arg_cmp low_word_is(unsigned arg, std::uint32_t value) { return {arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, value}; }
// 64-bit comparisons, for refusing everything but an exact value: a value with high bits set
// that the kernel would truncate to the allowed one is refused, never allowed.
scmp_arg_cmp is_not(unsigned arg, std::uint64_t value) { return {arg, SCMP_CMP_NE, value, 0}; }
scmp_arg_cmp masked_is(unsigned arg, std::uint64_t mask, std::uint64_t value) { return {arg, SCMP_CMP_MASKED_EQ, mask, value}; }

// Request numbers from <linux/fs.h>, <linux/btrfs.h> and <linux/fscrypt.h>, written out: they are
// part of the kernel's ABI and never change, and older headers lack some.
constexpr std::uint32_t kMetadataIoctls[] = {
    0x40086602,  // FS_IOC_SETFLAGS
    0x40046602,  // FS_IOC32_SETFLAGS
    0x401c5820,  // FS_IOC_FSSETXATTR
    0x40087602,  // FS_IOC_SETVERSION
    0x40047602,  // FS_IOC32_SETVERSION
    0x800c6613,  // FS_IOC_SET_ENCRYPTION_POLICY
    0x50009401,  // BTRFS_IOC_SNAP_CREATE
    0x5000940e,  // BTRFS_IOC_SUBVOL_CREATE
    0x5000940f,  // BTRFS_IOC_SNAP_DESTROY
    0x50009417,  // BTRFS_IOC_SNAP_CREATE_V2
    0x50009418,  // BTRFS_IOC_SUBVOL_CREATE_V2
    0x5000943f,  // BTRFS_IOC_SNAP_DESTROY_V2
    0x4008941a,  // BTRFS_IOC_SUBVOL_SETFLAGS
    0xc0c89425,  // BTRFS_IOC_SET_RECEIVED_SUBVOL
    0x40089413,  // BTRFS_IOC_DEFAULT_SUBVOL
};

// Which of clone(2)'s arguments holds its flags on the architecture `token` names: the second on
// s390 and s390x (their stack comes first), the first elsewhere.
unsigned clone_flags_arg(std::uint32_t token) { return token == SCMP_ARCH_S390 || token == SCMP_ARCH_S390X ? 1 : 0; }

// socketpair()'s type as the kernel takes it: the low four bits (SOCK_TYPE_MASK); the bits above
// may only be SOCK_NONBLOCK and SOCK_CLOEXEC (EINVAL otherwise).
constexpr std::uint64_t kSocketTypeMask = 0xf;

// ioprio_set(2)'s `which` for one process (linux/ioprio.h, which Debian 12's headers lack).
constexpr std::uint64_t kIoprioWhoProcess = 1;

// The socket rules of each state (tty_guard.hpp's SocketRules).
void add_socket_rules(SocketRules rules, std::vector<Refusal>& out) {
    switch (rules) {
    case SocketRules::Any:
        return;
    case SocketRules::Local:
    case SocketRules::Proxied:
    case SocketRules::ProxiedOnHost:
        if (rules == SocketRules::Local) {
            // socket(): AF_NETLINK with NETLINK_ROUTE, and nothing else.
            out.push_back({"socket", EPERM, {is_not(0, AF_NETLINK)}});
            out.push_back({"socket", EPERM, {is_not(2, NETLINK_ROUTE)}});
        } else {
            // socket(): AF_NETLINK with NETLINK_ROUTE, and TCP over IPv4 and IPv6. A rule compares
            // each argument once, so every other family is refused by its number, on the low
            // word the kernel reads (values from 64 up are no family: EAFNOSUPPORT anyway).
            for (std::uint64_t family = 0; family < 64; ++family)
                if (family != AF_NETLINK && family != AF_INET && family != AF_INET6)
                    out.push_back({"socket", EPERM, {masked_is(0, 0xffffffffULL, family)}});
            out.push_back({"socket", EPERM, {masked_is(0, 0xffffffffULL, AF_NETLINK), is_not(2, NETLINK_ROUTE)}});
            for (const std::uint64_t family : {std::uint64_t{AF_INET}, std::uint64_t{AF_INET6}}) {
                for (std::uint64_t type = 0; type <= kSocketTypeMask; ++type)
                    if (type != SOCK_STREAM)
                        out.push_back({"socket", EPERM, {masked_is(0, 0xffffffffULL, family), masked_is(1, kSocketTypeMask, type)}});
                // SOCK_STREAM's protocols: 0 and IPPROTO_TCP; SCTP, MPTCP and the rest are not TCP.
                out.push_back({"socket", EPERM, {masked_is(0, 0xffffffffULL, family), {2, SCMP_CMP_GT, IPPROTO_TCP, 0}}});
                for (std::uint64_t protocol = 1; protocol < IPPROTO_TCP; ++protocol)
                    out.push_back({"socket", EPERM, {masked_is(0, 0xffffffffULL, family), masked_is(2, 0xffffffffULL, protocol)}});
            }
        }
        // socketpair(): AF_UNIX stream and seqpacket pairs. A rule cannot compare one argument
        // twice (libseccomp), so every other type the four bits can name is refused by name.
        out.push_back({"socketpair", EPERM, {is_not(0, AF_UNIX)}});
        for (std::uint64_t type = 0; type <= kSocketTypeMask; ++type)
            if (type != SOCK_STREAM && type != SOCK_SEQPACKET)
                out.push_back({"socketpair", EPERM, {masked_is(1, kSocketTypeMask, type)}});
        if (rules == SocketRules::ProxiedOnHost) out.push_back({"listen", EPERM, {}});
        // io_uring makes and connects sockets without socket(2): ENOSYS, on which its users
        // fall back to ordinary syscalls.
        out.push_back({"io_uring_setup", ENOSYS, {}});
        return;
    }
}

std::vector<Refusal> refusals(const GuardOptions& options, std::uint32_t arch) {
    std::vector<Refusal> out = {
        {"ioctl", EPERM, {low_word_is(1, static_cast<std::uint32_t>(TIOCSTI))}},
        {"ioctl", EPERM, {low_word_is(1, static_cast<std::uint32_t>(TIOCLINUX))}},
    };
    if (options.metadataIoctls)
        for (std::uint32_t request : kMetadataIoctls) out.push_back({"ioctl", EPERM, {low_word_is(1, request)}});
    // Another process's resource limits: a process of the same user may set them (no LSM hook
    // says no), which would let the command starve what runs beside it outside its domain (the
    // stage holding a call open for its end-of-call checks: RLIMIT_FSIZE 0 kills it mid-write).
    // Its own (pid 0: setrlimit, ulimit) stay the command's to set.
    out.push_back({"prlimit64", EPERM, {is_not(0, 0)}});
    // Another process's scheduling, the same way: no LSM hook Landlock has governs a nice value,
    // a scheduling policy or an I/O priority, and a process of the same user may lower another's
    // (SCHED_IDLE would all but stop the caller's shell). The command's own, by pid 0, stay its
    // own (nice, ionice, chrt and os.nice name themselves so); itself by its number (renice
    // +10 $$) or a thread of its own by its id is refused too, a named over-block
    // (pthread_setschedparam). setpriority(2) and ioprio_set(2) take a process (0 and 1 are
    // PRIO_PROCESS and IOPRIO_WHO_PROCESS), never a group or a user.
    out.push_back({"setpriority", EPERM, {is_not(0, PRIO_PROCESS)}});
    out.push_back({"setpriority", EPERM, {is_not(1, 0)}});
    out.push_back({"ioprio_set", EPERM, {is_not(0, kIoprioWhoProcess)}});
    out.push_back({"ioprio_set", EPERM, {is_not(1, 0)}});
    for (const char* call : {"sched_setscheduler", "sched_setparam", "sched_setattr"}) out.push_back({call, EPERM, {is_not(0, 0)}});
    if (options.callersChild) {
        out.push_back({"ptrace", EPERM, {masked_is(0, 0xffffffffULL, PTRACE_TRACEME)}});
        out.push_back({"clone", EPERM, {masked_is(clone_flags_arg(arch), CLONE_PARENT, CLONE_PARENT)}});
    }
    // clone3 takes its flags in memory, where no seccomp program can read them, and they can say
    // CLONE_INTO_CGROUP: a child started in any cgroup whose cgroup.procs the user may write,
    // which the kernel checks on the inode, past a read-only /sys (out of `run --limit`'s group,
    // or into a group outside the sandbox). ENOSYS, as on a kernel without it: libc and language
    // runtimes then fork with clone, whose flags (in a register) carry no cgroup.
    out.push_back({"clone3", ENOSYS, {}});
    // A cgroup namespace of its own, in a user namespace of its own (where it holds
    // CAP_SYS_ADMIN), lets the command mount cgroupfs with its own cgroup as the root; under a
    // root caller it is still uid 0, the owner of that cgroup's files, and cgroup v1 has no
    // delegation boundary: it could write the limits of `run --limit` away. No other way in
    // makes one (setns needs CAP_SYS_ADMIN over the namespace's owner: one the command made).
    out.push_back({"unshare", EPERM, {masked_is(0, CLONE_NEWCGROUP, CLONE_NEWCGROUP)}});
    out.push_back({"clone", EPERM, {masked_is(clone_flags_arg(arch), CLONE_NEWCGROUP, CLONE_NEWCGROUP)}});
    add_socket_rules(options.sockets, out);
    return out;
}

struct ContextRelease {
    void operator()(void* context) const { seccomp_release(context); }
};

}  // namespace

unsigned audit_arch(const std::string& arch) { return seccomp_arch_resolve_name(arch.c_str()); }

std::vector<sock_filter> build_guard_program(const GuardOptions& options, const std::string& arch, std::string& why) {
    const auto failed = [&why](const std::string& what, int rc) {
        why = what + ": " + std::strerror(-rc);
        return std::vector<sock_filter>{};
    };
    const std::uint32_t token = seccomp_arch_resolve_name(arch.c_str());
    if (token == 0) {
        why = "libseccomp knows no architecture '" + arch + "'";
        return {};
    }
    // Everything not refused is allowed; a syscall of any architecture but `arch` (and, on
    // x86-64, of the x32 ABI, which libseccomp refuses with the rest) fails with ENOSYS.
    std::unique_ptr<void, ContextRelease> context(seccomp_init(SCMP_ACT_ALLOW));
    if (!context) return failed("seccomp_init", -ENOMEM);
    if (const int rc = seccomp_attr_set(context.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS)); rc != 0)
        return failed("seccomp_attr_set", rc);
    if (token != seccomp_arch_native()) {
        if (const int rc = seccomp_arch_add(context.get(), token); rc != 0) return failed("seccomp_arch_add " + arch, rc);
        if (const int rc = seccomp_arch_remove(context.get(), SCMP_ARCH_NATIVE); rc != 0) return failed("seccomp_arch_remove", rc);
    }
    for (const Refusal& refusal : refusals(options, token)) {
        const int number = seccomp_syscall_resolve_name(refusal.syscall);
        if (number == __NR_SCMP_ERROR) {
            why = std::string("libseccomp knows no syscall ") + refusal.syscall;
            return {};
        }
        const int rc = seccomp_rule_add_array(context.get(), SCMP_ACT_ERRNO(static_cast<std::uint16_t>(refusal.error)),
                                              number, static_cast<unsigned>(refusal.when.size()), refusal.when.data());
        if (rc != 0) return failed(std::string("seccomp_rule_add ") + refusal.syscall, rc);
    }
    // libseccomp 2.5 exports to a descriptor only: an anonymous file, read back.
    const int fd = memfd_create("dsh-guard", MFD_CLOEXEC);
    if (fd < 0) return failed("memfd_create", -errno);
    std::vector<sock_filter> program;
    int rc = seccomp_export_bpf(context.get(), fd);
    const off_t size = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (rc == 0 && (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)) rc = -EIO;
    if (rc == 0) {
        program.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
        if (pread(fd, program.data(), static_cast<std::size_t>(size), 0) != size) rc = -EIO;
    }
    close(fd);
    if (rc != 0) return failed("seccomp_export_bpf", rc);
    return program;
}

}  // namespace dsh::linux_guard
