"""Roofline analysis of one GEMM: the datasheet (or measured) ceilings of a GPU, and where
a measured time sits under them.

Units throughout: FLOP counts and bytes as plain integers, arithmetic intensity in
FLOP/byte, bandwidth in GB/s (10^9 bytes/s), throughput in TFLOP/s (10^12 FLOP/s), times
in milliseconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import torch

from autokernel import gpus
from autokernel.gpus import GPUS, GpuSpec, lookup_gpu  # noqa: F401 (the roofline's GPU table, re-exported)
from autokernel.records import Problem
from autokernel.timing import gbps, tflops, time_fn
from autokernel.userfiles import make_parent


def detect_gpu(device_name: str | None = None) -> GpuSpec | None:
    """The table entry for a ``torch.cuda.get_device_name()`` string (default: this GPU).

    None when there is no GPU here or the name matches no entry.
    """
    if device_name is None:
        if not torch.cuda.is_available():
            return None
        device_name = torch.cuda.get_device_name()
    return gpus.detect_gpu(device_name)


@dataclass(frozen=True)
class RooflineResult:
    """Where one problem sits under one GPU's roofline.

    flops: 2*M*N*K. bytes: A and B (and bias) read once, C written once. FLOP/B for the
    intensity and the ridge point; TFLOP/s for the bounds; efficiency = achieved / roofline
    (None without a time).
    """

    problem: Problem
    gpu: str
    bandwidth_gbs: float
    flops: int
    bytes: int
    arithmetic_intensity: float
    memory_bound_tflops: float
    compute_bound_tflops: float
    roofline_tflops: float
    ridge_point: float
    bound: str
    ms: float | None
    achieved_tflops: float | None
    efficiency: float | None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["problem"] = self.problem.to_dict()
        return d


def analyze(problem: Problem | tuple, gpu: GpuSpec | str, ms: float | None = None) -> RooflineResult:
    """The roofline of ``problem`` (a Problem, or (M, N, K[, dtype]) with float16 by default)
    on ``gpu`` (a GpuSpec or a name for :func:`lookup_gpu`), with ``ms`` the measured time in ms."""
    if not isinstance(problem, Problem):
        problem = Problem(*problem)
    spec = lookup_gpu(gpu) if isinstance(gpu, str) else gpu
    if min(problem.m, problem.n, problem.k) <= 0:
        raise ValueError(f"a roofline needs M, N and K > 0, got {problem.m}x{problem.n}x{problem.k}")
    if ms is not None and ms <= 0:
        raise ValueError(f"the time must be > 0 ms, got {ms}")
    flops, nbytes = problem.flops, problem.bytes
    intensity = flops / nbytes
    memory_bound = spec.bandwidth_gbs * 1e9 * intensity / 1e12
    compute_bound = spec.compute_tflops(problem.dtype)
    roof = min(memory_bound, compute_bound)
    achieved = tflops(flops, ms)
    return RooflineResult(
        problem=problem,
        gpu=spec.name,
        bandwidth_gbs=spec.bandwidth_gbs,
        flops=flops,
        bytes=nbytes,
        arithmetic_intensity=intensity,
        memory_bound_tflops=memory_bound,
        compute_bound_tflops=compute_bound,
        roofline_tflops=roof,
        ridge_point=compute_bound * 1e12 / (spec.bandwidth_gbs * 1e9),
        bound="memory" if memory_bound < compute_bound else "compute",
        ms=ms,
        achieved_tflops=achieved,
        efficiency=None if achieved is None else achieved / roof,
    )


@dataclass(frozen=True)
class Ceilings:
    """Measured on this GPU: copy bandwidth in GB/s (bytes read + bytes written) and the
    cuBLAS GEMM throughput in TFLOP/s for ``dtype``."""

    device: str
    bandwidth_gbs: float
    gemm_tflops: float
    dtype: str
    gemm_size: int
    copy_bytes: int

    def to_dict(self) -> dict:
        return asdict(self)

    def apply(self, spec: GpuSpec) -> GpuSpec:
        """``spec`` with its bandwidth and fp16/bf16 peak replaced by these measurements."""
        return replace(spec, name=f"{spec.name} (measured)", bandwidth_gbs=self.bandwidth_gbs,
                       fp16_tflops=self.gemm_tflops)


def measure_ceilings(dtype: str = "float16", gemm_size: int = 8192, copy_bytes: int = 1 << 30,
                     reps: int = 20) -> Ceilings:
    """Measure the achievable ceilings of this GPU.

    A ``copy_bytes`` device-to-device copy (GB/s counts the read and the write) and a
    ``gemm_size``^3 cuBLAS GEMM on random fp16/bf16 data, each the median of ``reps``
    CUDA-event timings after warm-up. Raises RuntimeError when no CUDA GPU is available.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("measuring ceilings needs a CUDA GPU and none is available here")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"measured GEMM ceilings are for float16 or bfloat16, got {dtype!r}")
    src = torch.randint(0, 256, (copy_bytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = time_fn(lambda: dst.copy_(src), reps=reps).ms
    del src, dst

    torch_dtype = getattr(torch, dtype)
    a = torch.randn(gemm_size, gemm_size, device="cuda", dtype=torch_dtype)
    b = torch.randn(gemm_size, gemm_size, device="cuda", dtype=torch_dtype)
    gemm_ms = time_fn(lambda: torch.mm(a, b), reps=reps).ms
    return Ceilings(
        device=torch.cuda.get_device_name(),
        bandwidth_gbs=gbps(2 * copy_bytes, copy_ms),
        gemm_tflops=tflops(2 * gemm_size**3, gemm_ms),
        dtype=dtype,
        gemm_size=gemm_size,
        copy_bytes=copy_bytes,
    )


def plot_roofline(
    results: RooflineResult | Sequence[RooflineResult],
    gpu: GpuSpec,
    path: str | Path,
    trials: Sequence[tuple[float, float]] | None = None,
) -> Path:
    """Write a log-log roofline of ``gpu`` to ``path`` (format from the suffix, .png when
    it has none) and return the path written.

    The memory roof (bandwidth x intensity) meets each compute roof at its ridge point,
    which is marked; each result is a labelled point at (FLOP/B, achieved TFLOP/s) when it
    has a time, and ``trials`` are extra (FLOP/B, TFLOP/s) points, e.g. the history's
    trials of those problems.
    """
    from matplotlib.figure import Figure

    results = [results] if isinstance(results, RooflineResult) else list(results)
    peaks = sorted({r.compute_bound_tflops for r in results} or {gpu.fp16_tflops})
    ridges = [p * 1e3 / gpu.bandwidth_gbs for p in peaks]
    xs = [r.arithmetic_intensity for r in results] + [x for x, _ in trials or []] + ridges
    x_lo, x_hi = min(xs) / 8, max(xs) * 8

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    for peak, ridge in zip(peaks, ridges):
        ax.plot([x_lo, ridge, x_hi], [gpu.bandwidth_gbs * x_lo / 1e3, peak, peak], color="tab:blue")
        ax.axvline(ridge, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"ridge {ridge:.0f} FLOP/B, {peak:g} TFLOP/s", (ridge, peak),
                    textcoords="offset points", xytext=(4, 6), fontsize=8)
    if trials:
        ax.scatter([x for x, _ in trials], [y for _, y in trials], s=10, color="grey", alpha=0.5,
                   label="history trials")
    for r in results:
        if r.achieved_tflops is not None:
            ax.scatter([r.arithmetic_intensity], [r.achieved_tflops], marker="*", s=120, zorder=3,
                       label=f"{r.problem.label()}: {r.achieved_tflops:.1f} TFLOP/s ({r.efficiency:.0%})")
        else:
            ax.scatter([r.arithmetic_intensity], [r.roofline_tflops], marker="o", facecolors="none",
                       edgecolors="black", zorder=3, label=f"{r.problem.label()} (no time)")
    ys = [gpu.bandwidth_gbs * x_lo / 1e3] + [y for _, y in trials or []]
    ys += [r.achieved_tflops for r in results if r.achieved_tflops is not None]
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min(ys) / 2, max(peaks) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Roofline · {gpu.name} · {gpu.bandwidth_gbs:g} GB/s")
    ax.grid(True, which="both", linewidth=0.3)
    if results or trials:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    if not out.suffix:  # matplotlib would add its default format's suffix: say so in the path returned
        out = out.with_suffix(".png")
    make_parent(out)
    fig.savefig(out, dpi=100)
    return out
