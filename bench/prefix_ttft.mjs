#!/usr/bin/env node
// Time to first token of a long prompt whose prefix is cached, against the same prompt cold.
// Each round sends a fresh random prompt of --tokens token ids (cold: nothing of it is cached), then
// a prompt sharing its first --cached tokens and continuing differently (warm). Prints the medians
// of both TTFTs, their ratio, and the cached_tokens the server reported.
// --phase cold sends only the cold prompts and --phase warm only the warm ones (the same prompts
// for the same --seed), so that the server can be killed and restarted in between.
//
//   node bench/prefix_ttft.mjs --url http://127.0.0.1:8080 --tokens 3000 --cached 2990 --rounds 3
import { parseArgs } from 'node:util';
import { sseData } from './sse.mjs';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    tokens: { type: 'string', default: '3000' },
    cached: { type: 'string', default: '2990' },
    rounds: { type: 'string', default: '3' },
    'vocab-from': { type: 'string', default: '300' },
    'vocab-to': { type: 'string', default: '50000' },
    seed: { type: 'string', default: '7' },
    phase: { type: 'string', default: 'both' },
  },
});
const n = Number(opt.tokens);
const keep = Number(opt.cached);
const lo = Number(opt['vocab-from']);
const span = Number(opt['vocab-to']) - lo;
let state = Number(opt.seed) >>> 0 || 1;
const rand = () => {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state;
};
const tokens = (k) => Array.from({ length: k }, () => lo + (rand() % span));

async function ttft(prompt) {
  const t0 = performance.now();
  const res = await fetch(`${opt.url}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt, max_tokens: 2, temperature: 0, ignore_eos: true, stream: true,
      stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first = null;
  let cached = 0;
  for await (const data of sseData(res.body)) {
    if (data === '[DONE]') continue;
    const obj = JSON.parse(data);
    if (first === null && obj.choices?.length) first = performance.now() - t0;
    if (obj.usage) cached = obj.usage.prompt_tokens_details?.cached_tokens ?? 0;
  }
  return { ms: first, cached };
}

// The client's own first request sets up its connection machinery (about 150 ms in Node): pay it
// here, untimed, so that a phase run in a fresh process measures the server only.
await fetch(`${opt.url}/health`).then((r) => r.text());

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cold = [], warm = [], cachedTokens = [];
const runCold = opt.phase !== 'warm', runWarm = opt.phase !== 'cold';
for (let r = 0; r < Number(opt.rounds); ++r) {
  const a = tokens(n);
  const b = [...a.slice(0, keep), ...tokens(n - keep)];
  const c = runCold ? await ttft(a) : null;
  const w = runWarm ? await ttft(b) : null;
  if (c) cold.push(c.ms);
  if (w) {
    warm.push(w.ms);
    cachedTokens.push(w.cached);
  }
  console.log(`round ${r + 1}:` + (c ? ` cold ${c.ms.toFixed(0)} ms (cached ${c.cached})` : '') +
    (w ? ` warm ${w.ms.toFixed(1)} ms (cached ${w.cached} of ${n})` : ''));
}
const mc = cold.length ? median(cold) : null, mw = warm.length ? median(warm) : null;
console.log(JSON.stringify({ tokens: n, shared_prefix: keep, rounds: Number(opt.rounds), cold_ttft_ms: mc, warm_ttft_ms: mw,
  warm_over_cold: mc && mw ? mw / mc : null, cached_tokens: cachedTokens.length ? median(cachedTokens) : null }));
