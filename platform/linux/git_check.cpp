#include "git_check.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../lib/git_protection.hpp"
#include "../posix/safe_path.hpp"
#include "../posix/state_store.hpp"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

namespace dsh::git_check {
namespace {

// HEAD as git's validity test reads it: a symlink's target, or the first 255 bytes of a regular
// file (a FIFO or device planted there is not opened: git would block on it, and it is not valid).
struct Head {
    bool present = false;
    bool symlink = false;
    std::string content;
};
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

// A valid HEAD to put back: the one recorded where it was valid (a symlink's as its `ref:` line),
// else one naming a branch refs/heads holds, else `main` (an unborn branch: still valid).
std::string head_to_restore(int directory, const Head& head) {
    if (valid(head)) return head.symlink ? "ref: " + head.content + "\n" : head.content;
    std::string branch = "main";
    const int heads = openat(directory, "refs/heads", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (DIR* entries = heads >= 0 ? fdopendir(heads) : nullptr) {
        while (dirent* entry = readdir(entries))
            if (entry->d_type == DT_REG) {
                branch = entry->d_name;
                break;
            }
        closedir(entries);
    } else if (heads >= 0) {
        close(heads);
    }
    return "ref: refs/heads/" + branch + "\n";
}

mode_t mode_of(int directory, const char* name) {
    struct stat st {};
    const int flags = name[0] == '\0' ? AT_EMPTY_PATH : AT_SYMLINK_NOFOLLOW;
    if (fstatat(directory, name, &st, flags) != 0 || !S_ISDIR(st.st_mode)) return 0;
    return st.st_mode & (S_IFMT | 07777);  // never 0 for a directory, whatever its permission bits
}

// Where git could no longer use the directory (its owner's rwx taken away), the mode it had, or
// that one with them (another call may have left it broken before this one recorded it). The
// entry is opened without following a symlink and set through its descriptor's magic link: the
// stage keeps it in place (a mount point), but the caller's process in front of the sandbox
// checks again once the sandbox is gone, when a concurrent call's command may have put a
// symlink in its place.
bool restore_mode(int directory, const char* name, mode_t was) {
    const int fd = name[0] == '\0' ? directory : openat(directory, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    const mode_t now = mode_of(fd, "");
    bool restored = false;
    if (now != 0 && (now & S_IRWXU) != S_IRWXU) {
        const mode_t wanted = ((was & S_IRWXU) == S_IRWXU ? was : now | S_IRWXU) & 07777;
        const std::string self = "/proc/self/fd/" + std::to_string(fd);
        restored = chmod(self.c_str(), wanted) == 0;
    }
    if (fd != directory) close(fd);
    return restored;
}

// A name for a file of ours in the git directory, which the command cannot have guessed.
std::string random_name(const char* what) {
    unsigned char bytes[8] = {};
    if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) return "";
    std::string name = std::string(what) + ".dsh-confine-";
    for (unsigned char byte : bytes) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", byte);
        name += hex;
    }
    return name;
}

// `name` moved aside to a random name and removed as far as it can be (a tree deeper than the
// descriptors allow stays, under that name): true when `name` is gone. Where no new name can be
// made (a directory so full that no entry can be added), removed where it is: that frees an
// entry, and takes none.
bool move_aside(int directory, const std::string& name) {
    const std::string aside = random_name(name.c_str());
    if (!aside.empty() && syscall(SYS_renameat2, directory, name.c_str(), directory, aside.c_str(), RENAME_NOREPLACE) == 0) {
        if (unlinkat(directory, aside.c_str(), 0) != 0) posix::remove_tree_at(directory, aside);
        return true;
    }
    if (unlinkat(directory, name.c_str(), 0) == 0) return true;
    if (errno != EISDIR) return false;
    const bool removed = posix::remove_tree_at(directory, name);
    if (!removed) errno = ENOTEMPTY;
    return removed;
}

// The places git writes through where a planted symlink would send it elsewhere: the top of the
// git directory, `logs/` to any depth (git appends each reflog line through whatever a
// `logs/refs/heads/NAME` names), and `worktrees/` and `modules/` (a `worktrees/NAME` link: git's
// writes and its `worktree prune` go where it points).
struct LinkPlace {
    const char* name;
    bool deep;
};
constexpr LinkPlace kLinkPlaces[] = {{"", false}, {"logs", true}, {"worktrees", false}, {"modules", false}};
constexpr int kMaxLinkDepth = 32;
constexpr std::size_t kMaxLinkEntries = 65536;

// Calls `found(parent, name, path)` for each symlink in the directory `fd` (and, `deep`, in the
// directories below it), `path` relative to the git directory. Every directory is opened relative
// to its parent without following a symlink: the walk never leaves the git directory. It
// closes `fd`.
// `budget` counts the entries looked at; one left unlooked at (the budget spent, or a directory
// deeper than kMaxLinkDepth) makes `whole` false.
template <typename Found>
void each_symlink(int fd, const std::string& prefix, bool deep, int depth, std::size_t& budget, bool& whole, const Found& found) {
    DIR* entries = fdopendir(fd);
    if (!entries) {
        close(fd);
        return;
    }
    std::vector<std::string> below;
    while (dirent* entry = readdir(entries)) {
        const std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        if (budget == 0) {
            whole = false;
            continue;
        }
        --budget;
        struct stat st {};
        if (fstatat(dirfd(entries), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISLNK(st.st_mode)) found(dirfd(entries), name, prefix + name);
        else if (deep && S_ISDIR(st.st_mode)) {
            if (depth < kMaxLinkDepth) below.push_back(name);
            else whole = false;
        }
    }
    for (const auto& name : below) {
        const int child = openat(dirfd(entries), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (child >= 0) each_symlink(child, prefix + name + "/", deep, depth + 1, budget, whole, found);
    }
    closedir(entries);
}

// False when some entry was left unlooked at (each_symlink's bounds).
template <typename Found>
bool each_planted_place_link(int directory, const Found& found) {
    std::size_t budget = kMaxLinkEntries;
    bool whole = true;
    for (const LinkPlace& place : kLinkPlaces) {
        const int fd = place.name[0] == '\0' ? openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                             : openat(directory, place.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            each_symlink(fd, place.name[0] == '\0' ? std::string() : std::string(place.name) + "/", place.deep, 0, budget, whole, found);
    }
    return whole;
}

std::set<std::string> symlinks_at(int directory) {
    std::set<std::string> out;
    each_planted_place_link(directory, [&](int, const std::string&, const std::string& path) { out.insert(path); });
    return out;
}

}  // namespace

int above_stdio(int fd) {
    if (fd < 0 || fd > 2) return fd;
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    const int error = errno;
    close(fd);
    errno = error;
    return moved;
}

std::optional<Recorded> record(const std::string& gitdir, std::string& why) {
    Recorded out;
    out.path = gitdir;
    out.directory = above_stdio(posix::open_no_symlinks(gitdir, O_PATH | O_DIRECTORY));
    if (out.directory < 0) {
        why = "the git directory " + gitdir + (errno == ELOOP ? ": a component is a symlink" : ": " + std::string(std::strerror(errno)));
        return std::nullopt;
    }
    out.headText = head_to_restore(out.directory, read_head(out.directory));
    out.head = above_stdio(openat(out.directory, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666));
    if (out.head >= 0 && write(out.head, out.headText.data(), out.headText.size()) != static_cast<ssize_t>(out.headText.size())) {
        close(out.head);
        out.head = -1;
    }
    out.directoryMode = mode_of(out.directory, "");
    out.objectsMode = mode_of(out.directory, "objects");
    out.refsMode = mode_of(out.directory, "refs");
    out.links = symlinks_at(out.directory);
    struct stat st {};
    out.hadRemotes = fstatat(out.directory, "remotes", &st, AT_SYMLINK_NOFOLLOW) == 0;
    out.hadBranches = fstatat(out.directory, "branches", &st, AT_SYMLINK_NOFOLLOW) == 0;
    return out;
}

Restored restore(const Recorded& recorded) {
    Restored out;
    const std::string& where = recorded.path;
    const auto failed = [&](const std::string& what) {
        out.failures.push_back("could not " + what + ": " + std::strerror(errno) +
                               "; a git run in the workspace may take another directory for this repository");
    };
    if (restore_mode(recorded.directory, "", recorded.directoryMode))
        out.repairs.push_back("restored the mode of " + where + ", which the command had made unusable to git");
    if (restore_mode(recorded.directory, "objects", recorded.objectsMode))
        out.repairs.push_back("restored the mode of " + where + "/objects, which the command had made unusable to git");
    if (restore_mode(recorded.directory, "refs", recorded.refsMode))
        out.repairs.push_back("restored the mode of " + where + "/refs, which the command had made unusable to git");
    struct stat st {};
    if (fstatat(recorded.directory, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (move_aside(recorded.directory, "commondir"))
            out.repairs.push_back("removed " + where + "/commondir, which the command planted (it sends git to another "
                                                       "directory's config and hooks)");
        else
            failed("remove " + where + "/commondir, which the command planted");
    }
    // A remote the config does not name is looked up in remotes/NAME, then branches/NAME.
    for (const auto& [older, had] : {std::pair<const char*, bool>{"remotes", recorded.hadRemotes}, {"branches", recorded.hadBranches}}) {
        if (had || fstatat(recorded.directory, older, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (move_aside(recorded.directory, older))
            out.repairs.push_back("removed " + where + "/" + older + ", which the command made (a remote named there is one a "
                                                                    "push goes to when the config names none)");
        else
            failed("remove " + where + "/" + older + ", which the command made");
    }
    // Removed relative to the directory that holds each: no name on the way is followed.
    const bool whole = each_planted_place_link(recorded.directory, [&](int parent, const std::string& name, const std::string& path) {
        if (recorded.links.count(path) != 0) return;
        if (unlinkat(parent, name.c_str(), 0) == 0)
            out.repairs.push_back("removed the symlink " + where + "/" + path + ", which the command planted");
        else
            failed("remove the symlink " + where + "/" + path + ", which the command planted");
    });
    // The reflog the next commit appends to, whatever the walk's bounds: HEAD's branch's, each
    // component reached without following a symlink, a planted one on the way removed.
    if (const Head head = read_head(recorded.directory); valid(head) && !head.symlink && head.content.rfind("ref:", 0) == 0) {
        std::string ref = head.content.substr(4);
        ref.erase(0, ref.find_first_not_of(" \t"));
        ref.erase(ref.find_last_not_of(" \t\r\n") + 1);
        int at = fcntl(recorded.directory, F_DUPFD_CLOEXEC, 3);
        std::string path = "logs";
        std::string rest = ref;
        for (std::string name = "logs"; at >= 0 && !name.empty();) {
            struct stat entry {};
            if (fstatat(at, name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) != 0) break;
            if (S_ISLNK(entry.st_mode)) {
                if (recorded.links.count(path) == 0) {
                    if (unlinkat(at, name.c_str(), 0) == 0)
                        out.repairs.push_back("removed the symlink " + where + "/" + path + ", which the command planted");
                    else
                        failed("remove the symlink " + where + "/" + path + ", which the command planted");
                }
                break;
            }
            if (!S_ISDIR(entry.st_mode) || rest.empty()) break;
            const int next = openat(at, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            close(at);
            at = next;
            const std::size_t slash = rest.find('/');
            name = rest.substr(0, slash);
            rest = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
            path += "/" + name;
        }
        if (at >= 0) close(at);
    }
    if (!whole) {
        errno = E2BIG;
        failed("look for planted symlinks in all of " + where + "/logs (more than " + std::to_string(kMaxLinkEntries) +
               " entries, or deeper than " + std::to_string(kMaxLinkDepth) + " levels)");
    }
    if (!valid(read_head(recorded.directory))) {
        const std::string name = random_name("HEAD");
        bool linked = false;
        int error = 0;
        if (recorded.head >= 0 && !name.empty()) {
            const std::string self = "/proc/self/fd/" + std::to_string(recorded.head);
            linked = linkat(AT_FDCWD, self.c_str(), recorded.directory, name.c_str(), AT_SYMLINK_FOLLOW) == 0;
            if (!linked) error = errno;
        }
        if (!linked && !name.empty() && recorded.head < 0) {  // no unnamed file here: one made now
            const int fd = openat(recorded.directory, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
            linked = fd >= 0 && write(fd, recorded.headText.data(), recorded.headText.size()) ==
                                    static_cast<ssize_t>(recorded.headText.size());
            if (!linked) error = errno;
            if (fd >= 0) close(fd);
            if (!linked) unlinkat(recorded.directory, name.c_str(), 0);
        }
        const bool present = fstatat(recorded.directory, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0;
        bool placed = false;
        if (linked && present) {
            // Swapped with whatever HEAD is now, which then goes as far as it can.
            placed = syscall(SYS_renameat2, recorded.directory, name.c_str(), recorded.directory, "HEAD", RENAME_EXCHANGE) == 0;
            if (!placed) error = errno;
            if (placed && unlinkat(recorded.directory, name.c_str(), 0) != 0) posix::remove_tree_at(recorded.directory, name);
        } else if (linked) {
            placed = renameat(recorded.directory, name.c_str(), recorded.directory, "HEAD") == 0;
            if (!placed) error = errno;
        } else if (recorded.head >= 0 && (!present || move_aside(recorded.directory, "HEAD"))) {
            // No name to spare in the directory (a file system full to its last entry): what is
            // at HEAD goes first, which frees the entry the unnamed file then takes, by HEAD's name.
            const std::string self = "/proc/self/fd/" + std::to_string(recorded.head);
            placed = linkat(AT_FDCWD, self.c_str(), recorded.directory, "HEAD", AT_SYMLINK_FOLLOW) == 0;
            if (!placed) error = errno;
        }
        if (placed) {
            out.repairs.push_back("restored " + where + "/HEAD, which the command left invalid (git would have taken the "
                                                        "directory above it for a bare repository)");
        } else {
            if (error != 0) errno = error;
            failed("restore " + where + "/HEAD, which the command left invalid");
        }
    }
    return out;
}

bool restore_and_say(const std::vector<Recorded>& checks) {
    std::vector<std::string> said;
    bool all = true;
    for (const auto& check : checks) {
        Restored restored = restore(check);
        for (auto& line : restored.repairs) said.push_back("dsh-confine: git: " + line);
        for (auto& line : restored.failures) said.push_back("dsh-confine: error: GIT: " + line);
        all = all && restored.failures.empty();
    }
    for (const auto& line : said) std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    return all;
}

}  // namespace dsh::git_check
