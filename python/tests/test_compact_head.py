"""kvcompact.compact_head / compact_cache against the C++ library as the CLI runs it
(`kvcompact compact --dump-heads`: every head's K, V, Q and the library's result on them, written
by the CLI process), bit for bit; the t = T invariants against numpy's own attention; bad inputs."""
import json
import subprocess

import numpy as np
import pytest

import kvcompact
from conftest import CLI, STORIES, TINYSTORIES, require

RATIO = 0.25


def dump_heads(tmp, method):
    """Runs the CLI on a TinyStories context and returns (manifest, {(l, h): arrays})."""
    text = require(TINYSTORIES).read_text().split("\n\n")[0][:600]
    (tmp / "context.txt").write_text(text)
    r = subprocess.run([CLI, "compact", "--model", str(require(STORIES)), "--context", str(tmp / "context.txt"),
                        "--ratio", str(RATIO), "--method", method, "-o", str(tmp / "c.kvc"),
                        "--dump-heads", str(tmp / "heads"), "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp / "heads" / "manifest.json").read_text())
    heads = {}
    for h in manifest["heads"]:
        base = tmp / "heads" / f"L{h['layer']}H{h['kv_head']}_"
        heads[h["layer"], h["kv_head"]] = {k: np.load(f"{base}{k}.npy") for k in ["K", "V", "Q", "selected", "beta", "C2"]}
    return manifest, heads


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("method", ["am", "am:select=omp,beta=nnls-exact,c2=ridge:1e-4"])
def test_compact_head_equals_cli_bit_for_bit(tmp, method):
    manifest, heads = dump_heads(tmp, method)
    assert len(heads) == 5 * 4
    kvcompact.set_threads(1)  # the CLI's --threads 1
    for (l, h), a in heads.items():
        C1, beta, C2, idx = kvcompact.compact_head(a["K"], a["V"], a["Q"], ratio=RATIO, method=method)
        T = a["K"].shape[0]
        assert len(idx) == kvcompact.kept_entries(RATIO, T) == a["selected"].shape[0], (l, h)
        assert np.array_equal(idx, a["selected"].astype(np.int64)), (l, h)
        assert same_bits(C1, a["K"][idx]), (l, h)
        assert same_bits(beta, a["beta"]), (l, h)
        assert same_bits(C2, a["C2"]), (l, h)
    # the same heads through the whole-cache entry point (heads in parallel)
    kvcompact.set_threads(2)
    L, H = 5, 4
    K = np.stack([np.stack([heads[l, h]["K"] for h in range(H)]) for l in range(L)])
    V = np.stack([np.stack([heads[l, h]["V"] for h in range(H)]) for l in range(L)])
    Q = np.stack([np.stack([heads[l, h]["Q"] for h in range(H)]) for l in range(L)])
    out = kvcompact.compact_cache(K, V, Q, ratio=RATIO, method=method)
    for l in range(L):
        for h in range(H):
            C1, beta, C2, idx = out[l][h]
            assert np.array_equal(idx, heads[l, h]["selected"]), (l, h)
            assert same_bits(beta, heads[l, h]["beta"]) and same_bits(C2, heads[l, h]["C2"]), (l, h)


def attention(Q, K, V, beta):
    """softmax(Q K^T / sqrt(d) + beta) V in float64."""
    Q, K, V, beta = (np.asarray(x, np.float64) for x in (Q, K, V, beta))
    s = Q @ K.T / np.sqrt(K.shape[1]) + beta
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ V


def random_head(T=48, n=96, d=16, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((T, d), dtype=np.float32), rng.standard_normal((T, d), dtype=np.float32),
            rng.standard_normal((n, d), dtype=np.float32))


def test_full_budget_reproduces_attention():
    K, V, Q = random_head()
    T = K.shape[0]
    full = attention(Q, K, V, np.zeros(T))
    # attn-nofit at t = T: the head itself, exactly
    C1, beta, C2, idx = kvcompact.compact_head(K, V, Q, t=T, method="attn-nofit")
    assert np.array_equal(idx, np.arange(T)) and same_bits(C1, K) and same_bits(C2, V)
    assert not beta.any()
    assert np.array_equal(attention(Q, C1, C2, beta), full)
    # am at ratio 1: every key kept, beta ~ 0 and the fitted C2 reproduce the output
    C1, beta, C2, idx = kvcompact.compact_head(K, V, Q, 1.0)
    assert np.array_equal(idx, np.arange(T)) and same_bits(C1, K)
    assert np.abs(beta).max() < 1e-4
    assert np.abs(attention(Q, C1, C2, beta) - full).max() < 1e-4


def test_am_beats_no_fit_at_ratio_quarter():
    K, V, Q = random_head(T=64, n=256)
    full = attention(Q, K, V, np.zeros(64))
    err = {}
    for m in ["am", "attn-nofit"]:
        C1, beta, C2, _ = kvcompact.compact_head(K, V, Q, ratio=0.25, method=m)
        err[m] = np.abs(attention(Q, C1, C2, beta) - full).mean()
    assert err["am"] < err["attn-nofit"], err


def test_inputs_converted_not_refused():
    K, V, Q = random_head()
    want = kvcompact.compact_head(K, V, Q, ratio=0.5)
    Kf = np.asfortranarray(K)                       # non-contiguous rows
    V64 = V.astype(np.float64)                      # float64 (exact in float32)
    Qs = np.repeat(Q, 2, axis=1)[:, ::2]            # strided view
    assert not Kf.flags.c_contiguous and not Qs.flags.c_contiguous
    for got in [kvcompact.compact_head(Kf, V64, Qs, ratio=0.5),
                kvcompact.compact_head(K.tolist(), V.tolist(), Q.tolist(), ratio=0.5)]:
        for a, b in zip(got, want):
            assert np.array_equal(a, b)
    assert got[0].dtype == np.float32 and got[3].dtype == np.int64


def test_options_are_spec_settings():
    K, V, Q = random_head()
    a = kvcompact.compact_head(K, V, Q, ratio=0.25, method="am", select="omp", c2=("ridge", 1e-4))
    b = kvcompact.compact_head(K, V, Q, ratio=0.25, method="am:select=omp,c2=ridge:1e-4")
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    assert kvcompact.canonical_method("am", iters=2) == "am"  # the default
    assert "am" in kvcompact.method_help()


def test_bad_inputs_name_argument_and_shapes():
    K, V, Q = random_head(T=5, n=7, d=8)
    cases = [
        (dict(K=K[0]), "K: expected a 2-d array [T, head_dim], got shape (8,)"),
        (dict(V=V[:4]), "V: shape (4, 8) differs from K's (5, 8)"),
        (dict(Q=Q[:, :4]), "Q: shape (7, 4) has head_dim 4, K (5, 8) has 8"),
        (dict(K=np.where(np.arange(8) == 3, np.nan, K)), "K: non-finite value (NaN or Inf) at flat index 3 of shape (5, 8)"),
        (dict(K="keys"), "K: cannot be read as a float32 array [T, head_dim] (got str: ValueError: could not convert"),
        (dict(ratio=1.5), "ratio: 1.500000 is outside [0, 1]"),
        (dict(ratio=float("nan")), "is outside [0, 1]"),
        (dict(ratio=None, t=6), "t: 6 is outside [0, T] with T = 5"),
        (dict(ratio=0.5, t=2), "give exactly one of ratio"),
        (dict(ratio=None), "give exactly one of ratio"),
    ]
    for change, message in cases:
        args = dict(K=K, V=V, Q=Q, ratio=0.5) | change
        with pytest.raises(ValueError) as e:
            kvcompact.compact_head(**args)
        assert message in str(e.value), (change, str(e.value))
    with pytest.raises(kvcompact.Error) as e:  # the library's own message, as a ValueError too
        kvcompact.compact_head(K, V, Q, 0.5, method="am:select=nope")
    assert isinstance(e.value, ValueError) and isinstance(e.value, RuntimeError) and "nope" in str(e.value)
    with pytest.raises(kvcompact.Error, match="tova"):  # layer-scoped: compact_cache only
        kvcompact.compact_head(K, V, Q, 0.5, method="tova", context_queries=np.zeros((5, 8), np.float32))
    with pytest.raises(ValueError, match=r"budgets: 3 entries, need n_layers \* n_kv_heads = 2"):
        kvcompact.compact_cache(K[None, None].repeat(2, 0), V[None, None].repeat(2, 0), Q[None, None].repeat(2, 0),
                                budgets=[1, 2, 3])


def test_torch_tensors_through_the_buffer_protocol():
    import torch  # in .venv (scripts/requirements-ref.txt); a missing one fails the test
    K, V, Q = random_head()
    want = kvcompact.compact_head(K, V, Q, ratio=0.25)
    tK, tV, tQ = torch.from_numpy(K), torch.from_numpy(V), torch.from_numpy(Q)
    for got in [kvcompact.compact_head(tK, tV, tQ, ratio=0.25),
                kvcompact.compact_head(tK.T.contiguous().T, tV.double(), tQ, ratio=0.25)]:
        for a, b in zip(got, want):
            assert np.array_equal(a, b)
    with pytest.raises(ValueError, match=r"^K: its DLPack export cannot be read on the CPU \(BufferError: .*require gradient"):
        kvcompact.compact_head(tK.clone().requires_grad_(), tV, tQ, ratio=0.25)


def test_compact_cache_budgets_equal_per_head_calls():
    L, H, T, n, d = 2, 3, 40, 64, 8
    rng = np.random.default_rng(1)
    K, V = rng.standard_normal((2, L, H, T, d), dtype=np.float32)
    Q = rng.standard_normal((L, H, n, d), dtype=np.float32)
    budgets = [int(b) for b in rng.integers(0, T + 1, L * H)]
    out = kvcompact.compact_cache(K, V, Q, budgets=budgets)
    for l in range(L):
        for h in range(H):
            want = kvcompact.compact_head(K[l, h], V[l, h], Q[l, h], t=budgets[l * H + h])
            assert len(out[l][h][3]) == budgets[l * H + h]
            for a, b in zip(out[l][h], want):
                assert same_bits(a, b) if a.dtype == np.float32 else np.array_equal(a, b), (l, h)


def test_dlpack_exporters_are_read_without_numpy_conversion():
    """An object that only exports DLPack (no __array__, no buffer) is read through
    numpy.from_dlpack and gives the numpy array's result; a torch tensor that requires grad is
    refused naming the argument (test_torch_tensors_through_the_buffer_protocol)."""
    class DLPackOnly:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    rng = np.random.default_rng(5)
    K, V = rng.standard_normal((2, 64, 8), dtype=np.float32)
    Q = rng.standard_normal((96, 8), dtype=np.float32)
    want = kvcompact.compact_head(K, V, Q, ratio=0.25)
    got = kvcompact.compact_head(DLPackOnly(K), DLPackOnly(V), DLPackOnly(Q), ratio=0.25)
    for w, g in zip(want, got):
        assert np.array_equal(w, g)


METHODS = ["am", "random", "recent", "attn-nofit", "snapkv", "streaming", "h2o", "pyramidkv", "tova", "observed",
           "expected", "adakv", "knorm", "keydiff"]


@pytest.mark.parametrize("method", METHODS)
def test_needs_context_queries_says_what_compaction_asks_for(method):
    """The flag hf.py reads equals the library's behaviour: compacting without context_queries fails
    naming them exactly when the flag is set, and succeeds once they are given."""
    rng = np.random.default_rng(3)
    K = rng.standard_normal((1, 1, 16, 8)).astype(np.float32)
    V = rng.standard_normal((1, 1, 16, 8)).astype(np.float32)
    Q = rng.standard_normal((1, 1, 32, 8)).astype(np.float32)
    needs = kvcompact.needs_context_queries(method)
    assert isinstance(needs, bool)
    assert isinstance(kvcompact.needs_reference_queries(method), bool)
    if needs:
        with pytest.raises(kvcompact.Error, match="context's own queries"):
            kvcompact.compact_cache(K, V, Q, ratio=0.5, method=method)
        try:
            res = kvcompact.compact_cache(K, V, Q, ratio=0.5, method=method, context_queries=K.copy())
        except kvcompact.Error as e:  # e.g. expected attention also needs the model's RoPE
            assert "context's own queries" not in str(e)
            return
    else:
        res = kvcompact.compact_cache(K, V, Q, ratio=0.5, method=method)
    assert res[0][0][0].shape == (8, 8)


def test_needs_queries_flags_for_known_methods_and_bad_spec():
    assert kvcompact.needs_reference_queries("am") and not kvcompact.needs_context_queries("am")
    assert kvcompact.needs_context_queries("snapkv") and not kvcompact.needs_reference_queries("snapkv")
    assert not kvcompact.needs_context_queries("streaming") and not kvcompact.needs_reference_queries("random")
    with pytest.raises(kvcompact.Error):
        kvcompact.needs_context_queries("no-such-method")
