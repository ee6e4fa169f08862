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
def device():
    from autokernel import runtime

    return runtime.kernel_device()


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.float()
    denom = ref.norm().item()
    diff = (out.float() - ref).norm().item()
    return diff / denom if denom > 0 else diff
