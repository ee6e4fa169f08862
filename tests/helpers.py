"""Helpers the tests share (plain functions and constants; the fixtures are in conftest.py)."""

from pathlib import Path

import torch

from autokernel import runtime

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root."""


def fp32_tol(interpreted: float) -> float:
    """A float32 bound: ``interpreted`` where fp32 is exact (the interpreter), 3e-2 on the
    GPU, where the kernels' fp32 dot is tf32 (~1e-3 relative; a relu's derivative flips
    where |z| is within tf32 error of zero, ~1e-2 on its gradients)."""
    return interpreted if runtime.INTERPRETER else 3e-2


FP32_TOL = fp32_tol(1e-4)


def one_error_line(result, code: int | None = None) -> str:
    """The one line a failed CLI call printed on stderr (no traceback), after its exit code."""
    if code is not None:
        assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def fail_renames_onto(monkeypatch, module, target, error: OSError | None = None) -> None:
    """Make ``module``'s os.replace fail to rename onto ``target`` (with ``error``; by default
    PermissionError, as a write-protected destination would): other renames go through."""
    replace = module.os.replace

    def failing(src, dst):
        if Path(dst) == Path(target):
            raise error or PermissionError(13, "Permission denied")
        replace(src, dst)

    monkeypatch.setattr(module.os, "replace", failing)


def interpreter_space(problem):
    """The search space for_problem gives under the interpreter, on any machine (a GPU too)."""
    from autokernel.kernels.matmul_tma import _INTERPRETER_PROGRAMS
    from autokernel.tuning.space import INTERPRETER_CHOICES, SearchSpace

    return SearchSpace(problem, dict(INTERPRETER_CHOICES), programs=_INTERPRETER_PROGRAMS)


def write_best(path, *entries: dict, device: str | None = None) -> None:
    """A best-config file at ``path`` for ``device`` (default: this one) with ``entries``
    (problem fields and "config" as dicts; dtype defaults to float16)."""
    from autokernel.best import SCHEMA_VERSION, BestFile

    best = BestFile(schema_version=SCHEMA_VERSION, device=device or runtime.device_name(),
                    timing="interpreter" if runtime.INTERPRETER else "gpu",
                    entries=[{"dtype": "float16", **e} for e in entries])
    path.write_text(best.to_json())


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.float()
    denom = ref.norm().item()
    diff = (out.float() - ref).norm().item()
    return diff / denom if denom > 0 else diff


def inputs(m, n, k, dtype, device, layout="nn", seed=0):
    """(A, B, bias) of an M x N x K problem in ``layout`` ("t": a transposed view), A scaled
    by 1/sqrt(K) so errors don't grow with K."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    bias = torch.randn(n, generator=g)
    return (a / max(k, 1) ** 0.5).to(device, dtype), b.to(device, dtype), bias.to(device, dtype)


H100_SMEM = 232448


BIG_SHAPE = (4096, 4096, 4096)


def gpu_space(problem=None):
    """The GPU search space of ``problem`` (default 4096^3 fp16) with the H100's limits."""
    from autokernel.records import Problem
    from autokernel.tuning.space import GPU_CHOICES, SearchSpace

    return SearchSpace(problem or Problem(*BIG_SHAPE), dict(GPU_CHOICES), H100_SMEM, True, gpu=True)


def synthetic_sweep(path, shapes=(BIG_SHAPE, (1024, 4096, 4096))) -> None:
    """A sweep over the GPU space with a smooth cost model (best at 128x256x64 w8 s3 tma),
    5 % compile failures and a cuBLAS row per problem. Each config's noise and failure are
    drawn from its own seed (shape and fields), so that a config reads the same whatever
    else the space holds."""
    import math
    import random

    from autokernel.history import History, make_row
    from autokernel.records import Problem

    rows = []
    for shape in shapes:
        p = Problem(*shape)
        for c in gpu_space(p):
            rng = random.Random(f"{shape} {c.to_json()}")
            cost = (abs(math.log2(c.block_m / 128)) + abs(math.log2(c.block_n / 256)) + 0.5 * abs(math.log2(c.block_k / 64))
                    + 0.3 * abs(c.num_stages - 3) + 0.2 * (c.variant == "grouped") + 0.1 * (c.group_m == 1))
            ms = 0.2 * (1 + 0.15 * cost) * (1 + 0.01 * rng.random())
            failed = rng.random() < 0.05
            rows.append(make_row("tune", p, c, status="compile_error" if failed else "success", run_id="sweep",
                                 timing="gpu", device="Synthetic GPU", ms=None if failed else ms,
                                 gpu_ms=None if failed else 0.97 * ms, error="CompilationError: x" if failed else None))
        rows.append(make_row("tune", p, None, status="success", run_id="sweep", timing="gpu", device="Synthetic GPU",
                             kernel="torch", ms=0.19))
    History(path).append_many(rows)


def tf32_rounded(t):
    """``t`` (float32) with its mantissa rounded to TF32's 10 bits, as tensor cores take
    float32 operands; the gradient passes through unchanged."""
    rounded = ((t.detach().contiguous().view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)
    return t + (rounded - t.detach())


KINK_FLIP_SEED = 55
"""A seed whose 7x1567 and 145x1567 standard-normal operands (drawn in that order, the
second over sqrt(1567)) put a pre-activation on the other side of 0 with TF32 products
than in float32, which moves dW by 7 % under relu or leaky_relu (the tests check it)."""


def simulate_gpu(monkeypatch, name: str, shared_memory: int = 232448) -> torch.device:
    """This process as one on the GPU ``name`` (Hopper's shared memory by default), with no
    tuned or selector file from the environment; the caller clears best's cache after."""
    from autokernel import best

    monkeypatch.setattr(runtime, "device_name", lambda device=None: name)
    monkeypatch.setattr(runtime, "shared_memory_limit", lambda: shared_memory)
    monkeypatch.delenv(best.CONFIG_ENV, raising=False)
    monkeypatch.delenv(best.SELECTOR_ENV, raising=False)
    best.clear_cache()
    return torch.device("cuda")


def tma_case_operands(m, n, k, layout, dtype, seed):
    """A, B (each row-major or a transposed view per ``layout``) and a bias for M x N x K,
    A scaled by 1/sqrt(K), on the CPU, from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    bias = torch.randn(n, generator=g)
    return (a / k ** 0.5).to(dtype), b.to(dtype), bias.to(dtype)


def run_tma(a, b, bias, act, config, programs, z=None, slope=0.2):
    """(C, launch): the TMA kernel's launch for ``config`` on a grid of ``programs`` (under the
    interpreter), run once into a C poisoned with NaN."""
    from autokernel.kernels import matmul_tma

    c = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype)
    operands = matmul_tma.tma_operands(a, b, c)
    assert operands is not None
    launch = matmul_tma.plan_matmul_tma(a, b, c, bias, act, slope, config, operands, True, z=z, programs=programs)
    launch(a, b, c, bias if bias is not None else c, z if z is not None else c)
    return c, launch
