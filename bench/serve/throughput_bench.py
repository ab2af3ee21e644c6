#!/usr/bin/env python3
"""Aggregate decode throughput of `kvcompact serve` against llama-cpp-python's server, in one run.

Same GGUF, same --threads for both servers. For 1, 2 and 4 concurrent sessions (each a distinct
conversation, greedy, --max-tokens new tokens per request, no streaming) it measures the aggregate
generated tokens/s: the sum of usage.completion_tokens of the k requests over the wall time from
the first request sent to the last answer received. The servers' runs are interleaved (the order
reversed every other one of --reps repetitions) and the median is reported, so machine noise hits both.

By default `kvcompact serve --fast-quant` (int8 activations against the quantised weights, as
llama.cpp decodes) is measured as a third server beside plain kvcompact (--skip-fast-quant: not).

It also measures
  * RSS per session: process VmRSS after k sessions of equal conversation length, minus the idle
    RSS (after one warm-up conversation of the same length), divided by k, for both servers;
  * kvcompact only: time to first content chunk (streaming) on the turn right after a compaction
    versus a normal turn, driving one conversation on a separate server with a small --ctx, once
    per --ttft-think pause (0: each turn sent as soon as the previous answer is in). A turn whose
    usage.kvcompact.compactions went up is "after_compaction" (the compaction ran between the
    previous answer and this turn), the one after it "next_after_compaction".

llama-cpp-python's server is measured as it ships: one model, requests served one at a time.

Before each timed run it waits (up to --quiet-wait s) for a quiet machine: no process outside
this script's tree using 0.3 cores or more; it records the load average, the cores other
processes used during the run, steal time, and the cores each of its servers used. A run during
which other processes used more than --noisy cores is repeated (at most --retries times).
JSON results go to --out atomically (tmp + os.replace), also after each phase (with "partial").

  .venv/bin/python bench/serve/throughput_bench.py --threads 2 --out /tmp/throughput.json
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = ROOT / "build" / "kvcompact"
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PY = ROOT / ".venv" / "bin" / "python"

TOPICS = ["a lighthouse keeper who finds a message in a bottle", "a robot learning to bake bread",
          "a fox crossing a frozen river", "two friends building a boat", "a city where it never stops raining",
          "a girl who can talk to birds", "an old clock that runs backwards", "a dragon afraid of the dark",
          "a train that travels between stars", "a garden that grows overnight", "a lost map of the desert",
          "a violin found in an attic"]

# ----------------------------------------------------------------------------- machine quiet check

CLK = os.sysconf("SC_CLK_TCK")


def _proc_times():
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            fields = s[s.rindex(")") + 2:].split()
            out[int(d)] = int(fields[11]) + int(fields[12])
        except (OSError, ValueError, IndexError):
            pass
    return out


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _descendants(root):
    """root and its descendants (pids)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                ppid = int(s[s.rindex(")") + 2:].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


def foreign_load(sample_s=1.0, min_cpu=0.3):
    """Processes outside this script's tree that used more than min_cpu cores over sample_s."""
    mine = _descendants(os.getpid())
    a = _proc_times()
    time.sleep(sample_s)
    b = _proc_times()
    heavy = []
    for pid, t in b.items():
        if pid in mine or pid not in a:
            continue
        cpu = (t - a[pid]) / CLK / sample_s
        if cpu >= min_cpu:
            cmd = _cmdline(pid)
            if cmd:  # kernel threads have none
                heavy.append({"pid": pid, "cpu": round(cpu, 2), "cmd": cmd[:160]})
    return heavy


class ForeignMeter:
    """Cores used by processes outside this script's tree between start() and stop()."""

    def start(self):
        self.mine = _descendants(os.getpid())
        self.a, self.t = _proc_times(), time.perf_counter()
        return self

    def stop(self):
        b, dt = _proc_times(), time.perf_counter() - self.t
        tot, top = 0.0, []
        for pid, t in b.items():
            if pid in self.mine or pid not in self.a:
                continue
            c = (t - self.a[pid]) / CLK / dt
            if c > 0:
                tot += c
                if c >= 0.1:
                    top.append((round(c, 2), _cmdline(pid)[:100]))
        return round(tot, 2), sorted(top, reverse=True)[:3]


def _steal_s():
    with open("/proc/stat") as f:
        return int(f.readline().split()[8]) / CLK


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def wait_quiet(max_wait, log):
    """Waits until no foreign heavy process runs (at most max_wait s); returns what it saw."""
    t0 = time.time()
    while True:
        heavy = foreign_load()
        if not heavy or time.time() - t0 >= max_wait:
            info = {"loadavg": loadavg(), "foreign": heavy, "waited_s": round(time.time() - t0, 1)}
            if heavy:
                log(f"  machine not quiet after {info['waited_s']} s, running anyway: "
                    + "; ".join(f"{h['cpu']:.1f} cores {h['cmd'][:70]}" for h in heavy))
            return info
        time.sleep(3)


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# ----------------------------------------------------------------------------- servers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BaseServer:
    name = "?"

    def _start(self, cmd, env=None, port=None):
        self.log = []
        self.port = port
        self._port_evt = threading.Event()
        if port:
            self._port_evt.set()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m and not self._port_evt.is_set():
                self.port = int(m.group(1))
                self._port_evt.set()

    def wait_ready(self, timeout=180):
        if not self._port_evt.wait(60):
            self.kill()
            raise RuntimeError(f"{self.name} did not start: " + "".join(self.log[-20:]))
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: " + "".join(self.log[-30:]))
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.3)
        self.kill()
        raise RuntimeError(f"{self.name} not ready: " + "".join(self.log[-30:]))

    def rss_kib(self):
        return vm_rss_kib(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class KvcServer(BaseServer):
    name = "kvcompact"
    ready_path = "/health"

    def __init__(self, binary, model, ctx, threads, slots, extra=()):
        self.cmd = [str(binary), "serve", "--model", str(model), "--port", "0", "--ctx", str(ctx),
                    "--threads", str(threads), "--slots", str(slots), *extra]
        # Spinning OpenMP threads, as the CLI chooses on an idle machine (PASSIVE halves decode speed).
        self._start(self.cmd, env={"OMP_WAIT_POLICY": "ACTIVE"})
        self.wait_ready()

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out


class LlamaCppServer(BaseServer):
    name = "llama.cpp"
    ready_path = "/v1/models"

    def __init__(self, python, model, ctx, threads):
        port = free_port()
        self.cmd = [str(python), "-m", "llama_cpp.server", "--model", str(model), "--n_ctx", str(ctx),
                    "--n_threads", str(threads), "--n_threads_batch", str(threads), "--host", "127.0.0.1",
                    "--port", str(port)]
        self._start(self.cmd, port=port)
        self.wait_ready()


# ----------------------------------------------------------------------------- requests


MODEL_IDS = {}


def model_id(url):
    if url not in MODEL_IDS:
        with urllib.request.urlopen(url + "/v1/models", timeout=30) as r:
            MODEL_IDS[url] = json.loads(r.read())["data"][0]["id"]
    return MODEL_IDS[url]


def chat(url, messages, max_tokens, extra=None, timeout=600):
    body = {"model": model_id(url), "messages": messages, "max_tokens": max_tokens, "temperature": 0.0, **(extra or {})}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def chat_stream(url, messages, max_tokens, extra=None, timeout=600):
    """Streams one chat; returns (ttft_s, total_s, text, final usage)."""
    body = {"model": model_id(url), "messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "stream_options": {"include_usage": True}, **(extra or {})}
    host, port = url.replace("http://", "").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:500]!r}")
    ttft, text, usage = None, [], None
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        j = json.loads(data)
        for c in j.get("choices") or []:
            piece = (c.get("delta") or {}).get("content")
            if piece:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text.append(piece)
        if j.get("usage"):
            usage = j["usage"]
    total = time.perf_counter() - t0
    conn.close()
    return ttft, total, "".join(text), usage


