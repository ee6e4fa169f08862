"""The search space of kernel configs for one problem, and the constraints that prune
impossible configs before anything is compiled: the knobs' own rules (autokernel/knobs.py,
which the space's axes come from too) and those of the problem and the device."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any, Iterator

import torch

from autokernel import knobs, runtime
from autokernel.candidates import thin_tma
from autokernel.config import KernelConfig, _cdiv, _next_pow2, shared_memory_bytes
from autokernel.kernels.matmul import group_sizes
from autokernel.kernels.matmul_tma import _INTERPRETER_PROGRAMS
from autokernel.records import Problem

# What each knob (autokernel/knobs.py) takes while tuning on a GPU: a subset of what
# KernelConfig accepts, the values that were ever competitive on the H100 (6 and 8 stages:
# the thin TMA tiles that matmul's selector picks, and defaults to, for few rows; a tune
# that could not try them would keep a winner slower than what ran untuned); a knob not
# named here takes all its values.
GPU_CHOICES: dict[str, tuple] = knobs.narrow(
    block_m=(16, 32, 64, 128, 256),
    block_n=(32, 64, 128, 256),
    block_k=(32, 64, 128),
    group_m=(1, 8, 16),
    num_warps=(4, 8),
    num_stages=(3, 4, 5, 6, 8),
    variant=("grouped", "tma"),
    split_k=(1, 2, 4, 8, 16),
)
_MAX_ACC_REGS = 128  # fp32 accumulator registers per thread; past this the kernel spills
_MIN_USEFUL_TILE = 64  # below this (m or n) a tile only pays where the problem is that thin (or a THIN_TMA tile)


def thinnest_tile(size: int, variant: str = "grouped") -> int:
    """The thinnest tile (block_m or block_n) worth trying for a problem dimension of
    ``size``: _MIN_USEFUL_TILE, or where the problem is no larger, its size rounded up to a
    power of two; on the pointer kernel any tile from 16 up there: for M <= 64 matmul's
    selector picks 16-row pointer tiles (split or not), so a tune's strategies should be
    able to propose them and their neighbours. (The TMA kernel's tiles of fewer than 64 rows
    are its THIN_TMA ones.)"""
    rounded = _next_pow2(max(size, 1))
    if rounded > _MIN_USEFUL_TILE:
        return _MIN_USEFUL_TILE
    return 16 if variant == "grouped" else rounded


_SKINNY_M = 256  # split-K pays where the output has too few tiles to fill the GPU...
_LONG_K = 4  # ...or where K is this many times the larger of M and N (the dW GEMM)
_MAX_TAIL_FILL = 0.875  # stream-K only where the last wave leaves at least 1/8 of the SMs idle

# Under the interpreter each program is Python: small tiles, one stage, few warps.
INTERPRETER_CHOICES: dict[str, tuple] = knobs.narrow(
    block_m=(16, 32, 64),
    block_n=(16, 32, 64),
    block_k=(16, 32),
    group_m=(1, 8),
    num_warps=(1, 2, 4),
    num_stages=(1, 2),
    variant=("grouped",),
    split_k=(1, 2),
    # The interpreter ignores warp specialization and flattening; the space tries no TMA kernel there.
    **{name: (knobs.DEFAULTS[name],) for name in knobs.TMA_OPTIONS},
    # Stream-K is checked on the CPU by tests that set its program count; tuning under the
    # interpreter (3 programs) would only double the space.
    stream_k=(False,),
)

PARAMS = knobs.NAMES
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
        why = knobs.why_broken(config.__dict__)  # a model_copy skips KernelConfig's own rules
        if why:
            return why
        if config.swap_ab and p.m > knobs.SWAP_AB_MAX_M:
            return f"swap_ab puts M's rows on the MMA's narrow side: worth it for M <= {knobs.SWAP_AB_MAX_M}"
        rows, cols = knobs.oriented(config.swap_ab, p.m, p.n)  # what block_m and block_n tile
        if config.split_k > 1:
            why = _why_not_split(config, p)
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
        consumers = config.num_warps * (knobs.WS_CONSUMER_GROUPS if config.warp_specialize else 1)
        acc_regs = config.block_m * config.block_n // (32 * consumers)
        if self.gpu and acc_regs > _MAX_ACC_REGS:
            return (f"a {config.block_m}x{config.block_n} tile on {consumers} {'consumer ' if config.warp_specialize else ''}"
                    f"warps needs {acc_regs} accumulator registers per thread")
        names = "NM" if config.swap_ab else "MN"
        for dim, size, name in (("block_m", rows, names[0]), ("block_n", cols, names[1])):
            floor = thinnest_tile(size, config.variant)
            if self.gpu and getattr(config, dim) < floor and not thin_tma(config):
                return f"{dim}={getattr(config, dim)} is thinner than the problem needs ({name}={size})"
        # Fit to the shape: a tile dimension more than twice the (rounded-up) problem
        # dimension only computes padding.
        for dim, size, name in (("block_m", rows, names[0]), ("block_n", cols, names[1]), ("block_k", p.k, "K")):
            smallest = min(self.choices[dim])
            if getattr(config, dim) > max(smallest, _next_pow2(max(size, 1))):
                return f"{dim}={getattr(config, dim)} exceeds the problem's {name}={size}"
        # A group_m that orders the tiles as a smaller one does (one past the tile-rows
        # there are, or whose last group joins the one before) is that one.
        same = self._same_order(config)
        if same != config.group_m:
            return (f"group_m={config.group_m} acts as {same}: the problem has {_cdiv(rows, config.block_m)} "
                    "tile-rows (the same tile order)")
        return None

    def _same_order(self, config) -> int:
        """The smallest group_m of the space that launches ``config``'s tile order on this
        problem (``group_sizes``), or config's own if none smaller does."""
        tiles_m = knobs.tile_grid(config.swap_ab, config.block_m, config.block_n, self.problem.m, self.problem.n)[0]
        order = group_sizes(tiles_m, config.group_m)
        return min([g for g in self.choices["group_m"] if g < config.group_m and group_sizes(tiles_m, g) == order],
                   default=config.group_m)

    def canonical(self, config: KernelConfig) -> KernelConfig:
        """``config`` with its group_m replaced by the smallest in the space that launches the
        same tile order on this problem (``group_sizes``)."""
        same = self._same_order(config)
        return config if same == config.group_m else config.model_copy(update={"group_m": same})

    def contains(self, config: KernelConfig) -> bool:
        return self.why_invalid(config) is None

    def __iter__(self) -> Iterator[KernelConfig]:
        """Every valid config, in a deterministic order."""
        return iter(self._valid)

    @functools.cached_property
    def _valid(self) -> tuple[KernelConfig, ...]:
        # Built once per space: the cross product is thousands of pydantic configs, and the
        # random and grid strategies walk it at every proposal.
        # The rules are checked on the bare values first (why_invalid reads only the tuned
        # fields), so that pydantic validates the few valid configs, not the whole product.
        out = []
        for values in itertools.product(*(self.choices[name] for name in PARAMS)):
            fields = dict(zip(PARAMS, values))
            if knobs.breaks(fields, knobs.CONFIG_RULES) or self.why_invalid(SimpleNamespace(**fields)) is not None:
                continue
            out.append(KernelConfig(**fields))
        return tuple(out)

    def configs(self) -> list[KernelConfig]:
        return list(self)

    def size(self) -> int:
        return sum(1 for _ in self)


