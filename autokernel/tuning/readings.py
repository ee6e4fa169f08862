"""Earlier readings, reused: a rerun of the same tuning measures nothing twice.

Like Kernel Tuner's cache file: every reading the tuner takes (a candidate's check and
timing, a side-by-side re-time, the cuBLAS baseline) is kept, and a later run that asks
for the same measurement, of the same problem and configs, on the same GPU, with the
same torch, Triton and autokernel code, gets the kept reading instead of taking a new one.
A rerun of a tuned shape with the same seed proposes the same configs, so it measures
nothing (the timing worker, started anyway, is stopped unused).

A reused trial says so in its note ("reused reading of <when it was measured>") and in
the run's summary; ``autokernel tune --no-cache`` measures everything again. Only
outcomes that another measurement would repeat are kept: successes and failures of the
config itself (a wrong result, a compile error, too little shared memory), never a
timeout or a lost worker. A re-time is kept only when every config in it was re-timed.

The readings live in ``$AUTOKERNEL_CACHE_DIR`` (default ``$XDG_CACHE_HOME/autokernel``,
else ``~/.cache/autokernel``), one JSON-lines file per environment: its name carries a
hash of the device, the timing kind, the torch and Triton versions and autokernel's
measuring code, so a changed kernel or a new Triton starts an empty file.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
import warnings
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autokernel.history import RETIMED, is_retimed
from autokernel.records import TIMINGS, KernelConfig, Problem, Trial, time_error
from autokernel.tuning.protocols import EvaluatorBase
from autokernel.tuning.worker import WORKER_LOST
from autokernel.userfiles import cache_dir, code_fingerprint, file_lock, installed  # noqa: F401  (cache_dir: the tuner's callers read it here)

# Light, for `autokernel cache`: torch and tuning.space (which imports it) are imported
# inside the functions that use them.

if TYPE_CHECKING:
    from autokernel.tuning.evaluator import OnTrial

KEPT_STATUSES = frozenset({"success", "failed_correctness", "compile_error", "out_of_resources"})
"""Outcomes a new measurement would repeat (see ``repeatable``); a timeout or a lost
timing worker ("runtime_error") may be the machine's, so it is measured again."""

_ENV_KNOBS = ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",)
"""Environment variables besides TRITON_* ones that change what a reading measures."""
_TRITON_NOT_CODEGEN = ("TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_CACHE_MANAGER", "TRITON_PRINT_AUTOTUNING")


def repeatable(trial: "Trial") -> bool:
    """Whether another measurement would give ``trial``'s outcome: a success or a failure
    of the config itself, not of the machine (a worker lost, the GPU's memory taken by
    another process)."""
    if trial.status not in KEPT_STATUSES or WORKER_LOST in (trial.note or ""):
        return False
    return not (trial.status == "out_of_resources" and (trial.error or "").startswith("OutOfMemoryError"))


_installed = installed  # a module global: tests replace it here


def _records(path: Path) -> list[dict]:
    """The records of a kept file, line by line: a line cut short or not UTF-8 is skipped.
    OSError (FileNotFoundError included) propagates."""
    out = []
    for raw in path.read_bytes().split(b"\n"):
        try:
            record = json.loads(raw.decode())
            if isinstance(record, dict) and {"key", "env", "at", "payload"} <= record.keys():
                out.append(record)
        except ValueError:  # UnicodeDecodeError and JSONDecodeError both
            continue
    return out


def kept_files(directory: Path) -> list[dict[str, Any]]:
    """What ``directory`` keeps, one dict per file: path, kind ("readings" or "proposals"),
    env (of its first readable line; {} when none), entries (distinct keys), bytes, last
    (the latest line's time, or None), stale (written by other autokernel code than this:
    no run of this code reads it)."""
    versions = {"torch": _installed("torch"), "triton": _installed("triton"), "optuna": _installed("optuna")}
    out = []
    for path in sorted(Path(directory).glob("*-*.jsonl")):
        kind = path.name.split("-", 1)[0]
        if kind not in ("readings", "proposals"):
            continue
        try:
            records, size = _records(path), path.stat().st_size
        except OSError:  # gone since the listing (a clear beside us), or unreadable
            continue
        env = dict(records[0]["env"]) if records else {}
        # Stale: no run of this install reads it (other code, or torch, Triton or optuna since upgraded).
        # torch.__version__ carries a local tag (+cpu, +cu130) that the installed metadata may lack.
        moved = [name for name, have in versions.items()
                 if name in env and have is not None and env[name].split("+")[0] != have.split("+")[0]]
        out.append({"path": path, "kind": kind, "env": env, "entries": len({r["key"] for r in records}),
                    "bytes": size, "last": records[-1]["at"] if records else None,
                    "stale": bool(records) and (env.get("code") != code_fingerprint(kind) or bool(moved))})
    return out


