// posix/effects.hpp on Windows: the effects `doctor --verify` asks for that Windows has, done
// with the file API; the POSIX-only ones (chmod, chgrp, mkfifo, mknod, unix sockets, TIOCSTI,
// xattrs) are refused as unsupported (status 2), never reported as done. There is no pty.
#include "../posix/effects.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <cstring>

#include "../posix/process.hpp"
#include "win32.hpp"

namespace dsh::posix {
namespace {

namespace fs = std::filesystem;

int refused(const std::string& what, DWORD error) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(), win32::error_text(error).c_str());
    return 1;
}

int write_to(const std::string& path, DWORD disposition, bool append, const char* data) {
    const std::optional<std::wstring> wide = win32::widen(path);
    if (!wide) return 2;
    win32::Handle file(CreateFileW(wide->c_str(), append ? FILE_APPEND_DATA : GENERIC_WRITE, FILE_SHARE_READ, nullptr,
                                   disposition, FILE_ATTRIBUTE_NORMAL, nullptr));
    if (!file) return refused("open " + path, GetLastError());
    DWORD n = 0;
    if (!WriteFile(file.get(), data, static_cast<DWORD>(std::strlen(data)), &n, nullptr)) return refused("write " + path, GetLastError());
    return 0;
}

std::optional<std::wstring> wide(const std::string& path) { return win32::widen(path); }

}  // namespace

int perform_effect(const std::string& op, const std::vector<std::string>& a) {
    auto need = [&](std::size_t n) { return a.size() >= n && std::all_of(a.begin(), a.end(), [](const std::string& s) {
                                                 return win32::widen(s).has_value();
                                             }); };
    if (op == "create" && need(1)) return write_to(a[0], CREATE_NEW, false, "created\n");
    if (op == "write" && need(1)) return write_to(a[0], TRUNCATE_EXISTING, false, "overwritten\n");
    if (op == "append" && need(1)) return write_to(a[0], OPEN_EXISTING, true, "appended\n");
    if (op == "mkdir" && need(1))
        return CreateDirectoryW(wide(a[0])->c_str(), nullptr) ? 0 : refused("mkdir " + a[0], GetLastError());
    if (op == "rmdir" && need(1)) return RemoveDirectoryW(wide(a[0])->c_str()) ? 0 : refused("rmdir " + a[0], GetLastError());
    if (op == "unlink" && need(1)) return DeleteFileW(wide(a[0])->c_str()) ? 0 : refused("unlink " + a[0], GetLastError());
    if (op == "rename" && need(2))
        return MoveFileExW(wide(a[0])->c_str(), wide(a[1])->c_str(), 0) ? 0 : refused("rename " + a[0], GetLastError());
    if (op == "link" && need(2))
        return CreateHardLinkW(wide(a[1])->c_str(), wide(a[0])->c_str(), nullptr) ? 0 : refused("link " + a[1], GetLastError());
    if (op == "read" && need(1)) {
        win32::Handle file(CreateFileW(wide(a[0])->c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                                       OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr));
        return file ? 0 : refused("read " + a[0], GetLastError());
    }
    if (op == "tempfile") {
        wchar_t dir[MAX_PATH + 1];
        const DWORD n = GetTempPathW(MAX_PATH + 1, dir);
        if (n == 0) return refused("GetTempPath", GetLastError());
        const std::string path = win32::narrow(std::wstring_view(dir, n)) + "dsh-confine-verify-" +
                                 std::to_string(std::random_device{}());
        const int status = write_to(path, CREATE_NEW, false, "x");
        DeleteFileW(wide(path)->c_str());
        return status;
    }
    std::fprintf(stderr, "effect '%s' is unsupported on Windows, or its arguments are missing\n", op.c_str());
    return 2;
}

std::string snapshot_tree(const std::string& path) {
    std::ostringstream out;
    std::error_code ec;
    const fs::path root = win32::to_path(path);
    const fs::file_status status = fs::symlink_status(root, ec);
    if (ec || !fs::exists(status)) return path + " missing\n";
    out << path << " type=" << static_cast<int>(status.type()) << " perms=" << static_cast<int>(status.permissions());
    const DWORD attributes = GetFileAttributesW(root.c_str());
    out << " attributes=" << attributes;
    if (fs::is_regular_file(status)) {
        out << " size=" << fs::file_size(root, ec) << " mtime=" << fs::last_write_time(root, ec).time_since_epoch().count();
        std::ifstream in(root, std::ios::binary);
        std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        out << " content=" << std::hash<std::string>{}(content);
    }
    out << "\n";
    if (fs::is_directory(status)) {
        std::vector<std::string> entries;
        for (const auto& entry : fs::directory_iterator(root, ec)) entries.push_back(win32::from_path(entry.path().filename()));
        std::sort(entries.begin(), entries.end());
        for (const auto& entry : entries) out << snapshot_tree(path + "\\" + entry);
    }
    return out.str();
}

Pty open_pty() { return Pty{}; }  // no pseudo-terminal to test TIOCSTI with: the check is skipped

int pending_input(const Pty&) { return -1; }

EffectRun run_effect(const std::vector<std::string>& argv, const Pty*, int timeout_ms) {
    const SpawnOutcome outcome = spawn_with_timeout(argv, timeout_ms);
    EffectRun run;
    run.started = outcome.started;
    run.timedOut = outcome.timedOut;
    run.exitCode = outcome.exitCode;
    run.output = outcome.output.substr(0, 16384);
    return run;
}

}  // namespace dsh::posix
