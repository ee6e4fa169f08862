"""`autokernel bench`: the Triton kernel against torch (cuBLAS), problem by problem, in one run."""

from __future__ import annotations

import csv
import dataclasses
import errno
import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import (
    EXIT_FAILED,
    HOST_BOUND,
    ActivationOpt,
    BestOpt,
    ConfigOpt,
    DtypeOpt,
    HistoryOpt,
    InterpretOpt,
    JsonOpt,
    KOpt,
    MOpt,
    NOpt,
    RepeatOpt,
    SizeOpt,
    append_history,
    check_repeat,
    fail,
    fmt,
    history_store,
    host_bound,
    load_best,
    matmul_config,
    measured_problems,
    parse_config,
    print_json,
    print_table,
    problem_sizes,
    read_side_by_side,
    start_run,
    trial_timer,
    user_errors,
    wall_cell,
    warn,
    check_interpreter_budget,
    ForceOpt,
)
from autokernel.history import trial_row
from autokernel.records import KernelConfig, Problem, Trial

# torch and Triton load only in commands that run kernels: the modules that import them
# (runtime, best, evaluate, timing) are imported inside the functions that use them.
if TYPE_CHECKING:
    from autokernel.best import BestFile

GPU_SIZES = [2048, 4096, 8192]
INTERPRETER_SIZES = [64, 128]


@dataclass
class BenchResult:
    """One problem: the torch baseline and the Triton kernel, measured side by side.

    ``source`` says where the Triton config came from: "config" (--config), "best"
    (--best), or as autokernel.matmul would pick it: "env" ($AUTOKERNEL_CONFIG),
    "shipped" (the configs shipped for this GPU) or "default" (default_config; also
    --untuned).
    """

    problem: Problem
    torch: Trial
    triton: Trial
    source: str

    @property
    def speedup(self) -> float | None:
        """torch ms / triton ms: above 1 means the Triton kernel is faster."""
        if self.torch.ms is None or not self.triton.ms:
            return None
        return self.torch.ms / self.triton.ms

    @property
    def gpu_speedup(self) -> float | None:
        """The same by GPU time (torch and Triton timed side by side), where measured."""
        if self.torch.gpu_ms is None or not self.triton.gpu_ms:
            return None
        return self.torch.gpu_ms / self.triton.gpu_ms

    @property
    def ok(self) -> bool:
        return self.torch.ok and self.triton.ok

    def to_dict(self) -> dict:
        return {
            "problem": self.problem.to_dict(),
            "config": None if self.triton.config is None else self.triton.config.model_dump(),
            "config_source": self.source,
            "torch": self.torch.to_dict(),
            "triton": self.triton.to_dict(),
            "speedup": self.speedup,
            "gpu_speedup": self.gpu_speedup,
        }

    def table_row(self) -> dict:
        """The flat row of this run's table (as --csv writes it)."""
        p, t, k = self.problem, self.torch, self.triton
        return {
            "M": p.m, "N": p.n, "K": p.k, "dtype": p.dtype, "activation": p.activation, "bias": p.bias,
            "layout": p.layout, "config": k.config.to_json() if k.config else "", "config_source": self.source,
            "torch_ms": t.ms, "torch_tflops": t.tflops, "triton_ms": k.ms, "triton_ms_p20": k.p20,
            "triton_ms_p80": k.p80, "triton_tflops": k.tflops, "speedup": self.speedup,
            "torch_gpu_ms": t.gpu_ms, "triton_gpu_ms": k.gpu_ms, "gpu_speedup": self.gpu_speedup,
            "torch_wall_ms": t.wall_ms, "triton_wall_ms": k.wall_ms, "torch_host_bound": host_bound(t),
            "triton_host_bound": host_bound(k),
            "max_abs_diff": k.max_abs_diff, "rel_error": k.rel_error, "status": k.status,
            "torch_status": t.status, "timing": k.timing, "error": k.error or t.error,
        }


