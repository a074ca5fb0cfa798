// Charts view (#/charts): queue wait per partition over time with the 20-minute line,
// pending jobs, and utilisation, from GET /api/v1/history (server/history.h). SVG drawn
// here, no library.

import { api } from './api.js';
import { el, svg } from './util.js';

const WAIT_ALERT_S = 20 * 60;  // the issue's target: a median wait past 20 min is late
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b'];
const W = 720;
const H = 220;
const M = { left: 52, right: 30, top: 14, bottom: 30 };  // right: room for the last time label

const Y_TICKS = 4;

// The smallest "round" step (1, 2, 2.5 or 5 times a power of ten; whole numbers for
// counts) with Y_TICKS steps reaching `v`.
function niceStep(v, integer) {
  const raw = Math.max(v, 1e-9) / Y_TICKS;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) {
    const step = m * p;
    if (step >= raw && (!integer || Number.isInteger(step))) return step;
  }
  return integer ? Math.max(1, Math.ceil(raw)) : 10 * p;
}

function clock(t, withSeconds) {
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}${withSeconds ? `:${p(d.getSeconds())}` : ''}`;
}

// series: [{name, color, points: [[t, v | null], ...]}]; threshold: {value, label}.
export function lineChart({ id, title, series, yFormat, yMin = 0, yMax, threshold, integer = false }) {
  const all = series.flatMap((s) => s.points);
  const ts = all.map(([t]) => t);
  const vs = all.map(([, v]) => v).filter((v) => v !== null);
  const t0 = ts.length ? Math.min(...ts) : 0;
  const t1 = ts.length ? Math.max(...ts) : 1;
  const top = yMax ?? Y_TICKS * niceStep(Math.max(...vs, threshold ? threshold.value * 1.1 : 0), integer);
  const x = (t) => M.left + (t1 === t0 ? (W - M.left - M.right) : ((t - t0) / (t1 - t0)) * (W - M.left - M.right));
  const y = (v) => H - M.bottom - ((v - yMin) / (top - yMin)) * (H - M.top - M.bottom);

  const root = svg('svg', { class: 'chart', id, viewBox: `0 0 ${W} ${H}`, role: 'img',
                            'aria-label': title });
  const grid = svg('g', { class: 'grid' });
  for (let i = 0; i <= Y_TICKS; i++) {
    const v = yMin + ((top - yMin) * i) / Y_TICKS;
    grid.append(svg('line', { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v) }),
                svg('text', { x: M.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, yFormat(v)));
  }
  const ticks = t1 > t0 ? 4 : 0;
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + ((t1 - t0) * i) / Math.max(ticks, 1);
    grid.append(svg('text', { x: x(t), y: H - 10, 'text-anchor': 'middle' },
                    clock(t, t1 - t0 < 600)));
  }
  root.append(grid);
  if (threshold) {
    root.append(
      svg('line', { class: 'threshold', x1: M.left, x2: W - M.right, y1: y(threshold.value), y2: y(threshold.value) }),
      svg('text', { class: 'threshold-label', x: W - M.right - 4, y: y(threshold.value) - 5, 'text-anchor': 'end' },
          threshold.label));
  }
  series.forEach((s) => {
    // A null value breaks the line (no job waited in that partition then).
    let d = '';
    let pen = false;
    for (const [t, v] of s.points) {
      if (v === null) { pen = false; continue; }
      d += `${pen ? 'L' : 'M'} ${x(t).toFixed(1)} ${y(v).toFixed(1)} `;
      pen = true;
    }
    const g = svg('g', { class: 'series', 'data-series': s.name });
    if (d) {
      g.append(svg('path', { d, stroke: s.color, fill: 'none', 'stroke-width': 2,
                             'stroke-dasharray': s.dash ? '5 4' : undefined }));
    }
    for (const [t, v] of s.points) {
      if (v !== null) g.append(svg('circle', { cx: x(t), cy: y(v), r: 2.5, fill: s.color }));
    }
    root.append(g);
  });
  root.append(svg('rect', { class: 'frame', x: M.left, y: M.top, width: W - M.left - M.right,
                            height: H - M.top - M.bottom, fill: 'none' }));
  const legend = el('ul', { class: 'chart-legend' }, series.map((s) =>
    el('li', {}, el('span', { class: `swatch${s.dash ? ' dashed' : ''}`,
                              style: `${s.dash ? 'border-color' : 'background'}:${s.color}` }), s.name)));
  return el('figure', { class: 'card chart-card' }, el('figcaption', {}, title), root, legend);
}

// [[at, minutes | null], ...] of one partition's wait field (seconds, null for none).
function minutesOf(samples, partition, field) {
  return samples.map((s) => {
    const w = s.partitions[partition]?.[field];
    return [s.at, w === null || w === undefined ? null : w / 60];
  });
}

export const chartsView = {
  title: 'Charts',
  mount(main) {
    const info = el('p', { class: 'summary', id: 'charts-summary' });
    const box = el('div', { class: 'charts' });
    main.replaceChildren(info, box);
    return { info, box, samples: [], interval: 0 };
  },
  async refresh(st) {
    // Only the samples since the last fetch: a day of them is a megabyte.
    const last = st.samples.length ? st.samples[st.samples.length - 1].at : 0;
    const h = await api.history(last);
    st.interval = h.interval_s;
    st.samples.push(...h.samples);
    const cutoff = (st.samples.length ? st.samples[st.samples.length - 1].at : 0) - 86400;
    st.samples = st.samples.filter((s) => s.at >= cutoff);
    const samples = st.samples;
    const names = [...new Set(samples.flatMap((s) => Object.keys(s.partitions)))].sort();
    const color = (i) => PALETTE[i % PALETTE.length];
    st.info.textContent = samples.length
      ? `${samples.length} samples, one every ${st.interval} s, since the server started ` +
        '(kept in memory, last 24 h)'
      : 'no samples yet';
    const minutes = (v) => `${Number.isInteger(v) ? v : v.toFixed(1)} min`;
    st.box.replaceChildren(
      lineChart({
        id: 'chart-wait',
        title: 'Queue wait per partition: median of the jobs pending then (solid) and of ' +
               'those that started in the interval (dashed)',
        series: names.flatMap((n, i) => [
          { name: n, color: color(i), points: minutesOf(samples, n, 'median_wait_pending_s') },
          { name: `${n} · started`, color: color(i), dash: true,
            points: minutesOf(samples, n, 'median_wait_started_s') },
        ]),
        yFormat: minutes, threshold: { value: WAIT_ALERT_S / 60, label: '20 min' },
      }),
      lineChart({
        id: 'chart-pending', title: 'Pending jobs per partition',
        series: names.map((n, i) => ({ name: n, color: color(i),
          points: samples.map((s) => [s.at, s.partitions[n]?.pending ?? 0]) })),
        yFormat: (v) => String(v), integer: true,
      }),
      lineChart({
        id: 'chart-util', title: 'Utilisation (allocated GPUs / healthy GPUs)',
        series: [{ name: 'cluster', color: '#2f6f4f',
          points: samples.map((s) => [s.at, s.utilisation * 100]) }],
        yFormat: (v) => `${v.toFixed(0)}%`, yMax: 100,
      }));
  },
};
