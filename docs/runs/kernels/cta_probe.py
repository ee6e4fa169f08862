"""Persistent TMA GEMM (nt, no epilogue) three ways: descriptors made on the device (as
ours), descriptors made on the host (passed as kernel parameters), and clusters of two
CTAs (num_ctas=2). Raced against cuBLAS and our kernel. Usage: cta_probe.py OUT.jsonl"""
import json, math, sys, traceback
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _grouped(tile, num_m, num_n, GROUP_M: tl.constexpr):
    group = GROUP_M * num_n
    first_m = (tile // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (tile % group) % size_m, (tile % group) // size_m


@triton.jit
def _loop(a_desc, b_desc, c_desc, M, N, K, NUM_PROGRAMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
          BK: tl.constexpr, GROUP_M: tl.constexpr, FLATTEN: tl.constexpr):
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _grouped(tile, num_m, num_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([pid_n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@triton.jit
def _dev_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, GROUP_M: tl.constexpr, FLATTEN: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    _loop(a_desc, b_desc, c_desc, M, N, K, NUM_PROGRAMS, BM, BN, BK, GROUP_M, FLATTEN)


@triton.jit
def _host_kernel(a_desc, b_desc, c_desc, M, N, K, NUM_PROGRAMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, GROUP_M: tl.constexpr, FLATTEN: tl.constexpr):
    _loop(a_desc, b_desc, c_desc, M, N, K, NUM_PROGRAMS, BM, BN, BK, GROUP_M, FLATTEN)


def alloc(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")


triton.set_allocator(alloc)


def make(kind, a, w, c, bm, bn, bk, warps, stages, programs, ctas=1, flatten=True):
    M, K = a.shape
    N = w.shape[0]
    grid = (min(programs, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    opts = dict(NUM_PROGRAMS=programs, BM=bm, BN=bn, BK=bk, GROUP_M=8, FLATTEN=flatten, num_warps=warps,
                num_stages=stages)
    if ctas > 1:
        opts["num_ctas"] = ctas
    if kind == "dev":
        return lambda a, w, c: _dev_kernel[grid](a, w, c, M, N, K, **opts)
    descs = {}

    def run(a, w, c):
        key = (a.data_ptr(), w.data_ptr(), c.data_ptr())
        d = descs.get(key)
        if d is None:
            d = descs[key] = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
                              TensorDescriptor.from_tensor(c, [bm, bn]))
        _host_kernel[grid](*d, M, N, K, **opts)
    return run


def main():
    from autokernel.records import KernelConfig
    from autokernel.kernels.matmul_tma import plan_matmul_tma, tma_operands
    from autokernel.kernels.launch import persistent_programs
    from autokernel.timing import race
    P = persistent_programs(torch.device("cuda"))
    out = open(sys.argv[1], "w")
    shapes = [(1024, 2304, 768), (2048, 2304, 768), (1536, 1536, 1536), (8192, 768, 768), (512, 3584, 3584),
              (3072, 3072, 3072), (2048, 768, 3072), (1024, 1024, 8192), (3201, 1408, 1792), (519, 27776, 4096),
              (4096, 4096, 4096), (293, 8832, 8960)]
    variants = {  # label: (kind, bm, bn, bk, warps, stages, programs, ctas)
        "dev 128x256 s3": ("dev", 128, 256, 64, 8, 3, P, 1),
        "host 128x256 s3": ("host", 128, 256, 64, 8, 3, P, 1),
        "dev 128x128 w8 s4": ("dev", 128, 128, 64, 8, 4, P, 1),
        "host 128x128 w8 s4": ("host", 128, 128, 64, 8, 4, P, 1),
        "host 64x256 w4 s4": ("host", 64, 256, 64, 4, 4, P, 1),
        "cta2 256x128 w4 s4": ("dev", 256, 128, 64, 4, 4, P // 2, 2),
        "cta2 256x256 w8 s3": ("dev", 256, 256, 64, 8, 3, P // 2, 2),
        "cta2 128x256 w4 s4": ("dev", 128, 256, 64, 4, 4, P // 2, 2),
        "cta2 256x128 w8 s4": ("dev", 256, 128, 64, 8, 4, P // 2, 2),
    }
    cfg = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True)
    for (m, n, k) in shapes:
        dt = torch.float16
        sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * 2))))
        ins = [(torch.randn(m, k, device="cuda", dtype=dt) / math.sqrt(k), torch.randn(n, k, device="cuda", dtype=dt),
                torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
        a0, w0, c0 = ins[0]
        ref = a0.float() @ w0.float().t()
        fns, labels = [], []
        for label, (kind, bm, bn, bk, warps, stages, programs, ctas) in variants.items():
            try:
                f = make(kind, a0, w0, c0, bm, bn, bk, warps, stages, programs, ctas)
                c0.zero_()
                f(a0, w0, c0)
                torch.cuda.synchronize()
                err = float((c0.float() - ref).abs().max() / ref.abs().max())
            except Exception as e:
                print(json.dumps(dict(m=m, n=n, k=k, label=label, status="error", error=str(e)[-400:])), file=out, flush=True)
                print(m, n, k, label, "error", str(e)[-300:].replace("\n", " "), flush=True)
                continue
            if not err < 1e-2:
                print(json.dumps(dict(m=m, n=n, k=k, label=label, status="wrong", err=err)), file=out, flush=True)
                print(m, n, k, label, "WRONG", err, flush=True)
                continue
            it = [0]
            fns.append(lambda f=f, it=it: (lambda s: f(*s))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
            labels.append(label)
        L = plan_matmul_tma(a0, w0.t(), c0, None, "none", 0.0, cfg, tma_operands(a0, w0.t(), c0), False)
        it = [0]
        fns.append(lambda L=L, it=it: (lambda s: L(s[0], s[1].t(), s[2], s[2], s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append("ours 128x256 s3 fl")
        it = [0]
        fns.append(lambda it=it: (lambda s: torch.mm(s[0], s[1].t(), out=s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append("cublas")
        ms = race(fns, rounds=15, segment_ms=1.0)
        for l, t in zip(labels, ms):
            print(json.dumps(dict(m=m, n=n, k=k, label=l, status="ok", gpu_ms=t)), file=out, flush=True)
        tc = ms[-1]
        print(f"{m}x{n}x{k} cublas {tc * 1e3:.1f}us | " + " | ".join(f"{l}:{tc / t:.3f}" for l, t in zip(labels, ms)), flush=True)


if __name__ == "__main__":
    main()
