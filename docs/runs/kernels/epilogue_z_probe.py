"""The training forward's Z store (the pre-activation beside Y): its cost per config, store_z against not, GPU time side
by side (timing.race). Usage: python3 docs/runs/kernels/epilogue_z_probe.py"""
import torch
from autokernel.plans import gemm_plan
from autokernel.records import KernelConfig
from autokernel.timing import race
dt = torch.bfloat16
CFGS = [dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=5, flatten=True),
        dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True),
        dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True),
        dict(block_m=64, block_n=128, block_k=128, num_warps=4, num_stages=4, flatten=True),
        dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped"),
        dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, variant="grouped")]
for m, n, k in [(2048, 3072, 768), (8192, 4096, 1024), (4096, 14336, 4096)]:
    x = torch.randn(m, k, device="cuda", dtype=dt); w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dt)
    fns, names = [], []
    for ci, c in enumerate(CFGS):
        cfg = KernelConfig(group_m=8, **{"variant": "tma", **c})
        for act, z in (("none", False), ("silu", False), ("silu", True), ("gelu", True)):
            try:
                plan = gemm_plan(x, w.t(), bias, act, 0.01, cfg, store_z=z)
                plan.run(x, w.t(), bias); torch.cuda.synchronize()
            except Exception as e:
                print("skip", ci, act, z, type(e).__name__, str(e)[:80]); continue
            fns.append(lambda plan=plan: plan.run(x, w.t(), bias)); names.append((ci, act, z))
    us = dict(zip(names, (t * 1e3 for t in race(fns, rounds=12, segment_ms=2.0))))
    print(f"{m}x{n}x{k} bf16 nt bias (µs):")
    for ci, c in enumerate(CFGS):
        cfg = KernelConfig(group_m=8, **{"variant": "tma", **c})
        g = lambda a, z: us.get((ci, a, z), float("nan"))
        print(f"   {cfg.short():34s} none {g('none', False):7.1f}  silu {g('silu', False):7.1f}  silu+Z {g('silu', True):7.1f} "
              f"(Z {g('silu', True) - g('silu', False):+6.1f})  gelu+Z {g('gelu', True):7.1f}", flush=True)
