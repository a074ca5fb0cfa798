// The REST API as the page uses it (docs/api.md). Without a token the page reads as an
// anonymous viewer; with the token the user pasted (kept in localStorage) every request
// carries it (Authorization: Bearer): actions need it, and so do a job's log and its
// environment, which are its owner's and the admins'.

import { displayJob } from './bytes.js';

const TOKEN_KEY = 'hachi.token';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;  // HTTP status, 0 when the server could not be reached
    this.code = code;      // the API's error code: "not_found", "permission_denied", ...
  }
}

export function getToken() {
  return localStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

async function request(method, path, body) {
  const headers = {};
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'unreachable', `the server did not answer (${e.message})`);
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = data && data.error ? data.error : {};
    throw new ApiError(res.status, err.code || `http_${res.status}`,
                       err.message || `HTTP ${res.status}`);
  }
  return data;
}

// Pages of this many jobs, as the CLI reads them: the server never builds one reply of
// every job it holds.
const JOBS_PAGE = 5000;

async function allJobs(all) {
  const out = [];
  let after = 0;
  for (;;) {
    const d = await request('GET', `/jobs?limit=${JOBS_PAGE}&after=${after}${all ? '&all=1' : ''}`);
    out.push(...d.jobs.map(displayJob));
    if (d.next_after === undefined || d.next_after === null) return out;
    after = d.next_after;
  }
}

export const api = {
  nodes: () => request('GET', '/nodes').then((d) => d.nodes),
  jobs: (all = false) => allJobs(all),
  job: (id) => request('GET', `/jobs/${id}`).then((d) => {
    if (d && d.job) displayJob(d.job);
    return d;
  }),
  log: (id, lines = 200) => request('GET', `/jobs/${id}/log?tail=${lines}`),
  usage: (id) => request('GET', `/jobs/${id}/usage`),
  partitions: () => request('GET', '/partitions').then((d) => d.partitions),
  pools: (from) => request('GET', `/pools${from ? `?from=${from}` : ''}`).then((d) => d.pools),
  report: (query) => request('GET', `/report?${query}`),
  history: (since = 0) => request('GET', `/history?since=${since}`),
  cancel: (id) => request('POST', `/jobs/${id}/cancel`),
  drain: (node, reason) => request('POST', `/nodes/${encodeURIComponent(node)}/drain`,
                                   { reason }),
  resume: (node) => request('POST', `/nodes/${encodeURIComponent(node)}/resume`, {}),
};

// "401 unauthenticated: ..." for the banner; a hint when the fix is the token field.
export function describeError(e) {
  if (!(e instanceof ApiError)) return String(e && e.message ? e.message : e);
  let hint = '';
  if (e.status === 401) hint = getToken() ? ' (the token was refused)' : ' (paste a token above)';
  if (e.status === 403) hint = ' (this token may not do that)';
  return `${e.status || ''} ${e.code}: ${e.message}${hint}`.trim();
}
