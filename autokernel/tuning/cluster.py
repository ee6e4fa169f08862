"""Tuning on a Ray cluster: one Ray actor per GPU hosts a timing worker.

Each actor (``Host``) runs the evaluator of its own node: the isolated timing worker on
the GPU Ray gave it (Ray sets CUDA_VISIBLE_DEVICES for the actor, and the workers it
spawns inherit it), its compile workers on the same node, its kept readings there. The
driver holds the strategies and the history: every trial streams back to it as soon as
it is final (a Ray streaming generator) and the driver writes it. An actor or node lost
mid-run raises fleet.SlotLost in the driver, whose scheduler gives the in-flight problem
to another actor; the trials that actor reported are in the history already and count
as earlier trials there.

Ray is imported only here, and only once a run asks for a cluster: it is an optional
extra (``autokernel[ray]``), a large install, absent on most GPU machines.
"""

from __future__ import annotations

import importlib.util
import queue
import socket
import threading
from pathlib import Path
from typing import Any, Iterator, Sequence

from autokernel.records import KernelConfig, Problem, Trial
from autokernel.tuning.fleet import Device, Slot, SlotLost
from autokernel.tuning.protocols import EvaluatorBase, OnTrial

START_TIMEOUT_S = 600.0
"""How long the actors may take to be placed and to start their timing workers."""
INSTALL = "pip install 'autokernel[ray]'"


def check_address(address: str) -> None:
    """``--cluster``: "auto" or "ray://HOST:PORT", with Ray installed; ValueError otherwise."""
    if address != "auto" and not (address.startswith("ray://") and len(address) > len("ray://")):
        raise ValueError(f"--cluster takes auto or ray://HOST:PORT, got {address!r}")
    if importlib.util.find_spec("ray") is None:
        raise ValueError(f"--cluster runs on Ray, which is not installed here: {INSTALL}")


def _ray():
    """Ray, imported on first use (see the module docstring)."""
    import ray

    return ray


def connect(address: str) -> None:
    """Join the cluster at ``address`` (a Ray session started already is used as it is)."""
    check_address(address)
    ray = _ray()
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, include_dashboard=False, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot join the Ray cluster at {address}: {first} "
                         "(start one with `ray start --head`)") from None


class Host:
    """A Ray actor's body: the evaluator of its node, served to the driver.

    ``replay``: answer from a recorded sweep (tests, and dry runs of a cluster) instead of
    running kernels; else timing workers on the actor's GPU with kept readings."""

    def __init__(self, replay: str | None = None, cache: bool = True, timeout_s: float = 120.0) -> None:
        if replay is not None:
            from autokernel.tuning.replay import ReplayEvaluator  # in the actor, when asked: loads the history

            self.evaluator = ReplayEvaluator(replay)
            self.device, self.timing = self.evaluator.device, self.evaluator.timing
        else:
            from autokernel.tuning.run import local_slot  # run imports this module

            slot = local_slot(None, cache, timeout_s)
            self.evaluator, self.device, self.timing = slot.evaluator, slot.device_name, slot.timing

    def describe(self) -> tuple[str, str, str]:
        return self.device, self.timing, socket.gethostname()

    def space(self, problem: Problem):
        return self.evaluator.space(problem)

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig]) -> Iterator[Trial]:
        yield from _streamed(lambda on_trial: self.evaluator.evaluate(problem, configs, on_trial=on_trial))

    def retime(self, problem: Problem, configs: Sequence[KernelConfig]) -> Iterator[Trial]:
        yield from _streamed(lambda on_trial: self.evaluator.retime(problem, configs, on_trial=on_trial))

    def baseline(self, problem: Problem) -> tuple[Trial | None, bool]:
        """The baseline, and whether it is to be recorded (a replayed sweep's is recorded already)."""
        told: list[Trial] = []
        trial = self.evaluator.baseline(problem, on_trial=told.append)
        return trial, bool(told)

    def counts(self) -> tuple[int, int]:
        return self.evaluator.reused, self.evaluator.measured

    def close(self) -> None:
        self.evaluator.close()


_DONE = object()


