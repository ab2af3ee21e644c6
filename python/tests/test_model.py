"""kvcompact.Model against the kvcompact CLI (same library, another process) on stories260K and
against Hugging Face transformers (the same GGUF, dequantized to float32; conftest's hf_smollm2) on
SmolLM2-135M-Instruct Q4_1, with the tolerance of tests/smollm2_reference_test.cpp."""
import numpy as np
import pytest

import kvcompact
from conftest import SMOLLM2, STORIES, TINYSTORIES, cli_json, fresh_hf, require


def test_config_and_tokenizer_equal_cli(stories):
    info = cli_json("info", "--model", str(STORIES))
    assert set(stories.config) == set(info) | {"adds_bos"}
    for k in info:
        assert stories.config[k] == info[k], k
    text = "Lily saw a cat. It was big and soft!"
    tok = cli_json("tokenize", "--model", str(STORIES), "--text", text)
    ids = stories.tokenize(text)
    assert ids == tok["ids"]
    assert stories.detokenize(ids) == text


def test_logits_nll_generate_equal_cli(stories):
    kvcompact.set_threads(1)
    prompt = "Once upon a time"
    ids = stories.tokenize(prompt)
    logits = stories.logits(ids)
    assert logits.shape == (len(ids), stories.config["vocab_size"]) and logits.dtype == np.float32
    top = cli_json("logits", "--model", str(STORIES), "--prompt", prompt, "--top", "5")["top"]
    last = stories.logits(ids, last=True)
    assert [t["id"] for t in top] == list(np.argsort(-last, kind="stable")[:5])
    assert [np.float32(t["logit"]) for t in top] == [last[t["id"]] for t in top]  # the same floats
    assert np.abs(logits[-1] - last).max() <= 1e-5 * np.abs(last).max()  # the full forward's last row

    data = require(TINYSTORIES).read_bytes().decode()
    ids = stories.tokenize(data)[:512]
    ppl = cli_json("ppl", "--model", str(STORIES), "--data", str(TINYSTORIES), "--max-tokens", "511")
    assert stories.nll(ids) == pytest.approx(ppl["nll"], rel=1e-12, abs=0)

    gen = cli_json("generate", "--model", str(STORIES), "--temperature", "0", "--steps", "60", "--prompt", prompt)
    r = stories.generate(prompt, steps=60)
    assert r["text"] == gen["text"] and r["generated"] == gen["generated"]
    kvcompact.set_threads(2)


def test_logits_equal_transformers_smollm2(hf_smollm2):
    import torch

    model = kvcompact.Model(str(require(SMOLLM2)))
    ids = model.tokenize("The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is")
    assert len(ids) > 16
    logits = model.logits(ids)
    hf = fresh_hf(hf_smollm2)
    with torch.no_grad():
        want = hf(torch.tensor([ids])).logits[0].numpy()
    assert want.shape == (len(ids), model.config["vocab_size"])
    scale = np.abs(want).max(axis=1)
    diff = np.abs(logits.astype(np.float64) - want).max(axis=1)
    print(f"max |logit diff| / max |logit| = {np.max(diff / scale):.3g}")
    assert np.all(diff <= 1e-3 * scale), np.max(diff / scale)
    assert np.array_equal(logits.argmax(axis=1), want.argmax(axis=1))


def test_model_errors():
    with pytest.raises(kvcompact.Error, match="no_such_model.gguf"):
        kvcompact.Model("/nonexistent/no_such_model.gguf")
    with pytest.raises(kvcompact.Error, match="model path is empty"):
        kvcompact.Model("")
    m = kvcompact.Model(str(require(STORIES)))
    with pytest.raises(ValueError, match="512"):
        m.logits([1, 512])
    with pytest.raises(ValueError, match="ids: empty"):
        m.logits([])
    with pytest.raises(ValueError, match=r"ids: 1 ids \(need at least 2\)"):
        m.nll([1])


