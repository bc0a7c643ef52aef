// What the CLI asks of the host platform: the backends this system has, the default chain,
// and carrying out a plan. One implementation per system, chosen by CMake.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../lib/config.hpp"
#include "../lib/provider.hpp"
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

// Replaces the process with the confined command. Returns only on failure, with the exit
// status to use (the message already printed).
int exec_plan(const ConfinedArgv& confined, const SandboxPolicy& policy, const std::vector<std::string>& argv,
              const Config& config);

// Adds the runner's proof-of-start option to a confined argv where the backend has one.
struct StartProofPlan {
    posix::StartProof proof = posix::StartProof::None;
    int fdSlot = -1;  // the index of the fd number's placeholder in argv
    // A stderr line prefix by which the runner says the command itself could not be
    // executed (missing inside the sandbox): the command's failure, not the runner's.
    std::string commandMissing;
    // A per-call temp area the caller made for this run and removes when it ends.
    std::optional<std::string> tempDir;
    // A file descriptor (close-on-exec here) the runner must inherit, named in argv: the
    // terminal guard bwrap loads with --seccomp. -1: none. The caller closes it after the run.
    int passFd = -1;
};
// Prepares a confined argv for `run`: adds the proof-of-start option, and where the runner
// would make a per-call temp area itself (and leave a reaper behind), makes it here instead,
// so `run` removes it when the command ends. Failure to prepare is an Error.
StartProofPlan prepare_for_run(std::vector<std::string>& argv, const std::string& backend);
// Removes a temp area prepare_for_run made.
void remove_run_temp_dir(const std::string& dir);

// `dsh-confine landlock-exec ...` where the system has Landlock; 125 elsewhere.
struct LandlockExecRequest {
    std::string mode;
    std::string workspaceRoot;
    std::string tempDir;          // empty: none
    std::string privateTempBase;  // empty: none
    int statusFd = -1;
    int maxAbi = 0;               // 0: the kernel's
};
int landlock_exec(const LandlockExecRequest& request, const std::vector<std::string>& argv);

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
