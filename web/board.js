// A node drawn as its GPU board (SVG): NUMA nodes side by side, PCIe switches inside them,
// GPUs inside those, NVLink arcs between GPU pairs (thicker for more links) or one
// NVSwitch bar for all-to-all boxes. Each GPU is coloured by the job holding it, lighter
// the less the job's latest sample says it uses it (issue 21, node.gpu_util).

import { boardLayout } from './topology.js';
import { FREE_COLOR, UNHEALTHY_COLOR, jobColor, utilColor, utilLightness } from './colors.js';
import { attachTooltip } from './tooltip.js';
import { formatMib, parseGpuSet, svg } from './util.js';

const GPU_W = 58;
const GPU_H = 46;
const GAP = 10;       // between GPUs of one switch
const SW_PAD = 8;     // inside a switch box
const NUMA_PAD = 12;  // inside a NUMA box
const TOP = 22;       // room for a box's label
const MAX_ROW = 4;    // GPUs per row inside a switch before wrapping

// What a GPU is doing, for colour, tooltip and the tests' data attributes.
export function gpuStates(node, jobsById) {
  const unhealthy = new Set(parseGpuSet(node.unhealthy));
  const reasons = node.unhealthy_reasons || {};
  return Array.from({ length: node.gpus }, (_, i) => {
    const jobId = (node.gpu_jobs || [])[i] || 0;
    const share = (node.gpu_share_milli || [])[i] || 0;
    const util = (node.gpu_util || [])[i] ?? -1;
    if (unhealthy.has(i)) return { state: 'unhealthy', reason: reasons[String(i)] || 'unhealthy' };
    // Issue 20: a GPU in MIG mode is never given whole; its devices are.
    const mig = (node.mig_devices || []).filter((d) => d.gpu === i);
    if (mig.length) {
      return { state: 'mig', devices: mig.map((d) => ({
        ...d, holder: d.job ? (jobsById.get(d.job) || { id: d.job }) : null })) };
    }
    if (jobId) return { state: 'busy', job: jobsById.get(jobId) || { id: jobId }, share, util };
    return { state: 'free' };
  });
}

// "84 % utilised (latest sample)", in a busy GPU's title (aria-label) and tooltip; ''
// when there is no figure.
export function utilText(util) {
  return util >= 0 ? `${util} % utilised (latest sample)` : '';
}

// A busy GPU's fill and text shade at `util` %: light cells get dark text.
export function busyShade(jobId, util) {
  return { fill: utilColor(jobId, util), dark: utilLightness(jobId, util) > 70 };
}

// Re-shades the drawn boards' busy GPUs from `nodes`' gpu_util, in place: utilisation
// moves with every sample, and a redraw would strand the tooltip under the pointer.
export function shadeBoards(root, nodes) {
  for (const node of nodes) {
    for (const cell of root.querySelectorAll(`g.gpu.busy[data-node="${CSS.escape(node.name)}"]`)) {
      const util = (node.gpu_util || [])[Number(cell.dataset.gpu)] ?? -1;
      shadeCell(cell, Number(cell.dataset.job), util);
    }
  }
}

function shadeCell(cell, jobId, util) {
  const shade = busyShade(jobId, util);
  cell.querySelector('rect').setAttribute('fill', shade.fill);
  cell.classList.toggle('light', shade.dark);
  if (util >= 0) cell.dataset.util = util;
  else delete cell.dataset.util;
  // Its title: the aria-label, not an SVG <title>, whose native tooltip would show
  // over the page's own.
  cell.setAttribute('aria-label',
    `GPU ${cell.dataset.gpu} of ${cell.dataset.node}${util >= 0 ? `: ${utilText(util)}` : ''}`);
}

