"""kvcompact from Python: KV-cache compaction by Attention Matching (arXiv 2602.16284) and exact
CPU inference of Llama-family models, as bindings over the C++ library (numpy float32 in and out).

    import numpy as np, kvcompact
    K, V, Q = (np.random.default_rng(0).standard_normal(s, dtype=np.float32) for s in [(64, 8), (64, 8), (128, 8)])
    C1, beta, C2, idx = kvcompact.compact_head(K, V, Q, ratio=0.25)   # 16 of 64 entries

See _kvcompact.pyi for every signature, shape and error. The optional integrations import their
frameworks only when imported themselves: kvcompact.hf (Hugging Face transformers) and
kvcompact.kvpress (kvpress presses).
"""
import os as _os
import time as _time


def _choose_wait_policy():
    """OpenMP's spinning threads (libgomp's default) make decoding fast on an idle machine and
    starve each other on a busy one (2 threads next to other work: one compact_head call took 1.5 s
    instead of 0.013 s). As the kvcompact CLI does: unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set,
    when the processes running now (the fewest of a few samples of /proc/loadavg, which counts us)
    and our threads would not fit on the CPUs, set OMP_WAIT_POLICY=PASSIVE before the extension
    loads libgomp (which reads it once). Set OMP_WAIT_POLICY=ACTIVE or PASSIVE to choose."""
    if "OMP_WAIT_POLICY" in _os.environ or "GOMP_SPINCOUNT" in _os.environ:
        return
    cpus = _os.cpu_count() or 1
    try:
        threads = int(_os.environ.get("OMP_NUM_THREADS", "0").split(",")[0])
    except ValueError:
        threads = 0
    threads = threads if threads > 0 else cpus
    def own_running():  # this process's running threads (e.g. numpy's BLAS threads, spinning after start-up)
        n = 0
        for tid in _os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    n += f.read().rsplit(")", 1)[1].split()[0] == "R"
            except (OSError, IndexError):
                pass
        return max(n, 1)

    fewest = None
    for sample in range(6):
        if sample:
            _time.sleep(0.003)
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
            others = max(0, running - own_running())
        except (OSError, ValueError, IndexError):
            return  # not Linux or cannot tell: libgomp's default
        fewest = others if fewest is None else min(fewest, others)
        if fewest == 0:
            break
    if fewest + min(threads, cpus) > cpus:
        _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


_choose_wait_policy()

from ._kvcompact import (  # noqa: E402
    CompactedCache,
    Error,
    KVCache,
    Model,
    __version__,
    canonical_method,
    needs_context_queries,
    needs_reference_queries,
    compact_cache,
    amx_prefill_available,
    int8_prefill_preferred,
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
    "int8_prefill_preferred",
    "canonical_method",
    "needs_context_queries",
    "needs_reference_queries",
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
