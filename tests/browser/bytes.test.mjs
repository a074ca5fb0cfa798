// web/bytes.js without a browser: the API's {"base64": ...} form of bytes that
// are not UTF-8 is shown as its size, never as "[object Object]"; strings pass as they are.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

import { displayBytes, displayJob } from '../../web/bytes.js';

describe('bytes that are not UTF-8', () => {
  it('shows the size of the bytes form', () => {
    assert.equal(displayBytes({ base64: 'L3RtcC9k/w==' }), '(7 bytes, not UTF-8)');
    assert.equal(displayBytes({ base64: 'Zm8=' }), '(2 bytes, not UTF-8)');
    assert.equal(displayBytes({ base64: '' }), '(0 bytes, not UTF-8)');
    assert.equal(displayBytes('/home/a'), '/home/a');
    assert.equal(displayBytes(undefined), undefined);
  });
  it('makes every spec field of a job displayable', () => {
    const job = displayJob({
      id: 1,
      req: { partition: 'gpu8', user: 'alice' },
      spec: { workdir: { base64: 'L3RtcC9k/w==' }, argv: ['sh', { base64: '/w==' }],
              env: [{ base64: 'Vj3/' }, 'A=b'], name: 'n', script: '' },
    });
    assert.equal(job.spec.workdir, '(7 bytes, not UTF-8)');
    assert.deepEqual(job.spec.argv, ['sh', '(1 byte, not UTF-8)']);
    assert.equal(job.spec.argv.join(' '), 'sh (1 byte, not UTF-8)');
    assert.deepEqual(job.spec.env, ['(3 bytes, not UTF-8)', 'A=b']);
    assert.equal(job.req.partition, 'gpu8');
  });
});
