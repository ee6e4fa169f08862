"""Problems spread over several devices: one worker thread per device, a shared queue.

A Slot is one device (a local GPU, or a Ray actor's GPU) with the Evaluator that runs its
candidates. The Fleet hands each slot the next job its device can take, longest first
(by FLOPs), until the queue is empty: a problem is tuned once per device name, so GPUs of
several models each get every problem. All history rows are written by the driver
(``SharedStore``: one lock, one writer), so no row is lost or interleaved.

A slot whose device is lost (``SlotLost``: a Ray actor or its node died) gives its
in-flight job back to the queue; the trials it had reported stay in the history, and the
job's next run reads them as earlier trials, so none is measured or counted twice.
Ctrl-C (or any error) cancels the run: from then on no row is written, every evaluator is
closed, and the exception reaches the caller; every trial finished before it is on disk.

Nothing here imports torch: the device list is given (``local_devices`` reads this
machine's GPUs), so the scheduling is tested with fake devices.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from autokernel.records import Problem
from autokernel.tuning.protocols import Evaluator

POLL_S = 0.2
"""How often the driver's main thread looks up from waiting: Ctrl-C lands within this."""


class SlotLost(RuntimeError):
    """The device behind a slot is gone (a Ray actor or its node died): its job goes back
    to the queue and the slot takes no more."""


class Cancelled(RuntimeError):
    """The run was cancelled (Ctrl-C, or another slot's error): no more rows are written."""


@dataclass(frozen=True)
class Device:
    """A device that tunes: ``name`` as the history writes it (e.g. "NVIDIA H100 80GB
    HBM3"), ``index`` the local CUDA ordinal (None for a remote one), ``label`` how the
    live view names it."""

    name: str
    index: int | None = None
    label: str = ""

    def __str__(self) -> str:
        return self.label or (f"GPU {self.index}" if self.index is not None else self.name)


@dataclass
class Slot:
    device: Device
    evaluator: Evaluator
    device_name: str = ""
    """The name its rows carry: the evaluator's own where it labels its trials (a replayed
    sweep's device), else the device's."""
    timing: str = "gpu"

    def __post_init__(self) -> None:
        self.device_name = self.device_name or self.device.name


@dataclass
class Job:
    problem: Problem
    device_name: str
    order: int = 0
    """The problem's place in the request: outcomes are returned in this order."""
    attempts: int = 0
    time_left: float | None = None
    """Seconds of the run's time budget left when it started (None: no budget)."""


def schedule(problems: Sequence[Problem], device_names: Sequence[str]) -> list[Job]:
    """One job per problem and device name, longest first (by FLOPs; the request's order
    among equals)."""
    names = list(dict.fromkeys(device_names))
    jobs = [Job(p, name, i) for i, p in enumerate(problems) for name in names]
    return sorted(jobs, key=lambda j: -j.problem.flops)


class SharedStore:
    """A History that any thread of the driver may append to and read: one lock for all,
    and once ``cancel`` is called, an append raises Cancelled instead of writing."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.path = store.path
        self._lock = threading.Lock()
        self.cancelled = threading.Event()

    def append(self, row: dict) -> None:
        with self._lock:
            if self.cancelled.is_set():
                raise Cancelled("the run was cancelled")
            self.store.append(row)

    def append_many(self, rows) -> None:
        with self._lock:
            if self.cancelled.is_set():
                raise Cancelled("the run was cancelled")
            self.store.append_many(rows)

    def trials(self) -> list:
        """The history's trials (History.trials), read under the lock."""
        with self._lock:
            return self.store.trials()

    def cancel(self) -> None:
        with self._lock:  # an append under way finishes first: no torn row
            self.cancelled.set()


@dataclass
class FleetReport:
    outcomes: dict[int, list[Any]] = field(default_factory=dict)
    """Per job order, the outcomes of its device names."""
    skipped: list[Job] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """One line per slot lost mid-run."""


