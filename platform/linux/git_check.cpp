#include "git_check.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../lib/git_protection.hpp"
#include "../posix/safe_path.hpp"
#include "../posix/state_store.hpp"

namespace dsh::git_check {
namespace {

struct Head {
    bool present = false;
    bool symlink = false;
    std::string content;
};

// HEAD as git's validity test reads it: a symlink's target, or the first 255 bytes of a regular
// file (a FIFO or device planted there is not opened: git would block on it, and it is not valid).
Head read_head(int directory) {
    Head head;
    struct stat st {};
    if (fstatat(directory, "HEAD", &st, AT_SYMLINK_NOFOLLOW) != 0) return head;
    head.present = true;
    if (S_ISLNK(st.st_mode)) {
        char target[256] = {};
        const ssize_t n = readlinkat(directory, "HEAD", target, sizeof target - 1);
        head.symlink = true;
        if (n > 0) head.content.assign(target, static_cast<std::size_t>(n));
        return head;
    }
    if (!S_ISREG(st.st_mode)) return head;
    const int fd = openat(directory, "HEAD", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return head;
    char buffer[256];
    const ssize_t n = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (n > 0) head.content.assign(buffer, static_cast<std::size_t>(n));
    return head;
}

bool valid(const Head& head) { return head.present && valid_git_head(head.content, head.symlink); }

mode_t mode_of(int directory, const char* name) {
    struct stat st {};
    const int flags = name[0] == '\0' ? AT_EMPTY_PATH : AT_SYMLINK_NOFOLLOW;
    if (fstatat(directory, name, &st, flags) != 0 || !S_ISDIR(st.st_mode)) return 0;
    return st.st_mode & (S_IFMT | 07777);  // never 0 for a directory, whatever its permission bits
}

// Sets the permission bits of `name` in `directory` (the directory itself when empty) back, where
// they changed. The entry is a directory the stage keeps in place (a mount point), reached by the
// descriptor's magic link for the directory itself: nothing is followed that the command made.
bool restore_mode(int directory, const char* name, mode_t was) {
    const mode_t now = mode_of(directory, name);
    if (was == 0 || now == 0 || now == was) return false;
    if (name[0] == '\0') {
        const std::string self = "/proc/self/fd/" + std::to_string(directory);
        return chmod(self.c_str(), was & 07777) == 0;
    }
    return fchmodat(directory, name, was & 07777, 0) == 0;
}

// Writes HEAD as it was: a new file (or symlink) made beside it, renamed over whatever is there.
bool restore_head(const Recorded& recorded) {
    struct stat st {};
    if (fstatat(recorded.directory, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        posix::remove_tree_at(recorded.directory, "HEAD");  // rename cannot replace a directory with a file
    const std::string temporary = "HEAD.dsh-confine-" + std::to_string(getpid());
    unlinkat(recorded.directory, temporary.c_str(), 0);
    if (recorded.headSymlink) {
        if (symlinkat(recorded.head.c_str(), recorded.directory, temporary.c_str()) != 0) return false;
    } else {
        const int fd = openat(recorded.directory, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) return false;
        const bool written = write(fd, recorded.head.data(), recorded.head.size()) == static_cast<ssize_t>(recorded.head.size());
        close(fd);
        if (!written) {
            unlinkat(recorded.directory, temporary.c_str(), 0);
            return false;
        }
    }
    if (renameat(recorded.directory, temporary.c_str(), recorded.directory, "HEAD") != 0) {
        unlinkat(recorded.directory, temporary.c_str(), 0);
        return false;
    }
    return true;
}

}  // namespace

std::optional<Recorded> record(const std::string& gitdir, std::string& why) {
    Recorded out;
    out.path = gitdir;
    out.directory = posix::open_no_symlinks(gitdir, O_PATH | O_DIRECTORY);
    if (out.directory < 0) {
        why = "the git directory " + gitdir + (errno == ELOOP ? ": a component is a symlink" : ": " + std::string(std::strerror(errno)));
        return std::nullopt;
    }
    struct stat st {};
    out.hadCommondir = fstatat(out.directory, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0;
    out.common = out.directory;
    if (out.hadCommondir) {
        // Kept read-only by the stage: the common directory it names is the one git will use.
        char buffer[4096] = {};
        const int fd = openat(out.directory, "commondir", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        const ssize_t n = fd >= 0 ? read(fd, buffer, sizeof buffer - 1) : -1;
        if (fd >= 0) close(fd);
        std::string text = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
        if (!text.empty()) {
            const std::string path = text.front() == '/' ? text : gitdir + "/" + text;
            const int common = posix::open_no_symlinks(posix::resolved_path(path), O_PATH | O_DIRECTORY);
            if (common >= 0) out.common = common;
        }
    }
    const Head head = read_head(out.directory);
    out.head = head.content;
    out.headSymlink = head.symlink;
    out.headValid = valid(head);
    out.directoryMode = mode_of(out.directory, "");
    out.objectsMode = mode_of(out.common, "objects");
    out.refsMode = mode_of(out.common, "refs");
    return out;
}

std::vector<std::string> restore(const Recorded& recorded) {
    std::vector<std::string> said;
    const std::string where = recorded.path;
    if (restore_mode(recorded.directory, "", recorded.directoryMode))
        said.push_back("restored the mode of " + where + ", which the command changed");
    if (restore_mode(recorded.common, "objects", recorded.objectsMode))
        said.push_back("restored the mode of " + where + "'s objects/, which the command changed");
    if (restore_mode(recorded.common, "refs", recorded.refsMode))
        said.push_back("restored the mode of " + where + "'s refs/, which the command changed");
    struct stat st {};
    if (!recorded.hadCommondir && fstatat(recorded.directory, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        const bool removed = S_ISDIR(st.st_mode) ? posix::remove_tree_at(recorded.directory, "commondir")
                                                 : unlinkat(recorded.directory, "commondir", 0) == 0;
        said.push_back(removed ? "removed " + where + "/commondir, which the command planted (it would send git to another "
                                                      "directory's config and hooks)"
                               : "could not remove " + where + "/commondir, which the command planted: " + std::strerror(errno) +
                                     "; remove it before you run git there");
    }
    if (recorded.headValid && !valid(read_head(recorded.directory))) {
        said.push_back(restore_head(recorded)
                           ? "restored " + where + "/HEAD, which the command left invalid (git would have taken the "
                                                   "directory above it for a bare repository)"
                           : "could not restore " + where + "/HEAD, which the command left invalid: " + std::strerror(errno) +
                                 "; git run in the workspace may take the directory above it for a bare repository");
    }
    return said;
}

}  // namespace dsh::git_check
