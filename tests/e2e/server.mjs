// Starts the real `strata serve` on a free loopback port for a test, and stops it with SIGTERM.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const strataBin = process.env.STRATA_BIN ?? 'build/asan/strata';
export const sharedDir = process.env.STRATA_SHARED_DIR ?? '../shared';

// `cacheDir`: use (and keep) this cache directory instead of a fresh one removed at stop, so that a
// test can restart a server on the same SSD tier.
export async function startServer(args = [], { readyTimeoutMs = 120_000, cacheDir: keep } = {}) {
  const cacheDir = keep ?? mkdtempSync(join(tmpdir(), 'strata-e2e-'));
  const child = spawn(strataBin, ['serve', '--port', '0', '--cache-dir', cacheDir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const onData = (d) => { log += d.toString(); };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));

  const deadline = Date.now() + readyTimeoutMs;
  let port;
  while (!port) {
    const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) port = Number(m[1]);
    else if (child.exitCode !== null) throw new Error(`strata exited early:\n${log}`);
    else if (Date.now() > deadline) throw new Error(`strata did not start:\n${log}`);
    else await new Promise((r) => setTimeout(r, 50));
  }
  const baseURL = `http://127.0.0.1:${port}`;
  for (;;) {
    const res = await fetch(`${baseURL}/health`).catch(() => null);
    if (res && res.status === 200) break;
    if (Date.now() > deadline) throw new Error(`strata never became healthy:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    baseURL,
    port,
    log: () => log,
    cacheDir,
    async stop() {
      child.kill('SIGTERM');
      const result = await exited;
      if (!keep) rmSync(cacheDir, { recursive: true, force: true });
      return result;
    },
    /// No goodbye: the process is gone at once, whatever it was doing.
    async kill9() {
      child.kill('SIGKILL');
      const result = await exited;
      if (!keep) rmSync(cacheDir, { recursive: true, force: true });
      return result;
    },
  };
}