def test_compact_equals_cli_compact_and_generate_from_cache(stories, tmp):
    """Model.compact(...).save writes the bytes `kvcompact compact` writes for the same context,
    and generate(cache=...) continues it as `kvcompact generate --cache` does."""
    import kvcompact

    # The CLI runs with --threads 1 (cli_json): so does the library here. OpenBLAS's sgemm may
    # split a product differently with 2 threads, which changes the last bits of the keys.
    kvcompact.set_threads(1)
    text = require(TINYSTORIES).read_text(encoding="utf-8").split("\n\n")[0].strip()
    ctx = tmp / "ctx.txt"
    ctx.write_text(text, encoding="utf-8")
    cli_file = tmp / "cli.kvc"
    info = cli_json("compact", "--model", str(STORIES), "--context", str(ctx), "--ratio", "0.25",
                    "--method", "am:select=omp", "-o", str(cli_file))
    c = stories.compact(text, ratio=0.25, method="am", select="omp")
    assert c.method == "am:select=omp" and c.ratio == 0.25
    assert c.kept_entries == info["kept_entries"] and c.full_entries == info["full_entries"]
    assert c.cache_bytes == info["cache_bytes"] and c.full_cache_bytes == info["full_cache_bytes"]
    assert c.context_tokens == stories.tokenize(text)
    py_file = tmp / "py.kvc"
    c.save(str(py_file))
    assert py_file.read_bytes() == cli_file.read_bytes()

    gen = cli_json("generate", "--model", str(STORIES), "--cache", str(cli_file), "--prompt", " Then",
                   "--steps", "20", "--temperature", "0")
    ours = stories.generate(" Then", steps=20, cache=c)
    assert ours["generated"] == gen["generated"] and ours["text"] == gen["text"]
    again = stories.generate(" Then", steps=20, cache=stories.load_cache(str(cli_file)))
    assert again["generated"] == gen["generated"]  # and the cache object was not consumed
    assert stories.generate(" Then", steps=20, cache=c)["generated"] == gen["generated"]
    kvcompact.set_threads(2)


def test_full_ratio_cache_continues_like_the_full_context(stories):
    """Keeping every entry with their own values (recent at ratio 1) changes nothing: greedy
    generation from that cache equals plain generation after the same context."""
    ids = stories.tokenize("Once upon a time, there was a little girl named Lily.")
    full = stories.generate("Once upon a time, there was a little girl named Lily.", steps=len(ids) + 24)
    c = stories.compact(ids, ratio=1.0, method="recent")
    assert c.kept_entries == c.full_entries
    cont = stories.generate("", steps=24, cache=c)
    assert cont["generated"][: len(full["generated"])] == full["generated"][: len(cont["generated"])]
    assert len(cont["generated"]) > 0


def test_compact_errors(stories, tmp):
    import kvcompact

    with pytest.raises(ValueError, match="ratio"):
        stories.compact("Once upon a time", ratio=1.5)
    with pytest.raises(kvcompact.Error, match="unknown method family"):
        stories.compact("Once upon a time", method="nosuch")
    with pytest.raises(ValueError, match="at least 2"):
        stories.compact([1])
    for context in (None, [1.0, 2.5], [1, 2**40], b"bytes"):
        with pytest.raises(TypeError, match="context"):
            stories.compact(context)
    c = stories.compact("Once upon a time, there was a girl.", ratio=0.5)
    with pytest.raises(ValueError, match="top_p"):
        stories.generate("x", steps=4, temperature=1.0, top_p=2.0, cache=c)
    with pytest.raises(ValueError, match="temperature"):
        stories.generate("x", steps=4, temperature=-1.0)
    with pytest.raises(ValueError, match="path"):
        c.save(str(tmp / "a\0b.kvc"))
    bad = tmp / "bad.kvc"
    bad.write_bytes(b"not a kvc file")
    with pytest.raises(kvcompact.Error, match=str(bad)):
        stories.load_cache(str(bad))


