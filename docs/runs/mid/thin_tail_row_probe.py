"""128-row TMA tiles with the last row of tiles 64 rows high (docs/runs/mid/thin_tail_row.patch applied to a copy of the package renamed autokernel_mixtail; docs/kernel-notes.md) vs the shipped kernel, GPU time (profiler)."""
import collections, importlib, os, sys, torch
from torch.profiler import profile, ProfilerActivity
ak = importlib.import_module("autokernel"); mx = importlib.import_module("autokernel_mixtail")
cands = {c.short(): c for c in importlib.import_module("autokernel.candidates").CANDIDATES}
mcands = {c.short(): c for c in importlib.import_module("autokernel_mixtail.candidates").CANDIDATES}
probs = [(259, 3584, 6400), (142, 3840, 1664), (651, 1920, 11392), (135, 7936, 14720), (390, 768, 2816), (129, 6400, 1664),
         (394, 2688, 640), (647, 7936, 19328), (517, 1664, 8320), (3082, 25984, 896), (2695, 2176, 576), (5003, 9728, 640),
         (778, 13824, 1280), (6925, 5504, 768), (2057, 5504, 17152), (1039, 2816, 10880), (4104, 4096, 4096), (1100, 4096, 4096)]
labels = ["128x256x64 g8 w8 s3 tma fl", "128x128x64 g8 w4 s5 tma fl", "128x128x64 g8 w8 s4 tma fl", "128x256x64 g8 w8 s3 tma",
          "64x256x64 g8 w4 s4 tma fl", "64x128x128 g8 w4 s4 tma fl"]
def prof(fn, reps=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps): fn()
        torch.cuda.synchronize()
    return sum(e.device_time for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA) / reps
for m, n, k in probs:
    dt = torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dt); b = torch.randn(n, k, device="cuda", dtype=dt).t()
    ref = a.float() @ b.float()
    cub = prof(lambda: torch.mm(a, b))
    row = [f"{m}x{n}x{k} cublas {cub:.1f}"]
    best_ship = best_mix = 1e9
    for lab in labels:
        t0 = prof(lambda: ak.matmul(a, b, config=cands[lab]))
        out = mx.matmul(a, b, config=mcands[lab])
        err = ((out.float() - ref).norm() / ref.norm()).item()
        t1 = prof(lambda: mx.matmul(a, b, config=mcands[lab]))
        best_ship = min(best_ship, t0); best_mix = min(best_mix, t1)
        row.append(f"  {lab:28s} ship {t0:7.1f} mix {t1:7.1f} ({t0 / t1:.3f}x) err {err:.1e}{' BAD' if err > 1e-2 else ''}")
    row.append(f"  best: ship {best_ship:.1f} mix {best_mix:.1f} cub/best ship {cub / best_ship:.3f} mix {cub / best_mix:.3f}")
    print("\n".join(row), flush=True)