def environment(device: str, timing: str) -> dict[str, str]:
    """What a reading depends on besides its problem and configs."""
    import torch

    knobs = {k: v for k, v in sorted(os.environ.items())
             if (k.startswith("TRITON_") and k not in _TRITON_NOT_CODEGEN) or k in _ENV_KNOBS}
    return {"device": device, "timing": timing, "torch": torch.__version__, "triton": _installed("triton") or "none",
            "code": code_fingerprint(), "env": json.dumps(knobs)}


def _key(kind: str, problem: "Problem", configs: Sequence["KernelConfig"], nth: int = 0) -> str:
    """The key of the ``nth`` (from 0) such request of a run: the confirmation races the same
    configs in the same order more than once, and each race is a reading of its own."""
    text = json.dumps({"kind": kind, "problem": problem.to_dict(), "configs": [c.model_dump() for c in configs],
                       "nth": nth}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Reading:
    """Kept trials, each noted with when it was measured (``reused_note``)."""

    trials: list["Trial"]


class KeptStore:
    """JSON payloads by key, kept for one environment ``env`` in ``directory``/``prefix``-<env hash>.jsonl.

    The file is read once, at the first lookup; writes append one line each under a
    file lock, so runs in parallel may share it. A line that does not parse (a write cut
    short) is skipped; a later line for a key wins. Where the file cannot be read or
    written (no such directory, no permission, a full disk), ``on_error`` gets one line
    and the store keeps nothing more this run: tuning goes on without it.
    """

    def __init__(self, directory: Path, prefix: str, env: dict[str, str],
                 on_error: Callable[[str], None] | None = None) -> None:
        self.env = env
        name = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]
        self.path = Path(directory) / f"{prefix}-{name}.jsonl"
        self._entries: dict[str, tuple[Any, str]] | None = None
        self._on_error = on_error
        self.off = False

    def get(self, key: str) -> tuple[Any, str] | None:
        """(payload, when it was kept, ISO 8601 UTC), or None."""
        if self._entries is None:
            self._entries = self._load()
        return self._entries.get(key)

    def put(self, key: str, payload: Any) -> None:
        """Keep ``payload`` under ``key``."""
        if self.off:
            return
        at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        line = json.dumps({"key": key, "env": self.env, "at": at, "payload": payload}).encode() + b"\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(str(self.path) + ".lock").acquire(), self.path.open("ab+") as f:
                if f.seek(0, os.SEEK_END) > 0:
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":  # a write cut short: end its line, or it swallows this one
                        line = b"\n" + line
                f.write(line)
        except OSError as exc:
            self._fail(exc)
            return
        if self._entries is not None:
            self._entries[key] = (payload, at)

    def _load(self) -> dict[str, tuple[Any, str]]:
        try:
            records = _records(self.path)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._fail(exc)
            return {}
        return {r["key"]: (r["payload"], str(r["at"])) for r in records if r["env"] == self.env}

    def _fail(self, exc: Exception) -> None:
        self.off = True  # put keeps nothing more and the file is read once: one line per store (per run)
        message = f"{self.path}: {getattr(exc, 'strerror', None) or exc}; nothing more is kept there this run"
        if self._on_error is not None:
            self._on_error(message)
        else:
            warnings.warn(message, RuntimeWarning, stacklevel=3)


class ReadingCache:
    """The kept readings of one environment (``environment``), in ``directory``."""

    def __init__(self, directory: Path, env: dict[str, str], on_error: Callable[[str], None] | None = None) -> None:
        self.store = KeptStore(directory, "readings", env, on_error)

    @property
    def path(self) -> Path:
        return self.store.path

    def get(self, kind: str, problem: "Problem", configs: Sequence["KernelConfig"], nth: int = 0) -> Reading | None:
        """The kept reading, or None: none kept, or one that is not trials as this code keeps
        them (a file edited or damaged by hand), which is measured again like a cut line."""
        hit = self.store.get(_key(kind, problem, configs, nth))
        if hit is None or not isinstance(hit[0], list):
            return None
        try:
            return Reading([_trial(data, hit[1]) for data in hit[0]])
        except (TypeError, ValueError, KeyError):
            return None

    def put(self, kind: str, problem: "Problem", configs: Sequence["KernelConfig"], trials: list[dict],
            nth: int = 0) -> None:
        """Keep ``trials`` (as Trial.to_dict) as the reading of the ``nth`` (kind, problem,
        configs) request; an empty list keeps nothing."""
        if trials:
            self.store.put(_key(kind, problem, configs, nth), trials)


