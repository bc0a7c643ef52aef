// What the subcommands share: the policy options, where dsh-confine's own files are, the
// config lookup, and the front half of every confining call (resolve, then plan_call: the
// lib's confine step with the host filled in), which ends in a plan or in one of
// dsh-confine's own errors. Each subcommand's entry point is declared here for app.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "../lib/config.hpp"
#include "../lib/plan.hpp"
#include "../lib/provider.hpp"
#include "../lib/types.hpp"
#include "../platform/platform.hpp"

namespace dsh::cli {

// Thrown to leave with a status whose message was already printed (126, 127).
struct ExitStatus {
    int code;
    std::string errorCode = {};  // COMMAND_NOT_FOUND, COMMAND_NOT_EXECUTABLE: for a JSON answer
    std::string message = {};
};

// `{"error": {"code": ..., "message": ...}}` on stdout: what `--print --format json` answers a
// failure with, besides the line on stderr.
void write_error_json(const std::string& code_name, const std::string& message);

struct PolicyOptions {
    std::string mode;
    std::string workspaceRoot;
    std::string session;
    std::string config;
    std::string backend;
    bool requireFull = false;
    std::vector<int> keepFds;  // --keep-fd: descriptors above 2 passed on to the command
    std::vector<std::string> writableRoots;  // --writable-root
    std::vector<std::string> denyRead;       // --deny-read
    std::string network;                     // --network: allow, deny, or empty
    std::string git;                         // --git: protect, read-only, writable, or empty
    std::vector<std::string> allowHosts;     // --allow-host: the hosts network's patterns
    bool allowBroadRoot = false;             // --allow-broad-root
};

struct Resolved {
    Config config;
    SandboxExecutionPolicy policy;
};

struct Planned {
    Resolved resolved;
    Plan plan;
    std::optional<SandboxPolicy> confinedPolicy;
};

// $DSH_CONFINE_STATE_DIR, else $XDG_STATE_HOME/dsh-confine, else ~/.local/state/dsh-confine
// (STATE when none is an absolute path).
std::string state_dir();
// The probe cache's directory, or nullopt when there is no place for it (then no caching).
std::optional<std::string> cache_dir();
// --config > $DSH_CONFINE_CONFIG > XDG/~/.config > /etc > built-in.
Config load_configuration(const std::string& explicit_file);
// The process's cwd (WORKSPACE_ROOT when it cannot be read).
std::string current_dir();
// The cwd and dsh-confine's own files (state, cache, config) for the backends.
platform::HostContext host_context(const Config& config);
// stdout, flushed: the product of a subcommand.
void write_out(const std::string& text);

// policy_command.cpp: the options resolved by SandboxPolicyService.
Resolved resolve(const PolicyOptions& options);
int run_policy(const PolicyOptions& options);

// exec.cpp: the plan of a call (the exec path, --print and run), or one of dsh-confine's own
// errors; with `json_errors`, SANDBOX_UNAVAILABLE also prints its candidates on stdout.
// `resolved`, when given, receives the policy as soon as it is resolved (for a report of a
// failure that comes after).
Planned plan_call(const PolicyOptions& options, const std::vector<std::string>& argv, bool json_errors,
                  std::optional<SandboxExecutionPolicy>* resolved = nullptr);
// --keep-fd names descriptors that must be open when the command is run here (USAGE otherwise).
void require_open_fds(const std::vector<int>& fds);
int run_exec(const PolicyOptions& options, const std::vector<std::string>& argv);
int run_print(const PolicyOptions& options, const std::string& format, const std::vector<std::string>& argv);

int run_classify(const std::string& plan_file, const std::string& backend, const std::string& exit_code_text,
                 const std::string& stderr_file, const std::string& format, const std::string& config_file);
int run_session(const std::string& action, const std::string& id, const std::string& argument,
                const std::vector<std::string>& writable_roots = {});

struct DoctorOptions {
    bool json = false;
    bool verify = false;
    std::string config;
};
int run_doctor(const DoctorOptions& options);

// run's own options, beside the policy's: the report, and the bounds as given (checked by
// run_confined, which lays them over the config's [run] and [run.limits]).
struct RunOptions {
    std::string reportFile;
    int reportFd = -1;
    std::string timeout;    // --timeout DURATION; empty: not given
    std::string killAfter;  // --kill-after DURATION; empty: not given
    std::vector<std::string> limits;  // each --limit NAME=VALUE
};
int run_confined(const PolicyOptions& options, const std::vector<std::string>& argv, const RunOptions& run);

}  // namespace dsh::cli
