"""Tuning: a search space per problem, strategies that propose configs from the history,
and the loop that evaluates, records and feeds the results back.

``autokernel.tuning.tune(problems, ...)`` (tuning.run) tunes from Python what
``autokernel tune`` and ``autokernel loop`` tune from the shell, on one GPU, every GPU of
a machine (tuning.fleet) or a Ray cluster (tuning.cluster).

The tuner knows kernels only through one evaluation call (``autokernel.evaluate``, run
in an isolated worker by ``tuning.worker``); strategies never launch kernels and never
write files.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Hooks", "RequestError", "TuneOutcome", "TuneRun", "tune"]


def __getattr__(name: str) -> Any:
    # tuning.run imports the loop (torch, Triton); the package itself stays light,
    # for the timing worker's module, which must load no torch before its workers do.
    if name in __all__:
        from autokernel.tuning import run

        return getattr(run, name)
    raise AttributeError(f"module 'autokernel.tuning' has no attribute {name!r}")
