// The page's message line: action results and errors (401/403 from actions stay until
// dismissed, so a refused cancel is never missed).

import { el } from './util.js';

export function showBanner(message, kind = 'error') {
  const b = document.getElementById('banner');
  b.className = `banner ${kind}`;
  b.dataset.kind = kind;
  b.replaceChildren(el('span', { class: 'banner-text' }, message),
                    el('button', { type: 'button', class: 'banner-close', 'aria-label': 'dismiss',
                                   onclick: () => { b.hidden = true; } }, '×'));
  b.hidden = false;
  // Successes fade on their own; errors stay until dismissed.
  clearTimeout(b.hideTimer);
  if (kind === 'ok') b.hideTimer = setTimeout(() => clearBanner('ok'), 6000);
}

export function clearBanner(kind) {
  const b = document.getElementById('banner');
  if (!kind || b.dataset.kind === kind) b.hidden = true;
}
