"""Host time per fwd+bwd of one linear layer (64 rows: the GPU idle): torch, this code and the code before
(copied as ``autokernel_before``, docs/launch.md has the step), in interleaved rounds.
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/layer_host_ab.py"""
import time, copy, torch, statistics
from autokernel import nn as aknn, route
from autokernel_before import nn as bknn, route as broute
route.use("triton"); broute.use("triton")
def per_call(fn, n=300):
    for _ in range(20): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e6
for fi, fo, act in ((768, 768, None), (768, 3072, "gelu_tanh"), (1024, 1024, None)):
    M = 64
    lin = torch.nn.Linear(fi, fo).cuda().bfloat16()
    base = torch.nn.Sequential(lin, *([torch.nn.GELU(approximate="tanh")] if act else []))
    mods = {"torch": base, "after": aknn.swap_linear(copy.deepcopy(base)), "before": bknn.swap_linear(copy.deepcopy(base))}
    x = torch.randn(M, fi, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, fo, device="cuda", dtype=torch.bfloat16)
    res = {k: [] for k in mods}
    for r in range(9):
        order = list(mods) if r % 2 == 0 else list(mods)[::-1]
        for k in order:
            m = mods[k]
            res[k].append(per_call(lambda: m(x).backward(dy)))
    med = {k: statistics.median(v) for k, v in res.items()}
    ratios = [b / a for a, b in zip(res["after"], res["before"])]
    print(f"{fi}x{fo} {act}: fwd+bwd µs median torch {med['torch']:.1f} before {med['before']:.1f} after {med['after']:.1f}; "
          f"before/after per round {' '.join(f'{q:.3f}' for q in ratios)} (median {statistics.median(ratios):.3f})", flush=True)
