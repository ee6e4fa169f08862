"""Side-by-side GPU timing (timing.race, evaluate.evaluate_side_by_side): on the CPU its
refusal and fallbacks, on a GPU that it reads like-for-like work alike and twice the
work as twice the time."""

from __future__ import annotations

import pytest
import torch

from autokernel import runtime, timing
from autokernel.config import KernelConfig
from autokernel import evaluate as ev
from autokernel.evaluate import evaluate_side_by_side
from autokernel.records import Problem

on_gpu = pytest.mark.skipif(runtime.INTERPRETER or not torch.cuda.is_available(), reason="needs a CUDA GPU")
on_cpu = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

SMALL = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)


@on_cpu
def test_race_needs_a_gpu():
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        timing.race([lambda: None])


@on_cpu
def test_wall_race_needs_a_gpu():
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        timing.wall_race([lambda: None])


def test_wall_race_reads_host_time_per_call_side_by_side(monkeypatch):
    """Its bookkeeping, on a fake clock (the GPU's synchronization a no-op): functions that
    cost 0.2 and 0.6 ms per call read so, every function timed once per round (the
    warm-up and estimate calls aside) in the rounds' orders of ``_round_orders``, and a
    stall of the host in one round leaves the median alone."""
    import random
    import types

    monkeypatch.setattr(timing, "_ORDER", random.Random(7))
    expected = [["fast", "slow"][i] for order in _orders_from(random.Random(7), 2, 5) for i in order]

    now = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    order, stalled = [], []

    def costing(ms, name):
        def fn():
            order.append(name)
            now[0] += ms / 1e3
            if name == "slow" and len(order) > 95 and not stalled:  # once, in round 2 of 5
                stalled.append(1)
                now[0] += 0.05
        return fn

    fast, slow = timing.wall_race([costing(0.2, "fast"), costing(0.6, "slow")], rounds=5, segment_ms=4.0)
    assert fast == pytest.approx(0.2) and slow == pytest.approx(0.6)
    assert stalled  # the stall happened and did not move slow's median
    # Warm-up and estimate (fast 9 calls, slow 9), then per round a segment of each: 20
    # calls of fast (~4 ms), 8 of slow (8 at least), in the rounds' orders.
    assert order[:18] == ["fast"] * 9 + ["slow"] * 9
    segments, rest = [], order[18:]
    while rest:
        size = 20 if rest[0] == "fast" else 8
        assert rest[:size] == [rest[0]] * size
        segments.append(rest[0])
        rest = rest[size:]
    assert segments == expected


def _orders_from(rng, k: int, rounds: int) -> list[list[int]]:
    """``timing._round_orders`` drawing from ``rng``."""
    saved = timing._ORDER
    timing._ORDER = rng
    try:
        return timing._round_orders(k, rounds)
    finally:
        timing._ORDER = saved


@pytest.mark.parametrize("k, rounds", [(2, 5), (5, 10), (24, 10), (24, 11)])
def test_round_orders_put_every_function_at_the_middle_place_on_average(k, rounds):
    """Each round runs every function once; each odd round reverses the round before, so
    over each pair every function's places sum to k - 1 (the rotation before left a function
    near one place where the rounds were fewer than the functions); the even rounds are
    drawn afresh."""
    orders = timing._round_orders(k, rounds)
    assert len(orders) == rounds
    assert all(sorted(order) == list(range(k)) for order in orders)
    for r in range(1, rounds, 2):
        assert orders[r] == orders[r - 1][::-1]
        for i in range(k):
            assert orders[r - 1].index(i) + orders[r].index(i) == k - 1
    if k == 24:  # 24! orders: two equal draws would be a broken generator, not chance
        evens = [tuple(order) for order in orders[::2]]
        assert len(set(evens)) == len(evens)


@on_cpu
def test_side_by_side_under_the_interpreter_is_evaluate_of_each():
    problem = Problem(19, 23, 17, "float32", "gelu", bias=True, layout="nt")
    bad = SMALL.model_copy(update={"block_m": 4096, "block_n": 4096, "block_k": 512})  # no shared memory holds it
    trials = evaluate_side_by_side(problem, [SMALL, bad, SMALL.model_copy(update={"block_n": 32})])
    assert [t.status for t in trials][0] == "success" and trials[2].status == "success"
    assert trials[1].status != "success" and trials[1].error
    assert all(t.gpu_ms is None and t.timing == "interpreter" for t in (trials[0], trials[2]))
    assert trials[0].rel_error <= 1e-4


@on_gpu
def test_race_reads_equal_work_alike_and_double_work_as_double():
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    out = torch.empty_like(a)

    def once():
        torch.matmul(a, b, out=out)

    def twice():
        torch.matmul(a, b, out=out)
        torch.matmul(a, b, out=out)

    one, same, two = timing.race([once, once, twice])
    assert same == pytest.approx(one, rel=0.03)
    assert two / one == pytest.approx(2.0, rel=0.05)


