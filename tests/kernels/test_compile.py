"""Kernels must compile for Hopper, not only run in the interpreter."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("compile_sm90.py")


def test_kernels_compile_for_sm90():
    pytest.importorskip("triton.backends.nvidia")
    # This checkout's kernels, not those of whatever autokernel is installed.
    root = str(SCRIPT.parents[2])
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "kernel variants for sm_90" in proc.stdout
