#include "policy_service.hpp"

#include <utility>

#include "error.hpp"

namespace dsh {

SandboxPolicyService::SandboxPolicyService(Config config, SessionStorage* sessions, ProcessCwd process_cwd,
                                           WarningSink warn, const DirectoryIdentity* identity)
    : config_(std::move(config)),
      sessions_(sessions),
      process_cwd_(std::move(process_cwd)),
      warn_(std::move(warn)),
      identity_(identity) {}

SessionPolicyView SandboxPolicyService::session_view(const std::string& session_id) const {
    require_valid_session_id(session_id);
    if (sessions_ == nullptr) throw Error(code::Internal, "session '" + session_id + "' asked for without session storage");
    const SessionState state = [&] {
        try {
            return Sessions(*sessions_).show(session_id);
        } catch (const Error& e) {
            // `no session` is what `session show` says; a call that names one says how to start it.
            if (e.code() == code::Session && std::string(e.what()).rfind("no session", 0) == 0)
                throw Error(code::Session, "unknown session '" + session_id + "' (start it with 'dsh-confine session start')");
            throw;
        }
    }();
    if (warn_)
        for (const auto& warning : state.warnings) warn_(warning);
    // Immutable means the same directory, not the same string: a command in another session may
    // have renamed a component or planted a symlink on the way since.
    if (identity_) require_same_cwd(state, *identity_);
    return SessionPolicyView{state.cwd, state.last_mode(), state.cwdId, state.writableRoots, state.last_network(),
                             state.last_allow_hosts()};
}

SandboxExecutionPolicy SandboxPolicyService::resolve(const SandboxPolicyRequest& request) const {
    std::optional<SessionPolicyView> view;
    if (request.sessionId) view = session_view(*request.sessionId);
    // The cwd is read whichever root wins: the command runs there, so a cwd that cannot be
    // read fails every call alike, `policy` included.
    return resolve_policy(request, view, config_, process_cwd_());
}

std::optional<SandboxMode> SandboxPolicyService::overrideOf(const std::string& session_id) const {
    return session_view(session_id).lastMode;
}

}  // namespace dsh
