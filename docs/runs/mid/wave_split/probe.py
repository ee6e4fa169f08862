"""A problem's whole waves of big tiles as one GEMM (rows [0, M1)) and the rows left as a second
GEMM with its own pick, two plain launches, against the pick and torch; GPU time side by side."""
import sys, json, math
sys.path.insert(0, "benchmarks")
import torch
from select_sweep import input_sets, race_checked, shapes_within
from autokernel import matmul, best
from autokernel.config import KernelConfig
from autokernel.plans import tma_runs
T = lambda bm, bn, bk, w, s, **k: KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **k)
BIG = {"128x256 s3 fl": T(128, 256, 64, 8, 3, flatten=True), "128x128 w4 s5 fl": T(128, 128, 64, 4, 5, flatten=True),
       "64x256 s4 fl": T(64, 256, 64, 4, 4, flatten=True), "128x128 w8 s4 fl": T(128, 128, 64, 8, 4, flatten=True)}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
out = open(sys.argv[2], "w")
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    sets = input_sets(p, 1000)
    act = None if p.activation == "none" else p.activation
    found = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, sets[0][0].device,
                        tma=tma_runs(sets[0][0], sets[0][1], sets[0][3]), layout=p.layout)
    rows, runs = [], []
    def add(label, fn, **info):
        r = {"label": label, **info}; rows.append(r); runs.append((r, fn))
    add("pick " + found.config.short(), lambda a, b, bias, out=None: matmul(a, b, bias, act, out=out))
    for lab, c in BIG.items():
        tn = -(-p.n // c.block_n); tm = -(-p.m // c.block_m)
        waves = tm * tn // SMS
        add(lab, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, act, config=c, out=out))
        for w in sorted({waves, waves + 1}):
            m1 = (w * SMS // tn) * c.block_m
            if w == 0 or m1 <= 0 or m1 >= p.m:
                continue
            tail = best.ranked(p.m - m1, p.n, p.k, p.torch_dtype, p.activation, p.bias, sets[0][0].device,
                               tma=True, layout=p.layout).config
            def split(a, b, bias, out=None, c=c, m1=m1):
                if out is None:
                    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
                matmul(a[:m1], b, bias, act, config=c, out=out[:m1])
                matmul(a[m1:], b, bias, act, out=out[m1:])
                return out
            add(f"{lab} split {m1}+{p.m - m1} ({tail.short()})", split, m1=m1, main_tiles=(m1 // c.block_m) * tn)
    torch_ms = race_checked(p, runs, sets)
    rec = {**p.to_dict(), "torch_ms": torch_ms, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    print(p.m, p.n, p.k, p.dtype, "torch %.1f" % (torch_ms * 1e3), " | ".join("%s=%.1f" % (r["label"], r.get("gpu_ms", float("nan")) * 1e3) for r in rows), flush=True)
