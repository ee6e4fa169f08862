"""benchmarks/select_sweep.py's race_checked, the check-then-race of the sweep and the GPU
probes, on the CPU: the race itself (CUDA graphs) stubbed, the checks real."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

import autokernel as ak
from autokernel.config import KernelConfig
from autokernel.records import Problem

SWEEP = Path(__file__).resolve().parents[2] / "benchmarks" / "select_sweep.py"


def _sweep_module():
    spec = importlib.util.spec_from_file_location("select_sweep_under_test", SWEEP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_run_is_checked_and_only_the_good_ones_raced(monkeypatch):
    sweep = _sweep_module()
    raced = []

    def fake_race(fns, **_):
        raced.append(len(fns))
        for fn in fns:  # each timed function runs on the cycled input sets
            fn()
        return [float(i + 1) for i in range(len(fns))]

    monkeypatch.setattr(sweep, "race", fake_race)
    p = Problem(m=9, n=24, k=40, dtype="float16", activation="gelu_tanh", bias=True, layout="nt")
    sets = [(*p.make_inputs(torch.device("cpu"), seed=s), torch.empty(9, 24, dtype=torch.float16)) for s in (1, 2)]
    config = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)

    def good(a, b, bias, out=None):
        return ak.matmul(a, b, bias, "gelu_tanh", config=config, out=out)

    def wrong(a, b, bias, out=None):
        return ak.matmul(a, b, None, "none", config=config, out=out)  # no bias, no activation

    def broken(a, b, bias, out=None):
        raise RuntimeError("launch failed\nsecond line")

    rows = [{"label": "good"}, {"label": "wrong"}, {"label": "broken"}]
    torch_ms = sweep.race_checked(p, [(rows[0], good), (rows[1], wrong), (rows[2], broken)], sets)
    assert raced == [2]  # the good run and torch
    assert rows[0]["status"] == "success" and rows[0]["rel_error"] < 2e-2 and rows[0]["gpu_ms"] == 1.0
    assert rows[1]["status"] == "incorrect" and rows[1]["rel_error"] > 2e-2 and "gpu_ms" not in rows[1]
    assert rows[2]["status"] == "RuntimeError" and rows[2]["error"] == "launch failed" and "gpu_ms" not in rows[2]
    assert torch_ms == 2.0
    records = sweep.as_record(rows, torch_ms)
    assert [r["ok"] for r in records] == [True, False, False]
    assert records[0]["gpu_us"] == 1000.0 and records[2]["cublas_us"] == 2000.0 and "status" not in records[0]


def test_race_configs_checks_each_config_through_matmul(monkeypatch):
    """The A/B probes' helper: one row per config, in order, each checked through matmul."""
    sweep = _sweep_module()
    monkeypatch.setattr(sweep, "race", lambda fns, **_: [float(i + 1) for i in range(len(fns))])
    p = Problem(m=9, n=24, k=40, dtype="float16", activation="relu", bias=True, layout="nt")
    configs = [KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=s) for s in (1, 2)]
    rows, torch_ms = sweep.race_configs(p, configs, device=torch.device("cpu"))
    assert [r["config"] for r in rows] == [c.short() for c in configs]
    assert all(r["status"] == "success" and r["rel_error"] < 2e-2 for r in rows)
    assert [r["gpu_ms"] for r in rows] == [1.0, 2.0] and torch_ms == 3.0


def test_input_sets_are_the_problems_operands_from_the_seed_on():
    sweep = _sweep_module()
    p = Problem(m=9, n=24, k=40, dtype="bfloat16", activation="none", bias=True, layout="tn")
    sets = sweep.input_sets(p, 7, torch.device("cpu"))
    assert len(sets) == 1  # the interpreter's count (timing.input_set_count)
    a, b, bias, out = sets[0]
    want = p.make_inputs(torch.device("cpu"), seed=7)
    assert all(torch.equal(x, y) for x, y in zip((a, b, bias), want))
    assert out.shape == (9, 24) and out.dtype == torch.bfloat16 and a.stride() == want[0].stride()


def test_shapes_within_stops_once_the_budget_is_spent(tmp_path, monkeypatch, capsys):
    """A probe's shapes come until its budget is spent, counted from the given start; then
    one line says so and no more come."""
    sweep = _sweep_module()
    path = tmp_path / "shapes.csv"
    path.write_text("M,N,K,dtype,activation,bias,layout\n" + "".join(f"{m},64,64,float16,none,false,nt\n" for m in (1, 2, 3)))
    clock = iter([100.0, 104.0, 111.0])
    monkeypatch.setattr(sweep.time, "time", lambda: next(clock))
    assert [p.m for p in sweep.shapes_within(str(path), 10.0, since=100.0)] == [1, 2]
    assert capsys.readouterr().out == "budget spent\n"
    monkeypatch.setattr(sweep.time, "time", lambda: 0.0)
    assert [p.m for p in sweep.shapes_within(str(path), 10.0)] == [1, 2, 3]
    assert capsys.readouterr().out == ""
