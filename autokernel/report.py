"""Benchmark results of the shape suite: the file benchmarks/suite.py writes, and the
report (docs/BENCHMARKS.md and its charts) that ``autokernel report`` makes from it.

A results file is JSON lines, one object per (problem, implementation) measured: the
problem's columns (M, N, K, dtype, activation, bias, layout), ``suite`` (the shapes
file's stem), ``impl`` (IMPLEMENTATIONS), the status, the timer's median ``ms`` (time_fn:
one call between CUDA events after an L2 flush) and ``gpu_ms`` (GPU time per call by
CUDA-graph replay, no host launch cost; None where not measured), throughput, roofline
efficiency, the measured copy bandwidth, and where and how it was measured (device,
versions, command, run id). Every row stands alone, so files of several runs can be
concatenated; the report takes each problem from the latest run that measured it.

Units: ms in milliseconds, TFLOP/s in 10^12 FLOP/s, GB/s in 10^9 bytes/s, efficiencies
and bandwidth fractions as fractions of 1.
"""

from __future__ import annotations

import json
import os
import statistics
import warnings
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from autokernel.records import Problem, time_error
from autokernel.roofline import analyze, detect_gpu
from autokernel.timing import gbps, tflops
from autokernel.userfiles import make_parent, read_text, same_file, write_atomically

IMPLEMENTATIONS: dict[str, str] = {
    "triton": "Triton",
    "triton_tuned": "Triton (tuned file)",
    "triton_default": "Triton (default config)",
    "cublas": "cuBLAS",
    "eager": "eager fused",
    "cublaslt": "cuBLASLt epilogue",
    "max_autotune": "torch.compile max-autotune",
}
"""Implementation key -> column name, in column order. "triton": the config autokernel.matmul
picks by itself; "triton_tuned": the config a best-config file gives (--tuned);
"triton_default": default_config, where "triton" picked another (a tuned file's); "cublas":
torch.matmul on a plain GEMM; "eager": torch addmm/matmul then the activation, on a problem
with an epilogue; "cublaslt": torch._addmm_activation; "max_autotune": torch.compile of
eager, max-autotune without CUDA graphs."""

REQUIRED = ("suite", "impl", "M", "N", "K", "dtype", "activation", "bias", "layout", "status", "ms", "timing",
            "device")
TIMERS = {"gpu": ("gpu_ms", "GPU time (CUDA-graph replay)"), "wall": ("ms", "timer median (L2 flushed)")}
"""Timer name -> (row field, how it was taken)."""

DECODE_MAX_M = 128  # decode-like shapes get GB/s columns
DECODE_TARGET = 1.2  # the decode target: M <= 64 against cuBLAS, geomean
_RIVALS = ("cublaslt", "max_autotune")


# --- the results file ---------------------------------------------------------------------

def has_epilogue(problem: Problem) -> bool:
    return problem.bias or problem.activation != "none"


