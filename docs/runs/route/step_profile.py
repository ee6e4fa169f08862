"""Where a training step's GPU time goes, kernel by kernel (torch.profiler, CUDA kernels only):
the GPT-2 block of benchmarks/model_step.py at 2048 tokens, torch against swap_linear on the
Triton kernels. Usage: python3 docs/runs/route/step_profile.py [model] [tokens]"""
import copy
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from model_step import MODELS, block, step_fn  # noqa: E402

from autokernel import nn as aknn  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "gpt2"
tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
torch.manual_seed(0)
base = block(name)
xs = [torch.randn(tokens, i, device="cuda", dtype=torch.bfloat16, requires_grad=True) for i, *_ in MODELS[name]]
dys = [torch.randn(tokens, o, device="cuda", dtype=torch.bfloat16) for _, o, *_ in MODELS[name]]
ours = aknn.swap_linear(copy.deepcopy(base))
STEPS = 20
for label, layers, backend in (("torch", base, None), ("triton", ours, "triton")):
    step = step_fn(layers, xs, dys, backend)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    per = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name][0] += e.device_time / STEPS  # µs per step
            per[e.name][1] += 1
    total = sum(v[0] for v in per.values())
    print(f"== {label}: {total:.1f} us of kernels per step, {sum(v[1] for v in per.values()) // STEPS} launches")
    for k, (us, cnt) in sorted(per.items(), key=lambda kv: -kv[1][0])[:14]:
        print(f"  {us:8.1f} us  x{cnt // STEPS:<3d} {k[:110]}")
