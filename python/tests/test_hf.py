"""kvcompact.hf (transformers Cache + "kvcompact" attention) on SmolLM2-135M-Instruct Q4_1:
transformers' forward over a converted native compaction against kvcompact's own forward
(Model.logits / Model.generate with cache=), hf.compact at ratio 1 against the full DynamicCache,
memory of the ragged cache, and the errors."""
import copy

import numpy as np
import pytest

import kvcompact
from conftest import SHARED, SMOLLM2, STORIES, fresh_hf, require

import torch  # noqa: E402  (torch/transformers: .venv, scripts/requirements-ref.txt)
import kvcompact.hf as kh  # noqa: E402

WIKI = SHARED / "data" / "wikitext2" / "wiki.test.raw"


@pytest.fixture(scope="module")
def models(hf_smollm2):
    torch.set_num_threads(1)
    kvcompact.set_threads(1)
    path = require(SMOLLM2)
    hf = fresh_hf(hf_smollm2)
    km = kvcompact.Model(str(path))
    text = require(WIKI).read_text()
    ids = km.tokenize(text[:4000])[:400]
    cont = km.tokenize(text[4000:4600], add_bos=False)[:20]
    assert len(ids) == 400 and len(cont) == 20
    yield hf, km, ids, cont
    kvcompact.set_threads(2)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def hf_logits(hf, ids, cache):
    with torch.no_grad():
        return hf(torch.tensor([ids]), past_key_values=cache).logits[0].numpy()


def prefill(hf, ids):
    from transformers import DynamicCache

    full = DynamicCache(config=hf.config)
    with kh.record_queries(hf) as rec, torch.no_grad():
        hf(torch.tensor([ids]), past_key_values=full)
    return full, rec


def test_from_kvcompact_equals_native_forward_and_generate(models):
    hf, km, ids, cont = models
    c = km.compact(ids, ratio=0.1, method="am")
    assert c.next_position == len(ids) and c.n_layers == 30 and c.n_kv_heads == 3 and c.head_dim == 64
    hc = kh.from_kvcompact(c, hf)
    t = kvcompact.kept_entries(0.1, len(ids))
    assert hc.kept == [[t] * 3] * 30 and hc.get_seq_length() == len(ids)
    assert hc.nbytes == c.cache_bytes  # the same float32 C1, beta, C2: nothing padded
    want = km.logits(cont, cache=c)
    got = hf_logits(hf, cont, hc)
    d = rel(got, want)
    print(f"HF forward over from_kvcompact vs kvcompact Model.logits(cache=): max|diff|/max|logit| = {d:.3g}")
    assert d <= 1e-4
    assert np.array_equal(got.argmax(1), want.argmax(1))
    assert hc.get_seq_length() == len(ids) + len(cont)

    # The key layout claim, numerically: without concat(k[0::2], k[1::2]) the logits are far off.
    raw = [[c.head(l, h) for h in range(3)] for l in range(30)]
    wrong = hf_logits(hf, cont, kh.make_cache(hf, raw, c.next_position))
    print(f"without the interleaved->half-split key permutation: {rel(wrong, want):.3g}")
    assert rel(wrong, want) > 1e-2

    # Ragged heads (per-head budgets, one head empty) against the native forward as well.
    budgets = [(7 * i) % 61 for i in range(90)]
    cr = km.compact(ids, budgets=budgets, method="am")
    hr = kh.from_kvcompact(cr, hf)
    assert [k for lk in hr.kept for k in lk] == budgets and hr.nbytes == cr.cache_bytes
    dr = rel(hf_logits(hf, cont, hr), km.logits(cont, cache=cr))
    print(f"ragged budgets (0..60 entries per head): {dr:.3g}")
    assert dr <= 1e-4

    # Greedy generation: transformers' generate over the converted cache vs kvcompact's generate.
    prompt = " The"
    steps = 12
    nat = km.generate(prompt, steps=steps, cache=c)["generated"]
    p_ids = km.tokenize(prompt, add_bos=False)
    inp = torch.tensor([ids + p_ids])
    with torch.no_grad():
        out = hf.generate(inp, attention_mask=torch.ones_like(inp), past_key_values=kh.from_kvcompact(c, hf),
                          max_new_tokens=steps, do_sample=False, eos_token_id=None, pad_token_id=0)
    gen = out[0, inp.shape[1]:].tolist()
    print("native:", nat, "\nhf:    ", gen)
    assert len(nat) > 0 and gen[: len(nat)] == nat


