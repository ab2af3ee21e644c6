"""Reference dequantization of ggml weight types by gguf-py (gguf.quants, an independent numpy
implementation of ggml's block formats), for tests/quant_types_test.cpp.

  gguf_dequant.py random OUTDIR SEED
      For every type gguf-py can dequantize (F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K)
      writes OUTDIR/<case>.q (the stored bytes, ROWS x COLS elements) and OUTDIR/<case>.f32
      (gguf.quants.dequantize of those bytes, float32 little-endian). Cases "<TYPE>-quant": random
      rows encoded by gguf.quants.quantize (types it can quantize); "<TYPE>-bytes": random bytes
      with finite random f16 scales (block types, including the K-quants gguf-py cannot quantize).
  gguf_dequant.py raw OUTDIR CASE:TYPE:COLS ...
      For each case, reads OUTDIR/<CASE>.q (rows of COLS elements of ggml type TYPE, e.g. bytes
      of a real tensor) and writes OUTDIR/<CASE>.f32 = gguf.quants.dequantize of them.
  gguf_dequant.py tensors GGUF
      Lists the tensors of GGUF as gguf.GGUFReader reads them.
Output, one line per case or tensor:
  random, raw: <case> <ggml type name> <rows> <cols>
  tensors:     <name> <ggml type name> <absolute file offset of the data> <ne0> [<ne1> ...]
"""
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

ROWS, COLS = 8, 512

# Byte offsets of the f16 scale fields inside one block (ggml-common.h), kept finite in random bytes.
SCALE_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTIZABLE = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def random_cases(outdir, seed):
    rng = np.random.default_rng(seed)
    for qt in QUANTIZABLE:
        # Rows with different scales and offsets per 32-block, one constant block, one zero block.
        x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        x *= np.repeat(rng.uniform(0.01, 3.0, (ROWS, COLS // 32)), 32, axis=1).astype(np.float32)
        x += np.repeat(rng.uniform(-1, 1, (ROWS, COLS // 32)), 32, axis=1).astype(np.float32)
        x[1, 32:64] = 0.75
        x[2, 64:96] = 0.0
        q = np.ascontiguousarray(quantize(x, qt)).view(np.uint8).reshape(ROWS, -1)
        emit(outdir, f"{qt.name}-quant", qt, q)
    for qt, fields in SCALE_FIELDS.items():
        block, size = GGML_QUANT_SIZES[qt]
        nb = ROWS * COLS // block
        q = rng.integers(0, 256, (nb, size), dtype=np.uint8)
        for off in fields:
            s = rng.uniform(1e-4, 0.5, nb) * rng.choice([-1.0, 1.0], nb)
            s[0] = 3e-6  # an f16 subnormal
            q[:, off:off + 2] = s.astype(np.float16).view(np.uint8).reshape(nb, 2)
        emit(outdir, f"{qt.name}-bytes", qt, q.reshape(ROWS, -1))


def emit(outdir, case, qt, q):
    y = np.asarray(dequantize(q, qt), dtype=np.float32).reshape(ROWS, COLS)
    q.tofile(f"{outdir}/{case}.q")
    y.astype("<f4").tofile(f"{outdir}/{case}.f32")
    print(case, qt.name, ROWS, COLS)


def raw_cases(outdir, specs):
    for spec in specs:
        case, type_name, cols = spec.split(":")
        qt, cols = T[type_name], int(cols)
        block, size = GGML_QUANT_SIZES[qt]
        q = np.fromfile(f"{outdir}/{case}.q", dtype=np.uint8)
        rows = q.size // (cols // block * size)
        y = np.asarray(dequantize(q.reshape(rows, -1), qt), dtype=np.float32).reshape(rows, cols)
        y.astype("<f4").tofile(f"{outdir}/{case}.f32")
        print(case, qt.name, rows, cols)


def list_tensors(path):
    for t in GGUFReader(path).tensors:
        print(t.name, t.tensor_type.name, t.data_offset, *[int(d) for d in t.shape])


def main():
    if sys.argv[1] == "random":
        random_cases(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "raw":
        raw_cases(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "tensors":
        list_tensors(sys.argv[2])
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")


if __name__ == "__main__":
    main()
