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
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from autokernel.config import KernelConfig
    from autokernel.evaluate import Trial
    from autokernel.problem import Problem
    from autokernel.tuning.evaluator import OnTrial

KEPT_STATUSES = frozenset({"success", "failed_correctness", "compile_error", "out_of_resources"})
"""Outcomes a new measurement would repeat; a timeout or a lost worker ("runtime_error")
may be the machine's, so it is measured again."""

_NOT_MEASURING = ("cli", os.path.join("tuning", "strategies"))
"""Package folders whose code does not change what a reading measures (the rest of the
package is fingerprinted: kernels, launch path, checks, timers, the worker)."""


def cache_dir() -> Path:
    """Where readings are kept: $AUTOKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/autokernel, else ~/.cache/autokernel."""
    if os.environ.get("AUTOKERNEL_CACHE_DIR"):
        return Path(os.environ["AUTOKERNEL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autokernel"


def code_fingerprint(keep=lambda rel: not rel.startswith(_NOT_MEASURING)) -> str:
    """A hash of the package's modules whose path (relative to the package) ``keep``
    accepts, by path and content; by default the measuring code: all but the CLI and the
    strategies."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root))
        if keep(rel):
            digest.update(rel.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def environment(device: str, timing: str) -> dict[str, str]:
    """What a reading depends on besides its problem and configs."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    try:
        triton_version = version("triton")
    except PackageNotFoundError:
        triton_version = "none"
    return {"device": device, "timing": timing, "torch": torch.__version__, "triton": triton_version,
            "code": code_fingerprint()}


def _key(kind: str, problem: "Problem", configs: Sequence["KernelConfig"]) -> str:
    text = json.dumps({"kind": kind, "problem": problem.to_dict(), "configs": [c.model_dump() for c in configs]},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Reading:
    """Kept trials (as Trial.to_dict) and when they were measured (ISO 8601, UTC)."""

    trials: list[dict[str, Any]]
    measured_at: str


class KeptStore:
    """JSON payloads by key, kept for one environment ``env`` in ``directory``/``prefix``-<env hash>.jsonl.

    The file is read once, at the first lookup; writes append one line each under a
    file lock, so runs in parallel may share it. A line that does not parse (a write cut
    short) is skipped; a later line for a key wins.
    """

    def __init__(self, directory: Path, prefix: str, env: dict[str, str]) -> None:
        self.env = env
        name = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]
        self.path = Path(directory) / f"{prefix}-{name}.jsonl"
        self._entries: dict[str, tuple[Any, str]] | None = None

    def get(self, key: str) -> tuple[Any, str] | None:
        """(payload, when it was kept, ISO 8601 UTC), or None."""
        if self._entries is None:
            self._entries = self._load()
        return self._entries.get(key)

    def put(self, key: str, payload: Any) -> str:
        """Keep ``payload`` under ``key``; returns when (ISO 8601 UTC)."""
        from filelock import FileLock

        at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        line = json.dumps({"key": key, "env": self.env, "at": at, "payload": payload})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            with self.path.open("a") as f:
                f.write(line + "\n")
        if self._entries is not None:
            self._entries[key] = (payload, at)
        return at

    def _load(self) -> dict[str, tuple[Any, str]]:
        entries: dict[str, tuple[Any, str]] = {}
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return entries
        for line in lines:
            try:
                record = json.loads(line)
                if record["env"] == self.env:
                    entries[record["key"]] = (record["payload"], str(record["at"]))
            except (ValueError, KeyError, TypeError):
                continue
        return entries


class ReadingCache:
    """The kept readings of one environment (``environment``), in ``directory``."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.store = KeptStore(directory, "readings", env)

    @property
    def path(self) -> Path:
        return self.store.path

    def get(self, kind: str, problem: "Problem", configs: Sequence["KernelConfig"]) -> Reading | None:
        hit = self.store.get(_key(kind, problem, configs))
        return None if hit is None else Reading(list(hit[0]), hit[1])

    def put(self, kind: str, problem: "Problem", configs: Sequence["KernelConfig"], trials: Sequence["Trial"]) -> None:
        """Keep ``trials`` as the reading of (kind, problem, configs) when every one is kept-worthy."""
        if trials and all(t.status in KEPT_STATUSES for t in trials):
            self.store.put(_key(kind, problem, configs), [t.to_dict() for t in trials])


def reused_note(note: str | None, measured_at: str) -> str:
    """``note`` with the reuse said in it; a "re-timed" mark stays last (history.is_retimed)."""
    from autokernel.history import RETIMED, is_retimed

    said = f"reused reading of {measured_at}"
    if is_retimed(note):
        head = note[: -len(RETIMED)].rstrip("; ")
        return "; ".join(part for part in (head, said, RETIMED) if part)
    return f"{note}; {said}" if note else said


def _trial(data: dict[str, Any], measured_at: str) -> "Trial":
    from autokernel.config import KernelConfig
    from autokernel.evaluate import Trial
    from autokernel.problem import Problem

    fields = dict(data)
    fields["problem"] = Problem(**fields["problem"])
    fields["config"] = None if fields["config"] is None else KernelConfig.from_dict(fields["config"])
    fields["note"] = reused_note(fields.get("note"), measured_at)
    return Trial(**fields)


class CachingEvaluator:
    """An Evaluator (tuning.evaluator.Evaluator) that answers from ``cache`` what was
    measured before and asks ``inner`` for the rest, keeping what it measures.

    ``reused`` and ``measured`` count trials (a re-time's configs and the baseline
    included).
    """

    def __init__(self, inner, cache: ReadingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.reused = 0
        self.measured = 0

    def evaluate(self, problem: "Problem", configs: Sequence["KernelConfig"],
                 on_trial: "OnTrial | None" = None) -> list["Trial"]:
        trials: list[Trial | None] = [None] * len(configs)
        missing: list[int] = []
        for i, config in enumerate(configs):
            hit = self.cache.get("evaluate", problem, [config])
            if hit is None:
                missing.append(i)
            else:
                trials[i] = self._reuse(hit, on_trial)[0]

        def keep(trial: "Trial") -> None:
            self.cache.put("evaluate", problem, [trial.config], [trial])  # before on_trial can touch its note
            self.measured += 1
            if on_trial is not None:
                on_trial(trial)

        if missing:
            fresh = self.inner.evaluate(problem, [configs[i] for i in missing], on_trial=keep)
            for i, trial in zip(missing, fresh):
                trials[i] = trial
        return trials  # type: ignore[return-value]  # every index was filled

    def retime(self, problem: "Problem", configs: Sequence["KernelConfig"],
               on_trial: "OnTrial | None" = None) -> list["Trial"]:
        from autokernel.history import is_retimed

        hit = self.cache.get("retime", problem, configs)
        if hit is not None:
            return self._reuse(hit, on_trial)
        got: list[Trial] = []
        trials = self.inner.retime(problem, configs, on_trial=lambda t: got.append(t))
        if len(got) == len(configs) and all(is_retimed(t.note) for t in got):
            self.cache.put("retime", problem, configs, trials)
        self.measured += len(got)
        for trial in got:
            if on_trial is not None:
                on_trial(trial)
        return trials

    def baseline(self, problem: "Problem", on_trial: "OnTrial | None" = None) -> "Trial":
        hit = self.cache.get("baseline", problem, [])
        if hit is not None:
            return self._reuse(hit, on_trial)[0]
        trial = self.inner.baseline(problem)
        self.cache.put("baseline", problem, [], [trial])
        self.measured += 1
        if on_trial is not None:
            on_trial(trial)
        return trial

    def close(self) -> None:
        self.inner.close()

    def _reuse(self, hit: Reading, on_trial: "OnTrial | None") -> list["Trial"]:
        trials = [_trial(data, hit.measured_at) for data in hit.trials]
        self.reused += len(trials)
        for trial in trials:
            if on_trial is not None:
                on_trial(trial)
        return trials


_PROPOSING = ("config.py", "problem.py", "tuning")
"""The code a strategy's proposals depend on (the strategies, the space, the configs)."""


class KeptProposals:
    """A seeded strategy whose proposals are kept and given again for the same space,
    history and number asked (the Strategy protocol: a strategy built with the same seed
    proposes the same configs then). On a rerun with the same seed whose readings are all
    kept, TPE's proposals, seconds of a run (optuna asks ~40 times per config it proposes
    in a discrete space), are not worked out again. Wrap only strategies that depend on
    nothing else: no LLM. Other attributes (name, notes, events) are the strategy's own."""

    def __init__(self, strategy, seed: int, directory: Path) -> None:
        try:
            from importlib.metadata import version

            optuna_version = version("optuna")
        except Exception:  # noqa: BLE001  (not installed: the strategies that need it say so)
            optuna_version = "none"
        self.strategy = strategy
        self.seed = seed
        self.store = KeptStore(directory, "proposals", {
            "optuna": optuna_version, "code": code_fingerprint(lambda rel: rel.startswith(_PROPOSING))})
        self.reused = 0

    def __getattr__(self, name: str):
        return getattr(self.strategy, name)

    def propose(self, space, history, n: int) -> list:
        from autokernel.config import KernelConfig

        text = json.dumps({
            "strategy": self.strategy.name, "seed": self.seed, "n": n, "problem": space.problem.to_dict(),
            "choices": {k: list(v) for k, v in space.choices.items()}, "smem": space.smem_limit, "tma": space.tma,
            "gpu": space.gpu, "programs": space.programs,
            "allowed": None if space.allowed is None else sorted(map(list, space.allowed)),
            "history": [[o.config.model_dump(), o.status, o.ms] for o in history],
        }, sort_keys=True, default=str)
        key = hashlib.sha256(text.encode()).hexdigest()
        hit = self.store.get(key)
        if hit is not None:
            self.reused += 1
            return [KernelConfig.from_dict(c) for c in hit[0]]
        configs = self.strategy.propose(space, history, n)
        self.store.put(key, [c.model_dump() for c in configs])
        return configs

