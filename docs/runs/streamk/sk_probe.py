"""Probe (the design before it shipped): data-parallel waves + a stream-K tail on the TMA
kernel, the split tiles' partials summed by a second kernel, the tail spread over every SM
(no cap). GPU time side by side (timing.race) against our candidates and cuBLAS. The record
docs/runs/streamk/probe_h100.jsonl. Usage: python3 docs/runs/streamk/sk_probe.py OUT.jsonl"""
import json, math, sys, time
import torch, triton, triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor
import autokernel as ak
from autokernel.config import KernelConfig
from autokernel.timing import race
from autokernel.kernels.matmul import grouped_tile
from autokernel.kernels.matmul_tma import _tile_epilogue
from autokernel.kernels.epilogue import apply_activation


@triton.jit
def sk_kernel(a_desc, b_desc, c_desc, ws_ptr, bias_ptr, M, N, K, stride_bias, DP_TILES, SK_TILES, slope,
              HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, FLATTEN: tl.constexpr,
              SEGS: tl.constexpr):
    pid = tl.program_id(0)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile_id in tl.range(pid, DP_TILES, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = grouped_tile(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([off_n, ki * BLOCK_K]).T
            acc = tl.dot(a, b, acc)
        _tile_epilogue(acc, c_desc, bias_ptr, bias_ptr, off_m, off_n, M, N, 0, 0, stride_bias, slope, HAS_BIAS,
                       False, ACTIVATION, BLOCK_M, BLOCK_N, 1)
    total = SK_TILES * k_tiles
    start = (pid * total) // NUM_PROGRAMS
    end = ((pid + 1) * total) // NUM_PROGRAMS
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    first = start // k_tiles
    for seg in tl.static_range(SEGS):
        t = first + seg
        k0 = tl.maximum(start - t * k_tiles, 0)
        k1 = tl.maximum(tl.minimum(end - t * k_tiles, k_tiles), k0)
        pid_m, pid_n = grouped_tile(DP_TILES + tl.minimum(t, SK_TILES - 1), M, N, BLOCK_M, BLOCK_N, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k0, k1):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([off_n, ki * BLOCK_K]).T
            acc = tl.dot(a, b, acc)
        if k1 > k0:
            if k0 == 0 and k1 == k_tiles:
                _tile_epilogue(acc, c_desc, bias_ptr, bias_ptr, off_m, off_n, M, N, 0, 0, stride_bias, slope,
                               HAS_BIAS, False, ACTIVATION, BLOCK_M, BLOCK_N, 1)
            else:
                slot = pid * SEGS + seg
                ptrs = ws_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs_m[:, None] * BLOCK_N + offs_n[None, :]
                tl.store(ptrs, acc)


@triton.jit
def fixup_kernel(ws_ptr, c_ptr, bias_ptr, M, N, K, stride_cm, stride_bias, DP_TILES, SK_TILES, slope,
                 HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr, SEGS: tl.constexpr):
    t = tl.program_id(0)
    k_tiles = tl.cdiv(K, BLOCK_K)
    total = SK_TILES * k_tiles
    x0 = t * k_tiles
    x1 = x0 + k_tiles
    p = (x0 * NUM_PROGRAMS) // total
    while ((p + 1) * total) // NUM_PROGRAMS <= x0:
        p += 1
    s = (p * total) // NUM_PROGRAMS
    e = ((p + 1) * total) // NUM_PROGRAMS
    if not (s <= x0 and e >= x1):  # split: sum the partials in program order
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        while s < x1:
            e = ((p + 1) * total) // NUM_PROGRAMS
            if e > s:  # a program with no iterations wrote nothing
                slot = p * SEGS + t - s // k_tiles
                acc += tl.load(ws_ptr + slot.to(tl.int64) * (BLOCK_M * BLOCK_N) + offs_m[:, None] * BLOCK_N
                               + offs_n[None, :])
            p += 1
            s = e
        pid_m, pid_n = grouped_tile(DP_TILES + t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rm = pid_m * BLOCK_M + offs_m
        rn = pid_n * BLOCK_N + offs_n
        if HAS_BIAS:
            acc += tl.load(bias_ptr + rn * stride_bias, mask=rn < N, other=0.0).to(tl.float32)[None, :]
        acc = apply_activation(acc, slope, ACTIVATION)
        tl.store(c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


P = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 5
_WS = {}


def sk_call(a, w, c, bm, bn, bk, warps, stages, extra_waves=0, bias=None, activation="none", group_m=8, flatten=False):
    M, K = a.shape
    N = w.shape[0]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    sk = tiles % P
    if sk:
        sk = min(tiles, sk + extra_waves * P)
    dp = tiles - sk
    k_tiles = triton.cdiv(K, bk)
    segs = triton.cdiv(triton.cdiv(sk * k_tiles, P), k_tiles) + 1
    ws = _WS.get((bm, bn))
    if ws is None or ws.shape[0] < P * segs:
        ws = _WS[(bm, bn)] = torch.empty(P * segs, bm, bn, device=a.device, dtype=torch.float32)
    ad = TensorDescriptor(a, list(a.shape), [a.stride(0), 1], [bm, bk])
    bd = TensorDescriptor(w, list(w.shape), [w.stride(0), 1], [bn, bk])
    cd = TensorDescriptor(c, [M, N], [c.stride(0), 1], [bm, bn])
    bb = bias if bias is not None else c
    grid = (min(P, tiles),) if sk == 0 else (P,)
    npg = grid[0]

    def run():
        sk_kernel[grid](ad, bd, cd, ws, bb, M, N, K, bb.stride(0), dp, sk, 0.01, bias is not None, activation,
                        bm, bn, bk, group_m, npg, flatten, segs, num_warps=warps, num_stages=stages)
        if sk:
            fixup_kernel[(sk,)](ws, c, bb, M, N, K, c.stride(0), bb.stride(0), dp, sk, 0.01, bias is not None,
                                activation, bm, bn, bk, group_m, npg, segs, num_warps=8)
    return run


SHAPES = [(1440, 1536, 28416), (1314, 1792, 23168), (2048, 1280, 12672), (805, 1280, 27520), (397, 1408, 15872),
          (757, 3584, 6912), (365, 1536, 9728), (1073, 4992, 3456), (2383, 1792, 1792), (7975, 896, 17664),
          (3584, 1536, 29952), (1059, 28672, 4608), (1024, 1024, 8192), (2048, 2304, 768), (4096, 4096, 4096),
          (222, 3712, 23680), (156, 1536, 8832), (1141, 4608, 3584)]
OURS = [KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True),
        KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4, variant="tma", flatten=True),
        KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma", flatten=True)]
SK = [(128, 256, 64, 8, 3, 0), (128, 128, 64, 8, 4, 0), (64, 256, 64, 4, 4, 0),
      (128, 256, 64, 8, 3, 1), (128, 128, 64, 8, 4, 1), (64, 256, 64, 4, 4, 1)]  # last field: DP loop flattened

if __name__ == "__main__":
    out = open(sys.argv[1], "w")
    torch.manual_seed(0)
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16)
        ref = (a.float() @ w.float().t())
        fns, labels = [], []
        c0 = torch.empty(m, n, device="cuda", dtype=torch.float16)
        fns.append(lambda: torch.matmul(a, w.t(), out=c0)); labels.append("cublas")
        cp = torch.empty(m, n, device="cuda", dtype=torch.float16)
        fns.append(lambda: ak.matmul(a, w.t(), out=cp)); labels.append("pick")
        for cfg in OURS:
            c = torch.empty(m, n, device="cuda", dtype=torch.float16)
            fns.append(lambda c=c, cfg=cfg: ak.matmul(a, w.t(), config=cfg, out=c)); labels.append(cfg.short())
        for bm, bn, bk, wp, st, ex in SK:
            c = torch.empty(m, n, device="cuda", dtype=torch.float16)
            try:
                run = sk_call(a, w, c, bm, bn, bk, wp, st, flatten=bool(ex))
                run(); torch.cuda.synchronize()
                err = float((c.float() - ref).abs().max() / ref.abs().max())
                assert err < 1e-2, err
            except Exception as exc:
                print(m, n, k, "sk", bm, bn, st, ex, "failed:", str(exc)[:200], flush=True)
                continue
            fns.append(run); labels.append(f"SK {bm}x{bn}x{bk} w{wp} s{st}" + (" fl" if ex else ""))
        ms = race(fns, rounds=10, segment_ms=2.0)
        row = dict(m=m, n=n, k=k, times_us={l: round(t * 1e3, 2) for l, t in zip(labels, ms)})
        out.write(json.dumps(row) + "\n"); out.flush()
        t0 = ms[0]
        best_ours = min(ms[1:2 + len(OURS)])
        best_sk = min(ms[2 + len(OURS):]) if len(ms) > 2 + len(OURS) else float("nan")
        print(f"{m}x{n}x{k}: cublas {t0*1e3:.1f} ours-best {best_ours*1e3:.1f} ({t0/best_ours:.2f}x) sk-best {best_sk*1e3:.1f} "
              f"({t0/best_sk:.2f}x) | " + " ".join(f"{l}={t*1e3:.1f}" for l, t in zip(labels, ms)), flush=True)
