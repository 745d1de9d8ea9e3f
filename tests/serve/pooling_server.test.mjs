// Embeddings and reranking over HTTP (issue 32) against the real binary on tiny random-weight
// models: tiny-embedding (Qwen3-Embedding's layout) and tiny-reranker (--runner rerank), plus a
// tiny generate model for the wrong-runner errors. The official `openai` client's
// embeddings.create (base64 by default, float on request) equals offline `pypto-serving embed`
// bit for bit; every input shape of /v1/embeddings; Matryoshka dimensions; /v1/rerank (and
// /rerank, /v2/rerank) and /v1/score against offline scores; bad inputs each a 400 naming the
// field with the server still serving. Run by CTest with PYPTO_BINARY and PYPTO_NPM_DIR set.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopServer } from './real_server_support.mjs';

const npmDir = process.env.PYPTO_NPM_DIR;
const binary = process.env.PYPTO_BINARY;
if (!npmDir || !binary) throw new Error('set PYPTO_NPM_DIR and PYPTO_BINARY');
const execFileAsync = promisify(execFile);
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
// Asynchronous, so the event loop keeps running meanwhile: a blocked loop cannot see the server
// close an idle keep-alive connection, and fetch would then reuse the dead socket ("fetch failed"
// on a loaded machine, where an offline run outlasts the server's keep-alive timeout).
async function offline(model, lines, extra = [], engineArgs = ENGINE_ARGS) {
  const input = path.join(dir, `in-${Math.random().toString(36).slice(2)}.jsonl`);
  const out = input.replace('in-', 'out-');
  fs.writeFileSync(input, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  await execFileAsync(binary, ['embed', '--model', model, '--input', input, '--out', out, ...engineArgs, ...extra]);
  return fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
}

const TEXTS = ['Hello, world!', 'What is the capital of China?', 'The quick brown fox jumps over the lazy dog.'];
const f32 = (v) => Array.from(Float32Array.from(v));  // the floats as float32 values

test('openai embeddings.create (base64 default and float) equals offline embed, bit for bit', async () => {
  const want = await offline(models.emb, TEXTS.map((text) => ({ text })));
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
  const want = await offline(models.emb, [{ token_ids: ids }, { token_ids: [42, 7] }]);
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
    [{ input: 'a', dimensions: '32' }, 'dimensions'], [{ input: 'a', normalise: true }, 'normalise'],
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
  const rr = await post(servers.gen, '/v1/rerank', { query: 'q', documents: ['d'] });
  assert.equal(rr.status, 400);
  assert.match(rr.body.error.message, /--runner rerank/);
  const pool = await post(servers.gen, '/pooling', { input: 'hi' });
  assert.equal(pool.status, 400);
  assert.equal(pool.body.error.code, 'wrong_runner');
  const embOnRr = await post(servers.rr, '/v1/embeddings', { input: 'hi' });
  assert.equal(embOnRr.status, 400);
});

const QUERY = 'what is panda?';
const DOCS = ['The giant panda is a bear species endemic to China.', 'Paris is the capital of France.', 'hi',
              'Pandas eat bamboo.'];

test('rerank: sorted by relevance_score with the original index; equals offline scores', async () => {
  const want = await offline(models.rr, DOCS.map((document) => ({ query: QUERY, document })), ['--runner', 'rerank']);
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
  const want = await offline(models.rr, DOCS.map((document) => ({ query: QUERY, document, instruction: instr })),
                       ['--runner', 'rerank']);
  const r = await post(servers.rr, '/v1/rerank', { query: QUERY, documents: DOCS, instruction: instr });
  for (const x of r.body.results) assert.equal(x.relevance_score, want[x.index].score);
  const plain = await offline(models.rr, [{ query: QUERY, document: DOCS[0] }], ['--runner', 'rerank']);
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

// vLLM's extra fields (serve/pooling_options.h), each against offline `embed` on the ids it
// should have computed.
const EOS = 151643;  // <|endoftext|>, appended by Qwen3-Embedding's post-processor
const embedOf = async (body) => {
  const r = await post(servers.emb, '/v1/embeddings', { encoding_format: 'float', ...body });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
};

test('truncate_prompt_tokens keeps the last N tokens (truncation_side right: the first N)', async () => {
  const ids = [9707, 11, 1879, 0, 42, 7];
  const want = await offline(models.emb, [{ token_ids: ids.slice(-3) }, { token_ids: ids.slice(0, 3) }]);
  const last = await embedOf({ input: ids, truncate_prompt_tokens: 3 });
  assert.deepEqual(f32(last.data[0].embedding), f32(want[0].embedding));
  assert.equal(last.usage.prompt_tokens, 3);
  const first = await embedOf({ input: ids, truncate_prompt_tokens: 3, truncation_side: 'right' });
  assert.deepEqual(f32(first.data[0].embedding), f32(want[1].embedding));
  // Text: the EOS the post-processor appends stays last.
  const full = (await offline(models.emb, [{ text: TEXTS[2] }], ['--with-token-ids']))[0].token_ids;
  assert.equal(full.at(-1), EOS);
  const cut = (await offline(models.emb, [{ token_ids: full.slice(-4) }]))[0];
  const text = await embedOf({ input: TEXTS[2], truncate_prompt_tokens: 4 });
  assert.deepEqual(f32(text.data[0].embedding), f32(cut.embedding));
  // -1: up to --max-model-len (256), so an over-long input is cut instead of refused.
  const long = await embedOf({ input: 'x '.repeat(300), truncate_prompt_tokens: -1 });
  assert.equal(long.usage.prompt_tokens, 256);
  const same = await embedOf({ input: TEXTS[0], truncate_prompt_tokens: -1 });
  assert.deepEqual(same.data[0].embedding, (await embedOf({ input: TEXTS[0] })).data[0].embedding);
});

test('add_special_tokens false, use_activation / normalize false, request_id, embed_dtype', async () => {
  const full = (await offline(models.emb, [{ text: TEXTS[1] }], ['--with-token-ids']))[0];
  const bare = (await offline(models.emb, [{ token_ids: full.token_ids.slice(0, -1) }]))[0];
  const r = await embedOf({ input: TEXTS[1], add_special_tokens: false, request_id: 'my-id-7' });
  assert.deepEqual(f32(r.data[0].embedding), f32(bare.embedding), 'no <|endoftext|> appended');
  assert.equal(r.usage.prompt_tokens, full.tokens - 1);
  assert.equal(r.id, 'embd-my-id-7');
  for (const off of [{ use_activation: false }, { normalize: false }]) {
    const raw = (await embedOf({ input: TEXTS[1], ...off })).data[0].embedding;
    const norm = Math.hypot(...raw);
    assert.ok(Math.abs(norm - 1) > 1e-3, `${JSON.stringify(off)}: the raw vector (norm ${norm})`);
    raw.forEach((x, i) => assert.ok(Math.abs(x / norm - full.embedding[i]) < 1e-6, `value ${i}`));
  }
  const h = await post(servers.emb, '/v1/embeddings', { input: TEXTS[1], encoding_format: 'base64', embed_dtype: 'float16' });
  const buf = Buffer.from(h.body.data[0].embedding, 'base64');
  assert.equal(buf.length, 2 * 64);
  for (let i = 0; i < 64; i++) {
    const bits = buf.readUInt16LE(2 * i), e = (bits >> 10) & 31, m = bits & 1023;
    const v = (bits & 0x8000 ? -1 : 1) * (e ? (1 + m / 1024) * 2 ** (e - 15) : m * 2 ** -24);
    assert.ok(Math.abs(v - full.embedding[i]) <= Math.abs(full.embedding[i]) * 2 ** -11 + 2 ** -25, `float16 ${i}`);
  }
});

const cosine = (a, b) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
};

test('/v1/score and /v1/rerank on an embedding model: cosine of the embeddings (1:N, N:N)', async () => {
  const instr = 'Given a question, retrieve passages that answer it';
  const iq = `Instruct: ${instr}\nQuery:${QUERY}`;
  const vec = (await offline(models.emb, [QUERY, iq, ...DOCS].map((text) => ({ text })))).map((w) => w.embedding);
  const [q, qi, ...docs] = vec;
  const s = await post(servers.emb, '/v1/score', { model: 'emb', text_1: QUERY, text_2: DOCS });
  assert.equal(s.status, 200, JSON.stringify(s.body));
  assert.equal(s.body.object, 'list');
  s.body.data.forEach((d, i) => {
    assert.equal(d.index, i);
    assert.equal(d.object, 'score');
    assert.ok(Math.abs(d.score - cosine(q, docs[i])) < 1e-6, `score ${i}: ${d.score} vs ${cosine(q, docs[i])}`);
  });
  const spelled = await post(servers.emb, '/v1/score', { queries: QUERY, documents: DOCS });
  assert.deepEqual(spelled.body.data, s.body.data, 'queries/documents is text_1/text_2');
  const spread = s.body.data.map((d) => d.score);
  assert.ok(Math.max(...spread) - Math.min(...spread) > 0.01, 'the scores differ between documents');
  const pairs = await post(servers.emb, '/score', { text_1: [DOCS[0], DOCS[1]], text_2: [DOCS[2], DOCS[3]] });
  assert.ok(Math.abs(pairs.body.data[0].score - cosine(docs[0], docs[2])) < 1e-6);
  assert.ok(Math.abs(pairs.body.data[1].score - cosine(docs[1], docs[3])) < 1e-6);
  const self = await post(servers.emb, '/v1/score', { text_1: DOCS[0], text_2: DOCS[0] });
  assert.ok(Math.abs(self.body.data[0].score - 1) < 1e-6);
  const rr = await post(servers.emb, '/v1/rerank', { query: QUERY, documents: DOCS, top_n: 3, instruction: instr });
  assert.equal(rr.status, 200, JSON.stringify(rr.body));
  assert.equal(rr.body.results.length, 3);
  const want = docs.map((d) => cosine(qi, d));
  const order = [0, 1, 2, 3].sort((a, b) => want[b] - want[a]).slice(0, 3);
  assert.deepEqual(rr.body.results.map((x) => x.index), order);
  for (const x of rr.body.results) {
    assert.ok(Math.abs(x.relevance_score - want[x.index]) < 1e-6);
    assert.equal(x.document.text, DOCS[x.index]);
  }
  const embedded = await offline(models.emb, [iq, ...DOCS].map((text) => ({ text })));
  const tokens = embedded.reduce((n, w) => n + w.tokens, 0);
  assert.equal(rr.body.usage.total_tokens, tokens, 'the query is embedded once');
});

test('/pooling: the embedding on an embedding model, the score on a reranker', async () => {
  const e = await post(servers.emb, '/pooling', { model: 'emb', input: TEXTS, task: 'embed', dimensions: 32 });
  assert.equal(e.status, 200, JSON.stringify(e.body));
  assert.equal(e.body.object, 'list');
  assert.ok(e.body.id.startsWith('pool-'));
  const ref = await embedOf({ input: TEXTS, dimensions: 32 });
  e.body.data.forEach((d, i) => {
    assert.equal(d.object, 'pooling');
    assert.equal(d.index, i);
    assert.deepEqual(d.data, ref.data[i].embedding);
  });
  assert.deepEqual(e.body.usage, ref.usage);
  const [pair] = await offline(models.rr, [{ query: QUERY, document: DOCS[0] }],
                               ['--runner', 'rerank', '--with-token-ids']);
  const r = await post(servers.rr, '/pooling', { input: pair.token_ids });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.data[0].data, [pair.score]);
  const raw = await post(servers.rr, '/pooling', { input: pair.token_ids, use_activation: false, task: 'classify' });
  assert.deepEqual(raw.body.data[0].data, [pair.logits[1] - pair.logits[0]]);
});

test('reranker: use_activation false gives the log-odds; truncate_prompt_tokens cuts the document', async () => {
  const want = await offline(models.rr, DOCS.map((document) => ({ query: QUERY, document })), ['--runner', 'rerank']);
  const raw = await post(servers.rr, '/v1/score', { text_1: QUERY, text_2: DOCS, use_activation: false });
  assert.deepEqual(raw.body.data.map((d) => d.score), want.map((w) => w.logits[1] - w.logits[0]));
  const act = await post(servers.rr, '/v1/rerank', { query: QUERY, documents: DOCS, activation: false });
  for (const x of act.body.results) assert.equal(x.relevance_score, want[x.index].logits[1] - want[x.index].logits[0]);
  // A 100-token cap per prompt equals an engine whose --max-model-len is 100 (the middle's tail is cut).
  const longDoc = 'The giant panda eats bamboo. '.repeat(20);
  const capped = await offline(models.rr, [{ query: QUERY, document: longDoc }], ['--runner', 'rerank'],
                         ENGINE_ARGS.map((x) => (x === '256' ? '100' : x)));
  const t = await post(servers.rr, '/v1/rerank', { query: QUERY, documents: [longDoc], truncate_prompt_tokens: 100 });
  assert.equal(t.status, 200, JSON.stringify(t.body));
  assert.equal(t.body.results[0].relevance_score, capped[0].score);
  assert.equal(t.body.usage.total_tokens, 100);
  const uncapped = await post(servers.rr, '/v1/score', { text_1: QUERY, text_2: longDoc, request_id: 'r-9' });
  assert.notEqual(uncapped.body.data[0].score, capped[0].score, 'the cap changed the prompt');
  assert.equal(uncapped.body.id, 'score-r-9');
});

test('chat form: messages rendered by the chat template, no special tokens added', async () => {
  // Qwen3's template for one user turn, without and with the generation prompt.
  const turn = '<|im_start|>user\nWhat is a panda?<|im_end|>\n';
  const messages = [{ role: 'user', content: 'What is a panda?' }];
  const chat = await embedOf({ messages });
  const text = await embedOf({ input: turn, add_special_tokens: false });
  assert.deepEqual(chat.data[0].embedding, text.data[0].embedding);
  assert.equal(chat.usage.prompt_tokens, text.usage.prompt_tokens);
  const gen = await post(servers.emb, '/pooling', { messages, add_generation_prompt: true });
  const genText = await embedOf({ input: turn + '<|im_start|>assistant\n', add_special_tokens: false });
  assert.deepEqual(gen.body.data[0].data, genText.data[0].embedding);
  assert.notDeepEqual(gen.body.data[0].data, chat.data[0].embedding);
  const eos = await embedOf({ messages, add_special_tokens: true });
  assert.equal(eos.usage.prompt_tokens, chat.usage.prompt_tokens + 1, 'the post-processor appends <|endoftext|>');
});

test('extra fields out of range: a 400 naming the field, and the server keeps serving', async () => {
  const cases = [
    [servers.emb, '/v1/embeddings', { input: 'a', truncate_prompt_tokens: 257 }, 'truncate_prompt_tokens'],
    [servers.emb, '/v1/embeddings', { input: 'a', truncate_prompt_tokens: 0 }, 'truncate_prompt_tokens'],
    [servers.emb, '/v1/embeddings', { input: 'a', truncate_prompt_tokens: '3' }, 'truncate_prompt_tokens'],
    [servers.emb, '/v1/embeddings', { input: 'a', truncation_side: 'middle' }, 'truncation_side'],
    [servers.emb, '/v1/embeddings', { input: 'a', priority: 1 }, 'priority'],
    [servers.emb, '/v1/embeddings', { input: 'a', cache_salt: 'salt' }, 'cache_salt'],
    [servers.emb, '/v1/embeddings', { input: 'a', embed_dtype: 'fp8_e4m3' }, 'embed_dtype'],
    [servers.emb, '/v1/embeddings', { input: 'a', use_activation: true, normalize: false }, 'normalize'],
    [servers.emb, '/v1/score', { text_1: 'a', text_2: 'b', truncate_prompt_tokens: 300 }, 'truncate_prompt_tokens'],
    [servers.emb, '/v1/rerank', { query: 'a', documents: ['b'], add_special_tokens: false }, 'add_special_tokens'],
    [servers.emb, '/pooling', { input: 'a', task: 'classify' }, 'task'],
    [servers.emb, '/pooling', { input: 'a', dimensions: 8 }, 'dimensions'],
    [servers.rr, '/pooling', { input: 'a', dimensions: 32 }, 'dimensions'],
    [servers.rr, '/v1/score', { text_1: 'a', text_2: 'b', truncate_prompt_tokens: 10 }, 'truncate_prompt_tokens'],
    [servers.rr, '/v1/rerank', { query: 'a', documents: ['b'], softmax: true, use_activation: false }, 'softmax'],
    [servers.emb, '/v1/embeddings', { messages: [] }, 'messages'],
    [servers.emb, '/v1/embeddings', { input: 'a', messages: [{ role: 'user', content: 'b' }] }, 'messages'],
    [servers.emb, '/v1/embeddings', { input: 'a', add_generation_prompt: true }, 'add_generation_prompt'],
    [servers.emb, '/pooling', { messages: [{ role: 'user', content: 'b' }], chat_template_kwargs: 1 }, 'chat_template_kwargs'],
  ];
  for (const [srv, route, body, field] of cases) {
    const r = await post(srv, route, body);
    assert.equal(r.status, 400, `${route} ${JSON.stringify(body)}`);
    assert.equal(r.body.error.param, field, `${route} ${JSON.stringify(body)}: ${r.body.error.message}`);
    assert.ok(r.body.error.message.includes(field), r.body.error.message);
  }
  for (const srv of [servers.emb, servers.rr]) assert.equal((await fetch(srv.baseURL + '/health')).status, 200);
  assert.equal((await post(servers.emb, '/v1/score', { text_1: 'a', text_2: 'b' })).status, 200);
});
