// Starts `strata serve` on a free loopback port for the e2e tests and stops it afterwards.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const sourceDir = process.env.STRATA_SOURCE_DIR ?? path.resolve(here, '../..');
export const binary = process.env.STRATA_BIN ?? path.join(sourceDir, 'build', 'strata');
export const sharedData = process.env.STRATA_SHARED_DATA ?? path.resolve(sourceDir, '../shared/data');

// Resolves to {port, child, output(), stop()} once the server logs its listening line.
// The start deadline is a safety net against a hang, far longer than a start takes on a loaded host.
export function startServer(args, { timeoutMs = 300000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['serve', ...args, '--host', '127.0.0.1', '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      child.kill('SIGKILL');
      reject(new Error(`strata serve did not start in ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    const onData = (d) => {
      out += d.toString();
      const m = out.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m && !settled) {
        settled = true;
        clearTimeout(timer);
        resolve({
          port: Number(m[1]),
          child,
          output: () => out,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null) return done(child.exitCode);
              child.once('exit', (code) => done(code));
              child.kill('SIGTERM');
            }),
        });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', (e) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(new Error(`cannot run ${binary}: ${e.message}`));
      }
    });
    child.on('exit', (code) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(new Error(`strata serve exited with ${code}:\n${out}`));
      }
    });
  });
}
