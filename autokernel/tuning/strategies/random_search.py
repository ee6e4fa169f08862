"""Random search: uniform samples from the untried configs of the space."""

from __future__ import annotations

import random
from typing import Sequence

from autokernel.config import KernelConfig
from autokernel.records import Trial
from autokernel.tuning.space import SearchSpace, config_key
from autokernel.tuning.strategies.base import StrategyBase, tried_keys


class RandomStrategy(StrategyBase):
    """Samples ``n`` untried configs uniformly, without replacement. One seed gives the
    same sequence of proposals for the same space and history."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]:
        tried = tried_keys(history)
        pool = [c for c in space if config_key(c) not in tried]
        return self._rng.sample(pool, min(n, len(pool)))
