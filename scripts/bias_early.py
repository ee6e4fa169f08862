"""GPU: what the fused epilogue costs us and cuBLAS, and whether loading the bias before
the K loop (kernels.matmul_tma.BIAS_EARLY) wins it back.

Per fused problem of configs/shapes/fused.csv (or those given), one race (timing.race:
every implementation's CUDA graph replayed round after round, interleaved) of:
  ours plain      the same GEMM with no bias and no activation, the same config
  ours late       the fused kernel as shipped (bias loaded in each tile's epilogue)
  ours early      the same config with the bias loaded before each tile's K loop
  cuBLAS plain    torch.matmul
  eager           torch.addmm + the activation (issue 10's baseline)
  cuBLASLt        torch._addmm_activation (relu and gelu_tanh only)
The config is the one autokernel.matmul picks for the fused problem (the shipped file's).
Prints GPU µs per call and the ratios; median of --repeats races.

Usage (device): source scripts/device_env.sh; python3 scripts/bias_early.py [--repeats 3] [M,N,K,dtype,act ...]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import warnings


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", help="M,N,K,dtype,activation (bias on, layout nt); default: fused.csv")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    import torch

    import autokernel.kernels.matmul_tma as mt
    from autokernel import api
    from autokernel.evaluate import _matmul_args, race_call
    from autokernel.problem import Problem
    from autokernel.timing import make_input_sets, race
    from autokernel.tuning.shapes import read_shapes

    if args.shapes:
        problems = []
        for text in args.shapes:
            m, n, k, dtype, act = text.split(",")
            problems.append(Problem(int(m), int(n), int(k), dtype, act, True, "nt"))
    else:
        problems = read_shapes("configs/shapes/fused.csv")

    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  GPU µs per call, median of {args.repeats} races")
    print("problem | config | ours plain | ours late | ours early | cuBLAS plain | eager | cuBLASLt | "
          "early/late | late cost | early cost | cuBLASLt cost | early vs best(eager, Lt)")
    early_gain = []
    for p in problems:
        config = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, torch.device("cuda"))
        plain = Problem(p.m, p.n, p.k, p.dtype, "none", False, p.layout)

        def ours(early: bool):
            cycle = itertools.cycle(make_input_sets(_matmul_args(p, None), p.bytes, 4))

            def call() -> None:
                mt.BIAS_EARLY = early  # read when api.launch plans (no plan cache on this path)
                a, b, bias, out = next(cycle)
                api.launch(a, b, out, bias, p.activation, 0.01, config)

            return call

        fns = {"ours plain": race_call(plain, "triton", config), "ours late": ours(False), "ours early": ours(True),
               "cuBLAS plain": race_call(plain, "torch"), "eager": race_call(p, "torch")}
        try:
            fns["cuBLASLt"] = race_call(p, "cublaslt")
        except ValueError:
            pass
        readings = {name: [] for name in fns}
        for r in range(args.repeats):
            names = list(fns)
            names = names[r % len(names):] + names[:r % len(names)]
            for name, ms in zip(names, race([fns[n] for n in names])):
                readings[name].append(ms * 1e3)
        us = {name: statistics.median(v) for name, v in readings.items()}
        lt = us.get("cuBLASLt")
        best = min(us["eager"], lt) if lt else us["eager"]
        early_gain.append(us["ours late"] / us["ours early"])
        cells = [f"{us[n]:.1f}" if n in us else "-" for n in
                 ("ours plain", "ours late", "ours early", "cuBLAS plain", "eager", "cuBLASLt")]
        print(f"{p.label()} | {config.short()} | {' | '.join(cells)} | {us['ours late'] / us['ours early']:.4f} | "
              f"{us['ours late'] / us['ours plain'] - 1:+.1%} | {us['ours early'] / us['ours plain'] - 1:+.1%} | "
              f"{(lt / us['cuBLAS plain'] - 1) if lt else float('nan'):+.1%} | {best / us['ours early']:.4f}", flush=True)
    geo = statistics.geometric_mean(early_gain)
    print(f"\nearly over late, geomean of {len(early_gain)}: {geo:.4f}x (above 1: loading the bias early is faster)")
    mt.BIAS_EARLY = False
    return 0


if __name__ == "__main__":
    sys.exit(main())
