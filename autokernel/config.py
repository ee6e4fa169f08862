"""The launch rules of a KernelConfig (records.KernelConfig): whether it fits the device's
shared memory in a call's mode, and the default config of a shape."""

from __future__ import annotations

import functools
import numbers

import torch

from autokernel import runtime
from autokernel.kernels.fit import describe, shared_memory_need
from autokernel.records import ConfigError, KernelConfig, one_line  # noqa: F401  (re-exported)


def shared_memory_bytes(config: KernelConfig, dtype: torch.dtype = torch.float16, *, tma: bool = True,
                        bias: bool = False, store_z: bool = False) -> int:
    """Shared memory one program of ``config`` takes on Hopper for ``dtype`` operands, in the
    mode of the call: the kernel that runs it (``tma``: whether the TMA kernel can take the
    operands; True, the larger need, where that is not known), with a bias or not, storing
    the pre-activation Z (a training forward) or not. See kernels/fit.py."""
    return shared_memory_need(config, dtype, tma=tma, bias=bias, store_z=store_z)


def check_fits(config: KernelConfig, dtype: torch.dtype = torch.float16, limit: int | None = None, *,
               tma: bool = True, bias: bool = False, store_z: bool = False) -> None:
    """Raise ConfigError if the shared memory ``config`` takes in this mode (see
    ``shared_memory_bytes``) exceeds the device limit.

    ``limit`` defaults to the current device's opt-in limit; under the interpreter
    there is no limit and the check passes.
    """
    limit = runtime.shared_memory_limit() if limit is None else limit
    if limit is None:
        return
    error = fit_error(config, dtype, limit, tma, bias, store_z)
    if error:
        raise ConfigError(error)


@functools.lru_cache(maxsize=4096)
def fit_error(config: KernelConfig, dtype: torch.dtype, limit: int, tma: bool = True, bias: bool = False,
              store_z: bool = False) -> str | None:
    """Why ``config`` doesn't fit in ``limit`` bytes of shared memory in this mode (see
    ``shared_memory_bytes``), or None. Cached: configs are frozen."""
    need = shared_memory_bytes(config, dtype, tma=tma, bias=bias, store_z=store_z)
    if need <= limit:
        return None
    return (
        f"config {config.short()} needs ~{need // 1024} KiB of shared memory for "
        f"{str(dtype).removeprefix('torch.')} on {describe(config, dtype, tma=tma, bias=bias, store_z=store_z)}, "
        f"the device allows {limit // 1024} KiB"
    )


FILL_TILES = 66
"""default_config's largest tile must make this many tiles: half an H100's 132 SMs."""
_TILES = ((128, 256), (128, 128), (64, 128), (64, 64))
_SKINNY_TILES = _TILES[1:]  # M <= 256: 128x128 on the grouped kernel beat 128x256 and TMA
NARROW_N = 64
"""default_config's narrow outputs: N below this takes tiles 64 columns wide (``_NARROW_TILES``)."""
_NARROW_TILES = ((128, 64), (64, 64))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@functools.lru_cache(maxsize=None)
def _config(**fields) -> KernelConfig:
    """One KernelConfig per distinct set of fields (frozen, so shared): validating a new one
    costs tens of µs, and default_config answers a handful of them for every shape."""
    return KernelConfig(**fields)


