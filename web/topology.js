// A node's GPU board from its topology_json (docs/topology-format.md): GPUs grouped by
// NUMA node, then by PCIe switch, and the NVLink connections. Pure: no DOM, so it is
// tested with node:test (tests/browser/topology.test.mjs).

function pcieLabel(label) {
  return typeof label === 'string' && !label.startsWith('NV') ? label : null;
}

function nvlinkCount(label) {
  const m = typeof label === 'string' ? /^NV(\d+)$/.exec(label) : null;
  return m ? parseInt(m[1], 10) : 0;
}

// {gpus: [{index, model, memory_mib, numa_node}], numa: [{numa, switches: [[i, ...]]}],
//  nvlinks: [{a, b, n}], nvswitch: N (NVLinks per GPU pair when all-to-all, else 0)}
export function boardLayout(topologyJson) {
  const topo = typeof topologyJson === 'string' ? JSON.parse(topologyJson) : topologyJson;
  const gpus = (topo.gpus || []).map((g) => ({
    index: g.index,
    model: g.model || '',
    memory_mib: g.memory_mib || 0,
    numa_node: g.numa_node ?? -1,
  }));
  const n = gpus.length;
  const links = topo.links || {};
  const matrix = links.matrix || null;
  const pcie = links.pcie_matrix || null;

  // The PCIe relation of a pair: pcie_matrix when given (it sees under NVLink), else the
  // GPU matrix's own PCIe label.
  const pcieOf = (a, b) => pcieLabel(pcie ? pcie[a]?.[b] : matrix?.[a]?.[b]);

  // PIX / PXB: the pair shares a PCIe switch (one or several bridges, no host bridge).
  const parent = [...Array(n).keys()];
  const find = (i) => (parent[i] === i ? i : (parent[i] = find(parent[i])));
  for (let a = 0; a < n; a++) {
    for (let b = a + 1; b < n; b++) {
      const l = pcieOf(a, b);
      if (l === 'PIX' || l === 'PXB') parent[find(a)] = find(b);
    }
  }

  const nvlinks = [];
  let allPairs = n > 1;
  let common = 0;
  for (let a = 0; a < n; a++) {
    for (let b = a + 1; b < n; b++) {
      const k = links.nvswitch ? links.nvswitch.nvlinks : nvlinkCount(matrix?.[a]?.[b]);
      if (k > 0) nvlinks.push({ a, b, n: k });
      if (k === 0 || (common && k !== common)) allPairs = false;
      if (k > 0 && !common) common = k;
    }
  }
  // Every pair with the same NVLink count: an NVSwitch box, drawn as one bar, not n^2/2 lines.
  const nvswitch = allPairs && n > 2 ? common : 0;

  const byNuma = new Map();
  for (const g of gpus) {
    if (!byNuma.has(g.numa_node)) byNuma.set(g.numa_node, new Map());
    const switches = byNuma.get(g.numa_node);
    const root = find(g.index);
    if (!switches.has(root)) switches.set(root, []);
    switches.get(root).push(g.index);
  }
  const numa = [...byNuma.entries()]
    .sort(([x], [y]) => x - y)
    .map(([numaNode, switches]) => ({
      numa: numaNode,
      switches: [...switches.values()].map((s) => s.sort((x, y) => x - y))
        .sort((x, y) => x[0] - y[0]),
    }));
  return { gpus, numa, nvlinks: nvswitch ? [] : nvlinks, nvswitch };
}
