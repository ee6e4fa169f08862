"""GPU: gelu_tanh and silu in the fused epilogue spelled with fewer SFU (MUFU) operations
per element (kernels/epilogue.py MATH_VARIANTS), raced against the shipped spelling and
checked for error.

The H100 retires 16 MUFU operations per clock per SM against 128 FMAs, and the shipped
gelu_tanh/silu take two per element (ex2, then the reciprocal of a division) plus ~18/10
FMA-pipe instructions; with a 128x256 fp32 tile on 256 threads that is 128 values per
thread after every tile's K loop. The variants (instructions per element in sm_90 SASS,
scripts/epilogue_sass.py with triton 3.9, 3.6 within one; "FMA-pipe" counts
FMUL/FFMA/FADD/FMNMX/FSETP/FSEL/IADD3/LEA):

  kind     MUFU  gelu_tanh FMA-pipe  silu FMA-pipe  what
  current   2    18                  10             shipped: tl.exp (ex2 + range fix-ups) and a division
  mufu2     2     5                   3             ex2.approx.ftz + rcp.approx.ftz, nothing else
  mufu1     1     5                   2             0.5 z (1 + tanh.approx(u)): cancels where tanh -> -1
  newton    1    11                   9             ex2.approx.ftz, 1/(1+e) by 2 Newton steps
  poly      1    15                  13             2^x by a degree-4 polynomial, rcp.approx.ftz
  poly0     0    20                  18             the polynomial and the Newton reciprocal

Part 1, speed. Per problem of configs/shapes/fused.csv (or those given), with the config
autokernel.matmul resolves for it, one race (timing.race: each implementation's CUDA graph
replayed round after round, interleaved) of:
  plain       our GEMM, same config, no bias, no activation
  current     our fused GEMM as shipped (api.launch, like the variants)
  <kind>      our fused GEMM with the variant spelling (gelu_tanh and silu problems)
  cuBLAS      torch.matmul (no bias)
  eager       torch.addmm + the activation
  cuBLASLt    torch._addmm_activation (relu and gelu_tanh only)
--repeats races with the order rotated; GPU µs per call are medians. Printed: µs, and
each fused implementation's cost over our plain GEMM (cuBLASLt's over cuBLAS).

Part 2, error, against float64 references act(z) = z * sigmoid(x) (x = 2u for gelu_tanh:
torch's 0.5 z (1 + tanh(u)), the same function, cancels to 0 in the negative tail even in
float64):
  sweep    every finite float16/bfloat16 value z in [-20, 20], as rows of an [M, 256]
           A times a 256x256 identity B (exact in the fp32 accumulator), zero bias, with
           the config of the first fused problem of that dtype and activation
  random   each problem's fresh random inputs; reference from float64 A @ B + bias
Columns: max |out - ref|; max |out - ref| / |ref| where |ref| > 1e-3 (and, for the sweep,
the z where it is reached); ||out - ref|| / ||ref||; % of outputs that are not ref
correctly rounded to the output dtype. "eager" is torch in the output dtype (addmm, then
the activation, computed in fp32 inside and rounded), "cuBLASLt" its fused gelu.

Usage (device): source scripts/device_env.sh && TRITON_INTERPRET=0 python3 scripts/epilogue_math.py
    [--repeats 3] [--kinds mufu2,mufu1,newton,poly,poly0] [--no-race] [--no-accuracy] [M,N,K,dtype,act ...]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
import warnings

KINDS = ("mufu2", "mufu1", "newton", "poly", "poly0")
LIMIT = 20.0  # the sweep's |z|
SWEEP_N = 256


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", help="M,N,K,dtype,activation (bias on, layout nt); default: fused.csv")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="variant kinds to run, comma-separated")
    ap.add_argument("--no-race", action="store_true")
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
    warnings.simplefilter("ignore")

    import torch

    from autokernel import api, runtime
    from autokernel.problem import Problem
    from autokernel.tuning.shapes import read_shapes

    if runtime.INTERPRETER and not args.no_race:
        # Under the interpreter only the error part runs (a smoke test of this script: the
        # variants there fall back to exact formulas).
        print("the races need a GPU (TRITON_INTERPRET=0); under the interpreter pass --no-race", file=sys.stderr)
        return 2
    if args.shapes:
        problems = []
        for text in args.shapes:
            m, n, k, dtype, act = text.split(",")
            problems.append(Problem(int(m), int(n), int(k), dtype, act, True, "nt"))
    else:
        problems = read_shapes("configs/shapes/fused.csv")
    device = runtime.kernel_device()
    configs = {p: api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, device)
               for p in problems}
    start = time.perf_counter()
    print(f"{runtime.device_name()}  torch {torch.__version__}  "
          f"triton {__import__('triton').__version__}  kinds: {', '.join(kinds)}")
    if not args.no_race:
        race_part(problems, configs, kinds, args.repeats)
        print(f"[races done at {time.perf_counter() - start:.0f} s]", flush=True)
    if not args.no_accuracy:
        accuracy_part(problems, configs, kinds, device)
    print(f"\n[done in {time.perf_counter() - start:.0f} s]")
    return 0


def impl_names(act: str, kinds) -> dict[str, str]:
    """{column: ACTIVATION constexpr} of our fused implementations for ``act``."""
    from autokernel.kernels.epilogue import MATH_VARIANTS

    names = {"current": act}
    if act in MATH_VARIANTS:
        names.update({kind: f"{act}_{kind}" for kind in kinds})
    return names


def ours(p, act_name: str, config):
    """A no-argument call of our kernel for race(): ``act_name`` may be an internal
    spelling (api.launch plans without the public name check, and caches nothing)."""
    from autokernel import api
    from autokernel.evaluate import _matmul_args
    from autokernel.timing import GRAPH_INPUT_SETS, make_input_sets

    cycle = itertools.cycle(make_input_sets(_matmul_args(p, None), p.bytes, GRAPH_INPUT_SETS))

    def call() -> None:
        a, b, bias, out = next(cycle)
        api.launch(a, b, out, bias, act_name, 0.01, config)

    return call


def race_part(problems, configs, kinds, repeats: int) -> None:
    import torch

    from autokernel.evaluate import race_call
    from autokernel.problem import Problem
    from autokernel.timing import race

    cols = ["plain", "current", *kinds, "cuBLAS", "eager", "cuBLASLt"]
    fused_cols = ["current", *kinds]
    print(f"\n== speed: GPU µs per call, median of {repeats} races; cost = over our plain GEMM "
          f"(cuBLASLt: over cuBLAS)")
    print("problem | config | " + " | ".join(cols) + " | " + " | ".join(f"{c} cost" for c in fused_cols)
          + " | cuBLASLt cost")
    ratios: dict[tuple[str, str], list[float]] = {}  # (act, kind) -> kind µs / current µs
    costs: dict[tuple[str, str], list[float]] = {}
    for p in problems:
        config = configs[p]
        plain = Problem(p.m, p.n, p.k, p.dtype, "none", False, p.layout)
        fns = {"plain": race_call(plain, "triton", config)}
        fns.update({col: ours(p, name, config) for col, name in impl_names(p.activation, kinds).items()})
        fns["cuBLAS"] = race_call(plain, "torch")
        fns["eager"] = race_call(p, "torch")
        try:
            fns["cuBLASLt"] = race_call(p, "cublaslt")
        except ValueError:
            pass
        readings = {name: [] for name in fns}
        for r in range(repeats):
            names = list(fns)
            names = names[r % len(names):] + names[:r % len(names)]
            for name, ms in zip(names, race([fns[n] for n in names])):
                readings[name].append(ms * 1e3)
        us = {name: statistics.median(v) for name, v in readings.items()}
        cells = [f"{us[c]:.1f}" if c in us else "-" for c in cols]
        cost_cells = []
        for c in fused_cols:
            if c in us:
                cost = us[c] / us["plain"] - 1
                cost_cells.append(f"{cost:+.1%}")
                costs.setdefault((p.activation, c), []).append(cost)
                ratios.setdefault((p.activation, c), []).append(us[c] / us["current"])
            else:
                cost_cells.append("-")
        lt = f"{us['cuBLASLt'] / us['cuBLAS'] - 1:+.1%}" if "cuBLASLt" in us else "-"
        print(f"{p.label()} | {config.short()} | {' | '.join(cells)} | {' | '.join(cost_cells)} | {lt}", flush=True)
        del fns
        torch.cuda.empty_cache()
    print("\nper activation and kind, over the problems: geomean of µs / current µs (below 1: faster), "
          "mean cost over plain")
    for (act, kind), v in sorted(ratios.items()):
        cost = statistics.mean(costs[act, kind])
        print(f"  {act:10s} {kind:8s} x{statistics.geometric_mean(v):.4f}  cost {cost:+.1%}  ({len(v)} problems)")


# ---- accuracy ----

def exact(z64, act: str):
    """act(z) in float64, as z * sigmoid(x): no cancellation in either tail."""
    import torch

    if act == "relu":
        return torch.relu(z64)
    if act == "gelu_tanh":
        return z64 * torch.sigmoid(2 * 0.7978845608028654 * (z64 + 0.044715 * z64 ** 3))
    if act == "silu":
        return z64 * torch.sigmoid(z64)
    raise ValueError(act)


def errors(out, ref64, z=None) -> str:
    """max abs | max rel where |ref| > 1e-3 (at z) | norm rel | % not correctly rounded,
    then, for the sweep, max abs in the negative tail (z < -2, where 1 + tanh cancels)."""
    import torch

    o = out.double()
    diff = (o - ref64).abs()
    big = ref64.abs() > 1e-3
    rel = torch.where(big, diff / ref64.abs().clamp_min(1e-3), torch.zeros_like(diff))
    i = int(rel.argmax())
    at = f" @ z={float(z.reshape(-1)[i]):+.4g}" if z is not None else ""
    norm = float(diff.norm() / ref64.norm())
    not_rn = float((out != ref64.to(out.dtype)).double().mean()) * 100
    text = f"{float(diff.max()):.3e} | {float(rel.reshape(-1)[i]):.3e}{at} | {norm:.3e} | {not_rn:.3f}%"
    if z is not None:
        text += f" | {float(diff[z < -2].max()):.3e}"
    return text


def sweep_values(dtype):
    """(every finite value of ``dtype`` in [-LIMIT, LIMIT] as [M, SWEEP_N], zero padded;
    how many there are)."""
    import torch

    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    v = bits.view(dtype).float()
    v = v[torch.isfinite(v) & (v.abs() <= LIMIT)]
    count = v.numel()
    v = torch.cat([v, torch.zeros((-count) % (SWEEP_N * 128))])
    return v.reshape(-1, SWEEP_N), count


def accuracy_part(problems, configs, kinds, device) -> None:
    import torch

    from autokernel import api
    from autokernel.evaluate import torch_function
    from autokernel.problem import Problem

    header = "impl | max abs | max rel (|ref|>1e-3) | norm rel | not RN"
    print(f"\n== error, sweep: every finite value in [-{LIMIT:g}, {LIMIT:g}] through z @ I (fp32-exact), zero bias")
    seen = set()
    for p in problems:
        key = (p.dtype, p.activation)
        if key in seen or p.activation == "relu":
            continue
        seen.add(key)
        dt = p.torch_dtype
        z, count = sweep_values(dt)
        z = z.to(device, dt)
        m = z.shape[0]
        # I as a transposed view, like the nt problems' B: the kernels compiled for their
        # races (same config, dtype, layout and divisibility) are reused.
        eye = torch.eye(SWEEP_N, device=device, dtype=dt).t()
        bias = torch.zeros(SWEEP_N, device=device, dtype=dt)
        ref = exact(z.double(), p.activation)
        sp = Problem(m, SWEEP_N, SWEEP_N, p.dtype, p.activation, True, "nt")
        print(f"\n{p.dtype} {p.activation}: {count} values (zero padded to {z.numel()}), config {configs[p].short()}"
              f"\n{header} | tail max abs (z < -2)")
        for col, name in impl_names(p.activation, kinds).items():
            out = torch.full_like(z, float("nan"))
            api.launch(z, eye, out, bias, name, 0.01, configs[p])
            print(f"{col} | {errors(out, ref, z)}")
        for kernel in ("torch", "cublaslt"):
            try:
                fn = torch_function(sp, kernel)
            except ValueError:
                continue
            print(f"{'eager' if kernel == 'torch' else 'cuBLASLt'} | {errors(fn(z, eye, bias), ref, z)}")
    print(f"\n== error, random inputs of each problem, against float64 act(A @ B + bias)")
    for p in problems:
        a, b, bias = p.make_inputs(device)
        ref = exact(torch.addmm(bias.double(), a.double(), b.double()), p.activation)
        print(f"\n{p.label()} | {configs[p].short()}\n{header}")
        for col, name in impl_names(p.activation, kinds).items():
            out = torch.full((p.m, p.n), float("nan"), device=device, dtype=p.torch_dtype)
            api.launch(a, b, out, bias, name, 0.01, configs[p])
            print(f"{col} | {errors(out, ref)}")
        for kernel in ("torch", "cublaslt"):
            try:
                fn = torch_function(p, kernel)
            except ValueError:
                continue
            print(f"{'eager' if kernel == 'torch' else 'cuBLASLt'} | {errors(fn(a, b, bias), ref)}")
        del a, b, bias, ref
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
