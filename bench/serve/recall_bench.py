#!/usr/bin/env python3
"""Fact recall at the end of long conversations: kvcompact serve (compaction) vs llama.cpp's server
vs client-side truncation.

Conversations come from bench/serve/long_chat.py (facts planted early among filler turns, questions
at the end). The client sends the turns one by one, resending the whole history each turn (as real
clients do), with --max-tokens (32) and temperature 0; then it asks each question as the last turn
over that history. A reply is correct when it contains the answer (case-insensitive). Request
errors (e.g. llama.cpp's context overflow) are recorded as wrong answers and counted.

Systems (--systems, comma-separated):
  am, streaming, recent, ...  kvcompact serve --method NAME --ctx CTX (a fresh server process each)
  am@whole, ...               the same with --allocation whole (NAME@proportional: the default)
  full                        kvcompact serve with a --ctx that never compacts: the whole history
                              in the cache, the upper bound of the others
  llamacpp                    python -m llama_cpp.server --n_ctx CTX, as it ships (no truncation)
  trunc                       client-side truncation: the oldest user/assistant pairs are dropped
                              until the rendered prompt plus max_tokens fits CTX, sent to
                              llama.cpp's server (--trunc-backend llamacpp, default) or to
                              kvcompact serve with a --ctx that never compacts (kvcompact)
Memory per session: the peak usage.kvcompact.cache_bytes of a conversation for kvcompact (float32
keys and values, beta, positions: what the process holds); for llama.cpp n_ctx * n_layers *
n_kv_heads * head_dim * 2 (K and V) * 2 bytes (f16 KV), from the GGUF metadata.

Usage:
  .venv/bin/python bench/serve/recall_bench.py --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --ctx 1024 --n-conversations 3 --facts 5 --target-tokens 4096 --threads 2 --out /tmp/recall.json
"""
import argparse
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import long_chat  # noqa: E402

SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly."


def log(msg):
    print(f"[recall_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def write_json_atomic(path, obj):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url, timeout=2):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except Exception:  # noqa: BLE001
        return False


class Server:
    """A server subprocess with its log; stopped with SIGTERM (then SIGKILL) by its own pid."""

    def __init__(self, cmd, log_path, port=None, health="/health", start_timeout=300):
        self.cmd, self.log_path = cmd, log_path
        self.logf = open(log_path, "w")
        log(f"starting: {' '.join(cmd)}")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, cwd=ROOT)
        self.port = port
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode} at start; log {log_path}:\n"
                                   + self.tail())
            if self.port is None:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log_path).read())
                if m:
                    self.port = int(m.group(1))
            if self.port is not None and http_ok(f"http://127.0.0.1:{self.port}{health}"):
                break
            if time.time() - t0 > start_timeout:
                self.stop()
                raise RuntimeError(f"server not ready after {start_timeout}s; log {log_path}:\n" + self.tail())
            time.sleep(0.5)
        self.start_s = time.time() - t0
        log(f"ready on port {self.port} after {self.start_s:.1f}s")

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}/v1"

    def tail(self, n=20):
        try:
            return "".join(open(self.log_path).readlines()[-n:])
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def gguf_kv_geometry(model):
    """n_layers, n_kv_heads, head_dim (K and V) from the GGUF metadata."""
    import gguf
    r = gguf.GGUFReader(model)

    def val(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        v = f.parts[f.data[0]]
        if f.types and f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(v).decode("utf-8")
        return int(v[0])

    arch = val("general.architecture")
    n_layers = val(f"{arch}.block_count")
    n_head = val(f"{arch}.attention.head_count")
    n_kv = val(f"{arch}.attention.head_count_kv", n_head)
    emb = val(f"{arch}.embedding_length")
    k_dim = val(f"{arch}.attention.key_length", emb // n_head)
    v_dim = val(f"{arch}.attention.value_length", k_dim)
    return {"arch": arch, "n_layers": n_layers, "n_kv_heads": n_kv, "head_dim_k": k_dim, "head_dim_v": v_dim}


def llamacpp_kv_bytes(n_ctx, geo):
    # f16 keys and values: n_ctx * n_layers * n_kv_heads * (k_dim + v_dim) * 2 bytes.
    return n_ctx * geo["n_layers"] * geo["n_kv_heads"] * (geo["head_dim_k"] + geo["head_dim_v"]) * 2


class Renderer:
    """Token length of a rendered chat prompt (the GGUF's own chat template, llama_cpp tokenizer)."""

    def __init__(self, model):
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        self.llm = Llama(model_path=model, vocab_only=True, verbose=False)
        md = self.llm.metadata
        tmpl = md.get("tokenizer.chat_template")
        if not tmpl:
            raise SystemExit(f"recall_bench: {model} has no chat template (needed for trunc)")

        def tok(key):
            i = md.get(key)
            return self.llm.detokenize([int(i)], special=True).decode("utf-8", "replace") if i is not None else ""
        self.fmt = Jinja2ChatFormatter(tmpl, eos_token=tok("tokenizer.ggml.eos_token_id"),
                                       bos_token=tok("tokenizer.ggml.bos_token_id"), add_generation_prompt=True)

    def n_tokens(self, messages):
        prompt = self.fmt(messages=messages).prompt
        return len(self.llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))


def truncate_history(messages, renderer, n_ctx, max_tokens):
    """Drop the oldest user/assistant pairs (after the system message) until prompt + max_tokens fits."""
    sys_msgs = [m for m in messages[:1] if m["role"] == "system"]
    rest = messages[len(sys_msgs):]
    dropped = 0
    while len(rest) > 1 and renderer.n_tokens(sys_msgs + rest) + max_tokens > n_ctx:
        rest = rest[2:] if len(rest) > 2 else rest[1:]
        dropped += 1
    return sys_msgs + rest, dropped


def sem(xs):
    n = len(xs)
    if n < 2:
        return 0.0
    m = sum(xs) / n
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n)


