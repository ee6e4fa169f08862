"""The skinny default config on the TMA kernel against the pointer kernel's, side by side (GPU).

For each problem of a shapes file whose operands the TMA kernel takes and whose default
config differs by that (``default_config(..., tma=False)``, the grouped pointer kernel,
against ``tma=True``, the same tile on the TMA kernel: 65-256 rows, 64-row tiles), each checked
against a float32 reference, then raced with torch (``timing.race``, GPU time). One JSON line
per problem, then the geomean of pointer / TMA time.

    python3 docs/runs/select/skinny_default_ab.py --shapes SHAPES.csv --out OUT.jsonl [--limit 60]
"""

import argparse
import math
import sys


from autokernel import api
from autokernel.config import default_config
from autokernel.tuning.shapes import read_shapes

sys.path.insert(0, "benchmarks")
from selector_ab import geomean, race_pairs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=60)
    args = ap.parse_args()
    problems = [p for p in read_shapes(args.shapes) if api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
                and default_config(p.m, p.n, p.k, p.torch_dtype, gpu=True)
                != default_config(p.m, p.n, p.k, p.torch_dtype, gpu=True, tma=True)][:args.limit]
    configs = [[default_config(p.m, p.n, p.k, p.torch_dtype, gpu=True, tma=t) for t in (False, True)] for p in problems]
    ratios, _, failed = race_pairs(problems, configs, args.out, math.inf, ("pointer", "tma"))
    g = geomean(ratios)
    print(f"{len(problems)} problems, {failed} failed the check; pointer / TMA default time: geomean {g:.3f}, "
          f"min {min(ratios, default=float('nan')):.3f}, max {max(ratios, default=float('nan')):.3f}, "
          f"{sum(r < 0.98 for r in ratios)} more than 2 % slower on the TMA kernel")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
