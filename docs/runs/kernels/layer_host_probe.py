"""Host time per call of one linear layer (64 rows: the GPU waits on the host), torch against ours:
forward with and without grad, forward + backward, backward alone; then a profile of ours.
Usage: python3 docs/runs/kernels/layer_host_probe.py"""
import time, copy, torch, cProfile, pstats, io
from autokernel import nn as aknn, route
route.use("triton")
def per_call(fn, n=300):
    for _ in range(20): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e6
for fi, fo, act in ((768, 768, None), (768, 3072, "gelu_tanh")):
    M = 64
    lin = torch.nn.Linear(fi, fo).cuda().bfloat16()
    base = torch.nn.Sequential(lin, *( [torch.nn.GELU(approximate="tanh")] if act else []))
    ours = aknn.swap_linear(copy.deepcopy(base))
    x = torch.randn(M, fi, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, fo, device="cuda", dtype=torch.bfloat16)
    xn = x.detach()
    res = {}
    for name, m in (("torch", base), ("ours", ours)):
        with torch.no_grad():
            res[name+" fwd nograd"] = per_call(lambda: m(xn))
        res[name+" fwd grad"] = per_call(lambda: m(x))
        res[name+" fwd+bwd"] = per_call(lambda: m(x).backward(dy))
        y = m(x)
        res[name+" bwd only (retain)"] = per_call(lambda: y.backward(dy, retain_graph=True))
        res[name+" empty torch op"] = per_call(lambda: dy.add_(0))
    print(fi, fo, act, "  ".join(f"{k}: {v:.1f}" for k, v in res.items()), flush=True)
    # where ours spends its forward: cProfile main thread
    pr = cProfile.Profile(); pr.enable()
    for _ in range(200): ours(x).backward(dy)
    torch.cuda.synchronize(); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30); print(s.getvalue()[:5000])
