"""benchmarks/suite.py run as a program under the interpreter: its rows, refusals, --resume,
a tuned config timed beside the default, and `autokernel report` on what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from autokernel import runtime
from autokernel.cli import app
from tests.helpers import ROOT, write_best

SUITE = ROOT / "benchmarks" / "suite.py"
runner = CliRunner()

# Runs the suite as __main__ with the cuBLASLt baseline made to fail, so that a failed
# implementation is seen to cost a row, not the run.
FLAKY_CUBLASLT = """
import runpy, sys
import autokernel.evaluate as ev
real = ev.evaluate_torch
def flaky(problem, kernel="torch", **kw):
    if kernel == "cublaslt":
        raise RuntimeError("synthetic failure")
    return real(problem, kernel, **kw)
ev.evaluate_torch = flaky
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU test: kernels run under the interpreter")


def _suite(*args: str, flaky: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    head = ["-c", FLAKY_CUBLASLT, str(SUITE)] if flaky else [str(SUITE)]
    return subprocess.run([sys.executable, *head, *args, "--interpret"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def test_suite_rows_refusals_resume_and_report(tmp_path):
    suite = tmp_path / "tiny.csv"
    suite.write_text("M,N,K,dtype,activation,bias,layout\n32,16,32,float16,none,false,nn\n"
                     "16,32,16,float32,relu,true,nt\n")
    out = tmp_path / "out.jsonl"
    proc = _suite(str(suite), "--out", str(out), flaky=True)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["M"], r["impl"], r["status"]) for r in rows] == [
        (32, "triton", "success"), (32, "cublas", "success"),
        (16, "triton", "success"), (16, "eager", "success"), (16, "cublaslt", "runtime_error")]
    assert rows[-1]["error"] == "RuntimeError: synthetic failure"
    assert {r["timing"] for r in rows} == {"interpreter"} and all(r["gpu_ms"] is None for r in rows)
    assert rows[0]["config_source"] == "default" and rows[0]["config"]["block_m"] > 0
    assert rows[0]["command"].startswith("python3 benchmarks/suite.py ")
    assert all(r["ms"] > 0 and r["tflops"] > 0 for r in rows if r["status"] == "success")
    assert "speedup (wall)" in proc.stdout

    # The file exists now: refused without --append, nothing lost; a bad suite file costs no run.
    before = out.read_text()
    assert _suite(str(suite), "--out", str(out)).returncode == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("M,N\n1,2\n")
    proc = _suite(str(bad), "--out", str(tmp_path / "new.jsonl"))
    assert proc.returncode == 2 and "missing K" in proc.stderr
    assert out.read_text() == before and not (tmp_path / "new.jsonl").exists()

    # --resume measures only what is missing: here the relu problem, whose last row is dropped.
    out.write_text("\n".join(before.splitlines()[:-1]) + "\n")
    proc = _suite(str(suite), "--out", str(out), "--resume", flaky=True)
    assert proc.returncode == 0, proc.stderr
    again = [json.loads(line) for line in out.read_text().splitlines()[4:]]
    assert [(r["M"], r["impl"]) for r in again] == [(16, "triton"), (16, "eager"), (16, "cublaslt")]
    assert "1 problems already measured" in proc.stdout

    result = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "B.md"), "--plots-dir", str(tmp_path / "img")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "img" / "tiny.png").is_file()
    assert "runtime_error" in (tmp_path / "B.md").read_text()


def test_suite_times_the_default_beside_a_tuned_config(tmp_path):
    from autokernel.config import KernelConfig

    tuned = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")
    config_file = tmp_path / "best.json"
    write_best(config_file, {"M": 32, "N": 16, "K": 32, "config": tuned.model_dump()})
    suite = tmp_path / "tiny.csv"
    suite.write_text("M,N,K,dtype\n32,16,32,float16\n32,16,32,float32\n")
    out = tmp_path / "out.jsonl"
    proc = _suite(str(suite), "--out", str(out), env={"AUTOKERNEL_CONFIG": str(config_file)})
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["dtype"], r["impl"], r["config_source"]) for r in rows] == [
        ("float16", "triton", "env"), ("float16", "triton_default", "default"), ("float16", "cublas", None),
        ("float32", "triton", "default"), ("float32", "cublas", None)]  # no fp32 entry: the default alone
    assert rows[0]["config"] == tuned.model_dump() and rows[1]["config"] != rows[0]["config"]
    assert all(r["status"] == "success" for r in rows)


def test_the_suite_times_the_pick_matmul_makes_for_the_problem_s_layout(monkeypatch):
    """The Triton row is the config matmul resolves for the operands as the suite lays them
    out: the problem's layout and whether the TMA kernel takes them, not a square nn stand-in."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import suite as suite_module

    from autokernel import api, best
    from autokernel.tuning.shapes import Problem

    asked = []
    monkeypatch.setattr(api, "tma_runs_for", lambda m, n, k, dtype, layout: layout == "nt")
    monkeypatch.setattr(best, "resolve", lambda *args: asked.append(args) or ("config", "selected"))
    for layout in ("nt", "nn"):
        problem = Problem(64, 4096, 4096, "bfloat16", layout=layout)
        assert suite_module.matmul_config(problem) == ("config", "selected")
    assert [(a[0], a[1], a[2], a[-2], a[-1]) for a in asked] == [(64, 4096, 4096, True, "nt"),
                                                                  (64, 4096, 4096, False, "nn")]
