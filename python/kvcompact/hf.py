"""Hugging Face transformers integration: compacted KV caches (Attention Matching, arXiv
2602.16284) as a transformers `Cache`, usable by `model(...)` and `model.generate(...)`.

    import torch, kvcompact, kvcompact.hf as kh
    from transformers import AutoModelForCausalLM, DynamicCache
    model = AutoModelForCausalLM.from_pretrained(...)
    ctx = tok(context, return_tensors="pt").input_ids            # [1, T]
    full = DynamicCache(config=model.config)
    with kh.record_queries(model) as rec:                         # the prefill's own queries
        model(ctx, past_key_values=full)
    cache = kh.compact(model, full, ratio=0.1, method="am", queries=rec)
    out = model.generate(torch.cat([ctx, question_ids], 1), past_key_values=cache, max_new_tokens=32)

The compacted cache holds, per layer and per KV head, (C1 [t, d], beta [t], C2 [t, d]) with its own
t (ragged, no padding); tokens fed after it are appended per head with beta 0. Attention of query
head j (KV head j // group) over it: softmax(q C1^T * scaling + beta [+ causal among the new
tokens]) C2, computed by the attention implementation "kvcompact" that this module registers in
transformers' AttentionInterface (and AttentionMaskInterface, as sdpa's mask). Models that use the
cache must run with it: `enable(model)` (compact, from_kvcompact and record_queries call it) sets
`model.set_attn_implementation("kvcompact")`; for ordinary caches the function is transformers'
sdpa, so the model is otherwise unchanged. The cache's update() refuses to run under any other
attention implementation (it would silently attend to the new tokens only).

How the attention function finds the cache: transformers passes it only the tensors that
`past_key_values.update()` returns; our layer returns the new tokens' keys/values with a Python
attribute `_kvcompact_layer` pointing back at the layer, and the attention function reads the
ragged heads from there.

get_seq_length() is the ORIGINAL context length plus the appended tokens, so generate's
cache_position and the RoPE positions continue from the original length; `generate` therefore
takes input_ids = the context ids (any ids of that length: only the uncached tail is run) followed
by the new ids. Batch size 1 only. Sliding windows, logit softcapping, attention sinks and
attention dropout are refused with a ValueError.

torch and transformers are imported lazily (kvcompact itself does not need them).
"""
from __future__ import annotations

import contextlib
import math
import weakref
from typing import Any, Iterator, Optional, Sequence

import numpy as np

ATTN_IMPLEMENTATION = "kvcompact"
_LAYER_TAG = "_kvcompact_layer"
_registered = False
_recorder: Optional["QueryRecorder"] = None


# --------------------------------------------------------------------------------------------
# Registration and the attention function


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, sdpa_mask)
    _registered = True


def _text_config(model):
    cfg = model.config
    return cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg


def enable(model):
    """Registers the "kvcompact" attention implementation and switches `model` to it (sdpa for
    ordinary caches, compacted attention for kvcompact.hf caches). Refuses (ValueError) models
    with sliding-window layers or attention logit softcapping. Returns model."""
    _register()
    cfg = _text_config(model)
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True):
        layer_types = getattr(cfg, "layer_types", None) or []
        if not layer_types or any(t != "full_attention" for t in layer_types):
            raise ValueError(f"model: sliding-window attention (sliding_window={cfg.sliding_window}) is not supported")
    if getattr(cfg, "attn_logit_softcapping", None):
        raise ValueError(f"model: attention logit softcapping ({cfg.attn_logit_softcapping}) is not supported")
    if model.config._attn_implementation != ATTN_IMPLEMENTATION:
        model.set_attn_implementation(ATTN_IMPLEMENTATION)
    if model.config._attn_implementation != ATTN_IMPLEMENTATION:
        raise ValueError(f"model: {type(model).__name__} cannot switch its attention implementation to 'kvcompact'")
    return model


def attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                      sliding_window=None, softcap=None, **kwargs):
    """The "kvcompact" attention implementation (transformers' attention-function signature).

    query [1, Hq, q, d] (after RoPE); key/value: what the cache's update() returned. For a layer
    of a kvcompact.hf.HFCompactedCache: per KV head h, the query heads h*G .. h*G+G-1 attend to the
    head's t_h compacted entries (logit q.C1 * scaling + beta) and its appended tokens (logit
    q.k * scaling, causal through attention_mask or by position). Otherwise: transformers' sdpa.
    Returns (attn_output [1, q, Hq, d], None). While record_queries() is active, the queries are
    recorded per layer first.
    """
    if _recorder is not None:
        _recorder._add(module, query, scaling)
    layer = getattr(key, _LAYER_TAG, None)
    if layer is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        kw = dict(kwargs)
        if sliding_window is not None:
            kw["sliding_window"] = sliding_window
        if softcap is not None:
            kw["softcap"] = softcap
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kw)
    return layer._attend(module, query, attention_mask, dropout, scaling, sliding_window, softcap, kwargs)


# --------------------------------------------------------------------------------------------
# Recording the prefill's queries


def queries_per_kv_head(q, n_kv_heads: int) -> np.ndarray:
    """Queries [1, Hq, n, d] (torch) -> [Hkv, n * group, d] float32: KV head h gets query heads
    h*G .. h*G+G-1, rows position-major then query head (the layout of kvcompact's
    context_queries). ValueError for a batch size other than 1 or Hq not a multiple of Hkv."""
    if q.shape[0] != 1:
        raise ValueError(f"queries: batch size {q.shape[0]} (only 1 is supported)")
    hq, n, d = q.shape[1], q.shape[2], q.shape[3]
    if hq % n_kv_heads:
        raise ValueError(f"queries: {hq} query heads are not a multiple of {n_kv_heads} KV heads")
    g = hq // n_kv_heads
    return q[0].reshape(n_kv_heads, g, n, d).permute(0, 2, 1, 3).reshape(n_kv_heads, n * g, d).float().cpu().numpy()


class QueryRecorder:
    """The post-RoPE queries of every attention call while active, per layer: queries(l) is
    [1, Hq, n, d] (calls concatenated along n), scaling(l) the module's logit scale."""

    def __init__(self):
        self._q: dict[int, list] = {}
        self._scaling: dict[int, float] = {}

    def _add(self, module, query, scaling):
        l = int(module.layer_idx)
        self._q.setdefault(l, []).append(query.detach().to("cpu", copy=True))
        self._scaling[l] = float(scaling if scaling is not None else module.scaling)

    @property
    def n_layers(self) -> int:
        return len(self._q)

    def queries(self, layer: int):
        import torch

        return torch.cat(self._q[layer], dim=2)

    def scaling(self, layer: int) -> float:
        return self._scaling[layer]

    def per_kv_head(self, n_layers: int, n_kv_heads: int) -> np.ndarray:
        """[L, Hkv, n * group, d] float32: KV head h gets query heads h*G .. h*G+G-1, rows
        position-major then query head (the layout of kvcompact's context_queries)."""
        if sorted(self._q) != list(range(n_layers)):
            raise ValueError(f"queries: recorded layers {sorted(self._q)} do not cover the model's {n_layers} layers "
                             "(run the prefill inside record_queries(model))")
        return np.ascontiguousarray(np.stack([queries_per_kv_head(self.queries(l), n_kv_heads)
                                              for l in range(n_layers)]))


@contextlib.contextmanager
def record_queries(model) -> Iterator[QueryRecorder]:
    """`with record_queries(model) as rec: model(ids, past_key_values=cache)` records the
    post-RoPE queries of every attention layer (enables the "kvcompact" attention on model)."""
    global _recorder
    enable(model)
    if _recorder is not None:
        raise RuntimeError("record_queries: already recording")
    rec = QueryRecorder()
    _recorder = rec
    try:
        yield rec
    finally:
        _recorder = None


# --------------------------------------------------------------------------------------------
# The cache


def _cache_layer_base():
    from transformers.cache_utils import CacheLayerMixin

    return CacheLayerMixin


