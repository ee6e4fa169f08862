"""``AUTOKERNEL_BACKEND=auto`` checked on the GPU: per problem, torch (cuBLAS, or eager addmm
and the activation), ``autokernel.matmul`` on the Triton kernels (the default backend) and
``autokernel.matmul`` under ``auto`` (Triton or cuBLAS, as ``autokernel.route`` decides),
with ``--first-use`` also ``auto`` with tuning on first use (cuBLAS raced beside the
selector's best configs on the problem's operands, in a fresh cache directory), each checked against a float32 reference and then raced side by side (``timing.race``: CUDA
graphs interleaved, GPU time per call). On the GPU machine:

    python3 benchmarks/route_check.py --shapes SHAPES.csv --out route.jsonl [--time-budget 400] [--first-use]

One JSON line per problem, flushed as measured; then geomeans per class (decode, skinny,
mid, large, as ``autokernel report`` draws them) and the problems where ``auto`` ran more
than 2 % slower than the Triton pick or than torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from select_sweep import input_sets, race_checked, shapes_within  # noqa: E402

from autokernel import autotune, best, route, runtime  # noqa: E402
from autokernel.plans import clear_launch_cache, gemm_plan, tma_runs  # noqa: E402
from autokernel.records import Problem  # noqa: E402
from autokernel.report import SELECTOR_CLASSES, problem_class  # noqa: E402


def check(p: Problem, first_use: bool) -> dict:
    sets = input_sets(p, 2000)
    a0, b0, bias0, _ = sets[0]
    route.use("triton")
    triton = gemm_plan(a0, b0, bias0, p.activation, 0.01, None)
    route.use("auto")
    auto = gemm_plan(a0, b0, bias0, p.activation, 0.01, None)
    library = "cublas" if isinstance(auto.launch, route.TorchLaunch) else "triton"
    plans_raced = {}
    if first_use:  # auto with tuning on first use: cuBLAS raced beside the selector's best configs
        autotune.enable(True)
        clear_launch_cache()  # the auto plan above is cached under the same key
        start = time.perf_counter()
        tuned = gemm_plan(a0, b0, bias0, p.activation, 0.01, None)
        plans_raced = {"tuned_library": "cublas" if isinstance(tuned.launch, route.TorchLaunch) else "triton",
                       "tuning_s": time.perf_counter() - start}
        autotune.enable(None)
    found = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, a0.device,
                        tma=tma_runs(a0, b0, sets[0][3]), layout=p.layout)
    name = runtime.device_name()
    why = route.decide(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, name, found, p.layout)
    alone = {t.device: route.decide(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, name, found, p.layout,
                                    tables=(t,)).library for t in route.cublas_models(name)}
    rows = [{"label": "triton"}, {"label": "auto"}]
    runs = [(rows[0], lambda a, b, bias, out=None: triton.run(a, b, bias, out)[0]),
            (rows[1], lambda a, b, bias, out=None: auto.run(a, b, bias, out)[0])]
    if first_use:
        rows.append({"label": "tuned"})
        runs.append((rows[2], lambda a, b, bias, out=None: tuned.run(a, b, bias, out)[0]))
    torch_ms = race_checked(p, runs, sets)
    return {**p.to_dict(), "class": problem_class(p), "library": library, **plans_raced, "pick": found.config.short(),
            "predicted_triton_us": why.triton_us, "predicted_cublas_us": why.cublas_us, "library_by_table": alone,
            "torch_ms": torch_ms, **{f"{r['label']}_ms": r.get("gpu_ms") for r in rows},
            **{f"{r['label']}_status": r["status"] for r in rows},
            **{f"{r['label']}_rel_error": r.get("rel_error") for r in rows}}


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(records: list[dict]) -> None:
    ok = [r for r in records if r["triton_ms"] and r["auto_ms"]]
    tuned = all(r.get("tuned_ms") for r in ok)
    print(f"{len(ok)} of {len(records)} problems timed; {sum(r['library'] == 'cublas' for r in ok)} routed to cuBLAS")
    print(f"{'class':8} {'n':>4} {'torch/triton':>13} {'torch/auto':>11} {'routed':>7}"
          + (f" {'torch/auto+first-use':>21} {'raced to cuBLAS':>16}" if tuned else ""))
    for cls in (*SELECTOR_CLASSES, "all"):
        rs = [r for r in ok if cls in ("all", r["class"])]
        if rs:
            print(f"{cls:8} {len(rs):4d} {geomean(r['torch_ms'] / r['triton_ms'] for r in rs):13.3f} "
                  f"{geomean(r['torch_ms'] / r['auto_ms'] for r in rs):11.3f} "
                  f"{sum(r['library'] == 'cublas' for r in rs):7d}"
                  + (f" {geomean(r['torch_ms'] / r['tuned_ms'] for r in rs):21.3f} "
                     f"{sum(r['tuned_library'] == 'cublas' for r in rs):16d}" if tuned else ""))
    for name, base in (("the Triton pick", "triton_ms"), ("torch", "torch_ms")):
        slow = [r for r in ok if r["auto_ms"] > 1.02 * r[base]]
        print(f"auto more than 2 % slower than {name}: {len(slow)}")
        for r in sorted(slow, key=lambda r: r[base] / r["auto_ms"])[:8]:
            print(f"  {r['m']}x{r['n']}x{r['k']} {r['dtype']} {r['layout']} {r['activation']}"
                  f"{' bias' if r['bias'] else ''} [{r['library']}]: {r[base] / r['auto_ms']:.3f}")
    choices = {("all tables", None)} | {(f"{t} alone", t) for r in ok for t in r.get("library_by_table", {})}
    if len(choices) > 2:  # each table's choice, read from the same run's times of torch and the Triton pick
        print("the choice of each cuBLAS table alone, from this run's times of torch and the Triton pick:")
        for label, table in sorted(choices, key=lambda c: c[1] or ""):
            chosen = [(r, r["library"] if table is None else r["library_by_table"].get(table)) for r in ok]
            chosen = [(r, lib) for r, lib in chosen if lib]
            ms = [r["torch_ms"] if lib == "cublas" else r["triton_ms"] for r, lib in chosen]
            print(f"  {label}: torch / choice {geomean(r['torch_ms'] / t for (r, _), t in zip(chosen, ms)):.3f}, "
                  f"{sum(lib == 'cublas' for _, lib in chosen)} routed, "
                  f"{sum(t > 1.02 * r['triton_ms'] for (r, _), t in zip(chosen, ms))} more than 2 % slower than "
                  f"the Triton pick ({len(chosen)} problems)")
    bad = [r for r in records if any(r.get(f"{x}_status", "success") != "success" for x in ("triton", "auto", "tuned"))]
    print(f"failed or incorrect: {len(bad)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--time-budget", type=float, default=400.0)
    ap.add_argument("--first-use", action="store_true",
                    help="also time auto with tuning on first use (a fresh cache directory of its own)")
    args = ap.parse_args(argv)
    if runtime.INTERPRETER:
        print("error: the check times kernels on a GPU", file=sys.stderr)
        return 2
    if args.first_use:
        os.environ["AUTOKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="route-check-")
    records = []
    with open(args.out, "w") as f:
        for p in shapes_within(args.shapes, args.time_budget, time.time()):
            rec = check(p, args.first_use)
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
            f.flush()
    route.use(None)
    summarize(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
