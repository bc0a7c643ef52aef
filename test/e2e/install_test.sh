#!/usr/bin/env bash
# `cmake --install` into a scratch prefix: the binary lands stripped (unless configured with
# -DDSH_INSTALL_STRIP=OFF) and runs, and the README's uninstall line, fed the install's
# manifest, removes every file the install put in place.
#
#   install_test.sh CMAKE BUILD_DIR STRIP     STRIP: 1 when built with DSH_INSTALL_STRIP on
#
# `cmake --install` and CPack both rewrite BUILD_DIR/install_manifest.txt: ctest runs this test
# and the package test one at a time (RESOURCE_LOCK).
set -euo pipefail

cmake=$1
build=$2
strip=$3

fail() { echo "install test: FAIL: $*" >&2; exit 1; }

scratch=$(mktemp -d /tmp/dsh-confine-install-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
prefix="$scratch/a prefix"  # with a space, as some home directories have one

if ! "$cmake" --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1; then
    cat "$scratch/install.log" >&2
    fail "cmake --install failed"
fi
bin=$prefix/bin/dsh-confine
[ -x "$bin" ] || fail "bin/dsh-confine was not installed"
sections=$(readelf -SW "$bin")
if [ "$strip" = 1 ]; then
    [[ $sections != *.symtab* && $sections != *.debug_* ]] || fail "the installed binary is not stripped"
else
    [[ $sections == *.symtab* ]] || fail "the binary was stripped, though DSH_INSTALL_STRIP is off"
fi
[ "$("$bin" --version)" = "$("$build/dsh-confine" --version)" ] || fail "the installed binary does not run"

# The README's uninstall line (without sudo).
xargs -d '\n' rm -f -- <"$build/install_manifest.txt"
left=$(find "$prefix" -type f)
[ -z "$left" ] || fail "the uninstall line left: $left"
echo "install test: ok"
