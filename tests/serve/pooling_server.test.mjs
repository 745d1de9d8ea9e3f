// Embeddings and reranking over HTTP (issue 32) against the real binary on tiny random-weight
// models: tiny-embedding (Qwen3-Embedding's layout) and tiny-reranker (--runner rerank), plus a
// tiny generate model for the wrong-runner errors. The official `openai` client's
// embeddings.create (base64 by default, float on request) equals offline `pypto-serving embed`
// bit for bit; every input shape of /v1/embeddings; Matryoshka dimensions; /v1/rerank (and
// /rerank, /v2/rerank) and /v1/score against offline scores; bad inputs each a 400 naming the
// field with the server still serving. Run by CTest with PYPTO_BINARY and PYPTO_NPM_DIR set.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopServer } from './real_server_support.mjs';

const npmDir = process.env.PYPTO_NPM_DIR;
const binary = process.env.PYPTO_BINARY;
if (!npmDir || !binary) throw new Error('set PYPTO_NPM_DIR and PYPTO_BINARY');
const OpenAI = createRequire(path.join(npmDir, 'noop.js'))('openai');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-pooling-'));
const ENGINE_ARGS = ['--kv-cache-memory', '64MiB', '--max-model-len', '256', '--threads', '2'];
const models = {};
const servers = {};
let client;

before(async () => {
  for (const [name, preset] of [['emb', 'tiny-embedding'], ['rr', 'tiny-reranker'], ['gen', 'tiny']]) {
    models[name] = path.join(dir, preset);
    execFileSync(binary, ['make-test-model', '--preset', preset, '--out', models[name]], { stdio: 'ignore' });
  }
  servers.emb = await startServer(binary, ['--model', models.emb, '--served-model-name', 'emb', ...ENGINE_ARGS]);
  servers.rr = await startServer(binary, ['--model', models.rr, '--served-model-name', 'rr', '--runner', 'rerank',
                                          ...ENGINE_ARGS]);
  servers.gen = await startServer(binary, ['--model', models.gen, '--served-model-name', 'gen', ...ENGINE_ARGS]);
  client = new OpenAI({ apiKey: 'none', baseURL: servers.emb.baseURL + '/v1', maxRetries: 0, timeout: 60000 });
});

