// What a job did with its GPUs, on the dashboard (docs/dashboard.md): `hachi
// dev` on the fake NVML (src/topo/testdata/fake_nvml/) with each GPU's utilisation
// scripted (GPU 0 ramps up to 95 %, GPU 3 starves at 5 %, GPU 5 is never used, the rest
// work at 90 %), the job sampled every 0.2 s. Its page draws a chart per GPU with its
// figures and the API's findings; the node board shades each GPU by its latest figure;
// and after the job ends and the server restarts, the page draws the same charts from
// the store. Screenshots job-usage.png, board-util.png, job-usage-restarted.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

import { DevCluster, artifacts, build, CHROMIUM, FLAGS, root, waitFor } from './dev_cluster.mjs';

const FAKE_NVML = process.env.HACHI_FAKE_NVML ||
  join(build, 'src', 'topo', 'fake_nvml', 'libnvidia-ml.so.1');
const skip = existsSync(FAKE_NVML) ? false
  : `no fake NVML at ${FAKE_NVML} (built with the tests: HACHI_TESTS=ON)`;

describe('GPU usage on the job page and the node board', { timeout: 150000, skip }, () => {
  let context;
  let page;
  let profile;
  let work;
  let cluster;
  const pageErrors = [];

  before(async () => {
    mkdirSync(artifacts, { recursive: true });
    work = mkdtempSync(join(tmpdir(), 'hachi-usage-'));
    writeFileSync(join(work, 'cluster.toml'),
                  '[[partition]]\nname = "gpu"\nnodes = "all"\nmode = "shared"\n' +
                  '[burn_in]\nchecks = []\n');
    const ramp = Array.from({ length: 20 }, (_, i) => Math.min(95, i * 5)).join(',');
    writeFileSync(join(work, 'nvml-events'),
                  `util 0 ${ramp}\nutil 1 90\nutil 2 90\nutil 3 5\nutil 4 90\nutil 5 0\n` +
                  'util 6 90\nutil 7 90\nmemused 0 20000,40000,61000\npower 0 650\n');
    cluster = new DevCluster({
      root, hachi: join(build, 'hachi'), nodes: 1, config: join(work, 'cluster.toml'),
      args: ['--usage-interval', '0.2'],
      env: {
        HACHI_NVML_LIBRARY: FAKE_NVML,
        HACHI_FAKE_NVML_TOPOLOGY: join(root, 'src', 'topo', 'presets', 'hgx-h100.json'),
        HACHI_FAKE_NVML_EVENTS: join(work, 'nvml-events'),
      },
    });
    await cluster.start();
    profile = mkdtempSync(join(tmpdir(), 'hachi-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1400, height: 900 },
    });
    page = context.pages()[0] || await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
  });

  after(async () => {
    if (context) await context.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    if (cluster) await cluster.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  // The owner's token in the page's field (the usage, like the log, is the owner's).
  async function signIn() {
    const out = cluster.cli('token', 'create', userInfo().username);
    const token = (out.match(/hachi_[A-Za-z0-9_]{20,}/g) || []).pop();
    assert.ok(token, `no token in: ${out}`);
    await page.fill('#token-input', token);
    await page.click('#token-save');
  }

  // What the page shows per GPU: [name, figures text, utilisation path].
  async function chartsOnPage() {
    return page.$$eval('#job-usage-gpus figure.usage-gpu', (figs) => figs.map((f) => [
      f.querySelector('figcaption strong').textContent,
      f.querySelector('.usage-figures').textContent,
      f.querySelector('path.util-line')?.getAttribute('d') || '',
    ]));
  }

  it('draws a chart per GPU with its figures and the findings; shades the board', async () => {
    try {
      const out = cluster.cli('submit', '--parsable', '-p', 'gpu', '--gpus', '8', '-J', 'uneven',
                              '--wrap', `while [ ! -e ${work}/go ]; do sleep 0.1; done`);
      const id = parseInt(out.trim(), 10);
      const eff = () => JSON.parse(cluster.cli('eff', String(id), '--json'));
      // Ten samples of every GPU.
      await waitFor(() => {
        const gpus = eff().runs?.at(-1)?.gpus || [];
        return gpus.length === 8 && gpus.every((g) => g.samples >= 10);
      }, 'ten samples of each GPU', 60000);

      // Anonymous: the usage is the owner's; the card says so.
      await page.goto(`${cluster.url}/#/job/${id}`);
      await page.waitForSelector('#job-usage-error');
      assert.match(await page.textContent('#job-usage-error'), /\b40[13]\b/);
      await signIn();
      await page.waitForSelector('#job-usage-gpus figure.usage-gpu');
      let charts = await chartsOnPage();
      assert.deepEqual(charts.map((c) => c[0]), [0, 1, 2, 3, 4, 5, 6, 7].map((g) => `GPU ${g}`));
      for (const [name, , d] of charts) assert.match(d, /^M [\d.]+ [\d.]+/, `${name}'s line`);
      assert.match(charts[3][1], /^mean 5 % · p95 5 % · max 5 %/);
      assert.match(charts[5][1], /^mean 0 % · p95 0 % · max 0 %/);
      assert.match(charts[0][1], /memory peak 59\.6 GiB · 650 W$/);
      assert.equal(await page.$$eval('#job-usage-gpus path.mem-line', (p) => p.length), 1,
                   'the memory line of the one GPU with a memory figure');
      // The findings, as the API words them (what `hachi eff` says too).
      const findings = eff().findings;
      assert.ok(findings.some((f) => f.kind === 'idle-gpu'), JSON.stringify(findings));
      await waitFor(async () => JSON.stringify(await page.$$eval('#job-findings li',
        (li) => li.map((l) => [l.dataset.kind, l.textContent]))) ===
        JSON.stringify(eff().findings.map((f) => [f.kind, f.text])), 'the findings on the page');
      await page.screenshot({ path: join(artifacts, 'job-usage.png'), fullPage: true });

      // The node board: each GPU shaded by its latest figure, the number in its title.
      const nodes = (await cluster.api('/nodes')).nodes;
      assert.deepEqual(nodes[0].gpu_util.slice(1), [90, 90, 5, 90, 0, 90, 90]);
      await page.goto(`${cluster.url}/#/cluster`);
      const cell = (g) => `g.gpu[data-gpu="${g}"]`;
      await page.waitForSelector(`${cell(3)}[data-util="5"]`);
      assert.match(await page.getAttribute(cell(3), 'aria-label'), /GPU 3 of .*: 5 % utilised/);
      assert.equal(await page.getAttribute(cell(5), 'data-util'), '0');
      assert.equal(await page.getAttribute(cell(1), 'data-util'), '90');
      const lightness = (g) => page.$eval(`${cell(g)} rect`,
        (r) => Number(/(\d+)%\)$/.exec(r.getAttribute('fill'))[1]));
      assert.ok(await lightness(5) > await lightness(3), 'idle: lighter than 5 %');
      assert.ok(await lightness(3) > await lightness(1), '5 %: lighter than 90 %');
      assert.equal(await page.$$eval(`${cell(5)}.light`, (c) => c.length), 1, 'dark text on it');
      await page.hover(cell(3));
      assert.match(await page.textContent('#tooltip'), /5 % utilised \(latest sample\)/);
      await page.screenshot({ path: join(artifacts, 'board-util.png') });

      // Ended, and the server restarted: the page draws the stored run.
      writeFileSync(join(work, 'go'), '');
      await waitFor(async () => JSON.parse(cluster.cli('show', 'job', String(id), '--json'))
        .job.state === 'COMPLETED', `job ${id} COMPLETED`, 30000);
      await page.goto(`${cluster.url}/#/job/${id}`);
      await page.waitForSelector('#job-usage-gpus figure.usage-gpu');
      charts = await chartsOnPage();
      const runText = await page.textContent('#job-usage-run');
      await cluster.restart();
      await page.goto(`${cluster.url}/#/job/${id}`);  // a new port: sign in again
      await signIn();
      await page.waitForSelector('#job-usage-gpus figure.usage-gpu');
      assert.deepEqual(await chartsOnPage(), charts);
      assert.equal(await page.textContent('#job-usage-run'), runText);
      // The log, refused before the token like the usage, is asked again too.
      await page.waitForFunction(() => !/\b40[13]\b/.test(document.querySelector('#job-log').textContent));
      await page.screenshot({ path: join(artifacts, 'job-usage-restarted.png'), fullPage: true });
      assert.deepEqual(pageErrors, []);
    } catch (e) {
      e.message += `\n${cluster.devLog()}`;
      throw e;
    }
  });
});
