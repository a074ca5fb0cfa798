// Job page (#/job/ID): what it asked for and got, its history from the timestamps the
// record keeps, why it waits, what it did with its GPUs (web/usage.js), and the tail of
// its log.

import { api, ApiError, describeError } from './api.js';
import { jobColor } from './colors.js';
import { cancelJob } from './queue.js';
import { usageContent, usageError } from './usage.js';
import {
  el, formatDuration, formatMib, formatTime, jobGpuCount, nowSeconds, placementText, present,
} from './util.js';

const LOG_LINES = 200;

// The record keeps the submit, the last start, the end, how often it was requeued and
// the last reason: that is the history there is (earlier runs' times are not stored).
export function jobHistory(job) {
  const events = [{ at: job.submit_time, what: 'submitted', detail: `to ${job.req?.partition || '?'}` }];
  if (job.requeues > 0) {
    events.push({
      at: null,
      what: `requeued ${job.requeues}×`,
      detail: job.state === 'PENDING' || job.state === 'RUNNING' ? job.reason || '' : '',
    });
  }
  if (job.start_time) {
    events.push({ at: job.start_time, what: job.requeues ? 'started (last run)' : 'started',
                  detail: `${placementText(job)} after ${formatDuration(job.start_time - job.submit_time)}` });
  }
  if (job.end_time) {
    let detail = job.reason || '';
    if (job.signal) detail = `${detail} (signal ${job.signal})`.trim();
    else if (job.state !== 'CANCELLED') detail = `${detail} (exit ${job.exit_code})`.trim();
    events.push({ at: job.end_time, what: `ended ${job.state}`, detail });
  } else {
    events.push({ at: null, what: job.state === 'PENDING' ? 'pending' : 'running',
                  detail: `for ${formatDuration(nowSeconds() - (job.start_time || job.submit_time))}` });
  }
  return events;
}

// The server's explain object (docs/api.md, "Explain") when it sends one, else the
// diagnosis sentence alone.
function explainBlock(detail) {
  const { job } = detail;
  if (job.state !== 'PENDING') return null;
  const x = detail.explain && typeof detail.explain === 'object' ? detail.explain : null;
  const rows = [el('p', {}, el('span', { class: 'reason-word', id: 'job-reason' },
                               job.held ? 'held' : x?.reason || job.reason || 'waiting for a cycle'))];
  const sentence = detail.diagnosis || x?.diagnosis;
  if (sentence) rows.push(el('p', { class: 'diagnosis', id: 'job-diagnosis' }, sentence));
  if (x) {
    const facts = [];
    if (x.queue_position) {
      facts.push(['queue position', `${x.queue_position} of ${x.queue_length}` +
        (x.partition_length ? ` (${x.partition_position} of ${x.partition_length} in ${x.partition})` : '')]);
    }
    facts.push(['needs', `${x.needed_gpus} GPU${x.needed_gpus === 1 ? '' : 's'}` +
      (x.needed_nodes > 1 ? ` on each of ${x.needed_nodes} nodes` : ' on one node')]);
    facts.push(['largest free set', `${x.largest_free}${x.largest_free_node ? ` (${x.largest_free_node})` : ''}` +
      ` · ${x.free_gpus} free in the partition · ${x.fitting_nodes} node(s) would take it now`]);
    if (x.earliest_start) {
      facts.push(['earliest start', `${formatTime(x.earliest_start)} on ${x.earliest_node || '?'}` +
        (x.blocking_job ? ` when job ${x.blocking_job} ends` : '')]);
    }
    rows.push(el('dl', { class: 'facts', id: 'job-explain' },
      facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
    if ((x.nodes || []).length) {
      rows.push(el('ul', { class: 'explain-nodes' }, x.nodes.map((n) => el('li', {}, n.text))));
    }
  }
  return el('section', { class: 'card' }, el('h3', {}, 'Why it waits'), ...rows);
}

// The server's history (explain.history: requeues with their times while this server
// ran) when it sends one, else what the record's timestamps say.
function historyItems(detail) {
  const h = detail.explain?.history;
  if (Array.isArray(h) && h.length) {
    // The text repeats the event's word ("submitted to partition gpu8"): said once.
    return h.map((e) => ({
      at: e.time,
      what: e.event,
      detail: (e.text || '').startsWith(e.event) ? e.text.slice(e.event.length).trim() : e.text,
    }));
  }
  return jobHistory(detail.job);
}

// "11 GiB peak of 20 GiB promised", "61 GiB peak", or '' before any figure came.
export function gpuMemoryText(job) {
  const peak = job.gpu_memory_peak_mib || 0;
  const promised = job.req?.gpu_memory_mib || 0;
  if (!peak) return promised ? `${formatMib(promised)} promised; no figure yet` : '';
  return `${formatMib(peak)} peak${promised ? ` of ${formatMib(promised)} promised` : ''}`;
}

function facts(job) {
  const r = job.req || {};
  const now = nowSeconds();
  const pairs = [
    ['user', r.user], ['account', r.account], ['partition', r.partition],
    ['GPUs', `${jobGpuCount(job)}${r.gpu_model ? ` × ${r.gpu_model}` : ''}`],
    ['placement', placementText(job) || '–'],
    ['CPUs', r.cpus], ['memory', formatMib(r.memory_mib)],
    // Issue 20: what it really held on one GPU (NVML), against a share's promise.
    ['GPU memory', gpuMemoryText(job)],
    ['time limit', formatDuration(r.time_limit)],
    ['wait', formatDuration(job.start_time ? job.start_time - job.submit_time : now - job.submit_time)],
    ['run time', job.start_time ? formatDuration((job.end_time || now) - job.start_time) : '–'],
    ['command', (job.spec?.argv || []).join(' ') || (job.spec?.script ? '(batch script)' : '–')],
    ['workdir', job.spec?.workdir],
  ];
  return el('dl', { class: 'facts' },
    pairs.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v === undefined || v === '' ? '–' : v)]));
}

