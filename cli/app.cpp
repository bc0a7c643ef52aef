// The command line: parses with CLI11, dispatches to the subcommand's function (exec.cpp,
// run.cpp, policy_command.cpp, classify_command.cpp, session_command.cpp, doctor.cpp), and
// prints every failure of dsh-confine itself as one `dsh-confine: error: CODE: message` line
// with status 125. stdout carries only the product (plan, policy, verdict, report).
#include "app.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "../lib/config.hpp"
#include "../lib/error.hpp"
#include "../platform/platform.hpp"
#include "common.hpp"
#include "verify.hpp"
#include "version.hpp"

namespace dsh::cli {
namespace {

// An empty value is refused, never taken for an absent option: `--session "$S"` with S unset
// must not silently run agentless.
const CLI::Validator kNonEmpty(
    [](std::string& value) { return value.empty() ? std::string("must not be empty") : std::string(); }, "NONEMPTY");

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

// The options and subcommands a command line names: a word NAME, or NAME=VALUE for an option.
// A (sub)command builds only what its line names, since what is not there can never be parsed,
// so leaving it out changes nothing but the cost (docs/performance.md: building option tables
// the call never parses was a measurable part of start-up). Help, and every message about a bad
// command line (which suggests the options it could have meant), come from a build of them all.
class Named {
public:
    explicit Named(const CommandLine* line) : everything_(line == nullptr) {  // null: everything
        if (line == nullptr) return;
        // Each word once, each option's looked up in them: a line of many words (a long
        // allow-list) is not scanned again for every option there is.
        names_.reserve(line->front.size());
        for (std::size_t i = 1; i < line->front.size(); ++i) {
            const std::string_view word = line->front[i];
            names_.insert(word.substr(0, word.find('=')));
        }
    }
    bool operator()(std::string_view name) const { return everything_ || names_.count(name) != 0; }
    bool everything() const { return everything_; }

private:
    bool everything_;
    std::unordered_set<std::string_view> names_;  // the words before `--`, each up to its first '='
};

template <class T>
constexpr bool kIsVector = false;
template <class T>
constexpr bool kIsVector<std::vector<T>> = true;

// A repeatable option takes one value each time it is given, as its help says: `--deny-read
// /etc cat /etc/passwd` runs cat. CLI11 lets a vector option go on taking words up to the next
// option, which would take a PROGRAM that follows without `--` for more values (and costs a
// lookup of every word it takes; docs/performance.md).
CLI::Option* once_each(CLI::Option* option) {
    return option->expected(1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// The policy options NAMED names (all of them for help and messages), in the order help lists them.
std::vector<CLI::Option*> add_policy_options(CLI::App& app, PolicyOptions& options, bool with_backend, const Named& named) {
    std::vector<CLI::Option*> added;
    const auto text = [&](const char* name, auto& value, const char* description) {
        if (!named(name)) return;
        CLI::Option* option = app.add_option(name, value, description)->check(kNonEmpty);
        if constexpr (kIsVector<std::decay_t<decltype(value)>>) once_each(option);
        added.push_back(option);
    };
    const auto flag = [&](const char* name, bool& value, const char* description) {
        if (named(name)) added.push_back(app.add_flag(name, value, description));
    };
    // An allow-list gives --allow-host a hundred times. CLI11 finds a given option by comparing its
    // name with each option's in the order they were added (help's first), copying their names each
    // time: outside help's pass, which lists the options in its own order, it comes first. And each
    // pattern is taken as it is parsed (trigger_on_parse), so CLI11 does not keep a copy of them all.
    const auto allow_host = [&] {
        if (!named("--allow-host")) return;
        std::vector<std::string>& hosts = options.allowHosts;
        const auto take = [&hosts](const CLI::results_t& given) {
            hosts.insert(hosts.end(), given.begin(), given.end());
            return true;
        };
        CLI::Option* option =
            app.add_option("--allow-host", take,
                           "PATTERN reachable through the proxy: the network's hosts state (host, *.domain, IP; :PORT; repeatable)")
                ->type_name("TEXT")
                ->check(kNonEmpty);
        added.push_back(once_each(option)->trigger_on_parse());
    };
    if (!named.everything() && named("--allow-host")) {
        const CLI::Option* help = app.get_help_ptr();
        const std::string help_name = help ? help->get_name(false, true) : std::string();
        const std::string help_description = help ? help->get_description() : std::string();
        app.set_help_flag();
        allow_host();
        if (!help_name.empty()) app.set_help_flag(help_name, help_description);
    }
    text("--mode", options.mode, "read-only | workspace-write | danger-full-access (an approved explicit mode)");
    text("--workspace-root", options.workspaceRoot, "the directory workspace-write may write under (agentless calls)");
    text("--session", options.session, "the calling session: its cwd is the root, its log the mode");
    text("--config", options.config, "the config file (instead of the lookup order)");
    text("--writable-root", options.writableRoots, "DIR writable beside the workspace in workspace-write (absolute; repeatable)");
    text("--deny-read", options.denyRead, "PATH the command must not read (absolute; repeatable)");
    text("--network", options.network, "allow (default), deny, or hosts: IP traffic and host daemons' sockets");
    if (named.everything()) allow_host();
    text("--git", options.git, "protect (default) | read-only | writable: what the command may do to git's repositories");
    flag("--allow-broad-root", options.allowBroadRoot,
         "let a writable root be /, the home directory or above it, or an operating-system directory "
         "(refused otherwise; /proc, /sys and /dev never)");
    if (with_backend) {
        text("--backend", options.backend, "force one backend, no chain (bwrap, landlock, ...)");
        flag("--require-full", options.requireFull, "refuse a plan whose enforcement is partial");
        if (named("--keep-fd"))
            added.push_back(once_each(app.add_option("--keep-fd", options.keepFds,
                                                     "pass descriptor N (above 2) on to the command; every other one is closed (repeatable)")
                                          ->check(CLI::Range(3, 1 << 30))));
    }
    return added;
}

// The usage lines CLI11 cannot build by itself: the main job and `run` take a PROGRAM after
// their options (a prefix command), which CLI11's own line never shows.
class UsageFormatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App* app, std::string name) const override {
        if (app->get_parent() == nullptr)
            return "\nUsage: dsh-confine [OPTIONS] [--] PROGRAM [ARG...]\n"
                   "       dsh-confine [OPTIONS] --print [--format json|shell] [--] PROGRAM [ARG...]\n"
                   "       dsh-confine SUBCOMMAND [OPTIONS] ...\n";
        if (app->get_name() == "run")
            return "\nUsage: dsh-confine run [OPTIONS] [--report FILE | --report-fd N] [--timeout D] [--limit NAME=VALUE]... [--] PROGRAM [ARG...]\n";
        return CLI::Formatter::make_usage(app, std::move(name));
    }
};

// A subcommand of `app` by name, or nullptr (CLI11 2.1 throws where a lookup fails).
CLI::App* subcommand_named(CLI::App* app, const std::string& name) {
    const auto found = app->get_subcommands([&](CLI::App* s) { return s->get_name() == name; });
    return found.empty() ? nullptr : found.front();
}

// Every subcommand, nested ones included, that help lists.
std::vector<CLI::App*> visible_subcommands(CLI::App& app) {
    std::vector<CLI::App*> out;
    for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) {
        out.push_back(sub);
        for (CLI::App* nested : visible_subcommands(*sub)) out.push_back(nested);
    }
    return out;
}

// Whether a (sub)command takes a PROGRAM after its options: the main job and the subcommands
// that exec one. (CLI11 gives every subcommand its parent's prefix_command(), so that flag
// cannot tell: a session action's ID would read as the start of a PROGRAM.)
bool program_follows(const CLI::App& app) {
    if (app.get_parent() == nullptr) return true;
    const std::string& name = app.get_name();
    return app.get_parent()->get_parent() == nullptr &&
           (name == "run" || name == "landlock-exec" || name == "bwrap-stage" || name == "restricted-token-exec" ||
            name == "__effect");
}

// The first word before `--` that looks like an option none of the (sub)commands it follows
// knows, with the (sub)command's name; empty when there is none.
std::pair<std::string, std::string> first_unknown_option(CLI::App& app, const std::vector<const char*>& words) {
    CLI::App* at = &app;
    std::string where = "dsh-confine";
    for (std::size_t i = 1; i < words.size(); ++i) {
        const std::string word = words[i];
        if (word.size() < 2 || word.front() != '-') {
            CLI::App* sub = subcommand_named(at, word);
            if (sub == nullptr) {
                if (program_follows(*at)) break;  // PROGRAM starts here
                continue;                         // a positional value
            }
            at = sub;
            where += " " + word;
            continue;
        }
        const std::string name = word.substr(0, word.find('='));
        bool known = false;
        for (CLI::App* a = at; a != nullptr && !known; a = a->get_parent())
            known = a->get_option_no_throw(name) != nullptr || name == "-h" || name == "--help" || name == "--version";
        if (!known) return {word, where};
    }
    return {};
}

void setup_logging() {
    // Plain lines (the pattern has no colour range): no terminal check, no colour table.
    auto logger = spdlog::stderr_logger_mt("dsh-confine");
    logger->set_pattern("dsh-confine: %l: %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::warn);
}

// $SPDLOG_LEVEL is read as --log-level is: a value that is not a level is an error, not ignored.
// (spdlog's own reader also takes LOGGER=LEVEL lists, which dsh-confine's one logger has no use for.)
void apply_env_level() {
    const char* level = std::getenv("SPDLOG_LEVEL");
    if (level == nullptr || *level == '\0') return;
    const auto parsed = spdlog::level::from_str(level);
    if (parsed == spdlog::level::off && std::string_view(level) != "off")
        throw Error(code::Usage, std::string("$SPDLOG_LEVEL '") + level +
                                     "' must be one of trace, debug, info, warn, error, critical, off");
    spdlog::set_level(parsed);
}

void apply_verbosity(int verbose, bool quiet, const std::string& level) {
    apply_env_level();
    if (quiet && (verbose > 0 || !level.empty())) throw Error(code::Usage, "-q cannot be combined with -v or --log-level");
    if (quiet) {
        spdlog::set_level(spdlog::level::err);
    } else if (!level.empty()) {
        const auto parsed = spdlog::level::from_str(level);
        if (parsed == spdlog::level::off && level != "off")
            throw Error(code::Usage, "--log-level must be one of trace, debug, info, warn, error, critical, off");
        spdlog::set_level(parsed);
    } else if (verbose > 0) {
        spdlog::set_level(verbose >= 3 ? spdlog::level::trace : verbose == 2 ? spdlog::level::debug : spdlog::level::info);
    }
}

// Whether NAME is an option of APP's (or of a parent's) that takes one value each time (once_each).
bool repeatable(const CLI::App& app, const std::string& name) {
    for (const CLI::App* a = &app; a != nullptr; a = a->get_parent())
        if (const CLI::Option* option = a->get_option_no_throw(name))
            return option->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll && option->get_expected_max() == 1;
    return false;
}

std::vector<std::string> program_words(const CLI::App& app, const CLI::App* sub, const CommandLine& line) {
    std::vector<std::string> rest = sub ? sub->remaining() : std::vector<std::string>{};
    for (const auto& word : app.remaining()) rest.push_back(word);
    if (!rest.empty() && rest.front().size() > 1 && rest.front().front() == '-')
        throw Error(code::Usage, "unknown option '" + rest.front() + "' (put PROGRAM after '--' if it starts with '-')");
    // `--deny-read /a /b -- make`, written for a repeatable option that took every word up to the
    // next option, would now run /b: a word right after a repeatable option's value, with a `--`
    // still to come, is refused instead of run (`--deny-read /a -- prog -- args` says it plainly).
    if (!rest.empty() && line.tail && rest.size() < line.front.size()) {
        const std::size_t first = line.front.size() - rest.size();  // what CLI11 left is the line's end
        const std::string_view value = line.front[first - 1];
        std::string name;
        if (value.rfind("--", 0) == 0 && value.find('=') != std::string_view::npos) name = value.substr(0, value.find('='));
        else if (first >= 2) name = line.front[first - 2];
        if (!name.empty() && repeatable(sub ? *sub : app, name))
            throw Error(code::Usage, "'" + rest.front() + "' follows the value of " + name + ", which takes one value each time " +
                                         "(give it again for another); put PROGRAM after '--'");
    }
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
Runners a printed plan invokes (not typed by hand): landlock-exec, bwrap-stage (man dsh-confine).
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
    CLI::App* network = nullptr;
    std::vector<std::string> sessionRoots;
    CLI::App* mode = nullptr;
    CLI::App* show = nullptr;
    CLI::App* end = nullptr;
    CLI::App* landlock = nullptr;
    CLI::App* token = nullptr;
    CLI::App* effect = nullptr;
    CLI::App* netProxy = nullptr;
    std::vector<std::string> netProxyHosts;

    PolicyOptions runOptions;
    RunOptions runOwn;
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

// Adds the subcommands WANTED names (the main job, `dsh-confine [OPTIONS] -- PROGRAM`, builds
// none of them), with the policy options OPTIONS names.
void add_subcommands(CLI::App& app, Subcommands& c, const Named& wanted, const Named& options) {
    if (wanted("run")) {
        c.run = app.add_subcommand("run", "spawn the command confined, pass its output through, attribute the result");
        add_policy_options(*c.run, c.runOptions, true, options);
        c.run->add_option("--report", c.runOwn.reportFile, "write the JSON report to FILE");
        c.run->add_option("--report-fd", c.runOwn.reportFd, "write the JSON report to file descriptor N");
        if (options("--timeout"))
            c.run->add_option("--timeout", c.runOwn.timeout,
                              "end the command's whole tree after DURATION (30s, 5m, 1h, 500ms; a bare number: seconds); exit 124")
                ->check(kNonEmpty);
        if (options("--kill-after"))
            c.run->add_option("--kill-after", c.runOwn.killAfter, "SIGKILL the tree DURATION after its SIGTERM (default 5s)")
                ->check(kNonEmpty);
        if (options("--limit"))
            once_each(c.run->add_option("--limit", c.runOwn.limits,
                                        "NAME=VALUE: memory=SIZE, pids=N, cpu=DURATION, fsize=SIZE (SIZE: 512M, 2G, ...; repeatable)"))
                ->check(kNonEmpty);
        c.run->prefix_command();
        c.run->footer("\nExamples:\n  dsh-confine run --mode workspace-write --workspace-root \"$PWD\" --report report.json -- npm test\n"
                        "  dsh-confine run --report-fd 3 -- make 3>report.json\n"
                        "  dsh-confine run --timeout 10m --limit memory=4G --limit pids=512 -- make -j8\n"
                        "Exit status: the command's own (128+N after signal N); 124 when --timeout ended it; 125 when the\n"
                        "sandbox never started it (RUNNER_FAILURE) or dsh-confine itself failed.\n");
    }
    if (wanted("policy")) {
        c.policy = app.add_subcommand("policy", "print the resolved execution policy (JSON)");
        add_policy_options(*c.policy, c.policyOptions, false, options);
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
        once_each(c.start->add_option("--writable-root", c.sessionRoots,
                                      "DIR writable beside the cwd in workspace-write (absolute; repeatable; never changed)"))
            ->check(kNonEmpty);
        c.start->footer("\nExamples:\n  dsh-confine session start s1 --cwd \"$PWD\"\n"
                          "  dsh-confine session start \"agent-$(date +%s)\" --cwd /srv/checkout\n"
                          "Starting again with the same cwd is a no-op. Exit status: 0; 125 when ID is invalid, was started\n"
                          "with another cwd, or the cwd is not a directory.\n");
        c.network = c.session->add_subcommand("network", "log a sandbox/network event");
        c.network->add_option("ID", c.sessionId, "an existing session")->required();
        c.network->add_option("NETWORK", c.sessionArg, "allow, deny, or hosts followed by the host patterns")->required();
        c.network->add_option("PATTERN", c.sessionRoots, "with hosts: a host pattern to allow (one or more)");
        c.network->footer("\nExamples:\n  dsh-confine session network s1 deny\n"
                            "The last event wins; --network on a call outranks it. Exit status: 0; 125 on a bad ID or value.\n");
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
        c.landlock->group("");  // a runner, not a subcommand to type: the footer and the man page name it
        c.landlock->add_option("--mode", c.ll.mode, "read-only or workspace-write")->required();
        c.landlock->add_option("--workspace-root", c.ll.workspaceRoot, "the canonical workspace root")->required();
        c.landlock->add_option("--workspace-root-id", c.ll.workspaceRootId, "DEV:INO the workspace root must still have");
        c.landlock->add_option("--temp-dir", c.ll.tempDir, "a session's private temp directory (writable, kept)");
        c.landlock->add_option("--temp-dir-id", c.ll.tempDirId, "DEV:INO the temp directory must still have");
        once_each(c.landlock->add_option("--keep-fd", c.ll.keepFds, "pass descriptor N on to the command (repeatable)"));
        once_each(c.landlock->add_option("--writable-root", c.ll.writableRoots, "[DEV:INO@]PATH writable beside the workspace (repeatable)"));
        c.landlock->add_option_function<std::string>(
            "--network", [&c](const std::string& value) {
                if (value != "allow" && value != "deny" && value != "hosts")
                    throw CLI::ValidationError("--network", "must be allow, deny or hosts");
                c.ll.denyNetwork = value == "deny";
                c.ll.hostsNetwork = value == "hosts";
            }, "allow, deny or hosts");
        once_each(c.landlock->add_option("--allow-host", c.ll.allowHosts, "with --network hosts: a host pattern the proxy allows (repeatable)"));
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
        once_each(c.stage->add_option("--root", c.bs.roots, "DEV:INO@PATH: a writable root staged by bubblewrap"));
        c.stage->add_option("--temp-bind", c.bs.tempBind, "DEV:INO@PATH: the session's temp area");
        c.stage->add_option("--temp-tmpfs", c.bs.tempTmpfs, "DEV:INO@PATH: a private tmpfs over PATH as the temp area");
        c.stage->add_option("--chdir", c.bs.chdir, "where the command runs")->required();
        c.stage->add_option("--status-fd", c.bs.statusFd, "write 'S' just before exec, 'F' on failure, to fd N");
        once_each(c.stage->add_option("--keep-fd", c.bs.keepFds, "pass descriptor N on to the command (repeatable)"));
        once_each(c.stage->add_option("--protect", c.bs.protect, "PATH inside a root kept read-only (repeatable)"));
        once_each(c.stage->add_option("--protect-dir", c.bs.protectDirs, "PATH kept read-only, made an empty directory first (repeatable)"));
        once_each(c.stage->add_option("--protect-file", c.bs.protectFiles, "PATH kept read-only, made an empty file first (repeatable)"));
        once_each(c.stage->add_option("--pin", c.bs.pin, "PATH inside a root kept in place, writable (repeatable)"));
        once_each(c.stage->add_option("--git-check", c.bs.gitCheck, "GITDIR whose validity is restored when the call ends (repeatable)"));
        once_each(c.stage->add_option("--hide", c.bs.hide, "PATH made unreadable (repeatable)"));
        c.stage->add_option_function<std::string>(
            "--network", [&c](const std::string& value) {
                if (value != "allow" && value != "deny" && value != "hosts")
                    throw CLI::ValidationError("--network", "must be allow, deny or hosts");
                c.bs.denyNetwork = value == "deny";
                c.bs.hostsNetwork = value == "hosts";
            }, "allow, deny or hosts");
        c.stage->add_option("--proxy-fd", c.bs.proxyFd, "the socket to send the proxy its listeners over (hosts)");
        c.stage->add_option("--checked-fd", c.bs.checkedFd, "write 'C' to fd N once the git directories are checked");
        c.stage->add_flag("--landlock-scope", c.bs.landlockScope,
                          "apply Landlock's scopes: signals, and abstract Unix sockets with the network denied");
        c.stage->prefix_command();
    }
    if (wanted("restricted-token-exec")) {
        c.token = app.add_subcommand("restricted-token-exec", "the Windows runner a printed restricted-token plan invokes");
        c.token->group("");  // a runner, not a subcommand to type
        c.token->add_option("--mode", c.rt.mode)->required();
        c.token->add_option("--workspace-root", c.rt.workspaceRoot)->required();
        c.token->add_option("--temp-dir", c.rt.tempDir);
        c.token->add_option("--private-temp-base", c.rt.privateTempBase);
        once_each(c.token->add_option("--protect", c.rt.protectedPaths, "dsh-confine's own files inside the workspace (repeatable)"));
        c.token->prefix_command();
        c.token->footer("\nA printed restricted-token plan calls this on Windows; elsewhere it fails with 125.\n"
                          "Examples:\n  dsh-confine restricted-token-exec --mode workspace-write --workspace-root C:\\src\\app -- cmd /c build.bat\n"
                          "  dsh-confine --print --mode read-only -- cmd /c dir   # shows the exact call\n");
    }
    if (wanted("net-proxy")) {
        // The launcher a bubblewrap plan in the hosts network starts with: the proxy started
        // outside the sandbox, then bubblewrap (platform/linux/proxy_companion.hpp). Not typed by hand.
        c.netProxy = app.add_subcommand("net-proxy", "");
        c.netProxy->group("");
        once_each(c.netProxy->add_option("--allow-host", c.netProxyHosts, "a host pattern the proxy allows (repeatable)"))->required();
        c.netProxy->prefix_command();
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
    for (CLI::App* sub : {c.run, c.policy, c.classify, c.doctor, c.session, c.landlock, c.token, c.effect, c.stage, c.netProxy})
        if (sub != nullptr) app.remove_subcommand(sub);
    add_subcommands(app, c, Named(nullptr), Named(nullptr));
}

}  // namespace

// The first unknown option of a (sub)command on the command line, named as such with that
// (sub)command and did-you-mean; nothing when there is none.
std::optional<std::string> unknown_option_message(CLI::App& app, const CommandLine& line) {
    const auto [word, where] = first_unknown_option(app, line.front);
    if (word.empty()) return std::nullopt;
    std::string message = "unknown option '" + word + "' for '" + where + "'";
    CLI::App* at = &app;
    std::istringstream names(where);
    std::string name;
    names >> name;  // "dsh-confine"
    while (names >> name)
        if (CLI::App* sub = subcommand_named(at, name)) at = sub;
    std::vector<std::string> known;
    for (const CLI::Option* option : at->get_options())
        for (const auto& long_name : option->get_lnames()) known.push_back("--" + long_name);
    if (auto close = did_you_mean(word.substr(0, word.find('=')), known)) message += " (did you mean '" + *close + "'?)";
    return message;
}

// CLI11's own words where they do not help: an unknown option named as such (not "ID is
// required"), an unknown session action, an option given twice.
std::string parse_error_message(CLI::App& app, const Subcommands& c, const CommandLine& line, const CLI::ParseError& e) {
    if (auto message = unknown_option_message(app, line)) return *message;
    if (parsed(c.session) && !parsed(c.start) && !parsed(c.mode) && !parsed(c.network) && !parsed(c.show) && !parsed(c.end)) {
        const std::vector<std::string> actions = {"start", "mode", "network", "show", "end"};
        std::string action;
        for (std::size_t i = 1; i + 1 < line.front.size(); ++i)
            if (std::string_view(line.front[i]) == "session") {
                action = line.front[i + 1];
                break;
            }
        if (action.empty()) return "'dsh-confine session' needs an action: start, mode, network, show or end";
        std::string message = "unknown session action '" + action + "'";
        if (auto close = did_you_mean(action, actions)) message += " (did you mean '" + *close + "'?)";
        return message + "; actions: start, mode, network, show, end";
    }
    std::string what = e.what();
    if (const std::size_t at = what.find(": At Most 1 required but received "); at != std::string::npos)
        return what.substr(0, at) + " is given " + what.substr(at + 34) + " times; give it once";
    return what;
}

namespace {

// One parse and dispatch of LINE with the subcommands WORDS names and the options NAMED names.
// A pass that does not build every option answers nothing about the command line itself (help, a
// parse error, an unknown option): it returns nothing, and the caller parses again with all of them.
std::optional<int> run_line(const CommandLine& line, const Named& words, const Named& named) {
    CLI::App app{"dsh-confine: run an untrusted command under a file-effect policy, and say how completely it is enforced",
                 "dsh-confine"};
    app.footer(kExamples);
    // CLI11 looks an option up among the app's in the order they were added, once each time it
    // is given: the policy options (--allow-host given once a pattern) come first, but where help
    // lists them, in the pass that builds every option.
    PolicyOptions main_options;
    std::vector<CLI::Option*> main_only;
    if (!named.everything()) main_only = add_policy_options(app, main_options, true, named);
    app.set_version_flag("--version", std::string("dsh-confine ") + kVersion);
    app.prefix_command();
    int verbose = 0;
    bool quiet = false;
    std::string log_level;
    const auto add_logging = [&](CLI::App& to) {
        to.add_flag("-v,--verbose", verbose, "more log output on stderr, and the runner argv executed (repeat for more)");
        to.add_flag("-q,--quiet", quiet, "errors only on stderr");
        to.add_option("--log-level", log_level, "trace, debug, info, warn (default), error, critical, off");
    };
    add_logging(app);
    app.formatter(std::make_shared<UsageFormatter>());
    if (named.everything()) main_only = add_policy_options(app, main_options, true, named);
    bool print = false;
    std::string format = "json";
    if (named("--print")) main_only.push_back(app.add_flag("--print", print, "print the plan (wrapped argv and facts); run nothing"));
    CLI::Option* format_option = nullptr;
    if (named("--format")) {
        format_option = app.add_option("--format", format, "with --print: json (default) or shell");
        main_only.push_back(format_option);
    }
    app.fallthrough();  // -v and --log-level work after a subcommand too

    Subcommands c;
    add_subcommands(app, c, words, named);
    // -v, -q and --log-level work after a subcommand's name too, and its help lists them.
    for (CLI::App* sub : visible_subcommands(app)) add_logging(*sub);
    try {
        app.parse(static_cast<int>(line.front.size()), line.front.data());
    } catch (const CLI::CallForHelp& e) {
        if (!named.everything()) return std::nullopt;
        add_subcommands_for_help(app, c);
        for (CLI::App* sub : visible_subcommands(app))
            if (sub->get_option_no_throw("--log-level") == nullptr) add_logging(*sub);
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        if (!named.everything()) return std::nullopt;
        add_subcommands_for_help(app, c);
        for (CLI::App* sub : visible_subcommands(app))
            if (sub->get_option_no_throw("--log-level") == nullptr) add_logging(*sub);
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        if (!named.everything()) return std::nullopt;
        const char* which = parsed(c.landlock) ? code::Landlock
                            : parsed(c.token)  ? "RESTRICTED_TOKEN"
                            : parsed(c.stage)  ? "BWRAP_STAGE"
                            : parsed(c.netProxy) ? code::Proxy
                                               : code::Usage;
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", which, parse_error_message(app, c, line, e).c_str());
        return 125;
    }

    try {
        apply_verbosity(verbose, quiet, log_level);
        const std::vector<CLI::App*> parsed_subcommands = app.get_subcommands();
        if (!parsed_subcommands.empty()) {
            // The main job's options do not carry over into a subcommand: refusing them beats
            // ignoring them (`dsh-confine --mode bogus policy` must not print a policy).
            const std::string sub_name = parsed_subcommands.front()->get_name();
            std::size_t sub_at = 0;
            while (sub_at < line.front.size() && sub_name != line.front[sub_at]) ++sub_at;
            for (const CLI::Option* option : main_only)
                if (option->count() > 0) {
                    // Given after the subcommand's name, it is simply not one of its options.
                    bool after = false;
                    for (std::size_t i = sub_at + 1; i < line.front.size(); ++i)
                        for (const auto& long_name : option->get_lnames())
                            after = after || std::string_view(line.front[i]).rfind("--" + long_name, 0) == 0;
                    throw Error(code::Usage, option->get_name() + " does not apply to 'dsh-confine " + sub_name + "'" +
                                                 (after ? "" : " (a subcommand's options go after its name)"));
                }
            const CLI::App* sub = parsed_subcommands.front();
            const bool takes_program = sub == c.run || sub == c.landlock || sub == c.token || sub == c.effect || sub == c.stage ||
                                       sub == c.netProxy;
            if (!takes_program && !app.remaining().empty()) {
                // CLI11 leaves an unknown option among the remaining words when nothing else is
                // wrong: it gets the same words as when something is (parse_error_message).
                if (!named.everything()) return std::nullopt;
                if (auto message = unknown_option_message(app, line)) throw Error(code::Usage, *message);
                throw Error(code::Usage, "unexpected argument '" + app.remaining().front() + "' for 'dsh-confine " +
                                             sub->get_name() + "'");
            }
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
        if (parsed(c.netProxy)) {
            const std::vector<std::string> rest = program_words(app, c.netProxy, line);
            if (rest.empty()) {
                std::fprintf(stderr, "dsh-confine: error: PROXY: net-proxy: no bubblewrap plan given\n");
                return 125;
            }
            return platform::net_proxy_exec(c.netProxyHosts, rest);
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
            return run_confined(c.runOptions, program_words(app, c.run, line), c.runOwn);
        }
        if (parsed(c.policy)) return run_policy(c.policyOptions);
        if (parsed(c.classify))
            return run_classify(c.planFile, c.classifyBackend, c.exitCode, c.stderrFile, c.classifyFormat, c.classifyConfig);
        if (parsed(c.doctor)) return run_doctor(c.doctorOptions);
        if (parsed(c.session)) {
            const char* action = parsed(c.start)     ? "start"
                                 : parsed(c.mode)    ? "mode"
                                 : parsed(c.network) ? "network"
                                 : parsed(c.show)    ? "show"
                                                     : "end";
            return run_session(action, c.sessionId, c.sessionArg, c.sessionRoots);
        }
        const std::vector<std::string> rest = program_words(app, nullptr, line);
        if (print) return run_print(main_options, format, rest);
        if (format_option != nullptr && format_option->count() > 0)
            throw Error(code::Usage, "--format applies with --print only (without it, the command is run, not printed)");
        return run_exec(main_options, rest);
    } catch (const ExitStatus& status) {
        if (print && format == "json" && app.get_subcommands().empty() && !status.errorCode.empty())
            write_error_json(status.errorCode, status.message);
        return status.code;
    } catch (const Error& e) {
        // `--print --format json` answers every failure in JSON on stdout too (SANDBOX_UNAVAILABLE
        // has already written its own, with the candidates).
        if (print && format == "json" && app.get_subcommands().empty() && e.code() != code::SandboxUnavailable)
            write_error_json(e.code(), e.what());
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", e.code().c_str(), e.what());
        return 125;
    } catch (const std::exception& e) {
        if (print && format == "json" && app.get_subcommands().empty()) write_error_json(code::Internal, e.what());
        std::fprintf(stderr, "dsh-confine: error: %s: %s\n", code::Internal, e.what());
        return 125;
    }
}

}  // namespace

int run(int argc, char** argv) {
    // The hosts network's proxy, executed afresh by the call that starts it: on its own, before
    // anything else (platform/linux/proxy_companion.hpp).
    if (argc >= 2 && std::strcmp(argv[1], "__proxy") == 0) return platform::serve_proxy(argc, argv);
    setup_logging();
    const CommandLine line = split_at_dashes(argc, argv);
    const Named words(&line);  // the subcommands the line names; in the first pass its options too
    if (const std::optional<int> status = run_line(line, words, words)) return *status;
    return *run_line(line, words, Named(nullptr));
}

}  // namespace dsh::cli
