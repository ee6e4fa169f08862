"""matmul of this checkout against an older version of the package (importable as
autokernel_before: its own pick and kernels; docs/launch.md has the renaming step), side by
side with torch, GPU time; every output checked against a float32 reference.

    python3 docs/runs/kernels/c_pointer/probe.py SHAPES.csv OUT.jsonl TIME_BUDGET_S
"""
import sys, json
sys.path.insert(0, "benchmarks")  # run from the repository root
import torch
import autokernel_before
from select_sweep import input_sets, race_checked, shapes_within
from autokernel import matmul, best
from autokernel.plans import tma_runs
out = open(sys.argv[2], "w")
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    sets = input_sets(p, 1000)
    act = None if p.activation == "none" else p.activation
    a0, b0, _, o0 = sets[0]
    new = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, a0.device, tma=tma_runs(a0, b0, o0), layout=p.layout)
    rows = [{"label": "before"}, {"label": "now", "pick": new.config.short()}]
    runs = [(rows[0], lambda a, b, bias, out=None: autokernel_before.matmul(a, b, bias, act, out=out)),
            (rows[1], lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out))]
    torch_ms = race_checked(p, runs, sets)
    rec = {**p.to_dict(), "torch_ms": torch_ms, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    b, n = rows[0].get("gpu_ms"), rows[1].get("gpu_ms")
    print(p.m, p.n, p.k, p.layout, new.config.short(), "torch %.1f before %s now %s %s" % (torch_ms * 1e3, b and round(b * 1e3, 1), n and round(n * 1e3, 1), rows[1]["status"]), flush=True)
