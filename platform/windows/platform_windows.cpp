// platform.hpp on Windows: one backend, the restricted token, whose runner is dsh-confine.exe
// itself. The exec path has no exec(2) to replace the process with: it runs the plan's runner
// in-process and returns the command's status.
#include <cstdio>

#include "../platform.hpp"
#include "../../lib/error.hpp"
#include "../posix/process.hpp"
#include "restricted_token.hpp"
#include "win32.hpp"

namespace dsh::platform {

std::vector<std::string> default_backend_chain() { return {"restricted-token"}; }

std::string system_name() { return "Windows"; }

// Not listed on this system yet: a root that contains the per-user temp area (Seatbelt's, or the
// restricted token's %TEMP%\dsh-confine) is not refused here (docs/security.md).
std::vector<std::string> private_temp_bases() { return {}; }

std::shared_ptr<const Backend> make_backend(const std::string& name, const Config& config, const HostContext& host) {
    if (name == "restricted-token")
        return std::make_shared<restricted_token::RestrictedTokenBackend>(posix::self_executable(), config.restrictedToken,
                                                                          host.protectedPaths);
    return nullptr;
}

int exec_plan(const ConfinedArgv& confined, const SandboxPolicy& /*policy*/, const std::vector<std::string>& /*argv*/,
              const Config& /*config*/) {
    std::fflush(stdout);
    if (confined.backend == "restricted-token") {
        // The plan's own runner argv, read back: the same grants as a printed plan gets.
        const auto parsed = restricted_token::parse_argv(confined.argv);
        if (!parsed) {
            std::fprintf(stderr, "dsh-confine: error: RESTRICTED_TOKEN: the plan's runner argv cannot be read back\n");
            return 125;
        }
        return restricted_token::run_confined(parsed->args, parsed->argv);
    }
    posix::exec_argv(confined.argv.front(), confined.argv);
    std::fprintf(stderr, "dsh-confine: error: RUNNER_EXEC: cannot execute %s\n", confined.argv.front().c_str());
    return 125;
}

// No backend here has this program as its runner (StartProofPlan::runnerIsSelf is never set).
posix::Launch prepare_plan(const ConfinedArgv& confined, const SandboxPolicy& /*policy*/,
                           const std::vector<std::string>& /*argv*/, const Config& /*config*/) {
    throw Error(code::Internal, "the " + confined.backend + " backend's runner is not this program");
}

// The runner offers no proof of start (attribution relies on its dialect), and it makes and
// removes an agentless call's temp area itself, since it waits for the command anyway.
StartProofPlan prepare_for_run(std::vector<std::string>& /*argv*/, const std::string& /*backend*/, int /*refusals*/) { return {}; }

void remove_run_temp_dir(const std::string& dir) { win32::remove_tree(dir); }

// No rlimits and no cgroups here: every limit is a gap (a job object could count some; not yet).
std::unique_ptr<EndCheck> record_end_check(const ConfinedArgv&) { return nullptr; }

std::unique_ptr<RunLimitsOnHost> prepare_run_limits(const RunLimits& limits) {
    auto out = std::make_unique<RunLimitsOnHost>();
    out->enforcement = decide_limits(limits, CgroupOffer{}, RlimitSupport{});
    return out;
}

int bwrap_stage(const BwrapStageRequest& /*request*/, const std::vector<std::string>& /*argv*/) {
    std::fprintf(stderr, "dsh-confine: error: BWRAP_STAGE: bwrap-stage: bubblewrap is a Linux mechanism, not available on Windows\n");
    return 125;
}

int net_proxy_exec(const std::vector<std::string>& /*allow_hosts*/, const std::vector<std::string>& /*bwrap_argv*/) {
    std::fprintf(stderr, "dsh-confine: error: PROXY: net-proxy: the hosts network's launcher exists only on Linux\n");
    return 125;
}

int serve_proxy(int /*argc*/, char** /*argv*/) {
    std::fprintf(stderr, "dsh-confine: error: PROXY: __proxy: the hosts network's proxy process exists only on Linux\n");
    return 125;
}

int landlock_exec(const LandlockExecRequest& /*request*/, const std::vector<std::string>& /*argv*/) {
    std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: Landlock is a Linux mechanism, not available on Windows\n");
    return 125;
}

int restricted_token_exec(const RestrictedTokenExecRequest& request, const std::vector<std::string>& argv) {
    restricted_token::RunnerArgs args;
    if (request.mode == "read-only") args.mode = ConfinedSandboxMode::ReadOnly;
    else if (request.mode == "workspace-write") args.mode = ConfinedSandboxMode::WorkspaceWrite;
    else {
        std::fprintf(stderr, "dsh-confine: error: RESTRICTED_TOKEN: restricted-token-exec: --mode must be read-only or "
                             "workspace-write, not '%s'\n", request.mode.c_str());
        return 125;
    }
    args.workspaceRoot = request.workspaceRoot;
    if (!request.tempDir.empty()) args.tempDir = request.tempDir;
    if (!request.privateTempBase.empty()) args.privateTempBase = request.privateTempBase;
    args.protectedPaths = request.protectedPaths;
    return restricted_token::run_confined(args, argv);
}

}  // namespace dsh::platform