def test_explicit_cache_forward_equals_one_forward(stories):
    """forward() over an explicit cache, in pieces, gives the logits of one forward over the whole
    sequence (within float rounding of the different GEMM shapes), and the cache holds every entry."""
    kvcompact.set_threads(1)
    ids = stories.tokenize(require(TINYSTORIES).read_text().split("\n\n")[0])[:120]
    want = stories.logits(ids)
    kv = stories.new_cache()
    assert kv.next_position == 0 and kv.entries == 0
    a = stories.forward(ids[:50], kv, logits="all")
    assert stories.forward(ids[50:51], kv, logits="none") is None
    b = stories.forward(ids[51:], kv, logits="all")
    last = stories.forward([ids[0]], kv.copy(), logits="last")  # a copy: kv stays at len(ids)
    got = np.concatenate([a, want[50:51], b])
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert kv.next_position == len(ids) and (kv.lengths == len(ids)).all() and last.shape == (512,)
    cfg = stories.config
    assert kv.lengths.shape == (cfg["n_layers"], cfg["n_kv_heads"]) and kv.head_dim == cfg["head_dim"]
    # logits(cache=...) continues a cache without changing it
    cont = stories.tokenize(" and", add_bos=False)
    kv2 = stories.new_cache()
    stories.forward(ids, kv2, logits="none")
    with_cache = stories.logits(cont, cache=kv2)
    assert kv2.next_position == len(ids)
    full = stories.logits(ids + cont)[len(ids):]
    assert np.abs(with_cache - full).max() <= 1e-5 * np.abs(full).max()
    kvcompact.set_threads(2)


def test_forward_batch_equals_each_forward(stories):
    """forward_batch runs several sequences over their own caches in one pass: each gets what
    forward() gives it alone (within float rounding of the stacked GEMM), and its cache ends the
    same; misuse is a ValueError naming the problem."""
    kvcompact.set_threads(1)
    docs = require(TINYSTORIES).read_text().split("\n\n")
    ctx = stories.tokenize(docs[2])[:40]
    seqs = [stories.tokenize(docs[3])[:30], stories.tokenize(" Then", add_bos=False), stories.tokenize(docs[4])[:17]]
    base = stories.new_cache()
    stories.forward(ctx, base, logits="none")
    starts = [base.copy(), stories.new_cache(), base.copy()]
    alone = [c.copy() for c in starts]
    want = [stories.forward(ids, c, logits="all") for ids, c in zip(seqs, alone)]
    batched = [c.copy() for c in starts]
    got = stories.forward_batch(seqs, batched, logits="all")
    assert len(got) == 3
    for g, w, a, b in zip(got, want, alone, batched):
        assert g.shape == w.shape and np.abs(g - w).max() <= 1e-5 * np.abs(w).max()
        assert b.next_position == a.next_position and (b.lengths == a.lengths).all()
    last = stories.forward_batch(seqs, [c.copy() for c in starts])
    assert all(l.shape == (512,) and np.abs(l - w[-1]).max() <= 1e-5 * np.abs(w).max() for l, w in zip(last, want))
    assert stories.forward_batch(seqs[:1], [stories.new_cache()], logits="none") == [None]
    one = stories.new_cache()
    for bad, msg in [((seqs, starts[:2]), "caches"), (([], []), "no sequences"), (([[]], [one]), "no ids"),
                     ((seqs[:2], [one, one]), "share one KV cache"), (([[1, 99999]], [one]), "vocabulary")]:
        with pytest.raises(ValueError, match=msg):
            stories.forward_batch(*bad)
    kvcompact.set_threads(2)


