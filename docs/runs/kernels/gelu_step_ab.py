"""One training step of a BERT-large block's linear layers (the MLP's up projection with the
exact gelu), torch against this code and the code before (copied as ``autokernel_before``,
docs/launch.md has the step), GPU time side by side (timing.race, CUDA graphs of whole steps).
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/gelu_step_ab.py"""
import copy, sys, torch
sys.path.insert(0, "benchmarks")
from model_step import block, step_fn, MODELS
from autokernel import nn as aknn, route
from autokernel_before import nn as bknn, route as broute
from autokernel.timing import race
route.use("triton"); broute.use("triton")
for name in ("bert-large", "gpt2"):
    for tokens in (512, 2048, 8192):
        torch.manual_seed(0)
        base = block(name)
        variants = {"torch": base, "before": bknn.swap_linear(copy.deepcopy(base)), "after": aknn.swap_linear(copy.deepcopy(base))}
        xs = [torch.randn(tokens, fi, device="cuda", dtype=torch.bfloat16, requires_grad=True) for fi, *_ in MODELS[name]]
        dys = [torch.randn(tokens, fo, device="cuda", dtype=torch.bfloat16) for _, fo, *_ in MODELS[name]]
        fns = [step_fn(m, xs, dys, None) for m in variants.values()]
        for f in fns: f()
        ms = race(fns, rounds=20, segment_ms=5.0)
        us = dict(zip(variants, (t * 1e3 for t in ms)))
        print(f"{name} {tokens} tokens: GPU µs torch {us['torch']:.1f} before {us['before']:.1f} after {us['after']:.1f}; "
              f"torch/before {us['torch']/us['before']:.3f} torch/after {us['torch']/us['after']:.3f}", flush=True)
