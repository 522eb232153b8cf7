// WebSocket token streams at /v1/ws, driven by the `ws` npm client.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startServer, sharedDir } from './server.mjs';

let server;
before(async () => { server = await startServer(['-m', `${sharedDir}/models/tiny-llama-spm-f16.gguf`]); });
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0);
});

function open() {
  const ws = new WebSocket(`${server.baseURL.replace('http', 'ws')}/v1/ws`);
  const frames = [];
  const waiters = [];
  ws.on('message', (data) => {
    frames.push(JSON.parse(data.toString()));
    for (const w of waiters.splice(0)) w();
  });
  const until = async (pred, ms = 30_000) => {
    const deadline = Date.now() + ms;
    while (!pred(frames)) {
      assert.ok(Date.now() < deadline, `timed out; frames: ${JSON.stringify(frames).slice(0, 500)}`);
      await new Promise((r) => { waiters.push(r); setTimeout(r, 100); });
    }
  };
  return new Promise((resolve, reject) => {
    ws.on('open', () => resolve({ ws, frames, until }));
    ws.on('error', reject);
  });
}

const chat = (content, extra = {}) => ({
  model: 'm', messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0, ignore_eos: true, ...extra,
});

test('several requests interleave on one socket and each ends with done', async () => {
  const { ws, frames, until } = await open();
  ws.send(JSON.stringify({ type: 'request', id: 'a', endpoint: 'chat.completions', body: chat('first') }));
  ws.send(JSON.stringify({ type: 'request', id: 'b', endpoint: 'completions',
    body: { model: 'm', prompt: 'second', max_tokens: 6, temperature: 0, ignore_eos: true } }));
  await until((f) => f.filter((x) => x.type === 'done').length === 2);
  for (const id of ['a', 'b']) {
    const mine = frames.filter((f) => f.id === id);
    assert.equal(mine.at(-1).type, 'done');
    const chunks = mine.filter((f) => f.type === 'chunk').map((f) => f.data);
    assert.ok(chunks.length >= 2);
    assert.equal(chunks[0].object, id === 'a' ? 'chat.completion.chunk' : 'text_completion');
  }
  // The text equals what the same request gives over HTTP.
  const http = await (await fetch(`${server.baseURL}/v1/chat/completions`, {
    method: 'POST', body: JSON.stringify(chat('first')),
  })).json();
  const wsText = frames.filter((f) => f.id === 'a' && f.type === 'chunk')
    .map((f) => f.data.choices[0]?.delta?.content ?? '').join('');
  assert.equal(wsText, http.choices[0].message.content);
  ws.close();
});

test('a bad request errors alone and the socket stays usable', async () => {
  const { ws, frames, until } = await open();
  ws.send('this is not json');
  ws.send(JSON.stringify({ type: 'request', id: 'bad', endpoint: 'chat.completions', body: chat('x', { temperature: -1 }) }));
  ws.send(JSON.stringify({ type: 'request', id: 'good', endpoint: 'chat.completions', body: chat('y') }));
  await until((f) => f.some((x) => x.id === 'good' && x.type === 'done'));
  const bad = frames.find((f) => f.id === 'bad');
  assert.equal(bad.type, 'error');
  assert.equal(bad.error.param, 'temperature');
  assert.ok(frames.some((f) => f.type === 'error' && f.id === null), 'unparseable frame answered with an error');
  ws.close();
});

test('cancel stops a long request and frees its sequence', async () => {
  const { ws, frames, until } = await open();
  ws.send(JSON.stringify({ type: 'request', id: 'long', endpoint: 'chat.completions', body: chat('z', { max_tokens: 100000 }) }));
  await until((f) => f.filter((x) => x.type === 'chunk').length >= 3);
  ws.send(JSON.stringify({ type: 'cancel', id: 'long' }));
  await until((f) => f.some((x) => x.id === 'long' && (x.type === 'done' || x.type === 'error')));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const text = await (await fetch(`${server.baseURL}/metrics`)).text();
    if (Number(text.match(/^strata_requests_running (\S+)$/m)[1]) === 0) break;
    assert.ok(Date.now() < deadline, 'still running after cancel');
    await new Promise((r) => setTimeout(r, 50));
  }
  ws.close();
});
