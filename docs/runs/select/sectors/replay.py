"""Replay of a sweep of problems whose rows split 32-byte sectors (CPU, no GPU): for each
problem, the pick recorded when it was swept ("old") and the pick of this checkout's selector
among the configs the sweep measured ("new"), by their measured GPU times; geomeans of the
share of the best measured config each reaches and of cuBLAS / pick, by rows.

    python3 docs/runs/select/sectors/replay.py docs/runs/select/sectors/sweep_seed3092_h200.jsonl.gz
"""
import collections, gzip, json, math, sys

import torch

from autokernel import best
from autokernel.config import KernelConfig

rows = [json.loads(line) for f in sys.argv[1:] for line in (gzip.open if f.endswith(".gz") else open)(f, "rt")]
problems = collections.defaultdict(list)
for r in rows:
    problems[(r["m"], r["n"], r["k"], r["dtype"], r["activation"], r["bias"], r["layout"])].append(r)
geo = lambda v: math.exp(sum(map(math.log, v)) / len(v))
bands = collections.defaultdict(list)
for (m, n, k, dt, act, bias, layout), rs in problems.items():
    cublas = next(r["gpu_ms"] for r in rs if r["label"] == "cublas")
    measured = {KernelConfig(**r["config"]): r["gpu_ms"] for r in rs if r["label"] != "cublas" and r.get("gpu_ms")}
    old = next(r["gpu_ms"] for r in rs if "pick" in r["roles"])
    new = measured[best.pick(m, n, k, getattr(torch, dt), act, bias, layout, device="nvidia-h200",
                             fits=lambda c: c in measured).config]
    fastest = min(measured.values())
    bands["1-64" if m <= 64 else "65-1024" if m <= 1024 else ">1024"].append((fastest / old, fastest / new,
                                                                              cublas / old, cublas / new))
bands["all"] = [x for v in list(bands.values()) for x in v]
for band, v in bands.items():
    print(f"{band:8} {len(v):3} pick/best {geo([x[0] for x in v]):.3f} -> {geo([x[1] for x in v]):.3f}   "
          f"cuBLAS/pick {geo([x[2] for x in v]):.3f} -> {geo([x[3] for x in v]):.3f}")
