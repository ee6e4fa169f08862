"""Host time of one GPT-2 block's linear layers at 2048 tokens, by phase, on the Triton
kernels and under the backend ``auto``, beside torch's own layers (bfloat16; ms per block,
back to back from Python, median of 7 timings of 50 calls each; run from the repository root
on the GPU machine):

    python3 docs/runs/route/host_probe.py

Phases: forward under no_grad; forward with grad (the autograd graph built, no backward);
forward and backward. The host's speed drifts over seconds, so read each line's ours against
the torch figure beside it.
"""

import statistics
import sys
import time

sys.path.insert(0, "benchmarks")

import torch  # noqa: E402
from model_step import layers_and_inputs  # noqa: E402

from autokernel import route  # noqa: E402

NAME, TOKENS = "gpt2", 2048


def host_ms(f, n: int = 50) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        f()
    per_call = (time.perf_counter() - start) / n
    torch.cuda.synchronize()
    return per_call * 1e3


def phases(layers, xs, dys) -> dict:
    def fwd_no_grad():
        with torch.no_grad():
            for layer, x in zip(layers, xs):
                layer(x)

    def fwd_grad():
        for layer, x in zip(layers, xs):
            layer(x)

    def fwd_bwd():
        ys = [layer(x) for layer, x in zip(layers, xs)]
        for y, dy in zip(ys, dys):
            y.backward(dy)

    return {"fwd no_grad": fwd_no_grad, "fwd grad": fwd_grad, "fwd+bwd": fwd_bwd}


def main() -> None:
    base, ours, xs, dys = layers_and_inputs(NAME, TOKENS)
    for backend in ("triton", "auto"):
        route.use(backend)
        mine, torchs = phases(ours, xs, dys), phases(base, xs, dys)
        for name in mine:
            mine[name](), mine[name](), torchs[name]()
        for name in mine:
            a = statistics.median(host_ms(mine[name]) for _ in range(7))
            t = statistics.median(host_ms(torchs[name]) for _ in range(7))
            print(f"{backend:6s} {name:12s} ours {a:.3f} ms  torch {t:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
