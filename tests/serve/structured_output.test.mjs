// Structured outputs and tool calls end to end: the official `openai` npm client against the
// real pypto-serving binary on a tiny random-weight model. Random weights would write anything;
// the grammar must make every answer valid, which ajv (an independent validator, pinned in
// third_party/npm) checks. Thinking is off (enable_thinking: false): a random model would never
// close a reasoning block, and the constraint starts after it. Strings in the schemas are
// bounded (maxLength, enum, format) so outputs end within max_tokens; where a string is not
// bounded, logit_bias favours the closing quote, which keeps the output short without
// touching which outputs are allowed.
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
const addFormats = require('ajv-formats').default;
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-structured-'));
const model = path.join(dir, 'tiny');
let srv;
let client;

before(async () => {
  execFileSync(binary, ['make-test-model', '--preset', 'tiny', '--out', model], { stdio: 'ignore' });
  srv = await startServer(binary, ['--model', model, '--served-model-name', 'tiny', '--kv-cache-memory', '256MiB',
                                   '--max-model-len', '4096']);
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
// Qwen3 ids of '"' and '}' and ']': favoured so unbounded strings and containers close soon.
const CLOSE_BIAS = { logit_bias: { 1: 8, 92: 4, 60: 4 } };
const user = (text) => [{ role: 'user', content: text }];

function validate(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${what}: not JSON (${e.message}): ${text}`);
  }
  const ok = ajv.validate(schema, value);
  assert.ok(ok, `${what}: ${ajv.errorsText()} for ${text}`);
  return value;
}

// 27 shapes: objects, arrays, tuples, enums, unions, recursion, formats, patterns, bounds.
const SCHEMAS = [
  { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 130 } },
    required: ['name', 'age'], additionalProperties: false },
  { type: 'array', items: { type: 'integer', minimum: -50, maximum: 50 }, minItems: 1, maxItems: 5 },
  { type: 'string', enum: ['red', 'green', 'blue'] },
  { type: 'object', properties: { ok: { type: 'boolean' }, note: { type: ['string', 'null'], maxLength: 8 } }, required: ['ok'] },
  { type: 'object', properties: { when: { type: 'string', format: 'date' }, at: { type: 'string', format: 'time' } },
    required: ['when', 'at'] },
  { type: 'object', properties: { ts: { type: 'string', format: 'date-time' }, id: { type: 'string', format: 'uuid' } },
    required: ['ts', 'id'] },
  { type: 'object', properties: { email: { type: 'string', format: 'email' } }, required: ['email'] },
  { type: 'object', properties: { code: { type: 'string', pattern: '^[A-Z]{3}-[0-9]{2,4}$' } }, required: ['code'] },
  { type: 'array', prefixItems: [{ type: 'string', maxLength: 5 }, { type: 'number', minimum: 0, maximum: 10 }],
    items: false, minItems: 2 },
  { anyOf: [{ type: 'integer', minimum: 100, maximum: 999 }, { type: 'string', minLength: 2, maxLength: 4 }] },
  { oneOf: [
    { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'number', minimum: 0, maximum: 100 } },
      required: ['kind', 'r'], additionalProperties: false },
    { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'integer', minimum: 1, maximum: 9 } },
      required: ['kind', 'side'], additionalProperties: false }] },
  { $defs: { node: { type: 'object', properties: { v: { type: 'integer', minimum: 0, maximum: 9 },
    next: { anyOf: [{ $ref: '#/$defs/node' }, { type: 'null' }] } }, required: ['v', 'next'], additionalProperties: false } },
    $ref: '#/$defs/node' },
  { type: 'object', properties: { tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
    count: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 } }, required: ['tags', 'count'] },
  { type: 'number', minimum: -5, maximum: 5 },
  { type: 'integer', minimum: 1000000, maximum: 2000000000 },
  { type: 'object', properties: { x: { type: 'object', properties: { y: { type: 'array', items: { type: 'boolean' }, maxItems: 2 } },
    required: ['y'], additionalProperties: false } }, required: ['x'], additionalProperties: false },
  { type: 'object', properties: { a: { type: 'string', maxLength: 3 }, b: { type: 'string', maxLength: 3 },
    c: { type: 'string', maxLength: 3 } } },
  { type: 'object', properties: { matrix: { type: 'array', items: { type: 'array', items: { type: 'integer', minimum: 0, maximum: 9 },
    minItems: 2, maxItems: 2 }, minItems: 2, maxItems: 3 } }, required: ['matrix'] },
  { type: 'object', title: 'Book', properties: { title: { type: 'string', minLength: 1, maxLength: 10, description: 'a title' },
    pages: { type: 'integer', minimum: 1, maximum: 2000 } }, required: ['title'] },
  { type: 'null' },
  { const: { fixed: [1, 2, 'x'] } },
  { type: 'array', items: { enum: [1, 'two', null, true] }, minItems: 0, maxItems: 4 },
  { type: 'object', additionalProperties: { type: 'integer', minimum: 0, maximum: 99 } },
  { type: 'array', items: { type: 'number', exclusiveMinimum: -1.5, maximum: 2.25 }, minItems: 1, maxItems: 4 },
  { type: 'array', items: { oneOf: [{ type: 'integer', maximum: 0 }, { type: 'number', exclusiveMinimum: 0.5, maximum: 9 },
    { type: 'string', maxLength: 3 }] }, minItems: 1, maxItems: 4 },
  { type: 'object', properties: { id: { type: 'string', pattern: '^[a-z]+[0-9]*$', minLength: 2, maxLength: 5 },
    day: { type: 'string', format: 'date', maxLength: 10 } }, required: ['id', 'day'], additionalProperties: false },
  { $defs: { t: { type: 'object', properties: { k: { type: 'integer', minimum: 0, maximum: 9 },
    kids: { type: 'array', items: { $ref: '#/$defs/t' }, maxItems: 2 } }, required: ['k', 'kids'], additionalProperties: false } },
    $ref: '#/$defs/t' },
];

test('response_format json_schema: every output validates (27 schemas)', async () => {
  const results = await Promise.all(SCHEMAS.map((schema, i) => client.chat.completions.create({
    model: 'tiny', messages: user('Answer in JSON.'), max_tokens: 1500, temperature: 1, seed: 100 + i,
    response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } },
    ...NO_THINK, ...CLOSE_BIAS })));
  results.forEach((r, i) => {
    assert.equal(r.choices[0].finish_reason, 'stop', `schema ${i} ended by ${r.choices[0].finish_reason}`);
    validate(SCHEMAS[i], r.choices[0].message.content, `schema ${i}`);
  });
});

test('response_format json_schema streamed equals non-streamed', async () => {
  const schema = SCHEMAS[0];
  const body = { model: 'tiny', messages: user('JSON please'), max_tokens: 600, temperature: 1, seed: 7,
                 response_format: { type: 'json_schema', json_schema: { name: 'person', schema } }, ...NO_THINK };
  const full = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, full.choices[0].message.content);
  validate(schema, text, 'streamed');
});

test('json_object always parses to an object, n > 1 each on its own', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny', messages: user('Give me a JSON object.'), max_tokens: 2000, temperature: 1, seed: 3, n: 4,
    response_format: { type: 'json_object' }, ...NO_THINK, ...CLOSE_BIAS });
  assert.equal(r.choices.length, 4);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop');
    const v = JSON.parse(c.message.content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  }
});

test('structured_outputs regex, choice and grammar on /v1/completions', async () => {
  const re = await client.completions.create({ model: 'tiny', prompt: 'Code:', max_tokens: 40, temperature: 1, seed: 1,
                                               structured_outputs: { regex: '[A-Z]{2}-[0-9]{3}' } });
  assert.match(re.choices[0].text, /^[A-Z]{2}-[0-9]{3}$/);
  const ch = await client.completions.create({ model: 'tiny', prompt: 'Pick:', max_tokens: 10, temperature: 1, seed: 2,
                                               structured_outputs: { choice: ['yes', 'no', 'maybe'] } });
  assert.ok(['yes', 'no', 'maybe'].includes(ch.choices[0].text), ch.choices[0].text);
  const gr = await client.completions.create({
    model: 'tiny', prompt: 'Sum:', max_tokens: 60, temperature: 1, seed: 3,
    structured_outputs: { grammar: 'root ::= num (" + " num){0,3}\nnum ::= [1-9][0-9]{0,2}' } });
  assert.match(gr.choices[0].text, /^[1-9][0-9]{0,2}( \+ [1-9][0-9]{0,2}){0,3}$/);
});

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds numbers',
    parameters: { type: 'object', properties: { numbers: { type: 'array', items: { type: 'number', minimum: -100, maximum: 100 },
      minItems: 1, maxItems: 4 } }, required: ['numbers'], additionalProperties: false } } },
];
const schemaOf = Object.fromEntries(TOOLS.map((t) => [t.function.name, t.function.parameters]));

function checkCalls(calls, what, name) {
  assert.ok(Array.isArray(calls) && calls.length >= 1, `${what}: no tool calls`);
  calls.forEach((c, i) => {
    assert.match(c.id, /^call_/, `${what}: id`);
    assert.equal(c.type, 'function');
    assert.ok(c.function.name in schemaOf, `${what}: unknown function ${c.function.name}`);
    if (name) assert.equal(c.function.name, name);
    validate(schemaOf[c.function.name], c.function.arguments, `${what} call ${i} (${c.function.name})`);
  });
}

test('tool_choice required and named: calls validate, streamed the same as not', async () => {
  const choices = ['required', { type: 'function', function: { name: 'add' } },
                   { type: 'function', function: { name: 'get_weather' } }];
  for (const [k, tool_choice] of choices.entries()) {
    for (const parallel_tool_calls of [true, false]) {
      const body = { model: 'tiny', messages: user('What is the weather in Paris?'), tools: TOOLS, tool_choice,
                     parallel_tool_calls, max_tokens: 800, temperature: 1, seed: 11 + k, ...NO_THINK };
      const what = `tool_choice ${JSON.stringify(tool_choice)} parallel ${parallel_tool_calls}`;
      const r = await client.chat.completions.create(body);
      const msg = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, 'tool_calls', what);
      assert.equal(msg.content, null, what);
      checkCalls(msg.tool_calls, what, typeof tool_choice === 'object' ? tool_choice.function.name : undefined);
      if (!parallel_tool_calls || typeof tool_choice === 'object') assert.equal(msg.tool_calls.length, 1, what);
      // The client's stream helper accumulates the deltas into the same calls; each call opens
      // with id, name and arguments "", then its arguments arrive in pieces as they are written.
      const stream = client.beta.chat.completions.stream({ ...body, stream: true });
      const pieces = {};
      stream.on('chunk', (chunk) => {
        for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) (pieces[tc.index] ??= []).push(tc);
      });
      const final = await stream.finalChatCompletion();
      for (const [i, list] of Object.entries(pieces)) {
        assert.ok(list[0].id && list[0].function.name && list[0].function.arguments === '', `${what}: call ${i} opens`);
        assert.ok(list.slice(1).every((p) => p.id === undefined && p.function.arguments.length > 0), `${what}: call ${i}`);
        assert.ok(list.length > 3, `${what}: call ${i}'s arguments came in ${list.length - 1} piece(s)`);
      }
      assert.equal(Object.keys(pieces).length, msg.tool_calls.length, what);
      const sc = final.choices[0].message.tool_calls;
      assert.equal(final.choices[0].finish_reason, 'tool_calls');
      assert.deepEqual(sc.map((c) => [c.function.name, c.function.arguments]),
                       msg.tool_calls.map((c) => [c.function.name, c.function.arguments]), what);
    }
  }
});

