"""Side-by-side GPU timing (timing.race, evaluate.evaluate_side_by_side): on the CPU its
refusal and fallbacks, on a GPU that it reads like-for-like work alike and twice the
work as twice the time."""

from __future__ import annotations

import pytest
import torch

from autokernel import runtime, timing
from autokernel.config import KernelConfig
from autokernel.evaluate import evaluate_side_by_side
from autokernel.problem import Problem

on_gpu = pytest.mark.skipif(runtime.INTERPRETER or not torch.cuda.is_available(), reason="needs a CUDA GPU")
on_cpu = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

SMALL = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)


@on_cpu
def test_race_needs_a_gpu():
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        timing.race([lambda: None])


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
