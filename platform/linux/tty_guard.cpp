#include "tty_guard.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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

// Other architectures' syscalls (32-bit entry points, which could reach ioctl by another
// number) fail with ENOSYS; ioctl's request is compared on its low word, as the kernel does.
std::vector<sock_filter> filter(bool metadata_ioctls) {
    std::vector<std::uint32_t> refused = {static_cast<std::uint32_t>(TIOCSTI), static_cast<std::uint32_t>(TIOCLINUX)};
    if (metadata_ioctls) refused.insert(refused.end(), std::begin(kMetadataIoctls), std::end(kMetadataIoctls));
    std::vector<sock_filter> out = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1),  // the x32 ABI
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
    };
    const auto count = static_cast<std::uint8_t>(refused.size());
    // Not ioctl: allow (jump over the request load, the comparisons, their ALLOW and the refusal).
    out.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, static_cast<std::uint8_t>(count + 3)));
    out.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])));
    for (std::uint8_t i = 0; i < count; ++i)  // a match jumps to the refusal after the last comparison
        out.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, refused[i], static_cast<std::uint8_t>(count - i), 0));
    out.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    out.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    out.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    return out;
}

}  // namespace

bool install_tty_guard(std::string& why, bool metadata_ioctls) {
    std::vector<sock_filter> program_code = filter(metadata_ioctls);
    sock_fprog program{static_cast<unsigned short>(program_code.size()), program_code.data()};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0) != 0) {
        why = std::string("seccomp filter for the terminal: ") + std::strerror(errno);
        return false;
    }
    return true;
}

}  // namespace dsh::linux_guard
