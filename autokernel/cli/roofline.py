"""`autokernel roofline`: the GPU table, or where a problem's time sits under its roofline."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autokernel.cli._common import (
    ActivationOpt,
    DtypeOpt,
    HistoryOpt,
    JsonOpt,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    console,
    fail,
    fmt,
    path_option,
    print_json,
    print_table,
    problem_sizes,
    user_errors,
)
from autokernel.cli.history import load_trials
from autokernel.history import best_per_problem
from autokernel.records import Problem, Recorded, parse_dtype

# torch loads only in commands that need it: torch and the modules that import it (roofline,
# timing) are imported inside the functions that use them.

if TYPE_CHECKING:
    from autokernel.roofline import Ceilings, GpuSpec, RooflineResult


def _device_name() -> str | None:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def _gpu_rows(trials: "list[Recorded]", problem: "Problem", spec: "GpuSpec") -> "list[Recorded]":
    """Successful GPU-timed trials of ``problem`` measured on a device that ``spec`` describes."""
    from autokernel.roofline import detect_gpu

    return [t for t in trials if t.ok and t.timing == "gpu" and t.ms is not None and t.problem == problem
            and getattr(detect_gpu(t.device or ""), "name", None) == spec.name]


def _render_table(detected: "GpuSpec | None", device: str | None, ceilings: "Ceilings | None") -> None:
    from autokernel.best import selector_coverage
    from autokernel.roofline import GPUS

    if device is None:
        caption = "no GPU detected here"
    elif detected is None:
        caption = f"this GPU ({device}) is not in the table: pass --gpu NAME for the nearest part"
    else:
        caption = f"▶ this GPU: {device}"
    table = Table(title="Datasheet peaks, dense: TFLOP/s, GB/s; ridge in FLOP/B", caption=caption)
    for name in ("", "GPU", "fp16/bf16", "tf32", "fp32", "fp8", "GB/s", "ridge", "SMs", "arch", "selector", "note"):
        table.add_column(name, justify="left" if name in ("", "GPU", "arch", "selector", "note") else "right",
                         no_wrap=name == "GPU")
    for spec in GPUS:
        here = detected is not None and spec.name == detected.name
        table.add_row("▶" if here else "", f"[bold]{spec.name}[/]" if here else spec.name,
                      f"{spec.fp16_tflops:g}", f"{spec.tf32_tflops:g}", f"{spec.fp32_tflops:g}",
                      "-" if spec.fp8_tflops is None else f"{spec.fp8_tflops:g}", f"{spec.bandwidth_gbs:g}",
                      f"{spec.fp16_tflops * 1e3 / spec.bandwidth_gbs:.0f}", str(spec.sms or "-"), spec.arch or "-",
                      selector_coverage(spec) or "-", spec.note)
    if ceilings is not None:
        table.add_row("▶", "measured here", f"{ceilings.gemm_tflops:.1f}", "", "", "",
                      f"{ceilings.bandwidth_gbs:.0f}",
                      f"{ceilings.gemm_tflops * 1e3 / ceilings.bandwidth_gbs:.0f}", "", "", "",
                      f"cuBLAS {ceilings.dtype} {ceilings.gemm_size}³, {ceilings.copy_bytes >> 20} MiB copy")
    print_table(table)
    console.print("selector: the model autokernel.matmul ranks configs with on that GPU, fitted on it or carried "
                  "from a fitted GPU of its architecture by these datasheet ratios; \"-\": none, the default config "
                  "(docs/selector.md)")


def _render_results(results: list["RooflineResult"], sources: list[str | None], spec: "GpuSpec") -> None:
    """One column per problem, one row per quantity: it stays readable in 80 columns."""
    table = Table(title=f"Roofline · {spec.name} · {spec.bandwidth_gbs:g} GB/s")
    table.add_column("")
    for r in results:
        table.add_column(r.problem.label(), justify="right")
    rows = [
        ("FLOP/B", [f"{r.arithmetic_intensity:.1f}" for r in results]),
        ("ridge point, FLOP/B", [f"{r.ridge_point:.0f}" for r in results]),
        ("memory roof, TFLOP/s", [f"{r.memory_bound_tflops:.1f}" for r in results]),
        ("compute roof, TFLOP/s", [f"{r.compute_bound_tflops:g}" for r in results]),
        ("roofline, TFLOP/s", [f"{r.roofline_tflops:.1f} ({r.bound})" for r in results]),
        ("time, ms", [fmt(r.ms, 4) for r in results]),
        ("time from", [s or "-" for s in sources]),
        ("achieved, TFLOP/s", [fmt(r.achieved_tflops, 1) for r in results]),
        ("efficiency", ["-" if r.efficiency is None else f"{r.efficiency:.0%}" for r in results]),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    if any(s is None for s in sources):
        table.caption = "no time: pass --ms, or tune the problem on this GPU"
    print_table(table)


def _write_plot(results: list["RooflineResult"], spec: "GpuSpec", path: Path,
                trials: list[tuple[float, float]]) -> Path:
    """The chart written (its path, with the suffix the format added)."""
    from autokernel.roofline import plot_roofline

    try:
        return plot_roofline(results, spec, path, trials=trials)
    except (OSError, ValueError) as exc:
        fail(f"cannot write the chart to {path}: {getattr(exc, 'strerror', None) or exc}")


def roofline(
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="A GPU of the table (A100, H100, 'H100 PCIe', ...); default: this one.")
    ] = None,
    measure: Annotated[
        bool, typer.Option("--measure", help="Measure this GPU's copy GB/s and cuBLAS TFLOP/s; use them as ceilings.")
    ] = False,
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    bias: Annotated[bool, typer.Option("--bias/--no-bias", help="The problem adds a bias (read once).")] = False,
    layout: Annotated[str, typer.Option("--layout", "-l", help="nn, tn, nt or tt.")] = "nn",
    ms: Annotated[
        float | None,
        typer.Option("--ms", help="The measured time in ms (default: the history's best GPU time on this GPU)."),
    ] = None,
    history_path: HistoryOpt = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", parser=path_option, help="Write a log-log roofline chart here (e.g. roofline.png).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """The GPU table, or a problem's roofline: FLOP/B, ceilings and efficiency in TFLOP/s.

    With a problem: its memory- and compute-bound ceilings and, given a time (--ms, else
    the best GPU time on this GPU in the history), its efficiency.
    """
    from autokernel.best import selector_coverage
    from autokernel.roofline import GPUS, analyze, detect_gpu, lookup_gpu, measure_ceilings
    from autokernel.timing import tflops

    with user_errors():
        sizes = problem_sizes(size, m, n, k) or []
        dtypes = [parse_dtype(d) for d in dtype] if dtype else ["float16"]
        problems = [Problem(mm, nn, kk, d, a, bias, layout)
                    for (mm, nn, kk), d, a in itertools.product(sizes, dtypes, activation or ["none"])]
        if ms is not None:
            if len(problems) != 1:
                raise ValueError(f"--ms needs exactly one problem (--size or --m/--n/--k), got {len(problems)}")
            if not 0 < ms < math.inf:
                raise ValueError(f"--ms must be > 0 and finite, got {ms}")
        for p in problems:
            if min(p.m, p.n, p.k) <= 0:
                raise ValueError(f"a roofline needs M, N and K > 0, got {p.m}x{p.n}x{p.k}")
        device = _device_name()
        detected = detect_gpu(device) if device else None
        spec = lookup_gpu(gpu) if gpu else detected
    known = ", ".join(s.name for s in GPUS)
    if spec is None and (problems or plot is not None or measure):
        if device is None:
            fail(f"no GPU detected here; pass --gpu NAME (known: {known})")
        fail(f"this GPU ({device}) is not in the table; pass --gpu NAME (known: {known})")

    ceilings = None
    if measure:
        gemm_dtype = next((d for d in dtypes if d != "float32"), "float16")
        try:
            ceilings = measure_ceilings(gemm_dtype)
        except RuntimeError as exc:
            fail(str(exc))
    ceiling_spec = ceilings.apply(spec) if ceilings is not None else spec

    if not problems:
        written = _write_plot([], ceiling_spec, plot, []) if plot is not None else None
        if json_out:
            print_json({"device": device, "detected": detected.name if detected else None,
                        "gpus": [{**s.to_dict(), "selector": selector_coverage(s)} for s in GPUS],
                        "measured": ceilings.to_dict() if ceilings else None})
        else:
            _render_table(detected, device, ceilings)
            if written is not None:
                console.print(f"roofline chart written to {escape(str(written))}")
        return

    recorded = load_trials(history_path)[1] if ms is None or plot is not None else None
    results, sources, trials = [], [], []
    for p in problems:
        p_ms, source = ms, "--ms" if ms is not None else None
        rows = _gpu_rows(recorded, p, spec) if recorded is not None else None
        winners = best_per_problem(rows) if p_ms is None and rows else []
        if winners:
            p_ms, source = min(t.ms for t in winners), "history"
        with user_errors():
            r = analyze(p, ceiling_spec, p_ms)
        results.append(r)
        sources.append(source)
        if rows is not None:
            trials += [(r.arithmetic_intensity, tflops(r.flops, t.ms)) for t in rows]

    written = _write_plot(results, ceiling_spec, plot, trials) if plot is not None else None
    if json_out:
        # One problem: one object with the analysis keys at the top; several: a list of them.
        objs = [{**r.to_dict(), "time_from": s, "gpu": ceiling_spec.to_dict(),
                 "measured": ceilings.to_dict() if ceilings else None} for r, s in zip(results, sources)]
        print_json(objs[0] if len(objs) == 1 else objs)
    else:
        _render_results(results, sources, ceiling_spec)
        if written is not None:
            console.print(f"roofline chart written to {escape(str(written))}")


def register(app: typer.Typer) -> None:
    app.command(name="roofline")(roofline)
