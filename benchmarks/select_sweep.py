"""Time every selector candidate on a spread of GEMM shapes, side by side with cuBLAS: the data
the selector's model is fitted from (``autokernel select-fit``). On the GPU machine:

    python3 benchmarks/select_sweep.py --out sweep.jsonl [--n 120] [--seed 7] [--time-budget 480]

Shapes are drawn as real models' linear layers look (M tokens log-uniform from 1 to 16384,
N and K model widths, float16/bfloat16, mostly the nn.Linear layout), with a fixed seed, and
capped at 4 TFLOP per call so that a sweep fits one device call. Per shape: each candidate
that applies (``autokernel.select.why_not``), plus the default config, is checked once against
a float32 reference, then all are timed together with cuBLAS by ``timing.race`` (CUDA graphs
interleaved, GPU time per call). One JSON line per (shape, config), flushed as measured.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import sys
import time

import torch

from autokernel import matmul, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import default_config
from autokernel.evaluate import reference
from autokernel.problem import Problem
from autokernel.select import tma_aligned, why_not
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets, race

WIDTHS_ODD = [576, 1000, 1536, 2304, 2816, 3584, 4608, 5120, 6912, 8960, 13824, 18944, 28672]
MAX_FLOP = 4e12


def draw_shapes(n: int, seed: int) -> list[Problem]:
    rng = random.Random(seed)

    def width() -> int:
        if rng.random() < 0.2:
            return rng.choice(WIDTHS_ODD)
        return 128 * round(math.exp(rng.uniform(math.log(4), math.log(256))))

    out: list[Problem] = []
    while len(out) < n:
        m = max(1, round(math.exp(rng.uniform(0, math.log(16384)))))
        p = Problem(m, width(), width(), rng.choice(["float16", "bfloat16"]),
                    layout="nn" if rng.random() < 0.2 else "nt")
        if 2 * p.m * p.n * p.k <= MAX_FLOP:
            out.append(p)
    return out


def _call(sets, fn):
    """``fn(a, b, out)`` on the next input set at each call."""
    cycle = itertools.cycle(sets)

    def call():
        fn(*next(cycle))

    return call


def sweep_problem(p: Problem, limit: int) -> list[dict]:
    tma = runtime.has_tma() and tma_aligned(p.m, p.n, p.k, p.torch_dtype, p.layout)
    configs = [c for c in CANDIDATES if why_not(c, p.m, p.n, p.k, tma, runtime.sm_count()) is None
               and c.shared_memory_bytes(p.torch_dtype) <= limit]
    default = default_config(p.m, p.n, p.k, p.torch_dtype)
    if default not in configs:
        configs.append(default)
    dev = torch.device("cuda")

    def make(i: int):
        a, b, _ = p.make_inputs(dev, seed=1000 + i)
        return a, b, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)

    sets = make_input_sets(make, p.bytes, GRAPH_INPUT_SETS)
    a0, b0, _ = sets[0]
    ref = reference(a0, b0, None, "none")
    rows, fns, timed = [], [], []
    for config in configs:
        row = {**p.to_dict(), "config": json.loads(config.to_json()), "label": config.short(),
               "default": config == default, "status": "success"}
        try:
            out = matmul(a0, b0, config=config)
            torch.cuda.synchronize()
            err = float((out.float() - ref).norm() / ref.norm().clamp_min(1e-30))
            row["rel_error"] = err
            if not err < 2e-2:
                row["status"] = "incorrect"
        except Exception as exc:  # a candidate that fails is a row, not the end of the sweep
            row["status"], row["error"] = type(exc).__name__, str(exc).splitlines()[0][:200]
        rows.append(row)
        if row["status"] == "success":
            fns.append(_call(sets, lambda a, b, out, config=config: matmul(a, b, config=config, out=out)))
            timed.append(row)
    fns.append(_call(sets, lambda a, b, out: torch.mm(a, b, out=out)))
    cublas = {**p.to_dict(), "config": None, "label": "cublas", "default": False, "status": "success"}
    ms = race(fns, rounds=10, segment_ms=1.0)
    for row, t in zip(timed + [cublas], ms):
        row["gpu_ms"] = t
    return rows + [cublas]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip", type=int, default=0, help="skip the first SKIP drawn shapes (continue a sweep)")
    ap.add_argument("--time-budget", type=float, default=480.0, metavar="SECONDS")
    args = ap.parse_args(argv)
    if runtime.INTERPRETER:
        print("error: the sweep times kernels on a GPU", file=sys.stderr)
        return 2
    limit = runtime.shared_memory_limit()
    start = time.monotonic()
    device = runtime.device_name()
    with open(args.out, "a") as f:
        for i, p in enumerate(draw_shapes(args.n, args.seed)[args.skip:], start=args.skip):
            if time.monotonic() - start > args.time_budget:
                print(f"time budget spent after {i} shapes", file=sys.stderr)
                break
            t0 = time.monotonic()
            rows = sweep_problem(p, limit)
            for row in rows:
                f.write(json.dumps({**row, "device": device, "index": i}) + "\n")
            f.flush()
            ok = [r for r in rows if r.get("gpu_ms") and r["label"] != "cublas"]
            best = min(ok, key=lambda r: r["gpu_ms"])
            cub = next(r["gpu_ms"] for r in rows if r["label"] == "cublas")
            dflt = next((r["gpu_ms"] for r in ok if r["default"]), float("nan"))
            bad = [r["label"] for r in rows if r["status"] != "success"]
            print(f"{i:3d} {p.label():40s} n={len(rows) - 1:2d} best {best['label']:32s} "
                  f"cublas/best {cub / best['gpu_ms']:.3f} cublas/default {cub / dflt:.3f} "
                  f"{time.monotonic() - t0:.1f}s {('FAILED ' + ', '.join(bad)) if bad else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
