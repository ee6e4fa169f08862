"""Shared memory of one GEMM launch on Hopper: what decides whether a config can launch.

A config's need depends on the kernel that really runs it and on the mode of the call,
not on the config alone: ``kernel_for`` names the kernel (stream-K, split-K, the TMA
kernel where the config's variant and the operands allow it, else the grouped pointer
kernel), and ``shared_memory_need`` adds up what that kernel allocates with or without a
bias and with or without the pre-activation Z stored for backward (a training forward of
gelu, gelu_tanh or silu). The activation itself changes nothing: relu, gelu, gelu_tanh and
silu compiled to the same figures. ``fit_config`` shrinks a config that does not fit.

The figures follow what Triton 3.9 allocates for sm_90 (``.metadata.shared`` of the
compiled kernels: tests/kernels/fit_sm90.py compiles a grid of configs and modes, and
tests/kernels/test_fit.py holds every estimate at or above the compiled figure, and at most 12 %
or 8 KiB over it for the tiles the library and the tuner pick; it is looser for tiny
pipelines, block_k <= 32 at one or two stages). What takes shared memory:

- the operand pipeline: an A tile [BM, BK] and a B tile [BK, BN] in the operands' dtype
  per buffer. A dot of 64 rows or more runs on wgmma, which reads both operands from
  shared memory: one buffer per stage. Below 64 rows it runs on mma.sync, which reads
  them from registers: the pipeline holds num_stages - 1 buffers (at least one).
- the pointer kernels (grouped, split-K's partial pass, stream-K): the pipeline, or the
  epilogue's scratch where that is larger (a tiny pipeline: small block_k, one or two
  stages). The scratch changes the accumulator's layout for the store, up to 16 rows
  per warp of the tile at a time, in the output's dtype (float32 where split-K and
  stream-K store partial tiles); it reuses the pipeline's buffers once the K loop is
  done, and stream-K's three K loops share one set. Split-K's reduction and backward's
  elementwise pass hold no more than a few hundred bytes.
- the TMA kernel: the pipeline, an mbarrier per buffer, and the staging buffer of the
  TMA store, one column slice of the C tile (BM x BN / epilogue_subtile). With
  ``flatten`` the next tile's loads are in flight during this tile's epilogue, so the
  epilogue's own buffers come on top: the bias slice (double-buffered, when there is a
  bias) and the scratch through which Z's pointer store changes the accumulator's layout
  (up to 16 rows per warp by 128 columns of 16-bit values, when Z is stored); where a
  wgmma tile's warps sit side by side along N (fewer than 16 rows per warp), splitting
  it into column slices moves it between warps through scratch of a whole 16-bit tile.
  Without ``flatten`` that scratch reuses the operand buffers.
  With ``warp_specialize`` the producer and consumer warpgroups' barriers come on top,
  and at 64 rows a second staging tile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from autokernel import knobs

if TYPE_CHECKING:
    from autokernel.records import KernelConfig

TMA_DTYPES = (torch.float16, torch.bfloat16)
"""The dtypes the TMA kernel takes (kernels/matmul_tma.py); others run the grouped kernel."""
KERNELS = knobs.ALL_KERNELS

_WGMMA_MIN_ROWS = 64
"""Tiles of fewer rows run their dot on mma.sync (operands from registers)."""
_BARRIER_BYTES = 16
"""Per pipeline buffer of the TMA kernel: its mbarrier (8 bytes) and alignment."""
_TMA_FIXED_BYTES = 64
"""The TMA kernel's other barriers and alignment (measured: 0 to 48 bytes)."""
_WS_BYTES = 1024
"""Warp specialization's producer/consumer barriers (measured: 600 to 616 bytes)."""
_BIAS_BYTES = 4
"""A bias element: the bias may be float32 beside 16-bit operands."""
_ROWS_PER_WARP = 16
"""A layout change of the accumulator moves at most 16 rows per warp at a time."""
_Z_SCRATCH_COLS = 128
"""... and, for Z's store from the TMA kernel, at most 128 columns (16-bit values)."""


def kernel_for(config: "KernelConfig", dtype: torch.dtype = torch.float16, tma: bool = True) -> str:
    """The kernel that runs ``config`` (one of KERNELS), as api._plan_kernel picks it.

    ``tma``: whether the TMA kernel can take this call's operands here (a Hopper GPU,
    descriptor-friendly layouts); True where that is not known, the larger need."""
    kernel = knobs.kernel_of(vars(config))
    if kernel == "tma" and (not tma or dtype not in TMA_DTYPES):
        return "streamk" if config.stream_k else "grouped"
    return kernel


