"""Offline replay: a recorded sweep (problem, config -> time or failure) stands in for
the GPU, so strategies can be compared and tested without one (like Kernel Tuner's
simulation mode).

A sweep file is a history CSV (autokernel/history.py), typically written by
``autokernel tune --strategy grid`` over the whole space on a GPU. Replaying it gives
every config exactly the trial that was recorded for it, and the space is the set of
configs the sweep holds.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Sequence

from autokernel.config import KernelConfig
from autokernel.history import History
from autokernel.records import Problem, Recorded, Trial
from autokernel.tuning import loop
from autokernel.tuning.evaluator import EvaluatorBase, OnTrial, mark_retimed
from autokernel.tuning.space import GPU_CHOICES, INTERPRETER_CHOICES, SearchSpace, config_key
from autokernel.tuning.strategies import make_strategy
from autokernel.tuning.strategies.base import problem_rows


class ReplayEvaluator(EvaluatorBase):
    """An Evaluator that answers from a recorded sweep instead of running kernels."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"replay file {self.path} does not exist")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a torn line in a sweep is one config fewer
            self._recorded = History(self.path).trials()
        if not any(t.config_text is not None for t in self._recorded):
            raise ValueError(f"replay file {self.path} holds no recorded trials: give a history CSV of a sweep")
        self._cache: dict[Problem, dict[tuple, Trial]] = {}
        devices = list(dict.fromkeys(t.device for t in self._recorded if t.device is not None))
        self.device = devices[0] if len(devices) == 1 else ", ".join(devices)
        self.gpu = not any(t.timing == "interpreter" for t in self._recorded)
        self.timing = "replay"  # what the trials it answers are labelled: never mistaken for measurements

    def _trials(self, problem: Problem) -> dict[tuple, Trial]:
        if problem not in self._cache:
            table: dict[tuple, Trial] = {}
            measured = [t for t in self._recorded if t.timing != "replay"]
            for recorded in problem_rows(measured, problem):
                table.setdefault(config_key(recorded.config), self._trial(recorded, note="replayed"))
            self._cache[problem] = table
        return self._cache[problem]

    def problems(self) -> list[Problem]:
        """The problems the sweep covers."""
        return list(dict.fromkeys(t.problem for t in self._recorded if t.config_text is not None))

    def space(self, problem: Problem) -> SearchSpace:
        """The space of the sweep: exactly the configs it recorded for ``problem``."""
        table = self._trials(problem)
        if not table:
            raise ValueError(f"replay file {self.path} has no trials of {problem.label()}")
        gpu = self.gpu
        return SearchSpace(problem, dict(GPU_CHOICES if gpu else INTERPRETER_CHOICES), None, True, gpu=gpu,
                           allowed=frozenset(table))

    def best(self, problem: Problem) -> Trial | None:
        """The fastest successful trial of the sweep: the exhaustive best of its space."""
        ok = [t for t in self._trials(problem).values() if t.ok and t.ms is not None]
        return min(ok, key=lambda t: t.rank_ms, default=None)

    def baseline(self, problem: Problem, on_trial: OnTrial | None = None) -> Trial | None:
        """The sweep's cuBLAS (kernel "torch") trial of ``problem``, if it recorded one
        (recorded already: ``on_trial`` is not called)."""
        rows = [t for t in self._recorded if t.problem == problem and t.kernel == "torch"]
        if not rows:
            return None
        return self._trial(rows[-1])

    def _trial(self, recorded: Recorded, **fields) -> Trial:
        """The Trial a recorded history row stands for, labelled as replayed timing."""
        return Trial(recorded.problem, recorded.config, recorded.status, kernel=recorded.kernel, ms=recorded.ms,
                     p20=recorded.p20, p80=recorded.p80, tflops=recorded.tflops, rel_error=recorded.rel_error,
                     max_abs_diff=recorded.max_abs_diff, timing=self.timing, error=recorded.error,
                     gpu_ms=recorded.gpu_ms, **fields)

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        table = self._trials(problem)
        out = []
        for config in configs:
            recorded = table.get(config_key(config))
            if recorded is None:
                trial = Trial(problem, config, "runtime_error", timing=self.timing,
                              error=f"not in the replayed sweep {self.path.name}")
            else:
                trial = dc_replace(recorded)
            if on_trial is not None:
                on_trial(trial)
            out.append(trial)
        return out

    def retime(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        """A sweep holds one measurement per config: its trials again, marked re-timed."""
        trials = [mark_retimed(t) for t in self.evaluate(problem, configs)]
        if on_trial is not None:
            for trial in trials:
                on_trial(trial)
        return trials

    def close(self) -> None:
        pass


def trials_to_reach(times_ms: Sequence[float | None], target_ms: float) -> int | None:
    """The 1-based trial at which the best time so far first reaches ``target_ms``, or None."""
    best = math.inf
    for i, ms in enumerate(times_ms, start=1):
        if ms is not None:
            best = min(best, ms)
        if best <= target_ms:
            return i
    return None


def compare_strategies(path: str | Path, strategies: Sequence[str], seeds: Sequence[int], *, budget: int,
                       per_generation: int = 8, fraction: float = 0.98,
                       problems: Sequence[Problem] | None = None, prior: bool = True) -> list[dict]:
    """For each problem of a recorded sweep, strategy and seed: how many trials a fresh
    tuning run needed to reach ``fraction`` of the sweep's exhaustive best throughput,
    within ``budget`` trials (None: not reached). With ``prior`` the run tries the default
    config first, as ``autokernel tune`` does; without, the strategy alone proposes."""
    replay = ReplayEvaluator(path)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for problem in problems or replay.problems():
            best = replay.best(problem)
            if best is None:
                continue
            target = best.rank_ms / fraction
            space = replay.space(problem)
            for name in strategies:
                for seed in seeds:
                    store = History(Path(tmp) / f"{name}-{seed}-{len(rows)}.csv")
                    result = loop.tune(
                        problem, strategy=make_strategy(name, seed=seed), evaluator=replay, store=store, space=space,
                        generations=-(-budget // per_generation), per_generation=per_generation, run_id="compare",
                        device=replay.device, timing=replay.timing,
                        seeds=loop.prior_configs(problem, space, None, device=replay.device, timing=replay.timing)
                        if prior else (),
                        stop=loop.StopRules(max_trials=budget))
                    times = [t.rank_ms if t.ok else None for t in result.trials]
                    rows.append({"problem": problem.label(), "strategy": name, "seed": seed, "space": space.size(),
                                 "best_ms": best.rank_ms, "trials": trials_to_reach(times, target),
                                 "reached": min((t for t in times if t is not None), default=None)})
    return rows
