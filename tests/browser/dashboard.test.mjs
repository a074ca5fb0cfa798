// The dashboard end to end (docs/dashboard.md): `hachi dev` with two simulated HGX nodes, jobs
// submitted with the real CLI, the page driven in Debian's Chromium by playwright-core.
// Checks that the cluster view shows exactly the GPUs the server gave each job, that a
// pending job shows its reason, that a cancel without a token is refused on the page and
// one with a token ends the job CANCELLED, and that the charts render. Screenshots go to
// build/browser-artifacts/ (HACHI_BROWSER_ARTIFACTS).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

import { DevCluster, waitFor , artifacts, build, CHROMIUM, FLAGS, root } from './dev_cluster.mjs';


const cluster = new DevCluster({ root, hachi: join(build, 'hachi') });
let context;
let page;
let profile;
const pageErrors = [];
const foreignRequests = [];
const jobs = {};

// A token from `hachi token create` (prints hachi_<id>_<hex>).
function createToken(...args) {
  const out = cluster.cli('token', 'create', ...args);
  const token = (out.match(/hachi_[A-Za-z0-9_]{20,}/g) || out.match(/[A-Za-z0-9_\-.]{20,}/g) || []).pop();
  assert.ok(token, `no token in: ${out}`);
  return token;
}

async function useToken(token) {
  await page.fill('#token-input', token);
  await page.click('#token-save');
  assert.match(await page.textContent('#token-state'), /token saved/);
}

function noTokensYet(what) {
  console.error(`\n*** SKIPPED: \`hachi token\` is not in this build: ${what} ` +
                'was NOT tested. ***\n');
}

function submit(...args) {
  const out = cluster.cli('submit', '--parsable', ...args);
  const id = parseInt(out.trim(), 10);
  assert.ok(id > 0, `submit printed ${out}`);
  return id;
}

async function shot(name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
}

// The (node, GPU) pairs the page draws as busy with `job`, e.g. ["node1:0", "node1:1"].
async function busyOnPage(job) {
  return page.$$eval(`g.gpu[data-state="busy"][data-job="${job}"]`,
    (cells) => cells.map((c) => `${c.dataset.node}:${c.dataset.gpu}`).sort());
}

// The same pairs from the API's job record.
async function busyInApi(job) {
  const { job: j } = await cluster.api(`/jobs/${job}`);
  const out = [];
  for (const a of j.allocations) {
    for (const part of a.gpus.split(',')) {
      const [lo, hi] = part.split('-').map(Number);
      for (let g = lo; g <= (hi ?? lo); g++) out.push(`${a.node}:${g}`);
    }
  }
  return out.sort();
}

async function goto(hash) {
  await page.goto(`${cluster.url}/${hash}`);
}

