// Load test of the HTTP server: 64 concurrent streaming clients for a bounded time against the
// real pypto-serving binary, each response checked against its own request.
//
//   node bench/serve/load_test.mjs --binary build/src/cli/pypto-serving [--model DIR]
//        [--clients 64] [--seconds 30] [--max-tokens 16] [--kv-cache-memory 64MiB]
//
// Without --model a tiny random-weight model is made in a temporary directory. First every
// client's prompt is answered once, alone (greedy): that is the expected text. Then all clients
// stream requests in a loop for --seconds; a response must equal its own prompt's expected text
// exactly (the engine is batch-invariant, so greedy text does not depend on what else runs).
// Reports requests/s, TTFT p50/p99, errors, mismatches, and the server's RSS before and after.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopServer } from '../../tests/serve/real_server_support.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const binary = args.binary;
if (!binary) throw new Error('usage: node bench/serve/load_test.mjs --binary PATH [--model DIR] [--clients 64] [--seconds 30]');
const clients = Number(args.clients ?? 64);
const seconds = Number(args.seconds ?? 30);
const maxTokens = Number(args['max-tokens'] ?? 16);
// The KV pool is mapped lazily: its pages become resident as blocks are first used, so the
// server's RSS climbs until every block has been touched once, then stays flat.
const kvCacheMemory = args['kv-cache-memory'] ?? '64MiB';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-load-'));
let model = args.model;
if (!model) {
  model = path.join(tmp, 'tiny');
  execFileSync(binary, ['make-test-model', '--preset', 'tiny', '--out', model], { stdio: 'ignore' });
}

const rssMiB = (pid) => {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return Number(m[1]) / 1024;
};

async function streamCompletion(baseURL, prompt) {
  const t0 = performance.now();
  const r = await fetch(baseURL + '/v1/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
  let text = '';
  let ttft = null;
  let buf = '';
  let done = false;
  const decoder = new TextDecoder();
  for await (const chunk of r.body) {
    buf += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const j = JSON.parse(data);
      if (j.error) throw new Error(JSON.stringify(j.error));
      if (ttft === null) ttft = (performance.now() - t0) / 1000;
      if (j.choices.length) text += j.choices[0].text;
    }
  }
  if (!done) throw new Error('stream ended without [DONE]');
  return { text, ttft };
}

const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN;
};

const srv = await startServer(binary, ['--model', model, '--kv-cache-memory', kvCacheMemory, '--max-model-len', '256',
                                       '--max-num-seqs', String(Math.min(clients, 64))]);
try {
  const prompts = Array.from({ length: clients }, (_, i) => `Client ${i} asks: tell me about the number ${i * 7919 % 1000}.`);
  const expected = [];
  for (const p of prompts) expected.push((await streamCompletion(srv.baseURL, p)).text);  // alone, in turn
  const rssBefore = rssMiB(srv.server.pid);
  const deadline = performance.now() + seconds * 1000;
  let requests = 0, errors = 0, mismatches = 0;
  const ttfts = [];
  const t0 = performance.now();
  let lastReport = 0;
  // Server RSS every 5 s: it should level off, not grow with the number of requests served.
  const rssSeries = [];
  const sampler = setInterval(() => rssSeries.push(Number(rssMiB(srv.server.pid).toFixed(1))), 5000);
  await Promise.all(prompts.map(async (p, i) => {
    while (performance.now() < deadline) {
      try {
        const r = await streamCompletion(srv.baseURL, p);
        requests++;
        ttfts.push(r.ttft);
        if (r.text !== expected[i]) mismatches++;
      } catch (e) {
        errors++;
        if (errors <= 3) console.error('error:', e.message);
      }
      if (process.stderr.isTTY && performance.now() - lastReport > 1000) {
        lastReport = performance.now();
        process.stderr.write(`\r${requests} requests, ${errors} errors, ${mismatches} mismatches`);
      }
    }
  }));
  clearInterval(sampler);
  const elapsed = (performance.now() - t0) / 1000;
  const rssAfter = rssMiB(srv.server.pid);
  if (process.stderr.isTTY) process.stderr.write('\n');
  const result = {
    clients, seconds: elapsed, requests, errors, mismatches, requests_per_s: requests / elapsed,
    ttft_p50_s: pct(ttfts, 0.5), ttft_p99_s: pct(ttfts, 0.99), rss_before_mib: rssBefore, rss_after_mib: rssAfter,
    rss_every_5s_mib: rssSeries,
  };
  console.log(`${clients} streaming clients for ${elapsed.toFixed(1)} s: ${requests} requests ` +
              `(${result.requests_per_s.toFixed(2)}/s), ${errors} errors, ${mismatches} mismatched responses`);
  console.log(`TTFT p50 ${(result.ttft_p50_s * 1000).toFixed(0)} ms, p99 ${(result.ttft_p99_s * 1000).toFixed(0)} ms; ` +
              `server RSS ${rssBefore.toFixed(0)} MiB -> ${rssAfter.toFixed(0)} MiB (every 5 s: ${rssSeries.join(', ')})`);
  console.log(JSON.stringify(result));
  process.exitCode = errors || mismatches ? 1 : 0;
} finally {
  await stopServer(srv.server);
  fs.rmSync(tmp, { recursive: true, force: true });
}
