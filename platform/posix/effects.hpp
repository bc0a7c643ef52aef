// The file effects `doctor --verify` attempts inside a sandbox, one syscall each, and the
// host-side evidence it judges them by: a snapshot of a tree (entries, types, modes, owners,
// sizes, times, contents, xattrs), a host socket that must receive nothing, a sentinel process
// that must receive no signal, so a denial is proven from outside, not by an exit code.
#pragma once

#include <string>
#include <vector>

namespace dsh::posix {

// Performs effect `op` on `args` (`dsh-confine __effect OP ARGS...`): 0 when the effect took
// place, 1 when the system refused it (the errno text on stderr), 2 for a bad request.
int perform_effect(const std::string& op, const std::vector<std::string>& args);

// Everything observable about the tree at `path`, as text; equal text means untouched.
std::string snapshot_tree(const std::string& path);

// A pseudo-terminal whose slave becomes the controlling terminal of a spawned command.
struct Pty {
    int master = -1;
    std::string slave;
};
Pty open_pty();
// Bytes waiting in the terminal's input queue: a TIOCSTI that got through leaves some.
int pending_input(const Pty& pty);

struct EffectRun {
    bool started = false;
    bool timedOut = false;
    int exitCode = -1;
    std::string output;
};

// Runs argv with stdout+stderr captured; with a pty, in a new session whose controlling
// terminal (and stdin) is the pty's slave.
EffectRun run_effect(const std::vector<std::string>& argv, const Pty* pty, int timeout_ms);

#if !defined(_WIN32)
// A process outside every sandbox that notes whether SIGUSR1 reached it: it keeps the signal
// blocked, so one that comes stays pending until the sentinel is asked, whenever that is. It
// leads a process group of its own, which a runner joins (run_effect_in_group) as a command's
// runner shares its caller's group.
struct SignalSentinel {
    int pid = -1;
    int answer = -1;  // its answer comes on this pipe
};
SignalSentinel start_signal_sentinel();
// Whether a SIGUSR1 reached the sentinel since it started; ends it. Ask once the runner ended.
bool sentinel_signalled(SignalSentinel& sentinel);

// run_effect, with argv in process group `group` (a sentinel's) rather than a group of its own.
EffectRun run_effect_in_group(const std::vector<std::string>& argv, int group, int timeout_ms);
#endif

}  // namespace dsh::posix
