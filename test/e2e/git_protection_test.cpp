// Git's protection, attacked as an outside review did: a workspace-write call tries to make the
// git you run in the workspace afterwards execute something it planted, through the repository's
// own files (hooks, config, config.worktree, commondir, a submodule's or worktree's git directory)
// or by making git discover another directory (an invalid .git, so git takes the workspace for a
// bare repository). Every verdict comes from the host: after the call, the caller's own git runs
// in the workspace (top and below) and a sentinel file that the planted program would create must
// not exist; the repository must still be the one git finds. Under bubblewrap, as root and as an
// unprivileged user, on the exec path, `run`, a printed plan and a session; under Landlock the
// plan must name the gap.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::exists;
using e2e::IsError;
using e2e::read_file;
using nlohmann::json;

// How the call is made: the exec path, `run`, a printed plan run by sh, a session's call.
enum class Form { Exec, Run, Printed, Session };
using Param = std::tuple<std::string, Form>;  // caller ("root" or "nobody"), form

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
    const char* forms[] = {"exec", "run", "printed", "session"};
    return std::get<0>(info.param) + "_" + forms[static_cast<int>(std::get<1>(info.param))];
}

class GitProtection : public ::testing::TestWithParam<Param> {
protected:
    bool asRoot = std::get<0>(GetParam()) == "root";
    Form form = std::get<1>(GetParam());
    std::optional<unsigned> uid = asRoot ? std::nullopt : std::optional<unsigned>(e2e::kNobody);
    e2e::TempDir home{"/tmp", uid};
    e2e::TempDir base{"/tmp", uid};
    std::string ws = base / "ws";
    std::string sentinel = base / "pwned";
    std::string evil = base / "evil.sh";  // what a planted config or hook would run: it makes the sentinel

    void SetUp() override {
        E2E_REQUIRE(getuid() == 0, "the git protection tests run as root, and as nobody through setpriv");
        E2E_REQUIRE(exists("/usr/bin/git"), "no git on this host");
        E2E_REQUIRE(e2e::backend_usable("bwrap"), "bubblewrap cannot confine here");
        make_dir(ws);
        write(evil, "#!/bin/sh\ntouch " + sentinel + "\n", 0755);
        git({"init", "-q", "-b", "main", "."}, ws);
        write(ws + "/file", "one\n");
        git({"add", "file"}, ws);
        git({"commit", "-q", "-m", "one"}, ws);
        make_dir(ws + "/sub");
        if (form == Form::Session) {
            ASSERT_EQ(dsh({"session", "start", "s", "--cwd", ws}, ws).status, 0);
            ASSERT_EQ(dsh({"session", "mode", "s", "workspace-write"}, ws).status, 0);
        }
    }

    void make_dir(const std::string& path) const {
        mkdir(path.c_str(), 0755);
        if (uid) lchown(path.c_str(), *uid, *uid);
    }
    void write(const std::string& path, const std::string& content, mode_t mode = 0644) const {
        e2e::write_file(path, content);
        chmod(path.c_str(), mode);
        if (uid) lchown(path.c_str(), *uid, *uid);
    }

    e2e::RunOptions options(const std::string& cwd) const {
        e2e::RunOptions o;
        o.env = e2e::isolated_env(home.path());
        o.env["GIT_AUTHOR_NAME"] = o.env["GIT_COMMITTER_NAME"] = "t";
        o.env["GIT_AUTHOR_EMAIL"] = o.env["GIT_COMMITTER_EMAIL"] = "t@example.org";
        o.env["GIT_CONFIG_NOSYSTEM"] = "1";  // the host's git with git's defaults (safe.bareRepository all)
        o.uid = uid;
        o.cwd = cwd;
        o.timeoutMs = 30000;
        return o;
    }
    e2e::Result dsh(const std::vector<std::string>& args, const std::string& cwd) const { return e2e::run(args, options(cwd)); }
    // The caller's own git on the host, as after the call.
    e2e::Result git(const std::vector<std::string>& args, const std::string& cwd) const {
        std::vector<std::string> argv = {"/usr/bin/git"};
        argv.insert(argv.end(), args.begin(), args.end());
        return e2e::run_program(argv, options(cwd));
    }

    // `script` run by sh in the workspace, confined in workspace-write by this test's form.
    e2e::Result confined(const std::string& script, const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> policy = {"--backend", "bwrap"};
        if (form == Form::Session) policy.insert(policy.end(), {"--session", "s"});
        else policy.insert(policy.end(), {"--mode", "workspace-write", "--workspace-root", ws});
        policy.insert(policy.end(), extra.begin(), extra.end());
        const std::vector<std::string> command = {"/bin/sh", "-c", script};
        std::vector<std::string> args;
        if (form == Form::Run) args = {"run"};
        if (form == Form::Printed) args = {"--print", "--format", "shell"};
        args.insert(args.end(), policy.begin(), policy.end());
        args.push_back("--");
        args.insert(args.end(), command.begin(), command.end());
        e2e::Result result = dsh(args, ws);
        if (form != Form::Printed || result.status != 0) return result;
        return e2e::run_program({"/bin/sh", "-c", result.out}, options(ws));
    }

    // What the host's git does now, at the top and below: it must find the repository the call
    // started with and run nothing the call planted.
    void expect_git_untouched(const std::string& what) {
        for (const std::string& where : {ws, ws + "/sub"}) {
            const e2e::Result top = git({"rev-parse", "--absolute-git-dir"}, where);
            EXPECT_EQ(top.out, ws + "/.git\n") << what << ": git in " << where << " found another repository: " << top.err;
            git({"status", "--porcelain"}, where);
            git({"log", "-1", "--format=%s"}, where);
            git({"fetch", "-q", "origin"}, where);  // core.sshCommand, credential helpers, ...
        }
        EXPECT_FALSE(exists(sentinel)) << what << ": a program the call planted ran in the caller's git";
    }
};

