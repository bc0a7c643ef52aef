// Spawning a confined command and watching it: stdin and stdout inherited untouched, stderr
// passed through as it comes while a callback sees every byte, signals forwarded, and the
// runner's proof of start collected where the backend offers one.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#if !defined(_WIN32)
#include <sys/types.h>
#endif

#include "../../lib/run_limits.hpp"

namespace dsh::posix {

enum class StartProof {
    None,        // the runner cannot say; attribution relies on stderr alone
    ExecMarker,  // the runner's --status-fd (landlock-exec, bubblewrap's stage): 'S' just
                 // before execve, 'F' if execve failed
};

// Why the command's tree ended.
enum class TreeEnd {
    ByItself,  // the command ended (or dsh-confine was left without a watch)
    Timeout,   // SuperviseOptions::timeout passed: dsh-confine ended it
    Watch,     // SuperviseOptions::watch asked: dsh-confine ended it
};

// An rlimit the runner's process sets on itself (setrlimit's resource, soft and hard values)
// before it becomes the runner: inherited by everything the command starts.
struct ResourceLimit {
    int resource;
    unsigned long long soft, hard;
};

// The rlimits of the limits decided to be rlimits (RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE): soft and
// hard alike, but for CPU time, whose soft limit (whole seconds, rounded up) brings SIGXCPU and a
// hard one a second later SIGKILL.
std::vector<ResourceLimit> rlimits_for(const std::vector<LimitEnforcement>& enforcement);

struct SupervisedRun {
    bool spawned = false;
    std::string spawnError;
    int exitCode = -1;   // when it exited
    int signal = 0;      // when a signal ended it
    std::optional<bool> started;  // from the proof, when there is one
    bool execFailed = false;      // the runner reached the command's execve, which failed
    unsigned forwardedSignals = 0;  // bit N set: dsh-confine sent signal N to the command (forwarded, or to end it)
    TreeEnd ended = TreeEnd::ByItself;
    bool merged = false;            // stdout and stderr were one open file: passed through as one stream
    long long durationMs = 0;  // with SuperviseOptions::timed
    // A signal that would have ended dsh-confine (Linux: one it neither forwards nor leaves to
    // the caller's disposition, from a process): the tree was ended for it, with what checks its
    // end (the stage's git check); the caller is to die of it once it has done its own.
    int endedBySignal = 0;
};

// How the runner is started and what it offers.
//
// A runner whose code is this program's own runs in two parts. The preparation runs in this
// process before any other is started, and may allocate, open files and fail; it returns the
// launch, which runs in the runner's process and returns only on failure, with the exit status
// (its message written). On Linux the launch runs in a clone that shares this process's memory
// until its execve, as posix_spawn's child does, so it must make system calls only, without
// the C library's wrappers (no errno): no allocation, no lock, no stdio (platform::prepare_plan's
// launches are such).
using Launch = std::function<int()>;
using PrepareHere = std::function<Launch(int argc, char** argv)>;
struct SuperviseOptions {
    StartProof proof = StartProof::None;
    // The index in argv of a placeholder the proof's fd number is written into (the runner
    // option's value); -1 without a proof.
    int statusFdSlot = -1;
    // The command is the runner's grandchild (bubblewrap's monitor, then the sandbox's pid 1,
    // then the command): forwarded signals go to it, found through the kernel's child lists.
    bool commandIsGrandchild = false;
    // Descriptors above 2 but these are closed in the runner (a runner that closes nothing itself).
    const std::vector<int>* closeAllBut = nullptr;
    // Set when argv[0] is this very program (the Landlock runner is dsh-confine itself:
    // platform::StartProofPlan::runnerIsSelf). prepareHere(argc, argv) is then called with argv
    // as it would have been exec'd (the proof's fd in place), and the runner's process runs the
    // launch it returns and exits with its status: the runner's code in place, one execve (and
    // one start-up of a static binary) fewer, and on Linux no copy of this address space.
    PrepareHere prepareHere;
    // The runner ends the command's whole tree when it ends, and dies with its parent
    // (bubblewrap with --unshare-pid and --die-with-parent): no keeper is needed between them.
    // dsh-confine is then the runner's parent and the subreaper of what the runner leaves.
    bool runnerEndsTree = false;
    // Under bubblewrap, the stage stays as the command's parent to check git's repositories when
    // it ends (bwrap_stage.hpp): a tree ended by SIGKILL loses all below the stage first, and the
    // stage a moment to check and exit, before bubblewrap is killed.
    bool stageHoldsCall = false;
    // SupervisedRun::durationMs is measured (otherwise 0).
    bool timed = true;
    // Ends the command's whole tree this long after the start: SIGTERM to each of its processes
    // (on Linux: every descendant of the keeper, or of the sandbox's pid 1 under bubblewrap; a
    // process forked while it is sent may miss it), then, `killAfter` later, SIGKILL to all of
    // them (the keeper's rounds, or bubblewrap's end, which ends its pid namespace).
    std::optional<std::chrono::milliseconds> timeout;
    std::chrono::milliseconds killAfter{5000};
    // Asked right after the start, then again after each delay it answers, while the tree runs:
    // nullopt ends the tree as a timeout would (TreeEnd::Watch). A limit the host counts but does
    // not enforce itself: the CPU time of a cgroup.
    std::function<std::optional<std::chrono::milliseconds>()> watch;
    // Written "0" by the runner's process before it becomes the runner (cgroup.procs files: it
    // moves itself, and so everything it starts, into the call's cgroups); a failed write or
    // setrlimit ends it with status 125 before the runner runs.
    std::vector<int> joinFds;
    std::vector<ResourceLimit> limits;
    // A descriptor the runner's process alone inherits, beside the proof's (its close-on-exec
    // flag cleared there only); supervise owns it and closes it here once the runner is started
    // (or could not be). -1: none. (`run`'s end for the allow-list proxy's refusals.)
    int passFd = -1;
    // Read as it comes while the command runs, each chunk handed to onWatched; not closed here,
    // so the caller may read what comes after. -1: none.
    int watchFd = -1;
    std::function<void(std::string_view)> onWatched;
    // Called once the command's tree is gone, before dsh-confine takes its signals back: what
    // it does cannot be cut short by one (run's end-of-call git check).
    std::function<void()> afterTree;
};

// Runs argv and watches it. Between dsh-confine and the runner sits a keeper process, the
// subreaper that ends the command's tree when the command ends or dsh-confine dies (even of
// SIGKILL), unless the runner does that itself (runnerEndsTree, Linux).
// When stdout and stderr are the same open file (`>log 2>&1`, one pipe, one pty), the command
// gets one pipe for both, so their order is kept byte for byte, and `on_stderr` sees the merged
// stream; otherwise stdout is inherited untouched.
// SIGPIPE is ignored from here on (the command gets the disposition it had): a reader of
// stderr that goes away ends the passthrough, not dsh-confine.
SupervisedRun supervise(std::vector<std::string> argv, const SuperviseOptions& options,
                        const std::function<void(std::string_view)>& on_stderr);

// Ends this process as signal `sig` would (no core dump), or with 128 + `sig` where it cannot.
[[noreturn]] void die_of(int sig);

#if !defined(_WIN32)
// The process a forwarded signal is for: the runner, or under bubblewrap (`grandchild`) the
// child of the sandbox's pid 1 once there is one.
pid_t signal_target(pid_t runner, bool grandchild);
#endif

#if defined(__linux__)
// The children of `parent` (a single-threaded process), up to `most`, into `into`: how many.
int children_of(long parent, long* into, int most) noexcept;
#endif

}  // namespace dsh::posix
