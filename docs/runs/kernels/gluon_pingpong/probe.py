"""Race the Gluon ping-pong kernels (pp.py, pp2.py) against our TMA configs and cuBLAS (GPU time,
side by side, nt layout, no epilogue), after a correctness check against a float32 reference.

    source benchmarks/device_env.sh
    python3 docs/runs/kernels/gluon_pingpong/probe.py OUT.jsonl [--run 1] 349x6272x7936 2487x1792x10368xbfloat16 ...

--run 1: the first run's kernels (four ping-pong tiles; our four flattened TMA configs, none
with a stream-K tail); default: the second run's (128x128 and the two-accumulator 128x192
ping-pong; our TMA configs with and without a stream-K tail)."""
import json, math, sys, os, time, traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
import pp, pp2
from autokernel import matmul
from autokernel.config import KernelConfig
from autokernel.timing import race

NSM = torch.cuda.get_device_properties(0).multi_processor_count
GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}

def descs(a, w, c, BM, BN, BK):
    g = GL[a.dtype]
    return (TensorDescriptor.from_tensor(a, [BM, BK], gl.NVMMASharedLayout.get_default_for([BM, BK], g)),
            TensorDescriptor.from_tensor(w, [BN, BK], gl.NVMMASharedLayout.get_default_for([BN, BK], g)),
            TensorDescriptor.from_tensor(c, [BM, BN], gl.NVMMASharedLayout.get_default_for([BM, BN], g)))

def descs2(a, w, c, BM, BN0, BN1, BK):
    g = GL[a.dtype]
    L = lambda shape: gl.NVMMASharedLayout.get_default_for(shape, g)
    return (TensorDescriptor.from_tensor(a, [BM, BK], L([BM, BK])), TensorDescriptor.from_tensor(w, [BN0, BK], L([BN0, BK])),
            TensorDescriptor.from_tensor(w, [BN1, BK], L([BN1, BK])), TensorDescriptor.from_tensor(c, [BM, BN0], L([BM, BN0])),
            TensorDescriptor.from_tensor(c, [BM, BN1], L([BM, BN1])))

def make_descs(a, w, c, BM, BN, BK):
    return descs2(a, w, c, BM, BN[0], BN[1], BK) if isinstance(BN, tuple) else descs(a, w, c, BM, BN, BK)

def launch_pp(d, M, N, BM, BN, S, regs=(232, 40), maxnreg=168, group_m=8, programs=None):
    if isinstance(BN, tuple):
        tiles = triton.cdiv(M, BM) * triton.cdiv(N, sum(BN))
        grid = (min(programs or NSM, tiles),)
        pp2.pingpong2_kernel[grid](*d, N, S, group_m, regs[0], regs[1], num_warps=4, maxnreg=maxnreg)
        return
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    grid = (min(programs or NSM, tiles),)
    pp.pingpong_kernel[grid](*d, S, group_m, True, regs[0], regs[1], num_warps=4, maxnreg=maxnreg)

RUN1 = "--run" in sys.argv and sys.argv[sys.argv.index("--run") + 1] == "1"
if RUN1:
    del sys.argv[sys.argv.index("--run"):sys.argv.index("--run") + 2]
VARIANTS = {  # label: (BM, BN, BK, S, regs, maxnreg); BN a pair: the two-accumulator kernel
    "pp 128x128x64 s5": (128, 128, 64, 5, (232, 40), 168),
    "pp 128x192x64 s3": (128, (128, 64), 64, 3, (232, 40), 168),
    "pp 128x192x64 s3 r240": (128, (128, 64), 64, 3, (240, 24), 168),
}
_K = lambda bm, bn, w, s, **x: KernelConfig(block_m=bm, block_n=bn, block_k=64, group_m=8, num_warps=w, num_stages=s, variant="tma", flatten=True, **x)
BASE = {
    "tma 128x256 w8 s3 fl": _K(128, 256, 8, 3), "tma 128x256 w8 s3 fl sk": _K(128, 256, 8, 3, stream_k=True),
    "tma 128x128 w4 s5 fl": _K(128, 128, 4, 5), "tma 128x128 w4 s5 fl sk": _K(128, 128, 4, 5, stream_k=True),
    "tma 64x256 w4 s4 fl": _K(64, 256, 4, 4),
}
if RUN1:
    VARIANTS = {"pp 128x128x64 s4": (128, 128, 64, 4, (232, 40), 168), "pp 128x128x64 s5": (128, 128, 64, 5, (232, 40), 168),
                "pp 64x256x64 s4": (64, 256, 64, 4, (232, 40), 168), "pp 128x64x64 s6": (128, 64, 64, 6, (232, 40), 168)}
    BASE = {"tma 128x256 w8 s3 fl": _K(128, 256, 8, 3), "tma 128x128 w8 s4 fl": _K(128, 128, 8, 4),
            "tma 128x128 w4 s5 fl": _K(128, 128, 4, 5), "tma 64x256 w4 s4 fl": _K(64, 256, 4, 4)}

