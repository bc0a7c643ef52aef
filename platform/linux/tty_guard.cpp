#include "tty_guard.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dsh::linux_guard {
namespace {

#if defined(__x86_64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
#error "set the seccomp audit architecture for this target"
#endif

// Other architectures' syscalls (32-bit entry points, which could reach ioctl by another
// number) fail with ENOSYS; ioctl's request is compared on its low word, as the kernel does.
const sock_filter kFilter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
#if defined(__x86_64__)
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1),  // the x32 ABI
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 4),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

bool install_tty_guard(std::string& why) {
    sock_fprog program{static_cast<unsigned short>(sizeof kFilter / sizeof kFilter[0]),
                       const_cast<sock_filter*>(kFilter)};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) {
        why = errno_text("seccomp filter for the terminal");
        return false;
    }
    return true;
}

int tty_guard_fd(std::string& why) {
    // The program is a few hundred bytes: a pipe holds it whole, and the reader sees its end.
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) {
        why = errno_text("pipe for the terminal guard");
        return -1;
    }
    const ssize_t n = write(ends[1], kFilter, sizeof kFilter);
    const int saved = errno;
    close(ends[1]);
    if (n != static_cast<ssize_t>(sizeof kFilter)) {
        close(ends[0]);
        errno = n < 0 ? saved : EIO;
        why = errno_text("writing the terminal guard");
        return -1;
    }
    return ends[0];
}

}  // namespace dsh::linux_guard
