// Spawning a confined command and watching it: stdin and stdout inherited untouched, stderr
// passed through as it comes while a callback sees every byte, signals forwarded, and the
// runner's proof of start collected where the backend offers one.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsh::posix {

enum class StartProof {
    None,        // the runner cannot say; attribution relies on stderr alone
    ExecMarker,  // the runner's --status-fd (landlock-exec, bubblewrap's stage): 'S' just
                 // before execve, 'F' if execve failed
};

struct SupervisedRun {
    bool spawned = false;
    std::string spawnError;
    int exitCode = -1;   // when it exited
    int signal = 0;      // when a signal ended it
    std::optional<bool> started;  // from the proof, when there is one
    bool execFailed = false;      // the runner reached the command's execve, which failed
    unsigned forwardedSignals = 0;  // bit N set: signal N was forwarded to the command
    bool merged = false;            // stdout and stderr were one open file: passed through as one stream
    long long durationMs = 0;  // with SuperviseOptions::timed
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
    // SupervisedRun::durationMs is measured (otherwise 0).
    bool timed = true;
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

}  // namespace dsh::posix
