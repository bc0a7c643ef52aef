/* The few POSIX calls cli/ makes directly, for Windows builds, where the C runtime lacks them.
 * Force-included into every translation unit of a Windows build (CMake's WIN32 branch), so
 * cli/ compiles unchanged; each shim does what the POSIX call does, or fails as it would.
 * It includes no <windows.h>, whose macros (min, max, ERROR, DELETE...) would leak into cli/. */
#ifndef DSH_CONFINE_POSIX_SHIMS_H
#define DSH_CONFINE_POSIX_SHIMS_H

/* mingw-w64's <time.h> declares gmtime_r only under this macro. */
#if !defined(_MSC_VER) && !defined(_POSIX_THREAD_SAFE_FUNCTIONS)
#define _POSIX_THREAD_SAFE_FUNCTIONS 200112L
#endif

#ifdef __cplusplus
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

#include <direct.h>
#include <fcntl.h>
#include <io.h>
#include <process.h>
#include <stdlib.h>

#ifdef _MSC_VER
typedef std::intptr_t ssize_t;
/* The C runtime's gmtime_s takes its arguments the other way round. */
inline struct tm* gmtime_r(const time_t* seconds, struct tm* parts) {
    return gmtime_s(parts, seconds) == 0 ? parts : nullptr;
}
#endif

#ifndef F_GETFD
#define F_GETFD 1
/* Only F_GETFD, the one use: whether `fd` is an open descriptor (0) or not (-1, EBADF). An
 * invalid descriptor would otherwise reach the C runtime's invalid-parameter handler, which
 * ends the process, so the check is made without one. */
inline void dsh_ignore_invalid_parameter(const wchar_t*, const wchar_t*, const wchar_t*, unsigned, std::uintptr_t) {}
inline int fcntl(int fd, int command) {
    if (command != F_GETFD) {
        errno = EINVAL;
        return -1;
    }
    const _invalid_parameter_handler previous = _set_invalid_parameter_handler(dsh_ignore_invalid_parameter);
    const std::intptr_t handle = _get_osfhandle(fd);
    _set_invalid_parameter_handler(previous);
    if (handle == -1 || handle == -2) {
        errno = EBADF;
        return -1;
    }
    return 0;
}
#endif

/* mkdtemp(3): replaces the trailing XXXXXX with random characters and creates the directory,
 * trying again when the name is taken. */
inline char* mkdtemp(char* pattern) {
    const std::size_t length = std::strlen(pattern);
    if (length < 6 || std::strcmp(pattern + length - 6, "XXXXXX") != 0) {
        errno = EINVAL;
        return nullptr;
    }
    static const char letters[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device entropy;
    for (int attempt = 0; attempt < 100; ++attempt) {
        for (std::size_t i = length - 6; i < length; ++i) pattern[i] = letters[entropy() % (sizeof letters - 1)];
        if (_mkdir(pattern) == 0) return pattern;
        if (errno != EEXIST) return nullptr;
    }
    return nullptr;
}

/* Windows has no group IDs; the one caller picks "another group" for a chgrp attempt, which
 * the Windows effect helper refuses as unsupported anyway. */
inline unsigned getegid() { return 0; }
#endif /* __cplusplus */

#endif /* DSH_CONFINE_POSIX_SHIMS_H */
