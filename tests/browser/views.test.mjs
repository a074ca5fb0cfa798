// The pure parts of the views, without a browser: what each GPU of a node shows, a job's
// history from its record, GPU sets, colours.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { gpuStates } from '../../web/board.js';
import { jobColor } from '../../web/colors.js';
import { gpuMemoryText, jobHistory } from '../../web/job.js';
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

test('gpuMemoryText: the peak NVML saw against what a share was promised (issue 20)', () => {
  assert.equal(gpuMemoryText({ req: {} }), '');
  assert.equal(gpuMemoryText({ req: { gpu_memory_mib: 20480 } }), '20 GiB promised; no figure yet');
  assert.equal(gpuMemoryText({ gpu_memory_peak_mib: 11264, req: { gpu_memory_mib: 20480 } }),
               '11 GiB peak of 20 GiB promised');
  assert.equal(gpuMemoryText({ gpu_memory_peak_mib: 62464, req: {} }), '61 GiB peak');
});

test('gpuStates: a MIG GPU shows its devices and who holds each (issue 20)', () => {
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