export const jobView = {
  title: 'Job',
  mount(main, params) {
    const head = el('div', { class: 'job-head' });
    const body = el('div', { class: 'job-body' });
    const log = el('pre', { class: 'log', id: 'job-log' }, 'loading…');
    const logInfo = el('p', { class: 'muted', id: 'job-log-info' });
    const usageBox = el('div', { class: 'usage-box' }, el('p', { class: 'muted' }, 'loading…'));
    const usage = el('section', { class: 'card', id: 'job-usage', hidden: true },
                     el('h3', {}, 'GPU usage'), usageBox);
    main.replaceChildren(head, body, usage,
      el('section', { class: 'card' }, el('h3', {}, 'Log (tail)'), logInfo, log));
    return { id: params.id, head, body, log, logInfo, usage, usageBox };
  },
  async refresh(st, ctx) {
    const detail = await api.job(st.id);
    const { job } = detail;
    const active = job.state === 'PENDING' || job.state === 'RUNNING';
    st.head.replaceChildren(...present(
      el('h2', {}, el('span', { class: 'swatch big', style: `background:${jobColor(job.id)}` }),
         `Job ${job.id}`, job.spec?.name ? ` · ${job.spec.name}` : ''),
      el('span', { class: `badge job-${job.state}`, id: 'job-state' }, job.state),
      active ? el('button', { type: 'button', class: 'cancel', id: 'job-cancel',
                              onclick: () => cancelJob(job.id, ctx.refresh) }, 'Cancel job') : null));
    const history = el('ol', { class: 'history', id: 'job-history' },
      historyItems(detail).map((e) => el('li', {},
        el('time', {}, e.at ? formatTime(e.at) : ''), el('strong', {}, e.what), ' ', e.detail)));
    st.body.replaceChildren(...present(
      el('div', { class: 'columns' },
        el('section', { class: 'card' }, el('h3', {}, 'History'), history),
        el('section', { class: 'card' }, el('h3', {}, 'Request and placement'), facts(job))),
      explainBlock(detail)));
    // The usage and the log: once for a finished job, every refresh while it runs. A
    // requeued job waiting again still has its earlier runs' usage.
    const ran = job.start_time || job.requeues > 0;
    st.usage.hidden = !ran;
    if (!job.start_time) st.log.textContent = '(not started: no log yet)';
    await Promise.all([
      !ran || (st.usageDone && !active) ? null : refreshUsage(st, job, active),
      !job.start_time || (st.logDone && !active) ? null : refreshLog(st, job, active),
    ]);
  },
};

// Done for a finished job once it was read: a refusal (401/403: the usage is its
// owner's, like the log) is asked again, so a token pasted since shows it.
async function refreshUsage(st, job, active) {
  try {
    st.usageBox.replaceChildren(...usageContent(await api.usage(job.id), job.state === 'RUNNING'));
    st.usageDone = !active;
  } catch (e) {
    st.usageBox.replaceChildren(...usageError(e));
  }
}

async function refreshLog(st, job, active) {
  try {
    const t = await api.log(job.id, LOG_LINES);
    st.logInfo.textContent = `${t.path} on ${t.node} · ${t.size} bytes · last ${LOG_LINES} lines`;
    st.log.textContent = t.text || '(empty)';
  } catch (e) {
    st.logInfo.textContent = '';
    // 404: not started, or on another node; 401/403: the log is its owner's, asked
    // again (a token pasted since shows it).
    st.log.textContent = e instanceof ApiError && e.status === 404 ? e.message : describeError(e);
    if (e instanceof ApiError && (e.status === 401 || e.status === 403)) return;
  }
  st.logDone = !active;
}