def reused_note(note: str | None, measured_at: str) -> str:
    """``note`` with the reuse said in it; a "re-timed" mark stays last (history.is_retimed)."""
    said = f"reused reading of {measured_at}"
    if is_retimed(note):
        head = note[: -len(RETIMED)].rstrip("; ")
        return "; ".join(part for part in (head, said, RETIMED) if part)
    return f"{note}; {said}" if note else said


_TIMES = ("ms", "p20", "p80", "gpu_ms", "wall_ms")
_NUMBERS = ("tflops", "rel_error", "max_abs_diff")
_TEXTS = ("kernel", "error", "note")


def _trial(data: dict[str, Any], measured_at: str) -> "Trial":
    """The Trial of kept ``data`` (Trial.to_dict's); TypeError, ValueError or KeyError where
    it is not a trial as this code keeps them: a valid problem and config, times finite
    and > 0, the other measures numbers, a kept status (KEPT_STATUSES) and a known timing."""
    fields = dict(data)
    fields["problem"] = Problem(**fields["problem"])
    fields["config"] = None if fields["config"] is None else KernelConfig.from_dict(fields["config"])
    for name in _TIMES:
        if fields.get(name) is not None and (why := time_error(fields[name])):
            raise ValueError(f"{name} {why}: {fields[name]!r}")
    for name in _NUMBERS:
        value = fields.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TypeError(f"{name} is not a number: {value!r}")
    for name in _TEXTS:
        if fields.get(name) is not None and not isinstance(fields[name], str):
            raise TypeError(f"{name} is not text: {fields[name]!r}")
    if fields.get("status") not in KEPT_STATUSES or fields.get("timing") not in (None, *TIMINGS):
        raise ValueError(f"not a kept outcome: {fields.get('status')!r}, {fields.get('timing')!r}")
    fields["note"] = reused_note(fields.get("note"), measured_at)
    return Trial(**fields)


