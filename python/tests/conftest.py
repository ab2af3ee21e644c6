"""Shared fixtures of the pytest suite (run by CTest's python_pytest, python/CMakeLists.txt, which
sets PYTHONPATH to the build's package and KVC_CLI / KVC_SHARED / KVC_MODELS / KVC_PYTHON /
KVC_TEST_TMP; defaults are the repository's build/ and folders for a run by hand)."""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("KVC_CLI", str(ROOT / "build" / "kvcompact"))
SHARED = Path(os.environ.get("KVC_SHARED", ROOT.parent / "shared"))
MODELS = Path(os.environ.get("KVC_MODELS", ROOT / "models"))
PYTHON = os.environ.get("KVC_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
TMP = Path(os.environ.get("KVC_TEST_TMP", ROOT / "build" / "test_tmp"))

STORIES = SHARED / "models" / "stories260K" / "stories260K.bin"
TINYSTORIES = SHARED / "data" / "tinystories" / "tinystories_val_head.txt"
SMOLLM2 = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"


def require(path: Path) -> Path:
    """The path, or a test failure (never a silent skip) when the real input is missing."""
    assert path.exists(), f"missing real input {path} (run scripts/setup.sh; see README)"
    return path


def cli_json(*args: str) -> dict:
    """Runs the kvcompact CLI with --json --threads 1 and returns its JSON object."""
    r = subprocess.run([CLI, *args, "--json", "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kvcompact {' '.join(args)}: {r.stderr}"
    return json.loads(r.stdout)


@pytest.fixture
def tmp() -> Path:
    """A scratch folder under KVC_TEST_TMP, unique per test (ctest runs processes in parallel)."""
    TMP.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="pytest_", dir=TMP))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def stories():
    import kvcompact

    return kvcompact.Model(str(require(STORIES)))


@pytest.fixture(scope="session")
def hf_smollm2():
    """transformers' SmolLM2-135M-Instruct from the same Q4_1 GGUF (dequantised to float32, eval
    mode, 1 thread), loaded once for the whole session (the load alone takes ~30 s). Each user
    gets it with the attention implementation it was loaded with (tests switch it)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    path = require(SMOLLM2)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    model._kvc_initial_attn = model.config._attn_implementation
    return model


def fresh_hf(model):
    """The session's transformers model with its attention implementation as loaded."""
    model.set_attn_implementation(model._kvc_initial_attn)
    return model
