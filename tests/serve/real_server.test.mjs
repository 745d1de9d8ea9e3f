// The official `openai` npm client against the real pypto-serving binary on a tiny random-weight
// test model: greedy output over HTTP equals offline mode's, and the API's shapes hold on a real
// engine. Run by CTest with PYPTO_BINARY (pypto-serving) and PYPTO_NPM_DIR set.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopServer, offlineResults } from './real_server_support.mjs';

const npmDir = process.env.PYPTO_NPM_DIR;
const binary = process.env.PYPTO_BINARY;
if (!npmDir || !binary) throw new Error('set PYPTO_NPM_DIR and PYPTO_BINARY');
const OpenAI = createRequire(path.join(npmDir, 'noop.js'))('openai');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-real-server-'));
const model = path.join(dir, 'tiny');
const ENGINE_ARGS = ['--kv-cache-memory', '64MiB', '--max-model-len', '256'];
let srv;
let client;

before(async () => {
  execFileSync(binary, ['make-test-model', '--preset', 'tiny', '--out', model], { stdio: 'ignore' });
  srv = await startServer(binary, ['--model', model, '--served-model-name', 'tiny', ...ENGINE_ARGS]);
  client = new OpenAI({ apiKey: 'none', baseURL: srv.baseURL + '/v1', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  if (srv) {
    const { code } = await stopServer(srv.server);
    assert.equal(code, 0, 'SIGTERM shuts the server down cleanly');
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

const PROMPTS = ['Hello, my name is', 'The capital of France is', '1, 2, 3, 4,'];

test('greedy completions over HTTP equal offline mode', async () => {
  const want = offlineResults(binary, model, PROMPTS, { max_new_tokens: 12, temperature: 0 },
                              path.join(dir, 'offline.json'), ENGINE_ARGS);
  const got = await Promise.all(PROMPTS.map((p) =>
    client.completions.create({ model: 'tiny', prompt: p, max_tokens: 12, temperature: 0 })));
  for (let i = 0; i < PROMPTS.length; i++) {
    assert.equal(got[i].choices[0].text, want[i].text, `prompt ${i}`);
    assert.equal(got[i].usage.completion_tokens, want[i].token_ids.length);
  }
});

test('streaming equals non-streaming and reports usage', async () => {
  const full = await client.completions.create({ model: 'tiny', prompt: PROMPTS[0], max_tokens: 10, temperature: 0 });
  const stream = await client.completions.create({ model: 'tiny', prompt: PROMPTS[0], max_tokens: 10, temperature: 0,
                                                   stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) text += chunk.choices[0].text;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, full.choices[0].text);
  assert.equal(usage.completion_tokens, 10);
});

test('chat with n=2, seeded sampling reproduces, logprobs', async () => {
  const req = { model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, temperature: 1.0, seed: 7,
                n: 2, logprobs: true, top_logprobs: 2 };
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.equal(a.choices.length, 2);
  assert.deepEqual(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content));
  assert.equal(a.choices[0].logprobs.content[0].top_logprobs.length, 2);
});

test('errors are OpenAI errors and the server goes on', async () => {
  await assert.rejects(client.completions.create({ model: 'tiny', prompt: 'x'.repeat(4000), max_tokens: 8 }),
                       (e) => e.status === 400 && /prompt/.test(e.message));
  await assert.rejects(client.completions.create({ model: 'other', prompt: 'x', max_tokens: 8 }), (e) => e.status === 404);
  const ok = await client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'tiny');
});

test('data parallel: --dp 2 over HTTP answers concurrent clients like one engine', async () => {
  const prompts = Array.from({ length: 8 }, (_, i) => `Request ${i}: count to ${i + 3}`);
  const want = await Promise.all(prompts.map((p) =>
    client.completions.create({ model: 'tiny', prompt: p, max_tokens: 8, temperature: 0 })));
  const dp = await startServer(binary, ['--model', model, '--served-model-name', 'tiny', '--devices', '0,1', '--dp', '2',
                                        ...ENGINE_ARGS]);
  try {
    const c2 = new OpenAI({ apiKey: 'none', baseURL: dp.baseURL + '/v1', maxRetries: 0, timeout: 60000 });
    const got = await Promise.all(prompts.map((p) =>
      c2.completions.create({ model: 'tiny', prompt: p, max_tokens: 8, temperature: 0 })));
    for (let i = 0; i < prompts.length; i++) assert.equal(got[i].choices[0].text, want[i].choices[0].text, `prompt ${i}`);
    // Both replicas served requests, labelled engine="0" and engine="1" in /metrics.
    const metrics = await (await fetch(dp.baseURL + '/metrics')).text();
    for (const e of ['0', '1']) {
      const done = [...metrics.matchAll(new RegExp(`^vllm:request_success_total\\{[^}]*engine="${e}"[^}]*\\} (\\d+)`, 'gm'))]
        .reduce((s, m) => s + Number(m[1]), 0);
      assert.ok(done > 0, `replica ${e} finished no request:\n${metrics}`);
    }
  } finally {
    await stopServer(dp.server);
  }
});