def _make_classes():
    import torch
    from transformers.cache_utils import Cache, CacheLayerMixin

    class HFCompactedLayer(CacheLayerMixin):
        """One layer: per KV head h, keys[h] [t_h + m, d] (C1 then the m appended keys),
        values[h] [t_h + m, d_v], beta[h] [t_h] (nats). original_length: the context's token count
        (the RoPE position of its next token)."""

        is_sliding = False
        is_compileable = False

        def __init__(self, heads, original_length: int):
            super().__init__()
            self.head_keys = [k for k, _, _ in heads]
            self.head_beta = [b for _, b, _ in heads]
            self.head_values = [v for _, _, v in heads]
            self.kept = [int(k.shape[0]) for k in self.head_keys]
            self.original_length = int(original_length)
            self.appended = 0
            self.n_heads = len(heads)
            self.dtype = self.head_keys[0].dtype
            self.device = self.head_keys[0].device
            self.is_initialized = True

        def lazy_initialization(self, key_states, value_states) -> None:
            pass

        def update(self, key_states, value_states, cache_kwargs=None):
            if key_states.shape[0] != 1:
                raise ValueError(f"key_states: batch size {key_states.shape[0]} (kvcompact caches hold batch size 1)")
            if key_states.shape[1] != self.n_heads:
                raise ValueError(f"key_states: {key_states.shape[1]} KV heads, the cache has {self.n_heads}")
            for h in range(self.n_heads):
                self.head_keys[h] = torch.cat([self.head_keys[h], key_states[0, h].to(self.dtype)], dim=0)
                self.head_values[h] = torch.cat([self.head_values[h], value_states[0, h].to(self.dtype)], dim=0)
            self.appended += int(key_states.shape[2])
            k, v = key_states, value_states
            setattr(k, _LAYER_TAG, self)
            setattr(v, _LAYER_TAG, self)
            return k, v

        def _attend(self, module, query, attention_mask, dropout, scaling, sliding_window, softcap, kwargs):
            if dropout:
                raise ValueError(f"dropout: {dropout} (attention dropout is not supported; use model.eval())")
            if sliding_window is not None:
                raise ValueError(f"sliding_window: {sliding_window} (not supported by kvcompact caches)")
            if softcap is not None:
                raise ValueError(f"softcap: {softcap} (not supported by kvcompact caches)")
            if kwargs.get("s_aux") is not None:
                raise ValueError("s_aux: attention sinks are not supported by kvcompact caches")
            if scaling is None:
                scaling = module.scaling
            b, hq, q_len, d = query.shape
            if b != 1:
                raise ValueError(f"query: batch size {b} (kvcompact caches hold batch size 1)")
            if hq % self.n_heads:
                raise ValueError(f"query: {hq} heads are not a multiple of the cache's {self.n_heads} KV heads")
            g = hq // self.n_heads
            m = self.appended
            # Additive mask [q_len, m] over the appended tokens (the last q_len of them are the queries').
            new_mask = None
            if attention_mask is not None:
                am = attention_mask
                if am.dim() != 4 or am.shape[0] != 1 or am.shape[-2] != q_len or am.shape[-1] < m:
                    raise ValueError(f"attention_mask: shape {tuple(am.shape)} does not fit {q_len} queries "
                                     f"over {m} appended tokens")
                am = am[0, 0, :, am.shape[-1] - m:]
                if am.dtype == torch.bool:
                    new_mask = torch.zeros(am.shape, dtype=query.dtype, device=query.device)
                    new_mask.masked_fill_(~am, float("-inf"))
                else:
                    new_mask = am.to(query.dtype)
            else:
                i = torch.arange(q_len, device=query.device)[:, None] + (m - q_len)
                j = torch.arange(m, device=query.device)[None, :]
                new_mask = torch.zeros((q_len, m), dtype=query.dtype, device=query.device)
                new_mask.masked_fill_(j > i, float("-inf"))
            out = torch.empty((1, hq, q_len, self.head_values[0].shape[-1]), dtype=query.dtype, device=query.device)
            for h in range(self.n_heads):
                qh = query[0, h * g:(h + 1) * g]                       # [G, q, d]
                keys = self.head_keys[h].to(query.dtype)
                logits = torch.matmul(qh, keys.transpose(0, 1)) * scaling  # [G, q, t + m]
                t = self.kept[h]
                logits[..., :t] += self.head_beta[h].to(query.dtype)
                logits[..., t:] += new_mask
                p = torch.softmax(logits, dim=-1)
                out[0, h * g:(h + 1) * g] = torch.matmul(p, self.head_values[h].to(query.dtype))
            return out.transpose(1, 2).contiguous(), None

        def get_mask_sizes(self, cache_position):
            return self.get_seq_length() + int(cache_position.shape[0]), 0

        def get_seq_length(self) -> int:
            return self.original_length + self.appended

        def get_max_cache_shape(self) -> int:
            return -1

        def crop(self, max_length: int) -> None:
            if max_length < 0:
                max_length = self.get_seq_length() + max_length
            if max_length >= self.get_seq_length():
                return
            if max_length < self.original_length:
                raise ValueError(f"max_length: {max_length} is inside the compacted context "
                                 f"({self.original_length} tokens); only appended tokens can be cropped")
            keep = max_length - self.original_length
            for h in range(self.n_heads):
                self.head_keys[h] = self.head_keys[h][: self.kept[h] + keep]
                self.head_values[h] = self.head_values[h][: self.kept[h] + keep]
            self.appended = keep

        def reset(self) -> None:
            raise ValueError("reset: a compacted cache cannot be reset (make a new one)")

        def reorder_cache(self, beam_idx) -> None:
            if beam_idx.numel() != 1 or int(beam_idx[0]) != 0:
                raise ValueError("beam_idx: kvcompact caches hold batch size 1 (no beam search)")

        def batch_repeat_interleave(self, repeats: int) -> None:
            if repeats != 1:
                raise ValueError(f"repeats: {repeats} (kvcompact caches hold batch size 1)")

        def batch_select_indices(self, indices) -> None:
            if indices.numel() != 1 or int(indices.reshape(-1)[0]) != 0:
                raise ValueError("indices: kvcompact caches hold batch size 1")

        def offload(self):
            self._move("cpu")

        def prefetch(self):
            self._move(self.device)

        def _move(self, device):
            self.head_keys = [k.to(device, non_blocking=True) for k in self.head_keys]
            self.head_values = [v.to(device, non_blocking=True) for v in self.head_values]
            self.head_beta = [b.to(device, non_blocking=True) for b in self.head_beta]

        @property
        def nbytes(self) -> int:
            return sum(x.numel() * x.element_size() for x in (*self.head_keys, *self.head_values, *self.head_beta))

    class HFCompactedCache(Cache):
        """A compacted context as a transformers Cache (batch size 1): layers[l] is a
        HFCompactedLayer. original_length: the context's token count; get_seq_length() is that
        plus the tokens appended since. nbytes: bytes of all stored tensors (C1, beta, C2 and
        the appended keys/values). kept[l][h]: the compacted entries of layer l, KV head h."""

        def __init__(self, layers, config=None):
            super().__init__(layers=layers)
            self._config = weakref.ref(config) if config is not None else None

        @property
        def original_length(self) -> int:
            return self.layers[0].original_length

        @property
        def kept(self) -> list[list[int]]:
            return [list(layer.kept) for layer in self.layers]

        @property
        def nbytes(self) -> int:
            return sum(layer.nbytes for layer in self.layers)

        def update(self, key_states, value_states, layer_idx: int, cache_kwargs=None):
            cfg = self._config() if self._config is not None else None
            if cfg is not None and cfg._attn_implementation != ATTN_IMPLEMENTATION:
                raise ValueError(f"past_key_values: a kvcompact cache needs the 'kvcompact' attention implementation, the "
                                 f"model runs '{cfg._attn_implementation}' (call kvcompact.hf.enable(model))")
            if layer_idx >= len(self.layers):
                raise ValueError(f"layer_idx: {layer_idx} (the cache has {len(self.layers)} layers)")
            return self.layers[layer_idx].update(key_states, value_states, cache_kwargs)

    return HFCompactedLayer, HFCompactedCache


