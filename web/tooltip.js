// One floating tooltip for the whole page: views attach lines of text to elements.

let tip = null;

function tooltipEl() {
  if (!tip) tip = document.getElementById('tooltip');
  return tip;
}

function place(ev) {
  const t = tooltipEl();
  const pad = 14;
  const w = t.offsetWidth;
  const h = t.offsetHeight;
  let x = ev.clientX + pad;
  let y = ev.clientY + pad;
  if (x + w > window.innerWidth - 4) x = ev.clientX - w - pad;
  if (y + h > window.innerHeight - 4) y = ev.clientY - h - pad;
  t.style.left = `${Math.max(4, x)}px`;
  t.style.top = `${Math.max(4, y)}px`;
}

// Shows `lines()` (an array of strings, evaluated on hover) next to the pointer.
export function attachTooltip(node, lines) {
  node.addEventListener('mouseenter', (ev) => {
    const t = tooltipEl();
    t.replaceChildren(...lines().map((l, i) => {
      const d = document.createElement('div');
      if (i === 0) d.className = 'tip-title';
      d.textContent = l;
      return d;
    }));
    t.hidden = false;
    place(ev);
  });
  node.addEventListener('mousemove', place);
  node.addEventListener('mouseleave', () => {
    tooltipEl().hidden = true;
  });
}

export function hideTooltip() {
  if (tooltipEl()) tooltipEl().hidden = true;
}
