"""The one timer: GPU event timing (median, L2 flushed, inputs rotated) and the interpreter fallback.

On a CUDA device every timed call is preceded by a write over a buffer larger than L2,
so each repeat starts with a cold cache, and the caller's input sets are cycled so that
consecutive calls also read different memory. Under Triton's interpreter the kernels run
as Python on the CPU: a few wall-clock repeats, labelled ``timing="interpreter"`` so they
are never compared with GPU timings.

``gpu_time`` is the other reading of one function, for ranking: the GPU time per call
without the host's launch cost, from many calls replayed in one CUDA graph. ``race``
takes that reading of several functions at once, interleaved, for a side-by-side verdict.
``wall_race`` takes the third: time per call of calls made back to back from Python, host
and GPU together, as a program's loop sees it; above the GPU time, a call is host-bound.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import torch

from autokernel import runtime

GPU = "gpu"
INTERPRETER = "interpreter"

_FLUSH_BYTES = 256 * 1024 * 1024  # several times any current L2 (50 MB on H100)
_MIN_REPS = 10  # enough for the p20/p80 to mean something
_MAX_REPS = 1000
_INTERPRETER_REPS = 3
MAX_INPUT_SETS = 8
GRAPH_INPUT_SETS = 64
"""The most input sets worth rotating through a CUDA graph (see gpu_time): there no flush
runs between calls, so rotation alone keeps a call's operands out of L2."""
_GRAPH_REP_MS = 20.0


@dataclass(frozen=True)
class Timing:
    """One timed function: median and the 20th/80th percentiles, in milliseconds.

    ``timing`` says how it was measured: "gpu" (CUDA events) or "interpreter" (CPU wall
    clock under Triton's interpreter); ``n`` is the number of timed calls.
    """

    ms: float
    p20: float
    p80: float
    timing: str
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


def timing_label() -> str:
    """How timings are taken in this process: "gpu" or "interpreter"."""
    return INTERPRETER if runtime.INTERPRETER else GPU


def _quantile(sorted_ms: list[float], q: float) -> float:
    pos = q * (len(sorted_ms) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)


def _summary(samples_ms: list[float], label: str) -> Timing:
    s = sorted(samples_ms)
    return Timing(ms=_quantile(s, 0.5), p20=_quantile(s, 0.2), p80=_quantile(s, 0.8), timing=label, n=len(s))


def input_set_count(bytes_per_set: int, cache_bytes: int | None = None, max_sets: int = MAX_INPUT_SETS) -> int:
    """How many input sets to rotate so that together they overflow the L2 cache twice.

    One set when a set alone does (or under the interpreter), at most ``max_sets`` (8:
    time_fn flushes L2 anyway; GRAPH_INPUT_SETS for gpu_time, which cannot).
    """
    if runtime.INTERPRETER:
        return 1
    if cache_bytes is None:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        cache_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 1024 * 1024)
    return max(1, min(max_sets, math.ceil(2 * cache_bytes / max(bytes_per_set, 1))))


def make_input_sets(
    factory: Callable[[int], Sequence[Any]], bytes_per_set: int, max_sets: int = MAX_INPUT_SETS
) -> list[Sequence[Any]]:
    """Call ``factory(i)`` for as many sets as :func:`input_set_count` asks; pass the result as ``rotate``."""
    return [factory(i) for i in range(input_set_count(bytes_per_set, max_sets=max_sets))]


def time_fn(
    fn: Callable[..., Any],
    *,
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
    rotate: Sequence[Sequence[Any]] | None = None,
    reps: int | None = None,
) -> Timing:
    """Time ``fn``: called as ``fn()``, or as ``fn(*args)`` with ``args`` cycling over ``rotate``.

    On the GPU: warm-up for about ``warmup_ms``, then about ``rep_ms`` of timed calls (at
    least 10, at most 1000; exactly ``reps`` when given), each alone between two CUDA
    events after an L2 flush. Under the interpreter: one warm-up call (it compiles),
    then ``reps`` (default 3) wall-clock calls. Exceptions from ``fn`` propagate.
    """
    arg_sets: Sequence[Sequence[Any]] = rotate if rotate else [()]
    if reps is not None and reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    if runtime.INTERPRETER:
        return _time_interpreter(fn, arg_sets, reps or _INTERPRETER_REPS)
    return _time_gpu(fn, arg_sets, warmup_ms, rep_ms, reps)


