"""GPU: is the tuner's winner within 99 % of the exhaustive best, timed side by side?

Issue 7's target compares a 24-trial `tune` run's winner with the best config of the
exhaustive sweep (tests/data/sweep_h100.csv). Judged by figures from two different runs,
the answer moves with the GPU's state (the H100 sits at its 700 W power cap under
sustained GEMM load and its SM clock wanders between ~1.2 and 1.4 GHz), so this script
times the candidates in one process, side by side: the tuner's winner, the sweep's TOP
fastest configs and the default config, ROUNDS times, each time in a fresh random order,
through the tuner's own re-time (evaluate_side_by_side: fp32-reference check, event
timer, then every config's CUDA-graph time interleaved in short segments, timing.race).
Per config the median over the ROUNDS; the verdict is the winner's throughput over the
best median's, by GPU time (gpu_ms, what tuning ranks by) and by event time (ms).

Usage (after scripts/tune_targets.sh wrote OUTDIR/tune_cold_*.json):
  python3 scripts/tune_sbs.py OUTDIR tests/data/sweep_h100.csv [--top 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", type=Path)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import warnings

    warnings.simplefilter("ignore")
    from autokernel.config import KernelConfig
    from autokernel.evaluate import evaluate_side_by_side
    from autokernel.history import History
    from autokernel.problem import Problem
    from autokernel.tuning.loop import space_default
    from autokernel.tuning.space import SearchSpace, config_key
    from autokernel.tuning.strategies.base import problem_rows

    sweep = History(args.sweep).read()
    rng = random.Random(args.seed)
    summary = []
    for f in sorted(args.outdir.glob("tune_cold_*.json")):
        result = json.loads(f.read_text())[0]
        problem = Problem(**result["problem"])
        winner = KernelConfig(**result["best"]["config"])
        rows = sorted(((c, r) for c, r in problem_rows(sweep, problem) if r["status"] == "success"),
                      key=lambda cr: cr[1]["gpu_ms"] if cr[1]["gpu_ms"] is not None else cr[1]["ms"])
        if not rows:
            print(f"{problem.label()}: no successful row in {args.sweep}; skipped", file=sys.stderr)
            continue
        sweep_best = rows[0][0]
        roles: dict[tuple, tuple[KernelConfig, list[str]]] = {}

        def add(cfg: KernelConfig, role: str) -> None:
            roles.setdefault(config_key(cfg), (cfg, []))[1].append(role)

        add(winner, "winner")
        ranked: dict[tuple, KernelConfig] = {}  # unique configs, fastest reading first
        for cfg, _ in rows:
            ranked.setdefault(config_key(cfg), cfg)
        ranked = list(ranked.values())
        for i, cfg in enumerate(ranked[:args.top]):
            add(cfg, f"sweep#{i + 1}")
        add(space_default(problem, SearchSpace.for_problem(problem)), "default")  # as the tuner tried it
        readings: dict[tuple, list[tuple[float, float]]] = {key: [] for key in roles}
        for _ in range(args.rounds):
            order = list(roles)
            rng.shuffle(order)
            for key, t in zip(order, evaluate_side_by_side(problem, [roles[key][0] for key in order])):
                if t.status == "success":
                    readings[key].append((t.gpu_ms if t.gpu_ms is not None else t.ms, t.ms))  # no graph time under the interpreter
                else:
                    print(f"  {roles[key][0].short()}: {t.status} {t.error}", file=sys.stderr)
        med = {key: (statistics.median(g for g, _ in r), statistics.median(e for _, e in r))
               for key, r in readings.items() if r}
        print(f"\n{problem.label()}  ({args.rounds} side-by-side races; median gpu_ms / ms in us)")
        for key, (g, e) in sorted(med.items(), key=lambda kv: kv[1][0]):
            cfg, role = roles[key]
            print(f"  {cfg.short():40s} {g * 1e3:8.1f} {e * 1e3:8.1f}  {', '.join(role)}", flush=True)
        if not med:
            print(f"{problem.label()}: every config failed every round; skipped", file=sys.stderr)
            continue
        best_g = min(g for g, _ in med.values())
        best_e = min(e for _, e in med.values())
        nan = (float("nan"), float("nan"))  # a config that failed every round: no verdict, the rest kept
        won, sb = med.get(config_key(winner), nan), med.get(config_key(sweep_best), nan)
        line = {"problem": problem.label(), "winner": winner.short(), "sweep_best": sweep_best.short(),
                "winner_vs_best_gpu": best_g / won[0], "winner_vs_best_event": best_e / won[1],
                "sweep_best_vs_best_gpu": best_g / sb[0],
                "readings": {roles[k][0].short(): v for k, v in readings.items()}}
        summary.append(line)
        (args.outdir / "tune_sbs.jsonl").open("a").write(json.dumps(line) + "\n")
    print("\nproblem | tuner's winner | winner / best (GPU time) | winner / best (event time) | sweep's best / best (GPU time)")
    for s in summary:
        print(f"{s['problem']} | {s['winner']} | {s['winner_vs_best_gpu']:.4f} | {s['winner_vs_best_event']:.4f} | "
              f"{s['sweep_best_vs_best_gpu']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
