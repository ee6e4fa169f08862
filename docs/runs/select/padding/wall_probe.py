"""Padding's cost in wall time: matmul (operands copied into aligned rows inside each call)
against the same problem launched on the operands as they are with the config matmul would
pick for them (the path before the copies), and torch; GPU time (race) and wall time
(wall_race: eager calls back to back), side by side; outputs checked.
    PYTHONPATH=$PYTHONPATH:DIR python3 docs/runs/select/padding/wall_probe.py SHAPES.csv OUT.jsonl BUDGET_S
(DIR holds autokernel_before, the package before the change, made as docs/launch.md says.)"""
import sys, json
sys.path.insert(0, "benchmarks")
import torch
from select_sweep import input_sets, race_checked, shapes_within, _call
from autokernel import matmul, best, timing
from autokernel.plans import tma_runs, Padding
import autokernel_before
out = open(sys.argv[2], "w")
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    sets = input_sets(p, 1000)
    act = None if p.activation == "none" else p.activation
    a0, b0, _, o0 = sets[0]
    pad = Padding.of(a0, b0, p.m, p.n, p.k)
    as_is = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, a0.device,
                        tma=tma_runs(a0, b0, o0), layout=p.layout).config
    rows = [{"label": "copied", "pad": [pad.a, pad.b] if pad else None}, {"label": "as_is", "pick": as_is.short()},
            {"label": "before"}]
    fns = [lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out),
           lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out, config=as_is),
           lambda a, b, bias, out=None: autokernel_before.matmul(a, b, bias, act, out=out)]
    torch_ms = race_checked(p, list(zip(rows, fns)), sets)
    if all(r["status"] == "success" for r in rows):
        if p.activation == "none" and not p.bias:
            tfn = lambda a, b, bias, out: torch.mm(a, b, out=out)
        else:
            from autokernel.evaluate import torch_function
            eager = torch_function(p)
            tfn = lambda a, b, bias, out: eager(a, b, bias)
        wall = timing.wall_race([_call(sets, f) for f in fns] + [_call(sets, tfn)])
        for r, w in zip(rows, wall):
            r["wall_ms"] = w
        torch_wall = wall[-1]
    else:
        torch_wall = None
    rec = {**p.to_dict(), "torch_ms": torch_ms, "torch_wall_ms": torch_wall, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    g = [r.get("gpu_ms", float("nan")) * 1e3 for r in rows]
    w = [r.get("wall_ms", float("nan")) * 1e3 for r in rows]
    print(p.m, p.n, p.k, p.layout, rows[0]["pad"], "gpu torch %.1f copied %.1f as_is %.1f before %.1f | wall torch %.1f copied %.1f as_is %.1f before %.1f %s" % (
        torch_ms * 1e3, g[0], g[1], g[2], (torch_wall or float("nan")) * 1e3, w[0], w[1], w[2],
        [r["status"] for r in rows if r["status"] != "success"]), flush=True)