def build_config(values: dict[str, Any]) -> KernelConfig | None:
    """KernelConfig(**values), or None where KernelConfig's own cross-field rules would
    refuse it — checked first without pydantic, since strategies build thousands."""
    if knobs.breaks(values, knobs.CONFIG_RULES):
        return None
    return KernelConfig(**values)


def _why_not_split(config: KernelConfig, p: Problem) -> str | None:
    """Why split-K (config.split_k > 1) is pointless or impossible for ``p``, or None."""
    if not (p.m <= _SKINNY_M or p.k >= _LONG_K * max(p.m, p.n)):
        return (f"split_k={config.split_k} only pays for skinny (M <= {_SKINNY_M}) or long-K "
                f"(K >= {_LONG_K} * max(M, N)) problems, not {p.m}x{p.n}x{p.k}")
    if p.k // config.split_k < config.block_k:
        return f"split_k={config.split_k} leaves K slices of {p.k // config.split_k}, shorter than block_k={config.block_k}"
    return None


def _why_not_stream_k(config: KernelConfig, p: Problem, programs: int | None) -> str | None:
    """Why stream-K is pointless or impossible for ``p`` on ``programs`` SMs, or None: it
    pays only where the last wave of output tiles is partial and leaves SMs idle."""
    if programs is None:
        return "stream_k needs the SM count, unknown here"
    if _cdiv(p.k, config.block_k) < 2:
        return f"stream_k splits the K loop, and K={p.k} is one block_k={config.block_k} step"
    rows, cols = knobs.tile_grid(config.swap_ab, config.block_m, config.block_n, p.m, p.n)
    tiles = rows * cols
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
