// web/topology.js on the preset topology files: GPUs grouped by NUMA node and PCIe
// switch, NVLink pairs, NVSwitch boxes. Pure JavaScript, no browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { boardLayout } from '../../web/topology.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const preset = (name) => readFileSync(join(root, 'src', 'topo', 'presets', `${name}.json`), 'utf8');

const cases = [
  { name: 'hgx-h100', numa: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]], nvswitch: 18, nvlinks: 0 },
  { name: 'hgx2-16', gpus: 16, nvswitch: 6, nvlinks: 0 },
  { name: 'pcie-8x-l40s', numa: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]], nvswitch: 0, nvlinks: 0 },
  { name: 'pcie-8x-4090-nv4-pairs', numa: [[[0, 1], [2, 3]], [[4, 5], [6, 7]]], nvswitch: 0,
    nvlinks: 4, pair: { a: 0, b: 1, n: 4 } },
  { name: 'dgx1-v100', nvswitch: 0, minNvlinks: 12 },
  { name: 'dgx-a100', numaNodes: [1, 3, 5, 7], nvswitch: 12 },
];

for (const c of cases) {
  test(`board layout of ${c.name}`, () => {
    const l = boardLayout(preset(c.name));
    assert.equal(l.gpus.length, c.gpus ?? 8);
    // Every GPU is drawn exactly once.
    const drawn = l.numa.flatMap((n) => n.switches.flat()).sort((a, b) => a - b);
    assert.deepEqual(drawn, [...Array(c.gpus ?? 8).keys()]);
    if (c.numa) assert.deepEqual(l.numa.map((n) => n.switches), c.numa);
    if (c.numaNodes) assert.deepEqual(l.numa.map((n) => n.numa), c.numaNodes);
    assert.equal(l.nvswitch, c.nvswitch);
    if (c.nvlinks !== undefined) assert.equal(l.nvlinks.length, c.nvlinks);
    if (c.minNvlinks) assert.ok(l.nvlinks.length >= c.minNvlinks, `${l.nvlinks.length} NVLink pairs`);
    if (c.pair) assert.deepEqual(l.nvlinks[0], c.pair);
  });
}

test('the canonical form the server stores (matrix of NV18 everywhere) is an NVSwitch box', () => {
  const src = JSON.parse(preset('hgx-h100'));
  const n = src.gpus.length;
  src.links = {
    matrix: src.links.pcie_matrix.map((row, a) => row.map((_, b) => (a === b ? 'X' : 'NV18'))),
    pcie_matrix: src.links.pcie_matrix,
  };
  const l = boardLayout(JSON.stringify(src));
  assert.equal(l.nvswitch, 18);
  assert.equal(l.nvlinks.length, 0, 'drawn as one bar, not n(n-1)/2 lines');
  assert.equal(l.numa.flatMap((x) => x.switches).length, n / 2);
});
