"""Host time per call of torch.mm (with and without out=), autokernel.matmul and torch.add,
timed on the main thread and inside an autograd.Function's backward (the autograd engine's
device thread), 2048x768 @ 768x768 bfloat16, median of 7 blocks of 40 calls (µs). On the
GPU machine: python3 docs/runs/route/backward_thread_probe.py"""
import statistics
import time

import torch

import autokernel

dev = "cuda"
a = torch.randn(2048, 768, device=dev, dtype=torch.bfloat16)
b = torch.randn(768, 768, device=dev, dtype=torch.bfloat16)
o = torch.empty(2048, 768, device=dev, dtype=torch.bfloat16)
N = 40


def per_call_us(f) -> float:
    f()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(N):
        f()
    us = (time.perf_counter() - start) / N * 1e6
    torch.cuda.synchronize()
    return us


calls = {"torch.mm out": lambda: torch.mm(a, b, out=o), "torch.mm": lambda: torch.mm(a, b),
         "autokernel.matmul": lambda: autokernel.matmul(a, b), "torch.add": lambda: torch.add(a, a)}
res = {"main": {k: [] for k in calls}, "backward": {k: [] for k in calls}}


class Probe(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        for name, f in calls.items():
            res["backward"][name].append(per_call_us(f))
        return g


x = torch.randn(8, 8, device=dev, requires_grad=True)
for _ in range(7):
    Probe.apply(x).sum().backward()
    for name, f in calls.items():
        res["main"][name].append(per_call_us(f))
for where, d in res.items():
    print(where, {k: round(statistics.median(v), 1) for k, v in d.items()})
