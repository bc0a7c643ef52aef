// The main job, `dsh-confine [OPTIONS] -- PROGRAM`, and `--print`: the plan of a call
// (plan_call, which `run` shares), then exec or print it. The host's side of the confine
// step (PATH lookup, the backends' view of the call, the probe cache, the session's temp
// area) is filled in here from platform/.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "../lib/config.hpp"
#include "../lib/confine.hpp"
#include "../lib/error.hpp"
#include "../lib/plan.hpp"
#include "../lib/policy.hpp"
#include "../platform/platform.hpp"
#include "../platform/posix/process.hpp"
#include "../platform/posix/safe_path.hpp"
#include "../platform/posix/state_store.hpp"
#include "common.hpp"

namespace dsh::cli {
namespace {

// As env(1) does: the line, then 127 (not found) or 126 (not executable) rather than 125.
[[noreturn]] void exit_unrunnable(const ConfineFailure& failure, const std::string& program) {
    std::string message = failure.message;
    if (failure.code == code::CommandNotFound) {
        // A subcommand misspelt, or `help`, reads as a PROGRAM: say what was probably meant.
        static const std::vector<std::string> subcommands = {"run", "policy", "classify", "doctor", "session"};
        if (program == "help") message += " (dsh-confine's own help: dsh-confine --help)";
        else if (auto close = did_you_mean(program, subcommands)) message += " (did you mean the subcommand '" + *close + "'?)";
    }
    std::fprintf(stderr, "dsh-confine: error: %s: %s\n", failure.code.c_str(), message.c_str());
    throw ExitStatus{failure.code == code::CommandNotFound ? 127 : 126, failure.code, message};
}

ProgramLocation find_program(const std::string& program) {
    const posix::ProgramLookup found = posix::resolve_program(program);
    const ProgramStatus status = found.status == posix::Lookup::Found      ? ProgramStatus::Found
                                 : found.status == posix::Lookup::NotFound ? ProgramStatus::NotFound
                                                                           : ProgramStatus::NotExecutable;
    return {status, found.path};
}

// platform::make_backend with the host's view of one call. That view is found once, when the
// first backend is built, as it depends on the mode: dsh-confine's own files matter only where
// the command may write (every backend guards them in workspace-write alone), so read-only
// skips finding them (a dozen path lookups).
class PlatformBackends : public BackendFactory {
public:
    explicit PlatformBackends(const Config& config) : config_(config) {}

    std::shared_ptr<const Backend> make(const std::string& name, const SandboxPolicy& policy) override {
        if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) return platform::make_backend(name, config_, workspace_write_host());
        if (!readOnlyHost_) {
            readOnlyHost_.emplace();
            readOnlyHost_->cwd = current_dir();
        }
        return platform::make_backend(name, config_, *readOnlyHost_);
    }
    std::string system_name() const override { return platform::system_name(); }

