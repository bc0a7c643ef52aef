# Cross-building dsh-confine.exe on Debian with mingw-w64 (g++-mingw-w64-x86-64-posix: the posix
# thread model, which std::mutex and spdlog need):
#   cmake -S . -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake && cmake --build build-win
# The result is linked statically (libstdc++, libgcc, winpthreads), so it runs on Windows, or
# under wine, without DLLs beside it. .ci/cross-windows builds it and smoke-tests it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(DSH_MINGW_TRIPLE x86_64-w64-mingw32)

set(CMAKE_C_COMPILER ${DSH_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${DSH_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${DSH_MINGW_TRIPLE}-windres)

# Libraries and headers come from the mingw-w64 sysroot only; programs from the build host.
set(CMAKE_FIND_ROOT_PATH /usr/${DSH_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

# After project(), the header-only dependencies are set up for the Windows target (Debian
# ships no Windows builds of them): cmake/mingw-w64-deps.cmake.
set(CMAKE_PROJECT_INCLUDE "${CMAKE_CURRENT_LIST_DIR}/mingw-w64-deps.cmake")
