"""The one door between tuning and kernels: an Evaluator turns configs into Trials."""

from __future__ import annotations

from typing import Iterable

from autokernel.history import RETIMED, is_retimed  # noqa: F401  (RETIMED: the note of a re-timed trial)
from autokernel.records import Trial
from autokernel.tuning.protocols import Evaluator, EvaluatorBase, OnTrial  # noqa: F401  (the protocol lives there)
from autokernel.tuning.space import config_key

RETIME_MARGIN = 0.10


def suspicious_pair(trials: Iterable[Trial], margin: float = RETIME_MARGIN) -> tuple[Trial, Trial] | None:
    """The winner and the runner-up among ``trials`` (of one problem, on one device) when
    the winner is more than ``margin`` faster (runner-up rank_ms / winner rank_ms - 1 >
    margin) and was not re-timed yet; else None. Then call
    ``evaluator.retime(problem, [winner.config, runner_up.config])``.

    One trial per config counts: its latest re-timed trial where there is one (these are
    one batch's trials: one reading per config), else its fastest; failed trials and
    trials without a time are ignored.
    """
    per_config: dict[tuple, Trial] = {}
    for trial in trials:
        if not trial.ok or trial.rank_ms is None or trial.config is None:
            continue
        key = config_key(trial.config)
        seen = per_config.get(key)
        if seen is None or _retimed(trial) or (not _retimed(seen) and trial.rank_ms < seen.rank_ms):
            per_config[key] = trial
    ranked = sorted(per_config.values(), key=lambda t: t.rank_ms)
    if len(ranked) < 2:
        return None
    winner, runner_up = ranked[0], ranked[1]
    if _retimed(winner) or runner_up.rank_ms <= winner.rank_ms * (1 + margin):
        return None
    return winner, runner_up


def mark_retimed(trial: Trial) -> Trial:
    """``trial`` with RETIMED appended to its note (an LLM's rationale stays before it)."""
    trial.note = f"{trial.note}; {RETIMED}" if trial.note else RETIMED
    return trial


def _retimed(trial: Trial) -> bool:
    return is_retimed(trial.note)  # mark_retimed appends it