// The review's attack: HEAD removed, so .git is no repository, and the workspace made a bare one
// whose config names a program. Then the same with HEAD rewritten, objects/ and refs/ removed or
// made unreadable, and the git directory made unreadable.
TEST_P(GitProtection, AnInvalidGitDirectoryDoesNotHandTheWorkspaceToABareRepository) {
    const std::string plant =
        "mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD; "
        "printf '[core]\\n\\tbare = true\\n\\tfsmonitor = " + evil + "\\n\\tsshCommand = " + evil +
        "\\n[remote \"origin\"]\\n\\turl = ssh://example.org/x\\n' > config; ";
    for (const std::string breaking : {"rm -f .git/HEAD", "echo garbage > .git/HEAD", "rm -f .git/HEAD; mkdir .git/HEAD",
                                       "rm -rf .git/objects .git/refs", "chmod 000 .git/objects .git/refs",
                                       "chmod 000 .git", "ln -sf /nowhere .git/HEAD", "rm -rf .git",
                                       // white space git does not skip, and a ref past what git reads of HEAD
                                       "printf 'ref:\\vrefs/heads/main\\n' > .git/HEAD",
                                       "printf 'ref:%251srefs/heads/main\\n' '' > .git/HEAD"}) {
        const e2e::Result call = confined(plant + breaking + "; exit 0");
        EXPECT_EQ(call.status, 0) << breaking << ": " << call.err;
        expect_git_untouched(breaking);
        fs::remove_all(ws + "/objects");
        fs::remove_all(ws + "/refs");
        fs::remove(ws + "/HEAD");
        fs::remove(ws + "/config");
    }
}

// A commondir planted in .git sends git to a config and hooks the command wrote.
TEST_P(GitProtection, APlantedCommondirIsRemovedWhenTheCallEnds) {
    make_dir(ws + "/sub/common");
    const e2e::Result call = confined(
        "cp -r .git/objects .git/refs sub/common/ && mkdir -p sub/common/hooks && "
        "printf '[core]\\n\\tfsmonitor = " + evil + "\\n' > sub/common/config && "
        "printf '#!/bin/sh\\n" + evil + "\\n' > sub/common/hooks/pre-commit && chmod +x sub/common/hooks/pre-commit && "
        "echo " + ws + "/sub/common > .git/commondir && git rev-parse --git-common-dir");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_FALSE(exists(ws + "/.git/commondir")) << "the planted commondir is still there";
    EXPECT_NE(call.err.find("removed " + ws + "/.git/commondir"), std::string::npos) << call.err;
    expect_git_untouched("commondir");
    git({"commit", "-q", "--allow-empty", "-m", "two"}, ws);
    EXPECT_FALSE(exists(sentinel)) << "a hook the call planted ran";
}

