"""TMA thin tiles at M below the tile (rows of A's box past M) against M = 64, same N and K, and a
pointer tile beside them; fp16, nt, GPU time (timing.race). python3 docs/runs/kernels/tma_oob/probe.py"""
import torch, json, sys
from autokernel import matmul
from autokernel.config import KernelConfig
from autokernel.timing import race
T = lambda bm, bn, bk, w, s, v="tma", **k: KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant=v, **k)
cfgs = {"64x32 s8 tma": T(64, 32, 128, 4, 8), "64x64 s6 tma fl": T(64, 64, 128, 4, 6, flatten=True),
        "64x128 s4 tma fl": T(64, 128, 128, 4, 4, flatten=True), "64x64 grouped": T(64, 64, 128, 4, 4, "grouped")}
for n, k in [(2816, 6656), (4096, 4096), (2304, 5248)]:
    for dt in (torch.float16,):
        res = {}
        fns, labels = [], []
        for m in (33, 36, 40, 48, 56, 64):
            sets = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(n, k, device="cuda", dtype=dt)) for _ in range(4)]
            for lab, c in cfgs.items():
                it = [0]
                def f(c=c, sets=sets, it=it):
                    it[0] += 1
                    a, w = sets[it[0] % 4]
                    return matmul(a, w.t(), config=c)
                f(); fns.append(f); labels.append((m, lab))
        ms = race(fns, rounds=15, segment_ms=1.0)
        for (m, lab), t in zip(labels, ms):
            res.setdefault(lab, {})[m] = round(t * 1e3, 2)
        print(f"N={n} K={k}", json.dumps(res))
