"""Tuning on first use: the first call of a shape races the selector's best few configs
and keeps the winner, per user, for every later call and process.

Off by default. ``AUTOKERNEL_AUTOTUNE=1`` in the environment (read at each call) or
``autokernel.autotune.enable()`` switches it on; ``enable(False)`` switches it off whatever
the environment says, ``enable(None)`` hands the decision back to the environment.

What a shape costs, once per machine: up to ``MAX_CANDIDATES`` (8) candidate configs,
each compiled and called once (Triton's compile, 0.5 to 2 s per config the first time,
milliseconds where Triton's own disk cache has it; no new candidate is started once
``BUDGET_S`` seconds have gone), then raced side by side (``timing.race``: a CUDA graph of
about ``RACE_SEGMENT_MS`` of calls per candidate, replayed ``RACE_ROUNDS`` times,
interleaved: about 80 ms of GPU time for 8 candidates). Under Triton's interpreter each
candidate is timed alone with a few wall-clock calls (``time_fn``), only so the path can
be tested on a CPU.

Timing never happens inside CUDA-graph capture, torch.compile tracing, a JIT trace, or a
candidate's own call: there ``first_use`` answers a kept winner or None (the caller
launches the selector's pick). A candidate that raises (a compile error, too little
shared memory) is dropped from the race, not fatal.

The winners live in one JSON file per GPU and software under the readings cache
directory (``$AUTOKERNEL_CACHE_DIR``, else ``$XDG_CACHE_HOME/autokernel``, else
``~/.cache/autokernel``): ``autotune-<device>-torch<v>-triton<v>-autokernel<v>-<code>.json``,
where <code> is a hash of autokernel's measuring code, so a changed kernel starts a new
file. The file is read once per process; each new shape is a dict lookup. Writes
merge with what is on disk under a file lock (``.lock`` beside it) and replace the file
atomically, so processes tuning different shapes at once keep each other's winners. A
file that is cut short, not JSON, of another schema or of another GPU or software is
ignored with one warning and rebuilt at the next write. ``autokernel cache info`` lists
the files, ``autokernel cache clear --kind autotune`` deletes them.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import re
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import autokernel
from autokernel import userfiles
from autokernel.records import KernelConfig  # the records load no torch

# torch and the modules that load it (runtime, timing, config) are imported inside the
# functions that need them: `autokernel cache` lists and clears the files without torch.
if TYPE_CHECKING:
    import torch

ENV = "AUTOKERNEL_AUTOTUNE"
SCHEMA = 1
PREFIX = "autotune"
MAX_CANDIDATES = 8
RACE_ROUNDS = 10
"""Rounds of the side-by-side race (timing.race's default, 30, is for the tuner's verdicts:
a first-use race needs only the clear winner of a few)."""
RACE_SEGMENT_MS = 1.0
BUDGET_S = 20.0
"""No new candidate is compiled once this many seconds went into a shape; those compiled
are raced."""
INTERPRETER_REPS = 2
CUBLAS = "cublas"
"""A candidate that is no config: torch's cuBLAS (``autokernel.route``, the backend "auto").
A race it wins keeps this name in the config's place."""
LOCK_TIMEOUT_S = 30.0

_switch: bool | None = None
_local = threading.local()
_race_lock = threading.Lock()


# ---- on or off -------------------------------------------------------------------------


def enable(on: bool | None = True) -> None:
    """Switch tuning on first use on (True) or off (False) for this process, over
    ``$AUTOKERNEL_AUTOTUNE``; None: the environment decides again."""
    global _switch
    _switch = None if on is None else bool(on)


_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")
_warned_values: set[str] = set()


