// Runs the e2e tests with Node's test runner, after checking that their npm packages are installed.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
if (!['openai', 'ai', 'ajv', 'zod'].every((m) => fs.existsSync(path.join(here, 'node_modules', m)))) {
  console.error('the e2e npm packages (openai, ai, zod, ajv) are not installed: run `npm ci --prefix tests/e2e` ' +
                '(scripts/test.sh does it)');
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', path.join(here, 'openai_client.test.mjs'),
                                       path.join(here, 'agents.test.mjs')],
                    { stdio: 'inherit' });
process.exit(r.status ?? 1);
