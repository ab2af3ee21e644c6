"""Prefill (pp) and decode (tg) tokens/s of kvcompact next to llama.cpp (llama-cpp-python) on the
same GGUF file, threads and token counts, in one run: runs interleaved, medians, and the ratio.

usage: .venv/bin/python bench/vs_llama_cpp.py [--model FILE.gguf ...]
       [--random qwen3-0.6b:Q4_0,llama-3.2-1b:BF16,...] [--kvc-arg=--fast-quant]
       [--threads 1,2] [--modes exact,fast] [--kvcompact BIN] [--isa avx2] [--prompt-tokens 512] [--gen-tokens 32] [--runs 3] [--unset-openblas-env]
--model: real GGUF files (default models/SmolLM2-135M-Instruct.Q4_1.gguf when nothing else is given).
--random SHAPE:TYPE,...: random-weight GGUFs with a real model's shapes (qwen3-0.6b, llama-3.2-1b,
  qwen2.5-1.5b; types F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q4_K, and Q4_K_M; "all" for every pair), written by
  gguf-py's GGUFWriter with the real tokenizer (shared/data/tokenizers) into --scratch, benchmarked,
  and deleted afterwards. Q4_K_M is made as llama.cpp makes it: a random F16 file quantised by
  llama_cpp.llama_model_quantize with LLAMA_FTYPE_MOSTLY_Q4_K_M, so that the Q6_K tensors (the tied
  embedding / output, half the attn_v and ffn_down) sit where llama.cpp puts them.
--threads 1,2: every file at each thread count (both sides).
--modes exact,fast: kvcompact's exact mode and --fast-quant, interleaved with llama.cpp in the same runs.
--isa scalar|avx2|avx512: KVC_ISA for kvcompact, to run a lower kernel level on this CPU.
--kvc-arg: extra argument for `kvcompact speed` (repeatable).
--unset-openblas-env drops OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE for both sides in this command
only (this environment pins an older OpenBLAS kernel; users' machines do not).
Prints one table over all files, the load average before and after, and the raw runs as JSON.
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
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=dict(ENV, OMP_NUM_THREADS=str(threads)))
    return json.loads(out.stdout.strip().splitlines()[-1])


def kvcompact_once(model, threads, n_prompt, n_gen, extra=()):
    out = subprocess.run([KVC_BIN, "speed", "--model", model, "--threads", str(threads),
                          "--prompt-tokens", str(n_prompt), "--gen-tokens", str(n_gen), "--runs", "1", "--json"]
                         + KVC_ARGS + list(extra), check=True, capture_output=True, text=True,
                         env=dict(ENV, OMP_NUM_THREADS=str(threads)))
    j = json.loads(out.stdout)
    return {"pp": j["pp_tokens_per_s"], "tg": j["tg_tokens_per_s"]}



# Real shapes (config.json of Qwen/Qwen3-0.6B, meta-llama/Llama-3.2-1B, Qwen/Qwen2.5-1.5B-Instruct);
# tied embeddings. qkv_bias: attn_{q,k,v}.bias tensors (Qwen2).
SHAPES = {
    "qwen3-0.6b": dict(arch="qwen3", vocab=151936, dim=1024, layers=28, heads=16, kv_heads=8, head_dim=128,
                       ffn=3072, eps=1e-6, theta=1e6, tokenizer="qwen3", pre="qwen2"),
    "llama-3.2-1b": dict(arch="llama", vocab=128256, dim=2048, layers=16, heads=32, kv_heads=8, head_dim=64,
                         ffn=8192, eps=1e-5, theta=5e5, tokenizer="llama3", pre="llama-bpe"),
    # Qwen2.5's tokenizer is Qwen3's BPE (same vocabulary and merges, "qwen2" pre-tokenizer).
    "qwen2.5-1.5b": dict(arch="qwen2", vocab=151936, dim=1536, layers=28, heads=12, kv_heads=2, head_dim=128,
                         ffn=8960, eps=1e-6, theta=1e6, tokenizer="qwen3", pre="qwen2", qkv_bias=True),
}
TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q4_K_M"]
# Offsets of the f16 scale fields in a block (ggml-common.h), set to small finite values.
SCALE_AT = {"Q8_0": [0], "Q4_0": [0], "Q4_1": [0, 2], "Q4_K": [0, 2]}


def random_tensor(rng, qtype, rows, cols):
    """(array, raw_dtype) for gguf-py: random values (F32/F16/BF16) or random blocks with scales in
    [0.002, 0.02] (quantised types; content does not change speed)."""
    import numpy as np
    import gguf
    if qtype in ("F32", "F16", "BF16"):
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02)
        if qtype == "F32":
            return x, None
        if qtype == "F16":
            return x.astype(np.float16), None
        return (x.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, cols * 2), gguf.GGMLQuantizationType.BF16
    t = gguf.GGMLQuantizationType[qtype]
    block, nbytes = gguf.GGML_QUANT_SIZES[t]
    b = rng.integers(0, 256, size=(rows, cols // block, nbytes), dtype=np.uint8)
    for off in SCALE_AT[qtype]:
        b[:, :, off:off + 2] = rng.uniform(0.002, 0.02, size=(rows, cols // block)).astype(np.float16).view(np.uint8).reshape(rows, cols // block, 2)
    return b.reshape(rows, -1), t


def write_random_gguf(path, shape_name, qtype, seed=0):
    """A GGUF file with shape_name's architecture, hyper-parameters and real tokenizer (padded with
    [PAD i] tokens to the model's vocabulary, as convert_hf_to_gguf does) and random weights of
    qtype (norms F32)."""
    import numpy as np
    import gguf
    c = SHAPES[shape_name]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, c["arch"])
    w.add_name(f"random {shape_name} {qtype}")
    w.add_context_length(4096)
    w.add_embedding_length(c["dim"])
    w.add_block_count(c["layers"])
    w.add_feed_forward_length(c["ffn"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_layer_norm_rms_eps(c["eps"])
    w.add_rope_freq_base(c["theta"])
    w.add_rope_dimension_count(c["head_dim"])
    with open(os.path.join(ROOT, "..", "shared", "data", "tokenizers", c["tokenizer"], "tokenizer.json")) as f:
        tj = json.load(f)
    vocab = dict(tj["model"]["vocab"])
    special = {}
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
        special[t["id"]] = t.get("special", False)
    tokens = [f"[PAD{i}]" for i in range(c["vocab"])]
    types = [gguf.TokenType.UNUSED] * c["vocab"]
    for text, i in vocab.items():
        if i < c["vocab"]:
            tokens[i] = text
            types[i] = gguf.TokenType.CONTROL if special.get(i) else (gguf.TokenType.USER_DEFINED if i in special else gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(c["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(min(special) if special else 0)
    w.add_eos_token_id(min(special) if special else 0)
    dim, hd, qd, kvd, ffn = c["dim"], c["head_dim"], c["heads"] * c["head_dim"], c["kv_heads"] * c["head_dim"], c["ffn"]
    ones = lambda n: np.ones(n, dtype=np.float32)

    def add(name, rows, cols):
        arr, raw = random_tensor(rng, qtype, rows, cols)
        w.add_tensor(name, arr, raw_dtype=raw)

    add("token_embd.weight", c["vocab"], dim)
    w.add_tensor("output_norm.weight", ones(dim))
    for l in range(c["layers"]):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", ones(dim))
        add(p + "attn_q.weight", qd, dim)
        add(p + "attn_k.weight", kvd, dim)
        add(p + "attn_v.weight", kvd, dim)
        add(p + "attn_output.weight", dim, qd)
        if c.get("qkv_bias"):
            for t, n in (("q", qd), ("k", kvd), ("v", kvd)):
                w.add_tensor(p + f"attn_{t}.bias", (rng.standard_normal(n, dtype=np.float32) * 0.02))
        if c["arch"] == "qwen3":
            w.add_tensor(p + "attn_q_norm.weight", ones(hd))
            w.add_tensor(p + "attn_k_norm.weight", ones(hd))
        w.add_tensor(p + "ffn_norm.weight", ones(dim))
        add(p + "ffn_gate.weight", ffn, dim)
        add(p + "ffn_up.weight", ffn, dim)
        add(p + "ffn_down.weight", dim, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_q4_k_m_gguf(path, shape_name, threads, seed=0):
    """shape_name as llama.cpp's Q4_K_M: a random F16 GGUF (deleted afterwards) quantised by
    llama_cpp.llama_model_quantize with LLAMA_FTYPE_MOSTLY_Q4_K_M."""
    f16 = path + ".f16.gguf"
    write_random_gguf(f16, shape_name, "F16", seed)
    try:
        code = f"""
import llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
p.nthread = {threads}
rc = llama_cpp.llama_model_quantize({f16!r}.encode(), {path!r}.encode(), p)
raise SystemExit(rc)
"""
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    finally:
        os.remove(f16)


MODES = {"exact": [], "fast": ["--fast-quant"]}


def bench_file(model, threads, modes, a):
    """Interleaved fresh processes: each run does llama.cpp and every kvcompact mode, in an order
    rotated from run to run. Returns medians {side: {pp, tg}} and the raw runs."""
    sides = [("llama.cpp", lambda: llama_cpp_once(model, threads, a.prompt_tokens, a.gen_tokens))]
    for m in modes:
        sides.append((f"kvcompact {m}", lambda m=m: kvcompact_once(model, threads, a.prompt_tokens, a.gen_tokens, MODES[m])))
    res = {name: [] for name, _ in sides}
    for r in range(a.runs):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for name, fn in order:
            res[name].append(fn())
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("pp", "tg")} for k, v in res.items()}
    return med, res


def main():
    global ENV, KVC_ARGS, KVC_BIN
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--random", default="", help="SHAPE:TYPE,... or all")
    ap.add_argument("--scratch", default=os.path.join(ROOT, "build", "bench_gguf"))
    ap.add_argument("--kvc-arg", action="append", default=[])
    ap.add_argument("--kvcompact", default=os.path.join(ROOT, "build", "kvcompact"), help="the kvcompact binary")
    ap.add_argument("--threads", default="2", help="comma-separated thread counts, e.g. 1,2")
    ap.add_argument("--modes", default="exact", help="kvcompact modes, comma-separated: exact, fast (--fast-quant)")
    ap.add_argument("--isa", default="", help="KVC_ISA for kvcompact (scalar, avx2, avx512): force a kernel level")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--unset-openblas-env", action="store_true")
    a = ap.parse_args()
    KVC_ARGS = a.kvc_arg
    KVC_BIN = a.kvcompact
    if not os.access(KVC_BIN, os.X_OK):
        sys.exit(f"vs_llama_cpp: {KVC_BIN}: no kvcompact binary (build it: bash scripts/setup.sh)")
    try:
        thread_list = [int(t) for t in a.threads.split(",")]
        assert thread_list and all(t >= 1 for t in thread_list)
    except (ValueError, AssertionError):
        sys.exit(f"vs_llama_cpp: --threads {a.threads}: expected positive integers separated by commas")
    modes = a.modes.split(",")
    for m in modes:
        if m not in MODES:
            sys.exit(f"vs_llama_cpp: --modes {a.modes}: {m} is not one of {list(MODES)}")
    models = list(a.model)
    randoms = []
    if a.random == "all":
        randoms = [(s, t) for s in SHAPES for t in TYPES]
    elif a.random:
        for item in a.random.split(","):
            shape, _, qtype = item.partition(":")
            if shape not in SHAPES or qtype not in TYPES:
                sys.exit(f"vs_llama_cpp: --random {item}: expected SHAPE:TYPE with SHAPE in {list(SHAPES)} and TYPE in {TYPES}")
            randoms.append((shape, qtype))
    if not models and not randoms:
        models = [os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")]
    for m in models:
        if not os.path.exists(m):
            sys.exit(f"vs_llama_cpp: {m}: no such model file (run bash scripts/fetch_models.sh)")
    ENV = dict(os.environ)
    if a.isa:
        ENV["KVC_ISA"] = a.isa
    if a.unset_openblas_env:
        ENV.pop("OPENBLAS_CORETYPE", None)
        ENV.pop("OPENBLAS_L2_SIZE", None)
    load_before = os.getloadavg()
    rows, raw = [], {}
    jobs = [(os.path.basename(m), m, None) for m in models] + [(f"{s} {t} (random)", None, (s, t)) for s, t in randoms]
    for label, path, rnd in jobs:
        if rnd is not None:
            os.makedirs(a.scratch, exist_ok=True)
            path = os.path.join(a.scratch, f"{rnd[0]}-{rnd[1]}.gguf")
            t0 = time.time()
            if rnd[1] == "Q4_K_M":
                write_q4_k_m_gguf(path, rnd[0], max(thread_list))
            else:
                write_random_gguf(path, *rnd)
            print(f"# wrote {path} ({os.path.getsize(path) / 1e9:.2f} GB, {time.time() - t0:.0f} s)", file=sys.stderr)
        try:
            for t in thread_list:
                med, res = bench_file(path, t, modes, a)
                rows.append((label, t, med))
                raw[f"{label} @{t}"] = res
                print(f"# {label} @{t}: " + ", ".join(f"{k} pp {v['pp']:.1f} tg {v['tg']:.1f}" for k, v in med.items()),
                      file=sys.stderr)
        finally:
            if rnd is not None:
                os.remove(path)
    load_after = os.getloadavg()
    env = "OPENBLAS_CORETYPE unset" if a.unset_openblas_env else f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
    extra = f", kvcompact {' '.join(KVC_ARGS)}" if KVC_ARGS else ""
    isa = f", KVC_ISA={a.isa}" if a.isa else ""
    print(f"pp{a.prompt_tokens} / tg{a.gen_tokens} tokens/s, medians of {a.runs} interleaved runs, {env}{extra}{isa}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after. Ratio = kvcompact / llama.cpp")
    head = "| file | threads | llama.cpp pp | " + " | ".join(f"{m} pp (ratio)" for m in modes) + " | llama.cpp tg | " + \
        " | ".join(f"{m} tg (ratio)" for m in modes) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for label, t, med in rows:
        l = med["llama.cpp"]
        cells = [label, str(t), f"{l['pp']:.1f}"]
        cells += [f"{med['kvcompact ' + m]['pp']:.1f} ({med['kvcompact ' + m]['pp'] / l['pp']:.2f})" for m in modes]
        cells += [f"{l['tg']:.1f}"]
        cells += [f"{med['kvcompact ' + m]['tg']:.1f} ({med['kvcompact ' + m]['tg'] / l['tg']:.2f})" for m in modes]
        print("| " + " | ".join(cells) + " |")
    print(json.dumps({"load_average": [load_before, load_after], "runs": raw}))


ENV = None
KVC_ARGS = []
KVC_BIN = os.path.join(ROOT, "build", "kvcompact")
if __name__ == "__main__":
    main()
