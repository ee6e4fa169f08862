"""What the TMA kernel's stream-K tail changes in ``autokernel.matmul``'s own pick, measured:
on the problems of a shapes file, the pick with the stream-K candidates and the pick without
them (the selector as before), each checked against a float32 reference and raced side by
side with cuBLAS (``timing.race``: GPU time) wherever the two picks differ. On the GPU
machine:

    python3 benchmarks/streamk_pick.py --shapes SHAPES.csv --out OUT.jsonl

With ``--before PACKAGE`` (an older version importable as PACKAGE: a copy of autokernel/
with every ``autokernel`` renamed, docs/launch.md has the step), "old" is that version's
own pick instead, and both run through this checkout's kernels.

One JSON line per problem whose pick changed (both configs, their GPU µs and cuBLAS's), then
a summary: how many picks changed, the geomean of old / new time over those, and the same
over every problem (1 where the pick did not change).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys

import torch

from autokernel import api, best, matmul, select
from autokernel.config import KernelConfig
from autokernel.candidates import CANDIDATES
from autokernel.evaluate import reference, torch_function
from autokernel.timing import race
from autokernel.tuning.shapes import read_shapes

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from select_sweep import _call, input_sets  # noqa: E402


def _resolve(api_module, problems) -> list:
    """``api_module.resolve_config`` with no config for each problem: the pick."""
    dev = torch.device("cuda")
    return [api_module.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev,
                                      tma=api_module.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout),
                                      layout=p.layout)
            for p in problems]


def picks(problems, candidates) -> list:
    """``matmul``'s pick for each problem with ``candidates`` as the selector's set."""
    select.CANDIDATES = candidates
    best.clear_cache()
    return _resolve(api, problems)


def picks_before(problems, package: str) -> list:
    """``matmul``'s pick for each problem in the version importable as ``package``, as this
    version's configs."""
    old = _resolve(importlib.import_module(f"{package}.api"), problems)
    return [KernelConfig.model_validate(json.loads(config.to_json())) for config in old]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--before", metavar="PACKAGE", help="compare with this older version's pick instead")
    args = ap.parse_args(argv)
    problems = read_shapes(args.shapes)
    new = picks(problems, CANDIDATES)
    old = (picks_before(problems, args.before) if args.before
           else picks(problems, tuple(c for c in CANDIDATES if not c.stream_k)))
    select.CANDIDATES = CANDIDATES
    ratios, cublas_new, cublas_old, failed = [], [], [], 0
    with open(args.out, "w") as f:
        for p, n_cfg, o_cfg in zip(problems, new, old):
            if n_cfg == o_cfg:
                continue

            sets = input_sets(p, 2000)
            a0, b0, bias0, _ = sets[0]
            ref = reference(a0, b0, bias0, p.activation)
            errors = []
            for config in (n_cfg, o_cfg):
                out = matmul(a0, b0, bias0, p.activation, config=config)
                torch.cuda.synchronize()
                errors.append(float((out.float() - ref).norm() / ref.norm().clamp_min(1e-30)))
            ok = all(e < 2e-2 for e in errors)
            failed += not ok
            fns = [_call(sets, lambda a, b, bias, out, c=c: matmul(a, b, bias, p.activation, config=c, out=out))
                   for c in (n_cfg, o_cfg)]
            if p.activation == "none" and not p.bias:
                fns.append(_call(sets, lambda a, b, bias, out: torch.mm(a, b, out=out)))
            else:
                eager = torch_function(p)
                fns.append(_call(sets, lambda a, b, bias, out: eager(a, b, bias)))
            t_new, t_old, t_cublas = race(fns, rounds=10, segment_ms=1.0)
            row = {**p.to_dict(), "new": n_cfg.short(), "old": o_cfg.short(), "new_us": t_new * 1e3,
                   "old_us": t_old * 1e3, "cublas_us": t_cublas * 1e3, "rel_errors": errors, "ok": ok}
            f.write(json.dumps(row) + "\n")
            f.flush()
            ratios.append(t_old / t_new)
            cublas_new.append(t_cublas / t_new)
            cublas_old.append(t_cublas / t_old)
            print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.layout}: {o_cfg.short()} {t_old * 1e3:.1f} -> {n_cfg.short()} "
                  f"{t_new * 1e3:.1f} µs ({t_old / t_new:.3f}x; cuBLAS {t_cublas * 1e3:.1f}){'' if ok else ' WRONG'}",
                  flush=True)

    def g(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

    print(f"{len(problems)} problems, {len(ratios)} picks changed, {failed} failed the check; over those: "
          f"old/new {g(ratios):.3f} (min {min(ratios, default=float('nan')):.3f}, max "
          f"{max(ratios, default=float('nan')):.3f}), cuBLAS/new {g(cublas_new):.3f} against cuBLAS/old "
          f"{g(cublas_old):.3f}; over every problem old/new {g(ratios + [1.0] * (len(problems) - len(ratios))):.4f}; "
          f"{sum(r < 0.98 for r in ratios)} more than 2 % slower")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
