"""kvcompact.kvpress presses on SmolLM2-135M-Instruct Q4_1 in kvpress's own pipeline
("kv-press-text-generation"): answers at compression ratio 0 equal the no-press answer, the press's
per-layer compaction equals kvcompact.compact_cache on the model's own keys, values and (recorded)
queries, and decoding with the press's beta (attention-function wrapper) equals kvcompact.hf's
independent compacted attention over the same heads."""
import copy

import numpy as np
import pytest

import kvcompact
from conftest import SHARED, SMOLLM2, fresh_hf, require

import torch  # noqa: E402  (torch/transformers/kvpress: .venv, scripts/requirements-ref.txt)

WIKI = SHARED / "data" / "wikitext2" / "wiki.test.raw"
QUESTION = "\nQuestion: What is the secret code of the blue door?\nAnswer:"


@pytest.fixture(scope="module")
def setup(hf_smollm2):
    import kvpress  # noqa: F401  (registers the pipeline)
    from transformers import AutoTokenizer, pipeline

    import kvcompact.kvpress  # noqa: F401

    torch.set_num_threads(1)
    kvcompact.set_threads(1)
    path = require(SMOLLM2)
    model = fresh_hf(hf_smollm2)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tok, device="cpu")
    text = require(WIKI).read_text()[:1200]
    context = "The secret code of the blue door is 4172. " + text + " Remember: the secret code of the blue door is 4172."
    yield model, tok, pipe, context
    kvcompact.set_threads(2)


def test_pipeline_answers(setup):
    from kvpress import SnapKVPress

    from kvcompact.kvpress import AttentionMatchingPress, KvcompactPress

    model, tok, pipe, context = setup
    base = pipe(context, question=QUESTION, max_new_tokens=8)["answer"]
    same = pipe(context, question=QUESTION, press=AttentionMatchingPress(compression_ratio=0.0), max_new_tokens=8)
    print("no press:", repr(base), " am@0:", repr(same["answer"]))
    assert isinstance(base, str) and base.strip()
    assert same["answer"] == base
    for press in (AttentionMatchingPress(compression_ratio=0.7), KvcompactPress(method="snapkv", compression_ratio=0.7),
                  SnapKVPress(compression_ratio=0.7)):
        out = pipe(context, questions=[QUESTION, "\nQuestion: What colour is the door?\nAnswer:"], press=press,
                   max_new_tokens=4)["answers"]
        print(type(press).__name__, out)
        assert len(out) == 2 and all(isinstance(a, str) for a in out)


def test_press_compaction_equals_compact_cache_and_beta_reaches_decoding(setup):
    from transformers import DynamicCache

    import kvcompact.hf as kh
    from kvcompact.kvpress import AttentionMatchingPress

    model, tok, pipe, context = setup
    ids = tok(context, return_tensors="pt").input_ids[:, :300]
    T = ids.shape[1]
    q_ids = tok(QUESTION, add_special_tokens=False, return_tensors="pt").input_ids
    # The model's own keys/values and post-RoPE queries (recorded inside the attention function).
    full = DynamicCache()
    with kh.record_queries(model) as rec, torch.no_grad():
        model.model(input_ids=ids, past_key_values=full)
    model.set_attn_implementation("sdpa")
    K = np.stack([layer.keys[0].numpy() for layer in full.layers])
    V = np.stack([layer.values[0].numpy() for layer in full.layers])
    Q = rec.per_kv_head(30, 3)

    press = AttentionMatchingPress(compression_ratio=0.75)
    t = int(T * 0.25)
    seen = {}
    orig = press.compress

    def spy(module, *a):  # keeps each layer's inputs to kvcompact
        out = orig(module, *a)
        seen[module.layer_idx] = (press.last, getattr(module, "kvcompact_beta", None))
        return out

    press.compress = spy
    cache = DynamicCache()
    with press(model), torch.no_grad():
        model.model(input_ids=ids, past_key_values=cache)
    assert sorted(seen) == list(range(30))
    want = kvcompact.compact_cache(K, V, Q, budgets=[t] * 90, method="am")
    worst_q = worst = 0.0
    for l in range(30):
        (Kp, Vp, Qp, budgets, _), beta = seen[l]
        assert np.array_equal(Kp[0], K[l]) and np.array_equal(Vp[0], V[l]) and budgets == [t] * 3
        worst_q = max(worst_q, float(np.abs(Qp[0] - Q[l]).max() / np.abs(Q[l]).max()))
        assert cache.layers[l].keys.shape == (1, 3, t, 64)
        for h in range(3):
            C1, b, C2, _ = want[l][h]
            got_b = beta[0, h].numpy() if beta is not None else np.zeros(t, np.float32)
            for x, y in ((cache.layers[l].keys[0, h].numpy(), C1), (got_b, b), (cache.layers[l].values[0, h].numpy(), C2)):
                worst = max(worst, float(np.abs(x - y).max() / max(1.0, np.abs(y).max())))
    print(f"press queries vs recorded: {worst_q:.3g}; press heads vs compact_cache: {worst:.3g}")
    assert worst_q <= 1e-6 and worst <= 1e-6
    assert any(b is not None and float(b.abs().max()) > 0 for _, b in seen.values())  # beta is really used

    # Decoding over the press's cache (sdpa + the beta wrapper) vs kvcompact.hf's attention over the
    # same heads (an independent implementation), for the question's prefill and two steps.
    heads = [[(want[l][h][0], want[l][h][1], want[l][h][2]) for h in range(3)] for l in range(30)]
    hc = kh.make_cache(model, heads, T)
    pos = torch.arange(T, T + q_ids.shape[1])[None]
    step = torch.tensor([[tok.convert_tokens_to_ids("4")]])
    with torch.no_grad():
        a = model(input_ids=q_ids, past_key_values=cache, position_ids=pos).logits[0]
        a2 = model(input_ids=step, past_key_values=cache, position_ids=pos[:, -1:] + 1).logits[0]
        nobeta = copy.deepcopy(cache)
        kh.enable(model)
        b = model(input_ids=q_ids, past_key_values=hc).logits[0]
        b2 = model(input_ids=step, past_key_values=hc).logits[0]
        model.set_attn_implementation("sdpa")
        for layer in model.model.layers:  # the same cache without beta: must differ
            layer.self_attn.kvcompact_beta = None
        nobeta.crop(t)
        c = model(input_ids=q_ids, past_key_values=nobeta, position_ids=pos).logits[0]
    d = float((a - b).abs().max() / b.abs().max())
    d2 = float((a2 - b2).abs().max() / b2.abs().max())
    dn = float((c - b).abs().max() / b.abs().max())
    print(f"press decoding vs kvcompact.hf: question {d:.3g}, step {d2:.3g}; without beta {dn:.3g}")
    assert d <= 1e-5 and d2 <= 1e-5 and dn > 1e-3


