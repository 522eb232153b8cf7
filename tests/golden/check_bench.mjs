// Runs `strata bench --json` on one shared model and checks its report: every key other tools read
// is there, the figures are finite and positive, and they agree with one another (the bytes per
// token are the weights' plus the KV's, the bound is the median bandwidth over them, the median
// probe lies between the slowest and the fastest, the probe's read loop is one of the three).
import { execFileSync } from 'node:child_process';

const [strata, shared, name] = process.argv.slice(2);
const prompt = 16, gen = 20;  // two stretches of decode: 16 tokens and 4
const text = execFileSync(strata, ['bench', '--model', `${shared}/models/${name}.gguf`, '--prompt', `${prompt}`,
  '--gen', `${gen}`, '--json'], { encoding: 'utf8' });
const r = JSON.parse(text);
const fail = (msg) => { console.error(`${name}: ${msg}\n${text}`); process.exit(1); };
const close = (a, b) => Math.abs(a - b) <= 1e-6 * Math.max(Math.abs(a), Math.abs(b));

for (const k of ['open_s', 'file_bytes', 'prefill_tok_s', 'decode_tok_s', 'bandwidth_gb_s', 'bandwidth_min_gb_s',
  'bandwidth_max_gb_s', 'bytes_per_token', 'weight_bytes_per_token', 'kv_bytes_per_token', 'decode_bound_tok_s',
  'bandwidth_share']) {
  if (typeof r[k] !== 'number' || !Number.isFinite(r[k]) || r[k] <= 0) fail(`${k} is ${r[k]}`);
}
if (r.prompt_tokens !== prompt || r.gen_tokens !== gen) fail(`ran ${r.prompt_tokens} + ${r.gen_tokens} tokens`);
if (![1, 2, 4].includes(r.probe_loads_per_iteration)) fail(`probe loop of ${r.probe_loads_per_iteration} loads`);
if (!(r.bandwidth_min_gb_s <= r.bandwidth_gb_s && r.bandwidth_gb_s <= r.bandwidth_max_gb_s)) fail('median bandwidth outside its range');
if (!close(r.bytes_per_token, r.weight_bytes_per_token + r.kv_bytes_per_token)) fail('bytes per token are not weights + KV');
if (!close(r.decode_bound_tok_s, r.bandwidth_gb_s * 1e9 / r.bytes_per_token)) fail('bound is not bandwidth / bytes per token');
if (r.weight_bytes_per_token > r.file_bytes) fail('reads more weight bytes per token than the file holds');
console.log(`${name}: decode ${r.decode_tok_s.toFixed(1)} tok/s, ${(100 * r.bandwidth_share).toFixed(0)}% of the bound`);
