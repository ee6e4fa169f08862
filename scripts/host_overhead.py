"""GPU: host time per call (the CPU side of a launch), where small problems are decided.

Runs N back-to-back calls on a 256^3 problem (GPU time per call is a few µs, so the
loop is host-bound) and reports µs per call for torch.matmul, autokernel.matmul on each
variant, the bare Triton launch of the grouped kernel, and autokernel.nn.Linear forward +
backward against torch.nn.Linear; then a cProfile of autokernel.matmul's host path.
Run on the device: source scripts/device_env.sh; python3 scripts/host_overhead.py"""
import cProfile
import pstats
import time

import torch

import autokernel as ak
from autokernel.kernels.matmul import launch_matmul

N = 2000


def per_call_us(fn, n=N):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


s = 256
a = torch.randn(s, s, device="cuda", dtype=torch.float16)
w = torch.randn(s, s, device="cuda", dtype=torch.float16)
bias = torch.randn(s, device="cuda", dtype=torch.float16)
out = torch.empty(s, s, device="cuda", dtype=torch.float16)
grouped = ak.KernelConfig(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3, variant="grouped")
tma = ak.KernelConfig(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3, variant="tma")
rows = {
    "torch.matmul": lambda: torch.matmul(a, w.t()),
    "torch addmm + gelu": lambda: torch.nn.functional.gelu(torch.addmm(bias, a, w.t())),
    "autokernel.matmul default": lambda: ak.matmul(a, w.t()),
    "autokernel.matmul grouped": lambda: ak.matmul(a, w.t(), config=grouped),
    "autokernel.matmul tma": lambda: ak.matmul(a, w.t(), config=tma),
    "autokernel.matmul grouped bias gelu out=": lambda: ak.matmul(a, w.t(), bias, "gelu", config=grouped, out=out),
    "bare launch_matmul grouped": lambda: launch_matmul(a, w.t(), out, None, "none", 0.01, grouped, False),
}
x = torch.randn(s, s, device="cuda", dtype=torch.float16, requires_grad=True)
tl_ = torch.nn.Linear(s, s, device="cuda", dtype=torch.float16)
al_ = ak.nn.Linear(s, s, activation="gelu", device="cuda", dtype=torch.float16)
rows["torch Linear+gelu fwd+bwd"] = lambda: torch.nn.functional.gelu(tl_(x)).sum().backward()
rows["autokernel nn.Linear gelu fwd+bwd"] = lambda: al_(x).sum().backward()
for name, fn in rows.items():
    print(f"{name:42s} {per_call_us(fn, 500 if 'bwd' in name else N):8.1f} us/call", flush=True)

rows2 = {
    "autokernel.linear gelu, no grad": lambda: ak.linear(a, w, bias, "gelu"),
    "autokernel.linear gelu fwd, grad on": lambda: al_(x),
    "torch linear+gelu fwd, grad on": lambda: torch.nn.functional.gelu(tl_(x)),
}
for name, fn in rows2.items():
    print(f"{name:42s} {per_call_us(fn, 500):8.1f} us/call", flush=True)


def profile(title, fn, n=300):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    prof.disable()
    print(f"==== cProfile: {title}, {n} calls")
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


profile("autokernel.matmul bias gelu", lambda: ak.matmul(a, w.t(), bias, "gelu", config=grouped))
profile("autokernel nn.Linear gelu fwd+bwd", lambda: al_(x).sum().backward())
