#!/usr/bin/env python3
"""Bounded load on an OpenAI-compatible server: N chat requests from C client threads on loopback.

Every request must end in either an answer (HTTP 200 with a well-formed chat completion) or a
clear error (an HTTP error status with a JSON body {"error": {"message": ...}}). Anything else is
"lost": a timeout, a refused or reset connection, a body that is not such JSON. The script prints
p50/p99 latency, requests/s and the count of every outcome, and exits 1 when any request was lost.

  # against a running server
  .venv/bin/python bench/serve/load_bench.py --url http://127.0.0.1:8080 --n 64 --clients 8
  # starting `kvcompact serve` itself (stopped at the end)
  .venv/bin/python bench/serve/load_bench.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --n 64 --clients 8

The mix: one- to three-turn short chats on varied topics, max_tokens 1..--max-tokens, greedy or
sampled with a seed; with --invalid-every K every K-th request is deliberately invalid
(temperature 5) to check that errors come back as clear errors (counted apart, not as lost).
"""
import argparse
import collections
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["cats", "the moon", "bread", "rain", "trains", "chess", "tea", "bridges", "owls", "rivers", "music", "snow"]


def make_request(i, rng, max_tokens, invalid):
    topic = TOPICS[i % len(TOPICS)]
    turns = rng.choice([1, 1, 2, 3])
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": "You are a brief assistant."})
    for t in range(turns - 1):
        msgs.append({"role": "user", "content": f"Say something about {topic} (#{i}.{t})."})
        msgs.append({"role": "assistant", "content": f"{topic.capitalize()} are interesting in many ways."})
    msgs.append({"role": "user", "content": rng.choice([f"What is {topic}?", f"One fact about {topic}, please.",
                                                         f"Write a short line about {topic} (request {i})."])})
    body = {"model": "m", "messages": msgs, "max_tokens": rng.randint(1, max_tokens)}
    if rng.random() < 0.5:
        body["temperature"] = 0.0
    else:
        body["temperature"], body["seed"] = 0.7, i
    if invalid:
        body["temperature"] = 5  # out of range: must be a clear 400
    return body


def classify(status, raw):
    """('ok'|'error'|'lost', detail)."""
    try:
        j = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return "lost", f"malformed body (HTTP {status}): {raw[:120]!r}"
    if status == 200:
        try:
            c = j["choices"][0]
            ok = isinstance(c["message"]["content"], str) and c["finish_reason"] in ("stop", "length") \
                and isinstance(j["usage"]["completion_tokens"], int)
        except (KeyError, IndexError, TypeError):
            ok = False
        return ("ok", "200") if ok else ("lost", f"200 without a well-formed completion: {raw[:160]!r}")
    err = j.get("error") if isinstance(j, dict) else None
    msg = err.get("message") if isinstance(err, dict) else None
    if isinstance(msg, str) and msg:
        return "error", f"HTTP {status}: {msg[:100]}"
    return "lost", f"HTTP {status} without error.message: {raw[:160]!r}"


def post(host, port, body, timeout, api_key):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        if api_key:
            h["Authorization"] = f"Bearer {api_key}"
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def start_kvcompact(args):
    cmd = [args.bin, "serve", "--model", args.model, "--port", "0", "--ctx", str(args.ctx), "--threads",
           str(args.threads), "--slots", str(args.slots), "--queue", str(args.queue)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env={**os.environ, "OMP_WAIT_POLICY": "ACTIVE"})
    port_evt, holder, log = threading.Event(), {}, []

    def read():
        for line in proc.stderr:
            log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                holder["port"] = int(m.group(1))
                port_evt.set()

    threading.Thread(target=read, daemon=True).start()
    if not port_evt.wait(60):
        proc.kill()
        sys.exit("kvcompact serve did not start: " + "".join(log))
    url = f"http://127.0.0.1:{holder['port']}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return proc, url, cmd, log
        except (urllib.error.URLError, OSError):
            pass
        if proc.poll() is not None:
            sys.exit("kvcompact serve exited: " + "".join(log))
        time.sleep(0.3)
    proc.kill()
    sys.exit("kvcompact serve not ready")


