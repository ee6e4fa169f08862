"""GPU: time a handful of KernelConfigs against torch.matmul (cuBLAS) at several shapes,
to choose default_config. Run on the device: source scripts/device_env.sh; python3 scripts/sweep_default.py"""
import sys

import torch
import triton.testing as tt

import autokernel as ak
from autokernel import KernelConfig

CANDIDATES = [
    KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3),
    KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=4),
    KernelConfig(block_m=256, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3),
    KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4),
    KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4),
    KernelConfig(block_m=128, block_n=256, block_k=32, group_m=8, num_warps=8, num_stages=4),
    KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4),
    KernelConfig(block_m=64, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4),
    KernelConfig(block_m=16, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4),
    KernelConfig(block_m=32, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4),
    KernelConfig(block_m=64, block_n=64, block_k=128, group_m=8, num_warps=4, num_stages=4),
]
SHAPES = [(2048, 2048, 2048, "nn"), (2048, 2048, 2048, "nt"), (4096, 4096, 4096, "nn"),
          (4096, 4096, 4096, "nt"), (8192, 8192, 8192, "nn"), (8192, 8192, 8192, "nt"),
          (4096, 11008, 4096, "nt"), (16, 4096, 4096, "nt"), (128, 11008, 4096, "nt"), (64, 4096, 14336, "nt")]

ONLY = sys.argv[1:]  # layouts to run, e.g. "nt"; all when empty
for dtype in (torch.float16,):
    for m, n, k, layout in SHAPES:
        if ONLY and layout not in ONLY:
            continue
        a = torch.randn(m, k, device="cuda", dtype=dtype) / k**0.5
        # "nt": B is an nn.Linear weight [N, K] read transposed; "nn": B is row-major [K, N].
        b = torch.randn(n, k, device="cuda", dtype=dtype).t() if layout == "nt" else torch.randn(k, n, device="cuda", dtype=dtype)
        flops = 2 * m * n * k
        ref = tt.do_bench(lambda: torch.matmul(a, b), return_mode="median")
        row = [f"{m}x{n}x{k} {layout} {str(dtype)[6:]}", f"cublas {flops / ref / 1e9:.0f}"]
        dflt = ak.default_config(m, n, k, dtype)
        best = None
        for cfg in CANDIDATES + [dflt]:
            try:
                ms = tt.do_bench(lambda: ak.matmul(a, b, config=cfg), return_mode="median")
            except Exception as exc:  # out of resources etc.
                continue
            tf = flops / ms / 1e9
            row.append(f"{cfg.short().replace(' ', '')}={tf:.0f}")
            if best is None or tf > best[0]:
                best = (tf, cfg.short())
            if cfg is dflt:
                row.append(f"default[{cfg.short()}] {tf:.0f}")
        row.append(f"best {best[0]:.0f} [{best[1]}]")
        print(" | ".join(row), flush=True)
