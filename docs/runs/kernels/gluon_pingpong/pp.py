"""A persistent GEMM for sm_90 in Gluon with ping-pong consumers: one producer warp streams A and B
tiles through TMA into a ring of S stages; two consumer warpgroups take alternate output tiles,
and an mbarrier hands the MMA turn from one to the other once its last wgmma of a tile is
issued, so that one consumer's epilogue (convert, shared memory, TMA store) runs during the
other's main loop. B is W [N, K] (nn.Linear's layout, "nt"); no bias or activation. A probe:
docs/kernel-notes.md, "Ping-pong consumers in Gluon"."""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.core import _aggregate as aggregate
from triton.experimental.gluon.language.nvidia.hopper import (
    tma, mbarrier, fence_async_shared, warpgroup_mma, warpgroup_mma_wait)


@gluon.constexpr_function
def acc_layout(BM, BN, num_warps):
    wpc = [4, 1]
    while wpc[0] * wpc[1] != num_warps:
        if BM > 16 * wpc[0]:
            wpc[0] *= 2
        else:
            wpc[1] *= 2
    m_reps = triton.cdiv(BM, 16)
    n_reps = triton.cdiv(num_warps, m_reps)
    max_n = max(BN // n_reps, 8)
    n = 256
    while n > max_n or BN % n != 0:
        n -= 8
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=wpc, instr_shape=[16, n, 16])


@aggregate
class PP:
    a_desc: tma.tensor_descriptor
    b_desc: tma.tensor_descriptor
    c_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b_bufs: gl.shared_memory_descriptor
    c_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor
    empty: gl.shared_memory_descriptor
    order: gl.shared_memory_descriptor
    GROUP_M: gl.constexpr
    B_KMAJOR: gl.constexpr

    @gluon.constexpr_function
    def __init__(self, a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, GROUP_M, B_KMAJOR):
        self.a_desc = a_desc
        self.b_desc = b_desc
        self.c_desc = c_desc
        self.a_bufs = a_bufs
        self.b_bufs = b_bufs
        self.c_bufs = c_bufs
        self.ready = ready
        self.empty = empty
        self.order = order
        self.GROUP_M = gl.constexpr(GROUP_M)
        self.B_KMAJOR = gl.constexpr(B_KMAJOR)


@gluon.jit
def _coords(tile_id, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % size_m), (tile_id % in_group) // size_m


@gluon.jit
def _producer(p, CID: gl.constexpr):
    BM: gl.constexpr = p.c_desc.block_type.shape[0]
    BN: gl.constexpr = p.c_desc.block_type.shape[1]
    BK: gl.constexpr = p.a_desc.block_type.shape[1]
    S: gl.constexpr = p.a_bufs.shape[0]
    M = p.c_desc.shape[0]
    N = p.c_desc.shape[1]
    K = p.a_desc.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    total = num_pid_m * num_pid_n
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    ksteps = gl.cdiv(K, BK)
    nbytes: gl.constexpr = p.a_desc.block_type.nbytes + p.b_desc.block_type.nbytes
    counter = 0
    for tile_id in range(pid, total, nprog):
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, p.GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        for kk in range(ksteps):
            s = counter % S
            ph = (counter // S) & 1
            mbarrier.wait(p.empty.index(s), ph ^ 1)
            bar = p.ready.index(s)
            mbarrier.expect(bar, nbytes)
            tma.async_copy_global_to_shared(p.a_desc, [off_m, kk * BK], bar, p.a_bufs.index(s))
            if p.B_KMAJOR:
                tma.async_copy_global_to_shared(p.b_desc, [off_n, kk * BK], bar, p.b_bufs.index(s))
            else:
                tma.async_copy_global_to_shared(p.b_desc, [kk * BK, off_n], bar, p.b_bufs.index(s))
            counter += 1


@gluon.jit
def _consumer(p, CID: gl.constexpr):
    BM: gl.constexpr = p.c_desc.block_type.shape[0]
    BN: gl.constexpr = p.c_desc.block_type.shape[1]
    BK: gl.constexpr = p.a_desc.block_type.shape[1]
    S: gl.constexpr = p.a_bufs.shape[0]
    dtype: gl.constexpr = p.c_desc.dtype
    M = p.c_desc.shape[0]
    N = p.c_desc.shape[1]
    K = p.a_desc.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    total = num_pid_m * num_pid_n
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    ksteps = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(total - pid, nprog)
    layout: gl.constexpr = acc_layout(BM, BN, 4)
    c_smem = p.c_bufs.index(CID)
    t = 0
    for j in range(CID, my_tiles, 2):
        tile_id = pid + j * nprog
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, p.GROUP_M)
        # Take the turn: the other consumer has issued its tile's last MMA.
        mbarrier.wait(p.order.index(CID), (t & 1) ^ (1 - CID))
        counter = j * ksteps
        acc = gl.zeros([BM, BN], gl.float32, layout)
        for kk in range(ksteps):
            s = counter % S
            mbarrier.wait(p.ready.index(s), (counter // S) & 1)
            if p.B_KMAJOR:
                acc = warpgroup_mma(p.a_bufs.index(s), p.b_bufs.index(s).permute((1, 0)), acc, is_async=True)
            else:
                acc = warpgroup_mma(p.a_bufs.index(s), p.b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, (acc,))
            mbarrier.arrive(p.empty.index((counter + S - 1) % S), count=1, pred=kk > 0)
            counter += 1
        mbarrier.arrive(p.order.index(1 - CID), count=1)
        acc = warpgroup_mma_wait(0, (acc,))
        mbarrier.arrive(p.empty.index((counter + S - 1) % S), count=1)
        tma.store_wait(0)
        c_smem.store(acc.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(p.c_desc, [pid_m * BM, pid_n * BN], c_smem)
        t += 1
    tma.store_wait(0)


@gluon.jit
def pingpong_kernel(a_desc, b_desc, c_desc, S: gl.constexpr, GROUP_M: gl.constexpr, B_KMAJOR: gl.constexpr,
                    CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [S] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [S] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    order = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(S):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(order.index(i), count=1)
    p = PP(a_desc, b_desc, c_desc, a_bufs, b_bufs, c_bufs, ready, empty, order, GROUP_M, B_KMAJOR)
    gl.warp_specialize([
        (_consumer, (p, 0)),
        (_consumer, (p, 1)),
        (_producer, (p, 0)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