// The naming surfaces stay read-only; a missing .git/hooks is made empty first, and a
// config.worktree that git would read (extensions.worktreeConfig) likewise.
TEST_P(GitProtection, HooksConfigAndConfigWorktreeCannotBePlanted) {
    fs::remove_all(ws + "/.git/hooks");
    git({"config", "extensions.worktreeConfig", "true"}, ws);
    const e2e::Result call = confined(
        "mkdir -p .git/hooks; printf '#!/bin/sh\\n" + evil + "\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        "git config core.fsmonitor " + evil + "; git config --worktree core.fsmonitor " + evil + "; "
        "printf '[core]\\n\\tfsmonitor = " + evil + "\\n' > .git/config.worktree; "
        "mv .git/hooks .git/hooks.old; rm -rf .git/hooks; ln -sf /tmp .git/hooks; mv .git/config .git/config.old; "
        "exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_TRUE(fs::is_directory(ws + "/.git/hooks")) << "the made .git/hooks is missing";
    EXPECT_TRUE(fs::is_empty(ws + "/.git/hooks")) << "something was planted in .git/hooks";
    EXPECT_EQ(read_file(ws + "/.git/config.worktree"), "") << "config.worktree was written";
    EXPECT_EQ(read_file(ws + "/.git/config").find(evil), std::string::npos) << ".git/config was written";
    git({"commit", "-q", "--allow-empty", "-m", "two"}, ws);
    expect_git_untouched("hooks and config");
}

// Ordinary git work inside the call keeps working, and the host sees its result.
TEST_P(GitProtection, OrdinaryGitWorkKeepsWorking) {
    const std::string remote = base / "remote.git";
    git({"init", "-q", "--bare", remote}, base.path());
    git({"remote", "add", "origin", remote}, ws);
    git({"push", "-q", "origin", "main"}, ws);
    const e2e::Result call = confined(
        "set -e; echo two > file; git add file; git commit -q -m two; git branch feature; git switch -q feature; "
        "echo three > other; git add other; git commit -q -m three; git switch -q main; echo four > file; git stash -q; "
        "git stash pop -q; git commit -q -am four; git switch -q feature; git rebase -q main; git fetch -q origin; "
        "git tag t1; git gc -q; git checkout -q -b last; git log --format=%s -1");
    ASSERT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(git({"log", "-1", "--format=%s", "last"}, ws).out, "three\n");
    EXPECT_EQ(git({"rev-parse", "--abbrev-ref", "HEAD"}, ws).out, "last\n");
    EXPECT_EQ(call.err.find("dsh-confine: git:"), std::string::npos) << "a repair where none was needed: " << call.err;
    expect_git_untouched("ordinary work");
}

INSTANTIATE_TEST_SUITE_P(Linux, GitProtection,
                         ::testing::Combine(::testing::Values("root", "nobody"),
                                            ::testing::Values(Form::Exec, Form::Run, Form::Printed, Form::Session)),
                         param_name);

// The layouts, on the exec path: a submodule, a linked worktree, a symlinked .git, a repository
// whose .git is a file (--separate-git-dir), and the strict and the writable modes.
class GitLayouts : public GitProtection {
protected:
    // A repository at `lib` with one commit, added to the workspace as submodule vendor/lib and
    // committed there.
    bool add_submodule(const std::string& lib) {
        make_dir(lib);
        git({"init", "-q", "-b", "main", "."}, lib);
        write(lib + "/x", "x\n");
        git({"add", "x"}, lib);
        git({"commit", "-q", "-m", "x"}, lib);
        if (git({"-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib"}, ws).status != 0) return false;
        return git({"commit", "-q", "-m", "submodule"}, ws).status == 0;
    }
    // Submodule sub/lib; a first call changes .gitmodules with `first`; a second points the
    // submodule's .git file at a git directory it made, whose config names a program: the .git
    // file must be unchanged and the host's git run nothing.
    void expect_submodule_kept(const std::string& first) {
        const std::string lib = base / "lib";
        make_dir(lib);
        git({"init", "-q", "-b", "main", "."}, lib);
        git({"commit", "-q", "--allow-empty", "-m", "x"}, lib);
        ASSERT_EQ(git({"-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "sub/lib"}, ws).status, 0);
        git({"commit", "-q", "-m", "submodule"}, ws);
        ASSERT_EQ(confined(first).status, 0);
        const e2e::Result call = confined(
            "mkdir -p e && cp -r .git/modules/sub/lib/. e/ && printf '[core]\\n\\tfsmonitor = " + evil + "\\n' >> e/config; "
            "echo 'gitdir: ../../e' > sub/lib/.git; exit 0");
        EXPECT_EQ(call.status, 0) << call.err;
        EXPECT_EQ(read_file(ws + "/sub/lib/.git"), "gitdir: ../../.git/modules/sub/lib\n");
        git({"status"}, ws);
        EXPECT_FALSE(exists(sentinel));
    }
};

TEST_P(GitLayouts, ASubmodulesGitDirectoryAndGitFileStayTheRepositorys) {
    const std::string lib = base / "lib";
    ASSERT_TRUE(add_submodule(lib));
    const std::string module = ws + "/.git/modules/vendor/lib";
    ASSERT_TRUE(fs::is_directory(module));
    const e2e::Result call = confined(
        "git -C vendor/lib config core.fsmonitor " + evil + "; "
        "printf '#!/bin/sh\\n" + evil + "\\n' > .git/modules/vendor/lib/hooks/post-checkout; "
        "mkdir -p evil && cp -r .git/modules/vendor/lib/. evil/ && printf '[core]\\n\\tfsmonitor = " + evil +
        "\\n' >> evil/config; echo 'gitdir: ../../evil' > vendor/lib/.git; "
        "mv .git/modules/vendor/lib .git/modules/vendor/old; rm -rf vendor; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(read_file(ws + "/vendor/lib/.git"), "gitdir: ../../.git/modules/vendor/lib\n");
    EXPECT_EQ(read_file(module + "/config").find(evil), std::string::npos);
    EXPECT_FALSE(exists(module + "/hooks/post-checkout"));
    git({"status"}, ws);
    git({"-C", "vendor/lib", "status"}, ws);
    git({"submodule", "update"}, ws);
    EXPECT_FALSE(exists(sentinel)) << "the submodule's planted config or hook ran";
}

// A submodule registered but not checked out (the state a clone without --recursive leaves: an
// empty directory, no .git/modules): the command can make a repository neither in its directory
// (which a git status at the top would recurse into) nor under .git/modules (which a git
// submodule update --init would reuse), and the caller's own update still works after the call.
TEST_P(GitLayouts, ASubmoduleNotCheckedOutCannotBeGivenARepository) {
    const std::string lib = base / "lib";
    ASSERT_TRUE(add_submodule(lib));
    git({"submodule", "deinit", "-q", "-f", "vendor/lib"}, ws);
    fs::remove_all(ws + "/.git/modules");
    ASSERT_TRUE(fs::is_empty(ws + "/vendor/lib"));
    const e2e::Result call = confined(
        "(cd vendor/lib && git init -q . && git config core.fsmonitor '" + evil + "'); "
        "mkdir -p .git/modules/vendor && git clone -q --bare " + lib + " .git/modules/vendor/lib && "
        "printf '#!/bin/sh\\n" + evil + "\\n' > .git/modules/vendor/lib/hooks/post-checkout && "
        "chmod +x .git/modules/vendor/lib/hooks/post-checkout; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_FALSE(exists(ws + "/vendor/lib/.git")) << "a repository was made in the submodule's directory";
    EXPECT_FALSE(exists(ws + "/.git/modules/vendor")) << "a git directory was made for the submodule";
    git({"status"}, ws);
    EXPECT_EQ(git({"-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init"}, ws).status, 0);
    EXPECT_FALSE(exists(sentinel)) << "a planted config or hook ran";
    EXPECT_TRUE(exists(ws + "/vendor/lib/x")) << "the caller's own submodule update failed after the call";
}

// A linked worktree inside the workspace is a checkout as the workspace's own is: its
// submodules' git directories live under its own git directory (.git/worktrees/NAME/modules).
// In `ready` the submodule is checked out (its config must stay read-only); in `bare` it is not
// (no repository may be made for it, in its directory or under that modules/).
TEST_P(GitLayouts, ALinkedWorktreesSubmodulesAreProtected) {
    const std::string lib = base / "lib";
    ASSERT_TRUE(add_submodule(lib));
    for (const char* tree : {"ready", "bare"}) ASSERT_EQ(git({"worktree", "add", "-q", "--detach", ws + "/" + tree}, ws).status, 0);
    ASSERT_EQ(git({"-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init"}, ws + "/ready").status, 0);
    ASSERT_TRUE(exists(ws + "/.git/worktrees/ready/modules/vendor/lib/config"));
    ASSERT_TRUE(fs::is_empty(ws + "/bare/vendor/lib"));
    const e2e::Result call = confined(
        "git -C ready/vendor/lib config core.fsmonitor '" + evil + "'; "
        "(cd bare/vendor/lib && git init -q . && git config core.fsmonitor '" + evil + "'); "
        "mkdir -p .git/worktrees/bare/modules/vendor && git clone -q --bare " + lib + " .git/worktrees/bare/modules/vendor/lib && "
        "printf '#!/bin/sh\\n" + evil + "\\n' > .git/worktrees/bare/modules/vendor/lib/hooks/post-checkout && "
        "chmod +x .git/worktrees/bare/modules/vendor/lib/hooks/post-checkout; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(read_file(ws + "/.git/worktrees/ready/modules/vendor/lib/config").find(evil), std::string::npos);
    EXPECT_FALSE(exists(ws + "/bare/vendor/lib/.git")) << "a repository was made in the submodule's directory";
    EXPECT_FALSE(exists(ws + "/.git/worktrees/bare/modules/vendor")) << "a git directory was made for the submodule";
    git({"status"}, ws + "/ready");
    git({"status"}, ws + "/bare");
    EXPECT_EQ(git({"-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init"}, ws + "/bare").status, 0);
    EXPECT_FALSE(exists(sentinel)) << "a planted config or hook ran";
    EXPECT_TRUE(exists(ws + "/bare/vendor/lib/x")) << "the caller's own submodule update failed after the call";
}

TEST_P(GitLayouts, ALinkedWorktreesGitDirectoryCannotBeRedirected) {
    const std::string tree = base / "tree";
    ASSERT_EQ(git({"worktree", "add", "-q", tree}, ws).status, 0);
    std::string admin;
    for (const auto& entry : fs::directory_iterator(ws + "/.git/worktrees")) admin = entry.path().string();
    ASSERT_FALSE(admin.empty());
    make_dir(ws + "/sub/common");
    const e2e::Result call = confined(
        "cp -r .git/objects .git/refs .git/HEAD sub/common/; printf '[core]\\n\\tfsmonitor = " + evil +
        "\\n' > sub/common/config; echo " + ws + "/sub/common > " + admin + "/commondir; "
        "echo /nowhere/.git > " + admin + "/gitdir; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(read_file(admin + "/commondir"), "../..\n");
    git({"status"}, tree);
    EXPECT_FALSE(exists(sentinel)) << "the linked worktree's git ran the planted config";
}

// The same with the two files in the relative form git 2.48 writes (worktree.useRelativePaths),
// written here by hand for an older git, which reads them too: the worktree's `.git` file, named
// relative to the worktree's git directory, stays read-only.
TEST_P(GitLayouts, ALinkedWorktreeWithRelativePathsKeepsItsGitFile) {
    ASSERT_EQ(git({"worktree", "add", "-q", ws + "/wt"}, ws).status, 0);
    std::string admin;
    for (const auto& entry : fs::directory_iterator(ws + "/.git/worktrees")) admin = entry.path().string();
    ASSERT_FALSE(admin.empty());
    const std::string name = fs::path(admin).filename().string();
    write(admin + "/gitdir", "../../../wt/.git\n");
    write(ws + "/wt/.git", "gitdir: ../.git/worktrees/" + name + "\n");
    ASSERT_EQ(git({"status", "--short"}, ws + "/wt").status, 0) << "this git does not read the relative form";
    const e2e::Result call = confined(
        "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && printf '[core]\\n\\tfsmonitor = " + evil +
        "\\n' > evil/config; echo 'gitdir: ../evil' > wt/.git; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(read_file(ws + "/wt/.git"), "gitdir: ../.git/worktrees/" + name + "\n");
    git({"status"}, ws + "/wt");
    EXPECT_FALSE(exists(sentinel)) << "the worktree's git ran a planted repository's config";
}

TEST_P(GitLayouts, ASymlinkedGitDirectoryIsProtectedNotRefused) {
    fs::rename(ws + "/.git", ws + "/sub/real.git");
    fs::create_symlink("sub/real.git", ws + "/.git");
    if (uid) lchown((ws + "/.git").c_str(), *uid, *uid);
    const e2e::Result call =
        confined("printf '#!/bin/sh\\n" + evil + "\\n' > .git/hooks/pre-commit; rm .git && mkdir .git; echo ran");
    EXPECT_EQ(e2e::first_line(call.out), "ran") << "the call was refused: " << call.err;
    EXPECT_TRUE(fs::is_symlink(ws + "/.git")) << "the symlinked .git was replaced";
    EXPECT_FALSE(exists(ws + "/sub/real.git/hooks/pre-commit"));
    git({"commit", "-q", "--allow-empty", "-m", "two"}, ws);
    EXPECT_FALSE(exists(sentinel));
}

TEST_P(GitLayouts, AGitFileAndTheDirectoryItNamesStayPut) {
    fs::rename(ws + "/.git", ws + "/sub/sep.git");
    write(ws + "/.git", "gitdir: " + ws + "/sub/sep.git\n");
    const e2e::Result call = confined(
        "mkdir -p evil && cp -r sub/sep.git/. evil/ && printf '[core]\\n\\tfsmonitor = " + evil + "\\n' >> evil/config; "
        "echo 'gitdir: evil' > .git; printf '[core]\\n\\tfsmonitor = " + evil + "\\n' >> sub/sep.git/config; "
        "echo evil > sub/sep.git/commondir; mv sub sub2; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(read_file(ws + "/.git"), "gitdir: " + ws + "/sub/sep.git\n");
    EXPECT_FALSE(exists(ws + "/sub/sep.git/commondir"));
    git({"status"}, ws);
    EXPECT_FALSE(exists(sentinel));
}

TEST_P(GitLayouts, ReadOnlyKeepsTheWholeGitDirectoryAndWritableGivesItUp) {
    const e2e::Result strict = confined("git commit -q --allow-empty -m two", {"--git", "read-only"});
    EXPECT_NE(strict.status, 0);
    EXPECT_NE(strict.err.find("Read-only file system"), std::string::npos) << strict.err;
    EXPECT_EQ(git({"log", "-1", "--format=%s"}, ws).out, "one\n");
    const e2e::Result loose =
        confined("printf '#!/bin/sh\\ntrue\\n' > .git/hooks/pre-commit && echo written", {"--git", "writable"});
    EXPECT_EQ(e2e::first_line(loose.out), "written") << loose.err;
    EXPECT_TRUE(exists(ws + "/.git/hooks/pre-commit"));
}

// A red-team pass's attacks on the end-of-call repair itself: names planted where the repair
// writes, the stage's own resource limits lowered from inside (prlimit on the parent), a HEAD
// turned into a directory deeper than the descriptors allow to remove.
TEST_P(GitLayouts, TheRepairCannotBeBlockedOrStarved) {
    const std::string plant =
        "mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD; "
        "printf '[core]\\n\\tbare = true\\n\\tfsmonitor = " + evil + "\\n' > config; ";
    for (const std::string& breaking :
         {std::string("rm .git/HEAD; for n in 1 2 3 4 5 6 7 8 9; do mkdir -p .git/HEAD.dsh-confine-$n/x; done"),
          std::string("rm .git/HEAD; prlimit --pid $PPID --fsize=0:0; prlimit --pid $PPID --nofile=0:0; true"),
          std::string("rm .git/HEAD; perl -e 'mkdir q(.git/HEAD); chdir q(.git/HEAD); for (1..1100) { mkdir q(a); chdir q(a) }'")}) {
        const e2e::Result call = confined(plant + breaking + "; exit 0");
        EXPECT_EQ(call.status, 0) << breaking << ": " << call.err;
        EXPECT_EQ(call.err.find("dsh-confine: error: GIT:"), std::string::npos) << breaking << ": " << call.err;
        expect_git_untouched(breaking);
        for (const char* name : {"objects", "refs", "HEAD", "config"}) fs::remove_all(ws + "/" + name);
    }
}

// Two calls on one workspace: the second starts while the first has the repository broken, and
// must not take that for what to restore (nor put a broken mode back).
TEST_P(GitLayouts, TwoCallsAtOnceLeaveTheRepositoryValid) {
    const std::string plant =
        "mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD; "
        "printf '[core]\\n\\tbare = true\\n\\tfsmonitor = " + evil + "\\n' > config; ";
    const std::string ready = base / "ready";
    std::thread first([&] {
        confined(plant + "rm .git/HEAD; chmod 000 .git/objects; echo " + ws + "/sub > .git/commondir; touch " + ready +
                 "; sleep 1");
    });
    for (int i = 0; i < 200 && !exists(ready); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const e2e::Result second = confined("sleep 2; rm -f .git/HEAD; echo " + ws + "/sub > .git/commondir; exit 0");
    first.join();
    EXPECT_EQ(second.status, 0) << second.err;
    EXPECT_FALSE(exists(ws + "/.git/commondir"));
    struct stat st {};
    ASSERT_EQ(stat((ws + "/.git/objects").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & S_IRWXU, S_IRWXU) << "objects/ left unusable";
    expect_git_untouched("two calls");
}

// What the repository's config points into the worktree (a hooks directory, an include), the
// older remotes file, and symlinks planted where git writes.
TEST_P(GitLayouts, HooksPathIncludesRemotesAndPlantedSymlinks) {
    make_dir(ws + "/.husky");
    write(ws + "/project.gitconfig", "");
    git({"config", "core.hooksPath", ".husky"}, ws);
    git({"config", "include.path", "../project.gitconfig"}, ws);
    const std::string victim = base / "victim";
    make_dir(victim);
    write(victim + "/keep", "keep\n");
    const e2e::Result call = confined(
        "printf '#!/bin/sh\\n" + evil + "\\n' > .husky/pre-commit; chmod +x .husky/pre-commit; "
        "printf '[core]\\n\\tfsmonitor = " + evil + "\\n' >> project.gitconfig; "
        "git init -q --bare sub/remote.git && printf '#!/bin/sh\\n" + evil + "\\n' > sub/remote.git/hooks/pre-receive && "
        "chmod +x sub/remote.git/hooks/pre-receive; mkdir -p .git/remotes && echo 'URL: " + ws + "/sub/remote.git' > .git/remotes/origin; "
        "mkdir -p .git/worktrees; ln -s " + victim + " .git/worktrees/x; rm -rf .git/logs; ln -s " + victim + " .git/logs; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_FALSE(exists(ws + "/.husky/pre-commit"));
    EXPECT_EQ(read_file(ws + "/project.gitconfig"), "");
    EXPECT_FALSE(exists(ws + "/.git/remotes"));
    EXPECT_FALSE(fs::is_symlink(ws + "/.git/worktrees/x"));
    EXPECT_FALSE(fs::is_symlink(ws + "/.git/logs"));
    git({"commit", "-q", "--allow-empty", "-m", "two"}, ws);
    git({"push", "-q"}, ws);
    git({"gc", "-q", "--prune=now"}, ws);
    git({"worktree", "prune"}, ws);
    EXPECT_EQ(read_file(victim + "/keep"), "keep\n") << "host git wrote through a planted symlink";
    EXPECT_FALSE(exists(victim + "/HEAD"));
    expect_git_untouched("hooksPath, include, remotes, symlinks");
}

// A symlink planted deep in logs/ (red team pass 12, a note): git appends each reflog line
// through it, to a file the command chose. Removed when the call ends, whatever its depth.
TEST_P(GitLayouts, ASymlinkPlantedDeepInLogsIsRemoved) {
    const std::string victim = base / "victim";
    write(victim, "keep\n");
    const e2e::Result call =
        confined("rm -f .git/logs/refs/heads/main; mkdir -p .git/logs/refs/heads; ln -s " + victim + " .git/logs/refs/heads/main; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_FALSE(fs::is_symlink(ws + "/.git/logs/refs/heads/main"));
    git({"commit", "-q", "--allow-empty", "-m", "two"}, ws);
    EXPECT_EQ(read_file(victim), "keep\n") << "host git wrote through a planted symlink";

    // Deeper than the walk looks (red team pass 14: 05), on the branch HEAD then names: the
    // reflog of HEAD's branch is always looked at.
    std::string branch = "refs/heads";
    for (int i = 0; i < 40; ++i) branch += "/d" + std::to_string(i);
    branch += "/br";
    const e2e::Result deep = confined("mkdir -p .git/$(dirname " + branch + ") .git/logs/$(dirname " + branch +
                                      ") && cp .git/refs/heads/main .git/" + branch + " && ln -s " + victim +
                                      " .git/logs/" + branch + " && printf 'ref: " + branch + "\\n' > .git/HEAD");
    EXPECT_EQ(deep.status, 0) << deep.err;
    EXPECT_FALSE(fs::is_symlink(ws + "/.git/logs/" + branch));
    git({"commit", "-q", "--allow-empty", "-m", "three"}, ws);
    EXPECT_EQ(read_file(victim), "keep\n") << "host git wrote through a symlink planted deep in logs/";
}

// What the config points at that is missing when the call is planned (husky's gitignored
// .husky/_, an optional local include) is made empty and read-only first, and an included file's
// own hooks path and includes are followed (red team pass 11: 02, 03, 04).
TEST_P(GitLayouts, MissingConfigTargetsAreMadeAndIncludesFollowed) {
    make_dir(ws + "/.hooks2");
    write(ws + "/project.gitconfig", "[include]\n\tpath = nested.gitconfig\n");
    write(ws + "/nested.gitconfig", "[core]\n\thooksPath = .hooks2\n");
    git({"config", "core.hooksPath", ".husky/_"}, ws);
    git({"config", "--add", "include.path", "../local.gitconfig"}, ws);
    git({"config", "--add", "include.path", "../project.gitconfig"}, ws);
    git({"config", "--add", "include.path", "../conf/local.gitconfig"}, ws);  // conf/ missing too (pass 12: 01)
    const std::string hook = "printf '#!/bin/sh\\n" + evil + "\\n' > ";
    const e2e::Result call = confined(
        "mkdir -p .husky/_ conf; printf '[core]\\n\\tfsmonitor = " + evil + "\\n' > conf/local.gitconfig; " +
        hook + ".husky/_/pre-commit; chmod +x .husky/_/pre-commit; " +
        "printf '[core]\\n\\tfsmonitor = " + evil + "\\n' > local.gitconfig; " +
        "printf '[core]\\n\\tfsmonitor = " + evil + "\\n' >> nested.gitconfig; " +
        hook + ".hooks2/pre-commit; chmod +x .hooks2/pre-commit; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_FALSE(exists(ws + "/.husky/_/pre-commit"));
    EXPECT_FALSE(exists(ws + "/.hooks2/pre-commit"));
    EXPECT_EQ(read_file(ws + "/local.gitconfig"), "");
    EXPECT_EQ(read_file(ws + "/conf/local.gitconfig"), "");
    EXPECT_EQ(read_file(ws + "/nested.gitconfig"), "[core]\n\thooksPath = .hooks2\n");
    git({"commit", "-q", "--allow-empty", "-m", "two"}, ws);
    expect_git_untouched("missing hooks path and include, nested include");
}

// The other older place a remote is named, branches/NAME, made by the command where the
// repository has none (libgit2, JGit and templates without it make none): removed at the end, so
// a push to a remote the config does not name reaches no repository the command made.
TEST_P(GitLayouts, ABranchesDirectoryTheCommandMakesIsRemoved) {
    fs::remove_all(ws + "/.git/branches");
    const e2e::Result call = confined(
        "git init -q --bare sub/remote.git && printf '#!/bin/sh\\n" + evil + "\\n' > sub/remote.git/hooks/pre-receive && "
        "chmod +x sub/remote.git/hooks/pre-receive; mkdir -p .git/branches && echo '" + ws +
        "/sub/remote.git' > .git/branches/origin; exit 0");
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_FALSE(exists(ws + "/.git/branches"));
    git({"push", "-q", "origin", "main"}, ws);
    expect_git_untouched("branches");
}

// A call that rewrites .gitmodules (comments, quotes: read as git reads it) or takes the
// submodule out of it (red team pass 11: 05; still found through its git directory's
// core.worktree) cannot make the next call's plan drop the submodule's .git file.
TEST_P(GitLayouts, ARewrittenGitmodulesStillNamesTheSubmodule) {
    expect_submodule_kept("sed -i 's|path = sub/lib|path = \"sub/lib\" ; moved|' .gitmodules");
}

TEST_P(GitLayouts, ASubmoduleTakenOutOfGitmodulesStaysProtected) {
    expect_submodule_kept("git config -f .gitmodules --remove-section submodule.sub/lib");
}

// A writable root that is itself a git directory (a .git given as a root, a bare repository).
TEST_P(GitLayouts, AGitDirectoryGivenAsAWritableRootIsProtected) {
    const e2e::Result call = confined("git --git-dir=" + ws + "/.git config core.fsmonitor " + evil + "; "
                                      "rm -f " + ws + "/.git/HEAD; exit 0",
                                      {"--writable-root", ws + "/.git"});
    EXPECT_EQ(call.status, 0) << call.err;
    EXPECT_EQ(read_file(ws + "/.git/config").find(evil), std::string::npos);
    expect_git_untouched("a .git as a writable root");
}

// `run --timeout` ending a command that ignores SIGTERM: the command's tree is killed, the stage
// that holds the call still checks the repository before bubblewrap goes.
TEST_P(GitLayouts, ATimeoutsKillStillLeavesTheRepositoryValid) {
    const e2e::Result call = dsh({"run", "--timeout", "1s", "--kill-after", "1s", "--backend", "bwrap", "--mode",
                                  "workspace-write", "--workspace-root", ws, "--", "/bin/sh", "-c",
                                  "trap '' TERM; mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD; "
                                  "printf '[core]\\n\\tbare = true\\n\\tfsmonitor = " + evil + "\\n' > config; "
                                  "rm .git/HEAD; sleep 30"},
                                 ws);
    EXPECT_EQ(call.status, 124) << call.err;
    expect_git_untouched("a timeout's kill");
}

INSTANTIATE_TEST_SUITE_P(Linux, GitLayouts,
                         ::testing::Combine(::testing::Values("root", "nobody"), ::testing::Values(Form::Exec)),
                         param_name);

// A call ended from outside while the command has the repository broken: a signal to the call's
// process group (timeout(1)'s, a closed terminal's), which kills bubblewrap and the stage with it,
// a SIGKILL to bubblewrap alone, and on the exec path a SIGTERM to dsh-confine, which now reaches
// the command (its trap runs) instead of killing bubblewrap. dsh-confine, in front of bubblewrap,
// checks once the sandbox is gone.
class GitSignals : public GitProtection {
protected:
    // The call, started by sh as `start` (its pid in $p), ended by `end` once the command has
    // broken the repository; sh prints the call's status.
    e2e::Result ended(const std::string& start, const std::string& end, const std::string& after = "",
                      const std::string& redirect = "") const {
        const std::string ready = ws + "/sub/ready";
        const std::string command =
            "mkdir -p objects refs/heads; echo 'ref: refs/heads/main' > HEAD; "
            "printf '[core]\\n\\tbare = true\\n\\tfsmonitor = " + evil + "\\n' > config; "
            "rm .git/HEAD; " + after + "touch " + ready + "; sleep 30 & wait";
        const std::string call = std::string(e2e::binary()) + (form == Form::Run ? " run" : "") +
                                 " --backend bwrap --mode workspace-write --workspace-root " + ws + " -- /bin/sh -c \"" +
                                 command + "\"";
        const std::string script = start + " " + call + " " + redirect + " & p=$!; "
                                   "i=0; while [ ! -e " + ready + " ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; " +
                                   end + "; wait $p; echo $?";
        return e2e::run_program({"/bin/sh", "-c", script}, options(ws));
    }
};

TEST_P(GitSignals, ACallEndedFromOutsideStillLeavesTheRepositoryValid) {
    for (const auto& [sig, number] : {std::pair<const char*, int>{"TERM", SIGTERM}, {"HUP", SIGHUP}}) {
        // timeout(1) passes a signal it gets on to its whole process group: dsh-confine and
        // bubblewrap alike.
        const e2e::Result group = ended("timeout 60", std::string("kill -") + sig + " $p");
        EXPECT_EQ(group.out, std::to_string(128 + number) + "\n") << sig << ": " << group.err;
        // Restored by the stage (which had the signal too, passed it on, and may have repaired
        // before bubblewrap's end killed it) or by dsh-confine: either way the repository is valid.
        expect_git_untouched(std::string("a process group's SIG") + sig);
        for (const char* name : {"objects", "refs", "HEAD", "config", "sub/ready"}) fs::remove_all(ws + "/" + name);
    }
    // Signals neither dsh-confine nor `run` passes on, sent to it alone (red team pass 13: 02): a
    // fault's (SIGABRT, as a watchdog sends it), a timer's, a real-time one. The call ends as it
    // would have, once the repository is checked.
    for (const auto& [sig, number] :
         {std::pair<const char*, int>{"ABRT", SIGABRT}, {"ALRM", SIGALRM}, {"33", 33}, {"40", 40}}) {
        const e2e::Result other = ended("", std::string("kill -") + sig + " $p");
        EXPECT_EQ(other.out, std::to_string(128 + number) + "\n") << sig << ": " << other.err;
        expect_git_untouched(std::string("signal ") + sig);
        for (const char* name : {"objects", "refs", "HEAD", "config", "sub/ready"}) fs::remove_all(ws + "/" + name);
    }
    // A second signal while the check is slow (red team pass 14: 04: many names to remove
    // first): the check is done before it acts. Whenever it lands, the repository is valid.
    const e2e::Result twice = ended("timeout 60", "kill -TERM $p; sleep 0.3; kill -TERM $p",
                                    "mkdir -p .git/remotes && (cd .git/remotes && seq 20000 | xargs touch); ");
    EXPECT_EQ(twice.out, std::to_string(128 + SIGTERM) + "\n") << twice.err;
    expect_git_untouched("a second signal during the check");
    for (const char* name : {"objects", "refs", "HEAD", "config", "sub/ready"}) fs::remove_all(ws + "/" + name);
    // Started with stdin and stdout closed (red team pass 13: 03): the descriptors the check
    // records are not the ones /dev/null is put on.
    const e2e::Result closed = ended("", "kill -TERM $p", "", "<&- >&-");
    EXPECT_NE(closed.err.find("dsh-confine: git: restored"), std::string::npos) << closed.err;
    expect_git_untouched("stdin and stdout closed");
    for (const char* name : {"objects", "refs", "HEAD", "config", "sub/ready"}) fs::remove_all(ws + "/" + name);
    // The stage dies at once with bubblewrap: dsh-confine repairs, and says so.
    const e2e::Result killed = ended("", "kill -KILL $(cat /proc/$p/task/$p/children)");
    EXPECT_EQ(killed.out, "137\n") << killed.err;
    EXPECT_NE(killed.err.find("dsh-confine: git: restored"), std::string::npos) << killed.err;
    expect_git_untouched("a SIGKILL to bubblewrap");
}

TEST_P(GitSignals, ASignalToTheCallReachesTheCommand) {
    const e2e::Result term = ended("", "kill -TERM $p", "trap 'echo trapped >&2; exit 7' TERM; ");
    EXPECT_EQ(term.out, "7\n") << term.err;
    EXPECT_NE(term.err.find("trapped"), std::string::npos) << term.err;
    expect_git_untouched("a SIGTERM to dsh-confine");
}

INSTANTIATE_TEST_SUITE_P(Linux, GitSignals,
                         ::testing::Combine(::testing::Values("root", "nobody"), ::testing::Values(Form::Exec, Form::Run)),
                         param_name);

// A file system full to its last directory entry (red team pass 11: 06): the command rewrites
// HEAD (or plants a commondir), fills the data blocks, then hard-links one file into .git under
// names until no entry can be added. The repair takes no new name then: what is at HEAD (or the
// commondir) goes first, and the entry it frees is HEAD's. On an 8 MiB ext4 made for the test
// (root alone may mount it), judged by the host's git.
TEST(GitFullDisk, AFileSystemFullToItsLastEntryDoesNotStopTheRepair) {
    E2E_REQUIRE(getuid() == 0, "a loop-mounted ext4 needs root");
    E2E_REQUIRE(exists("/usr/bin/git") && exists("/usr/bin/python3") && exists("/sbin/mkfs.ext4"), "no git, python3 or mkfs.ext4");
    E2E_REQUIRE(e2e::backend_usable("bwrap"), "bubblewrap cannot confine here");
    e2e::TempDir base;
    const std::string image = base / "img", mnt = base / "mnt", ws = mnt + "/ws", sentinel = base / "pwned";
    fs::create_directory(mnt);
    ASSERT_EQ(e2e::run_program({"/usr/bin/truncate", "-s", "8M", image}).status, 0);
    ASSERT_EQ(e2e::run_program({"/sbin/mkfs.ext4", "-q", "-F", "-N", "2048", image}).status, 0);
    const e2e::Result mounted = e2e::run_program({"/bin/mount", "-o", "loop", image, mnt});
    E2E_REQUIRE(mounted.status == 0, "cannot loop-mount an ext4 here: " + mounted.err);
    struct Unmount {
        std::string at;
        ~Unmount() { e2e::run_program({"/bin/umount", at}); }
    } unmount{mnt};
    e2e::RunOptions o;
    o.env = e2e::isolated_env(base / "home");
    o.env["GIT_CONFIG_NOSYSTEM"] = "1";
    o.env["GIT_AUTHOR_NAME"] = o.env["GIT_COMMITTER_NAME"] = "t";
    o.env["GIT_AUTHOR_EMAIL"] = o.env["GIT_COMMITTER_EMAIL"] = "t@example.org";
    o.cwd = ws;
    const std::string fill =
        "import os, secrets, errno\n"
        "open('.git/zz', 'w').close()\n"
        "for chunk in (65536, 4096, 1):\n"
        "    try:\n"
        "        with open('.fill%d' % chunk, 'wb') as f:\n"
        "            while True: f.write(b'\\0' * chunk); f.flush()\n"
        "    except OSError: pass\n"
        "fails = 0\n"
        "while fails < 3000:\n"
        "    try: os.link('.git/zz', '.git/HEAD.dsh-confine-' + secrets.token_hex(8)); fails = 0\n"
        "    except OSError as e:\n"
        "        if e.errno != errno.ENOSPC: break\n"
        "        fails += 1\n";
    const std::string evil = "[core]\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = \\\"touch " + sentinel + "; false\\\"\\n";
    for (const std::string& breaking :
         {std::string("mkdir -p objects refs hooks; echo 'ref: refs/heads/main' > HEAD; printf '") + evil +
              "' > config; printf garbage > .git/HEAD",
          std::string("mkdir -p .cd/objects .cd/refs .cd/hooks; printf '") + evil + "' > .cd/config; echo \"$PWD/.cd\" > .git/commondir"}) {
        fs::remove_all(ws);
        fs::create_directory(ws);
        ASSERT_EQ(e2e::run_program({"/usr/bin/git", "init", "-q", "-b", "main", "."}, o).status, 0);
        ASSERT_EQ(e2e::run_program({"/usr/bin/git", "commit", "-q", "--allow-empty", "-m", "one"}, o).status, 0);
        e2e::write_file(base / "fill.py", fill);
        const e2e::Result call = e2e::run({"--backend", "bwrap", "--mode", "workspace-write", "--workspace-root", ws, "--",
                                           "/bin/sh", "-c", breaking + "; python3 " + (base / "fill.py")},
                                          o);
        EXPECT_EQ(call.status, 0) << breaking << ": " << call.err;
        EXPECT_EQ(call.err.find("dsh-confine: error: GIT:"), std::string::npos) << breaking << ": " << call.err;
        e2e::run_program({"/usr/bin/git", "status"}, o);
        EXPECT_EQ(e2e::run_program({"/usr/bin/git", "rev-parse", "--absolute-git-dir"}, o).out, ws + "/.git\n") << breaking;
        EXPECT_EQ(e2e::run_program({"/usr/bin/git", "rev-parse", "--git-common-dir"}, o).out, ".git\n") << breaking;
        EXPECT_FALSE(exists(sentinel)) << breaking << ": the planted fsmonitor ran in the host's git";
        fs::remove(sentinel);
    }
}

// What the plan says: the mode, the repositories and the notes; under Landlock, the gap.
class GitPlan : public GitProtection {};

TEST_P(GitPlan, ThePlanShowsTheModeAndLandlockNamesTheGap) {
    E2E_REQUIRE(e2e::backend_usable("landlock"), "Landlock cannot confine here");
    const e2e::Result bwrap =
        dsh({"--print", "--format", "json", "--backend", "bwrap", "--mode", "workspace-write", "--workspace-root", ws, "--", "true"}, ws);
    ASSERT_EQ(bwrap.status, 0) << bwrap.err;
    const json plan = json::parse(bwrap.out);
    EXPECT_EQ(plan["git"]["mode"], "protect");
    EXPECT_EQ(plan["policy"]["git"], "protect");
    EXPECT_EQ(plan["git"]["repositories"], json::array({ws + "/.git"}));
    EXPECT_EQ(plan["git"]["checkedAtEnd"], json::array({ws + "/.git"}));
    EXPECT_EQ(plan["enforcement"], "full");
    std::string notes = plan["git"]["notes"].dump();
    EXPECT_NE(notes.find("safe.bareRepository"), std::string::npos) << notes;
    EXPECT_NE(notes.find("submodule"), std::string::npos) << notes;

    const e2e::Result landlock = dsh(
        {"--print", "--format", "json", "--backend", "landlock", "--mode", "workspace-write", "--workspace-root", ws, "--", "true"}, ws);
    ASSERT_EQ(landlock.status, 0) << landlock.err;
    const json partial = json::parse(landlock.out);
    EXPECT_EQ(partial["enforcement"], "partial");
    EXPECT_NE(partial["enforcementGaps"].dump().find("git: Landlock"), std::string::npos) << partial["enforcementGaps"].dump();
    EXPECT_TRUE(IsError(dsh({"--backend", "landlock", "--require-full", "--mode", "workspace-write", "--workspace-root", ws,
                             "--", "true"}, ws), "ENFORCEMENT_PARTIAL"));

    const e2e::Result writable = dsh({"policy", "--git", "writable", "--workspace-root", ws}, ws);
    EXPECT_EQ(json::parse(writable.out)["git"], "writable") << writable.err;
    EXPECT_TRUE(IsError(dsh({"policy", "--git", "protected"}, ws), "USAGE"));
}

// doctor says whether the host's git takes a planted bare repository, and how to refuse them.
TEST_P(GitPlan, DoctorSaysWhetherTheHostsGitTakesABareRepository) {
    const auto git_of = [&] {
        const e2e::Result doctor = e2e::run({"doctor", "--json"}, [&] {
            e2e::RunOptions o = options(ws);
            o.env.erase("GIT_CONFIG_NOSYSTEM");
            return o;
        }());
        return json::parse(doctor.out, nullptr, false).value("git", json());
    };
    const json takes = git_of();
    EXPECT_EQ(takes.value("takesImplicitBareRepositories", false), true) << takes.dump();
    EXPECT_EQ(takes.value("advice", ""), "git config --global safe.bareRepository explicit") << takes.dump();
    write(home / ".gitconfig", "[safe]\n\tbareRepository = explicit\n");
    const json refuses = git_of();
    EXPECT_EQ(refuses.value("takesImplicitBareRepositories", true), false) << refuses.dump();
    EXPECT_EQ(refuses.value("safeBareRepository", ""), "explicit") << refuses.dump();
}

// A protected config refused with EBUSY is a denial naming the path, however classify is asked.
TEST_P(GitPlan, ARefusedGitConfigIsADenialNamingThePath) {
    const e2e::Result call = confined("git config core.fsmonitor " + evil);
    ASSERT_NE(call.status, 0);
    const std::string stderr_file = base / "stderr";
    write(stderr_file, call.err);
    const std::string plan_file = base / "plan.json";
    write(plan_file, dsh({"--print", "--format", "json", "--backend", "bwrap", "--mode", "workspace-write",
                          "--workspace-root", ws, "--", "true"}, ws).out);
    for (const std::vector<std::string>& how :
         {std::vector<std::string>{"--backend", "bwrap"}, std::vector<std::string>{"--plan", plan_file}}) {
        std::vector<std::string> args = {"classify", "--exit-code", std::to_string(call.status), "--stderr", stderr_file,
                                         "--format", "json"};
        args.insert(args.end(), how.begin(), how.end());
        const e2e::Result verdict = dsh(args, ws);
        const json parsed = json::parse(verdict.out, nullptr, false);
        EXPECT_EQ(parsed.value("verdict", ""), "denial") << how.back() << ": " << verdict.out << verdict.err;
        EXPECT_NE(parsed.value("path", json()).dump().find(".git/config"), std::string::npos) << verdict.out;
    }
}

INSTANTIATE_TEST_SUITE_P(Linux, GitPlan, ::testing::Combine(::testing::Values("root", "nobody"), ::testing::Values(Form::Exec)),
                         param_name);

}  // namespace
