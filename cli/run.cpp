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
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../lib/classify.hpp"
#include "../lib/error.hpp"
#include "../lib/policy.hpp"
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
    report["error"] = {{"code", code_name}, {"message", message}};
    return report;
}

int supervise_and_report(const Planned& planned, const std::vector<std::string>& argv, ReportSink& sink) {
    std::vector<std::string> spawn_argv = planned.plan.argv;
    platform::StartProofPlan proof;
    Dialect dialect;
    if (planned.plan.confined) {
        proof = platform::prepare_for_run(spawn_argv, planned.plan.confined->backend);
        dialect = {planned.plan.confined->denialSignatures, planned.plan.confined->runnerFailureRules};
    } else {
        spawn_argv.front() = posix::resolve_program(argv.front()).path;
    }

    StreamClassifier classifier(std::move(dialect));
    posix::SuperviseOptions options;
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
    options.runnerEndsTree = proof.runnerEndsTree;
    options.timed = sink.wanted();  // the duration is only in the report
    const posix::SupervisedRun outcome =
        posix::supervise(spawn_argv, options, [&](std::string_view chunk) { classifier.feed(chunk); });
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
    Classification verdict = classifier.finish(status, !runner_reached_command);
    if (outcome.started && !runner_reached_command && verdict.verdict != Verdict::RunnerFailure) {
        verdict = Classification{Verdict::RunnerFailure, status, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
        verdict.line = outcome.signal ? "the runner was killed by signal " + std::to_string(outcome.signal) +
                                            " before starting the command"
                                      : "the runner exited with status " + std::to_string(status) +
                                            " before starting the command";
    }

    if (sink.wanted()) {
        ojson report;
        report["policy"] = policy_json(planned.plan.policy);
        report["argv"] = argv;
        report["backend"] = planned.plan.confined ? ojson(planned.plan.confined->backend) : ojson(nullptr);
        report["enforcement"] = planned.plan.confined ? ojson(std::string(to_string(planned.plan.confined->enforcement)))
                                                      : ojson(nullptr);
        report["enforcementGaps"] = planned.plan.confined ? planned.plan.confined->enforcementGaps : std::vector<std::string>{};
        report["verdict"] = ojson::parse(render_json(verdict));
        report["exitCode"] = signal ? ojson(nullptr) : ojson(exit_code);
        report["signal"] = signal ? ojson(signal) : ojson(nullptr);
        report["started"] = outcome.started ? ojson(*outcome.started && !command_missing) : ojson(nullptr);
        report["durationMs"] = outcome.durationMs;
        sink.write(report);
    }
    if (verdict.verdict == Verdict::RunnerFailure) {
        std::fprintf(stderr, "dsh-confine: error: RUNNER_FAILURE: the sandbox runner failed before the command ran: %s\n",
                     verdict.line.value_or("").c_str());
        return 125;
    }
    return status;
}

}  // namespace

int run_confined(const PolicyOptions& options, const std::vector<std::string>& argv, const std::string& report_file,
                 int report_fd) {
    ReportSink sink(report_file, report_fd);  // before anything runs: 125 if it cannot be opened
    std::optional<SandboxExecutionPolicy> resolved;
    try {
        require_open_fds(options.keepFds);
        const Planned planned = plan_call(options, argv, false, &resolved);
        return supervise_and_report(planned, argv, sink);
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