after(async () => {
  for (const s of Object.values(servers)) {
    const { code } = await stopServer(s.server);
    assert.equal(code, 0, 'SIGTERM shuts the server down cleanly');
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

async function post(srv, route, body) {
  const r = await fetch(srv.baseURL + route, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                              body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

// Offline `pypto-serving embed` on the same model and engine flags: JSONL lines in, lines out.
function offline(model, lines, extra = []) {
  const input = path.join(dir, `in-${Math.random().toString(36).slice(2)}.jsonl`);
  const out = input.replace('in-', 'out-');
  fs.writeFileSync(input, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  execFileSync(binary, ['embed', '--model', model, '--input', input, '--out', out, ...ENGINE_ARGS, ...extra],
               { stdio: ['ignore', 'ignore', 'pipe'] });
  return fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
}

const TEXTS = ['Hello, world!', 'What is the capital of China?', 'The quick brown fox jumps over the lazy dog.'];
const f32 = (v) => Array.from(Float32Array.from(v));  // the floats as float32 values

test('openai embeddings.create (base64 default and float) equals offline embed, bit for bit', async () => {
  const want = offline(models.emb, TEXTS.map((text) => ({ text })));
  const b64 = await client.embeddings.create({ model: 'emb', input: TEXTS });
  const flt = await client.embeddings.create({ model: 'emb', input: TEXTS, encoding_format: 'float' });
  assert.equal(b64.object, 'list');
  assert.equal(b64.data.length, TEXTS.length);
  for (let i = 0; i < TEXTS.length; i++) {
    assert.equal(b64.data[i].index, i);
    assert.equal(b64.data[i].object, 'embedding');
    assert.deepEqual(f32(b64.data[i].embedding), f32(want[i].embedding), `base64 input ${i}`);
    assert.deepEqual(f32(flt.data[i].embedding), f32(want[i].embedding), `float input ${i}`);
    assert.equal(b64.data[i].embedding.length, 64);
  }
  const tokens = want.reduce((n, w) => n + w.tokens, 0);
  assert.deepEqual(b64.usage, { prompt_tokens: tokens, total_tokens: tokens });
  assert.ok(b64.id.startsWith('embd-'));
});

test('concurrent requests give the same vectors as one batched request', async () => {
  const together = await client.embeddings.create({ model: 'emb', input: TEXTS, encoding_format: 'float' });
  const alone = await Promise.all(TEXTS.map((t) =>
    client.embeddings.create({ model: 'emb', input: t, encoding_format: 'float' })));
  for (let i = 0; i < TEXTS.length; i++) assert.deepEqual(alone[i].data[0].embedding, together.data[i].embedding);
});

test('input as a string, token ids and lists of token ids; base64 is little-endian float32', async () => {
  const ids = [9707, 11, 1879, 0];
  const one = await post(servers.emb, '/v1/embeddings', { input: ids, encoding_format: 'float' });
  const many = await post(servers.emb, '/v1/embeddings', { input: [ids, [42, 7]], encoding_format: 'float' });
  const want = offline(models.emb, [{ token_ids: ids }, { token_ids: [42, 7] }]);
  assert.equal(one.status, 200);
  assert.deepEqual(f32(one.body.data[0].embedding), f32(want[0].embedding));
  assert.deepEqual(f32(many.body.data[1].embedding), f32(want[1].embedding));
  assert.equal(many.body.usage.prompt_tokens, 6, 'token ids are used as given (no EOS appended)');
  const b64 = await post(servers.emb, '/v1/embeddings', { input: ids, encoding_format: 'base64' });
  const buf = Buffer.from(b64.body.data[0].embedding, 'base64');
  const decoded = Array.from({ length: buf.length / 4 }, (_, i) => buf.readFloatLE(4 * i));
  assert.deepEqual(decoded, f32(want[0].embedding));
});

test('dimensions: the first d values, normalised', async () => {
  const full = await post(servers.emb, '/v1/embeddings', { input: TEXTS[0], encoding_format: 'float' });
  const cut = await post(servers.emb, '/v1/embeddings', { input: TEXTS[0], encoding_format: 'float', dimensions: 32 });
  assert.equal(cut.status, 200);
  const v = full.body.data[0].embedding.slice(0, 32);
  const norm = Math.hypot(...v);
  const got = cut.body.data[0].embedding;
  assert.equal(got.length, 32);
  for (let i = 0; i < 32; i++) assert.ok(Math.abs(got[i] - v[i] / norm) < 1e-6, `value ${i}`);
  assert.ok(Math.abs(Math.hypot(...got) - 1) < 1e-6);
});

test('bad inputs: a 400 naming the field, and the server keeps serving', async () => {
  const cases = [
    [{ input: [] }, 'input'], [{ input: '' }, 'input'], [{ input: ['a', ''] }, 'input'], [{ input: 5 }, 'input'],
    [{ input: [1.5] }, 'input'], [{ input: [{ text: 'a' }] }, 'input'], [{ input: [[]] }, 'input'],
    [{ input: [-1] }, 'input'], [{ input: [999999] }, 'input'], [{}, 'input'],
    [{ input: 'x '.repeat(300) }, 'input'],  // 300+ tokens > --max-model-len 256
    [{ input: 'a', encoding_format: 'hex' }, 'encoding_format'], [{ input: 'a', dimensions: 0 }, 'dimensions'],
    [{ input: 'a', dimensions: 31 }, 'dimensions'], [{ input: 'a', dimensions: 65 }, 'dimensions'],
    [{ input: 'a', dimensions: '32' }, 'dimensions'], [{ input: 'a', normalize: true }, 'normalize'],
  ];
  for (const [body, field] of cases) {
    const r = await post(servers.emb, '/v1/embeddings', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, field, `${JSON.stringify(body)}: ${r.body.error.message}`);
    assert.ok(r.body.error.message.includes(field), r.body.error.message);
  }
  const long = await post(servers.emb, '/v1/embeddings', { input: 'x '.repeat(300) });
  assert.match(long.body.error.message, /maximum context length is 256/);
  assert.equal((await fetch(servers.emb.baseURL + '/health')).status, 200);
  const ok = await post(servers.emb, '/v1/embeddings', { input: 'still serving' });
  assert.equal(ok.status, 200);
});

test('wrong runner: a 400 naming it', async () => {
  const chat = await post(servers.emb, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(chat.status, 400);
  assert.equal(chat.body.error.code, 'wrong_runner');
  assert.match(chat.body.error.message, /--runner/);
  const comp = await post(servers.emb, '/v1/completions', { prompt: 'hi' });
  assert.equal(comp.status, 400);
  const emb = await post(servers.gen, '/v1/embeddings', { input: 'hi' });
  assert.equal(emb.status, 400);
  assert.match(emb.body.error.message, /generate model \(--runner generate\).*--runner pooling/);
  const rr = await post(servers.emb, '/v1/rerank', { query: 'q', documents: ['d'] });
  assert.equal(rr.status, 400);
  assert.match(rr.body.error.message, /--runner rerank/);
  const embOnRr = await post(servers.rr, '/v1/embeddings', { input: 'hi' });
  assert.equal(embOnRr.status, 400);
});

const QUERY = 'what is panda?';
const DOCS = ['The giant panda is a bear species endemic to China.', 'Paris is the capital of France.', 'hi',
              'Pandas eat bamboo.'];

test('rerank: sorted by relevance_score with the original index; equals offline scores', async () => {
  const want = offline(models.rr, DOCS.map((document) => ({ query: QUERY, document })), ['--runner', 'rerank']);
  const r = await post(servers.rr, '/v1/rerank', { model: 'rr', query: QUERY,
                                                   documents: [DOCS[0], { text: DOCS[1] }, DOCS[2], DOCS[3]] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const res = r.body.results;
  assert.equal(res.length, DOCS.length);
  assert.deepEqual(res.map((x) => x.index).sort(), [0, 1, 2, 3]);
  for (let i = 1; i < res.length; i++) assert.ok(res[i - 1].relevance_score >= res[i].relevance_score);
  for (const x of res) {
    assert.equal(x.relevance_score, want[x.index].score, `document ${x.index}`);
    assert.equal(x.document.text, DOCS[x.index]);
  }
  const scores = res.map((x) => x.relevance_score);
  assert.ok(Math.max(...scores) - Math.min(...scores) > 0.01, 'the scores differ between documents');
  const tokens = want.reduce((n, w) => n + w.tokens, 0);
  assert.equal(r.body.usage.total_tokens, tokens);
  for (const route of ['/rerank', '/v2/rerank']) {
    const again = await post(servers.rr, route, { query: QUERY, documents: DOCS, top_n: 2, return_documents: false });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body.results, res.slice(0, 2).map((x) => ({ index: x.index, relevance_score: x.relevance_score })));
  }
});

test('rerank instruction and /v1/score', async () => {
  const instr = 'Judge whether the document is about animals';
  const want = offline(models.rr, DOCS.map((document) => ({ query: QUERY, document, instruction: instr })),
                       ['--runner', 'rerank']);
  const r = await post(servers.rr, '/v1/rerank', { query: QUERY, documents: DOCS, instruction: instr });
  for (const x of r.body.results) assert.equal(x.relevance_score, want[x.index].score);
  const plain = offline(models.rr, [{ query: QUERY, document: DOCS[0] }], ['--runner', 'rerank']);
  assert.notEqual(want[0].score, plain[0].score, 'the instruction is part of the prompt');
  const s = await post(servers.rr, '/v1/score', { model: 'rr', text_1: QUERY, text_2: DOCS, instruction: instr });
  assert.equal(s.status, 200);
  assert.equal(s.body.object, 'list');
  assert.deepEqual(s.body.data.map((d) => d.score), want.map((w) => w.score));
  assert.deepEqual(s.body.data.map((d) => d.index), [0, 1, 2, 3]);
  const pairs = await post(servers.rr, '/v1/score', { text_1: [QUERY, QUERY], text_2: [DOCS[1], DOCS[0]], instruction: instr });
  assert.deepEqual(pairs.body.data.map((d) => d.score), [want[1].score, want[0].score]);
});

test('rerank bad inputs: a 400 naming the field', async () => {
  const cases = [
    ['/v1/rerank', { documents: ['d'] }, 'query'], ['/v1/rerank', { query: '', documents: ['d'] }, 'query'],
    ['/v1/rerank', { query: 'q' }, 'documents'], ['/v1/rerank', { query: 'q', documents: [] }, 'documents'],
    ['/v1/rerank', { query: 'q', documents: [1] }, 'documents'], ['/v1/rerank', { query: 'q', documents: [''] }, 'documents'],
    ['/v1/rerank', { query: 'q', documents: ['d'], top_n: -1 }, 'top_n'],
    ['/v1/rerank', { query: 'q', documents: ['d'], instruction: 7 }, 'instruction'],
    ['/v1/score', { text_1: 'q' }, 'text_2'], ['/v1/score', { text_1: ['a', 'b'], text_2: ['c', 'd', 'e'] }, 'text_2'],
  ];
  for (const [route, body, field] of cases) {
    const r = await post(servers.rr, route, body);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(body)}`);
    assert.equal(r.body.error.param, field, `${route} ${JSON.stringify(body)}: ${r.body.error.message}`);
  }
  assert.equal((await post(servers.rr, '/v1/rerank', { query: 'q', documents: ['d'] })).status, 200);
});

test('metrics count pooling requests and their inputs', async () => {
  await post(servers.emb, '/v1/embeddings', { input: ['a', 'b', 'c'] });
  const text = await (await fetch(servers.emb.baseURL + '/metrics')).text();
  const count = (name) => Number(text.match(new RegExp(`${name}\\{model_name="emb",endpoint="embeddings"\\} (\\d+)`))[1]);
  assert.ok(count('pypto:pooling_requests_total') >= 1);
  assert.ok(count('pypto:pooling_inputs_total') >= 3);
  assert.ok(count('pypto:pooling_inputs_total') > count('pypto:pooling_requests_total'));
});
