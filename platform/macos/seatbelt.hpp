// The Seatbelt backend: wraps argv as `sandbox-exec -p PROFILE -D NAME=VALUE ... -- argv`
// (seatbelt_argv.hpp says what the profiles promise and what they do not cover). The runner
// is /usr/bin/sandbox-exec, or [backend.seatbelt] path; never a PATH lookup, which a command
// could shadow. Probed by running /usr/bin/true under the read-only profile: that fails inside
// another sandbox (sandbox_apply: Operation not permitted), where no nested profile applies.
#pragma once

#include "../../lib/config.hpp"
#include "../../lib/provider.hpp"

namespace dsh::seatbelt {

class SeatbeltBackend : public Backend {
public:
    SeatbeltBackend(BackendConfig config, std::vector<std::string> protected_paths);
    std::string name() const override { return "seatbelt"; }
    Expected<Usable> check() const override;
    Expected<Usable> probe(int timeout_ms) const override;
    std::string probe_identity() const override;
    Expected<ConfinedArgv> confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const override;
    Dialect dialect() const override;
    BackendReport report() const override;

private:
    BackendConfig config_;
    std::vector<std::string> protected_;
    std::string runner_;
};

// The per-user temp area of agentless workspace-write calls: dsh-confine/ inside the directory
// macOS gives each user (confstr _CS_DARWIN_USER_TEMP_DIR, 0700, what $TMPDIR points at),
// canonical. Made 0700 when missing; refused unless it is a real directory of this user's.
Expected<std::string> user_temp_dir();

}  // namespace dsh::seatbelt
