"""Measure the public shape suite (configs/shapes/) side by side, one process, into a results
file for `autokernel report`. Usage, on the GPU machine:

    python3 benchmarks/suite.py --out results/suite.jsonl            # squares, llm, decode
    python3 benchmarks/suite.py configs/shapes/fused.csv --out results/suite.jsonl --append --compile
    autokernel report results/suite.jsonl                                   # docs/BENCHMARKS.md

Per problem of each shapes file: Triton with the config autokernel.matmul picks by itself
(best.resolve on the operands as the suite lays them out: a tuned entry, else the selector's
pick, else the default; and where that is not the default, Triton with the default beside it), Triton with a best-config file's
config (--tuned),
cuBLAS (torch.matmul) for a plain GEMM or eager fused (addmm + the activation) for one with
an epilogue, cuBLASLt's fused epilogue where it has the activation, and torch.compile
max-autotune (--compile, slow). Each is checked against a float32 reference, then timed
twice: time_fn's median (L2 flushed, includes host launch time) and, where this checkout's
evaluate offers it (``graph_time``, timing.gpu_time), GPU time by CUDA-graph replay. Every
row is appended and flushed as it is measured; a failing implementation is a row with its
status and error, never the end of the run. --interpret runs tiny suites on the CPU under
Triton's interpreter (host logic only: those times say nothing about a GPU).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SUITES = [ROOT / "configs" / "shapes" / f"{name}.csv" for name in ("squares", "llm", "decode")]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", type=Path,
                        help="shapes files (CSV or JSON, autokernel.tuning.shapes); default: squares, llm, decode")
    parser.add_argument("--out", required=True, type=Path, help="the results file (JSON lines) to write")
    parser.add_argument("--append", action="store_true", help="add to an existing --out instead of refusing it")
    parser.add_argument("--resume", action="store_true",
                        help="append, skipping the problems --out already has every implementation of "
                             "(continue a run cut short, e.g. by --time-budget)")
    parser.add_argument("--tuned", help="a best-config file: also time Triton with its config for each problem")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile max-autotune (minutes)")
    parser.add_argument("--race", action=argparse.BooleanOptionalAction, default=True,
                        help="take every implementation's gpu_ms of a problem side by side, interleaved "
                             "(timing.race; default), not one after another")
    parser.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                        help="start no new problem after this many seconds (rows measured so far are kept)")
    parser.add_argument("--interpret", action="store_true",
                        help="run under Triton's interpreter on the CPU (tiny suites; tests the host logic)")
    return parser.parse_args(argv)


def _refuse(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def matmul_config(problem):
    """(config, source): what autokernel.matmul launches for ``problem`` when given no config,
    on the operands as ``Problem.make_inputs`` lays them out (its layout, and whether the TMA
    kernel takes them), and where it came from (``best.resolve``: "selected", "default",
    "shipped", "env", ...)."""
    from autokernel import api, best, runtime

    tma = api.tma_runs_for(problem.m, problem.n, problem.k, problem.torch_dtype, problem.layout)
    return best.resolve(problem.m, problem.n, problem.k, problem.torch_dtype, problem.activation, problem.bias,
                        runtime.kernel_device(), False, tma, problem.layout)


def tuned_lookup(path: str):
    """``problem -> KernelConfig | None`` from a best-config file; ValueError if it is not one."""
    from autokernel import best

    return best.load(path).config_for


def implementations(problem, args, tuned_config, graph: dict) -> list[tuple[str, object]]:
    """(impl, thunk returning a Trial) for each implementation that applies to ``problem``."""
    from autokernel.evaluate import cublaslt_activations, evaluate, evaluate_torch, problem_default
    from autokernel.report import has_epilogue

    out = []

    try:
        config, source = matmul_config(problem)
    except Exception as exc:  # a row with the error, as for any failing implementation
        def fail(exc=exc):
            raise exc
        config, source = None, "default"
        out.append(("triton", fail))
    else:
        out.append(("triton", lambda: (evaluate(problem, config, **graph), source)))
    default = problem_default(problem)
    if config != default:  # what the pick gains over the default, side by side
        out.append(("triton_default", lambda: (evaluate(problem, default, **graph), "default")))
    if tuned_config is not None:
        out.append(("triton_tuned", lambda: (evaluate(problem, tuned_config, **graph), "file")))
    out.append(("eager" if has_epilogue(problem) else "cublas", lambda: (evaluate_torch(problem, "torch", **graph), None)))
    if problem.bias and problem.activation in cublaslt_activations():
        out.append(("cublaslt", lambda: (evaluate_torch(problem, "cublaslt", **graph), None)))
    if args.compile:
        out.append(("max_autotune", lambda: (evaluate_torch(problem, "torch_compile", **graph), None)))
    return out


RACE_TIMER = "cuda_graph_race"


def race_gpu_ms(problem, measured: list) -> str | None:
    """Replace the gpu_ms of every implementation that succeeded with one side-by-side
    reading (evaluate.race_trials: their CUDA graphs interleaved in short segments, so all
    of them run through the same clock phases of a power-capped GPU). Returns RACE_TIMER,
    or None (with a warning where the race failed; the separate readings kept)."""
    from autokernel.evaluate import error_line, race_trials

    try:
        return RACE_TIMER if race_trials(problem, [t for _, t, _ in measured if t.gpu_ms is not None]) else None
    except Exception as exc:
        print(f"warning: {problem.label()}: side-by-side timing failed ({error_line(exc)}); "
              "gpu_ms from separate readings", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before autokernel imports triton
    from autokernel import runtime
    from autokernel.evaluate import Trial, error_line, evaluate, evaluate_torch, failure_status
    from autokernel.history import new_run_id
    from autokernel.report import read_results, result_row
    from autokernel.timing import timing_label
    from autokernel.tuning.shapes import read_shapes

    if runtime.INTERPRETER and not args.interpret:
        return _refuse("no GPU here: pass --interpret to run (tiny) suites under Triton's interpreter")
    from autokernel import route

    route.use("triton")  # the suite reports the Triton kernels, whatever $AUTOKERNEL_BACKEND says
    if args.interpret and not runtime.INTERPRETER:
        return _refuse("--interpret needs TRITON_INTERPRET=1 set before triton is imported")
    if args.time_budget is not None and args.time_budget <= 0:
        return _refuse(f"--time-budget must be > 0 seconds, got {args.time_budget}")
    try:
        suites = [(path.stem, read_shapes(path)) for path in (args.suites or DEFAULT_SUITES)]
        lookup = tuned_lookup(args.tuned) if args.tuned else None
        tuned = {p: lookup(p) for _, problems in suites for p in problems} if lookup else {}
    except ValueError as exc:  # ConfigError too: a bad file costs no GPU time
        return _refuse(str(exc))
    if args.out.exists() and not (args.append or args.resume):
        return _refuse(f"--out {args.out} exists: pass --append to add to it, or name a new file")
    measured: dict[tuple, set[str]] = {}  # (suite, problem, run_id) -> implementations with a row
    try:
        for r in read_results(args.out) if args.resume and args.out.exists() else []:
            measured.setdefault((r["suite"], r["problem"], r["run_id"]), set()).add(r["impl"])
    except ValueError as exc:
        return _refuse(f"--resume: {exc}")
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        sink = open(args.out, "a")
        if sink.tell() and not args.out.read_bytes().endswith(b"\n"):
            sink.write("\n")  # after a row cut short by a killed run: start afresh (the report skips it)
    except OSError as exc:
        return _refuse(f"cannot write --out {args.out}: {exc.strerror or exc}")

    # gpu_ms by CUDA-graph replay where this checkout's evaluate measures it (timing.gpu_time).
    graph_timer = not runtime.INTERPRETER and all(
        "graph_time" in inspect.signature(f).parameters for f in (evaluate, evaluate_torch))
    graph = {"graph_time": True} if graph_timer else {}
    if args.tuned and not any(tuned.values()):
        print(f"warning: {args.tuned} has no config for any problem of these suites", file=sys.stderr)
    if not graph_timer and not runtime.INTERPRETER:
        print("warning: evaluate has no graph_time here: gpu_ms is not measured, wall time only", file=sys.stderr)
    copy_gbs = None
    if not runtime.INTERPRETER:
        from autokernel.roofline import measure_ceilings

        try:
            copy_gbs = measure_ceilings().bandwidth_gbs
            print(f"{runtime.device_name()}: device copy {copy_gbs:.0f} GB/s", flush=True)
        except Exception as exc:  # the suite is still worth measuring; the report says "not measured"
            print(f"warning: copy bandwidth not measured: {error_line(exc)}", file=sys.stderr)
    command = shlex.join(["python3", "benchmarks/suite.py", *(sys.argv[1:] if argv is None else argv)])
    run_id = new_run_id()
    start = time.monotonic()
    rows, skipped, resumed = [], 0, 0
    try:
        for suite, problems in suites:
            for problem in problems:
                impls = implementations(problem, args, tuned.get(problem), graph)
                if any(key[:2] == (suite, problem) and {name for name, _ in impls} <= done
                       for key, done in measured.items()):
                    resumed += 1
                    continue
                if args.time_budget is not None and time.monotonic() - start > args.time_budget:
                    skipped += 1
                    continue
                measured_here = []
                for impl, thunk in impls:
                    source = None
                    try:
                        trial, source = thunk()
                    except Exception as exc:  # one failing implementation is a row, not the end of the run
                        trial = Trial(problem, None, failure_status(exc), kernel=impl, error=error_line(exc),
                                      timing=timing_label())
                    measured_here.append((impl, trial, source))
                timer_name = "cuda_graph" if graph_timer else None
                if graph_timer and args.race:
                    timer_name = race_gpu_ms(problem, measured_here) or timer_name
                for impl, trial, source in measured_here:
                    row = result_row(suite, impl, trial, command=command, run_id=run_id, config_source=source,
                                     copy_gbs=copy_gbs, gpu_timer=timer_name)
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                    rows.append(row)
                    print(_progress(row, time.monotonic() - start), flush=True)
    except KeyboardInterrupt:
        print(f"interrupted: {len(rows)} rows saved in {args.out}", file=sys.stderr)
        return 130
    finally:
        sink.close()
    _summary([r for r in read_results(args.out) if r["run_id"] == run_id])
    if resumed:
        print(f"--resume: {resumed} problems already measured in {args.out}")
    if skipped:
        print(f"time budget: {skipped} problems not measured; run again with --resume to measure them",
              file=sys.stderr)
    print(f"{len(rows)} rows in {args.out} ({time.monotonic() - start:.0f} s); next: autokernel report {args.out}")
    return 0


def _progress(row: dict, elapsed: float) -> str:
    ms = "-" if row["ms"] is None else f"{row['ms']:.4f}"
    gpu = "-" if row["gpu_ms"] is None else f"{row['gpu_ms']:.4f}"
    what = row["status"] if row["status"] == "success" else f"{row['status']}: {row['error']}"
    return (f"[{elapsed:5.0f}s] {row['suite']:8s} {row['M']}x{row['N']}x{row['K']} {row['dtype']:8s} "
            f"{row['activation']:9s} {row['impl']:12s} ms {ms:>8s} gpu_ms {gpu:>8s}  {what}")


def _summary(rows: list[dict]) -> None:
    """The run's short table: per problem Triton's times and its speedups over the baseline
    (``rows`` as report.read_results gives them)."""
    from rich.console import Console
    from rich.table import Table

    from autokernel.report import IMPLEMENTATIONS, group

    table = Table(title="speedup = baseline time / Triton time (baseline: cuBLAS, or eager fused with an epilogue)")
    for name in ("suite", "problem", "Triton ms", "Triton gpu_ms", "speedup (gpu)", "speedup (wall)", "failed"):
        table.add_column(name, justify="left" if name in ("suite", "problem", "failed") else "right")
    for r in group(rows):
        failed = ", ".join(IMPLEMENTATIONS[i] for i, row in r.rows.items() if row["status"] != "success")
        sg, sw = r.speedup("gpu"), r.speedup("wall")
        tw, tg = r.time("triton", "wall"), r.time("triton", "gpu")
        table.add_row(r.suite, r.problem.label(), "-" if tw is None else f"{tw:.4f}", "-" if tg is None else f"{tg:.4f}",
                      "-" if sg is None else f"{sg:.2f}x", "-" if sw is None else f"{sw:.2f}x", failed)
    Console(width=max(160, Console().width)).print(table)


if __name__ == "__main__":
    sys.exit(main())