class CachingEvaluator(EvaluatorBase):
    """An Evaluator (tuning.evaluator.Evaluator) that answers from ``cache`` what was
    measured before and asks ``inner`` for the rest, keeping what it measures. With
    ``reuse`` False (``--no-cache``) it measures everything and keeps the new readings,
    which then stand for the old ones.

    Each trial is recorded (``on_trial``) before it is kept: a cache that fails loses
    nothing from the history. ``reused`` and ``measured`` count trials (a re-time's
    configs and the baseline included).
    """

    def __init__(self, inner, cache: ReadingCache, *, reuse: bool = True) -> None:
        self.inner = inner
        self.cache = cache
        self.reuse = reuse
        self.reused = 0
        self.measured = 0
        self._asked: dict[str, int] = {}

    def _request(self, kind: str, problem: "Problem", configs: Sequence["KernelConfig"]) -> tuple[int, Reading | None]:
        """This run's count of earlier identical requests, and the kept reading of this one."""
        base = _key(kind, problem, configs)
        nth = self._asked.get(base, 0)
        self._asked[base] = nth + 1
        return nth, (self.cache.get(kind, problem, configs, nth) if self.reuse else None)

    def evaluate(self, problem: "Problem", configs: Sequence["KernelConfig"],
                 on_trial: "OnTrial | None" = None) -> list["Trial"]:
        from autokernel.tuning.space import config_key

        trials: list[Trial | None] = [None] * len(configs)
        missing: list[int] = []
        nths: dict[tuple, int] = {}
        for i, config in enumerate(configs):
            nth, hit = self._request("evaluate", problem, [config])
            if hit is None:
                missing.append(i)
                nths[config_key(config)] = nth
            else:
                trials[i] = self._reuse(hit, on_trial)[0]

        def keep(trial: "Trial") -> None:
            taken = trial.to_dict() if repeatable(trial) else None  # as measured: on_trial may add to its note
            self.measured += 1
            if on_trial is not None:
                on_trial(trial)
            self.cache.put("evaluate", problem, [trial.config], [taken] if taken else [],
                           nths.get(config_key(trial.config), 0))

        if missing:
            fresh = self.inner.evaluate(problem, [configs[i] for i in missing], on_trial=keep)
            for i, trial in zip(missing, fresh):
                trials[i] = trial
        return trials  # type: ignore[return-value]  # every index was filled

    def retime(self, problem: "Problem", configs: Sequence["KernelConfig"],
               on_trial: "OnTrial | None" = None) -> list["Trial"]:
        nth, hit = self._request("retime", problem, configs)
        if hit is not None:
            return self._reuse(hit, on_trial)
        got: list[Trial] = []
        trials = self.inner.retime(problem, configs, on_trial=got.append)  # one task: all come at once
        whole = len(got) == len(configs) and all(is_retimed(t.note) and repeatable(t) for t in got)
        taken = [t.to_dict() for t in trials] if whole else []
        self.measured += len(got)
        for trial in got:
            if on_trial is not None:
                on_trial(trial)
        self.cache.put("retime", problem, configs, taken, nth)
        return trials

    def baseline(self, problem: "Problem", on_trial: "OnTrial | None" = None) -> "Trial":
        nth, hit = self._request("baseline", problem, [])
        if hit is not None:
            return self._reuse(hit, on_trial)[0]
        trial = self.inner.baseline(problem)
        taken = [trial.to_dict()] if repeatable(trial) else []
        self.measured += 1
        if on_trial is not None:
            on_trial(trial)
        self.cache.put("baseline", problem, [], taken, nth)
        return trial

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        self.inner.abort()

    def _reuse(self, hit: Reading, on_trial: "OnTrial | None") -> list["Trial"]:
        trials = hit.trials
        self.reused += len(trials)
        for trial in trials:
            if on_trial is not None:
                on_trial(trial)
        return trials


def proposal_store(directory: Path, on_error: Callable[[str], None] | None = None) -> KeptStore:
    """The store of KeptProposals in ``directory``: one file per optuna version and code of
    the strategies, the space and the configs."""
    env = {"optuna": _installed("optuna") or "none", "code": code_fingerprint("proposals")}
    return KeptStore(directory, "proposals", env, on_error)


class KeptProposals:
    """A seeded strategy whose proposals are kept and given again for the same space,
    history and number asked (the Strategy protocol: a strategy built with the same seed
    proposes the same configs then). On a rerun with the same seed whose readings are all
    kept, TPE's proposals, seconds of a run (optuna asks ~40 times per config it proposes
    in a discrete space), are not worked out again. Wrap only strategies whose proposals
    follow from the seed, space and history alone (``history_pure``: no LLM, no state
    carried from one call to the next). The rest of the Strategy protocol (name, notes,
    events, last_stats) is the strategy's own."""

    def __init__(self, strategy, seed: int, store: KeptStore) -> None:
        self.strategy = strategy
        self.seed = seed
        self.store = store  # proposal_store's: one per run, shared by its problems
        self.reused = 0

    @property
    def name(self) -> str:
        return self.strategy.name

    @property
    def history_pure(self) -> bool:
        return self.strategy.history_pure

    @property
    def events(self):
        return self.strategy.events

    @property
    def notes(self):
        return self.strategy.notes

    @property
    def last_stats(self):
        return self.strategy.last_stats

    def propose(self, space, history, n: int) -> list:
        text = json.dumps({
            "strategy": self.strategy.name, "seed": self.seed, "n": n, "problem": space.problem.to_dict(),
            "choices": {k: list(v) for k, v in space.choices.items()}, "smem": space.smem_limit, "tma": space.tma,
            "gpu": space.gpu, "programs": space.programs,
            "allowed": None if space.allowed is None else sorted(map(list, space.allowed)),
            "history": [[t.config.model_dump(), t.status, t.rank_ms if t.timed else None] for t in history],
        }, sort_keys=True, default=str)
        key = hashlib.sha256(text.encode()).hexdigest()
        hit = self.store.get(key)
        if hit is not None:
            self.reused += 1
            return [KernelConfig.from_dict(c) for c in hit[0]]
        configs = self.strategy.propose(space, history, n)
        self.store.put(key, [c.model_dump() for c in configs])
        return configs