function gpuTooltip(node, layoutGpu, st, cell) {
  const lines = [`${node.name} · GPU ${layoutGpu.index}`,
                 `${layoutGpu.model || node.gpu_model} · ${formatMib(layoutGpu.memory_mib || node.gpu_memory_mib)}`,
                 `NUMA ${layoutGpu.numa_node}`];
  if (st.state === 'unhealthy') lines.push(`unhealthy: ${st.reason}`);
  if (st.state === 'free') lines.push('free');
  if (st.state === 'mig') {
    lines.push(`MIG: ${st.devices.length} devices`);
    for (const d of st.devices) {
      const j = d.holder;
      lines.push(`${d.profile} · ${j ? `job ${j.id}${j.req?.user ? ` (${j.req.user})` : ''}` : 'free'}`);
    }
  }
  if (st.state === 'busy') {
    const j = st.job;
    lines.push(`job ${j.id}${j.spec?.name ? ` · ${j.spec.name}` : ''}`);
    if (j.req?.user) lines.push(`user ${j.req.user}`);
    const part = (j.allocations || []).find((a) => a.node === node.name);
    if (part?.gpu_memory_mib) lines.push(`GPU memory ${formatMib(part.gpu_memory_mib)} (limit)`);
    if (st.share) lines.push(`share ${(st.share / 10).toFixed(0)}% of the GPU`);
    // The figure now, which shadeBoards may have changed since the board was drawn.
    const util = cell.dataset.util === undefined ? -1 : Number(cell.dataset.util);
    if (util >= 0) lines.push(utilText(util));
  }
  return lines;
}

// A topology the page cannot read (or none: a node that never registered here) still
// shows its GPUs, in one row, rather than failing the whole view.
function safeLayout(node) {
  try {
    const l = boardLayout(node.topology_json);
    if (l.gpus.length === node.gpus) return l;
  } catch {
    // fall through
  }
  const gpus = Array.from({ length: node.gpus }, (_, i) => ({
    index: i, model: node.gpu_model, memory_mib: node.gpu_memory_mib, numa_node: -1 }));
  return { gpus, numa: [{ numa: -1, switches: gpus.map((g) => [g.index]) }], nvlinks: [], nvswitch: 0 };
}

