"""Replay (CPU): matmul's pick with the tuned entries of other shapes within 2^r of the problem in
each of M, N and K as candidates (best.MAX_RATIO_LOG2 = r; 2 shipped), for each r given.
    python3 docs/runs/select/replay_reach.py 2,1.5,1,0.6,0 SWEEP.jsonl ...     (docs/selector.md)"""
import sys, collections
sys.path.insert(0,"benchmarks")
import fit_selector as fs
from autokernel import select, best
from autokernel.userfiles import read_text
model = select.Model.from_json(read_text("autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"))
files = sys.argv[2:]
for reach in [float(x) for x in sys.argv[1].split(",")]:
    best.MAX_RATIO_LOG2 = reach
    res = []
    for path in files:
        rows = fs.read_rows([path]); by = collections.defaultdict(list)
        for r in rows: by[fs.shape_key(r)].append(r)
        for key, rs in by.items():
            pick, default, cub, choice = fs.pick_for(model, rs, dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z))
            b = min(r["gpu_ms"] for r in rs if r["config"] is not None and r.get("gpu_ms"))
            res.append((b/pick["gpu_ms"], default["gpu_ms"]/pick["gpu_ms"], choice.source.startswith("shipped")))
    print(f"reach 2^{reach}: n={len(res)} pick/best {fs.geomean(r[0] for r in res):.4f} >=0.90 {sum(r[0]>=0.9 for r in res)} losses {sum(r[1]<0.98 for r in res)} entry picks {sum(r[2] for r in res)} entry losses {sum(r[1]<0.98 and r[2] for r in res)}", flush=True)
