// The command line: parses with CLI11, turns each subcommand's outcome into an exit status,
// and prints every failure of dsh-confine itself as one `dsh-confine: error: CODE: message`
// line with status 125. stdout carries only the product (plan, policy, verdict, report).
#include "app.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>

#include <CLI/CLI.hpp>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "../lib/classify.hpp"
#include "../lib/config.hpp"
#include "../lib/error.hpp"
#include "../lib/plan.hpp"
#include "../lib/policy.hpp"
#include "../lib/provider.hpp"
#include "../lib/session.hpp"
#include "../platform/platform.hpp"
#include "../platform/posix/process.hpp"
#include "../platform/posix/safe_path.hpp"
#include "../platform/posix/state_store.hpp"
#include "common.hpp"
#include "verify.hpp"
#include "version.hpp"

namespace dsh::cli {
namespace {

std::optional<std::string> env(const char* name) {
    const char* value = std::getenv(name);
    if (!value || !*value) return std::nullopt;
    return std::string(value);
}

std::string joined(const std::string& base, const char* tail) { return (std::filesystem::path(base) / tail).string(); }

// The XDG base directory spec: a relative $XDG_* value is ignored. On Windows, where neither is
// usually set, %LOCALAPPDATA%\dsh-confine\WINDOWS_LEAF comes last.
std::string home_relative(const char* xdg, const char* fallback, const char* windows_leaf, const char* what) {
    if (auto base = env(xdg); base && is_absolute_path(*base)) return joined(*base, "dsh-confine");
    if (auto home = env("HOME"); home && is_absolute_path(*home)) return joined(joined(*home, fallback), "dsh-confine");
#if defined(_WIN32)
    if (auto local = env("LOCALAPPDATA"); local && is_absolute_path(*local))
        return joined(joined(*local, "dsh-confine"), windows_leaf);
    throw Error(code::State, std::string("neither $") + xdg + ", $HOME nor %LOCALAPPDATA% is an absolute path: no place for the " + what);
#else
    (void)windows_leaf;
    throw Error(code::State, std::string("neither $") + xdg + " nor $HOME is an absolute path: no place for the " + what);
#endif
}

// Where dsh-confine's own config directory is, if anywhere: $XDG_CONFIG_HOME/dsh-confine, else
// ~/.config/dsh-confine, else (Windows) %APPDATA%\dsh-confine.
std::optional<std::string> config_dir() {
    if (auto xdg = env("XDG_CONFIG_HOME")) return joined(*xdg, "dsh-confine");
    if (auto home = env("HOME")) return joined(joined(*home, ".config"), "dsh-confine");
#if defined(_WIN32)
    if (auto roaming = env("APPDATA")) return joined(*roaming, "dsh-confine");
#endif
    return std::nullopt;
}

std::string state_dir() {
    if (auto dir = env("DSH_CONFINE_STATE_DIR")) {
        if (!is_absolute_path(*dir)) throw Error(code::State, "$DSH_CONFINE_STATE_DIR must be an absolute path, not '" + *dir + "'");
        return *dir;
    }
    return home_relative("XDG_STATE_HOME", ".local/state", "state", "state directory");
}

}  // namespace

std::optional<std::string> cache_dir() {
    try {
        return home_relative("XDG_CACHE_HOME", ".cache", "cache", "probe cache");
    } catch (const Error&) {
        return std::nullopt;
    }
}

namespace {

std::string now_utc() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    std::tm parts{};
    gmtime_r(&seconds, &parts);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return text;
}

}  // namespace

std::string current_dir() {
    std::error_code ec;
    auto here = std::filesystem::current_path(ec);
    if (ec) throw Error(code::WorkspaceRoot, "the current directory cannot be read: " + ec.message());
    return here.string();
}

namespace {

// An empty value is refused, never taken for an absent option: `--session "$S"` with S unset
// must not silently run agentless.
const CLI::Validator kNonEmpty(
    [](std::string& value) { return value.empty() ? std::string("must not be empty") : std::string(); }, "NONEMPTY");

std::vector<CLI::Option*> add_policy_options(CLI::App& app, PolicyOptions& options, bool with_backend) {
    std::vector<CLI::Option*> added = {
        app.add_option("--mode", options.mode, "read-only | workspace-write | danger-full-access (an approved explicit mode)")
            ->check(kNonEmpty),
        app.add_option("--workspace-root", options.workspaceRoot, "the directory workspace-write may write under (agentless calls)")
            ->check(kNonEmpty),
        app.add_option("--session", options.session, "the calling session: its cwd is the root, its log the mode")->check(kNonEmpty),
        app.add_option("--config", options.config, "the config file (instead of the lookup order)")->check(kNonEmpty)};
    if (with_backend) {
        added.push_back(app.add_option("--backend", options.backend, "force one backend, no chain (bwrap, landlock, ...)")->check(kNonEmpty));
        added.push_back(app.add_flag("--require-full", options.requireFull, "refuse a plan whose enforcement is partial"));
        added.push_back(app.add_option("--keep-fd", options.keepFds,
                                       "pass descriptor N (above 2) on to the command; every other one is closed (repeatable)")
                            ->check(CLI::Range(3, 1 << 30)));
    }
    return added;
}

}  // namespace