def test_compacted_cache_views_and_forward(stories):
    """A non-fitting method's compacted heads are the full cache's entries at the kept positions
    (same keys, same values, beta 0); AM's are C1, beta, C2 with C1 = K[kept]. logits(cache=c)
    and forward over c.kv_cache() continue it as greedy generate(cache=c) does."""
    kvcompact.set_threads(1)
    ids = stories.tokenize(require(TINYSTORIES).read_text().split("\n\n")[1])[:160]
    kv = stories.new_cache()
    stories.forward(ids, kv, logits="none")
    for method in ("snapkv", "am"):
        c = stories.compact(ids, ratio=0.25, method=method)
        assert c.next_position == len(ids) and c.rope_style == kv.rope_style == "interleaved"
        assert int(c.lengths.sum()) == c.kept_entries
        for layer in range(c.n_layers):
            for h in range(c.n_kv_heads):
                C1, beta, C2 = c.head(layer, h)
                K, beta_full, V = kv.head(layer, h)
                pos = c.positions(layer, h)
                assert C1.shape == (len(pos), c.head_dim) and np.all(np.diff(pos) > 0)
                assert np.array_equal(C1, K[pos]) and not beta_full.any()
                if method == "snapkv":
                    assert np.array_equal(C2, V[pos]) and not beta.any()
        assert np.array_equal(c.last_logits, stories.logits(ids, last=True))
    # AM fitted beta and values somewhere
    assert any(c.head(l, h)[1].any() for l in range(c.n_layers) for h in range(c.n_kv_heads))
    gen = stories.generate(" Then", steps=8, cache=c)
    prompt = stories.tokenize(" Then", add_bos=False)
    k = c.kv_cache()
    logits = stories.forward(prompt, k, logits="last")
    ours = []
    for _ in range(len(gen["generated"])):
        ours.append(int(np.argmax(logits)))
        logits = stories.forward([ours[-1]], k, logits="last")
    assert ours == gen["generated"]
    assert np.array_equal(stories.logits(prompt, cache=c)[-1], stories.forward(prompt, c.kv_cache(), logits="all")[-1])
    kvcompact.set_threads(2)


def test_compact_with_per_head_budgets(stories):
    ids = stories.tokenize(require(TINYSTORIES).read_text().split("\n\n")[1])[:100]
    cfg = stories.config
    H = cfg["n_layers"] * cfg["n_kv_heads"]
    budgets = [(i * 7) % 40 + 1 for i in range(H)]
    c = stories.compact(ids, budgets=budgets, method="am")
    assert c.lengths.reshape(-1).tolist() == budgets
    with pytest.raises(ValueError, match="budgets: 3 entries"):
        stories.compact(ids, budgets=[1, 2, 3])
    with pytest.raises(ValueError, match="outside"):
        stories.compact(ids, budgets=[101] * H)
    with pytest.raises(ValueError, match="at most one"):
        stories.compact(ids, ratio=0.1, budgets=budgets)


def test_cache_errors(stories):
    smol = kvcompact.Model(str(require(SMOLLM2)))
    kv = smol.new_cache()
    with pytest.raises(ValueError, match="another model"):
        stories.forward([1, 2], kv)
    with pytest.raises(ValueError, match="another model"):
        stories.logits([1, 2], cache=kv)
    c = stories.compact("Once upon a time, there was a girl.", ratio=0.5)
    with pytest.raises(ValueError, match="another model"):
        smol.logits([1, 2], cache=c)
    with pytest.raises(TypeError, match="cache"):
        stories.logits([1, 2], cache="file.kvc")
    with pytest.raises(ValueError, match="layer: 99"):
        c.head(99, 0)
    with pytest.raises(ValueError, match="kv_head: -1"):
        c.positions(0, -1)
    with pytest.raises(ValueError, match="logits"):
        stories.forward([1], stories.new_cache(), logits="bogus")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        stories.forward([1, 600], stories.new_cache())


