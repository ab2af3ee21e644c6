"""Attention diagnostics of a compacted cache (`kvcompact compact --diagnostics`, Model.compact(
diagnostics=True)) against the formulas of the paper's evaluate_compaction (adamzweiger/compaction,
compaction/algorithms/base.py) computed here in numpy float64 from the heads `--dump-heads` writes
(K, V, the reference queries Q) and the compacted heads of the .kvc file. stories260K, 1 thread."""
import json
import subprocess

import numpy as np
import pytest

import kvcompact
from conftest import CLI, STORIES, TINYSTORIES, require


def paper_metrics(K, V, Q, C1, beta, C2):
    """evaluate_compaction's per-query metrics, reduced as kvcompact reports them."""
    d = K.shape[1]
    s = 1.0 / np.sqrt(d)
    K, V, Q, C1, beta, C2 = (np.asarray(a, np.float64) for a in (K, V, Q, C1, beta, C2))
    S = Q @ K.T * s
    lse = np.logaddexp.reduce(S, axis=1)
    y = np.exp(S - lse[:, None]) @ V
    Sc = Q @ C1.T * s + beta
    lse_c = np.logaddexp.reduce(Sc, axis=1)
    yc = np.exp(Sc - lse_c[:, None]) @ C2
    rel = np.linalg.norm(yc - y, axis=1) / (np.linalg.norm(y, axis=1) + 1e-10)
    cos = (y * yc).sum(1) / np.maximum(np.linalg.norm(y, axis=1) * np.linalg.norm(yc, axis=1), 1e-8)
    mass = np.abs(np.expm1(lse_c - lse))
    return {"rel_l2_mean": rel.mean(), "rel_l2_max": rel.max(), "cosine_mean": cos.mean(), "cosine_min": cos.min(),
            "mass_err_mean": mass.mean(), "mass_err_max": mass.max(), "n_queries": len(Q)}


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    d = tmp_path_factory.mktemp("diag")
    text = require(TINYSTORIES).read_text().split("\n\n")[3][:700]
    (d / "ctx.txt").write_text(text)
    r = subprocess.run([CLI, "compact", "--model", str(STORIES), "--context", str(d / "ctx.txt"), "--ratio", "0.25",
                        "--method", "am", "-o", str(d / "c.kvc"), "--dump-heads", str(d / "dump"),
                        "--diagnostics", str(d / "diag.json"), "--threads", "1"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "attention-mass error" in r.stdout
    return d, text


def test_cli_diagnostics_equal_the_papers_formulas(compacted):
    d, _ = compacted
    diag = json.loads((d / "diag.json").read_text())
    m = kvcompact.Model(str(STORIES))
    c = m.load_cache(str(d / "c.kvc"))
    assert len(diag["heads"]) == c.n_layers * c.n_kv_heads
    for row in diag["heads"]:
        l, h = row["layer"], row["kv_head"]
        base = str(d / "dump" / f"L{l}H{h}_")
        K, V, Q = (np.load(base + x + ".npy") for x in "KVQ")
        C1, beta, C2 = c.head(l, h)
        want = paper_metrics(K, V, Q, C1, beta, C2)
        assert row["t"] == len(beta) and row["T"] == len(K)
        for k, v in want.items():
            assert row["fit"][k] == pytest.approx(v, rel=1e-4, abs=1e-5), (row["name"], k)
        group = m.config["n_heads"] // m.config["n_kv_heads"]
        assert row["heldout"]["n_queries"] == len(K) * group  # every query head of the group, every position
    for k in ("rel_l2_mean", "cosine_mean", "mass_err_mean"):
        assert diag["mean"]["fit"][k] == pytest.approx(np.mean([r["fit"][k] for r in diag["heads"]]), rel=1e-12)


def test_python_diagnostics_equal_the_cli_and_a_whole_cache_is_perfect(compacted):
    d, text = compacted
    kvcompact.set_threads(1)
    m = kvcompact.Model(str(STORIES))
    c = m.compact(text, ratio=0.25, method="am", diagnostics=True)
    cli = json.loads((d / "diag.json").read_text())
    assert c.diagnostics["heads"] == cli["heads"] and c.diagnostics["mean"] == cli["mean"]
    assert m.compact(text, ratio=0.25).diagnostics is None
    whole = m.compact(text, ratio=1.0, method="recent", diagnostics=True).diagnostics
    for row in whole["heads"]:
        for part in ("fit", "heldout"):
            assert row[part]["rel_l2_max"] < 1e-4 and row[part]["mass_err_max"] < 1e-4  # float32 GEMMs
            assert row[part]["cosine_min"] > 1 - 1e-6
    kvcompact.set_threads(2)