def enabled() -> bool:
    """Whether tuning on first use is on: the Python switch (``enable``) where set, else
    ``$AUTOKERNEL_AUTOTUNE`` is "1" (also "true", "yes", "on"), read at each call. Any
    other value but an off one ("0", "false", "no", "off") is off too, with one warning."""
    if _switch is not None:
        return _switch
    value = os.environ.get(ENV, "").strip().lower()
    if value in _ON:
        return True
    if value not in _OFF and value not in _warned_values:
        _warned_values.add(value)
        warnings.warn(f"${ENV}={os.environ[ENV]!r} is neither on ({', '.join(_ON)}) nor off "
                      f"({', '.join(_OFF[1:])}): tuning on first use stays off", RuntimeWarning, stacklevel=2)
    return False


def timing_allowed() -> bool:
    """Whether a race may run now: not inside CUDA-graph capture, torch.compile tracing, a
    JIT trace, or a call a race is making."""
    import torch

    if getattr(_local, "racing", False):
        return False
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    return not _capturing()


def _capturing() -> bool:
    """Whether the current CUDA stream is being captured into a graph."""
    import torch

    from autokernel import runtime

    return not runtime.INTERPRETER and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


# ---- the key ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """A problem whose winner is kept: shape, dtype name ("float16"), activation, bias and
    a mode string (the caller's: a layout, a launch mode)."""

    m: int
    n: int
    k: int
    dtype: str
    activation: str = "none"
    bias: bool = False
    mode: str = ""

    @classmethod
    def of(cls, m: int, n: int, k: int, dtype: torch.dtype | str, activation: str | None = "none",
           bias: bool = False, mode: str = "") -> "Key":
        return cls(int(m), int(n), int(k), str(dtype).removeprefix("torch."), activation or "none", bool(bias),
                   str(mode))

    def text(self) -> str:
        """The key in the file, e.g. "4096x4096x4096/float16/gelu/bias/nt"."""
        return (f"{self.m}x{self.n}x{self.k}/{self.dtype}/{self.activation}/{'bias' if self.bias else 'nobias'}"
                f"/{self.mode}")


def _as_key(key: "Key | Sequence[Any]") -> Key:
    return key if isinstance(key, Key) else Key.of(*key)


# ---- the file --------------------------------------------------------------------------


def _version(name: str) -> str:
    return userfiles.installed(name) or "none"


def _device_key(name: str) -> str:
    """As autokernel.best.device_key (best may import this module: no import of it here)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@functools.lru_cache(maxsize=None)
def _versions() -> dict[str, str]:
    return {"torch": _version("torch"), "triton": _version("triton"), "autokernel": autokernel.__version__,
            "code": userfiles.code_fingerprint()[:12]}


def header(device: str | None = None) -> dict[str, Any]:
    """What a file's winners depend on: schema, device name and software."""
    if device is None:
        from autokernel import runtime

        device = runtime.device_name()
    return {"schema": SCHEMA, "device": device, **_versions()}


def file_name(head: dict[str, Any]) -> str:
    safe = lambda s: re.sub(r"[^A-Za-z0-9.+_]+", "-", str(s))  # noqa: E731
    return (f"{PREFIX}-{_device_key(head['device'])}-torch{safe(head['torch'])}-triton{safe(head['triton'])}"
            f"-autokernel{safe(head['autokernel'])}-{safe(head['code'])}.json")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def winner_of(config: dict | str) -> "KernelConfig | str":
    """An entry's kept winner: a KernelConfig, or ``CUBLAS``."""
    return CUBLAS if config == CUBLAS else KernelConfig.from_dict(config)


def winner_json(winner: "KernelConfig | str") -> dict | str:
    """A kept winner as an entry stores it: a config's fields, or ``CUBLAS``; ``winner_of``'s inverse."""
    return winner if winner == CUBLAS else winner.model_dump()


def _parse(text: str | bytes, head: dict[str, Any] | None, configs: bool = True) -> dict[str, dict]:
    """The entries of a file's text; ValueError saying why it is not a file of ``head``
    (None: of any header). ``configs``: check that each entry's config is a KernelConfig."""

    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise ValueError("not a first-use tuning file")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema')!r}, this autokernel reads {SCHEMA}")
    if head is not None:
        other = [f"{name} {data.get(name)!r}" for name in head if data.get(name) != head[name]]
        if other:
            raise ValueError(f"written for another GPU or software ({', '.join(other)})")
    entries = {}
    for text_key, entry in data["entries"].items():
        try:
            key = Key(**entry["key"])
            if configs:
                winner_of(entry["config"])
            if not isinstance(entry.get("raced"), list) or not isinstance(entry.get("written"), str):
                raise TypeError("raced or written missing")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"entry {text_key!r} unreadable ({str(exc).splitlines()[0]})") from None
        entries[key.text()] = entry
    return entries


