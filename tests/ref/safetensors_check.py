"""What the Rust safetensors library (PyPI `safetensors`, the reader transformers uses) makes of
each file, for tests/safetensors_test.cpp.

Usage: safetensors_check.py FILE...
Output (stdout, JSON): {"version": V, "files": {FILE: {"ok": true, "metadata": {...} | null,
                         "tensors": {NAME: {"dtype": D, "shape": [...], "data_hex": HEX}}}
                        | {"ok": false, "error": MESSAGE}}}
"""
import json
import sys

import safetensors


def check(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
        tensors = safetensors.deserialize(data)  # parses and validates the header, as safe_open does
        with safetensors.safe_open(path, framework="numpy") as f:
            metadata = f.metadata()
            names = list(f.keys())
        out = {}
        for name, info in tensors:
            out[name] = {"dtype": info["dtype"].upper() if isinstance(info["dtype"], str) else str(info["dtype"]),
                         "shape": list(info["shape"]), "data_hex": bytes(info["data"]).hex()}
        if sorted(out) != sorted(names):
            raise RuntimeError("deserialize and safe_open disagree on the tensor names")
        return {"ok": True, "metadata": metadata, "tensors": out}
    except Exception as e:  # noqa: BLE001 - the library's verdict is what is reported
        return {"ok": False, "error": (str(e).splitlines() or [type(e).__name__])[0]}


def main():
    json.dump({"version": safetensors.__version__, "files": {p: check(p) for p in sys.argv[1:]}}, sys.stdout)


if __name__ == "__main__":
    main()
