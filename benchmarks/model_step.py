"""One training step of a model's linear layers, side by side: torch (``nn.Linear`` and the
activation, cuBLAS), autokernel on the Triton kernels (``autokernel.nn.swap_linear``), and
autokernel under ``AUTOKERNEL_BACKEND=auto`` (Triton or cuBLAS per GEMM, ``autokernel.route``).
On the GPU machine:

    python3 benchmarks/model_step.py --out step.jsonl [--models gpt2,bert-large,llama3-8b] [--tokens 4096,8192]

Each model is the linear layers of one transformer block, each fed its own input (tokens x
in_features, bfloat16, requiring grad as inside a network) and its own output gradient:
forward, then backward (dX, dW, db). The step's GPU time (CUDA graphs of whole steps,
interleaved rounds: ``timing.race``) and wall time per step (back to back from Python,
``timing.wall_race``: torch's step interleaved with ours, one pair per backend, since the
backend is one switch per process) for each of the three, and how many of the block's GEMMs ``auto`` ran on cuBLAS (and how
many layers torch's linear ran whole). One JSON line per model and token count, flushed as measured. Before timing,
each variant's step (outputs and every gradient) is checked against a float32 copy of the
block: past twice torch's own bfloat16 error (and 2 %), the run says so and exits 1.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys

import torch

from autokernel import nn as aknn
from autokernel import plans, route, runtime
from autokernel.timing import race, wall_race

MODELS = {  # (in, out, bias, activation module) per linear layer of one block
    "gpt2": [(768, 2304, True, None), (768, 768, True, None), (768, 3072, True, "gelu_tanh"), (3072, 768, True, None)],
    "bert-large": [(1024, 3072, True, None), (1024, 1024, True, None), (1024, 4096, True, "gelu"),
                   (4096, 1024, True, None)],
    "llama3-8b": [(4096, 6144, False, None), (4096, 4096, False, None), (4096, 14336, False, "silu"),
                  (4096, 14336, False, None), (14336, 4096, False, None)],
}


def block(name: str) -> torch.nn.ModuleList:
    layers = torch.nn.ModuleList()
    for fan_in, fan_out, bias, act in MODELS[name]:
        linear = torch.nn.Linear(fan_in, fan_out, bias=bias)
        mods = [linear] + ([] if act is None else [
            torch.nn.GELU(approximate="tanh") if act == "gelu_tanh" else torch.nn.GELU() if act == "gelu" else torch.nn.SiLU()])
        layers.append(torch.nn.Sequential(*mods))
    return layers.to("cuda", torch.bfloat16)


def step_fn(layers: torch.nn.ModuleList, xs: list, dys: list, backend: str | None):
    def step():
        if backend is not None and route.backend() != backend:
            route.use(backend)  # one switch per change of variant (it forgets the launch plans)
        for layer, x, dy in zip(layers, xs, dys):
            layer(x).backward(dy)
    return step


def layers_and_inputs(name: str, tokens: int):
    """(torch's block, its copy swapped for autokernel's layers, each layer's input, each
    layer's output gradient), seeded."""
    torch.manual_seed(0)
    base = block(name)
    xs = [torch.randn(tokens, fan_in, device="cuda", dtype=torch.bfloat16, requires_grad=True)
          for fan_in, *_ in MODELS[name]]
    dys = [torch.randn(tokens, fan_out, device="cuda", dtype=torch.bfloat16) for _, fan_out, *_ in MODELS[name]]
    return base, aknn.swap_linear(copy.deepcopy(base)), xs, dys


def _errors(layers: torch.nn.ModuleList, reference: torch.nn.ModuleList, xs: list, dys: list) -> tuple[float, str]:
    """The step's largest error against the float32 ``reference`` and where it is: over every
    layer's output, input gradient, weight and bias gradients, |got - want| / max |want|."""
    worst, where = 0.0, ""
    for i, (layer, ref, x, dy) in enumerate(zip(layers, reference, xs, dys)):
        xb = x.detach().clone().requires_grad_(True)
        layer.zero_grad(set_to_none=True)
        y = layer(xb)
        y.backward(dy)
        xr = x.detach().float().requires_grad_(True)
        ref.zero_grad(set_to_none=True)
        yr = ref(xr)
        yr.backward(dy.float())
        pairs = [("output", y, yr), ("input gradient", xb.grad, xr.grad)] + [
            (f"{name} gradient", p.grad, q.grad)
            for (name, p), q in zip(layer.named_parameters(), ref.parameters())]
        for what, got, want in pairs:
            err = ((got.float() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
            if err >= worst:
                worst, where = err, f"layer {i} {what.rpartition('.')[2]}"
    return worst, where


def check(base: torch.nn.ModuleList, ours: torch.nn.ModuleList, xs: list, dys: list) -> dict:
    """Each variant's step against a float32 copy of the block, on the timed inputs."""
    reference = copy.deepcopy(base).float()
    errors = {}
    for backend, layers in ((None, base), ("triton", ours), ("auto", ours)):
        route.use(backend)
        key = backend or "torch"
        errors[f"{key}_max_err"], errors[f"{key}_worst_at"] = _errors(layers, reference, xs, dys)
    route.use(None)
    return errors


def wrong(errors: dict) -> list[str]:
    """The variants whose error is past twice torch's own bfloat16 error (and 2 %)."""
    bound = max(2 * errors["torch_max_err"], 0.02)
    return [k.removesuffix("_max_err") for k, v in errors.items() if k.endswith("_max_err") and v > bound]


def on_cublas() -> tuple[int, int]:
    """(GEMMs that ran on cuBLAS, layers that torch's linear ran whole) in the layers planned
    since the launch plans were last cleared: three GEMMs of each layer run whole, and each
    routed one of the others (``TorchLaunch``; the plans ``auto`` made only to ask whether a
    layer runs whole do not count)."""
    whole = routed = 0
    for entry in plans._LINEARS.values():
        if entry.on_torch:
            whole += 1
            routed += 3
            continue
        run = [entry.train] + [p for bp in entry.backward.values() for p in (bp.dx, bp.dw)]
        routed += sum(p is not None and p.on_torch for p in run)
    return routed, whole


def measure(name: str, tokens: int) -> dict:
    base, ours, xs, dys = layers_and_inputs(name, tokens)
    errors = check(base, ours, xs, dys)
    steps = [step_fn(base, xs, dys, None), step_fn(ours, xs, dys, "triton"), step_fn(ours, xs, dys, "auto")]
    route.use("auto")
    plans.clear_launch_cache()
    steps[2]()
    routed, whole = on_cublas()
    planned = 3 * len(MODELS[name])
    gpu = race(steps, rounds=20, segment_ms=5.0)
    # Wall time: torch's step interleaved with each of ours in turn (the host's speed drifts
    # over seconds: variants timed one after the other read up to 1.8x apart). A pair keeps
    # one backend, so no switch (which forgets the launch plans) falls inside its rounds.
    torch_triton = wall_race([steps[0], steps[1]])
    torch_auto = wall_race([steps[0], steps[2]])
    wall = [torch_triton[0], torch_triton[1], torch_auto[1]]
    wall_torch_auto = torch_auto[0]
    flop = sum(6 * tokens * fan_in * fan_out for fan_in, fan_out, *_ in MODELS[name])
    return {"model": name, "tokens": tokens, "device": runtime.device_name(), "gemm_plans": planned,
            "routed_to_cublas": routed, "layers_whole_on_torch": whole, "flop": flop,
            **{f"{k}_gpu_ms": v for k, v in zip(("torch", "triton", "auto"), gpu)},
            **{f"{k}_wall_ms": v for k, v in zip(("torch", "triton", "auto"), wall)},
            "torch_wall_ms_beside_auto": wall_torch_auto, **errors}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tokens", default="4096,8192")
    args = ap.parse_args(argv)
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        print(f"error: unknown model {unknown[0]!r}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    try:
        tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        print(f"error: --tokens takes integers separated by commas, got {args.tokens!r}", file=sys.stderr)
        return 2
    if runtime.INTERPRETER:
        print("error: the step is timed on a GPU", file=sys.stderr)
        return 2
    print(f"{'model':12} {'tokens':>6} {'torch/triton':>13} {'torch/auto':>11} {'GEMMs on cuBLAS':>16}  (GPU time; wall)")
    failed = []
    with open(args.out, "w") as f:
        for name in models:
            for t in tokens:
                r = measure(name, t)
                f.write(json.dumps(r) + "\n")
                f.flush()
                print(f"{name:12} {t:6d} {r['torch_gpu_ms'] / r['triton_gpu_ms']:13.3f} "
                      f"{r['torch_gpu_ms'] / r['auto_gpu_ms']:11.3f} {r['routed_to_cublas']:>9d} of {r['gemm_plans']:<4d}"
                      f"  (wall {r['torch_wall_ms'] / r['triton_wall_ms']:.3f}, "
                      f"{r['torch_wall_ms_beside_auto'] / r['auto_wall_ms']:.3f}; largest error "
                      f"{r['torch_max_err']:.2g}, {r['triton_max_err']:.2g}, {r['auto_max_err']:.2g})",
                      flush=True)
                for variant in wrong(r):
                    failed.append(f"{name} at {t} tokens: {variant}'s step is off by {r[variant + '_max_err']:.3g} "
                                  f"of the float32 reference's largest value (torch's: {r['torch_max_err']:.3g})")
    route.use(None)
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
