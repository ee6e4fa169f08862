"""Narrow-N GEMMs (M >> N): our kernels on C = A W^T against the swapped problem C^T = W A^T, cuBLAS beside
them (GPU time, timing.race; each output checked against a float32 product). Usage: swap_probe.py OUT.jsonl"""
import json, sys, math, torch
import autokernel
from autokernel.records import KernelConfig
from autokernel.timing import race

def cfg(bm, bn, w, s, variant="tma", fl=True):
    return KernelConfig(block_m=bm, block_n=bn, block_k=64, group_m=8, num_warps=w, num_stages=s, variant=variant, flatten=fl)
CFGS = {"128x128 w8 s4 fl": cfg(128,128,8,4), "128x128 w4 s5 fl": cfg(128,128,4,5), "128x256 w8 s3 fl": cfg(128,256,8,3),
        "256x128 w8 s3": cfg(256,128,8,3,fl=False), "64x256 w4 s4 fl": cfg(64,256,4,4)}
SHAPES = [(13462,576,18944,"bfloat16"),(9560,576,3584,"float16"),(10569,576,24064,"bfloat16"),(4487,512,4352,"bfloat16"),
          (7107,640,7296,"bfloat16"),(3363,640,13568,"float16"),(4543,640,1024,"float16"),(2562,896,2304,"bfloat16"),
          (4253,1024,1536,"bfloat16"),(7977,896,26624,"bfloat16"),(14536,640,1152,"float16"),(4734,512,512,"bfloat16"),
          (4096,4096,4096,"float16")]
out = open(sys.argv[1], "w")
for m, n, k, dt in SHAPES:
    dtype = getattr(torch, dt)
    a = torch.randn(m, k, device="cuda", dtype=dtype); w = torch.randn(n, k, device="cuda", dtype=dtype)
    ref = (a.float() @ w.float().t())
    fns, names = [], []
    def add(name, fn, check):
        try:
            r = check(); err = ((r.float() - ref).norm() / ref.norm()).item()
            if err > 2e-2: print("BAD", name, err); return
        except Exception as e:
            print("FAIL", name, type(e).__name__, str(e)[:200]); return
        fns.append(fn); names.append(name)
    add("cublas", lambda: torch.mm(a, w.t()), lambda: torch.mm(a, w.t()))
    add("cublas swap", lambda: torch.mm(w, a.t()), lambda: torch.mm(w, a.t()).t())
    add("pick", lambda: autokernel.matmul(a, w.t()), lambda: autokernel.matmul(a, w.t()))
    add("pick swap", lambda: autokernel.matmul(w, a.t()), lambda: autokernel.matmul(w, a.t()).t())
    for lab, c in CFGS.items():
        add(lab, lambda c=c: autokernel.matmul(a, w.t(), config=c), lambda c=c: autokernel.matmul(a, w.t(), config=c))
        add(lab + " swap", lambda c=c: autokernel.matmul(w, a.t(), config=c), lambda c=c: autokernel.matmul(w, a.t(), config=c).t())
    c_out = torch.empty(m, n, device="cuda", dtype=dtype)
    add("128x128 w8 s4 fl swap out=C.t()", lambda: autokernel.matmul(w, a.t(), config=CFGS["128x128 w8 s4 fl"], out=c_out.t()),
        lambda: (autokernel.matmul(w, a.t(), config=CFGS["128x128 w8 s4 fl"], out=c_out.t()), c_out)[1])
    add("swap + copy", lambda: autokernel.matmul(w, a.t(), config=CFGS["128x128 w8 s4 fl"]).t().contiguous(),
        lambda: autokernel.matmul(w, a.t(), config=CFGS["128x128 w8 s4 fl"]).t().contiguous())
    ms = race(fns)
    cub = ms[0]
    print(f"== {m}x{n}x{k} {dt}: cuBLAS {cub*1e3:.1f} us")
    for nm, t in sorted(zip(names, ms), key=lambda x: x[1]):
        print(f"   {nm:34s} {t*1e3:8.1f} us  cuBLAS/this {cub/t:.3f}")
        out.write(json.dumps(dict(m=m, n=n, k=k, dtype=dt, name=nm, gpu_ms=t)) + "\n")
    out.flush()
