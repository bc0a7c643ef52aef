// platform.hpp on macOS: one backend, Seatbelt through /usr/bin/sandbox-exec, and exec(2) of
// its argv. sandbox-exec offers no proof of start: attribution relies on its dialect.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "../platform.hpp"
#include "../../lib/error.hpp"
#include "../posix/process.hpp"
#include "../posix/state_store.hpp"
#include "seatbelt.hpp"

namespace dsh::platform {

std::vector<std::string> default_backend_chain() { return {"seatbelt"}; }

std::string system_name() { return "macOS"; }

// Not listed on this system yet: a root that contains the per-user temp area (Seatbelt's, or the
// restricted token's %TEMP%\dsh-confine) is not refused here (docs/security.md).
std::vector<std::string> private_temp_bases() { return {}; }

std::shared_ptr<const Backend> make_backend(const std::string& name, const Config& config, const HostContext& host) {
    if (name == "seatbelt") return std::make_shared<seatbelt::SeatbeltBackend>(config.seatbelt, host.protectedPaths);
    return nullptr;
}

int exec_plan(const ConfinedArgv& confined, const SandboxPolicy& policy, const std::vector<std::string>& /*argv*/,
              const Config& /*config*/) {
    std::fflush(stdout);
    posix::close_on_exec_except(policy.keepFds);  // sandbox-exec closes nothing itself
    posix::exec_argv(confined.argv.front(), confined.argv);
    std::fprintf(stderr, "dsh-confine: error: RUNNER_EXEC: cannot execute %s: %s\n", confined.argv.front().c_str(),
                 std::strerror(errno));
    return 125;
}

// No backend here has this program as its runner (StartProofPlan::runnerIsSelf is never set).
posix::Launch prepare_plan(const ConfinedArgv& confined, const SandboxPolicy& /*policy*/,
                           const std::vector<std::string>& /*argv*/, const Config& /*config*/) {
    throw Error(code::Internal, "the " + confined.backend + " backend's runner is not this program");
}

// sandbox-exec has no status channel, and its temp area is the per-user directory, made by
// the backend and kept: nothing to add for `run`, nothing to remove after it.
StartProofPlan prepare_for_run(std::vector<std::string>& /*argv*/, const std::string& /*backend*/, int /*refusals*/) {
    StartProofPlan plan;
    plan.closeInherited = true;  // sandbox-exec closes nothing itself: the keeper does, before it
    return plan;
}

// No cgroups here: CPU time and file size get their rlimits, per process; memory (macOS does not
// enforce RLIMIT_AS) and pids are gaps.
std::unique_ptr<EndCheck> record_end_check(const ConfinedArgv&) { return nullptr; }

std::unique_ptr<RunLimitsOnHost> prepare_run_limits(const RunLimits& limits) {
    auto out = std::make_unique<RunLimitsOnHost>();
    out->enforcement = decide_limits(limits, CgroupOffer{}, RlimitSupport{false, true, true});
    out->rlimits = posix::rlimits_for(out->enforcement);
    return out;
}

void remove_run_temp_dir(const std::string& dir) {
    const std::size_t slash = dir.rfind('/');
    if (slash == std::string::npos) return;
    const int parent = open(dir.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (parent < 0) return;
    posix::remove_tree_at(parent, dir.substr(slash + 1));
    close(parent);
}

int bwrap_stage(const BwrapStageRequest& /*request*/, const std::vector<std::string>& /*argv*/) {
    std::fprintf(stderr, "dsh-confine: error: BWRAP_STAGE: bwrap-stage: bubblewrap is a Linux mechanism, not available on macOS\n");
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
    std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: Landlock is a Linux mechanism, not available on macOS\n");
    return 125;
}

}  // namespace dsh::platform
