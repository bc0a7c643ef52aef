// The bubblewrap backend: wraps argv as `bwrap ... -- argv` (bwrap_argv.hpp says what the
// binds promise and what they do not cover). Probed by running `true` under the same binds.
#pragma once

#include "../../lib/config.hpp"
#include "../../lib/provider.hpp"

namespace dsh::bwrap {

class BwrapBackend : public Backend {
public:
    // `cwd` is where the command will run; `config.path` overrides the PATH lookup of bwrap.
    BwrapBackend(BackendConfig config, std::string cwd, std::vector<std::string> protected_paths);
    std::string name() const override { return "bwrap"; }
    Expected<Usable> check() const override;
    Expected<Usable> probe(int timeout_ms) const override;
    std::string probe_identity() const override;
    Expected<ConfinedArgv> confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const override;
    Dialect dialect() const override;
    BackendReport report() const override;

    const std::string& runner() const { return runner_; }

private:
    BackendConfig config_;
    std::string cwd_;
    std::vector<std::string> protected_;
    std::string runner_;  // resolved once; empty when not found
};

}  // namespace dsh::bwrap
