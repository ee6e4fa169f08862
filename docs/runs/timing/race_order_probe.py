"""Does a function's place in timing.race's order move its time? The same kernel three times
in one race (early, middle and late in the list: 128x256x64 g8 w8 s3 flattened TMA, the
last copy as the default config "auto" names it), among the selector's candidates for
8192x28672x8192 and torch, on problems from 2k^3 to 3.9 TFLOP; each race run with the order
of timing.race before (each round rotated one place: with fewer rounds than functions a
function keeps near one place) and by timing.race as it is (a random order, reversed in the
next round), three times each, alternating. Prints late / early and middle / early per race
(1.000: no bias).

    python3 docs/runs/timing/race_order_probe.py OUT.jsonl      (H100: docs/runs/timing/race_order_h100.jsonl)

race_order_seeded_h100.jsonl: a first form, the same random order sequence in every race
(one seed), no reversal: "shuffle" there.
"""
import json
import math
import sys
from pathlib import Path

import torch

from autokernel import matmul, timing
from autokernel.config import KernelConfig

HERE = Path(__file__).resolve().parent
PROBLEMS = [(8192, 28672, 8192, torch.float16), (8192, 8192, 28672, torch.bfloat16), (6144, 6144, 6144, torch.bfloat16),
            (16384, 4096, 4096, torch.float16), (4096, 4096, 4096, torch.float16), (2048, 2048, 2048, torch.bfloat16)]


def race(fns, rounds, segment_ms):
    """timing.race as it was: each round rotated one place."""
    def captured(fn, n):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                fn()
        g.replay()
        return g

    def replay_ms(g):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); g.replay(); e.record(); torch.cuda.synchronize()
        return s.elapsed_time(e)

    graphs, calls = [], []
    for fn in fns:
        fn(); torch.cuda.synchronize()
        n = max(1, math.ceil(segment_ms / max(replay_ms(captured(fn, 4)) / 4, 1e-3)))
        graphs.append(captured(fn, n)); calls.append(n)
    k = len(graphs)
    marks = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(k)]
             for _ in range(rounds)]
    for r in range(rounds):
        seq = [(r + j) % k for j in range(k)]
        for i in seq:
            marks[r][i][0].record(); graphs[i].replay(); marks[r][i][1].record()
    torch.cuda.synchronize()
    return [sum(marks[r][i][0].elapsed_time(marks[r][i][1]) for r in range(rounds)) / (rounds * calls[i]) for i in range(k)]


def main():
    out = open(sys.argv[1], "w")
    cfgs = [KernelConfig.model_validate(c) for c in json.load(open(HERE / "race_order_configs.json"))]
    x = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True)
    default = x.model_copy(update={"variant": "auto"})
    others = [c for c in cfgs if c not in (x, default)]
    listed = others[:1] + [x] + others[1:11] + [x] + others[11:] + [default]
    early, middle, late = 1, 12, len(listed) - 1
    for m, n, k, dtype in PROBLEMS:
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(n, k, device="cuda", dtype=dtype).t()
        fns = [lambda c=c: matmul(a, b, config=c) for c in listed] + [lambda: torch.mm(a, b)]
        for rep in range(3):
            for order in ("rotate", "race"):
                ms = race(fns, 10, 1.0) if order == "rotate" else timing.race(fns, rounds=10, segment_ms=1.0)
                rec = {"m": m, "n": n, "k": k, "dtype": str(dtype).split(".")[1], "order": order, "rep": rep,
                       "late_over_early": ms[late] / ms[early], "middle_over_early": ms[middle] / ms[early],
                       "torch_over_early": ms[-1] / ms[early], "ms": ms, "labels": [c.short() for c in listed] + ["torch"]}
                out.write(json.dumps(rec) + "\n"); out.flush()
                print(f"{m}x{n}x{k} {rec['dtype']} {order:7s} rep {rep}: late/early {rec['late_over_early']:.3f} "
                      f"middle/early {rec['middle_over_early']:.3f} torch/early {rec['torch_over_early']:.3f} "
                      f"({ms[early]:.3f} ms)", flush=True)


if __name__ == "__main__":
    main()
