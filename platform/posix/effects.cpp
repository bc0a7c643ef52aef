#include "effects.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#if defined(__linux__)
#include <sys/sysmacros.h>  // makedev (in <sys/types.h> elsewhere)
#endif
#include <sys/un.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <linux/fs.h>  // FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR
#include <linux/netlink.h>
#include <mqueue.h>    // POSIX message queues (macOS has none)
#include <sched.h>     // CLONE_PARENT
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#endif
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

#include "process.hpp"

namespace dsh::posix {
namespace {

int refused(const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(), std::strerror(errno));
    return 1;
}

int bad_request(const std::string& op) {
    std::fprintf(stderr, "unknown effect '%s' or missing arguments\n", op.c_str());
    return 2;
}

int write_to(const std::string& path, int flags, const char* data) {
    const int fd = open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0) return refused("open " + path);
    const ssize_t n = write(fd, data, std::strlen(data));
    close(fd);
    if (n < 0) return refused("write " + path);
    return 0;
}

// A descriptor number given on the command line, or -1.
int descriptor(const std::string& text) {
    char* end = nullptr;
    const long fd = std::strtol(text.c_str(), &end, 10);
    return end != text.c_str() && *end == '\0' && fd >= 0 && fd < 1 << 20 ? static_cast<int>(fd) : -1;
}

// The calls whose form differs between Linux and macOS.
int set_test_xattr(const char* path) {
#if defined(__APPLE__)
    return setxattr(path, "user.dsh-confine", "x", 1, 0, 0);
#else
    return setxattr(path, "user.dsh-confine", "x", 1, 0);
#endif
}

ssize_t list_xattrs_nofollow(const char* path, char* names, std::size_t size) {
#if defined(__APPLE__)
    return listxattr(path, names, size, XATTR_NOFOLLOW);
#else
    return llistxattr(path, names, size);
#endif
}

const timespec& modified_at(const struct stat& st) {
#if defined(__APPLE__)
    return st.st_mtimespec;
#else
    return st.st_mtim;
#endif
}

// posix_fallocate's effect: the file's first SIZE bytes allocated, the file grown to SIZE if it
// was smaller. Returns 0 or an errno value, as posix_fallocate does.
int allocate(int fd, off_t size) {
#if defined(__APPLE__)
    struct stat st {};
    if (fstat(fd, &st) != 0) return errno;
    fstore_t store{F_ALLOCATEALL, F_PEOFPOSMODE, 0, size - st.st_size, 0};  // counted from the end of file
    if (st.st_size < size && fcntl(fd, F_PREALLOCATE, &store) == -1) return errno;
    if (st.st_size < size && ftruncate(fd, size) != 0) return errno;
    return 0;
#else
    return posix_fallocate(fd, 0, size);
#endif
}

// The signals a sentinel watches: SIGUSR1 (what the tests' commands send), and SIGHUP and
// SIGCONT (what the kernel itself sends a process group it finds orphaned with a stopped member).
constexpr int kWatched[] = {SIGUSR1, SIGHUP, SIGCONT};
constexpr const char* kWatchedNames[] = {"USR1", "HUP", "CONT"};

// The sentinel's life: the watched signals and SIGUSR2 blocked, `ready` written to `ready_fd`,
// then SIGUSR2 awaited. Which watched signals came meanwhile, one bit each in kWatched's order:
// blocked, they stay pending, never lost or handled (a blocked SIGCONT still continues).
unsigned wait_as_sentinel(int ready_fd, const char* ready, std::size_t size) {
    sigset_t blocked;
    sigemptyset(&blocked);
    for (int sig : kWatched) sigaddset(&blocked, sig);
    sigaddset(&blocked, SIGUSR2);
    sigprocmask(SIG_BLOCK, &blocked, nullptr);
    if (write(ready_fd, ready, size) != static_cast<ssize_t>(size)) return 0;
    sigset_t asked;
    sigemptyset(&asked);
    sigaddset(&asked, SIGUSR2);
    int which = 0;
    while (sigwait(&asked, &which) != 0) {
    }
    sigset_t pending;
    sigpending(&pending);
    unsigned got = 0;
    for (std::size_t i = 0; i < std::size(kWatched); ++i)
        if (sigismember(&pending, kWatched[i]) == 1) got |= 1U << i;
    return got;
}

}  // namespace

