"""Does a shorter tuning timer keep its spread? The best configs of one problem in a history,
evaluated as the tuner does (check, event timer, CUDA-graph timer) under timer budgets from
the tuner's to shorter, interleaved over several rounds in one process.

Prints, per config and budget, the median gpu_ms and ms over the rounds, their spread
((max - min) / median), and the mean wall seconds of one evaluation.

Run on the device: source scripts/device_env.sh; python3 scripts/timer_spread.py HISTORY M N K DTYPE [--rounds 5] [--configs 4]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import autokernel.evaluate as ev
from autokernel.config import KernelConfig
from autokernel.history import History
from autokernel.records import Problem, parse_dtype
from autokernel.timing import gpu_time, time_fn

# (label, event timer warmup/rep ms, graph timer rep ms); the first is the tuner's.
BUDGETS = [("event 10/30, graph 20", 10.0, 30.0, 20.0), ("event 5/15, graph 10", 5.0, 15.0, 10.0),
           ("event 5/15, graph 5", 5.0, 15.0, 5.0)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("history")
    parser.add_argument("m", type=int)
    parser.add_argument("n", type=int)
    parser.add_argument("k", type=int)
    parser.add_argument("dtype")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--configs", type=int, default=4)
    args = parser.parse_args()
    problem = Problem(args.m, args.n, args.k, parse_dtype(args.dtype))
    df = History(args.history).read()
    df = df[(df["M"] == args.m) & (df["N"] == args.n) & (df["K"] == args.k) & (df["status"] == "success")
            & (df["kernel"] == "triton")].sort_values("gpu_ms")
    configs = list(dict.fromkeys(df["config"]))[: args.configs]
    configs = [KernelConfig.from_json(c) for c in configs]
    samples = {(i, label): [] for i in range(len(configs)) for label, *_ in BUDGETS}
    for config in configs:  # each binary loaded once before anything is timed
        ev.launch_once(problem, config)
    for _ in range(args.rounds):
        for i, config in enumerate(configs):
            for label, warmup, rep, graph_rep in BUDGETS:
                ev.gpu_time = functools.partial(gpu_time, rep_ms=graph_rep)
                start = time.perf_counter()
                t = ev.evaluate(problem, config, graph_time=True,
                                timer=functools.partial(time_fn, warmup_ms=warmup, rep_ms=rep))
                assert t.ok, t.error
                samples[i, label].append((t.gpu_ms, t.ms, time.perf_counter() - start))
    print(f"{problem.label()}: {args.rounds} rounds")
    print("config | budget | gpu_ms median | gpu_ms spread | ms median | ms spread | wall s per evaluation")
    for (i, label), rows in samples.items():
        g, m, w = zip(*rows)
        gm, mm = statistics.median(g), statistics.median(m)
        print(f"{configs[i].short()} | {label} | {gm:.4f} | {(max(g) - min(g)) / gm:.3f} | {mm:.4f} | "
              f"{(max(m) - min(m)) / mm:.3f} | {statistics.mean(w):.3f}")


if __name__ == "__main__":
    main()
