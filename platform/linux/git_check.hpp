// The end-of-call check of a git directory (lib/git_protection.hpp says why it exists): git
// takes the directory above an invalid `.git` for a bare repository, and a command that may write
// the workspace can make `.git` invalid (a HEAD removed or rewritten, objects/ or refs/ or the git
// directory itself made unusable) and plant a bare repository's files beside it; it can also
// plant a `commondir` that sends git to a config it wrote, or symlinks that send git's writes
// elsewhere. So what git needs to find the git directory valid is made ready before the command
// starts and put back once its whole tree has ended.
//
// Restored to valid, not to what was there: another call on the same workspace may have left
// the repository broken when this one started, so HEAD is written back as it was where it was
// valid, else pointing at an existing branch (or `main`); a mode is set back only where git could
// no longer use the directory. A `commondir` is never legitimate in the directories checked here
// (linked worktrees' own git directories are not checked: their `commondir` is kept read-only and
// an invalid one makes git stop, not look elsewhere), so any is removed.
//
// Nothing the repair needs can be taken from it by the command meanwhile: the new HEAD is an
// unnamed file (O_TMPFILE) written before the command starts, so a full disk or a planted name
// cannot stop it; at the end it gets a random name and is exchanged with whatever HEAD is then
// (renameat2 RENAME_EXCHANGE: a file, a symlink, a FIFO or a directory of any depth alike), and
// what was there is removed as far as it can be. Everything is done relative to descriptors of
// the git directory (and its common directory) opened without following a symlink before the
// command ran; the stage keeps both in place meanwhile (every directory on the way to the git
// directory's protected paths is a mount point), so they are the directories the plan named.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

namespace dsh::git_check {

struct Recorded {
    std::string path;           // the git directory, for messages
    int directory = -1;         // the git directory (O_PATH)
    int head = -1;              // an unnamed file in it holding a valid HEAD (-1: O_TMPFILE unsupported)
    std::string headText;       // what that file holds
    mode_t directoryMode = 0;   // type and permission bits of the git directory, objects/ and refs/ (0: missing)
    mode_t objectsMode = 0;
    mode_t refsMode = 0;
    std::set<std::string> links;  // symlinks where git writes (its top, logs/ at any depth, worktrees/, modules/), before
    bool hadRemotes = false;      // .git/remotes existed (then it is kept read-only; else one made is removed)
    bool hadBranches = false;     // the same for .git/branches, the other older place a remote is named
};

// `fd` moved above 2 where it is 0, 1 or 2 (a caller that started dsh-confine with stdin or
// stdout closed): the stage and the front put /dev/null there later.
int above_stdio(int fd);

// Records `gitdir` (absolute, reached without symlinks): nullopt with `why` when it cannot be
// opened. The descriptors are close-on-exec, above 2, and stay open until the process ends.
std::optional<Recorded> record(const std::string& gitdir, std::string& why);

struct Restored {
    std::vector<std::string> repairs;   // one line per repair made
    std::vector<std::string> failures;  // one line per repair that could not be made
};

// Puts back what git needs to take the directory as valid (see above), and removes a planted
// `commondir` and planted symlinks.
Restored restore(const Recorded& recorded);

// restore() of each, every repair said on stderr (`dsh-confine: git: ...`), every failure too
// (`dsh-confine: error: GIT: ...`): true when nothing failed.
bool restore_and_say(const std::vector<Recorded>& checks);

}  // namespace dsh::git_check
