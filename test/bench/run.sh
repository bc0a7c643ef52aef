#!/usr/bin/env bash
# Whole-process benchmarks of dsh-confine, side by side in one run: each group of commands is
# timed in alternation (test/bench/alternate.c: one run of each per round, many rounds,
# medians), and the ratios the performance targets name are printed with the target next to
# them. It reports; it never fails on a figure (exit 0 once it could run at all).
#
#   bash test/bench/run.sh [BUILD_DIR]        (default: ./build; run from anywhere)
#
# Every exec, run, pipe and parallel group runs twice, at RLIMIT_NOFILE 1024 and at the hard
# limit (ulimit -n in a subshell), and the two are printed side by side.
#
# Environment: BENCH_PASSES (each exec, pipe and parallel group timed that many times over, the
# figures the median of the passes' medians: the host's speed moves between passes; default 1),
# BENCH_ROUNDS (exec rounds per pass, default 300), BENCH_PIPE_MB (stdout through a pipe,
# default 300 MiB), BENCH_PIPE_ROUNDS (default 21), BENCH_PARALLEL (loops at once, default 8),
# BENCH_PARALLEL_SECONDS (each command's time under them, default 5), BENCH_CLASSIFY_ROUNDS
# (default 7), BENCH_MB (size of the classify input in MiB, default 300), BENCH_LINK_RATES (the
# shaped link's rates in tc's syntax, comma-separated, default 1gbit,12gbit; empty skips them),
# BENCH_LINK_RUNS (downloads by each route at each rate, default 3), BENCH_KEEP=1 keeps the
# work directory. Runs as root or not; a backend this host cannot use is reported and skipped.
# See docs/performance.md for what each row means and the figures on the reference machine.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" 2>/dev/null && pwd) || { echo "run.sh: no build directory '${1:-$root/build}'" >&2; exit 2; }
bin=$build/dsh-confine
[ -x "$bin" ] || { echo "run.sh: $bin not found: build dsh-confine first" >&2; exit 2; }
rounds=${BENCH_ROUNDS:-300}
classify_rounds=${BENCH_CLASSIFY_ROUNDS:-7}
pipe_mb=${BENCH_PIPE_MB:-300}
pipe_rounds=${BENCH_PIPE_ROUNDS:-21}
parallel=${BENCH_PARALLEL:-8}
parallel_seconds=${BENCH_PARALLEL_SECONDS:-5}
passes=${BENCH_PASSES:-1}
megabytes=${BENCH_MB:-300}

work=$(mktemp -d "${TMPDIR:-/tmp}/dsh-bench.XXXXXX")
cleanup() { if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "work directory kept: $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT
# dsh-confine's own files (probe cache, config lookup, state) live in the work directory, so
# the figures do not depend on the caller's, and the cache is warm only because we warm it.
export XDG_CACHE_HOME=$work/cache XDG_CONFIG_HOME=$work/config XDG_STATE_HOME=$work/state
export DSH_CONFINE_STATE_DIR=$work/state
unset DSH_CONFINE_CONFIG SPDLOG_LEVEL
mkdir -p "$work/ws"
cd "$work/ws" || exit 2

# The C helpers: from the build when test/bench was built, else compiled here.
helper() {  # name [source [cc flags]]
    local name=$1 source=${2:-$1}
    if [ -x "$build/test/bench/$name" ]; then echo "$build/test/bench/$name"; return; fi
    ${CC:-cc} -O2 "${@:3}" -o "$work/$name" "$here/$source.c" 2>"$work/$name.log" && echo "$work/$name"
}
alternate=$(helper alternate) || { echo "run.sh: cannot build alternate.c (set CC)" >&2; exit 2; }
floor=$(helper landlock_floor) || floor=
hardened_floor=$(helper landlock_floor_hardened landlock_floor -DLANDLOCK_FLOOR_HARDENED) || hardened_floor=
# The least any wrapper costs: exec only, a static PIE where cc can link one.
exec_floor=$(helper exec_floor exec_floor -static-pie) || exec_floor=$(helper exec_floor) || exec_floor=
# The least a supervisor (run) adds: fork, exec, wait.
supervise_floor=$(helper supervise_floor supervise_floor -static-pie) || supervise_floor=$(helper supervise_floor) || supervise_floor=
# The same floor on the project's C++ stack (CLI11, spdlog, static libstdc++): only from a build.
stack_floor=$build/test/bench/stack_floor
[ -x "$stack_floor" ] || stack_floor=

# Every program timed here is an installed copy in the work directory, as a package manager or
# `install` leaves one. How a file entered the page cache changes its start-up: the linker
# writes its output in small pieces, which the kernel caches as single 4 KiB pages, while a
# copy made with large writes is cached in large folios, which exec maps and unmaps in fewer,
# cheaper steps (0.13 to 0.22 ms for dsh-confine on the reference machine; docs/performance.md).
# The floors get the same treatment. The row small-pages times a copy written in 4 KiB pieces,
# as the linker and an unstripped `cmake --install` write: the state right after a build or such
# an install.
mkdir -p "$work/bin"
installed() {  # path -> the path of its installed copy (the path itself if it cannot be copied)
    local copy
    copy=$work/bin/$(basename "$1")
    if install -m 0755 "$1" "$copy" 2>/dev/null; then echo "$copy"; else echo "$1"; fi
}
linked_bin=$bin
bin=$(installed "$bin")
"$bin" --version >/dev/null 2>&1 || bin=$linked_bin
small_pages_bin=$work/small-pages/dsh-confine
mkdir -p "$work/small-pages"
{ dd if="$linked_bin" of="$small_pages_bin" bs=4096 status=none && chmod 0755 "$small_pages_bin"; } 2>/dev/null || small_pages_bin=
[ -n "$floor" ] && floor=$(installed "$floor")
[ -n "$hardened_floor" ] && hardened_floor=$(installed "$hardened_floor")
[ -n "$stack_floor" ] && stack_floor=$(installed "$stack_floor")
[ -n "$exec_floor" ] && exec_floor=$(installed "$exec_floor")
[ -n "$supervise_floor" ] && supervise_floor=$(installed "$supervise_floor")

true_bin=$(type -P true)
ms() { awk -v us="$1" 'BEGIN { printf "%.2f", us / 1000 }'; }
net_of() { awk -v a="$1" -v c="$2" -v d="$3" 'BEGIN { printf "%.1f", a - (c - d) }'; }  # a less what c costs over d
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; }
verdict() {  # ratio limit -> met / NOT met
    awk -v a="$1" -v b="$2" -v limit="$3" 'BEGIN { print (b > 0 && a / b <= limit) ? "met" : "NOT met" }'
}

