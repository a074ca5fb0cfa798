// The REST API as the page uses it (docs/api.md). Reads are anonymous; actions carry
// the token the user pasted (Authorization: Bearer), kept in localStorage.

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
  // Reads go out without the token too: what an anonymous viewer sees is the default.
  if (method !== 'GET' && token) headers.Authorization = `Bearer ${token}`;
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

export const api = {
  nodes: () => request('GET', '/nodes').then((d) => d.nodes),
  jobs: (all = false) => request('GET', all ? '/jobs?all=1' : '/jobs').then((d) => d.jobs),
  job: (id) => request('GET', `/jobs/${id}`),
  log: (id, lines = 200) => request('GET', `/jobs/${id}/log?tail=${lines}`),
  partitions: () => request('GET', '/partitions').then((d) => d.partitions),
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
