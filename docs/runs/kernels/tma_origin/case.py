"""One GEMM on operands over padded storage, in its own process (a fault poisons the context):
    python3 docs/runs/kernels/tma_origin/case.py M N K CASE CONFIG
CASE: ta (A a transposed view, rows along M), bn (B row-major, rows along N), co (out= over
padded rows); CONFIG: pick, or bm,bn,bk,warps,stages,flatten,stream_k of a TMA config."""
import sys
import torch
from autokernel import matmul
from autokernel.records import KernelConfig
# case: ta (A transposed over padded storage, odd M), bn (B row-major over padded storage, odd N), co (out over padded storage, odd N)
m, n, k, case, cfg = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
dt = torch.bfloat16
pad = lambda x: (x + 7) // 8 * 8
a = torch.randn(k, pad(m), device="cuda", dtype=dt)[:, :m].t() if case == "ta" else torch.randn(m, k, device="cuda", dtype=dt)
b = torch.randn(k, pad(n), device="cuda", dtype=dt)[:, :n] if case == "bn" else torch.randn(n, k, device="cuda", dtype=dt).t()
out = torch.empty(m, pad(n), device="cuda", dtype=dt)[:, :n] if case in ("co", "bn") else None
config = None
if cfg != "pick":
    bm, bn_, bk, w, s, fl, sk = cfg.split(",")
    config = KernelConfig(block_m=int(bm), block_n=int(bn_), block_k=int(bk), num_warps=int(w), num_stages=int(s),
                          variant="tma", flatten=fl == "1", stream_k=sk == "1")
try:
    c = matmul(a, b, out=out, config=config); torch.cuda.synchronize()
    ref = a.float() @ b.float()
    print(sys.argv[1:], "ok %.2e" % ((c.float() - ref).norm() / ref.norm()).item(), flush=True)
except Exception as e:
    print(sys.argv[1:], "FAIL", str(e).splitlines()[0][:70], flush=True)
