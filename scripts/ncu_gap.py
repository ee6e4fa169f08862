"""GPU: what separates our kernel from cuBLAS, read from the hardware counters (ncu).

One launch of ``autokernel.matmul`` (the config it resolves from the shipped per-GPU
file, as a user gets it) and one of ``torch.matmul`` (cuBLAS) per shape, after warm-up,
inside cudaProfilerStart/Stop so that ncu profiles exactly those kernels. Run it under
ncu (see scripts/ncu_gap.sh); alone it prints the configs and the event times.

Usage: python3 scripts/ncu_gap.py "2048 2048 2048 float16" "8192 8192 8192 bfloat16" ...
"""

from __future__ import annotations

import sys

import torch


def main(shapes: list[str]) -> None:
    import autokernel
    from autokernel.best import resolved_config

    torch.manual_seed(0)
    work = []
    for shape in shapes:
        m, n, k, dtype = shape.split()
        dt = getattr(torch, dtype)
        a = torch.randn(int(m), int(k), device="cuda", dtype=dt)
        b = torch.randn(int(k), int(n), device="cuda", dtype=dt)
        for _ in range(5):  # compile, resolve, warm the clocks
            autokernel.matmul(a, b)
            torch.matmul(a, b)
        cfg = resolved_config(int(m), int(n), int(k), dt, "none", False, a.device)
        print(f"{shape}: ours {cfg.short()}", flush=True)
        work.append((shape, a, b))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for shape, a, b in work:
        torch.cuda.nvtx.range_push(f"ours {shape}")
        autokernel.matmul(a, b)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push(f"cublas {shape}")
        torch.matmul(a, b)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main(sys.argv[1:])
