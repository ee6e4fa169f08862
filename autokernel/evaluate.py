"""Correctness of one (problem, config) against a float32 torch reference."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from autokernel import runtime
from autokernel.api import matmul
from autokernel.config import KernelConfig, default_config
from autokernel.problem import Problem

# The pass criterion: relative error and allclose, both at 1e-2 (the seeds' criterion).
REL_TOL = 1e-2
ATOL = 1e-2
RTOL = 1e-2
LEAKY_SLOPE = 0.01


def reference_activation(x: torch.Tensor, activation: str, slope: float = LEAKY_SLOPE) -> torch.Tensor:
    """The activation in torch, for references and baselines."""
    if activation == "relu":
        return F.relu(x)
    if activation == "leaky_relu":
        return F.leaky_relu(x, slope)
    if activation == "gelu":
        return F.gelu(x)
    if activation == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if activation == "silu":
        return F.silu(x)
    return x


def reference(a, b, bias, activation: str, slope: float = LEAKY_SLOPE) -> torch.Tensor:
    """act(A @ B + bias) in float32 from the (upcast) operands; true fp32, not tf32."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        z = a.float() @ b.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    if bias is not None:
        z = z + bias.float()
    return reference_activation(z, activation, slope)


@dataclass
class CheckResult:
    problem: Problem
    config: KernelConfig
    max_abs_diff: float | None
    rel_error: float | None
    allclose: bool
    all_written: bool
    passed: bool
    error: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["problem"] = self.problem.to_dict()
        d["config"] = self.config.model_dump()
        return d


def compare(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, bool, bool]:
    """(max_abs_diff, rel_error, allclose, all_written) of out against a float32 ref.

    ``out`` must have been poisoned with NaN before the launch: a NaN left in it is an
    element nobody wrote (a real NaN in the result fails allclose either way).
    """
    got = out.float()
    all_written = not bool(torch.isnan(got).any()) or bool(torch.isnan(ref).any())
    if got.numel() == 0:
        return 0.0, 0.0, True, True
    diff = (got - ref).abs()
    max_abs = float(diff.max())
    ref_norm = float(ref.norm())
    rel = float((got - ref).norm()) / ref_norm if ref_norm > 0 else float((got - ref).norm())
    close = bool(torch.allclose(got, ref, atol=ATOL, rtol=RTOL))
    return max_abs, rel, close, all_written


def check_correctness(
    problem: Problem, config: KernelConfig | None = None, *, seed: int | None = None, slope: float = LEAKY_SLOPE
) -> CheckResult:
    """Run the kernel once on fresh random inputs into a NaN-poisoned output and compare.

    Never raises for a kernel failure: the error is in the result.
    """
    if config is None:
        config = default_config(problem.m, problem.n, problem.k, problem.torch_dtype)
    device = runtime.kernel_device()
    try:
        a, b, bias = problem.make_inputs(device, seed)
        out = torch.full((problem.m, problem.n), float("nan"), dtype=problem.torch_dtype, device=device)
        matmul(a, b, bias, problem.activation, slope=slope, config=config, out=out)
        if device.type == "cuda":
            torch.cuda.synchronize()
        ref = reference(a, b, bias, problem.activation, slope)
    except Exception as exc:  # a failed launch is a result, not a crash
        return CheckResult(problem, config, None, None, False, False, False, f"{type(exc).__name__}: {exc}")
    max_abs, rel, close, written = compare(out, ref)
    passed = close and written and rel <= REL_TOL
    return CheckResult(problem, config, max_abs, rel, close, written, passed)
