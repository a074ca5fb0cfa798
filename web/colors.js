// A job's colour: stable across reloads and views (from its id alone), and far from its
// neighbours' (consecutive ids step by the golden angle around the hue circle).

const GOLDEN_ANGLE = 137.508;

export function jobColor(id) {
  const hue = (id * GOLDEN_ANGLE) % 360;
  // Two lightness bands so that hues that come round again still differ.
  const light = id % 2 === 0 ? 58 : 46;
  return `hsl(${hue.toFixed(1)} 62% ${light}%)`;
}

export const FREE_COLOR = '#e8edf2';
export const UNHEALTHY_COLOR = '#c62828';
