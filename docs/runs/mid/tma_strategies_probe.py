"""TMA kernel strategies on mid-size GEMMs: stream-K on the TMA kernel, two persistent programs
per SM, the refactored DP kernel vs the previous file; cuBLAS and the current pick side by side.
GPU time per call (timing.race: CUDA graphs interleaved).

As run on the H100 (seed 46704), from a checkout of commit 4cef5a2 (the TMA kernel with its
stream-K variant) with the previous kernel file beside it:
    git show 3f104b7:autokernel/kernels/matmul_tma.py > old_matmul_tma.py
    source benchmarks/device_env.sh; python3 docs/runs/mid/tma_strategies_probe.py out.jsonl 46704
"""
import importlib.util, json, math, random, sys, time
import torch
from autokernel import matmul
from autokernel.config import KernelConfig
from autokernel.kernels.matmul_tma import plan_matmul_tma, tma_operands
from autokernel.kernels.launch import persistent_programs
from autokernel.timing import race

spec = importlib.util.spec_from_file_location("old_tma", "old_matmul_tma.py")
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)

out = open(sys.argv[1], "w")
seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time()) % 100000
print("seed", seed, flush=True)
rng = random.Random(seed)
def width():
    if rng.random() < 0.15:
        return rng.choice([576, 1000, 1536, 2304, 2816, 3584, 4608, 5120, 6912, 8960, 13824, 18944, 28672])
    return 128 * round(math.exp(rng.uniform(math.log(4), math.log(256))))
fixed = [(2048, 2304, 768), (1024, 2304, 768), (1536, 1536, 1536), (3072, 3072, 3072), (4096, 768, 3072),
         (512, 18944, 3584), (1024, 1024, 8192), (2048, 768, 3072), (4096, 2304, 768), (8192, 768, 768),
         (4096, 4096, 4096), (8192, 8192, 8192)]
shapes = [(m, n, k, "bfloat16" if i % 2 else "float16") for i, (m, n, k) in enumerate(fixed)]
drawn = []
while len(drawn) < 22:
    m = max(1, round(math.exp(rng.uniform(0, math.log(16384)))))
    n, k = width(), width()
    dt = rng.choice(["float16", "bfloat16"])
    if m >= 256 and 2 * m * n * k <= 3e12 and (k * 2) % 16 == 0 and (n * 2) % 16 == 0:
        drawn.append((m, n, k, dt))
shapes += drawn

def C(bm, bn, bk, w, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)

P = persistent_programs(torch.device("cuda"))
variants = [  # (label, config, programs, kernel module)
    ("old 128x256 s3", C(128, 256, 64, 8, 3), P, "old"),
    ("old 128x128 w8 s4", C(128, 128, 64, 8, 4), P, "old"),
    ("128x256 s3", C(128, 256, 64, 8, 3), P, "new"),
    ("128x256 s3 fl", C(128, 256, 64, 8, 3, flatten=True), P, "new"),
    ("128x256 s4 st2", C(128, 256, 64, 8, 4, epilogue_subtile=2), P, "new"),
    ("128x128 w8 s4", C(128, 128, 64, 8, 4), P, "new"),
    ("128x128 w4 s3 ws", C(128, 128, 64, 4, 3, warp_specialize=True), P, "new"),
    ("64x256 w4 s4", C(64, 256, 64, 4, 4), P, "new"),
    ("256x128 s3", C(256, 128, 64, 8, 3), P, "new"),
    ("128x256 s3 sk", C(128, 256, 64, 8, 3, stream_k=True), P, "new"),
    ("128x128 w8 s4 sk", C(128, 128, 64, 8, 4, stream_k=True), P, "new"),
    ("64x256 w4 s4 sk", C(64, 256, 64, 4, 4, stream_k=True), P, "new"),
    ("256x128 s3 sk", C(256, 128, 64, 8, 3, stream_k=True), P, "new"),
    ("128x128 w4 s2 st2 x1", C(128, 128, 64, 4, 2, epilogue_subtile=2), P, "new"),
    ("128x128 w4 s2 st2 x2", C(128, 128, 64, 4, 2, epilogue_subtile=2), 2 * P, "new"),
    ("128x128 w8 s2 st2 x2", C(128, 128, 64, 8, 2, epilogue_subtile=2), 2 * P, "new"),
    ("128x128 w8 s3 st2 x1", C(128, 128, 64, 8, 3, epilogue_subtile=2), P, "new"),
    ("64x256 w4 s2 st2 x2", C(64, 256, 64, 4, 2, epilogue_subtile=2), 2 * P, "new"),
    ("128x64 w4 s3 x2", C(128, 64, 64, 4, 3), 2 * P, "new"),
    ("64x128 w4 s3 x2", C(64, 128, 64, 4, 3), 2 * P, "new"),
    ("128x128x128 w8 s2 st2 x1", C(128, 128, 128, 8, 2, epilogue_subtile=2), P, "new"),
]
for (m, n, k, dt) in shapes:
    dtype = getattr(torch, dt)
    gen = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    nbytes = (m * k + n * k + m * n) * 2
    sets = max(2, min(16, math.ceil(150e6 / nbytes)))
    ins = [(torch.randn(m, k, device="cuda", dtype=dtype, generator=gen),
            torch.randn(n, k, device="cuda", dtype=dtype, generator=gen).t(),
            torch.empty(m, n, device="cuda", dtype=dtype)) for _ in range(sets)]
    a0, b0, c0 = ins[0]
    ref = a0.float() @ b0.float()
    fns, labels = [], []
    for label, cfg, progs, mod in variants:
        ops = tma_operands(a0, b0, c0)
        try:
            if mod == "old":
                L = old.plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, ops, False)
            else:
                L = plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, ops, False, programs=progs)
            c0.zero_()
            L(a0, b0, c0, c0, c0)
            torch.cuda.synchronize()
            err = ((c0.float() - ref).abs().max() / ref.abs().max()).item()
        except Exception as e:
            print(json.dumps(dict(m=m, n=n, k=k, dtype=dt, label=label, status="error", error=str(e)[:200])), file=out, flush=True)
            continue
        if not err < 1e-2:
            print(json.dumps(dict(m=m, n=n, k=k, dtype=dt, label=label, status="wrong", rel_error=err)), file=out, flush=True)
            continue
        it = [0]
        def fn(L=L, it=it):
            a, b, c = ins[it[0] % sets]; it[0] += 1
            L(a, b, c, c, c)
        fns.append(fn); labels.append(label)
    it2 = [0]
    def cublas():
        a, b, c = ins[it2[0] % sets]; it2[0] += 1
        torch.mm(a, b, out=c)
    it3 = [0]
    def pick():
        a, b, c = ins[it3[0] % sets]; it3[0] += 1
        matmul(a, b, out=c)
    fns += [cublas, pick]; labels += ["cublas", "pick"]
    ms = race(fns, rounds=20, segment_ms=1.0)
    tc = ms[labels.index("cublas")]
    for label, t in zip(labels, ms):
        print(json.dumps(dict(m=m, n=n, k=k, dtype=dt, label=label, status="ok", gpu_ms=t)), file=out, flush=True)
    bestl = min((t, l) for l, t in zip(labels, ms) if l not in ("cublas",))
    print(f"{m}x{n}x{k} {dt[:4]} cublas {tc*1e3:.1f}us  pick {tc/ms[-1]:.3f}  best {tc/bestl[0]:.3f} {bestl[1]}", flush=True)
