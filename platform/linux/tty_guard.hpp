// The terminal guard: a seccomp filter that refuses ioctl(TIOCSTI) and ioctl(TIOCLINUX), so a
// confined command cannot push keystrokes into the caller's terminal (they would run outside
// any sandbox) while it keeps that terminal as its controlling one (job control works).
//
// Under Landlock the same filter also refuses the ioctls that change a file's metadata where
// Landlock has no hook (it governs ioctls on device files only): inode flags (chattr: append-only,
// no-dump, no-atime, ...), the project and extended-attribute flags (FS_IOC_FSSETXATTR), the
// inode generation, an encryption policy, and btrfs subvolume and snapshot creation, removal and
// flags. They are refused everywhere, the workspace included: a named over-block. Under
// bubblewrap a read-only mount already refuses them (EROFS) outside the writable roots.
//
// With the network denied, the filter also refuses creating sockets of every family but netlink
// and, where nothing better keeps host daemons out, AF_UNIX (see GuardOptions).
#pragma once

#include <vector>

#include <linux/filter.h>

namespace dsh::linux_guard {

struct GuardOptions {
    bool metadataIoctls = false;  // also refuse the metadata-changing ioctls listed above (EPERM)
    // Network deny: socket() of any family but netlink (and AF_UNIX when `unixSockets`) is EPERM,
    // and io_uring_setup ENOSYS (io_uring makes sockets without socket()). socketpair() works.
    bool denyNetwork = false;
    bool unixSockets = true;
};

// The filter's program, for prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) once no_new_privs is
// set (runner.hpp's Launch installs it).
std::vector<sock_filter> guard_program(const GuardOptions& options = {});

}  // namespace dsh::linux_guard
