// Git's protection: which paths of the repositories inside the writable roots a backend keeps
// from the command, so that the git you run in the workspace after a call executes nothing the
// call planted (a hook, a config-driven program such as core.fsmonitor or core.sshCommand), either
// through the repository's own files or by making git discover a different directory.
//
// Git finds a repository by walking up from where it runs: at each directory D it takes D/.git
// (a directory that passes its validity test, or a `.git` file naming a git directory), else D
// itself as a bare repository, else the parent. Its validity test is a valid HEAD (a `ref:
// refs/...` line, an object name or a `refs/...` symlink) in the git directory, and an `objects/`
// and a `refs/` directory it may enter in the common directory (which a `commondir` file names).
// So the surfaces are, per git directory: what names programs (config, config.worktree, hooks/),
// what names other directories (the `.git` file, `commondir`, a linked worktree's `gitdir`), and
// what keeps it valid (HEAD, objects/, refs/, and its own mode). A repository's submodules
// (.git/modules/**) and linked worktrees (.git/worktrees/*) are git directories of their own.
//
// The modes (`--git`, `[sandbox] git`):
//   protect   (default) the naming surfaces read-only; objects/ and refs/ kept in place
//             (writable, but not removable, renamable or replaceable); HEAD stays writable (git
//             replaces it by rename on every switch or rebase), so a repository's validity, and
//             the absence of a `commondir` it did not have, are checked when the call ends and
//             restored (the backend's job: bubblewrap's stage holds the call open for it).
//   read-only the whole git directory read-only (Codex's default): git's writes fail.
//   writable  nothing of git's is protected, by explicit choice (and the `.git/...` patterns of
//             [sandbox] protected_paths are dropped).
// Not covered by any mode, and named in the plan's notes: a repository the command creates (a
// nested one below a root, registered as a submodule or not, or a bare one in a subdirectory,
// which git run there finds before the real one unless safe.bareRepository is `explicit`).
#pragma once

#include <string>
#include <vector>

#include "types.hpp"

namespace dsh {

// The protection of one call in the writable `roots`: git's surfaces under `mode`, and each of
// the [sandbox] protected_paths `patterns` (relative to every root) that exists at a root's top.
// A symlink met on the way to a protected path is kept in place and its target protected (when
// inside a root). `readOnly` and `made*` become the policy's protectedPaths.
GitPlan plan_git_protection(const std::vector<std::string>& roots, GitMode mode, const std::vector<std::string>& patterns);

// The plan of a backend that can keep none of it (Landlock): the repositories still listed, what
// would be kept or checked not, and one note saying so (the backend names the gap).
GitPlan git_plan_unenforced(const GitPlan& plan);

// Whether a HEAD file's first bytes (or, for a symlink, its target) make a valid HEAD for git:
// `ref:` and optional spaces then `refs/`, or a hexadecimal object name (SHA-1 or SHA-256).
bool valid_git_head(std::string_view content, bool is_symlink);

// The [sandbox] protected_paths patterns that remain under `mode`: `writable` drops git's own
// (`.git` and below), which that mode gives up by explicit choice.
std::vector<std::string> protected_patterns_for(GitMode mode, const std::vector<std::string>& patterns);

// What the host's git does with a bare repository a command plants below a root (no mount can
// stop one being found): from `git --version`'s output and `git config --get
// safe.bareRepository`'s (empty when unset). Git 2.38 and later refuse implicit bare repositories
// with safe.bareRepository=explicit; before 2.38, or with the default `all`, they take them.
struct HostGitBareRepositories {
    std::string version;              // "2.39.5", or "" when the output does not say
    std::string setting;              // the safe.bareRepository value, "" when unset
    bool takesImplicitBareRepositories = true;
    std::string advice;               // what to do, or "" when nothing is needed
};
HostGitBareRepositories assess_host_git(std::string_view version_output, std::string_view setting);

}  // namespace dsh
