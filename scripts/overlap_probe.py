"""GPU: do back-to-back GEMMs overlap each other (cuBLAS vs ours)?

ncu times one kernel alone; the suite's GPU time replays many calls back to back in one
CUDA graph. Where cuBLAS gains more from back-to-back replay than our kernel does, the
difference lies between kernels (launch latency hidden by programmatic dependent launch,
prologue overlapping the previous kernel's tail), not in the kernel. Per shape and
library, three CUDA graphs, each replayed 20 times (median):
  A: N GEMMs back to back;
  B: N GEMMs, each followed by a one-element add (a separator no GEMM can overlap);
  C: the N separators alone.
"alone" = (B - C) / N is a GEMM with its neighbours kept apart; "b2b" = A / N.

Usage: python3 scripts/overlap_probe.py ["M N K dtype" ...]
"""

from __future__ import annotations

import statistics
import sys

import torch

N = 20


def graph_ms(body) -> float:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    return statistics.median(times)


def main(shapes: list[str]) -> None:
    import autokernel

    tiny = torch.zeros(1, device="cuda")
    print("shape | library | b2b us/call | alone us/call | b2b / alone")
    for shape in shapes:
        m, n, k, dtype = shape.split()
        dt = getattr(torch, dtype)
        a = torch.randn(int(m), int(k), device="cuda", dtype=dt)
        b = torch.randn(int(k), int(n), device="cuda", dtype=dt)
        out = torch.empty(int(m), int(n), device="cuda", dtype=dt)
        libs = {"cublas": lambda: torch.matmul(a, b, out=out), "ours": lambda: autokernel.matmul(a, b, out=out)}
        sep = graph_ms(lambda: [tiny.add_(1) for _ in range(N)])
        for name, fn in libs.items():
            fn()
            b2b = graph_ms(lambda: [fn() for _ in range(N)]) / N
            both = graph_ms(lambda: [(fn(), tiny.add_(1)) for _ in range(N)])
            alone = (both - sep) / N
            print(f"{shape} | {name} | {b2b * 1e3:.2f} | {alone * 1e3:.2f} | {b2b / alone:.3f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["1024 1024 1024 float16", "2048 2048 2048 float16", "1024 4096 4096 float16",
                          "4096 4096 4096 float16"])