describe('dashboard in Chromium', { timeout: 180000 }, () => {
  before(async () => {
    mkdirSync(artifacts, { recursive: true });
    await cluster.start();
    profile = mkdtempSync(join(tmpdir(), 'hachi-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM, headless: true, args: FLAGS,
      viewport: { width: 1400, height: 900 },
    });
    page = context.pages()[0] || await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('request', (r) => {
      if (!r.url().startsWith(cluster.url) && !r.url().startsWith('data:')) {
        foreignRequests.push(r.url());
      }
    });

    jobs.small = submit('-p', 'gpu-shared', '-G', '2', '-J', 'sleeper',
                        '--wrap', 'echo hello from the dashboard test; sleep 600');
    jobs.big = submit('-p', 'gpu8', '-G', '8', '-J', 'big', '--wrap', 'sleep 600');
    await waitFor(async () => {
      const [a, b] = await Promise.all([cluster.api(`/jobs/${jobs.small}`), cluster.api(`/jobs/${jobs.big}`)]);
      return a.job.state === 'RUNNING' && b.job.state === 'RUNNING';
    }, 'the 2-GPU and the 8-GPU job running');
    // Both servers are busy now: another whole-node job must wait.
    jobs.waiting = submit('-p', 'gpu8', '-G', '8', '-J', 'waiter', '--wrap', 'sleep 600');
    await waitFor(async () => {
      const { jobs: list } = await cluster.api('/jobs');
      const w = list.find((j) => j.id === jobs.waiting);
      return w && w.state === 'PENDING' && w.reason;
    }, 'a reason for the pending 8-GPU job');
    // Two history samples with it pending, so the wait chart has a line to draw (the
    // cancel below frees a node, and then it runs).
    await waitFor(async () => (await cluster.api('/history')).samples
      .filter((s) => s.partitions.gpu8?.pending >= 1).length >= 2, 'two samples with gpu8 waiting');
  });

  after(async () => {
    if (context) await context.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await cluster.stop();
  });

  it('cluster view shows exactly the GPUs the server gave each job', async () => {
    await goto('#/cluster');
    await page.waitForSelector('section.node[data-node="node2"] svg.board');
    for (const job of [jobs.small, jobs.big]) {
      const want = await busyInApi(job);
      assert.equal(want.length, job === jobs.small ? 2 : 8);
      await waitFor(async () => JSON.stringify(await busyOnPage(job)) === JSON.stringify(want),
                    `the page to draw job ${job} on ${want}`);
    }
    const busy = await page.$$eval('g.gpu[data-state="busy"]', (c) => c.length);
    const free = await page.$$eval('g.gpu[data-state="free"]', (c) => c.length);
    assert.equal(busy, 10);
    assert.equal(free, 6);
    // NUMA nodes and PCIe switches of the HGX board are drawn, with the NVSwitch bar.
    assert.equal(await page.$$eval('section.node[data-node="node1"] .box.numa', (b) => b.length), 2);
    assert.equal(await page.$$eval('section.node[data-node="node1"] .box.switch', (b) => b.length), 4);
    assert.match(await page.textContent('section.node[data-node="node1"] .nvswitch-label'), /NVSwitch/);

    // Hover: the job, its user and the GPU's memory.
    await page.hover(`g.gpu[data-job="${jobs.small}"]`);
    const tip = await page.textContent('#tooltip');
    assert.match(tip, new RegExp(`job ${jobs.small}`));
    assert.match(tip, new RegExp(`user ${userInfo().username}`));
    assert.match(tip, /GiB|MiB/);
    await shot('cluster');
    await page.mouse.move(0, 0);
  });

  it('queue view shows the pending job with its reason, and filters', async () => {
    const { jobs: list } = await cluster.api('/jobs');
    const reason = list.find((j) => j.id === jobs.waiting).reason;
    await goto('#/queue');
    const row = `#queue-table tr[data-job="${jobs.waiting}"]`;
    await page.waitForSelector(row);
    assert.equal(await page.getAttribute(row, 'data-state'), 'PENDING');
    assert.equal((await page.textContent(`${row} .reason-word`)).trim(), reason);
    // The diagnosis with numbers (GET /jobs/ID) is shown under the word.
    await page.waitForSelector(`${row} .diagnosis`);
    assert.ok((await page.textContent(`${row} .diagnosis`)).length > 10);
    await shot('queue');

    await page.selectOption('#filter-partition', 'gpu8');
    await page.waitForFunction(() => location.hash.includes('partition=gpu8'));
    await waitFor(async () => {
      const ids = await page.$$eval('#queue-table tbody tr', (r) => r.map((x) => Number(x.dataset.job)));
      return JSON.stringify(ids.sort((a, b) => a - b)) === JSON.stringify([jobs.big, jobs.waiting]);
    }, 'only the gpu8 jobs listed');
    await page.selectOption('#filter-user', userInfo().username);
    await page.waitForFunction(() => location.hash.includes('user='));
    await page.waitForSelector(`#queue-table tr[data-job="${jobs.big}"]`);
  });

  it('job page shows the history; the log is not for anonymous viewers', async () => {
    await goto(`#/job/${jobs.small}`);
    await page.waitForSelector('#job-history li');
    const history = await page.textContent('#job-history');
    assert.match(history, /submitted/);
    assert.match(history, /started/);
    // Anonymous: the log is its owner's (a token shows it, in the cancel test below).
    await waitFor(async () => /\b401\b.*token/.test(await page.textContent('#job-log')),
                  'the log refused to an anonymous viewer');
    await shot('job');

    // The waiting job's page: the reason word as the API has it, and the explanation.
    const w = (await cluster.api('/jobs')).jobs.find((j) => j.id === jobs.waiting);
    await goto(`#/job/${jobs.waiting}`);
    await page.waitForSelector('#job-reason');
    assert.equal((await page.textContent('#job-reason')).trim(), w.reason);
    assert.ok((await page.textContent('#job-diagnosis')).length > 10);
    await shot('job-pending');
  });

  it('cancel without a token is refused visibly; with a token the job ends CANCELLED', async () => {
    await goto(`#/job/${jobs.small}`);
    await page.waitForSelector('#job-cancel');
    await page.click('#job-cancel');
    await page.waitForSelector('#banner.error');
    const refused = await page.textContent('#banner');
    assert.match(refused, /\b(401|403)\b/, refused);
    assert.equal((await cluster.api(`/jobs/${jobs.small}`)).job.state, 'RUNNING');
    await shot('cancel-refused');

    if (!cluster.hasTokens()) return noTokensYet('the cancel with a token');
    await useToken(createToken(userInfo().username));
    // With the owner's token the log tail shows (GET /jobs/ID/log).
    await waitFor(async () => /hello from the dashboard test/.test(await page.textContent('#job-log')),
                  'the log tail');
    await shot('job-log');
    await page.click('#job-cancel');
    await page.waitForSelector('#banner.ok');
    await waitFor(async () => (await cluster.api(`/jobs/${jobs.small}`)).job.state === 'CANCELLED',
                  `job ${jobs.small} CANCELLED`, 30000);
    await page.waitForFunction(() => document.querySelector('#job-state')?.textContent === 'CANCELLED');
    await shot('cancelled');

    await goto('#/cluster');
    await waitFor(async () => (await busyOnPage(jobs.small)).length === 0, 'its GPUs free again');
  });

  it('drain needs an admin: a 403 on the page for a user token, done with an admin token', async () => {
    if (!cluster.hasTokens()) return noTokensYet('drain with a token');
    await goto('#/cluster');
    const drain = 'button.drain[data-node="node2"]';
    await page.waitForSelector(drain);
    page.once('dialog', (d) => d.accept('dashboard test'));
    await page.click(drain);  // with the non-admin token of the cancel above
    await page.waitForSelector('#banner.error');
    assert.match(await page.textContent('#banner'), /\b403\b/);
    assert.equal((await cluster.api('/nodes/node2')).node.state, 'up');

    await useToken(createToken(userInfo().username, '--admin'));
    page.once('dialog', (d) => d.accept('dashboard test'));
    await page.click(drain);
    await waitFor(async () => (await cluster.api('/nodes/node2')).node.state === 'drained', 'node2 drained');
    await page.waitForSelector('section.node[data-node="node2"] .badge.node-drained');
    await shot('drained');
    await page.click('button.resume[data-node="node2"]');
    await waitFor(async () => (await cluster.api('/nodes/node2')).node.state === 'up', 'node2 up again');
  });

  it('charts render the queue wait (with the 20-minute line) and utilisation', async () => {
    await goto('#/charts');
    // Attached, not visible: a flat line (0% utilisation, say) has an empty bounding box.
    for (const chart of ['#chart-wait .series[data-series="gpu8"]', '#chart-pending .series',
                         '#chart-util .series']) {
      await page.waitForSelector(`${chart} path`, { state: 'attached' });
      const d = await page.getAttribute(`${chart} path`, 'd');
      assert.ok((d.match(/[ML]/g) || []).length >= 2, `${chart}: a line, not a point: ${d}`);
    }
    // gpu8's wait line has a point for each sample its job waited in.
    assert.ok(await page.$$eval('#chart-wait .series[data-series="gpu8"] circle', (c) => c.length) >= 2);
    assert.equal(await page.$$eval('#chart-wait .threshold', (l) => l.length), 1);
    assert.match(await page.textContent('#chart-wait'), /20 min/);
    const series = await page.$$eval('#chart-wait .series', (s) => s.map((x) => x.dataset.series));
    assert.deepEqual(series.sort(), ['gpu-shared', 'gpu-shared · started', 'gpu8', 'gpu8 · started']);
    // The 2- and 8-GPU jobs started at once: a started median of 0 in some interval.
    assert.ok(await page.$$eval('#chart-wait .series[data-series="gpu8 · started"] circle', (c) => c.length) >= 1);
    await shot('charts');
  });

  it('a GPU that fails is drawn as unhealthy, with its reason', async () => {
    // As the node's agent would report an Xid 79 (docs/api.md, /agents/NODE/health). Every
    // GPU is busy by now (the waiting job took the cancelled one's node): the job on it
    // goes back to pending, which is the server's business, not the page's.
    const { nodes } = await cluster.api('/nodes');
    const node = nodes.find((n) => n.name === 'node2');
    const gpu = 7;
    const res = await fetch(`${cluster.url}/api/v1/agents/${node.name}/health`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json',
                 'X-Hachi-Cluster-Secret': cluster.clusterSecret() },
      body: JSON.stringify({ instance: node.agent_instance, events: [{
        gpu, kind: 'xid', xid: 79, fault: 'fatal', message: 'GPU has fallen off the bus',
        at: Math.floor(Date.now() / 1000) }] }),
    });
    assert.equal(res.status, 200, await res.text());
    await goto('#/cluster');
    const cell = `section.node[data-node="${node.name}"] g.gpu[data-gpu="${gpu}"]`;
    await page.waitForSelector(`${cell}[data-state="unhealthy"]`);
    assert.match(await page.textContent(`section.node[data-node="${node.name}"] .unhealthy-list`),
                 new RegExp(`GPU ${gpu}: .*fallen off the bus`));
    await page.hover(cell);
    assert.match(await page.textContent('#tooltip'), /unhealthy: .*fallen off the bus/);
    await shot('unhealthy');
  });

  it('cancel from a queue row', async () => {
    if (!cluster.hasTokens()) return noTokensYet('the cancel from a queue row');
    // The admin token of the drain test is still in the field (localStorage).
    await goto('#/queue');
    const button = `#queue-table tr[data-job="${jobs.big}"] button.cancel`;
    await page.waitForSelector(button);
    await page.click(button);
    await page.waitForSelector('#banner.ok');
    await waitFor(async () => (await cluster.api(`/jobs/${jobs.big}`)).job.state === 'CANCELLED',
                  `job ${jobs.big} CANCELLED`, 30000);
    await page.waitForSelector(`#queue-table tr[data-job="${jobs.big}"]`, { state: 'detached' });
  });

  it('loaded nothing from outside the server and threw no errors', () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});
