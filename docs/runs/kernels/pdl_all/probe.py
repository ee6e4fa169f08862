"""matmul with every GEMM kernel a programmatic dependent launch against the package before
(autokernel_before), side by side with torch, GPU time; back to back, and with a small torch
kernel between calls (a predecessor that does not let ours start early). Every output checked.
    python3 docs/runs/kernels/pdl_all/probe.py SHAPES.csv OUT.jsonl BUDGET_S"""
import sys, json
sys.path.insert(0, "benchmarks")
import torch
import autokernel_before
from select_sweep import input_sets, race_checked, shapes_within
from autokernel import matmul, best
from autokernel.plans import tma_runs

gap = torch.zeros(1, device="cuda")
out = open(sys.argv[2], "w")
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    sets = input_sets(p, 1000)
    act = None if p.activation == "none" else p.activation
    a0, b0, _, o0 = sets[0]
    pick = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, a0.device, tma=tma_runs(a0, b0, o0), layout=p.layout).config.short()
    rows = [{"label": "before"}, {"label": "now", "pick": pick}, {"label": "before+gap"}, {"label": "now+gap"},
            {"label": "torch+gap"}]

    def torch_ref(a, b, bias, out=None):
        y = torch.addmm(bias, a, b) if bias is not None else torch.mm(a, b)
        if act == "relu": y = torch.relu(y)
        elif act == "gelu_tanh": y = torch.nn.functional.gelu(y, approximate="tanh")
        elif act == "gelu": y = torch.nn.functional.gelu(y)
        elif act == "silu": y = torch.nn.functional.silu(y)
        return y

    def g(fn):
        def run(a, b, bias, out=None):
            gap.add_(1.0)
            return fn(a, b, bias, out=out)
        return run
    before = lambda a, b, bias, out=None: autokernel_before.matmul(a, b, bias, act, out=out)
    now = lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out)
    runs = [(rows[0], before), (rows[1], now), (rows[2], g(before)), (rows[3], g(now)), (rows[4], g(torch_ref))]
    torch_ms = race_checked(p, runs, sets)
    rec = {**p.to_dict(), "torch_ms": torch_ms, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    t = {r["label"]: r.get("gpu_ms", float("nan")) * 1e3 for r in rows}
    print(p.m, p.n, p.k, p.dtype, p.activation, pick, "torch %.1f before %.1f now %.1f | gap: torch %.1f before %.1f now %.1f %s" % (
        torch_ms * 1e3, t["before"], t["now"], t["torch+gap"], t["before+gap"], t["now+gap"],
        [r["status"] for r in rows if r["status"] != "success"]), flush=True)
