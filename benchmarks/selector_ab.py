"""``matmul``'s pick by the shipped selector model against its pick by another selector file
(the model before a change), side by side on the GPU.

For each problem of a shapes file where the two picks differ (``best.pick`` with each model;
a file fitted on another GPU of this architecture is carried here as the shipped one is,
``best.carry``), both configs are checked against a float32 reference and raced with torch
(``select_sweep.race_configs``, GPU time). One JSON line per problem, then the geomean of
before / shipped (above 1: the shipped pick faster) and how many picks changed by class:

    python3 benchmarks/selector_ab.py --before OLD.json --shapes SHAPES.csv --out OUT.jsonl [--time-budget 400]

OLD.json: e.g. ``git show REV:autokernel/configs/selector/nvidia-h100-80gb-hbm3.json``.
"""

import argparse
import collections
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from select_sweep import race_configs  # noqa: E402

from autokernel import api, best, runtime, select  # noqa: E402
from autokernel.report import problem_class  # noqa: E402
from autokernel.tuning.shapes import read_shapes  # noqa: E402


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def changed_picks(shapes: str, first: "select.Model", second: "select.Model"):
    """The problems of a shapes file on which ``matmul``'s pick (``best.pick`` on this GPU, in
    the mode its operands run) differs between two selector models, and the two picks."""
    device, limit = runtime.device_name(), runtime.shared_memory_limit()
    problems, picks = [], []
    for p in read_shapes(shapes):
        kw = dict(device=device, limit=limit, tma=api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout))
        pair = [best.pick(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, p.layout, model=m, **kw).config
                for m in (first, second)]
        if pair[0] != pair[1]:
            problems.append(p)
            picks.append(pair)
    return problems, picks


def race_pairs(problems, picks, out: str, time_budget: float, names: tuple[str, str]):
    """Race each problem's two configs (``picks``: (first, second) per problem), both checked,
    beside torch, until ``time_budget`` seconds are spent; one JSON line per problem to ``out``
    (the rows under ``names``). (first / second GPU-time ratios of the problems both ran,
    those ratios by class, how many problems failed a check)."""
    ratios, by_class, failed, start = [], collections.defaultdict(list), 0, time.monotonic()
    with open(out, "w") as f:
        for p, pair in zip(problems, picks):
            if time.monotonic() - start > time_budget:
                print("time budget spent")
                break
            rows, torch_ms = race_configs(p, pair)
            ok = all(r["status"] == "success" for r in rows)
            failed += not ok
            f.write(json.dumps({**p.to_dict(), names[0]: rows[0], names[1]: rows[1], "torch_ms": torch_ms}) + "\n")
            if ok:
                ratios.append(rows[0]["gpu_ms"] / rows[1]["gpu_ms"])
                by_class[problem_class(p)].append(ratios[-1])
                print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: {rows[0]['config']} {rows[0]['gpu_ms'] * 1e3:.1f} -> "
                      f"{rows[1]['config']} {rows[1]['gpu_ms'] * 1e3:.1f} µs ({ratios[-1]:.3f}x)", flush=True)
    return ratios, by_class, failed


def ab_arguments(description: str | None = None) -> argparse.ArgumentParser:
    """The arguments every A/B of two picks takes: the shapes file, the results file and the
    time budget (seconds) of the races."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--time-budget", type=float, default=400.0)
    return ap


def main() -> int:
    ap = ab_arguments(__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the selector file to compare the shipped model against")
    args = ap.parse_args()
    device = runtime.device_name()
    shipped = best.selector_model(device)
    before = select.Model.from_json(Path(args.before).read_text(), args.before)
    if before.device != device:
        before = best.carry(before, device)
    if shipped is None or before is None:
        print(f"{device}: no selector model for this GPU in both; nothing to compare", file=sys.stderr)
        return 2
    problems, picks = changed_picks(args.shapes, before, shipped)
    classes = collections.Counter(problem_class(p) for p in problems)
    print(f"{len(problems)} problems whose pick changes ({', '.join(f'{c} {n}' for c, n in sorted(classes.items()))})",
          flush=True)
    ratios, by_class, failed = race_pairs(problems, picks, args.out, args.time_budget, ("before", "shipped"))
    print(f"{len(ratios)} raced, {failed} failed the check; before / shipped: geomean {geomean(ratios):.3f}, "
          f"min {min(ratios, default=float('nan')):.3f}, max {max(ratios, default=float('nan')):.3f}, "
          f"{sum(r < 0.98 for r in ratios)} more than 2 % slower, {sum(r > 1.02 for r in ratios)} more than 2 % faster; "
          + ", ".join(f"{c} {geomean(v):.3f} ({len(v)})" for c, v in sorted(by_class.items())))
    torch.cuda.synchronize()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
