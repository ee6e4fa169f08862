"""GPU time of the plain TMA kernel, this checkout against an older copy of the package
(`autokernel_before`, made as docs/launch.md says), side by side (timing.race), in each
layout and epilogue. Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/tma_ab.py [streamk]

With "streamk": three stream-K configs of the TMA kernel on five mid-size nt problems, no
bias or activation, whose tails are cut in heads and tails or in equal chunks."""
import sys
import torch, autokernel as ak, autokernel_before as akb
from autokernel.candidates import CANDIDATES
from autokernel.config import KernelConfig
from autokernel.timing import race
torch.manual_seed(0)
CFGS = [KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True),
        KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4, variant="tma"),
        KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma", flatten=True),
        KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=4, variant="tma", epilogue_subtile=2)]
SHAPES = [(4096, 4096, 4096, "nt", "none"), (8192, 8192, 8192, "nn", "none"), (2048, 2304, 768, "nt", "gelu"),
          (1024, 11008, 4096, "nt", "silu"), (777, 1536, 3000, "tn", "relu")]
STREAMK = sys.argv[1:] == ["streamk"]
if STREAMK:
    CFGS = [next(c for c in CANDIDATES if c.short() == label)
            for label in ("128x256x64 g8 w8 s3 tma fl sk", "128x128x64 g8 w4 s5 tma fl sk", "64x256x64 g8 w4 s4 tma fl sk")]
    SHAPES = [(m, n, k, "nt", "none") for m, n, k in
              ((4487, 512, 4352), (1536, 1536, 1536), (1705, 640, 3072), (3242, 768, 3072), (1024, 1024, 8192))]
for m, n, k, lay, act in SHAPES:
    a = torch.randn(k, m, device="cuda", dtype=torch.float16).t() if lay[0] == "t" else torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16).t() if lay[1] == "t" else torch.randn(k, n, device="cuda", dtype=torch.float16)
    bias = None if STREAMK else torch.randn(n, device="cuda", dtype=torch.float16)
    fns, labels = [], []
    for cfg in CFGS:
        for name, mod in (("before", akb), ("after", ak)):
            c = mod.KernelConfig(**cfg.model_dump()) if name == "before" else cfg
            out = torch.empty(m, n, device="cuda", dtype=torch.float16)
            fns.append(lambda mod=mod, c=c, out=out: mod.matmul(a, b, bias, act, config=c, out=out)); labels.append(cfg.short())
    ms = race(fns, rounds=15, segment_ms=1.0)
    print(f"{m}x{n}x{k} {lay} {act}: " + " | ".join(f"{labels[i]}: {ms[i]*1e3:.1f} -> {ms[i+1]*1e3:.1f} us ({ms[i]/ms[i+1]:.3f}x)"
                                              for i in range(0, len(ms), 2)), flush=True)
