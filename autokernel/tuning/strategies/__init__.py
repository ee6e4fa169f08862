"""Strategies by name: each proposes configs from the history (see base.Strategy).

STRATEGIES is the registry: name -> factory ``f(seed=..., **options) -> Strategy``. The
CLI's ``--strategy`` offers its names; ``register_strategy`` adds one. The registry is
light (the CLI reads it for its help): each strategy's module, which loads torch (the space)
and perhaps optuna or openai, is imported by its factory, on demand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from autokernel.tuning.strategies.base import Strategy, StrategyBase, observations

StrategyFactory = Callable[..., "Strategy"]


def _grid(*, seed: int | None = None, **options: Any) -> "Strategy":
    from autokernel.tuning.strategies.grid import GridStrategy

    return GridStrategy()


def _random(*, seed: int | None = None, **options: Any) -> "Strategy":
    from autokernel.tuning.strategies.random_search import RandomStrategy

    return RandomStrategy(seed=seed)


def _optuna(*, seed: int | None = None, **options: Any) -> "Strategy":
    from autokernel.tuning.strategies.optuna_tpe import OptunaStrategy

    return OptunaStrategy(seed=seed)


def _llm_factory(name: str) -> StrategyFactory:
    def make(*, seed: int | None = None, **options: Any) -> "Strategy":
        from autokernel.tuning.strategies.llm import make_llm_strategy

        return make_llm_strategy(name, seed=seed, **options)

    return make


STRATEGIES: dict[str, StrategyFactory] = {
    "grid": _grid, "random": _random, "optuna": _optuna, "llm": _llm_factory("llm"), "auto": _llm_factory("auto"),
}


def register_strategy(name: str, factory: StrategyFactory) -> None:
    """Make ``factory`` (``f(seed=..., **options) -> Strategy``) the strategy called ``name``."""
    STRATEGIES[name] = factory


def make_strategy(name: str, *, seed: int | None = None, **options: Any) -> "Strategy":
    """The strategy called ``name``, seeded; ValueError for an unknown name."""
    factory = STRATEGIES.get(name)
    if factory is None:
        raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return factory(seed=seed, **options)


_FROM_BASE = ("Strategy", "StrategyBase", "observations")


def __getattr__(name: str) -> Any:
    # The registry is read by the CLI's help, which must import no torch; the protocol and
    # the history's reading (base: the configs and the space) load it.
    if name in _FROM_BASE:
        from autokernel.tuning.strategies import base

        return getattr(base, name)
    raise AttributeError(f"module 'autokernel.tuning.strategies' has no attribute {name!r}")


__all__ = ["STRATEGIES", "Strategy", "StrategyBase", "make_strategy", "observations",
           "register_strategy"]
