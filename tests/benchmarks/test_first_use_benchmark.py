"""benchmarks/first_use.py on the CPU: tiny shapes under the interpreter, the whole path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_first_use_benchmark_runs_the_path_on_tiny_shapes(tmp_path):
    out = tmp_path / "first_use.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "first_use.py"), "--smoke", "--n", "2",
                           "--out", str(out)], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["best_ms"] <= min(row["pick_ms"], row["first_use_ms"]) and row["torch_ms"] > 0
        assert row["first_call_s"] > 0 and row["raced_configs"] >= 1
    assert "first use / best" in proc.stdout and "torch / pick" in proc.stdout


def test_first_use_benchmark_needs_a_gpu_without_smoke(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "first_use.py"), "--out", os.devnull],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and "GPU" in proc.stderr
