#include "landlock.hpp"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../posix/process.hpp"
#include "../posix/state_store.hpp"
#include "../../lib/policy.hpp"
#include "host.hpp"
#include "landlock_abi.hpp"
#include "tty_guard.hpp"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT (1 << 0)
#define SECBIT_NOROOT_LOCKED (1 << 1)
#define SECBIT_NO_SETUID_FIXUP (1 << 2)
#define SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#endif

namespace dsh::landlock {
namespace {

int fail(const std::string& message) {
    std::fprintf(stderr, "dsh-confine: error: LANDLOCK: %s\n", message.c_str());
    return 125;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Whether `uid` (as this process sees it) is mapped in its user namespace. An unmapped caller
// (`unshare -U` without a map) sees itself, and every other unmapped owner, as the overflow uid:
// an ownership check then proves nothing, and a base it made would squat the real user's name.
bool uid_is_mapped(uid_t uid) {
    std::ifstream map("/proc/self/uid_map");
    if (!map) return true;  // no /proc: no user namespaces to be unmapped in
    unsigned long inside = 0, outside = 0, count = 0;
    while (map >> inside >> outside >> count)
        if (uid >= inside && uid - inside < count) return true;
    return false;
}

// The per-user base for private temp areas: made 0700, and refused unless it is a real
// directory of ours that nobody else can write (the /tmp squatting problem).
bool prepare_private_base(const std::string& base, std::string& why) {
    if (const uid_t uid = geteuid(); !uid_is_mapped(uid)) {
        why = "uid " + std::to_string(uid) + " is not mapped in this user namespace, so " + base +
              " cannot be proven private (give the call a session, whose temp area is its own, or use read-only)";
        return false;
    }
    if (mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) {
        why = errno_text(("mkdir " + base).c_str());
        return false;
    }
    struct stat st {};
    if (lstat(base.c_str(), &st) != 0) {
        why = errno_text(("lstat " + base).c_str());
        return false;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        why = base + " is not a private directory of this user (refusing it as a temp base)";
        return false;
    }
    return true;
}

// Field 22 of /proc/PID/stat, or "" when the process is gone.
std::string process_start_time(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(in, line)) return "";
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i) {
    }
    return field;
}

// Removes `dir` once `watched` has exited. Forked twice before confinement, so it is neither
// confined nor a child of the command; it leaves the session and the caller's stdio at once.
void start_reaper(const std::string& dir, pid_t watched) {
    const std::string started = process_start_time(watched);
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return;
    const pid_t first = fork();
    if (first < 0) {
        close(ready[0]);
        close(ready[1]);
        return;
    }
    if (first == 0) {
        if (fork() != 0) _exit(0);
        setsid();
        for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_IGN);
        const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, watched, 0));
        char byte = 1;
        (void)!write(ready[1], &byte, 1);
        const int null = open("/dev/null", O_RDWR);
        for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
        const long max_fd = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max_fd > 0 ? max_fd : 1024); ++fd)
            if (fd != pidfd) close(static_cast<int>(fd));
        if (pidfd >= 0) {
            pollfd waiter{pidfd, POLLIN, 0};
            while (poll(&waiter, 1, -1) < 0 && errno == EINTR) {
            }
        } else {
            // No pidfd (kernels before 5.3): watch the process's start time, which a reused
            // pid would not share.
            while (!started.empty() && process_start_time(watched) == started) usleep(200000);
        }
        const std::size_t slash = dir.rfind('/');
        const int parent = open(dir.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (parent >= 0) posix::remove_tree_at(parent, dir.substr(slash + 1));
        _exit(0);
    }
    close(ready[1]);
    waitpid(first, nullptr, 0);
    char byte = 0;
    while (read(ready[0], &byte, 1) < 0 && errno == EINTR) {
    }
    close(ready[0]);
}

int last_capability() {
    std::ifstream in("/proc/sys/kernel/cap_last_cap");
    int last = 40;
    if (in >> last) return last;
    return 40;
}

