"""Time every selector candidate on a spread of GEMM shapes, side by side with cuBLAS: the data
the selector's model is fitted from (benchmarks/fit_selector.py), and the check of what
``autokernel.matmul`` picks. On the GPU machine:

    python3 benchmarks/select_sweep.py --out sweep.jsonl [--n 120] [--seed 7] [--time-budget 480]
    python3 benchmarks/select_sweep.py --shapes configs/shapes/broad.csv --out broad.jsonl
    python3 benchmarks/select_sweep.py --configs NEW.json --min-m 65 --n 400 --out fit_rows.jsonl
    python3 benchmarks/select_sweep.py --extra-configs TRIAL.json --shapes S.csv --out trial.jsonl

Shapes are drawn as real models' linear layers look (M tokens log-uniform from 1 to 16384,
N and K model widths, float16/bfloat16, mostly the nn.Linear layout), with a fixed seed, and
capped at 4 TFLOP per call so that a sweep fits one device call. With --shapes, the problems of a
shapes file instead (bias and activation included). Per shape: each candidate that applies
(``autokernel.select.why_not``), the default config, the config ``autokernel.matmul`` picks
(``pick``) and the one the previous rule picked (``previous``: the nearest shipped entry
within 4x, else the default) are checked once against a float32 reference, then all are
timed together with torch (cuBLAS, and the activation eagerly where there is one) by
``timing.race`` (CUDA graphs interleaved, GPU time per call). One JSON line per (shape,
config), flushed as measured; a row's ``roles`` says which of default, pick and previous
it is. With --configs, the configs of a JSON list instead of the candidates (with the
default, pick and previous as ever): the rows that fit a new config's constants
(``benchmarks/fit_selector.py --add-to``) before it joins the candidates. With
--extra-configs, those configs beside the candidates, wherever they fit in shared memory and
the TMA kernel takes the operands (the selector's rules do not filter them): whether a
config on trial beats the set where it runs.
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

from autokernel import api, best, matmul, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import ConfigError, KernelConfig, default_config, shared_memory_bytes
from autokernel.evaluate import reference, torch_function
from autokernel.records import Problem
from autokernel.select import rows_aligned, why_not
from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets, race
from autokernel.tuning.shapes import read_shapes

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
    """``fn(a, b, bias, out)`` on the next input set at each call."""
    cycle = itertools.cycle(sets)

    def call():
        fn(*next(cycle))

    return call


def previous_pick(p: Problem):
    """The config the previous rule launched: the shipped entry nearest to the shape within
    4x in each dimension (same dtype and activation), else the default config."""
    path = best.SHIPPED_DIR / f"{best.device_key(runtime.device_name())}.json"
    entry = best.load(path).nearest(p.m, p.n, p.k, p.dtype, p.activation, p.bias, p.layout) if path.is_file() else None
    return entry.config if entry is not None else default_config(p.m, p.n, p.k, p.torch_dtype)


def shapes_within(path: str, budget_s: float, since: float | None = None):
    """The problems of shapes file ``path`` until ``budget_s`` seconds (``time.time``) have
    passed since ``since`` (default: the first problem asked for); then "budget spent" is
    printed and no more come: a probe's loop over its shapes within one device call."""
    start = time.time() if since is None else since
    for p in read_shapes(path):
        if time.time() - start > budget_s:
            print("budget spent", flush=True)
            return
        yield p


def input_sets(p: Problem, seed: int, device: torch.device | None = None) -> list:
    """Operand sets (a, b, bias, out) of problem ``p`` on ``device`` (default the GPU), from
    seeds ``seed``, ``seed + 1``, ...: as many as ``make_input_sets`` asks for ``p``'s bytes."""
    dev = device or torch.device("cuda")

    def make(i: int):
        a, b, bias = p.make_inputs(dev, seed=seed + i)
        return a, b, bias, torch.empty(p.m, p.n, dtype=p.torch_dtype, device=dev)

    return make_input_sets(make, p.bytes, GRAPH_INPUT_SETS)


