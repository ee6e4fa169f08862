"""Strategies by name: each proposes configs from the history (see base.Strategy)."""

from __future__ import annotations

from autokernel.tuning.strategies.base import Observation, Strategy, observations

STRATEGIES = ("grid", "random", "optuna", "llm", "auto")


def make_strategy(name: str, *, seed: int | None = None, **options) -> Strategy:
    """The strategy called ``name``, seeded; ValueError for an unknown name. Heavy or
    optional libraries (optuna, openai) are imported only here, on demand."""
    if name == "grid":
        from autokernel.tuning.strategies.grid import GridStrategy

        return GridStrategy()
    if name == "random":
        from autokernel.tuning.strategies.random_search import RandomStrategy

        return RandomStrategy(seed=seed)
    if name == "optuna":
        from autokernel.tuning.strategies.optuna_tpe import OptunaStrategy

        return OptunaStrategy(seed=seed)
    if name in ("llm", "auto"):
        from autokernel.tuning.strategies.llm import make_llm_strategy

        return make_llm_strategy(name, seed=seed, **options)
    raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")


__all__ = ["STRATEGIES", "Observation", "Strategy", "make_strategy", "observations"]
