"""torch.profiler (CPU and CUDA) over 20 eager training steps of a BERT-large block's linear
layers at 2048 tokens: autokernel's layers under auto and on the Triton kernels, and torch's
own; CPU time per op, launches included. On the GPU machine, from the repository root:

    python3 docs/runs/route/step_trace.py
"""
import sys

sys.path.insert(0, "benchmarks")

import torch  # noqa: E402
from model_step import layers_and_inputs  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from autokernel import route  # noqa: E402

for backend in ("auto", "triton", None):
    base, ours, xs, dys = layers_and_inputs("bert-large", 2048)
    layers = ours if backend else base
    route.use(backend)

    def step():
        for layer, x, dy in zip(layers, xs, dys):
            layer(x).backward(dy)

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            step()
        torch.cuda.synchronize()
    print("=====", "bert-large", backend or "torch")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60))