test('runTools calls the named function with arguments that validate', async () => {
  const seen = [];
  for (const stream of [false, true]) {
    const runner = client.beta.chat.completions.runTools({
      model: 'tiny', messages: user('Add some numbers'), max_tokens: 400, temperature: 1, seed: 5, stream,
      tool_choice: { type: 'function', function: { name: 'add' } }, ...NO_THINK,
      tools: [{ type: 'function', function: { name: 'add', parameters: schemaOf.add, parse: JSON.parse,
                                              function: (args) => { seen.push(args); return 'done'; } } }] });
    const call = await runner.finalFunctionCall();
    assert.equal(call.name, 'add');
    validate(schemaOf.add, call.arguments, `runTools stream=${stream}`);
  }
  assert.equal(seen.length, 2);
  assert.deepEqual(seen[0], seen[1], 'same seed, same call, streamed or not');
});

test('tool round trip: assistant tool_calls and tool results render through the template', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny', max_tokens: 200, temperature: 1, seed: 9, tools: TOOLS, tool_choice: 'required', ...NO_THINK,
    messages: [
      { role: 'user', content: 'Weather in Oslo?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Oslo","unit":"celsius"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: '12 degrees' }] },
    ] });
  checkCalls(r.choices[0].message.tool_calls, 'round trip');
  const tok = await fetch(srv.baseURL + '/tokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', return_token_strs: false, messages: [
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Oslo","unit":"celsius"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: '12 degrees' }] }] }) });
  assert.equal(tok.status, 200);
  // The rendered prompt has the arguments string verbatim and the flattened tool result.
  const ids = (await tok.json()).tokens;
  const det = await fetch(srv.baseURL + '/detokenize', { method: 'POST', headers: { 'content-type': 'application/json' },
                                                         body: JSON.stringify({ model: 'tiny', tokens: ids }) });
  const text = (await det.json()).prompt;
  assert.ok(text.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city":"Oslo","unit":"celsius"}}\n</tool_call>'), text);
  assert.ok(text.includes('<tool_response>\n12 degrees\n</tool_response>'), text);
});

test('tool_choice auto: the call the model starts is constrained, once with parallel_tool_calls false', async () => {
  // The bias makes a random model write the <tool_call> token (id 151657) first; the grammar
  // then takes over until </tool_call>, and with parallel_tool_calls false the token is masked.
  const body = { model: 'tiny', messages: user('Weather in Rome?'), tools: TOOLS, tool_choice: 'auto',
                 parallel_tool_calls: false, max_tokens: 300, temperature: 1, seed: 21, logit_bias: { 151657: 100 },
                 ...NO_THINK };
  const r = await client.chat.completions.create(body);
  const calls = r.choices[0].message.tool_calls;
  checkCalls(calls, 'auto');
  assert.equal(calls.length, 1);
  assert.ok(!(r.choices[0].message.content ?? '').includes('<tool_call>'), 'no second call, no tag in content');
});

test('thinking on: reasoning is free, the constraint starts after </think>', async () => {
  // Biases on <think> / </think> (151667 / 151668) make a random model open and close a
  // reasoning block; what follows must validate.
  const schema = SCHEMAS[0];
  const r = await client.chat.completions.create({
    model: 'tiny', messages: user('Think, then answer in JSON.'), max_tokens: 1500, temperature: 1, seed: 4,
    logit_bias: { 151667: 20, 151668: 20, 1: 8 },
    response_format: { type: 'json_schema', json_schema: { name: 'p', schema } } });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(m).slice(0, 2000));
  assert.equal(typeof m.reasoning_content, 'string');
  validate(schema, m.content, 'after reasoning');
});

