// platform/linux/tty_guard: the seccomp programs embedded at build time are the ones libseccomp
// builds from the rules now, and each refuses what tty_guard.hpp says and lets the rest through.
// Judged by the kernel: a child installs a program and makes the syscalls with raw arguments
// (values with high bits set included, which the kernel truncates to 32 bits).
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "../../platform/linux/raw_syscall.hpp"
#include "../../platform/linux/tty_guard.hpp"
#include "../../platform/linux/tty_guard_rules.hpp"

namespace {

using dsh::linux_guard::GuardOptions;
using dsh::linux_guard::SocketRules;
using dsh::linux_sys::call;

constexpr long kHigh = 1L << 32;  // a bit the kernel drops from an int argument

struct Probe {
    std::string name;
    std::function<long()> syscall;  // the kernel's result: >= 0, or -errno
};

// Each probe's result, as made by a child that installed the guard for `options` first.
std::vector<long> under_guard(const GuardOptions& options, const std::vector<Probe>& probes) {
    const auto program = dsh::linux_guard::guard_program(options);
    int results[2];
    if (pipe2(results, O_CLOEXEC) != 0) return {};
    const pid_t pid = fork();
    if (pid == 0) {
        sock_fprog filter{static_cast<unsigned short>(program.size()), const_cast<sock_filter*>(program.data())};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) != 0)
            _exit(1);
        for (const Probe& probe : probes) {
            long result = probe.syscall();
            if (result > 0) result = 0;  // a descriptor: made
            if (write(results[1], &result, sizeof result) != sizeof result) _exit(2);
        }
        _exit(0);
    }
    close(results[1]);
    std::vector<long> out;
    long result = 0;
    while (read(results[0], &result, sizeof result) == sizeof result) out.push_back(result);
    close(results[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not install the guard";
    return out;
}

long make_socket(long family, long type, long protocol) { return call(SYS_socket, family, type, protocol); }
long make_pair(long family, long type) {
    int fds[2];
    return call(SYS_socketpair, family, type, 0, reinterpret_cast<long>(fds));
}
long ioctl_on_null(long request) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char byte = 'x';
    return call(SYS_ioctl, fd, request, reinterpret_cast<long>(&byte));
}

void expect(const GuardOptions& options, const std::vector<std::pair<Probe, long>>& cases) {
    std::vector<Probe> probes;
    for (const auto& entry : cases) probes.push_back(entry.first);
    const std::vector<long> got = under_guard(options, probes);
    ASSERT_EQ(got.size(), cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i)
        EXPECT_EQ(got[i], cases[i].second) << cases[i].first.name << ": " << (got[i] < 0 ? std::strerror(int(-got[i])) : "made");
}

TEST(Guard, TheEmbeddedProgramsAreWhatLibseccompBuildsFromTheRules) {
    for (std::size_t i = 0; i < dsh::linux_guard::kGuardVariants; ++i) {
        std::string why;
        const auto built = dsh::linux_guard::build_guard_program(dsh::linux_guard::variant_options(i), DSH_GUARD_ARCH, why);
        ASSERT_FALSE(built.empty()) << why;
        const auto embedded = dsh::linux_guard::guard_program(dsh::linux_guard::variant_options(i));
        ASSERT_EQ(built.size(), embedded.size()) << "variant " << i;
        EXPECT_EQ(std::memcmp(built.data(), embedded.data(), built.size() * sizeof(sock_filter)), 0) << "variant " << i;
    }
}

TEST(Guard, VariantsAreNumberedOnceEach) {
    for (std::size_t i = 0; i < dsh::linux_guard::kGuardVariants; ++i)
        EXPECT_EQ(dsh::linux_guard::variant_index(dsh::linux_guard::variant_options(i)), i);
}

TEST(Guard, TerminalInjectionIsRefusedOnTheRequestsLowWord) {
    for (const bool metadata : {false, true})
        for (const SocketRules sockets : dsh::linux_guard::kSocketRules)
            expect({metadata, sockets}, {{{"TIOCSTI", [] { return ioctl_on_null(TIOCSTI); }}, -EPERM},
                                         {{"TIOCSTI, high bits", [] { return ioctl_on_null(kHigh | TIOCSTI); }}, -EPERM},
                                         {{"TIOCLINUX", [] { return ioctl_on_null(TIOCLINUX); }}, -EPERM},
                                         {{"another ioctl", [] { return ioctl_on_null(TIOCGWINSZ); }}, -ENOTTY},
                                         {{"getpid", [] { return call(SYS_getpid) > 0 ? 0L : -1L; }}, 0}});
}

