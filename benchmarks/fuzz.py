"""Differential fuzz of autokernel.matmul and autokernel.linear against a float32 reference.

    python3 benchmarks/fuzz.py [--cases 400] [--seed S] [--time-budget SECONDS]   # a GPU, or the interpreter on tiny sizes
    python3 benchmarks/fuzz.py --huge                         # a GPU with 80 GB or more

A few fixed edge cases run first (a single output element in each activation's tail, K = 0
and 1, unaligned rows, column slices of aligned rows); then each case draws a problem
nobody chose: M, N, K log-uniform (a tenth of them 1), float16, bfloat16 or float32, each
operand row-major, transposed, a strided slice or a column slice of padded rows, a bias or
not, any activation, and departures from the plain call (``variation``: leaky_relu's slope
of either sign, rows of A zeroed so that pre-activations are exactly 0, C given as a view, a
float32 bias, a transposed dY, an operand that needs no gradient, a second call after the
operands' values changed in place, X as a batch of two sequences in a non-contiguous view);
the config is the one matmul picks (six cases in ten) or a candidate of the selector, or a
config of the tuner's space drawn at random. Under the interpreter the operand copies into
aligned rows are taken from any amount of work. The output is poisoned with NaN first; the case passes when every element is written and the result is within 1e-2 of the
reference (relative Frobenius error, and allclose at 1e-2) - 2e-2 for bfloat16's 8-bit
mantissa. A config refused for shared memory (ConfigError, before launch) is counted, not a
failure; any other exception is. One case in five also runs linear's forward with that config
(storing Z where backward needs it) and its backward, and checks dX, dW and db. Exit code 1 on any failure; the failing cases are printed in full.
With ``--time-budget`` no case starts after that many seconds; the summary then says how many
of the cases ran (as it does when the run is interrupted: Ctrl-C or SIGTERM, e.g. from
``timeout``), so that a run cut short still reports what it checked.

``--route-at-random`` runs the backend auto with each layout it may route sent to cuBLAS or
kept on the kernels by a coin (per layout and seed), on any machine, the CPU included: the
routed paths (torch's GEMMs behind the plans, a linear layer whose GEMMs all route run by
torch's own linear, layers split between the libraries) meet every drawn case.

Under ``AUTOKERNEL_BACKEND=auto`` the GEMMs routed to cuBLAS run as torch runs them, so the
fuzz turns off torch's reduced-precision reductions for the run (cuBLAS may otherwise sum
split-K partials in 16 bits: 0.04 off where the Triton kernels, accumulating in float32, are
0.016 off): it checks the routing (operands, strides, bias, activation, output), not torch's
precision setting.

``--huge`` runs instead a fixed set of problems whose tensors hold more than 2^31 elements
(an LM head's logits over a long batch, a long activation stack, a large weight read
transposed), each kernel path at least once (the pick, the grouped, split-K and pointer
stream-K kernels, the TMA kernel and its stream-K tail), where an element's offset overflows
32-bit index arithmetic unless the kernel computes it in 64 bits; the first also runs
linear's backward. It needs some 60 GB of GPU memory.
"""

from __future__ import annotations

import argparse
import math
import random
import signal
import sys
import time
from dataclasses import dataclass

import torch

import autokernel
from autokernel import plans, route, runtime
from autokernel.candidates import CANDIDATES, _c
from autokernel.config import ConfigError, KernelConfig
from autokernel.evaluate import compare, gradient_terms, linear_reference, reference, relative_error
from autokernel.tuning.space import SearchSpace
from autokernel.records import ACTIVATIONS, Problem

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def tolerance(dtype: torch.dtype) -> float:
    return 2e-2 if dtype == torch.bfloat16 else 1e-2


def operand(rows: int, cols: int, how: str, dtype, device, gen) -> torch.Tensor:
    """A [rows, cols] operand stored row-major ("n"), as a transposed view ("t"), as every
    other column of a wider row-major tensor ("s": a stride that is no unit), or as the
    first columns of rows padded to a multiple of 16 elements ("p": aligned rows that
    end before their stride, where a tile's wrapped columns once faulted)."""
    if how == "t":
        base = torch.randn(cols, rows, generator=gen, device=device).t()
    elif how == "s":
        base = torch.randn(rows, 2 * cols, generator=gen, device=device)[:, ::2]
    elif how == "p":
        base = torch.randn(rows, cols + 16 - cols % 16, generator=gen, device=device)[:, :cols]
    else:
        base = torch.randn(rows, cols, generator=gen, device=device)
    return base.to(dtype)


