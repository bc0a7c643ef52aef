// posix/state_store.hpp on Windows: the same layout, <state>/sessions/<ID>/{session.json,
// events.log, tmp/}. A directory that is a reparse point (symlink, junction, mount point) is
// refused rather than followed; the record is created with MoveFileEx without replacement,
// which is atomic and exclusive; appends hold LockFileEx over the whole file. The directories
// take the ACL they inherit from the user's profile, which is private to the user.
#include "../posix/state_store.hpp"

#include <spdlog/spdlog.h>

#include "../../lib/error.hpp"
#include "win32.hpp"

namespace dsh::posix {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void state_error(const std::string& what, DWORD error) {
    throw Error(code::State, what + ": " + win32::error_text(error));
}

std::wstring wide(const std::string& path) {
    const std::optional<std::wstring> out = win32::widen(path);
    if (!out) throw Error(code::State, "'" + path + "' is not valid UTF-8");
    return *out;
}

// Missing: nullopt. A reparse point or a file where a directory belongs: an error.
bool directory_exists(const std::string& path) {
    const DWORD attributes = GetFileAttributesW(wide(path).c_str());
    if (attributes == INVALID_FILE_ATTRIBUTES) {
        const DWORD error = GetLastError();
        if (error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND) return false;
        state_error(path, error);
    }
    if (attributes & FILE_ATTRIBUTE_REPARSE_POINT)
        throw Error(code::State, path + ": is a symlink or junction, refused");
    if (!(attributes & FILE_ATTRIBUTE_DIRECTORY)) throw Error(code::State, path + ": not a directory");
    return true;
}

void ensure_directory(const std::string& path) {
    if (directory_exists(path)) return;
    if (!CreateDirectoryW(wide(path).c_str(), nullptr) && GetLastError() != ERROR_ALREADY_EXISTS)
        state_error(path, GetLastError());
    directory_exists(path);
}

win32::Handle open_file(const std::string& path, DWORD access, DWORD disposition) {
    // FILE_FLAG_OPEN_REPARSE_POINT: a planted symlink is opened as itself and then refused.
    win32::Handle file(CreateFileW(wide(path).c_str(), access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                                   nullptr, disposition, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
    if (!file) return file;
    FILE_ATTRIBUTE_TAG_INFO tag{};
    if (GetFileInformationByHandleEx(file.get(), FileAttributeTagInfo, &tag, sizeof tag) &&
        (tag.FileAttributes & (FILE_ATTRIBUTE_REPARSE_POINT | FILE_ATTRIBUTE_DIRECTORY)))
        throw Error(code::State, path + ": not a regular file (a symlink here is refused)");
    return file;
}

std::string read_handle(HANDLE file, const std::string& shown) {
    std::string content;
    char buffer[65536];
    DWORD n = 0;
    LARGE_INTEGER start{};
    SetFilePointerEx(file, start, nullptr, FILE_BEGIN);
    while (true) {
        if (!ReadFile(file, buffer, sizeof buffer, &n, nullptr)) state_error(shown, GetLastError());
        if (n == 0) break;
        content.append(buffer, n);
    }
    return content;
}

std::optional<std::string> read_file(const std::string& path, bool shared_lock) {
    win32::Handle file = open_file(path, GENERIC_READ, OPEN_EXISTING);
    if (!file) {
        const DWORD error = GetLastError();
        if (error == ERROR_FILE_NOT_FOUND || error == ERROR_PATH_NOT_FOUND) return std::nullopt;
        state_error(path, error);
    }
    OVERLAPPED whole{};
    if (shared_lock) LockFileEx(file.get(), 0, 0, MAXDWORD, MAXDWORD, &whole);
    std::string content = read_handle(file.get(), path);
    if (shared_lock) UnlockFileEx(file.get(), 0, MAXDWORD, MAXDWORD, &whole);
    return content;
}

bool write_handle(HANDLE file, const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
        DWORD n = 0;
        const DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(data.size() - done, 1 << 20));
        if (!WriteFile(file, data.data() + done, chunk, &n, nullptr) || n == 0) return false;
        done += n;
    }
    return true;
}

bool truncate_to(HANDLE file, LONGLONG size) {
    LARGE_INTEGER at{};
    at.QuadPart = size;
    return SetFilePointerEx(file, at, nullptr, FILE_BEGIN) && SetEndOfFile(file);
}

}  // namespace

