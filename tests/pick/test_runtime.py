"""Where kernels run: with no CUDA device, under the interpreter, whatever was imported first."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine runs the kernels on the GPU")

# A model trained with autokernel's linear, its optimizer (which imports triton) made first.
MODEL = """
import torch
{first}
import autokernel

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))
opt = torch.optim.AdamW(m.parameters())  # imports triton (torch._dynamo), before autokernel's runtime
x = torch.randn(8, 32)
ref = m(x)
ref.square().sum().backward()
ref_grad = m[0].weight.grad.clone()
m.zero_grad()
autokernel.nn.swap_linear(m)
out = m(x)
out.square().sum().backward()
torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
torch.testing.assert_close(m[0].weight.grad, ref_grad, rtol=1e-4, atol=1e-4)
opt.step()

import autokernel.kernels.matmul as km
from autokernel import runtime
from triton.runtime.interpreter import InterpretedFunction

assert runtime.INTERPRETER and isinstance(km._matmul_kernel, InterpretedFunction)
print("ok")
"""


def _run(first: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-W", "error", "-c", MODEL.format(first=first)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("first", [
    "",
    "import triton, triton.language",
    "from autokernel import runtime",
], ids=["optimizer-first", "triton-first", "autokernel-first"])
def test_kernels_run_under_the_interpreter_whatever_was_imported_first(first):
    r = _run(first)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_triton_interpret_is_read_as_triton_reads_it():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    for value, expected in [("1", True), ("true", True), ("0", False), ("false", False), ("off", False)]:
        r = subprocess.run([sys.executable, "-c", "from autokernel import runtime; print(runtime.INTERPRETER)"],
                           env={**env, "TRITON_INTERPRET": value}, capture_output=True, text=True, timeout=120)
        assert r.stdout.strip() == str(expected), (value, r.stderr)
