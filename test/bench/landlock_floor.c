/* The floor for the Landlock exec path: the least a runner can do to apply dsh-confine's
 * ruleset and exec a command. Handled rights: every filesystem right of the kernel's ABI, and
 * signals scoped where the ABI has scopes (6 on); rules: "/" read and execute, the POSIX
 * shell's device sinks read, write, truncate and ioctl, /dev/ptmx and /dev/pts as dsh-confine
 * grants them (a path this host lacks is skipped, as dsh-confine does), and with -w every right
 * handled on each DIR (workspace-write: the workspace, the temp area, /dev/shm); then
 * no_new_privs, landlock_restrict_self and execv. Nothing else: no PATH lookup (PROGRAM is a
 * path), no option parsing beyond -w, no capability drop, no seccomp, no temp area made (DIR
 * must exist). Works as root and unprivileged.
 *
 *   landlock_floor [-s | -p] [-t BASE] [-w DIR]... PROGRAM [ARG...]
 *
 * With -t, a private temp area per call, as dsh-confine's workspace-write makes one: every
 * `call-*` directory left in BASE by an earlier call is removed (rmdir: an empty one), then a
 * new BASE/call-XXXXXX is made (mkdtemp, mode 0700), granted every handled right and named in
 * TMPDIR. The least a per-call private area costs on BASE's file system.
 *
 * With -s, the processes `run` has in front of the command, at their least, started as `run`
 * starts them: once the ruleset is built, a keeper that shares this memory (a clone with
 * CLONE_VM), and the process that applies the ruleset and execs, a clone sharing the keeper's
 * memory until the execve (vfork). Each parent waits for its child and exits with its status. No pipes, no poll, no signals, no classification: the
 * least a supervisor of dsh-confine's shape (one that outlives the caller's process to end the
 * command's tree) adds to the exec path. With -s and -t, the first process makes the temp area
 * before it starts the keeper and removes it (rmdir) once the command has ended, as `run` removes its
 * call's area before it answers.
 *
 * With -p, the least a server beside the command costs, the floor of the hosts network's proxy on
 * the exec path: before the ruleset is built, a loopback TCP listener (port 0) and a pidfd of this
 * process, then a clone that shares this memory and waits, doing nothing, until this process has
 * executed the command; it then keeps the old image alone (no page table copied, nothing started
 * again), in a session of its own, and holds the listener until the command has ended. No exit
 * signal: the command never hears of it. The server accepts nothing: its start is the whole cost.
 *
 * Built with LANDLOCK_FLOOR_NO_MAIN, it is the Landlock half of stack_floor.cpp. Built with
 * LANDLOCK_FLOOR_HARDENED (landlock_floor_hardened), it also does the two things dsh-confine's
 * exec path adds to the ruleset: every capability dropped (bounding set, ambient, securebits,
 * capset; only when it holds any) and the terminal guard (a seccomp filter refusing TIOCSTI and
 * TIOCLINUX). That row shows what the security work costs, apart from the C++ stack. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef LANDLOCK_FLOOR_HARDENED
#include <stddef.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sys/ioctl.h>
#endif

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

enum {
    EXECUTE = 1 << 0, WRITE_FILE = 1 << 1, READ_FILE = 1 << 2, READ_DIR = 1 << 3,
    MAKE_SYM = 1 << 12, REFER = 1 << 13, TRUNCATE = 1 << 14, IOCTL_DEV = 1 << 15,
};
#define SCOPE_SIGNAL (1ULL << 1) /* LANDLOCK_SCOPE_SIGNAL */

struct path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

static int fail(const char* what) {
    fprintf(stderr, "landlock_floor: %s: %s\n", what, strerror(errno));
    return 125;
}

static int add_rule(int ruleset, const char* path, uint64_t access) {
    const int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ELOOP ? 0 : -1;
    struct path_beneath rule = {access, fd};
    const long rc = syscall(SYS_landlock_add_rule, ruleset, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &rule, 0);
    close(fd);
    return rc == 0 ? 0 : -1;
}

#ifdef LANDLOCK_FLOOR_HARDENED
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#if defined(__x86_64__)
#define FLOOR_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FLOOR_ARCH AUDIT_ARCH_AARCH64
#endif