def _time_interpreter(fn, arg_sets, reps: int) -> Timing:
    fn(*arg_sets[0])
    samples = []
    for i in range(reps):
        args = arg_sets[i % len(arg_sets)]
        start = time.perf_counter()
        fn(*args)
        samples.append((time.perf_counter() - start) * 1e3)
    return _summary(samples, INTERPRETER)


def _time_gpu(fn, arg_sets, warmup_ms: float, rep_ms: float, reps: int | None) -> Timing:
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    n_sets = len(arg_sets)

    # Estimate one call's time (compilation and handle creation happen in the first call).
    fn(*arg_sets[0])
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(5):
        flush.zero_()
        fn(*arg_sets[i % n_sets])
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-3)

    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_rep = reps if reps is not None else min(_MAX_REPS, max(_MIN_REPS, int(rep_ms / estimate_ms)))
    for i in range(n_warmup):
        fn(*arg_sets[i % n_sets])

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        flush.zero_()
        starts[i].record()
        fn(*arg_sets[i % n_sets])
        ends[i].record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    del flush
    return _summary(samples, GPU)


def gpu_time(
    fn: Callable[..., Any], *, rotate: Sequence[Sequence[Any]] | None = None, rep_ms: float = _GRAPH_REP_MS
) -> float:
    """GPU milliseconds per call of ``fn`` without the host's launch cost (CUDA GPU only).

    Triton's ``do_bench_cudagraph``: as many calls as fill about ``rep_ms`` (from an
    eager estimate, at least one) are captured back to back in one CUDA graph, with
    ``args`` cycling over ``rotate``; the graph is replayed ten times and the median
    replay divided by the number of calls. No L2 flush runs between the calls (it would
    be timed with them): rotate over make_input_sets(..., max_sets=GRAPH_INPUT_SETS) so
    that a call rarely finds its operands cached; a problem whose 64 sets together fit
    in L2 is timed with a warm cache. Exceptions from ``fn`` or the capture propagate.
    """
    if runtime.INTERPRETER:
        raise RuntimeError("gpu_time needs a CUDA GPU; under the interpreter use time_fn")
    from triton.testing import do_bench_cudagraph

    arg_sets = itertools.cycle(rotate if rotate else [()])
    return float(do_bench_cudagraph(lambda: fn(*next(arg_sets)), rep=rep_ms, return_mode="median"))


RACE_ROUNDS = 30
RACE_SEGMENT_MS = 2.0


_ORDER = random.Random()


def _round_orders(k: int, rounds: int) -> list[list[int]]:
    """The order in which each of ``rounds`` rounds runs ``k`` functions: a fresh random order
    each even round, reversed in the odd round after it, so that over each pair every function
    sits at the middle place on average and follows no fixed neighbour. Rounds each rotated
    one place (the order before) kept a function near one place where the rounds are fewer
    than the functions, and at the power cap a function's place moved its time: the same
    kernel listed early and late in one race of 24 functions read 3-4 % slower late on two
    3.9-TFLOP problems (geomean of six races, in each of two runs), 0.1 % with this order
    (single races 0.976-1.028); no place moved it on problems of 0.55 TFLOP and less (H100,
    docs/runs/timing/race_order_h100.jsonl)."""
    orders = []
    for r in range(rounds):
        orders.append(_ORDER.sample(range(k), k) if r % 2 == 0 else orders[-1][::-1])
    return orders