def sweep_problem(p: Problem, limit: int, extra: tuple = (), candidates: tuple = CANDIDATES) -> list[dict]:
    """Every one of ``candidates`` that applies, the default, pick and previous configs, and ``extra``
    (configs not among the candidates, timed wherever they fit in shared memory and the
    TMA kernel can take the operands: a candidate's trial before it joins the set), each
    checked and raced with torch: one row per config, then torch's."""
    tma = api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
    aligned = rows_aligned(p.k, p.layout)
    configs = [c for c in candidates if why_not(c, p.m, p.n, p.k, tma, runtime.sm_count(), aligned) is None
               and shared_memory_bytes(c, p.torch_dtype) <= limit]
    configs += [c for c in extra if c not in configs and (tma or c.variant != "tma")
                and shared_memory_bytes(c, p.torch_dtype) <= limit]
    dev = torch.device("cuda")
    sets = input_sets(p, 1000)
    a0, b0, _, out0 = sets[0]
    roles = {"default": default_config(p.m, p.n, p.k, p.torch_dtype, tma=tma), "previous": previous_pick(p),
             "pick": api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev,
                                        tma=api.tma_runs(a0, b0, out0), layout=p.layout)}
    for config in roles.values():
        if config not in configs:
            configs.append(config)
    rows = [{**p.to_dict(), "config": json.loads(config.to_json()), "label": config.short(),
             "default": config == roles["default"], "roles": [r for r, c in roles.items() if c == config]}
            for config in configs]
    runs = [(row, lambda a, b, bias, out=None, config=config: matmul(a, b, bias, p.activation, config=config, out=out))
            for row, config in zip(rows, configs)]
    torch_ms = race_checked(p, runs, sets)
    cublas = {**p.to_dict(), "config": None, "label": "cublas", "default": False, "roles": [], "status": "success",
              "gpu_ms": torch_ms}
    return rows + [cublas]


def race_configs(p: Problem, configs: list, seed: int = 3000,
                 device: torch.device | None = None) -> tuple[list[dict], float]:
    """``configs`` on problem ``p`` through ``matmul``, checked and raced beside torch
    (``race_checked``, operands from ``seed`` on ``device``, default the GPU): one row per
    config ("config": its short form, "status", "rel_error", "gpu_ms"), and torch's ms."""
    rows = [{"config": c.short()} for c in configs]
    runs = [(row, lambda a, b, bias, out=None, c=c: matmul(a, b, bias, p.activation, config=c, out=out))
            for row, c in zip(rows, configs)]
    return rows, race_checked(p, runs, input_sets(p, seed, device))


def race_checked(p: Problem, runs: list, sets: list) -> float:
    """Each of ``runs`` ((row, fn): ``fn(a, b, bias, out=None)`` computes problem ``p`` on
    the operands, into ``out`` if given) checked on the first of ``sets`` (``make_input_sets``
    of (a, b, bias, out)) against a float32 reference: row's "rel_error" and "status"
    ("success", "incorrect" or the exception's name, with "error"); then those that succeeded
    raced side by side with torch (``timing.race``, GPU time, cycling over ``sets``): row's
    "gpu_ms". Returns torch's ms (``torch.mm``, or eager addmm and the activation)."""
    a0, b0, bias0, _ = sets[0]
    ref = reference(a0, b0, bias0, p.activation)
    fns, timed = [], []
    for row, fn in runs:
        row["status"] = "success"
        try:
            out = fn(a0, b0, bias0)
            if out.is_cuda:
                torch.cuda.synchronize()
            err = float((out.float() - ref).norm() / ref.norm().clamp_min(1e-30))
            row["rel_error"] = err
            if not err < 2e-2:
                row["status"] = "incorrect"
        except Exception as exc:  # a config that fails is a row, not the end of the sweep
            row["status"], row["error"] = type(exc).__name__, str(exc).splitlines()[0][:200]
        if row["status"] == "success":
            fns.append(_call(sets, fn))
            timed.append(row)
    if p.activation == "none" and not p.bias:
        fns.append(_call(sets, lambda a, b, bias, out: torch.mm(a, b, out=out)))
    else:
        eager = torch_function(p)
        fns.append(_call(sets, lambda a, b, bias, out: eager(a, b, bias)))
    ms = race(fns, rounds=10, segment_ms=1.0)
    for row, t in zip(timed, ms):
        row["gpu_ms"] = t
    return ms[-1]


