// What a job did with its GPUs (issue 21, docs/efficiency.md), for its page: per GPU a
// small chart of its utilisation over the run with its memory as a second line, its
// figures as text, and the findings as sentences, from GET /jobs/ID/usage. SVG drawn
// here, no library. The pure parts (paths, texts) are exported for the node tests.

import { ApiError, describeError } from './api.js';
import { el, formatMib, formatTime, svg } from './util.js';

// One chart's plot area, in SVG units; the axis labels sit outside it.
const W = 240;
const H = 64;
const M = { left: 30, right: 6, top: 6, bottom: 16 };

// "84 %", "84.5 %", or "–" for a figure never measured (-1).
export function pct(v) {
  if (v === undefined || v === null || v < 0) return '–';
  return `${Number.isInteger(v) ? v : v.toFixed(1)} %`;
}

// The SVG path of `points` ([[t, v], ...], ascending t) in a box of `width` × `height`:
// t from t0 (left) to t1 (right), v from 0 (bottom) to vmax (top), clamped. With a
// `step`, each point is a bucket [t, t + step) drawn as a level across it; without,
// points joined, and one point alone a level line across the box.
export function seriesPath(points, { t0, t1, vmax, width, height, step = 0 }) {
  if (!points.length) return '';
  const x = (t) => (t1 > t0 ? (Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0) * width : 0);
  const y = (v) => height - (Math.min(Math.max(v, 0), vmax) / (vmax || 1)) * height;
  const f = (n) => n.toFixed(1);
  if (!step && points.length === 1) {
    const yy = f(y(points[0][1]));
    return `M ${f(0)} ${yy} L ${f(width)} ${yy}`;
  }
  const xy = points.flatMap(([t, v]) => (step ? [[t, v], [t + step, v]] : [[t, v]]));
  return xy.map(([t, v], i) => `${i ? 'L' : 'M'} ${f(x(t))} ${f(y(v))}`).join(' ');
}

// The same line closed down to the bottom edge, for the shaded area under it.
export function areaPath(points, box) {
  const line = seriesPath(points, box);
  if (!line) return '';
  const xs = line.match(/[ML] (-?[\d.]+)/g).map((s) => s.slice(2));
  return `${line} L ${xs[xs.length - 1]} ${box.height.toFixed(1)} L ${xs[0]} ${box.height.toFixed(1)} Z`;
}

// "GPU 3", or "node2 GPU 3" when the run spans nodes (as `hachi eff` names them).
export function gpuName(run, g) {
  return `${(run.nodes || []).length > 1 ? `${g.node} ` : ''}GPU ${g.gpu}`;
}

// A GPU's figures in one line: "mean 84.5 % · p95 97 % · max 100 % · memory peak
// 59.6 GiB · 650 W", or why there are none.
export function gpuFiguresText(g) {
  if (!g.samples) return 'no utilisation figure (never sampled)';
  const parts = [`mean ${pct(g.util_mean)}`, `p95 ${pct(g.util_p95)}`, `max ${pct(g.util_max)}`];
  if (g.mem_peak_mib >= 0) parts.push(`memory peak ${formatMib(g.mem_peak_mib)}`);
  if (g.power_mean_w >= 0) parts.push(`${Math.round(g.power_mean_w)} W`);
  return parts.join(' · ');
}

// The run as a whole: "since 2026-12-03 10:00:00 · GPUs 84.5 % on average · CPU 35 %
// busy · memory peak 3 GiB", each part only when measured.
export function runText(run, runs) {
  const parts = [`run since ${formatTime(run.start_time)}`];
  if (runs > 1) parts.push(`the latest of ${runs} runs`);
  if (run.gpu_util_mean >= 0) parts.push(`GPUs ${pct(run.gpu_util_mean)} on average`);
  if (run.cpu_efficiency >= 0) parts.push(`CPUs ${pct(Math.round(run.cpu_efficiency * 100))} busy`);
  if (run.mem_peak_mib >= 0) parts.push(`memory peak ${formatMib(run.mem_peak_mib)}`);
  return parts.join(' · ');
}

