"""Where autokernel keeps files for the user, and what a kept file depends on.

The user's cache directory (``cache_dir``) holds the tuner's readings and proposals
(``autokernel.tuning.readings``) and the winners of tuning on first use
(``autokernel.autotune``); a kept file names the software it was made with
(``installed``, ``code_fingerprint``), so that another version starts a new one. Both
users sit in different layers (first-use tuning runs under ``autokernel.matmul``), so the
facts live here, below both, with no import of the rest of the package. Files the user
names (reports, exports, tables) are replaced whole (``write_atomically``), never over a
file they are made from (``same_file``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from filelock import FileLock

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


def read_text(path: str | Path) -> str:
    """A file's text, through gzip where its name ends in .gz (records kept compressed).
    Raises what reading raises: OSError, and EOFError or zlib.error for a torn .gz file."""
    path = Path(path)
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same file on disk however spelled (relative,
    through a link), or, where either does not exist yet, the same absolute path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


def make_parent(path: str | Path) -> None:
    """Make the directory ``path`` goes in, and those above it; where a file stands in for
    one of them, NotADirectoryError naming that file (mkdir's own error reads "File exists")."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), exc.filename) from None


def write_atomically(out: str | Path, text: str, *, newline: str | None = None) -> None:
    """Replace ``out`` with ``text``: written to a temporary file beside it, flushed to disk,
    then renamed over it, so a write that fails or a crash leaves the old file whole and no
    temporary file behind. Where ``out`` is a symbolic link, the file it names is replaced.
    OSError (naming ``out``) when it cannot be written; ``newline`` as for open()."""
    out = Path(out)
    if out.is_symlink():  # the file the link names is replaced; the link stays
        out = Path(os.path.realpath(out))
    if out.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(out))
    make_parent(out)
    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as exc:  # the directory takes no new file: name it, not the temporary name tried
        raise OSError(exc.errno, exc.strerror, str(out.parent)) from None
    try:
        os.fchmod(fd, 0o644)  # as a plain open() leaves a new file under the usual umask, not mkstemp's 0600
        with os.fdopen(fd, "w", newline=newline) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(out)) from None
        raise
    with contextlib.suppress(OSError, AttributeError):  # the rename itself, on file systems that need it
        dir_fd = os.open(out.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def file_lock(path: str | os.PathLike) -> FileLock:
    """The one lock object of this process for the lock file ``path``; take it with
    ``with file_lock(path).acquire(timeout=...)``. Kept for the life of the process: a
    FileLock dropped after each use is released once more by its finalizer when it is
    collected, and a Ctrl-C that lands there is swallowed ("Exception ignored in
    BaseFileLock.__del__"), so the run it was meant to stop goes on."""
    return _file_lock(os.fspath(path))


@functools.lru_cache(maxsize=None)
def _file_lock(path: str) -> FileLock:
    return FileLock(path)
