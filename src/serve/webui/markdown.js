// Markdown to DOM nodes for model output, safely: every piece of the model's text reaches the page
// through createTextNode or textContent, never through innerHTML, so `<script>` or
// `<img onerror=...>` in a reply shows as those characters. Links keep only http(s) and mailto
// URLs (no javascript:). Re-rendered from the whole text on each streamed delta, so an unclosed
// code fence shows as a code block while it streams.
//
// Blocks: fenced code (``` or ~~~, with a language and a copy button), ATX headings, block
// quotes, flat bullet and numbered lists, horizontal rules, paragraphs (single newlines kept).
// Inline: `code`, **bold**, __bold__, *italic*, _italic_, ~~strike~~, [text](url). As in CommonMark,
// underscores inside a word (snake_case, window.__name) emphasise nothing.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+.#-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const BULLET = /^ {0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
// One alternative per inline form; the capture groups renderInline reads are numbered here.
const INLINE = new RegExp([
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source,         // 1 fence, 2 code
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,                 // 3 strong
  /(?<![\w])__(?=\S)([\s\S]*?\S)__(?![\w])/.source,    // 4 strong
  /\*(?=[^\s*])([\s\S]*?[^\s*])\*/.source,             // 5 em
  /(?<![\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w])/.source, // 6 em
  /~~(?=\S)([\s\S]*?\S)~~/.source,                     // 7 strike
  /\[([^\]\n]+)\]\(([^()\s]+)\)/.source,               // 8 link text, 9 url
].join('|'));

// The URL if it is http(s) or mailto (relative ones resolve against the page), else null.
function safeUrl(url, doc) {
  try {
    const u = new URL(url, doc.baseURI);
    return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
  } catch {
    return null;
  }
}

function renderInline(text, parent, doc) {
  while (text.length) {
    const m = INLINE.exec(text);
    if (!m) {
      parent.appendChild(doc.createTextNode(text));
      return;
    }
    if (m.index > 0) parent.appendChild(doc.createTextNode(text.slice(0, m.index)));
    let el;
    if (m[1] !== undefined) {
      el = doc.createElement('code');
      el.textContent = m[2];
    } else if (m[3] !== undefined || m[4] !== undefined) {
      el = doc.createElement('strong');
      renderInline(m[3] ?? m[4], el, doc);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      el = doc.createElement('em');
      renderInline(m[5] ?? m[6], el, doc);
    } else if (m[7] !== undefined) {
      el = doc.createElement('del');
      renderInline(m[7], el, doc);
    } else {
      const href = safeUrl(m[9], doc);
      if (href) {
        el = doc.createElement('a');
        el.href = href;
        el.rel = 'noopener noreferrer';
        el.target = '_blank';
        renderInline(m[8], el, doc);
      } else {
        el = doc.createTextNode(m[0]);
      }
    }
    parent.appendChild(el);
    text = text.slice(m.index + m[0].length);
  }
}

function codeBlock(code, lang, doc) {
  const box = doc.createElement('div');
  box.className = 'code';
  const head = doc.createElement('div');
  head.className = 'code-head';
  const label = doc.createElement('span');
  label.textContent = lang || 'text';
  const copy = doc.createElement('button');
  copy.type = 'button';
  copy.className = 'copy';
  copy.textContent = 'Copy';
  copy.setAttribute('aria-label', `Copy ${lang || 'code'}`);
  head.append(label, copy);
  const pre = doc.createElement('pre');
  const el = doc.createElement('code');
  el.textContent = code;
  pre.appendChild(el);
  box.append(head, pre);
  return box;
}

// Renders `text` into a DocumentFragment of `doc`.
export function renderMarkdown(text, doc = document) {
  const out = doc.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = doc.createElement('p');
    renderInline(para.join('\n'), p, doc);
    out.appendChild(p);
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m;
    if ((m = FENCE.exec(line))) {
      flush();
      const fence = m[1];
      const body = [];
      for (i++; i < lines.length; i++) {
        const t = lines[i].trim();
        if (t.startsWith(fence) && t.slice(fence.length).trim() === '' && t[0] === fence[0]) break;
        body.push(lines[i]);
      }
      out.appendChild(codeBlock(body.join('\n'), m[2], doc));
    } else if ((m = HEADING.exec(line))) {
      flush();
      const h = doc.createElement(`h${Math.min(m[1].length + 2, 6)}`);  // h3..h6: below the page's own
      renderInline(m[2], h, doc);
      out.appendChild(h);
    } else if (RULE.test(line)) {
      flush();
      out.appendChild(doc.createElement('hr'));
    } else if (QUOTE.test(line)) {
      flush();
      const quoted = [];
      for (; i < lines.length && (m = QUOTE.exec(lines[i])); i++) quoted.push(m[1]);
      i--;
      const q = doc.createElement('blockquote');
      q.appendChild(renderMarkdown(quoted.join('\n'), doc));
      out.appendChild(q);
    } else if (BULLET.test(line) || NUMBERED.test(line)) {
      flush();
      const numbered = !BULLET.test(line);
      const pattern = numbered ? NUMBERED : BULLET;
      const list = doc.createElement(numbered ? 'ol' : 'ul');
      if (numbered && (m = NUMBERED.exec(line)) && m[1] !== '1') list.start = Number(m[1]);
      let item = null;
      for (; i < lines.length; i++) {
        const l = lines[i];
        if ((m = pattern.exec(l))) {
          item = doc.createElement('li');
          renderInline(numbered ? m[2] : m[1], item, doc);
          list.appendChild(item);
        } else if (item && /^\s{2,}\S/.test(l)) {  // an indented continuation line
          renderInline('\n' + l.trim(), item, doc);
        } else {
          break;
        }
      }
      i--;
      out.appendChild(list);
    } else if (line.trim() === '') {
      flush();
    } else {
      para.push(line);
    }
  }
  flush();
  return out;
}
