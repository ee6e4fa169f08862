"""GPU: stream-K on tail-wave shapes beside cuBLAS and our non-stream-K configs, in one run.

For each shape and dtype (plain GEMM, no epilogue): cuBLAS (torch.matmul), the config
autokernel.matmul would pick (tuned file or default), hand-picked TMA and grouped
configs, and stream-K configs (kernels/streamk.py). Each goes through
``evaluate(..., graph_time=True)``: correctness against float32 on fresh inputs, then
event time (timing.time_fn, L2 flushed, median) and GPU time by CUDA-graph replay
(timing.gpu_time). Before timing, one stream-K launch is run twice to check that it
repeats bit for bit. Rows are written as they come (JSON lines) so that a run cut short
keeps what it measured; a summary prints each shape's best of each kind and the ratios.

With --diagnose (a second run, fp16): where the time goes. For the same tile, the one-pass
grouped kernel, the stream-K kernel with no tile split (persistent, data-parallel only:
``split_tail=False``), stream-K on one program per SM and on two (the one-pass kernel
may run two programs per SM where shared memory allows; stream-K's waits are only on
lower program ids, so more programs than fit at once cannot deadlock), on the shapes
above and on shapes with less than one wave of tiles (all tail: the stream-K phase alone).

Run on the device: source scripts/device_env.sh; python3 scripts/streamk_gpu.py --out FILE [--diagnose]
"""

import argparse
import json
import time

import torch

from autokernel import best, runtime
from autokernel.config import KernelConfig
from autokernel.evaluate import evaluate, evaluate_torch
from autokernel.kernels.matmul_tma import _num_sms
from autokernel.kernels.streamk import tail_split
from autokernel.records import Problem

SHAPES = [(2048, 2816, 1024), (1536, 4096, 4096), (4096, 2816, 2048),
          (3072, 2816, 2048)]  # the last: no tail in 128x128 or 128x256 tiles on 132 SMs (control)
DTYPES = ["float16", "bfloat16"]


def tile(bm, bn, warps, stages, variant, stream_k=False):
    return KernelConfig(block_m=bm, block_n=bn, block_k=64, group_m=8, num_warps=warps, num_stages=stages,
                        variant=variant, stream_k=stream_k)


BASELINES = [tile(128, 256, 8, 3, "tma"), tile(128, 128, 8, 4, "tma"), tile(128, 128, 8, 4, "grouped"),
             tile(128, 256, 8, 3, "grouped")]
STREAM_K = [tile(128, 128, 8, 4, "grouped", True), tile(128, 256, 8, 3, "grouped", True),
            tile(128, 128, 8, 3, "grouped", True)]


