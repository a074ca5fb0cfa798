// Queue view (#/queue?user=U&partition=P&state=S): pending and running jobs with their
// reason (the last cycle's word, and the diagnosis with numbers), wait time and GPUs.

import { api, describeError } from './api.js';
import { showBanner } from './banner.js';
import { jobColor } from './colors.js';
import { el, formatDuration, jobGpuCount, nowSeconds, placementText } from './util.js';

// Diagnoses cost a request each (and the server builds an explanation for each): fetched
// for at most this many pending rows, each at most every DIAGNOSIS_MS.
const MAX_DIAGNOSES = 25;
const DIAGNOSIS_MS = 10000;

export async function cancelJob(id, refresh) {
  try {
    await api.cancel(id);
    showBanner(`cancel of job ${id} requested`, 'ok');
  } catch (e) {
    showBanner(`cancel of job ${id} failed: ${describeError(e)}`);
  }
  refresh();
}

function waitOf(job, now) {
  if (job.state === 'PENDING') return now - job.submit_time;
  return job.start_time ? job.start_time - job.submit_time : null;
}

function select(id, label, values, current, onchange) {
  const s = el('select', { id, onchange: (ev) => onchange(ev.target.value) },
    el('option', { value: '' }, `all`),
    values.map((v) => el('option', { value: v, selected: v === current }, v)));
  return el('label', { class: 'filter' }, `${label} `, s);
}

function setFilter(params, key, value) {
  const q = new URLSearchParams(params);
  if (value) q.set(key, value);
  else q.delete(key);
  const text = q.toString();
  location.hash = `#/queue${text ? `?${text}` : ''}`;
}

export const queueView = {
  title: 'Queue',
  mount(main, params) {
    const filters = el('div', { class: 'filters' });
    const counts = el('p', { class: 'summary', id: 'queue-summary' });
    const body = el('tbody');
    const table = el('table', { class: 'queue', id: 'queue-table' },
      el('thead', {}, el('tr', {},
        ['Job', 'Name', 'User', 'Partition', 'State', 'GPUs', 'Placement', 'Wait', 'Reason', '']
          .map((h) => el('th', {}, h)))),
      body);
    main.replaceChildren(filters, counts, table);
    return { filters, counts, body, params, diagnoses: new Map() };
  },
  async refresh(st, ctx) {
    const [jobs, partitions] = await Promise.all([api.jobs(), api.partitions()]);
    const { user = '', partition = '', state = '' } = st.params;
    const users = [...new Set(jobs.map((j) => j.req?.user).filter(Boolean))].sort();
    const sig = JSON.stringify([users, partitions.map((p) => p.name), st.params]);
    if (sig !== st.filterSig) {
      st.filterSig = sig;
      st.filters.replaceChildren(
        select('filter-user', 'User', users, user, (v) => setFilter(st.params, 'user', v)),
        select('filter-partition', 'Partition', partitions.map((p) => p.name), partition,
               (v) => setFilter(st.params, 'partition', v)),
        select('filter-state', 'State', ['PENDING', 'RUNNING'], state,
               (v) => setFilter(st.params, 'state', v)));
    }
    const shown = jobs.filter((j) => (!user || j.req?.user === user) &&
      (!partition || j.req?.partition === partition) && (!state || j.state === state))
      .sort((a, b) => (a.state === b.state ? a.id - b.id : a.state === 'RUNNING' ? -1 : 1));

    const stale = Date.now() - DIAGNOSIS_MS;
    const wanted = shown.filter((j) => j.state === 'PENDING').slice(0, MAX_DIAGNOSES)
      .filter((j) => !(st.diagnoses.get(j.id)?.at > stale));
    const details = await Promise.all(wanted.map((j) => api.job(j.id).catch(() => null)));
    wanted.forEach((j, i) => {
      const d = details[i];
      if (d) st.diagnoses.set(j.id, { at: Date.now(), text: d.diagnosis || d.explain?.diagnosis || '' });
    });

    const now = nowSeconds();
    const pending = shown.filter((j) => j.state === 'PENDING').length;
    st.counts.textContent = `${shown.length} jobs shown · ${shown.length - pending} running · ` +
      `${pending} pending`;
    st.body.replaceChildren(...shown.map((j) => {
      const reason = j.state === 'PENDING'
        ? el('div', {},
          el('span', { class: 'reason-word' }, j.held ? 'held' : (j.reason || 'waiting for a cycle')),
          st.diagnoses.get(j.id)?.text
            ? el('div', { class: 'diagnosis' }, st.diagnoses.get(j.id).text) : null)
        : '';
      return el('tr', { 'data-job': j.id, 'data-state': j.state },
        el('td', {}, el('span', { class: 'swatch', style: `background:${jobColor(j.id)}` }),
           el('a', { href: `#/job/${j.id}` }, j.id)),
        el('td', {}, j.spec?.name || ''),
        el('td', {}, j.req?.user || ''),
        el('td', {}, j.req?.partition || ''),
        el('td', {}, el('span', { class: `badge job-${j.state}` }, j.state)),
        el('td', { class: 'num' }, jobGpuCount(j)),
        el('td', {}, placementText(j)),
        el('td', { class: 'num' }, formatDuration(waitOf(j, now))),
        el('td', { class: 'reason' }, reason),
        el('td', {}, el('button', { type: 'button', class: 'cancel', 'data-job': j.id,
                                    onclick: () => cancelJob(j.id, ctx.refresh) }, 'Cancel')));
    }));
  },
};