Config load_configuration(const std::string& explicit_file) {
    ConfigLookup lookup;
    if (!explicit_file.empty()) lookup.explicitFile = explicit_file;
    lookup.envFile = env("DSH_CONFINE_CONFIG");
    if (auto dir = config_dir()) lookup.candidates.push_back(joined(*dir, "config.toml"));
    lookup.candidates.push_back("/etc/dsh-confine/config.toml");
    Config config = load_config(lookup);
    spdlog::debug("config: {}", config.source);
    return config;
}

Resolved resolve(const PolicyOptions& options) {
    Resolved out;
    out.config = load_configuration(options.config);
    SandboxPolicyRequest request;
    if (!options.mode.empty()) {
        request.mode = parse_sandbox_mode(options.mode);
        if (!request.mode)
            throw Error(code::Usage, "unknown mode '" + options.mode +
                                         "'; modes: read-only, workspace-write, danger-full-access");
    }
    if (!options.workspaceRoot.empty()) request.workspaceRoot = options.workspaceRoot;
    std::optional<SessionPolicyView> view;
    std::optional<posix::StateDirStorage> storage;
    if (!options.session.empty()) {
        require_valid_session_id(options.session);
        request.sessionId = options.session;
        storage.emplace(state_dir());
        Sessions sessions(*storage);
        SessionState state = [&] {
            try {
                return sessions.show(options.session);
            } catch (const Error& e) {
                if (e.code() == code::Session && std::string(e.what()).rfind("no session", 0) == 0)
                    throw Error(code::Session, "unknown session '" + options.session + "' (start it with 'dsh-confine session start')");
                throw;
            }
        }();
        for (const auto& warning : state.warnings) spdlog::warn("{}", warning);
        // Immutable means the same directory, not the same string: a command in another session
        // may have renamed a component or planted a symlink on the way since.
        require_same_cwd(state, posix::NoSymlinkIdentity());
        out.workspaceRootId = state.cwdId;
        view = SessionPolicyView{state.cwd, state.last_mode()};
    }
    out.policy = resolve_policy(request, view, out.config, current_dir());
    return out;
}

platform::HostContext host_context(const Config& config) {
    platform::HostContext host;
    host.cwd = current_dir();
    std::vector<std::string> own;
    try {
        own.push_back(state_dir());
    } catch (const Error&) {
    }
    if (auto cache = cache_dir()) own.push_back(*cache);
    if (auto dir = config_dir()) own.push_back(*dir);
    if (config.source != "<built-in>") own.push_back(config.source);
    for (const auto& path : own) {
        std::error_code ec;
        const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
        host.protectedPaths.push_back(ec ? path : resolved.string());
    }
    return host;
}

namespace {

std::vector<std::string> chain_for(const PolicyOptions& options, const Config& config) {
    if (!options.backend.empty()) {
        const auto& known = known_backend_names();
        if (std::find(known.begin(), known.end(), options.backend) == known.end()) {
            std::string message = "unknown backend '" + options.backend + "'";
            if (auto close = did_you_mean(options.backend, known)) message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; backends: bwrap, landlock, seatbelt, restricted-token");
        }
        return {options.backend};
    }
    return config.backends.value_or(platform::default_backend_chain());
}

struct ProviderParts {
    std::vector<std::shared_ptr<const Backend>> backends;
    std::vector<CandidateRejection> foreign;  // names that belong to another system
    std::optional<posix::FileProbeCache> cache;
};

ProviderParts build_provider(const std::vector<std::string>& chain, const Config& config,
                             const platform::HostContext& host) {
    ProviderParts parts;
    for (const auto& name : chain) {
        if (auto backend = platform::make_backend(name, config, host)) parts.backends.push_back(backend);
        else parts.foreign.push_back({name, "not available on " + platform::system_name()});
    }
    if (config.probeCache)
        if (auto dir = cache_dir()) parts.cache.emplace(*dir);
    return parts;
}

void check_program(const std::vector<std::string>& argv, std::string* resolved) {
    const posix::ProgramLookup found = posix::resolve_program(argv.front());
    if (found.status == posix::Lookup::NotFound) {
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_FOUND: %s: not found\n", argv.front().c_str());
        throw ExitStatus{127};
    }
    if (found.status == posix::Lookup::NotExecutable) {
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: permission denied\n", found.path.c_str());
        throw ExitStatus{126};
    }
    if (resolved) *resolved = found.path;
}

}  // namespace

void require_open_fds(const std::vector<int>& fds) {
    for (int fd : fds)
        if (fcntl(fd, F_GETFD) < 0) throw Error(code::Usage, "--keep-fd " + std::to_string(fd) + " is not an open file descriptor");
}

