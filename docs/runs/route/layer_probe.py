"""Each linear layer of a GPT-2 block alone, torch's own against autokernel's on the Triton
kernels and under ``auto``: wall time (``timing.wall_race``, each of ours interleaved with
torch's) and GPU time under ``auto`` (``timing.race``), forward with grad, and forward and
backward (bfloat16; run from the repository root on the GPU machine):

    python3 docs/runs/route/layer_probe.py
"""
import sys

sys.path.insert(0, "benchmarks")

from model_step import layers_and_inputs  # noqa: E402

from autokernel import route  # noqa: E402
from autokernel.timing import race, wall_race  # noqa: E402

for name, tokens in (("gpt2", 8192), ("gpt2", 2048)):
    base, ours, xs, dys = layers_and_inputs(name, tokens)
    for i in range(len(base)):
        def step(layers, backend, phase, i=i):
            def f():
                if backend is not None and route.backend() != backend:
                    route.use(backend)
                y = layers[i](xs[i])
                if phase == "fwd+bwd":
                    y.backward(dys[i])
            return f
        for phase in ("fwd", "fwd+bwd"):
            wall = {}
            for backend in ("triton", "auto"):
                route.use(backend)
                t, o = wall_race([step(base, None, phase), step(ours, backend, phase)])
                wall[backend] = t / o
            route.use("auto")
            g = race([step(base, None, phase), step(ours, "auto", phase)], rounds=10, segment_ms=3.0)
            print(f"{name} {tokens} layer {i} {phase:8s} torch/ours wall triton {wall['triton']:.3f} "
                  f"auto {wall['auto']:.3f}; gpu auto {g[0] / g[1]:.3f} (torch {g[0] * 1e3:.1f} us)", flush=True)
