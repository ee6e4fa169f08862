"""Host time of the first call of a new GEMM shape without tuning: the pick, and the whole plan.

    python3 benchmarks/pick_overhead.py [--n 300] [--seed 0] [--gpu-name "NVIDIA H100 80GB HBM3"]

Per new shape (M, N, K drawn log-uniform, float16/bfloat16, nn.Linear's layout), two
figures, each the median and 90th percentile over the shapes, in µs of host time:

- pick: ``best.resolve``, what ``autokernel.matmul`` launches with when given no config
  (exact tuned entry, else the selector's choice, else the default) and nothing more;
- plan: the whole first-call path of ``autokernel.matmul`` before the kernel runs
  (``plans._make_plan``: argument layouts, the pick through ``best.resolve``, the fit to the
  device's shared memory, the kernel launch built), with first-use tuning off.

Every shape is new to the process (no cache hit); the selector's model is loaded and its
candidates prepared before timing, as after a process's first call. On a CPU (Triton's
interpreter) the GPU named by ``--gpu-name`` is simulated: its name and shared memory
stand in for this machine's, so the pick is the one made on that GPU; the plan then builds
the interpreter's launch, which differs from the GPU's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time

os.environ.pop("AUTOKERNEL_AUTOTUNE", None)

import torch  # noqa: E402

from autokernel import autotune, best, plans, runtime  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"
H100_SHARED_MEMORY = 232448
MAX_DIM = 8192


def draw(n: int, seed: int) -> list[tuple[int, int, int, torch.dtype]]:
    """``n`` distinct shapes: M log-uniform in [1, 8192], N and K multiples of 64 log-uniform in [64, 8192]."""
    rng = random.Random(seed)
    seen: set = set()
    out = []
    while len(out) < n:
        m = max(1, round(math.exp(rng.uniform(0, math.log(MAX_DIM)))))
        n_, k = (64 * max(1, round(math.exp(rng.uniform(0, math.log(MAX_DIM // 64))))) for _ in range(2))
        shape = (m, n_, k, rng.choice([torch.float16, torch.bfloat16]))
        if shape not in seen:
            seen.add(shape)
            out.append(shape)
    return out


def stats(times: list[float]) -> dict:
    times = sorted(t * 1e6 for t in times)
    return {"median_us": statistics.median(times), "p90_us": times[min(len(times) - 1, int(0.9 * len(times)))],
            "shapes": len(times)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="new shapes to time")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gpu-name", default=H100, help="the GPU whose pick is simulated on a CPU (ignored on a GPU)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    autotune.enable(False)
    if runtime.INTERPRETER:
        runtime.device_name = lambda device=None: args.gpu_name
        runtime.shared_memory_limit = lambda: H100_SHARED_MEMORY
        best.clear_cache()
    name = runtime.device_name()
    device = runtime.kernel_device()
    shapes = draw(2 * args.n + 1, args.seed)
    buffer = torch.empty(2 * MAX_DIM * MAX_DIM, dtype=torch.float16, device=device)

    def operands(m, n, k, dtype):
        data = buffer.view(dtype)
        return data[: m * k].view(m, k), data[m * k: m * k + n * k].view(n, k).t()  # x, and weight.t()

    # The model loaded and the candidates prepared: what a process's first call pays once.
    m, n, k, dtype = shapes[0]
    plans._make_plan(*operands(m, n, k, dtype), None, "none", 0.01, None, None, False)
    tma = runtime.has_tma() or runtime.INTERPRETER
    pick_times, plan_times = [], []
    for m, n, k, dtype in shapes[1: args.n + 1]:
        start = time.perf_counter()
        best.resolve(m, n, k, dtype, "none", False, device, False, tma, "nt")
        pick_times.append(time.perf_counter() - start)
    for m, n, k, dtype in shapes[args.n + 1:]:
        a, b = operands(m, n, k, dtype)
        start = time.perf_counter()
        plans._make_plan(a, b, None, "none", 0.01, None, None, False)
        plan_times.append(time.perf_counter() - start)
    result = {"device": name, "interpreter": runtime.INTERPRETER, "pick": stats(pick_times), "plan": stats(plan_times)}
    if args.json:
        print(json.dumps(result))
        return 0
    where = f"{name}, simulated on the CPU" if runtime.INTERPRETER else name
    print(f"first call of a new shape, host time ({where}; {args.n} new shapes each):")
    for label, key in (("pick (best.resolve)", "pick"), ("plan (matmul's first call before the kernel)", "plan")):
        print(f"  {label}: median {result[key]['median_us']:.1f} µs, p90 {result[key]['p90_us']:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