def as_record(rows: list[dict], torch_ms: float) -> list[dict]:
    """``race_checked``'s rows in the form of the probes' records (docs/runs/): "ok" for the
    status, GPU and torch µs rounded to four decimals."""
    for row in rows:
        row["rel_error"] = round(row.get("rel_error", float("nan")), 7)
        row["ok"] = row.pop("status") == "success"
        row["gpu_us"] = round(row.pop("gpu_ms", float("nan")) * 1e3, 4)
        row["cublas_us"] = round(torch_ms * 1e3, 4)
    return rows


def read_configs(path: str) -> tuple[KernelConfig, ...]:
    """The configs of a JSON list file; ValueError, in one line naming the file, if it cannot be read."""
    try:
        with open(path) as f:
            return tuple(KernelConfig.from_dict(d) for d in json.load(f))
    except (OSError, ValueError, TypeError, ConfigError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc).splitlines()[0]
        raise ValueError(f"{path}: {why}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", help="a shapes file (CSV or JSON) to measure instead of drawn shapes")
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip", type=int, default=0, help="skip the first SKIP drawn shapes (continue a sweep)")
    ap.add_argument("--time-budget", type=float, default=480.0, metavar="SECONDS")
    ap.add_argument("--configs", metavar="JSON",
                    help="time these configs (a JSON list of configs) instead of the selector's candidates, where "
                         "they apply: the rows that fit a config's constants before it joins the candidates")
    ap.add_argument("--extra-configs", metavar="JSON",
                    help="time these configs (a JSON list) beside the candidates, wherever they fit in shared "
                         "memory and the TMA kernel takes the operands: configs on trial against the set")
    ap.add_argument("--min-m", type=int, default=1, help="leave out drawn or listed problems of fewer rows")
    args = ap.parse_args(argv)
    candidates, extra = CANDIDATES, ()
    for flag, path in (("--configs", args.configs), ("--extra-configs", args.extra_configs)):
        if path:
            try:
                configs = read_configs(path)
            except ValueError as exc:
                print(f"error: {flag} {exc}", file=sys.stderr)
                return 2
            candidates, extra = (configs, extra) if flag == "--configs" else (candidates, configs)
    if runtime.INTERPRETER:
        print("error: the sweep times kernels on a GPU", file=sys.stderr)
        return 2
    limit = runtime.shared_memory_limit()
    start = time.monotonic()
    device = runtime.device_name()
    with open(args.out, "a") as f:
        problems = read_shapes(args.shapes) if args.shapes else draw_shapes(args.n, args.seed)
        problems = [p for p in problems if p.m >= args.min_m]
        for i, p in enumerate(problems[args.skip:], start=args.skip):
            if time.monotonic() - start > args.time_budget:
                print(f"time budget spent after {i} shapes", file=sys.stderr)
                break
            t0 = time.monotonic()
            rows = sweep_problem(p, limit, extra=extra, candidates=candidates)
            for row in rows:
                f.write(json.dumps({**row, "device": device, "index": i}) + "\n")
            f.flush()
            ok = [r for r in rows if r.get("gpu_ms") and r["label"] != "cublas"]
            best = min(ok, key=lambda r: r["gpu_ms"])
            cub = next(r["gpu_ms"] for r in rows if r["label"] == "cublas")
            role = {r: next((x["gpu_ms"] for x in ok if r in x["roles"]), float("nan"))
                    for r in ("default", "pick", "previous")}
            bad = [r["label"] for r in rows if r["status"] != "success"]
            print(f"{i:3d} {p.label():40s} n={len(rows) - 1:2d} best {best['label']:32s} torch/best "
                  f"{cub / best['gpu_ms']:.3f} torch/default {cub / role['default']:.3f} torch/pick "
                  f"{cub / role['pick']:.3f} torch/previous {cub / role['previous']:.3f} "
                  f"{time.monotonic() - t0:.1f}s {('FAILED ' + ', '.join(bad)) if bad else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
