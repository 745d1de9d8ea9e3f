#!/usr/bin/env python3
"""Decode of other requests while a long prompt prefills (issue 31, point 4): the inter-token
latency (ITL) of short streaming requests before, during and after the chunked prefill of one
long prompt, through the whole server.

It starts `pypto-serving` in serve mode on MODEL (extra server flags after `--`), opens SHORT
streaming /v1/completions requests (64-token prompts, ignore_eos, long outputs), lets them decode
for a while, then sends one LONG-token prompt (token ids, max_tokens 1) and, while it prefills,
scrapes /metrics every second for the prefill progress gauges (pypto:prefill_prompt_tokens_computed
/ pypto:prefill_prompt_tokens). When the long prompt's token arrives the short requests decode a
while longer and are closed. Printed: the long prompt's TTFT and prefill rate, and per window
(before / during / after) the short requests' ITL median, p90 and max over every SSE event gap.
During the prefill every engine step carries one decode token per short request and a chunk of the
long prompt (up to --max-num-batched-tokens minus those), so the ITL there is one such step.

  bench/serve/long_prefill_itl.py --binary build/src/cli/pypto-serving --model DIR [--long 32000]
      [--short 4] [--before 20] [--after 20] [-- --threads 2 --max-num-batched-tokens 2048 ...]

Stdlib only. Name the CPU beside the figures (printed first).
"""
import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import sys
import threading
import time


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def start_server(a, extra):
    cmd = [a.binary, "--model", a.model, "--port", "0", "--max-model-len", str(a.long + 256), *extra]
    print("+", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    log = []
    deadline = time.time() + 600
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"serving model .* on http://[^:]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if port is not None and "ready: /health answers 200" in line:
            break
    if port is None or "ready" not in log[-1]:
        p.kill()
        sys.exit("the server did not start:\n" + "".join(log[-20:]))
    for line in log:
        if "KV cache:" in line:
            print(line.rstrip())
    # Keep draining its output (the prefill progress lines) so it never blocks on a full pipe.
    prefill_lines = []

    def drain():
        for line in p.stdout:
            if " prefill " in line or line.startswith("[pypto info] prefill"):
                prefill_lines.append((time.time(), line.rstrip()))

    threading.Thread(target=drain, daemon=True).start()
    return p, port, prefill_lines


def stream(port, body, on_event, stop):
    """POST /v1/completions with stream; on_event(t) for each data event until [DONE] or stop."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    while not stop.is_set():
        line = r.fp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        if line == b"data: [DONE]":
            break
        on_event(time.time())
    c.close()


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for name in ("pypto:prefill_prompt_tokens_computed", "pypto:prefill_prompt_tokens",
                 "pypto:prefill_tokens_computed_total"):
        m = re.search("^" + re.escape(name) + r"\{[^}]*\} (\S+)$", text, re.M)
        out[name] = float(m.group(1)) if m else None
    return out


def summary(gaps):
    if not gaps:
        return "no tokens"
    g = sorted(gaps)
    p90 = g[min(len(g) - 1, int(0.9 * len(g)))]
    return (f"{len(g):4d} gaps, median {statistics.median(g) * 1e3:7.1f} ms, p90 {p90 * 1e3:7.1f} ms, "
            f"max {g[-1] * 1e3:7.1f} ms")


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--long", type=int, default=32000, help="tokens of the long prompt")
    ap.add_argument("--short", type=int, default=4, help="short streaming requests decoding meanwhile")
    ap.add_argument("--before", type=int, default=20, help="tokens each short request decodes before the long prompt")
    ap.add_argument("--after", type=int, default=20, help="tokens each decodes after the long prompt's first token")
    a = ap.parse_args(argv)

    print(f"CPU: {cpu_name()}; model {a.model}; long prompt {a.long} tokens, {a.short} short requests")
    server, port, prefill_lines = start_server(a, extra)
    try:
        rng = random.Random(1)
        stop = threading.Event()
        events = [[] for _ in range(a.short)]
        threads = []
        for i in range(a.short):
            body = {"prompt": [rng.randrange(1000, 150000) for _ in range(64)], "max_tokens": a.long,
                    "ignore_eos": True, "temperature": 0, "stream": True}
            t = threading.Thread(target=stream, args=(port, body, events[i].append, stop), daemon=True)
            t.start()
            threads.append(t)
        while min(len(e) for e in events) < a.before:
            if not all(t.is_alive() for t in threads):
                sys.exit("a short request ended early (see its error above)")
            time.sleep(0.05)

        long_done = []
        long_body = {"prompt": [rng.randrange(1000, 150000) for _ in range(a.long)], "max_tokens": 1,
                     "ignore_eos": True, "temperature": 0, "stream": True}
        t_long = time.time()
        lt = threading.Thread(target=stream, args=(port, long_body, long_done.append, threading.Event()), daemon=True)
        lt.start()
        samples = []
        while not long_done:
            time.sleep(1.0)
            if not long_done:
                samples.append((time.time() - t_long, metrics(port)))
        t_first = long_done[0]
        marks = [len(e) for e in events]
        while min(len(e) - m for e, m in zip(events, marks)) < a.after:
            time.sleep(0.05)
        stop.set()
        t_end = time.time()

        ttft = t_first - t_long
        print(f"long prompt: {a.long} tokens, TTFT {ttft:.1f} s ({a.long / ttft:.0f} prompt tok/s while "
              f"{a.short} requests decode)")
        for dt, m in samples[:: max(1, len(samples) // 8)]:
            print(f"  /metrics at {dt:5.1f} s: pypto:prefill_prompt_tokens_computed "
                  f"{m['pypto:prefill_prompt_tokens_computed']:.0f} / pypto:prefill_prompt_tokens "
                  f"{m['pypto:prefill_prompt_tokens']:.0f}")
        for t, line in prefill_lines[:3] + ([("", "  ...")] if len(prefill_lines) > 4 else []) + prefill_lines[-1:]:
            print("  log:", line)
        windows = {"before": (0, t_long), "during": (t_long, t_first), "after": (t_first, t_end)}
        for name, (lo, hi) in windows.items():
            gaps = []
            for e in events:
                gaps += [b - a_ for a_, b in zip(e, e[1:]) if lo <= a_ and b <= hi]
            # A gap that spans the long prompt's arrival or first token belongs to "during".
            if name == "during":
                for e in events:
                    gaps += [b - a_ for a_, b in zip(e, e[1:]) if (a_ < lo < b) or (a_ < hi < b)]
            print(f"short requests' ITL {name:>6} the long prefill: {summary(gaps)}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
