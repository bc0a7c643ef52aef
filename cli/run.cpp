// `dsh-confine run`: spawn the confined command, pass its output through, attribute the
// result. Attribution uses the runner's proof of start where the backend has one, so a
// runner failure is never taken for the command's own, and a command that prints a runner's
// message after it started cannot fake one.
//
// The report (--report FILE) is opened before anything runs: the command may write the
// directory it lies in (the workspace), so it must not be able to turn the path into a link to
// a file outside, which dsh-confine would then overwrite. The path is opened without following
// any symlink, and the report is written later through that descriptor, whatever the command
// does to the name meanwhile. A file with another name (a hard link, which the command may have
// made to a file it wanted overwritten) is refused when it is opened, and not written at the end
// if it gained one during the call. Every outcome gets a report, dsh-confine's own failures included.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#if !defined(_WIN32)
#include <poll.h>
#include <sys/socket.h>
#endif

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "../lib/classify.hpp"
#include "../lib/error.hpp"
#include "../lib/host_pattern.hpp"
#include "../lib/policy.hpp"
#include "../lib/run_limits.hpp"
#include "../platform/platform.hpp"
#include "../platform/posix/process.hpp"
#include "../platform/posix/safe_path.hpp"
#include "../platform/posix/supervise.hpp"
#include "app.hpp"
#include "common.hpp"

namespace dsh::cli {
namespace {

using ojson = nlohmann::ordered_json;

#if defined(_WIN32)
constexpr int kOpenNonBlocking = 0;  // no FIFOs at a path to block on
#else
constexpr int kOpenNonBlocking = O_NONBLOCK;
#endif

// Where the report goes: a file opened before the command ran, or a descriptor the caller gave.
class ReportSink {
public:
    ReportSink(const std::string& file, int fd) : fd_(fd) {
        if (!file.empty() && fd >= 0) throw Error(code::Usage, "give --report or --report-fd, not both");
        if (fd >= 0 && fcntl(fd, F_GETFD) < 0)
            throw Error(code::Usage, "--report-fd " + std::to_string(fd) + " is not an open file descriptor");
        if (!file.empty()) open_file(file);
    }
    ReportSink(const ReportSink&) = delete;
    ReportSink& operator=(const ReportSink&) = delete;
    ~ReportSink() {
        if (owned_) close(fd_);
    }

    bool wanted() const { return fd_ >= 0; }

    void write(const ojson& report) {
        if (fd_ < 0) return;
        const std::string text = report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        if (owned_) {
            // A link made since the open: writing would change the file behind the other name.
            struct stat st {};
            if (fstat(fd_, &st) != 0) return fail_write(errno);
            if (st.st_nlink > 1) {
                std::fprintf(stderr,
                             "dsh-confine: error: %s: %s gained another name during the call (%llu links now): the report "
                             "is not written, since it would overwrite the file behind that name\n",
                             code::Report, shown_.c_str(), static_cast<unsigned long long>(st.st_nlink));
                return;
            }
            if (ftruncate(fd_, 0) != 0 || lseek(fd_, 0, SEEK_SET) != 0) return fail_write(errno);
        }
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return fail_write(n < 0 ? errno : EIO);
            done += static_cast<std::size_t>(n);
        }
    }

private:
    void open_file(const std::string& file) {
        std::error_code ec;
        const std::filesystem::path absolute = std::filesystem::absolute(file, ec);
        if (ec) throw Error(code::Report, file + ": " + ec.message());
        shown_ = absolute.string();
        // Non-blocking: a FIFO planted at the name must not hang the call before it starts.
        fd_ = posix::open_no_symlinks(shown_, O_WRONLY | O_CREAT | kOpenNonBlocking, 0666);
        if (fd_ < 0) {
            const int error = errno;
            std::string message = shown_ + ": cannot be opened for the report: " + std::strerror(error);
            if (error == ELOOP)
                message = shown_ + ": a component of the path is a symlink, which a confined command could have "
                                   "planted; give the report's path without symlinks";
            throw Error(code::Report, message);
        }
        owned_ = true;
        struct stat st {};
        if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode))
            throw Error(code::Report, shown_ + ": not a regular file (use --report-fd for a pipe or a terminal)");
        if (st.st_nlink > 1)
            throw Error(code::Report, shown_ + ": has " + std::to_string(static_cast<unsigned long long>(st.st_nlink)) +
                                          " links: the report would overwrite the file behind its other names (a "
                                          "confined command could have linked one there); remove this name, or give "
                                          "another path");
#if !defined(_WIN32)
        fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
#endif
    }
    void fail_write(int error) {
        std::fprintf(stderr, "dsh-confine: error: %s: cannot write the report to %s: %s\n", code::Report,
                     owned_ ? shown_.c_str() : ("descriptor " + std::to_string(fd_)).c_str(), std::strerror(error));
    }

    int fd_ = -1;
    bool owned_ = false;
    std::string shown_;
};

