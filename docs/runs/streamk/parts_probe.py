"""Per-kernel GPU time (torch.profiler, 20 calls) of TMA stream-K configs beside their data-parallel twins and cuBLAS, fp16 nt (H100: docs/runs/streamk/parts_h100.txt).
    python3 docs/runs/streamk/parts_probe.py"""
import collections, torch
from autokernel import matmul
from autokernel.candidates import CANDIDATES
from torch.profiler import profile, ProfilerActivity
probs = [(4487, 512, 4352), (1536, 1536, 1536), (1705, 640, 3072), (3242, 768, 3072), (4253, 1024, 1536), (1024, 1024, 8192)]
labels = ["128x256x64 g8 w8 s3 tma fl", "128x256x64 g8 w8 s3 tma fl sk", "128x256x64 g8 w8 s3 tma sk",
          "128x128x64 g8 w4 s5 tma fl", "128x128x64 g8 w4 s5 tma fl sk"]
for m, n, k in probs:
    dt = torch.float16
    a = torch.randn(m, k, device="cuda", dtype=dt); b = torch.randn(n, k, device="cuda", dtype=dt).t()
    ref = a.float() @ b.float()
    t0 = None
    for _ in range(5): torch.mm(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20): torch.mm(a, b)
        torch.cuda.synchronize()
    tot = sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / 20
    print(f"{m}x{n}x{k} cublas total={tot:.1f}us", flush=True)
    for lab in labels:
        c = next((c for c in CANDIDATES if c.short() == lab), None)
        if c is None:
            print("no candidate", lab); continue
        out = matmul(a, b, config=c)
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        for _ in range(3): matmul(a, b, config=c)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20): matmul(a, b, config=c)
            torch.cuda.synchronize()
        t = collections.defaultdict(float)
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                t[e.name[:30]] += e.device_time / 20
        print(f"{m}x{n}x{k} {lab:32s} total={sum(t.values()):.1f}us", "  ".join(f"{k_}={v:.1f}" for k_, v in sorted(t.items())), f"err={err:.1e}", flush=True)
