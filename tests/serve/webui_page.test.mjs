// The chat page (GET /, src/serve/webui) in a real browser: Debian's chromium, driven headless by
// puppeteer-core (pinned in third_party/npm; it launches the system browser and downloads none),
// against the real pypto-serving binary on a tiny random-weight model. Run by CTest as
// `node webui_page.test.mjs` with PYPTO_BINARY, PYPTO_NPM_DIR and PYPTO_ARTIFACT_DIR (where the
// screenshots go) set. Exits 77 (CTest: skipped) only when the browser is not installed;
// PYPTO_BROWSER=firefox drives firefox-esr instead of chromium (WebDriver BiDi), and
// PYPTO_BROWSER_PATH names another browser binary.
//
// References the page is checked against: the server's own non-streamed answer to the same seeded
// request (what the page shows is what the model said), /tokenize (the thinking switch reached
// the chat template), /metrics (a stopped reply is aborted on the server). Model output with HTML
// in it comes from a scripted SSE stream answered by request interception.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, stopServer } from './real_server_support.mjs';

// PYPTO_BROWSER=firefox runs the same test in Firefox (puppeteer over WebDriver BiDi).
const browserKind = process.env.PYPTO_BROWSER || 'chrome';
if (!['chrome', 'firefox'].includes(browserKind)) throw new Error(`PYPTO_BROWSER: '${browserKind}' is not chrome or firefox`);
const BINARIES = { chrome: ['chromium', 'chromium-browser'], firefox: ['firefox-esr', 'firefox'] };
function findBrowser() {
  if (process.env.PYPTO_BROWSER_PATH) return process.env.PYPTO_BROWSER_PATH;
  for (const dir of (process.env.PATH ?? '').split(':'))
    for (const name of BINARIES[browserKind])
      if (dir && fs.existsSync(path.join(dir, name))) return path.join(dir, name);
  return null;
}
const browserPath = findBrowser();
if (!browserPath) {
  console.log(`SKIP: no ${BINARIES[browserKind].join(' or ')} on PATH, so the chat page is not tested in it. ` +
              `Install it with \`apt-get install ${BINARIES[browserKind][0]}\` (scripts/setup.sh does) or set PYPTO_BROWSER_PATH.`);
  process.exit(77);
}
const firefox = browserKind === 'firefox';

const npmDir = process.env.PYPTO_NPM_DIR;
const binary = process.env.PYPTO_BINARY;
if (!npmDir || !binary) throw new Error('set PYPTO_NPM_DIR and PYPTO_BINARY');
const puppeteer = createRequire(path.join(npmDir, 'noop.js'))('puppeteer-core');
const artifacts = process.env.PYPTO_ARTIFACT_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-webui-shots-'));
fs.mkdirSync(artifacts, { recursive: true });

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pypto-webui-'));
const model = path.join(dir, 'tiny');
// A long max_model_len so the stop test has a reply that runs for seconds.
const SERVER_ARGS = ['--model', model, '--served-model-name', 'tiny', '--kv-cache-memory', '64MiB',
                     '--max-model-len', '16384'];
let srv;
let browser;
let page;

