"""Residuals of the shipped model (log of predicted over measured GPU time) per config on the skinny
problems (33 <= M <= 256) of the held-out fresh draws check_random_h100_22 to _27 (CPU).
Usage: python3 docs/runs/select/skinny_residuals.py"""
import collections
import math
import sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel import select  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402
from autokernel.records import torch_dtype  # noqa: E402
from autokernel.userfiles import read_text  # noqa: E402

model = select.Model.from_json(read_text("autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"))
files = [f"benchmarks/results/check_random_h100_{i}.jsonl" for i in range(22, 28)]
res = collections.defaultdict(list)
for r in fs.read_rows(files):
    if r["config"] is None or not r.get("gpu_ms") or not 33 <= r["m"] <= 256:
        continue
    c = KernelConfig.from_dict(r["config"])
    dtype = torch_dtype(r["dtype"])
    tma = select.tma_aligned(r["m"], r["n"], r["k"], dtype, r["layout"])
    p = select.predict_us(model, c, r["m"], r["n"], r["k"], dtype, tma=tma, layout=r["layout"])
    if p is not None:
        res[c.short()].append(math.log(p / (r["gpu_ms"] * 1e3)))
for k, v in sorted(res.items(), key=lambda kv: -len(kv[1]))[:25]:
    v.sort()
    print(f"{k:36s} n={len(v):3d} mean {sum(v) / len(v):+.3f} median {v[len(v) // 2]:+.3f}")