def draw(rng: random.Random, small: bool):
    cap = 96 if small else 4096

    def size(floor: int = 1) -> int:
        return 1 if rng.random() < 0.1 else max(floor, round(math.exp(rng.uniform(0, math.log(cap)))))

    m, n, k = size(), size(), size()
    dtype = rng.choice(DTYPES)
    hows = (rng.choice("ntsp"), rng.choice("ntsp"))
    bias = rng.random() < 0.5
    act = rng.choice(ACTIVATIONS)
    r = rng.random()
    if r < 0.6:
        config = None
    elif r < 0.8:
        config = rng.choice(CANDIDATES)
    else:
        space = SearchSpace.for_problem(Problem(m, n, k, "float16" if dtype == torch.float32 else str(dtype)[6:]))
        configs = space.configs()
        config = rng.choice(configs) if configs else None
    return m, n, k, dtype, hows, bias, act, config


EDGE_CASES = [
    # (m, n, k, dtype, layouts, bias, activation, config): a single output element in every
    # activation's tail (gelu_tanh's once lost 2e-2 there in bf16), K = 0 and 1, unaligned rows
    *[(1, 1, 127, torch.bfloat16, ("n", "t"), False, act, None) for act in ACTIVATIONS],
    (1, 1, 0, torch.float16, ("n", "n"), True, "gelu_tanh", None),
    (3, 5, 1, torch.float32, ("t", "s"), True, "silu", None),
    (17, 1000, 1000, torch.bfloat16, ("n", "t"), True, "gelu_tanh", None),
    # column slices of aligned rows whose width is no multiple of the load vector
    (32, 30, 40, torch.float16, ("n", "p"), False, "none", None),
    (17, 60, 36, torch.float16, ("p", "p"), True, "relu", None),
]
"""Run first, whatever the seed."""


_LOGITS = (20000, 110000, 256, torch.bfloat16, ("n", "t"), True, "gelu")
"""C of 2.2e9 elements (an LM head's logits over 20000 tokens)."""
_LONG_A = (2097155, 40, 1100, torch.float16, ("n", "t"), True, "relu")
"""A of 2.3e9 elements (2M rows of activations into a narrow layer)."""
_WIDE_B = (16, 33000, 70000, torch.bfloat16, ("n", "t"), False, "none")
"""B of 2.3e9 elements, read as nn.Linear's transposed weight (decode rows)."""
_VOCAB = (45000, 768, 50257, torch.bfloat16, ("n", "n"), False, "none")
"""A of 2.3e9 elements whose rows take no vectors (dX of a GPT-2 LM head over 45000 tokens):
matmul copies it into aligned rows (plans.Padding), a copy past 2^31 elements."""
HUGE_CASES = [
    *[(*_LOGITS, c) for c in (None, _c(128, 128, 64, 8, 4, 4), _c(128, 128, 64, 8, 4, 4, split_k=2),
                              _c(64, 128, 64, 8, 4, 4, stream_k=True),
                              _c(128, 256, 64, 8, 8, 3, "tma", flatten=True),
                              _c(128, 128, 64, 8, 4, 5, "tma", flatten=True, stream_k=True))],
    *[(*_LONG_A, c) for c in (None, _c(128, 64, 64, 8, 4, 5))],
    (*_LONG_A[:4], ("t", "n"), *_LONG_A[5:], _c(128, 64, 64, 8, 4, 5)),
    *[(*_WIDE_B, c) for c in (None, _c(16, 64, 128, 8, 4, 4, split_k=4))],
    (*_VOCAB, None),
    (_VOCAB[2], _VOCAB[1], _VOCAB[0], _VOCAB[3], ("t", "n"), *_VOCAB[5:], None),  # dW: A transposed, rows of 50257
]
"""``--huge``: tensors past 2^31 elements; the first case also runs linear's backward."""


