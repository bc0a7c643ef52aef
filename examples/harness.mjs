#!/usr/bin/env node
// A minimal agent harness that runs every tool call through dsh-confine, in Node with no
// package: one session per conversation, each tool call through `dsh-confine run` with its
// JSON report read back from an extra stdio pipe (descriptor 3), and one decision per verdict.
// The walk-through is docs/integration.md.
//
//   node examples/harness.mjs WORKSPACE [--dsh-confine PATH] [--require-full]
//
// Exit status: 0 when every call was run and attributed, 1 when the sandbox is broken on this
// host (runner-failure: the harness stops), 2 when dsh-confine refused a call itself (its
// `error` in the report), 64 for a bad command line.
import { spawn, spawnSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { constants } from 'node:os';

// What a harness does with each verdict of the report.
const WHAT_TO_DO = {
  success: 'the command did its job: hand its output to the model',
  failure: 'the command failed on its own (a compile error, a failing test): hand its output to the model',
  denial: 'the sandbox blocked an effect: ask the user whether to allow it, or retry in another mode',
  timeout: "the command ran out of time: tell the model, it is the command's own problem",
  limit: "the command hit a resource limit: tell the model, it is the command's own problem",
  'runner-failure': 'the sandbox is broken on this host: stop, and show the error to whoever runs the harness',
};

// Every call gets a deadline and limits: a hung test or a fork bomb must not hang the agent.
const LIMITS = ['--limit', 'memory=2G', '--limit', 'pids=512'];

class Stop extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// One conversation's session: its root is fixed at start, every tool call runs in it.
class Sandbox {
  constructor(binary, workspace, requireFull) {
    this.binary = binary;
    this.workspace = realpathSync(workspace);
    this.requireFull = requireFull;
    this.session = `example-${process.pid}`;
    this.started = false;
    this.gapsShown = false;
  }

  // A session command: 0 or 125 with one error line, nothing to attribute.
  dsh(...args) {
    const done = spawnSync(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
    if (done.error) throw new Stop(2, `${this.binary}: ${done.error.message}`);
    if (done.status !== 0) throw new Stop(2, done.stderr.trim() || `${args.join(' ')} exited ${done.status}`);
    return done.stdout;
  }

  start() {
    // The cwd is immutable: every call of the session is confined to it.
    this.dsh('session', 'start', this.session, '--cwd', this.workspace);
    this.started = true;
    this.dsh('session', 'mode', this.session, 'workspace-write');
    // No network unless a call asks for hosts with --allow-host (an install, say).
    this.dsh('session', 'network', this.session, 'deny');
    console.log(`session ${this.session} in ${this.workspace}: workspace-write, network deny`);
  }

  end() {
    if (!this.started) return;
    this.dsh('session', 'end', this.session);
    console.log(`session ${this.session} ended`);
  }

  // Run argv confined; resolves to {status, out, err, report}.
  toolCall(argv, timeout = '60s', extra = []) {
    const command = ['run', '--session', this.session, '--timeout', timeout, ...LIMITS, ...extra];
    if (this.requireFull) command.push('--require-full');
    command.push('--report-fd', '3', '--', ...argv);
    // The command runs in the caller's directory, not in the root: start it in the workspace.
    // stdio[3] is a pipe the child sees as descriptor 3: `run` writes the report there.
    const child = spawn(this.binary, command, { cwd: this.workspace, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    const streams = { out: [], err: [], report: [] };
    child.stdout.on('data', (chunk) => streams.out.push(chunk));
    child.stderr.on('data', (chunk) => streams.err.push(chunk));
    child.stdio[3].on('data', (chunk) => streams.report.push(chunk));
    return new Promise((resolve, reject) => {
      child.on('error', (error) => reject(new Stop(2, `${this.binary}: ${error.message}`)));
      // 'close' comes once the process has exited and every pipe is at its end.
      child.on('close', (status, signal) => resolve({
        status: status ?? 128 + constants.signals[signal],  // as a shell shows a death by signal
        out: Buffer.concat(streams.out).toString(),
        err: Buffer.concat(streams.err).toString(),
        report: streams.report.length ? JSON.parse(Buffer.concat(streams.report).toString()) : null,
      }));
    });
  }

  // Print what the verdict means; throw Stop where the harness must not go on.
  explain(name, { status, out, err, report }) {
    // No report: the command line itself was wrong (CLI11 found it before the report was open).
    if (!report) throw new Stop(2, `[${name}] no report (exit ${status}): ${err.trim()}`);
    if (report.error) {
      // dsh-confine refused the call itself (bad usage, --require-full, a replaced cwd...).
      throw new Stop(2, `[${name}] dsh-confine refused the call (exit ${status}): ${report.error.code}: ${report.error.message}`);
    }
    if (report.enforcement === 'partial' && !this.gapsShown) {
      this.gapsShown = true;
      const gaps = report.enforcementGaps;
      const more = gaps.length > 1 ? ` (and ${gaps.length - 1} more named gaps)` : '';
      console.log(`enforcement partial under ${report.backend}: ${gaps[0]}${more}`);
    }
    const verdict = report.verdict;
    let evidence = verdict.line ? `: ${verdict.line}` : '';
    if (verdict.verdict === 'denial' && verdict.path) evidence += ` (path ${verdict.path})`;
    console.log(`[${name}] ${verdict.verdict} (exit ${status})${evidence}`);
    if (out) console.log(`    stdout: ${out.trim()}`);
    console.log(`    -> ${WHAT_TO_DO[verdict.verdict]}`);
    if (verdict.verdict === 'runner-failure') throw new Stop(1, `the sandbox is broken on this host: ${verdict.line}`);
  }
}

function parseArguments(words) {
  const options = { binary: process.env.DSH_CONFINE || 'dsh-confine', requireFull: false, workspace: null };
  for (let i = 0; i < words.length; i++) {
    if (words[i] === '--dsh-confine' && i + 1 < words.length) options.binary = words[++i];
    else if (words[i] === '--require-full') options.requireFull = true;
    else if (!words[i].startsWith('-') && options.workspace === null) options.workspace = words[i];
    else return null;
  }
  return options.workspace === null ? null : options;
}

async function main() {
  const options = parseArguments(process.argv.slice(2));
  if (!options) {
    console.error('usage: node harness.mjs WORKSPACE [--dsh-confine PATH] [--require-full]');
    return 64;
  }
  const sandbox = new Sandbox(options.binary, options.workspace, options.requireFull);
  // Three tool calls a model might ask for: a build, a write outside the workspace, a command
  // that hangs.
  const calls = [
    ['build', ['sh', '-c', "printf '#include <stdio.h>\\nint main(void) { puts(\"hello from the sandbox\"); return 0; }\\n'" +
                           ' > hello.c && cc -o hello hello.c && ./hello'], '60s'],
    ['write outside', ['sh', '-c', "echo 'not yours' > ../outside.txt"], '60s'],
    ['slow command', ['sleep', '30'], '1s'],
  ];
  try {
    sandbox.start();
    try {
      for (const [name, argv, timeout] of calls) sandbox.explain(name, await sandbox.toolCall(argv, timeout));
    } finally {
      sandbox.end();
    }
  } catch (error) {
    if (!(error instanceof Stop)) throw error;
    console.error(`stopped: ${error.message}`);
    return error.status;
  }
  return 0;
}

process.exitCode = await main();
