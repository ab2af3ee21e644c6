"""kvcompact.Model against the kvcompact CLI (same library, another process) on stories260K and
against Hugging Face transformers (tests/ref/hf_gguf_forward.py, GGUF dequantized to float32) on
SmolLM2-135M-Instruct Q4_1, with the tolerance of tests/smollm2_reference_test.cpp."""
import json
import subprocess

import numpy as np
import pytest

import kvcompact
from conftest import CLI, PYTHON, ROOT, SMOLLM2, STORIES, TINYSTORIES, cli_json, require


def test_config_and_tokenizer_equal_cli(stories):
    info = cli_json("info", "--model", str(STORIES))
    assert set(stories.config) == set(info) | {"adds_bos"}
    for k in info:
        assert stories.config[k] == info[k], k
    text = "Lily saw a cat. It was big and soft!"
    tok = cli_json("tokenize", "--model", str(STORIES), "--text", text)
    ids = stories.tokenize(text)
    assert ids == tok["ids"]
    assert stories.detokenize(ids) == text


def test_logits_nll_generate_equal_cli(stories):
    kvcompact.set_threads(1)
    prompt = "Once upon a time"
    ids = stories.tokenize(prompt)
    logits = stories.logits(ids)
    assert logits.shape == (len(ids), stories.config["vocab_size"]) and logits.dtype == np.float32
    top = cli_json("logits", "--model", str(STORIES), "--prompt", prompt, "--top", "5")["top"]
    last = stories.logits(ids, last=True)
    assert [t["id"] for t in top] == list(np.argsort(-last, kind="stable")[:5])
    assert [np.float32(t["logit"]) for t in top] == [last[t["id"]] for t in top]  # the same floats
    assert np.abs(logits[-1] - last).max() <= 1e-5 * np.abs(last).max()  # the full forward's last row

    data = require(TINYSTORIES).read_bytes().decode()
    ids = stories.tokenize(data)[:512]
    ppl = cli_json("ppl", "--model", str(STORIES), "--data", str(TINYSTORIES), "--max-tokens", "511")
    assert stories.nll(ids) == pytest.approx(ppl["nll"], rel=1e-12, abs=0)

    gen = cli_json("generate", "--model", str(STORIES), "--temperature", "0", "--steps", "60", "--prompt", prompt)
    r = stories.generate(prompt, steps=60)
    assert r["text"] == gen["text"] and r["generated"] == gen["generated"]
    kvcompact.set_threads(2)


def test_logits_equal_transformers_smollm2(tmp):
    model = kvcompact.Model(str(require(SMOLLM2)))
    ids = model.tokenize("The capital of France is Paris. The capital of Italy is Rome. The capital of Spain is")
    assert len(ids) > 16
    logits = model.logits(ids)
    (tmp / "req.json").write_text(json.dumps({"logits": [{"ids": ids, "positions": list(range(len(ids)))}]}))
    r = subprocess.run([PYTHON, str(ROOT / "tests" / "ref" / "hf_gguf_forward.py"), str(SMOLLM2),
                        str(tmp / "req.json"), str(tmp / "hf")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    V = json.loads(r.stdout)["vocab"]
    assert V == model.config["vocab_size"]
    want = np.fromfile(tmp / "hf.logits.f32", dtype=np.float32).reshape(len(ids), V)
    scale = np.abs(want).max(axis=1)
    diff = np.abs(logits.astype(np.float64) - want).max(axis=1)
    print(f"max |logit diff| / max |logit| = {np.max(diff / scale):.3g}")
    assert np.all(diff <= 1e-3 * scale), np.max(diff / scale)
    assert np.array_equal(logits.argmax(axis=1), want.argmax(axis=1))


def test_model_errors():
    with pytest.raises(kvcompact.Error, match="no_such_model.gguf"):
        kvcompact.Model("/nonexistent/no_such_model.gguf")
    m = kvcompact.Model(str(require(STORIES)))
    with pytest.raises(kvcompact.Error, match="512"):
        m.logits([1, 512])
    with pytest.raises(ValueError, match="ids: empty"):
        m.logits([])
    with pytest.raises(ValueError, match=r"ids: 1 ids \(need at least 2\)"):
        m.nll([1])