def model_of(url, api_key):
    req = urllib.request.Request(url + "/v1/models", headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["data"][0]["id"]


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--url", help="base URL of a running server, e.g. http://127.0.0.1:8080")
    g.add_argument("--model", help="start `kvcompact serve` on this model instead")
    ap.add_argument("--n", type=int, default=64, help="requests in all")
    ap.add_argument("--clients", type=int, default=8, help="client threads")
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--timeout", type=float, default=300, help="per-request timeout (s); past it: lost")
    ap.add_argument("--invalid-every", type=int, default=0, help="every K-th request is invalid (0: none)")
    ap.add_argument("--api-key", default=os.environ.get("KVC_API_KEY"))
    ap.add_argument("--bin", default=str(ROOT / "build" / "kvcompact"))
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--queue", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()

    proc = None
    if args.model:
        proc, url, cmd, _ = start_kvcompact(args)
    else:
        url, cmd = args.url.rstrip("/"), None
    m = re.match(r"http://([^:/]+):(\d+)", url)
    host, port = m.group(1), int(m.group(2))
    model_id = model_of(url, args.api_key)
    rng = random.Random(args.seed)
    bodies = [make_request(i, rng, args.max_tokens, args.invalid_every and (i + 1) % args.invalid_every == 0)
              for i in range(args.n)]
    for b in bodies:
        b["model"] = model_id

    lock = threading.Lock()
    next_i = [0]
    records = []

    def worker():
        while True:
            with lock:
                i = next_i[0]
                if i >= len(bodies):
                    return
                next_i[0] += 1
            t0 = time.perf_counter()
            try:
                status, raw = post(host, port, bodies[i], args.timeout, args.api_key)
                outcome, detail = classify(status, raw)
            except (socket.timeout, TimeoutError):
                outcome, detail = "lost", "timeout"
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                outcome, detail = "lost", f"{type(e).__name__}: {e}"
            dt = time.perf_counter() - t0
            with lock:
                records.append({"i": i, "outcome": outcome, "detail": detail, "latency_s": dt,
                                "invalid": bool(bodies[i]["temperature"] == 5)})

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if proc:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()

    counts = collections.Counter(f"{r['outcome']}: {r['detail']}" for r in records)
    lat_ok = [r["latency_s"] for r in records if r["outcome"] == "ok"]
    lat_all = [r["latency_s"] for r in records if r["outcome"] != "lost"]
    lost = [r for r in records if r["outcome"] == "lost"]
    unexpected_ok = sum(1 for r in records if r["invalid"] and r["outcome"] == "ok")
    res = {"url": url, "command": cmd, "n": args.n, "clients": args.clients, "max_tokens": args.max_tokens,
           "wall_s": wall, "requests_per_s": len(records) / wall,
           "answered_per_s": len(lat_ok) / wall,
           "p50_s": pct(lat_ok, 0.5), "p99_s": pct(lat_ok, 0.99),
           "p50_all_s": pct(lat_all, 0.5), "p99_all_s": pct(lat_all, 0.99),
           "outcomes": dict(counts), "lost": len(lost), "invalid_answered_200": unexpected_ok,
           "loadavg": open("/proc/loadavg").read().split()[:3]}
    f = lambda x: "n/a" if x is None else f"{x * 1000:.0f} ms"  # noqa: E731
    print(f"{len(records)} requests, {args.clients} clients, {wall:.1f} s: {res['requests_per_s']:.2f} req/s "
          f"({res['answered_per_s']:.2f} answered/s)")
    print(f"latency of answers: p50 {f(res['p50_s'])}, p99 {f(res['p99_s'])}; of all replies: p50 "
          f"{f(res['p50_all_s'])}, p99 {f(res['p99_all_s'])}")
    print("outcomes:")
    for k, v in sorted(counts.items()):
        print(f"  {v:5d}  {k}")
    print(f"lost: {len(lost)}")
    if unexpected_ok:
        print(f"warning: {unexpected_ok} deliberately invalid requests were answered 200")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(res, fh, indent=2)
        os.replace(tmp, args.json)
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