def run_bench(problems: list[Problem], configs: list[tuple[KernelConfig | None, str]], *, timer=None,
              on_result=None, backward: bool = False) -> list[BenchResult]:
    """Measure torch and the kernel on each problem; ``on_result(result)`` is called after each.

    With ``backward``: one forward + backward step of the linear layer each, torch autograd
    against autokernel.linear (``config`` is the forward GEMM's). ``timer``: default time_fn.
    On a GPU a forward problem's two also get their GPU time per call (no launch cost) and
    their wall time per call (back to back, host included), each taken side by side
    (evaluate.race_trials, evaluate.wall_trials); a training step's two the same per step
    (evaluate.race_training_trials, evaluate.wall_training_trials); a reading that fails
    leaves its time unmeasured, with a warning."""
    from autokernel.evaluate import (
        error_line, evaluate, evaluate_linear_training, evaluate_torch, race_training_trials, wall_training_trials,
    )
    from autokernel.timing import time_fn

    timer = timer or time_fn
    results = []
    for problem, (config, source) in zip(problems, configs):
        if backward:
            torch_trial = evaluate_linear_training(problem, "torch_autograd", timer=timer)
            triton_trial = evaluate_linear_training(problem, "triton_autograd", config, timer=timer)
            runs = [(torch_trial, None), (triton_trial, config)]
            try:
                race_training_trials(problem, runs)
            except Exception as exc:  # the event times stand; the GPU time stays unmeasured
                warn(f"{problem.label()}: GPU time per step not measured ({error_line(exc)})")
            try:
                wall_training_trials(problem, runs)
            except Exception as exc:  # the event times stand
                warn(f"{problem.label()}: wall time per step not measured ({error_line(exc)})")
        else:
            torch_trial = evaluate_torch(problem, "torch", timer=timer)
            triton_trial = evaluate(problem, config, timer=timer)
            read_side_by_side(problem, [torch_trial, triton_trial])
        result = BenchResult(problem, torch_trial, triton_trial, source)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def _title(timer_desc: str, backward: bool) -> str:
    from autokernel import runtime

    what = "autokernel bench --backward · forward + backward, X[M,K] W[N,K] (TFLOP/s count 6·M·N·K)" if backward \
        else "autokernel bench"
    if runtime.INTERPRETER:
        return f"{what} · triton interpreter (CPU) · {timer_desc} · not comparable with GPU timings"
    gpu = " (GPU speedup: by GPU time, the two timed side by side)"
    return f"{what} · {runtime.device_name()} · {timer_desc} · speedup = torch ms / triton ms{gpu}"


def render(results: list[BenchResult], timer_desc: str, backward: bool = False) -> None:
    table = Table(title=_title(timer_desc, backward))
    for name, justify in [("problem", "left"), ("triton config", "left"), ("torch ms", "right"),
                          ("torch TFLOP/s", "right"), ("triton ms (p20–p80)", "right"), ("triton TFLOP/s", "right"),
                          ("speedup", "right"), ("GPU µs torch / triton", "right"), ("GPU speedup", "right"),
                          ("wall µs torch / triton", "right"),
                          ("max |Δ|", "right"), ("result", "left")]:
        table.add_column(name, justify=justify)
    for r in results:
        t, k = r.torch, r.triton
        spread = f"{fmt(k.ms)} ({fmt(k.p20)}–{fmt(k.p80)})" if k.ms is not None else "-"
        if r.ok:
            verdict = "[green]pass[/]"
        else:
            bad = k if not k.ok else t
            who = "triton" if bad is k else "torch"
            verdict = f"[red]{who} {bad.status}[/] {escape(bad.error or '')}"
        config = f"{k.config.short()} ({r.source})" if k.config else "-"
        gpu = f"{t.gpu_ms * 1e3:.1f} / {k.gpu_ms * 1e3:.1f}" if r.gpu_speedup else "-"
        table.add_row(r.problem.label(), config, fmt(t.ms), fmt(t.tflops, 1), spread, fmt(k.tflops, 1),
                      f"{r.speedup:.2f}x" if r.speedup else "-", gpu,
                      f"{r.gpu_speedup:.2f}x" if r.gpu_speedup else "-", wall_cell((t, k)),
                      fmt(k.max_abs_diff), verdict)
    if backward and any(r.triton.wall_ms is not None for r in results):
        table.caption = ("torch / triton ms: one step after an L2 flush, GPU events (median), one after the other. "
                         "GPU µs: steps replayed in CUDA graphs, torch's and ours in interleaved rounds, no launch "
                         "cost. wall µs: steps back to back from Python (autograd and launches included), "
                         f"interleaved rounds (median); [yellow]*[/] where it exceeds the GPU time by over "
                         f"{HOST_BOUND - 1:.0%}: host-bound")
    if not backward and any(r.triton.wall_ms is not None for r in results):
        table.caption = ("torch / triton ms: one call after an L2 flush, GPU events (median). GPU µs: calls replayed "
                         "in CUDA graphs, no launch cost. wall µs: calls back to back from Python, host included; "
                         f"[yellow]*[/] where it exceeds the GPU time by over {HOST_BOUND - 1:.0%}: host-bound")
    print_table(table)


def write_csv(path: str | Path, results: list[BenchResult]) -> None:
    """This run's table as CSV, replacing ``path`` atomically (a failed write leaves the old
    file whole); OSError when it cannot be written."""
    from autokernel.userfiles import write_atomically

    rows = [r.table_row() for r in results]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]) if rows else [])
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    write_atomically(path, text.getvalue(), newline="")


