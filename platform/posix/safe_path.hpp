// Reaching paths that a confined command may have changed. A confined command can write its
// workspace, its temp area and every other writable root, in this call, an earlier one or a
// concurrent one; so a privileged operation on a path through such a directory must not follow
// a symlink the command planted there, and must act on the directory dsh-confine checked, not
// on whatever the same string names a moment later. These helpers open without following any
// symlink (openat2's RESOLVE_NO_SYMLINKS where the kernel has it, else one component at a time
// with O_NOFOLLOW) and name a directory by its identity (device and inode), which a rename or a
// planted symlink cannot fake.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "../../lib/session.hpp"

namespace dsh::posix {

// A file's identity: its device and inode numbers, written "DEV:INO".
struct FileIdentity {
    unsigned long long device = 0;
    unsigned long long inode = 0;

    bool operator==(const FileIdentity&) const = default;
    std::string text() const;
    static std::optional<FileIdentity> parse(std::string_view text);
};

// Opens the absolute `path` without following a symlink anywhere on it (the last component
// included): -1 with errno ELOOP (or ENOTDIR) where a component is a symlink. `flags` are
// open(2)'s; O_NOFOLLOW and O_CLOEXEC are always added. On systems without O_PATH, use
// O_RDONLY for a directory. Not on Windows.
int open_no_symlinks(const std::string& path, int flags, unsigned mode = 0);

// The identity of an open file, or nullopt.
std::optional<FileIdentity> identity_of(int fd);

// The identity of the directory at the absolute, canonical `path`, reached without following a
// symlink; nullopt with `why` when it is missing, is not a directory, or a component is a symlink.
std::optional<FileIdentity> directory_identity(const std::string& path, std::string& why);

// Whether `path` names an executable that no one but root and this user can replace: the file
// and every directory on its canonical path are owned by root or by the effective uid, and none
// is writable by group or others, except a sticky directory (/tmp), where others cannot rename
// or remove what they do not own. Returns the canonical path, which is what should be executed;
// nullopt with `why` naming the component that fails.
std::optional<std::string> trusted_executable(const std::string& path, std::string& why);

// `path` as std::filesystem::weakly_canonical resolves it: every component that exists resolved
// (symlinks, "..") and the rest, which does not exist, appended and normalized; `path` itself when
// it cannot be resolved (a component unreadable, a loop). On Linux in a few system calls whatever
// its depth: the deepest existing component is opened and named by /proc/self/fd, where
// weakly_canonical stats and reads every component.
std::string resolved_path(const std::string& path);

// directory_identity() as lib/'s DirectoryIdentity (sessions record and check their cwd with it).
class NoSymlinkIdentity : public DirectoryIdentity {
public:
    std::optional<std::string> of(const std::string& canonical_path, std::string& why) const override {
        const auto id = directory_identity(canonical_path, why);
        return id ? std::optional<std::string>(id->text()) : std::nullopt;
    }
};

}  // namespace dsh::posix
