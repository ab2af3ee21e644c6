"""Type stubs of the extension module _kvcompact (python/src/*.cpp), re-exported by kvcompact.

Arrays: inputs are anything numpy can read (numpy arrays, torch CPU tensors, lists); they are used
in place when already C-contiguous float32, else converted with a copy. Outputs are new numpy
arrays (float32, indices int64). Shapes: T context entries, n reference queries, d = head_dim.
Errors: ValueError naming the argument and its shape for bad arrays (wrong ndim, shape mismatch,
NaN/Inf) and bad ratio / t / budgets; kvcompact.Error (subclass of RuntimeError and ValueError)
carrying the library's one-line message for everything the C++ library refuses (bad method spec,
missing file, token id out of range, ...).
"""
from typing import Any, Callable, List, Optional, Sequence, Tuple, TypedDict

import numpy as np
import numpy.typing as npt

__version__: str

class Error(RuntimeError, ValueError):
    """A kvcompact::Error from the C++ library; str(e) is its one-line message."""

HeadResult = Tuple[
    npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.int64]
]

def compact_head(
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    Q: npt.ArrayLike,
    ratio: Optional[float] = None,
    t: Optional[int] = None,
    method: str = "am",
    *,
    context_queries: Optional[npt.ArrayLike] = None,
    seed: int = 0,
    **options: Any,
) -> HeadResult:
    """Compacts one KV head (the library's compact_head, compaction/method_spec.h).

    K, V: [T, d] keys (after RoPE) and values; Q: [n, d] reference queries (after RoPE).
    Exactly one of ratio (keep ratio in [0, 1]: t = max(1, floor(ratio*T)), 0 for ratio 0) and
    t (entries kept, 0..T). method: a method spec ("am", "am:select=omp", "random", "snapkv", ...;
    see method_help()); **options are more settings of it, e.g. iters=4, pool=("max", 5),
    c2=("ridge", 1e-4) -> "am,iters=4,pool=max:5,c2=ridge:1e-4". context_queries:
    [T * group_size, d], the context's own queries (position-major, then query head), needed by
    snapkv, h2o, tova-like methods whenever their scores are used (snapkv keeping no more than its
    recent window keeps the last keys and does not read them). seed: for "random" (used as given). Layer-scoped methods
    (tova, adakv) are refused; use compact_cache. The GIL is released during the compute.

    Returns (C1 [t, d], beta [t] (nats, added to the logits q.k/sqrt(d)), C2 [t, d],
    indices [t] into 0..T-1, increasing). Attention over the compacted head is
    softmax(q C1^T / sqrt(d) + beta) C2.
    """

def compact_cache(
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    Q: npt.ArrayLike,
    ratio: Optional[float] = None,
    budgets: Optional[Sequence[int]] = None,
    method: str = "am",
    *,
    context_queries: Optional[npt.ArrayLike] = None,
    seed: int = 0,
    **options: Any,
) -> list[list[HeadResult]]:
    """Compacts every head of a cache (the library's compact_cache, compaction/compact_cache.h),
    heads in parallel (OpenMP).

    K, V: [L, H, T, d]; Q: [L, H, n, d] reference queries per layer and KV head. Exactly one of
    ratio (every head keeps kept_entries(ratio, T)) and budgets (L*H entries, layer-major, each in
    0..T). context_queries: [L, H, T * group_size, d]. Each head's seed is head_seed(seed, l, h).
    Returns result[l][h] = (C1, beta, C2, indices) as compact_head.
    """

def kept_entries(ratio: float, T: int) -> int:
    """max(1, floor(ratio*T)) for ratio in (0, 1], 0 for ratio 0; kvcompact.Error outside [0, 1]."""

def method_help() -> str:
    """Every method family with its keys, defaults and valid values (`kvcompact methods`)."""

def canonical_method(method: str, **options: Any) -> str:
    """The canonical spec string of method + options; kvcompact.Error for a bad spec."""

def needs_context_queries(method: str, **options: Any) -> bool:
    """Whether method + options needs context_queries (the context prefill's own queries, e.g.
    snapkv's observation window); kvcompact.Error for a bad spec."""

def needs_reference_queries(method: str, **options: Any) -> bool:
    """Whether method + options reads the reference queries Q (am, attn-nofit); kvcompact.Error
    for a bad spec."""

def set_threads(n: int) -> None:
    """Worker threads of OpenMP and OpenBLAS (n >= 1), as the CLI's --threads."""

def get_threads() -> int:
    """OpenMP's current maximum number of threads."""

