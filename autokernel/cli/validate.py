"""`autokernel validate`: the kernel against a float32 torch reference, as a table."""

from __future__ import annotations

import itertools
from typing import Annotated

import typer
from rich.table import Table

from autokernel import runtime
from autokernel.cli._common import (
    EXIT_FAILED,
    HistoryOpt,
    ActivationOpt,
    ConfigOpt,
    DtypeOpt,
    JsonOpt,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    append_history,
    console,
    fmt,
    history_store,
    print_json,
    problem_sizes,
    user_errors,
)
from autokernel.config import KernelConfig
from autokernel.evaluate import REL_TOL, CheckResult, check_correctness, check_status
from autokernel.history import make_row, new_run_id
from autokernel.problem import LAYOUTS, Problem

ODD_SHAPES = [(1, 1, 1), (17, 33, 65), (127, 255, 63), (64, 64, 64), (5, 7, 0), (0, 16, 8)]
GPU_SIZES = [512, 1024, 2048, 4096]
SUITE_DTYPES = ["float16", "bfloat16"]
ACTIVATED = ["relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]


def default_suite() -> list[Problem]:
    """Odd and zero-size shapes, every activation, bias on and off, transposed operands,
    fp16 and bf16; on a GPU also large square problems up to 4096."""
    suite: list[Problem] = []
    for dtype in SUITE_DTYPES:
        for (m, n, k), bias in itertools.product(ODD_SHAPES, (False, True)):
            suite.append(Problem(m, n, k, dtype, "none", bias))
        for (m, n, k), act in itertools.product([(17, 33, 65), (127, 255, 63)], ACTIVATED):
            suite.append(Problem(m, n, k, dtype, act, True))
        for layout in LAYOUTS[1:]:
            suite.append(Problem(127, 255, 63, dtype, "gelu", True, layout))
        if not runtime.INTERPRETER:
            for s in GPU_SIZES:
                suite.append(Problem(s, s, s, dtype, "none", False))
                suite.append(Problem(s, s, s, dtype, "gelu_tanh", True))
            suite.append(Problem(4096, 4096, 4096, dtype, "silu", True, "tn"))
            suite.append(Problem(4096, 4096, 4096, dtype, "leaky_relu", True, "nt"))
            suite.append(Problem(4095, 4097, 4093, dtype, "relu", True))
    return suite


def build_suite(
    sizes: list[tuple[int, int, int]] | None,
    dtypes: list[str] | None,
    activations: list[str] | None,
    bias: bool | None,
    layouts: list[str] | None,
) -> list[Problem]:
    if sizes is None and not dtypes and not activations and bias is None and not layouts:
        return default_suite()
    suite = default_suite() if sizes is None else None
    if suite is not None:
        # Filter the default suite by the options given.
        keep = []
        for p in suite:
            if dtypes and p.dtype not in dtypes:
                continue
            if activations and p.activation not in activations:
                continue
            if bias is not None and p.bias != bias:
                continue
            if layouts and p.layout not in layouts:
                continue
            keep.append(p)
        return keep
    return [
        Problem(m, n, k, d, a, b, lay)
        for (m, n, k), d, a, b, lay in itertools.product(
            sizes,
            dtypes or SUITE_DTYPES,
            activations or ["none"],
            [False, True] if bias is None else [bias],
            layouts or ["nn"],
        )
    ]


def run_validation(problems: list[Problem], config: KernelConfig | None, seed: int | None) -> list[CheckResult]:
    return [check_correctness(p, config, seed=None if seed is None else seed + i) for i, p in enumerate(problems)]


def render(results: list[CheckResult]) -> None:
    where = "triton interpreter (CPU)" if runtime.INTERPRETER else runtime.device_name()
    table = Table(title=f"autokernel validate · {where} · pass: rel ≤ {REL_TOL:g} and allclose(1e-2, 1e-2), all written")
    table.add_column("#", justify="right")
    table.add_column("problem")
    table.add_column("config")
    table.add_column("max |Δ|", justify="right")
    table.add_column("rel err", justify="right")
    table.add_column("result")
    for i, r in enumerate(results, 1):
        if r.error:
            verdict = f"[red]ERROR[/] {r.error}"
        elif r.passed:
            verdict = "[green]pass[/]"
        else:
            why = [w for w, bad in (("rel", (r.rel_error or 0) > REL_TOL), ("allclose", not r.allclose),
                                    ("unwritten", not r.all_written)) if bad]
            verdict = f"[red]FAIL[/] ({', '.join(why)})"
        table.add_row(str(i), r.problem.label(), r.config.short(), fmt(r.max_abs_diff), fmt(r.rel_error, 2), verdict)
    console.print(table)
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
) -> None:
    """Check the kernel against a float32 torch reference; exit 0 iff every case passes."""
    with user_errors():
        sizes = problem_sizes(size, m, n, k)
        from autokernel.api import normalize_activation
        from autokernel.problem import parse_dtype

        dtypes = [parse_dtype(d) for d in dtype] if dtype else None
        acts = [normalize_activation(a) for a in activation] if activation else None
        for lay in layout or []:
            if lay not in LAYOUTS:
                raise ValueError(f"--layout must be one of {', '.join(LAYOUTS)}; got {lay!r}")
        cfg = KernelConfig.from_json(config) if config else None
        problems = build_suite(sizes, dtypes, acts, bias, layout)
        store = history_store(history)
    if not problems:
        from autokernel.cli._common import fail

        fail("no case matches these options")
    results = run_validation(problems, cfg, seed)
    run_id = new_run_id()
    append_history(store, [
        make_row("validate", r.problem, r.config, status=check_status(r), run_id=run_id, kernel="triton",
                 rel_error=r.rel_error, max_abs_diff=r.max_abs_diff, error=r.error)
        for r in results
    ])
    if json_out:
        print_json([r.to_dict() for r in results])
    else:
        render(results)
    if not all(r.passed for r in results):
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command(name="validate")(validate)
