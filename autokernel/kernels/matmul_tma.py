"""Hopper path: C = act(A @ B + bias) with TMA tensor descriptors and a persistent grid.

One program per SM walks output tiles in grouped order. A, B and C move through tensor
descriptors made on the host and passed as kernel parameters (``TmaLaunch``, which keeps
them by the operands' addresses); made on the device by each program instead, they cost
every launch 2-3 µs of GPU time (docs/kernel-notes.md). The copy engine lands
each tile in shared memory in the layout the tensor cores read, pads the K tail and the edges with zeros on load and clips them on store,
so the kernel needs no masks. A transposed view (nn.Linear's ``weight.t()``) gets a
descriptor over its row-major storage and the tile is transposed for free in ``tl.dot``.

Three KernelConfig options shape the loop and the epilogue (docs/kernel-notes.md has what
each did on the H100): ``warp_specialize`` (Triton's Hopper warp specialization of the
tile loop), ``epilogue_subtile`` (the tile stored in column halves through a half-size
staging buffer) and ``flatten`` (the tile and K loops fused into one pipelined loop).

Descriptors need a 16-byte aligned base, a unit last stride and 16-byte aligned other
strides; ``tma_operands`` returns None when A or B can't have one, and the caller falls back
to the pointer kernel. Where only C can't (N of 50257 halves), C is stored through pointers
(``C_PTR``) where K is long enough (``POINTER_C_MIN_K``).
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from autokernel.kernels.epilogue import apply_activation, store_epilogue
from autokernel.kernels.launch import INTERPRETER_PROGRAMS as _INTERPRETER_PROGRAMS  # noqa: F401 (tests, space)
from autokernel.kernels.launch import (KernelLaunch, hash_callees_first, persistent_programs, stream_buffer,
                                       stream_handle)
from autokernel.kernels.matmul import grouped_tile

TMA_DTYPES = (torch.float16, torch.bfloat16)


@triton.jit
def _store_tile(
    acc, c_desc, bias_ptr, z_ptr, off_m, off_n, M, N, stride_c, stride_zm, stride_zn, stride_bias, slope,
    HAS_BIAS: tl.constexpr, STORE_Z: tl.constexpr, ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, C_PTR: tl.constexpr, SWAP_AB: tl.constexpr,
):
    """The epilogue of one [BLOCK_M, BLOCK_N] float32 piece of C at (off_m, off_n):
    + bias, Z stored when STORE_Z, then act(.) stored through ``c_desc``, or with C_PTR
    (C's rows no multiple of 16 bytes: no descriptor) by masked stores through the pointer
    ``c_desc`` with row stride ``stride_c``. With SWAP_AB the piece is of C^T (M and N are
    C's columns and rows): the bias runs along its rows, Z's strides come swapped, and it
    is stored transposed at (off_n, off_m) of C."""
    offs_n = off_n + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        # Any bias stride (a column of a matrix, a slice); int64: it may be large.
        if SWAP_AB:
            offs_b = off_m + tl.arange(0, BLOCK_M)
            bias = tl.load(bias_ptr + offs_b.to(tl.int64) * stride_bias, mask=offs_b < M, other=0.0).to(tl.float32)
            acc = acc + bias[:, None]
        else:
            bias = tl.load(bias_ptr + offs_n.to(tl.int64) * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
            acc = acc + bias[None, :]
    if STORE_Z:
        # The pre-activation Z for backward, by plain stores: a second TMA store
        # would need a second C-sized tile of shared memory.
        offs_m = off_m + tl.arange(0, BLOCK_M)
        z_ptrs = z_ptr + offs_m[:, None].to(tl.int64) * stride_zm + offs_n[None, :] * stride_zn
        z_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        tl.store(z_ptrs, acc.to(z_ptr.dtype.element_ty), mask=z_mask)
    acc = apply_activation(acc, slope, ACTIVATION)
    if C_PTR:
        offs_cm = off_m + tl.arange(0, BLOCK_M)
        c_ptrs = c_desc + offs_cm[:, None].to(tl.int64) * stride_c + offs_n[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_n[None, :] < N)
        tl.store(c_ptrs, acc.to(c_desc.dtype.element_ty), mask=c_mask)
    elif SWAP_AB:
        c_desc.store([off_n, off_m], tl.trans(acc).to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def _tile_epilogue(
    acc, c_desc, bias_ptr, z_ptr, off_m, off_n, M, N, stride_c, stride_zm, stride_zn, stride_bias, slope,
    HAS_BIAS: tl.constexpr, STORE_Z: tl.constexpr, ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, C_PTR: tl.constexpr,
    SWAP_AB: tl.constexpr,
):
    """The epilogue of one whole tile: in EPILOGUE_SUBTILE column slices (1 or 2)."""
    if EPILOGUE_SUBTILE == 2:
        SUB_N: tl.constexpr = BLOCK_N // 2
        # [BM, BN] -> [BM, 2, BN/2] -> [BM, BN/2, 2]: split gives the left and right halves.
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, SUB_N)), (0, 2, 1))
        left, right = tl.split(halves)
        _store_tile(left, c_desc, bias_ptr, z_ptr, off_m, off_n, M, N, stride_c, stride_zm, stride_zn, stride_bias,
                    slope, HAS_BIAS, STORE_Z, ACTIVATION, BLOCK_M, SUB_N, C_PTR, SWAP_AB)
        _store_tile(right, c_desc, bias_ptr, z_ptr, off_m, off_n + SUB_N, M, N, stride_c, stride_zm, stride_zn,
                    stride_bias, slope, HAS_BIAS, STORE_Z, ACTIVATION, BLOCK_M, SUB_N, C_PTR, SWAP_AB)
    else:
        _store_tile(acc, c_desc, bias_ptr, z_ptr, off_m, off_n, M, N, stride_c, stride_zm, stride_zn, stride_bias,
                    slope, HAS_BIAS, STORE_Z, ACTIVATION, BLOCK_M, BLOCK_N, C_PTR, SWAP_AB)


@triton.jit
def _k_loop(
    a_desc, b_desc, acc, off_m, off_n, k_first, k_last,
    A_TRANS: tl.constexpr, B_TRANS: tl.constexpr, UPCAST: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """acc + the tile at (off_m, off_n) of A @ B, over the BLOCK_K steps k_first..k_last - 1."""
    for ki in range(k_first, k_last):
        off_k = ki * BLOCK_K
        if A_TRANS:
            a = a_desc.load([off_k, off_m]).T
        else:
            a = a_desc.load([off_m, off_k])
        if B_TRANS:
            b = b_desc.load([off_n, off_k]).T
        else:
            b = b_desc.load([off_k, off_n])
        if UPCAST:
            # Triton's interpreter multiplies bf16 as raw integers; fp32 is exact there.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _descriptors(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_a, stride_b, stride_c,
    A_TRANS: tl.constexpr, B_TRANS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SUB_N: tl.constexpr, C_PTR: tl.constexpr,
):
    """The tensor descriptors of A, B and C (with C_PTR, C's pointer as it is). A transposed
    view is described over its row-major storage and read as [K, M]; C's block is the
    store's staging buffer, one column slice of SUB_N."""
    if A_TRANS:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[stride_a, 1], block_shape=[BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_a, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_TRANS:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_b, 1], block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_b, 1], block_shape=[BLOCK_K, BLOCK_N])
    if C_PTR:
        c_desc = c_ptr
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_c, 1], block_shape=[BLOCK_M, SUB_N])
    return a_desc, b_desc, c_desc


