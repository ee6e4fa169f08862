"""`autokernel fuse-bench`: matmul + bias + activation, fused and unfused, side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import (
    EXIT_FAILED,
    HOST_BOUND,
    ActivationOpt,
    BestOpt,
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
    console,
    fmt,
    history_store,
    load_best,
    matmul_config,
    measured_problems,
    print_json,
    print_table,
    problem_sizes,
    read_side_by_side,
    start_run,
    trial_timer,
    user_errors,
    wall_cell,
    warn,
    ForceOpt,
    check_interpreter_budget,
)
from autokernel.history import trial_row
from autokernel.records import KernelConfig, Problem, Trial

# torch and Triton load only in commands that run kernels: the modules that import them
# (runtime, evaluate, timing) are imported inside the functions that use them.

GPU_SIZE = 4096
INTERPRETER_SIZE = 64
DEFAULT_ACTIVATIONS = ["relu", "gelu_tanh", "leaky_relu"]


@dataclass
class FuseRow:
    """One implementation of one problem.

    ``name``: "eager" (addmm or matmul, then the activation as its own kernel),
    "cublaslt" (torch._addmm_activation), "max-autotune" (torch.compile), the Triton
    kernel with the config autokernel.matmul picks, named by its source ("env", "shipped"
    or "default": see _common.matmul_config), or "tuned" (the Triton kernel with --best's
    config). ``extra_bytes``: device-memory traffic
    beyond the fused minimum — each unfused epilogue op writes the M×N intermediate and
    reads it back, 2·M·N·elem bytes; None where we cannot know (torch.compile picks its
    kernels while autotuning, possibly cuBLAS plus a separate pointwise kernel).
    """

    name: str
    trial: Trial
    extra_bytes: int | None
    speedup: float | None = None
    gpu_speedup: float | None = None

    @property
    def gbps(self) -> float | None:
        """Effective bandwidth: the problem's fewest bytes over the time."""
        from autokernel.timing import gbps

        return gbps(self.trial.problem.bytes, self.trial.ms)

    def to_dict(self) -> dict:
        return {"name": self.name, **self.trial.to_dict(), "gbps": self.gbps,
                "speedup_vs_eager": self.speedup, "gpu_speedup_vs_eager": self.gpu_speedup,
                "extra_bytes": self.extra_bytes}


def unfused_bytes(problem: Problem) -> int:
    """Extra bytes of the eager path: the activation's own pass over C (the bias rides in addmm)."""
    ops = int(problem.activation != "none")
    return 2 * problem.m * problem.n * problem.torch_dtype.itemsize * ops


def run_fuse_bench(problem: Problem, *, compile_: bool, picked: tuple[KernelConfig, str], tuned: KernelConfig | None,
                   timer=None) -> list[FuseRow]:
    """Every implementation of ``problem`` in one run; speedups are against eager. ``picked``:
    the (config, source) autokernel.matmul runs; ``tuned``: --best's config, or None.
    ``timer``: default time_fn. On a GPU every implementation also gets its GPU time and its
    wall time per call, all of them timed side by side (read_side_by_side), and its speedup
    over eager by GPU time."""
    from autokernel.evaluate import cublaslt_activations, evaluate, evaluate_torch
    from autokernel.timing import time_fn

    timer = timer or time_fn
    rows = [FuseRow("eager", evaluate_torch(problem, "torch", timer=timer), unfused_bytes(problem))]
    if problem.bias and problem.activation in cublaslt_activations():
        rows.append(FuseRow("cublaslt", evaluate_torch(problem, "cublaslt", timer=timer), 0))
    if compile_:
        rows.append(FuseRow("max-autotune", evaluate_torch(problem, "torch_compile", timer=timer), None))
    config, source = picked
    rows.append(FuseRow(source, evaluate(problem, config, timer=timer), 0))
    if tuned is not None:
        rows.append(FuseRow("tuned", evaluate(problem, tuned, timer=timer), 0))
    read_side_by_side(problem, [row.trial for row in rows])
    eager = rows[0].trial
    for row in rows:
        if eager.ms is not None and row.trial.ms:
            row.speedup = eager.ms / row.trial.ms
        if eager.gpu_ms is not None and row.trial.gpu_ms:
            row.gpu_speedup = eager.gpu_ms / row.trial.gpu_ms
    return rows


def _label(row: FuseRow) -> str:
    kind = {"eager": "torch eager", "cublaslt": "cuBLASLt epilogue", "max-autotune": "torch.compile max-autotune"}
    from autokernel import runtime

    if runtime.INTERPRETER:  # torch on the CPU: no cuBLASLt there
        kind["cublaslt"] = "torch _addmm_activation (CPU)"
    if row.name in kind:
        return kind[row.name]
    source = "--best" if row.name == "tuned" else row.name
    return f"triton {row.trial.config.short()} ({source})"