test('bad input: 400 naming the problem, and the server stays up', async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', minLength: 5, maxLength: 2 } } } },
     'minLength > maxLength'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } },
     "unsupported JSON Schema keyword 'uniqueItems'"],
    [{ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } },
     "'tool_choice' names function 'nope', which is not in 'tools'"],
    [{ tool_choice: 'required' }, "'tool_choice' = \"required\" needs 'tools'"],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { not: {} } } } } }],
       tool_choice: 'required' }, "unsupported JSON Schema keyword 'not'"],
    [{ structured_outputs: { regex: '(a' } }, "missing ')'"],
    [{ structured_outputs: { grammar: 'start ::= "a"' } }, "no rule named 'root'"],
    [{ structured_outputs: { choice: ['a'] }, min_tokens: 3 }, "'min_tokens' cannot be combined"],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { oneOf: [{ type: 'number' }, { type: 'integer' }] } } } },
     'oneOf: branches 0 and 1 may both match one value'],
    [{ structured_outputs: { grammar: 'root ::= root "a" | "b"' } }, "grammar rule 'root' is left-recursive"],
  ];
  for (const [extra, message] of cases) {
    await assert.rejects(client.chat.completions.create({ model: 'tiny', messages: user('x'), max_tokens: 5, ...extra }),
                         (e) => { assert.equal(e.status, 400); assert.ok(e.message.includes(message), e.message); return true; });
  }
  const ok = await client.chat.completions.create({ model: 'tiny', messages: user('still there?'), max_tokens: 3, ...NO_THINK });
  assert.equal(ok.choices.length, 1);
});