@triton.jit
def _tile_origin(pid_m, pid_n, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, A_TRANS: tl.constexpr,
                 B_TRANS: tl.constexpr, C_PTR: tl.constexpr, SWAP_AB: tl.constexpr):
    """Where tile (pid_m, pid_n)'s boxes start: the last row and column of tiles end at M
    and N where the operands are that large, so that no TMA box lies mostly past an
    operand's end (loaded slowly: on the H100 a 128x128 tile with a long K ran 1.38x slower
    at M = 388 than so; docs/kernel-notes.md). Along a described operand's contiguous
    dimension (M for A as a transposed view; N for a row-major B and for C where it has a
    descriptor) the start is rounded up to 8 elements (16 bytes): a box may start there only
    at a 16-byte boundary (one at an odd element, over rows of padded storage, stopped the
    H200 with an illegal instruction). The box then ends at most 7 elements past the
    operand, which the copy engine fills with zeros and clips. With SWAP_AB (M and N are
    C's columns and rows; C always described) C's contiguous dimension is M."""
    ALIGN_M: tl.constexpr = 8 if (A_TRANS or SWAP_AB) else 1
    ALIGN_N: tl.constexpr = 8 if (not B_TRANS or not (C_PTR or SWAP_AB)) else 1
    return (tl.minimum(pid_m * BLOCK_M, tl.maximum((M - BLOCK_M + ALIGN_M - 1) // ALIGN_M * ALIGN_M, 0)),
            tl.minimum(pid_n * BLOCK_N, tl.maximum((N - BLOCK_N + ALIGN_N - 1) // ALIGN_N * ALIGN_N, 0)))


@triton.jit
def _whole_tile(
    tile_id, a_desc, b_desc, c_desc, bias_ptr, z_ptr, M, N, k_tiles, stride_c, stride_zm, stride_zn, stride_bias,
    slope, HAS_BIAS: tl.constexpr, STORE_Z: tl.constexpr, ACTIVATION: tl.constexpr, A_TRANS: tl.constexpr,
    B_TRANS: tl.constexpr, UPCAST: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr, C_PTR: tl.constexpr,
    SWAP_AB: tl.constexpr,
):
    """One output tile with its whole K loop and epilogue: a data-parallel tile of the
    persistent kernels (the plain one, and the stream-K one's whole waves), at
    ``_tile_origin``. The rows and columns a last-row or last-column tile shares with its
    neighbours are computed alike and stored again with the same bits; the neighbours come
    before it in the tile order, so they are whole tiles too (the stream-K tail is the
    order's last tiles)."""
    pid_m, pid_n = grouped_tile(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m, off_n = _tile_origin(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, A_TRANS, B_TRANS, C_PTR, SWAP_AB)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = _k_loop(a_desc, b_desc, acc, off_m, off_n, 0, k_tiles, A_TRANS, B_TRANS, UPCAST, BLOCK_K)
    _tile_epilogue(acc, c_desc, bias_ptr, z_ptr, off_m, off_n, M, N, stride_c, stride_zm, stride_zn, stride_bias,
                   slope, HAS_BIAS, STORE_Z, ACTIVATION, BLOCK_M, BLOCK_N, EPILOGUE_SUBTILE, C_PTR, SWAP_AB)


@triton.jit
def _matmul_tma_kernel(
    a_desc, b_desc, c_desc, bias_ptr, z_ptr,
    M, N, K,
    stride_a, stride_b, stride_c, stride_zm, stride_zn, stride_bias,
    slope,
    HAS_BIAS: tl.constexpr,
    STORE_Z: tl.constexpr,
    ACTIVATION: tl.constexpr,
    A_TRANS: tl.constexpr,
    B_TRANS: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr,
    FLATTEN: tl.constexpr,
    DEVICE_DESCRIPTORS: tl.constexpr,
    C_PTR: tl.constexpr,
    SWAP_AB: tl.constexpr,
):
    if DEVICE_DESCRIPTORS:  # given the operands' pointers: each program describes them itself
        a_desc, b_desc, c_desc = _descriptors(a_desc, b_desc, c_desc, M, N, K, stride_a, stride_b, stride_c, A_TRANS,
                                              B_TRANS, BLOCK_M, BLOCK_N, BLOCK_K, BLOCK_N // EPILOGUE_SUBTILE, C_PTR)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    # WARP_SPECIALIZE: a producer warpgroup issues the TMA loads, two consumer warpgroups
    # share the tile's MMAs and epilogue (Triton 3.6 does this at num_warps=4 only, and
    # fails to compile it with the subtiled epilogue). FLATTEN: the tile and K loops are
    # fused into one pipelined loop (not with WARP_SPECIALIZE on Hopper). The interpreter
    # ignores both.
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN,
                            warp_specialize=WARP_SPECIALIZE):
        _whole_tile(tile_id, a_desc, b_desc, c_desc, bias_ptr, z_ptr, M, N, k_tiles, stride_c, stride_zm, stride_zn,
                    stride_bias, slope, HAS_BIAS, STORE_Z, ACTIVATION, A_TRANS, B_TRANS, UPCAST, BLOCK_M, BLOCK_N,
                    BLOCK_K, GROUP_M, EPILOGUE_SUBTILE, C_PTR, SWAP_AB)


SK_SPLIT = 8
"""The most chunks a stream-K tail tile's K loop is cut into: the fix-up then sums at most
SK_SPLIT partials per tile (one tail tile spread over every SM left the fix-up's one
program summing 66 of them; H100)."""
MIN_CHUNK_STEPS = 8
"""The fewest BLOCK_K steps in a chunk: shorter ones are mostly the pipeline's fill (a tail
of 28-step tiles cut in 8 ran slower than no split; docs/kernel-notes.md)."""


def sk_programs(tiles: int, programs: int, k_tiles: int) -> int:
    """The programs that share the stream-K tail of ``tiles`` output tiles of ``k_tiles``
    BLOCK_K steps on a grid of ``programs``: the tail's tiles (tiles % programs) times the
    chunks each is cut into, at most SK_SPLIT, at least MIN_CHUNK_STEPS steps each, and no
    more programs than the grid has; 0 when there is no tail. One chunk per tile (the
    result equals the tail) splits nothing."""
    tail = tiles % programs
    if not tail:
        return 0
    return tail * max(1, min(SK_SPLIT, programs // tail, k_tiles // MIN_CHUNK_STEPS))


HEAD_AND_TAILS_MAX_ROUNDS = 4
"""The most tails one program runs where a tail's tiles are cut in heads and a tail
(``sk_heads``): r rounds of tails make a program's share r / (1 + r * heads) of a tile."""
HEADS_MAX = 2
"""The most heads a tail tile is cut in (``sk_heads``): with more, equal chunks leave few
SMs idle."""


def head_rounds(tail: int, programs: int, heads: int) -> tuple[int, int]:
    """Where each of ``tail`` tiles is cut in ``heads`` heads and a tail on a grid of
    ``programs``: (helpers, rounds), the programs that run the tails (one head per program
    goes to the others) and the most tails one of them runs."""
    helpers = programs - heads * tail
    return helpers, -(-tail // helpers) if helpers > 0 else 0


def sk_heads(tiles: int, programs: int, k_tiles: int) -> tuple[int, int]:
    """Where equal chunks would leave SMs idle through the stream-K tail (a tail of more
    tiles than half the programs: one chunk each; more than a third: two), (heads per tail
    tile, K steps of a head); (0, 0) where the tail is not cut so. Each tail tile is cut at
    the same steps in q = programs // tail heads and a tail: one program per head, the other
    programs r = cdiv(tail, programs - q * tail) tails each, the heads r / (1 + r q) of the
    tile's steps (rounded up) so that a program's tails take no longer than a head. At most
    HEADS_MAX heads and HEAD_AND_TAILS_MAX_ROUNDS rounds; the tails MIN_CHUNK_STEPS steps or
    more, and the heads shorter than equal chunks by as much."""
    tail = tiles % programs
    if not tail or programs // tail > HEADS_MAX:
        return 0, 0
    heads = programs // tail
    helpers, rounds = head_rounds(tail, programs, heads)
    if not helpers or rounds > HEAD_AND_TAILS_MAX_ROUNDS:
        return 0, 0
    head = -(-k_tiles * rounds // (1 + rounds * heads))  # rounded up: a program's tails take no longer
    if min(k_tiles - heads * head, k_tiles // heads - head) < MIN_CHUNK_STEPS:
        return 0, 0
    return heads, head


def tail_cut(tiles: int, programs: int, k_tiles: int) -> tuple[int, int]:
    """How the stream-K tail of ``tiles`` output tiles of ``k_tiles`` steps is cut on a grid
    of ``programs``: (partials, head steps). In heads and a tail per tile where equal chunks
    would leave SMs idle (``sk_heads``: q heads and a tail, (q + 1) * tail partials); else in
    equal chunks (``sk_programs``: a partial per chunk, head steps 0). Partials equal to the
    tail's tiles (0 where there is no tail): nothing is cut, the plain kernel runs."""
    heads, head = sk_heads(tiles, programs, k_tiles)
    if head:
        return (heads + 1) * (tiles % programs), head
    return sk_programs(tiles, programs, k_tiles), 0


def describe_tail(tiles: int, programs: int, k_tiles: int) -> str:
    """In words, what the TMA kernel with a stream-K tail runs for ``tiles`` output tiles of
    ``k_tiles`` K steps on ``programs`` SMs (``tail_cut``)."""
    full, tail = divmod(tiles, programs)
    waves = f"{full} whole wave{'s' if full != 1 else ''}, then " if full else ""
    partials, head = tail_cut(tiles, programs, k_tiles)
    if partials == tail:
        return f"{tiles} tiles, {full} whole waves: no tail to cut, the plain kernel runs" if not tail else (
            f"{waves}{tail} tiles of {k_tiles} K steps, not worth cutting: the plain kernel runs")
    if head:
        heads = partials // tail - 1
        helpers, rounds = head_rounds(tail, programs, heads)
        return (f"{waves}{tail} tiles of {k_tiles} K steps, each cut in {heads} head{'s' if heads > 1 else ''} of "
                f"{head} and a tail of {k_tiles - heads * head}, {helpers} programs running up to {rounds} tails; "
                f"{partials} partials summed by the fix-up")
    chunks = partials // tail
    return (f"{waves}{tail} tiles of {k_tiles} K steps, each cut in {chunks} equal chunks; {partials} partials "
            "summed by the fix-up")


@triton.jit
def _matmul_tma_streamk_kernel(
    a_desc, b_desc, c_desc, bias_ptr, z_ptr, ws_ptr,
    M, N, K,
    stride_c, stride_zm, stride_zn, stride_bias,
    slope, dp_tiles, sk_progs, head_steps,
    HAS_BIAS: tl.constexpr,
    STORE_Z: tl.constexpr,
    ACTIVATION: tl.constexpr,
    A_TRANS: tl.constexpr,
    B_TRANS: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr,
    FLATTEN: tl.constexpr,
    HEAD_AND_TAILS: tl.constexpr,
    C_PTR: tl.constexpr,
    SWAP_AB: tl.constexpr,
):
    """The persistent TMA kernel with a stream-K tail: the first ``dp_tiles`` tiles (whole
    waves) as ``_matmul_tma_kernel`` runs them, then the other tiles (the tail, fewer than
    NUM_PROGRAMS) each cut along K into chunks = sk_progs / tail equal ranges, one per
    program among the first ``sk_progs``: program p runs chunk p // tail of tail tile
    p % tail, so the programs of one chunk read the same K range at once (the tiles that
    share a row or column of the output share those reads in L2), and stores its float32
    partial in slot p of ``ws_ptr`` for ``_streamk_fixup_kernel`` to sum.

    HEAD_AND_TAILS (``sk_heads``: equal chunks would leave SMs idle): each tail tile cut at
    the same steps in q = sk_progs / tail - 1 heads of ``head_steps`` and a tail: program
    p < q * tail runs head p // tail of tile p % tail (slot p); the other programs run the
    tails (slot q * tail + t), tile p - q * tail + j * (NUM_PROGRAMS - q * tail) in round j,
    the tails being shorter by as much as a program runs more of them. Every head of one
    index reads the same K range at once, and so does every tail."""
    pid = tl.program_id(0)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(pid, dp_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        _whole_tile(tile_id, a_desc, b_desc, c_desc, bias_ptr, z_ptr, M, N, k_tiles, stride_c, stride_zm, stride_zn,
                    stride_bias, slope, HAS_BIAS, STORE_Z, ACTIVATION, A_TRANS, B_TRANS, UPCAST, BLOCK_M, BLOCK_N,
                    BLOCK_K, GROUP_M, EPILOGUE_SUBTILE, C_PTR, SWAP_AB)
    sk_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) - dp_tiles
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    if HEAD_AND_TAILS:
        head_slots = sk_progs - sk_tiles  # q heads per tile, one slot each
        helpers = NUM_PROGRAMS - head_slots
        head = pid < head_slots
        tails_first = head_slots // sk_tiles * head_steps
        for j in range(tl.cdiv(sk_tiles, helpers)):
            t = tl.where(head, pid % sk_tiles, pid - head_slots + j * helpers)
            k_first = tl.where(head, pid // sk_tiles * head_steps, tails_first)
            # a head runs in round 0 only; a tail's round past the last tile is empty
            k_last = tl.where(head, tl.where(j == 0, k_first + head_steps, k_first),
                              tl.where(t < sk_tiles, k_tiles, k_first))
            t = tl.minimum(t, sk_tiles - 1)
            pid_m, pid_n = grouped_tile(dp_tiles + t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
            off_m, off_n = _tile_origin(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, A_TRANS, B_TRANS, C_PTR, SWAP_AB)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            acc = _k_loop(a_desc, b_desc, acc, off_m, off_n, k_first, k_last, A_TRANS, B_TRANS, UPCAST, BLOCK_K)
            slot = tl.where(head, pid, head_slots + t).to(tl.int64) * (BLOCK_M * BLOCK_N)
            # The mask as a tile compare: a mask from scalars alone is refused by Triton 3.9's interpreter.
            first = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32) + k_first
            tl.store(ws_ptr + slot + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc, mask=first < k_last)
    else:
        # Each tail tile cut into chunks = sk_progs / sk_tiles equal K ranges, one per
        # program: the programs of one chunk read the same K range at once.
        chunks = sk_progs // sk_tiles
        t = pid % sk_tiles
        chunk = tl.minimum(pid // sk_tiles, chunks)  # programs from sk_progs on: an empty range
        k_first = (chunk * k_tiles) // chunks
        k_last = tl.where(pid < sk_progs, tl.maximum(((chunk + 1) * k_tiles) // chunks, k_first), k_first)
        pid_m, pid_n = grouped_tile(dp_tiles + t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m, off_n = _tile_origin(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, A_TRANS, B_TRANS, C_PTR, SWAP_AB)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc = _k_loop(a_desc, b_desc, acc, off_m, off_n, k_first, k_last, A_TRANS, B_TRANS, UPCAST, BLOCK_K)
        if pid < sk_progs:
            slot = pid.to(tl.int64) * (BLOCK_M * BLOCK_N)
            tl.store(ws_ptr + slot + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc)


@triton.jit
def _streamk_fixup_kernel(
    ws_ptr, c_ptr, bias_ptr, z_ptr,
    M, N,
    stride_cm, stride_cn, stride_zm, stride_zn, stride_bias,
    slope, dp_tiles, sk_progs,
    HAS_BIAS: tl.constexpr,
    STORE_Z: tl.constexpr,
    ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    GROUP_M: tl.constexpr,
    FIX_M: tl.constexpr,
    FIX_N: tl.constexpr,
    A_TRANS: tl.constexpr,
    B_TRANS: tl.constexpr,
    C_PTR: tl.constexpr,
    SWAP_AB: tl.constexpr,
):
    """One program per FIX_M x FIX_N piece of a tail tile of ``_matmul_tma_streamk_kernel``:
    the piece of its chunks' partials summed in chunk order (the same sum every launch),
    then the epilogue. Pieces, not whole tiles: with few tail tiles (a skinny problem cut
    along K), one program per tile would read every chunk's partial through one SM. With
    SWAP_AB the tiles are of C^T: C's strides come swapped and the bias runs along rows."""
    pid = tl.program_id(0)
    pieces_n: tl.constexpr = BLOCK_N // FIX_N
    pieces: tl.constexpr = (BLOCK_M // FIX_M) * pieces_n
    t = pid // pieces
    piece = pid % pieces
    offs_m = (piece // pieces_n) * FIX_M + tl.arange(0, FIX_M)
    offs_n = (piece % pieces_n) * FIX_N + tl.arange(0, FIX_N)
    sk_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N) - dp_tiles
    # the chunks of tile t: slots t, t + sk_tiles, ...
    acc = tl.zeros((FIX_M, FIX_N), dtype=tl.float32)
    for chunk in range(sk_progs // sk_tiles):
        slot = (chunk * sk_tiles + t).to(tl.int64) * (BLOCK_M * BLOCK_N)
        acc += tl.load(ws_ptr + slot + offs_m[:, None] * BLOCK_N + offs_n[None, :])
    pid_m, pid_n = grouped_tile(dp_tiles + t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # The partials are of the tile at _tile_origin: the rows and columns it shares with
    # the tile before it are that tile's to store (masked out here).
    off_m, off_n = _tile_origin(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N, A_TRANS, B_TRANS, C_PTR, SWAP_AB)
    store_epilogue(acc, off_m + offs_m, off_n + offs_n, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias,
                   z_ptr, stride_zm, stride_zn, slope, HAS_BIAS, STORE_Z, ACTIVATION, True,
                   pid_m * BLOCK_M, pid_n * BLOCK_N, True, SWAP_AB)


FIXUP_PIECE = (32, 64)
"""Rows and columns of a fix-up program's piece of a tail tile (``_streamk_fixup_kernel``)."""


def _aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % 16 == 0


def _row_major_view(t: torch.Tensor):
    """(tensor, transposed) such that tensor has a unit last stride and 16-byte aligned
    row stride — t itself, or t.t() when t is a transposed view; None if neither."""
    elem = t.element_size()
    for view, trans in ((t, False), (t.t(), True)):
        if view.stride(1) == 1 and (view.stride(0) * elem) % 16 == 0 and view.stride(0) >= view.shape[1]:
            return view, trans
    return None


POINTER_C_MIN_K = 2048
POINTER_C_K_PER_ROW = 4
"""Where C can have no descriptor, the TMA kernel takes the problem only with a K of at
least POINTER_C_MIN_K, or of POINTER_C_K_PER_ROW times M (few rows: C's bytes small beside
B's): its pointer stores of C's unaligned rows cost every tile a fixed time that a long
K loop hides. On an H200 (fp16/bf16, N off alignment, nt) the TMA kernel ran 1.059x the
pointer kernels' picks there (0.93-1.41x), and 0.773x (0.55-0.91x) at K of 768-1920 with
M > K / 4 (docs/kernel-notes.md, "Where C's rows take no descriptor")."""


def tma_operands(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    """((a_view, a_trans), (b_view, b_trans), c_described) when A and B can have descriptors
    and C has unit column stride; None otherwise. ``c_described``: whether C can have one
    too (16-byte aligned base and rows); where it cannot (N of 50257 halves: GPT-2's
    vocabulary) the kernel stores C through pointers, where K is long enough
    (POINTER_C_MIN_K)."""
    if a.dtype not in TMA_DTYPES or not (_aligned(a) and _aligned(b)) or c.stride(1) != 1:
        return None
    a_op, b_op = _row_major_view(a), _row_major_view(b)
    if a_op is None or b_op is None:
        return None
    described = _aligned(c) and (c.stride(0) * c.element_size()) % 16 == 0
    m, k = a.shape
    if not described and k < min(POINTER_C_MIN_K, POINTER_C_K_PER_ROW * m):
        return None
    return a_op, b_op, described


class _Base:
    """What a host tensor descriptor reads of its base tensor on the GPU: the address and
    the dtype. A cached descriptor holds this, not the tensor, so that no cache keeps a
    caller's activations alive."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype: torch.dtype):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self.ptr


_DESCRIPTORS_KEPT = 16
"""Descriptor triples a TmaLaunch keeps, by operand addresses: a training step's GEMMs
reuse the caching allocator's blocks, so a few cover the calls of one layout."""

_OPERAND_DESCRIPTORS_KEPT = 128
"""Descriptors a TmaLaunch keeps per operand, by its address, under the triples: a model's
layers of one shape share a launch, each with its own weight (32-80 layers), and outputs
and activations cycle through the caching allocator's blocks, so that triples seen before
are many more than ``_DESCRIPTORS_KEPT`` while each operand's addresses are few. A triple
not kept is then put together from its operands' descriptors and filled tensor maps."""


class TmaLaunch:
    """The TMA kernel's launch, called as ``launch(a, b, c, bias or c, z or c)`` like a
    ``KernelLaunch`` of the pointer kernel: it makes A's, B's and C's tensor descriptors on
    the host (``TensorDescriptor``; the shapes, strides and blocks fixed by the layout) and
    keeps them by the operands' addresses, with the tensor maps Triton fills from them once
    the launch replays directly (``KernelLaunch.expand_descriptor``): the last few triples
    of operands, and under them each operand's descriptors. A call with operands seen before
    costs a dict lookup, where filling the three maps costs some 3 µs of host time and
    making the descriptors more. Descriptors made on the device cost every launch some
    2-3 µs of GPU time at the start of each program (docs/kernel-notes.md)."""

    __slots__ = ("kernel", "specs", "kept", "by_operand", "interpret", "swap")

    def __init__(self, kernel: KernelLaunch, specs: tuple, interpret: bool, swap: bool = False):
        self.kernel, self.specs, self.interpret = kernel, specs, interpret
        self.swap = swap  # the kernel computes C^T = B^T A^T: B is described first
        # by operand addresses: [descriptors, their expansion for the C launcher or None]
        self.kept: dict[tuple[int, int, int], list] = {}
        # per operand, by its address: [descriptor, its expansion or None]
        self.by_operand: tuple[dict[int, list], ...] = tuple({} for _ in specs)

    def _entry(self, a, b, c) -> list:
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr())
        found = self.kept.get(key)
        if found is None:
            if len(self.kept) >= _DESCRIPTORS_KEPT:
                self.kept.clear()
            found = self.kept[key] = self._put_together(key, (a, b, c))
        return found

    def _put_together(self, key: tuple, tensors: tuple) -> list:
        """A triple's [descriptors, expansion or None] from each described operand's
        [descriptor, expansion or None], kept per operand (made where missing)."""
        kernel = self.kernel
        descriptors, expanded = [], []
        for index, (ptr, t, spec, kept) in enumerate(zip(key, tensors, self.specs, self.by_operand)):
            part = kept.get(ptr)
            if part is None:
                if len(kept) >= _OPERAND_DESCRIPTORS_KEPT:
                    kept.clear()
                part = kept[ptr] = [TensorDescriptor(_Base(ptr, t.dtype), *spec), None]
            if part[1] is None and kernel.expand is not None:  # set at the launch's first replay
                part[1] = kernel.expand_descriptor(index, part[0])
            descriptors.append(part[0])
            expanded.extend(part[1] or ())
        return [tuple(descriptors), tuple(expanded) if kernel.expand is not None else None]

    def descriptors(self, a, b, c) -> tuple:
        """A's, B's and C's descriptors for these operands (tensors of the launch's layout);
        C itself where the launch stores it through pointers (two specs). With ``swap``,
        B's comes first, then A's."""
        if self.swap:
            a, b = b, a
        if self.interpret:  # the interpreter reads the base tensor itself
            made = tuple(TensorDescriptor(t, *spec) for t, spec in zip((a, b, c), self.specs))
        else:
            made = self._entry(a, b, c)[0]
        return made if len(self.specs) == 3 else (*made, c)

    def __call__(self, a, b, c, *tensors) -> None:
        """Launch on these operands; ``tensors``: the kernel's pointer parameters after the
        descriptors (bias or c, z or c; and the stream-K workspace)."""
        kernel = self.kernel
        if self.interpret:
            kernel(*self.descriptors(a, b, c), *tensors)
            return
        if self.swap:
            a, b = b, a
        entry = self._entry(a, b, c)
        if len(self.specs) < 3:  # C stored through pointers: its pointer follows the descriptors
            tensors = (c, *tensors)
        if kernel.expand is not None:  # set once, at the launch's first replay
            if entry[1] is None:  # kept before the launch's first replay
                entry[:] = self._put_together((a.data_ptr(), b.data_ptr(), c.data_ptr()), (a, b, c))
            if kernel.call_expanded(entry[1], *tensors):
                return
        kernel(*entry[0], *tensors)


class TmaStreamKLaunch(TmaLaunch):
    """The TMA kernel with a stream-K tail, then the fix-up of the tail's split tiles,
    called as ``launch(a, b, c, bias or c, z or c)``. The float32 partials go to a
    ``stream_buffer`` of the current stream: launches on one stream run in order, so the
    next launch's partials overwrite them only after this launch's fix-up has read them."""

    __slots__ = ("fixup", "ws_numel")

    def __init__(self, kernel: KernelLaunch, specs: tuple, interpret: bool, fixup: KernelLaunch, ws_numel: int,
                 swap: bool = False):
        super().__init__(kernel, specs, interpret, swap)
        self.fixup, self.ws_numel = fixup, ws_numel

    def __call__(self, a, b, c, bias, z) -> None:
        ws = stream_buffer("tma_streamk", self.ws_numel, c.device, stream_handle(c.device), torch.float32)
        super().__call__(a, b, c, bias, z, ws)
        self.fixup(ws, c, bias, z)


def plan_matmul_tma(a, b, c, bias, activation: str, slope: float, config, operands, interpret: bool,
                    z=None, programs: int | None = None) -> TmaLaunch:
    """The persistent TMA kernel's launch for operands laid out like these, called as
    ``launch(a, b, c, bias or c, z or c)``; ``operands`` from tma_operands(a, b, c). With
    ``z`` (like ``c``), the pre-activation A @ B + bias is stored there too. ``programs``:
    the persistent grid, by default one program per SM. A transposed view is described over
    its row-major storage and read as [K, M] (or [N, K]); C's block is the store's staging
    buffer, one column slice of the epilogue. With ``warp_specialize`` the programs make the
    descriptors themselves (a plain ``KernelLaunch`` of the pointers): Triton 3.6 splits a
    warp-specialized tile's loads between its consumer warpgroups, which a descriptor made
    on the host for the whole tile's block does not allow.

    With ``swap_ab`` the kernel computes C^T = B^T A^T (``_swapped``): B's storage is its
    first operand, A's its second, its tiles are of C^T and it stores them transposed; where
    C has no descriptor the config runs unswapped."""
    if config.swap_ab and not operands[2]:
        config = config.model_copy(update={"swap_ab": False})
    programs = programs or persistent_programs(c.device)
    if config.stream_k:
        return _plan_streamk(a, b, c, bias, activation, slope, config, operands, interpret, z, programs)
    M, N, K, (a_view, a_trans), (b_view, b_trans), c_described, z_strides = _swapped(a, b, c, z, config, operands)
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    kernel = KernelLaunch(
        _matmul_tma_kernel,
        (min(programs, triton.cdiv(M, bm) * triton.cdiv(N, bn)),),
        (M, N, K, a_view.stride(0), b_view.stride(0), c.stride(0), *z_strides,
         bias.stride(0) if bias is not None else 0, float(slope)),
        dict(
            HAS_BIAS=bias is not None,
            STORE_Z=z is not None,
            ACTIVATION=activation,
            A_TRANS=a_trans,
            B_TRANS=b_trans,
            UPCAST=interpret and a.dtype == torch.bfloat16,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=config.group_m,
            NUM_PROGRAMS=programs,
            WARP_SPECIALIZE=config.warp_specialize,
            EPILOGUE_SUBTILE=config.epilogue_subtile,
            FLATTEN=config.flatten,
            DEVICE_DESCRIPTORS=config.warp_specialize,
            C_PTR=not c_described,
            SWAP_AB=config.swap_ab,
        ),
        dict(num_warps=config.num_warps, num_stages=config.num_stages),
        c.device, interpret,
    )
    if config.warp_specialize:
        return kernel
    return TmaLaunch(kernel, _specs(a_view, a_trans, b_view, b_trans, c, config, c_described), interpret,
                     config.swap_ab)


def _swapped(a, b, c, z, config, operands) -> tuple:
    """The problem as the TMA kernel sees it: (M, N, K, first operand's (view, trans),
    second's, C described, Z's (row, column) strides). With ``swap_ab``, C^T = B^T A^T: the
    first operand is B's storage (B^T: a transposed view where B is row-major), the second
    A's (A^T), M and N trade places and so do Z's strides."""
    (a_view, a_trans), (b_view, b_trans), c_described = operands
    (M, K), N = a.shape, b.shape[1]
    zz = z if z is not None else c
    if config.swap_ab:
        return N, M, K, (b_view, not b_trans), (a_view, not a_trans), c_described, (zz.stride(1), zz.stride(0))
    return M, N, K, (a_view, a_trans), (b_view, b_trans), c_described, (zz.stride(0), zz.stride(1))


def _specs(a_view, a_trans, b_view, b_trans, c, config, c_described: bool) -> tuple:
    """(shape, strides, block) of the kernel's first, second and C's descriptors (``_swapped``'s
    operands); the first two alone where C is stored through pointers (not ``c_described``).
    With ``swap_ab`` C's block is the transposed tile's: [block_n / subtile, block_m]."""
    bm, bn, bk = config.block_m, config.block_n, config.block_k
    specs = (
        (list(a_view.shape), [a_view.stride(0), 1], [bk, bm] if a_trans else [bm, bk]),
        (list(b_view.shape), [b_view.stride(0), 1], [bn, bk] if b_trans else [bk, bn]),
    )
    if not c_described:
        return specs
    block = [bn // config.epilogue_subtile, bm] if config.swap_ab else [bm, bn // config.epilogue_subtile]
    return (*specs, (list(c.shape), [c.stride(0), 1], block))


def _plan_streamk(a, b, c, bias, activation: str, slope: float, config, operands, interpret: bool, z,
                  programs: int) -> TmaLaunch:
    """``plan_matmul_tma`` for a config with ``stream_k``: whole waves data-parallel, the
    tail's tiles cut along K (``_matmul_tma_streamk_kernel``: ``tail_cut`` says how), then
    the fix-up; where the tiles fill whole waves, or the tail is not worth cutting, the
    plain kernel runs."""
    M, N, K, (a_view, a_trans), (b_view, b_trans), c_described, z_strides = _swapped(a, b, c, z, config, operands)
    bm, bn = config.block_m, config.block_n
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    sk_progs, head = tail_cut(tiles, programs, triton.cdiv(K, config.block_k))
    if sk_progs == tiles % programs:  # no tail, or tail tiles not worth cutting: the plain kernel
        return plan_matmul_tma(a, b, c, bias, activation, slope, config.model_copy(update={"stream_k": False}),
                               operands, interpret, z, programs)
    dp_tiles = tiles - tiles % programs
    common = dict(HAS_BIAS=bias is not None, STORE_Z=z is not None, ACTIVATION=activation, SWAP_AB=config.swap_ab)
    bias_stride = bias.stride(0) if bias is not None else 0
    kernel = KernelLaunch(
        _matmul_tma_streamk_kernel,
        (programs,),
        (M, N, K, c.stride(0), *z_strides, bias_stride, float(slope), dp_tiles, sk_progs, head),
        dict(**common, A_TRANS=a_trans, B_TRANS=b_trans, UPCAST=interpret and a.dtype == torch.bfloat16,
             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=config.block_k, GROUP_M=config.group_m, NUM_PROGRAMS=programs,
             EPILOGUE_SUBTILE=config.epilogue_subtile, FLATTEN=config.flatten, HEAD_AND_TAILS=bool(head),
             C_PTR=not c_described),
        dict(num_warps=config.num_warps, num_stages=config.num_stages),
        c.device, interpret,
    )
    fix_m, fix_n = min(FIXUP_PIECE[0], bm), min(FIXUP_PIECE[1], bn)
    fixup = KernelLaunch(
        _streamk_fixup_kernel,
        ((tiles - dp_tiles) * (bm // fix_m) * (bn // fix_n),),
        (M, N, *((1, c.stride(0)) if config.swap_ab else (c.stride(0), 1)), *z_strides, bias_stride, float(slope),
         dp_tiles, sk_progs),
        dict(**common, BLOCK_M=bm, BLOCK_N=bn, GROUP_M=config.group_m, FIX_M=fix_m, FIX_N=fix_n, A_TRANS=a_trans,
             B_TRANS=b_trans, C_PTR=not c_described),
        dict(num_warps=4, num_stages=1),
        c.device, interpret,
    )
    return TmaStreamKLaunch(kernel, _specs(a_view, a_trans, b_view, b_trans, c, config, c_described), interpret,
                            fixup, sk_progs * bm * bn, config.swap_ab)


hash_callees_first(globals())  # one cache key per kernel in every process (see there)
