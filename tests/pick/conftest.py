import pytest

from autokernel import best


@pytest.fixture
def shipped_files(monkeypatch):
    """The shipped best-config and selector files alone (no user file named by the
    environment), and nothing cached from other tests (or left for them)."""
    monkeypatch.delenv(best.CONFIG_ENV, raising=False)
    monkeypatch.delenv(best.SELECTOR_ENV, raising=False)
    best.clear_cache()
    yield
    best.clear_cache()
