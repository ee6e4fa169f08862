"""GPU time of the pointer kernels, this checkout against an older copy of the package
(`autokernel_before`, made as docs/launch.md says), side by side (timing.race), on shapes
whose M or N is or is not a multiple of 16, in every layout.
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/wrap_runs_ab.py"""
import torch, autokernel as ak, autokernel_before as akb
from autokernel.config import KernelConfig
from autokernel.timing import race
torch.manual_seed(0)
CFGS = [KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="grouped"),
        KernelConfig(block_m=64, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="grouped"),
        KernelConfig(block_m=16, block_n=64, block_k=128, group_m=8, num_warps=4, num_stages=4, variant="grouped")]
SHAPES = [(4096, 4096, 4096, "nt"), (2048, 1000, 2048, "nn"), (1000, 2048, 2048, "tn"), (4096, 4104, 1024, "nn"),
          (16, 4096, 4096, "nt"), (16, 4104, 4096, "nn"), (2000, 2000, 1000, "nt"), (777, 1536, 3000, "nn")]
for m, n, k, lay in SHAPES:
    a = torch.randn(k, m, device="cuda", dtype=torch.float16).t() if lay[0] == "t" else torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16).t() if lay[1] == "t" else torch.randn(k, n, device="cuda", dtype=torch.float16)
    fns, labels = [], []
    for cfg in CFGS:
        if cfg.block_m == 16 and m > 64: continue
        if cfg.block_m > 16 and m <= 64: continue
        for name, mod in (("before", akb), ("after", ak)):
            c = mod.KernelConfig(**cfg.model_dump()) if name == "before" else cfg
            out = torch.empty(m, n, device="cuda", dtype=torch.float16)
            mod.matmul(a, b, config=c, out=out); torch.cuda.synchronize()
            assert float((out.float() - a.float() @ b.float()).abs().max()) < 1.0
            fns.append(lambda mod=mod, c=c, out=out: mod.matmul(a, b, config=c, out=out)); labels.append((name, cfg.short()))
    ms = race(fns, rounds=15, segment_ms=1.0)
    row = []
    for i in range(0, len(ms), 2):
        row.append(f"{labels[i][1]}: {ms[i]*1e3:.1f} -> {ms[i+1]*1e3:.1f} us ({ms[i]/ms[i+1]:.3f}x)")
    print(f"{m}x{n}x{k} {lay}: " + " | ".join(row), flush=True)
