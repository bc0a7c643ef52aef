#include "tty_guard.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/socket.h>
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

// Other architectures' syscalls (32-bit entry points, which could reach ioctl or socketcall
// by other numbers) fail with ENOSYS; ioctl's request is compared on its low word, as the
// kernel does. Each refusal is its own block after the dispatch on the syscall number.
std::vector<sock_filter> filter(const GuardOptions& options) {
    std::vector<std::uint32_t> refused = {static_cast<std::uint32_t>(TIOCSTI), static_cast<std::uint32_t>(TIOCLINUX)};
    if (options.metadataIoctls) refused.insert(refused.end(), std::begin(kMetadataIoctls), std::end(kMetadataIoctls));
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
    // The blocks, each entered with the syscall number still in the accumulator's source.
    std::vector<std::pair<std::uint32_t, std::vector<sock_filter>>> blocks;
    {
        std::vector<sock_filter> ioctl = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1]))};
        const auto count = static_cast<std::uint8_t>(refused.size());
        for (std::uint8_t i = 0; i < count; ++i)  // a match jumps to the refusal after the ALLOW
            ioctl.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, refused[i], static_cast<std::uint8_t>(count - i), 0));
        ioctl.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        ioctl.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
        blocks.emplace_back(SYS_ioctl, std::move(ioctl));
    }
    if (options.denyNetwork) {
        // socket(): netlink (routes and addresses of the sandbox's own view) and, where the
        // caller allows it, AF_UNIX; every other family (IP, packet, vsock, ...) is EPERM.
        std::vector<sock_filter> socket = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]))};
        socket.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 2, 0));
        socket.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(options.unixSockets ? AF_UNIX : AF_NETLINK), 1, 0));
        socket.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
        socket.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        blocks.emplace_back(SYS_socket, std::move(socket));
        // io_uring can make and connect sockets without the socket() syscall: ENOSYS, on which
        // its users fall back to ordinary syscalls.
        blocks.emplace_back(SYS_io_uring_setup, std::vector<sock_filter>{BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS)});
    }
    // Dispatch: one comparison per block, then ALLOW; each comparison jumps to its block.
    std::size_t offset = 1;  // past the final ALLOW of the dispatch
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const std::size_t remaining = blocks.size() - i - 1;  // comparisons after this one
        out.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, blocks[i].first, static_cast<std::uint8_t>(remaining + offset), 0));
        offset += blocks[i].second.size();
    }
    out.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    for (auto& block : blocks) out.insert(out.end(), block.second.begin(), block.second.end());
    return out;
}

}  // namespace

std::vector<sock_filter> guard_program(const GuardOptions& options) { return filter(options); }

}  // namespace dsh::linux_guard
