#!/usr/bin/env bash
# The example harnesses (examples/harness.py, examples/harness.mjs), run against the built
# binary so that they cannot rot: a session, a build, a write outside the workspace and a
# command that outlives its timeout, as root or as nobody, under one backend; or, with
# `broken`, under a bubblewrap that refuses to start, where the harness must stop. What each
# call did is judged on the host: the built program is there and runs, the file outside the
# workspace is not, the session is gone.
#
#   examples_test.sh BINARY SOURCE_DIR python|node root|nobody bwrap|landlock|broken
#
# Exit 77 means skipped (ctest SKIP_RETURN_CODE); with DSH_MUST_WORK set a skip fails instead.
set -euo pipefail

binary=$(realpath "$1")
source_dir=$(realpath "$2")
language=$3
user=$4
backend=$5

fail() { echo "examples test: FAIL: $*" >&2; exit 1; }
skip() {
    [ -n "${DSH_MUST_WORK:-}" ] && fail "must work: $*"
    echo "examples test: skipped: $*" >&2
    exit 77
}

case $language in
    python) script=$source_dir/examples/harness.py; interpreter_name=python3 ;;
    node) script=$source_dir/examples/harness.mjs; interpreter_name=node ;;
    *) fail "unknown language '$language'" ;;
esac
case $user in
    root) as_user=() ;;
    nobody) as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups) ;;
    *) fail "unknown user '$user'" ;;
esac
[ "$(id -u)" = 0 ] || skip "the examples test runs the harness as root and as nobody: run it as root"

# The interpreter on PATH, the first one this user can run (nobody cannot enter /root, where
# pyenv or nvm may keep theirs).
interpreter=
while read -r candidate; do
    if "${as_user[@]}" "$candidate" --version >/dev/null 2>&1; then interpreter=$candidate; break; fi
done < <(type -ap "$interpreter_name" /usr/bin/"$interpreter_name" 2>/dev/null || true)
[ -n "$interpreter" ] || skip "no $interpreter_name on PATH that $user can run (Debian: ${interpreter_name/node/nodejs})"
"${as_user[@]}" test -x "$binary" || skip "$user cannot execute $binary (a build under a directory it cannot enter, such as /root)"
"${as_user[@]}" test -r "$script" || skip "$user cannot read $script"

scratch=$(mktemp -d /tmp/dsh-confine-examples-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"
mkdir "$scratch/ws"
case $backend in
    bwrap | landlock) printf '[provider]\nbackends = ["%s"]\n' "$backend" >"$scratch/config.toml" ;;
    broken)
        # The only backend, a bubblewrap that refuses as bwrap does without user namespaces.
        printf '#!/bin/sh\necho "bwrap: No permissions to create a new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n' >"$scratch/fakebwrap"
        chmod 755 "$scratch/fakebwrap"
        printf '[provider]\nbackends = ["bwrap"]\n[backend.bwrap]\npath = "%s"\n' "$scratch/fakebwrap" >"$scratch/config.toml"
        ;;
    *) fail "unknown backend '$backend'" ;;
esac
[ "$user" = root ] || chown -R 65534:65534 "$scratch/ws" "$scratch"

# The harness's own environment: dsh-confine's state and cache in the scratch directory.
status=0
(cd "$scratch" && "${as_user[@]}" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$scratch" LANG=C.UTF-8 \
    DSH_CONFINE_STATE_DIR="$scratch/state" XDG_CACHE_HOME="$scratch/cache" DSH_CONFINE_CONFIG="$scratch/config.toml" \
    "$interpreter" "$script" "$scratch/ws" --dsh-confine "$binary") >"$scratch/out" 2>"$scratch/err" || status=$?
show() { printf -- '--- stdout:\n%s\n--- stderr:\n%s\n' "$(cat "$scratch/out")" "$(cat "$scratch/err")" >&2; }
expect_line() {  # a fixed string the harness must have printed
    grep -qF -- "$1" "$scratch/out" || { show; fail "the harness did not print '$1'"; }
}

session=$(sed -n 's/^session \(example-[0-9]*\) in .*/\1/p' "$scratch/out")
[ -n "$session" ] || { show; fail "the harness did not start a session"; }
expect_line "session $session ended"
# Ended: the session's state is gone from the host.
[ ! -e "$scratch/state/sessions/$session" ] || fail "the session's state is still there after 'session end'"

if [ "$backend" = broken ]; then
    [ "$status" = 1 ] || { show; fail "the harness exited $status under a broken sandbox, not 1"; }
    expect_line "[build] runner-failure (exit 125): bwrap: No permissions to create a new namespace"
    expect_line "-> the sandbox is broken on this host: stop"
    ! grep -qF "[write outside]" "$scratch/out" || { show; fail "the harness went on after a runner failure"; }
    grep -qF "stopped: the sandbox is broken on this host" "$scratch/err" || { show; fail "the harness did not say why it stopped"; }
    [ ! -e "$scratch/ws/hello" ] || fail "something ran under a sandbox that never started"
    echo "examples test: ok"
    exit 0
fi

# A sanitizer build (DSH_EXAMPLE_SANITIZED, set by test/CMakeLists.txt): the instrumented stage
# reserves terabytes of address space as it starts, so under bubblewrap it cannot start under
# the RLIMIT_AS that stands for an unprivileged caller's memory limit (no cgroup of its own
# here): the call fails closed, and the harness must stop as for any runner failure.
if [ -n "${DSH_EXAMPLE_SANITIZED:-}" ] && [ "$user" = nobody ] && [ "$backend" = bwrap ]; then
    [ "$status" = 1 ] || { show; fail "the harness exited $status, not 1, where the instrumented stage cannot start"; }
    expect_line "[build] runner-failure (exit 125): the runner exited with status"
    ! grep -qF "[write outside]" "$scratch/out" || { show; fail "the harness went on after a runner failure"; }
    [ ! -e "$scratch/ws/hello" ] || fail "something ran under a sandbox that never started"
    echo "examples test: ok (sanitized: the stage cannot start under RLIMIT_AS, and nothing ran)"
    exit 0
fi

[ "$status" = 0 ] || { show; fail "the harness exited $status"; }
expect_line "[build] success (exit 0)"
expect_line "stdout: hello from the sandbox"
expect_line "[write outside] denial (exit 2): sh: 1: cannot create ../outside.txt: "
expect_line "(path ../outside.txt)"
expect_line "-> the sandbox blocked an effect: ask the user"
expect_line "[slow command] timeout (exit 124): run ended the command's tree at its timeout of 1s"
[ "$backend" != landlock ] || expect_line "enforcement partial under landlock:"

# The build wrote the workspace, and what it built runs on the host.
[ -x "$scratch/ws/hello" ] || { show; fail "the build left no program in the workspace"; }
[ "$("$scratch/ws/hello")" = "hello from the sandbox" ] || fail "the program built in the sandbox does not run"
# The write outside never reached the host, though the harness's user may write there.
"${as_user[@]}" test -w "$scratch" || fail "the scratch directory is not writable by $user: the denial would prove nothing"
[ ! -e "$scratch/outside.txt" ] || fail "the write outside the workspace got through: $(cat "$scratch/outside.txt")"
echo "examples test: ok"
