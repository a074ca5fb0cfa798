// The burn-in gate on the dashboard (docs/burn-in.md): a node whose checks
// failed shows a `burn-in` badge with the failing check as its reason and a Resume
// button; fixed and resumed, it passes and shows `up`. Screenshot burn-in.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { DevCluster, artifacts, build, openBrowser, root, waitFor } from './dev_cluster.mjs';

describe('a node in burn-in', { timeout: 120000 }, () => {
  let context;
  let browser;
  let work;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'hachi-burnin-'));
    browser = await openBrowser();
    ({ context } = browser);
  });
  after(async () => {
    if (browser) await browser.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('shows burn-in and why, then up once it passes', async () => {
    const script = join(work, 'check.sh');
    writeFileSync(script, `#!/bin/sh\n[ -f ${work}/fixed ] && exit 0\n` +
                          "echo 'nvlink: GPU 3 link 2 is down' >&2\nexit 2\n");
    chmodSync(script, 0o755);
    const config = join(work, 'cluster.toml');
    writeFileSync(config, `[burn_in]\nchecks = ["${script}"]\nsimulated = true\n`);
    const cluster = new DevCluster({ root, hachi: join(build, 'hachi'), nodes: 1, config,
                                     ready: (n) => n.burn_in === 'failed' });
    try {
      await cluster.start();
      const page = await context.newPage();
      await page.goto(`${cluster.url}/#/cluster`);
      const card = 'section.node[data-node="node1"]';
      await page.waitForSelector(`${card} .badge.node-burn-in`);
      const text = await page.$eval(`${card} header`, (h) => h.textContent);
      assert.match(text, /burn-in failed: .*check\.sh: exit code 2: nvlink: GPU 3 link 2 is down/);
      assert.equal(await page.$$eval(`${card} button.resume`, (b) => b.length), 1);
      await page.screenshot({ path: join(artifacts, 'burn-in.png') });

      writeFileSync(join(work, 'fixed'), '');
      cluster.cli('resume', 'node1');
      await waitFor(async () => (await cluster.api('/nodes')).nodes[0].state === 'up',
                    'node1 up after its checks pass', 20000);
      await page.reload();
      await page.waitForSelector(`${card} .badge.node-up`);
      await page.close();
    } catch (e) {
      e.message += `\n${cluster.devLog()}`;
      throw e;
    } finally {
      await cluster.stop();
    }
  });
});