before(async () => {
  execFileSync(binary, ['make-test-model', '--preset', 'tiny', '--out', model], { stdio: 'ignore' });
  srv = await startServer(binary, SERVER_ARGS);
  browser = await puppeteer.launch(firefox ? { browser: 'firefox', executablePath: browserPath, headless: true } : {
    executablePath: browserPath,
    headless: true,
    // root (CI containers) cannot use chromium's sandbox; /dev/shm is small in containers.
    args: [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  // Records the body of every chat request the page makes (window.__chatBodies): puppeteer over
  // WebDriver BiDi (Firefox) cannot read request bodies, so both browsers record them this way.
  await page.evaluateOnNewDocument(() => {
    const fetch0 = window.fetch;
    window.__chatBodies = [];
    window.fetch = function (url, init) {
      if (String(url).endsWith('/v1/chat/completions')) window.__chatBodies.push(JSON.parse(init.body));
      return fetch0.apply(this, arguments);
    };
  });
  page.on('pageerror', (e) => console.log('page error:', e.message));
});

after(async () => {
  if (browser) await browser.close();
  if (srv) await stopServer(srv.server);
  fs.rmSync(dir, { recursive: true, force: true });
});

// ---- helpers -----------------------------------------------------------------------------

const chatBodies = () => page.evaluate(() => window.__chatBodies);
const lastBody = async () => (await chatBodies()).at(-1);

async function metrics(baseURL = srv.baseURL) {
  const text = await (await fetch(baseURL + '/metrics')).text();
  const sum = (name, labelRe = /.*/) => [...text.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm'))]
    .filter((m) => labelRe.test(m[1] ?? '')).reduce((s, m) => s + Number(m[2]), 0);
  return {
    running: sum('vllm:num_requests_running'),
    active: sum('pypto:engine_active_requests'),
    aborted: sum('vllm:request_success_total', /finished_reason="abort"/),
  };
}

async function setField(selector, value) {
  await page.$eval(selector, (el, v) => {
    el.value = v;
    el.dispatchEvent(new Event('change', { bubbles: true }));
  }, String(value));
}

// Types a message and presses Enter (the keyboard path), then returns the new reply's element.
async function sendMessage(text) {
  const before = await page.$$eval('#messages .msg.assistant', (l) => l.length);
  await page.focus('#input');
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => document.querySelectorAll('#messages .msg.assistant').length > n, {}, before);
  return (await page.$$('#messages .msg.assistant')).at(-1);
}

const waitIdle = () => page.waitForFunction(() => !document.querySelector('#stop:not([hidden])') &&
                                                   !document.querySelector('.msg.streaming'), { timeout: 60000 });

const stored = () => page.evaluate(() => JSON.parse(localStorage.getItem('pypto-chat.conversations.v1')));
const currentConversation = async () => {
  const s = await stored();
  return s.conversations.find((c) => c.id === s.currentId);
};

// ---- tests -------------------------------------------------------------------------------

test('GET / loads the page, which finds the model and the metrics', async () => {
  const res = await page.goto(srv.baseURL + '/', { waitUntil: 'load' });
  assert.equal(res.status(), 200);
  assert.match(res.headers()['content-security-policy'], /script-src 'self'/);
  await page.waitForFunction(() => document.getElementById('model-name').textContent === 'tiny');
  await page.waitForFunction(() => document.getElementById('m-running').textContent === '0', { timeout: 10000 });
  assert.match(await page.$eval('#m-kv', (e) => e.textContent), /^\d+\.\d %$/);
});

test('a reply streams in and equals the server\'s own answer; usage and timing are shown', async () => {
  await setField('#seed', 11);
  // Long enough that the deltas do not all land in one read: the page shows a decode rate only
  // when the first and last deltas are 10 ms or more apart, and the tiny model can emit 64
  // tokens faster than that once its first delta was held up (TTFT 708 ms, no rate, seen once).
  await setField('#max-tokens', 256);
  await setField('#temperature', 0.8);
  const reply = await sendMessage('Hello there');
  await waitIdle();
  const body = await lastBody();
  assert.equal(body.stream, true);
  assert.deepEqual(body.stream_options, { include_usage: true });
  assert.equal(body.seed, 11);
  assert.equal(body.max_tokens, 256);
  assert.equal(body.temperature, 0.8);
  assert.deepEqual(body.messages, [{ role: 'user', content: 'Hello there' }]);

  // The same seeded request, not streamed, straight to the API.
  const want = await (await fetch(srv.baseURL + '/v1/chat/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...body, stream: false, stream_options: undefined }),
  })).json();
  const conv = await currentConversation();
  const saved = conv.messages.at(-1);
  assert.equal(saved.content, want.choices[0].message.content ?? '');
  assert.equal(saved.reasoning, want.choices[0].message.reasoning_content ?? '');
  assert.deepEqual(saved.usage, want.usage);
  const stats = await reply.$eval('.stats', (e) => e.textContent);
  assert.match(stats, /TTFT \d+ ms/);
  assert.match(stats, /\d+(\.\d)? tok\/s/);
  assert.ok(stats.includes(`${want.usage.prompt_tokens} prompt + ${want.usage.completion_tokens} completion tokens`), stats);
  assert.equal(conv.title, 'Hello there');
});

test('Shift+Enter is a new line, Enter sends', async () => {
  const sent = (await chatBodies()).length;
  await page.focus('#input');
  await page.keyboard.type('line one');
  await page.keyboard.down('Shift');
  await page.keyboard.press('Enter');
  await page.keyboard.up('Shift');
  await page.keyboard.type('line two');
  assert.equal(await page.$eval('#input', (e) => e.value), 'line one\nline two');
  assert.equal((await chatBodies()).length, sent);
  await page.$eval('#input', (e) => { e.value = ''; });
});

test('stop aborts a long reply mid-stream and the server frees it', async () => {
  await setField('#max-tokens', 16000);
  const m0 = await metrics();
  const reply = await sendMessage('Tell me a very long story');
  // Streamed text arrives: the reply grows while the stop button shows.
  await page.waitForFunction((el) => el.querySelector('.content').textContent.length > 20, { timeout: 60000 }, reply);
  const len1 = await reply.$eval('.content', (e) => e.textContent.length);
  await page.waitForFunction((el, n) => el.querySelector('.content').textContent.length > n, { timeout: 30000 }, reply, len1);
  assert.equal(await page.$eval('#stop', (e) => e.hidden), false);
  const during = await metrics();
  assert.equal(during.running + during.active > 0, true, 'the reply is running on the server');
  // The /metrics panel (polled every 2 s) sees it: one running, a generation rate above 0.
  const panel = () => page.evaluate(() => ['m-running', 'm-rate', 'm-status'].map((id) => document.getElementById(id).textContent));
  await page.waitForFunction(() => document.getElementById('m-running').textContent === '1' &&
                                   parseFloat(document.getElementById('m-rate').textContent) > 0, { timeout: 10000 })
    .catch(async (e) => { throw new Error(`${e.message}; panel: ${await panel()}; /metrics: ${JSON.stringify(await metrics())}`); });
  await page.click('#stop');
  await waitIdle();
  // /metrics: nothing running, and one more aborted request.
  let m1;
  for (let i = 0; i < 100; i++) {
    m1 = await metrics();
    if (m1.running === 0 && m1.active === 0 && m1.aborted > m0.aborted) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(m1.running, 0);
  assert.equal(m1.active, 0);
  assert.equal(m1.aborted, m0.aborted + 1);
  await page.waitForFunction(() => document.getElementById('m-running').textContent === '0', { timeout: 10000 });
  // The plot has a point above the baseline (y = 58 is 0 tok/s in the 300 x 60 viewBox).
  const ys = await page.$eval('#m-line', (l) => l.getAttribute('points').split(' ').map((p) => Number(p.split(',')[1])));
  assert.ok(ys.some((y) => y < 57), `plot points: ${ys}`);
  assert.match(await reply.$eval('.stats', (e) => e.textContent), /^stopped · TTFT \d+ ms/);
  const saved = (await currentConversation()).messages.at(-1);
  assert.equal(saved.stopped, true);
  assert.ok(saved.content.length > 20 && !saved.usage, 'a stopped reply keeps its text and has no usage');
  await setField('#max-tokens', 24);
});

test('the thinking switch reaches the chat template', async () => {
  const prompts = {};
  for (const on of [false, true]) {
    const box = await page.$('#thinking');
    if ((await box.evaluate((e) => e.checked)) !== on) {
      await box.focus();
      await page.keyboard.press(' ');
    }
    await sendMessage(`thinking ${on ? 'on' : 'off'}`);
    await waitIdle();
    const body = await lastBody();
    assert.deepEqual(body.chat_template_kwargs, { enable_thinking: on });
    // The server's count of the prompt tokens equals /tokenize's for the same messages and switch.
    const tok = await (await fetch(srv.baseURL + '/tokenize', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: body.messages, chat_template_kwargs: body.chat_template_kwargs }),
    })).json();
    const saved = (await currentConversation()).messages.at(-1);
    assert.equal(saved.usage.prompt_tokens, tok.count);
    prompts[on] = tok.tokens;
  }
  // Qwen3's template closes an empty think block when thinking is off: the prompts differ.
  assert.notDeepEqual(prompts[false], prompts[true]);
});

