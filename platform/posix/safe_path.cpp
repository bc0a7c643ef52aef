#include "safe_path.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/openat2.h>
#include <sys/syscall.h>
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#endif

namespace dsh::posix {
namespace {

#if defined(__linux__)
constexpr int kDirectoryStep = O_PATH | O_DIRECTORY;
#else
constexpr int kDirectoryStep = O_RDONLY | O_DIRECTORY;
#endif

// One component at a time from "/", each opened relative to the last with O_NOFOLLOW: what
// openat2's RESOLVE_NO_SYMLINKS does where the kernel lacks it (before 5.6, and on macOS).
int open_walking(const std::string& path, int flags, unsigned mode) {
    int dir = open("/", kDirectoryStep | O_CLOEXEC);
    if (dir < 0) return -1;
    std::size_t start = 1;
    while (true) {
        while (start < path.size() && path[start] == '/') ++start;
        const std::size_t end = path.find('/', start);
        std::string name = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
        std::size_t rest = end;
        while (rest != std::string::npos && rest < path.size() && path[rest] == '/') ++rest;
        const bool last = end == std::string::npos || rest >= path.size();
        if (name.empty()) name = ".";  // the path was "/"
        if (name == "..") {  // canonical paths have none; refusing beats reasoning about them
            close(dir);
            errno = EINVAL;
            return -1;
        }
        const int next = last ? openat(dir, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode)
                              : openat(dir, name.c_str(), kDirectoryStep | O_NOFOLLOW | O_CLOEXEC);
        const int error = errno;
        close(dir);
        if (next < 0) {
            errno = error == ENOTDIR && !last ? ELOOP : error;
            return -1;
        }
        if (last) return next;
        dir = next;
        start = end + 1;
    }
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == geteuid(); }

}  // namespace

std::string FileIdentity::text() const { return std::to_string(device) + ":" + std::to_string(inode); }

std::optional<FileIdentity> FileIdentity::parse(std::string_view text) {
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
    FileIdentity out;
    for (const auto& [part, field] : {std::pair{text.substr(0, colon), &out.device}, std::pair{text.substr(colon + 1), &out.inode}}) {
        unsigned long long value = 0;
        for (char c : part) {
            if (c < '0' || c > '9' || value > (ULLONG_MAX - 9) / 10) return std::nullopt;
            value = value * 10 + static_cast<unsigned>(c - '0');
        }
        *field = value;
    }
    return out;
}

int open_no_symlinks(const std::string& path, int flags, unsigned mode) {
    if (path.empty() || path.front() != '/') {
        errno = EINVAL;
        return -1;
    }
#if defined(__linux__)
    open_how how{};
    how.flags = static_cast<unsigned long long>(flags | O_NOFOLLOW | O_CLOEXEC);
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return static_cast<int>(fd);
    // ENOSYS: a kernel before 5.6; EPERM: a seccomp filter that refuses the syscall.
#endif
    return open_walking(path, flags, mode);
}

std::optional<FileIdentity> identity_of(int fd) {
    struct stat st {};
    if (fstat(fd, &st) != 0) return std::nullopt;
    return FileIdentity{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino)};
}

std::optional<FileIdentity> directory_identity(const std::string& path, std::string& why) {
    const int fd = open_no_symlinks(path, kDirectoryStep);
    if (fd < 0) {
        int error = errno;
        struct stat st {};
        // O_DIRECTORY meets a symlink at the end first: ENOTDIR, though the symlink is the point.
        if (error == ENOTDIR && lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) error = ELOOP;
        why = path + (error == ELOOP ? ": a component is a symlink" : std::string(": ") + std::strerror(error));
        return std::nullopt;
    }
    std::optional<FileIdentity> id = identity_of(fd);
    close(fd);
    if (!id) why = path + ": " + std::strerror(errno);
    return id;
}

std::optional<std::string> trusted_executable(const std::string& path, std::string& why) {
    char resolved[PATH_MAX];
    if (!realpath(path.c_str(), resolved)) {
        why = path + ": " + std::strerror(errno);
        return std::nullopt;
    }
    const std::string canonical = resolved;
    struct stat st {};
    if (stat(canonical.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        why = canonical + " is not a regular file";
        return std::nullopt;
    }
    if (!trusted_owner(st.st_uid) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        why = canonical + " can be replaced by another user (owned by uid " + std::to_string(st.st_uid) + ", mode " + mode + ")";
        return std::nullopt;
    }
    for (std::size_t slash = canonical.rfind('/'); slash != std::string::npos; slash = canonical.rfind('/', slash - 1)) {
        const std::string dir = slash == 0 ? "/" : canonical.substr(0, slash);
        if (stat(dir.c_str(), &st) != 0) {
            why = dir + ": " + std::strerror(errno);
            return std::nullopt;
        }
        const bool sticky = (st.st_mode & S_ISVTX) != 0;
        if (!trusted_owner(st.st_uid) || ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky)) {
            why = canonical + " lies in " + dir + ", which another user can change";
            return std::nullopt;
        }
        if (slash == 0) break;
    }
    return canonical;
}

std::string resolved_path(const std::string& path) {
#if defined(__linux__)
    if (!path.empty() && path.front() == '/') {
        std::string head = path, tail;
        while (head.size() > 1 && head.back() == '/') head.pop_back();
        for (;;) {
            const int fd = open(head.c_str(), O_PATH | O_CLOEXEC);
            if (fd >= 0) {
                char target[PATH_MAX];
                const ssize_t size = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof target);
                close(fd);
                if (size <= 0 || static_cast<std::size_t>(size) == sizeof target || target[0] != '/') break;  // no /proc
                std::filesystem::path out(std::string(target, static_cast<std::size_t>(size)));
                if (tail.empty()) return out.string();
                out = (out / tail).lexically_normal();
                std::string text = out.string();
                while (text.size() > 1 && text.back() == '/') text.pop_back();
                return text;
            }
            // What weakly_canonical takes for missing: ENOENT, and ENOTDIR (a file on the way).
            if ((errno != ENOENT && errno != ENOTDIR) || head == "/") break;
            const std::size_t slash = head.rfind('/');
            tail = head.substr(slash + 1) + (tail.empty() ? "" : "/" + tail);
            head = slash == 0 ? "/" : head.substr(0, slash);
        }
    }
#endif
    std::error_code ec;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : resolved.string();
}

}  // namespace dsh::posix