int perform_effect(const std::string& op, const std::vector<std::string>& a) {
    auto need = [&](std::size_t n) { return a.size() >= n; };
    if (op == "create" && need(1)) return write_to(a[0], O_WRONLY | O_CREAT | O_EXCL, "created\n");
    if (op == "write" && need(1)) return write_to(a[0], O_WRONLY, "overwritten\n");
    // The outside review's git attack: the repository in WS made invalid (its HEAD removed) and WS
    // itself made a bare repository, which git then takes for the one in WS.
    if (op == "plant-bare" && need(1)) {
        const std::string& ws = a[0];
        if (unlink((ws + "/.git/HEAD").c_str()) != 0) return refused("unlink " + ws + "/.git/HEAD");
        mkdir((ws + "/objects").c_str(), 0755);
        mkdir((ws + "/refs").c_str(), 0755);
        const int head = write_to(ws + "/HEAD", O_WRONLY | O_CREAT | O_TRUNC, "ref: refs/heads/main\n");
        const int config = write_to(ws + "/config", O_WRONLY | O_CREAT | O_TRUNC, "[core]\n\trepositoryformatversion = 0\n\tbare = true\n");
        return head != 0 ? head : config;
    }
    if (op == "rewrite" && need(1)) {  // the file's own content written back: no change even if allowed
        std::ifstream in(a[0], std::ios::binary);
        std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return write_to(a[0], O_WRONLY, content.c_str());
    }
    if (op == "append" && need(1)) return write_to(a[0], O_WRONLY | O_APPEND, "appended\n");
    if (op == "truncate" && need(1)) return truncate(a[0].c_str(), 0) == 0 ? 0 : refused("truncate " + a[0]);
    if (op == "fallocate" && need(1)) {
        const int fd = open(a[0].c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) return refused("open " + a[0]);
        const int rc = allocate(fd, 1 << 20);
        close(fd);
        errno = rc;
        return rc == 0 ? 0 : refused("fallocate " + a[0]);
    }
    if (op == "chmod" && need(1)) return chmod(a[0].c_str(), 0600) == 0 ? 0 : refused("chmod " + a[0]);
    if (op == "chgrp" && need(2)) {
        const gid_t gid = static_cast<gid_t>(std::stoul(a[1]));
        return chown(a[0].c_str(), static_cast<uid_t>(-1), gid) == 0 ? 0 : refused("chown " + a[0]);
    }
    if (op == "utimes" && need(1)) {
        timespec times[2] = {{1000000000, 0}, {1000000000, 0}};
        return utimensat(AT_FDCWD, a[0].c_str(), times, 0) == 0 ? 0 : refused("utimensat " + a[0]);
    }
    if (op == "setxattr" && need(1))
        return set_test_xattr(a[0].c_str()) == 0 ? 0 : refused("setxattr " + a[0]);
    if (op == "mkdir" && need(1)) return mkdir(a[0].c_str(), 0755) == 0 ? 0 : refused("mkdir " + a[0]);
    if (op == "rmdir" && need(1)) return rmdir(a[0].c_str()) == 0 ? 0 : refused("rmdir " + a[0]);
    if (op == "unlink" && need(1)) return unlink(a[0].c_str()) == 0 ? 0 : refused("unlink " + a[0]);
    if (op == "rename" && need(2)) return rename(a[0].c_str(), a[1].c_str()) == 0 ? 0 : refused("rename " + a[0]);
    if (op == "link" && need(2)) return link(a[0].c_str(), a[1].c_str()) == 0 ? 0 : refused("link " + a[1]);
    if (op == "symlink" && need(1)) return symlink("target", a[0].c_str()) == 0 ? 0 : refused("symlink " + a[0]);
    if (op == "mkfifo" && need(1)) return mkfifo(a[0].c_str(), 0644) == 0 ? 0 : refused("mkfifo " + a[0]);
    if (op == "mknod" && need(1))
        return mknod(a[0].c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0 ? 0 : refused("mknod " + a[0]);
    if (op == "bind" && need(1)) {
#if defined(SOCK_CLOEXEC)
        const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
#else
        const int fd = socket(AF_UNIX, SOCK_STREAM, 0);  // nothing is exec'd before it is closed
#endif
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof address.sun_path, "%s", a[0].c_str());
        const int rc = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
        const int error = errno;
        close(fd);
        errno = error;
        return rc == 0 ? 0 : refused("bind " + a[0]);
    }
    // Through descriptors the command inherited: a file made in an open directory, and a write
    // through an open file. (Whether it inherited them at all is what is being tested.)
    if (op == "openat-create" && need(2)) {
        const int dir = descriptor(a[0]);
        if (dir < 0) return bad_request(op);
        const int fd = openat(dir, a[1].c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) return refused("openat " + a[0] + " " + a[1]);
        const ssize_t n = write(fd, "created\n", 8);
        close(fd);
        return n == 8 ? 0 : refused("write " + a[1]);
    }
    if (op == "write-fd" && need(1)) {
        const int fd = descriptor(a[0]);
        if (fd < 0) return bad_request(op);
        const char text[] = "written through an inherited descriptor\n";
        return write(fd, text, sizeof text - 1) == static_cast<ssize_t>(sizeof text - 1) ? 0 : refused("write to descriptor " + a[0]);
    }
#if defined(__linux__)
    // Inode flags, which the owner of a file may change without any write access to it: no-dump
    // through FS_IOC_SETFLAGS (chattr +d), no-atime through FS_IOC_FSSETXATTR (xfs_io chattr +A).
    if ((op == "setflags" || op == "fssetxattr") && need(1)) {
        const int fd = open(a[0].c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return refused("open " + a[0]);
        int rc = -1;
        if (op == "setflags") {
            int flags = 0;  // the kernel reads and writes an int, whatever <linux/fs.h> says
            if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
                flags |= FS_NODUMP_FL;
                rc = ioctl(fd, FS_IOC_SETFLAGS, &flags);
            }
        } else {
            fsxattr attr{};
            if (ioctl(fd, FS_IOC_FSGETXATTR, &attr) == 0) {
                attr.fsx_xflags |= FS_XFLAG_NOATIME;
                rc = ioctl(fd, FS_IOC_FSSETXATTR, &attr);
            }
        }
        const int error = errno;
        close(fd);
        errno = error;
        return rc == 0 ? 0 : refused("ioctl " + op + " " + a[0]);
    }
    if (op == "mq-create" && need(1)) {  // a POSIX message queue, named "/NAME"
        const mqd_t queue = mq_open(a[0].c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600, nullptr);
        if (queue == static_cast<mqd_t>(-1)) return refused("mq_open " + a[0]);
        mq_close(queue);
        return 0;
    }
#endif
    if (op == "read" && need(1)) {
        std::ifstream in(a[0], std::ios::binary);
        std::string content;
        if (!in || !std::getline(in, content)) return refused("read " + a[0]);
        std::printf("%s\n", content.c_str());  // what was read, for the host to compare
        return 0;
    }
    // The network: a TCP connection to a port on 127.0.0.1, and a Unix socket by path.
    if (op == "connect-tcp" && need(1)) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return refused("socket AF_INET");
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(std::atoi(a[0].c_str())));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const int rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
        const int error = errno;
        close(fd);
        errno = error;
        return rc == 0 ? 0 : refused("connect 127.0.0.1:" + a[0]);
    }
    if (op == "connect-unix" && need(1)) {
        const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0) return refused("socket AF_UNIX");
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof address.sun_path, "%s", a[0].c_str());
        const int rc = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
        const int error = errno;
        close(fd);
        errno = error;
        return rc == 0 ? 0 : refused("connect " + a[0]);
    }
    // A datagram to a host socket by path, from each datagram socket the command could make: its
    // own, and a socketpair end, addressed per call or connected. 0 when any one was sent.
    if (op == "sendto-dgram" && need(1)) {
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof address.sun_path, "%s", a[0].c_str());
        const auto* to = reinterpret_cast<const sockaddr*>(&address);
        int sent = 0;
        const auto attempt = [&](const char* how, int fd, bool connected) {
            const bool ok = fd >= 0 && (connected ? connect(fd, to, sizeof address) == 0 && send(fd, "x", 1, 0) == 1
                                                  : sendto(fd, "x", 1, 0, to, sizeof address) == 1);
            if (ok) ++sent;
            else refused(std::string(how) + " to " + a[0]);
        };
        const int own = socket(AF_UNIX, SOCK_DGRAM, 0);
        attempt("sendto from socket(AF_UNIX, SOCK_DGRAM)", own, false);
        int pair[2] = {-1, -1};
        if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0) pair[0] = pair[1] = -1;
        attempt("sendto from socketpair(AF_UNIX, SOCK_DGRAM)", pair[0], false);
        attempt("connect and send from socketpair(AF_UNIX, SOCK_DGRAM)", pair[1], true);
        for (int fd : {own, pair[0], pair[1]})
            if (fd >= 0) close(fd);
        return sent > 0 ? 0 : 1;
    }
    // A signal to every process of the command's process group, or to every process it may
    // signal (-1). The helper ignores the signal itself: it is among the receivers.
    if (op == "signal-group" || op == "signal-all") {
        std::signal(SIGUSR1, SIG_IGN);
        const pid_t whom = op == "signal-group" ? 0 : -1;
        return kill(whom, SIGUSR1) == 0 ? 0 : refused(op == "signal-group" ? "kill(0, SIGUSR1)" : "kill(-1, SIGUSR1)");
    }
    // The kernel made to signal this process's group (the outside review's way past the signal
    // scope): a grandchild stays in the group and stops itself; its parent moves to a group of
    // its own in the same session and ends. The kernel then finds the group orphaned with a
    // stopped member and sends the whole group SIGHUP and SIGCONT, with no permission check. This
    // process is in the group and ignores SIGHUP; the grandchild, continued or not, is ended.
    // With a[0], a process group's number, the grandchild first tries to join that group
    // instead (setpgid(2) lets it join only a group of its own session), which is then the one
    // left orphaned.
    if (op == "orphan-group") {
        std::signal(SIGHUP, SIG_IGN);
        const pid_t join = a.empty() ? 0 : static_cast<pid_t>(std::strtol(a[0].c_str(), nullptr, 10));
        int told[2];
        if (!make_pipe(told)) return refused("pipe");
        const pid_t child = fork();
        if (child == 0) {
            const pid_t grandchild = fork();
            if (grandchild == 0) {
                if (join > 0) setpgid(0, join);
                raise(SIGSTOP);
                _exit(0);
            }
            int status = 0;
            waitpid(grandchild, &status, WUNTRACED);
            const bool moved = setpgid(0, 0) == 0;
            _exit(write(told[1], &grandchild, sizeof grandchild) == sizeof grandchild && moved ? 0 : 1);
        }
        close(told[1]);
        pid_t grandchild = -1;
        const bool heard = read(told[0], &grandchild, sizeof grandchild) == sizeof grandchild;
        close(told[0]);
        int status = 0;
        waitpid(child, &status, 0);
        if (heard && grandchild > 0) kill(grandchild, SIGKILL);
        return heard && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : refused("orphaning the process group");
    }
    // The tests' sentinel (start_signal_sentinel is doctor's): "ready" on stdout once the watched
    // signals are blocked, then, on SIGUSR2, those that came ("USR1", "HUP CONT", ...) or "none"
    // into the file a[0].
    if (op == "sentinel" && need(1)) {
        const unsigned got = wait_as_sentinel(1, "ready\n", 6);
        std::string names;
        for (std::size_t i = 0; i < std::size(kWatched); ++i)
            if (got & (1U << i)) names += (names.empty() ? "" : " ") + std::string(kWatchedNames[i]);
        std::ofstream(a[0]) << (names.empty() ? "none" : names) << "\n";
        return 0;
    }