def conversation(i, nonce):
    """A distinct short conversation asking for a long answer."""
    topic = TOPICS[i % len(TOPICS)]
    return [{"role": "system", "content": f"You are a storyteller (session {nonce}-{i})."},
            {"role": "user", "content": f"Write a long, detailed story about {topic}."}]


def concurrent_round(url, k, max_tokens, nonce, extra):
    results = [None] * k
    errors = []

    def one(i):
        try:
            r = chat(url, conversation(i, nonce), max_tokens, extra)
            results[i] = r["usage"]["completion_tokens"]
        except Exception as e:  # noqa: BLE001 - recorded and re-raised below
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError("; ".join(errors))
    return {"tokens": sum(results), "per_request_tokens": results, "wall_s": wall, "tok_s": sum(results) / wall}


# ----------------------------------------------------------------------------- phases


def rss_phase(server, k_values, prompt_words, max_tokens, extra, log):
    """RSS at ready; idle RSS after one warm-up conversation of the same length as the measured
    ones (so first-use buffers are not charged to session 1); then RSS after each of max(k)
    further sessions of equal length. per_session = (RSS_k - idle) / k."""
    ready = server.rss_kib()
    filler = " ".join(["the quiet river runs past the old mill and the green hills"] * (prompt_words // 12))

    def session(tag):
        msgs = [{"role": "system", "content": f"Session {tag}: remember these notes. {filler}"},
                {"role": "user", "content": "Summarise the notes in one long paragraph."}]
        return chat(server.url, msgs, max_tokens, extra)

    session("warm-up")
    time.sleep(0.5)
    idle = server.rss_kib()
    out = {"ready_rss_kib": ready, "idle_rss_kib": idle, "after": {}}
    for i in range(max(k_values)):
        r = session(i)
        time.sleep(0.3)
        if (i + 1) in k_values:
            rss = server.rss_kib()
            kv_bytes = server.metrics().get("kvcompact_kv_bytes") if isinstance(server, KvcServer) else None
            out["after"][i + 1] = {"rss_kib": rss, "per_session_kib": (rss - idle) / (i + 1),
                                   "prompt_tokens": r["usage"]["prompt_tokens"],
                                   "completion_tokens": r["usage"]["completion_tokens"],
                                   "kv_bytes_metric": kv_bytes}
            log(f"  {server.name}: {i + 1} sessions: RSS {rss / 1024:.1f} MiB (idle {idle / 1024:.1f}, ready "
                f"{ready / 1024:.1f}), {(rss - idle) / (i + 1) / 1024:.2f} MiB/session"
                + (f", kv_bytes {kv_bytes / 2**20:.2f} MiB (warm-up session included)" if kv_bytes else ""))
    return out


def ttft_phase(args, log, think_s):
    """One conversation on a kvcompact server with a small --ctx, streamed turn by turn; think_s:
    pause between an answer and the next turn."""
    srv = KvcServer(args.bin, args.model, args.ttft_ctx, args.threads, 1, ["--keep-recent", str(args.ttft_keep_recent)])
    turns = []
    try:
        msgs = [{"role": "system", "content": "You are a helpful assistant."}]
        questions = ["Tell me about {}.", "What else do you know about {}?", "Give me three facts about {}.",
                     "Why do people like {}?"]
        subjects = ["rivers", "mountains", "bread", "clocks", "owls", "trains", "gardens", "violins", "maps", "boats",
                    "lighthouses", "forests", "deserts", "cities", "bridges", "islands", "comets", "bees", "tea", "glass"]
        prev_comp = 0
        log_pos = 0
        for t in range(args.ttft_turns):
            q = questions[t % len(questions)].format(subjects[t % len(subjects)])
            msgs.append({"role": "user", "content": q})
            if think_s and t:
                time.sleep(think_s)
            info = wait_quiet(args.quiet_wait, log) if t == 0 else None
            meter = ForeignMeter().start()
            ttft, total, text, usage = chat_stream(srv.url, msgs, args.ttft_max_tokens)
            foreign = meter.stop()[0]
            msgs.append({"role": "assistant", "content": text})
            kv = usage["kvcompact"]
            new_log = "".join(srv.log[log_pos:])
            log_pos = len(srv.log)
            comp = kv["compactions"]
            prev_kind = turns[-1]["kind"] if turns else "normal"
            if comp > prev_comp:
                kind = "after_compaction"  # a compaction ran between the previous answer and this turn's prefill
            elif prev_kind == "after_compaction":
                kind = "next_after_compaction"  # the turn after the one whose usage showed the increment
            else:
                kind = "normal"
            turns.append({"turn": t, "kind": kind, "ttft_s": ttft, "total_s": total, "prompt_tokens": usage["prompt_tokens"],
                          "completion_tokens": usage["completion_tokens"], "compactions": comp,
                          "reused_tokens": kv.get("reused_tokens"), "prefilled_tokens": kv.get("prefilled_tokens"),
                          "longest_head": kv.get("longest_head"), "compaction_seconds_in_request": kv.get("compaction_seconds"),
                          "foreign_cores_during": foreign, "server_log": [l.strip() for l in new_log.splitlines() if "compact" in l],
                          **({"machine": info} if info else {})})
            log(f"  turn {t:2d} {kind:22s} ttft {ttft * 1000 if ttft else float('nan'):7.1f} ms  prefilled "
                f"{kv.get('prefilled_tokens')}  head {kv.get('longest_head')}  compactions {comp}  others {foreign:.2f} cores")
            prev_comp = comp
        m = srv.metrics()
    finally:
        srv.stop()

    def med(kind):
        v = [x["ttft_s"] for x in turns if x["kind"] == kind and x["ttft_s"] is not None]
        return (statistics.median(v), len(v)) if v else (None, 0)

    summary = {k: {"median_ttft_s": med(k)[0], "n": med(k)[1]} for k in ("normal", "after_compaction", "next_after_compaction")}
    return {"think_s": think_s, "ctx": args.ttft_ctx, "keep_recent": args.ttft_keep_recent, "turns": turns, "summary": summary,
            "compaction_seconds_total": m.get("kvcompact_compaction_seconds_total"),
            "compactions_total": m.get("kvcompact_compactions_total")}


def write_json(path, obj):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(DEFAULT_BIN))
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--python", default=str(DEFAULT_PY), help="python with llama_cpp[server]")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048, help="--ctx of kvcompact and --n_ctx of llama.cpp")
    ap.add_argument("--concurrency", default="1,2,4")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rss-prompt-words", type=int, default=240)
    ap.add_argument("--ttft-ctx", type=int, default=512)
    ap.add_argument("--ttft-keep-recent", type=int, default=64)
    ap.add_argument("--ttft-turns", type=int, default=14)
    ap.add_argument("--ttft-max-tokens", type=int, default=48)
    ap.add_argument("--ttft-think", default="0,5", help="comma list: pause (s) between an answer and the next turn, "
                    "one conversation each (0: send at once)")
    ap.add_argument("--quiet-wait", type=float, default=60, help="most seconds to wait for a quiet machine per run")
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--skip-ttft", action="store_true")
    ap.add_argument("--skip-fast-quant", action="store_true", help="do not also measure kvcompact --fast-quant")
    ap.add_argument("--noisy", type=float, default=0.3, help="a run during which other processes used more cores is noisy")
    ap.add_argument("--retries", type=int, default=2, help="repeats of a noisy run")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ks = [int(x) for x in args.concurrency.split(",")]
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731

    import llama_cpp  # noqa: F401 - version only
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "argv": sys.argv, "model": args.model, "threads": args.threads,
           "ctx": args.ctx, "max_tokens": args.max_tokens, "reps": args.reps, "cpu_count": os.cpu_count(),
           "llama_cpp_python": llama_cpp.__version__, "start_loadavg": loadavg()}
    try:
        res["kvcompact_git"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                              capture_output=True, text=True).stdout.strip()
    except OSError:
        pass

    log("starting servers")
    servers = {"kvcompact": KvcServer(args.bin, args.model, args.ctx, args.threads, max(4, max(ks)))}
    if not args.skip_fast_quant:
        servers["kvcompact --fast-quant"] = KvcServer(args.bin, args.model, args.ctx, args.threads, max(4, max(ks)),
                                                      ["--fast-quant"])
        servers["kvcompact --fast-quant"].name = "kvcompact --fast-quant"
    llama_extra = {"repeat_penalty": 1.0}  # llama-cpp-python's default is 1.1; kvcompact has none
    extras = {"kvcompact": None, "kvcompact --fast-quant": None, "llama.cpp": llama_extra}
    if not args.skip_llama:
        servers["llama.cpp"] = LlamaCppServer(args.python, args.model, args.ctx, args.threads)
    res["commands"] = {n: s.cmd for n, s in servers.items()}
    try:
        # RSS per session (first, on fresh processes).
        res["rss"] = {}
        for name, s in servers.items():
            if "fast-quant" in name:
                continue  # same KV cache as plain kvcompact
            info = wait_quiet(args.quiet_wait, log)
            res["rss"][name] = rss_phase(s, ks, args.rss_prompt_words, 32, extras[name], log)
            res["rss"][name]["machine"] = info

        write_json(args.out, {**res, "partial": "rss"})
        # Throughput, interleaved (order reversed every other repetition). A run during which other
        # processes used more than --noisy cores is repeated (at most --retries times).
        for s in servers.values():  # warm-up
            concurrent_round(s.url, 1, 8, "warm", extras[s.name])
        runs = {n: {k: [] for k in ks} for n in servers}
        discarded = {n: {k: [] for k in ks} for n in servers}
        names = list(servers)
        for k in ks:
            for rep in range(args.reps):
                order = names if rep % 2 == 0 else names[::-1]
                for name in order:
                    for attempt in range(args.retries + 1):
                        info = wait_quiet(args.quiet_wait, log)
                        meter = ForeignMeter().start()
                        own0, steal0 = _proc_times(), _steal_s()
                        r = concurrent_round(servers[name].url, k, args.max_tokens, f"r{rep}k{k}{name}{attempt}",
                                             extras[name])
                        r["foreign_cores_during"], r["foreign_top"] = meter.stop()
                        own1, dt = _proc_times(), r["wall_s"]
                        r["steal_cores"] = round((_steal_s() - steal0) / dt, 2)
                        r["server_cores"] = {n: round(sum(own1.get(p, 0) - own0.get(p, 0) for p in _descendants(x.proc.pid))
                                                      / CLK / dt, 2) for n, x in servers.items()}
                        r["machine"] = info
                        log(f"  k={k} rep={rep} {name:20s}: {r['tokens']:4d} tokens in {r['wall_s']:6.2f} s = "
                            f"{r['tok_s']:6.1f} tok/s  (load {info['loadavg'][0]:.2f}, others used "
                            f"{r['foreign_cores_during']:.2f} cores; server used {r['server_cores'][name]:.2f})")
                        if r["foreign_cores_during"] <= args.noisy or attempt == args.retries:
                            runs[name][k].append(r)
                            break
                        discarded[name][k].append(r)
                        log("    noisy: repeating")
        res["throughput"] = {n: {str(k): {"median_tok_s": statistics.median(x["tok_s"] for x in v),
                                          "min_tok_s": min(x["tok_s"] for x in v), "max_tok_s": max(x["tok_s"] for x in v),
                                          "median_wall_s": statistics.median(x["wall_s"] for x in v),
                                          "max_foreign_cores": max(x["foreign_cores_during"] for x in v),
                                          "runs": v, "discarded_noisy": discarded[n][k]} for k, v in d.items()}
                             for n, d in runs.items()}
        write_json(args.out, {**res, "partial": "throughput"})
        if "kvcompact" in servers:
            m = servers["kvcompact"].metrics()
            res["kvcompact_metrics_end"] = {k: v for k, v in m.items() if "{" not in k}
    finally:
        for s in servers.values():
            s.stop()

    if not args.skip_ttft:
        log("TTFT after compaction (kvcompact, small --ctx)")
        res["ttft"] = [ttft_phase(args, log, float(x)) for x in args.ttft_think.split(",")]
    res["end_loadavg"] = loadavg()
    write_json(args.out, res)

    # Markdown tables.
    T = res["throughput"]
    cols = [n for n in T if n != "llama.cpp"]
    lines = ["| sessions | " + " | ".join(f"{n} tok/s" for n in T) + " | "
             + " | ".join(f"{n} / llama.cpp" for n in cols) + " |", "|---:|" + "---:|" * (len(T) + len(cols))]
    for k in ks:
        v = {n: T[n][str(k)]["median_tok_s"] for n in T}
        b = v.get("llama.cpp")
        lines.append(f"| {k} | " + " | ".join(f"{v[n]:.1f} ({T[n][str(k)]['min_tok_s']:.0f}-{T[n][str(k)]['max_tok_s']:.0f})"
                                               for n in T) + " | " + " | ".join(fmt_ratio(v[n], b) for n in cols) + " |")
    lines.append("")
    lines.append("(median of %d runs, min-max in brackets)" % args.reps)
    R = res["rss"]
    lines += ["", "| sessions k | " + " | ".join(f"{n} (RSS_k - idle)/k MiB" for n in R) + " | kvcompact kv_bytes MiB |",
              "|---:|" + "---:|" * (len(R) + 1)]
    for k in ks:
        row = [f"{R[n]['after'][k]['per_session_kib'] / 1024:.2f}" for n in R]
        kvb = R["kvcompact"]["after"][k]["kv_bytes_metric"]
        lines.append(f"| {k} | " + " | ".join(row) + f" | {kvb / 2**20:.2f} |")
    lines.append("| RSS at ready / idle (after warm-up) MiB | " + " | ".join(
        f"{R[n]['ready_rss_kib'] / 1024:.1f} / {R[n]['idle_rss_kib'] / 1024:.1f}" for n in R) + " | |")
    if "ttft" in res:
        lines += ["", "| kvcompact turn (--ctx %d) | pause before turn s | median TTFT ms | turns |" % args.ttft_ctx,
                  "|---|---:|---:|---:|"]
        for ph in res["ttft"]:
            for k, v in ph["summary"].items():
                lines.append(f"| {k} | {ph['think_s']:g} | {v['median_ttft_s'] * 1000:.1f} | {v['n']} |"
                             if v["median_ttft_s"] is not None else f"| {k} | {ph['think_s']:g} | n/a | 0 |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
