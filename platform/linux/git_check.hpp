// The end-of-call check of a git directory (lib/git_protection.hpp says why it exists): git
// takes the directory above an invalid `.git` for a bare repository, and a command that may write
// the workspace can make `.git` invalid (a HEAD removed or rewritten, objects/ or refs/ or the git
// directory itself made unreadable) and plant a bare repository's files beside it; it can also
// plant a `commondir` that sends git to a config it wrote. So what made the git directory valid,
// and the absence of a `commondir` it did not have, are recorded before the command starts and
// restored once its whole tree has ended.
//
// Everything is done relative to descriptors of the git directory (and its common directory)
// opened without following a symlink before the command ran; the stage keeps both in place
// meanwhile (every directory on the way to the git directory's protected paths is a mount point),
// so they are the directories the plan named. Names inside them are never followed: HEAD is
// replaced by renaming a file made there (O_EXCL, O_NOFOLLOW) over it, a planted `commondir` is
// unlinked (a tree of it removed without following symlinks), modes are set on the entries the
// stage keeps in place.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace dsh::git_check {

struct Recorded {
    std::string path;       // the git directory, for messages
    int directory = -1;     // the git directory (O_PATH)
    int common = -1;        // its common directory (O_PATH; the same directory when it has none)
    std::string head;       // HEAD's content, or its symlink's target
    bool headSymlink = false;
    bool headValid = false;
    mode_t directoryMode = 0;  // type and permission bits of the git directory, objects/ and refs/ (0: missing)
    mode_t objectsMode = 0;
    mode_t refsMode = 0;
    bool hadCommondir = false;
};

// Records `gitdir` (absolute, reached without symlinks): nullopt with `why` when it cannot be
// opened. The descriptors are close-on-exec and stay open until the process ends.
std::optional<Recorded> record(const std::string& gitdir, std::string& why);

// Restores what the command changed since record(): an invalid HEAD (when it was valid), the
// modes, a `commondir` it planted. Returns one line per repair, for the caller's stderr.
std::vector<std::string> restore(const Recorded& recorded);

}  // namespace dsh::git_check