@on_gpu
def test_side_by_side_on_a_gpu_fills_gpu_ms_and_falls_back_per_config(monkeypatch):
    problem = Problem(512, 384, 256, "float16", "relu", bias=True)
    configs = [KernelConfig(block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=3),
               KernelConfig(block_m=128, block_n=64, block_k=64, num_warps=4, num_stages=3)]
    raced = evaluate_side_by_side(problem, configs)
    assert all(t.ok and t.gpu_ms > 0 and t.ms > 0 for t in raced)

    def broken(fns, **_):
        raise RuntimeError("capture failed")

    monkeypatch.setattr("autokernel.evaluate.race", broken)
    alone = evaluate_side_by_side(problem, configs)
    assert all(t.ok and t.gpu_ms > 0 for t in alone)


def test_race_call_torch_baseline_runs_with_tf32_like_evaluate_torch(monkeypatch):
    """evaluate_torch times fp32 baselines with TF32 allowed; race_call's calls run outside
    that context, so the raced cuBLAS is full fp32 (on the H100 at 4096^3: 2.82 ms raced vs
    0.39 ms from evaluate_torch, 7.3x)."""
    seen = []
    monkeypatch.setattr(ev, "torch_function",
                        lambda problem, kernel="torch", slope=None: (lambda a, b, bias: seen.append(
                            torch.backends.cuda.matmul.allow_tf32)))
    assert torch.backends.cuda.matmul.allow_tf32 is False  # torch's default
    fn = ev.race_call(Problem(32, 32, 32, "float32"), "torch")
    fn()
    assert seen == [True]


def test_race_call_reuses_the_compiled_baseline_without_recompiling(monkeypatch):
    """_LAST_COMPILED promises 'no new autotuning', but the compile was made under
    evaluate_torch's allow_tf32=True and dynamo guards on it (GLOBAL_STATE changed:
    allow_tf32): the race's first call recompiles (max-autotune again, minutes on a GPU)."""
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **_: real(fn, backend=counter))
    problem = Problem(32, 32, 32, "float16", "relu", bias=True)
    assert ev.evaluate_torch(problem, "torch_compile").ok
    compiled = counter.frame_count
    ev.race_call(problem, "torch_compile")()
    assert counter.frame_count == compiled


def test_side_by_side_survives_a_race_call_that_raises(monkeypatch):
    """race_call (input sets: an OOM on a large problem) is built outside the try: one
    config's failure there raises out of evaluate_side_by_side, the timing worker turns the
    task into one failed Trial and WorkerEvaluator.retime fails EVERY config with it."""
    problem = Problem(19, 23, 17, "float32")
    second = SMALL.model_copy(update={"block_n": 32})

    def race_call(problem, kernel="triton", config=None, **_):
        if config == second:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return lambda: None

    monkeypatch.setattr(ev, "timing_label", lambda: "gpu")
    monkeypatch.setattr(ev, "race_call", race_call)
    monkeypatch.setattr(ev, "race", lambda fns: [1.0] * len(fns))
    monkeypatch.setattr(ev, "gpu_time", lambda fn: 1.0)
    trials = ev.evaluate_side_by_side(problem, [SMALL, second])
    assert trials[0].ok and trials[0].gpu_ms == 1.0
    assert trials[1].status == "out_of_resources"


def test_wall_trials_time_the_calls_as_a_user_makes_them(monkeypatch):
    """The wall reading's call of ours allocates its output (out=None), as torch's
    baselines do, where the GPU race's writes into its input set's buffer; torch's runs
    without the per-call TF32 switch the race wraps it in (wall_trials allows TF32 once
    around the reading). Under the interpreter wall_trials measures nothing and says so."""
    import contextlib

    seen, switched = [], []
    monkeypatch.setattr(ev, "matmul", lambda *a, out=None, **k: seen.append(out))
    monkeypatch.setattr(ev, "torch_function", lambda problem, kernel="torch", slope=None: lambda *a: None)

    @contextlib.contextmanager
    def counting():
        switched.append(1)
        yield

    monkeypatch.setattr(ev, "tf32_allowed", counting)
    problem = Problem(8, 8, 8, "float16")
    ev.race_call(problem, "triton", SMALL, wall=True)()
    ev.race_call(problem, "triton", SMALL)()
    assert seen[0] is None and isinstance(seen[1], torch.Tensor) and seen[1].shape == (8, 8)
    ev.race_call(problem, "torch", wall=True)()
    assert switched == []
    ev.race_call(problem, "torch")()
    assert switched == [1]
    if runtime.INTERPRETER:
        trials = [ev.Trial(problem, None, "success", kernel="torch", ms=1.0),
                  ev.Trial(problem, SMALL, "success", ms=1.0)]
        assert ev.wall_trials(problem, trials) is False and all(t.wall_ms is None for t in trials)
