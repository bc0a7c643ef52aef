// What the Windows sources share: UTF-8 <-> UTF-16 at the API boundary (dsh-confine's strings
// are UTF-8 everywhere else), error texts, an owning HANDLE, and starting a child process
// with a given set of inherited standard handles in a kill-on-close job.
#pragma once

#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsh::win32 {

// nullopt for malformed UTF-8: nothing is passed to Windows altered.
std::optional<std::wstring> widen(std::string_view text);
std::string narrow(std::wstring_view text);

std::filesystem::path to_path(const std::string& utf8);
std::string from_path(const std::filesystem::path& path);

// "Access is denied. (error 5)"
std::string error_text(DWORD error);

class Handle {
public:
    Handle() = default;
    explicit Handle(HANDLE handle) : handle_(handle) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& other) noexcept : handle_(other.release()) {}
    Handle& operator=(Handle&& other) noexcept {
        reset(other.release());
        return *this;
    }
    ~Handle() { reset(); }
    HANDLE get() const { return handle_; }
    explicit operator bool() const { return handle_ != nullptr && handle_ != INVALID_HANDLE_VALUE; }
    HANDLE release() {
        HANDLE out = handle_;
        handle_ = nullptr;
        return out;
    }
    void reset(HANDLE handle = nullptr) {
        if (*this) CloseHandle(handle_);
        handle_ = handle;
    }

private:
    HANDLE handle_ = nullptr;
};

// A job whose processes all die when its last handle closes: the command's whole tree goes
// with dsh-confine, as PR_SET_PDEATHSIG and the process-group kill do on Linux.
Handle make_kill_on_close_job(std::string* error);

struct ChildStart {
    std::string program;                  // the file to run (absolute), UTF-8
    std::vector<std::string> argv;        // argv[0] included; quoted by the CommandLineToArgvW rules
    HANDLE stdinHandle = nullptr;         // each inherited (duplicated inheritable); null: none
    HANDLE stdoutHandle = nullptr;
    HANDLE stderrHandle = nullptr;
    HANDLE token = nullptr;               // CreateProcessAsUserW on it when set
    const std::wstring* environment = nullptr;  // a CREATE_UNICODE_ENVIRONMENT block, or the caller's
    HANDLE job = nullptr;                 // assigned before the first instruction runs
};

struct Started {
    Handle process;
    std::string error;  // why it could not start
    DWORD errorCode = 0;
};

// Creates the process suspended, with only the three given handles inherited, puts it in the
// job, then lets it run.
Started start_child(const ChildStart& start);

// The caller's environment with `overrides` set (names compared case-insensitively), as a
// block for CreateProcessW.
std::wstring environment_block(const std::vector<std::pair<std::string, std::string>>& overrides);

// Deletes `path` and what it contains without following a reparse point: a symlink or
// junction found inside is removed itself, never entered. True when nothing is left.
bool remove_tree(const std::string& path);

}  // namespace dsh::win32
