// The official `openai` npm client (pinned, third_party/npm) against the real HTTP server over
// the scripted stand-in model (pypto_fake_server). Run: node --test tests/serve/openai_client.test.mjs
// with PYPTO_FAKE_SERVER (the binary) and PYPTO_NPM_DIR (node_modules) set; CTest sets both.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnServer, stopServer } from './real_server_support.mjs';
import { createRequire } from 'node:module';
import path from 'node:path';

const npmDir = process.env.PYPTO_NPM_DIR;
const serverBin = process.env.PYPTO_FAKE_SERVER;
if (!npmDir || !serverBin) throw new Error('set PYPTO_NPM_DIR and PYPTO_FAKE_SERVER');
const require = createRequire(path.join(npmDir, 'noop.js'));
const OpenAI = require('openai');

const API_KEY = 'test-key';
const MODEL = 'qwen3-script';
// What the scripted model says (support/script_engine.h), split by the reasoning parser.
const REASONING = 'The user greets me.\n';
const CONTENT = 'Hello! I am a tiny test model. 你好，世界。 Goodbye.';
const FULL = '<think>\n' + REASONING + '</think>\n\n' + CONTENT;

let server;
let baseURL;
let client;

before(async () => {
  const srv = await spawnServer(serverBin, ['--api-key', API_KEY, '--max-model-len', '512']);
  server = srv.server;
  baseURL = srv.baseURL;
  client = new OpenAI({ apiKey: API_KEY, baseURL: baseURL + '/v1', maxRetries: 0, timeout: 30000 });
});

after(async () => {
  if (!server) return;
  const { code } = await stopServer(server);
  assert.equal(code, 0, 'SIGTERM shuts the server down cleanly');
});

test('models and health', async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, MODEL);
  const h = await fetch(baseURL + '/health');  // no key needed
  assert.equal(h.status, 200);
});

test('completions, greedy', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'Say hi', max_tokens: 200, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].text, FULL);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

test('completions, streaming with usage, stop string', async () => {
  const stream = await client.completions.create({
    model: MODEL, prompt: 'Say hi', max_tokens: 200, temperature: 0, stream: true,
    stream_options: { include_usage: true }, stop: ['Goodbye'],
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, FULL.slice(0, FULL.indexOf('Goodbye')));
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens > 0);
});

test('completions, n=2 and logprobs', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 4, temperature: 0, n: 2, logprobs: 2 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  for (const c of r.choices) {
    assert.equal(c.logprobs.tokens.length, 4);
    assert.equal(c.logprobs.token_logprobs.length, 4);
    assert.equal(c.logprobs.tokens.join(''), c.text);
  }
});

test('seeded sampling is reproducible', async () => {
  const req = { model: MODEL, prompt: 'x', max_tokens: 16, temperature: 1.5, seed: 1234 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

test('chat, reasoning split', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 200, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  const m = r.choices[0].message;
  assert.equal(m.role, 'assistant');
  assert.equal(m.reasoning_content, REASONING);
  assert.equal(m.content, CONTENT);
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('chat, streaming, n=2, with and without include_usage', async () => {
  for (const includeUsage of [true, false]) {
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 200, temperature: 0, n: 2, stream: true,
      ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
    });
    const content = ['', ''];
    const reasoning = ['', ''];
    const finish = [null, null];
    let usage = null;
    let sawUsageKey = false;
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'chat.completion.chunk');
      if ('usage' in chunk) sawUsageKey = true;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        content[c.index] += c.delta.content ?? '';
        reasoning[c.index] += c.delta.reasoning_content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    for (const i of [0, 1]) {
      assert.equal(content[i], CONTENT);
      assert.equal(reasoning[i], REASONING);
      assert.equal(finish[i], 'stop');
    }
    assert.equal(sawUsageKey, includeUsage);
    if (includeUsage) assert.ok(usage.completion_tokens > 0);
  }
});

test('chat, thinking disabled and logprobs', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0,
    logprobs: true, top_logprobs: 2, chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].logprobs.content.length, 3);
  assert.equal(r.choices[0].logprobs.content[0].top_logprobs.length, 2);
  assert.equal(r.choices[0].message.reasoning_content, null);
});

test('errors come back as OpenAI errors and the server goes on', async () => {
  await assert.rejects(
    client.completions.create({ model: 'nope', prompt: 'x' }),
    (e) => e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: 'x', temperature: -1 }),
    (e) => e.status === 400 && e.param === 'temperature');
  await assert.rejects(
    client.completions.create({ model: MODEL, prompt: 'hi '.repeat(600), stream: true }),
    (e) => e.status === 400 && e.code === 'context_length_exceeded');
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: baseURL + '/v1', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
  const r = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 2, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('tokenize and detokenize', async () => {
  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` };
  const t = await (await fetch(baseURL + '/tokenize', { method: 'POST', headers, body: JSON.stringify({ prompt: 'Hello world' }) })).json();
  assert.equal(t.count, t.tokens.length);
  const d = await (await fetch(baseURL + '/detokenize', { method: 'POST', headers, body: JSON.stringify({ tokens: t.tokens }) })).json();
  assert.equal(d.prompt, 'Hello world');
});
