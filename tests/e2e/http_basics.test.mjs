// HTTP behaviour every client relies on, checked with Node's fetch and curl against the real server.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { startServer } from './server.mjs';

let server;
before(async () => { server = await startServer(['--api-key', 'sk-test-key']); });
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'SIGTERM exits 0');
});

test('health answers 200 without a key', async () => {
  const res = await fetch(`${server.baseURL}/health`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: 'ok' });
});

test('v1 endpoints refuse a missing or wrong key with an OpenAI-shaped 401', async () => {
  for (const headers of [{}, { Authorization: 'Bearer nope' }]) {
    const res = await fetch(`${server.baseURL}/v1/models`, { headers });
    assert.equal(res.status, 401);
    const body = await res.json();
    assert.equal(body.error.code, 'invalid_api_key');
    assert.equal(typeof body.error.message, 'string');
    assert.ok('param' in body.error && 'type' in body.error);
  }
});

test('curl sees keep-alive, 404 and 405 as documented', () => {
  const fmt = ['-s', '-o', '/dev/null', '-w', '%{http_code} %{num_connects}\\n'];
  const out = execFileSync('curl', [...fmt, `${server.baseURL}/health`, '--next', ...fmt, `${server.baseURL}/nowhere`,
    '--next', ...fmt, '-X', 'DELETE', `${server.baseURL}/health`]).toString();
  const lines = out.trim().split('\n');
  assert.equal(lines.length, 3);
  // One connection serves all three requests.
  assert.deepEqual(lines.map((l) => l.split(' ')[0]), ['200', '404', '405']);
  assert.equal(lines[1].split(' ')[1], '0');
  assert.equal(lines[2].split(' ')[1], '0');
});

test('metrics are Prometheus text and count responses by status', async () => {
  const count404 = async () => {
    const res = await fetch(`${server.baseURL}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/plain/);
    const text = await res.text();
    assert.match(text, /^# TYPE strata_responses_total counter$/m);
    assert.match(text, /^# TYPE strata_ttft_seconds histogram$/m);
    assert.match(text, /^# TYPE strata_inter_token_seconds histogram$/m);
    return Number(text.match(/^strata_responses_total\{status="404"\} (\S+)$/m)[1]);
  };
  const before = await count404();
  for (let i = 0; i < 3; ++i) assert.equal((await fetch(`${server.baseURL}/no/such/path`)).status, 404);
  assert.equal(await count404(), before + 3);
});
