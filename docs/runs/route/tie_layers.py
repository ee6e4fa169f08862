"""Each row of a shapes CSV as a one-layer block of ``benchmarks/model_step.py`` (tokens M,
out N, in K; bfloat16; activations none, gelu, gelu_tanh, silu): torch, Triton and ``auto``
side by side, GPU time and wall time of a training step, each step checked against a
float32 block. On the GPU machine, from the repository root:

    python3 docs/runs/route/tie_layers.py SHAPES.csv OUT.jsonl BUDGET_S
"""
import json
import sys
import time

sys.path.insert(0, "benchmarks")

import model_step  # noqa: E402

from autokernel.tuning.shapes import read_shapes  # noqa: E402

start = time.monotonic()
with open(sys.argv[2], "w") as out:
    for i, p in enumerate(read_shapes(sys.argv[1])):
        if p.activation not in ("none", "gelu", "gelu_tanh", "silu"):
            continue
        if time.monotonic() - start > float(sys.argv[3]):
            break
        name = f"L{i}"
        model_step.MODELS[name] = [(p.k, p.n, p.bias, None if p.activation == "none" else p.activation)]
        r = model_step.measure(name, p.m)
        r.update(m=p.m, n=p.n, k=p.k, activation=p.activation, bias=p.bias)
        out.write(json.dumps(r) + "\n")
        out.flush()
        print(f"{p.m}x{p.n}x{p.k} {p.activation} bias={p.bias}: torch / auto GPU "
              f"{r['torch_gpu_ms'] / r['auto_gpu_ms']:.3f}, wall {r['torch_wall_ms_beside_auto'] / r['auto_wall_ms']:.3f}"
              f" (Triton {r['torch_gpu_ms'] / r['triton_gpu_ms']:.3f}, {r['torch_wall_ms'] / r['triton_wall_ms']:.3f})",
              flush=True)
