// Renders chat templates with the pinned @huggingface/jinja (the reference implementation our
// C++ renderer must match byte for byte).
//
// usage: node oracle_render.cjs NODE_MODULES_DIR INPUT.json OUTPUT.json
//   INPUT:  {"templates": [{"name": ..., "source": ...}], "contexts": [{...}, ...]}
//   OUTPUT: {"results": [[{"ok": true, "hex": "<utf-8 bytes>"} | {"ok": false, "error": "..."}
//            for each context] for each template]}
// Rendered text travels as hex of its UTF-8 bytes so that nothing (lone surrogates, escapes)
// is reinterpreted on the way back.
"use strict";
const fs = require("fs");
const path = require("path");

const [nodeModules, inputPath, outputPath] = process.argv.slice(2);
const { Template } = require(path.join(nodeModules, "@huggingface", "jinja"));
const input = JSON.parse(fs.readFileSync(inputPath, "utf8"));

const results = input.templates.map((t) => {
  let template;
  try {
    template = new Template(t.source);
  } catch (e) {
    return input.contexts.map(() => ({ ok: false, error: "parse: " + String(e && e.message) }));
  }
  return input.contexts.map((ctx) => {
    try {
      const text = template.render(ctx);
      return { ok: true, hex: Buffer.from(text, "utf8").toString("hex") };
    } catch (e) {
      return { ok: false, error: String(e && e.message) };
    }
  });
});
fs.writeFileSync(outputPath, JSON.stringify({ results }));