def check():
    torch.manual_seed(0)
    bad = 0
    for (M, N, K) in [(200, 136, 96), (1, 8, 8), (259, 3584, 640), (1000, 1000, 1000), (130, 72, 4104), (4096, 520, 64)]:
        for dt in (torch.float16, torch.bfloat16):
            a = torch.randn(M, K, device="cuda", dtype=dt); w = torch.randn(N, K, device="cuda", dtype=dt)
            ref = a.float() @ w.float().t()
            for label, (BM, BN, BK, S, regs, mr) in VARIANTS.items():
                c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
                try:
                    launch_pp(make_descs(a, w, c, BM, BN, BK), M, N, BM, BN, S, regs, mr)
                    torch.cuda.synchronize()
                    err = float((c.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6))
                except Exception as e:
                    err = f"error {type(e).__name__}: {str(e)[:300]}"
                ok = isinstance(err, float) and err < 1e-2
                bad += not ok
                print(f"check {M}x{N}x{K} {str(dt)[6:]} {label}: {'ok' if ok else 'FAIL'} {err}", flush=True)
    return bad

def main(out_path, shapes):
    bad = check()
    print("check failures:", bad, flush=True)
    out = open(out_path, "w")
    for (m, n, k, dtn) in shapes:
        dt = getattr(torch, dtn)
        sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * 2))))
        ins = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(n, k, device="cuda", dtype=dt),
                torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
        a0, w0, c0 = ins[0]
        ref = a0.float() @ w0.float().t()
        fns, labels = [], []
        for label, (BM, BN, BK, S, regs, mr) in VARIANTS.items():
            ds = [make_descs(a, w, c, BM, BN, BK) for a, w, c in ins]
            try:
                c0.fill_(float("nan"))
                launch_pp(ds[0], m, n, BM, BN, S, regs, mr)
                torch.cuda.synchronize()
                err = float((c0.float() - ref).abs().max() / ref.abs().max())
            except Exception as e:
                print(json.dumps(dict(m=m, n=n, k=k, dtype=dtn, label=label, status="error", error=str(e)[:300])), file=out, flush=True)
                continue
            if not err < 1e-2:
                print(json.dumps(dict(m=m, n=n, k=k, dtype=dtn, label=label, status="wrong", err=err)), file=out, flush=True)
                continue
            it = [0]
            def f(ds=ds, it=it, BM=BM, BN=BN, S=S, regs=regs, mr=mr):
                it[0] += 1
                launch_pp(ds[it[0] % sets], m, n, BM, BN, S, regs, mr)
            fns.append(f); labels.append(label)
        for label, cfg in BASE.items():
            y = matmul(a0, w0.t(), config=cfg)
            assert float((y.float() - ref).abs().max() / ref.abs().max()) < 1e-2
            it = [0]
            def f(cfg=cfg, it=it):
                it[0] += 1
                s = ins[it[0] % sets]
                matmul(s[0], s[1].t(), config=cfg, out=s[2])
            fns.append(f); labels.append(label)
        it = [0]
        def fc(it=it):
            it[0] += 1
            s = ins[it[0] % sets]
            torch.mm(s[0], s[1].t(), out=s[2])
        fns.append(fc); labels.append("cublas")
        ms = race(fns, rounds=20, segment_ms=1.0)
        for l, t in zip(labels, ms):
            print(json.dumps(dict(m=m, n=n, k=k, dtype=dtn, label=l, status="ok", gpu_ms=t)), file=out, flush=True)
        tc = ms[-1]
        bo = min(t for l, t in zip(labels, ms) if l.startswith("tma"))
        bp = min([t for l, t in zip(labels, ms) if l.startswith("pp")] or [float("inf")])
        row = " ".join(f"{l}:{tc / t:.2f}" for l, t in zip(labels, ms) if l != "cublas")
        print(f"{m}x{n}x{k} {dtn} cublas {tc*1e3:.1f}us best-tma {tc/bo:.3f} best-pp {tc/bp:.3f} | {row}", flush=True)

if __name__ == "__main__":
    shapes = [tuple(int(x) for x in s.split("x")[:3]) + (s.split("x")[3] if s.count("x") == 3 else "float16",) for s in sys.argv[2:]]
    main(sys.argv[1], shapes)
