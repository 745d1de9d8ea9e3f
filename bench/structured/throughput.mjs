// Structured vs unconstrained decode throughput through the real server:
//
//   node bench/structured/throughput.mjs PYPTO_BINARY MODEL_DIR [max_tokens=64] [--batches 1,16]
//                                        [--rounds 3]
//
// For each batch size B, sends B chat requests at once, unconstrained and with a
// response_format json_schema whose one string field the model fills for the whole budget
// (ignore_eos and a fixed max_tokens, so both runs decode the same number of tokens), and
// reports output tokens per second over the wall time of the batch. The two kinds alternate for
// `rounds` rounds and the median of each is reported, so a shared machine's load drifts affect
// both alike. Greedy, thinking off. Prints a table and one JSON line.
import { startServer, stopServer } from '../../tests/serve/real_server_support.mjs';

const [binary, model, maxArg, ...rest] = process.argv.slice(2);
if (!binary || !model) {
  console.error('usage: node throughput.mjs PYPTO_BINARY MODEL_DIR [max_tokens] [--batches 1,16]');
  process.exit(2);
}
const maxTokens = Number(maxArg ?? 64);
const bi = rest.indexOf('--batches');
const batches = bi >= 0 ? rest[bi + 1].split(',').map(Number) : [1, 16];
const ri = rest.indexOf('--rounds');
const rounds = ri >= 0 ? Number(rest[ri + 1]) : 3;
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

const srv = await startServer(binary, ['--model', model, '--served-model-name', 'm', '--max-model-len', '1024']);
const schema = { type: 'object', properties: { story: { type: 'string' } }, required: ['story'], additionalProperties: false };

async function run(b, structured) {
  const body = {
    model: 'm', messages: [{ role: 'user', content: 'Tell me a long story about a lighthouse keeper.' }],
    max_tokens: maxTokens, temperature: 0, ignore_eos: true, chat_template_kwargs: { enable_thinking: false },
  };
  if (structured) body.response_format = { type: 'json_schema', json_schema: { name: 'story', schema } };
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({ length: b }, () => fetch(srv.baseURL + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json())));
  const secs = (performance.now() - t0) / 1000;
  const tokens = rs.reduce((n, r) => n + r.usage.completion_tokens, 0);
  return { tokens, secs, tps: tokens / secs };
}

const out = {};
try {
  await run(1, false);  // warm-up (and the grammar's first compile + masks)
  await run(1, true);
  for (const b of batches) {
    const free = [], cons = [];
    for (let r = 0; r < rounds; ++r) {
      // Alternate which goes first.
      if (r % 2 === 0) { free.push((await run(b, false)).tps); cons.push((await run(b, true)).tps); }
      else { cons.push((await run(b, true)).tps); free.push((await run(b, false)).tps); }
    }
    const f = median(free), c = median(cons);
    out[`batch${b}`] = { free_tps: f, structured_tps: c, ratio: c / f, free_runs: free, structured_runs: cons };
    console.log(`batch ${b}: unconstrained ${f.toFixed(1)} tok/s, structured ${c.toFixed(1)} tok/s (medians of ${rounds}), ` +
                `ratio ${(100 * c / f).toFixed(1)} %`);
  }
} finally {
  await stopServer(srv.server);
}
console.log(JSON.stringify(out));
