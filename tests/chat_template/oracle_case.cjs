// Writes JS (node's ICU: the oracle's runtime) upper/lower-case mappings of every code point
// that has one: [[cp, [upper...], [lower...]], ...]. usage: node oracle_case.cjs OUTPUT.json
"use strict";
const out = [];
for (let cp = 0; cp <= 0x10ffff; cp++) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;
  const s = String.fromCodePoint(cp);
  const u = s.toUpperCase(), l = s.toLowerCase();
  if (u !== s || l !== s)
    out.push([cp, Array.from(u).map((c) => c.codePointAt(0)), Array.from(l).map((c) => c.codePointAt(0))]);
}
require("fs").writeFileSync(process.argv[2], JSON.stringify(out));
