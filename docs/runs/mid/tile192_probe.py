"""Tiles that are not powers of two (192 rows or columns) on a persistent TMA kernel, as sums of
power-of-two sub-tiles (192 = 128 + 64), one accumulator per sub-tile pair; nt layout, no
epilogue. Raced against cuBLAS and our best power-of-two TMA configs on mid-size problems.
Usage: python3 docs/runs/mid/tile192_probe.py OUT.jsonl [--check]  (--check: correctness under the
interpreter at small sizes). As run on the H100 from commit 01d050c after source benchmarks/device_env.sh."""
import json, math, sys
import torch
import triton
import triton.language as tl


@triton.jit
def _sub(a_desc, b_desc, acc, off_m, off_n, off_k):
    a = a_desc.load([off_m, off_k])
    b = b_desc.load([off_n, off_k])
    return tl.dot(a, b.T, acc)


@triton.jit
def _tile_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr,
                 BM0: tl.constexpr, BM1: tl.constexpr, BN0: tl.constexpr, BN1: tl.constexpr,
                 BK: tl.constexpr, GROUP_M: tl.constexpr, FLATTEN: tl.constexpr):
    a0 = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM0, BK])
    b0 = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN0, BK])
    c00 = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM0, BN0])
    if BM1 > 0:
        a1 = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM1, BK])
        c10 = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM1, BN0])
    if BN1 > 0:
        b1 = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN1, BK])
        c01 = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM0, BN1])
    if BM1 > 0 and BN1 > 0:
        c11 = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM1, BN1])
    BM: tl.constexpr = BM0 + BM1
    BN: tl.constexpr = BN0 + BN1
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS, flatten=FLATTEN):
        group = GROUP_M * num_n
        first_m = (tile // group) * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group) % size_m
        pid_n = (tile % group) // size_m
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc00 = tl.zeros((BM0, BN0), dtype=tl.float32)
        acc01 = tl.zeros((BM0, BN1 if BN1 > 0 else 16), dtype=tl.float32)
        acc10 = tl.zeros((BM1 if BM1 > 0 else 16, BN0), dtype=tl.float32)
        acc11 = tl.zeros((BM1 if BM1 > 0 else 16, BN1 if BN1 > 0 else 16), dtype=tl.float32)
        for ki in range(k_tiles):
            k = ki * BK
            a = a0.load([off_m, k])
            b = b0.load([off_n, k])
            acc00 = tl.dot(a, b.T, acc00)
            if BN1 > 0:
                bb = b1.load([off_n + BN0, k])
                acc01 = tl.dot(a, bb.T, acc01)
            if BM1 > 0:
                aa = a1.load([off_m + BM0, k])
                acc10 = tl.dot(aa, b.T, acc10)
                if BN1 > 0:
                    acc11 = tl.dot(aa, bb.T, acc11)
        c00.store([off_m, off_n], acc00.to(c_ptr.dtype.element_ty))
        if BN1 > 0:
            c01.store([off_m, off_n + BN0], acc01.to(c_ptr.dtype.element_ty))
        if BM1 > 0:
            c10.store([off_m + BM0, off_n], acc10.to(c_ptr.dtype.element_ty))
            if BN1 > 0:
                c11.store([off_m + BM0, off_n + BN0], acc11.to(c_ptr.dtype.element_ty))


def launch(a, w, c, bm0, bm1, bn0, bn1, bk, warps, stages, programs, flatten=False, group_m=8):
    M, K = a.shape
    N = w.shape[0]
    tiles = triton.cdiv(M, bm0 + bm1) * triton.cdiv(N, bn0 + bn1)
    _tile_kernel[(min(programs, tiles),)](a, w, c, M, N, K, NUM_PROGRAMS=programs, BM0=bm0, BM1=bm1, BN0=bn0,
                                          BN1=bn1, BK=bk, GROUP_M=group_m, FLATTEN=flatten,
                                          num_warps=warps, num_stages=stages)


def alloc(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


triton.set_allocator(alloc)

if "--check" in sys.argv:
    torch.manual_seed(0)
    for (M, N, K) in [(200, 136, 96), (64, 192, 64)]:
        a = torch.randn(M, K, dtype=torch.float16); w = torch.randn(N, K, dtype=torch.float16)
        for (bm0, bm1, bn0, bn1) in [(32, 16, 32, 16), (32, 0, 32, 16), (32, 16, 32, 0)]:
            c = torch.zeros(M, N, dtype=torch.float16)
            launch(a, w, c, bm0, bm1, bn0, bn1, 32, 4, 2, 3)
            ref = a.float() @ w.float().t()
            print(M, N, K, (bm0, bm1, bn0, bn1), float((c.float() - ref).abs().max() / ref.abs().max()))
    sys.exit(0)

from autokernel.config import KernelConfig
from autokernel.kernels.matmul_tma import plan_matmul_tma, tma_operands
from autokernel.kernels.launch import persistent_programs
from autokernel.timing import race

P = persistent_programs(torch.device("cuda"))
out = open(sys.argv[1], "w")
shapes = [(2048, 2304, 768), (1024, 2304, 768), (1536, 1536, 1536), (3072, 3072, 3072), (4096, 768, 3072),
          (2048, 768, 3072), (4096, 2304, 768), (8192, 768, 768), (2871, 640, 2688), (3457, 4608, 640),
          (1563, 3328, 512), (3201, 1408, 1792), (2322, 576, 6400), (1585, 1920, 2688), (3762, 1920, 768),
          (4096, 4096, 4096), (2048, 2816, 1024), (6144, 6144, 6144)]
ours = {  # label: (bm0, bm1, bn0, bn1, bk, warps, stages, flatten)
    "192x192 w8 s3": (128, 64, 128, 64, 64, 8, 3, False),
    "192x192 w8 s4": (128, 64, 128, 64, 64, 8, 4, False),
    "192x192 w8 s3 fl": (128, 64, 128, 64, 64, 8, 3, True),
    "128x192 w8 s4": (128, 0, 128, 64, 64, 8, 4, False),
    "128x192 w8 s4 fl": (128, 0, 128, 64, 64, 8, 4, True),
    "192x128 w8 s4": (128, 64, 128, 0, 64, 8, 4, False),
    "256x192 w8 s3": (128, 128, 128, 64, 64, 8, 3, False),
    "192x256 w8 s3": (128, 64, 256, 0, 64, 8, 3, False),
    "p2 128x256 w8 s3 fl": (128, 0, 256, 0, 64, 8, 3, True),
}
base = {"kernel 128x256 s3 fl": KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True),
        "kernel 128x128 w8 s4 fl": KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4, variant="tma", flatten=True),
        "kernel 64x256 w4 s4 fl": KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma", flatten=True)}
for (m, n, k) in shapes:
    dt = torch.float16
    sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * 2))))
    ins = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(n, k, device="cuda", dtype=dt),
            torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
    a0, w0, c0 = ins[0]
    ref = a0.float() @ w0.float().t()
    fns, labels = [], []
    for label, p in ours.items():
        try:
            c0.zero_()
            launch(a0, w0, c0, *p[:7], P, flatten=p[7])
            torch.cuda.synchronize()
            err = float((c0.float() - ref).abs().max() / ref.abs().max())
        except Exception as e:
            print(json.dumps(dict(m=m, n=n, k=k, label=label, status="error", error=str(e)[:300])), file=out, flush=True)
            continue
        if not err < 1e-2:
            print(json.dumps(dict(m=m, n=n, k=k, label=label, status="wrong", err=err)), file=out, flush=True)
            continue
        it = [0]
        fns.append(lambda p=p, it=it: (lambda s: launch(s[0], s[1], s[2], *p[:7], P, flatten=p[7]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append(label)
    for label, cfg in base.items():
        L = plan_matmul_tma(a0, w0.t(), c0, None, "none", 0.0, cfg, tma_operands(a0, w0.t(), c0), False)
        it = [0]
        fns.append(lambda L=L, it=it: (lambda s: L(s[0], s[1].t(), s[2], s[2], s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append(label)
    it = [0]
    fns.append(lambda it=it: (lambda s: torch.mm(s[0], s[1].t(), out=s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
    labels.append("cublas")
    ms = race(fns, rounds=20, segment_ms=1.0)
    for l, t in zip(labels, ms):
        print(json.dumps(dict(m=m, n=n, k=k, label=l, status="ok", gpu_ms=t)), file=out, flush=True)
    tc = ms[-1]
    row = " ".join(f"{l.split(' w')[0] if not l.startswith('kernel') else l[7:14]}:{tc / t:.2f}" for l, t in zip(labels, ms))
    print(f"{m}x{n}x{k} cublas {tc * 1e3:.1f}us | {row}", flush=True)