def set_fast_mode(on: bool) -> None:
    """The CLI's --fast-quant for the whole process (default off: exact float32 arithmetic). On:
    int8-quantised activations multiply Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q2_K..Q6_K weights as llama.cpp
    does, in decoding (up to 4 rows) and, on AVX-512 VNNI CPUs without AMX, in prefill (tiles of
    weight rows times groups of 4 rows; int8_prefill_preferred); on AVX2-only CPUs prefill stays
    exact (there the int8 prefill lost to float32 sgemm); where the CPU has AMX-BF16, prefill rounds activations and decoded weights
    (any type but F32) to bfloat16 and multiplies them on AMX tiles with float32 accumulation. Not
    exact: logits move by about the 8-bit rounding of the activations."""

def fast_mode() -> bool:
    """Whether the fast (not exact) matmul mode is on (set_fast_mode, or KVC_FAST_QUANT=1 at start-up)."""

def amx_prefill_available() -> bool:
    """Whether the fast mode's prefill runs on AMX tiles in this process (CPU with AMX-BF16, a build
    for it, and the kernels not lowered by KVC_ISA); otherwise see int8_prefill_preferred."""

def int8_prefill_preferred() -> bool:
    """Whether, where AMX is absent, the fast mode's prefill runs the int8 kernels: at the AVX-512
    VNNI kernel level (KVC_ISA may lower it). Otherwise (AVX2) the fast mode's prefill is the exact
    one; weight types without int8 kernels (F16/BF16/F32) are always exact there."""

class _CacheViews:
    """Read-only views shared by CompactedCache and KVCache (copies, numpy float32)."""
    @property
    def n_layers(self) -> int: ...
    @property
    def n_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def next_position(self) -> int:
        """RoPE position of the next token fed (a compacted T-token context: T)."""
    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        """Entries per head, [n_layers, n_kv_heads] (ragged after non-uniform compaction)."""
    @property
    def rope_style(self) -> str:
        """Pair layout of the stored keys' RoPE: "interleaved" (dims (2i, 2i+1): GGUF `llama`,
        llama2.c; Hugging Face's half-split layout of the same key is concat(k[0::2], k[1::2]))
        or "half_split" (dims (i, i + d/2): Qwen, Gemma, HF checkpoints)."""
    def layer_window(self, layer: int) -> int:
        """Sliding-window size of a layer in tokens (0: global attention)."""
    def head(self, layer: int, kv_head: int) -> Tuple[
        npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.float32]
    ]:
        """(keys [t, d] after RoPE, beta [t] in nats, values [t, d]) of one KV head: for a compacted
        head (C1, beta, C2). A query q attends with logits q.k / sqrt(d) + beta (times the model's
        own logit scale). ValueError for a layer / head out of range."""
    def positions(self, layer: int, kv_head: int) -> npt.NDArray[np.int32]:
        """Original RoPE position of each entry of one head, [t]."""

class CompactedCache(_CacheViews):
    """A compacted context cache: what a .kvc file holds (docs/kvc_format.md)."""
    @property
    def method(self) -> str: ...
    @property
    def ratio(self) -> float: ...
    @property
    def context_tokens(self) -> list[int]: ...
    @property
    def kept_entries(self) -> int:
        """Entries kept, summed over layers and KV heads."""
    @property
    def cache_bytes(self) -> int:
        """float32 keys, values and beta of the kept entries, in bytes."""
    @property
    def full_entries(self) -> int:
        """Entries of the full context cache (0 for a cache read from a file)."""
    @property
    def full_cache_bytes(self) -> int: ...
    @property
    def diagnostics(self) -> Optional[dict]:
        """Per-head attention diagnostics when Model.compact(..., diagnostics=True) made this cache
        (the JSON of `kvcompact compact --diagnostics`: per head and as means, on the fitted
        reference queries ("fit") and on held-out context queries ("heldout"): rel_l2_mean/max,
        cosine_mean/min, mass_err_mean/max, n_queries); None otherwise."""
    @property
    def last_logits(self) -> npt.NDArray[np.float32]:
        """Logits [vocab_size] after the context's last token (computed on the full cache)."""
    def kv_cache(self) -> KVCache:
        """A mutable copy (Model.forward extends it; this object stays as it is)."""
    def save(self, path: str) -> None:
        """Writes the .kvc file atomically (kvcompact generate/ppl --cache read it)."""

class KVCache(_CacheViews):
    """A mutable KV cache of one model (Model.new_cache, CompactedCache.kv_cache) that
    Model.forward extends in place; a forward over another model's cache is a ValueError. One
    forward at a time per cache: a second thread's forward over a cache in use is refused
    (ValueError; give each thread its own cache.copy()). Different caches may run in parallel."""
    @property
    def entries(self) -> int:
        """Entries summed over layers and KV heads."""
    @property
    def bytes(self) -> int:
        """float32 keys and values, plus beta for heads that carry a bias, in bytes."""
    def copy(self) -> KVCache:
        """An independent copy (e.g. to fork a prefix and continue it twice)."""

