// The GPU board of other machine shapes in Chromium: a hybrid cube-mesh (DGX-1, NVLink
// lines of two widths, no NVSwitch), NVLink-bridged PCIe pairs, and a 16-GPU NVSwitch
// box. One `hachi dev --preset X --nodes 1` each; screenshots board-X.png.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';

import { DevCluster, artifacts, build, openBrowser, root } from './dev_cluster.mjs';

// NVLinked pairs per the node's own topology_json (the server's copy of what the agent found).
function nvlinkPairs(topologyJson) {
  const m = JSON.parse(topologyJson).links.matrix;
  const pairs = [];
  for (let a = 0; a < m.length; a++) {
    for (let b = a + 1; b < m.length; b++) if (/^NV\d+$/.test(m[a][b])) pairs.push(m[a][b]);
  }
  return pairs;
}

const cases = [
  { preset: 'dgx1-v100', gpus: 8, nvswitch: false },
  { preset: 'pcie-8x-4090-nv4-pairs', gpus: 8, nvswitch: false, lines: 4 },
  { preset: 'hgx2-16', gpus: 16, nvswitch: true },
];

describe('GPU boards of other presets', { timeout: 120000 }, () => {
  let context;
  let browser;
  before(async () => {
    browser = await openBrowser();
    ({ context } = browser);
  });
  after(async () => {
    if (browser) await browser.close();
  });

  for (const c of cases) {
    it(`draws ${c.preset}`, async () => {
      const cluster = new DevCluster({ root, hachi: join(build, 'hachi'), nodes: 1,
                                       preset: c.preset, config: null });
      try {
        await cluster.start();
        const { nodes } = await cluster.api('/nodes');
        const page = await context.newPage();
        await page.goto(`${cluster.url}/#/cluster`);
        await page.waitForSelector('svg.board g.gpu');
        assert.equal(await page.$$eval('svg.board g.gpu', (g) => g.length), c.gpus);
        const bar = await page.$$eval('svg.board .nvswitch-bar', (b) => b.length);
        assert.equal(bar, c.nvswitch ? 1 : 0);
        if (!c.nvswitch) {
          const want = nvlinkPairs(nodes[0].topology_json);
          if (c.lines) assert.equal(want.length, c.lines);
          const titles = await page.$$eval('svg.board .nvlinks path title', (t) => t.map((x) => x.textContent));
          assert.equal(titles.length, want.length, 'one line per NVLinked pair');
          // Thicker for more links: widths follow the NV counts.
          const widths = await page.$$eval('svg.board .nvlinks path',
            (p) => [...new Set(p.map((x) => x.getAttribute('stroke-width')))]);
          assert.equal(widths.length, new Set(want).size);
        }
        await page.screenshot({ path: join(artifacts, `board-${c.preset}.png`), fullPage: true });
        await page.close();
      } finally {
        await cluster.stop();
      }
    });
  }
});
