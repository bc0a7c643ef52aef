#include "runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <sys/stat.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../posix/process.hpp"

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

bool capabilities(__user_cap_data_struct (&data)[2]) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    return syscall(SYS_capget, &header, data) == 0;
}

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

bool drop_capabilities(std::string& why) {
    __user_cap_data_struct data[2] = {};
    if (!capabilities(data)) {
        why = errno_text("capget");
        return false;
    }
    const bool any = data[0].permitted || data[1].permitted || data[0].effective || data[1].effective;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (any) {
        if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                         SECBIT_NO_SETUID_FIXUP_LOCKED, 0, 0, 0) != 0) {
            why = errno_text("securebits");
            return false;
        }
        // Every capability this kernel knows, up to the first number it refuses as invalid
        // (its CAP_LAST_CAP + 1), without reading /proc/sys/kernel/cap_last_cap.
        for (int cap = 0;; ++cap) {
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
            if (errno == EINVAL && cap > 0) break;
            why = errno_text("dropping the capability bounding set");
            return false;
        }
    }
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (syscall(SYS_capset, &header, none) != 0) {
        why = errno_text("capset");
        return false;
    }
    return true;
}

bool has_sys_admin() {
    __user_cap_data_struct data[2] = {};
    return capabilities(data) && (data[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32))) != 0;
}

bool pass_only(const std::vector<int>& keep, std::string& why) {
    for (int fd : keep)
        if (fd < 3 || fcntl(fd, F_GETFD) < 0) {
            why = "--keep-fd " + std::to_string(fd) + ": not an open descriptor above 2";
            return false;
        }
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        // Before Linux 5.11: the open descriptors are listed, not every possible number tried.
        DIR* dir = opendir("/proc/self/fd");
        if (!dir) {
            why = errno_text("/proc/self/fd");
            return false;
        }
        const int own = dirfd(dir);
        std::vector<int> open;
        while (dirent* entry = readdir(dir)) {
            char* end = nullptr;
            const long fd = std::strtol(entry->d_name, &end, 10);
            if (end != entry->d_name && *end == '\0' && fd > 2 && fd != own) open.push_back(static_cast<int>(fd));
        }
        closedir(dir);
        for (int fd : open) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    for (int fd : keep) fcntl(fd, F_SETFD, 0);
    return true;
}

int exec_command(const std::vector<std::string>& argv, int status_fd, const std::vector<int>& keep,
                 const char* error_code) {
    const posix::ProgramLookup program = posix::resolve_program(argv.front());
    if (program.status == posix::Lookup::NotFound) {
        if (status_fd >= 0) (void)!write(status_fd, "SF", 2);  // reached the command, which is missing
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_FOUND: %s: not found\n", argv.front().c_str());
        return 127;
    }
    std::string why;
    if (!pass_only(keep, why)) {
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", error_code, why.c_str());
        return 125;
    }
    if (status_fd >= 0 && std::find(keep.begin(), keep.end(), status_fd) == keep.end())
        fcntl(status_fd, F_SETFD, FD_CLOEXEC);  // closed by a successful execve
    if (status_fd >= 0) (void)!write(status_fd, "S", 1);
    posix::exec_argv(program.path, argv);
    const int error = errno;
    if (status_fd >= 0) (void)!write(status_fd, "F", 1);
    std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: %s\n", argv.front().c_str(),
                 std::strerror(error));
    return error == ENOENT ? 127 : 126;
}

}  // namespace dsh::linux_runner