bool make_private_dirs(const std::string& path) {
    std::error_code ec;
    fs::create_directories(win32::to_path(path), ec);
    return fs::is_directory(win32::to_path(path), ec);
}

int StateDirStorage::open_sessions(bool create) const {
    if (create) {
        if (!make_private_dirs(state_dir_)) state_error(state_dir_, GetLastError());
        ensure_directory(state_dir_ + "\\sessions");
        return 0;
    }
    if (!directory_exists(state_dir_) || !directory_exists(state_dir_ + "\\sessions")) return -1;
    return 0;
}

int StateDirStorage::open_session(const std::string& id, bool create) const {
    if (open_sessions(create) < 0) return -1;
    const std::string path = state_dir_ + "\\sessions\\" + id;
    if (create) ensure_directory(path);
    else if (!directory_exists(path)) return -1;
    return 0;
}

std::optional<std::string> StateDirStorage::read_record(const std::string& id) {
    if (open_session(id, false) < 0) return std::nullopt;
    return read_file(state_dir_ + "\\sessions\\" + id + "\\session.json", false);
}

bool StateDirStorage::create_record(const std::string& id, const std::string& content) {
    open_session(id, true);
    const std::string dir = state_dir_ + "\\sessions\\" + id;
    const std::string shown = dir + "\\session.json";
    const std::string temp = dir + "\\.session.json." + std::to_string(GetCurrentProcessId());
    DeleteFileW(wide(temp).c_str());
    {
        win32::Handle file = open_file(temp, GENERIC_WRITE, CREATE_NEW);
        if (!file) state_error(shown, GetLastError());
        if (!write_handle(file.get(), content) || !FlushFileBuffers(file.get())) {
            const DWORD error = GetLastError();
            file.reset();
            DeleteFileW(wide(temp).c_str());
            state_error(shown, error);
        }
    }
    // Without MOVEFILE_REPLACE_EXISTING the move never replaces: of concurrent starters exactly
    // one creates the record.
    const BOOL moved = MoveFileExW(wide(temp).c_str(), wide(shown).c_str(), MOVEFILE_WRITE_THROUGH);
    const DWORD error = GetLastError();
    DeleteFileW(wide(temp).c_str());
    if (moved) return true;
    if (error == ERROR_ALREADY_EXISTS || error == ERROR_FILE_EXISTS) return false;
    state_error(shown, error);
}

std::optional<std::string> StateDirStorage::read_log(const std::string& id) {
    if (open_session(id, false) < 0) return std::nullopt;
    return read_file(state_dir_ + "\\sessions\\" + id + "\\events.log", true);
}

void StateDirStorage::append_log(const std::string& id, const std::string& line) {
    if (open_session(id, false) < 0) throw Error(code::Session, "no session '" + id + "'");
    const std::string shown = state_dir_ + "\\sessions\\" + id + "\\events.log";
    win32::Handle file = open_file(shown, GENERIC_READ | GENERIC_WRITE, OPEN_ALWAYS);
    if (!file) state_error(shown, GetLastError());
    // One writer at a time over the whole file, and each event is one write: appends never
    // interleave.
    OVERLAPPED whole{};
    if (!LockFileEx(file.get(), LOCKFILE_EXCLUSIVE_LOCK, 0, MAXDWORD, MAXDWORD, &whole)) state_error(shown, GetLastError());
    LARGE_INTEGER size{};
    if (!GetFileSizeEx(file.get(), &size)) state_error(shown, GetLastError());
    LONGLONG end = size.QuadPart;
    if (end > 0) {
        const std::string content = read_handle(file.get(), shown);
        if (!content.empty() && content.back() != '\n') {
            // A crash tore the last append: drop the fragment so the next event starts a line.
            const std::size_t keep = content.find_last_of('\n') == std::string::npos ? 0 : content.find_last_of('\n') + 1;
            spdlog::warn("session '{}': dropping a torn last line of {} bytes", id, content.size() - keep);
            if (!truncate_to(file.get(), static_cast<LONGLONG>(keep))) state_error(shown, GetLastError());
            end = static_cast<LONGLONG>(keep);
        }
    }
    LARGE_INTEGER at{};
    at.QuadPart = end;
    SetFilePointerEx(file.get(), at, nullptr, FILE_BEGIN);
    if (!write_handle(file.get(), line) || !FlushFileBuffers(file.get())) {
        const DWORD error = GetLastError();
        // Leave no partial event behind: an event is written whole or not at all.
        if (!truncate_to(file.get(), end)) spdlog::warn("{}: could not undo a partial append", shown);
        state_error(shown + ": the event was not written", error);
    }
    UnlockFileEx(file.get(), 0, MAXDWORD, MAXDWORD, &whole);
}