    // The workspace-write view, found once: the own-paths check of confine_call asks for it
    // before the first backend is built.
    const platform::HostContext& workspace_write_host() {
        if (!writeHost_) writeHost_ = host_context(config_);
        return *writeHost_;
    }

private:
    const Config& config_;
    std::optional<platform::HostContext> readOnlyHost_;
    std::optional<platform::HostContext> writeHost_;
};

// SANDBOX_UNAVAILABLE with --print --format json also puts the candidates on stdout, for scripts.
void print_unavailable(const ConfineFailure& failure, const SandboxExecutionPolicy& policy) {
    nlohmann::ordered_json error;
    error["error"]["code"] = failure.code;
    error["error"]["message"] = failure.message;
    nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
    for (const auto& r : failure.candidates) candidates.push_back({{"backend", r.backend}, {"reason", r.reason}});
    error["error"]["candidates"] = candidates;
    error["policy"] = policy_json(policy);
    write_out(error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

void require_open_fds(const std::vector<int>& fds) {
    for (int fd : fds)
        if (fcntl(fd, F_GETFD) < 0) throw Error(code::Usage, "--keep-fd " + std::to_string(fd) + " is not an open file descriptor");
}

Planned plan_call(const PolicyOptions& options, const std::vector<std::string>& argv, bool json_errors,
                  std::optional<SandboxExecutionPolicy>* resolved) {
    if (argv.empty()) throw Error(code::Usage, "no PROGRAM given (usage: dsh-confine [OPTIONS] [--] PROGRAM [ARG...])");
    Planned out{resolve(options), {}, std::nullopt};
    if (resolved) *resolved = out.resolved.policy;
    const Config& config = out.resolved.config;

    PlatformBackends backends(config);
    std::optional<posix::FileProbeCache> cache;
    if (config.probeCache)
        if (auto dir = cache_dir()) cache.emplace(*dir);
    // resolve() found the state directory already: a call with a session has one.
    std::optional<posix::StateDirStorage> storage;
    if (out.resolved.policy.sessionId) storage.emplace(state_dir());
    ConfineHost host{backends, platform::default_backend_chain(), find_program, storage ? &*storage : nullptr,
                     cache ? &*cache : nullptr};
    host.ownPaths = [&backends] {
        std::vector<std::string> own = backends.workspace_write_host().protectedPaths;
        for (const auto& base : platform::private_temp_bases()) own.push_back(base);
        return own;
    };

    // Refusing beats ignoring: an option that cannot take effect in the resolved mode is an error.
    const SandboxMode mode = out.resolved.policy.mode;
    std::vector<std::string> ignored;
    if (mode == SandboxMode::DangerFullAccess) {
        if (!options.backend.empty()) ignored.push_back("--backend");
        if (options.requireFull) ignored.push_back("--require-full");
        if (!options.writableRoots.empty()) ignored.push_back("--writable-root");
        if (!options.denyRead.empty()) ignored.push_back("--deny-read");
        if (options.network == "deny") ignored.push_back("--network deny");
        if (options.network == "hosts") ignored.push_back("--network hosts");
        if (!options.allowHosts.empty()) ignored.push_back("--allow-host");
        if (!ignored.empty())
            throw Error(code::Usage, ignored.front() + " cannot apply in danger-full-access, where nothing is confined "
                                     "(drop it, or choose a confined mode)");
    }
    if (mode == SandboxMode::ReadOnly && !options.writableRoots.empty())
        throw Error(code::Usage, "--writable-root applies in workspace-write only; this call is read-only");

    // The root's identity is taken once, here (a session recorded it when it started), and the
    // runners check it where they use the root. A backend that took it again could only fail in a
    // race with a command that swaps the root's path, and its failure would pass the call on to
    // the next backend of the chain: the swapping command would choose the backend.
    if (mode == SandboxMode::WorkspaceWrite && !out.resolved.policy.workspaceRootId) {
        std::string why;
        out.resolved.policy.workspaceRootId = posix::NoSymlinkIdentity().of(out.resolved.policy.workspaceRoot, why);
        if (!out.resolved.policy.workspaceRootId) throw Error(code::WorkspaceRoot, "the workspace root " + why);
    }
    ConfineRequest request{out.resolved.policy, argv, std::nullopt, options.requireFull};
    request.keepFds = options.keepFds;
    request.allowBroadRoots = options.allowBroadRoot || config.allowBroadRoots;
    // Only workspace-write's roots are checked against the home directory (broad roots).
    if (const char* home = std::getenv("HOME"); home && *home == '/' && mode == SandboxMode::WorkspaceWrite) {
        std::error_code ec;
        const std::filesystem::path canonical = std::filesystem::canonical(home, ec);
        host.home = ec ? std::string(home) : canonical.string();
    }
    if (!options.backend.empty()) request.backend = options.backend;
    ConfineOutcome outcome = confine_call(request, config, host);
    if (outcome.failure) {
        const ConfineFailure& failure = *outcome.failure;
        if (failure.code == code::CommandNotFound || failure.code == code::CommandNotExecutable)
            exit_unrunnable(failure, argv.front());
        if (failure.code == code::SandboxUnavailable) {
            if (json_errors) print_unavailable(failure, out.resolved.policy);
            for (const auto& r : failure.candidates) spdlog::info("backend {}: {}", r.backend, r.reason);
        }
        throw Error(failure.code, failure.message);
    }
    out.plan = std::move(*outcome.plan);
    out.confinedPolicy = std::move(outcome.providerPolicy);
    return out;
}

int run_exec(const PolicyOptions& options, const std::vector<std::string>& argv) {
    require_open_fds(options.keepFds);
    Planned planned = plan_call(options, argv, false);
    if (!planned.plan.confined) {
        const ProgramLocation program = find_program(argv.front());
        if (auto unrunnable = unrunnable_program(argv.front(), program)) exit_unrunnable(*unrunnable, argv.front());
        std::fflush(stdout);
        posix::exec_argv(program.path, argv);
        const int error = errno;
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: %s\n", argv.front().c_str(), std::strerror(error));
        return error == ENOENT ? 127 : 126;
    }
    if (spdlog::should_log(spdlog::level::info))  // the argv is joined only when it is logged
        spdlog::info("exec through {}: {}", planned.plan.confined->backend, shell_join(planned.plan.confined->argv));
    return platform::exec_plan(*planned.plan.confined, *planned.confinedPolicy, argv, planned.resolved.config);
}

int run_print(const PolicyOptions& options, const std::string& format, const std::vector<std::string>& argv) {
    if (format != "json" && format != "shell")
        throw Error(code::Usage, "--format must be json or shell, not '" + format + "'");
    Planned planned = plan_call(options, argv, format == "json");
    write_out(format == "json" ? render_plan_json(planned.plan) : render_plan_shell(planned.plan));
    return 0;
}

}  // namespace dsh::cli
