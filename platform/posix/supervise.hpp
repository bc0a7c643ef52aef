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
    None,         // the runner cannot say; attribution relies on stderr alone
    BwrapStatus,  // bubblewrap's --json-status-fd: an "exit-code" line only once exec succeeded
                  // (no proof either way when bwrap itself was killed by a signal)
    ExecMarker,   // landlock-exec --status-fd: 'S' just before execve, 'F' if execve failed
};

struct SupervisedRun {
    bool spawned = false;
    std::string spawnError;
    int exitCode = -1;   // when it exited
    int signal = 0;      // when a signal ended it
    std::optional<bool> started;  // from the proof, when there is one
    bool execFailed = false;      // the runner reached the command's execve, which failed
    long long durationMs = 0;
};

// `status_fd_slot`: index in argv of a placeholder the fd number is written into (the runner
// option's value), or -1 without a proof. `pass_fd`: a close-on-exec descriptor the runner
// alone inherits (-1: none); the caller still owns it.
SupervisedRun supervise(std::vector<std::string> argv, StartProof proof, int status_fd_slot,
                        const std::function<void(std::string_view)>& on_stderr, int pass_fd = -1);

}  // namespace dsh::posix
