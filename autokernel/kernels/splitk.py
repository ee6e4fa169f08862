"""Split-K GEMM for skinny and long-K problems: C = act(A @ B + bias) in two kernels.

With few output tiles (decode shapes, M <= 256) or a K much longer than M and N (the dW
GEMM of a backward over many tokens), one program per tile leaves most SMs idle while
each walks a long K loop. Split-K gives each tile SPLIT_K programs:

1. ``_splitk_partial_kernel``, grid (tiles, SPLIT_K): program (tile, s) accumulates its
   slice s of the K loop (whole BLOCK_K steps; the last slices may be short or empty) in
   float32 and stores the partial tile to slice s of a float32 workspace [SPLIT_K, M, N].
2. ``_splitk_reduce_kernel``: sums the slices in a fixed order (no atomics: the result
   is deterministic), then the epilogue of the one-pass kernel (bias, Z, activation).
   On Hopper it is a programmatic dependent launch (``launch.dependent_launch``): its
   programs start while the partial kernel's last ones run and wait before they read.

The workspace is allocated per call (``torch.empty``, SPLIT_K * M * N * 4 bytes): the
caching allocator makes that cheap, and a plan holds no memory between calls.
"""

import torch
import triton
import triton.language as tl

from autokernel.kernels.epilogue import store_epilogue
from autokernel.kernels.launch import KernelLaunch, dependent_launch, hash_callees_first
from autokernel.kernels.matmul import _INT32_MAX, _needs_int64, grouped_tile, tile_acc, tile_constexprs

_REDUCE_WARPS = 4


