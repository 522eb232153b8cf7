#!/usr/bin/env node
// strata's load generator: drives any OpenAI-compatible server with N concurrent streaming chat
// requests and reports TTFT, inter-token and end-to-end latency percentiles, throughput, errors
// and cached prompt tokens, as JSON (and a PNG through gnuplot with --plot).
//
//   node bench/loadgen.mjs --url http://127.0.0.1:8080 --concurrency 16 --requests 64 \
//        --scenario independent|shared-system|multi-turn|documents --prompt-tokens 200 --max-tokens 64
//
// Scenarios:
//   independent    every request a fresh prompt
//   shared-system  one long system prompt shared by all, a short distinct user question each
//   multi-turn     each stream is a chat whose history grows by its own previous answers
//   documents      --users users each own a long document, asked --turns questions in turn
//                  (--pick cycle, the default) or by a user drawn at random each time (--pick random)
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { sseData } from './sse.mjs';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    model: { type: 'string', default: 'default' },
    'api-key': { type: 'string', default: '' },
    concurrency: { type: 'string', default: '16' },
    requests: { type: 'string', default: '64' },
    scenario: { type: 'string', default: 'independent' },
    'prompt-tokens': { type: 'string', default: '200' },
    'max-tokens': { type: 'string', default: '64' },
    users: { type: 'string', default: '64' },
    turns: { type: 'string', default: '4' },
    pick: { type: 'string', default: 'cycle' },
    temperature: { type: 'string', default: '0' },
    'timeout-s': { type: 'string', default: '600' },
    seed: { type: 'string', default: '1' },
    label: { type: 'string', default: '' },
    out: { type: 'string', default: '' },
    plot: { type: 'string', default: '' },
  },
});

const N = Number(opt.concurrency);
const total = Number(opt.requests);
const promptTokens = Number(opt['prompt-tokens']);
const maxTokens = Number(opt['max-tokens']);
const deadline = Date.now() + Number(opt['timeout-s']) * 1000;

// A deterministic word stream: about one token per word for common BPE vocabularies.
let rngState = BigInt(opt.seed) || 1n;
function rand() {
  rngState ^= rngState << 13n; rngState &= (1n << 64n) - 1n;
  rngState ^= rngState >> 7n;
  rngState ^= rngState << 17n; rngState &= (1n << 64n) - 1n;
  return Number(rngState % 1000000n) / 1000000;
}
const words = 'time person year way day thing man world life hand part child eye woman place work week case point government company number group problem fact'.split(' ');
const text = (n) => Array.from({ length: n }, () => words[Math.floor(rand() * words.length)]).join(' ');

const sharedSystem = text(promptTokens);
const documents = Array.from({ length: Number(opt.users) }, () => text(promptTokens));
const histories = new Map();

function nextRequest(i) {
  switch (opt.scenario) {
    case 'independent':
      return { key: i, messages: [{ role: 'user', content: text(promptTokens) }] };
    case 'shared-system':
      return { key: i, messages: [{ role: 'system', content: sharedSystem }, { role: 'user', content: text(16) }] };
    case 'multi-turn': {
      const stream = i % N;
      const h = histories.get(stream) ?? [{ role: 'user', content: text(promptTokens) }];
      histories.set(stream, h);
      return { key: stream, messages: [...h], history: h };
    }
    case 'documents': {
      const user = opt.pick === 'random' ? Math.floor(rand() * documents.length) : i % documents.length;
      return { key: user, messages: [{ role: 'system', content: documents[user] }, { role: 'user', content: `Question ${Math.floor(i / documents.length)}: ${text(12)}` }] };
    }
    default:
      throw new Error(`unknown scenario ${opt.scenario}`);
  }
}

