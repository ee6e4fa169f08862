"""The timer (interpreter fallback, rotation, quantiles) and evaluate's Trial statuses."""

from __future__ import annotations

import pytest
import torch

from autokernel import runtime, timing
from autokernel.config import KernelConfig
from autokernel.evaluate import Trial, evaluate, evaluate_torch, failure_status
from autokernel.records import Problem
from autokernel.timing import Timing, input_set_count, time_fn

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

SMALL = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)


def fake_timer(fn, *, rotate=None, **_):
    """Calls fn once per input set (so launch errors surface), returns a fixed Timing."""
    for args in rotate or [()]:
        fn(*args)
    return Timing(ms=2.0, p20=1.5, p80=2.5, timing="interpreter", n=len(rotate or [()]))


def test_interpreter_timing_is_labelled_and_cycles_inputs():
    seen = []
    t = time_fn(lambda x: seen.append(x), rotate=[(0,), (1,)], reps=5)
    assert t.timing == "interpreter" and t.n == 5
    assert t.p20 <= t.ms <= t.p80
    assert seen == [0, 0, 1, 0, 1, 0]  # one warm-up call, then the sets in turn


def test_default_interpreter_repeats_are_few():
    assert time_fn(lambda: None).n == 3


def test_bad_repeat_count():
    with pytest.raises(ValueError, match="reps"):
        time_fn(lambda: None, reps=0)


def test_quantiles():
    t = timing._summary([5.0, 1.0, 3.0, 2.0, 4.0], "gpu")
    assert (t.ms, t.p20, t.p80, t.n) == (3.0, 1.8, 4.2, 5)


def test_input_sets_overflow_the_cache(monkeypatch):
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    mb = 1024 * 1024
    assert input_set_count(100 * mb, cache_bytes=50 * mb) == 1
    assert input_set_count(60 * mb, cache_bytes=50 * mb) == 2
    assert input_set_count(30 * mb, cache_bytes=50 * mb) == 4
    assert input_set_count(1 * mb, cache_bytes=50 * mb) == 8  # capped
    assert input_set_count(1 * mb, cache_bytes=50 * mb, max_sets=timing.GRAPH_INPUT_SETS) == 64
    monkeypatch.setattr(runtime, "INTERPRETER", True)
    assert input_set_count(1, cache_bytes=50 * mb) == 1


def test_rates():
    assert timing.tflops(2 * 10**12, 1000.0) == pytest.approx(2.0)
    assert timing.gbps(3 * 10**9, 1000.0) == pytest.approx(3.0)
    assert timing.tflops(1, None) is None


def test_evaluate_success_with_real_timer():
    trial = evaluate(Problem(24, 40, 20, "float16", "gelu", True), SMALL, seed=0, timer=lambda fn, **kw: time_fn(fn, reps=2, **kw))
    assert trial.status == "success" and trial.error is None
    assert trial.timing == "interpreter" and trial.ms > 0 and trial.tflops > 0
    assert trial.rel_error < 1e-2
    fields = trial.to_row()
    assert fields["kernel"] == "triton" and fields["ms_p20"] == trial.p20 and fields["M"] == 24


@pytest.mark.parametrize(
    "exc, status",
    [
        (RuntimeError("boom"), "runtime_error"),
        (pytest.importorskip("triton.runtime.errors").OutOfResources(300000, 232448, "shared memory"), "out_of_resources"),
        (pytest.importorskip("triton.compiler.errors").CompilationError("src", None, "bad"), "compile_error"),
    ],
)
def test_evaluate_failure_is_a_status_not_an_exception(monkeypatch, exc, status):
    def launch(*args, **kwargs):
        raise exc

    monkeypatch.setattr("autokernel.kernels.matmul.plan_matmul", lambda *a, **k: launch)
    trial = evaluate(Problem(16, 16, 16), SMALL, timer=fake_timer)
    assert isinstance(trial, Trial)
    assert trial.status == status and trial.ms is None
    assert type(exc).__name__ in trial.error
    assert failure_status(exc) == status


def test_compile_error_is_classified_by_the_outer_exception(monkeypatch):
    from triton.compiler.errors import CompilationError

    def launch(*args, **kwargs):
        try:
            raise ValueError("inner cause")
        except ValueError as cause:
            raise CompilationError("src", None, "wrapped") from cause

    monkeypatch.setattr("autokernel.kernels.matmul.plan_matmul", lambda *a, **k: launch)
    trial = evaluate(Problem(16, 16, 16), SMALL, timer=fake_timer)
    assert trial.status == "compile_error" and "inner cause" in trial.error


def test_evaluate_wrong_result_fails_correctness(monkeypatch):
    def launch(a, b, c, *args, **kwargs):
        c.fill_(3.0)

    monkeypatch.setattr("autokernel.kernels.matmul.plan_matmul", lambda *a, **k: launch)
    trial = evaluate(Problem(16, 16, 16), SMALL, timer=fake_timer)
    assert trial.status == "failed_correctness" and "rel_error" in trial.error and trial.ms is None


def test_evaluate_failure_while_timing(monkeypatch):
    def boom(fn, **kw):
        raise torch.cuda.OutOfMemoryError("no memory")

    trial = evaluate(Problem(16, 16, 16), SMALL, timer=boom)
    assert trial.status == "out_of_resources" and trial.rel_error is not None


def test_evaluate_config_too_big_for_shared_memory(monkeypatch):
    monkeypatch.setattr(runtime, "shared_memory_limit", lambda: 512)
    trial = evaluate(Problem(16, 16, 16), SMALL, timer=fake_timer)
    assert trial.status == "out_of_resources" and "shared memory" in trial.error


def test_torch_baselines():
    p = Problem(16, 24, 8, "float16", "relu", True)
    for kernel in ("torch", "cublaslt"):
        trial = evaluate_torch(p, kernel, seed=1, timer=fake_timer)
        assert trial.status == "success" and trial.kernel == kernel and trial.config is None and trial.ms == 2.0
    with pytest.raises(ValueError, match="cuBLASLt"):
        evaluate_torch(Problem(16, 24, 8, "float16", "silu", True), "cublaslt")


def test_torch_compile_baseline_compiles_every_problem_of_a_suite(monkeypatch):
    """Dynamo allows 8 recompiles of one function, then runs it eagerly without a word: a
    suite's 9th max-autotune row would time eager torch. Each problem gets a fresh cache."""
    from autokernel.evaluate import torch_function

    compiled = []

    def counting_backend(gm, example_inputs):
        compiled.append(gm)
        return gm.forward

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(fn, backend=counting_backend, dynamic=False))
    for m in range(1, 11):  # ten shapes: ten compiles of the same function
        p = Problem(m, 8, 8, "float32")
        a, b = torch.randn(m, 8), torch.randn(8, 8)
        torch.testing.assert_close(torch_function(p, "torch_compile")(a, b, None), a @ b)
    assert len(compiled) == 10