test('a request the server refuses shows its 4xx message', async () => {
  await setField('#max-tokens', 100000);
  const reply = await sendMessage('too long');
  await waitIdle();
  const err = await reply.$eval('.error', (e) => e.textContent);
  assert.match(err, /^Request refused \(400\): .*max_tokens/);
  await setField('#max-tokens', 24);
});

const codeHtml = (lang, label, code) =>
  `<div class="code"><div class="code-head"><span>${lang}</span><button type="button" class="copy" ` +
  `aria-label="${label}">Copy</button></div><pre><code>${code}</code></pre></div>`;

test('markdown.js: the Markdown subset becomes the expected elements', async () => {
  // Each case: Markdown in, the rendered fragment's HTML out (written from CommonMark's rules for
  // the subset markdown.js supports; text is escaped by the serializer, never by the renderer).
  const cases = [
    ['# Title\ntext', '<h3>Title</h3><p>text</p>'],
    ['a **b** *c* `d` ~~e~~', '<p>a <strong>b</strong> <em>c</em> <code>d</code> <del>e</del></p>'],
    ['snake_case_name and window.__x__y', '<p>snake_case_name and window.__x__y</p>'],
    ['- one\n- two **2**\n\n3. three\n4. four',
     '<ul><li>one</li><li>two <strong>2</strong></li></ul><ol start="3"><li>three</li><li>four</li></ol>'],
    ['> quoted *text*\n> more', '<blockquote><p>quoted <em>text</em>\nmore</p></blockquote>'],
    ['para one\nline two\n\n---\npara two', '<p>para one\nline two</p><hr><p>para two</p>'],
    ['[a](https://x.org/p?q=1) [b](javascript:alert(1)) [c](data:text/html,x)',
     '<p><a href="https://x.org/p?q=1" rel="noopener noreferrer" target="_blank">a</a> ' +
     '[b](javascript:alert(1)) [c](data:text/html,x)</p>'],
    ['~~~\nno lang & <tags>\n~~~', codeHtml('text', 'Copy code', 'no lang &amp; &lt;tags&gt;')],
    ['```js\nstill streaming', codeHtml('js', 'Copy js', 'still streaming')],  // an open fence
    ['<b onclick="x()">hi</b> & <!-- c -->', '<p>&lt;b onclick="x()"&gt;hi&lt;/b&gt; &amp; &lt;!-- c --&gt;</p>'],
  ];
  const got = await page.evaluate(async (inputs) => {
    const { renderMarkdown } = await import('/webui/markdown.js');
    return inputs.map((md) => {
      const div = document.createElement('div');
      div.appendChild(renderMarkdown(md));
      return div.innerHTML;
    });
  }, cases.map((c) => c[0]));
  for (let i = 0; i < cases.length; i++) assert.equal(got[i], cases[i][1], `case ${i}: ${JSON.stringify(cases[i][0])}`);
});

