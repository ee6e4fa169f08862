"""Stream-K for tail waves: C = act(A @ B + bias) with no idle SMs in the last wave.

With T output tiles on P SMs, one program per tile runs T // P full waves and a last
wave of R = T % P tiles in which P - R SMs sit idle (2048x2816 in 128x128 tiles: 352
tiles = 2.67 waves on 132 SMs, a third of the last wave idle). The data-parallel +
stream-K hybrid (Osama et al., "Stream-K", PPoPP 2023) keeps the full waves and splits
the R tail tiles along K over all P programs. One persistent kernel, grid P:

1. Stream-K phase. The R tail tiles' K loops, R * k_tiles BLOCK_K steps in all, are cut
   into P contiguous ranges of ``iters_per_program`` steps, one per program. Since
   R < P, a range is at most one tile's loop long: it touches at most two tiles. The
   program that runs a tile's *last* step owns it; the others (lower program ids, which
   ran its first steps) store their fp32 partial tile to their own slot of a workspace
   [P, BLOCK_M, BLOCK_N] and count themselves in the tile's lock. A program first does
   the one segment it does not own (the head of its last tile), then the one it owns:
   an owner's helpers never wait on anyone, so no chain of waits forms.
2. The owner waits until its tile's lock counts every helper, adds their partials to its
   own in program order (fixed: results repeat bit for bit, no float atomics), resets
   the lock to 0 for the next launch and runs the shared epilogue (bias, Z, activation).
3. Data-parallel phase: the remaining T - R tiles, whole waves, tile ``R + pid + i*P``.

An owner waits only on lower program ids, which the GPU schedules first (and with one
program per SM all are resident at once; two per SM, where only one fits, also ran
correctly on the H100). Under Triton's interpreter programs run one after another in id
order, so an owner's helpers have always finished and the waits return at once.
"""

import torch
import triton
import triton.language as tl

from autokernel.kernels.epilogue import store_epilogue
from autokernel.kernels.launch import KernelLaunch, hash_callees_first, persistent_programs, stream_counters
from autokernel.kernels.matmul import grouped_tile, pointer_kernel_args, tile_acc


@triton.jit
def _streamk_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, z_ptr, ws_ptr, locks_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_zm, stride_zn, stride_bias,
    slope, sk_tiles, iters_per_program,
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
    NUM_PROGRAMS: tl.constexpr,
):
    pid = tl.program_id(0)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    # This program's slot of the workspace: the partial tile it does not own.
    slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    ws_tile = ws_ptr + pid * (BLOCK_M * BLOCK_N) + slot

    start = pid * iters_per_program
    end = tl.minimum(start + iters_per_program, sk_tiles * k_tiles)
    if start < end:
        last_tile = (end - 1) // k_tiles
        owned_end = end
        if end % k_tiles != 0:
            # The head of last_tile, owned by a later program: partial to the workspace.
            head = tl.maximum(start, last_tile * k_tiles)
            pid_m, pid_n = grouped_tile(last_tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
            acc, offs_m, offs_n = tile_acc(a_ptr, b_ptr, pid_m, pid_n, head - last_tile * k_tiles, end - head,
                                           M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                           EVEN_K, UPCAST, INDEX_64, A_LEAD, B_LEAD, M_RUN, N_RUN, MASK_M, MASK_N,
                                           BLOCK_M, BLOCK_N, BLOCK_K)
            tl.store(ws_tile, acc)
            tl.debug_barrier()  # every thread's part of the tile is stored before the count
            tl.atomic_add(locks_ptr + last_tile, 1, sem="release")
            owned_end = head
        # The tile (at most one) whose last step lies in [start, owned_end).
        for tile in range(start // k_tiles, owned_end // k_tiles):
            seg = tl.maximum(start, tile * k_tiles)
            pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
            acc, offs_m, offs_n = tile_acc(a_ptr, b_ptr, pid_m, pid_n, seg - tile * k_tiles, (tile + 1) * k_tiles - seg,
                                           M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                           EVEN_K, UPCAST, INDEX_64, A_LEAD, B_LEAD, M_RUN, N_RUN, MASK_M, MASK_N,
                                           BLOCK_M, BLOCK_N, BLOCK_K)
            first_helper = (tile * k_tiles) // iters_per_program
            if first_helper < pid:
                while tl.atomic_add(locks_ptr + tile, 0, sem="acquire") < pid - first_helper:
                    pass
                tl.debug_barrier()
                for helper in range(first_helper, pid):
                    # .cg: read from L2, where the helper's stores are, never a stale L1 line.
                    acc += tl.load(ws_ptr + helper * (BLOCK_M * BLOCK_N) + slot, cache_modifier=".cg")
                tl.atomic_xchg(locks_ptr + tile, 0)  # ready for the next launch
            store_epilogue(acc, offs_m, offs_n, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias,
                           z_ptr, stride_zm, stride_zn, slope, HAS_BIAS, STORE_Z, ACTIVATION, INDEX_64)

    for tile in tl.range(sk_tiles + pid, num_tiles, NUM_PROGRAMS):
        pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc, offs_m, offs_n = tile_acc(a_ptr, b_ptr, pid_m, pid_n, 0, k_tiles, M, N, K,
                                       stride_am, stride_ak, stride_bk, stride_bn,
                                       EVEN_K, UPCAST, INDEX_64, A_LEAD, B_LEAD, M_RUN, N_RUN, MASK_M, MASK_N,
                                       BLOCK_M, BLOCK_N, BLOCK_K)
        store_epilogue(acc, offs_m, offs_n, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, stride_bias,
                       z_ptr, stride_zm, stride_zn, slope, HAS_BIAS, STORE_Z, ACTIVATION, INDEX_64)


def tail_split(m: int, n: int, k: int, block_m: int, block_n: int, block_k: int, programs: int) -> tuple[int, int]:
    """(stream-K tiles, K steps per program): the R = tiles % programs tail tiles whose
    K loops are spread over the programs, and each program's share of their steps;
    (0, 0) when there is no partial wave (or no K loop) to split."""
    k_tiles = triton.cdiv(k, block_k)
    sk_tiles = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n)) % programs if k_tiles else 0
    return sk_tiles, triton.cdiv(sk_tiles * k_tiles, programs)


