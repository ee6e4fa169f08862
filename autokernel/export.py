"""A best-config file from the history: the fastest successful config per problem of one device.

Apart from the history store (``autokernel.history``) because a BestFile is the run-time
pick's (``autokernel.best``, which loads torch and Triton): the store, and the commands
that only read it, stay light.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from autokernel import best, runtime
from autokernel.history import best_per_problem, drop_superseded, is_triton_forward
from autokernel.records import Problem, Recorded, Trial, normalize_activation, parse_dtype, problem_columns


def export_best(trials: Sequence[Recorded], device: str | None = None, dtype: str | Iterable[str] | None = None,
                activation: str | Iterable[str] | None = None) -> best.BestFile:
    """The best successful config per problem in the history's ``trials`` (``History.trials()``).

    device: the GPU name as the history writes it, its ``device_key``, or a part of that
    key naming one device of the history (e.g. "h100"); by default the only device
    with successful trials, else this machine's. Only the device's own kind of timing
    counts: interpreter rows for the interpreter's device, GPU rows for a GPU (replayed
    rows, "replay", never: they repeat a recorded sweep; a warning counts what was skipped).
    dtype, activation: keep only these (names or aliases; one or several).

    Raises ValueError for an unknown dtype or activation, or when no device is given and
    the history has trials of several. No successful trial gives a file with no entries.
    Rows whose config is not a valid KernelConfig (a hand edit) are skipped with a warning.
    """
    dtypes = _names(dtype, parse_dtype)
    activations = _names(activation, normalize_activation)
    trials = [t for t in trials if (not dtypes or t.problem.dtype in dtypes)
              and (not activations or t.problem.activation in activations)]
    ours = [t for t in trials if is_triton_forward(t)]
    name = _pick_device(trials, [t for t in ours if _succeeded(t)], device)
    timing = "interpreter" if name == runtime.INTERPRETER_DEVICE else "gpu"
    other = [t for t in ours if _succeeded(t) and t.device == name and t.timing != timing]
    if other:
        kinds = ", ".join(sorted({t.timing or "unlabelled" for t in other}))
        warnings.warn(f"skipped {len(other)} successful row(s) of {name} timed as {kinds}: "
                      f"only {timing} timings are exported for it", RuntimeWarning, stacklevel=2)
    here = [t for t in trials if t.device == name and t.timing == timing]
    ok = [t for t in drop_superseded([t for t in here if is_triton_forward(t) and t.config_text is not None])
          if _succeeded(t)]  # a failed re-time supersedes too
    invalid = sum(t.config is None for t in ok)
    if invalid:
        warnings.warn(f"skipped {invalid} successful row(s) whose config is not a valid KernelConfig",
                      RuntimeWarning, stacklevel=2)
    winners = best_per_problem([t for t in ok if t.config is not None])
    counts: dict[Problem, int] = {}
    for t in here:
        if is_triton_forward(t):
            counts[t.problem] = counts.get(t.problem, 0) + 1
    torch_ms: dict[Problem, float] = {}
    for t in here:
        if t.kernel == "torch" and _succeeded(t):
            torch_ms[t.problem] = min(torch_ms.get(t.problem, math.inf), t.ms)
    entries = []
    for w in winners:
        base = torch_ms.get(w.problem)
        columns = problem_columns(w.problem)
        entries.append(best.BestEntry(
            **columns, config=w.config, ms=w.ms, gpu_ms=w.gpu_ms, tflops=w.tflops, torch_ms=base,
            speedup_vs_cublas=base / w.ms if base is not None else None, trials=counts[w.problem],
        ))
    return best.BestFile(
        schema_version=best.SCHEMA_VERSION,
        generated=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        device=name,
        timing=timing,
        torch_version=_joined(w.torch_version for w in winners),
        triton_version=_joined(w.triton_version for w in winners),
        entries=entries,
    )


def _succeeded(trial: Trial) -> bool:
    """A success with a median time (what export and the best per problem rank)."""
    return trial.ok and trial.ms is not None


def _names(value: str | Iterable[str] | None, parse) -> list[str]:
    if value is None:
        return []
    return [parse(v) for v in ([value] if isinstance(value, str) else value)]


def _pick_device(trials: Sequence[Recorded], successes: Sequence[Recorded], device: str | None) -> str:
    """The history's name of the device to export (see ``export``)."""
    if device is not None:
        known = sorted({t.device for t in trials if t.device is not None})
        exact = [d for d in known if best.device_key(d) == best.device_key(device)]
        if exact:
            return exact[0]
        part = [d for d in known if best.device_key(device) in best.device_key(d)]
        if len(part) > 1:
            raise ValueError(f"--device {device!r} matches several devices of the history ({', '.join(part)}); "
                             "name one")
        return part[0] if part else device
    names = sorted({t.device for t in successes if t.device is not None})
    if len(names) <= 1:
        return names[0] if names else runtime.device_name()
    here = runtime.device_name()
    if here in names:
        return here
    raise ValueError(f"the history has trials of several devices ({', '.join(names)}); pick one with --device")


def _joined(values: Iterable[str | None]) -> str | None:
    """The distinct versions the winners were measured with, comma-separated."""
    names = sorted({v for v in values if v is not None})
    return ", ".join(names) or None
