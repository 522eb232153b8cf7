// Limits as a client meets them on the real server: a full waiting queue is a 429 with
// Retry-After, an oversized body a 413, both OpenAI-shaped, and neither disturbs the requests
// that were admitted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, sharedDir } from './server.mjs';

let server;
let confDir;

before(async () => {
  confDir = mkdtempSync(join(tmpdir(), 'strata-limits-'));
  const conf = join(confDir, 'strata.toml');
  writeFileSync(conf, '[scheduler]\nmax_running = 1\nmax_queued = 2\n\n[limits]\nmax_body = "4KiB"\n');
  server = await startServer(['--config', conf, '-m', `${sharedDir}/models/tiny-llama-spm-f16.gguf`]);
});
after(async () => {
  const { code } = await server.stop();
  rmSync(confDir, { recursive: true, force: true });
  assert.equal(code, 0, 'SIGTERM exits 0');
});

const post = (body, signal) =>
  fetch(`${server.baseURL}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body), signal });

test('a full queue answers 429 with Retry-After; the admitted streams are unharmed', async () => {
  const long = { messages: [{ role: 'user', content: 'Go on.' }], max_tokens: 400, ignore_eos: true, stream: true };
  const abort = new AbortController();
  // One runs, two wait: the queue is full.
  const admitted = [];
  for (let i = 0; i < 3; ++i) {
    const res = await post(long, abort.signal);
    assert.equal(res.status, 200);
    admitted.push(res);
  }
  const refused = await post({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('retry-after'), '1');
  const err = (await refused.json()).error;
  assert.equal(err.type, 'rate_limit_error');
  assert.equal(err.code, 'queue_full');
  assert.equal(typeof err.message, 'string');

  // The running stream keeps producing tokens after the refusal.
  const reader = admitted[0].body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while ((text.match(/"content":/g) ?? []).length < 3) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the running stream ended early');
    text += decoder.decode(value, { stream: true });
  }
  abort.abort();
  const metrics = await (await fetch(`${server.baseURL}/metrics`)).text();
  assert.ok(Number(metrics.match(/^strata_requests_rejected_total (\S+)$/m)[1]) >= 1);
});

test('a body over max_body is a 413 in the OpenAI shape', async () => {
  const big = { messages: [{ role: 'user', content: 'x'.repeat(8192) }], max_tokens: 1 };
  const res = await post(big);
  assert.equal(res.status, 413);
  const err = (await res.json()).error;
  assert.equal(err.type, 'invalid_request_error');
  assert.match(err.message, /limit/);
  // The server still serves (a fresh connection).
  const ok = await fetch(`${server.baseURL}/health`);
  assert.equal(ok.status, 200);
});