def chat(client, model_id, messages, max_tokens, timeout):
    """(reply text, usage dict) or raises."""
    resp = client.chat.completions.create(model=model_id, messages=messages, max_tokens=max_tokens,
                                          temperature=0, timeout=timeout)
    d = resp.model_dump()
    text = (d["choices"][0]["message"].get("content") or "") if d.get("choices") else ""
    return text, d.get("usage") or {}


def run_conversation(client, model_id, conv, a, renderer=None, server=None):
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    rec = {"id": conv["id"], "turn_errors": 0, "question_errors": 0, "errors": [], "answers": [],
           "peak_cache_bytes": 0, "peak_longest_head": 0, "compactions": 0, "compaction_seconds": 0.0,
           "dropped_pairs_max": 0, "original_tokens": 0}

    def send(msgs, max_tokens):
        if renderer is not None:
            msgs, dropped = truncate_history(msgs, renderer, a.ctx, max_tokens)
            rec["dropped_pairs_max"] = max(rec["dropped_pairs_max"], dropped)
        text, usage = chat(client, model_id, msgs, max_tokens, a.request_timeout)
        kv = usage.get("kvcompact") or {}
        if kv:
            rec["peak_cache_bytes"] = max(rec["peak_cache_bytes"], int(kv.get("cache_bytes", 0)))
            rec["peak_longest_head"] = max(rec["peak_longest_head"], int(kv.get("longest_head", 0)))
            rec["compactions"] = max(rec["compactions"], int(kv.get("compactions", 0)))
            rec["compaction_seconds"] = max(rec["compaction_seconds"], float(kv.get("compaction_seconds", 0)))
            rec["original_tokens"] = max(rec["original_tokens"], int(kv.get("original_tokens", 0)))
            rec["session"] = kv.get("session")
        return text

    def describe(e):
        s = f"{type(e).__name__}: {getattr(e, 'status_code', '')} {e}"
        return s[:400]

    for t, user in enumerate(conv["turns"]):
        msgs = messages + [{"role": "user", "content": user}]
        try:
            reply = send(msgs, a.max_tokens)
        except Exception as e:  # noqa: BLE001
            rec["turn_errors"] += 1
            rec["errors"].append({"turn": t, "error": describe(e)})
            reply = ""
            if server is not None and not server.alive():
                rec["errors"].append({"turn": t, "error": "server died:\n" + server.tail()})
                raise RuntimeError(f"server died during {conv['id']} turn {t}")
        messages = msgs + [{"role": "assistant", "content": reply}]
        if a.verbose:
            log(f"  {conv['id']} turn {t + 1}/{len(conv['turns'])}: {reply[:60]!r}")
    for q in conv["questions"]:
        msgs = messages + [{"role": "user", "content": q["question"]}]
        err = None
        try:
            reply = send(msgs, a.question_max_tokens)
        except Exception as e:  # noqa: BLE001
            err = describe(e)
            rec["question_errors"] += 1
            rec["errors"].append({"question": q["question"], "error": err})
            reply = ""
        ok = (not err) and q["answer"].lower() in reply.lower()
        rec["answers"].append({"question": q["question"], "answer": q["answer"], "reply": reply,
                               "correct": bool(ok), "error": err})
    return rec


