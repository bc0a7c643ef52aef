#!/usr/bin/env bash
# The example GitHub Actions workflow (examples/github-actions.yml), checked so that it cannot
# rot: its YAML parses and has the shape GitHub runs (jobs, steps that each use an action or
# run commands, `needs` naming a job, the artifact uploaded under the name the other job
# downloads, the package file the install step names); then what can run on a build machine
# runs: the .deb this build tree makes is installed into a scratch root with `dpkg-deb -x` (the
# install step's `apt-get install`, without touching this host), and the `verify` step's
# commands run verbatim, as GitHub runs them, against that binary, as root and as nobody (the
# runner's user is unprivileged). The build step (a whole build) and the sysctl step (Ubuntu's
# AppArmor) are checked, not run.
#
#   workflow_test.sh CPACK BUILD_DIR SOURCE_DIR
#
# Exit 77 means skipped (ctest SKIP_RETURN_CODE); with DSH_MUST_WORK set a skip fails instead.
set -euo pipefail

cpack=$1
build=$(realpath "$2")
source_dir=$(realpath "$3")
workflow=$source_dir/examples/github-actions.yml

fail() { echo "workflow test: FAIL: $*" >&2; exit 1; }
skip() {
    [ -n "${DSH_MUST_WORK:-}" ] && fail "must work: $*"
    echo "workflow test: skipped: $*" >&2
    exit 77
}

python=
while read -r candidate; do
    if "$candidate" -c 'import yaml' 2>/dev/null; then python=$candidate; break; fi
done < <(type -ap python3 2>/dev/null || true)
[ -n "$python" ] || skip "no python3 with the yaml module on PATH (Debian: python3-yaml)"
command -v dpkg-deb >/dev/null || skip "dpkg-deb is not installed (Debian: dpkg)"
[ "$(id -u)" = 0 ] || skip "the workflow test runs the verify step as root and as nobody: run it as root"

