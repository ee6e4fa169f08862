"""Tuning on one GPU against every GPU of the machine: the wall time of one `loop` over a
set of problems, and the winners of the two runs raced side by side.

    python3 benchmarks/multi_gpu.py --gpus 0,1 --out benchmarks/results/multi_gpu_h100x2.json
    python3 benchmarks/multi_gpu.py --cpu-workers 2 --size 16 --problems 2 --max-trials 1   # a smoke run, no GPU

Each run starts from nothing: its own history, its own kept readings and its own Triton
cache (the second run must compile what the first did), so neither borrows from the other.
The one-GPU run tunes on the first of --gpus, the other on all of them (autokernel.tuning.tune
with ``gpus``: one timing worker per GPU, problems longest first to the next free GPU, the
compile cores shared). Then each problem's two winners are timed again side by side on the
first GPU (five interleaved rounds, the median decides): the many-GPU run's winner should
be within 1 % of the one-GPU run's. No Ray: the GPUs of one machine are driven by processes.

Each run records where its time goes (autokernel.tuning.timeline): per device, the spans
of every problem's compile waits, GPU timing and the driver's own work, the time a GPU
with no problem left spent on other problems' candidates ("lent"), the idle tail and the
start and end of the run, and how long each device's workers and the compile pool took
to close, and the kernels a device's timing worker compiled itself (none is expected: each
binary comes from a compile worker; a compile there is GPU time lost to measuring). The
JSON holds the spans ("timeline") and their sums ("summary"); a table of the sums per
device is printed.

--cpu-workers N runs the same two runs under Triton's interpreter with N worker processes
standing for GPUs (a smoke test of the script; the times say nothing about GPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Eight LLM-sized GEMMs of different lengths (fp16): the longest take several times the shortest,
# which is what longest-first scheduling is for.
GPU_SHAPES = [(8192, 8192, 8192), (4096, 11008, 4096), (4096, 4096, 11008), (8192, 4096, 4096),
              (4096, 4096, 4096), (2048, 8192, 2048), (2048, 4096, 4096), (1024, 4096, 4096)]
ROUNDS = 5


def problems(size: int | None, count: int) -> list:
    from autokernel.records import Problem

    if size is None:
        shapes = GPU_SHAPES
    else:  # tiny ones for the interpreter, of different lengths all the same
        shapes = [(size * a, size * b, size * c) for a, b, c in ((2, 2, 2), (2, 2, 1), (2, 1, 2), (1, 2, 2), (2, 1, 1),
                                                                  (1, 2, 1), (1, 1, 2), (1, 1, 1))]
    return [Problem(m, n, k) for m, n, k in shapes[:count]]


def one_run(label: str, probs: list, devices: list, work: Path, args) -> dict:
    """Tune ``probs`` on ``devices`` from nothing; the wall time, each problem's winner and
    where the time went."""
    from autokernel.history import History
    from autokernel.tuning import tune
    from autokernel.tuning.loop import StopRules
    from autokernel.tuning.timeline import Timeline

    os.environ["AUTOKERNEL_CACHE_DIR"] = str(work / f"{label}-readings")
    os.environ["TRITON_CACHE_DIR"] = str(work / f"{label}-triton")  # the workers spawned below inherit it
    history = History(work / f"{label}.csv")
    stop = StopRules(patience=args.patience, min_gain=0.01, max_trials=args.max_trials)
    timeline = Timeline()
    start = time.perf_counter()
    run = tune(probs, strategy=args.strategy, seed=args.seed, history=history, generations=args.max_generations,
               per_generation=args.per_generation, stop=stop, devices=devices, command="loop", timeline=timeline)
    wall = time.perf_counter() - start
    winners = {o.problem.label(): o.result.best.config for o in run.outcomes if o.result.best is not None}
    trials = sum(len(o.result.trials) for o in run.outcomes)
    return {"label": label, "devices": [str(d) for d in devices], "wall_s": wall, "trials": trials,
            "winners": winners, "untuned": [p.label() for p, _ in run.untuned],
            "summary": timeline.summary(), "timeline": timeline.as_dicts(), "closing": timeline.closing}


def race(probs: list, one: dict, many: dict, device, rounds: int = ROUNDS) -> list[dict]:
    """Each problem's two winners timed again side by side, ``rounds`` interleaved rounds on ``device``."""
    from autokernel.tuning import fleet
    from autokernel.tuning.worker import WorkerEvaluator

    env = fleet.visible_devices_env(device.index) if device.index is not None else None
    rows = []
    with WorkerEvaluator(env=env) as workers:
        for p in probs:
            a, b = one["winners"].get(p.label()), many["winners"].get(p.label())
            if a is None or b is None:
                rows.append({"problem": p.label(), "ratio": None, "why": "a run found no winner"})
                continue
            if a == b:
                rows.append({"problem": p.label(), "ratio": 1.0, "same": True})
                continue
            times: dict[int, list[float]] = {0: [], 1: []}
            for r in range(rounds):
                order = [a, b] if r % 2 == 0 else [b, a]
                for trial in workers.retime(p, order):
                    if trial.ok and trial.rank_ms is not None:
                        times[0 if trial.config == a else 1].append(trial.rank_ms)
            if not times[0] or not times[1]:
                rows.append({"problem": p.label(), "ratio": None, "why": "a winner failed again"})
                continue
            ratio = statistics.median(times[1]) / statistics.median(times[0])
            rows.append({"problem": p.label(), "ratio": ratio, "same": False,
                         "one_ms": statistics.median(times[0]), "many_ms": statistics.median(times[1])})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="all", help="all or GPU indices (0,1): the many-GPU run's GPUs")
    ap.add_argument("--cpu-workers", type=int, default=0, help="no GPU: this many interpreter workers stand for GPUs")
    ap.add_argument("--size", type=int, default=None, help="tiny problems of this size (the interpreter)")
    ap.add_argument("--problems", type=int, default=8, help="tune the first this many of the eight problems")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="side-by-side rounds per pair of winners")
    ap.add_argument("--strategy", default="optuna")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-generation", type=int, default=8)
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--max-trials", type=int, default=48)
    ap.add_argument("--max-generations", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)

    if args.cpu_workers:
        os.environ["TRITON_INTERPRET"] = "1"
    from autokernel import runtime
    from autokernel.tuning.fleet import Device, local_devices, parse_gpus
    from autokernel.tuning.timeline import table

    try:
        if args.cpu_workers:
            if not runtime.INTERPRETER:
                raise ValueError("--cpu-workers runs under the interpreter: unset TRITON_INTERPRET=0")
            devices = [Device(runtime.device_name(), i, f"worker {i}") for i in range(args.cpu_workers)]
        else:
            devices = local_devices(parse_gpus(args.gpus))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(devices) < 2:
        print("error: the comparison needs two devices or more (--gpus, --cpu-workers)", file=sys.stderr)
        return 2
    if len({d.name for d in devices}) > 1:
        print(f"error: the GPUs differ ({', '.join(sorted({d.name for d in devices}))}): give --gpus of one model",
              file=sys.stderr)
        return 2
    size = args.size if args.size is not None else (32 if runtime.INTERPRETER else None)
    probs = problems(size, args.problems)
    with tempfile.TemporaryDirectory(prefix="autokernel-multi-gpu-") as tmp:
        work = Path(tmp)
        one = one_run("one", probs, devices[:1], work, args)
        many = one_run("many", probs, devices, work, args)
        raced = race(probs, one, many, devices[0], args.rounds)
    speedup = one["wall_s"] / many["wall_s"] if many["wall_s"] > 0 else None
    ratios = [r["ratio"] for r in raced if r["ratio"] is not None]
    result = {
        "device": devices[0].name, "devices": len(devices), "problems": [p.label() for p in probs],
        "one": {k: v for k, v in one.items() if k != "winners"}, "many": {k: v for k, v in many.items() if k != "winners"},
        "speedup": speedup, "race": raced, "worst_ratio": max(ratios, default=None),
        "winners": {"one": {k: c.model_dump() for k, c in one["winners"].items()},
                    "many": {k: c.model_dump() for k, c in many["winners"].items()}},
        "settings": vars(args) | {"out": str(args.out) if args.out else None},
    }
    print(f"{len(probs)} problems on {devices[0].name}: one device {one['wall_s']:.1f} s ({one['trials']} trials), "
          f"{len(devices)} devices {many['wall_s']:.1f} s ({many['trials']} trials): "
          f"{speedup:.2f}x faster" if speedup else "no time measured")
    print("where the time went (seconds; busy: the share of the run timing on the device):")
    for run in (one, many):
        print(f"  {run['label']}:")
        for line in table(run["summary"]):
            print(f"    {line}")
        print("    closing (at once; seconds each): " + ", ".join(f"{what} {s:.2f}" for what, s in run["closing"].items()))
    for r in raced:
        shown = "same config" if r.get("same") else (f"{r['ratio']:.4f}" if r["ratio"] is not None else r["why"])
        print(f"  {r['problem']}: many-device winner / one-device winner, raced: {shown}")
    if ratios:
        print(f"worst ratio {max(ratios):.4f} (target <= 1.01); speedup target >= 1.8x on 2 GPUs")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
