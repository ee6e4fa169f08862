"""Where autokernel keeps files for the user, and what a kept file depends on.

The user's cache directory (``cache_dir``) holds the tuner's readings and proposals
(``autokernel.tuning.readings``) and the winners of tuning on first use
(``autokernel.autotune``); a kept file names the software it was made with
(``installed``, ``code_fingerprint``), so that another version starts a new one. Both
users sit in different layers (first-use tuning runs under ``autokernel.matmul``), so the
facts live here, below both, with no import of the rest of the package.
"""

from __future__ import annotations

import functools
import hashlib
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

NOT_MEASURING = ("cli", os.path.join("tuning", "strategies"))
"""Package folders whose code does not change what a reading measures (the rest of the
package is fingerprinted: kernels, launch path, checks, timers, the worker)."""
PROPOSING = ("config.py", "problem.py", "tuning")
"""The code a strategy's proposals depend on (the strategies, the space, the configs)."""

PACKAGE_ROOT = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Where readings are kept: $AUTOKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/autokernel, else ~/.cache/autokernel."""
    if os.environ.get("AUTOKERNEL_CACHE_DIR"):
        return Path(os.environ["AUTOKERNEL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autokernel"


@functools.lru_cache(maxsize=None)
def code_fingerprint(kind: str = "readings") -> str:
    """A hash of the package code, by path and content, that a kept file of ``kind``
    depends on: for "readings" the measuring code (all but the CLI and the strategies),
    for "proposals" the strategies, the space and the configs. Once per process: the
    files do not change under a run."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE_ROOT))
        if rel.startswith(PROPOSING) if kind == "proposals" else not rel.startswith(NOT_MEASURING):
            digest.update(rel.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def installed(name: str) -> str | None:
    """The installed version of distribution ``name``, or None."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None
