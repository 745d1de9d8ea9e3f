// Qwen3.5-style chat end to end: the official `openai` npm client against the real pypto-serving
// binary on make-test-model's tiny-hybrid, whose tokenizer_config.json carries the Qwen3.5/3.6
// chat template. The template writes XML tool calls, so the server picks the qwen3_coder parser
// by itself; tool_choice required / named makes the random model write XML calls through the
// grammar, and ajv (independent) validates the arguments the parser typed from the schema.
// Thinking is off where the model must finish an answer (a random model never closes <think>).
// Run by CTest with PYPTO_BINARY (pypto-serving) and PYPTO_NPM_DIR set.
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
const require = createRequire(path.join(npmDir, 'noop.js'));
const OpenAI = require('openai');
const Ajv2020 = require('ajv/dist/2020').default;
const ajv = new Ajv2020({ strict: false });

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-xmltools-'));
const model = path.join(dir, 'tiny-hybrid');
let srv;
let client;

before(async () => {
  execFileSync(binary, ['make-test-model', '--preset', 'tiny-hybrid', '--out', model], { stdio: 'ignore' });
  srv = await startServer(binary, ['--model', model, '--served-model-name', 'tiny', '--kv-cache-memory', '256MiB',
                                   '--max-model-len', '4096', '--max-num-seqs', '4']);
  client = new OpenAI({ apiKey: 'none', baseURL: srv.baseURL + '/v1', maxRetries: 0, timeout: 300000 });
});

after(async () => {
  if (srv) {
    const { code } = await stopServer(srv.server);
    assert.equal(code, 0, 'SIGTERM shuts the server down cleanly');
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

const NO_THINK = { chat_template_kwargs: { enable_thinking: false } };
const user = (text) => [{ role: 'user', content: text }];
// Bounded values only, so a random model's calls end within max_tokens.
const PARAMS = {
  get_weather: { type: 'object', required: ['city', 'days'], properties: {
    city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 1, maximum: 14 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, metric: { type: 'boolean' } } },
  plot: { type: 'object', required: ['points'], properties: {
    points: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 }, maxItems: 3 },
    style: { type: 'object', properties: { bold: { type: 'boolean' } }, required: ['bold'], additionalProperties: false } } },
};
const TOOLS = Object.entries(PARAMS).map(([name, parameters]) => ({ type: 'function', function: { name, parameters } }));

function checkCalls(calls, what, name) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, `${what}: no tool calls`);
  for (const c of calls) {
    assert.equal(c.type, 'function', what);
    assert.ok(c.id.startsWith('call_'), what);
    if (name) assert.equal(c.function.name, name, what);
    const args = JSON.parse(c.function.arguments);
    assert.ok(ajv.validate(PARAMS[c.function.name], args), `${what}: ${ajv.errorsText()} for ${c.function.arguments}`);
  }
}

test('the server picks the XML parser from the chat template', () => {
  assert.match(srv.log(), /tool calls: qwen3_coder \(XML\) \(--tool-call-parser auto\)/);
});

test('tool_choice required and named: XML calls typed by the schema, streamed the same as not', async () => {
  const choices = ['required', { type: 'function', function: { name: 'plot' } }];
  for (const [k, tool_choice] of choices.entries()) {
    for (const seed of [3, 4]) {
      const body = { model: 'tiny', messages: user('Weather in Paris?'), tools: TOOLS, tool_choice,
                     max_tokens: 400, temperature: 1, seed: seed + 10 * k, ...NO_THINK };
      const what = `tool_choice ${JSON.stringify(tool_choice)} seed ${seed}`;
      const r = await client.chat.completions.create(body);
      const msg = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, 'tool_calls', what);
      checkCalls(msg.tool_calls, what, typeof tool_choice === 'object' ? 'plot' : undefined);
      // Streamed: the openai client's own accumulation of tool-call deltas must give the same calls.
      const stream = client.beta.chat.completions.stream({ ...body, stream: true });
      let opened = 0;
      stream.on('chunk', (chunk) => {
        for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) if (tc.id) ++opened;
      });
      const final = await stream.finalChatCompletion();
      assert.equal(final.choices[0].finish_reason, 'tool_calls', what);
      assert.equal(opened, msg.tool_calls.length, `${what}: one opening delta per call`);
      assert.deepEqual(final.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
                       msg.tool_calls.map((c) => [c.function.name, c.function.arguments]), what);
    }
  }
});

test('tool round trip: an earlier call renders as XML, its arguments string read as an object', async () => {
  const messages = [
    { role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Oslo","days":2}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '12 degrees' }];
  const tok = await fetch(srv.baseURL + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages, tools: TOOLS }) });
  assert.equal(tok.status, 200);
  const det = await fetch(srv.baseURL + '/detokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', tokens: (await tok.json()).tokens }) });
  const text = (await det.json()).prompt;
  assert.ok(text.includes('<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n' +
                          '<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>'), text);
  assert.ok(text.includes('<|im_start|>user\n<tool_response>\n12 degrees\n</tool_response><|im_end|>'), text);
  assert.ok(text.endsWith('<|im_start|>assistant\n<think>\n'), 'thinking on by default');
  // Arguments that are not a JSON object cannot be written as parameters: 400 naming them.
  const bad = await client.chat.completions.create({ model: 'tiny', max_tokens: 4, messages: [
    messages[0], { ...messages[1], tool_calls: [{ ...messages[1].tool_calls[0],
      function: { name: 'get_weather', arguments: 'not json' } }] }, messages[2]] }).catch((e) => e);
  assert.equal(bad.status, 400);
  assert.match(bad.message, /messages\[1\]\.tool_calls\[0\]\.function\.arguments/);
});

test('thinking on by default: the answer starts inside the think block', async () => {
  const r = await client.chat.completions.create({ model: 'tiny', messages: user('Hi'), max_tokens: 6,
                                                   temperature: 1, seed: 1, logit_bias: { 151668: -100 } });
  const msg = r.choices[0].message;
  assert.equal(typeof msg.reasoning_content, 'string', JSON.stringify(msg));
  assert.ok(msg.reasoning_content.length > 0, JSON.stringify(msg));
  assert.equal(msg.content, null, 'nothing after an unclosed think block is content');
});

// The hybrid checkpoints list both ends of a turn as eos (generation_config.json): whichever the
// model writes first ends the answer with finish_reason "stop". (Qwen3's ids here: the test model
// carries Qwen3's tokenizer; the real Qwen3.5 ids are 248046 and 248044.)
test('stops on both <|im_end|> and <|endoftext|>', async () => {
  for (const id of [151645, 151643]) {
    const r = await client.chat.completions.create({ model: 'tiny', messages: user('Hi'), max_tokens: 8, ...NO_THINK,
                                                     logit_bias: { [id]: 100 } });
    assert.equal(r.choices[0].finish_reason, 'stop', `token ${id}`);
    assert.equal(r.usage.completion_tokens, 1, `token ${id}`);
  }
});
