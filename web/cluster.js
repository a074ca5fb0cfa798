// Cluster view (#/cluster): every node as its GPU board, coloured by job and shaded by
// each GPU's utilisation, with drain and resume for token holders.

import { api, describeError } from './api.js';
import { showBanner } from './banner.js';
import { renderBoard, shadeBoards } from './board.js';
import { jobColor } from './colors.js';
import { hideTooltip } from './tooltip.js';
import { el, formatMib, jobGpuCount, parseGpuSet } from './util.js';

function stateBadge(node) {
  return el('span', { class: `badge node-${node.state}` }, node.state);
}

// A burst pool's node (docs/pools.md): its pool and, when not simply on, its power.
function powerBadge(node) {
  if (!node.power) return null;
  const text = node.power === 'on' ? node.pool : `${node.pool} · ${node.power}`;
  return el('span', { class: `badge power power-${node.power}`, title: 'burst pool' }, text);
}

function money(x) {
  return x.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

// The burst pools: nodes powered now, and this month's powered GPU-hours and what they
// cost (the stored spells: billed from each resume until the node is off, used or
// not) beside what the month's jobs on them used (hachi report --by pool).
async function poolSummary() {
  const now = new Date();
  const month = Math.floor(new Date(now.getFullYear(), now.getMonth(), 1).getTime() / 1000);
  const pools = (await api.pools(month)).filter((p) => p.kind === 'burst');
  if (!pools.length) return '';
  const report = await api.report(`by=pool&from=${month}`);
  const jobs = new Map(report.groups.map((g) => [g.name, g]));
  return pools.map((p) => {
    const held = jobs.get(p.name);
    return `${p.name}: ${p.powered}/${p.nodes} nodes powered · this month ` +
      `${p.powered_gpu_hours.toFixed(1)} GPU-h powered (${money(p.cost)}) · its jobs ` +
      `${(held ? held.gpu_hours : 0).toFixed(1)} GPU-h (${money(held ? held.cost : 0)})`;
  }).join('\n');
}

async function act(what, fn, refresh) {
  try {
    await fn();
    showBanner(`${what}: done`, 'ok');
  } catch (e) {
    showBanner(`${what} failed: ${describeError(e)}`);
  }
  refresh();
}

function nodeCard(node, jobsById, ctx) {
  const unhealthy = parseGpuSet(node.unhealthy);
  const held = [...(node.gpu_jobs || []), ...(node.mig_devices || []).map((d) => d.job)];
  const jobsHere = [...new Set(held.filter((j) => j))].map(
    (id) => jobsById.get(id) || { id });
  const actions = el('div', { class: 'node-actions' });
  if (node.state === 'up') {
    actions.append(el('button', {
      type: 'button', class: 'drain', 'data-node': node.name,
      onclick: () => {
        const reason = window.prompt(`Drain ${node.name}: reason`, 'maintenance');
        if (reason === null) return;
        act(`drain ${node.name}`, () => api.drain(node.name, reason), ctx.refresh);
      },
    }, 'Drain'));
  } else if (node.state === 'drained' || node.state === 'burn-in' || unhealthy.length) {
    // A node in burn-in (issue 19): Resume runs its checks again.
    actions.append(el('button', {
      type: 'button', class: 'resume', 'data-node': node.name,
      onclick: () => act(`resume ${node.name}`, () => api.resume(node.name), ctx.refresh),
    }, 'Resume'));
  }
  const legend = el('ul', { class: 'legend' },
    jobsHere.map((j) => el('li', {},
      el('span', { class: 'swatch', style: `background:${jobColor(j.id)}` }),
      el('a', { href: `#/job/${j.id}` }, `#${j.id}`),
      ` ${j.spec?.name || ''} · ${j.req?.user || '?'} · ${jobGpuCount(j)} GPU`)));
  return el('section', { class: 'node', 'data-node': node.name },
    el('header', {},
      el('h2', {}, node.name), stateBadge(node), powerBadge(node),
      node.state_reason ? el('span', { class: 'muted' }, node.state_reason) : null,
      actions),
    el('p', { class: 'node-facts' },
      `${node.gpus} × ${node.gpu_model || 'GPU'} (${formatMib(node.gpu_memory_mib)}) · ` +
      `${node.interconnect} · partitions ${(node.partitions || []).join(', ') || '–'} · ` +
      `CPUs ${node.alloc_cpus}/${node.cpus} · memory ${formatMib(node.alloc_memory_mib)}` +
      `/${formatMib(node.memory_mib)}`),
    el('div', { class: 'board-wrap' },
       renderBoard(node, jobsById, (id) => { location.hash = `#/job/${id}`; })),
    unhealthy.length
      ? el('ul', { class: 'unhealthy-list' }, unhealthy.map((g) => el('li', {},
        `GPU ${g}: ${(node.unhealthy_reasons || {})[String(g)] || 'unhealthy'}`)))
      : null,
    jobsHere.length ? legend : el('p', { class: 'muted' }, 'no jobs'));
}

export const clusterView = {
  title: 'Cluster',
  mount(main) {
    const summary = el('p', { class: 'summary', id: 'cluster-summary' });
    const pools = el('p', { class: 'summary muted', id: 'pool-summary' });
    const list = el('div', { class: 'nodes' });
    main.replaceChildren(summary, pools, list);
    return { summary, pools, list };
  },
  async refresh(st, ctx) {
    const [nodes, jobs, pools] = await Promise.all([api.nodes(), api.jobs(), poolSummary()]);
    st.pools.textContent = pools;
    st.pools.hidden = !pools;
    const jobsById = new Map(jobs.map((j) => [j.id, j]));
    let healthy = 0;
    let busy = 0;
    for (const n of nodes) {
      if (n.state === 'down') continue;
      const bad = new Set(parseGpuSet(n.unhealthy));
      for (let g = 0; g < n.gpus; g++) {
        if (bad.has(g)) continue;
        healthy++;
        // A MIG GPU (issue 20) is busy while a job holds one of its devices.
        if ((n.gpu_jobs || [])[g] || (n.mig_devices || []).some((d) => d.gpu === g && d.job)) busy++;
      }
    }
    const pending = jobs.filter((j) => j.state === 'PENDING').length;
    const running = jobs.filter((j) => j.state === 'RUNNING').length;
    st.summary.textContent = `${nodes.length} nodes · ${busy}/${healthy} GPUs busy · ` +
      `${running} running · ${pending} pending`;
    // Redrawn only on a change: a board replaced under the pointer would strand its
    // tooltip. The utilisation (issue 21) moves with every sample: re-shaded in place.
    const sig = JSON.stringify([nodes.map((n) => ({ ...n, gpu_util: undefined })),
                                jobs.map((j) => [j.id, j.state, j.spec?.name])]);
    if (sig === st.sig) {
      shadeBoards(st.list, nodes);
      return;
    }
    st.sig = sig;
    hideTooltip();
    st.list.replaceChildren(...nodes.map((n) => nodeCard(n, jobsById, ctx)));
  },
};
