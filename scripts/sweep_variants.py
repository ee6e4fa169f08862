"""GPU: the grouped pointer kernel against the Hopper TMA persistent kernel, side by side
with torch.matmul (cuBLAS), for row-major B ("nn") and nn.Linear's transposed weight
("nt"). Run on the device: source scripts/device_env.sh; python3 scripts/sweep_variants.py"""
import sys

import torch
import triton.testing as tt

import autokernel as ak
from autokernel import KernelConfig

TILES = [
    dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3),
    dict(block_m=256, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3),
    dict(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4),
    dict(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4),
    dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=4),
    dict(block_m=64, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4),
    dict(block_m=64, block_n=64, block_k=128, group_m=8, num_warps=4, num_stages=4),
    dict(block_m=16, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4),
]
SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 11008, 4096),
          (16, 4096, 4096), (128, 11008, 4096), (64, 4096, 14336)]
LAYOUTS = sys.argv[1:] or ["nn", "nt"]

print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; TFLOP/s, median of do_bench")
for dtype in (torch.float16,):
    for layout in LAYOUTS:
        for m, n, k in SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=dtype) / k**0.5
            if layout == "nt":
                b = torch.randn(n, k, device="cuda", dtype=dtype).t()
            else:
                b = torch.randn(k, n, device="cuda", dtype=dtype)
            flops = 2 * m * n * k
            ref_out = (a.float() @ b.float())
            cublas = flops / tt.do_bench(lambda: torch.matmul(a, b), return_mode="median") / 1e9
            best = {}
            cells = []
            for tile in TILES:
                for variant in ("grouped", "tma"):
                    cfg = KernelConfig(**tile, variant=variant)
                    try:
                        out = ak.matmul(a, b, config=cfg)
                        err = ((out.float() - ref_out).norm() / ref_out.norm()).item()
                        if not err < 1e-2:
                            cells.append(f"{cfg.short()}=WRONG({err:.1e})")
                            continue
                        tf = flops / tt.do_bench(lambda: ak.matmul(a, b, config=cfg), return_mode="median") / 1e9
                    except Exception as exc:
                        cells.append(f"{cfg.short()}=ERR({type(exc).__name__})")
                        continue
                    cells.append(f"{cfg.short().replace(' ', '')}={tf:.0f}")
                    if tf > best.get(variant, (0,))[0]:
                        best[variant] = (tf, cfg.short())
            dflt = ak.default_config(m, n, k, dtype)
            dtf = flops / tt.do_bench(lambda: ak.matmul(a, b, config=dflt), return_mode="median") / 1e9
            summary = " | ".join(f"best {v} {t:.0f} [{c}]" for v, (t, c) in best.items())
            print(f"{m}x{n}x{k} {layout}: cublas {cublas:.0f} | default[{dflt.short()}] {dtf:.0f} | {summary}", flush=True)
            print("    " + " ".join(cells), flush=True)
