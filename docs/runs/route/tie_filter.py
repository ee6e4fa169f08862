"""Which linear layers of a shapes CSV (its nt rows, as nn.Linear's: tokens M, out N, in K)
run differently under ``auto`` since a layer with a GEMM routed runs whole on torch where
cuBLAS ties on the others: before, whole only where all three GEMMs route (forward, dX, dW,
as ``autokernel explain --backward`` predicts them on the H200's model); now also where at
least one routes and cuBLAS is predicted faster, by less than the margin, on the others.
Prints the counts (before, after) and writes the changed rows. CPU:

    python3 docs/runs/route/tie_filter.py SHAPES.csv CHANGED.csv
"""
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

from autokernel.cli.explain import _explained, _layer_runs, _training_gemms  # noqa: E402
from autokernel.tuning.shapes import read_shapes  # noqa: E402

DEVICE = "NVIDIA H200"
RUNS = {"torch's linear": "whole", "autokernel, split": "split", "autokernel, Triton": "triton"}
rows = [p for p in read_shapes(sys.argv[1]) if p.layout == "nt" and p.dtype in ("float16", "bfloat16")]
changed, counts = [], {}
for p in rows:
    routes = [_explained(gemm, DEVICE, store_z, 1)["route"] for _, gemm, store_z in _training_gemms(p)]
    libraries = [r["library"] for r in routes]
    before = "whole" if all(lib == "cublas" for lib in libraries) else "split" if "cublas" in libraries else "triton"
    after = RUNS[_layer_runs(routes)[0]]
    counts[f"{before} -> {after}"] = counts.get(f"{before} -> {after}", 0) + 1
    if before != after:
        changed.append(p)
print(f"{len(rows)} layers: {counts}")
with open(sys.argv[2], "w") as f:
    f.write("M,N,K,dtype,activation,bias,layout\n")
    for p in changed:
        f.write(f"{p.m},{p.n},{p.k},{p.dtype},{p.activation},{str(p.bias).lower()},nt\n")
