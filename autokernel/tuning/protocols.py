"""What the tuner asks of an evaluator: the Evaluator protocol and its base class.

Light on purpose (the records only): the timing worker's module builds on it and must
load neither torch nor Triton before its workers do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, runtime_checkable

from autokernel.records import KernelConfig, Problem, Trial

if TYPE_CHECKING:
    from autokernel.tuning.space import SearchSpace

OnTrial = Callable[[Trial], None]


@runtime_checkable
class Evaluator(Protocol):
    """Checks and times configs for a problem; a bad config is a failed Trial, never an
    exception that ends the run.

    ``evaluate`` returns one Trial per config, in the order given, and calls ``on_trial``
    with each as soon as it is final, so the caller can record it before the next one
    finishes (Ctrl-C then loses nothing already measured). ``retime`` measures configs
    again side by side, each new Trial noted "re-timed" (for a winner suspiciously far
    ahead of the runner-up, evaluator.suspicious_pair, and for the leaders when a
    problem's tuning ends). ``baseline`` is cuBLAS (torch) on the problem, or None where
    there is none to give. ``space`` is the configs that may be proposed for a problem.
    ``reused`` and ``measured`` count the trials answered from kept readings and measured
    anew (both 0 where nothing is kept). ``device`` and ``timing`` label the rows of its
    trials where the evaluator decides them (a replayed sweep's device, "replay"); None:
    the machine's that runs the candidates. ``close`` releases workers.
    """

    reused: int
    measured: int
    device: str | None
    timing: str | None

    def space(self, problem: Problem) -> "SearchSpace": ...

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]: ...

    def retime(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]: ...

    def baseline(self, problem: Problem, on_trial: OnTrial | None = None) -> Trial | None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class EvaluatorBase(ABC):
    """The Evaluator protocol's defaults: the problem's full search space on this machine,
    no baseline, no kept readings, nothing to close. ``evaluate`` and ``retime`` are each
    evaluator's own."""

    reused: int = 0
    measured: int = 0
    device: str | None = None
    timing: str | None = None

    def space(self, problem: Problem) -> "SearchSpace":
        from autokernel.tuning.space import SearchSpace  # reads the GPU's limits: torch

        return SearchSpace.for_problem(problem)

    @abstractmethod
    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]: ...

    @abstractmethod
    def retime(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]: ...

    def baseline(self, problem: Problem, on_trial: OnTrial | None = None) -> Trial | None:
        return None

    def close(self) -> None:
        pass

    def abort(self) -> None:
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
