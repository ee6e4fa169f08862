import os

# Kernels run under Triton's interpreter on CPU machines; it must be set before triton
# is imported (autokernel.runtime does it too, this covers tests that import triton first).
os.environ.setdefault("TRITON_INTERPRET", "1")
# Rich reads the width when a Console is made (at import): wide enough that tables don't wrap.
os.environ["COLUMNS"] = "200"

import pytest  # noqa: E402
import torch  # noqa: E402

from autokernel import runtime  # noqa: E402


def fp32_tol(interpreted: float) -> float:
    """A float32 bound: ``interpreted`` where fp32 is exact (the interpreter), 3e-2 on the
    GPU, where the kernels' fp32 dot is tf32 (~1e-3 relative; a relu's derivative flips
    where |z| is within tf32 error of zero, ~1e-2 on its gradients)."""
    return interpreted if runtime.INTERPRETER else 3e-2


FP32_TOL = fp32_tol(1e-4)


@pytest.fixture(autouse=True)
def _isolated_history(tmp_path, monkeypatch):
    """No test writes to the repository's results/history.csv."""
    monkeypatch.setenv("AUTOKERNEL_HISTORY", str(tmp_path / "history.csv"))


@pytest.fixture
def hist(tmp_path):
    """The (isolated) default history path of this test."""
    return tmp_path / "history.csv"


def one_error_line(result, code: int | None = None) -> str:
    """The one line a failed CLI call printed on stderr (no traceback), after its exit code."""
    if code is not None:
        assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def device():
    from autokernel import runtime

    return runtime.kernel_device()


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.float()
    denom = ref.norm().item()
    diff = (out.float() - ref).norm().item()
    return diff / denom if denom > 0 else diff
