// The policy service (the seed's `SandboxPolicyService`): resolves the complete policy of one
// call from the request, the calling session and the deployment config, so no subcommand
// repeats the precedence. It reaches the host only through SessionStorage and two callbacks,
// which the unit tests replace with fakes.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "config.hpp"
#include "policy.hpp"
#include "session.hpp"
#include "types.hpp"

namespace dsh {

class SandboxPolicyService {
public:
    // The process's cwd, the agentless fallback root; may throw WORKSPACE_ROOT.
    using ProcessCwd = std::function<std::string()>;
    // Where a session log's warnings go (a torn last line skipped); they are not errors.
    using WarningSink = std::function<void(const std::string&)>;

    // `sessions` may be null when no request names a session (then no state directory is
    // needed at all); a request with a session and no storage is an internal error.
    // `identity`, when given, checks a session's cwd is still the directory recorded at its
    // start (SESSION_CWD_CHANGED otherwise); every confining call gives one.
    SandboxPolicyService(Config config, SessionStorage* sessions, ProcessCwd process_cwd, WarningSink warn = {},
                         const DirectoryIdentity* identity = nullptr);

    // mode: request > the session's last `sandbox/mode` event > config default_mode > read-only.
    // root: session cwd > request root (WORKSPACE_ROOT when it contradicts the session) >
    // config workspace_root > the process's cwd; canonicalized with filesystem semantics.
    // A session that was never started is SESSION.
    SandboxExecutionPolicy resolve(const SandboxPolicyRequest& request) const;

    // The session's own say over the mode, without the config default: its last logged mode,
    // or nullopt when it logged none.
    std::optional<SandboxMode> overrideOf(const std::string& session_id) const;

    const Config& config() const { return config_; }

private:
    SessionPolicyView session_view(const std::string& session_id) const;

    Config config_;
    SessionStorage* sessions_;
    ProcessCwd process_cwd_;
    WarningSink warn_;
    const DirectoryIdentity* identity_;
};

}  // namespace dsh
