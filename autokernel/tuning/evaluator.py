"""The one door between tuning and kernels: an Evaluator turns configs into Trials."""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from autokernel.config import KernelConfig
from autokernel.evaluate import Trial
from autokernel.problem import Problem

OnTrial = Callable[[Trial], None]


class Evaluator(Protocol):
    """Checks and times configs for a problem; a bad config is a failed Trial, never an
    exception that ends the run.

    ``evaluate`` returns one Trial per config, in the order given, and calls ``on_trial``
    with each as soon as it is final, so the caller can record it before the next one
    finishes (Ctrl-C then loses nothing already measured). ``close`` releases workers.
    """

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]: ...

    def close(self) -> None: ...