def shared_memory_need(config: "KernelConfig", dtype: torch.dtype = torch.float16, *, tma: bool = True,
                       bias: bool = False, store_z: bool = False) -> int:
    """Bytes of shared memory one program of ``config``'s kernel takes on Hopper for
    ``dtype`` operands, with a bias or not and storing Z or not (module docstring)."""
    elem = dtype.itemsize
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    wgmma = bm >= _WGMMA_MIN_ROWS
    buffers = config.num_stages if wgmma else max(config.num_stages - 1, 1)
    pipeline = buffers * (bm * bk + bk * bn) * elem
    kernel = kernel_for(config, dtype, tma)
    rows = min(bm, _ROWS_PER_WARP * config.num_warps)  # the rows one layout change moves at a time
    if kernel != "tma":
        # The epilogue's layout change of the tile, after the K loop: in the output's
        # dtype, or float32 where the partial tile goes to a workspace.
        return max(pipeline, rows * bn * (elem if kernel == "grouped" else 4))
    sub_n = bn // config.epilogue_subtile
    staging = bm * sub_n * elem
    barriers = buffers * _BARRIER_BYTES + _TMA_FIXED_BYTES
    # The epilogue's scratch: Z's pointer store changes the accumulator's layout; and
    # where the warps of a wgmma tile sit side by side along N (fewer than 16 rows per
    # warp), splitting the tile into column halves moves it between warps.
    scratch = rows * min(sub_n, _Z_SCRATCH_COLS) * 2 if store_z else 0
    if config.epilogue_subtile > 1 and wgmma and bm < _ROWS_PER_WARP * config.num_warps:
        scratch = max(scratch, bm * bn * 2)
    if config.num_stages < 2:  # no pipeline: each buffer is free again before the next is used
        need = max(pipeline, staging, scratch)
    elif config.flatten:
        # The next tile's loads are in flight during this epilogue: nothing is shared.
        need = pipeline + staging + scratch + (2 * sub_n * _BIAS_BYTES if bias else 0)
    else:  # the epilogue's scratch reuses the operand buffers, the staging buffer stays
        need = max(pipeline, scratch) + staging
    need += barriers
    if config.warp_specialize:
        need += _WS_BYTES
        if bm <= _WGMMA_MIN_ROWS:
            need += bm * bn * elem
    return need


SM_SHARED_BYTES = 228 * 1024
"""Shared memory of one Hopper SM, which the programs it holds at once share."""
PROGRAM_RESERVED_BYTES = 1024
"""Shared memory the hardware reserves for each program (thread block) on an SM."""
SM_THREADS = 2048
"""Threads one Hopper SM holds at once."""


def programs_per_sm(config: "KernelConfig", dtype: torch.dtype = torch.float16, *, tma: bool = True) -> int:
    """How many programs of ``config``'s kernel one Hopper SM holds at once: as many as its
    shared memory (``shared_memory_need`` and the reserve of each) and its threads allow.
    The pointer kernels' grids launch all their programs at once, so that a grid of more
    programs than SMs runs several to an SM where they fit; the TMA kernels' persistent
    grids run one program per SM. Registers do not bind first for the library's configs
    (compiled for sm_90: 60-187 registers a thread at 4 warps, room for 2-8 programs, where
    shared memory leaves room for 1-3)."""
    need = shared_memory_need(config, dtype, tma=tma) + PROGRAM_RESERVED_BYTES
    return max(1, min(SM_THREADS // (32 * config.num_warps), SM_SHARED_BYTES // need))


def describe(config: "KernelConfig", dtype: torch.dtype = torch.float16, *, tma: bool = True, bias: bool = False,
             store_z: bool = False) -> str:
    """The mode in words, e.g. "the TMA kernel with a bias, storing Z"."""
    kernel = kernel_for(config, dtype, tma)
    name = {"tma": "the TMA kernel", "grouped": "the grouped kernel", "splitk": "split-K",
            "streamk": "stream-K"}[kernel]
    extras = [e for e, on in (("with a bias", bias), ("storing Z", store_z)) if on]
    return ", ".join([name, *extras])


def shrink_steps(config: "KernelConfig", dtype: torch.dtype = torch.float16, tma: bool = True):
    """``config``, then each smaller config ``fit_config`` tries, in order: the TMA
    kernel's store through half-width slices (epilogue_subtile=2, where the TMA kernel
    runs it and warp specialization does not: the two don't compile together), then one
    stage fewer at a time, down to 2 stages."""
    yield config
    if (kernel_for(config, dtype, tma) == "tma" and config.epilogue_subtile == 1 and not config.warp_specialize
            and config.block_n >= 32):
        config = config.model_copy(update={"epilogue_subtile": 2})
        yield config
    for stages in range(config.num_stages - 1, 1, -1):
        config = config.model_copy(update={"num_stages": stages})
        yield config


def fit_config(config: "KernelConfig", dtype: torch.dtype, limit: int | None, *, tma: bool = True,
               bias: bool = False, store_z: bool = False) -> "KernelConfig | None":
    """The first of ``shrink_steps(config)`` whose need fits ``limit`` bytes (``config``
    itself when it fits; every config when ``limit`` is None), or None."""
    for step in shrink_steps(config, dtype, tma):
        if limit is None or shared_memory_need(step, dtype, tma=tma, bias=bias, store_z=store_z) <= limit:
            return step
    return None
