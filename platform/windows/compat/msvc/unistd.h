/* MSVC has no <unistd.h>; cli/ includes it for write(), close() and getpid(), which the C
 * runtime declares in these headers (the CMake WIN32 branch puts this directory on the
 * include path for MSVC only: mingw-w64 has its own <unistd.h>). */
#pragma once
#include <direct.h>
#include <io.h>
#include <process.h>