def _dumps(head: dict[str, Any], entries: dict[str, dict]) -> str:
    """The file's text: the header, then one entry per line, sorted by key."""
    lines = [f" {json.dumps(name)}: {json.dumps(value)}," for name, value in head.items()]
    body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(entries.items()))
    return "{\n" + "\n".join(lines) + '\n "entries": {' + (f"\n{body}\n " if body else "") + "}\n}\n"


class Cache:
    """The first-use winners of one device and software, in ``directory``.

    The file is read at the first lookup and kept in memory; ``put`` merges its entry
    with the file on disk under a lock and replaces the file atomically. Where the file
    cannot be written (no permission, a full disk, a lock held too long), one warning
    says so and the winners are kept in memory only, for the rest of the process."""

    def __init__(self, directory: Path, head: dict[str, Any]) -> None:
        self.head = head
        self.path = Path(directory) / file_name(head)
        self.off = False
        self._entries: dict[str, dict] | None = None
        self._winners: dict[str, KernelConfig | str] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def get(self, key: Key) -> KernelConfig | str | None:
        """The kept winner of ``key`` (a config or ``CUBLAS``), or None."""
        with self._lock:
            self._load()
            return self._winners.get(key.text())

    def entries(self) -> dict[str, dict]:
        """Every kept entry, by key text: {"key", "config", "raced", "written"} as in the file."""
        with self._lock:
            return dict(self._load())

    def put(self, key: Key, config: KernelConfig | str, raced: list[dict]) -> None:
        """Keep ``config`` (or ``CUBLAS``) as the winner of ``key``, with the race's readings ``raced``."""
        entry = {"key": asdict(key), "config": winner_json(config), "raced": raced, "written": _now()}
        with self._lock:
            entries = self._load()
            entries[key.text()] = entry
            self._winners[key.text()] = config
            if self.off:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with userfiles.file_lock(str(self.path) + ".lock").acquire(timeout=LOCK_TIMEOUT_S):
                    disk = self._read()
                    merged = {**disk, key.text(): entry}
                    userfiles.write_atomically(self.path, _dumps(self.head, merged))
            except OSError as exc:  # filelock's Timeout is one too
                self.off = True
                self._warn("io", f"{self.path}: {getattr(exc, 'strerror', None) or exc}; "
                           "first-use winners are kept in memory only in this process")
                return
            for text_key, other in disk.items():  # what other processes kept meanwhile
                if text_key not in entries:
                    entries[text_key] = other
                    self._winners[text_key] = winner_of(other["config"])

    def forget(self) -> None:
        """Drop what was read: the next lookup reads the file again."""
        with self._lock:
            self._entries = None
            self._winners.clear()

    def _load(self) -> dict[str, dict]:
        if self._entries is None:
            self._entries = self._read()
            self._winners = {t: winner_of(e["config"]) for t, e in self._entries.items()}
        return self._entries

    def _read(self) -> dict[str, dict]:
        """The file's entries; {} (and one warning per process) for a file that is not one
        of this device and software."""
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # none yet; a write says why if it can't make one
            return {}
        except OSError as exc:
            self._warn("io", f"{self.path}: {exc.strerror or exc}; not read")
            return {}
        try:
            return _parse(raw, self.head)
        except ValueError as exc:
            self._warn("read", f"{self.path}: {exc}; ignored, rebuilt at the next write")
            return {}

    def _warn(self, kind: str, message: str) -> None:
        """One warning per kind per file and process: "io" (the file cannot be read or written),
        "read" (it is not one of this GPU and software)."""
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, RuntimeWarning, stacklevel=4)


