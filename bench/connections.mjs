#!/usr/bin/env node
// Connection-level load on a running strata server: many SSE streams at once, many idle
// WebSocket connections, and a storm of clients that disconnect mid-stream. Prints one JSON
// object per scenario.
//
//   node bench/connections.mjs --url http://127.0.0.1:8080 --pid PID \
//        [--sse 1000] [--ws-idle 10000] [--storm 500] [--max-tokens 32]
//
// --pid names the server process, for its resident memory (from /proc/PID/status).
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { sseData } from './sse.mjs';

const require = createRequire(new URL('../tests/e2e/package.json', import.meta.url));
const WebSocket = require('ws');

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    pid: { type: 'string', default: '' },
    sse: { type: 'string', default: '0' },
    'ws-idle': { type: 'string', default: '0' },
    storm: { type: 'string', default: '0' },
    'max-tokens': { type: 'string', default: '32' },
    'hold-s': { type: 'string', default: '10' },
  },
});
const maxTokens = Number(opt['max-tokens']);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function rssMiB() {
  if (!opt.pid) return null;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${opt.pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : null;
}

async function metrics() {
  const text = await (await fetch(`${opt.url}/metrics`)).text();
  const get = (name) => {
    const m = new RegExp(`^${name} ([0-9.eE+-]+)$`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  return {
    running: get('strata_requests_running'),
    waiting: get('strata_requests_waiting'),
    kv_blocks_used: get('strata_kv_blocks_used'),
    rejected_total: get('strata_requests_rejected_total'),
  };
}

// Waits until nothing runs or waits and no KV block is held (or the time runs out).
async function settle(seconds) {
  let m;
  for (let i = 0; i < seconds * 10; ++i) {
    m = await metrics();
    if (m.running === 0 && m.waiting === 0 && m.kv_blocks_used === 0) break;
    await sleep(100);
  }
  return m;
}

const body = (i) => JSON.stringify({
  model: 'default', stream: true, max_tokens: maxTokens, temperature: 0, ignore_eos: true,
  messages: [{ role: 'user', content: `Stream ${i}: tell me about the weather on day ${i}.` }],
});

// Reads an SSE response to its end; returns whether it ended with [DONE] and how many chunks came.
async function readStream(res, stopAfter = Infinity, abort = null) {
  let chunks = 0;
  let done = false;
  for await (const data of sseData(res.body)) {
    if (data === '[DONE]') done = true;
    else ++chunks;
    if (chunks >= stopAfter && abort) {
      abort.abort();
      return { done, chunks };
    }
  }
  return { done, chunks };
}

async function sseScenario(n) {
  const t0 = performance.now();
  const statuses = {};
  let complete = 0;
  let broken = 0;
  const errors = [];
  let peakRss = rssMiB();
  const watch = setInterval(() => { const r = rssMiB(); if (r !== null && r > peakRss) peakRss = r; }, 200);
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    try {
      const res = await fetch(`${opt.url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: body(i) });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      if (res.status !== 200) { await res.text(); return; }
      const r = await readStream(res);
      if (r.done) ++complete; else ++broken;
    } catch (e) {
      statuses.network_error = (statuses.network_error ?? 0) + 1;
      if (errors.length < 3) errors.push(String(e.cause?.code ?? e.message));
    }
  }));
  clearInterval(watch);
  const after = await settle(30);
  const unexpected = Object.entries(statuses).filter(([s]) => s !== '200' && s !== '429').reduce((a, [, c]) => a + c, 0);
  return { scenario: 'sse', streams: n, statuses, complete, broken, unexpected, errors, wall_s: (performance.now() - t0) / 1000,
    peak_rss_mib: peakRss, after };
}

async function wsIdleScenario(n) {
  const wsUrl = opt.url.replace(/^http/, 'ws') + '/v1/ws';
  const before = rssMiB();
  const sockets = [];
  let failed = 0;
  const errors = [];
  const t0 = performance.now();
  // Opened in waves so that the listen backlog is not the thing measured.
  for (let i = 0; i < n; i += 500) {
    const wave = Array.from({ length: Math.min(500, n - i) }, () => new Promise((resolve) => {
      const ws = new WebSocket(wsUrl);
      ws.on('open', () => { sockets.push(ws); resolve(); });
      ws.on('error', (e) => { ++failed; if (errors.length < 3) errors.push(String(e.code ?? e.message)); resolve(); });
    }));
    await Promise.all(wave);
  }
  const opened = (performance.now() - t0) / 1000;
  const atOpen = rssMiB();
  await sleep(Number(opt['hold-s']) * 1000);
  const afterHold = rssMiB();
  // Every socket still answers: one request on a sample of them.
  let answered = 0;
  const sample = sockets.filter((_, i) => i % Math.max(1, Math.floor(sockets.length / 20)) === 0);
  await Promise.all(sample.map((ws, i) => new Promise((resolve) => {
    ws.on('message', (data) => {
      const f = JSON.parse(data.toString());
      if (f.type === 'done' || f.type === 'error') { if (f.type === 'done') ++answered; resolve(); }
    });
    ws.send(JSON.stringify({ type: 'request', id: `s${i}`, endpoint: 'chat.completions',
      body: { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0 } }));
  })));
  const stillOpen = sockets.filter((ws) => ws.readyState === WebSocket.OPEN).length;
  for (const ws of sockets) ws.terminate();
  await sleep(1000);
  return { scenario: 'ws-idle', connections: n, opened: sockets.length, failed, errors, open_s: opened,
    rss_before_mib: before, rss_open_mib: atOpen, rss_after_hold_mib: afterHold, rss_after_close_mib: rssMiB(),
    per_connection_kib: before !== null ? ((atOpen - before) * 1024) / Math.max(1, sockets.length) : null,
    still_open_after_hold: stillOpen, sample_answered: `${answered}/${sample.length}` };
}

async function stormScenario(n) {
  const before = await settle(30);
  const t0 = performance.now();
  let dropped = 0;
  let rejected = 0;
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    const abort = new AbortController();
    try {
      const res = await fetch(`${opt.url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ ...JSON.parse(body(i)), max_tokens: 256 }), signal: abort.signal });
      if (res.status !== 200) { ++rejected; await res.text(); return; }
      // Drop the connection after a few chunks (the role chunk and a token or two): mid-stream.
      await readStream(res, 2 + (i % 3), abort);
      ++dropped;
    } catch (e) {
      if (e.name === 'AbortError') ++dropped;
    }
  }));
  const after = await settle(60);
  return { scenario: 'storm', streams: n, dropped, rejected, wall_s: (performance.now() - t0) / 1000, before, after,
    clean: after.running === 0 && after.waiting === 0 && after.kv_blocks_used === 0 };
}

if (Number(opt.sse) > 0) console.log(JSON.stringify(await sseScenario(Number(opt.sse))));
if (Number(opt['ws-idle']) > 0) console.log(JSON.stringify(await wsIdleScenario(Number(opt['ws-idle']))));
if (Number(opt.storm) > 0) console.log(JSON.stringify(await stormScenario(Number(opt.storm))));
