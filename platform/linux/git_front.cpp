#include "git_front.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../posix/process.hpp"
#include "../posix/supervise.hpp"
#include "raw_syscall.hpp"
#include "runner.hpp"

namespace dsh::git_front {
namespace {

// Whether `pid` lives in a PID namespace below this process's (/proc/PID/status lists more than
// one number on its NSpid line): a sandbox's pid 1. Unreadable counts as yes: a child that is
// already gone is reaped at once.
bool below_this_namespace(long pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("NSpid:", 0) == 0) {
            std::istringstream numbers(line.substr(6));
            int count = 0;
            for (long number = 0; numbers >> number;) ++count;
            return count > 1;
        }
    return true;
}

// What `run` forwards, and the stage passes on to the command's process group.
constexpr int kPassedOn[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

// Not watched: the job-control signals (the front stops and continues with the terminal's job,
// as bubblewrap does). A fault of its own still ends it (the kernel delivers those blocked or
// not); one sent with kill(2) is passed on to bubblewrap as any other.
constexpr int kUnwatched[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};

// What the process that becomes bubblewrap is given (exec_bubblewrap).
struct Start {
    std::vector<char*> args;  // bubblewrap's argv, null-terminated
    pid_t front;
    int checkedWrite;
    sigset_t mask;  // the caller's, for bubblewrap
};

// Becomes bubblewrap: system calls only (it may share the front's memory, as posix_spawn's child
// does). It dies with the front (a front killed by SIGKILL cannot pass that on; bubblewrap's
// own --die-with-parent then ends the sandbox), hands the stage the pipe's write end, and gets
// the caller's signal mask back.
__attribute__((no_sanitize("address"))) int exec_bubblewrap(void* arg) {
    const auto* start = static_cast<const Start*>(arg);
    linux_sys::call_with(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (linux_sys::call(SYS_getppid) != start->front) linux_sys::call_with(SYS_exit_group, 125);
    if (start->checkedWrite >= 0) linux_sys::call_with(SYS_fcntl, start->checkedWrite, F_SETFD, 0);
    linux_sys::call_with(SYS_rt_sigprocmask, SIG_SETMASK, &start->mask, nullptr, sizeof(long));
    linux_sys::call_with(SYS_execve, start->args[0], start->args.data(), environ);
    static const char message[] = "dsh-confine: error: RUNNER_EXEC: cannot execute bubblewrap\n";
    linux_sys::call_with(SYS_write, 2, message, sizeof message - 1);
    linux_sys::call_with(SYS_exit_group, 125);
    return 125;
}

}  // namespace

Backstop::Backstop(const std::vector<std::string>& gitdirs) {
    for (const auto& gitdir : gitdirs) {
        std::string why;
        if (auto recorded = git_check::record(gitdir, why)) checks_.push_back(std::move(*recorded));
    }
}

void Backstop::finish(const std::vector<long>& spared) const {
    // Every process of a sandbox descends from its pid 1 (an orphan there is reparented to it, or
    // to the stage below it), and only pid 1, bubblewrap's own code, could start one once the
    // rest are gone. So a pid 1 without children leaves none to write the repository (the usual
    // end: the stage ended them all and checked, and pid 1, which reported its status, is
    // exiting; waiting for that would wait for its mount namespace's teardown too, an RCU grace
    // period). One with children is waited for: it ends only once every process of its
    // namespace has (the kernel kills them when it dies).
    for (int round = 0; round < 64; ++round) {
        long children[512];
        const int count = posix::children_of(getpid(), children, 512);
        bool waited = false;
        for (int i = 0; i < count; ++i) {
            long below = 0;
            if (std::find(spared.begin(), spared.end(), children[i]) != spared.end() || !below_this_namespace(children[i]) ||
                posix::children_of(children[i], &below, 1) == 0)
                continue;
            while (waitpid(static_cast<pid_t>(children[i]), nullptr, 0) < 0 && errno == EINTR) {
            }
            waited = true;
        }
        if (!waited) break;
    }
    git_check::restore_and_say(checks_);
}

void hold(const Backstop& backstop, std::vector<std::string> argv, const Launcher& launcher) {
    // The stage says on this pipe when it has checked: then nothing is left to check here. Its
    // write end reaches the stage only (close-on-exec there, before the command's execve).
    int checked[2] = {-1, -1};
    if (pipe2(checked, O_CLOEXEC | O_NONBLOCK) == 0) {
        checked[0] = git_check::above_stdio(checked[0]);  // dup2 puts /dev/null on 0 and 1 below
        checked[1] = git_check::above_stdio(checked[1]);
    }
    if (checked[0] >= 0 && checked[1] >= 0)
        if (const auto stage = std::find(argv.begin(), argv.end(), "bwrap-stage"); stage != argv.end())
            argv.insert(stage + 1, {"--checked-fd", std::to_string(checked[1])});
    sigset_t watched;
    sigfillset(&watched);
    for (int sig : kUnwatched) sigdelset(&watched, sig);
    // 32 and 33 too, which the C library's sigset functions leave out: by the kernel's word.
    watched.__val[0] |= (1UL << (32 - 1)) | (1UL << (33 - 1));
    // This process waits for bubblewrap, which a caller's ignored SIGCHLD would have reaped
    // unseen; bubblewrap waits for its children too (SIGCHLD the default for it as well).
    struct sigaction child_default {};
    child_default.sa_handler = SIG_DFL;
    sigemptyset(&child_default.sa_mask);
    sigaction(SIGCHLD, &child_default, nullptr);
    // A caller may have exec'd dsh-confine after starting processes of its own: not the call's.
    long listed[512];
    const std::vector<long> spared(listed, listed + posix::children_of(getpid(), listed, 512));
    // The sandbox's pid 1 comes here when bubblewrap ends first.
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    Start start{posix::c_argv(argv), getpid(), checked[1], {}};
    std::fflush(nullptr);
    sigemptyset(&start.mask);
    linux_sys::call_with(SYS_rt_sigprocmask, SIG_BLOCK, &watched, &start.mask, sizeof watched.__val[0]);
    // Without a launcher, bubblewrap is started as `run` starts its runner: a clone that shares
    // this memory until its execve (no page table copied; system calls only in it), or under
    // AddressSanitizer a forked copy. The hosts network's launcher starts the proxy first, C++
    // that allocates: a forked copy.
    pid_t runner = -1;
    if (!launcher) {
        runner = linux_runner::start_sharing_memory(exec_bubblewrap, &start);
    } else {
        runner = fork();
        if (runner == 0) {
            linux_sys::call_with(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
            if (getppid() != start.front) _exit(125);
            if (checked[1] >= 0) fcntl(checked[1], F_SETFD, 0);
            sigprocmask(SIG_SETMASK, &start.mask, nullptr);
            const int status = launcher(argv);
            std::fflush(nullptr);
            _exit(status);
        }
    }
    const int started = errno;
    if (checked[1] >= 0) close(checked[1]);
    if (runner < 0) {
        std::fprintf(stderr, "dsh-confine: error: RUNNER_EXEC: cannot start bubblewrap behind dsh-confine: %s\n",
                     std::strerror(started));
        std::exit(125);
    }
    // Holding nothing of the call's but stderr (for the repairs' lines): a reader of the caller's
    // stdout sees its end when the command's side closes.
    if (const int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        close(null);
    }
    int status = 0;
    for (;;) {
        siginfo_t info{};
        const long sig = linux_sys::call_with(SYS_rt_sigtimedwait, &watched, &info, nullptr, sizeof watched.__val[0]);
        if (sig < 0) continue;
        if (sig == SIGCHLD) {
            if (waitpid(runner, &status, WNOHANG) == runner) break;
            continue;
        }
        // The kernel's signals (a terminal's, an orphaned group's) went to the whole process
        // group, bubblewrap's and the command's included: not passed on a second time.
        if (info.si_code != SI_USER && info.si_code != SI_QUEUE && info.si_code != SI_TKILL) continue;
        // Those `run` forwards go to the stage, which passes them on to the command; any other
        // goes to bubblewrap, as it did when bubblewrap had this pid (it ends the sandbox).
        const bool passed = std::find(std::begin(kPassedOn), std::end(kPassedOn), sig) != std::end(kPassedOn);
        kill(passed ? posix::signal_target(runner, true) : runner, static_cast<int>(sig));
    }
    char word = 0;
    const bool stage_checked = checked[0] >= 0 && read(checked[0], &word, 1) == 1 && word == 'C';
    if (!stage_checked) backstop.finish(spared);
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    posix::die_of(WTERMSIG(status));
}

}  // namespace dsh::git_front
