// The bubblewrap backend: wraps argv as `bwrap ... -- dsh-confine bwrap-stage ... -- argv`
// (bwrap_argv.hpp says what the binds promise and what they do not cover; bwrap_stage.hpp why
// the stage makes the writable mounts). Probed by running `true` through the same path.
//
// The runner is never taken from PATH, which may hold a directory a confined command can write
// (a venv's bin, node_modules/.bin): bwrap is looked up in the system's own directories, or
// taken from `[backend.bwrap] path` (absolute), and refused when it, or dsh-confine itself (the
// stage), could be replaced by another user or lies inside a root the command may write.
#pragma once

#include "../../lib/config.hpp"
#include "../../lib/provider.hpp"

namespace dsh::bwrap {

// Where bwrap is looked for, in this order (sudo's secure_path).
const std::vector<std::string>& system_directories();

class BwrapBackend : public Backend {
public:
    // `cwd` is where the command will run.
    BwrapBackend(BackendConfig config, std::string cwd);
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
    std::string runner_;  // canonical; empty when none is usable (runnerWhy_ says why)
    std::string runnerWhy_;
    std::string stage_;   // dsh-confine itself, canonical; empty when untrusted (stageWhy_)
    std::string stageWhy_;
};

}  // namespace dsh::bwrap