def check_repeatable(m, n, k, config) -> bool:
    """One stream-K launch twice on the same inputs: equal bit for bit (fixed summation order)."""
    import autokernel as ak

    a = torch.randn(m, k, device="cuda", dtype=torch.float16) / k ** 0.5
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    first = ak.matmul(a, b, config=config)
    return all(torch.equal(first, ak.matmul(a, b, config=config)) for _ in range(5))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=170.0, help="start no evaluation after this")
    parser.add_argument("--diagnose", action="store_true", help="the breakdown run (see the module docstring)")
    args = parser.parse_args()
    if args.diagnose:
        return diagnose(args.out, args.budget_s)
    sms = _num_sms(torch.device("cuda"))
    print(f"{runtime.device_name()}, {sms} SMs, torch {torch.__version__}", flush=True)
    print("stream-K repeats bit for bit (2048x2816x1024, 128x128):",
          check_repeatable(2048, 2816, 1024, STREAM_K[0]), flush=True)
    start = time.monotonic()
    rows = []
    with open(args.out, "w") as sink:
        for dtype in DTYPES:
            for m, n, k in SHAPES:
                problem = Problem(m, n, k, dtype)
                tuned = best.resolved_config(m, n, k, problem.torch_dtype, "none", False, torch.device("cuda"))
                candidates = [("cublas", None, "cublas"), ("ours", tuned, "resolved")]
                candidates += [("ours", c, "hand") for c in BASELINES if c != tuned]
                candidates += [("stream_k", c, "hand") for c in STREAM_K]
                for kind, config, source in candidates:
                    if time.monotonic() - start > args.budget_s:
                        print(f"budget spent: {dtype} {m}x{n}x{k} {kind} not measured", flush=True)
                        continue
                    if config is None:
                        trial = evaluate_torch(problem, "torch", graph_time=True)
                    else:
                        trial = evaluate(problem, config, graph_time=True)
                    sk_tiles = (tail_split(m, n, k, config.block_m, config.block_n, config.block_k, sms)[0]
                                if config is not None else None)
                    tiles = -(-m // 128) * -(-n // 128) if config is None else \
                        -(-m // config.block_m) * -(-n // config.block_n)
                    row = dict(dtype=dtype, m=m, n=n, k=k, kind=kind, source=source,
                               config=config.short() if config else "torch.matmul", tiles=tiles,
                               waves=round(tiles / sms, 2), tail_tiles=sk_tiles, status=trial.status, ok=trial.ok,
                               gpu_ms=trial.gpu_ms, event_ms=trial.ms, rel_error=trial.rel_error, error=trial.error)
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                    rows.append(row)
                    print(f"{time.monotonic() - start:6.1f}s {dtype} {m}x{n}x{k} {kind:8s} {row['config']:34s} "
                          f"{trial.status:8s} gpu {trial.gpu_ms or float('nan'):.4f} ms  "
                          f"event {trial.ms or float('nan'):.4f} ms  err {trial.rel_error or 0:.1e}", flush=True)
    summary(rows)


DIAGNOSE_SHAPES = [(2048, 2816, 1024), (4096, 2816, 2048), (1024, 1408, 1024), (1024, 1408, 4096)]


def diagnose(out: str, budget_s: float) -> None:
    from autokernel import api, timing
    from autokernel.evaluate import relative_error
    from autokernel.kernels.streamk import plan_matmul_streamk

    sms = _num_sms(torch.device("cuda"))
    print(f"{runtime.device_name()}, {sms} SMs, torch {torch.__version__} (diagnose)", flush=True)
    jobs = []  # (shape, name, config, launch, sets, reference)
    for m, n, k in DIAGNOSE_SHAPES:
        def make(i, m=m, n=n, k=k):
            g = torch.Generator(device="cuda").manual_seed(i)
            a = torch.randn(m, k, device="cuda", generator=g).div_(k ** 0.5).half()
            b = torch.randn(k, n, device="cuda", generator=g).half()
            return a, b, torch.empty(m, n, device="cuda", dtype=torch.float16)

        sets = timing.make_input_sets(make, (m * k + k * n + m * n) * 2, max_sets=timing.GRAPH_INPUT_SETS)
        a0, b0, c0 = sets[0]
        ref = a0.float() @ b0.float()
        jobs.append(((m, n, k), "cublas", None, lambda a, b, c: torch.matmul(a, b, out=c), sets, ref))
        for bm, bn, stages in ((128, 128, 3), (128, 128, 4), (128, 256, 3)):
            grouped = tile(bm, bn, 8, stages, "grouped")
            sk = tile(bm, bn, 8, stages, "grouped", True)
            jobs.append(((m, n, k), f"one-pass {grouped.short()}", grouped,
                         api._plan_kernel(a0, b0, c0, None, "none", 0.0, grouped, None), sets, ref))
            tma = tile(bm, bn, 8, stages, "tma")
            jobs.append(((m, n, k), f"tma {tma.short()}", tma,
                         api._plan_kernel(a0, b0, c0, None, "none", 0.0, tma, None), sets, ref))
            for programs, split in ((sms, False), (sms, True), (2 * sms, True)):
                name = f"{'stream-K' if split else 'persistent'} P={programs} {grouped.short()}"
                jobs.append(((m, n, k), name, sk, plan_matmul_streamk(a0, b0, c0, None, "none", 0.0, sk, False,
                                                                      programs=programs, split_tail=split), sets, ref))
    # Two programs per SM last: they rely on lower ids being scheduled first; a hang there
    # loses nothing measured before it.
    jobs.sort(key=lambda job: f"P={2 * sms}" in job[1])
    start = time.monotonic()
    with open(out, "w") as sink:
        for (m, n, k), name, config, launch, sets, ref in jobs:
            if time.monotonic() - start > budget_s:
                print(f"budget spent: {m}x{n}x{k} {name} not measured", flush=True)
                continue
            fn = launch if config is None else (lambda a, b, c, launch=launch: launch(a, b, c, c, c))
            a0, b0, c0 = sets[0]
            c0.fill_(float("nan"))
            fn(a0, b0, c0)
            err = relative_error(c0, ref)
            gpu_ms = timing.gpu_time(fn, rotate=sets)
            event_ms = timing.time_fn(fn, rotate=sets[:timing.input_set_count((m * k + k * n + m * n) * 2)]).ms
            tail = None if config is None else tail_split(m, n, k, config.block_m, config.block_n, 64, sms)[0]
            row = dict(m=m, n=n, k=k, dtype="float16", variant=name, tail_tiles=tail, rel_error=err,
                       gpu_ms=gpu_ms, event_ms=event_ms)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"{time.monotonic() - start:6.1f}s {m}x{n}x{k} {name:44s} gpu {gpu_ms:.4f} ms  "
                  f"event {event_ms:.4f} ms  err {err:.1e}", flush=True)


def summary(rows: list[dict]) -> None:
    """Per shape: the best of each kind by each clock, and the ratios (cuBLAS time / ours:
    above 1 is faster than cuBLAS; stream-K / best non-stream-K: above 1 is stream-K faster)."""
    print("\nshape dtype | clock | cublas ms | best non-SK ms (config) | best SK ms (config) | "
          "non-SK vs cuBLAS | SK vs cuBLAS | SK vs non-SK | SK vs same-tile grouped")
    for key in dict.fromkeys((r["dtype"], r["m"], r["n"], r["k"]) for r in rows):
        mine = [r for r in rows if (r["dtype"], r["m"], r["n"], r["k"]) == key and r["ok"]]
        for clock in ("gpu_ms", "event_ms"):
            def best_of(kind):
                found = [r for r in mine if r["kind"] == kind and r[clock]]
                return min(found, key=lambda r: r[clock]) if found else None

            cub, ours, sk = best_of("cublas"), best_of("ours"), best_of("stream_k")
            if not (cub and ours and sk):
                print(f"{key}: {clock}: incomplete")
                continue
            twin = [r for r in mine if r["kind"] == "ours" and r["config"] == sk["config"].replace(" sk", "")]
            same = f"{twin[0][clock] / sk[clock]:.3f}" if twin else "n/a"
            print(f"{key[1]}x{key[2]}x{key[3]} {key[0]} | {clock} | {cub[clock]:.4f} | {ours[clock]:.4f} ({ours['config']})"
                  f" | {sk[clock]:.4f} ({sk['config']}, tail {sk['tail_tiles']}) | {cub[clock] / ours[clock]:.3f}"
                  f" | {cub[clock] / sk[clock]:.3f} | {ours[clock] / sk[clock]:.3f} | {same}")


if __name__ == "__main__":
    main()
