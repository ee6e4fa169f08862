"""The exact gelu's epilogue, Numerical Recipes' erfc fit against libdevice's erf (the code
before, `autokernel_before`, made as docs/launch.md says), side by side (timing.race, GPU
time) with torch eager (addmm + gelu) and our plain GEMM (no activation) on the same config:
forward problems of BERT-style layers, then a training step of linear (forward + backward).
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/gelu_ab.py"""
import torch
import torch.nn.functional as F

import autokernel as ak
import autokernel_before as akb
from autokernel import best
from autokernel.timing import race

torch.manual_seed(0)
SHAPES = [(2048, 4096, 1024), (8192, 4096, 1024), (4096, 4096, 4096), (2048, 3072, 768), (512, 4096, 1024),
          (4096, 16384, 4096)]
dt = torch.bfloat16
for m, n, k in SHAPES:
    x = torch.randn(m, k, device="cuda", dtype=dt)
    w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dt)
    cfg = best.resolved_config(m, n, k, dt, "gelu", True, x.device, layout="nt")
    cfgb = akb.KernelConfig(**cfg.model_dump())
    ref = F.gelu(x.double() @ w.double().t() + bias.double())
    err = lambda y: float((y.double() - ref).norm() / ref.norm())
    outs = [torch.empty(m, n, device="cuda", dtype=dt) for _ in range(4)]
    fns = [lambda: F.gelu(torch.addmm(bias, x, w.t())),
           lambda: akb.matmul(x, w.t(), bias, "gelu", config=cfgb, out=outs[0]),
           lambda: ak.matmul(x, w.t(), bias, "gelu", config=cfg, out=outs[1]),
           lambda: ak.matmul(x, w.t(), bias, None, config=cfg, out=outs[2])]
    errs = [err(fns[0]()), err(fns[1]()), err(fns[2]())]
    ms = race(fns, rounds=20, segment_ms=2.0)
    print(f"{m}x{n}x{k} bf16 nt bias gelu [{cfg.short()}]: torch {ms[0]*1e3:.1f} us, erf {ms[1]*1e3:.1f}, "
          f"erfc fit {ms[2]*1e3:.1f}, no activation {ms[3]*1e3:.1f}; torch / erf {ms[0]/ms[1]:.3f}, "
          f"torch / erfc fit {ms[0]/ms[2]:.3f}; rel error torch {errs[0]:.2e}, erf {errs[1]:.2e}, fit {errs[2]:.2e}",
          flush=True)
for m, n, k in SHAPES[:3]:
    xs = [torch.randn(m, k, device="cuda", dtype=dt, requires_grad=True) for _ in range(3)]
    ws = [torch.nn.Parameter(torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5) for _ in range(3)]
    bs = [torch.nn.Parameter(torch.randn(n, device="cuda", dtype=dt)) for _ in range(3)]
    dy = torch.randn(m, n, device="cuda", dtype=dt)
    steps = [lambda: F.gelu(F.linear(xs[0], ws[0], bs[0])).backward(dy),
             lambda: akb.linear(xs[1], ws[1], bs[1], "gelu").backward(dy),
             lambda: ak.linear(xs[2], ws[2], bs[2], "gelu").backward(dy)]
    ms = race(steps, rounds=20, segment_ms=5.0)
    print(f"training step {m}x{n}x{k} bf16 bias gelu: torch {ms[0]*1e3:.1f} us, erf {ms[1]*1e3:.1f}, "
          f"erfc fit {ms[2]*1e3:.1f}; torch / erf {ms[0]/ms[1]:.3f}, torch / erfc fit {ms[0]/ms[2]:.3f}", flush=True)
