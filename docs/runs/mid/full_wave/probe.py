"""Time against K at one full wave of tiles: intercept (launch, prologue, epilogue) and slope
(per K step) of our TMA tiles and cuBLAS, fp16 nt, GPU time side by side."""
import sys, json, torch
from autokernel import matmul
from autokernel.config import KernelConfig
from autokernel.timing import race
T = lambda bm, bn, bk, w, s, **k: KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **k)
cases = [("128x256 w8 s3 fl", T(128, 256, 64, 8, 3, flatten=True), 1536, 2816),
         ("128x128 w4 s5 fl", T(128, 128, 64, 4, 5, flatten=True), 1536, 1408),
         ("128x128 w8 s4 fl", T(128, 128, 64, 8, 4, flatten=True), 1536, 1408),
         ("64x256 w4 s4 fl", T(64, 256, 64, 4, 4, flatten=True), 768, 2816)]
Ks = [64, 128, 256, 512, 1024, 2048, 4096]
out = open(sys.argv[1], "w")
for label, cfg, m, n in cases:
    fns, labels = [], []
    for k in Ks:
        sets = [(torch.randn(m, k, device="cuda", dtype=torch.float16), torch.randn(n, k, device="cuda", dtype=torch.float16)) for _ in range(3)]
        for who in ("ours", "cublas"):
            it = [0]
            def f(sets=sets, it=it, who=who):
                it[0] += 1
                a, w = sets[it[0] % 3]
                return matmul(a, w.t(), config=cfg) if who == "ours" else torch.mm(a, w.t())
            f(); fns.append(f); labels.append((k, who))
    ms = race(fns, rounds=15, segment_ms=1.0)
    res = {}
    for (k, who), t in zip(labels, ms):
        res.setdefault(who, {})[k] = round(t * 1e3, 2)
    rec = {"tile": label, "m": m, "n": n, "us": res}
    out.write(json.dumps(rec) + "\n"); out.flush()
    print(label, m, n, json.dumps(res), flush=True)
