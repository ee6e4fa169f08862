"""A persistent TMA GEMM (nt: A [M, K], W [N, K], C = A W^T) whose tile is (BM1 + BM2) x (BN1 + BN2):
up to four dots sharing the K step's boxes, so that tiles of 80, 96, 160 or 192 rows or
columns exist though every Triton block is a power of two."""
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor
from autokernel.kernels.matmul import grouped_tile


@triton.jit
def _two_dot_kernel(a1_desc, a2_desc, b1_desc, b2_desc, c11, c12, c21, c22, M, N, K,
                    BM1: tl.constexpr, BM2: tl.constexpr, BN1: tl.constexpr, BN2: tl.constexpr,
                    BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                    FLATTEN: tl.constexpr, UPCAST: tl.constexpr):
    BM: tl.constexpr = BM1 + BM2
    BN: tl.constexpr = BN1 + BN2
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BM, BN, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc11 = tl.zeros((BM1, BN1), dtype=tl.float32)
        if BN2 > 0:
            acc12 = tl.zeros((BM1, BN2), dtype=tl.float32)
        if BM2 > 0:
            acc21 = tl.zeros((BM2, BN1), dtype=tl.float32)
            if BN2 > 0:
                acc22 = tl.zeros((BM2, BN2), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BK
            a1 = a1_desc.load([off_m, off_k])
            b1 = b1_desc.load([off_n, off_k]).T
            if UPCAST:
                a1 = a1.to(tl.float32)
                b1 = b1.to(tl.float32)
            acc11 = tl.dot(a1, b1, acc11)
            if BN2 > 0:
                b2 = b2_desc.load([off_n + BN1, off_k]).T
                if UPCAST:
                    b2 = b2.to(tl.float32)
                acc12 = tl.dot(a1, b2, acc12)
            if BM2 > 0:
                a2 = a2_desc.load([off_m + BM1, off_k])
                if UPCAST:
                    a2 = a2.to(tl.float32)
                acc21 = tl.dot(a2, b1, acc21)
                if BN2 > 0:
                    acc22 = tl.dot(a2, b2, acc22)
        c11.store([off_m, off_n], acc11.to(c11.dtype))
        if BN2 > 0:
            c12.store([off_m, off_n + BN1], acc12.to(c12.dtype))
        if BM2 > 0:
            c21.store([off_m + BM1, off_n], acc21.to(c21.dtype))
            if BN2 > 0:
                c22.store([off_m + BM1, off_n + BN1], acc22.to(c22.dtype))


def two_dot(a, w, c, bm1, bm2, bn1, bn2, bk=64, warps=4, stages=4, group_m=8, flatten=True, programs=None):
    """c = a @ w.T with the (bm1 + bm2) x (bn1 + bn2) tile."""
    M, K = a.shape
    N = w.shape[0]
    interp = a.device.type != "cuda"
    if programs is None:
        programs = 4 if interp else torch.cuda.get_device_properties(a.device).multi_processor_count
    a1 = TensorDescriptor.from_tensor(a, [bm1, bk])
    a2 = TensorDescriptor.from_tensor(a, [max(bm2, 16), bk])
    b1 = TensorDescriptor.from_tensor(w, [bn1, bk])
    b2 = TensorDescriptor.from_tensor(w, [max(bn2, 16), bk])
    c11 = TensorDescriptor.from_tensor(c, [bm1, bn1])
    c12 = TensorDescriptor.from_tensor(c, [bm1, max(bn2, 16)])
    c21 = TensorDescriptor.from_tensor(c, [max(bm2, 16), bn1])
    c22 = TensorDescriptor.from_tensor(c, [max(bm2, 16), max(bn2, 16)])
    tiles = triton.cdiv(M, bm1 + bm2) * triton.cdiv(N, bn1 + bn2)
    grid = (min(programs, tiles),)
    _two_dot_kernel[grid](a1, a2, b1, b2, c11, c12, c21, c22, M, N, K, bm1, bm2, bn1, bn2, bk, group_m, grid[0],
                          flatten, interp and a.dtype == torch.bfloat16, num_warps=warps, num_stages=stages)
    return c
