"""GPU: race each shipped tuned config against its nearest variants, side by side.

The shipped file (autokernel/configs/<device>.json) chose each problem's config from
readings taken one after another, and the judge of issue 7 (scripts/tune_sbs.py) found
configs 1-3 % faster one step away from such winners: the same tile flattened, with the
split epilogue, another group_m, or, where the persistent grid's waves fill poorly, the tile
half as tall (tuning.loop.half_height_tile). Per problem of the shapes files this races, in
one process and ROUNDS times (each round in a fresh random order, through the tuner's own
re-time, evaluate.evaluate_side_by_side: fp32-reference check, event timer, then the
CUDA-graph times interleaved, timing.race):

  - the shipped config (what autokernel.matmul picks by itself for the problem),
  - its variants along flatten x epilogue_subtile x group_m in {8, 16} that the problem's
    search space takes,
  - the half-height tile of the shipped tile with its variants along the same fields,
    where its waves fill poorly (tuning.loop.half_height_tile),

and with --neighbours also the configs one step from the shipped one along each field
(``neighbours``), and times the torch baseline (cuBLAS, or eager addmm + activation) each round
(evaluate_torch, event timer). Per config the median over the rounds. A problem whose
shipped config has no variant in its space (decode tiles on the pointer kernel with
group_m folded to 1) is not raced. A problem's new
entry is the fastest median by GPU time, kept only if it beats the shipped config's
median by more than --min-gain (else the shipped entry stays as it was): the best of a
dozen noisy medians is biased upward by about the spread of one, so a smaller lead is no
evidence.

Writes --out (one JSON line per problem: every config's readings and medians, the
baseline's readings) and --best (the shipped file with the winning entries replaced:
their ms and gpu_ms are this run's medians, torch_ms the baseline's fastest reading as
export-best takes it, and trials the number of configs raced).

    source scripts/device_env.sh; export TRITON_INTERPRET=0
    python3 scripts/race_entries.py configs/shapes/fused.csv configs/shapes/llm.csv \\
        --out $OUT/race.jsonl --best $OUT/raced.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIED = {"flatten": (False, True), "epilogue_subtile": (1, 2), "group_m": (8, 16)}
"""The fields each base config is varied along (every combination the space takes; group_m
also keeps the base's own value)."""


NEIGHBOURS = {"block_m": "x2", "block_n": "x2", "block_k": "x2", "num_stages": "+1", "num_warps": "x2",
              "split_k": "x2", "variant": ("grouped", "tma")}
"""With --neighbours, the configs one step from the shipped one along each of these fields
(halved or doubled, one stage fewer or more, the other kernel), where the space takes them."""


def neighbours(shipped, space) -> list[tuple]:
    """[(config, role)]: the configs one NEIGHBOURS step from ``shipped`` that ``space``
    contains, canonical. Where a config came out of a narrow search (the decode entries'
    24 trials), the tile it missed is often one step away. Where the shipped tiles fill
    fewer programs than the GPU has (a decode GEMM: 64 tiles of 64x64 for 132 SMs), a
    tile thinner than the space's floor of 64 is raced too: there it doubles the programs;
    and stages past the space's range, where shared memory holds them."""
    from dataclasses import replace

    from autokernel.tuning.space import _cdiv

    p = space.problem
    underfilled = space.programs is not None and \
        _cdiv(p.m, shipped.block_m) * _cdiv(p.n, shipped.block_n) * shipped.split_k < space.programs
    # A neighbour may leave the tuner's range of stages (a decode tile's best on the H100
    # was its largest, 5): it is raced directly, and shared memory still bounds it.
    space = replace(space, choices={**space.choices, "num_stages": tuple(range(1, 9))})
    out = []
    for field, step in NEIGHBOURS.items():
        value = getattr(shipped, field)
        if step == "x2":
            values = (value // 2, value * 2)
        elif step == "+1":
            values = (value - 1, value + 1)
        else:
            values = tuple(v for v in step if v != value)
        for new in values:
            update = {field: new}
            if field == "variant" and new == "grouped":  # the TMA kernel's own options go with it
                update.update(flatten=False, epilogue_subtile=1, warp_specialize=False)
            try:
                config = space.canonical(shipped.model_copy(update=update))
                config = type(shipped).model_validate(config.model_dump())  # KernelConfig's own rules too
            except ValueError:
                continue
            why = space.why_invalid(config)
            # The thinness rule is the last of why_invalid's but two (tile past the problem,
            # group_m past its tile-rows), which a one-field step from a canonical config
            # does not break: a thinner tile is no larger, and canonical set group_m.
            if why is None or (underfilled and "thinner than the problem needs" in why):
                out.append((config, f"shipped+{field}={new}"))
    return out


def candidates(problem, shipped, space, with_neighbours: bool = False) -> dict[tuple, tuple]:
    """{config_key: (config, role)}: the shipped config itself (always first, even where
    the space would not propose it), its VARIED variants, and those of the half-height
    tile derived from the shipped tile (tuning.loop.half_height_tile), as the space writes
    them (space.canonical), each once; ``with_neighbours``: also the neighbours of the
    shipped config (``neighbours``)."""
    from autokernel.tuning.loop import half_height_tile
    from autokernel.tuning.space import config_key

    out: dict[tuple, tuple] = {config_key(shipped): (shipped, "shipped")}
    bases = [("shipped", shipped)]
    if shipped.variant == "tma" and (half := half_height_tile(problem, shipped, space.programs)) is not None:
        bases.append(("half-height", half))
    for role, base in bases:
        choices = {**VARIED, "group_m": tuple(sorted({base.group_m, *VARIED["group_m"]}))}
        for combo in itertools.product(*choices.values()):
            update = dict(zip(choices, combo))
            if base.variant != "tma" and (update["flatten"] or update["epilogue_subtile"] != 1):
                continue  # TMA options only
            config = space.canonical(base.model_copy(update=update))
            if not space.contains(config) or config_key(config) in out:
                continue
            changed = "".join(f"+{k}={getattr(config, k)}" for k in VARIED if getattr(config, k) != getattr(base, k))
            out[config_key(config)] = (config, role + changed)
    for config, role in neighbours(shipped, space) if with_neighbours else ():
        out.setdefault(config_key(config), (config, role))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="+", type=Path, help="shapes files (configs/shapes/*.csv)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--best", required=True, type=Path, help="the shipped file with the raced winners, written here")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-gain", type=float, default=0.01, help="a new config must beat the shipped one by this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precompile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--neighbours", action="store_true",
                    help="also race the configs one step from the shipped one along each NEIGHBOURS field")
    args = ap.parse_args()

    import warnings

    warnings.simplefilter("ignore")
    import torch

    from autokernel import best, runtime
    from autokernel.evaluate import evaluate_side_by_side, evaluate_torch
    from autokernel.tuning.shapes import read_shapes
    from autokernel.tuning.space import SearchSpace, config_key, why_no_tma

    sys.path.insert(0, str(ROOT / "scripts"))
    from benchmark_suite import matmul_config

    problems = [p for path in args.shapes for p in read_shapes(path)]
    plans = []
    for problem in problems:
        shipped, source = matmul_config(problem)
        space = SearchSpace.for_problem(problem)
        if shipped.variant == "auto":  # as api resolves it: TMA where descriptors can be made
            tma = space.tma and why_no_tma(problem) is None
            shipped = shipped.model_copy(update={"variant": "tma" if tma else "grouped"})
        shipped = space.canonical(shipped)
        plans.append((problem, shipped, source, candidates(problem, shipped, space, args.neighbours)))
    total = sum(len(c) for *_, c in plans)
    print(f"{len(plans)} problems, {total} configs, {args.rounds} rounds each "
          f"({runtime.device_name()}, torch {torch.__version__})", flush=True)

    if args.precompile:
        from autokernel.tuning.worker import WorkerEvaluator

        start = time.perf_counter()
        with WorkerEvaluator(spare=False) as workers:
            for problem, _, _, cands in plans:
                workers.precompile(problem, [c for c, _ in cands.values()],
                                   lambda _, t: t and print(f"  precompile {t.config.short()}: {t.status}",
                                                            file=sys.stderr))
        print(f"precompiled in {time.perf_counter() - start:.0f} s", flush=True)

    rng = random.Random(args.seed)
    path = ROOT / "autokernel" / "configs" / f"{best.device_key(runtime.device_name())}.json"
    shipped_file = (best.load(path) if path.exists() else
                    best.BestFile(schema_version=best.SCHEMA_VERSION, device=runtime.device_name()))
    entries = {(e.M, e.N, e.K, e.dtype, e.activation, e.bias, e.layout): e for e in shipped_file.entries}
    changed = 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print("\nproblem | shipped | its gpu µs | best raced | its gpu µs | shipped / best | kept")
    for problem, shipped, source, cands in plans:
        if len(cands) < 2:
            print(f"{problem.label()} | {shipped.short()} | nothing to race it against | | | | shipped", flush=True)
            continue
        readings: dict[tuple, list[tuple[float, float]]] = {key: [] for key in cands}
        base_ms: list[float] = []
        for _ in range(args.rounds):
            order = list(cands)
            rng.shuffle(order)
            for key, trial in zip(order, evaluate_side_by_side(problem, [cands[key][0] for key in order])):
                if trial.ok and trial.ms is not None:  # no graph time under the interpreter
                    readings[key].append((trial.gpu_ms if trial.gpu_ms is not None else trial.ms, trial.ms))
                elif not trial.ok:
                    print(f"  {cands[key][0].short()}: {trial.status} {trial.error}", file=sys.stderr)
            base = evaluate_torch(problem)
            if base.ok and base.ms is not None:
                base_ms.append(base.ms)
        med = {key: (statistics.median(g for g, _ in r), statistics.median(e for _, e in r))
               for key, r in readings.items() if len(r) == args.rounds}
        ship_key = config_key(shipped)
        line = {"problem": problem.label(), "shipped": shipped.short(), "source": source, "baseline_ms": base_ms,
                "configs": {cands[k][0].short(): {"role": cands[k][1], "readings": readings[k],
                                                  "median_gpu_ms": med.get(k, (None,))[0],
                                                  "median_ms": med.get(k, (None, None))[1]} for k in cands}}
        with args.out.open("a") as f:
            f.write(json.dumps(line) + "\n")
        if not med or ship_key not in med:
            print(f"{problem.label()} | {shipped.short()} | failed or incomplete | | | | no", flush=True)
            continue
        win = min(med, key=lambda k: med[k][0])
        ratio = med[ship_key][0] / med[win][0]
        keep = win != ship_key and ratio > 1 + args.min_gain
        print(f"{problem.label()} | {shipped.short()} | {med[ship_key][0] * 1e3:.1f} | {cands[win][0].short()} "
              f"({cands[win][1]}) | {med[win][0] * 1e3:.1f} | {ratio:.4f} | {'NEW' if keep else 'shipped'}",
              flush=True)
        if not keep:
            continue
        key = (problem.m, problem.n, problem.k, problem.dtype, problem.activation, problem.bias, problem.layout)
        gpu_ms, ms = med[win]
        torch_ms = min(base_ms) if base_ms else None  # the fastest baseline reading, as export takes it
        entries[key] = best.BestEntry(
            M=problem.m, N=problem.n, K=problem.k, dtype=problem.dtype, activation=problem.activation,
            bias=problem.bias, layout=problem.layout, config=cands[win][0], ms=ms, gpu_ms=gpu_ms,
            tflops=problem.flops / ms / 1e9, torch_ms=torch_ms,
            speedup_vs_cublas=torch_ms / ms if torch_ms else None, trials=len(cands))
        changed += 1
    shipped_file.entries = list(entries.values())
    shipped_file.generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    args.best.write_text(shipped_file.to_json())
    print(f"\n{changed} of {len(plans)} entries replaced; written to {args.best}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