_classes = None


def _cls():
    global _classes
    if _classes is None:
        _classes = _make_classes()
    return _classes


def __getattr__(name):  # HFCompactedCache / HFCompactedLayer without importing torch at import time
    if name == "HFCompactedLayer":
        return _cls()[0]
    if name == "HFCompactedCache":
        return _cls()[1]
    raise AttributeError(name)


def make_cache(model, heads: Sequence[Sequence[tuple]], original_length: int, dtype=None, device=None):
    """An HFCompactedCache from heads[l][h] = (C1 [t, d], beta [t], C2 [t, d]) (numpy or torch, keys in
    the model's own layout, after RoPE) for a context of original_length tokens."""
    import torch

    _, HFCompactedCache = _cls()
    cfg = _text_config(model)
    p = next(model.parameters())
    dtype = dtype or p.dtype
    device = device or p.device
    layers = []
    for l, lh in enumerate(heads):
        hs = []
        for h, (c1, beta, c2) in enumerate(lh):
            c1 = torch.as_tensor(np.asarray(c1), dtype=dtype, device=device)
            beta = torch.as_tensor(np.asarray(beta), dtype=dtype, device=device)
            c2 = torch.as_tensor(np.asarray(c2), dtype=dtype, device=device)
            if c1.ndim != 2 or c2.ndim != 2 or beta.ndim != 1 or not (c1.shape[0] == c2.shape[0] == beta.shape[0]):
                raise ValueError(f"heads[{l}][{h}]: shapes C1 {tuple(c1.shape)}, beta {tuple(beta.shape)}, "
                                 f"C2 {tuple(c2.shape)} (need [t, d], [t], [t, d])")
            hs.append((c1, beta, c2))
        layers.append(_cls()[0](hs, original_length))
    return HFCompactedCache(layers, config=model.config)