async function runOne(req) {
  const t0 = performance.now();
  const r = { ok: false, status: 0, ttft: null, last: null, itl: [], e2e: null, completion_tokens: 0, prompt_tokens: 0, cached_tokens: 0, error: null, text: '' };
  try {
    const res = await fetch(`${opt.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(opt['api-key'] ? { Authorization: `Bearer ${opt['api-key']}` } : {}) },
      body: JSON.stringify({ model: opt.model, messages: req.messages, max_tokens: maxTokens, temperature: Number(opt.temperature),
        stream: true, stream_options: { include_usage: true }, ignore_eos: true }),
      signal: AbortSignal.timeout(Math.max(1000, deadline - Date.now())),
    });
    r.status = res.status;
    if (!res.ok) { r.error = (await res.text()).slice(0, 200); return r; }
    let last = null;
    for await (const data of sseData(res.body)) {
      if (data === '[DONE]') continue;
      const obj = JSON.parse(data);
      if (obj.usage) {
        r.prompt_tokens = obj.usage.prompt_tokens;
        r.completion_tokens = obj.usage.completion_tokens;
        r.cached_tokens = obj.usage.prompt_tokens_details?.cached_tokens ?? 0;
      }
      const delta = obj.choices?.[0]?.delta?.content;
      if (delta) {
        const now = performance.now();
        if (r.ttft === null) r.ttft = now - t0; else r.itl.push(now - last);
        last = now;
        r.last = now - t0;
        r.text += delta;
      }
    }
    r.e2e = performance.now() - t0;
    r.ok = true;
  } catch (e) {
    r.error = String(e.message ?? e);
  }
  return r;
}

const pct = (xs, p) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const summary = (xs) => ({ p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99), n: xs.length });

const results = [];
const timeline = [];
let issued = 0;
const start = performance.now();
async function worker() {
  while (issued < total && Date.now() < deadline) {
    const i = issued++;
    const req = nextRequest(i);
    const r = await runOne(req);
    if (req.history && r.ok) req.history.push({ role: 'assistant', content: r.text }, { role: 'user', content: text(24) });
    r.text = undefined;
    results.push(r);
    timeline.push([(performance.now() - start) / 1000, r.ttft, r.e2e]);
  }
}
await Promise.all(Array.from({ length: N }, worker));
const wall = (performance.now() - start) / 1000;

const ok = results.filter((r) => r.ok);
const generated = ok.reduce((a, r) => a + r.completion_tokens, 0);
const prompt = ok.reduce((a, r) => a + r.prompt_tokens, 0);
const cached = ok.reduce((a, r) => a + r.cached_tokens, 0);
const statuses = {};
for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
const report = {
  label: opt.label || undefined,
  url: opt.url,
  scenario: opt.scenario,
  concurrency: N,
  requests: results.length,
  ok: ok.length,
  errors: results.length - ok.length,
  statuses,
  first_errors: results.filter((r) => !r.ok).slice(0, 3).map((r) => r.error),
  wall_s: wall,
  generated_tokens: generated,
  generated_tok_s: generated / wall,
  prompt_tokens: prompt,
  cached_tokens: cached,
  cached_fraction: prompt ? cached / prompt : 0,
  ttft_ms: summary(ok.map((r) => r.ttft).filter((x) => x !== null)),
  itl_ms: summary(ok.flatMap((r) => r.itl)),
  e2e_ms: summary(ok.map((r) => r.e2e)),
  // Each stream's decode speed: the tokens after the first over the time from the first content
  // to the last (what `strata bench` calls decode).
  decode_tok_s: summary(ok.filter((r) => r.completion_tokens > 1 && r.last > r.ttft)
    .map((r) => (r.completion_tokens - 1) / ((r.last - r.ttft) / 1000))),
};
const json = JSON.stringify(report, null, 2);
if (opt.out) writeFileSync(opt.out, json + '\n');
console.log(json);

if (opt.plot) {
  const dat = `${opt.plot}.dat`;
  writeFileSync(dat, timeline.map((t) => t.map((x) => (x === null ? 'NaN' : x)).join(' ')).join('\n') + '\n');
  const script = `set terminal png size 900,500; set output '${opt.plot}';
set title 'strata loadgen: ${opt.scenario}, ${N} streams'; set xlabel 'time (s)'; set ylabel 'ms'; set key left top;
plot '${dat}' using 1:2 with points title 'TTFT', '${dat}' using 1:3 with points title 'end-to-end'`;
  execFileSync('gnuplot', { input: script });
}
