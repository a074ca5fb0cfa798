// CTest's entry (tests/browser, label "browser"): runs the dashboard's tests when Chromium
// is there; without it (or without node, src/server/CMakeLists.txt) they are skipped (77).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const SKIP = 77;
const chromium = process.env.HACHI_CHROMIUM || '/usr/bin/chromium';
if (!existsSync(chromium)) {
  console.log(`browser tests SKIPPED: no Chromium at ${chromium} (scripts/install-deps.sh installs it)`);
  process.exit(SKIP);
}
if (!existsSync(join(here, 'node_modules', 'playwright-core'))) {
  // Not a skip: `make test` installs it, so its absence is a broken setup.
  console.log('browser tests FAILED: playwright-core is not installed; run `npm ci --prefix tests/browser`');
  process.exit(1);
}
const r = spawnSync(process.execPath,
  ['--test', '--test-concurrency=1', join(here, 'topology.test.mjs'), join(here, 'views.test.mjs'),
   join(here, 'dashboard.test.mjs'), join(here, 'boards.test.mjs'), join(here, 'burnin.test.mjs'),
   join(here, 'mig.test.mjs'), join(here, 'pools.test.mjs'),
   join(here, 'usage.test.mjs')],
  { stdio: 'inherit', cwd: here });
process.exit(r.status ?? 1);
