"""Decode tiles with K steps of 256 raced against the selector's decode candidates and cuBLAS (GPU
time, side by side; bf16, nt; GB/s of the problem's fewest bytes). docs/kernel-notes.md, "Decode tiles
with K steps of 256".

    source benchmarks/device_env.sh
    python3 docs/runs/kernels/decode_bk256_probe.py OUT.jsonl 1x14336x4096 1x5120x10368 ...
"""
import json, math, sys
import torch
from autokernel import matmul
from autokernel.config import KernelConfig
from autokernel.timing import race

def c(bm, bn, bk, w, s, k=1, g=8):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=g, num_warps=w, num_stages=s, variant="grouped", split_k=k)
CFGS = {
 "16x64x128 s4": c(16, 64, 128, 4, 4), "16x64x128 s4 k2": c(16, 64, 128, 4, 4, 2), "16x64x128 s4 k4": c(16, 64, 128, 4, 4, 4),
 "16x128x128 s4": c(16, 128, 128, 4, 4),
 "16x64x256 s3": c(16, 64, 256, 4, 3), "16x64x256 s4": c(16, 64, 256, 4, 4), 
 "16x32x256 s4": c(16, 32, 256, 2, 4), "16x32x256 s3": c(16, 32, 256, 2, 3),
 "16x128x256 s3": c(16, 128, 256, 4, 3), "16x32x256 s6": c(16, 32, 256, 2, 6), "16x64x256 s4 k2": c(16, 64, 256, 4, 4, 2),
}
shapes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2:]]
out = open(sys.argv[1], "w")
for (m, n, k) in shapes:
    dt = torch.bfloat16
    sets = max(2, min(8, math.ceil(300e6 / ((m * k + n * k) * 2))))
    ins = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(n, k, device="cuda", dtype=dt), torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
    ref = ins[0][0].float() @ ins[0][1].float().t()
    fns, labels = [], []
    for label, cfg in CFGS.items():
        try:
            y = matmul(ins[0][0], ins[0][1].t(), config=cfg)
            torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max() / ref.abs().max())
            assert err < 2e-2, err
        except Exception as e:
            print(json.dumps(dict(m=m, n=n, k=k, label=label, status="error", error=str(e)[:200])), file=out, flush=True)
            continue
        it = [0]
        def f(cfg=cfg, it=it):
            it[0] += 1
            a, w, o = ins[it[0] % sets]
            matmul(a, w.t(), config=cfg, out=o)
        fns.append(f); labels.append(label)
    it = [0]
    def fc(it=it):
        it[0] += 1
        a, w, o = ins[it[0] % sets]
        torch.mm(a, w.t(), out=o)
    fns.append(fc); labels.append("cublas")
    ms = race(fns, rounds=20, segment_ms=1.0)
    nbytes = (m * k + n * k + m * n) * 2
    for l, t in zip(labels, ms):
        print(json.dumps(dict(m=m, n=n, k=k, label=l, status="ok", gpu_ms=t, gbps=nbytes / t / 1e6)), file=out, flush=True)
    print(f"{m}x{n}x{k}: " + " ".join(f"{l}={nbytes / t / 1e6:.0f}" for l, t in zip(labels, ms)), flush=True)