def system_server(name, a, geo):
    """(server, trunc renderer or None, memory formula or None)."""
    os.makedirs(a.log_dir, exist_ok=True)
    logp = os.path.join(a.log_dir, f"{name}.log")
    kvc = os.path.join(ROOT, a.kvcompact)
    if name in ("llamacpp", "trunc") and (name == "llamacpp" or a.trunc_backend == "llamacpp"):
        port = free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", a.model, "--n_ctx", str(a.ctx),
               "--port", str(port), "--host", "127.0.0.1", "--n_threads", str(a.threads),
               "--n_threads_batch", str(a.threads), "--seed", "0"]
        srv = Server(cmd, logp, port=port, health="/v1/models")
        return srv, llamacpp_kv_bytes(a.ctx, geo)
    if name in ("trunc", "full"):  # kvcompact with a ctx that never compacts (full: the whole history)
        big = max(4 * a.ctx, a.target_tokens * 2)
        cmd = [kvc, "serve", "--model", a.model, "--port", "0", "--ctx", str(big), "--threads", str(a.threads),
               "--slots", str(a.slots), "--kv-budget", str(a.trunc_kv_budget_mib)]
    else:
        method, _, allocation = name.partition("@")
        cmd = [kvc, "serve", "--model", a.model, "--port", "0", "--ctx", str(a.ctx), "--method", method,
               "--threads", str(a.threads), "--slots", str(a.slots)]
        if allocation:
            cmd += ["--allocation", allocation]
        if a.keep_recent is not None:
            cmd += ["--keep-recent", str(a.keep_recent)]
        if a.target_ratio is not None:
            cmd += ["--target-ratio", str(a.target_ratio)]
    if a.fast_quant:
        cmd.append("--fast-quant")
    return Server(cmd, logp), None


def summarize(name, recs, wall, mem_formula, server_start_s, label):
    answers = [x for r in recs for x in r["answers"]]
    xs = [1.0 if x["correct"] else 0.0 for x in answers]
    mem = mem_formula if mem_formula is not None else (
        max((r["peak_cache_bytes"] for r in recs), default=0))
    return {"system": name, "label": label, "n_conversations": len(recs), "n_questions": len(xs),
            "correct": int(sum(xs)), "accuracy": (sum(xs) / len(xs)) if xs else 0.0, "sem": sem(xs),
            "question_errors": sum(r["question_errors"] for r in recs),
            "turn_errors": sum(r["turn_errors"] for r in recs),
            "mem_bytes_per_session": mem,
            "mem_source": "n_ctx*layers*kv_heads*(k+v dim)*2 B (f16)" if mem_formula is not None
            else "peak usage.kvcompact.cache_bytes",
            "compactions_mean": (sum(r["compactions"] for r in recs) / len(recs)) if recs else 0,
            "wall_s": wall, "server_start_s": server_start_s, "conversations": recs}


def label_of(name, a):
    if name == "llamacpp":
        return f"llama.cpp server, n_ctx {a.ctx} (as shipped)"
    if name == "full":
        return "full cache (kvcompact serve, no compaction): the upper bound"
    if name == "trunc":
        return f"truncation (oldest pairs) to {a.ctx}, {'llama.cpp' if a.trunc_backend == 'llamacpp' else 'kvcompact'}"
    method, _, allocation = name.partition("@")
    return f"kvcompact serve --method {method} --ctx {a.ctx}" + (f" --allocation {allocation}" if allocation else "")


