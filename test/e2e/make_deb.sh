#!/usr/bin/env bash
# Builds the build tree's .deb with CPack into a scratch directory and prints its path, for the
# tests that need the package (package_test.sh, workflow_test.sh). It goes through the build
# tree's own CPack config and install script: plain `cpack` would first run the "preinstall"
# target, that is, the build, which must not run beside other tests. Everything else
# (metadata, install rules, strip, shlibdeps) is the real thing.
#
#   make_deb.sh CPACK BUILD_DIR OUT_DIR
set -euo pipefail

cpack=$1
build=$2
out=$3

mkdir -p "$out"
cat >"$out/CPackConfig.cmake" <<CONFIG
include("$build/CPackConfig.cmake")
set(CPACK_INSTALL_CMAKE_PROJECTS "")
set(CPACK_INSTALL_SCRIPTS "$build/cmake_install.cmake")
set(CPACK_INSTALL_PREFIX "\${CPACK_PACKAGING_INSTALL_PREFIX}")
set(CMAKE_INSTALL_DO_STRIP 1)
CONFIG
if ! "$cpack" --config "$out/CPackConfig.cmake" -G DEB -B "$out/deb" >"$out/cpack.log" 2>&1; then
    cat "$out/cpack.log" >&2
    echo "make_deb: cpack failed" >&2
    exit 1
fi
debs=("$out"/deb/*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
    echo "make_deb: expected one .deb in $out/deb, found: ${debs[*]}" >&2
    exit 1
fi
echo "${debs[0]}"
