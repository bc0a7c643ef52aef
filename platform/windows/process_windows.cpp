// posix/process.hpp on Windows: PATH lookup as CreateProcess would find a program (PATHEXT
// extensions), "exec" as the C runtime's _exec does it (run the program, then exit with its
// status), and spawning under a timeout for probes, with the whole tree in a job.
#include "../posix/process.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "win32.hpp"

namespace dsh::posix {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string text) {
    for (auto& c : text)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return text;
}

std::vector<std::string> split(const std::string& text, char separator) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t end = text.find(separator, start);
        out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return out;
}

std::string environment(const char* name, const char* fallback) {
    const std::optional<std::wstring> wide = win32::widen(name);
    std::vector<wchar_t> buffer(32768);
    const DWORD n = GetEnvironmentVariableW(wide->c_str(), buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0 || n >= buffer.size()) return fallback;
    return win32::narrow(std::wstring_view(buffer.data(), n));
}

std::vector<std::string> executable_extensions() {
    std::vector<std::string> out;
    for (const auto& ext : split(environment("PATHEXT", ".COM;.EXE;.BAT;.CMD"), ';'))
        if (!ext.empty()) out.push_back(lower(ext));
    return out;
}

enum class Kind { Missing, Directory, File };

Kind kind_of(const std::string& path) {
    std::error_code ec;
    const fs::file_status status = fs::status(win32::to_path(path), ec);
    if (ec || !fs::exists(status)) return Kind::Missing;
    return fs::is_directory(status) ? Kind::Directory : Kind::File;
}

// A name with an executable extension is taken as is; otherwise each PATHEXT extension is
// tried, then the bare name, which exists but cannot be run (126).
ProgramLookup look_in(const std::string& base, const std::vector<std::string>& extensions) {
    const std::string name_lower = lower(base);
    const std::size_t dot = name_lower.find_last_of('.');
    const std::size_t slash = name_lower.find_last_of("\\/");
    const std::string ext = dot == std::string::npos || (slash != std::string::npos && dot < slash) ? "" : name_lower.substr(dot);
    const bool runnable_ext = !ext.empty() && std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
    if (runnable_ext && kind_of(base) == Kind::File) return {Lookup::Found, base};
    if (!runnable_ext)
        for (const auto& candidate_ext : extensions)
            if (kind_of(base + candidate_ext) == Kind::File) return {Lookup::Found, base + candidate_ext};
    if (kind_of(base) == Kind::File) return {Lookup::NotExecutable, base};
    return {Lookup::NotFound, base};
}

}  // namespace

ProgramLookup resolve_program(const std::string& name) {
    if (name.empty()) return {Lookup::NotFound, name};
    const std::vector<std::string> extensions = executable_extensions();
    // A name with a directory part or a drive is a path; the current directory is not
    // searched otherwise (NoDefaultCurrentDirectoryInExePath), as on POSIX.
    if (name.find_first_of("\\/:") != std::string::npos) {
        ProgramLookup found = look_in(name, extensions);
        if (found.status == Lookup::Found) {
            std::error_code ec;
            found.path = win32::from_path(fs::absolute(win32::to_path(found.path), ec));
        }
        return found;
    }
    ProgramLookup not_executable{Lookup::NotFound, name};
    for (const auto& dir : split(environment("PATH", ""), ';')) {
        if (dir.empty()) continue;
        const std::string base = dir + ((dir.back() == '\\' || dir.back() == '/') ? "" : "\\") + name;
        const ProgramLookup found = look_in(base, extensions);
        if (found.status == Lookup::Found) return found;
        if (found.status == Lookup::NotExecutable && not_executable.status == Lookup::NotFound) not_executable = found;
    }
    return not_executable;
}

void exec_argv(const std::string& path, const std::vector<std::string>& argv) {
    // Windows has no exec: the program runs as a child with our standard handles, in a job that
    // dies with us, and this process exits with its status, as _execv does.
    std::string error;
    win32::Handle job = win32::make_kill_on_close_job(&error);
    win32::ChildStart start;
    start.program = path;
    start.argv = argv;
    start.stdinHandle = GetStdHandle(STD_INPUT_HANDLE);
    start.stdoutHandle = GetStdHandle(STD_OUTPUT_HANDLE);
    start.stderrHandle = GetStdHandle(STD_ERROR_HANDLE);
    start.job = job.get();
    win32::Started started = win32::start_child(start);
    if (!started.process) {
        errno = started.errorCode == ERROR_FILE_NOT_FOUND || started.errorCode == ERROR_PATH_NOT_FOUND ? ENOENT : EACCES;
        return;
    }
    // Ctrl+C reaches the child through the shared console; this process waits for its status.
    SetConsoleCtrlHandler(nullptr, TRUE);
    WaitForSingleObject(started.process.get(), INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(started.process.get(), &code);
    std::fflush(nullptr);
    ExitProcess(code);
}

SpawnOutcome spawn_with_timeout(const std::vector<std::string>& argv, int timeout_ms) {
    SpawnOutcome outcome;
    SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, FALSE};
    HANDLE read_end = nullptr, write_end = nullptr;
    if (!CreatePipe(&read_end, &write_end, &inherit, 0)) {
        outcome.error = "CreatePipe: " + win32::error_text(GetLastError());
        return outcome;
    }
    win32::Handle reader(read_end), writer(write_end);
    win32::Handle null_in(CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr, OPEN_EXISTING, 0, nullptr));
    std::string error;
    win32::Handle job = win32::make_kill_on_close_job(&error);
    if (!job) {
        outcome.error = error;
        return outcome;
    }
    win32::ChildStart start;
    start.program = argv.front();
    start.argv = argv;
    start.stdinHandle = null_in.get();
    start.stdoutHandle = writer.get();
    start.stderrHandle = writer.get();
    start.job = job.get();
    win32::Started started = win32::start_child(start);
    writer.reset();  // the child holds the only write end now: EOF when its tree is gone
    if (!started.process) {
        outcome.error = argv.front() + ": " + started.error;
        return outcome;
    }
    outcome.started = true;
    std::string output;
    std::thread drain([&] {
        char buffer[4096];
        DWORD n = 0;
        while (ReadFile(reader.get(), buffer, sizeof buffer, &n, nullptr) && n > 0)
            if (output.size() < 65536) output.append(buffer, n);
    });
    const DWORD waited = WaitForSingleObject(started.process.get(), timeout_ms < 0 ? INFINITE : static_cast<DWORD>(timeout_ms));
    if (waited != WAIT_OBJECT_0) outcome.timedOut = true;
    // Nothing of a probe outlives it: the job's other processes may hold the pipe open.
    TerminateJobObject(job.get(), 1);
    drain.join();
    outcome.output = output;
    if (outcome.timedOut) return outcome;
    DWORD code = 1;
    GetExitCodeProcess(started.process.get(), &code);
    outcome.exitCode = static_cast<int>(code);
    return outcome;
}

std::string self_executable() {
    std::vector<wchar_t> buffer(32768);
    const DWORD n = GetModuleFileNameW(nullptr, buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0 || n >= buffer.size()) return {};
    return win32::narrow(std::wstring_view(buffer.data(), n));
}

}  // namespace dsh::posix