// Every capability goes: bounding, ambient, effective, permitted, inheritable; and root's
// exec-time capability grant is locked off.
bool drop_capabilities(std::string& why) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &header, data) != 0) {
        why = errno_text("capget");
        return false;
    }
    const bool any = data[0].permitted || data[1].permitted || data[0].effective || data[1].effective;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (any) {
        if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                                         SECBIT_NO_SETUID_FIXUP_LOCKED, 0, 0, 0) != 0) {
            why = errno_text("securebits");
            return false;
        }
        const int last = last_capability();  // read once: each call opens a /proc file
        for (int cap = 0; cap <= last; ++cap)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
                why = errno_text("dropping the capability bounding set");
                return false;
            }
    }
    __user_cap_data_struct none[2] = {};
    if (syscall(SYS_capset, &header, none) != 0) {
        why = errno_text("capset");
        return false;
    }
    return true;
}

}  // namespace

std::optional<std::string> make_call_temp_dir(const std::string& base, std::string& why) {
    if (!prepare_private_base(base, why)) return std::nullopt;
    std::string pattern = base + "/call-XXXXXX";
    if (!mkdtemp(pattern.data())) {
        why = errno_text("mkdtemp");
        return std::nullopt;
    }
    return pattern;
}

int exec_confined(const RunnerArgs& args, const std::vector<std::string>& argv) {
    if (argv.empty()) return fail("no command to run");
    std::string why;
    const int kernel_abi = linux_host::landlock_abi(&why);
    if (kernel_abi < 1) return fail("Landlock is unavailable: " + why);
    const int abi = effective_abi(kernel_abi, args.maxAbi);

    std::optional<std::string> temp_dir = args.tempDir;
    if (args.privateTempBase) {
        temp_dir = make_call_temp_dir(*args.privateTempBase, why);
        if (!temp_dir) return fail(why);
        start_reaper(*temp_dir, getpid());
    }
    if (temp_dir) {
        struct stat st {};
        if (stat(temp_dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
            return fail("the temp area " + *temp_dir + " is not a directory");
        setenv("TMPDIR", temp_dir->c_str(), 1);
    }

    SandboxPolicy policy{args.mode, args.workspaceRoot, std::nullopt, std::nullopt};
    landlock_uapi::RulesetAttr attr{handled_access(abi)};
    const int ruleset = static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0));
    if (ruleset < 0) return fail(errno_text("landlock_create_ruleset"));
    for (const Grant& grant : grants(policy, temp_dir, posix_shell_sinks(), abi)) {
        const int fd = open(grant.path.c_str(), O_PATH | O_CLOEXEC);
        if (fd < 0) {
            if (errno == ENOENT && grant.path.rfind("/dev/", 0) == 0) continue;  // a sink this host lacks
            return fail(errno_text(("open " + grant.path).c_str()));
        }
        struct stat st {};
        fstat(fd, &st);
        std::uint64_t allowed = grant.access;
        if (!S_ISDIR(st.st_mode)) allowed &= access::FileRights;
        landlock_uapi::PathBeneathAttr rule{allowed, fd};
        const long added = syscall(SYS_landlock_add_rule, ruleset, landlock_uapi::kRulePathBeneath, &rule, 0);
        const int error = errno;
        close(fd);
        if (added != 0) {
            errno = error;
            return fail(errno_text(("landlock_add_rule " + grant.path).c_str()));
        }
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail(errno_text("no_new_privs"));
    if (!linux_guard::install_tty_guard(why)) return fail(why);
    if (!drop_capabilities(why)) return fail(why);
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) return fail(errno_text("landlock_restrict_self"));
    close(ruleset);

    const posix::ProgramLookup program = posix::resolve_program(argv.front());
    if (program.status == posix::Lookup::NotFound) {
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_FOUND: %s: not found\n", argv.front().c_str());
        return 127;
    }
    if (args.statusFd >= 0) {
        fcntl(args.statusFd, F_SETFD, FD_CLOEXEC);  // closed by a successful execve
        (void)!write(args.statusFd, "S", 1);
    }
    posix::exec_argv(program.path, argv);
    const int error = errno;
    if (args.statusFd >= 0) (void)!write(args.statusFd, "F", 1);
    std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: %s\n", argv.front().c_str(),
                 std::strerror(error));
    return error == ENOENT ? 127 : 126;
}

