"""Elementwise kernels of the differentiable linear layer Y = act(X @ W^T + b).

Every GEMM, forward and backward, is the grouped-tile kernel of kernels/matmul.py;
backward runs it on strided views (no transposed copies), with dZ = dY * act'(Z):
    dX = dZ @ W        [M, K] = [M, N] @ [N, K]
    dW = dZ^T @ X      [N, K] = [N, M] @ [M, K]
    db = sum_m dZ      [N]

``_activation_grad_kernel`` is the one kernel that reads dY: it multiplies by act'(Z)
and sums columns for db in the same pass. (A GEMM whose A-operand load applied act'(Z)
measured 1.7x (leaky_relu) to 3x (gelu) slower than the plain GEMM on an H100, and
summing db inside the dW GEMM 2.5x slower: docs/backward.md.) In forward, the GEMM's
epilogue stores Z beside Y when backward needs it (gelu, gelu_tanh, silu).
"""

import triton
import triton.language as tl

from autokernel import runtime
from autokernel.kernels.epilogue import activation_grad
from autokernel.kernels.launch import KernelLaunch, hash_callees_first, stream_counters


@triton.jit
def _column_sums_out(colsum, partial_ptr, db_ptr, counts_ptr, pid_m, pid_n, offs_n, n_ok, N,
                     FINISH: tl.constexpr, SUM_ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Store this program's column sums as partial[pid_m]; with FINISH, the last program of
    column block pid_n to arrive (counted in counts[pid_n]) also sums every row of partial
    there, in row order (the same result every run: no float atomics), stores db and
    resets its count to 0 for the next launch."""
    tl.store(partial_ptr + pid_m * N + offs_n, colsum, mask=n_ok)
    if FINISH:
        rows = tl.num_programs(0)
        tl.debug_barrier()  # every thread's sums are stored before the count
        if tl.atomic_add(counts_ptr + pid_n, 1, sem="acq_rel") == rows - 1:
            tl.debug_barrier()
            total = tl.zeros((SUM_ROWS, BLOCK_N), dtype=tl.float32)
            for r0 in range(0, rows, SUM_ROWS):
                r = r0 + tl.arange(0, SUM_ROWS)
                # .cg: read from L2, where the other programs' stores are, never a stale L1 line.
                total += tl.load(partial_ptr + r[:, None] * N + offs_n[None, :],
                                 mask=(r[:, None] < rows) & n_ok[None, :], other=0.0, cache_modifier=".cg")
            tl.store(db_ptr + offs_n, tl.sum(total, axis=0).to(db_ptr.dtype.element_ty), mask=n_ok)
            tl.atomic_xchg(counts_ptr + pid_n, 0)


@triton.jit
def _row_tile(tile, M, n_ok, BLOCK_M: tl.constexpr):
    """Row tile ``tile``'s row indices (64-bit: they multiply strides) and its mask: rows
    below M, columns where ``n_ok``."""
    rows = (tile * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    return rows, (rows[:, None] < M) & n_ok[None, :]


@triton.jit
def _activation_grad_kernel(
    dy_ptr, z_ptr, dz_ptr, partial_ptr, db_ptr, counts_ptr,
    M, N,
    stride_dym, stride_dyn, stride_zm, stride_zn, stride_dzm, stride_dzn,
    slope,
    GRAD_ACTIVATION: tl.constexpr,
    STORE_DZ: tl.constexpr,
    COLUMN_SUM: tl.constexpr,
    FINISH: tl.constexpr,
    ROW_TILES: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    SUM_ROWS: tl.constexpr,
):
    """dZ = dY * act'(Z) over ROW_TILES x BLOCK_M rows and BLOCK_N columns; with COLUMN_SUM,
    partial[pid_m, n] = sum of those rows of dZ (summed in float32, stored in partial's
    dtype), and with FINISH db[n] = the sum of partial's rows too (``_column_sums_out``)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    if GRAD_ACTIVATION == "none" and not STORE_DZ:
        # db alone: the row tiles unrolled with their sums kept per row, reduced across the
        # warps once at the end, so every load is in flight at once (a reduction per row
        # tile put a barrier between each load and the next: 1.5-1.7x slower at 8 tiles).
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for t in tl.static_range(ROW_TILES):
            rows, mask = _row_tile(pid_m * ROW_TILES + t, M, n_ok, BLOCK_M)
            g = tl.load(dy_ptr + rows[:, None] * stride_dym + offs_n[None, :] * stride_dyn, mask=mask, other=0.0)
            acc += g.to(tl.float32)
    else:
        # With act'(Z) and dZ's store, the same unrolling ran 1.4-2.7x slower: a loop, its
        # sums kept per row and reduced across the warps once at the end.
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for t in range(ROW_TILES):
            rows, mask = _row_tile(pid_m * ROW_TILES + t, M, n_ok, BLOCK_M)
            g = tl.load(dy_ptr + rows[:, None] * stride_dym + offs_n[None, :] * stride_dyn, mask=mask, other=0.0)
            z = tl.load(z_ptr + rows[:, None] * stride_zm + offs_n[None, :] * stride_zn, mask=mask, other=0.0)
            g = g.to(tl.float32) * activation_grad(z.to(tl.float32), slope, GRAD_ACTIVATION)
            if STORE_DZ:
                tl.store(dz_ptr + rows[:, None] * stride_dzm + offs_n[None, :] * stride_dzn,
                         g.to(dz_ptr.dtype.element_ty), mask=mask)
            if COLUMN_SUM:
                acc += g
    if COLUMN_SUM:
        _column_sums_out(tl.sum(acc, axis=0), partial_ptr, db_ptr, counts_ptr, pid_m, pid_n, offs_n, n_ok, N,
                         FINISH, SUM_ROWS, BLOCK_N)


def row_tiles_for(m: int, n: int, sms: int, block_m: int = 32, block_n: int = 128, sum_only: bool = False) -> int:
    """Row tiles per program of the pass on a GPU of ``sms`` SMs. With act'(Z) (a loop): 2,
    within 5 % of the best of 1, 2, 4 and 8 tiles over 18 problems (geomean; 1, 4 and 8 were
    12, 8 and 12 % behind it), where a rule by programs per SM picked worse. For db alone
    (``sum_only``: the tiles unrolled, their loads in flight together): up to 16, a power of
    two, as long as the grid keeps half the SMs busy (docs/backward.md)."""
    if not sum_only:
        return 2 if m > block_m else 1
    tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
    fit = min(16, tiles // max(1, sms // 2))
    return 1 << (fit.bit_length() - 1) if fit > 1 else 1


def plan_activation_grad(dy, z, dz, grad_activation: str, slope: float, column_sum: bool,
                         interpret: bool) -> KernelLaunch:
    """The launch of dZ = dY * act'(Z) for tensors laid out like these, called as
    ``launch(dy, z or dy, dz or dy, partial or dy, db or dy, counts or dy)``.

    dy, z, dz: [M, N] with any strides; M, N > 0; ``z`` is unused for "none" and ``dz``
    may be None (no store). With ``column_sum``, ``partial`` is a [launch.grid[0], N]
    buffer of per-program column sums of dZ (summed in float32, stored in its dtype): where
    the grid has one row of programs, it is db itself. With more, the launch sums them into
    ``db`` [N] (any float dtype) too, counting arrivals in ``counts``: ``column_counts``.
    """
    M, N = dy.shape
    block_m, block_n = (16, 64) if interpret else (32, 128)
    # The interpreter's programs run one after another: there, as many rows per program as
    # the cap allows (fewer partial sums).
    sum_only = grad_activation == "none" and dz is None
    row_tiles = (min(8, triton.cdiv(M, block_m)) if interpret
                 else row_tiles_for(M, N, runtime.sm_count(), block_m, block_n, sum_only))
    z_ = z if grad_activation != "none" else dy
    dz_ = dz if dz is not None else dy
    grid = (triton.cdiv(M, block_m * row_tiles), triton.cdiv(N, block_n))
    return KernelLaunch(
        _activation_grad_kernel,
        grid,
        (M, N, dy.stride(0), dy.stride(1), z_.stride(0), z_.stride(1), dz_.stride(0), dz_.stride(1), float(slope)),
        dict(
            GRAD_ACTIVATION=grad_activation,
            STORE_DZ=dz is not None,
            COLUMN_SUM=column_sum,
            FINISH=column_sum and grid[0] > 1,
            ROW_TILES=row_tiles,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            SUM_ROWS=32,
        ),
        dict(num_warps=4),
        dy.device, interpret,
    )


def column_counts(device, column_blocks: int):
    """The pass's arrival counts, one per column block (``stream_counters``: every launch
    leaves them at 0)."""
    return stream_counters("column_counts", device, column_blocks)


hash_callees_first(globals())  # one cache key per kernel in every process (see there)