def _model_shape(model):
    cfg = _text_config(model)
    n_layers = int(cfg.num_hidden_layers)
    n_heads = int(cfg.num_attention_heads)
    n_kv = int(getattr(cfg, "num_key_value_heads", None) or n_heads)
    head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads)
    return n_layers, n_heads, n_kv, head_dim


def full_cache_nbytes(cache) -> int:
    """Bytes of the key and value tensors of an ordinary transformers cache (e.g. DynamicCache)."""
    return sum(layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
               for layer in cache.layers if layer.keys is not None)


def compact(model, cache, ratio: Optional[float] = None, budgets: Optional[Sequence[int]] = None, method: str = "am",
            queries: Any = None, context_queries: Any = None, seed: int = 0, **options):
    """Compacts a DynamicCache filled by a prefill of the context and returns an HFCompactedCache.

    cache: per layer keys/values [1, Hkv, T, d] (keys after RoPE). queries: the reference queries,
    either the QueryRecorder of `with record_queries(model) as rec: model(ids, past_key_values=cache)`
    (the prefill's own post-RoPE queries: KV head h gets the rows of its query heads, n = T * group)
    or an array [L, Hkv, n, d]. Methods that need the context's own queries (snapkv, h2o, ...) get
    them from the recorder (or context_queries= [L, Hkv, T * group, d]). Exactly one of ratio
    (in [0, 1]; every head keeps max(1, floor(ratio*T)), 0 for 0) and budgets (L*Hkv counts,
    layer-major). method / seed / **options: as kvcompact.compact_cache. The logit scale
    module.scaling is honoured (queries are rescaled so that q.k/sqrt(d) = q.k*scaling).
    Raises ValueError naming the argument: ratio outside [0, 1], a cache of another model
    (layer count or head shapes), NaN/Inf keys, missing queries.
    """
    import torch

    import kvcompact

    if (ratio is None) == (budgets is None):
        raise ValueError("ratio: give exactly one of ratio and budgets")
    if ratio is not None and not (0.0 <= float(ratio) <= 1.0):
        raise ValueError(f"ratio: {ratio} is outside [0, 1]")
    enable(model)
    n_layers, n_heads, n_kv, d = _model_shape(model)
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise ValueError(f"cache: {type(cache).__name__} is not a transformers Cache with layers")
    if len(layers) != n_layers:
        raise ValueError(f"cache: {len(layers)} layers, the model has {n_layers}")
    T = None
    for l, layer in enumerate(layers):
        k, v = layer.keys, layer.values
        if k is None or v is None or k.ndim != 4:
            raise ValueError(f"cache: layer {l} holds no [1, Hkv, T, d] keys (prefill the context first)")
        if k.shape[0] != 1 or k.shape[1] != n_kv or k.shape[3] != d or v.shape[:3] != k.shape[:3]:
            raise ValueError(f"cache: layer {l} keys {tuple(k.shape)} / values {tuple(v.shape)}, the model needs "
                             f"[1, {n_kv}, T, {d}]")
        if T is None:
            T = int(k.shape[2])
        elif k.shape[2] != T:
            raise ValueError(f"cache: layer {l} holds {k.shape[2]} entries, layer 0 {T}")
        if not bool(torch.isfinite(k).all()) or not bool(torch.isfinite(v).all()):
            raise ValueError(f"cache: layer {l} keys or values hold NaN/Inf")
    if T == 0:
        raise ValueError("cache: empty (prefill the context first)")
    K = np.ascontiguousarray(np.stack([layer.keys[0].detach().float().cpu().numpy() for layer in layers]))
    V = np.ascontiguousarray(np.stack([layer.values[0].detach().float().cpu().numpy() for layer in layers]))

    scalings = [1.0 / math.sqrt(d)] * n_layers
    if isinstance(queries, QueryRecorder):
        rec = queries
        Q = rec.per_kv_head(n_layers, n_kv)
        scalings = [rec.scaling(l) for l in range(n_layers)]
        if context_queries is None:
            context_queries = Q
    elif queries is None:
        raise ValueError("queries: needed (a record_queries() recorder or an [L, Hkv, n, d] array)")
    else:
        Q = np.ascontiguousarray(np.asarray(queries.detach().cpu() if hasattr(queries, "detach") else queries,
                                            dtype=np.float32))
        if Q.ndim != 4 or Q.shape[0] != n_layers or Q.shape[1] != n_kv or Q.shape[3] != d:
            raise ValueError(f"queries: shape {Q.shape}, need [{n_layers}, {n_kv}, n, {d}]")
    # kvcompact's logits are q.k/sqrt(d); make them q.k*scaling.
    factor = np.asarray([s * math.sqrt(d) for s in scalings], dtype=np.float32)
    if np.any(factor != 1.0):
        Q = Q * factor[:, None, None, None]
        if context_queries is not None and context_queries is not queries:
            context_queries = np.asarray(context_queries, dtype=np.float32) * factor[:, None, None, None]
    if not np.isfinite(Q).all():
        raise ValueError("queries: NaN/Inf")
    needs_ctx = kvcompact.needs_context_queries(method, **options)
    kw = dict(options)
    if needs_ctx:
        if context_queries is None:
            raise ValueError(f"context_queries: method {method} needs the context's own queries (pass queries=rec "
                             "from record_queries)")
        cq = np.ascontiguousarray(np.asarray(context_queries, dtype=np.float32))
        if cq.shape[2] % T:
            raise ValueError(f"context_queries: {cq.shape[2]} rows per head, not a multiple of T = {T}")
        kw["context_queries"] = cq
    if ratio is not None:
        res = kvcompact.compact_cache(K, V, Q, ratio=float(ratio), method=method, seed=seed, **kw)
    else:
        res = kvcompact.compact_cache(K, V, Q, budgets=list(budgets), method=method, seed=seed, **kw)
    heads = [[(c1, beta, c2) for c1, beta, c2, _ in lh] for lh in res]
    k0 = layers[0].keys
    return make_cache(model, heads, T, dtype=k0.dtype, device=k0.device)


