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
best median's, by GPU time (gpu_ms, what tuning ranks by) and by event time (ms), and
which config that best one was.

The sweep predates the fields in NEWER_FIELDS, and a sweep of today's space (~1800
configs a shape) does not fit the device time. With --neighbours (the default) the race
also takes, for the winner and the sweep's NEIGHBOUR_TOP fastest configs, every variant
along those fields that the problem's search space accepts (`neighbours`; a
warp-specialized variant keeps the MMA warps, so it may change num_warps too): the part of
today's space nearest to the sweep's optimum, where a faster config the sweep could not
see is likeliest. A variant's role says whence it came ("sweep#2+flatten").

Usage (after scripts/tune_targets.sh wrote OUTDIR/tune_cold_*.json):
  python3 scripts/tune_sbs.py OUTDIR tests/data/sweep_h100.csv [--top 8] [--rounds 5]
      [--no-neighbours | --neighbour-top 4]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autokernel.config import KernelConfig
    from autokernel.records import Problem
    from autokernel.tuning.space import SearchSpace

NEWER_FIELDS = ("split_k", "warp_specialize", "epilogue_subtile", "flatten", "stream_k")
"""The KernelConfig fields tests/data/sweep_h100.csv predates (its configs load with their defaults)."""

# The header's time estimate. Per config and round: evaluate's check and event timer (~0.2 s:
# time_fn's 25 ms warm-up and 100 ms of timed calls, inputs, the fp32 reference) and its part
# of the race (warm-up, two graph captures, 30 rounds x 2 ms, timing.race), as the tuner's
# ~0.27 s per candidate (docs/tuning.md). Once per config Triton has not compiled on this
# machine: its compile, in this one process (~2 s, a guess from the compile workers' 3.9-5.4 s
# of which ~3.5 s were imports).
_PER_CONFIG_ROUND_S = 0.3
_COMPILE_S = 2.0


