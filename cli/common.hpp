// What the subcommands share: the policy options, configuration lookup, and the front half
// of every confining call (resolve, check PROGRAM, ask the provider), which ends in a plan
// or in one of dsh-confine's own errors.
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
};

struct PolicyOptions {
    std::string mode;
    std::string workspaceRoot;
    std::string session;
    std::string config;
    std::string backend;
    bool requireFull = false;
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

Config load_configuration(const std::string& explicit_file);
Resolved resolve(const PolicyOptions& options);
Planned plan_call(const PolicyOptions& options, const std::vector<std::string>& argv, bool json_errors);
std::optional<std::string> cache_dir();
// The cwd and dsh-confine's own files (state, cache, config) for the backends.
platform::HostContext host_context(const Config& config);
std::string current_dir();
void write_out(const std::string& text);

struct DoctorOptions {
    bool json = false;
    bool verify = false;
    std::string config;
};
int run_doctor(const DoctorOptions& options);

int run_confined(const PolicyOptions& options, const std::vector<std::string>& argv, const std::string& report_file,
                 int report_fd);

}  // namespace dsh::cli
