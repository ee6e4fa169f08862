import os

# Kernels run under Triton's interpreter on CPU machines; it must be set before triton
# is imported (autokernel.runtime does it too, this covers tests that import triton first).
os.environ.setdefault("TRITON_INTERPRET", "1")
# Rich reads the width when a Console is made (at import): wide enough that tables don't wrap.
os.environ["COLUMNS"] = "200"

import pytest  # noqa: E402
import torch  # noqa: E402


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
