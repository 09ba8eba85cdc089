// Runs the e2e tests with Node's test runner, after checking that the openai client is installed.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (!fs.existsSync(path.join(here, 'node_modules', 'openai'))) {
  console.error('the openai npm client is not installed: run `npm ci --prefix tests/e2e` ' +
                '(scripts/test.sh does it)');
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', path.join(here, 'openai_client.test.mjs')],
                    { stdio: 'inherit' });
process.exit(r.status ?? 1);
