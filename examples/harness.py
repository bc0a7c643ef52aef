#!/usr/bin/env python3
"""A minimal agent harness that runs every tool call through dsh-confine.

One session per conversation, each tool call through `dsh-confine run` with its JSON report
read back from a pipe, and one decision per verdict. Standard library only. The walk-through
is docs/integration.md.

    python3 examples/harness.py WORKSPACE [--dsh-confine PATH] [--require-full]

WORKSPACE is the directory the conversation works in: the session's root, the only place
its commands may write. Exit status: 0 when every call was run and attributed, 1 when the
sandbox is broken on this host (runner-failure: the harness stops), 2 when dsh-confine
refused a call itself (its `error` in the report), 64 for a bad command line.
"""

import argparse
import json
import os
import subprocess
import sys
import threading

# What a harness does with each verdict of the report.
WHAT_TO_DO = {
    "success": "the command did its job: hand its output to the model",
    "failure": "the command failed on its own (a compile error, a failing test): hand its output to the model",
    "denial": "the sandbox blocked an effect: ask the user whether to allow it, or retry in another mode",
    "timeout": "the command ran out of time: tell the model, it is the command's own problem",
    "limit": "the command hit a resource limit: tell the model, it is the command's own problem",
    "runner-failure": "the sandbox is broken on this host: stop, and show the error to whoever runs the harness",
}

# Every call gets a deadline and limits: a hung test or a fork bomb must not hang the agent.
LIMITS = ["--limit", "memory=2G", "--limit", "pids=512"]


class Stop(Exception):
    """The harness cannot go on: the exit status and why."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Sandbox:
    """One conversation's session: its root is fixed at start, every tool call runs in it."""

    def __init__(self, binary, workspace, require_full):
        self.binary = binary
        self.workspace = os.path.realpath(workspace)
        self.require_full = require_full
        self.session = "example-%d" % os.getpid()
        self.started = False
        self.gaps_shown = False

    def dsh(self, *args):
        """A session command: 0 or 125 with one error line, nothing to attribute."""
        try:
            done = subprocess.run([self.binary, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True)
        except OSError as error:
            raise Stop(2, "%s: %s" % (self.binary, error.strerror))
        if done.returncode != 0:
            raise Stop(2, done.stderr.strip() or "%s exited %d" % (" ".join(args), done.returncode))
        return done.stdout

    def start(self):
        # The cwd is immutable: every call of the session is confined to it.
        self.dsh("session", "start", self.session, "--cwd", self.workspace)
        self.started = True
        self.dsh("session", "mode", self.session, "workspace-write")
        # No network unless a call asks for hosts with --allow-host (an install, say).
        self.dsh("session", "network", self.session, "deny")
        print("session %s in %s: workspace-write, network deny" % (self.session, self.workspace))

    def end(self):
        if not self.started:
            return
        self.dsh("session", "end", self.session)
        print("session %s ended" % self.session)

    def tool_call(self, argv, timeout="60s", extra=()):
        """Run argv confined; returns (status, stdout, stderr, report)."""
        report_read, report_write = os.pipe()
        command = [self.binary, "run", "--session", self.session, "--timeout", timeout, *LIMITS, *extra]
        if self.require_full:
            command.append("--require-full")
        command += ["--report-fd", str(report_write), "--", *argv]
        # The command runs in the caller's directory, not in the root: start it in the workspace.
        try:
            process = subprocess.Popen(command, cwd=self.workspace, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(report_write,))
        except OSError as error:
            os.close(report_read)
            raise Stop(2, "%s: %s" % (self.binary, error.strerror))
        finally:
            os.close(report_write)  # only `run` holds it now: its end of the pipe is the report's end
        report_bytes = []
        reader = threading.Thread(target=lambda: report_bytes.append(os.fdopen(report_read, "rb").read()))
        reader.start()
        out, err = process.communicate()
        reader.join()
        status = process.returncode if process.returncode >= 0 else 128 - process.returncode  # as a shell shows a signal
        err = err.decode(errors="replace")
        if not report_bytes[0]:
            # No report: the command line itself was wrong (CLI11 found it before the report was open).
            raise Stop(2, "no report (exit %d): %s" % (status, err.strip()))
        return status, out.decode(errors="replace"), err, json.loads(report_bytes[0])

    def explain(self, name, status, report, out):
        """Print what the verdict means; raise Stop where the harness must not go on."""
        if report.get("error"):
            # dsh-confine refused the call itself (bad usage, --require-full, a replaced cwd...).
            error = report["error"]
            raise Stop(2, "[%s] dsh-confine refused the call (exit %d): %s: %s"
                       % (name, status, error["code"], error["message"]))
        if report["enforcement"] == "partial" and not self.gaps_shown:
            self.gaps_shown = True
            gaps = report["enforcementGaps"]
            more = " (and %d more named gaps)" % (len(gaps) - 1) if len(gaps) > 1 else ""
            print("enforcement partial under %s: %s%s" % (report["backend"], gaps[0], more))
        verdict = report["verdict"]
        evidence = ""
        if verdict["line"]:
            evidence = ": %s" % verdict["line"]
        if verdict["verdict"] == "denial" and verdict["path"]:
            evidence += " (path %s)" % verdict["path"]
        print("[%s] %s (exit %d)%s" % (name, verdict["verdict"], status, evidence))
        if out:
            print("    stdout: %s" % out.strip())
        print("    -> %s" % WHAT_TO_DO[verdict["verdict"]])
        if verdict["verdict"] == "runner-failure":
            raise Stop(1, "the sandbox is broken on this host: %s" % verdict["line"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace")
    parser.add_argument("--dsh-confine", default=os.environ.get("DSH_CONFINE", "dsh-confine"))
    parser.add_argument("--require-full", action="store_true",
                        help="refuse a call whose enforcement would be partial")
    try:
        args = parser.parse_args()
    except SystemExit as exit:
        sys.exit(64 if exit.code else 0)

    sandbox = Sandbox(args.dsh_confine, args.workspace, args.require_full)
    # Three tool calls a model might ask for: a build, a write outside the workspace, a command
    # that hangs.
    calls = [
        ("build", ["sh", "-c", "printf '#include <stdio.h>\\nint main(void) { puts(\"hello from the sandbox\"); return 0; }\\n'"
                               " > hello.c && cc -o hello hello.c && ./hello"], "60s"),
        ("write outside", ["sh", "-c", "echo 'not yours' > ../outside.txt"], "60s"),
        ("slow command", ["sleep", "30"], "1s"),
    ]
    try:
        sandbox.start()
        try:
            for name, argv, timeout in calls:
                status, out, err, report = sandbox.tool_call(argv, timeout=timeout)
                sandbox.explain(name, status, report, out)
        finally:
            sandbox.end()
    except Stop as stop:
        print("stopped: %s" % stop, file=sys.stderr)
        return stop.status
    return 0


if __name__ == "__main__":
    sys.exit(main())
