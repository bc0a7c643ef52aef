// The Windows backend: a write-restricted token and ACL grants (acl_plan.hpp says what they
// promise and what they do not govern). Its runner is dsh-confine.exe itself: a printed plan
// invokes `dsh-confine restricted-token-exec ...`, and the exec path calls run_confined()
// in-process; both grant, start the command on the token inside a kill-on-close job, wait,
// and pass its exit status through. Probed by running `cmd.exe /d /c exit 0` confined.
#pragma once

#include "../../lib/config.hpp"
#include "../../lib/provider.hpp"
#include "acl_plan.hpp"

namespace dsh::restricted_token {

class RestrictedTokenBackend : public Backend {
public:
    RestrictedTokenBackend(std::string runner, BackendConfig config, std::vector<std::string> protected_paths = {});
    std::string name() const override { return "restricted-token"; }
    Expected<Usable> check() const override;
    Expected<Usable> probe(int timeout_ms) const override;
    std::string probe_identity() const override;
    Expected<ConfinedArgv> confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const override;
    Dialect dialect() const override;
    BackendReport report() const override;

private:
    std::string runner_;
    BackendConfig config_;
    std::vector<std::string> protected_;
};

// %TEMP%\dsh-confine: where agentless workspace-write calls get their private directories.
std::string private_temp_base();

// Grants, starts argv on the restricted token, waits, and returns its exit status; 125 when
// confinement could not be set up (the message printed as `dsh-confine: error:
// RESTRICTED_TOKEN: ...`), 126/127 when the command cannot be run.
int run_confined(const RunnerArgs& args, const std::vector<std::string>& argv);

}  // namespace dsh::restricted_token
