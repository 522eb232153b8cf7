// The SSD tier through the real server: prefixes outlive the process. A clean stop (SIGTERM)
// flushes what is queued and exits 0; a restarted server answers from the SSD with the tokens of
// a server that caches nothing. Then 50 rounds of kill -9 in the middle of heavy writes: no
// answer is ever wrong, the server always starts again, and the directory holds nothing but
// segment files within its budget.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readdirSync, statSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, sharedDir } from './server.mjs';

const model = `${sharedDir}/models/tiny-llama-spm-f16.gguf`;
const work = mkdtempSync(join(tmpdir(), 'strata-ssd-e2e-'));
const ssdMax = 16 << 20;
const conf = join(work, 'tiered.toml');
writeFileSync(conf, `[cache]\nmode = "tiered"\nssd_max = "16MiB"\nhot_memory = "8MiB"\n[kv]\nmemory = "16MiB"\nblock_tokens = 16\n`);
const args = ['--config', conf, '-m', model];

// A fixed pseudo-random generator: the prompts differ between runs of the test, not within one.
let seed = (Date.now() ^ process.pid) >>> 0;
console.log(`seed ${seed}`);
function rand() {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed;
}
const tokens = (n) => Array.from({ length: n }, () => 3 + (rand() % 250));

async function complete(server, prompt, maxTokens = 6) {
  const res = await fetch(`${server.baseURL}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const body = await res.json();
  return { text: body.choices[0].text, cached: body.usage.prompt_tokens_details.cached_tokens, promptTokens: body.usage.prompt_tokens };
}

function segmentDir(dir) {
  return join(dir, 'kv');
}

function listing(dir) {
  const d = segmentDir(dir);
  if (!existsSync(d)) return { files: [], bytes: 0 };
  const files = readdirSync(d);
  return { files, bytes: files.reduce((s, f) => s + statSync(join(d, f)).size, 0) };
}

const known = Array.from({ length: 6 }, (_, i) => tokens(80 + 30 * i));
let reference;

before(async () => {
  const cold = await startServer(['-m', model, '--cache-mode', 'off']);
  reference = [];
  for (const p of known) reference.push((await complete(cold, p)).text);
  assert.equal((await cold.stop()).code, 0);
});

after(() => rmSync(work, { recursive: true, force: true }));

test('a clean stop flushes the tier and a restarted server restores the prefixes with the same tokens', async () => {
  const dir = join(work, 'clean');
  let server = await startServer(args, { cacheDir: dir });
  for (let i = 0; i < known.length; i++) assert.equal((await complete(server, known[i])).text, reference[i]);
  const written = await (await fetch(`${server.baseURL}/metrics`)).text();
  assert.match(written, /^strata_ssd_write_bytes_total [1-9]\d*$/m, 'no SSD bytes written (or not yet: writes are queued)');
  const t0 = Date.now();
  const { code } = await server.stop();
  assert.equal(code, 0);
  assert.ok(Date.now() - t0 < 10_000, 'SIGTERM took more than 10 s');
  assert.match(server.log(), /SSD tier: queued writes flushed/);
  assert.ok(listing(dir).files.length > 0, 'nothing on the SSD after a clean stop');

  server = await startServer(args, { cacheDir: dir });
  let blocksRead = 0, tokensRestored = 0;
  for (let i = 0; i < known.length; i++) {
    const r = await complete(server, known[i]);
    assert.equal(r.text, reference[i], `prompt ${i} after restart`);
    // Before the restart the prompt and 5 of its 6 generated tokens were computed: full blocks,
    // then a tail (the last block, partly filled) starting at `tail`. The full blocks before the
    // last prompt token come back; so does the tail when it starts right after them, and then
    // everything but the last prompt token (always computed) is reused.
    const full = Math.floor((r.promptTokens - 1) / 16) * 16;
    const tail = Math.floor((r.promptTokens + 5) / 16) * 16;
    const expected = tail === full ? r.promptTokens - 1 : full;
    assert.equal(r.cached, expected, `prompt ${i}: cached_tokens after restart`);
    blocksRead += full / 16 + (tail === full ? 1 : 0);
    tokensRestored += expected;
  }
  const metrics = await (await fetch(`${server.baseURL}/metrics`)).text();
  const restored = Number(metrics.match(/^strata_prefix_cache_ssd_hits_total (\d+)/m)?.[1] ?? 0);
  assert.ok(restored > 0, 'strata_prefix_cache_ssd_hits_total is 0');
  const counter = (name) => Number(metrics.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? -1);
  // Every restored token came in a block read from the disk.
  assert.equal(restored, tokensRestored);
  assert.equal(counter('strata_ssd_reads_total'), blocksRead);
  assert.ok(counter('strata_ssd_read_bytes_total') > 0, 'no SSD bytes read');
  assert.equal(counter('strata_ssd_read_failures_total'), 0);
  assert.equal((await server.stop()).code, 0);
});

test('kill -9 during heavy writes, 50 times: never a wrong token, and no garbage that grows', async () => {
  const dir = join(work, 'crash');
  let hits = 0, tornStarts = 0, readFailures = 0;
  for (let cycle = 0; cycle < 50; cycle++) {
    const server = await startServer(args, { cacheDir: dir });
    if (/[1-9]\d* torn tails/.test(server.log())) tornStarts++;
    // Known prompts first (answers checked), then a burst of new long prompts, killed mid-write.
    const order = known.map((_, i) => i).filter(() => rand() % 2 === 0);
    const answers = await Promise.all(order.map((i) => complete(server, known[i])));
    answers.forEach((r, k) => {
      assert.equal(r.text, reference[order[k]], `cycle ${cycle}: prompt ${order[k]} (cached ${r.cached})`);
      hits += r.cached > 0;
    });
    const burst = Array.from({ length: 12 }, () => complete(server, tokens(300 + (rand() % 300)), 1).catch(() => null));
    await new Promise((r) => setTimeout(r, 10 + (rand() % 150)));
    const metrics = await (await fetch(`${server.baseURL}/metrics`).catch(() => null))?.text();
    readFailures += Number(metrics?.match(/^strata_ssd_read_failures_total (\d+)/m)?.[1] ?? 0);
    const { signal } = await server.kill9();
    assert.equal(signal, 'SIGKILL');
    await Promise.all(burst);
    const { files, bytes } = listing(dir);
    for (const f of files) assert.match(f, /^seg-[0-9a-f]{16}\.kv$/, `cycle ${cycle}: stray file ${f}`);
    // Past the budget by at most what the last run wrote before the next start evicts it.
    assert.ok(bytes <= 2 * ssdMax, `cycle ${cycle}: ${bytes} bytes of segments, budget ${ssdMax}`);
  }
  console.log(`${hits} answers with restored prefixes; ${tornStarts} starts found a torn segment tail; ${readFailures} reads failed their checks`);
  assert.ok(hits > 0, 'no known prompt was ever restored from the SSD');
  const server = await startServer(args, { cacheDir: dir });
  for (let i = 0; i < known.length; i++) assert.equal((await complete(server, known[i])).text, reference[i], `prompt ${i} at the end`);
  assert.equal((await server.stop()).code, 0);
  assert.ok(listing(dir).bytes <= ssdMax + (ssdMax >> 3), `segments over budget after a clean start: ${listing(dir).bytes}`);
});