def neighbours(base: KernelConfig, space: SearchSpace) -> list[tuple[str, KernelConfig]]:
    """(suffix, config) for every variant of ``base`` along NEWER_FIELDS that ``space``
    accepts, each once, ``base`` itself left out. The suffix names what changed, e.g.
    "+epilogue_subtile=2+flatten" or "+num_warps=4+warp_specialize".

    ``base`` is first made canonical (space.canonical: a group_m past the problem's
    tile-rows launches the same tile order). A variant differs from that in NEWER_FIELDS,
    and where it turns warp_specialize on or off, perhaps in num_warps too: warp
    specialization runs two consumer warpgroups of num_warps warps each and takes
    num_warps=4 only, so the warp-specialized twin of the sweep's 8-warp configs has 4
    (as docs/kernel-notes.md compared them); both the twin with the same MMA warps and the
    one with the same num_warps are tried. KernelConfig's own cross-field rules
    (build_config) and the space's (why_invalid: e.g. no warp_specialize with flatten)
    decide which variants exist."""
    from autokernel.tuning.space import _WS_CONSUMER_GROUPS, PARAMS, build_config, config_key

    base = space.canonical(base)
    values = {name: getattr(base, name) for name in PARAMS}
    mma_warps = base.num_warps * (_WS_CONSUMER_GROUPS if base.warp_specialize else 1)
    seen = {config_key(base)}
    out = []
    for combo in itertools.product(*(space.choices[name] for name in NEWER_FIELDS)):
        update = dict(zip(NEWER_FIELDS, combo))
        warps = {base.num_warps}
        if update["warp_specialize"] != base.warp_specialize:
            warps.add(mma_warps // (_WS_CONSUMER_GROUPS if update["warp_specialize"] else 1))
        for num_warps in sorted(warps & set(space.choices["num_warps"])):
            config = build_config({**values, **update, "num_warps": num_warps})
            if config is None or config_key(config) in seen or not space.contains(config):
                continue
            seen.add(config_key(config))
            out.append(("".join(_change(name, getattr(config, name)) for name in PARAMS
                                if getattr(config, name) != values[name]), config))
    return out


def _change(name: str, value: object) -> str:
    """One changed field in a role: "+flatten" or "-flatten" for a flag, "+split_k=4" else."""
    if isinstance(value, bool):
        return ("+" if value else "-") + name
    return f"+{name}={value}"


def race_roles(problem: Problem, winner: KernelConfig, ranked: list[KernelConfig], space: SearchSpace, *,
               top: int, neighbour_top: int | None) -> dict[tuple, tuple[KernelConfig, list[str]]]:
    """The configs to race for ``problem``, by config_key: (config, its roles). The winner,
    the first ``top`` of ``ranked`` (the sweep's unique configs, fastest first), the default
    config as the tuner tried it, and the variants (``neighbours``) of the winner and of the
    first ``neighbour_top`` of ``ranked`` (None: no variants at all). A config reached twice
    is raced once, with both roles."""
    from autokernel.tuning.loop import space_default
    from autokernel.tuning.space import config_key

    roles: dict[tuple, tuple[KernelConfig, list[str]]] = {}

    def add(config: KernelConfig, role: str) -> None:
        roles.setdefault(config_key(config), (config, []))[1].append(role)

    add(winner, "winner")
    for i, config in enumerate(ranked[:top]):
        add(config, f"sweep#{i + 1}")
    add(space_default(problem, space), "default")
    if neighbour_top is None:
        return roles
    bases = [("winner", winner)] + [(f"sweep#{i + 1}", config) for i, config in enumerate(ranked[:neighbour_top])]
    for role, base in bases:
        for suffix, config in neighbours(base, space):
            add(config, role + suffix)
    return roles


def _precompile(plans) -> None:
    """Launch every config once in the tuner's compile workers (one per core, at most 16;
    its compile phase alone: WorkerEvaluator.precompile): the binaries land in Triton's
    cache, where the races load them."""
    import time

    from autokernel.tuning.worker import WorkerEvaluator

    def failed(_: int, trial) -> None:
        if trial is not None:
            print(f"  precompile {trial.config.short()}: {trial.status} {trial.error}", file=sys.stderr)

    start = time.perf_counter()
    with WorkerEvaluator(spare=False) as workers:
        for problem, _, _, roles in plans:
            if not workers.precompile(problem, [cfg for cfg, _ in roles.values()], failed):
                return  # the interpreter: nothing to compile
    print(f"precompiled in {time.perf_counter() - start:.0f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir", type=Path)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--neighbours", action=argparse.BooleanOptionalAction, default=True,
                    help="also race the variants along NEWER_FIELDS of the winner and the sweep's fastest configs")
    ap.add_argument("--neighbour-top", type=int, default=4,
                    help="whose variants: the sweep's this many fastest configs (at most --top: each base races too)")
    ap.add_argument("--precompile", action=argparse.BooleanOptionalAction, default=True,
                    help="compile every config first, in parallel, in the tuner's compile workers "
                         "(else each compiles in turn inside its first race)")
    args = ap.parse_args()
    if args.neighbours and args.neighbour_top > args.top:
        ap.error("--neighbour-top is at most --top: a variant is raced beside its base")

    import warnings

    warnings.simplefilter("ignore")
    from autokernel.config import KernelConfig
    from autokernel.evaluate import evaluate_side_by_side
    from autokernel.history import History
    from autokernel.records import Problem
    from autokernel.tuning.space import SearchSpace, config_key
    from autokernel.tuning.strategies.base import problem_rows

    sweep = History(args.sweep).read()
    rng = random.Random(args.seed)
    plans = []  # (problem, winner, sweep's best, roles): all built first, for the header's count
    for f in sorted(args.outdir.glob("tune_cold_*.json")):
        result = json.loads(f.read_text())[0]
        problem = Problem(**result["problem"])
        winner = KernelConfig(**result["best"]["config"])
        rows = sorted(((c, r) for c, r in problem_rows(sweep, problem) if r["status"] == "success"),
                      key=lambda cr: cr[1]["gpu_ms"] if cr[1]["gpu_ms"] is not None else cr[1]["ms"])
        if not rows:
            print(f"{problem.label()}: no successful row in {args.sweep}; skipped", file=sys.stderr)
            continue
        ranked: dict[tuple, KernelConfig] = {}  # unique configs, fastest reading first
        for cfg, _ in rows:
            ranked.setdefault(config_key(cfg), cfg)
        roles = race_roles(problem, winner, list(ranked.values()), SearchSpace.for_problem(problem), top=args.top,
                           neighbour_top=args.neighbour_top if args.neighbours else None)
        plans.append((problem, winner, rows[0][0], roles))
    configs = sum(len(roles) for *_, roles in plans)
    print(f"Configs raced per shape, {args.rounds} times each: "
          + ", ".join(f"{problem.label()} {len(roles)}" for problem, *_, roles in plans)
          + f" ({configs} in all). Estimated ~{configs * args.rounds * _PER_CONFIG_ROUND_S:.0f} s of checking and "
          f"racing, plus up to ~{configs * _COMPILE_S:.0f} s compiling the configs Triton has not cached", flush=True)

    if args.precompile:
        _precompile(plans)

    summary = []
    for problem, winner, sweep_best, roles in plans:
        readings: dict[tuple, list[tuple[float, float]]] = {key: [] for key in roles}
        for i in range(args.rounds):
            order = list(roles)
            rng.shuffle(order)
            trials = evaluate_side_by_side(problem, [roles[key][0] for key in order])
            for key, t in zip(order, trials):
                if t.status == "success":
                    readings[key].append((t.gpu_ms if t.gpu_ms is not None else t.ms, t.ms))  # no graph time under the interpreter
                else:
                    print(f"  {roles[key][0].short()}: {t.status} {t.error}", file=sys.stderr)
            # One config's failed capture fails the whole race: then each is timed alone, not side by side.
            if notes := {t.note for t in trials if t.note}:
                print(f"  round {i + 1}: {'; '.join(sorted(notes))}", file=sys.stderr)
        med = {key: (statistics.median(g for g, _ in r), statistics.median(e for _, e in r))
               for key, r in readings.items() if r}
        print(f"\n{problem.label()}  ({args.rounds} side-by-side races of {len(roles)} configs; "
              f"median gpu_ms / ms in us)")
        for key, (g, e) in sorted(med.items(), key=lambda kv: kv[1][0]):
            cfg, role = roles[key]
            print(f"  {cfg.short():40s} {g * 1e3:8.1f} {e * 1e3:8.1f}  {', '.join(role)}", flush=True)
        if not med:
            print(f"{problem.label()}: every config failed every round; skipped", file=sys.stderr)
            continue
        best_key = min(med, key=lambda key: med[key][0])
        best_g = med[best_key][0]
        best_e = min(e for _, e in med.values())
        nan = (float("nan"), float("nan"))  # a config that failed every round: no verdict, the rest kept
        won, sb = med.get(config_key(winner), nan), med.get(config_key(sweep_best), nan)
        line = {"problem": problem.label(), "winner": winner.short(), "sweep_best": sweep_best.short(),
                "winner_vs_best_gpu": best_g / won[0], "winner_vs_best_event": best_e / won[1],
                "sweep_best_vs_best_gpu": best_g / sb[0],
                "readings": {roles[k][0].short(): v for k, v in readings.items()},
                "best": roles[best_key][0].short(), "best_roles": roles[best_key][1], "configs": len(roles),
                "roles": {cfg.short(): role for cfg, role in roles.values()}}
        summary.append(line)
        (args.outdir / "tune_sbs.jsonl").open("a").write(json.dumps(line) + "\n")
    print("\nproblem | tuner's winner | winner / best (GPU time) | winner / best (event time) | "
          "sweep's best / best (GPU time) | best (GPU time) | its roles")
    for s in summary:
        print(f"{s['problem']} | {s['winner']} | {s['winner_vs_best_gpu']:.4f} | {s['winner_vs_best_event']:.4f} | "
              f"{s['sweep_best_vs_best_gpu']:.4f} | {s['best']} | {', '.join(s['best_roles'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
