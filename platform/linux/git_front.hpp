// The end-of-call git check once more, from the caller's side of a bubblewrap sandbox.
//
// The stage checks the plan's git directories when the command's whole tree has ended
// (git_check.hpp), from inside the sandbox. A signal that kills bubblewrap ends the sandbox at
// once, the stage with it, before it checks: bubblewrap dies of SIGTERM, SIGHUP, SIGQUIT and
// most other signals without passing them on, and a signal to a process group (timeout(1)'s,
// a closed terminal's) reaches bubblewrap beside dsh-confine. So the process in front of
// bubblewrap (`run`, or on the exec path dsh-confine itself, which then stays: hold) records the
// same directories before bubblewrap starts and checks them again once the sandbox's last
// process is gone, however the sandbox ended.
//
// Who could have written each directory on the way: the git directory, and those between the
// workspace root and it, are written by confined commands of earlier and concurrent calls (and
// of this one, until its sandbox is gone). So, as in the stage, each one is reached without
// following a symlink and every repair is relative to descriptors opened before bubblewrap
// started (git_check::record); out here nothing keeps `objects/` or `refs/` in place, so their
// modes are set through descriptors opened without following a symlink (git_check::restore).
// A directory swapped in meanwhile by a concurrent call's command is one of the writable roots
// it could write anyway: a repair there writes only a HEAD and owner permission bits.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "git_check.hpp"

namespace dsh::git_front {

class Backstop {
public:
    // Records each git directory; one that cannot be opened is left to the stage, which then
    // refuses the call before the command starts.
    explicit Backstop(const std::vector<std::string>& gitdirs);

    // Waits until no child of this process is a sandbox's pid 1 with processes below it (one in
    // a PID namespace of its own, reparented here when bubblewrap ended first: this process must
    // be a subreaper), but those in `spared`; then repairs what is left to repair and says so on
    // stderr, in the stage's words.
    void finish(const std::vector<long>& spared = {}) const;

private:
    std::vector<git_check::Recorded> checks_;
};

// The exec path of a plan with git directories to check: dsh-confine stays in front of
// bubblewrap. `argv` is the plan's (bubblewrap's, or the hosts network's launcher's, which
// `launcher` then runs in a child: it starts the proxy and execs bubblewrap, returning only on
// failure, with the status); the stage gets `--checked-fd` to say it has checked. Signals sent
// to dsh-confine go to the stage as `run` forwards them; once bubblewrap has ended, the backstop
// checks where the stage did not say it had, and dsh-confine ends as bubblewrap ended (its
// status, or killed by its signal).
using Launcher = std::function<int(const std::vector<std::string>& argv)>;
[[noreturn]] void hold(const Backstop& backstop, std::vector<std::string> argv, const Launcher& launcher);

}  // namespace dsh::git_front