def test_compact_ratio1_reproduces_full_cache_and_saves_memory(models):
    hf, km, ids, cont = models
    full, rec = prefill(hf, ids)
    assert rec.queries(0).shape == (1, 9, len(ids), 64)
    want = hf_logits(hf, cont, copy.deepcopy(full))
    # Independent check of the recorder: layer 0's recorded queries = RoPE(q_proj(norm(embed))).
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    with torch.no_grad():
        x = hf.model.layers[0].input_layernorm(hf.model.embed_tokens(torch.tensor([ids])))
        q = hf.model.layers[0].self_attn.q_proj(x).view(1, len(ids), 9, 64).transpose(1, 2)
        cos, sin = hf.model.rotary_emb(x, torch.arange(len(ids))[None])
        q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    assert torch.allclose(q, rec.queries(0), atol=1e-5)

    c1 = kh.compact(hf, full, ratio=1.0, method="am", queries=rec)
    assert c1.kept == [[len(ids)] * 3] * 30
    got = hf_logits(hf, cont, c1)
    d = rel(got, want)
    print(f"hf.compact ratio 1 vs full DynamicCache: max|diff|/max|logit| = {d:.3g}")
    assert d <= 1e-4

    full_bytes = kh.full_cache_nbytes(full)
    c01 = kh.compact(hf, full, ratio=0.1, method="am", queries=rec)
    t = kvcompact.kept_entries(0.1, len(ids))
    assert c01.kept == [[t] * 3] * 30
    ratio = c01.nbytes / full_bytes
    print(f"ratio 0.1: compacted {c01.nbytes} B vs full {full_bytes} B = {ratio:.4f}")
    assert ratio == pytest.approx(t / len(ids) * (2 * 64 + 1) / (2 * 64), rel=1e-12)
    # The same heads as kvcompact.compact_cache on the cache's tensors and the recorded queries.
    K = np.stack([layer.keys[0].numpy() for layer in full.layers])
    V = np.stack([layer.values[0].numpy() for layer in full.layers])
    res = kvcompact.compact_cache(K, V, rec.per_kv_head(30, 3), ratio=0.1, method="am")
    for l in (0, 17, 29):
        for h in range(3):
            assert np.array_equal(c01.layers[l].head_keys[h].numpy(), res[l][h][0])
            assert np.array_equal(c01.layers[l].head_beta[h].numpy(), res[l][h][1])
    logits01 = hf_logits(hf, cont, c01)
    print(f"ratio 0.1 vs full: {rel(logits01, want):.3g}; top-1 agreement "
          f"{np.mean(logits01.argmax(1) == want.argmax(1)):.2f}")

    # snapkv (needs the context's own queries): selected keys are the full cache's, beta 0;
    # budgets give a ragged cache.
    budgets = [5 + (i % 7) for i in range(90)]
    cs = kh.compact(hf, full, budgets=budgets, method="snapkv", queries=rec)
    assert [k for lk in cs.kept for k in lk] == budgets
    assert all(float(b.abs().max()) == 0 for layer in cs.layers for b in layer.head_beta)
    assert np.isfinite(hf_logits(hf, cont, cs)).all()


def test_errors(models):
    hf, km, ids, cont = models
    full, rec = prefill(hf, ids[:40])
    with pytest.raises(ValueError, match="ratio"):
        kh.compact(hf, full, ratio=1.5, queries=rec)
    with pytest.raises(ValueError, match="ratio"):
        kh.compact(hf, full, ratio=-0.1, queries=rec)
    with pytest.raises(ValueError, match="queries"):
        kh.compact(hf, full, ratio=0.5)
    with pytest.raises(ValueError, match="queries"):
        kh.compact(hf, full, ratio=0.5, queries=np.zeros((30, 3, 8, 32), np.float32))
    short = copy.deepcopy(full)
    short.layers = short.layers[:29]
    with pytest.raises(ValueError, match="cache: 29 layers"):
        kh.compact(hf, short, ratio=0.5, queries=rec)
    narrow = copy.deepcopy(full)
    narrow.layers[3].keys = narrow.layers[3].keys[:, :2]
    with pytest.raises(ValueError, match="cache: layer 3 keys"):
        kh.compact(hf, narrow, ratio=0.5, queries=rec)
    bad = copy.deepcopy(full)
    bad.layers[5].keys[0, 1, 7, 3] = float("nan")
    with pytest.raises(ValueError, match="cache: layer 5 keys or values hold NaN"):
        kh.compact(hf, bad, ratio=0.5, queries=rec)
    with pytest.raises(ValueError, match="compacted"):
        stories = kvcompact.Model(str(require(STORIES)))
        kh.from_kvcompact(stories.compact(stories.tokenize("Once upon a time there was a cat."), ratio=0.5), hf)
    c = kh.compact(hf, full, ratio=0.5, queries=rec)
    hf.set_attn_implementation("sdpa")
    try:
        with pytest.raises(ValueError, match="past_key_values: a kvcompact cache needs the 'kvcompact' attention"):
            hf_logits(hf, cont, c)
    finally:
        kh.enable(hf)
    with pytest.raises(ValueError, match="max_length"):
        c.crop(10)
