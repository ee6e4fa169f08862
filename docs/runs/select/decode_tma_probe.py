"""Memory-bound tiles on the TMA kernel for decode and skinny problems (M <= MAX_M): 64-row
tiles with K steps of 128 and deep pipelines (TMA fills the rows past M with zeros without
reading them, so a 64-row tile costs a thin problem no memory traffic), their flattened and
stream-K forms, timed beside every selector candidate that applies, the default, pick and
previous configs and torch (``select_sweep.sweep_problem`` with ``extra``). Rows in the
sweep's format: fit data if the tiles join the candidates. GPU time, timing.race.
    python3 docs/runs/select/decode_tma_probe.py SHAPES.csv OUT.jsonl [BUDGET_S [MAX_M]]   (MAX_M: 128)
As run on the H100: decode_probe_shapes.csv (random_shapes.py, seed 23428, M <= 128), budget 510;
record benchmarks/results/select_thin_tma_h100.jsonl.
"""
import json, sys, time
sys.path.insert(0, "benchmarks")
from select_sweep import sweep_problem
from autokernel import runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import KernelConfig
from autokernel.tuning.shapes import read_shapes

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 400
MAX_M = int(sys.argv[4]) if len(sys.argv) > 4 else 128


def tma(bm, bn, bk, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=4, num_stages=s, variant="tma", **kw)


EXTRA = (
    tma(64, 64, 128, 6), tma(64, 128, 128, 4), tma(64, 32, 128, 8), tma(64, 128, 64, 6),
    tma(64, 64, 128, 6, flatten=True), tma(64, 128, 128, 4, flatten=True),
    tma(64, 64, 128, 6, stream_k=True), tma(64, 128, 128, 4, stream_k=True), tma(64, 32, 128, 8, stream_k=True),
)
new = {c.short() for c in EXTRA}
cand = {c.short() for c in CANDIDATES}
t0 = time.time()
limit = runtime.shared_memory_limit()
device = runtime.device_name()
with open(out_path, "w") as f:
    for i, p in enumerate(read_shapes(shapes)):
        if p.m > MAX_M:
            continue
        if time.time() - t0 > budget:
            print("budget spent", flush=True)
            break
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
