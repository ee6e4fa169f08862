"""``matmul``'s pick on a GPU with a carried model, with and without the DRAM gain in proportion
to the SMs a grid's reads in flight fill (``select.Model.dram_gain``), side by side (GPU).

For each problem of a shapes file where the two picks differ (``best.pick`` with the carried
model as shipped, and with the same constants and ``dram_gain`` 1: the gain for every grid),
both configs checked against a float32 reference, then raced with torch (``timing.race``, GPU
time). One JSON line per problem, then the geomean of without / with (above 1: the shipped
pick faster). docs/selector.md, "A faster DRAM reaches a grid through the SMs it holds":

    python3 docs/runs/select/dram_gain_ab.py --shapes SHAPES.csv --out OUT.jsonl [--time-budget 400]
"""

import sys
from pathlib import Path

import torch

from autokernel import best, runtime, select

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from selector_ab import ab_arguments, changed_picks, geomean, race_pairs  # noqa: E402


def main() -> int:
    args = ab_arguments().parse_args()
    device = runtime.device_name()
    shipped = best.selector_model(device)
    if shipped is None or shipped.dram_gain == 1.0:
        print(f"{device}: no carried model with a DRAM gain here; nothing to compare")
        return 1
    flat = select.Model(shipped.device, shipped.programs, dict(shipped.constants), dict(shipped.errors),
                        based_on=shipped.based_on)
    problems, picks = changed_picks(args.shapes, flat, shipped)
    print(f"{len(problems)} problems whose pick the gain changes", flush=True)
    ratios, _, failed = race_pairs(problems, picks, args.out, args.time_budget, ("without", "with"))
    print(f"{len(ratios)} raced, {failed} failed the check; without / with the gain by reach: geomean {geomean(ratios):.3f}, "
          f"min {min(ratios, default=float('nan')):.3f}, max {max(ratios, default=float('nan')):.3f}, "
          f"{sum(r < 0.98 for r in ratios)} more than 2 % slower with it")
    torch.cuda.synchronize()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
