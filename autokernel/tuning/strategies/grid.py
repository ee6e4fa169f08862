"""Grid search: every config of the space, in the space's fixed order."""

from __future__ import annotations

from typing import Sequence

from autokernel.config import KernelConfig
from autokernel.records import Trial
from autokernel.tuning.space import SearchSpace
from autokernel.tuning.strategies.base import StrategyBase, fresh


class GridStrategy(StrategyBase):
    """Walks the space exhaustively in a fixed order; deterministic, no seed. Each
    propose returns the next ``n`` configs not yet in the history."""

    name = "grid"

    def propose(self, space: SearchSpace, history: Sequence[Trial], n: int) -> list[KernelConfig]:
        return fresh(iter(space), history, n)
