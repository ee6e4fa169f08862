"""GPU: one training step through autokernel's Linear at the shapes users train, checked.

Two sets of cases, each one forward and one backward, then checks: the loss is finite,
and every gradient (and the output) agrees with a float32 torch reference of the same
bf16-rounded parameters and inputs, by relative Frobenius error: at most TOL, or twice
the error of torch's own bf16 step where that is larger.

- mlp: a bf16 Linear(hidden, ffn) -> SiLU -> Linear(ffn, hidden) after swap_linear (the
  SiLU fused into the first layer, whose training forward stores Z) at (M, hidden, ffn)
  in MLP_SHAPES.
- linear: a single Linear with bias and each of silu, gelu_tanh, relu and none at every
  shape of the shipped best-config file of this GPU (M, N, K: x [M, K], weight [N, K]),
  in bf16.

Each case prints one line: the shape, the config each GEMM resolved to and its source
(best.resolve: "shipped", "default", "... fitted" where shrunk to fit this mode's
shared memory), ok or FAIL (with the worst error, or the exception's first line), and
the step's median time in ms over a few steps after the first (which compiles). Exit
code 1 on any failure. Most of the run is Triton compiling each new config and mode;
cases that would start past --budget-s are skipped and counted (not failures).

Run on the device: python3 scripts/train_step_gpu.py [--only mlp|linear] [--dtype bf16|fp16|both]
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time

import torch

import autokernel
from autokernel import api, best, runtime
from autokernel.nn import swap_linear

MLP_SHAPES = [(8192, 4096, 11008), (4096, 4096, 11008), (8192, 4096, 14336), (2048, 5120, 13824)]
ACTIVATIONS = ("silu", "gelu_tanh", "relu", "none")
TOL = 2e-2
DEVICE = runtime.kernel_device()
TIMED_STEPS = 3
_TORCH_ACT = {
    "silu": torch.nn.functional.silu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "relu": torch.relu,
    "none": lambda t: t,
}


class Resolved:
    """Records what best.resolve answers while a case's plans are built: (M, N, K) and
    store_z per GEMM, with the config and its source."""

    def __init__(self):
        self.real = best.resolve
        self.calls: list[tuple] = []
        best.resolve = self

    def __call__(self, m, n, k, *args):
        config, source = self.real(m, n, k, *args)
        store_z = args[4] if len(args) > 4 else False
        self.calls.append(((m, n, k), store_z, config, source))
        return config, source

    def cache_clear(self) -> None:  # best.clear_cache clears resolve's cache
        self.real.cache_clear()

    def take(self) -> str:
        calls, self.calls = self.calls, []
        seen = []
        for (m, n, k), store_z, config, source in calls:
            text = f"{m}x{n}x{k}{' +Z' if store_z else ''}: {config.short()} [{source}]"
            if text not in seen:
                seen.append(text)
        return "; ".join(seen) or "(plans cached)"


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    got, ref = got.float(), ref.float()
    denom = ref.norm().item()
    return (got - ref).norm().item() / denom if denom > 0 else (got - ref).norm().item()


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def timed(step) -> float:
    """Median ms of TIMED_STEPS calls of ``step`` (after the one the caller already ran)."""
    times = []
    for _ in range(TIMED_STEPS):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def check(named: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> tuple[bool, str]:
    """named: {what: (ours, float32 reference, torch's bf16 result)} -> (ok, worst error in words)."""
    worst, ok = ("", 0.0, 0.0), True
    for what, (ours, ref, torch_low) in named.items():
        if ours is None or not torch.isfinite(ours).all():
            return False, f"{what} missing or not finite"
        err, base = rel_err(ours, ref), rel_err(torch_low, ref)
        ok &= err <= max(TOL, 2 * base)
        if err > worst[1]:
            worst = (what, err, base)
    return ok, f"worst {worst[0]} err {worst[1]:.2e} (torch bf16 {worst[2]:.2e})"


def mlp_case(m: int, hidden: int, ffn: int, dtype: torch.dtype, log: Resolved) -> tuple[bool, str, str, float]:
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(hidden, ffn), torch.nn.SiLU(), torch.nn.Linear(ffn, hidden))
    model = model.to(device=DEVICE, dtype=dtype)
    ref = copy.deepcopy(model).float()
    low = copy.deepcopy(model)  # torch's own bf16 step: the yardstick of the tolerance
    swap_linear(model)
    x = torch.randn(m, hidden, device=DEVICE, dtype=dtype, generator=gen)
    g = torch.randn(m, hidden, device=DEVICE, dtype=torch.float32, generator=gen) / math.sqrt(m * hidden)

    def run(net, inp):
        inp = inp.detach().requires_grad_()
        net.zero_grad(set_to_none=True)
        y = net(inp)
        loss = (y.float() * g).sum()
        loss.backward()
        grads = {"y": y.detach(), "dx": inp.grad}
        for name, p in net.named_parameters():
            grads[name] = p.grad
        return loss, grads

    loss, ours = run(model, x)
    sync()
    configs = log.take()
    _, want = run(ref, x.float())
    _, torch_low = run(low, x)
    if not math.isfinite(loss.item()):
        return False, configs, f"loss {loss.item()}", float("nan")
    ok, detail = check({k: (ours[k], want[k], torch_low[k]) for k in want})
    ms = timed(lambda: run(model, x))
    return ok, configs, detail, ms


def linear_case(m: int, n: int, k: int, activation: str, dtype: torch.dtype,
                log: Resolved) -> tuple[bool, str, str, float]:
    gen = torch.Generator(device=DEVICE).manual_seed(1)
    x = torch.randn(m, k, device=DEVICE, dtype=dtype, generator=gen)
    w = (torch.randn(n, k, device=DEVICE, dtype=torch.float32, generator=gen) / math.sqrt(k)).to(dtype)
    b = (torch.randn(n, device=DEVICE, dtype=torch.float32, generator=gen) * 0.1).to(dtype)
    g = torch.randn(m, n, device=DEVICE, dtype=torch.float32, generator=gen) / math.sqrt(m * n)
    act = _TORCH_ACT[activation]

    def run(fn, x_, w_, b_):
        x_, w_, b_ = (t.detach().requires_grad_() for t in (x_, w_, b_))
        y = fn(x_, w_, b_)
        loss = (y.float() * g).sum()
        loss.backward()
        return loss, {"y": y.detach(), "dx": x_.grad, "dw": w_.grad, "db": b_.grad}

    loss, ours = run(lambda x_, w_, b_: autokernel.linear(x_, w_, b_, activation), x, w, b)
    sync()
    configs = log.take()
    torch_fn = lambda x_, w_, b_: act(torch.nn.functional.linear(x_, w_, b_))  # noqa: E731
    _, want = run(torch_fn, x.float(), w.float(), b.float())
    _, torch_low = run(torch_fn, x, w, b)
    if not math.isfinite(loss.item()):
        return False, configs, f"loss {loss.item()}", float("nan")
    ok, detail = check({key: (ours[key], want[key], torch_low[key]) for key in want})
    ms = timed(lambda: run(lambda x_, w_, b_: autokernel.linear(x_, w_, b_, activation), x, w, b))
    return ok, configs, detail, ms


def shipped_shapes() -> list[tuple[int, int, int]]:
    path = best.SHIPPED_DIR / f"{best.device_key(runtime.device_name())}.json"
    if not path.is_file():
        print(f"# no shipped best-config file for {runtime.device_name()} ({path.name}): no linear cases")
        return []
    return sorted({(e.M, e.N, e.K) for e in best.load(path).entries})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("mlp", "linear"))
    parser.add_argument("--dtype", choices=("bf16", "fp16", "both"), default="bf16")
    parser.add_argument("--skip", type=int, default=0, metavar="N",
                        help="skip the first N cases (continue a run cut short)")
    parser.add_argument("--budget-s", type=float, default=220.0,
                        help="start no case after this many seconds (the rest print as skipped)")
    args = parser.parse_args()
    if runtime.INTERPRETER:
        print("needs a GPU (kernels run under the interpreter here)")
        return 2
    dtypes = {"bf16": [torch.bfloat16], "fp16": [torch.float16], "both": [torch.bfloat16, torch.float16]}[args.dtype]
    print(f"# {runtime.device_name()}  torch {torch.__version__}  autokernel {autokernel.__file__}  "
          f"shared memory {runtime.shared_memory_limit()} bytes", flush=True)
    log = Resolved()
    failures = cases = skipped = 0
    start = time.perf_counter()

    def report(label: str, result) -> None:
        nonlocal failures, cases
        cases += 1
        ok, configs, detail, ms = result
        failures += not ok
        print(f"{label:44} {'ok  ' if ok else 'FAIL'} {ms:8.2f} ms  {detail}  | {configs}", flush=True)

    seen = 0

    def attempt(label: str, fn, *fn_args) -> None:
        nonlocal skipped, seen
        seen += 1
        if seen <= args.skip:
            return
        if time.perf_counter() - start > args.budget_s:
            skipped += 1
            print(f"{label:44} skipped (past --budget-s {args.budget_s:.0f})", flush=True)
            return
        api.clear_launch_cache()  # each case builds its plans: resolve answers are logged per case
        try:
            report(label, fn(*fn_args, log))
        except Exception as exc:  # a launch error is this case's failure, not the run's end
            sync()
            line = str(exc).splitlines()[0] if str(exc) else ""
            report(label, (False, log.take(), f"{type(exc).__name__}: {line[:300]}", float("nan")))

    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        if args.only in (None, "mlp"):
            for m, hidden, ffn in MLP_SHAPES:
                attempt(f"mlp {name} M={m} hidden={hidden} ffn={ffn}", mlp_case, m, hidden, ffn, dtype)
        if args.only in (None, "linear"):
            for m, n, k in shipped_shapes():
                for activation in ACTIVATIONS:
                    attempt(f"linear {name} {m}x{n}x{k} bias {activation}", linear_case, m, n, k, activation, dtype)
    print(f"# {cases - failures}/{cases} ok, {skipped} skipped, in {time.perf_counter() - start:.0f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
