// The pure parts of the views, without a browser: what each GPU of a node shows (and how
// busy it is), a job's history from its record, its GPU usage charts and figures, GPU
// sets, colours.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { busyShade, gpuStates, utilText } from '../../web/board.js';
import { IDLE_LIGHTNESS, jobColor, utilColor, utilLightness } from '../../web/colors.js';
import { gpuMemoryText, jobHistory } from '../../web/job.js';
import {
  areaPath, gpuFiguresText, gpuName, latestRun, pct, runText, seriesPath,
} from '../../web/usage.js';
import { formatDuration, parseGpuSet, placementText } from '../../web/util.js';

test('gpuStates: busy by job, free, unhealthy with its reason (unhealthy wins)', () => {
  const node = {
    gpus: 4, gpu_jobs: [7, 7, 0, 9], gpu_share_milli: [0, 0, 0, 250], unhealthy: '1',
    unhealthy_reasons: { 1: 'Xid 79: GPU has fallen off the bus' },
  };
  const jobs = new Map([[7, { id: 7, req: { user: 'ann' } }]]);
  const st = gpuStates(node, jobs);
  assert.equal(st[0].state, 'busy');
  assert.equal(st[0].job.req.user, 'ann');
  assert.deepEqual(st[1], { state: 'unhealthy', reason: 'Xid 79: GPU has fallen off the bus' });
  assert.deepEqual(st[2], { state: 'free' });
  assert.equal(st[3].job.id, 9, 'a job the list does not have still names its id');
  assert.equal(st[3].share, 250);
});

test('jobHistory from the record: submit, requeues, start, end', () => {
  const base = { id: 3, req: { partition: 'gpu8' }, submit_time: 100, allocations: [{ node: 'n1', gpus: '0-7' }] };
  const ran = jobHistory({ ...base, state: 'COMPLETED', start_time: 160, end_time: 400, exit_code: 0, requeues: 0 });
  assert.deepEqual(ran.map((e) => e.what), ['submitted', 'started', 'ended COMPLETED']);
  assert.match(ran[1].detail, /n1:0-7 after 1m 0s/);
  assert.match(ran[2].detail, /exit 0/);
  const requeued = jobHistory({ ...base, state: 'PENDING', requeues: 2, reason: 'node n1 down', start_time: 0, end_time: 0 });
  assert.deepEqual(requeued.map((e) => e.what), ['submitted', 'requeued 2×', 'pending']);
  assert.equal(requeued[1].detail, 'node n1 down');
  const killed = jobHistory({ ...base, state: 'FAILED', start_time: 160, end_time: 170, signal: 9, requeues: 0 });
  assert.match(killed[2].detail, /signal 9/);
});

test('GPU sets, placements, durations, colours', () => {
  assert.deepEqual(parseGpuSet('0-3,6'), [0, 1, 2, 3, 6]);
  assert.deepEqual(parseGpuSet(''), []);
  assert.equal(placementText({ allocations: [{ node: 'a', gpus: '0,1' }, { node: 'b', gpus: '0-7' }] }), 'a:0,1 b:0-7');
  assert.equal(formatDuration(75), '1m 15s');
  assert.equal(formatDuration(5400), '1h 30m');
  assert.equal(formatDuration(-1), '–');
  assert.equal(jobColor(12), jobColor(12), 'stable');
  assert.notEqual(jobColor(12), jobColor(13), 'neighbours differ');
});

test('gpuMemoryText: the peak NVML saw against what a share was promised', () => {
  assert.equal(gpuMemoryText({ req: {} }), '');
  assert.equal(gpuMemoryText({ req: { gpu_memory_mib: 20480 } }), '20 GiB promised; no figure yet');
  assert.equal(gpuMemoryText({ gpu_memory_peak_mib: 11264, req: { gpu_memory_mib: 20480 } }),
               '11 GiB peak of 20 GiB promised');
  assert.equal(gpuMemoryText({ gpu_memory_peak_mib: 62464, req: {} }), '61 GiB peak');
});

test('gpuStates: a MIG GPU shows its devices and who holds each', () => {
  const node = {
    gpus: 2, gpu_jobs: [0, 5], gpu_share_milli: [0, 0], unhealthy: '',
    mig_devices: [
      { gpu: 0, profile: '1g.10gb', uuid: 'MIG-a', memory_mib: 9728, job: 12 },
      { gpu: 0, profile: '1g.10gb', uuid: 'MIG-b', memory_mib: 9728, job: 0 },
      { gpu: 0, profile: '2g.20gb', uuid: 'MIG-c', memory_mib: 19456, job: 13 },
    ],
  };
  const jobs = new Map([[12, { id: 12, req: { user: 'ann' } }]]);
  const st = gpuStates(node, jobs);
  assert.equal(st[0].state, 'mig');
  assert.deepEqual(st[0].devices.map((d) => d.uuid), ['MIG-a', 'MIG-b', 'MIG-c']);
  assert.equal(st[0].devices[0].holder.req.user, 'ann');
  assert.equal(st[0].devices[1].holder, null);
  assert.equal(st[0].devices[2].holder.id, 13, 'a job the list does not have still names its id');
  assert.equal(st[1].state, 'busy', 'a GPU without MIG devices is as before');
});

