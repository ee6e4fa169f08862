"""Correctness of one (problem, config) against a float32 torch reference."""

from __future__ import annotations

import contextlib
import functools
import itertools
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

import math

import torch
import torch.nn.functional as F

from autokernel import runtime
from autokernel.api import matmul, tma_runs_for, torch_activation
from autokernel.config import ConfigError, KernelConfig, check_fits, default_config
from autokernel.records import Problem, Trial, fresh_seed  # noqa: F401  (Trial re-exported: the record every evaluation produces)
from autokernel.timing import (
    GPU, GRAPH_INPUT_SETS, MAX_INPUT_SETS, Timing, gpu_time, make_input_sets, race, tflops, time_fn, timing_label,
    wall_race,
)

# The pass criterion: relative error and allclose, both at 1e-2 (the seeds' criterion).
REL_TOL = 1e-2
ATOL = 1e-2
RTOL = 1e-2
LEAKY_SLOPE = 0.01


reference_activation = torch_activation
"""The activation in torch, for references and baselines."""


@contextlib.contextmanager
def _matmul_tf32(allowed: bool):
    """torch's fp32 matmuls with TF32 ``allowed`` or not within, as before after."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def reference(a, b, bias, activation: str, slope: float = LEAKY_SLOPE) -> torch.Tensor:
    """act(A @ B + bias) in float32 from the (upcast) operands; true fp32, not tf32."""
    with _matmul_tf32(False):
        z = a.float() @ b.float()
    if bias is not None:
        z = z + bias.float()
    return reference_activation(z, activation, slope)


@dataclass
class CheckResult:
    problem: Problem
    config: KernelConfig
    max_abs_diff: float | None
    rel_error: float | None
    allclose: bool
    all_written: bool
    passed: bool
    error: str | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["problem"] = self.problem.to_dict()
        d["config"] = self.config.model_dump()
        return d


def error_line(exc: BaseException) -> str:
    """One line for an exception. Triton's CompilationError wraps the real cause
    (``__cause__``) behind a source excerpt, so report the innermost cause."""
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    lines = [ln.strip() for ln in str(root).splitlines() if ln.strip()]
    return f"{type(root).__name__}: {lines[0] if lines else ''}"[:300]


def compare(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, bool, bool]:
    """(max_abs_diff, rel_error, allclose, all_written) of out against a float32 ref.

    ``out`` must have been poisoned with NaN before the launch: a NaN left in it is an
    element nobody wrote (a real NaN in the result fails allclose either way).
    """
    got = out.float()
    all_written = not bool(torch.isnan(got).any()) or bool(torch.isnan(ref).any())
    if got.numel() == 0:
        return 0.0, 0.0, True, True
    max_abs = float((got - ref).abs().max())
    close = bool(torch.allclose(got, ref, atol=ATOL, rtol=RTOL))
    return max_abs, relative_error(got, ref), close, all_written


def relative_error(got: torch.Tensor, ref: torch.Tensor, terms: torch.Tensor | None = None) -> float:
    """||got - ref|| / ||ref|| in float32 (the absolute norm when ref is all zeros); NaN
    anywhere gives NaN, which no ``<=`` bound accepts. With ``terms`` (the root sum of
    squares of the terms each element of ref sums: ``gradient_terms``) the norm is the larger
    of ||ref|| and ||terms||: rounding errs in proportion to the terms, and where they cancel
    the sum can be far smaller than they are."""
    got, ref = got.detach().float(), ref.detach().float()
    diff = float((got - ref).norm())
    ref_norm = float(ref.norm())
    if terms is not None:
        ref_norm = max(ref_norm, float(terms.detach().float().norm()))
    return diff / ref_norm if ref_norm > 0 else diff


def problem_default(problem: Problem) -> KernelConfig:
    """The default config autokernel.matmul falls back to for ``problem``'s operands as
    ``Problem.make_inputs`` stores them: ``default_config`` told whether the TMA kernel
    takes them (``api.tma_runs_for``), so that a skinny 16-bit problem's default is its
    thin TMA tile there, as in ``best.pick``."""
    return _fallback(problem.m, problem.n, problem.k, problem.torch_dtype, problem.layout)


def linear_defaults(problem: Problem) -> tuple[KernelConfig, KernelConfig, KernelConfig]:
    """The defaults ``problem_default`` gives the three GEMMs of an nn.Linear training step
    on ``problem`` (X [M, K], the weight [N, K]), laid out as ``linear`` runs them: the
    forward [M, N] = X @ W^T (nt), dX [M, K] = dY @ W (nn), dW [N, K] = dY^T @ X (tn)."""
    m, n, k, dt = problem.m, problem.n, problem.k, problem.torch_dtype
    return _fallback(m, n, k, dt, "nt"), _fallback(m, k, n, dt, "nn"), _fallback(n, k, m, dt, "tn")


def _fallback(m: int, n: int, k: int, dtype: torch.dtype, layout: str) -> KernelConfig:
    return default_config(m, n, k, dtype, gpu=not runtime.INTERPRETER, tma=tma_runs_for(m, n, k, dtype, layout))


def check_correctness(
    problem: Problem, config: KernelConfig | None = None, *, seed: int | None = None, slope: float = LEAKY_SLOPE
) -> CheckResult:
    """Run the kernel once on fresh random inputs into a NaN-poisoned output and compare.

    Never raises for a kernel failure: the error is in the result.
    """
    if config is None:
        config = problem_default(problem)
    device = runtime.kernel_device()
    try:
        a, b, bias = problem.make_inputs(device, seed)
        out = torch.full((problem.m, problem.n), float("nan"), dtype=problem.torch_dtype, device=device)
        matmul(a, b, bias, problem.activation, slope=slope, config=config, out=out)
        if device.type == "cuda":
            torch.cuda.synchronize()
        ref = reference(a, b, bias, problem.activation, slope)
    except Exception as exc:  # a failed launch is a result, not a crash
        return CheckResult(problem, config, None, None, False, False, False, error_line(exc))
    max_abs, rel, close, written = compare(out, ref)
    passed = close and written and rel <= REL_TOL
    return CheckResult(problem, config, max_abs, rel, close, written, passed)


# --- evaluate: correctness, then timing, as one Trial ---------------------------------

_COMPILE_ERRORS = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "PTXASError"}
_RESOURCE_ERRORS = {"OutOfResources", "OutOfMemoryError", "ConfigError"}  # ConfigError: the smem check

TORCH_KERNELS = ("torch", "cublaslt", "torch_compile")
"""Baselines: eager torch (addmm/matmul, then the activation), cuBLASLt's fused epilogue
(torch._addmm_activation: relu, and gelu — tanh-approximate on CUDA, exact on the CPU), and
torch.compile(mode="max-autotune-no-cudagraphs") of the eager function."""


def failure_status(exc: BaseException) -> str:
    """The Trial status for an exception raised while building, launching or timing a kernel."""
    return _status_for_names(cls.__name__ for cls in type(exc).__mro__)


def _status_for_names(names: Iterable[str]) -> str:
    names = set(names)
    if names & _RESOURCE_ERRORS:
        return "out_of_resources"
    if names & _COMPILE_ERRORS:
        return "compile_error"
    return "runtime_error"


def check_status(check: CheckResult) -> str:
    """The Trial status of a correctness check: success, failed_correctness or the error's kind
    (from the class name that starts the error line: the innermost cause, so best effort)."""
    if check.error:
        return _status_for_names([check.error.split(":", 1)[0]])  # the message starts with the class name
    return "success" if check.passed else "failed_correctness"


def _correctness_failure(max_abs: float, rel: float, close: bool, written: bool) -> str:
    why = []
    if not written:
        why.append("some outputs were never written")
    if rel > REL_TOL:
        why.append(f"rel_error {rel:.3g} > {REL_TOL:g}")
    if not close:
        why.append(f"not allclose (max |diff| {max_abs:.3g})")
    return "; ".join(why) or "failed the correctness check"


def _timed(
    trial: Trial, problem: Problem, fn: Callable, make_args: Callable[[int], tuple], timer, graph: bool = False
) -> Trial:
    """Fill ``trial`` with the timing of ``fn`` over rotated input sets, or a failure status;
    with ``graph`` on a GPU, ``gpu_ms`` too (timing.gpu_time over the same sets)."""
    graph = graph and timing_label() == GPU
    try:
        sets = make_input_sets(make_args, problem.bytes, GRAPH_INPUT_SETS if graph else MAX_INPUT_SETS)
        t: Timing = timer(fn, rotate=sets)
        trial.gpu_ms = gpu_time(fn, rotate=sets) if graph else None
    except Exception as exc:  # a failed launch is a result, not a crash
        trial.status, trial.error = failure_status(exc), error_line(exc)
        return trial
    trial.ms, trial.p20, trial.p80, trial.timing = t.ms, t.p20, t.p80, t.timing
    trial.tflops = tflops(problem.flops, t.ms)
    return trial


def _input_factory(problem: Problem, seed: int | None) -> Callable[[int], tuple]:
    """``make(i) -> (a, b, bias)``: input set i, fresh random or drawn from seed + i."""
    device = runtime.kernel_device()
    return lambda i: problem.make_inputs(device, None if seed is None else seed + i)


def _matmul_args(problem: Problem, seed: int | None) -> Callable[[int], tuple]:
    """``make_args(i) -> (a, b, bias, out)``: input set i + 1 of the problem (set 0, the
    seed itself, is the correctness check's) and an uninitialised output."""
    make = _input_factory(problem, seed)

    def make_args(i: int) -> tuple:
        a, b, bias = make(i + 1)
        return a, b, bias, torch.empty((problem.m, problem.n), dtype=problem.torch_dtype, device=a.device)

    return make_args


def launch_once(
    problem: Problem, config: KernelConfig, *, seed: int | None = None, slope: float = LEAKY_SLOPE
) -> Trial | None:
    """Compile the kernel for ``problem`` with ``config`` and launch it once on random
    inputs: None when that worked, else the failed Trial (out_of_resources,
    compile_error or runtime_error) with the error.

    The failure is classified from the exception itself (check_correctness keeps only a
    line of text). On a GPU the compiled binary is left in Triton's on-disk cache, where
    another process launching the same problem and config only loads it (tuning.worker
    compiles candidates in parallel this way).
    """
    trial = Trial(problem, config, "success", timing=timing_label())
    try:
        check_fits(config, problem.torch_dtype, bias=problem.bias)
    except ConfigError as exc:
        trial.status, trial.error = "out_of_resources", str(exc)
        return trial
    try:
        a, b, bias, out = _matmul_args(problem, seed)(0)
        matmul(a, b, bias, problem.activation, slope=slope, config=config, out=out)
        if out.is_cuda:
            torch.cuda.synchronize()
    except Exception as exc:  # a failed launch is a result, not a crash
        trial.status, trial.error = failure_status(exc), error_line(exc)
        return trial
    return None


def evaluate(
    problem: Problem,
    config: KernelConfig | None = None,
    *,
    seed: int | None = None,
    slope: float = LEAKY_SLOPE,
    timer: Callable[..., Timing] = time_fn,
    graph_time: bool = False,
) -> Trial:
    """Check the Triton kernel for ``problem`` with ``config`` (default: ``problem_default``), then time it.

    Correctness comes first (check_correctness on fresh random inputs); only a passing
    kernel is timed, on other random inputs rotated as timing.make_input_sets decides.
    With ``graph_time`` on a GPU, ``gpu_ms`` is measured too (timing.gpu_time), which is
    what tuning ranks by. Never raises for a kernel failure: the Trial's status and error
    say what went wrong.
    """
    if config is None:
        config = problem_default(problem)
    failed = launch_once(problem, config, seed=seed, slope=slope)
    if failed is not None:
        return failed
    trial = Trial(problem, config, "success", timing=timing_label())
    make_args = _matmul_args(problem, seed)

    def run(a, b, bias, out):
        matmul(a, b, bias, problem.activation, slope=slope, config=config, out=out)

    check = check_correctness(problem, config, seed=seed, slope=slope)
    trial.rel_error, trial.max_abs_diff = check.rel_error, check.max_abs_diff
    trial.status = check_status(check)
    if check.error:
        trial.error = check.error
        return trial
    if not check.passed:
        trial.error = _correctness_failure(check.max_abs_diff, check.rel_error, check.allclose, check.all_written)
        return trial
    if problem.m == 0 or problem.n == 0:
        return trial  # nothing to launch, nothing to time
    return _timed(trial, problem, run, make_args, timer, graph_time)


def evaluate_side_by_side(
    problem: Problem,
    configs: Iterable[KernelConfig],
    *,
    seed: int | None = None,
    slope: float = LEAKY_SLOPE,
    timer: Callable[..., Timing] = time_fn,
) -> list[Trial]:
    """``evaluate`` each config (check, then the event timer), then take the GPU time of
    those that passed side by side, interleaved (timing.race; each over input sets drawn
    as the graph timer draws them): the reading that decides between configs a few per
    cent apart. Where the race itself fails (a capture error), each config's gpu_ms is
    taken alone as evaluate does; where that fails too, the config's trial fails. Without
    a GPU: ``evaluate`` of each."""
    trials = [evaluate(problem, config, seed=seed, slope=slope, timer=timer) for config in configs]
    if timing_label() != GPU:
        return trials
    timed, fns = [], []
    for trial in trials:
        if not (trial.ok and trial.ms is not None):
            continue
        try:  # its input sets can run out of memory: that config fails, not the batch
            fns.append(race_call(problem, "triton", trial.config, seed=seed, slope=slope))
            timed.append(trial)
        except Exception as exc:
            trial.status, trial.error = failure_status(exc), error_line(exc)
    if not timed:
        return trials
    try:
        for trial, ms in zip(timed, race(fns)):
            trial.gpu_ms = ms
    except Exception as exc:  # one config's capture failed: each alone, as evaluate times them
        for trial, fn in zip(timed, fns):
            trial.note = f"timed alone, the race failed ({error_line(exc)})"
            try:
                trial.gpu_ms = gpu_time(fn)
            except Exception as alone:  # not ``exc``: the loop reads the race's error again
                trial.status, trial.error = failure_status(alone), error_line(alone)
    return trials


def race_trials(problem: Problem, trials: Iterable[Trial], *, slope: float = LEAKY_SLOPE) -> bool:
    """Give the successful forward trials of ``problem`` (ours by their configs, torch's by
    their kernels) their gpu_ms from one side-by-side reading (timing.race), in place.
    False, with nothing changed, where fewer than two qualify or there is no GPU; an error
    of the race propagates, the trials unchanged."""
    timed = _side_by_side(trials)
    if timed is None:
        return False
    times = race([race_call(problem, t.kernel, t.config, slope=slope) for t in timed])
    for trial, ms in zip(timed, times):
        trial.gpu_ms = ms
    return True


def _side_by_side(trials: Iterable[Trial], kernels: tuple[str, ...] = ("triton", *TORCH_KERNELS)) -> list[Trial] | None:
    """The trials a side-by-side reading (race_trials, wall_trials, the training readings)
    times: the successful ones of ``kernels`` (ours and torch's baselines); None where fewer
    than two or no GPU."""
    timed = [t for t in trials if t.ok and t.ms is not None and t.kernel in kernels]
    return timed if timing_label() == GPU and len(timed) >= 2 else None


def wall_trials(problem: Problem, trials: Iterable[Trial], *, slope: float = LEAKY_SLOPE) -> bool:
    """Give the successful forward trials of ``problem`` their wall_ms, calls back to back
    with the host's launch path included, from one side-by-side reading (timing.wall_race)
    of the calls race_trials times as a user makes them (race_call's ``wall``), in place. False, with nothing changed, where fewer than
    two qualify or there is no GPU; an error propagates, the trials unchanged."""
    timed = _side_by_side(trials)
    if timed is None:
        return False
    calls = [race_call(problem, t.kernel, t.config, slope=slope, wall=True) for t in timed]
    with tf32_allowed():  # once around the reading: per call it would be timed as torch's host time
        times = wall_race(calls)
    for trial, ms in zip(timed, times):
        trial.wall_ms = ms
    return True


def race_call(problem: Problem, kernel: str = "triton", config: KernelConfig | None = None, *,
              seed: int | None = None, slope: float = LEAKY_SLOPE, wall: bool = False) -> Callable[[], object]:
    """One implementation of ``problem`` as a call with no arguments for timing.race: our
    kernel with ``config`` (kernel "triton") or a torch baseline (TORCH_KERNELS), each call
    on the next of the input sets the CUDA-graph timer would rotate through (GRAPH_INPUT_SETS).
    Ours writes into its set's output buffer; torch's allows TF32 around each call.

    With ``wall`` the calls are a user's, for the wall reading (wall_trials): ours
    allocates its result per call as torch's baselines do (matmul's ``out=`` adds a
    memory-overlap check per call), and torch's runs without switching TF32 on and off
    around each call (4 µs of host time per call on a CPU): the caller allows it once
    around the whole reading."""
    if kernel == "triton" and not wall:
        sets = make_input_sets(_matmul_args(problem, seed), problem.bytes, GRAPH_INPUT_SETS)
        cycle = itertools.cycle(sets)

        def ours() -> None:
            a, b, bias, out = next(cycle)
            matmul(a, b, bias, problem.activation, slope=slope, config=config, out=out)

        return ours
    make = _input_factory(problem, seed)
    cycle = itertools.cycle(make_input_sets(lambda i: make(i + 1), problem.bytes, GRAPH_INPUT_SETS))
    if kernel == "triton":
        return lambda: matmul(*next(cycle), problem.activation, slope=slope, config=config)
    fn = torch_function(problem, kernel, slope=slope)
    if wall:
        return lambda: fn(*next(cycle))

    def baseline() -> object:
        with tf32_allowed():  # as evaluate_torch checked and timed it (and compiled it: dynamo guards on it)
            return fn(*next(cycle))

    return baseline


def tf32_allowed():
    """TF32 allowed for torch's fp32 matmuls within, as our kernels' fp32 dot uses it: torch
    baselines are checked and timed so, like for like."""
    return _matmul_tf32(True)


_LAST_COMPILED: dict[tuple, Callable] = {}
"""The torch.compile baseline of the latest problem (one entry), reused when asked again."""


def torch_function(problem: Problem, kernel: str = "torch", *, slope: float = LEAKY_SLOPE) -> Callable:
    """``f(a, b, bias) -> C`` computing the problem with a torch baseline (see TORCH_KERNELS).

    Raises ValueError when ``kernel`` cannot compute this problem (cuBLASLt's epilogue
    has relu and one gelu only, and needs a bias).
    """
    if kernel not in TORCH_KERNELS:
        raise ValueError(f"unknown torch kernel {kernel!r}; choose one of {', '.join(TORCH_KERNELS)}")
    act = problem.activation

    def eager(a, b, bias):
        z = torch.addmm(bias, a, b) if bias is not None else torch.matmul(a, b)
        return reference_activation(z, act, slope) if act != "none" else z

    if kernel == "torch":
        return eager
    if kernel == "torch_compile":
        key = (problem, slope)
        if key in _LAST_COMPILED:  # the same problem again (a side-by-side race): the same compiled
            return _LAST_COMPILED[key]  # function, no new autotuning if called as before (tf32_allowed)
        # Every problem recompiles ``eager`` (new dtype, shape or activation), and past
        # dynamo's recompile limit (8 per function) it silently runs eagerly: a fresh cache
        # per problem keeps the 9th problem of a suite compiled.
        torch._dynamo.reset()
        _LAST_COMPILED.clear()  # compiled before the reset: not to be reused
        # No CUDA graphs: replaying one copies every new input into the graph's static
        # buffers, which the timer's input rotation would then measure.
        _LAST_COMPILED[key] = torch.compile(eager, mode="max-autotune-no-cudagraphs", dynamic=False)
        return _LAST_COMPILED[key]
    if act not in cublaslt_activations() or not problem.bias:
        raise ValueError(
            f"cuBLASLt's fused epilogue has {' and '.join(cublaslt_activations())} with a bias; "
            f"not {act} {'with' if problem.bias else 'without'} bias"
        )
    use_gelu = act != "relu"
    return lambda a, b, bias: torch._addmm_activation(bias, a, b, use_gelu=use_gelu)


def cublaslt_activations() -> tuple[str, str]:
    """The activations torch._addmm_activation fuses here: its gelu is tanh-approximate on
    CUDA (the cuBLASLt GELU epilogue) and exact on the CPU (torch's own decomposition)."""
    return ("relu", "gelu") if runtime.kernel_device().type == "cpu" else ("relu", "gelu_tanh")


def evaluate_torch(
    problem: Problem,
    kernel: str = "torch",
    *,
    seed: int | None = None,
    slope: float = LEAKY_SLOPE,
    timer: Callable[..., Timing] = time_fn,
    graph_time: bool = False,
) -> Trial:
    """Check and time a torch baseline for ``problem``, the same way evaluate does the kernel
    (``graph_time`` as there: gpu_ms to compare with a tuned kernel's).

    fp32 baselines run with TF32 allowed, like the Triton kernel's fp32 dot, so that the
    comparison is like for like. Raises ValueError only for a kernel that cannot compute
    the problem at all (see torch_function); a failure while running is a Trial status.
    """
    fn = torch_function(problem, kernel, slope=slope)
    trial = Trial(problem, None, "success", kernel=kernel, timing=timing_label())
    with tf32_allowed():
        make = _input_factory(problem, seed)
        try:  # inputs too large for memory are a failed trial too, not a crash
            a, b, bias = make(0)
            out = fn(a, b, bias)
            if out.is_cuda:
                torch.cuda.synchronize()
            ref = reference(a, b, bias, problem.activation, slope)
        except Exception as exc:
            trial.status, trial.error = failure_status(exc), error_line(exc)
            return trial
        max_abs, rel, close, _ = compare(out, ref)
        trial.rel_error, trial.max_abs_diff = rel, max_abs
        if not (close and rel <= REL_TOL):
            trial.status, trial.error = "failed_correctness", _correctness_failure(max_abs, rel, close, True)
            return trial
        if problem.m == 0 or problem.n == 0:
            return trial
        return _timed(trial, problem, fn, lambda i: make(i + 1), timer, graph_time)


# --- forward + backward of the linear layer (bench --backward) --------------------------

TRAINING_KERNELS = ("torch_autograd", "triton_autograd")
"""Forward + backward of Y = act(X W^T + b): torch.nn.functional.linear and the torch
activation through autograd, or autokernel.linear (Triton forward and backward)."""


def _training_tolerance(problem: Problem) -> float:
    # fp32 runs as tf32 in the kernels (docs/backward.md).
    return 3e-2 if problem.dtype == "float32" else REL_TOL


KINKED = ("relu", "leaky_relu")
"""The activations whose derivative jumps at 0."""


def gradient_terms(x, w, b, dy, activation: str, slope: float = LEAKY_SLOPE) -> tuple:
    """The scale of each gradient's rounding error, float32: per element of dX, dW (and db),
    the root sum of squares of the terms it sums, sqrt(dZ^2 @ W^2), sqrt(dZ^2^T @ X^2) (and
    sqrt of dZ^2's column sums), dZ the gradient at the pre-activation. Terms of random
    sign sum to about this much, so it changes nothing there; where a few terms cancel it
    keeps a correct result from reading as wrong (db over 5 rows whose dZ lie near silu's
    turning point summed to 1/4 of it: torch's own bfloat16 step erred 6 % of that sum)."""
    with _matmul_tf32(False):
        xf, wf = x.detach().float(), w.detach().float()
        z = F.linear(xf, wf, None if b is None else b.detach().float()).requires_grad_()
        dz2 = torch.autograd.grad(reference_activation(z, activation, slope), z, dy.float())[0].square()
        terms = (dz2 @ wf.square(), dz2.t() @ xf.square()) + ((dz2.sum(0),) if b is not None else ())
    return tuple(t.sqrt() for t in terms)


def linear_reference(x, w, b, dy, activation: str, slope: float = LEAKY_SLOPE, kernel_y=None) -> tuple:
    """float32 ``act(x @ w.T + b)`` and its gradients for ``dy``: (y, dx, dw) and db where
    ``b`` is given, from float32 copies of the operands (TF32 off).

    With ``kernel_y`` (the output of the step checked) and a kinked activation, the
    derivative takes the side of 0 that the kernel's forward took: a pre-activation
    within rounding of 0 may fall on the other side in float32 than in the kernel (float32
    runs as TF32 there), and on a small problem that one element moves dW by several per
    cent. The side is the forward's decision, checked with y itself: y > 0 where z > 0, for
    relu and a slope of 0 or more (a negative slope makes y positive on both sides; there
    the float32 z decides).

    A smooth activation's derivative (gelu, gelu_tanh, silu) is taken at z rounded to the
    operands' dtype: the step stores Z so, as torch's autograd saves its 16-bit input, and
    near the derivative's zero (silu's at z = -1.28) that rounding alone moves it by 10 % of
    itself, in torch's own bfloat16 step as in the kernels."""
    with _matmul_tf32(False):
        xf, wf = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
        bf = b.detach().float().requires_grad_() if b is not None else None
        z = F.linear(xf, wf, bf)
        y = reference_activation(z, activation, slope)
        if kernel_y is not None and activation in KINKED and (activation == "relu" or slope >= 0):
            below = 0.0 if activation == "relu" else slope
            dz = dy.float() * torch.where(kernel_y.detach().float() > 0, 1.0, below)
        elif activation in KINKED or activation == "none" or x.dtype == torch.float32:
            return (y.detach(), *torch.autograd.grad(y, [t for t in (xf, wf, bf) if t is not None], dy.float()))
        else:
            stored = z.detach().to(x.dtype).float().requires_grad_()
            dz = torch.autograd.grad(reference_activation(stored, activation, slope), stored, dy.float())[0]
        grads = (dz @ wf.detach(), dz.t() @ xf.detach()) + ((dz.sum(0),) if b is not None else ())
    return (y.detach(), *grads)


def _training_step(problem: Problem, kernel: str, config: KernelConfig | None, seed: int | None,
                   slope: float) -> tuple[Callable, Callable[[int], tuple], KernelConfig | None]:
    """(step(x, w, b, dy) -> (y, dx, dw[, db]), make(i) -> input set i, the forward GEMM's
    config) of one training step of ``problem`` with ``kernel``, as evaluate_linear_training
    describes: ``config`` None runs all three of ours with their defaults (``linear_defaults``)."""
    if kernel not in TRAINING_KERNELS:
        raise ValueError(f"unknown training kernel {kernel!r}; choose one of {', '.join(TRAINING_KERNELS)}")
    from autokernel.api import linear

    device = runtime.kernel_device()
    dt = problem.torch_dtype
    act = problem.activation
    dx_config = dw_config = None
    if kernel == "triton_autograd" and config is None:
        config, dx_config, dw_config = linear_defaults(problem)
    fresh = fresh_seed()

    def make(i: int):
        gen = torch.Generator().manual_seed((seed if seed is not None else fresh) + i)
        x = torch.randn(problem.m, problem.k, generator=gen).to(device, dt).requires_grad_()
        w = (torch.randn(problem.n, problem.k, generator=gen) / max(problem.k, 1) ** 0.5).to(device, dt)
        b = torch.randn(problem.n, generator=gen).to(device, dt).requires_grad_() if problem.bias else None
        dy = torch.randn(problem.m, problem.n, generator=gen).to(device, dt)
        return x, w.requires_grad_(), b, dy

    def step(x, w, b, dy):
        if kernel == "torch_autograd":
            y = reference_activation(F.linear(x, w, b), act, slope)
        else:
            y = linear(x, w, b, act, slope=slope, config=config, dx_config=dx_config, dw_config=dw_config)
        inputs = [x, w] + ([b] if b is not None else [])
        return (y, *torch.autograd.grad(y, inputs, dy))

    return step, make, (config if kernel == "triton_autograd" else None)


def race_training_trials(problem: Problem, runs: Iterable[tuple[Trial, KernelConfig | None]], *,
                         slope: float = LEAKY_SLOPE) -> bool:
    """Give the successful training-step trials of ``problem`` their gpu_ms, GPU time per
    step with no launch cost, from one side-by-side reading (timing.race: each step's
    forward and backward captured in a CUDA graph, the graphs replayed in interleaved
    rounds), in place. ``runs``: (trial, the ``config`` evaluate_linear_training was given).
    False, with nothing changed, where fewer than two succeeded or there is no GPU; an error
    (a step that cannot be captured) propagates, the trials unchanged."""
    return _training_reading(problem, runs, race, "gpu_ms", slope)


def wall_training_trials(problem: Problem, runs: Iterable[tuple[Trial, KernelConfig | None]], *,
                         slope: float = LEAKY_SLOPE) -> bool:
    """Give the successful training-step trials of ``problem`` their wall_ms, one step per
    call back to back with the host's work included (autograd, launches), from one
    side-by-side reading (timing.wall_race: rounds interleaved, each trial's median), in
    place. ``runs`` and the answer as race_training_trials."""
    return _training_reading(problem, runs, wall_race, "wall_ms", slope)


def _training_reading(problem: Problem, runs: Iterable[tuple[Trial, KernelConfig | None]], reader: Callable,
                      field: str, slope: float) -> bool:
    """One side-by-side reading (``reader``: race or wall_race) of the training steps of
    ``runs``' successful trials, each step on one fixed input set, stored in each trial's
    ``field``."""
    runs = list(runs)
    given = {id(t): c for t, c in runs}
    timed = _side_by_side([t for t, _ in runs], TRAINING_KERNELS)
    if timed is None:
        return False
    calls = []
    for trial in timed:
        step, make, _ = _training_step(problem, trial.kernel, given[id(trial)], None, slope)
        calls.append(functools.partial(step, *make(1)))
    for trial, ms in zip(timed, reader(calls)):
        setattr(trial, field, ms)
    return True


def evaluate_linear_training(
    problem: Problem,
    kernel: str = "triton_autograd",
    config: KernelConfig | None = None,
    *,
    seed: int | None = None,
    slope: float = LEAKY_SLOPE,
    timer: Callable[..., Timing] = time_fn,
) -> Trial:
    """Check and time one forward + backward step of act(X W^T + b) with ``kernel``.

    The problem reads as an nn.Linear: X is [M, K], the weight [N, K], the bias [N]
    (problem.bias). ``config`` is the forward GEMM's; None runs all three GEMMs (forward,
    dX, dW) with their defaults (``linear_defaults``), where a config given leaves dX's and dW's to linear
    (the tuned lookup, else the default). Correctness: Y and the gradients of X, W (and b) against float32
    autograd on upcast inputs; ``rel_error`` is the worst of them (a gradient's over the
    larger of its norm and its terms', ``gradient_terms``). ``tflops`` counts the
    three GEMMs (6·M·N·K). Failures are a Trial status, never an exception.
    """
    step, make, config = _training_step(problem, kernel, config, seed, slope)
    act = problem.activation
    device = runtime.kernel_device()
    trial = Trial(problem, config, "success", kernel=kernel, timing=timing_label())
    try:
        x, w, b, dy = make(0)
        got = step(x, w, b, dy)
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # a failed launch is a result, not a crash
        trial.status, trial.error = failure_status(exc), error_line(exc)
        return trial
    try:
        refs = linear_reference(x, w, b, dy, act, slope, kernel_y=got[0])
        terms = (None, *gradient_terms(x, w, b, dy, act, slope))
    except Exception as exc:  # the float32 reference may not fit where the step did
        trial.status, trial.error = failure_status(exc), error_line(exc)
        return trial
    errors = [relative_error(g, r, t) for g, r, t in zip(got, refs, terms)]
    tol = _training_tolerance(problem)
    # The worst error, NaN first: max() would skip a NaN that isn't the first element.
    worst = next((i for i, e in enumerate(errors) if math.isnan(e)), max(range(len(errors)), key=errors.__getitem__))
    trial.rel_error = errors[worst]
    trial.max_abs_diff = max((float((g.detach().float() - r.detach()).abs().max()) for g, r in zip(got, refs)
                              if g.numel()), default=0.0)
    if not trial.rel_error <= tol:
        trial.status = "failed_correctness"
        trial.error = f"rel_error of {['y', 'dx', 'dw', 'db'][worst]} {trial.rel_error:.3g} > {tol:g}"
        return trial
    if problem.m == 0 or problem.n == 0:
        return trial
    trial = _timed(trial, problem, step, lambda i: make(i + 1), timer)
    trial.tflops = tflops(3 * problem.flops, trial.ms)
    return trial