def run_jobs(jobs: list[Job], slots: Sequence[Slot], work: Callable[[Slot, Job], Any], *,
             store: SharedStore, may_start: Callable[[Job], bool] = lambda job: True,
             on_lost: Callable[[Slot, Job, str], None] | None = None, max_attempts: int = 3) -> FleetReport:
    """Run ``work(slot, job)`` for every job on a slot of its device name, one thread per
    slot, the next job to the next free slot. ``may_start(job)`` False skips a job (a
    spent time budget). A SlotLost from ``work`` puts the job back (at most
    ``max_attempts`` runs per job) and retires the slot; ``on_lost`` hears of it.

    Any other exception, or Ctrl-C in the calling thread, cancels ``store`` (no row is
    written after it), aborts every slot's evaluator, and is raised here."""
    report = FleetReport()
    queue = list(jobs)
    lock = threading.Lock()
    wake = threading.Condition(lock)
    busy = {id(s): False for s in slots}
    alive = {id(s): True for s in slots}
    errors: list[BaseException] = []

    def take(slot: Slot) -> Job | None:
        with lock:
            while True:
                if errors or store.cancelled.is_set():
                    return None
                for job in queue:
                    if job.device_name == slot.device_name:
                        queue.remove(job)
                        busy[id(slot)] = True
                        return job
                # nothing for this device now; a job may still come back from a lost slot of its name
                if not any(busy[id(s)] for s in slots if s.device_name == slot.device_name and alive[id(s)]):
                    return None
                wake.wait()

    def serve(slot: Slot) -> None:
        while True:
            job = take(slot)
            if job is None:
                return
            try:
                if not may_start(job):
                    with lock:
                        report.skipped.append(job)
                    continue
                outcome = work(slot, job)
                with lock:
                    report.outcomes.setdefault(job.order, []).append(outcome)
            except SlotLost as exc:
                job.attempts += 1
                with lock:
                    alive[id(slot)] = False
                    if job.attempts < max_attempts and any(alive[id(s)] for s in slots
                                                           if s.device_name == job.device_name):
                        queue.insert(0, job)  # the longest first still: it was taken as such
                    else:
                        report.skipped.append(job)
                    report.lost.append(f"{slot.device} lost while tuning {job.problem.label()}: {exc}")
                if on_lost is not None:
                    on_lost(slot, job, str(exc))
                return
            except Cancelled:
                return
            except BaseException as exc:  # noqa: BLE001  (handed to the driver's thread)
                with lock:
                    errors.append(exc)
                store.cancel()
                return
            finally:
                with lock:
                    busy[id(slot)] = False
                    wake.notify_all()

    threads = [threading.Thread(target=serve, args=(slot,), name=f"autokernel-{slot.device}", daemon=True)
               for slot in slots]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(POLL_S)
    except BaseException:
        _cancel(store, slots, wake, lock)
        for t in threads:
            t.join(5)
        raise
    if errors:
        _cancel(store, slots, wake, lock)
        raise errors[0]
    with lock:
        report.skipped.extend(queue)  # no live slot of their device name was left
    return report


def _cancel(store: SharedStore, slots: Sequence[Slot], wake: threading.Condition, lock: threading.Lock) -> None:
    store.cancel()
    with lock:
        wake.notify_all()
    for slot in slots:
        try:
            slot.evaluator.abort()  # a slot waiting on its workers hears they are gone
        except Exception:  # noqa: BLE001  (best effort on the way out)
            pass


def parse_gpus(spec: str) -> str | list[int]:
    """``--gpus``: "all" or a comma-separated list of CUDA ordinals; ValueError otherwise."""
    spec = spec.strip()
    if spec == "all":
        return "all"
    try:
        indices = [int(part) for part in spec.split(",")]
    except ValueError:
        raise ValueError(f"--gpus takes all or GPU indices such as 0,1; got {spec!r}") from None
    if any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise ValueError(f"--gpus takes distinct GPU indices >= 0; got {spec!r}")
    return indices


def local_devices(gpus: str | Sequence[int]) -> list[Device]:
    """This machine's GPUs named by ``gpus`` ("all" or CUDA ordinals), each with its name;
    ValueError for an index it lacks, or when it has none."""
    import torch  # the device names: only once several GPUs are asked for

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ValueError("--gpus needs CUDA GPUs; this machine has none")
    indices = list(range(count)) if gpus == "all" else list(gpus)
    missing = [i for i in indices if i >= count]
    if missing:
        raise ValueError(f"--gpus {','.join(map(str, missing))}: this machine has {count} GPU(s), 0 to {count - 1}")
    return [Device(torch.cuda.get_device_name(i), i, f"GPU {i}") for i in indices]


def visible_devices_env(index: int | Sequence[int]) -> dict[str, str]:
    """The environment that gives a worker process CUDA ordinal ``index`` of this process
    as its only GPU, or several ordinals as its GPUs 0, 1, ... in that order (through this
    process's own CUDA_VISIBLE_DEVICES, where set)."""
    indices = [index] if isinstance(index, int) else list(index)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else []
    return {"CUDA_VISIBLE_DEVICES": ",".join(ids[i] if i < len(ids) else str(i) for i in indices)}
