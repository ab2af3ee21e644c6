"""kvpress presses backed by kvcompact: Attention Matching (arXiv 2602.16284) and kvcompact's other
compaction methods, usable in kvpress's "kv-press-text-generation" pipeline like any press.

    import kvpress  # noqa: F401  (registers the pipeline)
    from transformers import pipeline
    from kvcompact.kvpress import AttentionMatchingPress, KvcompactPress
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer)
    press = AttentionMatchingPress(compression_ratio=0.9)          # keep 10 % of each head
    answer = pipe(context, question=question, press=press)["answer"]
    snap = KvcompactPress(method="snapkv", compression_ratio=0.9)  # kvcompact's snapkv

compression_ratio follows kvpress: the fraction REMOVED. Every KV head of every layer keeps
t = max(1, floor((1 - compression_ratio) * T)) of its T context entries (kvpress's
compute_n_kept; 0 when compression_ratio >= 1 is refused). The heads of a layer keep the same t,
so the cache stays an ordinary rectangular DynamicCache [1, Hkv, t, d].

The press's compress hook (run by kvpress after each attention layer's prefill) takes the layer's
keys/values [1, Hkv, T, d] (after RoPE) and computes the layer's reference queries from the
layer's input hidden states: q_proj (and q_norm where the model has one, kvpress.utils
get_prerope_query_states), then the model's RoPE (kwargs["position_embeddings"]), so query head j
of KV head h = j // group gives T rows (n = T * group, position-major then query head, which is
also the layout of kvcompact's context_queries). The logit scale module.scaling is honoured by
rescaling the queries (kvcompact uses q.k / sqrt(d)). kvcompact.compact_cache then returns, per
KV head, (C1 [t, d], beta [t], C2 [t, d]); C1 and C2 become the layer's cached keys and values.

How beta reaches decoding: Attention Matching adds a per-entry logit bias beta (nats) to the
compacted entries. The press stores it on the attention module (module.kvcompact_beta,
[1, Hkv, t]). Importing this module wraps every attention
function of transformers' ALL_ATTENTION_FUNCTIONS (as kvpress's own attention_patch does for its
head-wise masking): when a module carries a beta and the call is not a prefill (query length !=
key length: the question's prefill and every decoding step), the wrapper turns the attention mask
into an additive float mask [1, Hq, q, kv] (causal among the new tokens, as the model's mask),
adds beta to the first t key columns of each query head (of its KV head) and calls the original
function with it. The beta is tied to the cache it was fitted for: the module also keeps the
compacted keys (module.kvcompact_beta_keys) and the wrapper adds beta only when the keys it is
given start with them, so continuing any other cache through the same model is unaffected. A
prefill (query length == key length, a new context) clears the module's beta. Layer-scoped
methods (adakv, tova: heads of different lengths) are refused; use kvcompact.hf for ragged caches. Supported attention implementations: "sdpa" and any other function of
ALL_ATTENTION_FUNCTIONS that takes an additive float mask; "eager" is not in that registry and
flash attention takes no bias, so both are refused (ValueError) when the press compresses.
Batch size 1 only.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from kvpress.presses.base_press import BasePress
from kvpress.utils import get_prerope_query_states
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

BETA_ATTR = "kvcompact_beta"
KEYS_ATTR = "kvcompact_beta_keys"  # the compacted keys [1, Hkv, t, d] the beta belongs to
_WRAPPED_TAG = "_kvcompact_beta_wrapper"
_NO_BIAS_IMPLEMENTATIONS = ("eager", "flash_attention_2", "flash_attention_3", "flex_attention")


# --------------------------------------------------------------------------------------------
# beta in the attention functions


def _additive_mask(attention_mask, q_len: int, kv_len: int, dtype, device):
    """attention_mask (None, bool [B, 1|H, q, kv'] or float) as an additive float [1, 1, q, kv]."""
    if attention_mask is None:
        m = torch.zeros((1, 1, q_len, kv_len), dtype=dtype, device=device)
        if q_len > 1:
            i = torch.arange(q_len, device=device)[:, None] + (kv_len - q_len)
            j = torch.arange(kv_len, device=device)[None, :]
            m[0, 0].masked_fill_(j > i, float("-inf"))
        return m
    am = attention_mask[:, :, :, :kv_len]
    if am.dtype == torch.bool:
        m = torch.zeros(am.shape, dtype=dtype, device=device)
        return m.masked_fill_(~am, float("-inf"))
    return am.to(dtype)


def _same_cache(module, key, t: int) -> bool:
    """True when `key` starts with the compacted keys the module's beta was fitted for (the cache
    the press compacted, continued); False for any other cache read by this module."""
    ref = getattr(module, KEYS_ATTR, None)
    if ref is None or key.shape[2] < t or key.shape[:2] != ref.shape[:2]:
        return False
    return bool(torch.equal(key[:, :, :t, :].to(ref.dtype), ref))


def _beta_wrapper(func):
    def wrapper(module, query, key, value, attention_mask, *args, **kwargs):
        beta = getattr(module, BETA_ATTR, None)
        if beta is not None and getattr(key, "_kvcompact_layer", None) is None:  # not a kvcompact.hf cache
            if query.shape[2] == key.shape[2]:
                setattr(module, BETA_ATTR, None)  # a prefill: a new context
                setattr(module, KEYS_ATTR, None)
            elif not _same_cache(module, key, beta.shape[-1]):
                pass  # another cache than the one the press compacted: no beta for it
            else:
                b, hq, q_len, _ = query.shape
                kv_len = key.shape[2]
                t = beta.shape[-1]
                if b != 1:
                    raise ValueError(f"query: batch size {b} (kvcompact presses support batch size 1)")
                if t > kv_len:
                    raise ValueError(f"key: {kv_len} entries, fewer than the compacted {t} (the cache was cut)")
                g = hq // beta.shape[1]
                m = _additive_mask(attention_mask, q_len, kv_len, query.dtype, query.device)
                m = m.expand(1, hq, q_len, kv_len).clone()
                m[..., :t] += beta.to(query.dtype).repeat_interleave(g, dim=1)[:, :, None, :]
                attention_mask = m
        return func(module, query, key, value, attention_mask, *args, **kwargs)

    setattr(wrapper, _WRAPPED_TAG, True)
    return wrapper


def patch_attention_functions() -> None:
    """Wraps every function of ALL_ATTENTION_FUNCTIONS once so that a module's kvcompact_beta is
    added to its compacted entries' logits outside prefills (see the module docstring)."""
    for name, func in list(ALL_ATTENTION_FUNCTIONS.items()):
        if not getattr(func, _WRAPPED_TAG, False):
            ALL_ATTENTION_FUNCTIONS[name] = _beta_wrapper(func)


patch_attention_functions()


# --------------------------------------------------------------------------------------------
# Queries


def _apply_rope(module, q, position_embeddings):
    cos, sin = position_embeddings
    mod = sys.modules.get(type(module).__module__)
    rope = getattr(mod, "apply_rotary_pos_emb", None)
    if rope is None:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as rope
    q_rot, _ = rope(q, q, cos, sin)
    return q_rot


def layer_queries(module, hidden_states, position_embeddings):
    """Post-RoPE queries [1, Hq, T, d] of the layer for hidden_states [1, T, hidden]."""
    q = get_prerope_query_states(module, hidden_states)
    return _apply_rope(module, q, position_embeddings)


def per_kv_head(q, n_kv_heads: int) -> np.ndarray:
    """[1, Hq, T, d] -> [Hkv, T * group, d] float32 (KV head h: query heads h*G .. h*G+G-1,
    position-major then query head): kvcompact.hf.queries_per_kv_head."""
    from .hf import queries_per_kv_head

    return queries_per_kv_head(q, n_kv_heads)


def kept_entries(T: int, compression_ratio: float) -> int:
    """t = max(1, floor((1 - compression_ratio) * T)) (kvpress's compute_n_kept)."""
    from kvpress.utils import compute_n_kept

    return compute_n_kept(T, compression_ratio)


# --------------------------------------------------------------------------------------------
# Presses


@dataclass
class KvcompactPress(BasePress):
    """Compacts every layer's KV cache with kvcompact's `method` (a method spec: "am", "snapkv",
    "h2o", "random", ...; kvcompact.method_help()) during the prefill.

    compression_ratio: fraction of each head's entries REMOVED (kvpress convention); each KV head
    keeps t = max(1, floor((1 - compression_ratio) * T)). options: more settings of the method
    (kvcompact.compact_cache keywords, e.g. iters=4, select="omp"). seed: for "random".
    Reference queries and context_queries: the layer's own post-RoPE context queries (see the
    module docstring). Methods with a beta (am) store it on the module for decoding.
    """

    method: str = "am"
    compression_ratio: float = 0.0
    seed: int = 0
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if not (0.0 <= float(self.compression_ratio) < 1.0):
            raise ValueError(f"compression_ratio: {self.compression_ratio} is outside [0, 1)")
        import kvcompact

        spec = kvcompact.canonical_method(self.method, **self.options)  # kvcompact.Error for a bad spec
        if spec.split(":")[0] in ("adakv", "tova"):
            raise ValueError(f"method: {spec!r} gives the heads of a layer different lengths, which a kvpress "
                             "DynamicCache cannot hold (use kvpress's own AdaKVPress / TOVAPress, or kvcompact.hf)")
        self.last = None  # (keys, values, queries, budgets, result) of the last layer, for tests

    def compress(self, module, hidden_states, keys, values, attentions, kwargs):
        import kvcompact

        impl = module.config._attn_implementation
        if impl in _NO_BIAS_IMPLEMENTATIONS or impl not in ALL_ATTENTION_FUNCTIONS:
            raise ValueError(f"attn_implementation: {impl!r} cannot take kvcompact's beta (use 'sdpa')")
        if not getattr(ALL_ATTENTION_FUNCTIONS[impl], _WRAPPED_TAG, False):
            patch_attention_functions()  # registered after this module was imported
        if keys.shape[0] != 1:
            raise ValueError(f"keys: batch size {keys.shape[0]} (kvcompact presses support batch size 1)")
        _, n_kv, T, d = keys.shape
        if not (0.0 <= float(self.compression_ratio) < 1.0):  # kvpress's runner sets it after __init__
            raise ValueError(f"compression_ratio: {self.compression_ratio} is outside [0, 1)")
        t = kept_entries(T, self.compression_ratio)
        q = layer_queries(module, hidden_states, kwargs["position_embeddings"])
        Q = per_kv_head(q, n_kv)
        scaling = float(getattr(module, "scaling", 1.0 / math.sqrt(d)))
        factor = scaling * math.sqrt(d)
        if factor != 1.0:
            Q = Q * np.float32(factor)
        Q = np.ascontiguousarray(Q[None])
        K = np.ascontiguousarray(keys.detach().float().cpu().numpy())
        V = np.ascontiguousarray(values.detach().float().cpu().numpy())
        budgets = [t] * n_kv
        opts = dict(self.options)
        try:
            res = kvcompact.compact_cache(K, V, Q, budgets=budgets, method=self.method, seed=self.seed, **opts)
        except kvcompact.Error as e:
            if "context's own queries" not in str(e):
                raise
            res = kvcompact.compact_cache(K, V, Q, budgets=budgets, method=self.method, seed=self.seed,
                                          context_queries=Q, **opts)
        heads = res[0]
        new_k = torch.from_numpy(np.stack([c1 for c1, _, _, _ in heads]))[None].to(keys.dtype).to(keys.device)
        new_v = torch.from_numpy(np.stack([c2 for _, _, c2, _ in heads]))[None].to(values.dtype).to(values.device)
        beta = torch.from_numpy(np.stack([b for _, b, _, _ in heads]))[None].to(keys.device)
        self.last = (K, V, Q, budgets, res)
        has_beta = bool((beta != 0).any())
        setattr(module, BETA_ATTR, beta if has_beta else None)
        setattr(module, KEYS_ATTR, new_k.detach().clone() if has_beta else None)
        return new_k.contiguous(), new_v.contiguous()


@dataclass
class AttentionMatchingPress(KvcompactPress):
    """Attention Matching (kvcompact's "am"): keys C1, logit bias beta and values C2 fitted so that
    the compacted head's attention output matches the original on the layer's context queries.
    AttentionMatchingPress(compression_ratio=0.9, iters=4, select="omp") passes the extra keywords
    to the method (kvcompact.method_help(), family am)."""

    def __init__(self, compression_ratio: float = 0.0, seed: int = 0, **am_options: Any):
        super().__init__(method="am", compression_ratio=compression_ratio, seed=seed, options=dict(am_options))