def tile_locks(device: torch.device, size: int) -> torch.Tensor:
    """Per-tile lock counters (``stream_counters``). Owners reset their locks to 0, so the
    buffer needs no memset per call; a CUDA graph being captured gets locks of its own (a
    replay may run beside eager launches, and mixed counts would release an owner early or
    never)."""
    return stream_counters("locks", device, size)


class StreamKLaunch:
    """The stream-K kernel's launch, called as ``launch(a, b, c, bias or c, z or c)`` like a
    ``KernelLaunch`` of the one-pass kernel; each call allocates its fp32 workspace."""

    __slots__ = ("kernel", "workspace_shape", "sk_tiles")

    def __init__(self, kernel: KernelLaunch, workspace_shape: tuple[int, int, int], sk_tiles: int):
        self.kernel, self.workspace_shape, self.sk_tiles = kernel, workspace_shape, sk_tiles

    def __call__(self, a, b, c, bias, z) -> None:
        ws = torch.empty(self.workspace_shape if self.sk_tiles else (1,), dtype=torch.float32, device=c.device)
        self.kernel(a, b, c, bias, z, ws, tile_locks(c.device, max(self.sk_tiles, 1)))


def plan_matmul_streamk(a, b, c, bias, activation: str, slope: float, config, interpret: bool, z=None,
                        programs: int | None = None, split_tail: bool = True) -> StreamKLaunch:
    """The stream-K launch of C = act(A @ B + bias) for operands laid out like these
    (shapes already checked; M, N > 0; K may be 0: no tile is split then). ``programs``:
    the persistent grid, by default one program per SM (3 under the interpreter, as for
    the TMA kernel); tests set it to place the tail. With ``z``, Z = A @ B + bias too.
    ``split_tail=False`` splits no tile: the same persistent kernel, data-parallel only,
    the baseline that shows what the split itself costs or gains (docs/kernel-notes.md)."""
    M, K = a.shape
    N = b.shape[1]
    programs = programs or persistent_programs(c.device)
    sk_tiles, iters_per_program = tail_split(M, N, K, config.block_m, config.block_n, config.block_k, programs)
    if not split_tail:
        sk_tiles = 0
    scalars, constexprs = pointer_kernel_args(a, b, c, bias, activation, slope, config, interpret, z)
    kernel = KernelLaunch(
        _streamk_kernel,
        (programs,),
        (*scalars, sk_tiles, max(iters_per_program, 1)),
        {**constexprs, "NUM_PROGRAMS": programs},
        dict(num_warps=config.num_warps, num_stages=config.num_stages),
        c.device, interpret,
    )
    return StreamKLaunch(kernel, (programs, config.block_m, config.block_n), sk_tiles)


hash_callees_first(globals())  # one cache key per kernel in every process (see there)
