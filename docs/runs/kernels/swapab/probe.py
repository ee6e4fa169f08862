"""Skinny GEMMs (65-320 rows) computed transposed: C^T = W X^T, so that the weight's rows fill
the MMA's 64-row side and the few token rows become its N side, which need not be a power of
two: a tile of 128 weight rows by 128 + 16/32/64 token rows (two dots sharing the weight tile),
as a 144-row tile would. One persistent TMA kernel, nt layout, no epilogue. Raced beside every
selector candidate that applies, the pick and cuBLAS (GPU time, `timing.race`), each checked
against a float32 reference first.

    python3 docs/runs/kernels/swapab/probe.py SHAPES.csv OUT.jsonl BUDGET_S
    TRITON_INTERPRET=1 python3 docs/runs/kernels/swapab/probe.py --check
"""
import json
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _swap_kernel(x_ptr, w_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr, BN: tl.constexpr,
                 BM0: tl.constexpr, BM1: tl.constexpr, BK: tl.constexpr, FLATTEN: tl.constexpr):
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    x0 = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM0, BK])
    c0 = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM0, BN])
    if BM1 > 0:
        x1 = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM1, BK])
        c1 = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM1, BN])
    BM: tl.constexpr = BM0 + BM1
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m = tile % num_m
        pid_n = tile // num_m
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc0 = tl.zeros((BN, BM0), dtype=tl.float32)
        acc1 = tl.zeros((BN, BM1 if BM1 > 0 else 16), dtype=tl.float32)
        for ki in range(k_tiles):
            k = ki * BK
            w = w_desc.load([off_n, k])
            x = x0.load([off_m, k])
            acc0 = tl.dot(w, x.T, acc0)
            if BM1 > 0:
                xx = x1.load([off_m + BM0, k])
                acc1 = tl.dot(w, xx.T, acc1)
        c0.store([off_m, off_n], tl.trans(acc0).to(c_ptr.dtype.element_ty))
        if BM1 > 0:
            c1.store([off_m + BM0, off_n], tl.trans(acc1).to(c_ptr.dtype.element_ty))


def widths(m: int) -> tuple[int, int]:
    """The two token-row sub-tiles (BM0 >= BM1, powers of two, BM1 may be 0) whose sum covers
    min(m, 256) with the least padding."""
    m = min(max(m, 16), 256)
    best = None
    for b0 in (16, 32, 64, 128, 256):
        for b1 in (0, 16, 32, 64, 128):
            if b1 > b0 or b0 + b1 < m or b0 + b1 > 256:
                continue
            key = (b0 + b1, b1)
            if best is None or key < best[0]:
                best = (key, (b0, b1))
    return best[1]


def launch(x, w, c, bn, bm0, bm1, bk, warps, stages, programs, flatten=False):
    M, K = x.shape
    N = w.shape[0]
    tiles = triton.cdiv(M, bm0 + bm1) * triton.cdiv(N, bn)
    _swap_kernel[(min(programs, tiles),)](x, w, c, M, N, K, NUM_PROGRAMS=programs, BN=bn, BM0=bm0, BM1=bm1,
                                          BK=bk, FLATTEN=flatten, num_warps=warps, num_stages=stages)


def _alloc(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


triton.set_allocator(_alloc)

SWAPPED = {  # label: (BN, BK, warps, stages)
    "swap 128 w8 s4": (128, 64, 8, 4),
    "swap 128 w4 s4": (128, 64, 4, 4),
    "swap 128 w8 s5": (128, 64, 8, 5),
    "swap 64 w4 s6": (64, 64, 4, 6),
    "swap 64 w4 s4 k128": (64, 128, 4, 4),
    "swap 256 w8 s3": (256, 64, 8, 3),
}

if __name__ == "__main__" and "--check" in sys.argv:
    torch.manual_seed(0)
    for (M, N, K) in [(143, 200, 96), (70, 136, 64), (33, 64, 128), (300, 72, 80)]:
        x = torch.randn(M, K, dtype=torch.float16)
        w = torch.randn(N, K, dtype=torch.float16)
        b0, b1 = widths(M)
        for bn in (32, 64):
            c = torch.zeros(M, N, dtype=torch.float16)
            launch(x, w, c, bn, min(b0, 64), min(b1, 32), 32, 4, 2, 3)
            ref = x.float() @ w.float().t()
            err = float((c.float() - ref).norm() / ref.norm())
            print(M, N, K, bn, (b0, b1), err)
            assert err < 1e-2
    sys.exit(0)

if __name__ == "__main__":
    sys.path.insert(0, ".")
    from autokernel import api, runtime
    from autokernel.candidates import CANDIDATES
    from autokernel.config import default_config, shared_memory_bytes
    from autokernel.select import rows_aligned, why_not
    from benchmarks.select_sweep import input_sets, race_checked
    from autokernel.tuning.shapes import read_shapes
    from autokernel import matmul

    shapes, out_path, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
    out = open(out_path, "w")
    programs = runtime.sm_count()
    limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    start = time.time()
    for p in read_shapes(shapes):
        if time.time() - start > budget:
            print("budget spent", flush=True)
            break
        p = type(p)(p.m, p.n, p.k, p.dtype, layout="nt")  # no epilogue
        tma = api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
        configs = [c for c in CANDIDATES if why_not(c, p.m, p.n, p.k, tma, programs, rows_aligned(p.k, p.layout)) is None
                   and shared_memory_bytes(c, p.torch_dtype) <= limit]
        sets = input_sets(p, 1000)
        a0, b0_, _, o0 = sets[0]
        pick = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, torch.device("cuda"),
                                  tma=api.tma_runs(a0, b0_, o0), layout=p.layout)
        if pick not in configs:
            configs.append(pick)
        rows, runs = [], []
        for c in configs:
            row = {"m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype, "label": c.short(), "pick": c == pick}
            rows.append(row)
            runs.append((row, lambda a, b, bias, out=None, c=c: matmul(a, b, None, "none", config=c, out=out)))
        bm0, bm1 = widths(p.m)
        for label, (bn, bk, warps, stages) in SWAPPED.items():
            row = {"m": p.m, "n": p.n, "k": p.k, "dtype": p.dtype, "label": f"{label} {bm0}+{bm1}", "pick": False}

            def fn(a, b, bias, out=None, cfg=(bn, bm0, bm1, bk, warps, stages)):
                out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device) if out is None else out
                launch(a, b.t(), out, *cfg, programs)
                return out
            rows.append(row)
            runs.append((row, fn))
        torch_ms = race_checked(p, runs, sets)
        for row in rows:
            print(json.dumps({**row, "cublas_ms": torch_ms}), file=out, flush=True)
        ok = [r for r in rows if r.get("status") == "success"]
        ours = min((r for r in ok if not r["label"].startswith("swap")), key=lambda r: r["gpu_ms"])
        sw = [r for r in ok if r["label"].startswith("swap")]
        sw = min(sw, key=lambda r: r["gpu_ms"]) if sw else None
        pk = next(r for r in rows if r["pick"])
        print(f"{p.m}x{p.n}x{p.k} {p.dtype} cublas {torch_ms*1e3:.1f}us best {ours['label']} {torch_ms/ours['gpu_ms']:.3f} "
              f"pick {torch_ms/pk.get('gpu_ms', float('inf')):.3f} "
              f"swap {sw['label'] if sw else '-'} {torch_ms/sw['gpu_ms'] if sw else 0:.3f} "
              f"failed {[r['label'] + ':' + r['status'] for r in rows if r.get('status') != 'success']}", flush=True)