TEST(Guard, MetadataIoctlsAreRefusedOnlyWhenAsked) {
    constexpr long kSetFlags = 0x40086602;  // FS_IOC_SETFLAGS
    expect({false, SocketRules::Any}, {{{"FS_IOC_SETFLAGS", [] { return ioctl_on_null(kSetFlags); }}, -ENOTTY}});
    expect({true, SocketRules::Any}, {{{"FS_IOC_SETFLAGS", [] { return ioctl_on_null(kSetFlags); }}, -EPERM},
                                      {{"FS_IOC_SETFLAGS, high bits", [] { return ioctl_on_null(kHigh | kSetFlags); }}, -EPERM}});
}

#if defined(__x86_64__)
TEST(Guard, X32SyscallsFailWithEnosys) {
    expect({}, {{{"x32 getpid", [] { return call(0x40000000 | SYS_getpid); }}, -ENOSYS}});
}
#endif

TEST(Guard, WithTheNetworkDeniedOnlyNetlinkRouteAndStreamPairsAreMade) {
    const std::vector<std::pair<Probe, long>> cases = {
        {{"socket AF_INET stream", [] { return make_socket(AF_INET, SOCK_STREAM, 0); }}, -EPERM},
        {{"socket AF_INET6 datagram", [] { return make_socket(AF_INET6, SOCK_DGRAM, 0); }}, -EPERM},
        {{"socket AF_UNIX stream", [] { return make_socket(AF_UNIX, SOCK_STREAM, 0); }}, -EPERM},
        {{"socket AF_UNIX datagram", [] { return make_socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0); }}, -EPERM},
        {{"socket AF_PACKET", [] { return make_socket(AF_PACKET, SOCK_RAW, 0); }}, -EPERM},
        {{"socket AF_VSOCK", [] { return make_socket(AF_VSOCK, SOCK_STREAM, 0); }}, -EPERM},
        {{"socket NETLINK_ROUTE raw", [] { return make_socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE); }}, 0},
        {{"socket NETLINK_ROUTE datagram", [] { return make_socket(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE); }}, 0},
        {{"socket NETLINK_USERSOCK", [] { return make_socket(AF_NETLINK, SOCK_RAW, NETLINK_USERSOCK); }}, -EPERM},
        {{"socket NETLINK_SOCK_DIAG", [] { return make_socket(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG); }}, -EPERM},
        {{"socket NETLINK_KOBJECT_UEVENT", [] { return make_socket(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT); }}, -EPERM},
        {{"socket NETLINK_AUDIT", [] { return make_socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT); }}, -EPERM},
        {{"socket NETLINK_GENERIC", [] { return make_socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC); }}, -EPERM},
        {{"socket netlink, family with high bits", [] { return make_socket(kHigh | AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); }}, -EPERM},
        {{"socket netlink, protocol with high bits", [] { return make_socket(AF_NETLINK, SOCK_RAW, kHigh | NETLINK_ROUTE); }}, -EPERM},
        {{"socketpair AF_UNIX stream", [] { return make_pair(AF_UNIX, SOCK_STREAM); }}, 0},
        {{"socketpair AF_UNIX stream, flags", [] { return make_pair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK); }}, 0},
        {{"socketpair AF_UNIX seqpacket", [] { return make_pair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC); }}, 0},
        {{"socketpair AF_UNIX datagram", [] { return make_pair(AF_UNIX, SOCK_DGRAM); }}, -EPERM},
        {{"socketpair AF_UNIX datagram, flags", [] { return make_pair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK); }}, -EPERM},
        {{"socketpair AF_UNIX datagram, high bits", [] { return make_pair(AF_UNIX, kHigh | SOCK_DGRAM); }}, -EPERM},
        {{"socketpair AF_UNIX raw (a datagram pair)", [] { return make_pair(AF_UNIX, SOCK_RAW); }}, -EPERM},
        {{"socketpair AF_UNIX, family with high bits", [] { return make_pair(kHigh | AF_UNIX, SOCK_STREAM); }}, -EPERM},
        {{"socketpair AF_INET", [] { return make_pair(AF_INET, SOCK_STREAM); }}, -EPERM},
        {{"io_uring_setup", [] { return call(SYS_io_uring_setup, 1, 0); }}, -ENOSYS},
    };
    expect({false, SocketRules::Local}, cases);
    expect({true, SocketRules::Local}, cases);
}

TEST(Guard, WithTheNetworkAllowedSocketsAreNotItsConcern) {
    expect({true, SocketRules::Any},
           {{{"socket AF_INET stream", [] { return make_socket(AF_INET, SOCK_STREAM, 0); }}, 0},
            {{"socket AF_UNIX datagram", [] { return make_socket(AF_UNIX, SOCK_DGRAM, 0); }}, 0},
            {{"socket NETLINK_USERSOCK", [] { return make_socket(AF_NETLINK, SOCK_RAW, NETLINK_USERSOCK); }}, 0},
            {{"socketpair AF_UNIX datagram", [] { return make_pair(AF_UNIX, SOCK_DGRAM); }}, 0}});
}

}  // namespace
