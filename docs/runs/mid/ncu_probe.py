"""Under ncu: one launch each of ours and cuBLAS on the weakest mid-size problems, and the TMA
stream-K kernel beside the TMA data-parallel kernel. Prints the launch order. As run on the
H100 from commit 4cef5a2 (ncu_mid_h100.csv holds the metrics):
    ncu --profile-from-start off --clock-control none --set full --nvtx -o ncu python3 docs/runs/mid/ncu_probe.py
    ncu --import ncu.ncu-rep --page raw --csv > raw.csv
"""
import sys, torch
from autokernel import matmul
from autokernel.best import resolved_config
from autokernel.config import KernelConfig
from autokernel.kernels.matmul_tma import plan_matmul_tma, tma_operands

def C(bm, bn, bk, w, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)

torch.manual_seed(0)
work = []
for (m, n, k, dt, extra) in [(2048, 2304, 768, torch.float16, [C(128, 256, 64, 8, 3, flatten=True)]),
                             (1024, 2304, 768, torch.bfloat16, []),
                             (1024, 1024, 8192, torch.float16, [C(128, 256, 64, 8, 3, stream_k=True), C(128, 256, 64, 8, 3)])]:
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt).t()
    c = torch.empty(m, n, device="cuda", dtype=dt)
    cfg = resolved_config(m, n, k, dt, "none", False, a.device)
    fns = [(f"pick {cfg.short()}", lambda a=a, b=b, c=c: matmul(a, b, out=c)),
           ("cublas", lambda a=a, b=b, c=c: torch.mm(a, b, out=c))]
    for x in extra:
        L = plan_matmul_tma(a, b, c, None, "none", 0.0, x, tma_operands(a, b, c), False)
        fns.append((x.short(), lambda L=L, a=a, b=b, c=c: L(a, b, c, c, c)))
    for label, fn in fns:
        for _ in range(3):
            fn()
        work.append((f"{m}x{n}x{k} {label}", fn))
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for label, fn in work:
    print("launch:", label, flush=True)
    torch.cuda.nvtx.range_push(label)
    fn()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
