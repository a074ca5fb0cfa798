// The dashboard's entry point: hash routes, the token field, and live updates by
// polling (every view refreshes every POLL_MS, or slower when refreshes are slow, while
// the tab is visible).

import { getToken, setToken, describeError } from './api.js';
import { clearBanner, showBanner } from './banner.js';
import { chartsView } from './charts.js';
import { clusterView } from './cluster.js';
import { jobView } from './job.js';
import { queueView } from './queue.js';

// Every view refreshes every POLL_MS, or, when a refresh takes long (a big queue is a big
// GET /jobs), SLOW_FACTOR times as long as the last one took, up to MAX_POLL_MS: the page
// never spends more than a fifth of the time fetching.
const POLL_MS = 2000;
const SLOW_FACTOR = 5;
const MAX_POLL_MS = 30000;

// "#/queue?user=a" -> {view: queueView, params: {user: 'a'}}; "#/job/12" -> job 12.
function route(hash) {
  const [path, query = ''] = hash.replace(/^#\/?/, '').split('?');
  const params = Object.fromEntries(new URLSearchParams(query));
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'job' && /^\d+$/.test(parts[1] || '')) {
    return { name: 'job', view: jobView, params: { ...params, id: parts[1] } };
  }
  if (parts[0] === 'queue') return { name: 'queue', view: queueView, params };
  if (parts[0] === 'charts') return { name: 'charts', view: chartsView, params };
  return { name: 'cluster', view: clusterView, params };
}

const app = {
  current: null,
  state: null,
  timer: null,
  busy: false,
  generation: 0,
  lastMs: 0,  // how long the last refresh took
};

async function refresh() {
  if (app.busy || !app.current) return;
  app.busy = true;
  const gen = app.generation;
  const started = performance.now();
  try {
    await app.current.view.refresh(app.state, { refresh: () => setTimeout(refresh, 0) });
    if (gen === app.generation) {
      document.getElementById('updated').textContent =
        `updated ${new Date().toLocaleTimeString()}`;
      clearBanner('stale');
    }
  } catch (e) {
    if (gen === app.generation) showBanner(`cannot refresh: ${describeError(e)}`, 'stale');
  } finally {
    app.busy = false;
    app.lastMs = performance.now() - started;
  }
}

function schedulePoll() {
  const delay = Math.min(MAX_POLL_MS, Math.max(POLL_MS, SLOW_FACTOR * app.lastMs));
  app.timer = setTimeout(async () => {
    if (document.visibilityState === 'visible') await refresh();
    schedulePoll();
  }, delay);
}

function navigate() {
  app.generation++;
  clearBanner('ok');  // a success belongs to the page it happened on; errors stay
  app.current = route(location.hash);
  document.title = `Hachi · ${app.current.view.title}`;
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', a.dataset.view === app.current.name ||
                                 (app.current.name === 'job' && a.dataset.view === 'queue'));
  }
  app.state = app.current.view.mount(document.getElementById('view'), app.current.params);
  app.busy = false;
  refresh();
}

function showTokenState() {
  document.getElementById('token-state').textContent =
    getToken() ? 'token saved: actions are signed' : 'read-only (no token)';
}

function setupToken() {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    input.value = '';
    showTokenState();
  });
  document.getElementById('token-clear').addEventListener('click', () => {
    setToken('');
    showTokenState();
  });
  showTokenState();
}

function start() {
  setupToken();
  window.addEventListener('hashchange', navigate);
  navigate();
  schedulePoll();
}

start();
