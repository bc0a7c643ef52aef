// What the CLI asks of the host platform: the backends this system has, the default chain,
// and carrying out a plan. One implementation per system, chosen by CMake.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../lib/config.hpp"
#include "../lib/provider.hpp"
#include "../lib/run_limits.hpp"
#include "linux/bwrap_argv.hpp"
#include "posix/supervise.hpp"

namespace dsh::platform {

// The chain used when the config names none: the best choice for this system.
std::vector<std::string> default_backend_chain();

// What a backend needs to know about the call besides the policy: where the command runs,
// and dsh-confine's own files (state, cache, config), which a command must never be able to
// rewrite, even inside a writable workspace (it could change its own next policy).
struct HostContext {
    std::string cwd;
    std::vector<std::string> protectedPaths;  // absolute, canonical where they exist
};

// A backend of this system, or nullptr when `name` belongs to another system.
std::shared_ptr<const Backend> make_backend(const std::string& name, const Config& config, const HostContext& host);

std::string system_name();

// Where this system's backends make private temp areas for calls without a session (a
// per-user base): a root the command may write must not contain them.
std::vector<std::string> private_temp_bases();

// Replaces the process with the confined command. Returns only on failure, with the exit
// status to use (the message already printed).
int exec_plan(const ConfinedArgv& confined, const SandboxPolicy& policy, const std::vector<std::string>& argv,
              const Config& config);

// What exec_plan does, in the two parts `run` starts a runner of its own code with
// (posix::PrepareHere), for the backends whose runner is this program
// (StartProofPlan::runnerIsSelf: Landlock). All that may allocate or fail is done here; a
// failure becomes a launch that reports it (`dsh-confine: error: CODE: message`, 125), as an
// exec'd runner would. The launch returned replaces its process with the confined command and
// makes system calls only (it runs in a clone that shares this process's memory).
posix::Launch prepare_plan(const ConfinedArgv& confined, const SandboxPolicy& policy,
                           const std::vector<std::string>& argv, const Config& config);

// Adds the runner's proof-of-start option to a confined argv where the backend has one.
struct StartProofPlan {
    posix::StartProof proof = posix::StartProof::None;
    int fdSlot = -1;  // the index of the proof's fd placeholder in argv
    // The command is the runner's grandchild, the child of the sandbox's pid 1 (bubblewrap):
    // where forwarded signals go.
    bool commandIsGrandchild = false;
    // A per-call temp area the caller made for this run and removes when it ends.
    std::optional<std::string> tempDir;
    // The runner closes nothing itself (sandbox-exec): the descriptors above 2 but the kept ones
    // are closed before it runs.
    bool closeInherited = false;
    // The runner is dsh-confine itself (Landlock's, the plan's argv[0] is this binary): `run` calls
    // its code in the runner's process instead of exec'ing a second copy with the same argv.
    bool runnerIsSelf = false;
    // The runner ends the command's whole tree when it ends and dies with its parent, so `run`
    // needs no keeper process in front of it (bubblewrap's pid namespace and --die-with-parent).
    bool runnerEndsTree = false;
    // The hosts network: the plan's proxy reports each host it refuses on the socket `run` gave
    // (prepare_for_run's `refusals`).
    bool reportsRefusals = false;
    // A descriptor the runner alone inherits (under bubblewrap in the hosts network: the stage's
    // channel to the proxy, `--proxy-fd`); `run` closes its copy once the runner has started.
    int passFd = -1;
};
// Prepares a confined argv for `run`: adds the proof-of-start option, and where the runner
// would make a per-call temp area itself (and leave it behind until a later call), makes it
// here instead, so `run` removes it when the command ends. In the hosts network it starts the
// proxy here, in `run`'s own process, reporting refusals on `refusals`: the bubblewrap plan's
// launcher (`dsh-confine net-proxy ... --`) is done here and taken off argv, as Landlock's
// runner is prepared here, so that under either backend the proxy is outside the call's cgroup
// and rlimits (a command that uses up its processes or CPU time cannot end the proxy with them).
// Failure to prepare is an Error.
StartProofPlan prepare_for_run(std::vector<std::string>& argv, const std::string& backend, int refusals = -1);
// Removes a temp area prepare_for_run made.
void remove_run_temp_dir(const std::string& dir);

// The end-of-call check of the plan's git directories, done again by `run` once the sandbox is
// gone, however it ended (platform/linux/git_front.hpp): recorded here, before the runner
// starts; finish() once the command's tree is gone, which says each repair on stderr. nullptr
// where the plan checks none at the end (or its backend keeps no such check).
struct EndCheck {
    virtual ~EndCheck() = default;
    virtual void finish() const = 0;
};
std::unique_ptr<EndCheck> record_end_check(const ConfinedArgv& confined);

// The resource limits of one `run` as this host enforces them: each limit's mechanism (a cgroup
// of the call's own where one can be made, on Linux; rlimits where the system has them; or none,
// a gap), what the runner's process does with them (joins the cgroups, sets the rlimits), and the
// cgroup's counters. What it made (the cgroup) is removed when it goes, which must be after the
// command's tree is gone.
struct RunLimitsOnHost {
    virtual ~RunLimitsOnHost() = default;
    std::vector<LimitEnforcement> enforcement;
    std::vector<int> joinFds;                   // posix::SuperviseOptions::joinFds
    std::vector<posix::ResourceLimit> rlimits;  // posix::SuperviseOptions::limits
    // The CPU time the whole tree used so far, in nanoseconds, where a cgroup counts it.
    virtual std::optional<std::uint64_t> tree_cpu_ns() const { return std::nullopt; }
    // The limit whose own counter shows it was reached (an OOM kill, a refused fork).
    virtual std::optional<LimitName> reached() const { return std::nullopt; }
};
std::unique_ptr<RunLimitsOnHost> prepare_run_limits(const RunLimits& limits);

// `dsh-confine landlock-exec ...` where the system has Landlock; 125 elsewhere.
struct LandlockExecRequest {
    std::string mode;
    std::string workspaceRoot;
    std::string workspaceRootId;  // "DEV:INO" the root must still have; empty: not checked
    std::string tempDir;          // empty: none
    std::string tempDirId;        // "DEV:INO" the temp area must still have
    std::string privateTempBase;  // empty: none
    int statusFd = -1;
    int maxAbi = 0;               // 0: the kernel's
    std::vector<int> keepFds;     // descriptors above 2 passed on
    std::vector<std::string> writableRoots;  // [DEV:INO@]PATH
    bool denyNetwork = false;
    bool hostsNetwork = false;
    std::vector<std::string> allowHosts;  // with hostsNetwork: the proxy's patterns
};
int landlock_exec(const LandlockExecRequest& request, const std::vector<std::string>& argv);

// `dsh-confine bwrap-stage ...`: the program bubblewrap runs inside the sandbox, which makes the
// writable mounts and execs the command (platform/linux/bwrap_stage.hpp); 125 elsewhere.
using BwrapStageRequest = bwrap::StageRequest;
int bwrap_stage(const BwrapStageRequest& request, const std::vector<std::string>& argv);

// `dsh-confine net-proxy --allow-host P... -- BWRAP_ARGV`: the proxy started outside the sandbox,
// then bubblewrap executed (platform/linux/proxy_companion.hpp). Returns only on failure (125).
// `run` does the same in its own process instead (prepare_for_run).
int net_proxy_exec(const std::vector<std::string>& allow_hosts, const std::vector<std::string>& bwrap_argv);

// `dsh-confine __proxy ...`: the hosts network's proxy in its own process, as the Linux backends
// start it (platform/linux/proxy_companion.hpp); 125 elsewhere. Not typed by hand.
int serve_proxy(int argc, char** argv);

// `dsh-confine restricted-token-exec ...` where the system has the restricted-token backend
// (Windows); 125 elsewhere.
struct RestrictedTokenExecRequest {
    std::string mode;
    std::string workspaceRoot;
    std::string tempDir;                      // empty: none
    std::string privateTempBase;              // empty: none
    std::vector<std::string> protectedPaths;  // dsh-confine's own files inside the workspace
};
int restricted_token_exec(const RestrictedTokenExecRequest& request, const std::vector<std::string>& argv);

}  // namespace dsh::platform
