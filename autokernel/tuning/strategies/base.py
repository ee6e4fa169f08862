"""The one protocol every strategy follows, and what it reads: the problem's trials so far.

A strategy reads the history as Trials (records.Trial): those read back from the file are
records.Recorded, those measured this run plain Trials, and a config proposed but not yet
measured is a Trial of status "pending". ``Trial.timed`` says whether one ranks, by
``rank_ms``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import MappingProxyType
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from autokernel.config import KernelConfig
from autokernel.history import drop_superseded, is_retimed
from autokernel.records import Problem, Recorded, Trial
from autokernel.tuning.space import SearchSpace, config_key


@runtime_checkable
class Strategy(Protocol):
    """Proposes the next configs to try. Never launches kernels, never writes files.

    ``propose`` returns at most ``n`` configs, each valid in ``space`` (``space.contains``),
    unique, and not already in ``history``; fewer (possibly none) when the space has no
    more. A strategy built with the same seed proposes the same configs for the same
    space and history.

    What the tuner reads after each ``propose``: ``notes`` maps ``config_key(config)`` to
    why a config was proposed (kept in the history's note); ``last_stats`` holds figures of
    that call (an LLM's tokens and latency), or None; ``events`` is an append-only log of
    what went wrong or changed, one line each. ``history_pure``: the proposals follow from
    the seed, space and history alone, so they may be kept and given again
    (readings.KeptProposals). StrategyBase gives the defaults.
    """

    name: str
    history_pure: bool
    events: Sequence[str]
    notes: Mapping[tuple, str]
    last_stats: Mapping[str, Any] | None

    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]: ...


class StrategyBase(ABC):
    """The Strategy protocol's defaults: no notes, no stats, no events, not history-pure.
    A strategy with things to say sets its own (instance) ``events``, ``notes`` and
    ``last_stats``."""

    name: str = "strategy"
    history_pure: bool = False
    events: Sequence[str] = ()
    notes: Mapping[tuple, str] = MappingProxyType({})
    last_stats: Mapping[str, Any] | None = None

    @abstractmethod
    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]: ...


def pending(problem: Problem, configs: Sequence[KernelConfig]) -> list[Trial]:
    """``configs`` as trials proposed but not yet measured (status "pending")."""
    return [Trial(problem, c, "pending") for c in configs]


def problem_rows(trials: Sequence[Recorded], problem: Problem, *, device: str | None = None,
                 timing: str | None = None) -> list[Recorded]:
    """The Triton trials of ``problem`` in the history, oldest first, filtered to ``device``
    and ``timing`` when given (never mix GPUs or the interpreter). Rows whose config does
    not parse are skipped."""
    return [t for t in trials if t.problem == problem and t.kernel == "triton" and t.config is not None
            and (device is None or t.device == device) and (timing is None or t.timing == timing)]


def observations(trials: Sequence[Recorded], problem: Problem, *, device: str | None = None,
                 timing: str | None = None) -> list[Recorded]:
    """The Triton trials of ``problem`` in the history (see problem_rows), one per config:
    ranked by ``gpu_ms`` where measured, else ``ms``; a config measured more than once
    counts by its median re-timed row if it has one (history.drop_superseded), else by its
    fastest success, else its latest failure."""
    out: dict[tuple, Recorded] = {}
    final: set[tuple] = set()
    mine = drop_superseded([t for t in trials if t.problem == problem])  # this problem's rows only: a history holds many
    for trial in problem_rows(mine, problem, device=device, timing=timing):
        key = config_key(trial.config)
        seen = out.get(key)
        if is_retimed(trial.note):
            out[key] = trial
            final.add(key)
        elif key not in final and (seen is None or (trial.timed and (not seen.timed or trial.rank_ms < seen.rank_ms))
                                   or (not trial.timed and not seen.timed)):
            out[key] = trial
    return list(out.values())


def tried_keys(history: Sequence[Trial]) -> set[tuple]:
    """The tuned fields of every config already in ``history``."""
    return {config_key(o.config) for o in history}


def fresh(candidates, history: Sequence[Trial], n: int) -> list[KernelConfig]:
    """The first ``n`` of ``candidates`` that are neither in ``history`` nor repeated."""
    seen = tried_keys(history)
    out = []
    for config in candidates:
        key = config_key(config)
        if key in seen:
            continue
        seen.add(key)
        out.append(config)
        if len(out) == n:
            break
    return out
