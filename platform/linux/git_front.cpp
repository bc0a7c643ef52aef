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
#include <sys/wait.h>
#include <unistd.h>

#include "../posix/supervise.hpp"
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
// as bubblewrap does) and those of a fault of its own.
constexpr int kUnwatched[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS, SIGABRT};

}  // namespace

Backstop::Backstop(const std::vector<std::string>& gitdirs) {
    for (const auto& gitdir : gitdirs) {
        std::string why;
        if (auto recorded = git_check::record(gitdir, why)) checks_.push_back(std::move(*recorded));
    }
}

void Backstop::finish(const std::vector<long>& spared) const {
    // A round waits for each sandbox's pid 1 there is now; pid 1 ends only once every process of
    // its namespace has (the kernel kills them when it dies), so after the last round no process
    // of the sandbox is left to write the repository.
    for (int round = 0; round < 64; ++round) {
        long children[512];
        const int count = posix::children_of(getpid(), children, 512);
        bool waited = false;
        for (int i = 0; i < count; ++i) {
            if (std::find(spared.begin(), spared.end(), children[i]) != spared.end() || !below_this_namespace(children[i]))
                continue;
            while (waitpid(static_cast<pid_t>(children[i]), nullptr, 0) < 0 && errno == EINTR) {
            }
            waited = true;
        }
        if (!waited) break;
    }
    git_check::restore_and_say(checks_);
}

void hold(const Backstop& backstop, const std::function<int()>& exec_runner) {
    sigset_t watched, before;
    sigfillset(&watched);
    for (int sig : kUnwatched) sigdelset(&watched, sig);
    sigprocmask(SIG_BLOCK, &watched, &before);
    // This process waits for bubblewrap, which a caller's ignored SIGCHLD would have reaped
    // unseen; bubblewrap's process gets the caller's disposition back (exec_runner sets its own).
    struct sigaction child_default {}, caller_child {};
    child_default.sa_handler = SIG_DFL;
    sigemptyset(&child_default.sa_mask);
    sigaction(SIGCHLD, &child_default, &caller_child);
    // A caller may have exec'd dsh-confine after starting processes of its own: not the call's.
    long listed[512];
    const std::vector<long> spared(listed, listed + posix::children_of(getpid(), listed, 512));
    // The sandbox's pid 1 comes here when bubblewrap ends first.
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    const pid_t front = getpid();
    std::fflush(nullptr);
    const pid_t runner = fork();
    if (runner == 0) {
        // bubblewrap dies with the front (a front killed by SIGKILL cannot pass that on), and
        // bubblewrap's own --die-with-parent then ends the sandbox.
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (getppid() != front) _exit(125);
        sigaction(SIGCHLD, &caller_child, nullptr);
        sigprocmask(SIG_SETMASK, &before, nullptr);
        const int status = exec_runner();
        std::fflush(nullptr);
        _exit(status);
    }
    if (runner < 0) {
        std::fprintf(stderr, "dsh-confine: error: RUNNER_EXEC: cannot start bubblewrap behind dsh-confine: %s\n",
                     std::strerror(errno));
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
        const int sig = sigwaitinfo(&watched, &info);
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
        kill(passed ? posix::signal_target(runner, true) : runner, sig);
    }
    backstop.finish(spared);
    linux_runner::end_as(status);
}

}  // namespace dsh::git_front
