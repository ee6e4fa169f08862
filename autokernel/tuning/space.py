"""The search space of kernel configs for one problem, and the constraints that prune
impossible configs before anything is compiled."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

import torch

from autokernel import runtime
from autokernel.config import WS_MAX_STAGES, KernelConfig, _cdiv, _next_pow2, shared_memory_bytes
from autokernel.records import Problem

# What each KernelConfig field may take while tuning on a GPU (a subset of what
# KernelConfig accepts: the values that were ever competitive on the H100).
GPU_CHOICES: dict[str, tuple] = {
    "block_m": (16, 32, 64, 128, 256),
    "block_n": (32, 64, 128, 256),
    "block_k": (32, 64, 128),
    "group_m": (1, 8, 16),
    "num_warps": (4, 8),
    "num_stages": (3, 4, 5),
    "variant": ("grouped", "tma"),
    "split_k": (1, 2, 4, 8),
    "warp_specialize": (False, True),
    "epilogue_subtile": (1, 2),
    "flatten": (False, True),
    "stream_k": (False, True),
}
_MAX_ACC_REGS = 128  # fp32 accumulator registers per thread; past this the kernel spills
_MIN_USEFUL_TILE = 64  # below this (m or n) a tile only pays where the problem is that thin
_WS_NUM_WARPS = 4  # Hopper warp specialization happens at num_warps=4 only (docs/kernel-notes.md)...
_WS_CONSUMER_GROUPS = 2  # ...and then splits the tile over two consumer warpgroups beside a producer
_SKINNY_M = 256  # split-K pays where the output has too few tiles to fill the GPU...
_LONG_K = 4  # ...or where K is this many times the larger of M and N (the dW GEMM)
_MAX_TAIL_FILL = 0.875  # stream-K only where the last wave leaves at least 1/8 of the SMs idle

# Under the interpreter each program is Python: small tiles, one stage, few warps.
INTERPRETER_CHOICES: dict[str, tuple] = {
    "block_m": (16, 32, 64),
    "block_n": (16, 32, 64),
    "block_k": (16, 32),
    "group_m": (1, 8),
    "num_warps": (1, 2, 4),
    "num_stages": (1, 2),
    "variant": ("grouped",),
    "split_k": (1, 2),
    # The interpreter ignores warp specialization and flattening; the space tries no TMA kernel there.
    "warp_specialize": (False,),
    "epilogue_subtile": (1,),
    "flatten": (False,),
    # Stream-K is checked on the CPU by tests that set its program count; tuning under the
    # interpreter (3 programs) would only double the space.
    "stream_k": (False,),
}

PARAMS = tuple(GPU_CHOICES)
"""The tuned KernelConfig fields, in a fixed order (strategies and replay files use it)."""


def why_no_tma(p: Problem) -> str | None:
    """Why the TMA kernel cannot take ``p`` on any GPU, or None. Its descriptors need
    fp16/bf16 and rows of A, B and C (as ``Problem.make_inputs`` stores them: row-major,
    transposed views per ``layout``) that are multiples of 16 bytes
    (kernels.matmul_tma.tma_operands); otherwise the "tma" variant runs the pointer kernel."""
    if p.torch_dtype not in (torch.float16, torch.bfloat16):
        return "the TMA kernel takes float16 and bfloat16 only"
    a_row = p.m if p.layout[0] == "t" else p.k  # the stored tensor's last dimension
    b_row = p.k if p.layout[1] == "t" else p.n
    if any(size * p.torch_dtype.itemsize % 16 for size in (a_row, b_row, p.n)):
        return ("a row of A, B or C is not a multiple of 16 bytes: no TMA descriptor, "
                "the pointer kernel would run (a duplicate trial)")
    return None


@dataclass(frozen=True)
class SearchSpace:
    """The configs worth trying for ``problem``: the cross product of ``choices`` minus
    those ``why_invalid`` rejects.

    ``smem_limit`` is the device's shared memory per program in bytes (None: not
    checked); ``tma`` whether the Hopper TMA kernel can run here.
    """

    problem: Problem
    choices: dict[str, tuple] = field(default_factory=lambda: dict(GPU_CHOICES))
    smem_limit: int | None = None
    tma: bool = False
    gpu: bool = False
    """A space for a GPU: register-pressure and tile-width rules apply (not under the interpreter)."""
    allowed: frozenset[tuple] | None = None
    """When set, only these configs (by config_key) are in the space: a replayed sweep."""
    programs: int | None = None
    """The SMs a persistent grid fills (the stream-K kernel's grid); None: unknown, and
    no stream_k config is in the space."""

    @classmethod
    def for_problem(cls, problem: Problem, **overrides: Any) -> "SearchSpace":
        """The space on this machine: the GPU's choices and limits, or the interpreter's."""
        from autokernel.kernels.matmul_tma import _INTERPRETER_PROGRAMS

        if runtime.INTERPRETER:
            space = cls(problem, dict(INTERPRETER_CHOICES), programs=_INTERPRETER_PROGRAMS)
        else:
            space = cls(problem, dict(GPU_CHOICES), runtime.shared_memory_limit(), runtime.has_tma(), gpu=True,
                        programs=runtime.sm_count())
        return replace(space, **overrides) if overrides else space

    def why_invalid(self, config: KernelConfig) -> str | None:
        """Why ``config`` cannot run (or is pointless) for this problem here, or None."""
        p = self.problem
        for name in PARAMS:
            if getattr(config, name) not in self.choices[name]:
                return f"{name}={getattr(config, name)} is outside the space {self.choices[name]}"
        if self.allowed is not None and config_key(config) not in self.allowed:
            return "not in the replayed sweep"
        if config.variant == "tma" and not (self.tma or runtime.INTERPRETER):
            return "the TMA kernel needs a Hopper GPU and Triton >= 3.4"
        if config.variant == "tma" and (why := why_no_tma(p)):
            return why
        if config.split_k > 1:
            why = _why_not_split(config, p)
            if why:
                return why
        why = _why_not_tma_option(config)
        if why:
            return why
        if config.stream_k and self.allowed is None:  # a replayed sweep's configs ran on its GPU
            why = _why_not_stream_k(config, p, self.programs)
            if why:
                return why
        if self.smem_limit is not None:
            need = shared_memory_bytes(config, p.torch_dtype, bias=p.bias)
            if need > self.smem_limit:
                return f"needs ~{need // 1024} KiB of shared memory, the device allows {self.smem_limit // 1024} KiB"
        consumers = config.num_warps * (_WS_CONSUMER_GROUPS if config.warp_specialize else 1)
        acc_regs = config.block_m * config.block_n // (32 * consumers)
        if self.gpu and acc_regs > _MAX_ACC_REGS:
            return (f"a {config.block_m}x{config.block_n} tile on {consumers} {'consumer ' if config.warp_specialize else ''}"
                    f"warps needs {acc_regs} accumulator registers per thread")
        for dim, size in (("block_m", p.m), ("block_n", p.n)):
            floor = min(_MIN_USEFUL_TILE, _next_pow2(max(size, 1)))
            if self.gpu and getattr(config, dim) < floor:
                return f"{dim}={getattr(config, dim)} is thinner than the problem needs ({dim[-1].upper()}={size})"
        # Fit to the shape: a tile dimension more than twice the (rounded-up) problem
        # dimension only computes padding.
        for dim, size in (("block_m", p.m), ("block_n", p.n), ("block_k", p.k)):
            smallest = min(self.choices[dim])
            if getattr(config, dim) > max(smallest, _next_pow2(max(size, 1))):
                return f"{dim}={getattr(config, dim)} exceeds the problem's {dim[-1].upper()}={size}"
        # group_m beyond the tile-rows there are behaves like the smallest group that covers them.
        tiles_m = _cdiv(p.m, config.block_m)
        covering = [g for g in self.choices["group_m"] if g >= tiles_m]
        if covering and config.group_m > min(covering):
            return f"group_m={config.group_m} acts as {min(covering)}: the problem has {tiles_m} tile-rows"
        return None

    def canonical(self, config: KernelConfig) -> KernelConfig:
        """``config`` with a group_m past the problem's tile-rows replaced by the smallest
        group in the space that covers them (they launch the same tile order)."""
        tiles_m = _cdiv(self.problem.m, config.block_m)
        covering = [g for g in self.choices["group_m"] if g >= tiles_m]
        if covering and config.group_m > min(covering):
            return config.model_copy(update={"group_m": min(covering)})
        return config

    def contains(self, config: KernelConfig) -> bool:
        return self.why_invalid(config) is None

    def __iter__(self) -> Iterator[KernelConfig]:
        """Every valid config, in a deterministic order."""
        return iter(self._valid)

    @functools.cached_property
    def _valid(self) -> tuple[KernelConfig, ...]:
        # Built once per space: the cross product is thousands of pydantic configs, and the
        # random and grid strategies walk it at every proposal.
        out = []
        for values in itertools.product(*(self.choices[name] for name in PARAMS)):
            config = build_config(dict(zip(PARAMS, values)))
            if config is not None and self.why_invalid(config) is None:
                out.append(config)
        return tuple(out)

    def configs(self) -> list[KernelConfig]:
        return list(self)

    def size(self) -> int:
        return sum(1 for _ in self)


def build_config(values: dict[str, Any]) -> KernelConfig | None:
    """KernelConfig(**values), or None where KernelConfig's own cross-field rules would
    refuse it — checked first without pydantic, since strategies build thousands."""
    if values["block_m"] * values["block_n"] < values["num_warps"] * 256:
        return None  # the warps-vs-tile rule
    if (values["warp_specialize"] or values["epilogue_subtile"] > 1 or values["flatten"]) and (
            values["variant"] == "grouped" or values["split_k"] > 1 or values["stream_k"]):
        return None  # the pointer-load kernels have none of the TMA options
    if values["stream_k"] and values["split_k"] > 1:
        return None  # one way to split K at a time
    if values["warp_specialize"] and values["num_stages"] > WS_MAX_STAGES:
        return None  # wrong results measured
    return KernelConfig(**values)


def _why_not_tma_option(config: KernelConfig) -> str | None:
    """Why config's warp_specialize / epilogue_subtile / flatten is impossible or has no
    effect, or None (what Triton 3.6 did on the H100: docs/kernel-notes.md)."""
    if not config.tma_options():
        return None
    if config.variant != "tma" or config.split_k > 1 or config.stream_k:
        return ("warp_specialize, epilogue_subtile and flatten are options of the TMA kernel: pair them with "
                "variant tma, split_k 1 and no stream_k")
    if not config.warp_specialize:
        return None
    if config.num_warps != _WS_NUM_WARPS:
        return (f"warp_specialize takes num_warps={_WS_NUM_WARPS} (per consumer warpgroup); Triton builds "
                f"num_warps={config.num_warps} without it, the same kernel as warp_specialize=False")
    if config.epilogue_subtile > 1:
        return "warp_specialize with epilogue_subtile fails to compile (Triton 3.6's Hopper warp specialization)"
    if config.flatten:
        return "warp_specialize with flatten: Triton does not warp-specialize a flattened loop on Hopper"
    if config.num_stages > WS_MAX_STAGES:  # a model_copy skips KernelConfig's own check
        return f"warp_specialize with num_stages > {WS_MAX_STAGES} left part of C unwritten on the H100"
    # Compiled for sm_90 by Triton 3.9 (not checked with 3.6): below 64 rows it builds the
    # plain 4-warp kernel; 64x256 tiles fail in its warp-specialization pass.
    if config.block_m < 64:
        return "warp_specialize needs block_m >= 64 (below, Triton builds the plain kernel)"
    if config.block_m == 64 and config.block_n == 256:
        return "warp_specialize with a 64x256 tile fails to compile (Triton 3.9's Hopper warp specialization)"
    return None


def _why_not_split(config: KernelConfig, p: Problem) -> str | None:
    """Why split-K (config.split_k > 1) is pointless or impossible for ``p``, or None."""
    if config.variant != "grouped":
        return f"split_k={config.split_k} runs the grouped kernel: pair it with variant grouped, not {config.variant}"
    if not (p.m <= _SKINNY_M or p.k >= _LONG_K * max(p.m, p.n)):
        return (f"split_k={config.split_k} only pays for skinny (M <= {_SKINNY_M}) or long-K "
                f"(K >= {_LONG_K} * max(M, N)) problems, not {p.m}x{p.n}x{p.k}")
    if p.k // config.split_k < config.block_k:
        return f"split_k={config.split_k} leaves K slices of {p.k // config.split_k}, shorter than block_k={config.block_k}"
    return None


def _why_not_stream_k(config: KernelConfig, p: Problem, programs: int | None) -> str | None:
    """Why stream-K is pointless or impossible for ``p`` on ``programs`` SMs, or None: it
    pays only where the last wave of output tiles is partial and leaves SMs idle."""
    if config.variant != "grouped":
        return f"stream_k runs the pointer-load kernel: pair it with variant grouped, not {config.variant}"
    if programs is None:
        return "stream_k needs the SM count, unknown here"
    if _cdiv(p.k, config.block_k) < 2:
        return f"stream_k splits the K loop, and K={p.k} is one block_k={config.block_k} step"
    tiles = _cdiv(p.m, config.block_m) * _cdiv(p.n, config.block_n)
    tail = tiles % programs
    if tail == 0:
        return f"stream_k: {tiles} tiles fill whole waves of {programs} SMs, no tail to split"
    if tail > _MAX_TAIL_FILL * programs:
        return f"stream_k: the last wave ({tail} of {programs} SMs) is nearly full"
    return None


def config_key(config: KernelConfig) -> tuple:
    """The tuned fields of a config as a hashable key (for deduplication), aligned with
    PARAMS. Keys are computed from configs, never stored: a config recorded before
    split_k existed loads with split_k=1 and gets the key of the same config today."""
    return tuple(getattr(config, name) for name in PARAMS)