// A scripted reply: reasoning, then content full of HTML and a code block, then usage.
function scriptedStream(reasoning, content) {
  const base = { id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'tiny' };
  const chunks = [{ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }];
  for (const r of reasoning) chunks.push({ ...base, choices: [{ index: 0, delta: { reasoning_content: r }, finish_reason: null }] });
  for (const c of content) chunks.push({ ...base, choices: [{ index: 0, delta: { content: c }, finish_reason: null }] });
  chunks.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
  chunks.push({ ...base, choices: [], usage: { prompt_tokens: 9, completion_tokens: 42, total_tokens: 51 } });
  return chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
}

async function withScriptedChat(respond, fn) {
  await page.setRequestInterception(true);
  const handler = (r) => {
    if (r.url().endsWith('/v1/chat/completions') && r.method() === 'POST') respond(r);
    else r.continue();
  };
  page.on('request', handler);
  try {
    await fn();
  } finally {
    page.off('request', handler);
    await page.setRequestInterception(false);
  }
}

test('model output with HTML in it is shown as text; reasoning folds; code has a copy button', async () => {
  // Reading the clipboard back needs a permission only chromium's protocol grants.
  if (!firefox) await browser.defaultBrowserContext().overridePermissions(srv.baseURL, ['clipboard-read', 'clipboard-write']);
  const reasoning = ['The user wants ', 'markup: <b>bold</b> ', 'stays text.'];
  const content = ['Here is <script>window.__pwned = 1</script> and ',
                   '<img src=x onerror="window.__pwned = 2"> in **bold**.\n\n',
                   '```html\n<script>alert(1)</script>\n<img src=y onerror=alert(2)>\n```\n\n',
                   '[click](javascript:window.__pwned=3) and [docs](https://example.com/a).'];
  await withScriptedChat((r) => r.respond({ status: 200, contentType: 'text/event-stream',
                                             body: scriptedStream(reasoning, content) }), async () => {
    const reply = await sendMessage('show me some HTML');
    await waitIdle();
    const r = await reply.evaluate((el) => ({
      scripts: el.querySelectorAll('script').length,
      imgs: el.querySelectorAll('img').length,
      text: el.querySelector('.content').textContent,
      code: el.querySelector('.content .code pre code').textContent,
      lang: el.querySelector('.content .code-head span').textContent,
      links: [...el.querySelectorAll('.content a')].map((a) => a.href),
      bold: [...el.querySelectorAll('.content strong')].map((b) => b.textContent),
      reasoningOpen: el.querySelector('details.reasoning').open,
      reasoning: el.querySelector('details.reasoning .md').textContent,
      stats: el.querySelector('.stats').textContent,
      pwned: window.__pwned,
    }));
    assert.equal(r.scripts, 0);
    assert.equal(r.imgs, 0);
    assert.equal(r.pwned, undefined);
    assert.ok(r.text.includes('<script>window.__pwned = 1</script>'), r.text);
    assert.ok(r.text.includes('<img src=x onerror="window.__pwned = 2">'), r.text);
    assert.equal(r.code, '<script>alert(1)</script>\n<img src=y onerror=alert(2)>');
    assert.equal(r.lang, 'html');
    assert.deepEqual(r.links, ['https://example.com/a']);  // javascript: stays text
    assert.ok(r.text.includes('[click](javascript:window.__pwned=3)'));
    assert.deepEqual(r.bold, ['bold']);
    assert.equal(r.reasoningOpen, false, 'the reasoning folds once the answer starts');
    assert.equal(r.reasoning, 'The user wants markup: <b>bold</b> stays text.');
    assert.match(r.stats, /9 prompt \+ 42 completion tokens/);

    const copy = await reply.$('.code-head button.copy');
    await copy.focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction((b) => b.textContent === 'Copied', {}, copy);
    if (!firefox) assert.equal(await page.evaluate(() => navigator.clipboard.readText()), r.code);
    // Opening the reasoning block by keyboard.
    await (await reply.$('details.reasoning summary')).focus();
    await page.keyboard.press('Enter');
    assert.equal(await reply.$eval('details.reasoning', (d) => d.open), true);
  });
});