def test_press_errors(setup):
    from kvcompact.kvpress import AttentionMatchingPress, KvcompactPress

    with pytest.raises(ValueError, match="compression_ratio"):
        AttentionMatchingPress(compression_ratio=1.0)
    with pytest.raises(ValueError, match="compression_ratio"):
        KvcompactPress(method="snapkv", compression_ratio=-0.5)
    with pytest.raises(kvcompact.Error):
        KvcompactPress(method="no_such_method", compression_ratio=0.5)
    model, tok, pipe, context = setup
    press = AttentionMatchingPress(compression_ratio=0.5)
    press.compression_ratio = 1.0  # as kvpress's EvaluationRunner sets it, after __init__
    with pytest.raises(ValueError, match="compression_ratio: 1.0"):
        pipe(context[:200], question=QUESTION, press=press, max_new_tokens=2)
    model.set_attn_implementation("eager")
    try:
        with pytest.raises(ValueError, match="attn_implementation: 'eager'"):
            pipe(context[:200], question=QUESTION, press=AttentionMatchingPress(compression_ratio=0.5), max_new_tokens=2)
    finally:
        model.set_attn_implementation("sdpa")


def test_press_beta_stays_with_its_cache(setup):
    """A press's beta belongs to the cache it compacted: continuing another cache through the same
    model after the press ran gives the logits it gives without any press (the newcomer review's
    leak), while the press's own cache still gets its beta."""
    from transformers import DynamicCache

    from kvcompact.kvpress import AttentionMatchingPress, KvcompactPress

    model, tok, pipe, context = setup
    model.set_attn_implementation("sdpa")
    a_ids = tok(context[600:1400], return_tensors="pt").input_ids[:, :150]
    b_ids = tok(context, return_tensors="pt").input_ids[:, :200]
    q_ids = tok(QUESTION, add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        a = DynamicCache()
        model.model(input_ids=a_ids, past_key_values=a)
        want = model(q_ids, past_key_values=copy.deepcopy(a)).logits
        b = DynamicCache()
        with AttentionMatchingPress(compression_ratio=0.5)(model):
            model.model(input_ids=b_ids, past_key_values=b)
        got = model(q_ids, past_key_values=copy.deepcopy(a)).logits  # another cache: no beta
        on_b = model(q_ids, past_key_values=copy.deepcopy(b)).logits
        for layer in model.model.layers:  # without the beta, the press's own cache reads differently
            layer.self_attn.kvcompact_beta_keys = None
        off_b = model(q_ids, past_key_values=copy.deepcopy(b)).logits
    assert torch.equal(got, want)
    assert (on_b - off_b).abs().max() > 1e-3 * on_b.abs().max()
    with pytest.raises(ValueError, match="adakv"):
        KvcompactPress(method="adakv", compression_ratio=0.5)