// The latest run, or null and the line that says why there is nothing to draw.
export function latestRun(data, running) {
  const runs = data?.runs || [];
  const run = runs.length ? runs[runs.length - 1] : null;
  if (run && (run.gpus || []).some((g) => g.samples > 0)) return { run, note: '' };
  return {
    run: null,
    note: running
      ? 'Not sampled yet: its agent samples running jobs every --usage-interval seconds ' +
        '(simulated GPUs have no figures).'
      : 'Never sampled: no GPU figures were reported for this job (simulated GPUs, or ' +
        'sampling off on its node).',
  };
}

// The chart's box: the run's start to its last bucket's end.
function chartBox(run, g) {
  const series = g.series || [];
  const step = g.step || 5;
  const t0 = run.start_time;
  const last = series.length ? series[series.length - 1][0] + step : t0 + step;
  return { t0, t1: Math.max(last, t0 + 1), width: W, height: H, step };
}

function gpuChart(run, g) {
  const series = g.series || [];
  const box = chartBox(run, g);
  const util = series.map(([t, , u]) => [t, u]);
  const memTop = Math.max(g.mem_peak_mib, ...series.map((p) => p[3]), 1);
  const mem = series.map(([t, , , m]) => [t, m]);
  const plot = svg('g', { transform: `translate(${M.left} ${M.top})` });
  for (const v of [0, 50, 100]) {
    const y = H - (v / 100) * H;
    plot.append(svg('line', { class: 'grid', x1: 0, x2: W, y1: y, y2: y }),
                svg('text', { class: 'axis', x: -4, y: y + 3, 'text-anchor': 'end' }, `${v}%`));
  }
  plot.append(
    svg('path', { class: 'util-area', d: areaPath(util, { ...box, vmax: 100 }) }),
    svg('path', { class: 'util-line', d: seriesPath(util, { ...box, vmax: 100 }), fill: 'none' }));
  if (g.mem_peak_mib > 0) {
    plot.append(svg('path', { class: 'mem-line', d: seriesPath(mem, { ...box, vmax: memTop }),
                              fill: 'none' }));
  }
  plot.append(svg('text', { class: 'axis', x: 0, y: H + 12 }, formatTime(box.t0).slice(11)),
              svg('text', { class: 'axis', x: W, y: H + 12, 'text-anchor': 'end' },
                  formatTime(box.t1).slice(11)));
  const name = gpuName(run, g);
  return svg('svg', {
    class: 'usage-chart', viewBox: `0 0 ${W + M.left + M.right} ${H + M.top + M.bottom}`,
    role: 'img', 'aria-label': `${name}: utilisation over the run`,
  }, plot);
}

// The card's contents for GET /jobs/ID/usage's reply.
export function usageContent(data, running) {
  const { run, note } = latestRun(data, running);
  if (!run) return [el('p', { class: 'muted', id: 'job-usage-none' }, note)];
  const gpus = el('div', { class: 'usage-gpus', id: 'job-usage-gpus' }, run.gpus.map((g) =>
    el('figure', { class: 'usage-gpu', 'data-node': g.node, 'data-gpu': g.gpu },
       el('figcaption', {}, el('strong', {}, gpuName(run, g)), ' ',
          el('span', { class: 'usage-figures' }, gpuFiguresText(g))),
       g.samples ? gpuChart(run, g) : null)));
  const findings = (data.findings || []).length
    ? el('ul', { class: 'findings', id: 'job-findings' },
         data.findings.map((f) => el('li', { 'data-kind': f.kind }, f.text)))
    : el('p', { class: 'muted', id: 'job-findings-none' }, 'Nothing to say about how it used them.');
  return [
    el('p', { class: 'muted', id: 'job-usage-run' }, runText(run, data.runs.length)),
    el('p', { class: 'usage-legend muted' },
       el('span', { class: 'key util' }), 'SM utilisation ',
       el('span', { class: 'key mem' }), 'memory used (to its peak)'),
    gpus, findings,
  ];
}

// The card's contents when the server refused or failed: the usage is its owner's.
export function usageError(e) {
  const text = e instanceof ApiError && e.status === 404 ? e.message : describeError(e);
  return [el('p', { class: 'muted', id: 'job-usage-error' }, `usage: ${text}`)];
}