def keys_to_half_split(keys, rope_style):
    """Keys [t, head_dim] of a kvcompact cache in transformers' RoPE layout (float32, contiguous).

    rope_style "interleaved" (kvcompact runs GGUF llama files on the permuted Q/K rows with RoPE
    pairs (2i, 2i+1); transformers un-permutes them and rotates (i, i + d/2)) becomes
    concat(k[:, 0::2], k[:, 1::2]); "half_split" is returned as it is. ValueError for another style."""
    if rope_style not in ("interleaved", "half_split"):
        raise ValueError(f"compacted: unknown rope_style {rope_style!r}")
    keys = np.asarray(keys, dtype=np.float32)
    if rope_style == "interleaved":
        keys = np.concatenate([keys[:, 0::2], keys[:, 1::2]], axis=1)
    return np.ascontiguousarray(keys)


def from_kvcompact(compacted, model):
    """Converts a native kvcompact.CompactedCache (Model.compact / Model.load_cache) into a
    HFCompactedCache for the transformers `model` (the same weights, e.g. the same GGUF file).

    Keys go through keys_to_half_split (the RoPE layout of the cache's rope_style); values and
    beta are unchanged. The original
    length is compacted.next_position. ValueError for a cache of another model shape."""
    enable(model)
    n_layers, n_heads, n_kv, d = _model_shape(model)
    if compacted.n_layers != n_layers:
        raise ValueError(f"compacted: {compacted.n_layers} layers, the model has {n_layers}")
    if compacted.n_kv_heads != n_kv or compacted.head_dim != d:
        raise ValueError(f"compacted: {compacted.n_kv_heads} KV heads of dim {compacted.head_dim}, the model has "
                         f"{n_kv} of dim {d}")
    style = compacted.rope_style
    keys_to_half_split(np.zeros((0, 2), np.float32), style)  # the style check, before any head
    heads = []
    for l in range(n_layers):
        lh = []
        for h in range(n_kv):
            c1, beta, c2 = compacted.head(l, h)
            lh.append((keys_to_half_split(c1, style), np.asarray(beta, np.float32), np.asarray(c2, np.float32)))
        heads.append(lh)
    return make_cache(model, heads, int(compacted.next_position))
