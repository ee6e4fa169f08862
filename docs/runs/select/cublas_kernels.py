"""cuBLAS's kernels (name, µs per call) for each problem of a shapes file, by torch.profiler, on the GPU:

    python3 docs/runs/select/cublas_kernels.py SHAPES.csv > OUT.txt
"""
import sys

import torch
from torch.profiler import profile, ProfilerActivity
from autokernel.tuning.shapes import read_shapes
for p in read_shapes(sys.argv[1]):
    a, b, _ = p.make_inputs("cuda", seed=1)
    for _ in range(3): torch.mm(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10): torch.mm(a, b)
        torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = {}
    for e in evs:
        names.setdefault(e.name, []).append(e.device_time)
    desc = "; ".join(f"{n[:90]} {sum(t)/len(t):.1f}us x{len(t)//10}" for n, t in names.items())
    print(f"{p.m}x{p.n}x{p.k} {p.dtype} {p.layout}: {desc}", flush=True)
