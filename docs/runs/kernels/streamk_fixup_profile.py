"""Per-kernel GPU time (torch.profiler) of stream-K configs in this checkout against
autokernel_before: the main kernel and its fix-up apart.
    PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/streamk_fixup_profile.py
"""
import sys, collections, torch
import autokernel_before as akb
from autokernel import matmul
from autokernel.candidates import CANDIDATES
from torch.profiler import profile, ProfilerActivity
probs = [(724, 1536, 1664, torch.float16), (2064, 1152, 2176, torch.float16), (5858, 18944, 4352, torch.float16)]
labels = ["128x128x64 g8 w8 s4 tma sk", "128x256x64 g8 w8 s3 tma sk", "64x256x64 g8 w4 s4 tma fl sk"]
for m, n, k, dt in probs:
    a = torch.randn(m, k, device="cuda", dtype=dt); b = torch.randn(n, k, device="cuda", dtype=dt).t()
    for lab in labels:
        c = next(c for c in CANDIDATES if c.short() == lab)
        for who, fn, cc in (("after", matmul, c), ("before", akb.matmul, akb.KernelConfig(**c.model_dump()))):
            for _ in range(3): fn(a, b, config=cc)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20): fn(a, b, config=cc)
                torch.cuda.synchronize()
            t = collections.defaultdict(float)
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    t[e.name[:40]] += e.device_time / 20
            print(f"{m}x{n}x{k} {lab:30s} {who:6s}", "  ".join(f"{k_}={v:.1f}us" for k_, v in sorted(t.items())), flush=True)
