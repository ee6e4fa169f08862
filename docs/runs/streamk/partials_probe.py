"""Per-kernel GPU time (torch.profiler, 30 calls) of the TMA kernel's stream-K tail beside its
data-parallel twin and cuBLAS, fp16 nt, for each package named (the first: the shipped one;
the others: copies with a patch of docs/runs/streamk/partials_*.patch applied, renamed
autokernel_<variant>; docs/kernel-notes.md, "What the stream-K partials cost"). The max
error against a float32 product over three calls is printed beside each time.
    python3 docs/runs/streamk/partials_probe.py autokernel autokernel_nostore autokernel_inown"""
import collections, importlib, sys, torch
from torch.profiler import profile, ProfilerActivity
pk = {n: importlib.import_module(n) for n in sys.argv[1:]}
cands = {n: importlib.import_module(n + ".candidates").CANDIDATES for n in pk}
probs = [(2048, 2304, 768), (1024, 1024, 4096), (539, 3584, 10112), (295, 1024, 7040), (1536, 1536, 1536), (4487, 512, 4352), (3242, 768, 3072), (1024, 1024, 8192), (1705, 640, 3072)]
labels = ["128x256x64 g8 w8 s3 tma fl", "128x256x64 g8 w8 s3 tma fl sk", "128x128x64 g8 w4 s5 tma fl", "128x128x64 g8 w4 s5 tma fl sk"]
def prof(fn):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(30): fn()
        torch.cuda.synchronize()
    t = collections.defaultdict(float)
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA: t[e.name[:26]] += e.device_time / 30
    return t
for m, n, k in probs:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16); b = torch.randn(n, k, device="cuda", dtype=torch.float16).t()
    t = prof(lambda: torch.mm(a, b)); print(f"{m}x{n}x{k} cublas {sum(t.values()):.1f}", flush=True)
    for rep in range(1):
        for lab in labels:
            for name, mod in pk.items():
                if "sk" not in lab.split() and name != sys.argv[1]: continue
                c = next(c for c in cands[name] if c.short() == lab)
                ref = a.float() @ b.float()
                err = max(((mod.matmul(a, b, config=c).float() - ref).abs().max()).item() for _ in range(3))
                t = prof(lambda: mod.matmul(a, b, config=c))
                print(f"{m}x{n}x{k} {name:18s} {lab:30s} total={sum(t.values()):.1f}", "  ".join(f"{k_}={v:.1f}" for k_, v in sorted(t.items())), f"err={err:.2e}", flush=True)
