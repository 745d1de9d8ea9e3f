// The chat page's logic: conversations kept in localStorage, replies streamed from
// POST /v1/chat/completions (stream_options.include_usage for the token counts), a stop button that
// aborts the fetch (the server sees the connection close and frees the request), and per-reply
// time to first token and tokens/s. Only this server's OpenAI API is used, with the API key from
// the settings when there is one.
import { describeError, readEvents } from './api.js';
import { renderMarkdown } from './markdown.js';
import { MetricsPanel } from './metrics_panel.js';
import { STORE_KEY, loadStore, newConversation, saveStore as writeStore } from './store.js';

const SETTINGS_KEY = 'pypto-chat.settings.v1';    // the sampling fields and the thinking switch
const KEY_KEY = 'pypto-chat.api-key';             // sessionStorage: the key leaves with the tab
const REDRAW_MS = 80;                             // a streaming reply is redrawn at most this often

const $ = (id) => document.getElementById(id);
const els = {
  messages: $('messages'), input: $('input'), composer: $('composer'), send: $('send'), stop: $('stop'),
  notice: $('notice'), list: $('conversation-list'), model: $('model-name'),
  system: $('system-prompt'), temperature: $('temperature'), topP: $('top-p'), maxTokens: $('max-tokens'),
  seed: $('seed'), thinking: $('thinking'), apiKey: $('api-key'), sidebar: $('sidebar'), toggle: $('toggle-sidebar'),
};

let store = loadStore();
let model = null;      // the served model's id, from /v1/models
let inFlight = null;   // {controller, reply, el} while a reply streams

// ---- storage -------------------------------------------------------------------------------

function saveStore() {
  try {
    writeStore(store);
  } catch (e) {
    showNotice(`Could not save the conversation in this browser: ${e.message}`);
  }
}

const current = () => store.conversations.find((c) => c.id === store.currentId) ?? store.conversations[0];

const SETTING_FIELDS = ['system', 'temperature', 'topP', 'maxTokens', 'seed'];
function loadSettings() {
  let s = {};
  try { s = JSON.parse(localStorage.getItem(SETTINGS_KEY)) ?? {}; } catch { /* defaults */ }
  for (const f of SETTING_FIELDS) if (typeof s[f] === 'string') els[f].value = s[f];
  if (typeof s.thinking === 'boolean') els.thinking.checked = s.thinking;
  els.apiKey.value = sessionStorage.getItem(KEY_KEY) ?? '';
}
function saveSettings() {
  const s = { thinking: els.thinking.checked };
  for (const f of SETTING_FIELDS) s[f] = els[f].value;
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(s));
  sessionStorage.setItem(KEY_KEY, els.apiKey.value);
}

// ---- requests ------------------------------------------------------------------------------