def result_row(suite: str, impl: str, trial: Any, *, command: str, run_id: str, config_source: str | None = None,
               copy_gbs: float | None = None, gpu_timer: str | None = None) -> dict[str, Any]:
    """The results-file row of one evaluate/evaluate_torch Trial (see the module docstring).

    ``gpu_timer`` names how gpu_ms was taken (None: not measured); ``copy_gbs`` is the
    device-to-device copy bandwidth measured in the same run (read + write).
    """
    import torch

    from autokernel import runtime
    from autokernel.history import _triton_version

    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {impl!r}; choose one of {', '.join(IMPLEMENTATIONS)}")
    p = trial.problem
    device = runtime.device_name()
    best_ms = trial.gpu_ms if trial.gpu_ms is not None else trial.ms
    spec = detect_gpu(device)
    roof = analyze(p, spec, best_ms) if spec is not None and best_ms and min(p.m, p.n, p.k) > 0 else None
    return {
        "suite": suite, "impl": impl, "M": p.m, "N": p.n, "K": p.k, "dtype": p.dtype, "activation": p.activation,
        "bias": p.bias, "layout": p.layout,
        "config": None if trial.config is None else trial.config.model_dump(), "config_source": config_source,
        "status": trial.status, "error": trial.error,
        "ms": trial.ms, "p20": trial.p20, "p80": trial.p80, "gpu_ms": trial.gpu_ms,
        "timing": trial.timing, "gpu_timer": gpu_timer if trial.gpu_ms is not None else None,
        "tflops": tflops(p.flops, trial.ms), "gpu_tflops": tflops(p.flops, trial.gpu_ms),
        "gbps": gbps(p.bytes, trial.ms), "gpu_gbps": gbps(p.bytes, trial.gpu_ms),
        "roofline_gpu": None if roof is None else roof.gpu,
        "roofline_bound": None if roof is None else roof.bound,
        "roofline_efficiency": None if roof is None else roof.efficiency,
        "rel_error": trial.rel_error, "max_abs_diff": trial.max_abs_diff,
        "copy_gbs": copy_gbs,
        "device": device, "torch_version": torch.__version__, "triton_version": _triton_version(),
        "command": command, "run_id": run_id,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _json_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of each row of a JSON-lines results file; ValueError (one line
    naming the file and line) for a file that is missing, unreadable or not JSON lines; a name
    ending in .gz is read through gzip (records kept compressed). A row cut short (a line
    that opens an object but does not parse: the writer was killed mid-row) is skipped with
    one warning."""
    path = Path(path)
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ValueError(f"results file {path} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"results file {path} is a directory") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read results file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    rows, torn = [], []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if line.lstrip().startswith("{"):
                torn.append(i)
                continue
            raise ValueError(f"{path} line {i} is not JSON ({exc.msg}): is it a results file of "
                             f"benchmarks/suite.py or benchmarks/select_sweep.py?") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path} line {i} is not a JSON object")
        rows.append((i, row))
    if torn:
        warnings.warn(f"{path}: skipped {len(torn)} row(s) cut short (line {', '.join(map(str, torn))})",
                      stacklevel=3)
    if not rows:
        raise ValueError(f"results file {path} holds no results")
    return rows


def is_selector_file(rows: list[dict[str, Any]]) -> bool:
    """Whether rows are a selector sweep or check (benchmarks/select_sweep.py: one row per
    (problem, config), with ``roles`` and ``label``) rather than a suite's results."""
    return bool(rows) and all("roles" in r and "label" in r for r in rows)


def _check_time(row: dict[str, Any], key: str, path: str | Path, i: int) -> None:
    """A time of a results row: absent, null, or a time (``records.time_error``)."""
    value = row.get(key)
    if value is not None and (why := time_error(value)):
        raise ValueError(f"{path} line {i}: {key} {why}, got {value!r}")


def read_results(path: str | Path, numbered: list[tuple[int, dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """The rows of a results file of benchmarks/suite.py; ValueError (one line naming
    the file and line) for a file that is missing, unreadable, not JSON lines, lacks a required
    field, holds a value of the wrong type, or names an unknown implementation or an invalid
    problem. A row cut short is skipped with one warning. ``numbered``: the file's (line
    number, object) pairs, already read."""
    path = Path(path)
    rows = []
    for i, row in numbered if numbered is not None else _json_rows(path):
        missing = [f for f in REQUIRED if f not in row]
        if missing:
            raise ValueError(f"{path} line {i} lacks {', '.join(missing)}: not a results file of "
                             f"benchmarks/suite.py")
        for key in ("suite", "impl", "status"):
            if not isinstance(row[key], str):
                raise ValueError(f"{path} line {i}: {key} must be a string, got {row[key]!r}")
        if row["impl"] not in IMPLEMENTATIONS:
            raise ValueError(f"{path} line {i}: unknown implementation {row['impl']!r}")
        if not isinstance(row["bias"], bool):
            raise ValueError(f"{path} line {i}: bias must be true or false, got {row['bias']!r}")
        try:
            row["problem"] = Problem(int(row["M"]), int(row["N"]), int(row["K"]), row["dtype"], row["activation"],
                                     row["bias"], row["layout"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path} line {i}: {exc}") from None
        for key in ("ms", "gpu_ms"):
            _check_time(row, key, path, i)
        rows.append(row)
    return rows


# --- per problem: the implementations side by side ---------------------------------------

@dataclass
class ProblemResult:
    """One problem of one suite: its rows by implementation, from one run."""

    suite: str
    problem: Problem
    rows: dict[str, dict] = field(default_factory=dict)

    @property
    def baseline(self) -> str:
        """What Triton is compared with: eager fused where there is an epilogue, else cuBLAS."""
        return "eager" if has_epilogue(self.problem) else "cublas"

    def time(self, impl: str, timer: str) -> float | None:
        row = self.rows.get(impl)
        if row is None or row["status"] != "success":
            return None
        value = row.get(TIMERS[timer][0])
        return float(value) if value else None

    def tflops(self, impl: str, timer: str) -> float | None:
        return tflops(self.problem.flops, self.time(impl, timer))

    def gbps(self, impl: str, timer: str) -> float | None:
        return gbps(self.problem.bytes, self.time(impl, timer))

    def speedup(self, timer: str, over: str | None = None, impl: str = "triton") -> float | None:
        """``over``'s time / ``impl``'s time (above 1: ``impl`` is faster); ``over`` defaults to the baseline."""
        ours, theirs = self.time(impl, timer), self.time(over or self.baseline, timer)
        return theirs / ours if ours and theirs else None

    def rival_speedup(self, timer: str) -> float | None:
        """Over the faster of cuBLASLt's epilogue and torch.compile max-autotune, where either ran."""
        times = [t for t in (self.time(r, timer) for r in _RIVALS) if t]
        ours = self.time("triton", timer)
        return min(times) / ours if times and ours else None


def group(rows: list[dict]) -> list[ProblemResult]:
    """Rows per (suite, problem), in file order, each from the latest run that measured it
    (a later row of the same run and implementation replaces an earlier one)."""
    latest: dict[tuple, str] = {}
    for row in rows:
        latest[(row["suite"], row["problem"])] = row.get("run_id")
    out: dict[tuple, ProblemResult] = {}
    for row in rows:
        key = (row["suite"], row["problem"])
        if row.get("run_id") == latest[key]:
            out.setdefault(key, ProblemResult(*key)).rows[row["impl"]] = row
    return list(out.values())


# --- targets ------------------------------------------------------------------------------

@dataclass
class TargetResult:
    """One target, measured with one timer: the geomean (or value) over the shapes it covers."""

    name: str
    timer: str
    threshold: float
    unit: str  # "x", "TFLOP/s" or "%"
    value: float | None
    shapes: int
    worst: str | None = None
    interpreted: bool = False

    @property
    def verdict(self) -> str:
        if self.interpreted:
            return "n/a (interpreter timings)"
        if self.value is None:
            return "not measured"
        return "MET" if self.value >= self.threshold else "MISSED"


def geomean(values: list[float]) -> float | None:
    return statistics.geometric_mean(values) if values else None


def _ratio_target(name: str, timer: str, threshold: float, results: list[ProblemResult],
                  ratio: Callable[[ProblemResult], float | None], unit: str = "x") -> TargetResult:
    pairs = [(r, ratio(r)) for r in results]
    pairs = [(r, v) for r, v in pairs if v is not None]
    worst = min(pairs, key=lambda p: p[1], default=None)
    worst_text = None if worst is None else f"{worst[0].problem.label()}: {_fmt_value(worst[1], unit)}"
    return TargetResult(name, timer, threshold, unit, geomean([v for _, v in pairs]), len(pairs), worst_text)


def _unique(results: list[ProblemResult]) -> list[ProblemResult]:
    """One result per problem (the last), whichever suites list it."""
    return list({r.problem: r for r in results}.values())


def evaluate_targets(results: list[ProblemResult], copy_gbs: float | None, interpreted: bool) -> list[TargetResult]:
    """The suite's targets on the default Triton config, each for GPU time and for wall time."""
    results = _unique(results)
    plain = [r for r in results if not has_epilogue(r.problem) and r.problem.m > DECODE_MAX_M]
    big = [r for r in plain if (r.problem.m, r.problem.n, r.problem.k, r.problem.dtype) == (8192, 8192, 8192, "bfloat16")]
    decode = [r for r in results if not has_epilogue(r.problem) and r.problem.m <= 64]
    fused = {d: [r for r in results if has_epilogue(r.problem) and r.problem.dtype == d] for d in ("float16", "bfloat16")}
    specs = [
        ("plain GEMM vs cuBLAS, geomean (squares + LLM, M > 128)", 0.97, "x", plain, lambda r, t: r.speedup(t)),
        ("Triton at 8192³ bf16", 750.0, "TFLOP/s", big, lambda r, t: r.tflops("triton", t)),
    ]
    for dtype, res in fused.items():
        specs += [(f"fused vs eager, geomean, {dtype}", 1.05, "x", res, lambda r, t: r.speedup(t)),
                  (f"fused vs best of cuBLASLt / max-autotune, geomean, {dtype}", 1.0, "x", res,
                   lambda r, t: r.rival_speedup(t))]
    specs += [
        ("decode (M ≤ 64) vs cuBLAS, geomean", DECODE_TARGET, "x", decode, lambda r, t: r.speedup(t)),
        ("decode (M ≤ 64) share of measured copy bandwidth, geomean", 0.70, "%", decode,
         lambda r, t: _fraction(r.gbps("triton", t), copy_gbs)),
    ]
    out = []
    for name, threshold, unit, selected, measure in specs:
        for timer in TIMERS:
            target = _ratio_target(name, timer, threshold, selected, lambda r: measure(r, timer), unit)
            target.interpreted = interpreted
            out.append(target)
    return out


def decode_ceiling(results: list[ProblemResult], copy_gbs: float | None, timer: str) -> tuple[float, int] | None:
    """(geomean over the decode problems (M <= 64) of copy bandwidth / cuBLAS's GB/s, their
    count): the speedup over cuBLAS of a kernel that moved each problem's fewest bytes at
    the measured copy bandwidth, the most a memory-bound kernel can expect. None where
    unmeasured."""
    decode = [r for r in _unique(results) if not has_epilogue(r.problem) and r.problem.m <= 64]
    ratios = [copy_gbs / theirs for r in decode if copy_gbs and (theirs := r.gbps("cublas", timer))]
    return (geomean(ratios), len(ratios)) if ratios else None


def _fraction(part: float | None, whole: float | None) -> float | None:
    return part / whole if part and whole else None


# --- rendering ----------------------------------------------------------------------------

def _fmt_value(value: float | None, unit: str, digits: int = 2) -> str:
    if value is None:
        return "–"
    if unit == "x":
        return f"{value:.{digits}f}x"
    if unit == "%":
        return f"{value:.0%}"
    return _fmt_rate(value)


def _fmt_rate(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def _shape(p: Problem) -> str:
    return f"{p.m}x{p.n}x{p.k}" + ("" if p.layout == "nn" else f" {p.layout}")


def _epilogue(p: Problem) -> str:
    parts = (["bias"] if p.bias else []) + ([p.activation] if p.activation != "none" else [])
    return " + ".join(parts) or "none"


def _table(header: list[str], rows: list[list[str]], right_from: int) -> list[str]:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + ["| " + " | ".join(r) + " |" for r in rows]


def _suite_table(results: list[ProblemResult], timer: str, copy_gbs: float | None, device: str) -> list[str]:
    impls = [i for i in IMPLEMENTATIONS if any(i in r.rows for r in results)]
    fused = any(has_epilogue(r.problem) for r in results)
    rivals = any(r in res.rows for res in results for r in _RIVALS)
    decode = any(r.problem.m <= DECODE_MAX_M for r in results)
    spec = detect_gpu(device)
    header = ["shape", "dtype"] + (["epilogue"] if fused else []) + [IMPLEMENTATIONS[i] for i in impls]
    header += ["speedup vs baseline, GPU", "speedup vs baseline, wall"]
    header += [f"vs best of Lt / compile, {'GPU' if timer == 'gpu' else 'wall'}"] if rivals else []
    header += ["roofline"] + (["Triton GB/s", "cuBLAS GB/s", "share of copy GB/s"] if decode else [])
    lines = []
    for r in results:
        p = r.problem
        cells = [_shape(p), p.dtype] + ([_epilogue(p)] if fused else [])
        cells += [_cell(r, i, timer) for i in impls]
        cells += [_fmt_value(r.speedup("gpu"), "x"), _fmt_value(r.speedup("wall"), "x")]
        if rivals:
            cells.append(_fmt_value(r.rival_speedup(timer), "x"))
        t = r.time("triton", timer)
        eff = analyze(p, spec, t).efficiency if spec is not None and t and min(p.m, p.n, p.k) > 0 else None
        cells.append(_fmt_value(eff, "%"))
        if decode:
            ours = r.gbps("triton", timer)
            cells += [_fmt_rate(ours), _fmt_rate(r.gbps("cublas", timer)), _fmt_value(_fraction(ours, copy_gbs), "%")]
        lines.append(cells)
    return _table(header, lines, 2 + fused)


def _cell(result: ProblemResult, impl: str, timer: str) -> str:
    row = result.rows.get(impl)
    if row is None:
        return ""
    if row["status"] != "success":
        return row["status"]
    return _fmt_rate(result.tflops(impl, timer))


def _distinct(rows: list[dict], key: str) -> list[str]:
    return list(dict.fromkeys(str(r[key]) for r in rows if r.get(key) not in (None, "")))


def _copy_gbs(rows: list[dict]) -> float | None:
    values = [r["copy_gbs"] for r in rows if isinstance(r.get("copy_gbs"), (int, float))]
    return values[-1] if values else None


@dataclass
class Report:
    """The rendered report: markdown, and the charts to draw (suite -> results)."""

    markdown: str
    suites: dict[str, list[ProblemResult]]
    targets: list[TargetResult]
    timer: str


def build_report(rows: list[dict], source: str, plot_paths: dict[str, str] | None = None,
                 classes: tuple[str, list[dict]] | None = None) -> Report:
    """docs/BENCHMARKS.md from the rows of one results file (``source`` is named in it).

    ``plot_paths`` maps a suite to its chart's path relative to the markdown file.
    ``classes``: (path, rows) of a selector check whose per-class geomeans the page shows
    after the suites. Raises ValueError for rows that must not share one report: several
    devices (the check's included), or GPU and interpreter timings mixed.
    """
    devices = _distinct(rows, "device")
    if len(devices) > 1:
        raise ValueError(f"the results mix devices ({', '.join(devices)}): report one device at a time")
    timings = _distinct(rows, "timing")
    if len(timings) > 1:
        raise ValueError("the results mix GPU and interpreter timings: report them separately")
    device = devices[0] if devices else "unknown"
    interpreted = timings == ["interpreter"]
    results = group(rows)
    suites: dict[str, list[ProblemResult]] = {}
    for r in results:
        suites.setdefault(r.suite, []).append(r)
    timer = "gpu" if any(r.get("gpu_ms") for r in rows) else "wall"
    copy_gbs = _copy_gbs(rows)
    targets = evaluate_targets(results, copy_gbs, interpreted)
    spec = detect_gpu(device)
    stamps = sorted(_distinct(rows, "timestamp"))

    command = f"autokernel report {source}" + (f" --classes {classes[0]}" if classes else "")
    md = ["# Benchmarks", "",
          f"Generated by `{command}` from the results file `{source}`"
          + (f" and the selector check `{classes[0]}`" if classes else "") + ": edit the "
          "measurements, not this page. Every ratio compares implementations measured side by side "
          "in one process.", ""]
    if interpreted:
        md += ["**Interpreter timings** (Triton's interpreter on the CPU): they say nothing about GPU speed, "
               "and no target is judged on them.", ""]
    md.append(f"- Device: {device}" + (f" (datasheet {spec.name}: {spec.fp16_tflops:g} TFLOP/s fp16/bf16 dense, "
                                      f"{spec.bandwidth_gbs:g} GB/s)" if spec else ""))
    if copy_gbs:
        md.append(f"- Measured copy bandwidth: {copy_gbs:.0f} GB/s (device-to-device, read + write)")
    md.append(f"- torch {', '.join(_distinct(rows, 'torch_version')) or '?'}; "
              f"triton {', '.join(_distinct(rows, 'triton_version')) or '?'}")
    if stamps:
        md.append(f"- Measured {stamps[0]}" + (f" to {stamps[-1]}" if stamps[-1] != stamps[0] else "")
                  + f"; runs: {', '.join(_distinct(rows, 'run_id'))}")
    for command in _distinct(rows, "command"):
        md.append(f"- Command: `{command}`")
    gpu_timers = _distinct(rows, "gpu_timer")
    md += ["", "Two times per implementation: the **wall time** is the timer's median per call "
           + ("(`autokernel/timing.py` `time_fn`; under the interpreter, CPU wall clock)" if interpreted else
              "(`autokernel/timing.py` `time_fn`: each call alone between CUDA events after a 256 MB L2 flush, "
              "inputs rotated), which includes whatever host time the launch costs")
           + "; the **GPU time** is the "
           "time per call without the host's launch cost, from many calls replayed in one CUDA graph"
           + (f" ({', '.join(gpu_timers)})." if gpu_timers else " — **not measured in these results**: "
              "every figure here is wall time.")
           + (" `cuda_graph_race`: the implementations of a shape timed side by side, their graphs replayed "
              "in ~2 ms segments interleaved over 30 rounds (`timing.race`), so that all of them run through "
              "the same clock phases of a power-capped GPU." if "cuda_graph_race" in gpu_timers else ""),
           f"Throughput columns are TFLOP/s from the {'GPU' if timer == 'gpu' else 'wall'} time; "
           "a status instead of a number is a failed run (see Failures). Speedups are the baseline's time "
           "over Triton's (above 1: Triton is faster); the baseline is cuBLAS (`torch.matmul`) for plain "
           "GEMMs and eager fused (`torch.addmm` + the activation) where there is a bias or activation. "
           "\"Triton\" is the config `autokernel.matmul` picks by itself (a tuned file's where one has the shape: "
           "`autokernel/configs/`); \"Triton (default config)\", where present, is the built-in default beside it. "
           "Roofline: Triton's throughput over "
           "the datasheet roofline of the GPU (`autokernel/roofline.py`).", ""]

    md += ["## Targets", ""]
    md += _table(["target", "timer", "shapes", "measured", "worst shape", "target", "result"],
                 [[t.name, t.timer, str(t.shapes), _fmt_value(t.value, t.unit, 3), t.worst or "–",  # 1.049x is not 1.05x
                   f"≥ {_fmt_value(t.threshold, t.unit)}", f"**{t.verdict}**" if t.verdict in ("MET", "MISSED")
                   else t.verdict] for t in targets], 2)
    if not interpreted and (ceiling := decode_ceiling(results, copy_gbs, "gpu")):
        md += ["", f"Decode ceiling: a kernel that moved each decode problem's fewest bytes at the measured copy "
                   f"bandwidth would run {ceiling[0]:.3f}x cuBLAS (geomean of copy GB/s / cuBLAS GB/s over "
                   f"{ceiling[1]} problems, GPU time), so the {DECODE_TARGET:g}x target asks for "
                   f"{DECODE_TARGET / ceiling[0]:.1%} of copy bandwidth on every problem, geomean."]
    md.append("")
    for suite, res in suites.items():
        md += [f"## {suite}", ""]
        if plot_paths and suite in plot_paths:
            md += [f"![TFLOP/s per shape, {suite}]({plot_paths[suite]})", ""]
        md += _suite_table(res, timer, copy_gbs, device)
        md.append("")
    if classes:
        md += classes_section(classes[1], classes[0], device)
    failures = [(r, impl, row) for r in results for impl, row in r.rows.items() if row["status"] != "success"]
    if failures:
        md += ["## Failures", ""]
        md += _table(["suite", "problem", "implementation", "status", "error"],
                     [[r.suite, r.problem.label(), IMPLEMENTATIONS[impl], row["status"],
                       str(row.get("error") or "").replace("|", "\\|")] for r, impl, row in failures], 5)
        md.append("")
    return Report("\n".join(md), suites, targets, timer)


def plot_suite(results: list[ProblemResult], timer: str, title: str, path: str | Path) -> Path:
    """A grouped bar chart of TFLOP/s per shape, one bar per implementation, written to ``path``."""
    from matplotlib.figure import Figure

    impls = [i for i in IMPLEMENTATIONS if any(i in r.rows for r in results)]
    labels = [f"{r.problem.m}x{r.problem.n}x{r.problem.k}\n{r.problem.dtype}"
              + ("" if not has_epilogue(r.problem) else f"\n{_epilogue(r.problem)}") for r in results]
    fig = Figure(figsize=(max(6.0, 0.25 * len(results) * max(len(impls), 1) + 2), 4.5))
    ax = fig.subplots()
    width = 0.8 / max(len(impls), 1)
    for j, impl in enumerate(impls):
        xs = [i + (j - (len(impls) - 1) / 2) * width for i in range(len(results))]
        ax.bar(xs, [r.tflops(impl, timer) or 0.0 for r in results], width, label=IMPLEMENTATIONS[impl])  # 0: failed
    heights = [h for r in results for i in impls if (h := r.tflops(i, timer))]
    if heights and max(heights) > 50 * min(heights):  # decode next to large shapes: keep both readable
        ax.set_yscale("log")
    ax.set_xticks(range(len(results)), labels, fontsize=7)
    ax.set_ylabel(f"TFLOP/s ({'GPU' if timer == 'gpu' else 'wall'} time)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", linewidth=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    make_parent(out)
    fig.savefig(out, dpi=100)
    return out


@dataclass
class SelectorReport:
    """The rendered report of a selector check (no charts)."""

    markdown: str
    problems: int


def write_report(results_path: str | Path, out: str | Path | None,
                 plots_dir: str | Path | None, classes_path: str | Path | None = None
                 ) -> tuple[Report | SelectorReport, list[Path]]:
    """Read a results file, write the markdown to ``out`` (None: write none, the caller
    prints ``Report.markdown``; charts are then linked from the current directory) and one
    chart per suite to ``plots_dir`` (none when it is None). Everything is computed before
    anything is written, and the markdown is replaced atomically. ValueError for a bad
    results file, an empty ``out``, or an output that would replace an input file; OSError
    when an output cannot be written. A selector check (the rows of
    benchmarks/select_sweep.py, told by their ``roles`` and ``label``) gets selector_report and
    no charts. ``classes_path``: a selector check whose per-class geomeans a suite report
    shows too (ValueError where ``results_path`` is a check itself, or ``classes_path`` is not one)."""
    if out is not None and not str(out).strip():
        raise ValueError("the report's file name is empty: name a markdown file, or give none for stdout")
    inputs = [results_path, classes_path]
    if out is not None:
        _refuse_overwriting([Path(out)], inputs, "the report")
    numbered = _json_rows(results_path)
    classes = None
    if classes_path is not None:
        checked = _json_rows(classes_path)
        if not is_selector_file([row for _, row in checked]):
            raise ValueError(f"{classes_path}: not a selector check (rows of benchmarks/select_sweep.py)")
        classes = (str(classes_path), check_selector_rows(checked, classes_path))
    if is_selector_file([row for _, row in numbered]):
        if classes is not None:
            raise ValueError(f"{results_path} is a selector check: --classes adds a check to a suite's report")
        rows = check_selector_rows(numbered, results_path)
        check = SelectorReport(selector_report(rows, str(results_path)), len(group_selector(rows)))
        if out is not None:
            write_atomically(Path(out), check.markdown)
        return check, []
    rows = read_results(results_path, numbered)
    to_file = out is not None
    out = Path(out if to_file else "report.md")
    plot_paths = {}
    if plots_dir is not None:
        names = {}
        for row in rows:
            names.setdefault(row["suite"], _file_stem(row["suite"]))
        plot_paths = {suite: Path(plots_dir) / f"{stem}.png" for suite, stem in names.items()}
        _refuse_overwriting(list(plot_paths.values()), inputs, "a chart")
    relative = {s: os.path.relpath(p, out.parent if str(out.parent) else ".").replace(os.sep, "/")
                for s, p in plot_paths.items()}
    report = build_report(rows, str(results_path), relative, classes)
    device = _distinct(rows, "device")
    written = [plot_suite(report.suites[s], report.timer, f"{s} · {device[0] if device else ''}", p)
               for s, p in plot_paths.items() if s in report.suites]
    if not to_file:
        return report, written
    write_atomically(out, report.markdown)
    return report, written


def _refuse_overwriting(outputs: list[Path], inputs: list[str | Path | None], what: str) -> None:
    """ValueError where an output (``what``: the markdown, a chart) would replace a file the
    report is made from."""
    for source in inputs:
        if source is not None and any(same_file(target, source) for target in outputs):
            raise ValueError(f"{what} would replace the results file {source}: write it to another file")


def _file_stem(suite: str) -> str:
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in suite).strip("_")
    return stem or "suite"


# --- selector checks: benchmarks/select_sweep.py's files ------------------------------------
#
# One row per (problem, config) measured: the problem's columns (m, n, k, dtype, activation,
# bias, layout), the config (None for torch, labelled "cublas": torch.mm on a plain GEMM, eager
# addmm + the activation where there is an epilogue), its short label, ``roles`` (which of
# "default", "pick" and "previous" the config is), the status and ``gpu_ms`` (GPU time per call,
# all configs of a problem and torch raced side by side in CUDA graphs).

SELECTOR_REQUIRED = ("m", "n", "k", "dtype", "activation", "bias", "layout", "label", "roles", "status")
TORCH_LABEL = "cublas"
ROLES = ("pick", "default", "previous")

DECODE_MAX_ROWS = 64  # decode: M <= 64
SKINNY_MAX_ROWS = 256  # skinny: 64 < M <= 256
LARGE_MIN_FLOP = 1e11  # mid: M > 256 and 2MNK <= 1e11 (100 GFLOP); large: M > 256 and above
SELECTOR_CLASSES = ("decode", "skinny", "mid", "large")
SELECTOR_WORST = 30  # the problems listed, worst first
SLOWER_THAN_DEFAULT = 0.98  # default/pick below this: a pick listed as slower than the default
SELECTOR_RATIOS: dict[str, tuple[str, str]] = {
    "torch/pick": ("torch", "pick"), "torch/default": ("torch", "default"),
    "torch/previous": ("torch", "previous"), "torch/best": ("torch", "best"), "pick/best": ("best", "pick")}
"""Ratio -> (numerator, denominator) times. torch/X is torch's time over X's (above 1: X beats
torch); pick/best is the best config's time over the pick's (the share of the best's speed that
the pick reaches, at most 1)."""


def problem_class(p: Problem) -> str:
    """decode (M <= 64), skinny (64 < M <= 256), mid (M > 256, 2MNK <= 1e11 FLOP) or large."""
    if p.m <= DECODE_MAX_ROWS:
        return "decode"
    if p.m <= SKINNY_MAX_ROWS:
        return "skinny"
    return "mid" if 2 * p.m * p.n * p.k <= LARGE_MIN_FLOP else "large"


@dataclass
class SelectorProblem:
    """One problem of a selector check: its rows by config label (torch's is "cublas")."""

    problem: Problem
    rows: dict[str, dict] = field(default_factory=dict)

    @staticmethod
    def _ms(row: dict | None) -> float | None:
        if row is None or row.get("status") != "success":
            return None
        ms = row.get("gpu_ms")
        return float(ms) if isinstance(ms, (int, float)) and ms > 0 else None

    def row(self, name: str) -> dict | None:
        """The row of "torch", "best" or a role (the first config that holds it)."""
        if name == "torch":
            return self.rows.get(TORCH_LABEL)
        configs = [r for label, r in self.rows.items() if label != TORCH_LABEL]
        if name == "best":
            timed = [r for r in configs if self._ms(r) is not None]
            return min(timed, key=self._ms) if timed else None
        return next((r for r in configs if name in r["roles"]), None)

    def ms(self, name: str) -> float | None:
        return self._ms(self.row(name))

    def ratio(self, ratio: str) -> float | None:
        """A ratio of SELECTOR_RATIOS; None where either side was not measured."""
        x, y = SELECTOR_RATIOS[ratio]
        tx, ty = self.ms(x), self.ms(y)
        return tx / ty if tx is not None and ty is not None else None

    def label(self, name: str) -> str:
        row = self.row(name)
        if row is None:
            return "–"
        return row["label"] if row.get("status") == "success" else f"{row['label']} ({row.get('status')})"


def group_selector(rows: list[dict]) -> list[SelectorProblem]:
    """The problems of a selector check, in file order. Rows of one problem share its columns
    and ``index``; a label seen again starts a newer measurement of the problem, which replaces
    the older (files of several runs can be concatenated)."""
    problems: dict[tuple, SelectorProblem] = {}
    for row in rows:
        p = Problem(int(row["m"]), int(row["n"]), int(row["k"]), row["dtype"], row["activation"], row["bias"],
                    row["layout"])
        key = (row.get("index"), p)
        if key not in problems or row["label"] in problems[key].rows:
            problems.pop(key, None)
            problems[key] = SelectorProblem(p)
        problems[key].rows[row["label"]] = row
    return list(problems.values())


def check_selector_rows(numbered: list[tuple[int, dict]], path: str | Path) -> list[dict]:
    """The rows of a selector check file, each checked (the required fields present, each of
    its type; a valid problem); ValueError naming the file and line otherwise."""
    rows = []
    for i, row in numbered:
        missing = [f for f in SELECTOR_REQUIRED if f not in row]
        if missing:
            raise ValueError(f"{path} line {i} lacks {', '.join(missing)}: not a selector check of "
                             f"benchmarks/select_sweep.py")
        if not isinstance(row["bias"], bool):
            raise ValueError(f"{path} line {i}: bias must be true or false, got {row['bias']!r}")
        for key in ("label", "status"):
            if not isinstance(row[key], str):
                raise ValueError(f"{path} line {i}: {key} must be a string, got {row[key]!r}")
        if not isinstance(row["roles"], list):
            raise ValueError(f"{path} line {i}: roles must be a list, got {row['roles']!r}")
        index = row.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise ValueError(f"{path} line {i}: index must be a whole number, got {index!r}")
        _check_time(row, "gpu_ms", path, i)
        try:
            Problem(int(row["m"]), int(row["n"]), int(row["k"]), row["dtype"], row["activation"], row["bias"],
                    row["layout"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path} line {i}: {exc}") from None
        rows.append(row)
    return rows


def _geomean_cell(problems: list[SelectorProblem], ratio: str) -> str:
    values = [v for p in problems if (v := p.ratio(ratio)) is not None]
    g = geomean(values)
    if g is None:
        return "–"
    return f"{g:.3f}" + ("" if len(values) == len(problems) else f" ({len(values)})")


def _fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def selector_class_table(problems: list[SelectorProblem]) -> list[str]:
    """The markdown lines of the SELECTOR_RATIOS geomeans per problem class and overall."""
    by_class = {c: [p for p in problems if problem_class(p.problem) == c] for c in SELECTOR_CLASSES}
    table = [[c, str(len(ps))] + [_geomean_cell(ps, r) for r in SELECTOR_RATIOS] for c, ps in by_class.items() if ps]
    table.append(["**all**", str(len(problems))] + [f"**{_geomean_cell(problems, r)}**" for r in SELECTOR_RATIOS])
    return _table(["class", "problems", *SELECTOR_RATIOS], table, 1)


def classes_section(rows: list[dict], source: str, device: str) -> list[str]:
    """The section a suite report gets from a selector check (``rows`` of ``source``, on
    ``device``): its per-class geomeans, with a pointer to the check's own report."""
    devices = _distinct(rows, "device")
    if devices and devices != [device]:
        raise ValueError(f"the selector check {source} was measured on {', '.join(devices)}, the results on "
                         f"{device}: report one device at a time")
    problems = group_selector(rows)
    return ([f"## By problem class: {source}", "",
             f"{len(problems)} problems, each with every config the selector considers, the default and torch "
             "timed side by side (`benchmarks/select_sweep.py`; GPU time). torch/X is torch's time over X's; "
             "**pick** is the config `autokernel.matmul` picks, **best** the fastest measured. Classes by M and "
             f"work: **decode** M <= {DECODE_MAX_ROWS}; **skinny** {DECODE_MAX_ROWS} < M <= {SKINNY_MAX_ROWS}; "
             f"**mid** M > {SKINNY_MAX_ROWS} and 2MNK <= 100 GFLOP; **large** the rest. Its problems worst first: "
             f"`autokernel report {source}`.", ""]
            + selector_class_table(problems) + [""])


def selector_report(rows: list[dict], source: str, worst: int = SELECTOR_WORST) -> str:
    """The markdown report of a selector check (rows of benchmarks/select_sweep.py): geomeans
    of SELECTOR_RATIOS per problem class and overall, then the problems worst first by
    torch/pick (the ``worst`` worst). Raises ValueError for rows of several devices."""
    devices = _distinct(rows, "device")
    if len(devices) > 1:
        raise ValueError(f"the results mix devices ({', '.join(devices)}): report one device at a time")
    problems = group_selector(rows)
    failed = [r for p in problems for r in p.rows.values() if r.get("status") != "success"]
    configs = sum(len(p.rows) - (TORCH_LABEL in p.rows) for p in problems)
    md = ["# Selector check", "",
          f"Generated by `autokernel report {source}` from `{source}` (written by `benchmarks/select_sweep.py`): "
          "edit the measurements, not this page.", "",
          f"- Device: {devices[0] if devices else 'unknown'}",
          f"- {len(problems)} problems, {configs} configs timed"
          + (f", {len(failed)} of them failed (status other than success)" if failed else ""), "",
          "Per problem, every config measured and torch were timed side by side (`timing.race`: CUDA graphs "
          "interleaved, GPU time per call). **torch** is cuBLAS (`torch.mm`) on a plain GEMM and eager "
          "`torch.addmm` + the activation where the problem has an epilogue; **pick** is the config "
          "`autokernel.matmul` picks; **default** the built-in default config; **previous** the previous rule's "
          "(the nearest shipped entry within 4x, else the default); **best** the fastest config measured for the "
          "problem. torch/X is torch's time over X's (above 1: X beats torch); pick/best is the best's time over "
          "the pick's (the share of the best config's speed the pick reaches, at most 1). Figures are geomeans "
          "over the problems; a count in brackets is the number of problems where both sides were measured, "
          "where it is fewer than all.", "",
          f"Classes by M and work (2MNK FLOP): **decode** M <= {DECODE_MAX_ROWS}; **skinny** "
          f"{DECODE_MAX_ROWS} < M <= {SKINNY_MAX_ROWS}; **mid** M > {SKINNY_MAX_ROWS} and 2MNK <= "
          f"1e11 (100 GFLOP); **large** M > {SKINNY_MAX_ROWS} and 2MNK > 100 GFLOP.", "",
          "## By class", ""]
    md += selector_class_table(problems)
    ranked = sorted(problems, key=lambda p: (p.ratio("torch/pick") is not None, p.ratio("torch/pick") or 0.0))
    shown = ranked[:worst]
    md += ["", "## Problems, worst first by torch/pick", ""]
    if len(shown) < len(ranked):
        md += [f"The worst {len(shown)} of {len(ranked)}; the others are in `{source}`.", ""]
    md += _table(["#", "problem", "class", "pick", "best", "torch/pick", "torch/best", "pick/best"],
                 [[str(j), p.problem.label(), problem_class(p.problem), p.label("pick"), p.label("best"),
                   _fmt_ratio(p.ratio("torch/pick")), _fmt_ratio(p.ratio("torch/best")),
                   _fmt_ratio(p.ratio("pick/best"))] for j, p in enumerate(shown, 1)], 5)
    md += ["", *_slower_than_default(problems)]
    md.append("")
    return "\n".join(md)


def _slower_than_default(problems: list[SelectorProblem]) -> list[str]:
    """The section that lists the problems whose pick ran more than 2 % slower than the
    default config (default/pick below SLOWER_THAN_DEFAULT), slowest first."""
    both = [(p, p.ms("default") / p.ms("pick")) for p in problems
            if p.ms("default") is not None and p.ms("pick") is not None]
    slower = sorted(((p, r) for p, r in both if r < SLOWER_THAN_DEFAULT), key=lambda pr: pr[1])
    md = [f"## Picks more than {1 - SLOWER_THAN_DEFAULT:.0%} slower than the default", ""]
    if not slower:
        return md + [f"None of the {len(both)} problems where both were measured.", ""]
    md += [f"{len(slower)} of the {len(both)} problems where both were measured; default/pick is the "
           "default's time over the pick's.", ""]
    return md + _table(["#", "problem", "class", "pick", "default", "default/pick"],
                       [[str(j), p.problem.label(), problem_class(p.problem), p.label("pick"), p.label("default"),
                         _fmt_ratio(r)] for j, (p, r) in enumerate(slower, 1)], 5)
