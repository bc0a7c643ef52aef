#include "state_store.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "../../lib/error.hpp"

namespace dsh::posix {
namespace {

class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_;
};

[[noreturn]] void state_error(const std::string& what, int error) {
    throw Error(code::State, what + ": " + std::strerror(error));
}

// A state directory another user could write to is not ours to trust.
void require_private(int fd, const std::string& path) {
    struct stat st {};
    if (fstat(fd, &st) != 0) state_error(path, errno);
    if (!S_ISDIR(st.st_mode)) throw Error(code::State, path + ": not a directory");
    if (st.st_uid != geteuid()) throw Error(code::State, path + ": owned by uid " + std::to_string(st.st_uid) + ", not by this user");
    if (st.st_mode & (S_IWGRP | S_IWOTH)) throw Error(code::State, path + ": writable by group or others");
}

int open_dir_at(int parent, const std::string& name, bool create, const std::string& shown) {
    if (create && mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) state_error(shown, errno);
    const int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !create) return -1;
        if (errno == ELOOP || errno == ENOTDIR)
            throw Error(code::State, shown + ": not a directory (a symlink here is refused)");
        state_error(shown, errno);
    }
    return fd;
}

std::optional<std::string> read_all_at(int dir, const char* name, const std::string& shown, bool shared_lock) {
    Fd fd(openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
        if (errno == ENOENT) return std::nullopt;
        if (errno == ELOOP) throw Error(code::State, shown + ": is a symlink, refused");
        state_error(shown, errno);
    }
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) state_error(shown, errno);
    if (!S_ISREG(st.st_mode)) throw Error(code::State, shown + ": not a regular file");
    if (shared_lock) flock(fd.get(), LOCK_SH);
    std::string content;
    char buffer[65536];
    while (true) {
        const ssize_t n = read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) state_error(shown, errno);
        if (n == 0) break;
        content.append(buffer, static_cast<std::size_t>(n));
    }
    return content;
}

// The appended event on stable storage before it is reported written. On macOS fsync(2) stops
// at the drive's cache; F_FULLFSYNC goes through it (where the file system refuses it, fsync).
bool sync_data(int fd) {
#if defined(__APPLE__)
    return fcntl(fd, F_FULLFSYNC) == 0 || fsync(fd) == 0;
#else
    return fdatasync(fd) == 0;
#endif
}

bool write_all(int fd, const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<std::size_t>(n);
    }
    return true;
}

// The offset just past the last newline in the file's first `size` bytes.
off_t end_of_last_line(int fd, off_t size) {
    char buffer[4096];
    off_t end = size;
    while (end > 0) {
        const off_t start = end > static_cast<off_t>(sizeof buffer) ? end - static_cast<off_t>(sizeof buffer) : 0;
        const ssize_t n = pread(fd, buffer, static_cast<std::size_t>(end - start), start);
        if (n <= 0) return 0;
        for (ssize_t i = n - 1; i >= 0; --i)
            if (buffer[i] == '\n') return start + i + 1;
        end = start;
    }
    return 0;
}

}  // namespace

bool make_private_dirs(const std::string& path) {
    if (path.empty()) return false;
    std::string prefix;
    std::size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        prefix = path.substr(0, pos);
        if (prefix.empty()) continue;
        if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) return false;
    }
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool remove_tree_at(int dir_fd, const std::string& name) {
    struct stat st {};
    if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
    if (!S_ISDIR(st.st_mode)) return unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT;
    int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
        // Never through a symlink: the name may have been swapped for one since the fstatat.
        fchmodat(dir_fd, name.c_str(), 0700, AT_SYMLINK_NOFOLLOW);
        fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) return false;
    fchmod(fd, 0700);  // entries of a directory the command made read-only can still go
    DIR* dir = fdopendir(fd);
    if (!dir) {
        close(fd);
        return false;
    }
    std::vector<std::string> entries;
    while (dirent* entry = readdir(dir)) {
        const std::string child = entry->d_name;
        if (child != "." && child != "..") entries.push_back(child);
    }
    bool ok = true;
    for (const auto& child : entries) ok = remove_tree_at(dirfd(dir), child) && ok;
    closedir(dir);
    return unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0 && ok;
}

