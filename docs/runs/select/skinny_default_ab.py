"""The skinny default config on the TMA kernel against the pointer kernel's, side by side (GPU).

For each problem of a shapes file whose operands the TMA kernel takes and whose default
config differs by that (``default_config(..., tma=False)``, the grouped pointer kernel,
against ``tma=True``, the same tile on the TMA kernel: 65-256 rows, 64-row tiles), each checked
against a float32 reference, then raced with torch (``timing.race``, GPU time). One JSON line
per problem, then the geomean of pointer / TMA time.

    python3 docs/runs/select/skinny_default_ab.py --shapes SHAPES.csv --out OUT.jsonl [--limit 60]
"""

import argparse
import json
import math
import sys


from autokernel import api
from autokernel.config import default_config
from autokernel.tuning.shapes import read_shapes

sys.path.insert(0, "benchmarks")
from select_sweep import race_configs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=60)
    args = ap.parse_args()
    problems = [p for p in read_shapes(args.shapes) if api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
                and default_config(p.m, p.n, p.k, p.torch_dtype, gpu=True)
                != default_config(p.m, p.n, p.k, p.torch_dtype, gpu=True, tma=True)][:args.limit]
    ratios, failed = [], 0
    with open(args.out, "w") as f:
        for p in problems:
            configs = [default_config(p.m, p.n, p.k, p.torch_dtype, gpu=True, tma=t) for t in (False, True)]
            rows, torch_ms = race_configs(p, configs)
            ok = all(r["status"] == "success" for r in rows)
            failed += not ok
            row = {**p.to_dict(), "pointer": rows[0], "tma": rows[1], "torch_ms": torch_ms}
            f.write(json.dumps(row) + "\n")
            if ok:
                ratios.append(rows[0]["gpu_ms"] / rows[1]["gpu_ms"])
                print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.activation}: {rows[0]['config']} "
                      f"{rows[0]['gpu_ms'] * 1e3:.1f} -> "
                      f"{rows[1]['config']} {rows[1]['gpu_ms'] * 1e3:.1f} µs ({ratios[-1]:.3f}x)", flush=True)
    g = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    print(f"{len(problems)} problems, {failed} failed the check; pointer / TMA default time: geomean {g:.3f}, "
          f"min {min(ratios, default=float('nan')):.3f}, max {max(ratios, default=float('nan')):.3f}, "
          f"{sum(r < 0.98 for r in ratios)} more than 2 % slower on the TMA kernel")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