_DEFAULT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def default_config(m: int, n: int, k: int, dtype: torch.dtype = torch.float16, *, gpu: bool | None = None,
                   tma: bool = False) -> KernelConfig:
    """A sensible config for an M x N x K problem, before any tuning.

    From the H100 sweep in docs/kernel-notes.md: large problems take 128x256x64 tiles,
    8 warps, 3 stages, on the TMA kernel where it can run ("auto"), flattened; skinny ones (M <= 256)
    take narrower tiles on the grouped pointer kernel, which beat the TMA kernel's large
    tiles there. A problem too small to make FILL_TILES tiles of that size takes the
    largest of 128x128, 64x128 and 64x64 that does (else 64x64), 4 warps and 5 stages
    on the smaller two: tuned small shapes on the H100 all chose those tiles, and the
    rule ran 1.8x faster than the 128x256 or 128x128 tile it replaced, geomean over 14
    problems it was read from and 14 it never saw (docs/runs/kernels/default_tiles_h100.txt).
    M <= 64 keeps its decode tiles. Narrow outputs (N < NARROW_N) take the same rule over
    128x64 and 64x64 tiles: wider tiles multiply every row of A read by columns past N (a
    128x256 tile at N = 8 did 32 times the MMAs), and with those columns masked
    (``kernels.matmul.mask_past``) the problem is A's bytes; on an H200 ``matmul``'s pick ran
    1.55x faster than with the rule before on the 25 of 32 problems where it changed (M =
    8192-32768, N = 1-56; docs/kernel-notes.md, "Rows past M and columns past N, masked").
    ``tma``: the caller knows that the TMA kernel takes the operands; then a 16-bit problem
    of 65-256 rows whose rule gives a 64-row tile takes that tile on the TMA kernel (K steps
    of 128, deep pipelines: candidates.THIN_TMA): 1.27x faster than on the pointer kernel
    over 60 fresh problems on an H200, none more than 2 % slower,
    and 1.12-1.22x over the H100's sweeps. The selector keeps the default unless a candidate is
    predicted faster by more than its doubt, so this also moves picks: 1.02x faster over the
    20 of 2000 fresh problems whose pick changed, 1.09x over 6 of the broad suite (H200;
    docs/selector.md, "A skinny default on the TMA kernel").
    Under the interpreter: the smallest tiles that cover the problem, since
    each program costs Python time there. Cached: KernelConfig is frozen, and building one
    through pydantic on every call showed in the per-launch host time. ``gpu`` asks for
    the GPU's or the interpreter's choice regardless of where this process runs (replay).
    M, N and K must be non-negative integers and ``dtype`` float16, bfloat16 or float32
    (a TypeError or ValueError naming the argument otherwise).
    """
    if type(m) is int and type(n) is int and type(k) is int and min(m, n, k) >= 0 and dtype in _DEFAULT_DTYPES:
        return _default_config(m, n, k, dtype, gpu, tma)
    for name, value in (("m", m), ("n", n), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"default_config: {name} must be an integer, got {value!r}")
        if value < 0:
            raise ValueError(f"default_config: {name} must be >= 0, got {value}")
    if dtype not in _DEFAULT_DTYPES:
        raise TypeError(f"default_config: dtype must be torch.float16, torch.bfloat16 or torch.float32, got {dtype!r}")
    return _default_config(int(m), int(n), int(k), dtype, gpu, bool(tma))


@functools.lru_cache(maxsize=1024)
def _default_config(m: int, n: int, k: int, dtype: torch.dtype, gpu: bool | None, tma: bool) -> KernelConfig:
    """default_config on checked arguments, cached (the checks stay outside: the cache
    takes True for 1 and 64.0 for 64)."""
    if not (gpu if gpu is not None else not runtime.INTERPRETER):
        def fit(x: int, cap: int) -> int:
            return min(cap, max(16, _next_pow2(max(x, 1))))

        bm, bn, bk = fit(m, 64), fit(n, 64), fit(k, 64)
        warps = 4 if bm * bn >= 1024 else 1
        return _config(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=warps, num_stages=1)
    wide = dtype == torch.float32  # fp32 tiles take twice the shared memory
    if m <= 64:
        bm = min(64, max(16, _next_pow2(m)))
        return _config(block_m=bm, block_n=64, block_k=64 if wide else 128,
                            group_m=8, num_warps=4, num_stages=4, variant="grouped")
    # The largest tile that still makes at least FILL_TILES tiles, else the smallest: 128x256
    # tiles on a 512x512 output are 8 tiles, and 124 of the H100's 132 SMs would sit idle.
    tiles = _NARROW_TILES if n < NARROW_N else _SKINNY_TILES if m <= 256 else _TILES
    bm, bn = next(((bm, bn) for bm, bn in tiles if _cdiv(m, bm) * _cdiv(n, bn) >= FILL_TILES), tiles[-1])
    if (bm, bn) == (128, 64):
        return _config(block_m=128, block_n=64, block_k=32 if wide else 64, group_m=8, num_warps=4,
                       num_stages=4 if wide else 5, variant="grouped")
    if (bm, bn) == (128, 256):
        # Flattened: where the TMA kernel runs, the next tile's loads overlap this tile's
        # epilogue. On the H100 that was never slower than the same tile without it and
        # 1.02-1.04x faster in geomean (1.05-1.10x at K <= 1024), over four sweeps of 25 to
        # 140 shapes (docs/selector.md); the pointer kernel, where "auto" falls back, ignores it.
        return _config(block_m=128, block_n=128 if wide else 256, block_k=32 if wide else 64,
                       group_m=8, num_warps=8, num_stages=3, variant="auto", flatten=not wide)
    if tma and not wide and m <= 256 and bm == 64:
        return _config(block_m=64, block_n=bn, block_k=128, group_m=8, num_warps=4, num_stages=4 if bn == 128 else 6,
                       variant="tma", flatten=True)
    if (bm, bn) == (128, 128):
        return _config(block_m=128, block_n=128, block_k=32 if wide else 64,
                            group_m=8, num_warps=4, num_stages=4, variant="grouped")
    bk = 32 if wide else 128 if bn == 64 and k >= 1024 else 64
    return _config(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=4,
                        num_stages=4 if wide else 5, variant="grouped")
