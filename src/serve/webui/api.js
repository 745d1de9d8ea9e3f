// The page's side of the OpenAI API: turning a refused request into a readable message, and
// reading a streamed (SSE) answer event by event.

// A readable message for a refused request: the server's OpenAI error body, and what to do.
export async function describeError(res) {
  let msg = '';
  try {
    const body = await res.json();
    msg = body?.error?.message ?? JSON.stringify(body);
  } catch {
    msg = res.statusText;
  }
  if (res.status === 401) return `API key refused (401): ${msg}. Enter the server's key under Settings.`;
  if (res.status === 503) {
    const retry = res.headers.get('Retry-After');
    return `Server busy (503): ${msg}${retry ? ` (try again in ${retry} s)` : ''}`;
  }
  if (res.status >= 400 && res.status < 500) return `Request refused (${res.status}): ${msg}`;
  return `Server error (${res.status}): ${msg}`;
}

// Reads an SSE body, calling onEvent(parsed JSON) per `data:` event until [DONE] or the end.
export async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true }).replace(/\r\n/g, '\n');
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (!data) continue;
      if (data === '[DONE]') return;
      onEvent(JSON.parse(data));
    }
  }
}
