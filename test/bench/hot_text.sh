#!/usr/bin/env bash
# Rewrites cmake/hot-text.ld: the code dsh-confine runs for the calls users make, which the link
# places first and together (docs/performance.md, "The code a call runs"). Run it after changes
# that move much code, on a quiet machine, as root (both Linux backends are profiled):
#
#   bash test/bench/hot_text.sh [BUILD_DIR]      (default: ./build-bench; about a minute)
#
# It needs perf (Debian: linux-perf) and the build's link map, BUILD_DIR/dsh-confine.map, which
# the build writes wherever it links with GNU ld. The profile is cpu-clock samples of every
# process of the workload, so code that runs once per call is caught over the thousands of calls.
# Environment: HOT_TEXT_ROUNDS (default 1500).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build-bench}" && pwd)
bin=$build/dsh-confine
map=$build/dsh-confine.map
rounds=${HOT_TEXT_ROUNDS:-1500}
command -v perf >/dev/null || { echo "hot_text.sh: perf not found (Debian: linux-perf)" >&2; exit 2; }
[ -x "$bin" ] && [ -f "$map" ] || { echo "hot_text.sh: $bin and $map are needed: build dsh-confine first" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-hot-text.XXXXXX")
trap 'rm -rf "$work"' EXIT
export XDG_CACHE_HOME=$work/cache XDG_CONFIG_HOME=$work/config XDG_STATE_HOME=$work/state
export DSH_CONFINE_STATE_DIR=$work/state
unset DSH_CONFINE_CONFIG SPDLOG_LEVEL
mkdir -p "$work/ws"
cd "$work/ws"
# An installed copy, as run.sh times it; its name tells its samples from the workload's others.
install -m 0755 "$bin" "$work/dsh-profiled"
true_bin=$(command -v true)

# The calls: the exec path and `run`, both modes, both backends where the host has them.
cat >"$work/workload.sh" <<EOF
d=$work/dsh-profiled
for i in \$(seq $rounds); do
  \$d --backend landlock --mode read-only -- $true_bin
  \$d --backend landlock --mode workspace-write -- $true_bin
  \$d run --backend landlock --mode read-only -- $true_bin
  \$d run --backend landlock --mode workspace-write -- $true_bin
done
for i in \$(seq \$(( $rounds / 10 + 1 ))); do
  \$d --backend bwrap --mode read-only -- $true_bin
  \$d run --backend bwrap --mode workspace-write -- $true_bin
done 2>/dev/null
EOF
perf record -q -e cpu-clock -F 40000 -o "$work/perf.data" -- bash "$work/workload.sh"
perf script -i "$work/perf.data" --no-demangle --comms dsh-profiled -F ip,sym,symoff,dso 2>/dev/null |
    awk '$NF ~ /dsh-profiled\)$/ { print $2 }' >"$work/samples"
perl "$here/hot_text.pl" "$map" "$bin" "$work/samples" >"$work/hot-text.ld"
mv "$work/hot-text.ld" "$root/cmake/hot-text.ld"
head -5 "$root/cmake/hot-text.ld" | tail -1
echo "wrote $root/cmake/hot-text.ld"