test('gpuStates: a busy GPU carries its latest utilisation, -1 without one', () => {
  const node = { gpus: 3, gpu_jobs: [7, 7, 0], gpu_util: [84, -1, -1] };
  const st = gpuStates(node, new Map());
  assert.equal(st[0].util, 84);
  assert.equal(st[1].util, -1);
  assert.equal(gpuStates({ gpus: 1, gpu_jobs: [7] }, new Map())[0].util, -1,
               'a server without gpu_util: no figure');
  assert.equal(utilText(84), '84 % utilised (latest sample)');
  assert.equal(utilText(-1), '');
});

test('the board shades a busy GPU by its utilisation: the job colour at 100 %, light at 0 %', () => {
  assert.equal(utilColor(12, 100), jobColor(12), 'full use: the job colour itself');
  assert.equal(utilColor(12, -1), jobColor(12), 'no figure: the job colour unchanged');
  assert.equal(utilLightness(12, 0), IDLE_LIGHTNESS);
  assert.equal(utilLightness(13, 0), IDLE_LIGHTNESS);
  assert.equal(utilLightness(12, 50), Math.round((IDLE_LIGHTNESS + 58) / 2));
  assert.equal(utilLightness(13, 150), 46, 'clamped at 100 %');
  // Lighter the less it is used, step by step.
  const ls = [0, 25, 50, 75, 100].map((u) => utilLightness(13, u));
  assert.deepEqual([...ls].sort((a, b) => b - a), ls);
  assert.equal(busyShade(13, 5).dark, true, 'an idle GPU gets dark text');
  assert.equal(busyShade(13, 95).dark, false);
  assert.match(busyShade(13, 0).fill, /^hsl\(\d+(\.\d)? 62% 92%\)$/);
});

test('seriesPath: time left to right, utilisation bottom to top, clamped', () => {
  const box = { t0: 100, t1: 200, vmax: 100, width: 200, height: 50 };
  assert.equal(seriesPath([[100, 0], [150, 50], [200, 100]], box),
               'M 0.0 50.0 L 100.0 25.0 L 200.0 0.0');
  assert.equal(seriesPath([[100, 120], [200, -5]], box), 'M 0.0 0.0 L 200.0 50.0');
  assert.equal(seriesPath([[130, 40]], box), 'M 0.0 30.0 L 200.0 30.0', 'one point: a level line');
  assert.equal(seriesPath([], box), '');
  // Buckets of 50 s: a level across each.
  assert.equal(seriesPath([[100, 20], [150, 60]], { ...box, step: 50 }),
               'M 0.0 40.0 L 100.0 40.0 L 100.0 20.0 L 200.0 20.0');
  assert.equal(seriesPath([[100, 20]], { ...box, t1: 150, step: 50 }), 'M 0.0 40.0 L 200.0 40.0');
  assert.equal(areaPath([[100, 0], [200, 100]], box),
               'M 0.0 50.0 L 200.0 0.0 L 200.0 50.0 L 0.0 50.0 Z');
  assert.equal(areaPath([], box), '');
  // Memory on its own scale: the peak at the top.
  assert.equal(seriesPath([[100, 30720], [200, 61440]], { ...box, vmax: 61440 }),
               'M 0.0 25.0 L 200.0 0.0');
});

const RUN = {
  job: 9, start_time: 1000, last_at: 1600, cpu_efficiency: 0.347, mem_peak_mib: 3072,
  gpu_util_mean: 50.25, nodes: [{ node: 'n1' }],
  gpus: [
    { node: 'n1', gpu: 0, samples: 60, util_mean: 95.5, util_p95: 97, util_max: 100,
      mem_peak_mib: 61000, power_mean_w: 650.4, step: 10, series: [[1000, 6, 95, 61000]] },
    { node: 'n1', gpu: 5, samples: 60, util_mean: 5, util_p95: 6, util_max: 9,
      mem_peak_mib: -1, power_mean_w: -1, step: 10, series: [[1000, 6, 5, 0]] },
  ],
};

test('a GPU\'s figures, its name, the run in one line', () => {
  assert.equal(gpuFiguresText(RUN.gpus[0]),
               'mean 95.5 % · p95 97 % · max 100 % · memory peak 59.6 GiB · 650 W');
  assert.equal(gpuFiguresText(RUN.gpus[1]), 'mean 5 % · p95 6 % · max 9 %', 'unmeasured: left out');
  assert.equal(gpuFiguresText({ samples: 0 }), 'no utilisation figure (never sampled)');
  assert.equal(pct(-1), '–');
  assert.equal(gpuName(RUN, RUN.gpus[1]), 'GPU 5');
  assert.equal(gpuName({ nodes: [{}, {}] }, { node: 'n2', gpu: 3 }), 'n2 GPU 3', 'a gang names the node');
  const text = runText(RUN, 1);
  assert.match(text, /^run since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d · GPUs 50\.3 % on average · CPUs 35 % busy · memory peak 3 GiB$/);
  assert.match(runText({ ...RUN, cpu_efficiency: -1, mem_peak_mib: -1 }, 2),
               /the latest of 2 runs · GPUs 50\.3 % on average$/);
});

test('latestRun: the last run with GPU samples, else one line that says why', () => {
  assert.equal(latestRun({ runs: [{ gpus: [] }, RUN] }, true).run, RUN);
  const never = latestRun({ runs: [] }, false);
  assert.equal(never.run, null);
  assert.match(never.note, /^Never sampled/);
  assert.match(latestRun({ runs: [{ ...RUN, gpus: [{ samples: 0 }] }] }, true).note,
               /^Not sampled yet/);
});