#if defined(__linux__)
    // A netlink message to a host process's port (NETLINK_USERSOCK, which unprivileged processes
    // may send to one another).
    // The command's parent made to act for it: the parent made its tracer, then a signal that
    // stops it there (a handled one: a traced process stops for every signal but SIGKILL).
    if (op == "trace-me") {
        if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) return refused("ptrace(PTRACE_TRACEME)");
        std::signal(SIGUSR1, [](int) {});
        raise(SIGUSR1);
        return 0;
    }
    // A child given to the command's parent (CLONE_PARENT), which exits 42 at once; the command
    // ends once it has (its end of a pipe closes), so the parent has it to reap by then.
    if (op == "clone-parent") {
        int ended[2];
        if (!make_pipe(ended)) return refused("pipe");
        const long child = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
        if (child == 0) _exit(42);
        close(ended[1]);
        if (child < 0) return refused("clone(CLONE_PARENT)");
        char byte = 0;
        while (read(ended[0], &byte, 1) > 0) {
        }
        return 0;
    }
    // The command's own cgroup's a[1] (controller a[0]) set to a[2], through a cgroupfs it mounts
    // itself: in user, mount and cgroup namespaces of its own, where it holds CAP_SYS_ADMIN and
    // its cgroup is the root (v1's hierarchy of a[0], else v2's). One line: what it wrote.
    if (op == "write-own-cgroup" && need(3)) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP) != 0) return refused("unshare(CLONE_NEWCGROUP)");
        if (mount("none", "/tmp", "cgroup", 0, a[0].c_str()) != 0 && mount("none", "/tmp", "cgroup2", 0, nullptr) != 0)
            return refused("mount cgroupfs");
        std::ofstream file("/tmp/" + a[1]);
        if (!(file << a[2] << std::flush)) return refused("write " + a[1]);
        std::printf("wrote %s=%s\n", a[1].c_str(), a[2].c_str());
        return 0;
    }
    // A child started in the cgroup a[0] names (clone3 with CLONE_INTO_CGROUP), which writes
    // its own 0:: line of /proc/self/cgroup to stdout and exits; the command waits for it.
    if (op == "clone-into-cgroup" && need(1)) {
        const int group = open(a[0].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (group < 0) return refused("open " + a[0]);
        struct {  // struct clone_args, as of Linux 5.7 (CLONE_INTO_CGROUP and its cgroup field)
            std::uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
                set_tid_size, cgroup;
        } args{};
        args.flags = 0x200000000ULL;  // CLONE_INTO_CGROUP
        args.exit_signal = SIGCHLD;
        args.cgroup = static_cast<std::uint64_t>(group);
        std::fflush(stdout);
        const long child = syscall(SYS_clone3, &args, sizeof args);
        if (child == 0) {
            std::ifstream own("/proc/self/cgroup");
            for (std::string line; std::getline(own, line);)
                if (line.rfind("0::", 0) == 0) std::printf("child in %s\n", line.substr(3).c_str());
            std::fflush(stdout);
            _exit(0);
        }
        close(group);
        if (child < 0) return refused("clone3(CLONE_INTO_CGROUP)");
        waitpid(static_cast<pid_t>(child), nullptr, 0);
        return 0;
    }
    if (op == "netlink-send" && need(1)) {
        const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_USERSOCK);
        if (fd < 0) return refused("socket(AF_NETLINK, NETLINK_USERSOCK)");
        sockaddr_nl address{};
        address.nl_family = AF_NETLINK;
        address.nl_pid = static_cast<std::uint32_t>(std::strtoul(a[0].c_str(), nullptr, 10));
        struct {
            nlmsghdr header;
            char payload[8];
        } message{};
        message.header.nlmsg_len = sizeof message;
        message.header.nlmsg_type = NLMSG_MIN_TYPE;
        std::memcpy(message.payload, "dsh-nl", 6);
        const ssize_t n = sendto(fd, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&address), sizeof address);
        const int error = errno;
        close(fd);
        errno = error;
        return n == static_cast<ssize_t>(sizeof message) ? 0 : refused("sendto netlink port " + a[0]);
    }