SLOPES = (0.01, 0.2, -0.1, 0.0)
"""leaky_relu's slopes drawn: with a positive one backward reads act'(Z) off Y's sign, with
the others off a stored Z."""


@dataclass
class Variation:
    """How a case departs from the plain call, drawn for it (``variation``)."""

    slope: float = 0.01  # leaky_relu's
    zeroed: torch.Tensor | None = None  # rows of A (X) set to 0: with no bias their Z is exactly 0
    out: str = "n"  # C given as ``operand`` lays one out: dense ("n"), transposed ("t"), every other column ("s")
    bias_fp32: bool = False  # a float32 bias with 16-bit operands
    dy: str = "n"  # backward's dY dense or a transposed view ("t")
    frozen: str = ""  # "x" or "w": that operand needs no gradient
    again: bool = False  # a second call on the same tensors, their values changed in place
    batched: bool = False  # backward's X as [2, M/2, K], a non-contiguous view (a batch of sequences)

    def __str__(self) -> str:
        said = [f"slope {self.slope:g}"] if self.slope != 0.01 else []
        said += [f"{len(self.zeroed)} rows of A zeroed"] if self.zeroed is not None else []
        said += [f"out {self.out}"] if self.out != "n" else []
        said += ["float32 bias"] if self.bias_fp32 else []
        said += [f"dY {self.dy}"] if self.dy != "n" else []
        said += [f"{self.frozen} frozen"] if self.frozen else []
        said += ["called again after an update in place"] if self.again else []
        said += ["X batched"] if self.batched else []
        return " ".join(said)


