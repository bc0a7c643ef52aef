// `dsh-confine run`: spawn the confined command, pass its output through, attribute the
// result. Attribution uses the runner's proof of start where the backend has one, so a
// runner failure is never taken for the command's own, and a command that prints a runner's
// message after it started cannot fake one.
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../lib/classify.hpp"
#include "../lib/error.hpp"
#include "../platform/platform.hpp"
#include "../platform/posix/process.hpp"
#include "../platform/posix/supervise.hpp"
#include "common.hpp"

namespace dsh::cli {

int run_confined(const PolicyOptions& options, const std::vector<std::string>& argv, const std::string& report_file,
                 int report_fd) {
    if (!report_file.empty() && report_fd >= 0) throw Error(code::Usage, "give --report or --report-fd, not both");
    if (report_fd >= 0 && fcntl(report_fd, F_GETFD) < 0)
        throw Error(code::Usage, "--report-fd " + std::to_string(report_fd) + " is not an open file descriptor");
    Planned planned = plan_call(options, argv, false);

    std::vector<std::string> spawn_argv = planned.plan.argv;
    platform::StartProofPlan proof;
    Dialect dialect;
    if (planned.plan.confined) {
        proof = platform::prepare_for_run(spawn_argv, planned.plan.confined->backend);
        dialect = {planned.plan.confined->denialSignatures, planned.plan.confined->runnerFailureRules};
    } else {
        spawn_argv.front() = posix::resolve_program(argv.front()).path;
    }

    StreamClassifier classifier(dialect);
    const posix::SupervisedRun outcome = posix::supervise(
        spawn_argv, proof.proof, proof.fdSlot, [&](std::string_view chunk) { classifier.feed(chunk); },
        proof.bwrapStatusSlot);
    if (proof.tempDir) platform::remove_run_temp_dir(*proof.tempDir);
    if (!outcome.spawned) throw Error(code::RunnerExec, outcome.spawnError);

    const int status = outcome.signal ? 128 + outcome.signal : outcome.exitCode;
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
        verdict = Classification{Verdict::RunnerFailure, status, std::nullopt, std::nullopt, std::nullopt};
        verdict.line = outcome.signal ? "the runner was killed by signal " + std::to_string(outcome.signal) +
                                            " before starting the command"
                                      : "the runner exited with status " + std::to_string(status) +
                                            " before starting the command";
    }

    if (!report_file.empty() || report_fd >= 0) {
        nlohmann::ordered_json report;
        report["policy"] = policy_json(planned.plan.policy);
        report["argv"] = argv;
        report["backend"] = planned.plan.confined ? nlohmann::ordered_json(planned.plan.confined->backend) : nlohmann::ordered_json(nullptr);
        report["enforcement"] = planned.plan.confined
                                    ? nlohmann::ordered_json(std::string(to_string(planned.plan.confined->enforcement)))
                                    : nlohmann::ordered_json(nullptr);
        report["enforcementGaps"] = planned.plan.confined ? planned.plan.confined->enforcementGaps : std::vector<std::string>{};
        report["verdict"] = nlohmann::ordered_json::parse(render_json(verdict));
        report["exitCode"] = outcome.signal ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(outcome.exitCode);
        report["signal"] = outcome.signal ? nlohmann::ordered_json(outcome.signal) : nlohmann::ordered_json(nullptr);
        report["started"] = outcome.started ? nlohmann::ordered_json(*outcome.started && !command_missing)
                                            : nlohmann::ordered_json(nullptr);
        report["durationMs"] = outcome.durationMs;
        const std::string text = report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
        if (!report_file.empty()) {
            std::ofstream out(report_file, std::ios::binary | std::ios::trunc);
            out << text;
            if (!out) std::fprintf(stderr, "dsh-confine: error: %s: cannot write the report to %s\n", code::Input, report_file.c_str());
        } else {
            std::size_t done = 0;
            while (done < text.size()) {
                const ssize_t n = write(report_fd, text.data() + done, text.size() - done);
                if (n <= 0) break;
                done += static_cast<std::size_t>(n);
            }
        }
    }
    if (verdict.verdict == Verdict::RunnerFailure) {
        std::fprintf(stderr, "dsh-confine: error: RUNNER_FAILURE: the sandbox runner failed before the command ran: %s\n",
                     verdict.line.value_or("").c_str());
        return 125;
    }
    return status;
}

}  // namespace dsh::cli
