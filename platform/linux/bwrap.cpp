#include "bwrap.hpp"

#include <unistd.h>

#include "../posix/process.hpp"
#include "bwrap_argv.hpp"
#include "host.hpp"

namespace dsh::bwrap {

BwrapBackend::BwrapBackend(BackendConfig config, std::string cwd, std::vector<std::string> protected_paths)
    : config_(std::move(config)), cwd_(std::move(cwd)), protected_(std::move(protected_paths)) {
    const posix::ProgramLookup found = posix::resolve_program(config_.path.value_or("bwrap"));
    if (found.status == posix::Lookup::Found) {
        runner_ = found.path;
        if (runner_.front() != '/') {
            char here[4096];
            if (getcwd(here, sizeof here)) runner_ = std::string(here) + "/" + runner_;
        }
    }
}

Expected<Usable> BwrapBackend::check() const {
    if (runner_.empty()) {
        if (config_.path) return Expected<Usable>::failure("[backend.bwrap] path " + *config_.path + " is not an executable file");
        return Expected<Usable>::failure("bubblewrap (bwrap) is not installed or not on PATH");
    }
    return Usable{};
}

Expected<Usable> BwrapBackend::probe(int timeout_ms) const {
    if (auto present = check(); !present) return present;
    const posix::ProgramLookup truth = posix::resolve_program("true");
    if (truth.status != posix::Lookup::Found) return Expected<Usable>::failure("no 'true' on PATH to probe with");
    const SandboxPolicy probe_policy{ConfinedSandboxMode::ReadOnly, "/", std::nullopt, std::nullopt};
    const posix::SpawnOutcome outcome =
        posix::spawn_with_timeout(build_argv({runner_, "/"}, {truth.path}, probe_policy), timeout_ms);
    if (!outcome.started) return Expected<Usable>::failure(outcome.error);
    if (outcome.timedOut) return Expected<Usable>::failure("the probe did not finish within " + std::to_string(timeout_ms) + " ms");
    if (outcome.exitCode == 0) return Usable{};
    std::string first = outcome.output.substr(0, outcome.output.find('\n'));
    return Expected<Usable>::failure("the probe exited with " + std::to_string(outcome.exitCode) +
                                     (first.empty() ? "" : ": " + first));
}

std::string BwrapBackend::probe_identity() const {
    return "runner=" + runner_ + "\nrunner-id=" + linux_host::file_identity(runner_) + "\n" + linux_host::host_identity();
}

Expected<ConfinedArgv> BwrapBackend::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    if (auto present = check(); !present) return Expected<ConfinedArgv>::failure(present.reason());
    ConfinedArgv out;
    out.argv = build_argv({runner_, cwd_, protected_, posix::self_executable()}, argv, policy);
    out.backend = name();
    out.enforcement = SandboxEnforcement::Full;
    Dialect rules = dialect();
    out.denialSignatures = rules.denialSignatures;
    out.runnerFailureRules = rules.runnerFailureRules;
    out.writableRoots = writable_roots(policy);
    return out;
}

Dialect BwrapBackend::dialect() const { return bwrap::dialect(config_.informationalLines); }

BackendReport BwrapBackend::report() const {
    BackendReport out;
    out.name = name();
    out.facts.push_back({"runner", runner_.empty() ? "-" : runner_});
    Expected<Usable> present = check();
    out.usable = present.has_value();
    if (!present) out.reason = present.reason();
    if (present) {
        const posix::SpawnOutcome version = posix::spawn_with_timeout({runner_, "--version"}, 5000);
        std::string text = version.output.substr(0, version.output.find('\n'));
        out.facts.push_back({"bwrapVersion", text.empty() ? "unknown" : text});
    }
    out.enforcement = SandboxEnforcement::Full;
    return out;
}

}  // namespace dsh::bwrap