def test_newcomer_review_fixes(stories):
    """What the newcomer review found: a budgets compaction records its kept share as its ratio;
    a second thread's forward over a cache in use is refused, not interleaved; bfloat16 torch
    tensors are converted like other dtypes."""
    import threading

    import torch

    ids = stories.tokenize(require(TINYSTORIES).read_text().split("\n\n")[1])[:77]
    c = stories.compact(ids, budgets=[1] * 20)
    assert c.ratio == pytest.approx(20 / (20 * 77))
    kv = stories.new_cache()
    errors, done = [], []

    def run():
        try:
            for _ in range(20):
                stories.forward(ids[:60], kv, logits="none")
                done.append(1)
        except ValueError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # whatever the interleaving: the cache holds exactly the forwards that ran, positions in order
    assert kv.next_position == 60 * len(done) and (kv.lengths == 60 * len(done)).all()
    assert np.array_equal(kv.positions(0, 0), np.arange(60 * len(done)))
    assert all("another thread" in e for e in errors)
    K = torch.randn(64, 8, dtype=torch.bfloat16)
    Q = torch.randn(96, 8, dtype=torch.bfloat16)
    want = kvcompact.compact_head(K.float().numpy(), K.float().numpy(), Q.float().numpy(), ratio=0.25)
    got = kvcompact.compact_head(K, K, Q, ratio=0.25)
    assert all(np.array_equal(w, g) for w, g in zip(want, got))


def test_fast_mode_prefill_close_to_exact_smollm2():
    """set_fast_mode: prefill of a 24-token prompt in bfloat16 on AMX (where the CPU has it), or
    through the int8 kernels (AVX-512 VNNI), stays close to the exact logits; on AVX2 it is exact."""
    model = kvcompact.Model(str(require(SMOLLM2)))
    ids = model.tokenize("The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is")
    assert len(ids) > 16 and not kvcompact.fast_mode()
    exact = model.logits(ids)
    kvcompact.set_fast_mode(True)
    try:
        assert kvcompact.fast_mode()
        fast = model.logits(ids)
    finally:
        kvcompact.set_fast_mode(False)
    assert not kvcompact.fast_mode()
    scale = np.abs(exact).max(axis=1)
    rel = np.abs(fast.astype(np.float64) - exact).max(axis=1) / scale
    print(f"fast vs exact: max |logit diff| / max |logit| = {rel.max():.3g}")
    # bf16 rounding of activations and weights (AMX), or int8 rounding of the activations per block
    # (as llama.cpp's CPU backend computes): changed, but only a little.
    if kvcompact.amx_prefill_available() or kvcompact.int8_prefill_preferred():
        assert 0 < rel.max() <= (3e-2 if kvcompact.amx_prefill_available() else 1e-1), rel.max()
    else:
        assert np.array_equal(fast, exact)  # AVX2: the fast mode's prefill is the exact one
    assert np.mean(fast.argmax(axis=1) == exact.argmax(axis=1)) >= 0.9
    # The next-token NLL of the prompt moves by little (nats/token).
    def nll(lg):
        lg = lg.astype(np.float64)[:-1]
        lse = np.log(np.exp(lg - lg.max(axis=1, keepdims=True)).sum(axis=1)) + lg.max(axis=1)
        return float(np.mean(lse - lg[np.arange(len(lg)), ids[1:]]))
    print(f"prompt NLL: exact {nll(exact):.4f}, fast {nll(fast):.4f} nats/token")
    assert abs(nll(fast) - nll(exact)) < 0.05
    assert np.array_equal(model.logits(ids), exact)  # back to exact


def test_fast_mode_switch_takes_only_a_bool():
    """set_fast_mode(None) / (2.5) used to be read as False / True; the switch takes a bool only."""
    before = kvcompact.fast_mode()
    for bad in (None, 2.5, "yes"):
        with pytest.raises(TypeError):
            kvcompact.set_fast_mode(bad)
    assert kvcompact.fast_mode() == before
    kvcompact.set_fast_mode(True)
    try:
        assert kvcompact.fast_mode()
    finally:
        kvcompact.set_fast_mode(False)
    assert not kvcompact.fast_mode()
