// Burst pools on the dashboard (docs/pools.md): a burst node shows its pool and power
// state, and the cluster view sums each burst pool's powered nodes, GPU-hours and cost.
// node2 is a burst pool's node that stays idle past suspend_after, so the server
// powers it down (its programs are /bin/true). Screenshot pools.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { DevCluster, artifacts, build, openBrowser, root } from './dev_cluster.mjs';

describe('burst pools', { timeout: 120000 }, () => {
  let context;
  let browser;
  let work;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'hachi-pools-'));
    browser = await openBrowser();
    ({ context } = browser);
  });
  after(async () => {
    if (browser) await browser.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('shows a burst node powered down and the pool\'s powered time and cost', async () => {
    const config = join(work, 'cluster.toml');
    writeFileSync(config, [
      '[[pool]]', 'name = "owned"', 'nodes = "node1"', 'price_per_gpu_hour = 2.0',
      '[[pool]]', 'name = "burst-a"', 'nodes = "node2"', 'kind = "burst"',
      'resume_program = "/bin/true"', 'suspend_program = "/bin/true"',
      'suspend_after = "1s"', 'price_per_gpu_hour = 4.0', ''].join('\n'));
    const cluster = new DevCluster({ root, hachi: join(build, 'hachi'), nodes: 2, config,
                                     ready: (n) => n.state === 'up' });
    try {
      await cluster.start();
      const page = await context.newPage();
      await page.goto(`${cluster.url}/#/cluster`);
      const card = 'section.node[data-node="node2"]';
      await page.waitForSelector(`${card} .badge.power-off`, { timeout: 20000 });
      assert.equal(await page.$eval(`${card} .badge.power`, (b) => b.textContent),
                   'burst-a · off');
      // A fixed pool's node has no power badge.
      assert.equal(await page.$$eval('section.node[data-node="node1"] .badge.power',
                                     (b) => b.length), 0);
      await page.waitForFunction(() => /burst-a: 0\/1 nodes powered · this month [0-9.]+ GPU-h powered \([0-9.,]+\) · its jobs 0\.0 GPU-h \(0\.00\)/
        .test(document.querySelector('#pool-summary').textContent), null, { timeout: 10000 });
      // The spell node2 was powered (from its registration until its suspend) is stored:
      // billed, though no job ran.
      const burst = (await cluster.api('/pools')).pools.find((p) => p.name === 'burst-a');
      assert.ok(burst.powered_gpu_hours > 0, JSON.stringify(burst));
      assert.ok(Math.abs(burst.cost - burst.powered_gpu_hours * 4.0) < 1e-9, JSON.stringify(burst));
      await page.screenshot({ path: join(artifacts, 'pools.png') });
      await page.close();
    } catch (e) {
      e.message += `\n${cluster.devLog()}`;
      throw e;
    } finally {
      await cluster.stop();
    }
  });
});
