"""Type stubs of the extension module _kvcompact (python/src/*.cpp), re-exported by kvcompact.

Arrays: inputs are anything numpy can read (numpy arrays, torch CPU tensors, lists); they are used
in place when already C-contiguous float32, else converted with a copy. Outputs are new numpy
arrays (float32, indices int64). Shapes: T context entries, n reference queries, d = head_dim.
Errors: ValueError naming the argument and its shape for bad arrays (wrong ndim, shape mismatch,
NaN/Inf) and bad ratio / t / budgets; kvcompact.Error (subclass of RuntimeError and ValueError)
carrying the library's one-line message for everything the C++ library refuses (bad method spec,
missing file, token id out of range, ...).
"""
from typing import Any, Optional, Sequence, Tuple, TypedDict

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
    snapkv, h2o, tova-like methods. seed: for "random" (used as given). Layer-scoped methods
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

def set_threads(n: int) -> None:
    """Worker threads of OpenMP and OpenBLAS (n >= 1), as the CLI's --threads."""

def get_threads() -> int:
    """OpenMP's current maximum number of threads."""

class CompactedCache:
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
    def save(self, path: str) -> None:
        """Writes the .kvc file atomically (kvcompact generate/ppl --cache read it)."""

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
    def logits(self, ids: Sequence[int], last: bool = False) -> npt.NDArray[np.float32]:
        """Logits [len(ids), vocab_size] of a forward over ids on a fresh cache (positions 0..);
        with last, only the last position's [vocab_size] (as the CLI's `logits`; its float
        rounding can differ from the full matrix's last row in the last bits)."""
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
        self, context: str | Sequence[int], ratio: float = 0.1, method: str = "am", seed: int = 0, **options: object
    ) -> CompactedCache:
        """The CLI's `compact`: prefills `context` (text encoded with BOS, or token ids), collects
        the reference queries the method needs and compacts every KV head to max(1, floor(ratio*T))
        entries (method spec and options as compact_head). Raises ValueError (ratio outside
        [0, 1], fewer than 2 tokens) or kvcompact.Error (bad method spec)."""
    def load_cache(self, path: str) -> CompactedCache:
        """Reads a .kvc file (docs/kvc_format.md) and checks it was made for this model (its
        fingerprint); raises kvcompact.Error naming the file otherwise."""
