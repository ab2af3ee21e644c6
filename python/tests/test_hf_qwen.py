"""kvcompact.hf on a Qwen-family model (Qwen3: q_norm/k_norm, half-split RoPE): a random-weight
Qwen3 checkpoint written by transformers (tiny sizes, the real Qwen3 tokenizer.json from the
shared data) loaded by both transformers and kvcompact. A native compaction continued in
transformers gives kvcompact's own logits; hf.compact at ratio 1 reproduces the full cache; the
recorded queries are q_norm + RoPE of q_proj, recomputed here."""
import copy
import os
import shutil

import numpy as np
import pytest

import kvcompact
from conftest import SHARED, TINYSTORIES, require

import torch  # noqa: E402
import kvcompact.hf as kh  # noqa: E402

QWEN3_TOKENIZER = SHARED / "data" / "tokenizers" / "qwen3"


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(1)
    kvcompact.set_threads(1)
    cfg = Qwen3Config(vocab_size=151936, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      rope_theta=1000000.0, tie_word_embeddings=True, rms_norm_eps=1e-6)
    model = Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():  # larger q/k weights than the init: peaked attention, as in real heads
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(4)
            layer.self_attn.k_proj.weight.mul_(4)
    d = tmp_path_factory.mktemp("qwen3")
    model.save_pretrained(d, safe_serialization=True)
    for f in os.listdir(require(QWEN3_TOKENIZER)):
        shutil.copy(QWEN3_TOKENIZER / f, d / f)
    km = kvcompact.Model(str(d))
    text = require(TINYSTORIES).read_text()
    ids = km.tokenize(text[:1500])[:160]
    cont = km.tokenize(text[1500:1700], add_bos=False)[:12]
    yield model, km, ids, cont
    kvcompact.set_threads(2)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def logits_over(model, ids, cache):
    with torch.no_grad():
        return model(torch.tensor([ids]), past_key_values=cache).logits[0].numpy()


def test_qwen3_native_compaction_continues_in_transformers(qwen):
    model, km, ids, cont = qwen
    assert km.config["architecture"].lower().startswith("qwen")
    full_native = km.logits(ids + cont)[len(ids):]
    full_hf = logits_over(model, ids + cont, None)[len(ids):]
    assert rel(full_native, full_hf) <= 1e-4  # the same checkpoint in both
    c = km.compact(ids, ratio=0.25, method="am")
    assert c.rope_style == "half_split"
    hc = kh.from_kvcompact(c, model)
    got = logits_over(model, cont, hc)
    want = km.logits(cont, cache=c)
    d = rel(got, want)
    print(f"Qwen3: transformers over the native AM cache vs kvcompact: {d:.3g}")
    assert d <= 1e-4
    assert rel(want, full_native) > 1e-3  # the compaction changed something


def test_qwen3_hf_compact_and_recorder(qwen):
    from transformers import DynamicCache
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb

    model, km, ids, cont = qwen
    full = DynamicCache(config=model.config)
    with kh.record_queries(model) as rec, torch.no_grad():
        model(torch.tensor([ids]), past_key_values=full)
    with torch.no_grad():  # layer 0's queries: RoPE(q_norm(q_proj(norm(embed))))
        a = model.model.layers[0].self_attn
        x = model.model.layers[0].input_layernorm(model.model.embed_tokens(torch.tensor([ids])))
        q = a.q_norm(a.q_proj(x).view(1, len(ids), 4, 16)).transpose(1, 2)
        cos, sin = model.model.rotary_emb(x, torch.arange(len(ids))[None])
        q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    assert torch.allclose(q, rec.queries(0), atol=1e-5)
    want = logits_over(model, cont, copy.deepcopy(full))
    one = kh.compact(model, full, ratio=1.0, method="am", queries=rec)
    assert rel(logits_over(model, cont, one), want) <= 1e-4
    quarter = kh.compact(model, full, ratio=0.25, method="am", queries=rec)
    K = np.stack([layer.keys[0].numpy() for layer in full.layers])
    V = np.stack([layer.values[0].numpy() for layer in full.layers])
    res = kvcompact.compact_cache(K, V, rec.per_kv_head(2, 2), ratio=0.25, method="am")
    for l in range(2):
        for h in range(2):
            assert np.array_equal(quarter.layers[l].head_keys[h].numpy(), res[l][h][0])
    out = model.generate(torch.tensor([ids + cont[:1]]), past_key_values=quarter, max_new_tokens=6, do_sample=False)
    assert out.shape[1] == len(ids) + 1 + 6
