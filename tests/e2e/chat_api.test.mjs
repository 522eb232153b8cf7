// The OpenAI API as the official `openai` npm SDK sees it, against the real server running one of
// the ../shared models (random weights, real tokenizer).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, sharedDir } from './server.mjs';

let server;
let client;
const model = `${sharedDir}/models/tiny-qwen2-gpt2-f16.gguf`;

before(async () => {
  server = await startServer(['-m', model]);
  client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'SIGTERM exits 0');
});

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name three colours.' },
];

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('a chat completion has the OpenAI shape and honest usage', async () => {
  const r = await client.chat.completions.create({ model: 'any-name', messages, max_tokens: 12, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.created, 'number');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].index, 0);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 10, 'the template wraps the messages');
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
});

test('a streamed chat gives the role first, the same text as unstreamed, then usage', async () => {
  const body = { model: 'm', messages, max_tokens: 16, temperature: 0, ignore_eos: true };
  const plain = await client.chat.completions.create(body);
  const chunks = await collect(await client.chat.completions.create({
    ...body, stream: true, stream_options: { include_usage: true },
  }));
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  const text = withChoices.map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(withChoices.at(-1).choices[0].finish_reason, 'length');
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.id, chunks[0].id, 'one id for the whole stream');
  }
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 16);
  assert.equal(last.usage.prompt_tokens, plain.usage.prompt_tokens);
});

test('the same seed gives the same sampled text; n gives several choices', async () => {
  const body = { model: 'm', messages, max_tokens: 12, temperature: 1.0, top_p: 0.95, seed: 1234, ignore_eos: true };
  const a = await client.chat.completions.create(body);
  const b = await client.chat.completions.create(body);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const many = await client.chat.completions.create({ ...body, n: 3 });
  assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(many.usage.completion_tokens, 36);
});

test('a stop sequence ends the text before it and is never sent', async () => {
  const body = { model: 'm', messages, max_tokens: 24, temperature: 0, ignore_eos: true };
  const full = (await client.chat.completions.create(body)).choices[0].message.content;
  assert.ok(full.length >= 6, `needs some text to cut: ${JSON.stringify(full)}`);
  // A stop string taken from the middle of the greedy text (it may span token boundaries).
  const at = Math.floor(full.length / 2);
  const stop = full.slice(at, at + 3);
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ ...body, stop: [stop, 'never-appears'] });
  assert.equal(r.choices[0].message.content, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const chunks = await collect(await client.chat.completions.create({ ...body, stop, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), expected);
});

test('logprobs report the chosen token and its alternatives', async () => {
  const r = await client.chat.completions.create({
    model: 'm', messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= 0);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(entry.logprob - entry.top_logprobs[0].logprob) < 1e-5);
    assert.ok(entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob);
  }
});

