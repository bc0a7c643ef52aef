#include "bwrap_stage.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fcntl.h>
#include <sched.h>
#include <csignal>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../posix/safe_path.hpp"
#include "git_check.hpp"
#include "landlock.hpp"
#include "proxy_companion.hpp"
#include "runner.hpp"
#include "tty_guard.hpp"

namespace dsh::bwrap {
namespace {

int fail(const std::string& message) {
    std::fprintf(stderr, "dsh-confine: error: BWRAP_STAGE: %s\n", message.c_str());
    return 125;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Fd& operator=(Fd&& other) noexcept {
        if (this != &other) {
            if (fd_ >= 0) close(fd_);
            fd_ = other.fd_;
            other.fd_ = -1;
        }
        return *this;
    }
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    int get() const { return fd_; }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_;
};

struct Target {
    posix::FileIdentity id;
    std::string path;
};

bool parse_target(const std::string& text, Target& out, std::string& why) {
    const std::size_t at = text.find('@');
    std::optional<posix::FileIdentity> id;
    if (at != std::string::npos) id = posix::FileIdentity::parse(std::string_view(text).substr(0, at));
    if (!id || at + 1 >= text.size() || text[at + 1] != '/') {
        why = "'" + text + "' is not DEV:INO@/ABSOLUTE/PATH";
        return false;
    }
    out = {*id, text.substr(at + 1)};
    return true;
}

bool write_file(const char* path, const std::string& text, std::string& why) {
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    const bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (!ok) why = errno_text(path);
    if (fd >= 0) close(fd);
    return ok;
}

// Unprivileged, bubblewrap's sandbox sits in a user namespace that may not mount. A user and
// mount namespace of the stage's own may: it maps only this uid and gid, and every mount it
// inherits is locked there, so nothing of bubblewrap's layout can be undone from it.
bool enter_own_namespaces(std::string& why) {
    const uid_t uid = geteuid();
    const gid_t gid = getegid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        why = errno_text("unshare(user and mount namespace)");
        return false;
    }
    return write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n", why) &&
           write_file("/proc/self/setgroups", "deny", why) &&
           write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n", why);
}

// Moves a copy of the staged mount onto `target`'s path. The staged directory (a bind of the
// host path, when `check_staged`) and the target (reached without symlinks) must both be the
// directory the plan named: a rename or a planted symlink since then stops the call here.
bool mount_over(const std::string& staged, bool check_staged, const Target& target, std::string& why) {
    Fd from(open(staged.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!from) {
        why = errno_text(staged);
        return false;
    }
    if (check_staged && posix::identity_of(from.get()) != std::optional<posix::FileIdentity>(target.id)) {
        why = target.path + " is no longer the directory the plan named (it was replaced since); nothing ran";
        return false;
    }
    Fd to(posix::open_no_symlinks(target.path, O_PATH | O_DIRECTORY));
    if (!to) {
        why = target.path + (errno == ELOOP ? ": a component is now a symlink (refused); nothing ran"
                                            : ": " + std::string(std::strerror(errno)));
        return false;
    }
    if (posix::identity_of(to.get()) != std::optional<posix::FileIdentity>(target.id)) {
        why = target.path + " is no longer the directory the plan named (it was replaced since); nothing ran";
        return false;
    }
    Fd tree(open_tree(from.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
    if (!tree) {
        why = errno_text("open_tree " + staged);
        return false;
    }
    if (move_mount(tree.get(), "", to.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
        why = errno_text("move_mount onto " + target.path);
        return false;
    }
    return true;
}

bool proc_read_only() {
    struct statvfs st {};
    return statvfs("/proc", &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
}

// Self-binds `path` (reached without symlinks; a symlink at its end is bound itself): a mount
// point cannot be renamed or removed, so neither it nor what lies under it can be moved aside and
// replaced. `read_only` also makes the new mount (and every mount under it) read-only.
bool bind_onto_itself(const std::string& path, bool read_only, std::string& why) {
    Fd at(posix::open_no_symlinks(path, O_PATH));
    if (!at) {
        why = path + (errno == ELOOP ? ": a component is now a symlink (refused); nothing ran"
                                     : ": " + std::string(std::strerror(errno)));
        return false;
    }
    Fd tree(open_tree(at.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
    if (!tree) {
        why = errno_text("open_tree " + path);
        return false;
    }
    if (read_only) {
        mount_attr attr{};
        attr.attr_set = MOUNT_ATTR_RDONLY;
        if (mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
            why = errno_text("read-only " + path);
            return false;
        }
    }
    if (move_mount(tree.get(), "", at.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
        why = errno_text("mounting " + path + " onto itself");
        return false;
    }
    return true;
}

// The writable root that holds `path` below its top (the last one given, as bubblewrap stacks
// them), or nullptr.
const Target* root_holding(const std::string& path, const std::vector<Target>& roots) {
    const Target* root = nullptr;
    for (const auto& candidate : roots)
        if (path.size() > candidate.path.size() && path.compare(0, candidate.path.size(), candidate.path) == 0 &&
            (candidate.path == "/" || path[candidate.path.size()] == '/'))
            root = &candidate;
    return root;
}

// Every directory between `root` and `path` bound onto itself, so none can be renamed or removed
// to move `path` aside (a mount point is EBUSY). `path` itself is the caller's to mount. `bound`
// holds the directories already bound on the way to an earlier path: each is bound once.
bool pin_the_way(const std::string& path, const Target& root, std::set<std::string>& bound, std::string& why) {
    for (std::size_t slash = path.find('/', root.path.size() + 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        const std::string directory = path.substr(0, slash);
        if (bound.count(directory) != 0) continue;
        if (!bind_onto_itself(directory, false, why)) return false;
        bound.insert(directory);
    }
    return true;
}

// A path inside a root kept where it is: the way to it pinned, then the path itself bound onto
// itself, read-only when `read_only`.
bool keep_in_place(const std::string& path, bool read_only, const std::vector<Target>& roots, std::set<std::string>& bound,
                   std::string& why) {
    const Target* root = root_holding(path, roots);
    if (!root) {
        why = path + " lies in no writable root";
        return false;
    }
    if (!pin_the_way(path, *root, bound, why) || !bind_onto_itself(path, read_only, why)) return false;
    bound.insert(path);
    return true;
}

// Git's own layout made where it is missing (an empty .git/hooks, an empty config.worktree that
// git would read), in its parent reached without symlinks, before it is kept read-only: a name
// the command could otherwise create and fill.
bool make_missing(const std::string& path, bool directory, std::string& why) {
    const std::size_t slash = path.rfind('/');
    Fd parent(posix::open_no_symlinks(slash == 0 ? "/" : path.substr(0, slash), O_PATH | O_DIRECTORY));
    if (!parent) {
        why = path + (errno == ELOOP ? ": a component is now a symlink (refused); nothing ran"
                                     : ": " + std::string(std::strerror(errno)));
        return false;
    }
    const std::string name = path.substr(slash + 1);
    int made = 0;
    if (directory) {
        made = mkdirat(parent.get(), name.c_str(), 0777);
    } else {
        const int fd = openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        made = fd < 0 ? -1 : close(fd);
    }
    if (made != 0 && errno != EEXIST) {
        why = errno_text("making " + path);
        return false;
    }
    return true;
}

// A detached tmpfs of its own, read-only, mode 000, holding one empty file of mode 000: what is
// mounted over a hidden directory (its root) or file (the file).
// Inside a writable root (`writable`: the roots and the temp area), the way to the path is pinned
// too: a command that renamed a directory on it would find the path, unhidden, under the new
// name at its next call.
bool hide(const std::string& path, const std::vector<Target>& writable, std::set<std::string>& bound, std::string& why) {
    Fd target(posix::open_no_symlinks(path, O_PATH));
    if (!target) {
        if (errno == ENOENT) return true;  // gone since the plan: nothing to read
        why = path + (errno == ELOOP ? ": a component is now a symlink (refused); nothing ran"
                                     : ": " + std::string(std::strerror(errno)));
        return false;
    }
    // The pins are new mounts over the directories on the way: the path is opened again through
    // them, where the command will reach it (a cover on the first descriptor would lie under a pin).
    if (const Target* root = root_holding(path, writable)) {
        if (!pin_the_way(path, *root, bound, why)) return false;
        target = Fd(posix::open_no_symlinks(path, O_PATH));
        if (!target) {
            why = errno_text(path);
            return false;
        }
    }
    struct stat st {};
    if (fstat(target.get(), &st) != 0) {
        why = errno_text(path);
        return false;
    }
    // A hidden file is the tmpfs's one file, made in a root directory the stage can write: a root
    // caller's stage holds no CAP_DAC_OVERRIDE, so it could not create it inside a mode-000 one.
    // Only that file is mounted then; a hidden directory gets the mode-000 root itself.
    Fd fs(fsopen("tmpfs", FSOPEN_CLOEXEC));
    if (!fs || fsconfig(fs.get(), FSCONFIG_SET_STRING, "mode", S_ISDIR(st.st_mode) ? "0" : "0700", 0) != 0 ||
        fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", "4k", 0) != 0 ||
        fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
        why = errno_text("tmpfs to hide " + path);
        return false;
    }
    Fd mnt(fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
    if (!mnt) {
        why = errno_text("tmpfs to hide " + path);
        return false;
    }
    Fd source;
    if (S_ISDIR(st.st_mode)) {
        source = Fd(open_tree(mnt.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
    } else {
        Fd file(openat(mnt.get(), "hidden", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
        if (!file) {
            why = errno_text("the empty file to hide " + path);
            return false;
        }
        source = Fd(open_tree(mnt.get(), "hidden", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    }
    if (!source) {
        why = errno_text("open_tree to hide " + path);
        return false;
    }
    mount_attr attr{};
    attr.attr_set = MOUNT_ATTR_RDONLY;
    if (mount_setattr(source.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0 ||
        move_mount(source.get(), "", target.get(), "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
        why = errno_text("hiding " + path);
        return false;
    }
    return true;
}

// With repositories to check when the call ends, the stage stays as the command's parent (and
// the subreaper of what it starts) instead of becoming it: once the command has exited, what it
// left running is ended, as bubblewrap's init would end it, and then the repositories are
// restored (git_check.hpp) before the stage exits with the command's status, so the caller's next
// git, started when dsh-confine returns, finds them restored. The command cannot signal or trace
// the stage where the stage's Landlock scope holds (the command's domain is its own); a signal
// sent to the stage by kill (run forwards its signals here) is passed on to the command's
// process group (linux_runner::pass_signals_on), and one from the terminal reached that group
// already.
int hold_and_check(const linux_runner::Launch& launch, const std::vector<git_check::Recorded>& checks,
                   const StageRequest& request) {
    sigset_t all, before;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &before);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const pid_t child = fork();
    if (child < 0) {
        sigprocmask(SIG_SETMASK, &before, nullptr);
        return fail(errno_text("fork"));
    }
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &before, nullptr);
        _exit(launch.run());
    }
    signal(SIGPIPE, SIG_IGN);  // a reader of stderr gone must not stop the repairs
    linux_runner::pass_signals_on(child, before);
    linux_runner::drop_all_capabilities();
    prctl(PR_SET_DUMPABLE, 0);
    // Only stderr (for the repairs' lines) and the repositories' descriptors stay open here.
    if (const int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    for (int fd : request.keepFds) close(fd);
    if (request.statusFd >= 0) close(request.statusFd);

    int status = 0;
    for (;;) {
        int st = 0;
        const pid_t done = waitpid(-1, &st, 0);
        if (done == child && WIFSTOPPED(st)) {
            // A stop only a tracer hears of: the command made the stage its tracer
            // (PTRACE_TRACEME). Let go of it, its signal delivered.
            ptrace(PTRACE_DETACH, child, nullptr, WSTOPSIG(st));
            continue;
        }
        if (done == child) {
            status = st;
            break;
        }
        if (done < 0 && errno != EINTR) break;
    }
    linux_runner::stop_passing_signals();
    kill(-1, SIGKILL);  // every other process of the sandbox's PID namespace but its init
    for (;;) {
        const pid_t done = waitpid(-1, nullptr, 0);
        if (done < 0 && errno != EINTR) break;
    }
    // Only a check that repaired all it found to repair is said to be done: the front, which may
    // hold capabilities the stage dropped, tries the rest again.
    if (git_check::restore_and_say(checks) && request.checkedFd >= 0) (void)!write(request.checkedFd, "C", 1);
    linux_runner::end_as(status);
}

}  // namespace

int run_stage(const StageRequest& request, const std::vector<std::string>& argv) {
    if (argv.empty()) return fail("no command to run");
    if (request.statusFd >= 0) fcntl(request.statusFd, F_SETFD, FD_CLOEXEC);
    if (request.checkedFd >= 0) fcntl(request.checkedFd, F_SETFD, FD_CLOEXEC);
    if (request.chdir.empty() || request.chdir.front() != '/') return fail("--chdir must be an absolute path");
    if (!request.tempBind.empty() && !request.tempTmpfs.empty()) return fail("give --temp-bind or --temp-tmpfs, not both");
    std::string why;
    std::vector<Target> roots(request.roots.size());
    for (std::size_t i = 0; i < roots.size(); ++i)
        if (!parse_target(request.roots[i], roots[i], why)) return fail("--root " + why);
    Target temp;
    const std::string& temp_text = request.tempBind.empty() ? request.tempTmpfs : request.tempBind;
    if (!temp_text.empty() && !parse_target(temp_text, temp, why)) return fail("--temp " + why);

    const std::string staging = kStagingDir;
    for (const auto* list : {&request.protect, &request.protectDirs, &request.protectFiles, &request.pin, &request.gitCheck})
        for (const auto& path : *list)
            if (path.empty() || path.front() != '/') return fail("--protect, --pin and --git-check take absolute paths");
    for (const auto& path : request.hide)
        if (path.empty() || path.front() != '/') return fail("--hide must be an absolute path");
    if (!roots.empty() || !temp_text.empty() || !request.hide.empty()) {
        if (!linux_runner::has_sys_admin() && !enter_own_namespaces(why)) return fail(why);
        if (!temp_text.empty() && !mount_over(staging + "/temp", request.tempTmpfs.empty(), temp, why)) return fail(why);
        for (std::size_t i = 0; i < roots.size(); ++i)
            if (!mount_over(staging + "/" + std::to_string(i), true, roots[i], why)) return fail(why);
        // The staged mounts stay under the staging directory (locked, unprivileged): an empty
        // read-only tmpfs covers them, so the command reaches each root at its real path only.
        if (!roots.empty() || !temp_text.empty())
            if (mount("tmpfs", staging.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") != 0)
                return fail(errno_text("covering " + staging));
        for (const auto& path : request.protectDirs)
            if (!make_missing(path, true, why)) return fail(why);
        for (const auto& path : request.protectFiles)
            if (!make_missing(path, false, why)) return fail(why);
        std::set<std::string> bound;
        for (const auto& path : request.pin)
            if (!keep_in_place(path, false, roots, bound, why)) return fail(why);
        for (const auto* list : {&request.protect, &request.protectDirs, &request.protectFiles})
            for (const auto& path : *list)
                if (!keep_in_place(path, true, roots, bound, why)) return fail(why);
        std::vector<Target> writable = roots;
        if (!temp_text.empty()) writable.push_back(temp);
        // Outermost first: a path inside a hidden directory is hidden with it (and could not be
        // reached through the mode-000 cover to be hidden again).
        std::vector<std::string> hidden = request.hide;
        std::sort(hidden.begin(), hidden.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
        std::vector<std::string> covered;
        for (const auto& path : hidden) {
            const bool inside = std::any_of(covered.begin(), covered.end(), [&](const std::string& outer) {
                return path.size() > outer.size() && path.compare(0, outer.size(), outer) == 0 && path[outer.size()] == '/';
            });
            if (inside) continue;
            if (!hide(path, writable, bound, why)) return fail(why);
            covered.push_back(path);
        }
    }
    // Recorded before the command starts (lib/git_protection.hpp, git_check.hpp).
    std::vector<git_check::Recorded> checks;
    for (const auto& gitdir : request.gitCheck) {
        auto recorded = git_check::record(gitdir, why);
        if (!recorded) return fail(why + "; nothing ran");
        checks.push_back(std::move(*recorded));
    }
    // /proc read-only (bubblewrap 0.8 leaves /proc/sys writable to root otherwise): bubblewrap
    // remounts it when there are no mounts to make; with them, the stage needed it writable for
    // its uid and gid maps, and remounts it here.
    if (!proc_read_only()) {
        mount_attr attr{};
        attr.attr_set = MOUNT_ATTR_RDONLY;
        if (mount_setattr(AT_FDCWD, "/proc", AT_RECURSIVE, &attr, sizeof attr) != 0 || !proc_read_only())
            return fail(errno_text("remounting /proc read-only"));
    }
    // The cwd is reached as the roots are, without symlinks: it may lie in one of them.
    {
        Fd here(posix::open_no_symlinks(request.chdir, O_PATH | O_DIRECTORY));
        if (!here || fchdir(here.get()) != 0)
            return fail("cannot enter the working directory " + request.chdir + ": " +
                        (errno == ELOOP ? std::string("a component is a symlink") : std::string(std::strerror(errno))));
    }
    if (!temp_text.empty()) setenv("TMPDIR", temp.path.c_str(), 1);
    linux_guard::GuardOptions guard;
    // With the network denied, host daemons' sockets by path are still reachable from this
    // network namespace, and datagram sockets can address them: the guard's socket rules.
    if (request.denyNetwork) guard.sockets = linux_guard::SocketRules::Local;
    // The allow-list: the proxy's listeners made here, in the sandbox's network namespace (only its
    // loopback), and sent to the proxy outside; the command reaches them by TCP and nothing else.
    if (request.hostsNetwork) {
        if (request.proxyFd < 0) return fail("--network hosts without --proxy-fd: run the plan from its start (dsh-confine net-proxy)");
        std::vector<int> listeners;
        for (const int family : {AF_INET, AF_INET6}) {
            const int fd = proxy::loopback_listener(family, proxy::kSandboxPort, why);
            if (fd >= 0) listeners.push_back(fd);
            else if (family == AF_INET) return fail(why + "; nothing ran");  // IPv6 may be off in the namespace
        }
        if (!proxy::send_listeners(request.proxyFd, listeners, why)) return fail(why + "; nothing ran");
        for (int fd : listeners) close(fd);
        proxy::set_proxy_environment(proxy::kSandboxPort);
        guard.sockets = linux_guard::SocketRules::Proxied;
    }
    // A process group spans PID namespaces: without Landlock's signal scope, kill(0, ...) reaches
    // the caller's group outside. The ruleset handles no access right (the mounts govern files).
    int ruleset = -1;
    if (request.landlockScope) {
        ruleset = landlock::scope_ruleset(request.denyNetwork || request.hostsNetwork, why);
        if (ruleset < 0) return fail("the plan relies on Landlock's scopes: " + why + "; nothing ran");
    }
    const linux_runner::Launch launch =
        linux_runner::prepare_launch(argv, request.statusFd, request.keepFds, "BWRAP_STAGE", guard, ruleset);
    if (checks.empty()) return launch.run();
    return hold_and_check(launch, checks, request);  // the scope is the command's alone: applied in its process
}

}  // namespace dsh::bwrap