void write_out(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

Planned plan_call(const PolicyOptions& options, const std::vector<std::string>& argv, bool json_errors,
                  std::optional<SandboxExecutionPolicy>* resolved) {
    if (argv.empty()) throw Error(code::Usage, "no PROGRAM given (usage: dsh-confine [OPTIONS] [--] PROGRAM [ARG...])");
    Planned out{resolve(options), {}, std::nullopt};
    if (resolved) *resolved = out.resolved.policy;
    const std::vector<std::string> chain = chain_for(options, out.resolved.config);  // a bad --backend is an error in every mode
    check_program(argv, nullptr);
    const std::optional<ConfinedSandboxMode> mode = confined(out.resolved.policy.mode);
    if (!mode) {
        out.plan = unconfined_plan(out.resolved.policy, argv);
        return out;
    }
    // dsh-confine's own files matter only where the command may write: every backend guards
    // them in workspace-write alone. Read-only skips finding them (a dozen path lookups).
    platform::HostContext host;
    if (*mode == ConfinedSandboxMode::WorkspaceWrite) {
        host = host_context(out.resolved.config);
        // dsh-confine's own files decide the policy of later calls (the session log, the probe
        // cache, the config) and hold the private temp areas: a root the command may write must
        // not contain them, whether they exist yet or not. Refusing beats guarding them inside.
        std::vector<std::string> own = host.protectedPaths;
        for (const auto& base : platform::private_temp_bases()) own.push_back(base);
        for (const auto& path : own)
            if (!paths_within({path}, out.resolved.policy.workspaceRoot).empty())
                throw Error(code::OwnStateInRoot, "the workspace root " + out.resolved.policy.workspaceRoot + " contains " + path +
                                                      ", dsh-confine's own state or configuration, which a confined "
                                                      "command must not be able to write; choose a root that does not "
                                                      "contain it, or move the state elsewhere ($DSH_CONFINE_STATE_DIR, "
                                                      "$XDG_CACHE_HOME, $XDG_CONFIG_HOME)");
    } else {
        host.cwd = current_dir();
    }
    if (out.resolved.policy.sessionId && *mode == ConfinedSandboxMode::WorkspaceWrite) {
        // The session's temp area is made on its first confined use (not by `policy`).
        posix::StateDirStorage storage(state_dir());
        out.resolved.sessionTempDir = Sessions(storage).temp_dir(*out.resolved.policy.sessionId);
    }
    SandboxPolicy policy{*mode, out.resolved.policy.workspaceRoot, out.resolved.policy.sessionId,
                         out.resolved.sessionTempDir};
    policy.keepFds = options.keepFds;
    policy.workspaceRootId = out.resolved.workspaceRootId;
    // The root's identity is taken once, here (a session recorded it when it started), and the
    // runners check it where they use the root. A backend that took it again could only fail in
    // a race with a command that swaps the root's path, and its failure would pass the call on
    // to the next backend of the chain: the swapping command would choose the backend.
    if (*mode == ConfinedSandboxMode::WorkspaceWrite && !policy.workspaceRootId) {
        std::string why;
        policy.workspaceRootId = posix::NoSymlinkIdentity().of(policy.workspaceRoot, why);
        if (!policy.workspaceRootId) throw Error(code::WorkspaceRoot, "the workspace root " + why);
    }
    std::sort(policy.keepFds.begin(), policy.keepFds.end());
    policy.keepFds.erase(std::unique(policy.keepFds.begin(), policy.keepFds.end()), policy.keepFds.end());
    ProviderParts parts = build_provider(chain, out.resolved.config, host);
    SandboxProvider provider(parts.backends, parts.cache ? &*parts.cache : nullptr, out.resolved.config.probeTimeoutMs);
    ProviderResult result = provider.confine(argv, policy);
    if (!result.confined) {
        std::vector<CandidateRejection> rejected = parts.foreign;
        rejected.insert(rejected.end(), result.rejected.begin(), result.rejected.end());
        const std::string message = describe_rejections(rejected);
        if (json_errors) {
            nlohmann::ordered_json error;
            error["error"]["code"] = code::SandboxUnavailable;
            error["error"]["message"] = message;
            nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
            for (const auto& r : rejected) candidates.push_back({{"backend", r.backend}, {"reason", r.reason}});
            error["error"]["candidates"] = candidates;
            error["policy"] = policy_json(out.resolved.policy);
            write_out(error.dump() + "\n");
        }
        for (const auto& r : rejected) spdlog::info("backend {}: {}", r.backend, r.reason);
        throw Error(code::SandboxUnavailable, message);
    }
    if (options.requireFull && result.confined->enforcement == SandboxEnforcement::Partial) {
        std::string gaps;
        for (const auto& gap : result.confined->enforcementGaps) gaps += (gaps.empty() ? "" : "; ") + gap;
        throw Error(code::EnforcementPartial, "--require-full: backend " + result.confined->backend +
                                                  " enforces this policy only partially: " + gaps);
    }
    out.confinedPolicy = policy;
    out.plan = confined_plan(out.resolved.policy, std::move(*result.confined));
    return out;
}

namespace {

int run_exec(const PolicyOptions& options, const std::vector<std::string>& argv) {
    require_open_fds(options.keepFds);
    Planned planned = plan_call(options, argv, false);
    if (!planned.plan.confined) {
        std::string path;
        check_program(argv, &path);
        std::fflush(stdout);
        posix::exec_argv(path, argv);
        const int error = errno;
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: %s\n", argv.front().c_str(), std::strerror(error));
        return error == ENOENT ? 127 : 126;
    }
    spdlog::debug("exec through {}", planned.plan.confined->backend);
    return platform::exec_plan(*planned.plan.confined, *planned.confinedPolicy, argv, planned.resolved.config);
}

int run_print(const PolicyOptions& options, const std::string& format, const std::vector<std::string>& argv) {
    if (format != "json" && format != "shell")
        throw Error(code::Usage, "--format must be json or shell, not '" + format + "'");
    Planned planned = plan_call(options, argv, format == "json");
    write_out(format == "json" ? render_plan_json(planned.plan) : render_plan_shell(planned.plan));
    return 0;
}

int run_policy(const PolicyOptions& options) {
    Resolved resolved = resolve(options);
    write_out(policy_json(resolved.policy).dump() + "\n");
    return 0;
}

int parse_exit_code(const std::string& text) {
    if (text.empty()) throw Error(code::Usage, "--exit-code needs a number from 0 to 255");
    std::size_t used = 0;
    long value = -1;
    try {
        value = std::stol(text, &used, 10);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || text.front() == '+' || std::isspace(static_cast<unsigned char>(text.front())))
        throw Error(code::Usage, "--exit-code '" + text + "' is not a number");
    if (value < 0 || value > 255) throw Error(code::Usage, "--exit-code " + text + " is out of range (0-255)");
    return static_cast<int>(value);
}

std::string read_small_file(const std::string& path, const char* code_name) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(code_name, path + ": cannot be read");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return text;
}

int run_classify(const std::string& plan_file, const std::string& backend, const std::string& exit_code_text,
                 const std::string& stderr_file, const std::string& format, const std::string& config_file) {
    if (plan_file.empty() == backend.empty())
        throw Error(code::Usage, "classify needs exactly one of --plan FILE or --backend NAME");
    if (format != "text" && format != "json") throw Error(code::Usage, "--format must be text or json, not '" + format + "'");
    const int exit_code = parse_exit_code(exit_code_text);
    Dialect dialect;
    if (!plan_file.empty()) {
        dialect = parse_dialect(read_small_file(plan_file, code::Plan), plan_file);
    } else {
        const Config config = load_configuration(config_file);
        auto made = platform::make_backend(backend, config, platform::HostContext{"/", {}});
        if (!made) {
            const auto& known = known_backend_names();
            if (std::find(known.begin(), known.end(), backend) == known.end()) {
                std::string message = "unknown backend '" + backend + "'";
                if (auto close = did_you_mean(backend, known)) message += " (did you mean '" + *close + "'?)";
                throw Error(code::Usage, message);
            }
            throw Error(code::Usage, "backend '" + backend + "' is not available on " + platform::system_name());
        }
        dialect = made->dialect();
    }
    StreamClassifier classifier(dialect);
    std::FILE* input = stdin;
    if (!stderr_file.empty()) {
        input = std::fopen(stderr_file.c_str(), "rb");
        if (!input) throw Error(code::Input, stderr_file + ": " + std::strerror(errno));
    }
    // Large reads, as the classifier skips whole lines in bulk; left uninitialized, so a short
    // stderr touches one page of it, not 256.
    constexpr std::size_t kReadSize = 1 << 20;
    const std::unique_ptr<char[]> buffer(new char[kReadSize]);
    while (true) {
        const std::size_t n = std::fread(buffer.get(), 1, kReadSize, input);
        if (n > 0) classifier.feed(std::string_view(buffer.get(), n));
        if (n < kReadSize) {
            if (std::ferror(input)) throw Error(code::Input, (stderr_file.empty() ? "stdin" : stderr_file) + ": read error");
            break;
        }
    }
    if (input != stdin) std::fclose(input);
    const Classification result = classifier.finish(exit_code);
    write_out(format == "json" ? render_json(result) : render_text(result));
    return 0;
}

int run_session(const std::string& action, const std::string& id, const std::string& argument) {
    posix::StateDirStorage storage(state_dir());
    const posix::NoSymlinkIdentity identity;
    Sessions sessions(storage, &identity);
    if (action == "start") {
        const bool created = sessions.start(id, argument);
        spdlog::info("session '{}' {}", id, created ? "started" : "already started with this cwd");
        return 0;
    }
    if (action == "mode") {
        auto mode = parse_sandbox_mode(argument);
        if (!mode) throw Error(code::Usage, "unknown mode '" + argument + "'; modes: read-only, workspace-write, danger-full-access");
        sessions.set_mode(id, *mode, now_utc());
        return 0;
    }
    if (action == "show") {
        SessionState state = sessions.show(id);
        for (const auto& warning : state.warnings) spdlog::warn("{}", warning);
        nlohmann::ordered_json out;
        out["sessionId"] = state.id;
        out["cwd"] = state.cwd;
        auto last = state.last_mode();
        out["mode"] = last ? nlohmann::ordered_json(std::string(to_string(*last))) : nlohmann::ordered_json(nullptr);
        nlohmann::ordered_json events = nlohmann::ordered_json::array();
        for (const auto& event : state.events)
            events.push_back({{"type", "sandbox/mode"}, {"mode", std::string(to_string(event.mode))}, {"at", event.at}});
        out["events"] = events;
        write_out(out.dump() + "\n");
        return 0;
    }
    sessions.end(id);
    return 0;
}

void setup_logging() {
    auto logger = spdlog::stderr_color_mt("dsh-confine");
    logger->set_pattern("dsh-confine: %l: %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::warn);
    spdlog::cfg::load_env_levels();
}

void apply_verbosity(int verbose, const std::string& level) {
    if (!level.empty()) {
        const auto parsed = spdlog::level::from_str(level);
        if (parsed == spdlog::level::off && level != "off")
            throw Error(code::Usage, "--log-level must be one of trace, debug, info, warn, error, critical, off");
        spdlog::set_level(parsed);
    } else if (verbose > 0) {
        spdlog::set_level(verbose >= 3 ? spdlog::level::trace : verbose == 2 ? spdlog::level::debug : spdlog::level::info);
    }
}

// PROGRAM is what follows the first `--`, or what CLI11 left over where parsing stopped at
// the first word that is not an option (a prefix command). Before a `--`, a word that starts
// with '-' is an option dsh-confine does not know, not a program name.
struct CommandLine {
    std::vector<const char*> front;               // what CLI11 parses
    std::optional<std::vector<std::string>> tail;  // after the first `--`
};

CommandLine split_at_dashes(int argc, char** argv) {
    CommandLine out;
    for (int i = 0; i < argc; ++i) {
        if (i > 0 && std::string_view(argv[i]) == "--") {
            out.tail.emplace(argv + i + 1, argv + argc);
            break;
        }
        out.front.push_back(argv[i]);
    }
    return out;
}

std::vector<std::string> program_words(const CLI::App& app, const CLI::App* sub, const CommandLine& line) {
    std::vector<std::string> rest = sub ? sub->remaining() : std::vector<std::string>{};
    for (const auto& word : app.remaining()) rest.push_back(word);
    if (!rest.empty() && rest.front().size() > 1 && rest.front().front() == '-')
        throw Error(code::Usage, "unknown option '" + rest.front() + "' (put PROGRAM after '--' if it starts with '-')");
    if (line.tail) {
        if (!rest.empty()) rest.push_back("--");  // the `--` belongs to the program's own arguments
        rest.insert(rest.end(), line.tail->begin(), line.tail->end());
    }
    return rest;
}

const char* kExamples = R"(
Examples:
  dsh-confine --mode read-only -- bash -c 'cat /etc/os-release'
  dsh-confine --mode workspace-write --workspace-root "$PWD" -- make
  dsh-confine --print --format shell --mode read-only -- ls -la
  dsh-confine run --mode workspace-write -- npm test
  dsh-confine classify --backend bwrap --exit-code 1 --stderr err.txt
  dsh-confine session start s1 --cwd "$PWD" && dsh-confine session mode s1 workspace-write
  dsh-confine doctor --verify
Exit status: the command's own; 125 when dsh-confine itself failed (nothing ran);
126/127 when PROGRAM is not executable / not found.
)";

// The subcommands and the values their options fill (docs/performance.md: building a dozen option
// tables the call never parses was a measurable part of start-up).
struct Subcommands {
    CLI::App* run = nullptr;
    CLI::App* policy = nullptr;
    CLI::App* classify = nullptr;
    CLI::App* doctor = nullptr;
    CLI::App* session = nullptr;
    CLI::App* start = nullptr;
    CLI::App* mode = nullptr;
    CLI::App* show = nullptr;
    CLI::App* end = nullptr;
    CLI::App* landlock = nullptr;
    CLI::App* token = nullptr;
    CLI::App* effect = nullptr;

    PolicyOptions runOptions;
    std::string reportFile;
    int reportFd = -1;
    PolicyOptions policyOptions;
    std::string planFile, classifyBackend, exitCode, stderrFile, classifyFormat = "text", classifyConfig;
    DoctorOptions doctorOptions;
    std::string sessionId, sessionArg;
    platform::LandlockExecRequest ll;
    CLI::App* stage = nullptr;
    platform::BwrapStageRequest bs;
    platform::RestrictedTokenExecRequest rt;
};

bool parsed(const CLI::App* sub) { return sub != nullptr && sub->parsed(); }

// Adds the subcommands LINE names, or all of them when LINE is null (for help). A subcommand
// whose name is not on the command line can never be parsed, so leaving it out changes nothing
// but the cost: the main job, `dsh-confine [OPTIONS] -- PROGRAM`, builds none of them.
void add_subcommands(CLI::App& app, Subcommands& c, const CommandLine* line) {
    const auto wanted = [line](std::string_view name) {
        if (line == nullptr) return true;
        for (std::size_t i = 1; i < line->front.size(); ++i)
            if (name == line->front[i]) return true;
        return false;
    };
    if (wanted("run")) {
        c.run = app.add_subcommand("run", "spawn the command confined, pass its output through, attribute the result");
        add_policy_options(*c.run, c.runOptions, true);
        c.run->add_option("--report", c.reportFile, "write the JSON report to FILE");
        c.run->add_option("--report-fd", c.reportFd, "write the JSON report to file descriptor N");
        c.run->prefix_command();
        c.run->footer("\nExamples:\n  dsh-confine run --mode workspace-write --workspace-root \"$PWD\" --report report.json -- npm test\n"
                        "  dsh-confine run --report-fd 3 -- make 3>report.json\n"
                        "Exit status: the command's own (128+N after signal N); 125 when the sandbox never started it\n"
                        "(RUNNER_FAILURE) or dsh-confine itself failed.\n");
    }
    if (wanted("policy")) {
        c.policy = app.add_subcommand("policy", "print the resolved execution policy (JSON)");
        add_policy_options(*c.policy, c.policyOptions, false);
        c.policy->footer("\nExamples:\n  dsh-confine policy\n  dsh-confine policy --session s1\n"
                           "  dsh-confine policy --config ./config.toml --mode workspace-write --workspace-root \"$PWD\"\n");
    }
    if (wanted("classify")) {
        c.classify = app.add_subcommand("classify", "classify a failed run from its stderr and exit code");
        c.classify->add_option("--plan", c.planFile, "a plan printed by --print --format json");
        c.classify->add_option("--backend", c.classifyBackend, "use this backend's dialect instead of a plan");
        c.classify->add_option("--exit-code", c.exitCode, "the run's exit status (0-255)")->required();
        c.classify->add_option("--stderr", c.stderrFile, "read stderr from FILE (default: stdin)");
        c.classify->add_option("--format", c.classifyFormat, "text (default) or json");
        c.classify->add_option("--config", c.classifyConfig, "the config file (extra informational lines)");
        c.classify->footer("\nExamples:\n  make 2>err.txt; dsh-confine classify --backend bwrap --exit-code $? --stderr err.txt\n"
                             "  dsh-confine --print -- make >plan.json; ... | dsh-confine classify --plan plan.json --exit-code 1 --format json\n");
    }
    if (wanted("doctor")) {
        c.doctor = app.add_subcommand("doctor", "backends on this host, probe results, enforcement");
        c.doctor->add_flag("--json", c.doctorOptions.json, "print JSON");
        c.doctor->add_flag("--verify", c.doctorOptions.verify, "run denied and allowed effects under each usable backend");
        c.doctor->add_option("--config", c.doctorOptions.config, "the config file");
        c.doctor->footer("\nExamples:\n  dsh-confine doctor\n  dsh-confine doctor --json | jq '.backends[] | {name, usable, enforcement}'\n"
                           "  dsh-confine doctor --verify    # in CI: exits 1 if a backend leaks or over-blocks\n");
    }
    if (wanted("session")) {
        c.session = app.add_subcommand("session", "sessions: an immutable cwd and a log of mode events");
        c.session->require_subcommand(1);
        c.start = c.session->add_subcommand("start", "start session ID with its immutable cwd");
        c.start->add_option("ID", c.sessionId, "letters, digits, '.', '_', '-'; at most 128")->required();
        c.start->add_option("--cwd", c.sessionArg, "the session's cwd (absolute); stored canonical, never changed")->required();
        c.start->footer("\nExamples:\n  dsh-confine session start s1 --cwd \"$PWD\"\n"
                          "  dsh-confine session start \"agent-$(date +%s)\" --cwd /srv/checkout\n"
                          "Starting again with the same cwd is a no-op. Exit status: 0; 125 when ID is invalid, was started\n"
                          "with another cwd, or the cwd is not a directory.\n");
        c.mode = c.session->add_subcommand("mode", "log a sandbox/mode event");
        c.mode->add_option("ID", c.sessionId, "an existing session")->required();
        c.mode->add_option("MODE", c.sessionArg, "read-only, workspace-write or danger-full-access")->required();
        c.mode->footer("\nExamples:\n  dsh-confine session mode s1 workspace-write\n"
                         "  dsh-confine session mode s1 read-only && dsh-confine --session s1 -- make check\n"
                         "The last event wins; the log is append-only. Exit status: 0; 125 on a bad ID or MODE.\n");
        c.show = c.session->add_subcommand("show", "print the session (JSON)");
        c.show->add_option("ID", c.sessionId, "an existing session")->required();
        c.show->footer("\nExamples:\n  dsh-confine session show s1\n  dsh-confine session show s1 | jq -r .mode\n");
        c.end = c.session->add_subcommand("end", "end the session and remove what it owns");
        c.end->add_option("ID", c.sessionId, "an existing session")->required();
        c.end->footer("\nExamples:\n  dsh-confine session end s1\n"
                        "Removes the session's log and its private temp directory. Exit status: 0; 125 if it does not exist.\n");
        c.session->footer("\nExamples:\n  dsh-confine session start s1 --cwd \"$PWD\"\n  dsh-confine session mode s1 workspace-write\n"
                            "  dsh-confine --session s1 -- make\n  dsh-confine session end s1\n");
    }
    if (wanted("landlock-exec")) {
        c.landlock = app.add_subcommand("landlock-exec", "the Landlock runner a printed Landlock plan invokes");
        c.landlock->add_option("--mode", c.ll.mode, "read-only or workspace-write")->required();
        c.landlock->add_option("--workspace-root", c.ll.workspaceRoot, "the canonical workspace root")->required();
        c.landlock->add_option("--workspace-root-id", c.ll.workspaceRootId, "DEV:INO the workspace root must still have");
        c.landlock->add_option("--temp-dir", c.ll.tempDir, "a session's private temp directory (writable, kept)");
        c.landlock->add_option("--temp-dir-id", c.ll.tempDirId, "DEV:INO the temp directory must still have");
        c.landlock->add_option("--keep-fd", c.ll.keepFds, "pass descriptor N on to the command (repeatable)");
        c.landlock->add_option("--private-temp-base", c.ll.privateTempBase,
                                 "create a per-call temp directory here, removed when the command ends");
        c.landlock->add_option("--status-fd", c.ll.statusFd, "write 'S' just before exec, 'F' on failure, to fd N");
        c.landlock->add_option("--max-abi", c.ll.maxAbi, "use at most this Landlock ABI (testing older kernels)")
            ->check(CLI::PositiveNumber);
        c.landlock->prefix_command();
        c.landlock->footer("\nA printed Landlock plan calls this; you rarely type it yourself.\n"
                             "Examples:\n  dsh-confine landlock-exec --mode read-only --workspace-root \"$PWD\" -- cat /etc/hostname\n"
                             "  dsh-confine --print --format shell --mode workspace-write -- make   # shows the exact call\n"
                             "Exit status: the command's (it is exec'd in place); 125 (LANDLOCK) when the ruleset could not\n"
                             "be applied, and nothing ran.\n");
    }
    if (wanted("bwrap-stage")) {
        // Run by bubblewrap inside the sandbox (platform/linux/bwrap_stage.hpp): not typed by hand.
        c.stage = app.add_subcommand("bwrap-stage", "");
        c.stage->group("");
        c.stage->add_option("--root", c.bs.roots, "DEV:INO@PATH: a writable root staged by bubblewrap");
        c.stage->add_option("--temp-bind", c.bs.tempBind, "DEV:INO@PATH: the session's temp area");
        c.stage->add_option("--temp-tmpfs", c.bs.tempTmpfs, "DEV:INO@PATH: a private tmpfs over PATH as the temp area");
        c.stage->add_option("--chdir", c.bs.chdir, "where the command runs")->required();
        c.stage->add_option("--status-fd", c.bs.statusFd, "write 'S' just before exec, 'F' on failure, to fd N");
        c.stage->add_option("--keep-fd", c.bs.keepFds, "pass descriptor N on to the command (repeatable)");
        c.stage->prefix_command();
    }
    if (wanted("restricted-token-exec")) {
        c.token = app.add_subcommand("restricted-token-exec", "the Windows runner a printed restricted-token plan invokes");
        c.token->add_option("--mode", c.rt.mode)->required();
        c.token->add_option("--workspace-root", c.rt.workspaceRoot)->required();
        c.token->add_option("--temp-dir", c.rt.tempDir);
        c.token->add_option("--private-temp-base", c.rt.privateTempBase);
        c.token->add_option("--protect", c.rt.protectedPaths, "dsh-confine's own files inside the workspace (repeatable)");
        c.token->prefix_command();
        c.token->footer("\nA printed restricted-token plan calls this on Windows; elsewhere it fails with 125.\n"
                          "Examples:\n  dsh-confine restricted-token-exec --mode workspace-write --workspace-root C:\\src\\app -- cmd /c build.bat\n"
                          "  dsh-confine --print --mode read-only -- cmd /c dir   # shows the exact call\n");
    }
    if (wanted("__effect")) {
        // The effect helper `doctor --verify` runs confined: not part of the interface.
        c.effect = app.add_subcommand("__effect", "");
        c.effect->group("");
        c.effect->prefix_command();
    }
}

// The top level's help (no subcommand selected; a subcommand's help lists only its own) lists
// every subcommand, in the order they were added. So it drops the ones the command line
// happened to name, say as an option's value (`--session doctor --help`), and adds them all.
void add_subcommands_for_help(CLI::App& app, Subcommands& c) {
    if (!app.get_subcommands().empty()) return;
    for (CLI::App* sub : {c.run, c.policy, c.classify, c.doctor, c.session, c.landlock, c.token, c.effect, c.stage})
        if (sub != nullptr) app.remove_subcommand(sub);
    add_subcommands(app, c, nullptr);
}

}  // namespace

