"""Tuning on first use against the tuned best and torch, side by side, on new shapes (GPU).

    python3 benchmarks/first_use.py --out first_use.jsonl [--n 40] [--seed 11] [--time-budget 480]
    python3 benchmarks/first_use.py --out first_use.jsonl --shapes SHAPES.csv --tuned best.json

Per shape (drawn as ``benchmarks/select_sweep.py`` draws them, a seed per run, or the
problems of a shapes file):

- pick: what ``autokernel.matmul`` launches without tuning (``best.resolve``);
- first use: the config tuning on first use keeps (``AUTOKERNEL_AUTOTUNE`` on, a fresh
  cache directory for the run: the first call of the shape races the selector's best
  few and keeps the winner), with the host time that first call took;
- best: the fastest of the selector's reach, raced in full: every candidate that
  applies (``select.why_not``), the default and the pick (not the tuner's whole space);
- tuned (with ``--tuned``, a file of ``autokernel export-best``): the config a full tune
  kept for exactly the problem (``autokernel loop --shapes`` over the same file), raced
  with the others and counted in best;
- torch: cuBLAS (``torch.mm``; with a bias or activation, torch's eager addmm and activation).

Each config is checked once against a float32 reference, then all are timed together
by ``timing.race`` (CUDA graphs interleaved, GPU time per call). One JSON line per
shape, flushed as measured, and a summary at the end: geomeans of first use / best
(the target: >= 0.98), pick / best, torch / pick, torch / first use, torch / best, and
the first call's host time. Under Triton's interpreter (``--smoke``: tiny shapes, a
few wall-clock calls each instead of the race) it only checks that the path runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time

import torch

from autokernel import autotune, best, matmul, plans, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import KernelConfig, default_config, fit_error
from autokernel.evaluate import reference, torch_function
from autokernel.records import Problem
from autokernel.select import rows_aligned, why_not
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets, race, time_fn
from autokernel.tuning.shapes import read_shapes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from select_sweep import draw_shapes  # noqa: E402  (the sweep's draw: shapes like real linear layers)

TOLERANCE = 2e-2


def smoke_shapes(n: int, seed: int) -> list[Problem]:
    """Tiny problems for the interpreter."""
    import random

    rng = random.Random(seed)
    return [Problem(rng.randint(1, 40), 16 * rng.randint(1, 3), 16 * rng.randint(1, 3), "float16", layout="nt")
            for _ in range(n)]


def timed(fns: list, interpreter: bool) -> list[float]:
    if interpreter:
        return [float(time_fn(fn, reps=2).ms) for fn in fns]
    return race(fns, rounds=10, segment_ms=1.0)


def measure(p: Problem, interpreter: bool, tuned: KernelConfig | None = None) -> dict:
    dev = runtime.kernel_device()
    limit = runtime.shared_memory_limit()

    def make(i: int):
        a, b, bias = p.make_inputs(dev, seed=1000 + i)
        return a, b, bias, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)

    sets = make_input_sets(make, p.bytes, 2 if interpreter else GRAPH_INPUT_SETS)
    a0, b0, bias0, out0 = sets[0]
    tma = plans.tma_runs(a0, b0, out0)
    layout = plans.operand_layout(a0, b0)
    autotune.enable(False)
    pick, _ = best.resolve(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev, False, tma, layout)
    # First use: the first call of the shape in this process, tuning on.
    autotune.enable(True)
    plans.clear_launch_cache()
    start = time.perf_counter()
    matmul(a0, b0, bias0, p.activation)
    if not interpreter:
        torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start
    key = autotune.Key.of(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias,
                          mode=layout + ("" if tma else "/no-tma"))
    first = autotune.cache().get(key) or pick  # none raced (an exact tuned entry): the pick
    autotune.enable(False)
    plans.clear_launch_cache()
    programs = runtime.sm_count() or 4
    reach = [c for c in CANDIDATES if why_not(c, p.m, p.n, p.k, tma, programs, rows_aligned(p.k, layout)) is None
             and (limit is None or fit_error(c, p.torch_dtype, limit, tma, p.bias, False) is None)]
    configs = []
    for c in [pick, first, default_config(p.m, p.n, p.k, p.torch_dtype), *([tuned] if tuned else []), *reach]:
        if c not in configs:
            configs.append(c)
    ref = reference(a0, b0, bias0, p.activation)
    ok, fns = [], []
    for config in configs:
        try:
            out = matmul(a0, b0, bias0, p.activation, config=config)
            err = float((out.float() - ref).norm() / ref.norm().clamp_min(1e-30))
        except Exception:  # a candidate that fails is left out of the race, not the end of the run
            continue
        if err < TOLERANCE:
            ok.append(config)
            fns.append(_call(sets, lambda a, b, bias, out, config=config:
                             matmul(a, b, bias, p.activation, config=config, out=out)))
    if p.activation == "none" and not p.bias:
        fns.append(_call(sets, lambda a, b, bias, out: torch.mm(a, b, out=out)))
    else:
        eager = torch_function(p)
        fns.append(_call(sets, lambda a, b, bias, out: eager(a, b, bias)))
    ms = timed(fns, interpreter)
    by_config = dict(zip(ok, ms))
    best_config = min(ok, key=by_config.get)
    return {**p.to_dict(), "pick": pick.short(), "first_use": first.short(), "best": best_config.short(),
            "tuned": tuned.short() if tuned else None,
            "pick_ms": by_config.get(pick), "first_use_ms": by_config.get(first), "best_ms": by_config[best_config],
            "tuned_ms": by_config.get(tuned) if tuned else None,
            "torch_ms": ms[-1], "raced_configs": len(ok), "first_call_s": first_call_s}


def _call(sets, fn):
    i = [0]

    def call():
        fn(*sets[i[0] % len(sets)])
        i[0] += 1

    return call


def geomean(values) -> float:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(rows: list[dict], interpreter: bool = False) -> str:
    ok = [r for r in rows if r["pick_ms"] and r["first_use_ms"]]
    firsts = sorted(r["first_call_s"] for r in rows)
    lines = [
        f"{len(ok)} shapes ({'wall time under the interpreter' if interpreter else 'GPU time'}, geomeans):",
        f"  first use / best {geomean(r['best_ms'] / r['first_use_ms'] for r in ok):.3f}, "
        f"pick / best {geomean(r['best_ms'] / r['pick_ms'] for r in ok):.3f}",
        f"  torch / pick {geomean(r['torch_ms'] / r['pick_ms'] for r in ok):.3f}, "
        f"torch / first use {geomean(r['torch_ms'] / r['first_use_ms'] for r in ok):.3f}, "
        f"torch / best {geomean(r['torch_ms'] / r['best_ms'] for r in ok):.3f}",
        f"  first call with tuning on (host): median {firsts[len(firsts) // 2]:.2f} s, max {firsts[-1]:.2f} s",
    ]
    tuned = [r for r in ok if r.get("tuned_ms")]
    if tuned:
        lines.append(f"  {len(tuned)} with a tuned config: pick / tuned {geomean(r['tuned_ms'] / r['pick_ms'] for r in tuned):.3f}, "
                     f"first use / tuned {geomean(r['tuned_ms'] / r['first_use_ms'] for r in tuned):.3f}, "
                     f"torch / tuned {geomean(r['torch_ms'] / r['tuned_ms'] for r in tuned):.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--time-budget", type=float, default=480.0, metavar="SECONDS")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes under Triton's interpreter (a CPU check)")
    ap.add_argument("--shapes", help="a shapes file (CSV or JSON) to measure instead of drawn shapes")
    ap.add_argument("--tuned", help="a file of `autokernel export-best`: its config for each problem joins the race")
    args = ap.parse_args(argv)
    if runtime.INTERPRETER and not args.smoke:
        print("error: first_use.py times kernels on a GPU (--smoke checks the path on the CPU)", file=sys.stderr)
        return 2
    os.environ["AUTOKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="autokernel-first-use-")  # a fresh cache
    if args.shapes:
        problems = read_shapes(args.shapes)
    else:
        problems = smoke_shapes(args.n, args.seed) if args.smoke else draw_shapes(args.n, args.seed)
    tuned = best.load(args.tuned) if args.tuned else None
    start = time.monotonic()
    rows = []
    with open(args.out, "a") as f:
        for i, p in enumerate(problems):
            if time.monotonic() - start > args.time_budget:
                print(f"time budget spent after {i} shapes", file=sys.stderr)
                break
            config = tuned.config_for(p) if tuned else None
            row = {**measure(p, runtime.INTERPRETER, config), "device": runtime.device_name(), "index": i}
            f.write(json.dumps(row) + "\n")
            f.flush()
            rows.append(row)
            ms = {k: "-" if row[k] is None else f"{row[k]:.4f}" for k in ("pick_ms", "first_use_ms", "best_ms", "torch_ms")}
            print(f"{p.label()}: pick {row['pick']} {ms['pick_ms']} ms, first use {row['first_use']} "
                  f"{ms['first_use_ms']} ms, best {row['best']} {ms['best_ms']} ms, torch {ms['torch_ms']} ms, "
                  f"first call {row['first_call_s']:.2f} s", flush=True)
    if rows:
        print(summarize(rows, runtime.INTERPRETER))
    return 0


if __name__ == "__main__":
    sys.exit(main())
