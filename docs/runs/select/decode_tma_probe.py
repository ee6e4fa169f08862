"""Memory-bound tiles on the TMA kernel for thin problems, timed beside every selector
candidate that applies, the default, pick and previous configs and torch
(``select_sweep.sweep_problem`` with ``extra``). Rows in the sweep's format: fit data if the
tiles join the candidates. GPU time, timing.race.

Tile sets (``--tiles``):
- ``thin``: 64-row tiles with K steps of 128 and deep pipelines (TMA fills the rows past M
  with zeros without reading them, so a 64-row tile costs a thin problem no memory
  traffic), plain, flattened and stream-K;
- ``skinny``: the same idea one size up for 129-384 rows: 128-row tiles with K steps of
  128 and the deepest pipeline that fits, a 256-row tile with K steps of 64, and the
  ``thin`` 64-row tiles beside them.

    python3 docs/runs/select/decode_tma_probe.py SHAPES.csv OUT.jsonl [BUDGET_S [MAX_M]]
        [--min-m M] [--tiles thin|skinny]
As run on the H100:
- decode_probe_shapes.csv (random_shapes.py, seed 23428, M <= 128), budget 510, thin;
  record benchmarks/results/select_thin_tma_h100.jsonl.gz.
"""
import argparse, json, sys, time
sys.path.insert(0, "benchmarks")
from select_sweep import shapes_within, sweep_problem
from autokernel import runtime
from autokernel.config import KernelConfig

ap = argparse.ArgumentParser()
ap.add_argument("shapes")
ap.add_argument("out")
ap.add_argument("budget", nargs="?", type=float, default=400)
ap.add_argument("max_m", nargs="?", type=int, default=128)
ap.add_argument("--min-m", type=int, default=1)
ap.add_argument("--tiles", choices=("thin", "skinny"), default="thin")
args = ap.parse_args()


def tma(bm, bn, bk, s, w=4, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)


THIN = (
    tma(64, 64, 128, 6), tma(64, 128, 128, 4), tma(64, 32, 128, 8), tma(64, 128, 64, 6),
    tma(64, 64, 128, 6, flatten=True), tma(64, 128, 128, 4, flatten=True),
    tma(64, 64, 128, 6, stream_k=True), tma(64, 128, 128, 4, stream_k=True), tma(64, 32, 128, 8, stream_k=True),
)
SKINNY = (
    tma(128, 128, 128, 3, 8), tma(128, 128, 128, 3, 8, flatten=True), tma(128, 128, 128, 3, 8, stream_k=True),
    tma(128, 64, 128, 4), tma(128, 64, 128, 4, 8), tma(128, 64, 128, 4, flatten=True),
    tma(128, 64, 128, 4, stream_k=True), tma(128, 32, 128, 5),
    tma(256, 64, 64, 4, 8), tma(256, 64, 64, 4, 8, stream_k=True),
    tma(64, 128, 128, 4, flatten=True), tma(64, 64, 128, 6, flatten=True), tma(64, 32, 128, 8),
    tma(64, 128, 128, 4, stream_k=True), tma(64, 64, 128, 6, stream_k=True),
)
EXTRA = THIN if args.tiles == "thin" else SKINNY
new = {c.short() for c in EXTRA}
t0 = time.time()
limit = runtime.shared_memory_limit()
device = runtime.device_name()
with open(args.out, "w") as f:
    for i, p in enumerate(shapes_within(args.shapes, args.budget, t0)):
        if not args.min_m <= p.m <= args.max_m:
            continue
        rows = sweep_problem(p, limit, extra=EXTRA)
        for row in rows:
            f.write(json.dumps({**row, "device": device, "index": i}) + "\n")
        f.flush()
        ok = [r for r in rows if r.get("gpu_ms") and r["label"] != "cublas"]
        cub = next(r["gpu_ms"] for r in rows if r["label"] == "cublas")
        old = min((r for r in ok if r["label"] not in new), key=lambda r: r["gpu_ms"])
        fresh = [r for r in ok if r["label"] in new]
        pick = next(r for r in ok if "pick" in r["roles"])
        bad = [r["label"] for r in rows if r["status"] != "success"]
        line = f"{p.label():44s} torch/pick {cub / pick['gpu_ms']:.3f} torch/best-old {cub / old['gpu_ms']:.3f}"
        if fresh:
            b = min(fresh, key=lambda r: r["gpu_ms"])
            line += f" torch/best-new {cub / b['gpu_ms']:.3f} ({b['label']})"
        print(line + (f" FAILED {bad}" if bad else ""), flush=True)
