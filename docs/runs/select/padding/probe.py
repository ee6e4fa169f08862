"""Operands whose rows take no 16-byte vectors, copied first into buffers whose rows do (the
row stride padded to 16 bytes, the logical shape kept), then matmul, against matmul as it is
and torch, side by side, GPU time (the copies inside the timed call); every output checked.
    python3 docs/runs/select/padding/probe.py SHAPES.csv OUT.jsonl BUDGET_S"""
import sys, json
sys.path.insert(0, "benchmarks")
import torch
from select_sweep import input_sets, race_checked, shapes_within
from autokernel import matmul


def padded(x):
    """x (2-D, one unit stride) in a fresh buffer whose leading stride is a multiple of 16 bytes."""
    per = 16 // x.element_size()
    if x.stride(1) == 1 and x.shape[1] > 1 or x.shape[0] == 1:
        rows, cols = x.shape
        if (x.stride(0) * x.element_size()) % 16 == 0 and x.data_ptr() % 16 == 0:
            return x
        buf = torch.empty(rows, -(-cols // per) * per, dtype=x.dtype, device=x.device)
        view = buf[:, :cols]
        view.copy_(x)
        return view
    return padded(x.t()).t()


out = open(sys.argv[2], "w")
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    sets = input_sets(p, 1000)
    act = None if p.activation == "none" else p.activation
    rows = [{"label": "matmul"}, {"label": "padded"}]
    runs = [(rows[0], lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out)),
            (rows[1], lambda a, b, bias, out=None: matmul(padded(a), padded(b), bias, act, out=out))]
    torch_ms = race_checked(p, runs, sets)
    rec = {**p.to_dict(), "torch_ms": torch_ms, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    t = {r["label"]: r.get("gpu_ms", float("nan")) * 1e3 for r in rows}
    print(p.m, p.n, p.k, p.dtype, p.layout, "torch %.1f matmul %.1f padded %.1f %s" % (
        torch_ms * 1e3, t["matmul"], t["padded"], [r["status"] for r in rows if r["status"] != "success"]), flush=True)