static int drop_capabilities(void) {
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {{0}};
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (data[0].permitted | data[1].permitted | data[0].effective | data[1].effective) {
        if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                         SECBIT_NO_SETUID_FIXUP_LOCKED, 0, 0, 0) != 0)
            return -1;
        /* Up to the first number the kernel refuses as invalid (CAP_LAST_CAP + 1). */
        for (int cap = 0;; ++cap)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
                if (errno == EINVAL && cap > 0) break;
                return -1;
            }
    }
    struct __user_cap_data_struct none[2] = {{0}};
    return (int)syscall(SYS_capset, &header, none);
}

static int install_terminal_guard(void) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FLOOR_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, 0, 1), /* the x32 ABI */
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
}
#endif

// A failure in the runner's process: a vfork clone must not return into the keeper's frames.
static int runner_failed(int clone, const char* what) {
    const int status = fail(what);
    if (clone) _exit(status);
    return status;
}

static int apply_and_exec(int ruleset, char** argv, int clone);

// The runner's process as `run` starts it: a clone sharing this process's memory until its
// execve (vfork), which applies the ruleset and execs; this process waits for it and exits with
// its status.
static void start_runner(int ruleset, char** argv) {
    const pid_t runner = vfork();
    if (runner < 0) exit(fail("vfork"));
    if (runner == 0) apply_and_exec(ruleset, argv, 1);
    int status = 0;
    while (waitpid(runner, &status, 0) < 0 && errno == EINTR) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

struct keeper_call {
    int ruleset;
    char** argv;
};

static int keeper_main(void* call) {
    const struct keeper_call* what = call;
    start_runner(what->ruleset, what->argv);
    return 125;
}

// Starts the keeper as `run` does, a clone sharing this memory on a stack of its own (CLONE_VM),
// which starts the runner's process and waits for it; waits for the keeper, removes the
// directory REMOVE when there is one, and exits with the keeper's status.
static void supervised(const char* remove, int ruleset, char** argv) {
    static char stack[256 * 1024] __attribute__((aligned(16)));
    struct keeper_call call = {ruleset, argv};
    const pid_t keeper = clone(keeper_main, stack + sizeof stack, CLONE_VM | SIGCHLD, &call);
    if (keeper < 0) exit(fail("clone"));
    int status = 0;
    while (waitpid(keeper, &status, 0) < 0 && errno == EINTR) {
    }
    if (remove != NULL) rmdir(remove);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// -p's server: a clone sharing this process's memory that waits until this process has executed
// the command (the kernel zeroes `gate`, named with set_tid_address, and wakes it), then keeps the
// old image alone, in a session of its own, holding the listener until the pidfd `owner` is
// readable (the command has ended).
static int gate, owner_fd;
static char server_stack[65536] __attribute__((aligned(16)));

static int server(void* unused) {
    (void)unused;
    while (__atomic_load_n(&gate, __ATOMIC_ACQUIRE) != 0) syscall(SYS_futex, &gate, FUTEX_WAIT, gate, NULL, NULL, 0);
    setsid();
    struct pollfd owner = {owner_fd, POLLIN, 0};
    while (poll(&owner, 1, -1) < 0 && errno == EINTR) {
    }
    _exit(0);
}

// -p: the listener and the owner's pidfd (the server's copies stay open), the server started; 0
// when it was.
static int start_server(void) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (listener < 0 || bind(listener, (struct sockaddr*)&address, sizeof address) != 0 || listen(listener, 128) != 0)
        return fail("listener");
    owner_fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (owner_fd < 0) return fail("pidfd_open");
    gate = (int)syscall(SYS_gettid);
    syscall(SYS_set_tid_address, &gate);
    if (clone(server, server_stack + sizeof server_stack, CLONE_VM, NULL) < 0) return fail("clone");
    close(owner_fd);
    close(listener);
    return 0;
}

int landlock_floor_exec(int argc, char** argv) {
    const char* writable[8];
    int writable_count = 0;
    const int supervise = argc > 1 && strcmp(argv[1], "-s") == 0;
    if (supervise) {
        --argc;
        ++argv;
    }
    const int server = !supervise && argc > 1 && strcmp(argv[1], "-p") == 0;
    if (server) {
        --argc;
        ++argv;
        if (start_server() != 0) return 125;
    }
    char temp[4096];
    const int make_temp = argc > 2 && strcmp(argv[1], "-t") == 0;
    if (make_temp) {
        DIR* base = opendir(argv[2]);
        if (base == NULL) return fail(argv[2]);
        for (struct dirent* entry; (entry = readdir(base)) != NULL;)
            if (strncmp(entry->d_name, "call-", 5) == 0) unlinkat(dirfd(base), entry->d_name, AT_REMOVEDIR);
        closedir(base);
        if (snprintf(temp, sizeof temp, "%s/call-XXXXXX", argv[2]) >= (int)sizeof temp || mkdtemp(temp) == NULL)
            return fail("mkdtemp");
        setenv("TMPDIR", temp, 1);
        writable[writable_count++] = temp;
        argc -= 2;
        argv += 2;
    }
    while (argc > 2 && strcmp(argv[1], "-w") == 0 && writable_count < 8) {
        writable[writable_count++] = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: landlock_floor [-s | -p] [-t BASE] [-w DIR]... PROGRAM [ARG...]\n");
        return 125;
    }
    const long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */);
    if (abi < 1) return fail("Landlock ABI");
    uint64_t handled = (MAKE_SYM << 1) - 1;
    if (abi >= 2) handled |= REFER;
    if (abi >= 3) handled |= TRUNCATE;
    if (abi >= 5) handled |= IOCTL_DEV;
    /* struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped (ABI 6) */
    const uint64_t attr[3] = {handled, 0, abi >= 6 ? SCOPE_SIGNAL : 0};
    const int ruleset = (int)syscall(SYS_landlock_create_ruleset, attr, abi >= 6 ? sizeof attr : sizeof attr[0], 0);
    if (ruleset < 0) return fail("landlock_create_ruleset");
    if (add_rule(ruleset, "/", (READ_FILE | READ_DIR | EXECUTE) & handled) != 0) return fail("rule /");
    static const char* const sinks[] = {"/dev/full", "/dev/null", "/dev/random", "/dev/tty", "/dev/urandom", "/dev/zero"};
    for (size_t i = 0; i < sizeof sinks / sizeof sinks[0]; ++i)
        if (add_rule(ruleset, sinks[i], (READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV) & handled) != 0) return fail(sinks[i]);
    if (add_rule(ruleset, "/dev/ptmx", (READ_FILE | WRITE_FILE | IOCTL_DEV) & handled) != 0) return fail("/dev/ptmx");
    if (add_rule(ruleset, "/dev/pts", (READ_FILE | WRITE_FILE | IOCTL_DEV | READ_DIR) & handled) != 0) return fail("/dev/pts");
    for (int i = 0; i < writable_count; ++i)
        if (add_rule(ruleset, writable[i], handled) != 0) return fail(writable[i]);
    // With -s, as `run`: the ruleset built here, a keeper sharing this memory, and the runner's
    // process, a clone sharing the keeper's until the execve (vfork), which applies it and execs;
    // each parent waits for its child. This process removes the temp area at the end.
    if (supervise) supervised(make_temp ? temp : NULL, ruleset, argv);
    return apply_and_exec(ruleset, argv, 0);
}

// no_new_privs (and with LANDLOCK_FLOOR_HARDENED the guard and the capabilities), the ruleset,
// execv. In a vfork clone (`clone`) it never returns.
static int apply_and_exec(int ruleset, char** argv, int clone) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return runner_failed(clone, "no_new_privs");
#ifdef LANDLOCK_FLOOR_HARDENED
    if (install_terminal_guard() != 0) return runner_failed(clone, "seccomp terminal guard");
    if (drop_capabilities() != 0) return runner_failed(clone, "dropping capabilities");
#endif
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return runner_failed(clone, "landlock_restrict_self");
    close(ruleset);
    execv(argv[1], argv + 1);
    return runner_failed(clone, argv[1]);
}

#ifndef LANDLOCK_FLOOR_NO_MAIN
int main(int argc, char** argv) { return landlock_floor_exec(argc, argv); }
#endif
