"""The one protocol every strategy follows, and what it reads: the problem's trials so far."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from abc import ABC, abstractmethod
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

from autokernel.config import ConfigError, KernelConfig
from autokernel.tuning.space import SearchSpace, config_key

if TYPE_CHECKING:
    import pandas as pd

    from autokernel.records import Problem


@dataclass(frozen=True)
class Observation:
    """One finished trial of a config, as a strategy sees it.

    ``ms`` is the ranking time (GPU time where it was measured, else the timer's median);
    None unless ``status`` is "success". ``error`` says why a failed trial failed.
    """

    config: KernelConfig
    status: str
    ms: float | None = None
    error: str | None = None
    row: dict | None = field(default=None, compare=False, repr=False)
    """The history row it was read from (observations()), for the figures beside ``ms``."""

    @property
    def ok(self) -> bool:
        return self.status == "success" and self.ms is not None


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

    def propose(self, space: SearchSpace, history: Sequence[Observation], n: int) -> list[KernelConfig]: ...


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
    def propose(self, space: SearchSpace, history: Sequence[Observation], n: int) -> list[KernelConfig]: ...


def problem_mask(df: "pd.DataFrame", problem: "Problem") -> "pd.Series":
    """The rows of a history frame that measured ``problem`` (any kernel)."""
    return (
        (df["M"] == problem.m) & (df["N"] == problem.n) & (df["K"] == problem.k)
        & (df["dtype"] == problem.dtype) & (df["activation"].fillna("none") == problem.activation)
        & (df["bias"].fillna(False) == problem.bias) & (df["layout"].fillna("nn") == problem.layout)
    )


def problem_rows(df: "pd.DataFrame", problem: "Problem", *, device: str | None = None,
                 timing: str | None = None) -> list[tuple[KernelConfig, dict]]:
    """(config, row) for the Triton trials of ``problem`` in a history frame, oldest first,
    filtered to ``device`` and ``timing`` when given (never mix GPUs or the interpreter).
    Rows whose config does not parse are skipped."""
    if df.empty:
        return []
    sel = problem_mask(df, problem) & (df["kernel"].fillna("triton") == "triton") & df["config"].notna()
    if device is not None:
        sel &= df["device"] == device
    if timing is not None:
        sel &= df["timing"] == timing
    from autokernel.history import to_records

    out = []
    for row in to_records(df[sel]):
        try:
            config = KernelConfig.from_dict(json.loads(row["config"]))
        except (ConfigError, ValueError, TypeError):
            continue
        out.append((config, row))
    return out


def observations(df: "pd.DataFrame", problem: "Problem", *, device: str | None = None,
                 timing: str | None = None) -> list[Observation]:
    """The Triton trials of ``problem`` in a history frame as Observations (see
    problem_rows), one per config: ranked by ``gpu_ms`` where measured, else ``ms``; a
    config measured more than once counts by its median re-timed row if it has one
    (history.drop_superseded), else by its fastest success, else its latest failure."""
    from autokernel.history import drop_superseded, is_retimed

    out: dict[tuple, Observation] = {}
    final: set[tuple] = set()
    if not df.empty:
        df = drop_superseded(df[problem_mask(df, problem)])  # this problem's rows only: a history holds many
    for config, row in problem_rows(df, problem, device=device, timing=timing):
        ms = row["gpu_ms"] if row["gpu_ms"] is not None else row["ms"]
        status = str(row["status"])
        ok = status == "success" and ms is not None
        obs = Observation(config, status, float(ms) if ok else None, row["error"], row)
        key = config_key(config)
        seen = out.get(key)
        if is_retimed(row["note"]):
            out[key] = obs
            final.add(key)
        elif key not in final and (seen is None or (obs.ok and (not seen.ok or obs.ms < seen.ms))
                                   or (not obs.ok and not seen.ok)):
            out[key] = obs
    return list(out.values())


def tried_keys(history: Sequence[Observation]) -> set[tuple]:
    """The tuned fields of every config already in ``history``."""
    return {config_key(o.config) for o in history}


def fresh(candidates, history: Sequence[Observation], n: int) -> list[KernelConfig]:
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
