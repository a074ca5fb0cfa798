// MIG devices on the dashboard: `hachi dev` on the fake NVML with GPU 0 of an
// HGX H100 split into two 1g.10gb devices; a --gres=gpu:1g.10gb:1 job runs on one of
// them. The cluster view draws GPU 0 as a MIG GPU with one bar per device, the held one
// coloured by (and linked to) its job. Screenshot mig.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { DevCluster, artifacts, build, openBrowser, root, waitFor } from './dev_cluster.mjs';

describe('MIG devices', { timeout: 120000 }, () => {
  let context;
  let browser;
  let work;
  const saved = {};
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'hachi-mig-'));
    browser = await openBrowser();
    ({ context } = browser);
  });
  after(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    if (browser) await browser.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('draws a MIG GPU as its devices, the held one in its job colour', async () => {
    const events = join(work, 'nvml-events');
    writeFileSync(events, 'migdev 0 1g.10gb 1g.10gb\n');
    const caps = join(work, 'caps');
    mkdirSync(join(caps, 'proc', 'driver', 'nvidia-caps'), { recursive: true });
    writeFileSync(join(caps, 'proc', 'driver', 'nvidia-caps', 'mig-minors'),
                  'gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\n' +
                  'gpu0/gi2/ci0/access 22\n');
    writeFileSync(join(caps, 'proc', 'devices'), 'Character devices:\n239 nvidia-caps\n');
    const env = {
      HACHI_NVML_LIBRARY: join(build, 'src', 'topo', 'fake_nvml', 'libnvidia-ml.so.1'),
      HACHI_FAKE_NVML_TOPOLOGY: join(root, 'src', 'topo', 'presets', 'hgx-h100.json'),
      HACHI_FAKE_NVML_EVENTS: events,
      HACHI_MIG_CAPS_ROOT: caps,
    };
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k];
      process.env[k] = v;  // the dev process inherits them
    }
    const config = join(work, 'cluster.toml');
    writeFileSync(config, '[[partition]]\nname = "gpu-shared"\nnodes = "all"\n' +
                          'mode = "shared"\n[burn_in]\nchecks = []\n');
    const cluster = new DevCluster({ root, hachi: join(build, 'hachi'), nodes: 1, config });
    try {
      await cluster.start();
      const node = (await cluster.api('/nodes')).nodes[0];
      assert.equal(node.mig_devices.length, 2);
      const id = cluster.cli('submit', '--parsable', '-p', 'gpu-shared', '--gres=gpu:1g.10gb:1',
                             '-o', '/dev/null', '--wrap', 'sleep 60').trim();
      await waitFor(async () => (await cluster.api(`/jobs/${id}`)).job?.state === 'RUNNING',
                    `job ${id} running`, 20000);
      const page = await context.newPage();
      await page.goto(`${cluster.url}/#/cluster`);
      const gpu0 = `g.gpu[data-gpu="0"][data-state="mig"]`;
      await page.waitForSelector(`${gpu0} rect.mig-slice[data-job="${id}"]`);
      assert.equal(await page.$$eval(`${gpu0} rect.mig-slice`, (r) => r.length), 2);
      assert.equal(await page.$$eval(`${gpu0} rect.mig-slice.free`, (r) => r.length), 1);
      assert.match(await page.$eval(gpu0, (g) => g.textContent), /MIG 1\/2/);
      assert.match(await page.$eval('#cluster-summary', (p) => p.textContent), /1\/8 GPUs busy/);
      // The other GPUs are whole and free; the legend names the job.
      assert.equal(await page.$$eval('g.gpu[data-state="free"]', (g) => g.length), 7);
      assert.match(await page.$eval('ul.legend', (u) => u.textContent), new RegExp(`#${id}`));
      await page.screenshot({ path: join(artifacts, 'mig.png') });
      await page.close();
      cluster.cli('cancel', id);
    } catch (e) {
      e.message += `\n${cluster.devLog()}`;
      throw e;
    } finally {
      await cluster.stop();
    }
  });
});