def check_csv_path(path: str, reads: dict[str, str | Path | None]) -> None:
    """Refuse (one line, exit 2), before any time is spent measuring, a --csv that names no
    file, names a file this run reads or appends to (``reads``: what it is -> its path, e.g.
    the history), or cannot be written."""
    from autokernel.userfiles import make_parent, same_file

    if not path.strip():
        fail("--csv needs a file name")
    for what, source in reads.items():
        if source and same_file(path, source):
            fail(f"--csv {path} is {what}: this run's table would replace it; write the table to another file")
    out = Path(path)
    if out.is_dir():
        fail(f"--csv {path} is a directory, not a CSV file")
    try:
        make_parent(out)
        tempfile.TemporaryFile(dir=out.parent).close()  # the table is written beside it, then renamed over it
        if out.exists() and not os.access(out, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(out))
    except OSError as exc:
        fail(f"cannot write --csv {path}: {exc.strerror or exc}")


def bench(
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    bias: Annotated[bool, typer.Option("--bias/--no-bias", help="Add a bias vector (in torch too).")] = False,
    config: ConfigOpt = None,
    best: BestOpt = None,
    untuned: Annotated[bool, typer.Option(
        "--untuned", help="Time the default config autokernel.matmul falls back to (with --backward, each "
                          "GEMM's own), not the config it would pick ($AUTOKERNEL_CONFIG, the configs shipped "
                          "for this GPU, the selector).")] = False,
    json_out: JsonOpt = False,
    csv_path: Annotated[str | None, typer.Option("--csv", help="Also write this run's table to a CSV file.")] = None,
    history: HistoryOpt = None,
    interpret: InterpretOpt = False,
    force: ForceOpt = False,
    repeat: RepeatOpt = None,
    backward: Annotated[
        bool,
        typer.Option("--backward", help="Time forward + backward of the linear layer (X[M,K], weight [N,K]) "
                                        "against torch autograd."),
    ] = False,
) -> None:
    """Time the Triton kernel against torch.matmul (cuBLAS) on each problem, in one run.

    The kernel runs with the config autokernel.matmul picks when given none (a tuned one
    from $AUTOKERNEL_CONFIG or the configs shipped for this GPU, else the default; the
    table says which), or with --config, --best or --untuned (the default config).

    With --bias or --activation the torch side adds the bias (addmm) and applies the
    activation, so both compute the same function. With --backward each problem is one
    training step of act(X W^T + b): autokernel.linear against torch autograd, gradients
    checked. Every measurement, torch and Triton, is appended to the history.
    """
    with user_errors():
        sizes = problem_sizes(size, m, n, k)
        check_repeat(repeat)
        if sum(map(bool, (config, best, untuned))) > 1:
            fail("give one of --config, --best and --untuned, not several")
        problems = measured_problems(sizes, dtype, activation, bias, interpret, gpu_sizes=GPU_SIZES,
                                     interpreter_sizes=INTERPRETER_SIZES, activations=["none"])
        if backward:  # the nn.Linear layout: the weight [N, K] is read transposed
            problems = [dataclasses.replace(p, layout="nt") for p in problems]
        fixed = parse_config(config)
        tuned = load_best(best)
        configs = [_config_for(p, fixed, tuned, best, untuned) for p in problems]
        store = history_store(history)
        if csv_path is not None:
            check_csv_path(csv_path, {"the history this run appends to": store.path, "the --best file": best,
                                      "the --config file": config if config and os.path.isfile(config) else None,
                                      "the tuned-config file of $AUTOKERNEL_CONFIG": os.environ.get("AUTOKERNEL_CONFIG")})
    check_interpreter_budget(problems, force, passes=3 if backward else 1)  # forward, dX and dW GEMMs
    run_id = start_run(store)

    def record(result: BenchResult) -> None:
        append_history(store, [trial_row("bench", result.torch, run_id=run_id, name="torch"),
                               trial_row("bench", result.triton, run_id=run_id, name=result.source)])

    timer, how = trial_timer(repeat)
    results = run_bench(problems, configs, timer=timer, on_result=record, backward=backward)
    if csv_path is not None:
        try:
            write_csv(csv_path, results)
        except OSError as exc:
            fail(f"cannot write --csv {csv_path}: {exc.strerror or exc}")
    if json_out:
        print_json([r.to_dict() for r in results])
    else:
        render(results, how, backward)
    if not all(r.ok for r in results):
        raise typer.Exit(EXIT_FAILED)


def _config_for(problem: Problem, fixed: KernelConfig | None, tuned: BestFile | None,
                best: str | None, untuned: bool) -> tuple[KernelConfig | None, str]:
    """The config bench times and its source: --config ("config"), --best's entry ("best"),
    --untuned or a --best file without the problem ("default": default_config), else
    what autokernel.matmul launches with when given none (best.resolve): "env",
    "shipped" or "default"."""
    if fixed is not None:
        return fixed, "config"
    if tuned is not None:
        found = tuned.config_for(problem)
        if found is not None:
            return found, "best"
        warn(f"no config in {best} for {problem.label()}; using the default config")
        return None, "default"
    if untuned:
        return None, "default"
    return matmul_config(problem)


def register(app: typer.Typer) -> None:
    app.command(name="bench")(bench)
