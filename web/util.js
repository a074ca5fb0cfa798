// Small DOM and formatting helpers shared by the views.

const SVG_NS = 'http://www.w3.org/2000/svg';

// el('div', {class: 'x', onclick: f}, child, 'text', ...): an HTML element.
export function el(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// svg('rect', {x: 1, ...}, ...): an SVG element.
export function svg(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(node, attrs, children) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// For replaceChildren, which (unlike el) would write null as text.
export function present(...nodes) {
  return nodes.filter((n) => n !== null && n !== undefined && n !== false);
}

export function nowSeconds() {
  return Math.floor(Date.now() / 1000);
}

// 75 -> "1m 15s", 5400 -> "1h 30m", 200000 -> "2d 7h".
export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || seconds < 0) return '–';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

// Epoch seconds -> "2026-12-01 08:31:05" in local time; 0 -> "–".
export function formatTime(t) {
  if (!t) return '–';
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
         `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function formatMib(mib) {
  if (mib === undefined || mib === null) return '–';
  if (mib === 0) return '0';
  return mib >= 1024 ? `${(mib / 1024).toFixed(mib % 1024 ? 1 : 0)} GiB` : `${mib} MiB`;
}

// "0-3,6" (GpuSet::ToString) -> [0, 1, 2, 3, 6].
export function parseGpuSet(text) {
  const out = [];
  if (!text) return out;
  for (const part of text.split(',')) {
    const [a, b] = part.split('-').map((x) => parseInt(x, 10));
    if (Number.isNaN(a)) continue;
    for (let i = a; i <= (Number.isNaN(b) || b === undefined ? a : b); i++) out.push(i);
  }
  return out;
}

// "node1:0-1 node2:0-7" for a job's allocations.
export function placementText(job) {
  return (job.allocations || []).map((a) => `${a.node}:${a.gpus || '-'}`).join(' ');
}

export function jobGpuCount(job) {
  const r = job.req || {};
  return r.nodes > 1 && r.gpus_per_node ? r.nodes * r.gpus_per_node : r.gpus || 0;
}
