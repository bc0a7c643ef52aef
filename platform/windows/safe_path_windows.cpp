// safe_path on Windows: a path is opened with FILE_FLAG_OPEN_REPARSE_POINT, and refused when
// what it names is a reparse point (a symlink or junction), since Windows has no openat2; a
// file's identity is its volume serial number and file index.
#include "../posix/safe_path.hpp"

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <fcntl.h>
#include <io.h>

#include "win32.hpp"

namespace dsh::posix {
namespace {

std::optional<FileIdentity> identity_of_handle(HANDLE handle) {
    BY_HANDLE_FILE_INFORMATION info{};
    if (!GetFileInformationByHandle(handle, &info)) return std::nullopt;
    return FileIdentity{info.dwVolumeSerialNumber,
                        (static_cast<unsigned long long>(info.nFileIndexHigh) << 32) | info.nFileIndexLow};
}

}  // namespace

std::string FileIdentity::text() const { return std::to_string(device) + ":" + std::to_string(inode); }

std::optional<FileIdentity> FileIdentity::parse(std::string_view text) {
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
    try {
        std::size_t used = 0;
        const std::string device(text.substr(0, colon)), inode(text.substr(colon + 1));
        FileIdentity out{std::stoull(device, &used), 0};
        if (used != device.size()) return std::nullopt;
        out.inode = std::stoull(inode, &used);
        if (used != inode.size()) return std::nullopt;
        return out;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

int open_no_symlinks(const std::string& path, int flags, unsigned mode) {
    const auto wide = win32::widen(path);
    if (!wide) {
        errno = EINVAL;
        return -1;
    }
    const DWORD attributes = GetFileAttributesW(wide->c_str());
    if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        errno = ELOOP;
        return -1;
    }
    return _wopen(wide->c_str(), flags | _O_BINARY | _O_NOINHERIT, static_cast<int>(mode));
}

std::optional<FileIdentity> identity_of(int fd) {
    const auto handle = reinterpret_cast<HANDLE>(_get_osfhandle(fd));
    if (handle == INVALID_HANDLE_VALUE) return std::nullopt;
    return identity_of_handle(handle);
}

std::optional<FileIdentity> directory_identity(const std::string& path, std::string& why) {
    const auto wide = win32::widen(path);
    if (!wide) {
        why = path + ": not valid UTF-8";
        return std::nullopt;
    }
    win32::Handle handle(CreateFileW(wide->c_str(), FILE_READ_ATTRIBUTES, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                                     nullptr, OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT, nullptr));
    if (!handle) {
        why = path + ": " + win32::error_text(GetLastError());
        return std::nullopt;
    }
    FILE_BASIC_INFO basic{};
    if (GetFileInformationByHandleEx(handle.get(), FileBasicInfo, &basic, sizeof basic) &&
        (basic.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
        why = path + ": a reparse point (symlink or junction)";
        return std::nullopt;
    }
    auto id = identity_of_handle(handle.get());
    if (!id) why = path + ": " + win32::error_text(GetLastError());
    return id;
}

std::optional<std::string> trusted_executable(const std::string& path, std::string& why) {
    // Not used on Windows: the restricted-token runner is dsh-confine itself, run in place.
    why = path + ": not checked on Windows";
    return std::nullopt;
}

std::string resolved_path(const std::string& path) {
    std::error_code ec;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : resolved.string();
}

}  // namespace dsh::posix