def _megabytes(n: int | None) -> str:
    """Bytes as MB to 3 significant digits: 16 KB is 0.0164, not 0.0."""
    if n is None:
        return "-"
    return "0" if n == 0 else f"{n / 1e6:.3g}"


def render(results: list[tuple[Problem, list[FuseRow]]], timer_desc: str) -> None:
    from autokernel import runtime

    where = "triton interpreter (CPU), not comparable with GPU timings" if runtime.INTERPRETER else runtime.device_name()
    gpu = any(row.gpu_speedup for _, rows in results for row in rows)
    table = Table(title=f"autokernel fuse-bench · {where} · {timer_desc} · speedup vs eager"
                        + (" (GPU speedup: by GPU time, all timed side by side)" if gpu else ""))
    columns = [("problem", "left"), ("implementation", "left"), ("ms", "right"), ("TFLOP/s", "right"),
               ("GB/s", "right"), ("speedup", "right")]
    if gpu:
        columns += [("GPU µs", "right"), ("GPU speedup", "right"), ("wall µs", "right")]
    for name, justify in [*columns, ("extra MB", "right"), ("max |Δ|", "right"), ("result", "left")]:
        table.add_column(name, justify=justify)
    for problem, rows in results:
        for i, row in enumerate(rows):
            t = row.trial
            verdict = "[green]pass[/]" if t.ok else f"[red]{t.status}[/] {escape(t.error or '')}"
            cells = [problem.label() if i == 0 else "", _label(row), fmt(t.ms), fmt(t.tflops, 1),
                     fmt(row.gbps, 0), f"{row.speedup:.2f}x" if row.speedup else "-"]
            if gpu:
                cells += [f"{t.gpu_ms * 1e3:.1f}" if t.gpu_ms else "-",
                          f"{row.gpu_speedup:.2f}x" if row.gpu_speedup else "-", wall_cell((t,))]
            table.add_row(*cells, _megabytes(row.extra_bytes), fmt(t.max_abs_diff), verdict)
        table.add_section()
    print_table(table)
    console.print("extra MB: bytes the unfused path writes and re-reads for its separate activation pass "
                  "(2·M·N·elem); GB/s: the problem's fewest bytes over the time.")
    if gpu:
        console.print("ms: one call after an L2 flush, GPU events (median), one implementation after the other. "
                      "GPU µs: calls replayed in CUDA graphs, every implementation in interleaved rounds, no "
                      "launch cost. wall µs: calls back to back from Python, host included; [yellow]*[/] where "
                      f"it exceeds the GPU time by over {HOST_BOUND - 1:.0%}: host-bound.")


def fuse_bench(
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    bias: Annotated[bool, typer.Option("--bias/--no-bias", help="Add a bias vector (default: on).")] = True,
    compile_: Annotated[
        bool, typer.Option("--compile", help="Also time torch.compile max-autotune, without CUDA graphs (slow to compile).")
    ] = False,
    best: BestOpt = None,
    json_out: JsonOpt = False,
    history: HistoryOpt = None,
    interpret: InterpretOpt = False,
    force: ForceOpt = False,
    repeat: RepeatOpt = None,
) -> None:
    """Fused matmul + bias + activation: torch eager, cuBLASLt's epilogue, torch.compile and Triton.

    Default: 4096³ float16 with bias, for relu, gelu_tanh and leaky_relu (64³ under
    --interpret). The Triton kernel runs with the config autokernel.matmul picks (a
    tuned one from $AUTOKERNEL_CONFIG or the configs shipped for this GPU, else the
    default; the row says which), and also with --best's where given. Every measurement
    is appended to the history.
    """
    with user_errors():
        sizes = problem_sizes(size, m, n, k)
        check_repeat(repeat)
        problems = measured_problems(sizes, dtype, activation, bias, interpret, gpu_sizes=[GPU_SIZE],
                                     interpreter_sizes=[INTERPRETER_SIZE], activations=DEFAULT_ACTIVATIONS)
        best_file = load_best(best)
        tuned = {p: best_file.config_for(p) if best_file else None for p in problems}
        store = history_store(history)
    picked = {p: matmul_config(p) for p in problems}
    for p, cfg in tuned.items():
        if best and cfg is None:
            warn(f"no config in {best} for {p.label()}; showing the config autokernel.matmul picks only")
    check_interpreter_budget(problems, force)
    run_id = start_run(store)
    timer, how = trial_timer(repeat)

    results = []
    for problem in problems:
        rows = run_fuse_bench(problem, compile_=compile_, picked=picked[problem], tuned=tuned[problem], timer=timer)
        append_history(store, [trial_row("fuse-bench", r.trial, run_id=run_id, name=r.name) for r in rows])
        results.append((problem, rows))
    if json_out:
        print_json([row.to_dict() for _, rows in results for row in rows])
    else:
        render(results, how)
    if not all(r.trial.ok for _, rows in results for r in rows):
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command(name="fuse-bench")(fuse_bench)
