// posix/supervise.hpp on Windows: the command (or its runner) starts with our stdin and stdout,
// its stderr comes through a pipe, is passed on as it comes and shown to the callback; it runs
// in a job that dies with dsh-confine. Ctrl+C and Ctrl+Break reach it through the console it
// shares with us, so this process only ignores them and waits. No runner here offers a proof
// of start: attribution relies on stderr and the runner-failure rules.
#include "../posix/supervise.hpp"

#include <chrono>
#include <cstdlib>

#include "win32.hpp"

namespace dsh::posix {
namespace {

BOOL WINAPI ignore_console_event(DWORD) { return TRUE; }

}  // namespace

SupervisedRun supervise(std::vector<std::string> argv, const SuperviseOptions& /*options*/,
                        const std::function<void(std::string_view)>& on_stderr) {
    SupervisedRun run;
    const auto began = std::chrono::steady_clock::now();
    SECURITY_ATTRIBUTES plain{sizeof(SECURITY_ATTRIBUTES), nullptr, FALSE};
    HANDLE read_end = nullptr, write_end = nullptr;
    if (!CreatePipe(&read_end, &write_end, &plain, 0)) {
        run.spawnError = "CreatePipe: " + win32::error_text(GetLastError());
        return run;
    }
    win32::Handle reader(read_end), writer(write_end);
    std::string error;
    win32::Handle job = win32::make_kill_on_close_job(&error);
    if (!job) {
        run.spawnError = error;
        return run;
    }
    win32::ChildStart start;
    start.program = argv.front();
    start.argv = argv;
    start.stdinHandle = GetStdHandle(STD_INPUT_HANDLE);
    start.stdoutHandle = GetStdHandle(STD_OUTPUT_HANDLE);
    start.stderrHandle = writer.get();
    start.job = job.get();
    SetConsoleCtrlHandler(ignore_console_event, TRUE);
    win32::Started started = win32::start_child(start);
    writer.reset();
    if (!started.process) {
        SetConsoleCtrlHandler(ignore_console_event, FALSE);
        run.spawnError = "cannot execute " + argv.front() + ": " + started.error;
        return run;
    }
    run.spawned = true;
    const HANDLE own_stderr = GetStdHandle(STD_ERROR_HANDLE);
    char buffer[65536];
    DWORD n = 0;
    // The pipe closes when the last process of the tree holding it is gone.
    while (ReadFile(reader.get(), buffer, sizeof buffer, &n, nullptr) && n > 0) {
        DWORD written = 0;
        for (DWORD done = 0; done < n && own_stderr && own_stderr != INVALID_HANDLE_VALUE; done += written)
            if (!WriteFile(own_stderr, buffer + done, n - done, &written, nullptr) || written == 0) break;
        on_stderr(std::string_view(buffer, n));
    }
    WaitForSingleObject(started.process.get(), INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(started.process.get(), &code);
    TerminateJobObject(job.get(), 1);  // whatever it left behind goes too
    SetConsoleCtrlHandler(ignore_console_event, FALSE);
    run.exitCode = static_cast<int>(code);
    run.durationMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count();
    return run;
}

void die_of(int sig) { std::_Exit(128 + sig); }

}  // namespace dsh::posix