test('screenshots: wide and narrow (kept as artifacts)', async () => {
  const wide = path.join(artifacts, 'chat-wide.png');
  await page.setViewport({ width: 1280, height: 800 });
  await page.screenshot({ path: wide });
  // A phone: the sidebar hides behind the ☰ button, which opens it from the keyboard.
  await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
  const narrow = path.join(artifacts, 'chat-narrow.png');
  await page.screenshot({ path: narrow });
  assert.equal(await page.$eval('#sidebar', (e) => getComputedStyle(e).visibility), 'hidden');
  await page.focus('#toggle-sidebar');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => getComputedStyle(document.getElementById('sidebar')).visibility === 'visible');
  await new Promise((r) => setTimeout(r, 300));  // the slide-in transition
  const narrowOpen = path.join(artifacts, 'chat-narrow-sidebar.png');
  await page.screenshot({ path: narrowOpen });
  // The composer fits the narrow screen.
  const composer = await page.$eval('#composer', (e) => e.getBoundingClientRect().right);
  assert.ok(composer <= 390, `composer ends at ${composer}px`);
  for (const p of [wide, narrow, narrowOpen]) {
    assert.ok(fs.statSync(p).size > 10000, p);
    console.log(`screenshot: ${p}`);
  }
  await page.setViewport({ width: 1280, height: 800 });
});