def _streamed(call) -> Iterator[Trial]:
    """The trials ``call(on_trial)`` reports, yielded as each is final (the call runs in a
    thread of the actor, so that its first trials travel while it measures the rest)."""
    box: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            call(box.put)
        except BaseException as exc:  # noqa: BLE001  (raised again in the actor's main thread)
            box.put(_Raised(exc))
        finally:
            box.put(_DONE)

    threading.Thread(target=run, name="autokernel-host", daemon=True).start()
    while (item := box.get()) is not _DONE:
        if isinstance(item, _Raised):
            raise item.exc
        yield item


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class RayEvaluator(EvaluatorBase):
    """The driver's side of one actor: an Evaluator whose trials stream back from it. A
    dead actor raises SlotLost (its trials reported so far were passed to ``on_trial``)."""

    def __init__(self, actor: Any, device: str, timing: str, host: str) -> None:
        self.actor = actor
        self.device, self.timing, self.host = device, timing, host
        self._counts = (0, 0)

    def _lost(self, exc: BaseException) -> SlotLost:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return SlotLost(f"the Ray actor on {self.host} is gone ({first[:200]})")

    def _call(self, method: str, *args: Any) -> Any:
        ray = _ray()
        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except _actor_errors(ray) as exc:
            raise self._lost(exc) from None

    def _stream(self, method: str, problem: Problem, configs: Sequence[KernelConfig],
                on_trial: OnTrial | None) -> list[Trial]:
        ray = _ray()
        out: list[Trial] = []
        try:
            refs = getattr(self.actor, method).options(num_returns="streaming").remote(problem, list(configs))
            for ref in refs:
                trial = ray.get(ref)
                if on_trial is not None:
                    on_trial(trial)
                out.append(trial)
        except _actor_errors(ray) as exc:
            raise self._lost(exc) from None
        return out

    def space(self, problem: Problem):
        return self._call("space", problem)

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        return self._stream("evaluate", problem, configs, on_trial)

    def retime(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        return self._stream("retime", problem, configs, on_trial)

    def baseline(self, problem: Problem, on_trial: OnTrial | None = None) -> Trial | None:
        trial, to_record = self._call("baseline", problem)
        if to_record and on_trial is not None:
            on_trial(trial)
        return trial

    def _read_counts(self) -> tuple[int, int]:
        try:
            self._counts = self._call("counts")
        except SlotLost:
            pass  # the last counts it gave stand
        return self._counts

    @property
    def reused(self) -> int:  # type: ignore[override]
        return self._read_counts()[0]

    @property
    def measured(self) -> int:  # type: ignore[override]
        return self._read_counts()[1]

    def close(self) -> None:
        ray = _ray()
        try:
            ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # noqa: BLE001  (gone already, or stuck: it is killed next either way)
            pass
        ray.kill(self.actor)

    def abort(self) -> None:
        _ray().kill(self.actor)


def _actor_errors(ray) -> tuple[type[BaseException], ...]:
    """What Ray raises for an actor, or its node, that is gone."""
    errors = [ray.exceptions.RayActorError]
    for name in ("ActorUnavailableError", "NodeDiedError", "OwnerDiedError", "WorkerCrashedError"):
        if hasattr(ray.exceptions, name):
            errors.append(getattr(ray.exceptions, name))
    return tuple(errors)


def cluster_slots(address: str, *, replay: str | Path | None = None, cache: bool = True, timeout_s: float = 120.0,
                  actors: int | None = None, num_gpus: float = 1) -> list[Slot]:
    """One actor per GPU of the cluster at ``address`` (``actors`` and ``num_gpus`` override:
    CPU actors for tests), each a Slot named by the device it found."""
    connect(address)
    ray = _ray()
    if actors is None:
        actors = int(ray.cluster_resources().get("GPU", 0))
        if actors < 1:
            raise ValueError(f"the Ray cluster at {address} has no GPUs")
    remote = ray.remote(num_gpus=num_gpus, num_cpus=0 if num_gpus else 1, max_restarts=0)(Host)
    handles = [remote.remote(None if replay is None else str(replay), cache, timeout_s) for _ in range(actors)]
    try:
        found = ray.get([h.describe.remote() for h in handles], timeout=START_TIMEOUT_S)
    except Exception as exc:
        for h in handles:
            ray.kill(h)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"the Ray actors did not start: {first}") from None
    slots = []
    for i, (handle, (device, timing, host)) in enumerate(zip(handles, found)):
        slots.append(Slot(Device(device, None, f"{host} #{i}"), RayEvaluator(handle, device, timing, host),
                          device, timing))
    return slots