bool StateDirStorage::remove(const std::string& id) {
    if (open_sessions(false) < 0) return false;
    const std::string path = state_dir_ + "\\sessions\\" + id;
    if (!directory_exists(path)) return false;
    if (!win32::remove_tree(path)) state_error(path + ": could not be removed", GetLastError());
    return true;
}

std::string StateDirStorage::temp_dir(const std::string& id) {
    if (open_session(id, false) < 0) throw Error(code::Session, "no session '" + id + "'");
    const std::string path = state_dir_ + "\\sessions\\" + id + "\\tmp";
    ensure_directory(path);
    return path;
}

std::optional<std::string> FileProbeCache::read(const std::string& key) {
    const std::string path = cache_dir_ + "\\" + key + ".json";
    try {
        std::optional<std::string> content = read_file(path, false);
        if (content && content->size() > 65536) {
            spdlog::debug("probe cache {}: larger than 64 KiB (ignored)", path);
            return std::nullopt;
        }
        return content;
    } catch (const Error& e) {
        spdlog::debug("probe cache {}: {} (ignored)", path, e.what());
        return std::nullopt;
    }
}

void FileProbeCache::discard(const std::string& key, const std::string& why) {
    spdlog::debug("probe cache {}\\{}.json: {} (ignored, probing again)", cache_dir_, key, why);
}

void FileProbeCache::write(const std::string& key, const std::string& content) {
    try {
        if (!make_private_dirs(cache_dir_)) {
            spdlog::debug("probe cache {}: cannot be created (ignored)", cache_dir_);
            return;
        }
        const std::string path = cache_dir_ + "\\" + key + ".json";
        const std::string temp = path + ".tmp." + std::to_string(GetCurrentProcessId());
        {
            win32::Handle file = open_file(temp, GENERIC_WRITE, CREATE_ALWAYS);
            if (!file || !write_handle(file.get(), content)) {
                spdlog::debug("probe cache {}: cannot be written: {} (ignored)", temp, win32::error_text(GetLastError()));
                file.reset();
                DeleteFileW(wide(temp).c_str());
                return;
            }
        }
        if (!MoveFileExW(wide(temp).c_str(), wide(path).c_str(), MOVEFILE_REPLACE_EXISTING)) {
            spdlog::debug("probe cache {}: cannot be replaced: {} (ignored)", path, win32::error_text(GetLastError()));
            DeleteFileW(wide(temp).c_str());
        }
    } catch (const Error& e) {
        spdlog::debug("probe cache {}: {} (ignored)", cache_dir_, e.what());
    }
}

}  // namespace dsh::posix

namespace dsh::win32 {
namespace {

// Deletes `path` and what it contains without following a reparse point: a link or junction
// found inside is removed itself, never entered.
bool remove_wide_tree(const std::wstring& path) {
    const DWORD attributes = GetFileAttributesW(path.c_str());
    if (attributes == INVALID_FILE_ATTRIBUTES) return GetLastError() == ERROR_FILE_NOT_FOUND || GetLastError() == ERROR_PATH_NOT_FOUND;
    if (attributes & FILE_ATTRIBUTE_READONLY) SetFileAttributesW(path.c_str(), attributes & ~FILE_ATTRIBUTE_READONLY);
    if (!(attributes & FILE_ATTRIBUTE_DIRECTORY)) return DeleteFileW(path.c_str()) != 0;
    bool ok = true;
    if (!(attributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        WIN32_FIND_DATAW found{};
        HANDLE search = FindFirstFileW((path + L"\\*").c_str(), &found);
        if (search != INVALID_HANDLE_VALUE) {
            do {
                const std::wstring name = found.cFileName;
                if (name != L"." && name != L"..") ok = remove_wide_tree(path + L"\\" + name) && ok;
            } while (FindNextFileW(search, &found));
            FindClose(search);
        }
    }
    return RemoveDirectoryW(path.c_str()) != 0 && ok;
}

}  // namespace

bool remove_tree(const std::string& path) {
    const std::optional<std::wstring> wide = widen(path);
    return wide && remove_wide_tree(*wide);
}

}  // namespace dsh::win32

