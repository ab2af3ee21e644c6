"""kvcompact from Python: KV-cache compaction by Attention Matching (arXiv 2602.16284) and exact
CPU inference of Llama-family models, as bindings over the C++ library (numpy float32 in and out).

    import numpy as np, kvcompact
    K, V, Q = (np.random.default_rng(0).standard_normal(s, dtype=np.float32) for s in [(64, 8), (64, 8), (128, 8)])
    C1, beta, C2, idx = kvcompact.compact_head(K, V, Q, ratio=0.25)   # 16 of 64 entries

See _kvcompact.pyi for every signature, shape and error. The optional integrations import their
frameworks only when imported themselves: kvcompact.hf (Hugging Face transformers) and
kvcompact.kvpress (kvpress presses).
"""
from ._kvcompact import (
    CompactedCache,
    Error,
    KVCache,
    Model,
    __version__,
    canonical_method,
    compact_cache,
    amx_prefill_available,
    compact_head,
    fast_mode,
    get_threads,
    kept_entries,
    method_help,
    optimize_budgets,
    per_head_budgets,
    pyramid_budgets,
    set_fast_mode,
    set_threads,
    uniform_budgets,
)

__all__ = [
    "CompactedCache",
    "Error",
    "KVCache",
    "Model",
    "__version__",
    "amx_prefill_available",
    "canonical_method",
    "compact_cache",
    "compact_head",
    "fast_mode",
    "get_threads",
    "kept_entries",
    "method_help",
    "optimize_budgets",
    "per_head_budgets",
    "pyramid_budgets",
    "set_fast_mode",
    "set_threads",
    "uniform_budgets",
]