test('the conversation survives a reload; new, rename and delete work', async () => {
  const before = await page.$eval('#messages', (e) => e.innerText);
  const title = (await currentConversation()).title;
  await page.click('#new-conversation');
  assert.equal(await page.$$eval('#messages .msg', (l) => l.length), 0);
  await page.reload({ waitUntil: 'load' });
  await page.waitForFunction(() => document.getElementById('model-name').textContent === 'tiny');
  const titles = await page.$$eval('#conversation-list button', (l) => l.map((b) => b.textContent));
  assert.deepEqual(titles, ['New chat', title]);
  await page.click('#conversation-list li:nth-child(2) button');
  assert.equal(await page.$eval('#messages', (e) => e.innerText), before);

  page.once('dialog', (d) => d.accept('Renamed chat'));
  await page.click('#rename-conversation');
  await page.waitForFunction(() => document.querySelector('#conversation-list [aria-current]').textContent === 'Renamed chat');
  await page.click('#conversation-list li:nth-child(1) button');
  page.once('dialog', (d) => d.accept());
  await page.click('#delete-conversation');
  const after = await page.$$eval('#conversation-list button', (l) => l.map((b) => b.textContent));
  assert.deepEqual(after, ['Renamed chat']);

  // Export: the downloaded JSON (caught at URL.createObjectURL) holds the stored conversation.
  const exported = await page.evaluate(async () => {
    const create = URL.createObjectURL;
    let blob = null;
    URL.createObjectURL = (b) => { blob = b; return create.call(URL, b); };
    document.getElementById('export-conversation').click();
    URL.createObjectURL = create;
    return JSON.parse(await blob.text());
  });
  const conv = await currentConversation();
  assert.equal(exported.title, 'Renamed chat');
  assert.equal(exported.model, 'tiny');
  assert.deepEqual(exported.messages, conv.messages);
});

test('a busy server (503) is reported with its message and Retry-After', async () => {
  await withScriptedChat((r) => r.respond({
    status: 503, contentType: 'application/json', headers: { 'Retry-After': '1' },
    body: JSON.stringify({ error: { message: 'the server is busy: 512 requests are queued', type: 'server_error',
                                    code: 'queue_full' } }),
  }), async () => {
    const reply = await sendMessage('are you busy?');
    await waitIdle();
    assert.equal(await reply.$eval('.error', (e) => e.textContent),
                 'Server busy (503): the server is busy: 512 requests are queued (try again in 1 s)');
  });
});

test('with --api-key the page loads without the key, and the API calls use the one typed in', async () => {
  const keyed = await startServer(binary, [...SERVER_ARGS, '--api-key', 'sekrit']);
  try {
    const p = await browser.newPage();
    await p.bringToFront();  // a background tab would not poll /metrics (document.hidden)
    const res = await p.goto(keyed.baseURL + '/', { waitUntil: 'load' });
    assert.equal(res.status(), 200);
    assert.equal((await fetch(keyed.baseURL + '/v1/models')).status, 401);
    await p.waitForFunction(() => !document.getElementById('notice').hidden);
    assert.match(await p.$eval('#notice', (e) => e.textContent), /^API key refused \(401\)/);
    await p.$eval('#api-key', (el) => { el.value = 'sekrit'; el.dispatchEvent(new Event('change')); });
    await p.waitForFunction(() => document.getElementById('model-name').textContent === 'tiny');
    await p.waitForFunction(() => document.getElementById('m-running').textContent === '0', { timeout: 10000 })
      .catch(async (e) => { throw new Error(`${e.message}; metrics panel: ${await p.$eval('#m-status', (x) => x.textContent)}`); });
    await p.close();
    await page.bringToFront();
  } finally {
    await stopServer(keyed.server);
  }
});

test('--no-ui: the binary serves no page, the API goes on', async () => {
  const off = await startServer(binary, [...SERVER_ARGS, '--no-ui']);
  try {
    for (const p of ['/', '/webui/chat.js']) assert.equal((await fetch(off.baseURL + p)).status, 404, p);
    assert.equal((await fetch(off.baseURL + '/v1/models')).status, 200);
  } finally {
    await stopServer(off.server);
  }
});