test('completions: a text prompt, streamed and not', async () => {
  const body = { model: 'm', prompt: 'The capital of France is', max_tokens: 8, temperature: 0, ignore_eos: true };
  const r = await client.completions.create(body);
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  const chunks = await collect(await client.completions.create({ ...body, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), r.choices[0].text);
});

test('tokenize and detokenize round-trip', async () => {
  const text = 'Hello world, 123!';
  const t = await (await fetch(`${server.baseURL}/tokenize`, {
    method: 'POST', body: JSON.stringify({ content: text, add_special: false }),
  })).json();
  assert.ok(Array.isArray(t.tokens) && t.tokens.length > 0);
  const d = await (await fetch(`${server.baseURL}/detokenize`, {
    method: 'POST', body: JSON.stringify({ tokens: t.tokens }),
  })).json();
  assert.equal(d.content, text);
});

test('bad requests are OpenAI-shaped 400s naming the parameter', async () => {
  const cases = [
    [{ model: 'm', messages, temperature: 'hot' }, 'temperature'],
    [{ model: 'm', messages, temperature: 7 }, 'temperature'],
    [{ model: 'm', messages, top_logprobs: 3 }, 'top_logprobs'],
    [{ model: 'm', messages: [{ role: 'wizard', content: 'x' }] }, 'messages'],
    [{ model: 'm' }, 'messages'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(client.chat.completions.create(body), (e) => {
      assert.equal(e.status, 400, JSON.stringify(body));
      assert.equal(e.error?.type ?? e.type, 'invalid_request_error');
      assert.match(String(e.param ?? e.error?.param), new RegExp(param));
      return true;
    });
  }
  const res = await fetch(`${server.baseURL}/v1/chat/completions`, { method: 'POST', body: '{"model": "m", "messages": [' });
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.type, 'invalid_request_error');
});

test('a client that goes away mid-stream frees its sequence', async () => {
  const controller = new AbortController();
  const res = await fetch(`${server.baseURL}/v1/chat/completions`, {
    method: 'POST',
    signal: controller.signal,
    body: JSON.stringify({ model: 'm', messages, max_tokens: 100000, ignore_eos: true, stream: true }),
  });
  const reader = res.body.getReader();
  await reader.read();
  await reader.read();
  controller.abort();
  const running = async () => {
    const text = await (await fetch(`${server.baseURL}/metrics`)).text();
    return Number(text.match(/^strata_requests_running (\S+)$/m)[1]);
  };
  const deadline = Date.now() + 10_000;
  while ((await running()) !== 0) {
    assert.ok(Date.now() < deadline, 'the sequence was never cancelled');
    await new Promise((r) => setTimeout(r, 50));
  }
  // The tokens it did generate were timed: a first token, and the ones after it.
  const text = await (await fetch(`${server.baseURL}/metrics`)).text();
  assert.ok(Number(text.match(/^strata_ttft_seconds_count (\S+)$/m)[1]) >= 1);
  assert.ok(Number(text.match(/^strata_inter_token_seconds_count (\S+)$/m)[1]) >= 1);
});

test('the next turn of a conversation reuses the cached prefix and gives the same text', async () => {
  const long = Array.from({ length: 60 }, (_, i) => `rule ${i}: answer in the fewest words`).join('. ');
  const convo = [{ role: 'system', content: long }, { role: 'user', content: 'What is a prefix cache?' }];
  const body = { model: 'm', messages: convo, max_tokens: 8, temperature: 0, ignore_eos: true };
  const metric = async (name) => {
    const text = await (await fetch(`${server.baseURL}/metrics`)).text();
    return Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))[1]);
  };
  const hitsBefore = await metric('strata_prefix_cache_hits_total');
  const first = await client.chat.completions.create(body);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0, 'a new system prompt is not cached');
  const again = await client.chat.completions.create(body);
  const cached = again.usage.prompt_tokens_details.cached_tokens;
  // The first request computed its prompt and 7 of its 8 tokens: every full block before the last
  // prompt token is reused, and the tokens after them too when they are in the last, partly
  // filled block that the first request left (the last prompt token is always computed).
  const p = first.usage.prompt_tokens;
  const full = Math.floor((p - 1) / 32) * 32;
  const expected = Math.floor((p + 7) / 32) * 32 === full ? p - 1 : full;
  assert.equal(cached, expected, `reused ${cached} of ${p} prompt tokens`);
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);

  // The next turn: the whole previous exchange is a cached prefix.
  const next = await client.chat.completions.create({
    ...body,
    messages: [...convo, { role: 'assistant', content: first.choices[0].message.content }, { role: 'user', content: 'Shorter.' }],
  });
  assert.ok(next.usage.prompt_tokens_details.cached_tokens >= cached);
  assert.ok(await metric('strata_prefix_cache_hits_total') >= hitsBefore + cached);
  assert.ok(await metric('strata_kv_blocks_cached') > 0);
});

test('kv_bits 8 and 4 run with quantized KV; their cached blocks never serve another format', async () => {
  const long = Array.from({ length: 40 }, (_, i) => `clause ${i} of a long shared preamble`).join('; ');
  const convo = [{ role: 'system', content: long }, { role: 'user', content: 'Summarize.' }];
  const body = { model: 'm', messages: convo, max_tokens: 6, temperature: 0, ignore_eos: true };
  const f16 = await client.chat.completions.create({ ...body, kv_bits: 16 });
  for (const bits of [8, 4]) {
    const first = await client.chat.completions.create({ ...body, kv_bits: bits });
    assert.equal(first.usage.completion_tokens, 6);
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0, `kv_bits ${bits} reused f16 blocks`);
    const again = await client.chat.completions.create({ ...body, kv_bits: bits });
    assert.ok(again.usage.prompt_tokens_details.cached_tokens > 0, `kv_bits ${bits} blocks are cached`);
    assert.equal(again.choices[0].message.content, first.choices[0].message.content);
  }
  assert.equal(f16.usage.prompt_tokens_details.cached_tokens, 0);
});

test('GET /admin/api/stats reports the RAM tier per KV format, hits and evictions', async () => {
  const res = await fetch(`${server.baseURL}/admin/api/stats`);
  assert.equal(res.status, 200);
  const s = await res.json();
  assert.equal(s.cache_mode, 'hot');
  assert.equal(s.block_tokens, 32);
  assert.equal(s.tiers.ssd, null);
  const ram = s.tiers.ram;
  for (const f of ['f16', 'q8_0', 'q4_0']) {
    for (const k of ['in_use', 'cached', 'free', 'bytes_per_block']) assert.equal(typeof ram.blocks[f][k], 'number', `${f}.${k}`);
    assert.ok(s.kv_bytes_per_token[f] > 0);
  }
  // Earlier tests cached f16, q8_0 and q4_0 blocks.
  assert.ok(ram.blocks.f16.cached > 0 && ram.blocks.q8_0.cached > 0 && ram.blocks.q4_0.cached > 0);
  assert.ok(s.kv_bytes_per_token.q4_0 < s.kv_bytes_per_token.q8_0 && s.kv_bytes_per_token.q8_0 < s.kv_bytes_per_token.f16);
  assert.ok(ram.bytes_cached > 0 && ram.bytes_cached <= ram.cached_budget_bytes);
  assert.ok(s.prefix_cache.hit_tokens > 0 && s.prefix_cache.hit_rate > 0 && s.prefix_cache.hit_rate < 1);
  assert.equal(s.snapshot_bytes, 0);
});
