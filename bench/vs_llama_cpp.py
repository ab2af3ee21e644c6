"""Prefill (pp) and decode (tg) tokens/s of kvcompact next to llama.cpp (llama-cpp-python) on the
same GGUF file, threads and token counts, in one run: runs interleaved, medians, and the ratio.

usage: .venv/bin/python bench/vs_llama_cpp.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
       [--threads 2] [--prompt-tokens 512] [--gen-tokens 32] [--runs 3] [--unset-openblas-env]
--unset-openblas-env drops OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for both sides in this command
only (this environment pins an older OpenBLAS kernel; users' machines do not).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def llama_cpp_once(model, threads, n_prompt, n_gen):
    """One llama.cpp run in a fresh process (same conditions as a kvcompact run)."""
    code = f"""
import json, random, time, llama_cpp
import numpy as np

llm = llama_cpp.Llama(model_path={model!r}, n_ctx={n_prompt + n_gen + 8}, n_batch={n_prompt}, n_ubatch={n_prompt},
                      n_threads={threads}, n_threads_batch={threads}, verbose=False)
rng = random.Random(42)
prompt = [rng.randrange(llm.n_vocab()) for _ in range({n_prompt})]
llm.eval(prompt[:16]); llm.reset()  # warm-up: page in the weights
t0 = time.perf_counter(); llm.eval(prompt); t1 = time.perf_counter()
for _ in range({n_gen}):
    # the last row's logits (llm.scores is only filled with logits_all, and has n_batch rows)
    last = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
    llm.eval([int(last.argmax())])
t2 = time.perf_counter()
print(json.dumps({{"pp": {n_prompt} / (t1 - t0), "tg": {n_gen} / (t2 - t1)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=ENV)
    return json.loads(out.stdout.strip().splitlines()[-1])


def kvcompact_once(model, threads, n_prompt, n_gen):
    out = subprocess.run([os.path.join(ROOT, "build", "kvcompact"), "speed", "--model", model, "--threads", str(threads),
                          "--prompt-tokens", str(n_prompt), "--gen-tokens", str(n_gen), "--runs", "1", "--json"],
                         check=True, capture_output=True, text=True, env=ENV)
    j = json.loads(out.stdout)
    return {"pp": j["pp_tokens_per_s"], "tg": j["tg_tokens_per_s"]}


def main():
    global ENV
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--unset-openblas-env", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(a.model):
        sys.exit(f"vs_llama_cpp: {a.model}: no such model file (run bash scripts/fetch_models.sh)")
    ENV = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    if a.unset_openblas_env:
        ENV.pop("OPENBLAS_CORETYPE", None)
        ENV.pop("OPENBLAS_L2_SIZE", None)
    res = {"kvcompact": [], "llama.cpp": []}
    for r in range(a.runs):
        order = [("kvcompact", kvcompact_once), ("llama.cpp", llama_cpp_once)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            res[name].append(fn(a.model, a.threads, a.prompt_tokens, a.gen_tokens))
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("pp", "tg")} for k, v in res.items()}
    env = "OPENBLAS_CORETYPE unset" if a.unset_openblas_env else f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    print(f"{os.path.basename(a.model)}, {a.threads} threads, medians of {a.runs} interleaved runs, {env}")
    print(f"| test | llama.cpp t/s | kvcompact t/s | ratio |")
    print(f"|---|---|---|---|")
    for m, label in (("pp", f"pp{a.prompt_tokens}"), ("tg", f"tg{a.gen_tokens}")):
        l, k = med["llama.cpp"][m], med["kvcompact"][m]
        print(f"| {label} | {l:.1f} | {k:.1f} | {k / l:.2f} |")
    print(json.dumps({"median": med, "runs": res}))


ENV = None
if __name__ == "__main__":
    main()