_caches: dict[Path, Cache] = {}
_caches_lock = threading.Lock()


def cache(device: str | None = None) -> Cache:
    """The Cache of ``device`` (a device name; default: this process's GPU) in the
    current cache directory, one per process."""
    head = header(device)
    path = userfiles.cache_dir() / file_name(head)
    with _caches_lock:
        found = _caches.get(path)
        if found is None or found.head != head:
            found = _caches[path] = Cache(path.parent, head)
        return found


# ---- tuning on first use ---------------------------------------------------------------


def first_use(key: "Key | Sequence[Any]", candidates: Sequence[KernelConfig | str],
              make_call: Callable[[KernelConfig | str], Callable[[], None]], *, max_candidates: int = MAX_CANDIDATES,
              budget_s: float = BUDGET_S, device: str | None = None) -> KernelConfig | str | None:
    """The config to launch for ``key`` (a Key, or (m, n, k, dtype, activation, bias, mode)):
    its kept winner; else, where timing is allowed now (``timing_allowed``), the winner of
    a race of the first ``max_candidates`` of ``candidates`` (in the order given, the
    selector's ranking, ties going to the earlier), kept for every later call and process;
    else None, as when every candidate failed: the caller launches its own pick.

    A candidate is a config, or ``CUBLAS`` (torch's cuBLAS, where the backend "auto" may
    run it: ``autokernel.route``). ``make_call(config)`` returns a function of no arguments
    that runs the kernel with ``config`` (or cuBLAS) on operands of the problem; it is
    called many times (dozens under CUDA graphs), so it must write to its own output, not
    the caller's. It is not asked to
    run again once a winner is kept. The caller checks ``enabled()``: this tunes when asked.
    Cost per shape: see the module docstring."""
    key = _as_key(key)
    store = cache(device)
    hit = store.get(key)
    if hit is not None or not timing_allowed():
        return hit
    pool = list(dict.fromkeys(candidates))[:max_candidates]
    with _race_lock:
        hit = store.get(key)  # another thread raced it while this one waited
        if hit is not None:
            return hit
        _local.racing = True
        try:
            winner, raced = _race(pool, make_call, budget_s)
        finally:
            _local.racing = False
    if winner is not None:
        store.put(key, winner, raced)
    return winner


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _race(pool: list[KernelConfig | str], make_call, budget_s: float) -> tuple[KernelConfig | str | None, list[dict]]:
    """(the fastest of ``pool``, what each candidate read: {"config", "ms"} or {"config", "error"})."""
    import torch

    from autokernel import runtime

    start = time.monotonic()
    raced: list[dict] = []
    ready: list[tuple[KernelConfig | str, Callable[[], None], dict]] = []
    for config in pool:
        if ready and time.monotonic() - start > budget_s:
            break
        row: dict[str, Any] = {"config": winner_json(config)}
        raced.append(row)
        try:
            fn = make_call(config)
            fn()  # compiles; a config that cannot run fails here
            if not runtime.INTERPRETER:
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 (a failed candidate is dropped, whatever failed)
            row["error"] = _one_line(exc)
            continue
        ready.append((config, fn, row))
    times = _measure([fn for _, fn, _ in ready])
    for (_, _, row), ms in zip(ready, times):
        if isinstance(ms, float) and not (math.isfinite(ms) and ms > 0):
            ms = f"no reading ({ms} ms)"
        row["ms" if isinstance(ms, float) else "error"] = ms
    timed = [(row["ms"], i) for i, (_, _, row) in enumerate(ready) if "ms" in row]
    if not timed:
        return None, raced
    return ready[min(timed)[1]][0], raced


