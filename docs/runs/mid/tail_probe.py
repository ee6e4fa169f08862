"""The last, partial wave of a persistent TMA kernel re-tiled finer: the full waves run
BMxBN tiles, the tiles left over (fewer than the programs) run as S sub-tiles each, so the
last round takes about 1/S of a big tile's time instead of a whole one. nt layout, no
epilogue; raced against cuBLAS and our TMA kernel on mid-size problems.
Usage: python3 docs/runs/mid/tail_probe.py OUT.jsonl [--check]  (--check: correctness
under the interpreter at small sizes)."""
import json, math, sys
import torch
import triton
import triton.language as tl


@triton.jit
def _tile(a_desc, b_desc, c_desc, off_m, off_n, k_tiles, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(k_tiles):
        a = a_desc.load([off_m, ki * BK])
        b = b_desc.load([off_n, ki * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def _grouped(tile, num_m, num_n, GROUP_M: tl.constexpr):
    group = GROUP_M * num_n
    first_m = (tile // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (tile % group) % size_m, (tile % group) // size_m


@triton.jit
def _tail_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                 SPLIT_M: tl.constexpr, SPLIT_N: tl.constexpr, FLATTEN: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    num_tiles = num_m * num_n
    k_tiles = tl.cdiv(K, BK)
    S: tl.constexpr = SPLIT_M * SPLIT_N
    if S > 1:
        main = num_tiles - num_tiles % NUM_PROGRAMS
    else:
        main = num_tiles
    for tile in tl.range(tl.program_id(0), main, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _grouped(tile, num_m, num_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([pid_n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))
    if S > 1:
        SBM: tl.constexpr = BM // SPLIT_M
        SBN: tl.constexpr = BN // SPLIT_N
        sa = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[SBM, BK])
        sb = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[SBN, BK])
        sc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SBM, SBN])
        for t in tl.range(tl.program_id(0), (num_tiles - main) * S, NUM_PROGRAMS):
            pid_m, pid_n = _grouped(main + t // S, num_m, num_n, GROUP_M)
            part = t % S
            off_m = pid_m * BM + (part // SPLIT_N) * SBM
            off_n = pid_n * BN + (part % SPLIT_N) * SBN
            if off_m < M and off_n < N:
                _tile(sa, sb, sc, off_m, off_n, k_tiles, SBM, SBN, BK)


def launch(a, w, c, bm, bn, bk, warps, stages, programs, split=(1, 1), flatten=False, group_m=8):
    M, K = a.shape
    N = w.shape[0]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    grid = min(programs, tiles * split[0] * split[1])
    _tail_kernel[(grid,)](a, w, c, M, N, K, NUM_PROGRAMS=programs, BM=bm, BN=bn, BK=bk, GROUP_M=group_m,
                          SPLIT_M=split[0], SPLIT_N=split[1], FLATTEN=flatten, num_warps=warps, num_stages=stages)


def alloc(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


triton.set_allocator(alloc)

if "--check" in sys.argv:
    torch.manual_seed(0)
    for (M, N, K) in [(200, 136, 96), (64, 192, 64), (100, 72, 40)]:
        a = torch.randn(M, K, dtype=torch.float16); w = torch.randn(N, K, dtype=torch.float16)
        for split in [(1, 1), (1, 2), (2, 2), (2, 1)]:
            for programs in (3, 5):
                c = torch.zeros(M, N, dtype=torch.float16)
                launch(a, w, c, 32, 32, 32, 4, 2, programs, split)
                ref = a.float() @ w.float().t()
                err = float((c.float() - ref).abs().max() / ref.abs().max())
                print(M, N, K, split, programs, err)
                assert err < 1e-2
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
          (2048, 2816, 1024), (519, 27776, 4096), (1671, 4736, 2816), (1955, 3840, 4608), (990, 14080, 2432),
          (5391, 2176, 3072), (293, 8832, 8960), (394, 3072, 2816), (4096, 4096, 4096)]
ours = {  # label: (bm, bn, bk, warps, stages, split, flatten)
    "128x256 s3 fl": (128, 256, 64, 8, 3, (1, 1), True),
    "128x256 s3 fl t2": (128, 256, 64, 8, 3, (1, 2), True),
    "128x256 s3 fl t4": (128, 256, 64, 8, 3, (2, 2), True),
    "128x128 w8 s4 fl": (128, 128, 64, 8, 4, (1, 1), True),
    "128x128 w8 s4 fl t2": (128, 128, 64, 8, 4, (2, 1), True),
    "128x128 w8 s4 fl t4": (128, 128, 64, 8, 4, (2, 2), True),
    "64x256 w4 s4 fl": (64, 256, 64, 4, 4, (1, 1), True),
    "64x256 w4 s4 fl t2": (64, 256, 64, 4, 4, (1, 2), True),
    "128x256 s3 t2": (128, 256, 64, 8, 3, (1, 2), False),
}
base = {"kernel 128x256 s3 fl": KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True)}
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
            launch(a0, w0, c0, *p[:5], P, split=p[5], flatten=p[6])
            torch.cuda.synchronize()
            err = float((c0.float() - ref).abs().max() / ref.abs().max())
        except Exception as e:
            print(json.dumps(dict(m=m, n=n, k=k, label=label, status="error", error=str(e)[:300])), file=out, flush=True)
            continue
        if not err < 1e-2:
            print(json.dumps(dict(m=m, n=n, k=k, label=label, status="wrong", err=err)), file=out, flush=True)
            continue
        it = [0]
        fns.append(lambda p=p, it=it: (lambda s: launch(s[0], s[1], s[2], *p[:5], P, split=p[5], flatten=p[6]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append(label)
    for label, cfg in base.items():
        L = plan_matmul_tma(a0, w0.t(), c0, None, "none", 0.0, cfg, tma_operands(a0, w0.t(), c0), False)
        it = [0]
        fns.append(lambda L=L, it=it: (lambda s: L(s[0], s[1].t(), s[2], s[2], s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append(label)
    it = [0]
    fns.append(lambda it=it: (lambda s: torch.mm(s[0], s[1].t(), out=s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
    labels.append("cublas")
    ms = race(fns, rounds=15, segment_ms=1.0)
    for l, t in zip(labels, ms):
        print(json.dumps(dict(m=m, n=n, k=k, label=l, status="ok", gpu_ms=t)), file=out, flush=True)
    tc = ms[-1]
    tiles = {l: triton.cdiv(m, ours[l][0]) * triton.cdiv(n, ours[l][1]) for l in labels if l in ours}
    row = " ".join(f"{l.replace(' fl', 'f').replace(' s3', '').replace(' w8 s4', '').replace(' w4 s4', '')}:{tc / t:.2f}" for l, t in zip(labels, ms))
    print(f"{m}x{n}x{k} cublas {tc * 1e3:.1f}us waves256={triton.cdiv(m,128)*triton.cdiv(n,256)/P:.2f} | {row}", flush=True)
