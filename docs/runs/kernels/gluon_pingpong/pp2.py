"""Ping-pong warp-specialized persistent GEMM for sm_90 in Gluon, with a tile of BN0 + BN1
columns (two B boxes, two accumulators: 128 + 64 = 192) (probe)."""
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.language.core import _aggregate as aggregate
from triton.experimental.gluon.language.nvidia.hopper import (
    tma, mbarrier, fence_async_shared, warpgroup_mma, warpgroup_mma_wait)
from pp import acc_layout, _coords


@aggregate
class PP2:
    a_desc: tma.tensor_descriptor
    b0_desc: tma.tensor_descriptor
    b1_desc: tma.tensor_descriptor
    c0_desc: tma.tensor_descriptor
    c1_desc: tma.tensor_descriptor
    a_bufs: gl.shared_memory_descriptor
    b0_bufs: gl.shared_memory_descriptor
    b1_bufs: gl.shared_memory_descriptor
    c0_bufs: gl.shared_memory_descriptor
    c1_bufs: gl.shared_memory_descriptor
    ready: gl.shared_memory_descriptor
    empty: gl.shared_memory_descriptor
    order: gl.shared_memory_descriptor
    N: gl.tensor
    GROUP_M: gl.constexpr

    @gluon.constexpr_function
    def __init__(self, a_desc, b0_desc, b1_desc, c0_desc, c1_desc, a_bufs, b0_bufs, b1_bufs, c0_bufs, c1_bufs,
                 ready, empty, order, N, GROUP_M):
        self.a_desc = a_desc
        self.b0_desc = b0_desc
        self.b1_desc = b1_desc
        self.c0_desc = c0_desc
        self.c1_desc = c1_desc
        self.a_bufs = a_bufs
        self.b0_bufs = b0_bufs
        self.b1_bufs = b1_bufs
        self.c0_bufs = c0_bufs
        self.c1_bufs = c1_bufs
        self.ready = ready
        self.empty = empty
        self.order = order
        self.N = N
        self.GROUP_M = gl.constexpr(GROUP_M)


@gluon.jit
def _producer2(p, CID: gl.constexpr):
    BM: gl.constexpr = p.a_desc.block_type.shape[0]
    BK: gl.constexpr = p.a_desc.block_type.shape[1]
    BN0: gl.constexpr = p.b0_desc.block_type.shape[0]
    BN1: gl.constexpr = p.b1_desc.block_type.shape[0]
    BN: gl.constexpr = BN0 + BN1
    S: gl.constexpr = p.a_bufs.shape[0]
    M = p.a_desc.shape[0]
    K = p.a_desc.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(p.N, BN)
    total = num_pid_m * num_pid_n
    ksteps = gl.cdiv(K, BK)
    nbytes: gl.constexpr = p.a_desc.block_type.nbytes + p.b0_desc.block_type.nbytes + p.b1_desc.block_type.nbytes
    counter = 0
    for tile_id in range(gl.program_id(0), total, gl.num_programs(0)):
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, p.GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        for kk in range(ksteps):
            s = counter % S
            mbarrier.wait(p.empty.index(s), ((counter // S) & 1) ^ 1)
            bar = p.ready.index(s)
            mbarrier.expect(bar, nbytes)
            tma.async_copy_global_to_shared(p.a_desc, [off_m, kk * BK], bar, p.a_bufs.index(s))
            tma.async_copy_global_to_shared(p.b0_desc, [off_n, kk * BK], bar, p.b0_bufs.index(s))
            tma.async_copy_global_to_shared(p.b1_desc, [off_n + BN0, kk * BK], bar, p.b1_bufs.index(s))
            counter += 1


@gluon.jit
def _consumer2(p, CID: gl.constexpr):
    BM: gl.constexpr = p.a_desc.block_type.shape[0]
    BK: gl.constexpr = p.a_desc.block_type.shape[1]
    BN0: gl.constexpr = p.b0_desc.block_type.shape[0]
    BN1: gl.constexpr = p.b1_desc.block_type.shape[0]
    BN: gl.constexpr = BN0 + BN1
    S: gl.constexpr = p.a_bufs.shape[0]
    dtype: gl.constexpr = p.c0_desc.dtype
    M = p.a_desc.shape[0]
    K = p.a_desc.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(p.N, BN)
    total = num_pid_m * num_pid_n
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    ksteps = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(total - pid, nprog)
    l0: gl.constexpr = acc_layout(BM, BN0, 4)
    l1: gl.constexpr = acc_layout(BM, BN1, 4)
    c0_smem = p.c0_bufs.index(CID)
    c1_smem = p.c1_bufs.index(CID)
    t = 0
    for j in range(CID, my_tiles, 2):
        tile_id = pid + j * nprog
        pid_m, pid_n = _coords(tile_id, num_pid_m, num_pid_n, p.GROUP_M)
        mbarrier.wait(p.order.index(CID), (t & 1) ^ (1 - CID))
        counter = j * ksteps
        acc0 = gl.zeros([BM, BN0], gl.float32, l0)
        acc1 = gl.zeros([BM, BN1], gl.float32, l1)
        for kk in range(ksteps):
            s = counter % S
            mbarrier.wait(p.ready.index(s), (counter // S) & 1)
            acc0 = warpgroup_mma(p.a_bufs.index(s), p.b0_bufs.index(s).permute((1, 0)), acc0, is_async=True)
            acc1 = warpgroup_mma(p.a_bufs.index(s), p.b1_bufs.index(s).permute((1, 0)), acc1, is_async=True)
            acc0, acc1 = warpgroup_mma_wait(2, (acc0, acc1))
            mbarrier.arrive(p.empty.index((counter + S - 1) % S), count=1, pred=kk > 0)
            counter += 1
        mbarrier.arrive(p.order.index(1 - CID), count=1)
        acc0, acc1 = warpgroup_mma_wait(0, (acc0, acc1))
        mbarrier.arrive(p.empty.index((counter + S - 1) % S), count=1)
        tma.store_wait(0)
        c0_smem.store(acc0.to(dtype))
        c1_smem.store(acc1.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(p.c0_desc, [pid_m * BM, pid_n * BN], c0_smem)
        tma.async_copy_shared_to_global(p.c1_desc, [pid_m * BM, pid_n * BN + BN0], c1_smem)
        t += 1
    tma.store_wait(0)


@gluon.jit
def pingpong2_kernel(a_desc, b0_desc, b1_desc, c0_desc, c1_desc, N, S: gl.constexpr, GROUP_M: gl.constexpr,
                     CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr):
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [S] + a_desc.block_type.shape, a_desc.layout)
    b0_bufs = gl.allocate_shared_memory(dtype, [S] + b0_desc.block_type.shape, b0_desc.layout)
    b1_bufs = gl.allocate_shared_memory(dtype, [S] + b1_desc.block_type.shape, b1_desc.layout)
    c0_bufs = gl.allocate_shared_memory(dtype, [2] + c0_desc.block_type.shape, c0_desc.layout)
    c1_bufs = gl.allocate_shared_memory(dtype, [2] + c1_desc.block_type.shape, c1_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    order = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(S):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(order.index(i), count=1)
    p = PP2(a_desc, b0_desc, b1_desc, c0_desc, c1_desc, a_bufs, b0_bufs, b1_bufs, c0_bufs, c1_bufs,
            ready, empty, order, N, GROUP_M)
    gl.warp_specialize([
        (_consumer2, (p, 0)),
        (_consumer2, (p, 1)),
        (_producer2, (p, 0)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