ojson nullable_policy(const std::optional<SandboxExecutionPolicy>& policy) {
    return policy ? policy_json(*policy) : ojson(nullptr);
}

// The report's fields for the bounds: the timeout, the kill-after (where `run` may end the tree
// itself), and each limit with its mechanism and scope.
void add_bounds(ojson& report, const RunBounds& bounds, const std::vector<LimitEnforcement>& limits, bool watched) {
    report["timeoutMs"] = bounds.timeout ? ojson(bounds.timeout->count()) : ojson(nullptr);
    report["killAfterMs"] = bounds.timeout || watched ? ojson(bounds.killAfter.value_or(kDefaultKillAfter).count()) : ojson(nullptr);
    ojson list = ojson::array();
    for (const auto& e : limits)
        list.push_back({{"name", std::string(to_string(e.name))},
                        {"value", e.value},
                        {"mechanism", std::string(to_string(e.mechanism))},
                        {"scope", std::string(to_string(e.scope))},
                        {"note", e.note}});
    report["limits"] = list;
}

// The report of a run that never reached the command because dsh-confine itself failed.
ojson failure_report(const std::optional<SandboxExecutionPolicy>& policy, const std::vector<std::string>& argv,
                     const std::string& code_name, const std::string& message, int status) {
    ojson report;
    report["policy"] = nullable_policy(policy);
    report["argv"] = argv;
    report["backend"] = nullptr;
    report["enforcement"] = nullptr;
    report["enforcementGaps"] = ojson::array();
    report["verdict"] = nullptr;
    report["exitCode"] = status;
    report["signal"] = nullptr;
    report["started"] = false;
    report["durationMs"] = 0;
    report["outcome"] = "not-started";
    report["limit"] = nullptr;
    add_bounds(report, RunBounds{}, {}, false);
    report["refusedHosts"] = ojson::array();
    report["refusedHostsUnlisted"] = 0;
    report["error"] = {{"code", code_name}, {"message", message}};
    return report;
}

// The hosts the allow-list proxy refused during the call, with counts, in the order of their first
// refusal: read from the socket only `run` and the proxy hold, so the command,
// which never gets it, cannot add to or hide from the list. At most kMaxRefusedHosts hosts are
// listed; the refusals of later ones, and those the proxy could not report at once (it never
// waits for `run`), are counted as unlisted, so that a list a command flooded is known to be
// incomplete.
class RefusedHosts {
public:
    static constexpr std::size_t kMaxRefusedHosts = 256;

    // `run`'s end of the socket (-1: the call has no proxy) and the proxy's, passed to the runner.
    bool open() {
#if !defined(__linux__)
        return false;  // the proxy is Linux's
#else
        int pair[2];
        // Seqpacket: each record arrives whole or not at all, never glued to the next.
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
            throw Error(code::RunnerExec, std::string("socketpair (the proxy's refusals): ") + std::strerror(errno));
        ours_ = pair[0];
        theirs_ = pair[1];
        return true;
#endif
    }
    ~RefusedHosts() {
        if (ours_ >= 0) close(ours_);
        if (theirs_ >= 0) close(theirs_);
    }
    RefusedHosts() = default;
    RefusedHosts(const RefusedHosts&) = delete;
    RefusedHosts& operator=(const RefusedHosts&) = delete;

    int ours() const { return ours_; }
    // The proxy's end (-1: none), which the proxy's process gets a copy of when it starts.
    int theirs() const { return theirs_; }

    void feed(std::string_view chunk) {
        for (char c : chunk) {
            if (c != '\n') {
                if (pending_.size() < 300) pending_ += c;  // a name is at most 253 bytes, with [ ] and :PORT
                continue;
            }
            add(pending_);
            pending_.clear();
        }
    }

