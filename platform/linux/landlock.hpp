// The Landlock backend. Its runner is dsh-confine itself: a printed plan invokes
// `dsh-confine landlock-exec ...`, and the exec path calls exec_confined() in-process, so
// both apply the same ruleset and exec the command directly, with no second exec.
// Besides the ruleset, the runner sets no_new_privs, drops every capability (a root caller
// would otherwise keep CAP_SYS_MODULE and friends, which no file rule can hold), installs a
// seccomp filter that refuses TIOCSTI and TIOCLINUX (so the caller's terminal cannot be fed
// keystrokes while job control keeps working), the metadata ioctls Landlock cannot see and, with
// the network denied, every socket that could reach outside (tty_guard.hpp), and closes every
// descriptor above 2 the caller did not keep. Each granted
// path is opened without following a symlink, and the workspace root and temp area must still
// be the directories the plan named. What Landlock does not govern: landlock_rules.hpp.
#pragma once

#include "../../lib/config.hpp"
#include "../../lib/provider.hpp"
#include "landlock_rules.hpp"
#include "runner.hpp"

namespace dsh::landlock {

class LandlockBackend : public Backend {
public:
    LandlockBackend(std::string runner, BackendConfig config);
    std::string name() const override { return "landlock"; }
    Expected<Usable> check() const override;
    Expected<Usable> probe(int timeout_ms) const override;
    std::string probe_identity() const override;
    Expected<ConfinedArgv> confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const override;
    Dialect dialect() const override;
    BackendReport report() const override;

private:
    std::string runner_;
    BackendConfig config_;
};

// A fresh private temp area in the per-user `base` (made 0700 and checked first), named for the
// process that makes it and owns it, call-PIDNS-PID-XXXXXX. First removes the areas in `base`
// whose owner has ended (a call that exec'd its command leaves its area behind; the next call of
// the same user clears it). Works relative to the base it checked and never follows a symlink;
// areas of another PID namespace are left alone.
std::optional<std::string> make_call_temp_dir(const std::string& base, std::string& why);

// Where a nested call's private temp areas go when the enclosing sandbox lets it write neither
// /tmp/dsh-confine-UID nor /tmp: the same name under $TMPDIR, when that is a private directory
// of ours (the enclosing call's own temp area). nullopt otherwise.
std::optional<std::string> nested_temp_base();

// What exec_confined does, made ready: every check, the temp area, the ruleset with its rules
// (a failure among them becomes a failed launch, which only reports it). The launch then
// applies it all with system calls only (runner.hpp), so `run` can start the command from a
// clone that shares the preparing process's memory.
linux_runner::Launch prepare_confined(const RunnerArgs& args, const std::vector<std::string>& argv);

// A ruleset that handles no access right and only scopes: signals, and abstract Unix sockets
// when `deny_network` (what the stage applies inside bubblewrap, bwrap_stage.hpp). -1 with `why`
// where this kernel's Landlock has no scopes (before ABI 6) or fails.
int scope_ruleset(bool deny_network, std::string& why);

// Applies the ruleset for `args` to this process and execs argv. Returns only on failure,
// with the exit status to use: 125 when confinement could not be set up (the message already
// printed as `dsh-confine: error: LANDLOCK: ...`), 126/127 when the command cannot be run.
int exec_confined(RunnerArgs args, const std::vector<std::string>& argv);

}  // namespace dsh::landlock
