"""Reference scores of kvpress 0.5.5's presses (NVIDIA's kvpress, run as installed) on random
keys, values and queries, for tests/kvpress_methods_test.cpp.

  kvpress_scores.py SEED T HEAD_DIM KV_HEADS GROUP WINDOW KEEP [VSCALE]

Builds one Llama-like attention layer with KV_HEADS KV heads of GROUP query heads each: random
pre-RoPE queries (fed as hidden states through an identity q_proj, as kvpress's
get_prerope_query_states reads them), keys rotated by transformers' LlamaRotaryEmbedding (theta
10000, Hugging Face half-split pairs) and random values, then calls each press's own `score`:
KnormPress, SnapKVPress(window_size=WINDOW, kernel_size=5), TOVAPress, ObservedAttentionPress
(with the eager causal attention weights), ExpectedAttentionPress (defaults), KeyDiffPress, and
AdaKVPress over SnapKVPress(WINDOW) and over ExpectedAttentionPress(epsilon=1e-2), whose .compress
with a compression ratio that keeps KEEP entries per head
(its masked indices give the kept ones). ScorerPress.compress gives each scorer's kept indices.
The values of the last KV head are multiplied by VSCALE (default 1): its scores then dwarf the
other heads' under the value norm, which tests that the sinks of every head still rank first
across the layer in AdaKV. Prints one JSON object: inputs (context_queries per KV head after RoPE, rows position-major then
query head; keys; values; inv_freq) and, per press, scores [KV_HEADS][T] and kept [KV_HEADS][KEEP].
"""
import json
import math
import sys

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from kvpress import (AdaKVPress, ExpectedAttentionPress, KeyDiffPress, KnormPress, ObservedAttentionPress,
                     SnapKVPress, TOVAPress)


class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.head_dim = config.head_dim
        self.q_proj = nn.Identity()
        self.rotary_emb = LlamaRotaryEmbedding(config)
        self.layer_idx = 0


def main():
    seed, T, d, H, g, window, keep = (int(x) for x in sys.argv[1:8])
    vscale = float(sys.argv[8]) if len(sys.argv) > 8 else 1.0
    torch.manual_seed(seed)
    nh = H * g
    config = LlamaConfig(hidden_size=nh * d, num_attention_heads=nh, num_key_value_heads=H, head_dim=d,
                         rope_theta=10000.0, max_position_embeddings=4096)
    config._attn_implementation = "sdpa"
    module = Layer(config)
    hidden = torch.randn(1, T, nh * d) * 1.5                        # pre-RoPE queries
    kpre = torch.randn(1, H, T, d) + 0.3 * torch.randn(1, H, 1, d)  # pre-RoPE keys
    values = torch.randn(1, H, T, d) * torch.rand(1, H, T, 1) * 2
    values[:, H - 1] *= vscale
    pos = torch.arange(T).unsqueeze(0)
    cos, sin = module.rotary_emb(hidden, pos)
    qpre = hidden.view(1, T, nh, d).transpose(1, 2)
    q, keys = apply_rotary_pos_emb(qpre, kpre, cos, sin)
    kwargs = {"position_embeddings": (cos, sin)}
    # Eager causal attention weights, [1, nh, T, T] (what an eager layer hands ObservedAttention).
    kr = keys.repeat_interleave(g, dim=1)
    logits = q @ kr.transpose(2, 3) / math.sqrt(d)
    logits = logits + torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    attn = torch.softmax(logits.float(), dim=-1)

    cr = 1.0 - (keep + 0.5) / T  # compute_n_kept(T, cr) = int(T * (1 - cr)) = keep
    out = {"T": T, "head_dim": d, "kv_heads": H, "group": g, "window": window, "keep": keep,
           "inv_freq": module.rotary_emb.inv_freq.tolist(),
           "keys": keys[0].reshape(H, -1).tolist(), "values": values[0].reshape(H, -1).tolist(),
           # context queries of KV head k: row i * g + h = query head k * g + h at position i
           "context_queries": [q[0, k * g:(k + 1) * g].transpose(0, 1).reshape(-1).tolist() for k in range(H)],
           "presses": {}}
    presses = {"knorm": KnormPress(cr), "snapkv": SnapKVPress(cr, window_size=window, kernel_size=5),
               "tova": TOVAPress(cr), "observed": ObservedAttentionPress(cr), "expected": ExpectedAttentionPress(cr),
               "keydiff": KeyDiffPress(cr)}
    for name, press in presses.items():
        a = attn if name == "observed" else None
        with torch.no_grad():
            s = press.score(module, hidden, keys, values, a, kwargs)
            k2, _ = press.compress(module, hidden, keys, values, a, kwargs)
        kept = [sorted(int(torch.nonzero((keys[0, h] == row).all(-1))[0]) for row in k2[0, h]) for h in range(H)]
        out["presses"][name] = {"scores": s[0].double().tolist(), "kept": kept}
    # AdaKV over SnapKV ("adakv_snapkv") and over ExpectedAttention(epsilon=1e-2) (the registry's
    # "expected_attention"): kept entries are those not in module.masked_key_indices.
    adas = {"adakv": AdaKVPress(SnapKVPress(cr, window_size=window, kernel_size=5)),
            "adakv_expected": AdaKVPress(ExpectedAttentionPress(cr, epsilon=1e-2))}
    for name, ada in adas.items():
        with torch.no_grad():
            ada.compress(module, hidden, keys, values, None, kwargs)
            s = ada.press.score(module, hidden, keys, values, None, kwargs)
        _, heads, seqs = module.masked_key_indices
        masked = {(int(h), int(j)) for h, j in zip(heads, seqs)}
        out["presses"][name] = {"scores": s[0].double().tolist(),
                                "kept": [[j for j in range(T) if (h, j) not in masked] for h in range(H)]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