function authHeaders() {
  const key = els.apiKey.value.trim();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

async function loadModel() {
  try {
    const res = await fetch('/v1/models', { headers: authHeaders() });
    if (!res.ok) {
      els.model.textContent = 'no model';
      showNotice(await describeError(res));
      return;
    }
    const card = (await res.json()).data[0];
    model = card.id;
    els.model.textContent = model;
    els.model.title = `served model, max_model_len ${card.max_model_len}`;
    hideNotice();
  } catch (e) {
    showNotice(`Cannot reach the server: ${e.message}`);
  }
}

// A number input's value, or an Error naming the field and its allowed range.
function numberField(el, name, { optional = false, integer = false } = {}) {
  const raw = el.value.trim();
  if (raw === '' && optional) return undefined;
  const v = Number(raw);
  if (raw === '' || !Number.isFinite(v) || !el.checkValidity() || (integer && !Number.isInteger(v))) {
    const range = [el.min && `≥ ${el.min}`, el.max && `≤ ${el.max}`].filter(Boolean).join(' and ');
    throw new Error(`${name}: '${el.value}' is not ${integer ? 'an integer' : 'a number'}${range ? ` ${range}` : ''}`);
  }
  return v;
}

function requestBody(conv) {
  const messages = [];
  if (els.system.value.trim()) messages.push({ role: 'system', content: els.system.value });
  for (const m of conv.messages) {
    if (m.role === 'assistant' && !m.content) continue;  // a failed or reasoning-only reply
    messages.push({ role: m.role, content: m.content });
  }
  const body = {
    model, messages, stream: true, stream_options: { include_usage: true },
    temperature: numberField(els.temperature, 'Temperature'),
    top_p: numberField(els.topP, 'Top-p'),
    max_tokens: numberField(els.maxTokens, 'Max tokens', { integer: true }),
    chat_template_kwargs: { enable_thinking: els.thinking.checked },
  };
  const seed = numberField(els.seed, 'Seed', { optional: true, integer: true });
  if (seed !== undefined) body.seed = seed;
  return body;
}

async function send() {
  const text = els.input.value;
  if (!text.trim() || inFlight) return;
  const conv = current();
  let body;
  try {
    if (!model) await loadModel();
    if (!model) return;
    conv.messages.push({ role: 'user', content: text });
    body = requestBody(conv);
  } catch (e) {
    if (conv.messages.at(-1)?.content === text) conv.messages.pop();
    showNotice(e.message);
    return;
  }
  hideNotice();
  if (conv.title === 'New chat') conv.title = text.trim().split('\n')[0].slice(0, 48);
  const reply = { role: 'assistant', content: '', reasoning: '', thinking: els.thinking.checked };
  conv.messages.push(reply);
  els.input.value = '';
  saveStore();
  renderAll();
  const el = els.messages.lastElementChild;
  const controller = new AbortController();
  inFlight = { controller, reply, el };
  setBusy(true);

  const t0 = performance.now();
  let tFirst = null;
  let tLast = null;
  // A pending redraw: at most one per REDRAW_MS, however fast deltas come. Each redraw renders
  // the whole reply again (Markdown depends on what follows), so a long reply redrawn at every
  // frame would keep a slow machine's main thread busy.
  let timer = 0;
  const redraw = () => {
    if (!timer) timer = setTimeout(() => { timer = 0; renderMessage(el, reply, true); scrollToEnd(); }, REDRAW_MS);
  };
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST', headers: { 'Content-Type': 'application/json', ...authHeaders() },
      body: JSON.stringify(body), signal: controller.signal,
    });
    if (!res.ok) {
      reply.error = await describeError(res);
    } else {
      await readEvents(res, (chunk) => {
        if (chunk.error) {
          reply.error = `Server error: ${chunk.error.message}`;
          return;
        }
        if (chunk.usage) reply.usage = chunk.usage;
        const choice = chunk.choices?.[0];
        if (!choice) return;
        const d = choice.delta ?? {};
        if (d.reasoning_content || d.content) {
          tLast = performance.now();
          tFirst ??= tLast;
          reply.reasoning += d.reasoning_content ?? '';
          reply.content += d.content ?? '';
          redraw();
        }
        if (choice.finish_reason) reply.finish = choice.finish_reason;
      });
    }
  } catch (e) {
    if (e.name === 'AbortError') reply.stopped = true;
    else reply.error = `Connection failed: ${e.message}`;
  }
  reply.stats = {
    ttft_ms: tFirst === null ? null : tFirst - t0,
    total_ms: performance.now() - t0,
    // Decode rate: tokens after the first over the time between the first and the last delta;
    // none when the reply came in one burst (under 10 ms), which times the network, not decoding.
    tokens_per_s: reply.usage && tLast - tFirst >= 10 && reply.usage.completion_tokens > 1
      ? (reply.usage.completion_tokens - 1) / ((tLast - tFirst) / 1000) : null,
  };
  clearTimeout(timer);  // the final render below must be the last
  inFlight = null;
  setBusy(false);
  saveStore();
  renderMessage(el, reply, false);
  scrollToEnd();
  els.input.focus();
}

function stop() {
  if (inFlight) inFlight.controller.abort();
}

// ---- rendering -----------------------------------------------------------------------------

function showNotice(text) {
  els.notice.textContent = text;
  els.notice.hidden = false;
}
function hideNotice() {
  els.notice.hidden = true;
  els.notice.textContent = '';
}

function setBusy(busy) {
  els.send.hidden = busy;
  els.stop.hidden = !busy;
  els.messages.setAttribute('aria-busy', String(busy));
  for (const id of ['new-conversation', 'delete-conversation']) $(id).disabled = busy;
  for (const b of els.list.querySelectorAll('button')) b.disabled = busy;
}

function scrollToEnd() {
  els.messages.scrollTop = els.messages.scrollHeight;
}

function part(el, cls, tag = 'div') {
  let p = el.querySelector(`:scope > .${cls}`);
  if (!p) {
    p = document.createElement(tag);
    p.className = cls;
    el.appendChild(p);
  }
  return p;
}

function statsLine(m) {
  const s = m.stats ?? {};
  const bits = [];
  if (m.stopped) bits.push('stopped');
  if (s.ttft_ms != null) bits.push(`TTFT ${Math.round(s.ttft_ms)} ms`);
  if (s.tokens_per_s != null) bits.push(`${s.tokens_per_s.toFixed(1)} tok/s`);
  if (m.usage) bits.push(`${m.usage.prompt_tokens} prompt + ${m.usage.completion_tokens} completion tokens`);
  if (m.finish && m.finish !== 'stop') bits.push(`finish: ${m.finish}`);
  return bits.join(' · ');
}

