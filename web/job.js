// Job page (#/job/ID): what it asked for and got, its history from the timestamps the
// record keeps, why it waits, and the tail of its log.

import { api, ApiError } from './api.js';
import { jobColor } from './colors.js';
import { cancelJob } from './queue.js';
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

function explainBlock(detail) {
  const { job } = detail;
  if (job.state !== 'PENDING') return null;
  const rows = [el('p', {}, el('span', { class: 'reason-word' }, job.held ? 'held' : job.reason || 'waiting for a cycle'))];
  if (detail.diagnosis) rows.push(el('p', { class: 'diagnosis', id: 'job-diagnosis' }, detail.diagnosis));
  if (detail.explain && typeof detail.explain === 'object') {
    rows.push(el('pre', { class: 'explain' }, JSON.stringify(detail.explain, null, 2)));
  }
  return el('section', { class: 'card' }, el('h3', {}, 'Why it waits'), ...rows);
}

function facts(job) {
  const r = job.req || {};
  const now = nowSeconds();
  const pairs = [
    ['user', r.user], ['account', r.account], ['partition', r.partition],
    ['GPUs', `${jobGpuCount(job)}${r.gpu_model ? ` × ${r.gpu_model}` : ''}`],
    ['placement', placementText(job) || '–'],
    ['CPUs', r.cpus], ['memory', formatMib(r.memory_mib)],
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
    main.replaceChildren(head, body,
      el('section', { class: 'card' }, el('h3', {}, 'Log (tail)'), logInfo, log));
    return { id: params.id, head, body, log, logInfo };
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
      jobHistory(job).map((e) => el('li', {},
        el('time', {}, e.at ? formatTime(e.at) : ''), el('strong', {}, e.what), ' ', e.detail)));
    st.body.replaceChildren(...present(
      el('div', { class: 'columns' },
        el('section', { class: 'card' }, el('h3', {}, 'History'), history),
        el('section', { class: 'card' }, el('h3', {}, 'Request and placement'), facts(job))),
      explainBlock(detail)));
    // The log: once for a finished job, every refresh while it runs.
    if (!job.start_time || (st.logDone && !active)) {
      if (!job.start_time) st.log.textContent = '(not started: no log yet)';
      return;
    }
    try {
      const t = await api.log(job.id, LOG_LINES);
      st.logInfo.textContent = `${t.path} on ${t.node} · ${t.size} bytes · last ${LOG_LINES} lines`;
      st.log.textContent = t.text || '(empty)';
    } catch (e) {
      st.logInfo.textContent = '';
      st.log.textContent = e instanceof ApiError ? e.message : String(e);
    }
    st.logDone = !active;
  },
};