// The board of `node` (a NodeStatus from GET /nodes); `jobsById`: the running jobs.
export function renderBoard(node, jobsById, onJobClick) {
  const layout = safeLayout(node);
  const states = gpuStates(node, jobsById);
  const pos = new Map();  // GPU index -> centre
  const boxes = [];
  let x = 0;
  let height = 0;
  for (const group of layout.numa) {
    const numaX = x;
    let sx = numaX + NUMA_PAD;
    let numaH = 0;
    const switchBoxes = [];
    for (const sw of group.switches) {
      const cols = Math.min(sw.length, MAX_ROW);
      const rows = Math.ceil(sw.length / MAX_ROW);
      const w = SW_PAD * 2 + cols * GPU_W + (cols - 1) * GAP;
      const h = TOP + SW_PAD + rows * GPU_H + (rows - 1) * GAP;
      sw.forEach((g, k) => {
        const gx = sx + SW_PAD + (k % MAX_ROW) * (GPU_W + GAP);
        const gy = TOP + NUMA_PAD + TOP + Math.floor(k / MAX_ROW) * (GPU_H + GAP);
        pos.set(g, { x: gx, y: gy, cx: gx + GPU_W / 2, cy: gy + GPU_H / 2 });
      });
      switchBoxes.push({ x: sx, y: TOP + NUMA_PAD, w, h, label: sw.length > 1 ? 'PCIe switch' : 'PCIe' });
      sx += w + GAP;
      numaH = Math.max(numaH, h);
    }
    const numaW = sx - GAP + NUMA_PAD - numaX;
    boxes.push({ x: numaX, y: 0, w: numaW, h: TOP + NUMA_PAD + numaH + NUMA_PAD,
                 label: group.numa >= 0 ? `NUMA ${group.numa}` : 'NUMA ?', kind: 'numa' });
    for (const b of switchBoxes) boxes.push({ ...b, kind: 'switch' });
    height = Math.max(height, TOP + NUMA_PAD * 2 + numaH);
    x += numaW + GAP * 2;
  }
  const width = Math.max(x - GAP * 2, 200);
  // NVLink pairs as an arc diagram under the boxes: from the bottom of one GPU down and
  // back up to the other, deeper for GPUs further apart, so no line hides behind a GPU.
  const arcDepth = (a, b) => 18 + Math.abs(a.cx - b.cx) * 0.24;
  let extent = height;  // the lowest point drawn
  for (const l of layout.nvlinks) {
    const a = pos.get(l.a);
    const b = pos.get(l.b);
    // A cubic Bezier reaches 3/4 of its control points' offset.
    if (a && b) extent = Math.max(extent, Math.max(a.y, b.y) + GPU_H + 0.75 * arcDepth(a, b));
  }
  const barY = height + 14;
  const totalH = layout.nvswitch ? barY + 30 : extent + 6;
  const root = svg('svg', {
    class: 'board', viewBox: `-2 -2 ${width + 4} ${totalH + 4}`, width: width + 4,
    height: totalH + 4, role: 'img', 'aria-label': `GPU board of ${node.name}`,
  });
  for (const b of boxes) {
    root.append(svg('rect', { class: `box ${b.kind}`, x: b.x, y: b.y, width: b.w, height: b.h, rx: 6 }),
                svg('text', { class: `box-label ${b.kind}`, x: b.x + 6, y: b.y + 15 }, b.label));
  }
  if (layout.nvswitch) {
    const bar = svg('g', { class: 'nvswitch' });
    for (const [, p] of pos) {
      bar.append(svg('line', { x1: p.cx, y1: p.y + GPU_H, x2: p.cx, y2: barY, class: 'nvlink',
                                'stroke-width': 2 }));
    }
    bar.append(svg('rect', { x: 0, y: barY, width, height: 22, rx: 5, class: 'nvswitch-bar' }),
               svg('text', { x: width / 2, y: barY + 15, class: 'nvswitch-label', 'text-anchor': 'middle' },
                   `NVSwitch · NV${layout.nvswitch} between every GPU pair`));
    root.append(bar);
  }
  const links = svg('g', { class: 'nvlinks' });
  for (const l of layout.nvlinks) {
    const a = pos.get(l.a);
    const b = pos.get(l.b);
    if (!a || !b) continue;
    const ay = a.y + GPU_H;
    const by = b.y + GPU_H;
    const cy = Math.max(ay, by) + arcDepth(a, b);
    const line = svg('path', {
      d: `M ${a.cx} ${ay} C ${a.cx} ${cy} ${b.cx} ${cy} ${b.cx} ${by}`, class: 'nvlink',
      'stroke-width': Math.min(1 + l.n * 0.6, 9), fill: 'none', 'data-nv': l.n,
    });
    line.append(svg('title', {}, `GPU ${l.a} – GPU ${l.b}: NV${l.n}`));
    links.append(line);
  }
  root.append(links);

  for (const g of layout.gpus) {
    const p = pos.get(g.index);
    if (!p) continue;
    const st = states[g.index] || { state: 'free' };
    const fill = st.state === 'unhealthy' ? UNHEALTHY_COLOR : FREE_COLOR;
    const cell = svg('g', {
      class: `gpu ${st.state}`, 'data-node': node.name, 'data-gpu': g.index,
      'data-state': st.state, 'data-job': st.state === 'busy' ? st.job.id : undefined,
      tabindex: 0,
    });
    cell.append(svg('rect', { x: p.x, y: p.y, width: GPU_W, height: GPU_H, rx: 5, fill }));
    cell.append(svg('text', { x: p.cx, y: p.y + 17, 'text-anchor': 'middle', class: 'gpu-index' },
                    `GPU ${g.index}`));
    const used = st.state === 'mig' ? st.devices.filter((d) => d.holder).length : 0;
    const sub = st.state === 'busy' ? `#${st.job.id}` : st.state === 'unhealthy' ? 'FAULT'
      : st.state === 'mig' ? `MIG ${used}/${st.devices.length}` : 'free';
    cell.append(svg('text', { x: p.cx, y: p.y + 31, 'text-anchor': 'middle', class: 'gpu-sub' }, sub));
    if (st.state === 'mig') {
      // One small bar per MIG device along the bottom, coloured by the job holding it.
      const w = (GPU_W - 6) / st.devices.length;
      st.devices.forEach((d, k) => {
        const slice = svg('rect', {
          class: `mig-slice ${d.holder ? 'busy' : 'free'}`, x: p.x + 3 + k * w, y: p.y + GPU_H - 11,
          width: Math.max(w - 1, 1), height: 8, rx: 1.5,
          fill: d.holder ? jobColor(d.holder.id) : FREE_COLOR, stroke: '#888', 'stroke-width': 0.5,
          'data-uuid': d.uuid, 'data-profile': d.profile,
          'data-job': d.holder ? d.holder.id : undefined,
        });
        if (d.holder && onJobClick) slice.addEventListener('click', () => onJobClick(d.holder.id));
        cell.append(slice);
      });
    }
    if (st.state === 'busy') shadeCell(cell, st.job.id, st.util);
    attachTooltip(cell, () => gpuTooltip(node, g, st, cell));
    if (st.state === 'busy' && onJobClick) cell.addEventListener('click', () => onJobClick(st.job.id));
    root.append(cell);
  }
  return root;
}