LandlockBackend::LandlockBackend(std::string runner, BackendConfig config, std::vector<std::string> protected_paths)
    : runner_(std::move(runner)), config_(std::move(config)), protected_(std::move(protected_paths)) {}

Expected<Usable> LandlockBackend::check() const {
    std::string why;
    if (linux_host::landlock_abi(&why) < 1) return Expected<Usable>::failure(why);
    if (runner_.empty() || ::access(runner_.c_str(), X_OK) != 0)
        return Expected<Usable>::failure("the runner '" + runner_ + "' (this binary) cannot be executed");
    return Usable{};
}

Expected<Usable> LandlockBackend::probe(int timeout_ms) const {
    const posix::ProgramLookup truth = posix::resolve_program("true");
    if (truth.status != posix::Lookup::Found) return Expected<Usable>::failure("no 'true' on PATH to probe with");
    RunnerArgs args;
    args.mode = ConfinedSandboxMode::ReadOnly;
    args.workspaceRoot = "/";
    const posix::SpawnOutcome outcome = posix::spawn_with_timeout(build_argv(runner_, args, {truth.path}), timeout_ms);
    if (!outcome.started) return Expected<Usable>::failure(outcome.error);
    if (outcome.timedOut) return Expected<Usable>::failure("the probe did not finish within " + std::to_string(timeout_ms) + " ms");
    if (outcome.exitCode == 0) return Usable{};
    std::string first = outcome.output.substr(0, outcome.output.find('\n'));
    return Expected<Usable>::failure("the probe exited with " + std::to_string(outcome.exitCode) +
                                     (first.empty() ? "" : ": " + first));
}

std::string LandlockBackend::probe_identity() const {
    return "runner=" + runner_ + "\nrunner-id=" + linux_host::file_identity(runner_) + "\n" + linux_host::host_identity();
}

Expected<ConfinedArgv> LandlockBackend::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    const int abi = effective_abi(linux_host::landlock_abi(), config_.maxAbi);
    if (abi < 1) return Expected<ConfinedArgv>::failure("Landlock is unavailable");
    const RunnerArgs args = runner_args(policy, static_cast<unsigned>(geteuid()), config_.maxAbi);
    ConfinedArgv out;
    out.argv = build_argv(runner_, args, argv);
    out.backend = name();
    out.enforcementGaps = enforcement_gaps(abi);
    // Landlock rules only add access: a path inside a granted root cannot be taken back.
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite)
        for (const auto& path : paths_within(protected_, policy.workspaceRoot))
            out.enforcementGaps.push_back("dsh-confine state: " + path +
                                          " lies inside the workspace and is writable by the command");
    out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    Dialect rules = dialect();
    out.denialSignatures = rules.denialSignatures;
    out.runnerFailureRules = rules.runnerFailureRules;
    out.writableRoots = writable_roots(args);
    return out;
}

Dialect LandlockBackend::dialect() const { return landlock::dialect(config_.informationalLines); }

BackendReport LandlockBackend::report() const {
    BackendReport out;
    out.name = name();
    std::string why;
    const int kernel_abi = linux_host::landlock_abi(&why);
    const int abi = effective_abi(kernel_abi, config_.maxAbi);
    out.facts.push_back({"landlockAbi", std::to_string(kernel_abi)});
    if (config_.maxAbi) out.facts.push_back({"landlockAbiUsed", std::to_string(abi)});
    out.facts.push_back({"runner", runner_});
    Expected<Usable> present = check();
    out.usable = present.has_value();
    if (!present) out.reason = present.reason();
    if (abi >= 1) {
        out.enforcementGaps = enforcement_gaps(abi);
        out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    }
    return out;
}

}  // namespace dsh::landlock
