#!/usr/bin/env bash
# The Debian package, end to end: CPack builds the .deb into a scratch directory (never into
# the build tree, so this can run beside other tests), dpkg-deb unpacks it into a scratch
# root, and the unpacked binary runs: --version, a confined --print and a real confined
# command, classify, and the packaged example config. The control fields, the stripped binary,
# Debian's copyright file and changelog, the man page and both completions are checked in the
# unpacked tree.
#
#   package_test.sh CPACK BUILD_DIR [MAN_PAGE]     MAN_PAGE: 0 when built with -DDSH_MAN_PAGE=OFF
#
# Exit 77 means skipped (ctest SKIP_RETURN_CODE); with DSH_MUST_WORK set a skip fails instead.
set -euo pipefail

cpack=$1
build=$2
man_page=${3:-1}

fail() { echo "package test: FAIL: $*" >&2; exit 1; }
skipped=()
skip_part() { skipped+=("$*"); echo "package test: skipped: $*" >&2; }
finish() {
    if ((${#skipped[@]})); then
        [ -n "${DSH_MUST_WORK:-}" ] && fail "must work: ${skipped[*]}"
        exit 77
    fi
    echo "package test: ok"
    exit 0
}

for tool in dpkg-deb dpkg-shlibdeps dpkg-parsechangelog file; do
    if ! command -v "$tool" >/dev/null; then
        skip_part "$tool is not installed (Debian: dpkg-dev, file)"
        finish
    fi
done

scratch=$(mktemp -d /tmp/dsh-confine-package-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# --- build and inspect the package ------------------------------------------------------------
deb=$(bash "$(dirname "$0")/make_deb.sh" "$cpack" "$build" "$scratch/out") || fail "cpack failed"

field() { dpkg-deb --field "$deb" "$1"; }
[ "$(field Package)" = dsh-confine ] || fail "Package is '$(field Package)'"
[[ $(field Maintainer) == *@* ]] || fail "Maintainer '$(field Maintainer)' has no address"
[[ $(field Description) == *"file-effect policy"* ]] || fail "Description: $(field Description)"
[[ $(field Recommends) == *bubblewrap* ]] || fail "Recommends '$(field Recommends)' lacks bubblewrap"
[[ $(field Suggests) == *bash-completion* ]] || fail "Suggests '$(field Suggests)' lacks bash-completion"
depends=$(field Depends)

root=$scratch/root
dpkg-deb --extract "$deb" "$root"
bin=$(realpath "$root/usr/bin/dsh-confine")
# Every shared library the packaged binary loads comes from a package Depends names, as
# dpkg-shlibdeps computed it. By default the binary is a static PIE (DSH_STATIC_PIE): no
# loader, no NEEDED entry, so nothing to depend on; then it must really load nothing.
needed=$(readelf -d "$bin" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $NF); print $NF }')
if [ -z "$needed" ]; then
    headers=$(readelf -lW "$bin")  # captured first: grep -q closing the pipe early would hide a match
    [[ $headers != *INTERP* ]] || fail "the binary names a loader but no NEEDED library"
    [ "$(readelf -hW "$bin" | awk '/Type:/ { print $2 }')" = DYN ] || fail "the static binary is not position-independent"
    [ -z "$depends" ] || fail "the static binary needs no library, yet Depends is '$depends'"
else
    [[ $depends == *libc6* ]] || fail "Depends '$depends' was not computed (no libc6)"
fi
for lib in $needed; do
    # (awk reads to the end: leaving early would kill the writer with SIGPIPE, which pipefail
    # and set -e turn into a silent exit.)
    path=$(ldconfig -p | awk -v lib="$lib" '$1 == lib && !found { print $NF; found = 1 }')
    [ -n "$path" ] || fail "the binary needs $lib, which this system does not have"
    owner=$( (dpkg -S "$path" 2>/dev/null || dpkg -S "$(realpath "$path")" 2>/dev/null || true) | awk -F: 'NR == 1 { print $1 }')
    [ -n "$owner" ] || fail "no package owns $path ($lib)"
    # Depends may name the package or a virtual package it provides (libspdlog1.10-fmt9).
    names="$owner $( (dpkg-query -W -f='${Provides}' "$owner" 2>/dev/null || true) | sed 's/([^)]*)//g; s/,/ /g')"
    listed=no
    for name in $names; do
        [[ " ${depends//,/ } " == *" $name "* ]] && listed=yes
    done
    [ "$listed" = yes ] || fail "the binary needs $lib from $owner ($names), which Depends '$depends' lacks"
done
expected=(usr/bin/dsh-confine usr/share/bash-completion/completions/dsh-confine
    usr/share/zsh/vendor-completions/_dsh-confine usr/share/doc/dsh-confine/config.example.toml
    usr/share/doc/dsh-confine/copyright usr/share/doc/dsh-confine/changelog.Debian.gz
    usr/share/lintian/overrides/dsh-confine)
[ "$man_page" = 0 ] || expected+=(usr/share/man/man1/dsh-confine.1.gz)
for path in "${expected[@]}"; do
    [ -f "$root/$path" ] || fail "/$path is not in the package; it holds: $(cd "$root" && find . -type f | sort | tr '\n' ' ')"
done
[ -x "$bin" ] || fail "/usr/bin/dsh-confine is not executable"
# Stripped: no symbol table and no debug information (lintian's unstripped-binary-or-object).
sections=$(readelf -SW "$bin")
[[ $sections != *.symtab* && $sections != *.debug_* ]] || fail "/usr/bin/dsh-confine is not stripped"

# --- Debian's copyright file and changelog -----------------------------------------------------
doc=$root/usr/share/doc/dsh-confine
copyright=$(cat "$doc/copyright")
[[ $copyright == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"* ]] ||
    fail "the copyright file is not machine-readable (no DEP-5 Format line)"
grep -qx 'License: Apache-2.0' <<<"$copyright" || fail "the copyright file names no Apache-2.0 licence"
[[ $copyright == *'"/usr/share/common-licenses/Apache-2.0"'* ]] ||
    fail "the copyright file does not point to /usr/share/common-licenses/Apache-2.0"
# gzip -9n: no file name (flags, byte 3) or time stamp (bytes 4 to 7), maximum compression (8).
header=$(od -An -tx1 -N9 "$doc/changelog.Debian.gz" | tr -d ' \n')
[[ $header == 1f8b08000000000002 ]] || fail "changelog.Debian.gz is not gzip -9n output (header $header)"
gzip -dc "$doc/changelog.Debian.gz" >"$scratch/changelog"
[ "$(dpkg-parsechangelog -l "$scratch/changelog" -S Source)" = dsh-confine ] || fail "the changelog is not dsh-confine's"
[ "$(dpkg-parsechangelog -l "$scratch/changelog" -S Version)" = "$(field Version)" ] ||
    fail "the changelog's latest entry is $(dpkg-parsechangelog -l "$scratch/changelog" -S Version), the package $(field Version)"

# --- the man page and the completions --------------------------------------------------------
if [ "$man_page" != 0 ]; then
    page=$(gzip -dc "$root/usr/share/man/man1/dsh-confine.1.gz")
    grep -q '^\.TH ' <<<"$page" || fail "the man page has no .TH header"
    for section in NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS'; do
        grep -qE "^\.SH \"?$section\"?" <<<"$page" || fail "the man page has no $section section"
    done
fi

bash_completion=$root/usr/share/bash-completion/completions/dsh-confine
bash -n "$bash_completion" || fail "the bash completion has a syntax error"
# What bash offers for the command line "$@" (its last word is the cursor's), one a line.
completions() {
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _dsh_confine
             printf "%s\n" "${COMPREPLY[@]}"' _ "$bash_completion" "$@"
}
# Whether bash offers $1 for the command line "${@:2}". The output is captured before grep
# reads it: with pipefail, `grep -q` closing a pipe early would fail the writer.
offers() {
    local want=$1 words
    shift
    words=$(completions "$@")
    grep -qx -- "$want" <<<"$words"
}
offers classify dsh-confine cl || fail "bash: 'dsh-confine cl' does not complete to classify"
offers workspace-write dsh-confine --mode wo || fail "bash: '--mode wo' does not complete"
offers json dsh-confine classify --format j || fail "bash: 'classify --format j' does not complete"
offers --report dsh-confine run --rep || fail "bash: 'run --rep' does not complete"
offers --timeout dsh-confine run --tim || fail "bash: 'run --tim' does not complete"
offers memory= dsh-confine run --limit m || fail "bash: 'run --limit m' does not complete"
# --backend offers this system's backends and no other: seatbelt and restricted-token fail on
# Linux (classify's too). The unpacked binary must accept each one offered, below.
backends=(bwrap landlock)
for command in "dsh-confine" "dsh-confine run" "dsh-confine classify"; do
    # shellcheck disable=SC2086  # $command is words
    offered=$(completions $command --backend '' | sort | tr '\n' ' ')
    [ "$offered" = "${backends[*]} " ] || fail "bash: '$command --backend' offers '$offered', not '${backends[*]}'"
done
zsh_completion=$(cat "$root/usr/share/zsh/vendor-completions/_dsh-confine")
[[ $zsh_completion != *seatbelt* && $zsh_completion != *restricted-token* ]] ||
    fail "zsh: the completion offers a backend of another system"
[[ $zsh_completion == *"(${backends[*]})"* ]] || fail "zsh: the completion does not offer (${backends[*]})"
if command -v zsh >/dev/null; then
    zsh -n "$root/usr/share/zsh/vendor-completions/_dsh-confine" || fail "the zsh completion has a syntax error"
fi
[ "$(head -1 "$root/usr/share/zsh/vendor-completions/_dsh-confine")" = '#compdef dsh-confine' ] ||
    fail "the zsh completion does not start with #compdef dsh-confine"

# --- the unpacked binary -----------------------------------------------------------------------
home=$scratch/home
ws=$scratch/ws
mkdir -p "$home" "$ws"
run() {
    (cd "$ws" && env -i HOME="$home" XDG_STATE_HOME="$home/state" XDG_CACHE_HOME="$home/cache" \
        XDG_CONFIG_HOME="$home/config" PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 "$@")
}

version=$(run "$bin" --version) || fail "--version failed"
# The package's version is upstream's and a Debian revision (0.1.0-1).
[ "$version" = "dsh-confine $(field Version | sed 's/-[^-]*$//')" ] || fail "--version says '$version', the package is $(field Version)"
help=$(run "$bin" --help) || fail "--help failed"
grep -q Examples <<<"$help" || fail "--help has no examples"
run "$bin" policy --config "$root/usr/share/doc/dsh-confine/config.example.toml" >/dev/null ||
    fail "the packaged example config does not parse"

# classify needs no sandbox.
verdict=$(printf "sh: 1: cannot create /x: Read-only file system\n" | run "$bin" classify --backend bwrap --exit-code 2)
[ "$(head -1 <<<"$verdict")" = denial ] || fail "classify said: $verdict"
for backend in "${backends[@]}"; do
    run "$bin" classify --backend "$backend" --exit-code 0 </dev/null >/dev/null ||
        fail "the completions offer --backend $backend, which classify refuses"
done

# A confined plan, and real confined runs, judged from the host's side: in read-only even the
# workspace stays untouched, in workspace-write a write outside it never reaches the host
# (under bwrap it may land in the private /tmp) and one inside it does.
if plan=$(run "$bin" --print --mode workspace-write -- true 2>"$scratch/print.err"); then
    [[ $plan == *'"backend":"'* && $plan == *'"enforcement":"'* ]] || fail "--print gave no confined plan: $plan"
    run "$bin" --mode read-only -- sh -c "echo x > '$ws/read-only'" 2>/dev/null || true
    [ ! -e "$ws/read-only" ] || fail "a write in read-only mode got through"
    run "$bin" --mode workspace-write -- sh -c "echo x > '$scratch/outside'" 2>/dev/null || true
    [ ! -e "$scratch/outside" ] || fail "a write outside the workspace got through"
    run "$bin" --mode workspace-write -- sh -c "echo x > '$ws/inside'" || fail "a write inside the workspace was refused"
    [ -f "$ws/inside" ] || fail "the write inside the workspace did not happen"
elif grep -q SANDBOX_UNAVAILABLE "$scratch/print.err"; then
    skip_part "no usable backend on this host: $(head -1 "$scratch/print.err")"
else
    fail "--print failed: $(cat "$scratch/print.err")"
fi

# The Landlock runner is the binary itself: a Landlock plan must name the unpacked one.
if plan=$(run "$bin" --print --backend landlock -- true 2>"$scratch/landlock.err"); then
    [[ $plan == *"\"argv\":[\"$bin\",\"landlock-exec\""* ]] || fail "the Landlock plan does not run the unpacked binary: $plan"
else
    skip_part "Landlock is not usable here: $(head -1 "$scratch/landlock.err")"
fi

finish