scratch=$(mktemp -d /tmp/dsh-confine-workflow-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch"

# --- the YAML: its shape, and the steps this test runs, written out as scripts ----------------
"$python" - "$workflow" "$scratch" <<'PYTHON' || fail "the workflow's shape is wrong (above)"
import fnmatch, sys, yaml

path, out = sys.argv[1], sys.argv[2]
problems = []
def check(condition, message):
    if not condition:
        problems.append(message)

with open(path) as f:
    workflow = yaml.safe_load(f)
check(isinstance(workflow, dict), "the file is not a mapping")
# YAML 1.1 reads the key `on` as true.
triggers = workflow.get("on", workflow.get(True))
check(bool(workflow.get("name")), "no name")
check(isinstance(triggers, dict) and {"push", "pull_request"} <= set(triggers), "not triggered by push and pull_request")
check(workflow.get("defaults", {}).get("run", {}).get("shell") == "bash", "run steps do not default to shell: bash")
jobs = workflow.get("jobs") or {}
check({"package", "smoke"} <= set(jobs), "jobs package and smoke are not both there")

step_keys = {"id", "name", "uses", "run", "with", "env", "if", "shell", "working-directory",
             "continue-on-error", "timeout-minutes"}
steps_by_id = {}
uploaded, downloaded = None, None
for job_name, job in jobs.items():
    check(isinstance(job.get("runs-on"), str) and job["runs-on"].startswith("ubuntu-"), f"{job_name}: runs-on is not an Ubuntu runner")
    for need in [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", []):
        check(need in jobs, f"{job_name}: needs {need}, which is not a job")
    steps = job.get("steps") or []
    check(len(steps) > 0, f"{job_name}: no steps")
    for number, step in enumerate(steps, 1):
        where = f"{job_name} step {number}"
        check(set(step) <= step_keys, f"{where}: unknown keys {sorted(set(step) - step_keys)}")
        check(("uses" in step) != ("run" in step), f"{where}: neither or both of uses and run")
        if "uses" in step:
            action, _, version = step["uses"].partition("@")
            check(action.startswith("actions/") and version.startswith("v"), f"{where}: {step['uses']} is not a pinned actions/ action")
            if action == "actions/upload-artifact":
                uploaded = step.get("with", {})
            if action == "actions/download-artifact":
                downloaded = step.get("with", {})
        if "id" in step:
            check(step["id"] not in steps_by_id, f"{where}: id {step['id']} given twice")
            steps_by_id[step["id"]] = step

check(jobs.get("smoke", {}).get("needs") == "package", "smoke does not wait for package")
check(uploaded is not None and downloaded is not None, "the package is not handed from one job to the other")
if uploaded and downloaded:
    check(uploaded.get("name") == downloaded.get("name"), "the artifact is uploaded and downloaded under different names")
    # CPack's file name for the package: dsh-confine_VERSION-RELEASE_ARCH.deb.
    check(fnmatch.fnmatch("build/dsh-confine_0.1.0-1_amd64.deb", uploaded.get("path", "")), f"the upload path {uploaded.get('path')} does not match CPack's file")
for step_id in ("build", "userns", "install", "verify"):
    check(step_id in steps_by_id and "run" in steps_by_id[step_id], f"no run step with id {step_id}")
if not problems:
    build = steps_by_id["build"]["run"]
    for command in ("bash .ci/setup --build-only", "cmake -S . -B build", "cmake --build build", "cpack -G DEB"):
        check(command in build, f"the build step does not run {command}")
    check("sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in steps_by_id["userns"]["run"], "the userns step does not lift Ubuntu's restriction")
    check("apt-get install -y ./dsh-confine_*.deb" in steps_by_id["install"]["run"], "the install step does not install the downloaded package")
    check("dsh-confine doctor --verify" in steps_by_id["verify"]["run"], "the verify step does not run doctor --verify")
    with open(f"{out}/verify.sh", "w") as f:
        f.write(steps_by_id["verify"]["run"])
for problem in problems:
    print(f"workflow test: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
PYTHON
[ -f "$build/CPackConfig.cmake" ] || fail "no CPack config in $build"
[ -f "$source_dir/.ci/setup" ] || fail "the build step runs .ci/setup, which is not there"

# --- the install step, into a scratch root ----------------------------------------------------
deb=$(bash "$source_dir/test/e2e/make_deb.sh" "$cpack" "$build" "$scratch/out") || fail "cpack failed"
case $(basename "$deb") in dsh-confine_*.deb) ;; *) fail "CPack made $(basename "$deb"), which the workflow's steps do not name" ;; esac
dpkg-deb --extract "$deb" "$scratch/root"
chmod -R go-w "$scratch/root"
[ -x "$scratch/root/usr/bin/dsh-confine" ] || fail "the package has no /usr/bin/dsh-confine"

# --- the verify step, as GitHub runs a `shell: bash` step ---------------------------------------
chmod 644 "$scratch/verify.sh"
for user in root nobody; do
    as_user=()
    home=$scratch/home-$user
    mkdir -p "$home"
    if [ "$user" = nobody ]; then
        as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        chown 65534:65534 "$home"
    fi
    status=0
    (cd "$home" && "${as_user[@]}" env -i HOME="$home" PATH="$scratch/root/usr/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 \
        bash --noprofile --norc -eo pipefail "$scratch/verify.sh") >"$scratch/verify-$user.out" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        cat "$scratch/verify-$user.out" >&2
        fail "the verify step failed as $user (exit $status)"
    fi
    grep -q "^verify bwrap (full): ok" "$scratch/verify-$user.out" || { cat "$scratch/verify-$user.out" >&2; fail "doctor --verify did not verify bubblewrap as $user"; }
    grep -q "^  runner: $scratch/root/usr/bin/dsh-confine" "$scratch/verify-$user.out" ||
        fail "the verify step did not run the packaged binary as $user"
done
echo "workflow test: ok"