def _measure(fns: list[Callable[[], None]]) -> list[float | str]:
    """Milliseconds per call of each of ``fns``, or the one line of what it raised."""
    from autokernel import runtime, timing

    if runtime.INTERPRETER:
        out: list[float | str] = []
        for fn in fns:
            try:
                out.append(float(timing.time_fn(fn, reps=INTERPRETER_REPS).ms))
            except Exception as exc:  # noqa: BLE001
                out.append(_one_line(exc))
        return out
    try:
        return [float(ms) for ms in timing.race(fns, rounds=RACE_ROUNDS, segment_ms=RACE_SEGMENT_MS)]
    except Exception:  # noqa: BLE001 (one of them failed in the race: find which, alone)
        out = []
        for fn in fns:
            try:
                out.append(float(timing.race([fn], rounds=RACE_ROUNDS, segment_ms=RACE_SEGMENT_MS)[0]))
            except Exception as exc:  # noqa: BLE001
                out.append(_one_line(exc))
        return out


# ---- for the CLI -----------------------------------------------------------------------


def files(directory: Path | None = None) -> list[dict[str, Any]]:
    """The first-use tuning files in ``directory`` (default: the cache directory), one dict
    each, as ``readings.kept_files`` gives: path, kind ("autotune"), env (device, torch,
    triton, autokernel, code; {} where unreadable), entries, bytes, last (the latest
    entry's time), stale (other software than this install's: no process of it reads
    the file), and error (why the file is unreadable, or None)."""
    directory = userfiles.cache_dir() if directory is None else Path(directory)
    here = {"torch": userfiles.installed("torch"), "triton": userfiles.installed("triton"),
            "autokernel": autokernel.__version__}
    out = []
    for path in sorted(directory.glob(f"{PREFIX}-*.json")):
        try:
            raw, size = path.read_bytes(), path.stat().st_size
        except OSError:  # gone since the listing, or unreadable
            continue
        env: dict[str, str] = {}
        entries: dict[str, dict] = {}
        error = None
        try:
            entries = _parse(raw, None, configs=False)
            data = json.loads(raw)
            env = {name: str(data.get(name)) for name in ("device", "torch", "triton", "autokernel", "code")}
        except ValueError as exc:
            error = str(exc)
        moved = [name for name, have in here.items()
                 if name in env and have is not None and env[name].split("+")[0] != have.split("+")[0]]
        stale = bool(env) and (env.get("code") != userfiles.code_fingerprint()[:12] or bool(moved))
        out.append({"path": path, "kind": PREFIX, "env": env, "entries": len(entries), "bytes": size,
                    "last": max((e["written"] for e in entries.values()), default=None), "stale": stale,
                    "error": error})
    return out


def entries(path: Path | None = None) -> list[dict[str, Any]]:
    """The winners kept in ``path`` (default: this process's file), each {"m", "n", "k",
    "dtype", "activation", "bias", "mode", "config" (a KernelConfig), "ms" (the winner's),
    "raced" (candidates that ran), "failed", "written"}, sorted by key. ValueError for a
    ``path`` that is not a first-use tuning file."""
    if path is None:
        kept = cache().entries()
    else:
        kept = _parse(Path(path).read_bytes(), None)
    out = []
    for _, entry in sorted(kept.items()):
        config = winner_of(entry["config"])
        won = [r.get("ms") for r in entry["raced"] if r.get("config") == entry["config"]]
        out.append({**entry["key"], "config": config, "ms": won[0] if won else None,
                    "raced": sum("ms" in r for r in entry["raced"]), "failed": sum("error" in r for r in entry["raced"]),
                    "written": entry["written"]})
    return out


def clear(*, stale: bool = False) -> list[Path]:
    """Delete the first-use tuning files of the cache directory (only those of other
    software with ``stale``) and their locks, and forget this process's winners. The
    files deleted; OSError where one cannot be."""
    deleted = []
    for f in files():
        if stale and not f["stale"]:
            continue
        for path in (f["path"], f["path"].with_name(f["path"].name + ".lock")):
            path.unlink(missing_ok=True)
        deleted.append(f["path"])
    with _caches_lock:
        for found in _caches.values():
            found.forget()
    return deleted
