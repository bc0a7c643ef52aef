#include "bwrap.hpp"

#include <unistd.h>

#include "../../lib/error.hpp"
#include "../../lib/policy.hpp"
#include "../posix/process.hpp"
#include "../posix/safe_path.hpp"
#include "bwrap_argv.hpp"
#include "host.hpp"
#include "landlock_rules.hpp"
#include "proxy_companion.hpp"
#include "runner.hpp"

namespace dsh::bwrap {
namespace {

bool executable_file(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// The places a confined command of this call may write, besides the device sinks, and the temp
// areas earlier calls wrote: a runner inside one of them could be replaced by one call and run
// by the next. (A read-only call's workspace is not among them: running dsh-confine from its own
// checkout works; docs/security.md says what installing it outside every workspace adds.)
std::vector<std::string> writable_places(const SandboxPolicy& policy) {
    std::vector<std::string> places = {landlock::private_temp_base(geteuid())};
    if (policy.sessionTempDir) places.push_back(*policy.sessionTempDir);
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        places.push_back(policy.workspaceRoot);
        places.insert(places.end(), policy.writableRoots.begin(), policy.writableRoots.end());
    }
    return places;
}

// Whether the stage can apply Landlock's scopes on this kernel (bwrap_argv.hpp's Layout).
bool scopes_available() { return linux_host::landlock_abi() >= landlock::kScopeAbi; }

std::optional<std::string> inside_writable(const std::string& file, const SandboxPolicy& policy) {
    for (const auto& place : writable_places(policy))
        if (!paths_within({file}, place).empty()) return place;
    return std::nullopt;
}

}  // namespace

const std::vector<std::string>& system_directories() {
    static const std::vector<std::string> dirs = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"};
    return dirs;
}

BwrapBackend::BwrapBackend(BackendConfig config, std::string cwd) : config_(std::move(config)), cwd_(std::move(cwd)) {
    std::string why;
    if (config_.path) {
        if (config_.path->empty() || config_.path->front() != '/') {
            runnerWhy_ = "[backend.bwrap] path '" + *config_.path + "' must be an absolute path";
        } else if (!executable_file(*config_.path)) {
            runnerWhy_ = "[backend.bwrap] path " + *config_.path + " is not an executable file";
        } else if (auto trusted = posix::trusted_executable(*config_.path, why)) {
            runner_ = *trusted;
        } else {
            runnerWhy_ = "[backend.bwrap] path refused: " + why;
        }
    } else {
        for (const auto& dir : system_directories()) {
            const std::string candidate = dir + "/bwrap";
            if (!executable_file(candidate)) continue;
            if (auto trusted = posix::trusted_executable(candidate, why)) {
                runner_ = *trusted;
                break;
            }
            if (runnerWhy_.empty()) runnerWhy_ = "refused " + candidate + ": " + why;
        }
        if (runner_.empty() && runnerWhy_.empty())
            runnerWhy_ = "bubblewrap (bwrap) is not installed in /usr/local/bin, /usr/bin, /bin or the sbin directories "
                         "(PATH is not searched: a confined command may write a directory on it)";
    }
    const std::string self = posix::self_executable();
    if (auto trusted = posix::trusted_executable(self, why)) stage_ = *trusted;
    else stageWhy_ = "dsh-confine itself, which runs inside as the stage, is refused: " + why;
}

Expected<Usable> BwrapBackend::check() const {
    if (runner_.empty()) return Expected<Usable>::failure(runnerWhy_);
    if (stage_.empty()) return Expected<Usable>::failure(stageWhy_);
    return Usable{};
}

Expected<Usable> BwrapBackend::probe(int timeout_ms) const {
    if (auto present = check(); !present) return present;
    const posix::ProgramLookup truth = posix::resolve_program("true");
    if (truth.status != posix::Lookup::Found) return Expected<Usable>::failure("no 'true' on PATH to probe with");
    const SandboxPolicy probe_policy{ConfinedSandboxMode::ReadOnly, "/", std::nullopt, std::nullopt};
    Layout layout{runner_, stage_, "/", geteuid() == 0};
    // The scopes too, as a plan would have them: a stage that cannot apply them inside bubblewrap
    // makes the backend unusable here, not a call that fails later.
    layout.landlockScope = scopes_available();
    // The stage's mount path is part of what must work: it is tried on a private tmpfs over
    // the per-user temp base, which is made for that (where it cannot be, only the rest).
    std::string why;
    const std::string base = landlock::private_temp_base(geteuid());
    if (linux_runner::prepare_private_base(base, why))
        if (auto id = posix::directory_identity(base, why)) {
            layout.privateTemp = base;
            layout.tempDirId = id->text();
        }
    const posix::SpawnOutcome outcome = posix::spawn_with_timeout(build_argv(layout, {truth.path}, probe_policy), timeout_ms);
    if (!outcome.started) return Expected<Usable>::failure(outcome.error);
    if (outcome.timedOut) return Expected<Usable>::failure("the probe did not finish within " + std::to_string(timeout_ms) + " ms");
    if (outcome.exitCode == 0) return Usable{};
    std::string first = outcome.output.substr(0, outcome.output.find('\n'));
    return Expected<Usable>::failure("the probe exited with " + std::to_string(outcome.exitCode) +
                                     (first.empty() ? "" : ": " + first));
}

std::string BwrapBackend::probe_identity() const {
    return "runner=" + runner_ + "\nrunner-id=" + linux_host::file_identity(runner_) + "\nstage=" + stage_ +
           "\nstage-id=" + linux_host::file_identity(stage_) + "\n" + linux_host::host_identity();
}

Expected<ConfinedArgv> BwrapBackend::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    if (auto present = check(); !present) return Expected<ConfinedArgv>::failure(present.reason());
    for (const std::string* file : {&runner_, &stage_})
        if (auto place = inside_writable(*file, policy))
            return Expected<ConfinedArgv>::failure(*file + " lies inside " + *place +
                                                   ", which a confined command may write: it could be replaced there");
    Layout layout{runner_, stage_, cwd_, geteuid() == 0};
    layout.keepFds = policy.keepFds;
    layout.landlockScope = scopes_available();
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        std::string why;
        // A call brings the identity it resolved (the stage checks it); only a policy made
        // without one (the probe, doctor --verify) has it taken here.
        if (policy.workspaceRootId) {
            layout.workspaceRootId = *policy.workspaceRootId;
        } else {
            const auto root = posix::directory_identity(policy.workspaceRoot, why);
            if (!root) return Expected<ConfinedArgv>::failure("the workspace root " + why);
            layout.workspaceRootId = root->text();
        }
        std::string temp = policy.sessionTempDir.value_or("");
        if (temp.empty()) {
            temp = landlock::private_temp_base(geteuid());
            if (!linux_runner::prepare_private_base(temp, why)) return Expected<ConfinedArgv>::failure(why);
            layout.privateTemp = temp;
        }
        const auto temp_id = posix::directory_identity(temp, why);
        if (!temp_id) throw Error(code::State, "the temp area " + why);
        layout.tempDirId = temp_id->text();
        for (const auto& writable : policy.writableRoots) {
            const auto id = posix::directory_identity(writable, why);
            if (!id) throw Error(code::WorkspaceRoot, "the writable root " + why);  // a race, not an unusable backend
            layout.writableRootIds.push_back(id->text());
        }
    }
    ConfinedArgv out;
    out.argv = build_argv(layout, argv, policy);
    out.backend = name();
    out.enforcementGaps = enforcement_gaps(layout);
    // The stage that restores the repositories when the call ends must outlive the command: only
    // Landlock's signal scope (ABI 6) keeps the command from killing it first.
    if (policy.git.bounded)
        out.enforcementGaps.push_back("git: the writable roots hold more git directories than one plan looks at; those "
                                      "beyond it are not protected");
    if (!policy.git.checkedAtEnd.empty() && linux_host::landlock_abi() < 6)
        out.enforcementGaps.push_back("git: without Landlock's signal scope (ABI 6) the command can kill the stage before "
                                      "it restores a repository the command left invalid");
    out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    out.denialSignatures = bwrap::denial_signatures(policy);
    out.runnerFailureRules = dialect().runnerFailureRules;
    out.writableRoots = writable_roots(policy, layout);
    out.passedFds = {0, 1, 2};
    out.passedFds.insert(out.passedFds.end(), policy.keepFds.begin(), policy.keepFds.end());
    out.protectedPaths = policy.protectedPaths;
    out.unreadablePaths = policy.unreadablePaths;
    out.network = policy.network;
    out.allowHosts = policy.allowHosts;
    out.git = policy.git;
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
    Layout layout;
    layout.landlockScope = scopes_available();
    out.enforcementGaps = enforcement_gaps(layout);
    out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    // Nothing beyond bubblewrap itself: the network namespace is the one `deny` uses.
    out.hostsNetwork.available = true;
    out.hostsNetwork.reason.clear();
    out.hostsNetwork.enforcement = SandboxEnforcement::Full;
    out.hostsNetwork.mechanism =
        "a network namespace of its own, whose loopback holds only the proxy's listeners (127.0.0.1 and ::1, port " +
        std::to_string(proxy::kSandboxPort) + "), served by the proxy outside; the seccomp filter refuses UDP, raw and "
        "every socket family but netlink and TCP";
    return out;
}

}  // namespace dsh::bwrap
