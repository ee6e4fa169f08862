"""The exact gelu's epilogue against the code before (`autokernel_before`, made as
docs/launch.md says; run with the degree-6 erfc fit against the degree-9 one), side by side
(timing.race, GPU time) with torch eager (addmm + gelu), gelu_tanh and our plain GEMM on the
same config: the fused suite's gelu problems, BERT-style layers and the tiles the selector
weighs (the pick; TMA 128x128 at 4 and 8 warps; 128x256 at 8); then training steps of linear.
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/gelu_ab.py"""
import torch
import torch.nn.functional as F

import autokernel as ak
import autokernel_before as akb
from autokernel import best
from autokernel.records import KernelConfig
from autokernel.timing import race

torch.manual_seed(0)
TILES = [dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=5, flatten=True),
         dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True),
         dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True)]
PROBLEMS = [(4096, 4096, 4096, torch.float16), (4096, 4096, 4096, torch.bfloat16), (4096, 3072, 768, torch.float16),
            (4096, 3072, 768, torch.bfloat16), (2048, 4096, 1024, torch.bfloat16), (8192, 4096, 1024, torch.bfloat16),
            (512, 4096, 1024, torch.bfloat16), (2048, 3072, 768, torch.bfloat16)]
ratios = []
for m, n, k, dt in PROBLEMS:
    x = torch.randn(m, k, device="cuda", dtype=dt)
    w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dt)
    ref = F.gelu(x.double() @ w.double().t() + bias.double())
    pick = best.resolved_config(m, n, k, dt, "gelu", True, x.device, layout="nt")
    cfgs = [pick] + [KernelConfig(group_m=8, variant="tma", **t) for t in TILES]
    fns, names = [lambda: F.gelu(torch.addmm(bias, x, w.t()))], ["torch"]
    errs = {}
    for ci, cfg in enumerate(cfgs):
        cfgb = akb.KernelConfig(**cfg.model_dump())
        outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(4)]
        variants = {"before": lambda cfgb=cfgb, o=outs[0]: akb.matmul(x, w.t(), bias, "gelu", config=cfgb, out=o),
                    "gelu": lambda cfg=cfg, o=outs[1]: ak.matmul(x, w.t(), bias, "gelu", config=cfg, out=o),
                    "tanh": lambda cfg=cfg, o=outs[2]: ak.matmul(x, w.t(), bias, "gelu_tanh", config=cfg, out=o),
                    "plain": lambda cfg=cfg, o=outs[3]: ak.matmul(x, w.t(), bias, None, config=cfg, out=o)}
        for name, fn in variants.items():
            y = fn()
            if name in ("before", "gelu"):
                errs[ci, name] = float((y.double() - ref).abs().max())
            fns.append(fn)
            names.append((ci, name))
    us = dict(zip(names, (t * 1e3 for t in race(fns, rounds=20, segment_ms=2.0))))
    print(f"{m}x{n}x{k} {str(dt)[6:]} nt bias gelu: torch eager {us['torch']:.1f} us; "
          f"max abs error vs float64: before {errs[0, 'before']:.2e}, now {errs[0, 'gelu']:.2e}")
    for ci, cfg in enumerate(cfgs):
        b, g, t, p = (us[ci, v] for v in ("before", "gelu", "tanh", "plain"))
        tag = "pick" if ci == 0 else f"c{ci}"
        print(f"  {tag:4s} {cfg.short():34s} plain {p:7.1f}  gelu before {b:7.1f} (+{b - p:5.1f})  now {g:7.1f} "
              f"(+{g - p:5.1f})  gelu_tanh {t:7.1f} (+{t - p:5.1f})  before/now {b / g:.3f}  torch/now {us['torch'] / g:.3f}",
              flush=True)
        if ci == 0:
            ratios.append(b / g)
print(f"pick: before / now geomean {torch.tensor(ratios).log().mean().exp().item():.3f} over {len(ratios)} problems")
for m, n, k in [(2048, 4096, 1024), (4096, 4096, 4096), (512, 4096, 1024)]:
    dt = torch.bfloat16
    xs = [torch.randn(m, k, device="cuda", dtype=dt, requires_grad=True) for _ in range(3)]
    ws = [torch.nn.Parameter(torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5) for _ in range(3)]
    bs = [torch.nn.Parameter(torch.randn(n, device="cuda", dtype=dt)) for _ in range(3)]
    dy = torch.randn(m, n, device="cuda", dtype=dt)
    steps = [lambda: F.gelu(F.linear(xs[0], ws[0], bs[0])).backward(dy),
             lambda: akb.linear(xs[1], ws[1], bs[1], "gelu").backward(dy),
             lambda: ak.linear(xs[2], ws[2], bs[2], "gelu").backward(dy)]
    ms = race(steps, rounds=20, segment_ms=5.0)
    print(f"training step {m}x{n}x{k} bf16 bias gelu: torch {ms[0]*1e3:.1f} us, before {ms[1]*1e3:.1f}, "
          f"now {ms[2]*1e3:.1f}; torch / before {ms[0]/ms[1]:.3f}, torch / now {ms[0]/ms[2]:.3f}", flush=True)