#endif
    if (op == "tiocsti") {
        char byte = 'X';
        return ioctl(0, TIOCSTI, &byte) == 0 ? 0 : refused("ioctl TIOCSTI");
    }
    if (op == "tempfile") {
        const char* dir = std::getenv("TMPDIR");
        std::string pattern = std::string(dir && *dir ? dir : "/tmp") + "/dsh-confine-verify-XXXXXX";
        const int fd = mkstemp(pattern.data());
        if (fd < 0) return refused("mkstemp " + pattern);
        const ssize_t n = write(fd, "x", 1);
        close(fd);
        unlink(pattern.c_str());
        return n == 1 ? 0 : refused("write " + pattern);
    }
    return bad_request(op);
}

std::string snapshot_tree(const std::string& path) {
    std::ostringstream out;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return path + " missing\n";
    out << path << " mode=" << std::oct << st.st_mode << std::dec << " uid=" << st.st_uid << " gid=" << st.st_gid
        << " size=" << st.st_size << " mtime=" << modified_at(st).tv_sec << "." << modified_at(st).tv_nsec
        << " nlink=" << st.st_nlink;
    char names[4096];
    const ssize_t listed = list_xattrs_nofollow(path.c_str(), names, sizeof names);
    if (listed > 0) out << " xattrs=" << std::string(names, static_cast<std::size_t>(listed)).size();
    if (S_ISREG(st.st_mode)) {
        std::ifstream in(path, std::ios::binary);
        std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        out << " content=" << std::hash<std::string>{}(content);
    }
    out << "\n";
    if (S_ISDIR(st.st_mode)) {
        // The directory's own mtime is not compared: reading it does not change it, and a
        // changed entry shows below anyway.
        std::vector<std::string> entries;
        if (DIR* dir = opendir(path.c_str())) {
            while (dirent* entry = readdir(dir))
                if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0)
                    entries.push_back(entry->d_name);
            closedir(dir);
        }
        std::sort(entries.begin(), entries.end());
        for (const auto& entry : entries) out << snapshot_tree(path + "/" + entry);
    }
    return out.str();
}