int run(int argc, char** argv) {
    setup_logging();
    CLI::App app{"dsh-confine: run an untrusted command under a file-effect policy, and say how completely it is enforced",
                 "dsh-confine"};
    app.footer(kExamples);
    app.set_version_flag("--version", std::string("dsh-confine ") + kVersion);
    app.prefix_command();
    int verbose = 0;
    std::string log_level;
    app.add_flag("-v,--verbose", verbose, "more log output on stderr (repeat for more)");
    app.add_option("--log-level", log_level, "trace, debug, info, warn (default), error, critical, off");

    PolicyOptions main_options;
    std::vector<CLI::Option*> main_only = add_policy_options(app, main_options, true);
    bool print = false;
    std::string format = "json";
    main_only.push_back(app.add_flag("--print", print, "print the plan (wrapped argv and facts); run nothing"));
    main_only.push_back(app.add_option("--format", format, "with --print: json (default) or shell"));
    app.fallthrough();  // -v and --log-level work after a subcommand too

    const CommandLine line = split_at_dashes(argc, argv);
    Subcommands c;
    add_subcommands(app, c, &line);
    try {
        app.parse(static_cast<int>(line.front.size()), line.front.data());
    } catch (const CLI::CallForHelp& e) {
        add_subcommands_for_help(app, c);
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        add_subcommands_for_help(app, c);
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        const char* which = parsed(c.landlock) ? code::Landlock
                            : parsed(c.token)  ? "RESTRICTED_TOKEN"
                            : parsed(c.stage)  ? "BWRAP_STAGE"
                                               : code::Usage;
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", which, e.what());
        return 125;
    }

    try {
        apply_verbosity(verbose, log_level);
        const std::vector<CLI::App*> parsed_subcommands = app.get_subcommands();
        if (!parsed_subcommands.empty()) {
            // The main job's options do not carry over into a subcommand: refusing them beats
            // ignoring them (`dsh-confine --mode bogus policy` must not print a policy).
            for (const CLI::Option* option : main_only)
                if (option->count() > 0)
                    throw Error(code::Usage, option->get_name() + " does not apply to 'dsh-confine " +
                                                 parsed_subcommands.front()->get_name() +
                                                 "' (a subcommand's options go after its name)");
            const CLI::App* sub = parsed_subcommands.front();
            const bool takes_program = sub == c.run || sub == c.landlock || sub == c.token || sub == c.effect || sub == c.stage;
            if (!takes_program && !app.remaining().empty())
                throw Error(code::Usage, "unexpected argument '" + app.remaining().front() + "' for 'dsh-confine " +
                                             sub->get_name() + "'");
        }
        if (parsed(c.landlock)) {
            std::vector<std::string> rest;
            try {
                rest = program_words(app, c.landlock, line);
            } catch (const Error& e) {
                std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: %s\n", e.what());
                return 125;
            }
            if (rest.empty()) {
                std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: no PROGRAM given\n");
                return 125;
            }
            return platform::landlock_exec(c.ll, rest);
        }
        if (parsed(c.stage)) {
            std::vector<std::string> rest;
            try {
                rest = program_words(app, c.stage, line);
            } catch (const Error& e) {
                std::fprintf(stderr, "dsh-confine: error: BWRAP_STAGE: bwrap-stage: %s\n", e.what());
                return 125;
            }
            if (rest.empty()) {
                std::fprintf(stderr, "dsh-confine: error: BWRAP_STAGE: bwrap-stage: no PROGRAM given\n");
                return 125;
            }
            return platform::bwrap_stage(c.bs, rest);
        }
        if (parsed(c.token)) {
            std::vector<std::string> rest;
            try {
                rest = program_words(app, c.token, line);
            } catch (const Error& e) {
                std::fprintf(stderr, "dsh-confine: error: RESTRICTED_TOKEN: restricted-token-exec: %s\n", e.what());
                return 125;
            }
            if (rest.empty()) {
                std::fprintf(stderr, "dsh-confine: error: RESTRICTED_TOKEN: restricted-token-exec: no PROGRAM given\n");
                return 125;
            }
            return platform::restricted_token_exec(c.rt, rest);
        }
        if (parsed(c.effect)) return run_effect_helper(program_words(app, c.effect, line));
        if (parsed(c.run)) {
            return run_confined(c.runOptions, program_words(app, c.run, line), c.reportFile, c.reportFd);
        }
        if (parsed(c.policy)) return run_policy(c.policyOptions);
        if (parsed(c.classify))
            return run_classify(c.planFile, c.classifyBackend, c.exitCode, c.stderrFile, c.classifyFormat, c.classifyConfig);
        if (parsed(c.doctor)) return run_doctor(c.doctorOptions);
        if (parsed(c.session)) {
            const char* action = parsed(c.start) ? "start" : parsed(c.mode) ? "mode" : parsed(c.show) ? "show" : "end";
            return run_session(action, c.sessionId, c.sessionArg);
        }
        const std::vector<std::string> rest = program_words(app, nullptr, line);
        if (print) return run_print(main_options, format, rest);
        return run_exec(main_options, rest);
    } catch (const ExitStatus& status) {
        return status.code;
    } catch (const Error& e) {
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", e.code().c_str(), e.what());
        return 125;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", code::Internal, e.what());
        return 125;
    }
}

}  // namespace dsh::cli
