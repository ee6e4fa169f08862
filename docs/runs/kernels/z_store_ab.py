"""With docs/runs/kernels/z_tma_store.patch applied: the training forward's Z store through a TMA descriptor, against the code
before (Z stored by pointers; copied as ``autokernel_before``, docs/launch.md has the step): the same
configs, each checked against a float32 reference (Y and Z), GPU time side by side (timing.race).
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/z_store_ab.py"""
import torch, torch.nn.functional as F
from autokernel.plans import gemm_plan
from autokernel.records import KernelConfig
from autokernel_before.plans import gemm_plan as gemm_plan_before
from autokernel_before.records import KernelConfig as KernelConfigBefore
from autokernel.timing import race
dt = torch.bfloat16
CFGS = [dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=5, flatten=True),
        dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True),
        dict(block_m=64, block_n=128, block_k=128, num_warps=4, num_stages=4, flatten=True),
        dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True, epilogue_subtile=2),
        dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True)]
ACTS = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}
worst = 0.0
for m, n, k in [(2048, 3072, 768), (8192, 4096, 1024), (4096, 14336, 4096)]:
    x = torch.randn(m, k, device="cuda", dtype=dt); w = torch.randn(n, k, device="cuda", dtype=dt) / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dt)
    z_ref = (x.float() @ w.float().t() + bias.float())
    fns, names = [], []
    for c in CFGS:
        for act, fn in ACTS.items():
            y_ref = fn(z_ref)
            for side, plan_fn, K in (("before", gemm_plan_before, KernelConfigBefore), ("after", gemm_plan, KernelConfig)):
                cfg = K(group_m=8, variant="tma", **c)
                try:
                    plan = plan_fn(x, w.t(), bias, act, 0.01, cfg, store_z=True)
                    y, z = plan.run(x, w.t(), bias)
                except Exception as e:  # a config that does not fit storing Z (the code before)
                    print(f"  {side} {cfg.short()} {act}: {type(e).__name__}: {str(e)[:90]}")
                    continue
                err = max(((y.float() - y_ref).norm() / y_ref.norm()).item(), ((z.float() - z_ref).norm() / z_ref.norm()).item())
                worst = max(worst, err)
                assert err < 2e-2, (side, cfg.short(), act, err)
                fns.append(lambda plan=plan: plan.run(x, w.t(), bias)); names.append((cfg.short(), act, side))
    us = dict(zip(names, (t * 1e3 for t in race(fns, rounds=12, segment_ms=2.0))))
    print(f"{m}x{n}x{k} bf16 nt bias, storing Z (µs, before -> after):", flush=True)
    for c in CFGS:
        label = KernelConfig(group_m=8, variant="tma", **c).short()
        row = []
        for act in ACTS:
            b, a = us.get((label, act, "before")), us.get((label, act, "after"))
            row.append(f"{act} {'-' if b is None else f'{b:.1f}'} -> {'-' if a is None else f'{a:.1f}'}"
                       + (f" ({b / a:.3f}x)" if a and b else ""))
        print(f"   {label:32s} " + "   ".join(row), flush=True)
print(f"largest relative error of Y or Z against float32: {worst:.2e}")
