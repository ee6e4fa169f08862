"""`autokernel validate`: the kernel against a float32 torch reference, as a table."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import (
    EXIT_FAILED,
    HistoryOpt,
    ActivationOpt,
    ConfigOpt,
    DtypeOpt,
    ForceOpt,
    InterpretOpt,
    JsonOpt,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    append_history,
    console,
    fail,
    fmt,
    history_store,
    matmul_config,
    parse_config,
    print_json,
    print_table,
    problem_sizes,
    start_run,
    user_errors,
    check_interpreter_budget,
    require_interpreter_if_asked,
    triton_only,
)
from autokernel.history import make_row
from autokernel.records import LAYOUTS, KernelConfig, Problem, normalize_activation, parse_dtype

# torch and Triton load only in commands that run kernels: the modules that import them
# (runtime, evaluate) are imported inside the functions that use them.

if TYPE_CHECKING:
    from autokernel.evaluate import CheckResult

ODD_SHAPES = [(1, 1, 1), (17, 33, 65), (127, 255, 63), (64, 64, 64), (5, 7, 0), (0, 16, 8)]
GPU_SIZES = [512, 1024, 2048, 4096]
SUITE_DTYPES = ["float16", "bfloat16"]
ACTIVATED = ["relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]


def default_suite(
    dtypes: list[str] | None = None,
    activations: list[str] | None = None,
    biases: list[bool] | None = None,
    layouts: list[str] | None = None,
) -> list[Problem]:
    """Odd and zero-size shapes, every activation, bias on and off, transposed operands,
    fp16 and bf16; on a GPU also large problems up to 4096.

    Options narrow or replace an axis: every odd shape runs with the dtypes, activations,
    bias settings and layouts given (so ``-d fp32`` or ``--no-bias -a relu`` get a full
    set of shapes); the activation and layout sweeps run only when that axis is free.
    """
    from autokernel import runtime

    dtypes = dtypes or SUITE_DTYPES
    biases = [False, True] if biases is None else biases
    with_bias = [True] if True in biases else biases
    suite: list[Problem] = []
    for dtype in dtypes:
        for (m, n, k), bias, act, lay in itertools.product(ODD_SHAPES, biases, activations or ["none"],
                                                            layouts or ["nn"]):
            suite.append(Problem(m, n, k, dtype, act, bias, lay))
        if activations is None:
            for (m, n, k), act, bias in itertools.product([(17, 33, 65), (127, 255, 63)], ACTIVATED, with_bias):
                suite.append(Problem(m, n, k, dtype, act, bias, (layouts or ["nn"])[0]))
        if layouts is None:
            for lay, bias in itertools.product(LAYOUTS[1:], with_bias):
                suite.append(Problem(127, 255, 63, dtype, (activations or ["gelu"])[0], bias, lay))
        if not runtime.INTERPRETER:
            large = [Problem(s, s, s, dtype, act, bias) for s in GPU_SIZES
                     for act, bias in (("none", False), ("gelu_tanh", True))]
            large += [Problem(4096, 4096, 4096, dtype, "silu", True, "tn"),
                      Problem(4096, 4096, 4096, dtype, "leaky_relu", True, "nt"),
                      Problem(4095, 4097, 4093, dtype, "relu", True)]
            suite += [p for p in large if (activations is None or p.activation in activations)
                      and p.bias in biases and (layouts is None or p.layout in layouts)]
    return list(dict.fromkeys(suite))  # in order, without repeats


def build_suite(
    sizes: list[tuple[int, int, int]] | None,
    dtypes: list[str] | None,
    activations: list[str] | None,
    bias: bool | None,
    layouts: list[str] | None,
) -> list[Problem]:
    biases = None if bias is None else [bias]
    if sizes is None:
        return default_suite(dtypes, activations, biases, layouts)
    return [
        Problem(m, n, k, d, a, b, lay)
        for (m, n, k), d, a, b, lay in itertools.product(
            sizes, dtypes or SUITE_DTYPES, activations or ["none"], biases or [False, True], layouts or ["nn"]
        )
    ]


def run_validation(problems: list[Problem], configs: list[KernelConfig], seed: int | None,
                   on_result=None) -> list[CheckResult]:
    """Check each problem with its config; ``on_result(result)`` runs after each (the history append)."""
    from autokernel.evaluate import check_correctness

    results = []
    for i, (p, config) in enumerate(zip(problems, configs)):
        results.append(check_correctness(p, config, seed=None if seed is None else seed + i))
        if on_result is not None:
            on_result(results[-1])
    return results


def render(results: list[CheckResult], sources: list[str]) -> None:
    from autokernel import runtime
    from autokernel.evaluate import REL_TOL

    where = "triton interpreter (CPU)" if runtime.INTERPRETER else runtime.device_name()
    table = Table(title=f"autokernel validate · {where} · pass: rel ≤ {REL_TOL:g} and allclose(1e-2, 1e-2), all written")
    table.add_column("#", justify="right")
    table.add_column("problem")
    table.add_column("config")
    table.add_column("max |Δ|", justify="right")
    table.add_column("rel err", justify="right")
    table.add_column("result")
    for i, (r, source) in enumerate(zip(results, sources), 1):
        if r.error:
            verdict = f"[red]ERROR[/] {escape(r.error)}"
        elif r.passed:
            verdict = "[green]pass[/]"
        else:
            why = [w for w, bad in (("rel", (r.rel_error or 0) > REL_TOL), ("allclose", not r.allclose),
                                    ("unwritten", not r.all_written)) if bad]
            verdict = f"[red]FAIL[/] ({', '.join(why)})"
        table.add_row(str(i), r.problem.label(), f"{r.config.short()} ({source})", fmt(r.max_abs_diff), fmt(r.rel_error, 2), verdict)
    print_table(table)
    passed = sum(r.passed for r in results)
    colour = "green" if passed == len(results) else "red"
    console.print(f"[{colour}]{passed}/{len(results)} cases passed[/]")


def validate(
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    bias: Annotated[bool | None, typer.Option("--bias/--no-bias", help="Only cases with / without bias.")] = None,
    layout: Annotated[
        list[str] | None, typer.Option("--layout", "-l", help="nn, tn, nt or tt (t = transposed view); repeatable.")
    ] = None,
    config: ConfigOpt = None,
    seed: Annotated[int | None, typer.Option(help="Seed for the random inputs (default: fresh each run).")] = None,
    json_out: JsonOpt = False,
    history: HistoryOpt = None,
    interpret: Annotated[bool, typer.Option("--interpret", help="Run under Triton's interpreter on the CPU (where "
                                                                 "there is no GPU it does anyway).")] = False,
    force: ForceOpt = False,
) -> None:
    """Check the kernel against a float32 torch reference; exit 0 iff every case passes.

    Each case runs with the config autokernel.matmul picks when given none (a tuned one
    from $AUTOKERNEL_CONFIG or the configs shipped for this GPU, else the default; the
    table says which), or with --config.
    """
    with user_errors():
        sizes = problem_sizes(size, m, n, k)
        dtypes = [parse_dtype(d) for d in dtype] if dtype else None
        acts = [normalize_activation(a) for a in activation] if activation else None
        for lay in layout or []:
            if lay not in LAYOUTS:
                raise ValueError(f"--layout must be one of {', '.join(LAYOUTS)}; got {lay!r}")
        cfg = parse_config(config)
        if seed is not None and not -2 ** 63 <= seed < 2 ** 63 - 2 ** 32:
            raise ValueError(f"--seed must fit in 64 bits (each case adds its index), got {seed}")
        require_interpreter_if_asked(interpret)
        triton_only()
        problems = build_suite(sizes, dtypes, acts, bias, layout)
        store = history_store(history)
    if not problems:
        fail("no case matches these options")
    picked = [(cfg, "config") if cfg is not None else matmul_config(p) for p in problems]
    configs, sources = [c for c, _ in picked], [s for _, s in picked]
    check_interpreter_budget(problems, force, config=cfg)
    from autokernel.evaluate import check_status

    run_id = start_run(store)

    def record(r: CheckResult) -> None:
        append_history(store, [make_row("validate", r.problem, r.config, status=check_status(r), run_id=run_id,
                                        kernel="triton", rel_error=r.rel_error, max_abs_diff=r.max_abs_diff,
                                        error=r.error)])

    results = run_validation(problems, configs, seed, on_result=record)
    if json_out:
        print_json([{**r.to_dict(), "config_source": s} for r, s in zip(results, sources)])
    else:
        render(results, sources)
    if not all(r.passed for r in results):
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command(name="validate")(validate)
