"""GPU: the built-in default config before and after it learned to fill the GPU, raced.

Before, every problem with M > 256 took 128x256x64 tiles and every one with 64 < M <= 256
took 128x128x64: on a 256x1024x256 or 512x512x2048 GEMM that is 8-32 tiles for 132 SMs.
Now `default_config` takes the largest of 128x256, 128x128, 64x128, 64x64 that makes at
least FILL_TILES tiles (autokernel/config.py). This script races, per shape and dtype, the
old default, the new one and cuBLAS (torch.matmul) by GPU time (timing.race: CUDA graphs
replayed interleaved), after checking the new default against a float32 reference, on the
shapes `autokernel tune` was run on to find the rule and on others it never saw.

Run on the device: source scripts/device_env.sh; python3 scripts/default_tiles.py
"""
from __future__ import annotations

import sys

import torch

from autokernel.config import KernelConfig, default_config
from autokernel.evaluate import check_correctness, race_call
from autokernel.records import Problem
from autokernel.report import geomean
from autokernel.timing import race

# The shapes tuned to find the rule (docs/runs/kernels/default_tiles_h100.txt), then held-out ones.
TUNED = [(256, 1024, 256), (256, 256, 1024), (512, 2048, 512), (512, 512, 2048), (256, 4096, 1024),
         (768, 768, 768), (2048, 2048, 1024), (128, 1024, 1024)]
HELD_OUT = [(384, 1536, 384), (640, 640, 2560), (192, 2048, 768), (1024, 1024, 1024), (1000, 3000, 700),
            (256, 11008, 4096), (512, 4096, 4096), (1536, 1536, 512), (128, 8192, 1024), (96, 768, 3072)]


def old_default(m: int, n: int, k: int, dtype: torch.dtype) -> KernelConfig:
    """default_config as it was before the rule (M > 64; fp16/bf16)."""
    if m <= 256:
        return KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4,
                            variant="grouped")
    return KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="auto")


def main() -> int:
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}")
    print("set | shape | dtype | old default | new default | cuBLAS us | old us | new us | old/new | cuBLAS/new | check")
    ratios: dict[str, list[float]] = {"tuned": [], "held-out": []}
    vs_cublas: dict[str, list[float]] = {"tuned": [], "held-out": []}
    for label, shapes in (("tuned", TUNED), ("held-out", HELD_OUT)):
        for m, n, k in shapes:
            for dtype in ("float16", "bfloat16"):
                p = Problem(m, n, k, dtype, layout="nt")
                old = old_default(m, n, k, p.torch_dtype)
                new = default_config(m, n, k, p.torch_dtype, gpu=True)
                check = check_correctness(p, new)
                ok = "pass" if check.passed else f"FAIL {check.error or check.rel_error}"
                if old == new:
                    print(f"{label} | {m}x{n}x{k} | {dtype} | {old.short()} | same | - | - | - | - | - | {ok}")
                    continue
                cub, t_old, t_new = race([race_call(p, "torch"), race_call(p, "triton", old),
                                          race_call(p, "triton", new)])
                ratios[label].append(t_old / t_new)
                vs_cublas[label].append(cub / t_new)
                print(f"{label} | {m}x{n}x{k} | {dtype} | {old.short()} | {new.short()} | {cub * 1e3:.2f} | "
                      f"{t_old * 1e3:.2f} | {t_new * 1e3:.2f} | {t_old / t_new:.3f} | {cub / t_new:.3f} | {ok}")
    for label in ratios:
        r, c = ratios[label], vs_cublas[label]
        if r:
            print(f"{label}: {len(r)} problems whose default changed; old/new geomean {geomean(r):.3f} "
                  f"(min {min(r):.3f}), cuBLAS/new geomean {geomean(c):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