def markdown(results, a):
    lines = ["| system | recall | ± SEM | correct / questions | errors (questions / turns) | "
             "KV memory per session | compactions / conv | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['label']} | {r['accuracy']:.3f} | {r['sem']:.3f} | {r['correct']} / {r['n_questions']} | "
                     f"{r['question_errors']} / {r['turn_errors']} | {r['mem_bytes_per_session'] / 2**20:.1f} MiB | "
                     f"{r['compactions_mean']:.1f} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ctx", type=int, default=1024, help="kvcompact --ctx and llama.cpp --n_ctx")
    ap.add_argument("--n-conversations", type=int, default=3)
    ap.add_argument("--facts", type=int, default=5)
    ap.add_argument("--target-tokens", type=int, default=0, help="conversation length (default 4 x ctx)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--systems", default="am,streaming,recent,llamacpp,trunc")
    ap.add_argument("--max-tokens", type=int, default=32, help="max_tokens of filler turns")
    ap.add_argument("--question-max-tokens", type=int, default=32)
    ap.add_argument("--keep-recent", type=int, default=None, help="kvcompact --keep-recent (default: server's)")
    ap.add_argument("--target-ratio", type=float, default=None, help="kvcompact --target-ratio (default: server's)")
    ap.add_argument("--fast-quant", action="store_true", help="kvcompact serve --fast-quant")
    ap.add_argument("--trunc-backend", choices=["llamacpp", "kvcompact"], default="llamacpp")
    ap.add_argument("--trunc-kv-budget-mib", type=float, default=512,
                    help="--kv-budget of the kvcompact truncation server (its prompts rarely extend a session)")
    ap.add_argument("--kvcompact", default="build/kvcompact")
    ap.add_argument("--conversations", help="JSON from long_chat.py (default: generated here)")
    ap.add_argument("--request-timeout", type=float, default=600)
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds per system; no new conversation starts after it (0 = none)")
    ap.add_argument("--log-dir", default="/tmp/recall_bench_logs")
    ap.add_argument("--out", default="recall_bench.json")
    ap.add_argument("--resume", action="store_true",
                    help="keep the systems --out already holds (same config) and run only the others")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    a.model = os.path.abspath(a.model)
    if not a.target_tokens:
        a.target_tokens = 4 * a.ctx
    import openai
    import llama_cpp

    if a.conversations:
        convs = json.load(open(a.conversations))
        meta = {"sources": ["file " + a.conversations]}
    else:
        convs, meta = long_chat.generate(a.n_conversations, a.facts, a.target_tokens, a.seed, a.model,
                                         reply_tokens=a.max_tokens)
    log(f"{len(convs)} conversations, ~{sum(c['approx_tokens'] for c in convs) // len(convs)} tokens and "
        f"{sum(len(c['turns']) for c in convs) / len(convs):.0f} turns each, {len(convs[0]['questions'])} questions")
    geo = gguf_kv_geometry(a.model)
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    out = {"config": {k: v for k, v in vars(a).items()}, "conversations_meta": meta, "kv_geometry": geo,
           "versions": {"openai": openai.__version__, "llama_cpp_python": llama_cpp.__version__,
                        "python": sys.version.split()[0]},
           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "results": []}
    if a.resume and os.path.exists(a.out):
        with open(a.out) as f:
            old = json.load(f)
        same = {k: v for k, v in old.get("config", {}).items() if k not in ("systems", "resume")} == \
            {k: v for k, v in out["config"].items() if k not in ("systems", "resume")}
        if not same:
            sys.exit(f"recall_bench: {a.out} holds a run with other settings; give another --out or drop --resume")
        out["results"] = [r for r in old.get("results", []) if "failed" not in r and "note" not in r]
        out["date"] = old.get("date", out["date"])
        log(f"resuming: {', '.join(r['system'] for r in out['results']) or 'nothing'} already in {a.out}")
    renderer = None
    for name in systems:
        if any(r["system"] == name for r in out["results"]):
            continue
        log(f"== system {name}")
        t0 = time.time()
        recs, start_s, note = [], None, None
        try:
            srv, mem_formula = system_server(name, a, geo)
        except Exception as e:  # noqa: BLE001
            log(f"system {name}: cannot start: {e}")
            out["results"].append({"system": name, "label": label_of(name, a), "failed": str(e)[:2000]})
            write_json_atomic(a.out, out)
            continue
        start_s = srv.start_s
        try:
            client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            model_id = client.models.list().data[0].id
            rend = None
            if name == "trunc":
                renderer = renderer or Renderer(a.model)
                rend = renderer
            for i, conv in enumerate(convs):
                if a.time_limit and time.time() - t0 > a.time_limit:
                    note = f"time limit: {i} of {len(convs)} conversations"
                    log(note)
                    break
                tc = time.time()
                rec = run_conversation(client, model_id, conv, a, rend, srv)
                rec["wall_s"] = time.time() - tc
                recs.append(rec)
                log(f"{name} {conv['id']} ({i + 1}/{len(convs)}): {sum(x['correct'] for x in rec['answers'])}/"
                    f"{len(rec['answers'])} correct, errors q{rec['question_errors']}/t{rec['turn_errors']}, "
                    f"peak cache {rec['peak_cache_bytes'] / 2**20:.1f} MiB, compactions {rec['compactions']}, "
                    f"{rec['wall_s']:.0f}s")
        except Exception as e:  # noqa: BLE001
            note = f"aborted: {e}"
            log(f"system {name}: {note}\n{srv.tail()}")
        finally:
            srv.stop()
        res = summarize(name, recs, time.time() - t0, mem_formula, start_s, label_of(name, a))
        if note:
            res["note"] = note
        out["results"].append(res)
        write_json_atomic(a.out, out)
    done = [r for r in out["results"] if "failed" not in r]
    table = markdown(done, a)
    out["table"] = table
    write_json_atomic(a.out, out)
    print(table)
    for r in out["results"]:
        if "failed" in r or "note" in r:
            print(f"\n{r['system']}: {r.get('failed') or r.get('note')}")


if __name__ == "__main__":
    main()