def race(fns: Sequence[Callable[[], Any]], *, rounds: int = RACE_ROUNDS,
         segment_ms: float = RACE_SEGMENT_MS) -> list[float]:
    """GPU milliseconds per call of each of ``fns``, measured side by side (CUDA GPU only).

    Each function gets a CUDA graph of as many back-to-back calls as fill about
    ``segment_ms`` (estimated from a graph of four calls); then ``rounds`` rounds replay every graph
    once between two events, in a random order each even round and that order reversed in
    the round after (``_round_orders``). A function's figure is its summed replay time over
    its summed calls. One round lasts len(fns) x ``segment_ms``, far less than the second or
    so over which the H100's SM clock swings by ~15 % at its power cap (docs/tuning.md), so
    every function runs through the same clock phases and their ratios hold where one
    timing after another would not. As in gpu_time, no L2 flush runs between calls: let each
    fn cycle over input sets. Exceptions from a function or a capture propagate.
    """
    if runtime.INTERPRETER:
        raise RuntimeError("race needs a CUDA GPU; under the interpreter use time_fn")
    if not fns:
        return []

    def captured(fn, n: int) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n):
                fn()
        graph.replay()  # the first replay uploads the graph
        return graph

    def replay_ms(graph: torch.cuda.CUDAGraph) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    graphs, calls = [], []
    for fn in fns:
        fn()  # compile, allocate, warm
        torch.cuda.synchronize()
        probe = 4  # GPU time per call from a small graph: eager calls of a small problem time the host
        n = max(1, math.ceil(segment_ms / max(replay_ms(captured(fn, probe)) / probe, 1e-3)))
        graphs.append(captured(fn, n))
        calls.append(n)
    torch.cuda.synchronize()
    k = len(graphs)
    marks = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(k)]
             for _ in range(rounds)]
    for r, order in enumerate(_round_orders(k, rounds)):
        for i in order:
            marks[r][i][0].record()
            graphs[i].replay()
            marks[r][i][1].record()
    torch.cuda.synchronize()
    return [sum(marks[r][i][0].elapsed_time(marks[r][i][1]) for r in range(rounds)) / (rounds * calls[i])
            for i in range(k)]


WALL_ROUNDS = 11
WALL_SEGMENT_MS = 10.0


def wall_race(fns: Sequence[Callable[[], Any]], *, rounds: int = WALL_ROUNDS,
              segment_ms: float = WALL_SEGMENT_MS) -> list[float]:
    """Milliseconds per call of each of ``fns`` called back to back from Python: the host's
    launch path and the GPU together, no CUDA graph, no flush, no synchronization between
    calls (CUDA GPU only). Where the host takes longer per call than the GPU, the GPU
    waits and this exceeds the call's GPU time (race): the call is host-bound.

    Each round times, per function and in ``race``'s orders of the rounds, as many
    calls as fill about ``segment_ms`` between two synchronizations (the last call's GPU
    tail and the synchronization, a few µs, spread over them); a function's figure is its
    median over ``rounds`` rounds, so a stall of the host in one round does not move it.
    Exceptions from a function propagate."""
    if runtime.INTERPRETER:
        raise RuntimeError("wall_race needs a CUDA GPU; under the interpreter use time_fn")

    def segment_ms_per_call(fn, n: int) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3 / n

    counts = []
    for fn in fns:
        fn()  # compile, allocate, warm
        per_call_ms = max(segment_ms_per_call(fn, 8), 1e-4)
        counts.append(max(8, min(5000, math.ceil(segment_ms / per_call_ms))))
    k = len(fns)
    per_round = [[0.0] * rounds for _ in range(k)]
    for r, order in enumerate(_round_orders(k, rounds)):
        for i in order:
            per_round[i][r] = segment_ms_per_call(fns[i], counts[i])
    return [sorted(times)[rounds // 2] for times in per_round]


def tflops(flops: int, ms: float | None) -> float | None:
    """TFLOP/s from a FLOP count and a time in milliseconds."""
    if ms is None or ms <= 0:
        return None
    return flops / (ms * 1e-3) / 1e12


def gbps(nbytes: int, ms: float | None) -> float | None:
    """GB/s (1e9 bytes) from a byte count and a time in milliseconds."""
    if ms is None or ms <= 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9