class ModelConfig(TypedDict):
    """The library's model summary (the keys of `kvcompact info --json`) plus adds_bos."""
    model: str
    architecture: str
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    max_seq_len: int
    rope_theta: float
    norm_eps: float
    tied_classifier: bool
    parameters: int
    bos_id: int
    eos_id: int
    adds_bos: bool
    tokenizer_vocab_size: int

class Generation(TypedDict):
    text: str
    prompt_tokens: list[int]
    generated: list[int]
    stopped: bool

class Model:
    """A model loaded as the CLI's --model does: a GGUF file, a Hugging Face folder (config.json,
    safetensors, tokenizer.json) or a llama2.c .bin (tokenizer: `tokenizer`, else tok512.bin /
    tokenizer.bin beside it). Raises kvcompact.Error naming the file and the problem."""

    def __init__(self, path: str, tokenizer: str = "") -> None: ...
    @property
    def config(self) -> ModelConfig:
        """Sizes of the model and its tokenizer."""
    @property
    def path(self) -> str: ...
    def tokenize(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of text (BOS first when add_bos and the tokenizer adds one)."""
    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of ids (BOS/EOS give no text)."""
    def logits(
        self, ids: Sequence[int], last: bool = False, cache: CompactedCache | KVCache | None = None
    ) -> npt.NDArray[np.float32]:
        """Logits [len(ids), vocab_size] of a forward over ids on a fresh cache (positions 0..);
        with last, only the last position's [vocab_size] (as the CLI's `logits`; its float
        rounding can differ from the full matrix's last row in the last bits). With `cache`, ids
        continue that cache (positions cache.next_position, ...; a compacted cache's beta is
        added to its entries' logits); the cache is not changed. ValueError for an empty list, an
        id outside the vocabulary or a cache of another model."""
    def new_cache(self) -> KVCache:
        """An empty KV cache of this model (sliding-window layers marked), for forward()."""
    def forward(self, ids: Sequence[int], cache: KVCache, logits: str = "last") -> Optional[npt.NDArray[np.float32]]:
        """Runs ids at positions cache.next_position, ... and appends their keys/values to `cache`
        (in place). logits: "last" -> [vocab_size], "all" -> [len(ids), vocab_size], "none" -> None.
        Warns (log sink) past max_seq_len. ValueError for bad ids, a cache of another model."""
    def forward_batch(
        self, ids: Sequence[Sequence[int]], caches: Sequence[KVCache], logits: str = "last"
    ) -> List[Optional[npt.NDArray[np.float32]]]:
        """Several independent sequences in one pass: ids[i] runs over caches[i] (extended in place),
        as forward(ids[i], caches[i]) would, but every projection runs once over all their rows.
        Returns one entry per sequence: logits "last" -> [vocab_size], "all" -> [len(ids[i]),
        vocab_size], "none" -> None. ValueError for unequal lengths, an empty sequence, a cache of
        another model, one cache given twice, bad ids."""
    def nll(self, ids: Sequence[int]) -> float:
        """Mean teacher-forced NLL in nats/token of ids[1:] given the ids before (perplexity =
        exp(nll)); needs >= 2 ids."""
    def generate(
        self,
        prompt: str = "",
        steps: int = 64,
        temperature: float = 0.0,
        top_p: float = 0.9,
        seed: int = 0,
        cache: CompactedCache | None = None,
    ) -> Generation:
        """llama2.c-style generation (the CLI's `generate`): `steps` positions including the
        prompt (encoded with BOS), stopping at BOS/EOS; temperature 0 is greedy, else nucleus
        sampling (top_p) seeded by seed. text: the pieces after the first prompt token, then the
        generated ones; generated: the sampled ids.
        With `cache` (the CLI's `generate --cache`): continues the compacted context; the prompt
        is encoded without BOS after it and `steps` new tokens at most are sampled; the cache
        object is not changed. Raises ValueError for a cache of another model."""
    def compact(
        self,
        context: str | Sequence[int],
        ratio: Optional[float] = None,
        method: str = "am",
        seed: int = 0,
        budgets: Optional[Sequence[int]] = None,
        progress: Optional[Callable[[str], None]] = None,
        diagnostics: bool = False,
        chunk: int = 0,
        **options: object,
    ) -> CompactedCache:
        """The CLI's `compact`: prefills `context` (text encoded with BOS, or token ids), collects
        the reference queries the method needs and compacts every KV head to max(1, floor(ratio*T))
        entries (ratio default 0.1; method spec and options as compact_head), or to `budgets`
        (entries per head, n_layers * n_kv_heads, layer-major, each in 0..T; e.g. from
        per_head_budgets); the cache's ratio is then the kept share sum(budgets) / (heads * T).
        Sliding-window layers (Gemma 3's local layers) are never compacted (the paper's
        convention): ratio and budgets apply to the global layers, a sliding layer's budgets
        entries are ignored and it keeps its entries (its window is applied by the forward).
        progress receives the library's log lines for this call (warnings, e.g. past
        max_seq_len). diagnostics: also compute the per-head attention diagnostics
        (CompactedCache.diagnostics). chunk: > 0 compacts the context in chunks of that many tokens
        in KV space, each with its own repeat-prefill queries (the paper's KV-based chunking;
        `kvcompact compact --chunk`). Raises ValueError (ratio outside [0, 1], both ratio and
        budgets, bad budgets, fewer than 2 tokens) or kvcompact.Error (bad method spec)."""
    def load_cache(self, path: str) -> CompactedCache:
        """Reads a .kvc file (docs/kvc_format.md) and checks it was made for this model (its
        fingerprint); raises kvcompact.Error naming the file otherwise."""

    def influence(
        self,
        documents: Sequence[str],
        out_dir: str,
        grid: str | Sequence[float] = "0:0.5:51",
        baseline: float = 0.05,
        heads: str = "all",
        method: str = "am",
        context_frac: float = 0.6,
        seed: int = 0,
        reuse_prefix: bool = True,
        budgets: str = "",
        progress: Optional[Callable[[str], None]] = None,
        **options: object,
    ) -> dict:
        """Head influence curves (the CLI's `influence --data`, studies/influence.h): for each
        document (context = the first floor(context_frac * N) tokens, the rest scored), every KV
        head in `heads` ("all" or "L0H1,L3H2") is compacted at each ratio of `grid` while all the
        others keep `baseline` (on the grid; with `budgets`, a budgets JSON file, their per-head
        share of it); delta NLL in nats/token against the all-baseline cache. Per-document files go
        to out_dir (a rerun resumes), then influence.json / .csv. Returns the influence.json object
        (mean, SEM, std per head and ratio). progress(line) receives the progress lines (else
        stderr); an exception it raises is re-raised after the sweep. Errors: ValueError /
        kvcompact.Error for an empty list, a bad grid, head name, method or folder of another study."""
    def mask_eval(
        self,
        tasks: str | Sequence[dict],
        scores: str,
        ks: Sequence[int],
        random_seeds: int = 5,
        seed: int = 0,
        ablation: str = "zero",
        head_means: str = "",
        reference: str = "gold",
        metrics: Sequence[str] = ("chrf",),
        out_dir: str = "",
        progress: Optional[Callable[[str], None]] = None,
    ) -> dict:
        """Head masking study (the CLI's `mask-eval`, studies/mask_eval.h): the unmasked model,
        then for each k the top-k heads of `scores` (a `kvcompact head-scores` JSON file) and
        `random_seeds` random sets of k heads, every task item (a .jsonl path or task dicts)
        answered greedily under the ablation ("zero", "mean" with a head_means file, "uniform").
        Returns the mask_eval.json object (accuracy and `metrics` per family and condition, SEM
        over the random draws). out_dir: resume folder (finished conditions are reused)."""

def optimize_budgets(
    curves: dict | str, targets: Sequence[float] = (0.01, 0.02, 0.05, 0.1), floor: float = 0.1, units: int = 200
) -> dict:
    """Per-head budget proportions minimising the predicted delta NLL summed over `targets`
    (budgets/budget_solver.h; the CLI's `budget --schedule optimized`) from influence curves of
    every KV head (Model.influence's dict or an influence.json path). Returns the budgets JSON
    object: {"schedule", "targets", "floor", "n_layers", "n_kv_heads", "heads": [{"name": "L0H0",
    "layer", "kv_head", "proportion"}], "predicted_delta"}; proportions sum to 1."""

def uniform_budgets(
    n_layers: int, n_kv_heads: int, targets: Sequence[float] = (0.01, 0.02, 0.05, 0.1), curves: dict | str | None = None
) -> dict:
    """The uniform schedule (every head 1/H) as a budgets JSON object; with curves, its predicted delta."""

def pyramid_budgets(
    n_layers: int,
    n_kv_heads: int,
    targets: Sequence[float] = (0.01, 0.02, 0.05, 0.1),
    beta: float = 20.0,
    curves: dict | str | None = None,
) -> dict:
    """PyramidKV's linearly decreasing layer shares (arXiv 2406.02069, beta as there)."""

def per_head_budgets(
    schedule: dict | str, tokens_per_head: Sequence[int], ratio: float, max_head_ratio: float = 1.0
) -> list[int]:
    """Whole entries per head for total ratio `ratio` in (0, 1]: round(ratio * sum T_h) shared by
    the proportions, water-filled at each head's cap max(1, floor(max_head_ratio * T_h)) (the
    paper's max_ratio_per_head; 1 = T_h), each kept head >= 1 (for Model.compact's budgets).
    kvcompact.Error when the caps cannot hold the total."""
