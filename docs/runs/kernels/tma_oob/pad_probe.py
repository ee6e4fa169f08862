"""Thin TMA tiles with A copied into a 64-row buffer (rows past M read, not zero-filled) against
the same tiles as they run, the pick and torch; GPU time side by side."""
import sys, json, time
sys.path.insert(0, "benchmarks")
import torch
from select_sweep import input_sets, race_checked, shapes_within
from autokernel import matmul, best
from autokernel.config import KernelConfig
from autokernel.plans import tma_runs
T = lambda bm, bn, bk, w, s, **k: KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **k)
cfgs = {"64x32x128 s8": T(64, 32, 128, 4, 8), "64x64x128 s6 fl": T(64, 64, 128, 4, 6, flatten=True),
        "64x128x128 s4 fl": T(64, 128, 128, 4, 4, flatten=True),
        "64x64x128 s6 fl sk": T(64, 64, 128, 4, 6, flatten=True, stream_k=True),
        "64x128x128 s4 sk": T(64, 128, 128, 4, 4, stream_k=True)}
out = open(sys.argv[2], "w")
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    sets = input_sets(p, 1000)
    pads = {}
    for a, *_ in sets:
        pads[a.data_ptr()] = torch.zeros(64, p.k, dtype=a.dtype, device=a.device)
    act = None if p.activation == "none" else p.activation
    found = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, sets[0][0].device,
                        tma=tma_runs(sets[0][0], sets[0][1], sets[0][3]), layout=p.layout)
    rows, runs = [], []
    def add(label, fn):
        r = {"label": label}; rows.append(r); runs.append((r, fn))
    add("pick " + found.config.short(), lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out))
    for lab, c in cfgs.items():
        add(lab, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, act, config=c, out=out))
        def padded(a, b, bias, out=None, c=c):
            pad = pads[a.data_ptr()]
            pad[:a.shape[0]].copy_(a)
            return matmul(pad, b, bias, act, config=c)[:a.shape[0]]
        add(lab + " pad", padded)
    torch_ms = race_checked(p, runs, sets)
    rec = {**p.to_dict(), "torch_ms": torch_ms, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    print(p.m, p.n, p.k, "torch %.1f" % (torch_ms * 1e3), " ".join("%s=%.1f" % (r["label"], r.get("gpu_ms", float("nan")) * 1e3) for r in rows), flush=True)