// Fills a message element; the parts (reasoning, content, error, stats) are created once, so a
// reasoning block the user opened stays open while the reply streams.
function renderMessage(el, m, streaming) {
  el.className = `msg ${m.role}${streaming ? ' streaming' : ''}`;
  part(el, 'role').textContent = m.role === 'user' ? 'You' : 'Assistant';
  if (m.role === 'user') {
    part(el, 'text').textContent = m.content;
    return;
  }
  if (m.reasoning) {
    let d = el.querySelector(':scope > details.reasoning');
    if (!d) {
      d = document.createElement('details');
      d.className = 'reasoning';
      d.open = streaming && !m.content;
      const sum = document.createElement('summary');
      sum.textContent = 'Reasoning';
      // The user's own open/close (a click; Enter and Space on the summary click too) wins over
      // the automatic fold below. Not the toggle event: setting `open` fires it as well.
      sum.addEventListener('click', () => { d.dataset.touched = '1'; });
      d.append(sum, document.createElement('div'));
      d.lastChild.className = 'md';
      el.insertBefore(d, el.querySelector(':scope > .content'));
    }
    if (m.content && !d.dataset.touched && d.open) d.open = false;  // the answer began: fold it
    d.lastChild.replaceChildren(renderMarkdown(m.reasoning));
  }
  const content = part(el, 'content');
  content.classList.add('md');
  content.replaceChildren(renderMarkdown(m.content));
  if (streaming && !m.content && !m.reasoning) content.textContent = '…';
  const err = el.querySelector(':scope > .error') ?? (m.error ? part(el, 'error') : null);
  if (err) err.textContent = m.error ?? '';
  part(el, 'stats').textContent = streaming ? '' : statsLine(m);
}

function renderAll() {
  const conv = current();
  els.messages.replaceChildren();
  for (const m of conv.messages) {
    const el = document.createElement('article');
    renderMessage(el, m, false);
    els.messages.appendChild(el);
  }
  if (!conv.messages.length) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.textContent = 'Start by typing a message below.';
    els.messages.appendChild(p);
  }
  renderList();
  scrollToEnd();
}

function renderList() {
  els.list.replaceChildren();
  for (const c of store.conversations) {
    const li = document.createElement('li');
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = c.title;
    b.title = `${c.title} (${c.messages.length} messages, ${c.created.slice(0, 16).replace('T', ' ')})`;
    if (c.id === store.currentId) b.setAttribute('aria-current', 'true');
    b.addEventListener('click', () => { store.currentId = c.id; saveStore(); renderAll(); closeSidebarIfNarrow(); });
    li.appendChild(b);
    els.list.appendChild(li);
  }
}

// ---- conversation actions ------------------------------------------------------------------

function createConversation() {
  const c = newConversation();
  store.conversations.unshift(c);
  store.currentId = c.id;
  saveStore();
  renderAll();
  closeSidebarIfNarrow();
  els.input.focus();
}

function renameConversation() {
  const c = current();
  const name = window.prompt('Rename the conversation', c.title);
  if (name === null || !name.trim()) return;
  c.title = name.trim().slice(0, 80);
  saveStore();
  renderList();
}

function deleteConversation() {
  const c = current();
  if (!window.confirm(`Delete "${c.title}"?`)) return;
  store.conversations = store.conversations.filter((x) => x !== c);
  if (!store.conversations.length) store.conversations.push(newConversation());
  store.currentId = store.conversations[0].id;
  saveStore();
  renderAll();
}

function exportConversation() {
  const c = current();
  const data = { title: c.title, created: c.created, model, exported: new Date().toISOString(), messages: c.messages };
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = `${c.title.replace(/[^\w.-]+/g, '_').slice(0, 60) || 'conversation'}.json`;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function copyCode(button) {
  const code = button.closest('.code').querySelector('code').textContent;
  try {
    await navigator.clipboard.writeText(code);
  } catch {
    // No clipboard API (a page served over plain http to another host is not a secure context).
    const t = document.createElement('textarea');
    t.value = code;
    document.body.appendChild(t);
    t.select();
    document.execCommand('copy');
    t.remove();
  }
  button.textContent = 'Copied';
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
}

function closeSidebarIfNarrow() {
  document.body.classList.remove('sidebar-open');
  els.toggle.setAttribute('aria-expanded', 'false');
}

// ---- wiring --------------------------------------------------------------------------------

els.composer.addEventListener('submit', (e) => { e.preventDefault(); send(); });
$('settings').addEventListener('submit', (e) => e.preventDefault());  // Enter in a field only commits it
els.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && inFlight) stop(); });
els.stop.addEventListener('click', stop);
els.messages.addEventListener('click', (e) => {
  const b = e.target.closest('button.copy');
  if (b) copyCode(b);
});
$('new-conversation').addEventListener('click', createConversation);
$('rename-conversation').addEventListener('click', renameConversation);
$('delete-conversation').addEventListener('click', deleteConversation);
$('export-conversation').addEventListener('click', exportConversation);
for (const f of [...SETTING_FIELDS, 'thinking']) els[f].addEventListener('change', saveSettings);
els.apiKey.addEventListener('change', () => { saveSettings(); loadModel(); metricsPanel.poll(); });
els.toggle.addEventListener('click', () => {
  const open = document.body.classList.toggle('sidebar-open');
  els.toggle.setAttribute('aria-expanded', String(open));
});
// Another tab changed the conversations: show its version unless this tab is streaming.
window.addEventListener('storage', (e) => {
  if (e.key === STORE_KEY && !inFlight) { store = loadStore(); renderAll(); }
});

loadSettings();
renderAll();
loadModel();
const metricsPanel = new MetricsPanel({
  running: $('m-running'), waiting: $('m-waiting'), kv: $('m-kv'), rate: $('m-rate'), line: $('m-line'),
  caption: $('m-caption'), status: $('m-status'),
}, authHeaders);
metricsPanel.start();
els.input.focus();
