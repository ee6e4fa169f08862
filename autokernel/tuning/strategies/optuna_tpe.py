"""Optuna's TPE over the space, warm-started from the history through ask/tell."""

from __future__ import annotations

import math
import random
from typing import Sequence

from autokernel import knobs
from autokernel.config import KernelConfig
from autokernel.records import Trial
from autokernel.tuning.space import PARAMS, SearchSpace, build_config, config_key
from autokernel.tuning.strategies.base import StrategyBase, pending, tried_keys

# optuna is optional and slow to import: imported where TPE first proposes.

_ASKS_PER_PROPOSAL = 40  # TPE re-suggests in discrete spaces: ask this often before filling at random
_N_STARTUP = 6


class OptunaStrategy(StrategyBase):
    """Tree-structured Parzen estimator (optuna.samplers.TPESampler, multivariate).

    Each propose rebuilds a study from the history: successful trials are told their
    log time, failed ones (and configs the space rejects) a penalty a little worse than
    the slowest success, so TPE learns to avoid them. Ordinal fields (tiles, warps,
    stages) are indices into their choices, so TPE sees their order; the knobs of named
    values (the variant: knobs.py) are categorical. Until the history holds TPE's start-up
    trials (``n_startup_trials``), proposals are uniform samples of the valid untried
    configs, as TPE's start would be without its invalid draws. Proposals repeat neither
    the history nor each other; where TPE keeps re-suggesting, the rest is filled with
    untried configs at random. Seeded per call from (seed, history length), so one seed
    reproduces a whole run.
    """

    name = "optuna"
    history_pure = True
    """Its proposals follow from the seed, the space and the history alone (each call is
    seeded from (seed, history length)): readings.KeptProposals may keep them."""

    def __init__(self, seed: int | None = None, n_startup_trials: int = _N_STARTUP, exploit: float = 0.0) -> None:
        self.seed = seed
        self.n_startup_trials = n_startup_trials
        self.exploit = exploit

    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]:
        """``n`` configs: with ``exploit`` > 0, that share of them from the untried
        neighbours of the best configs so far (one field one step away), the rest from TPE."""
        local = local_moves(space, history, round(n * self.exploit), self.seed) if self.exploit else []
        seen = [*history, *pending(space.problem, local)]
        return local + self._tpe(space, seen, n - len(local))

    def _tpe(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]:
        if n <= 0:
            return []
        import optuna
        from optuna.distributions import CategoricalDistribution, IntDistribution

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        call_seed = None if self.seed is None else hash((self.seed, len(history))) & 0x7FFFFFFF
        dists = {
            name: CategoricalDistribution(space.choices[name]) if knobs.KNOB[name].categorical
            else IntDistribution(0, len(space.choices[name]) - 1)
            for name in PARAMS
        }

        def params_of(config: KernelConfig) -> dict | None:
            """The study's params of ``config``, or None where a value lies outside this
            space's choices (a config of another space: the study cannot hold it)."""
            values = {name: getattr(config, name) for name in PARAMS}
            if any(v not in space.choices[name] for name, v in values.items()):
                return None
            return {name: v if knobs.KNOB[name].categorical else space.choices[name].index(v)
                    for name, v in values.items()}

        def config_of(params: dict) -> KernelConfig | None:
            return build_config({name: params[name] if knobs.KNOB[name].categorical else space.choices[name][params[name]]
                                 for name in PARAMS})

        logs = [math.log(o.rank_ms) for o in history if o.timed and o.rank_ms > 0]
        penalty = (max(logs) if logs else 0.0) + 1.0  # e times slower than the slowest success
        known: dict[tuple, float] = {}
        sampler = optuna.samplers.TPESampler(
            seed=call_seed, multivariate=True, constant_liar=True, n_startup_trials=self.n_startup_trials,
        )
        study = optuna.create_study(direction="minimize", sampler=sampler)
        for obs in history:
            params = params_of(obs.config)
            if params is None:
                continue
            value = math.log(obs.rank_ms) if obs.timed and obs.rank_ms > 0 else penalty
            known[config_key(obs.config)] = value
            if obs.status == "pending":
                continue  # proposed in this call by another route: not a result, only not to repeat
            study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=value))

        tried = tried_keys(history)
        out: list[KernelConfig] = []
        chosen: set[tuple] = set()
        if len(study.trials) < self.n_startup_trials:
            # TPE's own start is independent uniform samples, which in this space are nearly
            # all invalid (about 1 in 80 of the fields' product is a config): asked for them,
            # it spent seconds on penalties before the fill below. Uniform over the valid
            # configs at once is the same start.
            asks = 0
        else:
            asks = _ASKS_PER_PROPOSAL * n
        for _ in range(asks):
            if len(out) == n:
                break
            trial = study.ask(dists)
            config = config_of(trial.params)
            if config is None or not space.contains(config):
                study.tell(trial, penalty)
                continue
            key = config_key(config)
            if key in tried:
                study.tell(trial, known.get(key, penalty))
            elif key in chosen:
                pass  # left running: the constant liar steers the next asks away from it
            else:
                chosen.add(key)
                out.append(config)
        if len(out) < n:  # TPE is stuck on what it knows: fill from the untried rest
            rng = random.Random(call_seed)
            rest = [c for c in space if config_key(c) not in tried and config_key(c) not in chosen]
            out += rng.sample(rest, min(n - len(out), len(rest)))
        return out


def neighbours(space: SearchSpace, config: KernelConfig) -> list[KernelConfig]:
    """The configs of ``space`` one step from ``config``: one ordinal field moved to the next
    choice up or down, or the variant switched."""
    out = []
    for name in PARAMS:
        choices = space.choices[name]
        value = getattr(config, name)
        if value not in choices:
            continue
        i = choices.index(value)
        steps = [c for c in choices if c != value] if knobs.KNOB[name].categorical else \
            [choices[j] for j in (i - 1, i + 1) if 0 <= j < len(choices)]
        for v in steps:
            candidate = build_config({p: getattr(config, p) for p in PARAMS} | {name: v})
            if candidate is not None and space.contains(candidate):
                out.append(candidate)
    return out


def local_moves(space: SearchSpace, history: Sequence[Trial], n: int, seed: int | None) -> list[KernelConfig]:
    """Up to ``n`` untried neighbours of the best configs so far, best config first, in a
    seeded random order within each neighbourhood."""
    if n <= 0:
        return []
    rng = random.Random(None if seed is None else hash((seed, len(history), 1)))  # ints only: str hashes vary per process
    seen = tried_keys(history)
    out: list[KernelConfig] = []
    for obs in sorted((o for o in history if o.timed), key=lambda o: o.rank_ms):
        near = [c for c in neighbours(space, obs.config) if config_key(c) not in seen]
        rng.shuffle(near)
        for c in near:
            seen.add(config_key(c))
            out.append(c)
            if len(out) == n:
                return out
    return out