# The limits each group runs at: 1024, as most sessions start, and the hard limit (its most).
hard_limit=$(ulimit -Hn)
[ "$hard_limit" = unlimited ] && hard_limit=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)
limits=()
(ulimit -Sn 1024) 2>/dev/null && limits+=(1024)
[ "$hard_limit" != 1024 ] && (ulimit -Sn "$hard_limit") 2>/dev/null && limits+=("$hard_limit")
[ ${#limits[@]} -gt 0 ] || limits=("$(ulimit -Sn)")

echo "== dsh-confine benchmarks ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
echo "binary:   $bin ($("$bin" --version 2>/dev/null)), installed from $linked_bin"
echo "machine:  $(uname -srm); $(nproc) CPU: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null)"
echo "memory:   $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null); load average at start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "limits:   RLIMIT_NOFILE $(ulimit -Sn) (soft) / $(ulimit -Hn) (hard); groups timed at ${limits[*]}"
[ "$passes" -gt 1 ] && echo "passes:   $passes of each exec, pipe and parallel group; every figure is the median of the passes' figures"
echo "user:     uid $(id -u); bwrap: $(bwrap --version 2>/dev/null || echo none); grep: $(grep --version | head -n1); locale: ${LC_ALL:-${LANG:-C}}"
echo

# ---------------------------------------------------------------------------------------
# Exec and run: what users run (both modes, the exec path and `run`, each backend) against the
# floors, every group at RLIMIT_NOFILE 1024 and at the hard limit, side by side.
runs() { "$@" >/dev/null 2>&1 </dev/null; }
at_limit() {  # LIMIT COMMAND...: COMMAND with RLIMIT_NOFILE LIMIT (soft), in a subshell
    local limit=$1
    shift
    (ulimit -Sn "$limit" && "$@")
}
timed() {  # OUTPUT ALTERNATE-ARGS...: one alternation per limit and pass, into OUTPUT.LIMIT
    local out=$1 limit pass
    shift
    for ((pass = 1; pass <= passes; pass++)); do
        for limit in "${limits[@]}"; do
            at_limit "$limit" "$alternate" "$@" >"$out.$limit.$pass"
        done
    done
    for limit in "${limits[@]}"; do
        median_of_passes "$out.$limit".* >"$out.$limit"
    done
}
median_of_passes() {  # FILE...: per command, each column's median over the passes (one pass: as is), and a failed pass's exit status
    awk '{ if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
           k = ++count[$1]; for (f = 2; f <= NF; ++f) v[$1, f, k] = $f; width[$1] = NF }
         function med(name, f,    m, i, j, t, a) {
             m = count[name]; for (i = 1; i <= m; ++i) a[i] = v[name, f, i]
             for (i = 2; i <= m; ++i) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
             return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
         END { for (i = 1; i <= n; ++i) { line = order[i]
                   for (f = 2; f < width[order[i]]; ++f) line = line " " med(order[i], f)
                   worst = 0; for (k = 1; k <= count[order[i]]; ++k) if (v[order[i], f, k] != 0) worst = v[order[i], f, k]
                   line = line " " worst  # the exit status: any pass that failed shows
                   print line } }' "$@"
}
declare -A median cpu p25 p75 rss status
load_results() {  # FILE [LIMIT]: its lines into the tables, keyed NAME or NAME@LIMIT
    local name med q1 q3 _min c kb code
    while read -r name med q1 q3 _min c kb code; do
        name=$name${2:+@$2}
        median[$name]=$med cpu[$name]=$c p25[$name]=$q1 p75[$name]=$q3 rss[$name]=$kb status[$name]=$code
    done <"$1"
}
count_commands() { printf '%s\n' "$@" | grep -c '^:::$' | awk '{ print $1 + 1 }'; }

# Workspace-write needs a temp area the C floor can grant: dsh-confine makes one per call (under
# /tmp/dsh-confine-UID), the floor is given one made once.
mkdir -p "$work/floor-temp" && chmod 0700 "$work/floor-temp"
ww_grants=(-w "$work/ws" -w "$work/floor-temp" -w /dev/shm)
# The same with a private temp area per call, made and removed as dsh-confine does (on the same
# file system: the work directory lies where dsh-confine's /tmp/dsh-confine-UID does, or beside it).
mkdir -p "$work/floor-temps" && chmod 0700 "$work/floor-temps"
ww_temp_grants=(-t "$work/floor-temps" -w "$work/ws" -w /dev/shm)
commands=(bare "$true_bin")
# The hosts network with a 100-pattern allow-list of every form (names, wildcards, IPv4, IPv6,
# with and without ports): the proxy is started for each call and ends with it.
allow_hosts=()
for ((i = 1; i <= 40; i++)); do allow_hosts+=(--allow-host "host$i.example.org"); done
for ((i = 1; i <= 30; i++)); do allow_hosts+=(--allow-host "*.domain$i.example.net:443"); done
for ((i = 1; i <= 20; i++)); do allow_hosts+=(--allow-host "192.0.2.$i:80"); done
for ((i = 1; i <= 10; i++)); do allow_hosts+=(--allow-host "[2001:db8::$i]:8443"); done
if runs "$bin" --backend bwrap --mode read-only -- "$true_bin"; then
    for mode in read-only workspace-write; do
        suffix=$([ "$mode" = workspace-write ] && echo -ww)
        eval "bwrap_argv=($("$bin" --backend bwrap --print --format shell --mode "$mode" -- "$true_bin"))"
        commands+=(::: "bwrap-direct$suffix" "${bwrap_argv[@]}"
                   ::: "bwrap-exec$suffix" "$bin" --backend bwrap --mode "$mode" -- "$true_bin"
                   ::: "run-bwrap$suffix" "$bin" run --backend bwrap --mode "$mode" -- "$true_bin")
        [ -n "$exec_floor" ] && runs "$exec_floor" "${bwrap_argv[@]}" &&
            commands+=(::: "wrapper-floor$suffix" "$exec_floor" "${bwrap_argv[@]}"
                       ::: "wrapper-floor-run$suffix" "$exec_floor" -s "${bwrap_argv[@]}")
    done
    eval "bwrap_argv=($("$bin" --backend bwrap --print --format shell --mode read-only --network deny -- "$true_bin"))"
    commands+=(::: bwrap-exec-netdeny "$bin" --backend bwrap --mode read-only --network deny -- "$true_bin"
               ::: bwrap-direct-netdeny "${bwrap_argv[@]}")
    runs "$bin" --backend bwrap --mode read-only "${allow_hosts[@]}" -- "$true_bin" &&
        commands+=(::: bwrap-exec-hosts "$bin" --backend bwrap --mode read-only "${allow_hosts[@]}" -- "$true_bin")
    eval "bwrap_argv=($("$bin" --backend bwrap --print --format shell --mode read-only -- "$true_bin"))"
    [ -n "$stack_floor" ] && runs "$stack_floor" --exec-only --mode read-only -- "${bwrap_argv[@]}" &&
        commands+=(::: stack-wrapper "$stack_floor" --exec-only --mode read-only -- "${bwrap_argv[@]}")
    have_bwrap=1
else
    echo "bubblewrap: not usable here ($("$bin" --backend bwrap --mode read-only -- "$true_bin" 2>&1 | head -n1)): skipped"
    have_bwrap=
fi
if runs "$bin" --backend landlock --mode read-only -- "$true_bin" && [ -n "$floor" ] && runs "$floor" "$true_bin"; then
    eval "landlock_argv=($("$bin" --backend landlock --print --format shell --mode read-only -- "$true_bin"))"
    commands+=(::: landlock-floor "$floor" "$true_bin" ::: landlock-floor-run "$floor" -s "$true_bin"
               ::: landlock-floor-server "$floor" -p "$true_bin"
               ::: landlock-runner "${landlock_argv[@]}"
               ::: landlock-exec "$bin" --backend landlock --mode read-only -- "$true_bin"
               ::: run-landlock "$bin" run --backend landlock --mode read-only -- "$true_bin"
               ::: landlock-exec-netdeny "$bin" --backend landlock --mode read-only --network deny -- "$true_bin")
    runs "$bin" --backend landlock --mode read-only "${allow_hosts[@]}" -- "$true_bin" &&
        commands+=(::: landlock-exec-hosts "$bin" --backend landlock --mode read-only "${allow_hosts[@]}" -- "$true_bin")
    # The exec path as a harness with process_group=0 calls it (the process in front), and the
    # same behind the same wrapper without the new group.
    [ -n "$exec_floor" ] && runs "$exec_floor" -g "$bin" --backend landlock --mode read-only -- "$true_bin" &&
        commands+=(::: landlock-exec-leader "$exec_floor" -g "$bin" --backend landlock --mode read-only -- "$true_bin"
                   ::: landlock-exec-wrapped "$exec_floor" "$bin" --backend landlock --mode read-only -- "$true_bin")
    if runs "$bin" --backend landlock --mode workspace-write -- "$true_bin" && runs "$floor" "${ww_grants[@]}" "$true_bin"; then
        commands+=(::: landlock-floor-ww "$floor" "${ww_grants[@]}" "$true_bin"
                   ::: landlock-floor-run-ww "$floor" -s "${ww_grants[@]}" "$true_bin"
                   ::: landlock-floor-ww-temp "$floor" "${ww_temp_grants[@]}" "$true_bin"
                   ::: landlock-floor-run-ww-temp "$floor" -s "${ww_temp_grants[@]}" "$true_bin"
                   ::: landlock-exec-ww "$bin" --backend landlock --mode workspace-write -- "$true_bin"
                   ::: run-landlock-ww "$bin" run --backend landlock --mode workspace-write -- "$true_bin")
    fi
    [ -n "$supervise_floor" ] && runs "$supervise_floor" "$floor" "$true_bin" &&
        commands+=(::: supervised-floor "$supervise_floor" "$floor" "$true_bin")
    [ -n "$small_pages_bin" ] && runs "$small_pages_bin" --backend landlock --mode read-only -- "$true_bin" &&
        commands+=(::: small-pages "$small_pages_bin" --backend landlock --mode read-only -- "$true_bin")
    [ -n "$hardened_floor" ] && runs "$hardened_floor" "$true_bin" &&
        commands+=(::: hardened-floor "$hardened_floor" "$true_bin"
                   ::: hardened-floor-run "$hardened_floor" -s "$true_bin")
    [ -n "$stack_floor" ] && runs "$stack_floor" --backend landlock --mode read-only -- "$true_bin" &&
        commands+=(::: stack-floor "$stack_floor" --backend landlock --mode read-only -- "$true_bin")
    have_landlock=1
else
    echo "Landlock: not usable here (or landlock_floor could not be built): skipped"
    have_landlock=
fi
# The default chain and --print, on a warm probe cache (the first call fills it).
runs "$bin" --print --mode read-only -- "$true_bin"
commands+=(::: chain-exec "$bin" --mode read-only -- "$true_bin"
           ::: print "$bin" --print --mode read-only -- "$true_bin"
           ::: print-netdeny "$bin" --print --mode read-only --network deny -- "$true_bin"
           ::: print-hosts "$bin" --print --mode read-only "${allow_hosts[@]}" -- "$true_bin"
           ::: version "$bin" --version)
echo "temp areas under /tmp/dsh-confine-$(id -u) at start: $(find "/tmp/dsh-confine-$(id -u)" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
echo "timing exec: $rounds rounds of $(count_commands "${commands[@]}") commands, in alternation, at RLIMIT_NOFILE ${limits[*]} ..."
timed "$work/exec.txt" -r "$rounds" -w 10 -- "${commands[@]}"
for limit in "${limits[@]}"; do load_results "$work/exec.txt.$limit" "$limit"; done

# Planning never walks the workspace: --print in workspace-write (protected paths looked up at
# each root's top level) with a workspace of 50,000 files against an empty one, both holding a
# .git with hooks and config.
for tree in empty-ws big-ws; do mkdir -p "$work/$tree/.git/hooks" && : >"$work/$tree/.git/config"; done
for ((d = 0; d < 50; d++)); do
    mkdir -p "$work/big-ws/d$d" && (cd "$work/big-ws/d$d" && printf 'f%s\n' $(seq 1000) | xargs touch)
done
echo "timing --print against a workspace of $(find "$work/big-ws" -type f | wc -l) files: $rounds rounds, in alternation ..."
"$alternate" -r "$rounds" -w 10 -- \
    print-empty-ws "$bin" --print --mode workspace-write --workspace-root "$work/empty-ws" -- "$true_bin" ::: \
    print-big-ws "$bin" --print --mode workspace-write --workspace-root "$work/big-ws" -- "$true_bin" >"$work/tree.txt"
load_results "$work/tree.txt"
rm -rf "$work/big-ws"

# 300 MiB on stdout through a pipe, `run` against the exec path into the same pipe: stderr
# elsewhere (run leaves stdout to the command), then stdout and stderr one pipe (2>&1: run
# merges them into the pipe it reads and passes on, so every byte goes through it).
pipe_commands=()
head_bin=$(type -P head) cat_bin=$(type -P cat)
pipeline() {  # NAME COMMAND-WORDS... (each already quoted for sh): COMMAND | cat, then the same with 2>&1
    local name=$1
    shift
    pipe_commands+=(::: "$name" /bin/sh -c "$* $head_bin -c ${pipe_mb}M /dev/zero | $cat_bin >/dev/null"
                    ::: "$name-merged" /bin/sh -c "$* $head_bin -c ${pipe_mb}M /dev/zero 2>&1 | $cat_bin >/dev/null")
}
pipeline pipe-bare
# The least a process passing the stream on adds (what run does with 2>&1): one more cat.
pipe_commands+=(::: pipe-relay /bin/sh -c "$head_bin -c ${pipe_mb}M /dev/zero | $cat_bin | $cat_bin >/dev/null")
if [ -n "$have_landlock" ]; then
    pipeline pipe-landlock-exec "'$bin'" --backend landlock --mode read-only --
    pipeline pipe-landlock-run "'$bin'" run --backend landlock --mode read-only --
fi
if [ -n "$have_bwrap" ]; then
    pipeline pipe-bwrap-exec "'$bin'" --backend bwrap --mode read-only --
    pipeline pipe-bwrap-run "'$bin'" run --backend bwrap --mode read-only --
fi
echo "timing ${pipe_mb} MiB through a pipe: $pipe_rounds rounds of $(count_commands "${pipe_commands[@]:1}") commands, in alternation, at RLIMIT_NOFILE ${limits[*]} ..."
timed "$work/pipe.txt" -r "$pipe_rounds" -w 1 -- "${pipe_commands[@]:1}"
for limit in "${limits[@]}"; do load_results "$work/pipe.txt.$limit" "$limit"; done

# Throughput: PARALLEL loops of calls at once, as an agent making parallel tool calls does, run
# against the exec path, in workspace-write (what an agent's calls mostly are).
parallel_commands=()
[ -n "$have_bwrap" ] && parallel_commands+=(::: par-run-bwrap "$bin" run --backend bwrap --mode workspace-write -- "$true_bin"
                                            ::: par-exec-bwrap "$bin" --backend bwrap --mode workspace-write -- "$true_bin")
[ -n "$have_landlock" ] && parallel_commands+=(::: par-run-landlock "$bin" run --backend landlock --mode workspace-write -- "$true_bin"
                                               ::: par-exec-landlock "$bin" --backend landlock --mode workspace-write -- "$true_bin")
if [ ${#parallel_commands[@]} -gt 0 ]; then
    echo "timing $parallel parallel loops: ${parallel_seconds} s of each of $(count_commands "${parallel_commands[@]:1}") commands (1 s at a time, in alternation), at RLIMIT_NOFILE ${limits[*]} ..."
    timed "$work/parallel.txt" -p "$parallel" -d 1 -r "$parallel_seconds" -w 2 -- "${parallel_commands[@]:1}"
    for limit in "${limits[@]}"; do load_results "$work/parallel.txt.$limit" "$limit"; done
fi

spawned="n/a (no strace)"
if command -v strace >/dev/null; then
    if strace -f -e trace=execve,clone,clone3,fork,vfork -o "$work/print.trace" "$bin" --print --mode read-only -- "$true_bin" >/dev/null 2>&1 &&
        grep -q 'execve(' "$work/print.trace"; then
        spawned=$(grep -cE 'clone|fork|execve\(' "$work/print.trace" | awk '{ print $1 - 1 }')  # less its own execve
    else
        spawned="n/a (strace cannot trace here)"
    fi
fi

echo
printf '%-26s' command
for limit in "${limits[@]}"; do printf ' %22s %9s' "median ms (NOFILE $limit)" "cpu ms"; done
printf ' %5s  %s\n' exit "(p25-p75 ms at the last limit)"
for name in bare bwrap-direct wrapper-floor wrapper-floor-run stack-wrapper bwrap-exec run-bwrap bwrap-direct-ww wrapper-floor-ww \
    wrapper-floor-run-ww bwrap-exec-ww run-bwrap-ww bwrap-direct-netdeny bwrap-exec-netdeny bwrap-exec-hosts landlock-floor landlock-floor-run landlock-floor-server supervised-floor hardened-floor hardened-floor-run stack-floor \
    landlock-runner landlock-exec small-pages run-landlock landlock-floor-ww landlock-floor-run-ww landlock-floor-ww-temp \
    landlock-floor-run-ww-temp landlock-exec-ww landlock-exec-netdeny landlock-exec-hosts \
    run-landlock-ww chain-exec print print-netdeny print-hosts version \
    pipe-bare pipe-relay pipe-landlock-exec pipe-landlock-run pipe-bwrap-exec pipe-bwrap-run \
    pipe-bare-merged pipe-landlock-exec-merged pipe-landlock-run-merged pipe-bwrap-exec-merged pipe-bwrap-run-merged; do
    last=$name@${limits[-1]}
    [ -n "${median[$last]:-}" ] || continue
    printf '%-26s' "$name"
    for limit in "${limits[@]}"; do printf ' %22s %9s' "$(ms "${median[$name@$limit]:-0}")" "$(ms "${cpu[$name@$limit]:-0}")"; done
    printf ' %5s  %s-%s\n' "${status[$last]}" "$(ms "${p25[$last]}")" "$(ms "${p75[$last]}")"
done
for name in par-run-bwrap par-exec-bwrap par-run-landlock par-exec-landlock; do
    last=$name@${limits[-1]}
    [ -n "${median[$last]:-}" ] || continue
    printf '%-26s' "$name"
    for limit in "${limits[@]}"; do printf ' %22s %9s' "${median[$name@$limit]%.*} calls/s" "$(ms "${cpu[$name@$limit]:-0}")"; done
    printf ' %5s  %s-%s calls/s (cpu ms: per call)\n' "${status[$last]}" "${p25[$last]%.*}" "${p75[$last]%.*}"
done
echo
printf '%-52s' ratio
for limit in "${limits[@]}"; do printf ' %9s %9s' "wall@$limit" "cpu@$limit"; done
printf ' %9s  %s\n' target ""
row() {  # label a b [limit [cpu-a cpu-b]]: a / b at each RLIMIT_NOFILE; the verdict needs every limit met
    local label=$1 a=$2 b=$3 limit=${4:-} ca=${5:-$2} cb=${6:-$3} at key judged="" missed=""
    for at in "${limits[@]}"; do
        [ -n "${median[$a${at:+@$at}]:-}" ] && [ -n "${median[$b${at:+@$at}]:-}" ] || return 0
    done
    printf '%-52s' "$label"
    for at in "${limits[@]}"; do
        key=${at:+@$at}
        printf ' %9s %9s' "$(ratio "${median[$a$key]}" "${median[$b$key]}")" "$(ratio "${cpu[$ca$key]}" "${cpu[$cb$key]}")"
        [ -n "$limit" ] && [ "$(verdict "${median[$a$key]}" "${median[$b$key]}" "$limit")" != met ] && missed+=" $at"
    done
    if [ -n "$limit" ]; then judged=$([ -z "$missed" ] && echo "met (wall)" || echo "NOT met (wall${at:+, at NOFILE$missed})"); fi
    printf ' %9s  %s\n' "${limit:+<= ${limit}x}" "$judged"
}
# label a b c d [limit]: (a - (c - d)) / b at each RLIMIT_NOFILE, wall and CPU: a against b once
# what c costs over d (timed in the same run) is taken out of a. Judged only with a limit.
row_net() {
    local label=$1 a=$2 b=$3 c=$4 d=$5 limit=${6:-} at key name net missed="" judged=""
    for at in "${limits[@]}"; do
        for name in "$a" "$b" "$c" "$d"; do [ -n "${median[$name${at:+@$at}]:-}" ] || return 0; done
    done
    printf '%-52s' "$label"
    for at in "${limits[@]}"; do
        key=${at:+@$at}
        net=$(net_of "${median[$a$key]}" "${median[$c$key]}" "${median[$d$key]}")
        printf ' %9s %9s' "$(ratio "$net" "${median[$b$key]}")" \
            "$(ratio "$(net_of "${cpu[$a$key]}" "${cpu[$c$key]}" "${cpu[$d$key]}")" "${cpu[$b$key]}")"
        [ -n "$limit" ] && [ "$(verdict "$net" "${median[$b$key]}" "$limit")" != met ] && missed+=" $at"
    done
    if [ -n "$limit" ]; then judged=$([ -z "$missed" ] && echo "met (wall)" || echo "NOT met (wall${at:+, at NOFILE$missed})"); fi
    printf '%s\n' "${limit:+ $(printf '%9s  %s' "<= ${limit}x" "$judged")}"
}
row "Landlock exec, read-only / C floor" landlock-exec landlock-floor 1.15
row "Landlock exec, workspace-write / C floor (ws + temp)" landlock-exec-ww landlock-floor-ww 1.25
row "the same / C floor with a temp area per call" landlock-exec-ww landlock-floor-ww-temp 1.25
row "C floor, a temp area per call / one temp area" landlock-floor-ww-temp landlock-floor-ww
row "Landlock runner (printed plan) / C floor" landlock-runner landlock-floor
row "Landlock exec, 4 KiB-written copy / C floor" small-pages landlock-floor
row "hardened C floor / C floor" hardened-floor landlock-floor
row "Landlock exec / hardened C floor" landlock-exec hardened-floor 1.15  # the nearest honest target for the first row (docs/performance.md)
row "C++ stack floor / C floor" stack-floor landlock-floor
row "Landlock exec, workspace-write / read-only" landlock-exec-ww landlock-exec
row "C floor, workspace-write / read-only" landlock-floor-ww landlock-floor
row "C floor / bare exec" landlock-floor bare
row "bwrap exec, read-only / exec-only wrapper" bwrap-exec wrapper-floor 1.08
row "bwrap exec, workspace-write / exec-only wrapper" bwrap-exec-ww wrapper-floor-ww 1.08
row "bwrap exec, workspace-write / read-only" bwrap-exec-ww bwrap-exec
row "bwrap argv directly, workspace-write / read-only" bwrap-direct-ww bwrap-direct
row "bwrap exec / the same bwrap argv directly" bwrap-exec bwrap-direct
row "exec-only wrapper / bwrap argv directly" wrapper-floor bwrap-direct
row "C++ stack wrapper / bwrap argv directly" stack-wrapper bwrap-direct
row "run / exec, bwrap, read-only" run-bwrap bwrap-exec 1.10
row "run / exec, bwrap, workspace-write" run-bwrap-ww bwrap-exec-ww 1.10
row "run / exec, Landlock, read-only" run-landlock landlock-exec 1.10
row "run / exec, Landlock, workspace-write" run-landlock-ww landlock-exec-ww 1.10
row "C floor forked and waited for / C floor" supervised-floor landlock-floor
row "C floor behind run's keeper and runner clones / C floor" landlock-floor-run landlock-floor
row "the same, workspace-write" landlock-floor-run-ww landlock-floor-ww
row "exec-only wrapper behind two forks / without (bwrap)" wrapper-floor-run wrapper-floor
row "the same, workspace-write (bwrap)" wrapper-floor-run-ww wrapper-floor-ww
row "run, Landlock, read-only / C floor behind the same clones" run-landlock landlock-floor-run
# What run adds beyond the exec path and the two clones: run less what the clones cost the C
# floor (or the hardened floor) in the same run, against the exec path. A difference of two
# floors, so as noisy as both of them together.
row_net "run - clones (C floor) / exec, Landlock, read-only" run-landlock landlock-exec landlock-floor-run landlock-floor
row_net "run - clones (hardened floor) / exec, the same" run-landlock landlock-exec hardened-floor-run hardened-floor
row_net "run - clones (C floor, temp area) / exec, ww" run-landlock-ww landlock-exec-ww landlock-floor-run-ww-temp landlock-floor-ww-temp
row "hardened C floor behind the same clones / hardened C floor" hardened-floor-run hardened-floor
# The nearest honest target for run under Landlock: the exec path's own (1.15x of the hardened
# floor, the floor taking the same security steps) plus 0.05x for what run adds, against that
# floor behind the same two clones (docs/performance.md, `run`).
row "run, Landlock, read-only / hardened C floor behind the clones" run-landlock hardened-floor-run 1.20
row "run, Landlock, workspace-write / the same floor (ww)" run-landlock-ww landlock-floor-run-ww
row "run, Landlock, ww / that floor with a temp area per call" run-landlock-ww landlock-floor-run-ww-temp
row "run, bwrap, read-only / exec-only wrapper behind two forks" run-bwrap wrapper-floor-run
row "run, bwrap, workspace-write / the same (ww)" run-bwrap-ww wrapper-floor-run-ww
row "run / exec, ${pipe_mb} MiB stdout to a pipe, bwrap" pipe-bwrap-run pipe-bwrap-exec 1.10
row "run / exec, ${pipe_mb} MiB stdout to a pipe, Landlock" pipe-landlock-run pipe-landlock-exec 1.10
row "run / exec, the same, 2>&1 (merged), bwrap" pipe-bwrap-run-merged pipe-bwrap-exec-merged
row "run / exec, the same, 2>&1 (merged), Landlock" pipe-landlock-run-merged pipe-landlock-exec-merged
row "a relay (| cat) / bare, ${pipe_mb} MiB to a pipe" pipe-relay pipe-bare
row "exec / bare, ${pipe_mb} MiB stdout to a pipe, Landlock" pipe-landlock-exec pipe-bare
row "exec / bare, ${pipe_mb} MiB stdout to a pipe, bwrap" pipe-bwrap-exec pipe-bare
row "bwrap exec, read-only, --network deny / allow" bwrap-exec-netdeny bwrap-exec 1.10
row "bwrap argv directly, --network deny / allow (its floor)" bwrap-direct-netdeny bwrap-direct
row "Landlock exec, read-only, --network deny / allow" landlock-exec-netdeny landlock-exec 1.10
row "Landlock exec as a group's leader (a process in front) / not" landlock-exec-leader landlock-exec-wrapped
row "bwrap exec, 100 --allow-host / --network deny" bwrap-exec-hosts bwrap-exec-netdeny 1.10
row "Landlock exec, 100 --allow-host / --network deny" landlock-exec-hosts landlock-exec-netdeny 1.10
# The hosts network's floor: any proxy of the call's own is a process started beside the command;
# the C floor with the least such process (landlock_floor -p) against the C floor shows what that
# start alone costs on this host, and the allow-list rows are judged against it (performance.md).
row "C floor with a server process beside it / C floor" landlock-floor-server landlock-floor
# Each allow-list call less what the floor's server cost the C floor, against --network deny: 1.00
# when the proxy costs the call no more than the least process beside the command does. The
# nearest honest target for the two rows above: the same 1.10x, once that floor's cost is out.
row_net "bwrap exec, 100 --allow-host - the server / deny" bwrap-exec-hosts bwrap-exec-netdeny landlock-floor-server landlock-floor 1.10
row_net "Landlock exec, 100 --allow-host - the server / deny" landlock-exec-hosts landlock-exec-netdeny landlock-floor-server landlock-floor 1.10
row "default chain exec / bwrap argv directly" chain-exec bwrap-direct
row "--print (warm probe cache) / C floor" print landlock-floor 1.25
# What the 100-pattern list costs the plan alone, with no proxy started: part of the allow-list rows.
row "--print, 100 --allow-host / --network deny" print-hosts print-netdeny
row "--version / C floor" version landlock-floor
tree_rows() {
    local limits=("")  # one run, at the caller's RLIMIT_NOFILE
    row "--print (ww), 50,000-file workspace / empty one" print-big-ws print-empty-ws
    [ -n "${median[print-big-ws]:-}" ] && printf '%-52s %9s %9s  (ms, medians: 50,000 files / empty)\n' "" \
        "$(ms "${median[print-big-ws]}")" "$(ms "${median[print-empty-ws]}")"
}
tree_rows
# Throughput the other way round, so that both read as run's cost over the exec path's: the exec
# path's calls per second over run's, and run's CPU per call over the exec path's.
row "$parallel loops, bwrap (ww): exec calls/s / run calls/s" par-exec-bwrap par-run-bwrap "" par-run-bwrap par-exec-bwrap
row "$parallel loops, Landlock (ww): exec calls/s / run calls/s" par-exec-landlock par-run-landlock "" par-run-landlock par-exec-landlock
echo "processes --print spawned on a warm cache: $spawned"
echo

# ---------------------------------------------------------------------------------------
# Classify: a large stderr of build output against grep over the plan's signatures.
echo "making a ${megabytes} MiB build log ..."
awk -v MB=16 -f "$here/build_log.awk" >"$work/block.log"
{
    for ((i = 0; i < megabytes / 16; i++)); do cat "$work/block.log"; done
    head -c $(((megabytes % 16) * 1048576)) "$work/block.log" | sed '$d'
    echo "touch: cannot touch '/work/out.txt': Read-only file system"  # the run's one denial, at the end
} >"$work/stderr.log"
{ head -c $((64 * 1048576)) /dev/zero | tr '\0' 'a'; printf 'Permission denied: read-only file system'; } >"$work/one-line.log"

classify_cmds=()
dialects=()
for backend in bwrap landlock; do
    "$bin" --backend "$backend" --print --mode read-only -- "$true_bin" >"$work/plan-$backend.json" 2>/dev/null || continue
    awk -f "$here/signatures.awk" "$work/plan-$backend.json" >"$work/signatures-$backend.txt"
    [ -s "$work/signatures-$backend.txt" ] || continue
    dialects+=("$backend")
    classify_cmds+=(::: "classify-$backend" "$bin" classify --plan "$work/plan-$backend.json" --exit-code 1 --stderr "$work/stderr.log"
                    ::: "grep-$backend" "$(type -P grep)" -c -i -F -f "$work/signatures-$backend.txt" "$work/stderr.log"
                    ::: "grep-C-$backend" "$(type -P env)" LC_ALL=C "$(type -P grep)" -c -i -F -f "$work/signatures-$backend.txt" "$work/stderr.log")
done
if [ ${#dialects[@]} -eq 0 ]; then
    echo "classify: no plan could be printed on this host: skipped"
else
    echo "timing classify: $classify_rounds rounds, in alternation ..."
    "$alternate" -r "$classify_rounds" -w 1 -- "${classify_cmds[@]:1}" >"$work/classify.txt"
    load_results "$work/classify.txt"
    peak() {  # KiB of maximum resident set size
        if [ -x /usr/bin/time ]; then
            /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ { print $2 }'
        else
            echo "?"
        fi
    }
    echo
    printf '%-22s %10s %19s %10s %9s  %s\n' command "median ms" "p25-p75 ms" "cpu ms" "MB/s" "output"
    for backend in "${dialects[@]}"; do
        for name in "classify-$backend" "grep-$backend" "grep-C-$backend"; do
            case $name in
                classify-*) out=$("$bin" classify --plan "$work/plan-$backend.json" --exit-code 1 --stderr "$work/stderr.log" | head -n1) ;;
                *) out="$(grep -c -i -F -f "$work/signatures-$backend.txt" "$work/stderr.log") lines" ;;
            esac
            printf '%-22s %10s %9s-%-9s %10s %9s  %s\n' "$name" "$(ms "${median[$name]}")" "$(ms "${p25[$name]}")" \
                "$(ms "${p75[$name]}")" "$(ms "${cpu[$name]}")" \
                "$(awk -v mb="$megabytes" -v us="${median[$name]}" 'BEGIN { printf "%.0f", mb * 1048576 / us }')" "$out"
        done
    done
    echo
    classify_rows() {
        local limits=("")  # one run, at the caller's RLIMIT_NOFILE: row's keys carry no limit
        printf '%-52s %9s %9s %9s  %s\n' ratio "wall" "cpu" target ""
        for backend in "${dialects[@]}"; do
            row "classify / grep -c -i -F ($backend)" "classify-$backend" "grep-$backend" 1.00
            row "classify / LC_ALL=C grep -c -i -F ($backend)" "classify-$backend" "grep-C-$backend" 1.00
        done
    }
    classify_rows
    echo
    backend=${dialects[0]}
    big=$(peak "$bin" classify --plan "$work/plan-$backend.json" --exit-code 1 --stderr "$work/stderr.log")
    line=$(peak "$bin" classify --plan "$work/plan-$backend.json" --exit-code 1 --stderr "$work/one-line.log")
    piped=$(peak sh -c "exec '$bin' classify --plan '$work/plan-$backend.json' --exit-code 1 < '$work/one-line.log'")
    grepped=$(peak grep -c -i -F -f "$work/signatures-$backend.txt" "$work/one-line.log")
    judge() { awk -v kb="$1" 'BEGIN { print (kb != "?" && kb + 0 < 32768) ? "met" : "NOT met" }'; }
    printf '%-44s %9s %18s  %s\n' "peak memory (/usr/bin/time -v)" "MiB" target ""
    printf '%-44s %9s %18s  %s\n' "classify, ${megabytes} MiB of build output" "$(awk -v k="$big" 'BEGIN { printf "%.1f", k / 1024 }')" "< 32 MiB" "$(judge "$big")"
    printf '%-44s %9s %18s  %s\n' "classify, one 64 MiB line (--stderr)" "$(awk -v k="$line" 'BEGIN { printf "%.1f", k / 1024 }')" "< 32 MiB" "$(judge "$line")"
    printf '%-44s %9s %18s  %s\n' "classify, one 64 MiB line (stdin)" "$(awk -v k="$piped" 'BEGIN { printf "%.1f", k / 1024 }')" "< 32 MiB" "$(judge "$piped")"
    printf '%-44s %9s\n' "grep -c -i -F, one 64 MiB line (reference)" "$(awk -v k="$grepped" 'BEGIN { printf "%.1f", k / 1024 }')"
fi
echo

# ---------------------------------------------------------------------------------------
# The proxy's bytes across a shaped link: the origin in a network namespace of proxy_bench's own,
# behind a veth pair shaped to each rate, the client and the proxy on loopback as in a real call
# (test/bench/proxy_bench.cpp, --link). It skips itself, with one line, where it cannot make the
# namespaces (neither root nor an unprivileged user namespace) or iproute2 is missing.
link_rates=${BENCH_LINK_RATES-1gbit,12gbit}
proxy_bench=$build/test/bench/proxy_bench
if [ -z "$link_rates" ]; then
    echo "shaped link: skipped (BENCH_LINK_RATES is empty)"
elif [ -x "$proxy_bench" ]; then
    echo "timing downloads across a shaped link at $link_rates ..."
    "$proxy_bench" --link "$link_rates" --runs "${BENCH_LINK_RUNS:-3}"
else
    echo "shaped link: skipped: $proxy_bench not built (test/bench needs Google Benchmark)"
fi
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
exit 0