@triton.jit
def _splitk_partial_kernel(
    a_ptr, b_ptr, ws_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn,
    slice_size, iters_per_split,
    EVEN_K: tl.constexpr,
    UPCAST: tl.constexpr,
    INDEX_64: tl.constexpr,
    A_LEAD: tl.constexpr,
    B_LEAD: tl.constexpr,
    M_RUN: tl.constexpr,
    N_RUN: tl.constexpr,
    MASK_M: tl.constexpr,
    MASK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    LAUNCH_NEXT: tl.constexpr,
):
    if LAUNCH_NEXT:  # the reduction may start its programs now: they wait for this grid's end
        tl.extra.cuda.gdc_launch_dependents()
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    pid_s = tl.program_id(1)
    first_iter = pid_s * iters_per_split
    # The last slices cover what is left of K: possibly less than the others, or nothing.
    iters = tl.minimum(iters_per_split, tl.cdiv(K, BLOCK_K) - first_iter)
    acc, offs_m, offs_n = tile_acc(a_ptr, b_ptr, pid_m, pid_n, first_iter, iters, M, N, K,
                                   stride_am, stride_ak, stride_bk, stride_bn,
                                   EVEN_K, UPCAST, INDEX_64, A_LEAD, B_LEAD, M_RUN, N_RUN, MASK_M, MASK_N,
                                   BLOCK_M, BLOCK_N, BLOCK_K)

    slice_start = pid_s * slice_size  # slice_size = M * N
    if INDEX_64:
        slice_start = pid_s.to(tl.int64) * slice_size
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(ws_ptr + slice_start + offs_m[:, None] * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def _splitk_reduce_kernel(
    ws_ptr, c_ptr, bias_ptr, z_ptr,
    M, N,
    stride_cm, stride_cn, stride_zm, stride_zn, stride_bias,
    slice_size, slope,
    HAS_BIAS: tl.constexpr,
    STORE_Z: tl.constexpr,
    ACTIVATION: tl.constexpr,
    INDEX_64: tl.constexpr,
    SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    WAIT_PRIOR: tl.constexpr,
):
    """One program per BLOCK_M x BLOCK_N block of C (``reduce_block``: smaller than the
    GEMM's tile, so that the few tiles of a split-K problem do not funnel the partials
    through as few SMs): its slices summed, then the epilogue. WAIT_PRIOR: launched as a
    dependent launch, it waits for the partial kernel's grid to end before it reads."""
    # A 1-D grid, row-major over blocks: a grid's y dimension is capped at 65535.
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    offs_m = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = offs_m
    cols = offs_n
    if INDEX_64:
        rows = rows.to(tl.int64)
        cols = cols.to(tl.int64)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ws_ptrs = ws_ptr + rows[:, None] * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if WAIT_PRIOR:
        tl.extra.cuda.gdc_wait()
    for _ in tl.static_range(SPLIT_K):  # a fixed order: the same sum on every run
        acc += tl.load(ws_ptrs, mask=mask, other=0.0)
        ws_ptrs += slice_size  # pointer arithmetic: no int32 product of the slice index
    store_epilogue(acc, offs_m, offs_n, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias,
                   z_ptr, stride_zm, stride_zn, slope, HAS_BIAS, STORE_Z, ACTIVATION, INDEX_64)


REDUCE_BLOCK = (32, 64)
"""The largest block of C one reduction program sums (``_splitk_reduce_kernel``)."""


def reduce_block(m: int, block_m: int, block_n: int) -> tuple[int, int]:
    """The reduction's block for M rows and a GEMM tile of block_m x block_n: REDUCE_BLOCK,
    no larger than the tile, and 16 rows where M is that short (decode)."""
    return min(REDUCE_BLOCK[0], block_m, 16 if m <= 16 else block_m), min(REDUCE_BLOCK[1], block_n)


class SplitKLaunch:
    """The two launches of a split-K GEMM, called as ``launch(a, b, c, bias or c, z or c)``
    like a ``KernelLaunch`` of the one-pass kernel; each call allocates its workspace."""

    __slots__ = ("partial", "reduce", "workspace_shape")

    def __init__(self, partial: KernelLaunch, reduce: KernelLaunch, workspace_shape: tuple[int, int, int]):
        self.partial, self.reduce, self.workspace_shape = partial, reduce, workspace_shape

    def __call__(self, a, b, c, bias, z) -> None:
        ws = torch.empty(self.workspace_shape, dtype=torch.float32, device=c.device)
        self.partial(a, b, ws)
        self.reduce(ws, c, bias, z)


def plan_matmul_splitk(a, b, c, bias, activation: str, slope: float, config, interpret: bool, z=None,
                       pdl: bool | None = None) -> SplitKLaunch:
    """The split-K launch of C = act(A @ B + bias) with ``config.split_k`` slices, for
    operands laid out like these (shapes already checked; M, N > 0; K may be 0: every
    slice is then empty and C = act(bias)). With ``z``, the pre-activation is stored too.
    ``pdl``: the reduction as a programmatic dependent launch of the partial kernel
    (default: where the GPU has it, ``dependent_launch``)."""
    M, K = a.shape
    N = b.shape[1]
    split_k = config.split_k
    zz = z if z is not None else c
    index_64 = _needs_int64(a, b, c, zz) or split_k * M * N > _INT32_MAX // 2
    iters_per_split = triton.cdiv(triton.cdiv(K, config.block_k), split_k)
    if pdl is None:
        pdl = not interpret and dependent_launch(c.device)
    options = dict(num_warps=config.num_warps, num_stages=config.num_stages)
    partial = KernelLaunch(
        _splitk_partial_kernel,
        (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n), split_k),
        (M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), M * N, iters_per_split),
        dict(INDEX_64=index_64, LAUNCH_NEXT=pdl, **tile_constexprs(a, b, config, interpret)),
        options, c.device, interpret,
    )
    # The reduction streams SPLIT_K fp32 blocks through registers: blocks smaller than the
    # GEMM's tile, with a fixed warp count (the config's stages and warps are the GEMM's).
    rm, rn = reduce_block(M, config.block_m, config.block_n)
    reduce = KernelLaunch(
        _splitk_reduce_kernel,
        (triton.cdiv(M, rm) * triton.cdiv(N, rn),),
        (M, N, c.stride(0), c.stride(1), zz.stride(0), zz.stride(1),
         bias.stride(0) if bias is not None else 0, M * N, float(slope)),
        dict(
            HAS_BIAS=bias is not None,
            STORE_Z=z is not None,
            ACTIVATION=activation,
            INDEX_64=index_64,
            SPLIT_K=split_k,
            BLOCK_M=rm,
            BLOCK_N=rn,
            WAIT_PRIOR=pdl,
        ),
        dict(num_warps=_REDUCE_WARPS, **({"launch_pdl": True} if pdl else {})), c.device, interpret,
    )
    return SplitKLaunch(partial, reduce, (split_k, M, N))


hash_callees_first(globals())  # one cache key per kernel in every process (see there)
