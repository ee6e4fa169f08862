"""Launch a kernel only if Triton's on-disk cache already holds its binary.

The tuner's timing worker tries each candidate this way first, so that compile workers
(a process each, importing torch and starting a CUDA context: seconds) start only for
candidates that really need compiling; a rerun of a tuned shape needs none.

Triton looks binaries up through a cache manager class that it reads from
``TRITON_CACHE_MANAGER`` ("module:Class") at every compile; ``CacheOnlyManager`` is its
file cache that, while probing, raises instead of answering a miss (whereupon Triton
would compile). A process whose user set a cache manager of their own keeps it, and
cannot probe.
"""

from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator

from triton.runtime.cache import FileCacheManager

MANAGER_ENV = "TRITON_CACHE_MANAGER"
MANAGER = f"{__name__}:CacheOnlyManager"


class NotCompiled(RuntimeError):
    """A kernel's binary is not in Triton's cache (raised only while probing)."""


class CacheOnlyManager(FileCacheManager):
    """Triton's file cache; while ``probing`` a kernel missing from it raises NotCompiled."""

    probing = False
    misses = 0

    def get_group(self, filename: str) -> dict[str, str] | None:
        group = super().get_group(filename)
        # Triton's compile() asks for the group of the kernel's metadata file first and
        # compiles unless that file is in it.
        if CacheOnlyManager.probing and (group is None or filename not in group):
            CacheOnlyManager.misses += 1
            raise NotCompiled(f"{filename} is not in Triton's cache")
        return group


def can_probe() -> bool:
    """True when this process uses CacheOnlyManager (set here unless the user chose another)."""
    os.environ.setdefault(MANAGER_ENV, MANAGER)
    return os.environ[MANAGER_ENV] == MANAGER


@contextlib.contextmanager
def cache_only() -> Iterator[Callable[[], bool]]:
    """Within the block no kernel compiles: one that would raises NotCompiled instead.
    Yields ``missed()``: True once any kernel was found missing (whoever caught the error)."""
    if not can_probe():
        raise RuntimeError(f"{MANAGER_ENV} names another cache manager: cannot probe Triton's cache")
    before = CacheOnlyManager.misses
    CacheOnlyManager.probing = True
    try:
        yield lambda: CacheOnlyManager.misses > before
    finally:
        CacheOnlyManager.probing = False
