#!/usr/bin/env bash
# The link placed cmake/hot-text.ld's code first: BINARY has the .text.hot section, before the
# rest of .text, and holding at least half the KiB the script's profile counted (less means the
# script has gone stale: regenerate it with test/bench/hot_text.sh).
#   hot_text_test.sh BINARY SCRIPT
set -euo pipefail
binary=$1 script=$2
sections=$(readelf -SW "$binary")
hot=$(awk '$2 == ".text.hot" { print $4, $6 }' <<<"$sections")
text=$(awk '$2 == ".text" { print $4 }' <<<"$sections")
[ -n "$hot" ] || { echo "FAIL: $binary has no .text.hot section: $script was not applied" >&2; exit 1; }
read -r hot_address hot_size <<<"$hot"
(( 16#$hot_address < 16#$text )) || { echo "FAIL: .text.hot (0x$hot_address) is not before .text (0x$text)" >&2; exit 1; }
profiled_kib=$(sed -n 's/.* sections, \([0-9]*\) KiB;.*/\1/p' "$script")
[ -n "$profiled_kib" ] || { echo "FAIL: $script does not say how many KiB it lists" >&2; exit 1; }
placed_kib=$(( 16#$hot_size / 1024 ))
if (( placed_kib * 2 < profiled_kib )); then
    echo "FAIL: .text.hot holds $placed_kib KiB of the $profiled_kib KiB $script lists: regenerate it (test/bench/hot_text.sh)" >&2
    exit 1
fi
echo "ok: .text.hot holds $placed_kib KiB (the profile listed $profiled_kib KiB), first in the text"
