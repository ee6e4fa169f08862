"""Grouped-tile GEMM with a fused bias + activation epilogue: C = act(A @ B + bias).

A is [M, K], B is [K, N], both with any strides (a transposed view is read in place).
Accumulation is float32; C is written in C's dtype. Tiles are visited in grouped order
(GROUP_M tile-rows at a time) so that neighbouring programs share A and B in L2.
"""

import torch
import triton
import triton.language as tl

from autokernel.kernels.epilogue import store_epilogue
from autokernel.kernels.launch import KernelLaunch, hash_callees_first

_INT32_MAX = 2**31 - 1


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Map a linear program id to (pid_m, pid_n) in grouped (swizzled) order: GROUP_M
    tile-rows at a time, column by column. The tile-rows left past the last full group
    join it where they are at most half a group: a group of one or two tile-rows would
    read all of B again from DRAM for a sliver of the work."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    full_groups = num_pid_m // GROUP_M
    merged = (full_groups > 0) & ((num_pid_m - full_groups * GROUP_M) * 2 <= GROUP_M)
    last_group = tl.where(merged, full_groups - 1, full_groups)
    group_id = tl.minimum(pid // num_pid_in_group, last_group)
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.where(group_id == last_group, num_pid_m - first_pid_m, GROUP_M)
    local = pid - group_id * num_pid_in_group
    pid_m = first_pid_m + local % group_size_m
    pid_n = local // group_size_m
    return pid_m, pid_n


def group_sizes(tile_rows: int, group_m: int) -> tuple[int, ...]:
    """The tile-rows of each group in ``grouped_tile``'s order (its rule, in Python: groups
    of ``group_m``, the rows left past the last full group joining it where they are at most
    half a group). Two group_m values with equal sizes launch the same tile order."""
    full = tile_rows // group_m
    rest = tile_rows - full * group_m
    if full and 2 * rest <= group_m:
        return (group_m,) * (full - 1) + (group_m + rest,)
    return (group_m,) * full + ((rest,) if rest else ())


@triton.jit
def accumulate_k(acc, a_ptrs, b_ptrs, a_rows, b_cols, offs_k, k_first, iters, K, stride_ak, stride_bk,
                 EVEN_K: tl.constexpr, UPCAST: tl.constexpr, MASK_M: tl.constexpr, MASK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """acc + the A tile @ the B tile over ``iters`` BLOCK_K steps from K index ``k_first``
    (where ``a_ptrs`` and ``b_ptrs`` point); without EVEN_K, columns from K on read as 0.
    With MASK_M (MASK_N), only the A rows (B columns) where ``a_rows`` (``b_cols``) holds
    are read, the others as 0.

    The loop loads unmasked (but for those rows and columns: masks constant along K); without
    EVEN_K the steps end with one masked step, outside the loop, for the part of the last
    BLOCK_K columns that lies inside K (a K slice of split-K or stream-K holds at most that
    one). A mask along K inside the loop made every load of an operand whose leading stride
    is not a multiple of 16 elements a scalar one, and kept the pipeliner from overlapping
    them."""
    if EVEN_K:
        full = iters
    else:
        full = tl.minimum(iters, (K - k_first) // BLOCK_K)
    for i in range(0, full):
        if MASK_M:
            a = tl.load(a_ptrs, mask=a_rows[:, None], other=0.0)
        else:
            a = tl.load(a_ptrs)
        if MASK_N:
            b = tl.load(b_ptrs, mask=b_cols[None, :], other=0.0)
        else:
            b = tl.load(b_ptrs)
        if UPCAST:
            # Triton's interpreter multiplies bf16 as raw integers; fp32 is exact there.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if not EVEN_K:
        if full < iters:
            k_left = K - k_first - full * BLOCK_K
            a_mask = offs_k[None, :] < k_left
            if MASK_M:
                a_mask = a_mask & a_rows[:, None]
            a = tl.load(a_ptrs, mask=a_mask, other=0.0)
            b_mask = offs_k[:, None] < k_left
            if MASK_N:
                b_mask = b_mask & b_cols[None, :]
            b = tl.load(b_ptrs, mask=b_mask, other=0.0)
            if UPCAST:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def operand_ptrs(a_ptr, b_ptr, offs_am, offs_bn, abs_k, stride_am, stride_ak, stride_bk, stride_bn,
                 A_LEAD: tl.constexpr, B_LEAD: tl.constexpr):
    """Pointers to the A tile [rows offs_am, columns abs_k] and the B tile [rows abs_k,
    columns offs_bn]. A_LEAD / B_LEAD tell the compiler what divides an operand's leading
    stride where Triton's own specialization (strides divisible by 16) does not: d > 0,
    the operand's dimension-0 stride (stride_am, stride_bk) is a multiple of d; d < 0, its
    dimension-1 stride (stride_ak, stride_bn) is a multiple of -d; 0, nothing to add
    (``lead_hint``). A row of K = 1000 halves is 16-byte aligned, and without the hint
    every load of it was a 2-byte one."""
    a_rows = offs_am[:, None] * stride_am
    a_cols = abs_k[None, :] * stride_ak
    b_rows = abs_k[:, None] * stride_bk
    b_cols = offs_bn[None, :] * stride_bn
    if A_LEAD > 0:
        a_rows = tl.multiple_of(a_rows, [A_LEAD, A_LEAD])
    if A_LEAD < 0:
        a_cols = tl.multiple_of(a_cols, [-A_LEAD, -A_LEAD])
    if B_LEAD > 0:
        b_rows = tl.multiple_of(b_rows, [B_LEAD, B_LEAD])
    if B_LEAD < 0:
        b_cols = tl.multiple_of(b_cols, [-B_LEAD, -B_LEAD])
    return a_ptr + a_rows + a_cols, b_ptr + b_rows + b_cols


@triton.jit
def tile_acc(a_ptr, b_ptr, pid_m, pid_n, k_iter, iters, M, N, K,
             stride_am, stride_ak, stride_bk, stride_bn,
             EVEN_K: tl.constexpr, UPCAST: tl.constexpr, INDEX_64: tl.constexpr,
             A_LEAD: tl.constexpr, B_LEAD: tl.constexpr, M_RUN: tl.constexpr, N_RUN: tl.constexpr,
             MASK_M: tl.constexpr, MASK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr):
    """(acc, offs_m, offs_n): the float32 product of output tile (pid_m, pid_n) over
    ``iters`` BLOCK_K steps of K from step ``k_iter`` (the whole K loop in the one-pass
    kernel, a slice of it in the split-K and stream-K kernels), with the tile's row and
    column indices. M_RUN, N_RUN: ``index_run`` of M and N. MASK_M, MASK_N: ``mask_past``
    of M and N."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Edge rows/cols wrap onto valid ones; the store masks them. The wrapped indices run
    # contiguously in aligned groups of M_RUN (N_RUN) only: the wrap restarts at 0 at M
    # (N), a multiple of the run. A claim of whole-tile runs let the compiler load a
    # vector across the restart from an address off its alignment (a misaligned address
    # on the H100: B a column slice of 16-byte rows, N = 30 or 60). With MASK_M (MASK_N)
    # the rows (columns) past M (N) are not read at all (``mask_past``).
    if MASK_M:
        offs_am = offs_m
    else:
        offs_am = tl.max_contiguous(tl.multiple_of(offs_m % M, M_RUN), M_RUN)
    if MASK_N:
        offs_bn = offs_n
    else:
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_n % N, N_RUN), N_RUN)
    offs_k = tl.arange(0, BLOCK_K)
    k_first = k_iter * BLOCK_K
    abs_k = k_first + offs_k
    if INDEX_64:
        offs_am = offs_am.to(tl.int64)
        offs_bn = offs_bn.to(tl.int64)
        abs_k = abs_k.to(tl.int64)
    a_ptrs, b_ptrs = operand_ptrs(a_ptr, b_ptr, offs_am, offs_bn, abs_k, stride_am, stride_ak, stride_bk, stride_bn,
                                  A_LEAD, B_LEAD)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = accumulate_k(acc, a_ptrs, b_ptrs, offs_m < M, offs_n < N, offs_k, k_first, iters, K,
                       stride_ak, stride_bk, EVEN_K, UPCAST, MASK_M, MASK_N, BLOCK_K)
    return acc, offs_m, offs_n


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, z_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_zm, stride_zn, stride_bias,
    slope,
    HAS_BIAS: tl.constexpr,
    STORE_Z: tl.constexpr,
    ACTIVATION: tl.constexpr,
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
):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc, offs_m, offs_n = tile_acc(a_ptr, b_ptr, pid_m, pid_n, 0, tl.cdiv(K, BLOCK_K), M, N, K,
                                   stride_am, stride_ak, stride_bk, stride_bn,
                                   EVEN_K, UPCAST, INDEX_64, A_LEAD, B_LEAD, M_RUN, N_RUN, MASK_M, MASK_N,
                                   BLOCK_M, BLOCK_N, BLOCK_K)
    store_epilogue(acc, offs_m, offs_n, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias,
                   z_ptr, stride_zm, stride_zn, slope, HAS_BIAS, STORE_Z, ACTIVATION, INDEX_64)


def _needs_int64(*tensors: torch.Tensor) -> bool:
    """True when some 2-D tensor's largest element offset may overflow int32 arithmetic."""
    for t in tensors:
        (rows, cols), (s0, s1) = t.shape, t.stride()
        if (rows - 1) * s0 + (cols - 1) * s1 > _INT32_MAX // 2:
            return True
    return False


def mask_past(size: int, block: int) -> bool:
    """MASK_M of ``tile_acc`` (``size`` M, ``block`` block_m; MASK_N with N and block_n):
    whether the tile's rows past M are masked rather than wrapped onto valid ones: where the
    tile is at least four times M (decode: M of 1-4 on 16-row tiles). Every wrapped row is
    then a copy of one of A's few rows, so that every program loads the same few addresses
    over and over at every K step; masked, the rows past M are never read. Measured on an
    H200 (docs/kernel-notes.md, "Rows past M and columns past N, masked"): at M = 1 the
    decode tiles ran 1.06-1.25x faster masked (geomean per tile over 11 weights; 1x8192x8192
    on 16x64x128: 42.4 -> 34.8 µs), the best of them 0.936 -> 1.022x cuBLAS; at N = 1 the
    best of six tiles 0.52 -> 0.97x. Under four times the dimension masking gained nothing,
    and tiles of 128 rows ran slower with B's columns masked (0.87-0.93x)."""
    return 4 * size <= block


def index_run(size: int, block: int) -> int:
    """M_RUN / N_RUN of ``tile_acc``: the largest power of two that divides ``size``, at most
    ``block``. A tile's indices wrapped at ``size`` run contiguously in aligned groups of
    that many, and no more where the tile crosses ``size``."""
    return max(1, min(block, size & -size))


def lead_hint(t: torch.Tensor) -> int:
    """A_LEAD / B_LEAD of ``operand_ptrs`` for a 2-D operand: +d where its dimension-0
    stride is the leading one (dimension 1 contiguous), -d where its dimension-1 stride
    is, d the power of two in 2..8 that divides it; 0 where Triton already knows
    (divisible by 16) or no hint applies (no unit stride, or an odd leading stride)."""
    s0, s1 = t.stride()
    if s1 == 1 and t.shape[1] > 1:
        lead, sign = s0, 1
    elif s0 == 1 and t.shape[0] > 1:
        lead, sign = s1, -1
    else:
        return 0
    if lead % 16 == 0 or lead % 2:
        return 0
    return sign * (lead & -lead)


def pointer_kernel_args(a, b, c, bias, activation: str, slope: float, config, interpret: bool,
                        z=None) -> tuple[tuple, dict]:
    """(scalars, constexprs) that the one-pass and the stream-K kernels share, in their
    parameter order: sizes, strides of A, B, C, Z and the bias, the slope; then the
    epilogue's switches, the K tail, interpreter upcast, index width and the tile."""
    M, K = a.shape
    N = b.shape[1]
    zz = z if z is not None else c
    scalars = (M, N, K,
               a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1), zz.stride(0), zz.stride(1),
               bias.stride(0) if bias is not None else 0, float(slope))
    constexprs = dict(
        HAS_BIAS=bias is not None,
        STORE_Z=z is not None,
        ACTIVATION=activation,
        INDEX_64=_needs_int64(a, b, c, zz),
        **tile_constexprs(a, b, config, interpret),
    )
    return scalars, constexprs


def tile_constexprs(a, b, config, interpret: bool) -> dict:
    """The constexprs of ``tile_acc`` (but INDEX_64) and the tile order, as every pointer
    kernel that calls it takes them: the K tail, interpreter upcast, leading-stride hints,
    index runs and masks of M and N, the tile and GROUP_M."""
    M, K = a.shape
    N = b.shape[1]
    return dict(
        EVEN_K=K % config.block_k == 0,
        UPCAST=interpret and a.dtype == torch.bfloat16,
        A_LEAD=lead_hint(a),
        B_LEAD=lead_hint(b),
        M_RUN=index_run(M, config.block_m),
        N_RUN=index_run(N, config.block_n),
        MASK_M=mask_past(M, config.block_m),
        MASK_N=mask_past(N, config.block_n),
        BLOCK_M=config.block_m,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        GROUP_M=config.group_m,
    )


def plan_matmul(a, b, c, bias, activation: str, slope: float, config, interpret: bool, z=None) -> KernelLaunch:
    """The launch of C = act(A @ B + bias) for operands laid out like these (shapes
    already checked), called as ``launch(a, b, c, bias or c, z or c)``.

    M and N must be > 0; K may be 0 (the loop is skipped and the epilogue still runs).
    With ``z`` (like ``c``), the pre-activation A @ B + bias is stored there too.
    """
    M, N = a.shape[0], b.shape[1]
    scalars, constexprs = pointer_kernel_args(a, b, c, bias, activation, slope, config, interpret, z)
    return KernelLaunch(
        _matmul_kernel,
        (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),),
        scalars, constexprs,
        dict(num_warps=config.num_warps, num_stages=config.num_stages),
        c.device, interpret,
    )


hash_callees_first(globals())  # one cache key per kernel in every process (see there)
