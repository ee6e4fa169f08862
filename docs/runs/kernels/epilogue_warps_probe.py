"""The epilogue's cost per activation on fixed configs, side by side with torch eager (timing.race, GPU time).
The first run: TMA 128x128 at 4 and 8 warps, 128x256, the subtiled epilogue; ``--second``: with the thin TMA
tile (64x128x128 w4) and the pointer kernel at 4 and 8 warps. c0 is the pick for the problem with gelu.
Usage: python3 docs/runs/kernels/epilogue_warps_probe.py [--second]"""
import sys
import torch, torch.nn.functional as F
import autokernel as ak
from autokernel import best
from autokernel.records import KernelConfig
from autokernel.timing import race
dt = torch.bfloat16
TMA_128 = [dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=5, flatten=True),
           dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True)]
FIRST = (TMA_128 + [dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True),
                    dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=5, flatten=True, epilogue_subtile=2)],
         ["none", "relu", "gelu_tanh", "silu", "gelu"], [(2048, 3072, 768), (512, 4096, 1024), (2048, 4096, 1024),
                                                         (8192, 4096, 1024)])
SECOND = (TMA_128 + [dict(block_m=64, block_n=128, block_k=128, num_warps=4, num_stages=4, flatten=True),
                     dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped"),
                     dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, variant="grouped"),
                     dict(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")],
          ["none", "gelu_tanh", "gelu"], [(2048, 3072, 768), (512, 4096, 1024), (8192, 4096, 1024)])
CFGS, ACTS, SHAPES = SECOND if "--second" in sys.argv else FIRST
for m, n, k in SHAPES:
    x = torch.randn(m, k, device="cuda", dtype=dt); w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dt)
    pick = best.resolved_config(m, n, k, dt, "gelu", True, x.device, layout="nt")
    fns = [lambda: F.gelu(torch.addmm(bias, x, w.t())), lambda: torch.addmm(bias, x, w.t())]; names = ["torch gelu", "torch plain"]
    cfgs = [pick] + [KernelConfig(group_m=8, **{"variant": "tma", **c}) for c in CFGS]
    for ci, cfg in enumerate(cfgs):
        for act in ACTS:
            out = torch.empty(m, n, device="cuda", dtype=dt)
            f = lambda cfg=cfg, act=act, out=out: ak.matmul(x, w.t(), bias, act, config=cfg, out=out)
            try:
                y = f(); torch.cuda.synchronize()
            except Exception as e:
                print("skip", cfg.short(), act, type(e).__name__, str(e)[:80]); continue
            fns.append(f); names.append(f"c{ci} {act}")
    us = [t * 1e3 for t in race(fns, rounds=12, segment_ms=2.0)]
    print(f"{m}x{n}x{k} bf16 nt bias: torch gelu {us[0]:.1f} plain {us[1]:.1f}; pick c0 = {pick.short()}")
    by = dict(zip(names, us))
    for ci, cfg in enumerate(cfgs):
        row = [f"{a} {by[f'c{ci} {a}']:.1f}" for a in ACTS if f"c{ci} {a}" in by]
        print(f"   c{ci} {cfg.short():40s} " + "  ".join(row), flush=True)
