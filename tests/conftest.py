import os
import signal
import threading

# Kernels run under Triton's interpreter in the suite, on a GPU machine too unless
# TRITON_INTERPRET=0 is set (autokernel.runtime chooses it by itself on a CPU machine).
os.environ.setdefault("TRITON_INTERPRET", "1")
# Rich reads the width when a Console is made (at import): wide enough that tables don't wrap.
os.environ["COLUMNS"] = "200"

import pytest  # noqa: E402

from autokernel import api, route, runtime  # noqa: E402
from tests.helpers import synthetic_sweep  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_history(tmp_path, monkeypatch):
    """No test writes to the repository's results/history.csv, nor reads the user's tuned
    configs or the tuner's kept readings."""
    monkeypatch.setenv("AUTOKERNEL_HISTORY", str(tmp_path / "history.csv"))
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(tmp_path / "autokernel-cache"))
    monkeypatch.delenv("AUTOKERNEL_CONFIG", raising=False)
    monkeypatch.delenv("AUTOKERNEL_BACKEND", raising=False)


@pytest.fixture(autouse=True)
def _default_ctrl_c():
    """Every test starts with Python's own Ctrl-C (a KeyboardInterrupt in the main thread).
    A probe of a full run found SIGINT left ignored after the cluster tests (their module
    starts a local Ray) and after the broad-suite test (cause not found): the Ctrl-C tests an
    xdist worker ran after them saw no interrupt (which worker runs what depends on timing)."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def hist(tmp_path):
    """The (isolated) default history path of this test."""
    return tmp_path / "history.csv"


@pytest.fixture
def device():
    return runtime.kernel_device()


@pytest.fixture
def sweep(tmp_path):
    path = tmp_path / "sweep.csv"
    synthetic_sweep(path)
    return path


@pytest.fixture(autouse=True)
def _fresh_launch_cache():
    """Tests that patch a kernel launcher must not meet a plan cached by an earlier test, nor
    a backend an earlier one switched to."""
    route.use(None)
    api.clear_launch_cache()
