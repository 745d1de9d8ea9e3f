// The independent reference for JSON Schema validity: ajv (draft 2020-12, so prefixItems and
// $defs mean what the spec says) with ajv-formats, both pinned in third_party/npm.
//
//   node ajv_validate.mjs NODE_MODULES_DIR IN.jsonl OUT.jsonl
//
// Each input line is {"schema": ..., "output": "<text>"}; output line i answers line i with
// {"valid": bool, "error": "..."}: the text must parse as JSON and validate against the schema.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modulesDir, inPath, outPath] = process.argv.slice(2);
if (!modulesDir || !inPath || !outPath) {
  console.error("usage: node ajv_validate.mjs NODE_MODULES_DIR IN.jsonl OUT.jsonl");
  process.exit(2);
}
const require = createRequire(path.join(modulesDir, "noop.js"));
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;
const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats(ajv);  // full mode: dates are checked against the calendar

const compiled = new Map();
const out = [];
for (const line of fs.readFileSync(inPath, "utf8").split("\n")) {
  if (!line) continue;
  const { schema, output } = JSON.parse(line);
  let value;
  try {
    value = JSON.parse(output);
  } catch (e) {
    out.push(JSON.stringify({ valid: false, error: "not JSON: " + e.message }));
    continue;
  }
  const key = JSON.stringify(schema);
  if (!compiled.has(key)) compiled.set(key, ajv.compile(schema));
  const validate = compiled.get(key);
  const valid = validate(value);
  out.push(JSON.stringify({ valid, error: valid ? "" : ajv.errorsText(validate.errors) }));
}
fs.writeFileSync(outPath, out.join("\n") + "\n");
