"""Tuner quality: how many trials each strategy needs to reach 98 % of the exhaustive best,
replayed from a recorded sweep (no GPU needed; every trial's time is the sweep's reading).

    python3 benchmarks/tuner_quality.py tests/data/sweep_h100.csv [--seeds 5] [--budget 96] [--fraction 0.98]

Prints a markdown table: per problem, the median over the seeds of the trials each
strategy took, and in brackets how many seeds reached the target within the budget.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from autokernel.tuning.replay import compare_strategies

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=96)
    parser.add_argument("--fraction", type=float, default=0.98)
    parser.add_argument("--strategies", default="grid,random,optuna,auto")
    parser.add_argument("--no-prior", action="store_true", help="the strategy alone: no default config tried first")
    args = parser.parse_args(argv)

    names = args.strategies.split(",")
    rows = compare_strategies(args.sweep, names, range(args.seeds), budget=args.budget, fraction=args.fraction,
                              prior=not args.no_prior)
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    print(f"trials to reach {args.fraction:.0%} of the exhaustive best (median over {args.seeds} seeds; "
          f"[reached/seeds] within {args.budget} trials; "
          f"{'the strategy alone' if args.no_prior else 'the default config tried first, as tune does'})\n")
    print("| problem | configs | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for p in problems:
        cells = []
        for name in names:
            got = [r["trials"] for r in rows if r["problem"] == p and r["strategy"] == name]
            reached = [t for t in got if t is not None]
            med = statistics.median(t if t is not None else args.budget + 1 for t in got)
            cells.append(f"{med:g} [{len(reached)}/{len(got)}]" if med <= args.budget else f">{args.budget} [{len(reached)}/{len(got)}]")
        space = next(r["space"] for r in rows if r["problem"] == p)
        print(f"| {p} | {space} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