    // Once the command's tree is gone: the proxy is told to end (its side of the socket reads
    // end-of-file; under bubblewrap it has already gone with the sandbox), and what it wrote
    // before is read to the end, which comes when it has closed its end (it has exited).
    void finish() {
#if !defined(_WIN32)
        if (theirs_ >= 0) close(std::exchange(theirs_, -1));  // the end comes when the proxy's copy closes
        if (ours_ < 0) return;
        shutdown(ours_, SHUT_WR);
        char buffer[4096];
        for (;;) {
            // A bound, not a measure: a proxy that never ends (stopped by a debugger) does not
            // hold the report back for ever.
            pollfd ready{ours_, POLLIN, 0};
            const int n_ready = poll(&ready, 1, 10000);
            if (n_ready < 0 && errno == EINTR) continue;
            if (n_ready <= 0) break;
            const ssize_t n = read(ours_, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            feed(std::string_view(buffer, static_cast<std::size_t>(n)));
        }
        close(ours_);
        ours_ = -1;
#endif
    }

    bool empty() const { return hosts_.empty(); }
    const std::string& first() const { return hosts_.front().first; }
    bool has(const std::string& host) const {
        return std::any_of(hosts_.begin(), hosts_.end(), [&](const auto& entry) { return entry.first == host; });
    }

    ojson json() const {
        ojson list = ojson::array();
        for (const auto& [host, count] : hosts_) list.push_back({{"host", host}, {"count", count}});
        return list;
    }
    unsigned long long unlisted() const { return unlisted_; }

private:
    void add(const std::string& line) {
        if (line.rfind(kUndeliveredRefusals, 0) == 0) {
            const std::string count = line.substr(kUndeliveredRefusals.size());
            if (!count.empty() && count.size() < 20 && count.find_first_not_of("0123456789") == std::string::npos)
                unlisted_ += std::stoull(count);
            return;
        }
        // The proxy writes host_port_text's form; anything else is not a record.
        const auto authority = parse_authority(line);
        if (!authority || !authority->port) return;
        const std::string host = host_port_text(authority->host, *authority->port);
        for (auto& entry : hosts_)
            if (entry.first == host) {
                ++entry.second;
                return;
            }
        if (hosts_.size() < kMaxRefusedHosts) hosts_.emplace_back(host, 1);
        else ++unlisted_;
    }

    int ours_ = -1, theirs_ = -1;
    std::string pending_;
    std::vector<std::pair<std::string, unsigned long long>> hosts_;
    unsigned long long unlisted_ = 0;
};

// The bounds the options give, checked before anything else (USAGE, nothing runs).
struct GivenBounds {
    std::optional<Milliseconds> timeout, killAfter;
    RunLimits limits;
    std::vector<LimitName> named;  // the limits given, in order
};

GivenBounds given_bounds(const RunOptions& run) {
    GivenBounds given;
    const auto duration = [](const char* option, const std::string& text) {
        const auto parsed = parse_duration(text);
        if (!parsed) throw Error(code::Usage, std::string(option) + " " + parsed.reason());
        return *parsed;
    };
    if (!run.timeout.empty()) given.timeout = duration("--timeout", run.timeout);
    if (!run.killAfter.empty()) given.killAfter = duration("--kill-after", run.killAfter);
    for (const auto& limit : run.limits) apply_limit_option(limit, given.limits, given.named);
    return given;
}

// The bounds of this call: the config's [run] and [run.limits] with the options laid over them
// (each limit on its own).
RunBounds call_bounds(const GivenBounds& given, const RunBounds& config) {
    RunBounds bounds = config;
    if (given.timeout) bounds.timeout = given.timeout;
    if (given.killAfter) bounds.killAfter = given.killAfter;
    for (LimitName name : given.named) bounds.limits.set(name, *given.limits.value(name));
    if (given.killAfter && !bounds.timeout && !bounds.limits.cpu)
        throw Error(code::Usage, "--kill-after applies with a timeout (--timeout, [run] timeout) or a cpu limit, which end the "
                                 "tree; this call has neither");
#if defined(_WIN32)
    if (bounds.timeout)
        throw Error(code::Usage, "a timeout (--timeout, [run] timeout) is not available on Windows yet: nothing would end "
                                 "the command's tree at the deadline");
#endif
    return bounds;
}

// How a run ended, as the report's outcome says it: orthogonal to the verdict.
const char* outcome_name(posix::TreeEnd ended, std::optional<LimitName> limit, bool not_started, int signal) {
    if (ended == posix::TreeEnd::Timeout) return "timeout";
    if (limit) return "limit";
    if (not_started) return "not-started";
    return signal != 0 ? "signaled" : "exited";
}

// The evidence line of a timeout or limit verdict.
std::string bound_line(const RunBounds& bounds, std::optional<LimitName> limit) {
    if (!limit) return "run ended the command's tree at its timeout of " + duration_text(*bounds.timeout);
    const std::string value = limit_value_text(*limit, *bounds.limits.value(*limit));
    switch (*limit) {
        case LimitName::Memory: return "an OOM kill in the call's cgroup, at its memory limit of " + value;
        case LimitName::Pids: return "a fork refused in the call's cgroup, at its pids limit of " + value;
        case LimitName::Cpu: return "run ended the command's tree when it had used its " + value + " of CPU time";
        case LimitName::Fsize: break;
    }
    return "the " + std::string(to_string(*limit)) + " limit of " + value;
}

int supervise_and_report(const Planned& planned, const std::vector<std::string>& argv, const RunBounds& bounds,
                         bool require_full, ReportSink& sink) {
    // The limits first: --require-full refuses one that nothing enforces before anything is made
    // or started.
    std::unique_ptr<platform::RunLimitsOnHost> limits;
    std::vector<std::string> gaps = planned.plan.confined ? planned.plan.confined->enforcementGaps : std::vector<std::string>{};
    std::optional<SandboxEnforcement> enforcement;
    if (planned.plan.confined) enforcement = planned.plan.confined->enforcement;
    if (!bounds.limits.empty()) {
        limits = platform::prepare_run_limits(bounds.limits);
        for (const auto& e : limits->enforcement) spdlog::info("{}", limit_line(e));
        const std::vector<std::string> unenforced = limit_gaps(limits->enforcement);
        if (require_full && !unenforced.empty()) {
            std::string message = "--require-full: a limit this host cannot enforce: ";
            for (std::size_t i = 0; i < unenforced.size(); ++i) message += (i ? "; " : "") + unenforced[i];
            throw Error(code::EnforcementPartial, message);
        }
        // In danger-full-access nothing is enforced for files, and the report has no gaps: the
        // limits list alone says what holds.
        if (planned.plan.confined && !unenforced.empty()) {
            gaps.insert(gaps.end(), unenforced.begin(), unenforced.end());
            enforcement = SandboxEnforcement::Partial;
        }
    }
    // A CPU-time limit a cgroup counts for the tree is enforced here, by watching the count.
    std::optional<std::uint64_t> cpu_limit_ns;
    if (limits)
        for (const auto& e : limits->enforcement)
            if (e.name == LimitName::Cpu && e.scope == LimitScope::Tree) cpu_limit_ns = e.value * 1000000;

    std::vector<std::string> spawn_argv = planned.plan.argv;
    platform::StartProofPlan proof;
    Dialect dialect;
    RefusedHosts refused;
    if (planned.plan.confined) {
        if (planned.plan.policy.network == NetworkPolicy::Hosts) refused.open();
        proof = platform::prepare_for_run(spawn_argv, planned.plan.confined->backend, refused.theirs());
        dialect = {planned.plan.confined->denialSignatures, planned.plan.confined->runnerFailureRules};
    } else {
        spawn_argv.front() = posix::resolve_program(argv.front()).path;
    }

    StreamClassifier classifier(std::move(dialect));
    posix::SuperviseOptions options;
    options.passFd = proof.passFd;
    if (proof.reportsRefusals) {
        options.watchFd = refused.ours();
        options.onWatched = [&refused](std::string_view chunk) { refused.feed(chunk); };
    }
    options.proof = proof.proof;
    options.statusFdSlot = proof.fdSlot;
    options.commandIsGrandchild = proof.commandIsGrandchild;
    options.closeAllBut = proof.closeInherited ? &planned.confinedPolicy->keepFds : nullptr;
    if (proof.runnerIsSelf)
        // Runs here, before any process is started (platform::prepare_plan turns a failure into
        // the runner's own report).
        options.prepareHere = [&](int argc, char** runner_argv) {
            ConfinedArgv confined = *planned.plan.confined;
            confined.argv.assign(runner_argv, runner_argv + argc);
            return platform::prepare_plan(confined, *planned.confinedPolicy, argv, planned.resolved.config);
        };
    options.stageHoldsCall = planned.plan.confined && planned.plan.confined->backend == "bwrap" &&
                             !planned.plan.confined->git.checkedAtEnd.empty();
    options.runnerEndsTree = proof.runnerEndsTree;
    options.timed = sink.wanted();  // the duration is only in the report
    options.timeout = bounds.timeout;
    options.killAfter = bounds.killAfter.value_or(kDefaultKillAfter);
    if (limits) {
        options.joinFds = limits->joinFds;
        options.limits = limits->rlimits;
    }
    if (cpu_limit_ns) {
        // The tree cannot use more than one second of CPU time a second on each CPU: the count is
        // read again no sooner than the limit could be reached (at least 10 ms, at most a minute).
        const auto cpus = std::max(1U, std::thread::hardware_concurrency());
        options.watch = [&limits, limit = *cpu_limit_ns, cpus]() -> std::optional<std::chrono::milliseconds> {
            const std::uint64_t used = limits->tree_cpu_ns().value_or(0);
            if (used >= limit) return std::nullopt;
            const auto wait = std::chrono::milliseconds((limit - used) / 1000000 / cpus);
            return std::clamp(wait, std::chrono::milliseconds(10), std::chrono::milliseconds(60000));
        };
    }
    // Under bubblewrap, the git directories the stage checks are checked again here once the
    // sandbox is gone, whatever ended it (a process group's SIGTERM kills bubblewrap, the stage with it).
    const std::unique_ptr<platform::EndCheck> end_check =
        planned.plan.confined ? platform::record_end_check(*planned.plan.confined) : nullptr;
    if (end_check) options.afterTree = [&end_check] { end_check->finish(); };
    const posix::SupervisedRun outcome =
        posix::supervise(spawn_argv, options, [&](std::string_view chunk) { classifier.feed(chunk); });
    if (outcome.endedBySignal) {
        // A signal dsh-confine would have died of: the tree is gone and checked; now as before.
        if (proof.tempDir) platform::remove_run_temp_dir(*proof.tempDir);
        limits.reset();
        posix::die_of(outcome.endedBySignal);
    }
    refused.finish();
    if (proof.tempDir) platform::remove_run_temp_dir(*proof.tempDir);
    if (!outcome.spawned) throw Error(code::RunnerExec, outcome.spawnError);

    int exit_code = outcome.exitCode;
    int signal = outcome.signal;
    // bubblewrap's init reports a command that died of signal N as status 128+N. When `run`
    // itself forwarded N, that is what happened: the same event gets the same report as under
    // a backend whose runner is the command itself.
    if (signal == 0 && exit_code > 128 && exit_code < 128 + 32 && planned.plan.confined &&
        planned.plan.confined->backend == "bwrap" && (outcome.forwardedSignals & (1U << (exit_code - 128)))) {
        signal = exit_code - 128;
        exit_code = -1;
    }
    const int status = signal ? 128 + signal : exit_code;
    // Only the runner's proof says the command was reached (and, with 'F', that its execve
    // failed): text on stderr, which the command itself may print, decides nothing here.
    const bool command_missing = outcome.execFailed;
    // The runner's proof decides where there is one: once it started the command (or reached
    // its execve and found it missing), nothing on stderr can prove a runner failure; when it
    // never got there, the run is a runner failure whatever stderr says. Without a proof
    // (none offered, or the runner was killed), the rules decide.
    const bool runner_reached_command = outcome.started && (*outcome.started || command_missing);
    // The proof says the command never started (or was missing): the report's started is false.
    const bool not_started = outcome.started && (!*outcome.started || command_missing);
    Classification verdict = classifier.finish(status, !runner_reached_command);
    // The proxy's own word on what it refused decides the host: a failed command that was refused
    // a host is a denial naming it, whatever its stderr says (a line it printed itself included),
    // and a refusal on stderr that the proxy never reported is the command's own line, no
    // evidence of anything: that failure stays a failure.
    if (proof.reportsRefusals && refused.empty() && verdict.verdict == Verdict::Denial && verdict.host)
        verdict = Classification{Verdict::Failure, status, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt};
    if (!refused.empty() && (verdict.verdict == Verdict::Failure ||
                             (verdict.verdict == Verdict::Denial && !(verdict.host && refused.has(*verdict.host))))) {
        verdict = Classification{Verdict::Denial,
                                 status,
                                 std::string(kRefusedHostPrefix) + refused.first() + ", not in allow_hosts",
                                 std::string(kRefusedHostPrefix),
                                 std::nullopt,
                                 std::nullopt,
                                 refused.first()};
    }
    if (outcome.started && !runner_reached_command && verdict.verdict != Verdict::RunnerFailure) {
        verdict = Classification{Verdict::RunnerFailure, status, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                 std::nullopt};
        verdict.line = outcome.signal ? "the runner was killed by signal " + std::to_string(outcome.signal) +
                                            " before starting the command"
                                      : "the runner exited with status " + std::to_string(status) +
                                            " before starting the command";
    }
    // Which bound ended it: `run`'s own deadline or CPU-time watch, or a limit's counter in the
    // call's cgroup (read now, before the cgroup goes). A limit reached by a run that still
    // succeeded ended nothing.
    std::optional<LimitName> limit;
    if (outcome.ended == posix::TreeEnd::Watch) limit = LimitName::Cpu;
    else if (outcome.ended == posix::TreeEnd::ByItself && status != 0 && limits) limit = limits->reached();
    const bool timed_out = outcome.ended == posix::TreeEnd::Timeout;
    if (timed_out || limit)
        verdict = Classification{limit ? Verdict::Limit : Verdict::Timeout, timed_out ? 124 : status, bound_line(bounds, limit),
                                 std::nullopt, std::nullopt, std::nullopt, std::nullopt};

    if (sink.wanted()) {
        ojson report;
        report["policy"] = policy_json(planned.plan.policy);
        report["argv"] = argv;
        report["backend"] = planned.plan.confined ? ojson(planned.plan.confined->backend) : ojson(nullptr);
        report["enforcement"] = enforcement ? ojson(std::string(to_string(*enforcement))) : ojson(nullptr);
        report["enforcementGaps"] = gaps;
        report["verdict"] = ojson::parse(render_json(verdict));
        report["exitCode"] = signal ? ojson(nullptr) : ojson(exit_code);
        report["signal"] = signal ? ojson(signal) : ojson(nullptr);
        report["started"] = outcome.started ? ojson(!not_started) : ojson(nullptr);
        report["durationMs"] = outcome.durationMs;
        report["outcome"] = outcome_name(outcome.ended, limit, not_started, signal);
        report["limit"] = limit ? ojson(std::string(to_string(*limit))) : ojson(nullptr);
        add_bounds(report, bounds, limits ? limits->enforcement : std::vector<LimitEnforcement>{}, cpu_limit_ns.has_value());
        report["refusedHosts"] = refused.json();
        report["refusedHostsUnlisted"] = refused.unlisted();
        sink.write(report);
    }
    if (timed_out) return 124;
    if (verdict.verdict == Verdict::RunnerFailure) {
        std::fprintf(stderr, "dsh-confine: error: RUNNER_FAILURE: the sandbox runner failed before the command ran: %s\n",
                     verdict.line.value_or("").c_str());
        return 125;
    }
    return status;
}

}  // namespace

int run_confined(const PolicyOptions& options, const std::vector<std::string>& argv, const RunOptions& run) {
    ReportSink sink(run.reportFile, run.reportFd);  // before anything runs: 125 if it cannot be opened
    std::optional<SandboxExecutionPolicy> resolved;
    try {
        require_open_fds(options.keepFds);
        const GivenBounds given = given_bounds(run);
        const Planned planned = plan_call(options, argv, false, &resolved);
        return supervise_and_report(planned, argv, call_bounds(given, planned.resolved.config.run), options.requireFull, sink);
    } catch (const ExitStatus& status) {
        const bool missing = status.code == 127;
        sink.write(failure_report(resolved, argv, missing ? "COMMAND_NOT_FOUND" : "COMMAND_NOT_EXECUTABLE",
                                  argv.empty() ? std::string() : argv.front() + (missing ? ": not found" : ": permission denied"),
                                  status.code));
        throw;
    } catch (const Error& e) {
        sink.write(failure_report(resolved, argv, e.code(), e.what(), 125));
        throw;
    }
}

}  // namespace dsh::cli
