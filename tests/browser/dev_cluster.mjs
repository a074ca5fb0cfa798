// `hachi dev` for the browser tests: a child process on a free 127.0.0.1 port with its
// own state directory and the two-node example config (two simulated HGX H100 nodes),
// and the real CLI to drive it over the server's Unix socket (the kernel says who we are).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

// Where the tests find the repository, the build, Chromium, and where they leave
// screenshots; the same for every browser test.
export const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const build = process.env.HACHI_BUILD_DIR || join(root, 'build');
export const artifacts = process.env.HACHI_BROWSER_ARTIFACTS || join(build, 'browser-artifacts');
export const CHROMIUM = process.env.HACHI_CHROMIUM || '/usr/bin/chromium';
// No network beyond 127.0.0.1 here: Chromium's own background traffic is switched off.
export const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                      '--disable-background-networking', '--disable-component-update',
                      '--disable-sync'];

// A headless Chromium on a profile of its own, for one test file: `context` to open
// pages in, `close()` to end it and remove the profile. Makes the artifacts directory.
export async function openBrowser(viewport = { width: 1400, height: 700 }) {
  mkdirSync(artifacts, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'hachi-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport,
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export class DevCluster {
  // config: a cluster config (default examples/two-nodes.toml), null for none; nodes and
  // preset: hachi dev's --nodes/--preset (default 2 HGX H100).
  // ready: what start() waits for each node to be (default: up; a burn-in test waits for
  // its run's outcome instead). args: more flags for hachi dev; env: more environment
  // for it (the fake NVML's, for "real" GPUs).
  constructor({ root, hachi, historyInterval = 2, config, nodes = 2, preset = 'hgx-h100',
                ready = (n) => n.state === 'up', args = [], env = {} }) {
    this.ready = ready;
    this.extraArgs = args;
    this.devEnv = { ...process.env, ...env };
    this.config = config === undefined ? join(root, 'examples', 'two-nodes.toml') : config;
    this.nodes = nodes;
    this.preset = preset;
    this.root = root;
    this.hachi = hachi;
    this.dir = mkdtempSync(join(tmpdir(), 'hachi-browser-'));
    this.stateDir = join(this.dir, 'state');
    this.logPath = join(this.dir, 'dev.log');
    this.historyInterval = historyInterval;
    this.url = '';
    this.env = { ...process.env, HACHI_SERVER: `unix:${join(this.stateDir, 'hachi.sock')}` };
  }

  async start() {
    const args = ['dev', ...(this.config ? ['--config', this.config] : []),
                  '--nodes', String(this.nodes), '--preset', this.preset,
                  '--state-dir', this.stateDir, '--listen', '127.0.0.1:0',
                  '--history-interval', String(this.historyInterval), ...this.extraArgs];
    this.log = [];
    this.url = '';
    this.proc = spawn(this.hachi, args, { stdio: ['ignore', 'ignore', 'pipe'], env: this.devEnv });
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (d) => this.log.push(d));
    this.exited = new Promise((resolve) => this.proc.on('exit', resolve));
    const deadline = Date.now() + 20000;
    while (!this.url) {
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(this.log.join(''));
      if (m) this.url = m[1];
      else if (Date.now() > deadline || this.proc.exitCode !== null) {
        throw new Error(`hachi dev did not start:\n${this.log.join('')}`);
      }
      await sleep(50);
    }
    // Every agent registered: the nodes are up.
    await waitFor(async () => {
      const nodes = (await this.api('/nodes')).nodes;
      return nodes.length === this.nodes && nodes.every(this.ready);
    }, 'every node up', 15000);
  }

  async stop() {
    await this.stopProcess();
    rmSync(this.dir, { recursive: true, force: true });
  }

  // A restart of the server (and its agents) on the same state directory.
  async restart() {
    await this.stopProcess();
    await this.start();
  }

  async stopProcess() {
    if (this.proc && this.proc.exitCode === null) {
      this.proc.kill('SIGTERM');
      await Promise.race([this.exited, sleep(20000)]);
      if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
    }
  }

  // The CLI, as this process's user over the Unix socket; throws on a non-zero exit.
  cli(...args) {
    const r = spawnSync(this.hachi, args, { env: this.env, encoding: 'utf8', cwd: this.dir });
    if (r.status !== 0) {
      throw new Error(`hachi ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
    }
    return r.stdout;
  }

  // Whether `hachi token` exists in this build (the page's token checks need it).
  hasTokens() {
    const r = spawnSync(this.hachi, ['token', '--help'], { env: this.env, encoding: 'utf8' });
    return r.status === 0 && /create/.test(r.stdout + r.stderr);
  }

  // What agents send (hachi dev creates STATE_DIR/cluster-secret), to report as one.
  clusterSecret() {
    return readFileSync(join(this.stateDir, 'cluster-secret'), 'utf8').trim();
  }

  // GET over TCP as the page does (an anonymous reader on localhost).
  async api(path) {
    const res = await fetch(`${this.url}/api/v1${path}`);
    if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  }

  devLog() {
    return this.log.join('') + (safeRead(this.logPath) || '');
  }
}

function safeRead(p) {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Polls `cond` (async, truthy when done) until it holds or `ms` pass.
export async function waitFor(cond, what, ms = 15000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await cond();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${last})`);
    await sleep(200);
  }
}
