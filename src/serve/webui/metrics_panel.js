// The live /metrics panel: polls the server's Prometheus text every POLL_MS and shows requests
// running and waiting, KV cache use, and generation tokens/s (the rate of
// vllm:generation_tokens_total between two polls) over the last WINDOW_S as a line plot. Sums
// over engines (the `engine` label: data-parallel replicas); KV use is their mean.

const POLL_MS = 2000;
const WINDOW_S = 300;

// {name: sum of its samples}, for the sample lines of a Prometheus text exposition (0.0.4).
export function parseMetrics(text) {
  const sums = {};
  const counts = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[3]);
    if (!Number.isFinite(v)) continue;
    sums[m[1]] = (sums[m[1]] ?? 0) + v;
    counts[m[1]] = (counts[m[1]] ?? 0) + 1;
  }
  return { sums, counts };
}

export class MetricsPanel {
  // els: {running, waiting, kv, rate, line, caption, status} elements; headers(): the request headers
  // (the API key) at poll time.
  constructor(els, headers) {
    this.els = els;
    this.headers = headers;
    this.points = [];  // [{t: seconds, rate: tokens/s}]
    this.last = null;  // {t, total} of the previous poll
    this.timer = null;
  }

  start() {
    const tick = async () => {
      try {
        if (!document.hidden) await this.poll();
      } catch (e) {
        this.els.status.textContent = `metrics: ${e.message}`;
      } finally {
        this.timer = setTimeout(tick, POLL_MS);  // a failed poll must not end the polling
      }
    };
    tick();
  }

  async poll() {
    let res;
    try {
      res = await fetch('/metrics', { headers: this.headers(), cache: 'no-store' });
    } catch (e) {
      this.els.status.textContent = `metrics: server unreachable (${e.message})`;
      return;
    }
    if (!res.ok) {
      this.els.status.textContent = res.status === 401 ? 'metrics: needs the API key' : `metrics: HTTP ${res.status}`;
      return;
    }
    const { sums, counts } = parseMetrics(await res.text());
    const t = performance.now() / 1000;
    const total = sums['vllm:generation_tokens_total'];
    if (total === undefined) {
      this.els.status.textContent = 'metrics: model still loading';
      return;
    }
    this.els.status.textContent = '';
    this.els.running.textContent = String(sums['vllm:num_requests_running'] ?? 0);
    this.els.waiting.textContent = String(sums['vllm:num_requests_waiting'] ?? 0);
    const kv = (sums['vllm:kv_cache_usage_perc'] ?? 0) / Math.max(1, counts['vllm:kv_cache_usage_perc'] ?? 1);
    this.els.kv.textContent = `${(kv * 100).toFixed(1)} %`;
    if (this.last && t > this.last.t) {
      const rate = Math.max(0, total - this.last.total) / (t - this.last.t);
      this.points.push({ t, rate });
      this.els.rate.textContent = `${rate.toFixed(1)} tok/s`;
    }
    this.last = { t, total };
    while (this.points.length && this.points[0].t < t - WINDOW_S) this.points.shift();
    this.draw(t);
  }

  // Plot in the SVG's 300 x 60 viewBox: x = time (right edge = now) over the span the points
  // cover, at least 1 minute and at most WINDOW_S, so a fresh page is not a sliver at the edge;
  // y = rate scaled to the span's maximum (y 58 is 0 tok/s).
  draw(now) {
    const max = Math.max(1, ...this.points.map((p) => p.rate));
    const span = Math.min(WINDOW_S, Math.max(60, now - (this.points[0]?.t ?? now)));
    const pts = this.points.map((p) => {
      const x = 300 - ((now - p.t) / span) * 300;
      const y = 58 - (p.rate / max) * 56;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    this.els.line.setAttribute('points', pts.join(' '));
    const caption = `generation tok/s, last ${Math.round(span / 60)} min, peak ${max.toFixed(1)}`;
    this.els.caption.textContent = caption;
    this.els.line.parentElement.setAttribute('aria-label', caption);
  }
}