def variation(act: str, rows: int, gen, device) -> Variation:
    """A case's departures from the plain call: leaky_relu's slope; in one case in six a
    quarter of A's rows zeroed (relu's and leaky_relu's derivatives jump at 0; padding tokens
    do it in training); in one in four each, C as a view, a float32 bias, dY as a transposed
    view; in one in five an operand frozen; in one in four a second call on the same tensors
    after their values changed in place (an optimizer's step: nothing may be kept by address);
    in one in six with M even, backward's X as a batch of two sequences."""
    def draw(choices):
        return choices[int(torch.randint(len(choices), (), generator=gen, device=device))]

    def chance(p: float) -> bool:
        return float(torch.rand((), generator=gen, device=device)) < p

    v = Variation(slope=draw(SLOPES) if act == "leaky_relu" else 0.01)
    if rows and chance(1 / 6):
        v.zeroed = torch.randperm(rows, generator=gen, device=device)[: max(1, rows // 4)]
    v.out = draw("ts") if chance(1 / 4) else "n"
    v.bias_fp32 = chance(1 / 4)
    v.dy = "t" if chance(1 / 4) else "n"
    v.frozen = draw("xw") if chance(1 / 5) else ""
    v.again = chance(1 / 4)
    v.batched = rows % 2 == 0 and rows > 0 and chance(1 / 6)
    return v


def _reversed_strides(shape, gen, device) -> torch.Tensor:
    """Random values of ``shape`` laid out with its dimensions reversed (a transposed view)."""
    dims = len(shape)
    return torch.randn(tuple(reversed(shape)), generator=gen, device=device).permute(*reversed(range(dims)))


def _update(tensors, gen, device) -> None:
    """New values into each tensor in place, of the same scale (an optimizer's step)."""
    with torch.no_grad():
        for t in tensors:
            if t is not None and t.numel():
                scale = t.float().square().mean().sqrt().clamp_min(0.1)  # the values' RMS
                t.copy_(torch.randn(t.shape, generator=gen, device=device) * scale)


def _bias(n: int, dtype, v: Variation, device, gen) -> torch.Tensor:
    bb = torch.randn(n, generator=gen, device=device)
    return bb if v.bias_fp32 and dtype != torch.float32 else bb.to(dtype)


def run_case(case, device, gen, vary: bool = True) -> tuple[str, str]:
    m, n, k, dtype, hows, bias, act, config = case
    v = variation(act, m, gen, device) if vary else Variation()
    a = operand(m, k, hows[0], dtype, device, gen) / max(k, 1) ** 0.5
    if v.zeroed is not None:
        a[v.zeroed] = 0
    b = operand(k, n, hows[1], dtype, device, gen)
    bb = _bias(n, dtype, v, device, gen) if bias else None
    out = operand(m, n, v.out, dtype, device, gen).fill_(float("nan"))  # poisoned, dense or a view
    for call in range(2 if v.again else 1):
        if call:
            _update((a, b, bb), gen, device)
            out.fill_(float("nan"))
        try:
            got = autokernel.matmul(a, b, bb, act, slope=v.slope, config=config, out=out)
            if device.type == "cuda":
                torch.cuda.synchronize()
        except ConfigError as exc:
            return "refused", str(exc)
        if got.data_ptr() != out.data_ptr() or got.stride() != out.stride():
            return "FAIL", f"out= not returned as given {v}".rstrip()
        ref = reference(a, b, bb, act, v.slope)
        max_abs, rel, close, written = compare(out, ref)
        tol = tolerance(dtype)
        if not (written and close and rel <= tol) and not (written and rel <= tol and max_abs <= 2 * tol):
            return "FAIL", f"rel {rel:.2e} max_abs {max_abs:.2e} written {written} (call {call + 1}) {v}".rstrip()
    return "ok", f"rel {rel:.1e}"


def run_backward(case, device, gen, vary: bool = True) -> tuple[str, str]:
    """linear's forward (with the case's config, storing Z where backward needs it) and
    backward (dX's and dW's configs picked) against float32 autograd."""
    m, n, k, dtype, hows, bias, act, config = case
    v = variation(act, m, gen, device) if vary else Variation()
    x = operand(m, k, hows[0], dtype, device, gen)
    if v.zeroed is not None:
        x[v.zeroed] = 0
    if v.batched:  # row i of the [M, K] problem is x[i % 2, i // 2]: a view no reshape undoes
        x = x.view(m // 2, 2, k).transpose(0, 1) if x.is_contiguous() else x.reshape(m // 2, 2, k).transpose(0, 1)
    x.requires_grad_(v.frozen != "x")
    w = (operand(n, k, hows[1], dtype, device, gen) / max(k, 1) ** 0.5).requires_grad_(v.frozen != "w")
    bb = _bias(n, dtype, v, device, gen).requires_grad_() if bias else None
    leaves = [x, w] + ([bb] if bias else [])
    for call in range(2 if v.again else 1):
        if call:
            _update(leaves, gen, device)
            for t in leaves:
                t.grad = None
        try:
            y = autokernel.linear(x, w, bb, act, slope=v.slope, config=config)
        except ConfigError as exc:  # storing Z can take shared memory the forward alone did not
            return "refused", f"backward: {exc}"
        if v.dy == "t":
            dy = _reversed_strides(y.shape, gen, device).to(dtype)
        else:
            dy = torch.randn(y.shape, generator=gen, device=device).to(dtype)
        y.backward(dy)
        flat = [t.detach().reshape(-1, t.shape[-1]) for t in (x, dy, y)]
        want = linear_reference(flat[0], w, bb, flat[1], act, v.slope, kernel_y=flat[2])[1:]  # not y: --huge keeps 8.8 GB less
        terms = gradient_terms(flat[0], w, bb, flat[1], act, v.slope)
        if any((t.grad is None) == t.requires_grad for t in leaves):
            return "FAIL", f"backward: gradients {[t.grad is not None for t in leaves]} for requires_grad " \
                           f"{[t.requires_grad for t in leaves]} {v}".rstrip()
        errors = [relative_error(t.grad.reshape(r.shape), r, s) for t, r, s in zip(leaves, want, terms)
                  if t.requires_grad]
        tol = 3 * tolerance(dtype)  # products of rounded operands and an activation's derivative
        worst = next((e for e in errors if not e <= tol), max(errors))  # a NaN first: max() may skip it
        if not worst <= tol:
            return "FAIL", f"backward worst rel {worst:.2e} (call {call + 1}) {v}".rstrip()
    return "ok", f"backward worst rel {worst:.2e}"


def route_at_random(seed: int) -> None:
    """The backend auto, with ``route.decide`` replaced by a coin per layout (drawn from the
    layout and the seed, so that a run repeats): forward, dX and dW GEMMs of one linear layer
    land on either library, all three on cuBLAS (torch's own linear runs the layer) or none.
    Asked with no margin (whether cuBLAS ties: ``plans.cublas_not_slower``), a layout the coin
    kept on Triton ties on a second coin, so a layer with its GEMMs split runs torch's linear
    whole too."""
    def decide(m, n, k, dtype, activation, bias, device, found, layout="nt", *args, margin=route.MARGIN, **kwargs):
        draw = random.Random(f"{seed} {m} {n} {k} {dtype} {activation} {bias} {layout}")
        coin = draw.random() < 0.5
        if not coin and margin == 0:
            coin = draw.random() < 0.5
        return route.Route("cublas" if coin else "triton", None, None, "the fuzz's coin")

    route.decide = decide
    route.use("auto")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_and_report(case, i: int, device, gen, huge: bool) -> str:
    """Runs one case (and one in five, its backward too); prints it unless it passed."""
    m, n, k, dtype, hows, bias, act, config = case
    label = (f"{m}x{n}x{k} {str(dtype)[6:]} {''.join(hows)} {'bias ' if bias else ''}{act} "
             f"{config.short() if config else 'picked'}")
    try:
        status, detail = run_case(case, device, gen, vary=not huge)
        if status == "ok" and i % 5 == 0 and m and n and (not huge or i == 0):
            status, detail = run_backward(case, device, gen, vary=not huge)
    except Exception as exc:  # any exception but a refused config is a failure
        status, detail = "FAIL", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    if status != "ok" or huge:
        print(f"{status:7s} {label}: {detail}", flush=True)
    if huge:
        torch.cuda.empty_cache()
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=None, help="default: time-based (printed)")
    ap.add_argument("--huge", action="store_true",
                    help="instead: the fixed problems whose tensors pass 2^31 elements (a GPU with 80 GB)")
    ap.add_argument("--route-at-random", action="store_true",
                    help="the backend auto, each layout it may route sent to cuBLAS or kept at random "
                         "(any machine: checks the routed paths, whatever the cuBLAS tables predict)")
    ap.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                    help="start no case after this many seconds (default: run every case)")
    args = ap.parse_args(argv)
    if args.time_budget is not None and not args.time_budget > 0:
        ap.error("--time-budget must be a positive number of seconds")
    if args.huge and runtime.INTERPRETER:
        print("error: --huge needs a CUDA GPU (tensors of 2^31 elements and more)", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    rng = random.Random(seed)
    device = runtime.kernel_device()
    gen = torch.Generator(device=device).manual_seed(seed)
    counts = {"ok": 0, "refused": 0, "FAIL": 0}
    if args.route_at_random:
        route_at_random(seed)
    cases = HUGE_CASES if args.huge else EDGE_CASES + [
        draw(rng, small=runtime.INTERPRETER) for _ in range(args.cases)]
    stopped = ""
    previous_term = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if args.huge:
            print(f"{len(cases)} problems with tensors past 2^31 elements on {runtime.device_name()}")
        else:
            print(f"seed {seed}, {len(EDGE_CASES)} edge cases and {args.cases} drawn on {runtime.device_name()}")
        if runtime.INTERPRETER and not args.huge:
            # The interpreter's problems are tiny: let them take the operand copies too, which
            # on a GPU only problems past PAD_MIN_FLOP take.
            plans.PAD_MIN_FLOP = 0
            print("interpreter: operands copied into aligned rows from any amount of work (PAD_MIN_FLOP 0)")
        if route.backend() == "auto":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
            print("backend auto: torch's reduced-precision reductions off for the run")
        start = time.monotonic()
        for i, case in enumerate(cases):
            if args.time_budget is not None and time.monotonic() - start > args.time_budget:
                stopped = f"time budget of {args.time_budget:g} s spent"
                break
            counts[run_and_report(case, i, device, gen, huge=args.huge)] += 1
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        signal.signal(signal.SIGTERM, previous_term)
    done = sum(counts.values())
    if stopped:
        print(f"stopped after {done} of {len(cases)} cases: {stopped}")
    print(f"{counts['ok']} ok, {counts['refused']} refused for shared memory, {counts['FAIL']} failed")
    if counts["FAIL"]:
        return 1
    return 130 if stopped == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
