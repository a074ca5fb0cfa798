// A job's colour: stable across reloads and views (from its id alone), and far from its
// neighbours' (consecutive ids step by the golden angle around the hue circle).

const GOLDEN_ANGLE = 137.508;

export function jobColor(id) {
  return `hsl(${jobHue(id)} 62% ${jobLightness(id)}%)`;
}

function jobHue(id) {
  return ((id * GOLDEN_ANGLE) % 360).toFixed(1);
}

// Two lightness bands so that hues that come round again still differ.
function jobLightness(id) {
  return id % 2 === 0 ? 58 : 46;
}

// The lightness of a GPU of job `id` at `util` % (issue 21, the node board's shading):
// the job's own colour at 100 %, near white at 0 %, in between linearly; the job's
// colour unchanged when no figure came (util < 0).
export const IDLE_LIGHTNESS = 92;
export function utilLightness(id, util) {
  if (util === undefined || util === null || util < 0) return jobLightness(id);
  const u = Math.min(util, 100) / 100;
  return Math.round(IDLE_LIGHTNESS - (IDLE_LIGHTNESS - jobLightness(id)) * u);
}

export function utilColor(id, util) {
  return `hsl(${jobHue(id)} 62% ${utilLightness(id, util)}%)`;
}

export const FREE_COLOR = '#e8edf2';
export const UNHEALTHY_COLOR = '#c62828';
