// `dsh-confine policy`, and the first step of every confining call: the policy options
// turned into a SandboxPolicyRequest and resolved by the policy service.
#include <cstdlib>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "../lib/error.hpp"
#include "../lib/plan.hpp"
#include "../lib/policy_service.hpp"
#include "../lib/session.hpp"
#include "../platform/posix/safe_path.hpp"
#include "../platform/posix/state_store.hpp"
#include "common.hpp"

namespace dsh::cli {

Resolved resolve(const PolicyOptions& options) {
    Resolved out;
    out.config = load_configuration(options.config);
    SandboxPolicyRequest request;
    if (!options.mode.empty()) {
        request.mode = parse_sandbox_mode(options.mode);
        if (!request.mode)
        {
            std::string message = "unknown mode '" + options.mode + "'";
            if (auto close = did_you_mean(options.mode, {"read-only", "workspace-write", "danger-full-access"}))
                message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; modes: read-only, workspace-write, danger-full-access");
        }
    }
    if (!options.workspaceRoot.empty()) request.workspaceRoot = options.workspaceRoot;
    if (!options.writableRoots.empty()) request.writableRoots = options.writableRoots;
    if (!options.denyRead.empty()) request.unreadablePaths = options.denyRead;
    if (!options.network.empty()) {
        request.network = parse_network_policy(options.network);
        if (!request.network) {
            std::string message = "unknown network '" + options.network + "'";
            if (auto close = did_you_mean(options.network, {"allow", "deny", "hosts"})) message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; networks: allow, deny, hosts");
        }
    }
    request.allowHosts = options.allowHosts;
    if (!options.git.empty()) {
        request.git = parse_git_mode(options.git);
        if (!request.git) {
            std::string message = "unknown git mode '" + options.git + "'";
            if (auto close = did_you_mean(options.git, {"protect", "read-only", "writable"})) message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; git modes: protect, read-only, writable");
        }
    }
    if (const char* home = std::getenv("HOME"); home && *home) request.home = home;
    std::optional<posix::StateDirStorage> storage;
    if (!options.session.empty()) {
        // A bad ID is SESSION before the state directory is looked for (which may be STATE).
        require_valid_session_id(options.session);
        request.sessionId = options.session;
        storage.emplace(state_dir());
    }
    const posix::NoSymlinkIdentity identity;
    const SandboxPolicyService service(out.config, storage ? &*storage : nullptr, current_dir,
                                       [](const std::string& warning) { spdlog::warn("{}", warning); }, &identity);
    out.policy = service.resolve(request);
    return out;
}

int run_policy(const PolicyOptions& options) {
    Resolved resolved = resolve(options);
    write_out(policy_json(resolved.policy).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    return 0;
}

}  // namespace dsh::cli
