// The API writes bytes that are not UTF-8 (a job's workdir, argv, environment, script,
// output paths, name, comment) as {"base64": "..."} (docs/api.md, "Bytes that are not
// UTF-8"). The page shows such a value as "(N bytes, not UTF-8)" instead of
// "[object Object]"; it never acts on those values, so nothing is lost by not decoding.

// A string as it is; the bytes form as its size.
export function displayBytes(v) {
  if (v && typeof v === 'object' && !Array.isArray(v) && typeof v.base64 === 'string') {
    const b = v.base64;
    const pad = b.endsWith('==') ? 2 : b.endsWith('=') ? 1 : 0;
    const n = (b.length / 4) * 3 - pad;
    return `(${n} ${n === 1 ? 'byte' : 'bytes'}, not UTF-8)`;
  }
  return v;
}

const SPEC_BYTES = ['name', 'script', 'workdir', 'stdout_path', 'stderr_path', 'comment',
                    'container_image'];
const REQ_TEXT = ['partition', 'qos', 'user', 'account', 'gpu_model'];

// A job record with every bytes-form value made displayable (in place; returns it).
export function displayJob(job) {
  const spec = job && job.spec;
  if (spec) {
    for (const k of SPEC_BYTES) if (k in spec) spec[k] = displayBytes(spec[k]);
    if (Array.isArray(spec.argv)) spec.argv = spec.argv.map(displayBytes);
    if (Array.isArray(spec.env)) spec.env = spec.env.map(displayBytes);
  }
  const req = job && job.req;
  if (req) for (const k of REQ_TEXT) if (k in req) req[k] = displayBytes(req[k]);
  return job;
}