Pty open_pty() {
    Pty pty;
#if defined(__linux__)
    pty.master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
#else
    pty.master = posix_openpt(O_RDWR | O_NOCTTY);  // POSIX names only these two flags
    if (pty.master >= 0) fcntl(pty.master, F_SETFD, FD_CLOEXEC);
#endif
    if (pty.master < 0 || grantpt(pty.master) != 0 || unlockpt(pty.master) != 0) return Pty{};
    const char* name = ptsname(pty.master);
    if (!name) return Pty{};
    pty.slave = name;
    return pty;
}

int pending_input(const Pty& pty) {
    const int fd = open(pty.slave.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    int waiting = 0;
    if (ioctl(fd, FIONREAD, &waiting) != 0) waiting = -1;
    close(fd);
    return waiting;
}

SignalSentinel start_signal_sentinel() {
    SignalSentinel sentinel;
    int ready[2], answer[2];
    if (!make_pipe(ready)) return sentinel;
    if (!make_pipe(answer)) {
        close(ready[0]);
        close(ready[1]);
        return sentinel;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        const char said = (wait_as_sentinel(ready[1], "r", 1) & 1U) != 0 ? '1' : '0';  // SIGUSR1
        _exit(write(answer[1], &said, 1) == 1 ? 0 : 1);
    }
    close(ready[1]);
    close(answer[1]);
    char byte = 0;
    if (pid > 0 && read(ready[0], &byte, 1) == 1) {
        // Its group exists once it said it is ready; set here too, so a runner can join it.
        setpgid(pid, pid);
        sentinel.pid = pid;
        sentinel.answer = answer[0];
    } else {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        close(answer[0]);
    }
    close(ready[0]);
    return sentinel;
}

bool sentinel_signalled(SignalSentinel& sentinel) {
    if (sentinel.pid < 0) return false;
    kill(sentinel.pid, SIGUSR2);
    char said = '0';
    if (read(sentinel.answer, &said, 1) != 1) said = '0';
    close(sentinel.answer);
    waitpid(sentinel.pid, nullptr, 0);
    sentinel = SignalSentinel{};
    return said == '1';
}

namespace {

EffectRun run_effect_as(const std::vector<std::string>& argv, const Pty* pty, pid_t group, int timeout_ms) {
    EffectRun run;
    int pipe_fds[2];
    if (!make_pipe(pipe_fds)) return run;
    const pid_t pid = fork();
    if (pid < 0) return run;
    if (pid == 0) {
        setpgid(0, group);
        if (pty) {
            setsid();
            const int slave = open(pty->slave.c_str(), O_RDWR);  // a session leader's first tty: its controlling terminal
            if (slave < 0) _exit(120);
            ioctl(slave, TIOCSCTTY, 0);
            dup2(slave, 0);
        } else {
            const int null = open("/dev/null", O_RDONLY);
            dup2(null, 0);
        }
        dup2(pipe_fds[1], 1);
        dup2(pipe_fds[1], 2);
        std::vector<char*> args;
        args.reserve(argv.size() + 1);
        for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    close(pipe_fds[1]);
    run.started = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            run.timedOut = true;
            break;
        }
        pollfd fd{pipe_fds[0], POLLIN, 0};
        if (poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
        char buffer[4096];
        const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
        if (n <= 0) break;
        if (run.output.size() < 16384) run.output.append(buffer, static_cast<std::size_t>(n));
    }
    close(pipe_fds[0]);
    if (run.timedOut) kill(-(group > 0 ? group : pid), SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) run.exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) run.exitCode = 128 + WTERMSIG(status);
    return run;
}

}  // namespace

EffectRun run_effect(const std::vector<std::string>& argv, const Pty* pty, int timeout_ms) {
    return run_effect_as(argv, pty, 0, timeout_ms);
}

EffectRun run_effect_in_group(const std::vector<std::string>& argv, int group, int timeout_ms) {
    return run_effect_as(argv, nullptr, group, timeout_ms);
}

}  // namespace dsh::posix