int StateDirStorage::open_sessions(bool create) const {
    if (create && !make_private_dirs(state_dir_)) state_error(state_dir_, errno);
    Fd root(open(state_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root) {
        if (errno == ENOENT && !create) return -1;
        state_error(state_dir_, errno);
    }
    require_private(root.get(), state_dir_);
    const int sessions = open_dir_at(root.get(), "sessions", create, state_dir_ + "/sessions");
    if (sessions >= 0) {
        try {
            require_private(sessions, state_dir_ + "/sessions");
        } catch (...) {
            close(sessions);
            throw;
        }
    }
    return sessions;
}

int StateDirStorage::open_session(const std::string& id, bool create) const {
    Fd sessions(open_sessions(create));
    if (!sessions) return -1;
    const std::string shown = state_dir_ + "/sessions/" + id;
    const int fd = open_dir_at(sessions.get(), id, create, shown);
    if (fd >= 0) require_private(fd, shown);
    return fd;
}

std::optional<std::string> StateDirStorage::read_record(const std::string& id) {
    Fd dir(open_session(id, false));
    if (!dir) return std::nullopt;
    return read_all_at(dir.get(), "session.json", state_dir_ + "/sessions/" + id + "/session.json", false);
}

bool StateDirStorage::create_record(const std::string& id, const std::string& content) {
    Fd dir(open_session(id, true));
    const std::string shown = state_dir_ + "/sessions/" + id + "/session.json";
    const std::string temp = ".session.json." + std::to_string(getpid());
    unlinkat(dir.get(), temp.c_str(), 0);
    Fd fd(openat(dir.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) state_error(shown, errno);
    if (!write_all(fd.get(), content) || fsync(fd.get()) != 0) {
        const int error = errno;
        unlinkat(dir.get(), temp.c_str(), 0);
        state_error(shown, error);
    }
    // link() never replaces: of concurrent starters exactly one creates the record.
    const int linked = linkat(dir.get(), temp.c_str(), dir.get(), "session.json", 0);
    const int error = errno;
    unlinkat(dir.get(), temp.c_str(), 0);
    if (linked == 0) return true;
    if (error == EEXIST) return false;
    state_error(shown, error);
}

std::optional<std::string> StateDirStorage::read_log(const std::string& id) {
    Fd dir(open_session(id, false));
    if (!dir) return std::nullopt;
    return read_all_at(dir.get(), "events.log", state_dir_ + "/sessions/" + id + "/events.log", true);
}

void StateDirStorage::append_log(const std::string& id, const std::string& line) {
    Fd dir(open_session(id, false));
    const std::string shown = state_dir_ + "/sessions/" + id + "/events.log";
    if (!dir) throw Error(code::Session, "no session '" + id + "'");
    // Read access too: a torn last line is found by reading the file's end.
    Fd fd(openat(dir.get(), "events.log", O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) {
        if (errno == ELOOP) throw Error(code::State, shown + ": is a symlink, refused");
        state_error(shown, errno);
    }
    // One writer at a time, and each event is one write(): appends never interleave.
    while (flock(fd.get(), LOCK_EX) != 0)
        if (errno != EINTR) state_error(shown, errno);
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) state_error(shown, errno);
    if (!S_ISREG(st.st_mode)) throw Error(code::State, shown + ": not a regular file");
    off_t size = st.st_size;
    if (size > 0) {
        char last = 0;
        if (pread(fd.get(), &last, 1, size - 1) == 1 && last != '\n') {
            // A crash tore the last append: drop the fragment so the next event starts a line.
            const off_t keep = end_of_last_line(fd.get(), size);
            spdlog::warn("session '{}': dropping a torn last line of {} bytes", id, static_cast<long long>(size - keep));
            if (ftruncate(fd.get(), keep) != 0) state_error(shown, errno);
            size = keep;
        }
    }
    if (!write_all(fd.get(), line) || !sync_data(fd.get())) {
        const int error = errno;
        // Leave no partial event behind: an event is written whole or not at all.
        if (ftruncate(fd.get(), size) != 0) spdlog::warn("{}: could not undo a partial append", shown);
        state_error(shown + ": the event was not written", error);
    }
}

bool StateDirStorage::remove(const std::string& id) {
    Fd sessions(open_sessions(false));
    if (!sessions) return false;
    struct stat st {};
    if (fstatat(sessions.get(), id.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return false;
        state_error(state_dir_ + "/sessions/" + id, errno);
    }
    if (!S_ISDIR(st.st_mode)) throw Error(code::State, state_dir_ + "/sessions/" + id + ": not a directory (refused)");
    if (!remove_tree_at(sessions.get(), id)) state_error(state_dir_ + "/sessions/" + id + ": could not be removed", errno);
    return true;
}

std::string StateDirStorage::temp_dir(const std::string& id) {
    Fd dir(open_session(id, false));
    if (!dir) throw Error(code::Session, "no session '" + id + "'");
    std::string path = state_dir_ + "/sessions/" + id + "/tmp";
    Fd tmp(open_dir_at(dir.get(), "tmp", true, path));
    require_private(tmp.get(), path);
    return path;
}

namespace {

// The cache directory, opened as itself (not through a symlink at its end) and trusted only if
// it is ours and nobody else can write it; -1 (a miss) otherwise. Its entries are then reached
// relative to it: a name planted there cannot redirect a read or a write elsewhere.
int open_cache_dir(const std::string& dir) {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        spdlog::debug("probe cache {}: not a private directory of ours (ignored)", dir);
        close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

std::optional<std::string> FileProbeCache::read(const std::string& key) {
    const std::string name = key + ".json";
    Fd dir(open_cache_dir(cache_dir_));
    if (!dir) return std::nullopt;
    Fd fd(openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) {
        if (errno != ENOENT) spdlog::debug("probe cache {}/{}: {} (ignored)", cache_dir_, name, std::strerror(errno));
        return std::nullopt;
    }
    struct stat st {};
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_size > 65536) {
        spdlog::debug("probe cache {}/{}: not a small regular file of ours (ignored)", cache_dir_, name);
        return std::nullopt;
    }
    std::string content(static_cast<std::size_t>(st.st_size), '\0');
    const ssize_t n = pread(fd.get(), content.data(), content.size(), 0);
    if (n != st.st_size) {
        spdlog::debug("probe cache {}/{}: short read (ignored)", cache_dir_, name);
        return std::nullopt;
    }
    return content;
}

void FileProbeCache::discard(const std::string& key, const std::string& why) {
    spdlog::debug("probe cache {}/{}.json: {} (ignored, probing again)", cache_dir_, key, why);
}

void FileProbeCache::write(const std::string& key, const std::string& content) {
    if (!make_private_dirs(cache_dir_)) {
        spdlog::debug("probe cache {}: cannot be created: {} (ignored)", cache_dir_, std::strerror(errno));
        return;
    }
    Fd dir(open_cache_dir(cache_dir_));
    if (!dir) return;
    const std::string name = key + ".json";
    const std::string temp = name + ".tmp." + std::to_string(getpid());
    unlinkat(dir.get(), temp.c_str(), 0);  // a leftover of a crashed writer with this pid
    Fd fd(openat(dir.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd || !write_all(fd.get(), content)) {
        spdlog::debug("probe cache {}/{}: cannot be written: {} (ignored)", cache_dir_, temp, std::strerror(errno));
        unlinkat(dir.get(), temp.c_str(), 0);
        return;
    }
    if (renameat(dir.get(), temp.c_str(), dir.get(), name.c_str()) != 0) {
        spdlog::debug("probe cache {}/{}: cannot be replaced: {} (ignored)", cache_dir_, name, std::strerror(errno));
        unlinkat(dir.get(), temp.c_str(), 0);
    }
}

}  // namespace dsh::posix
