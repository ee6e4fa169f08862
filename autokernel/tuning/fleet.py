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

Once the queue holds nothing for a slot, it lends its evaluator (``run_jobs(lend=True)``)
instead of leaving: a job still running on a slot of the same device name splits its next
batch of candidates between its own evaluator and the idle ones (``Sharing``), runs the
parts at once (each lent part in its lender's thread) and returns the trials in the
batch's order, so the strategy sees what one evaluator would have returned. Re-timing and
the baseline stay on the job's own evaluator: winners are judged side by side on one
device. A lender serves one job's part at a time and offers itself again after it; a part
whose lender fails goes back to the job's own evaluator, less the trials it reported.

Nothing here imports torch: the device list is given (``local_devices`` reads this
machine's GPUs), so the scheduling is tested with fake devices.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Sequence

from autokernel import knobs
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
    evaluator: Evaluator | None = None
    """What the job evaluates with, set as it starts: its slot's evaluator, sharing idle
    slots' where they lend (Sharing); None: the slot's."""


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
    lent: int = 0
    """How many parts of batches idle slots ran for other jobs."""


def run_jobs(jobs: list[Job], slots: Sequence[Slot], work: Callable[[Slot, Job], Any], *,
             store: SharedStore, may_start: Callable[[Job], bool] = lambda job: True,
             on_lost: Callable[[Slot, Job, str], None] | None = None, max_attempts: int = 3,
             lend: bool = False, on_loan: Callable[[Slot, Job], ContextManager] | None = None,
             on_lender_lost: Callable[[Slot, Job, str], None] | None = None) -> FleetReport:
    """Run ``work(slot, job)`` for every job on a slot of its device name, one thread per
    slot, the next job to the next free slot. ``may_start(job)`` False skips a job (a
    spent time budget). A SlotLost from ``work`` puts the job back (at most
    ``max_attempts`` runs per job) and retires the slot; ``on_lost`` hears of it.

    With ``lend``, a slot that finds no job for its device name lends its evaluator until
    the last job of that name ends: ``job.evaluator`` (a Sharing) splits each batch of
    ``evaluate`` with the idle slots. A lender runs each part in its own thread inside
    ``on_loan(slot, job)`` (a context, e.g. the timeline's span). A lender whose part
    fails (its device lost, its workers broken) is retired, the part goes back to the
    job's own evaluator, and ``on_lender_lost(slot, job, why)`` hears of it.

    Any other exception, or Ctrl-C in the calling thread, cancels ``store`` (no row is
    written after it), aborts every slot's evaluator, and is raised here."""
    report = FleetReport()
    queue = list(jobs)
    lock = threading.Lock()
    wake = threading.Condition(lock)
    busy = {id(s): False for s in slots}
    alive = {id(s): True for s in slots}
    errors: list[BaseException] = []
    desk = _Desk(slots, wake, busy, alive, store)

    def take(slot: Slot) -> Job | Loan | None:
        with lock:
            try:
                while True:
                    if id(slot) in desk.loans:  # reserved by a job: its part comes, whatever happens meanwhile
                        loan = desk.loans[id(slot)]
                        if loan is not None:
                            del desk.loans[id(slot)]
                            return loan
                        wake.wait()
                        continue
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
                    if lend:
                        desk.idle[id(slot)] = slot
                    wake.wait()
            finally:
                desk.idle.pop(id(slot), None)

    def serve_loan(slot: Slot, loan: Loan) -> bool:
        """Run ``loan``'s part on ``slot``; False when the slot is retired by its failure."""
        evaluator = slot.evaluator
        try:
            if errors or store.cancelled.is_set():
                raise Cancelled("the run was cancelled")
            counted = (evaluator.reused, evaluator.measured)
            context = on_loan(slot, loan.job) if on_loan is not None else contextlib.nullcontext()
            with context:
                loan.trials = evaluator.evaluate(loan.job.problem, loan.configs, loan.report)
            loan.reused, loan.measured = evaluator.reused - counted[0], evaluator.measured - counted[1]
        except BaseException as exc:  # noqa: BLE001  (handed to the borrowing job's thread)
            loan.error = exc
        finally:
            with lock:
                report.lent += 1
                if loan.error is None:  # free again before the job hears: its next batch finds it idle
                    desk.idle[id(slot)] = slot
            loan.done.set()
        if loan.error is None or loan.caller_error is not None or isinstance(loan.error, Cancelled) \
                or store.cancelled.is_set():
            return loan.error is None or loan.caller_error is not None
        why = str(loan.error) or type(loan.error).__name__
        with lock:
            alive[id(slot)] = False
            report.lost.append(f"{slot.device} failed while helping {loan.job.problem.label()}: {why}")
            wake.notify_all()
        if on_lender_lost is not None:
            on_lender_lost(slot, loan.job, why)
        return False

    def serve(slot: Slot) -> None:
        while True:
            job = take(slot)
            if job is None:
                return
            if isinstance(job, Loan):
                if serve_loan(slot, job):
                    continue
                return
            try:
                if not may_start(job):
                    with lock:
                        report.skipped.append(job)
                    continue
                job.evaluator = Sharing(slot.evaluator, desk, slot, job) if lend else slot.evaluator
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


class Loan:
    """A part of one job's batch, run by an idle slot for it: the configs, the ``report``
    that passes each trial on to the job's ``on_trial``, and, once ``done`` is set, the
    trials (in the order of ``configs``) or the error that ended it."""

    def __init__(self, job: Job, configs: list, indices: list[int], report: Callable[[Any], None]) -> None:
        self.job, self.configs, self.indices, self.report = job, configs, indices, report
        self.done = threading.Event()
        self.trials: list | None = None
        self.error: BaseException | None = None
        self.caller_error: BaseException | None = None
        """An exception of the job's own ``on_trial`` (not the lender's fault)."""
        self.reused = self.measured = 0


class _Desk:
    """Where idle slots wait to lend (``idle``) and where a job's part reaches the slot it
    reserved (``loans``: None while reserved, then the Loan). Guarded by run_jobs' lock."""

    def __init__(self, slots: Sequence[Slot], wake: threading.Condition, busy: dict, alive: dict,
                 store: SharedStore) -> None:
        self.slots, self.wake, self.busy, self.alive, self.store = slots, wake, busy, alive, store
        self.idle: dict[int, Slot] = {}
        self.loans: dict[int, Loan | None] = {}

    def reserve(self, slot: Slot, most: int) -> list[Slot]:
        """Up to ``most`` idle slots of ``slot``'s device name, reserved for its job: an even
        share of the idle ones among the jobs of that name still running."""
        if most < 1:
            return []
        with self.wake:
            if self.store.cancelled.is_set():
                return []
            idle = [s for s in self.idle.values() if s.device_name == slot.device_name and self.alive[id(s)]]
            running = sum(1 for s in self.slots if s.device_name == slot.device_name and self.busy[id(s)])
            share = -(-len(idle) // max(1, running))
            taken = idle[:min(most, share)]
            for s in taken:
                del self.idle[id(s)]
                self.loans[id(s)] = None
            return taken

    def hand(self, lender: Slot, loan: Loan) -> None:
        with self.wake:
            self.loans[id(lender)] = loan
            self.wake.notify_all()


class Sharing:
    """A job's evaluator while idle slots lend theirs: ``evaluate`` splits the batch into
    contiguous parts, the first for the job's own evaluator (in the calling thread), one
    per lender (in the lender's thread), and returns the trials in the batch's order.
    ``on_trial`` is called from one thread at a time. A part whose lender fails goes back
    to the own evaluator, less the trials already reported (none is measured twice or
    lost). Everything else (``retime``, ``baseline``, ``space``) is the own evaluator's."""

    def __init__(self, own: Evaluator, desk: _Desk, slot: Slot, job: Job) -> None:
        self.own, self.desk, self.slot, self.job = own, desk, slot, job
        self._reused = self._measured = 0

    @property
    def reused(self) -> int:
        return self.own.reused + self._reused

    @property
    def measured(self) -> int:
        return self.own.measured + self._measured

    @property
    def device(self) -> str | None:
        return self.own.device

    @property
    def timing(self) -> str | None:
        return self.own.timing

    def space(self, problem: Problem):
        return self.own.space(problem)

    def retime(self, problem: Problem, configs, on_trial=None) -> list:
        return self.own.retime(problem, configs, on_trial)

    def baseline(self, problem: Problem, on_trial=None):
        return self.own.baseline(problem, on_trial)

    def close(self) -> None:
        self.own.close()

    def abort(self) -> None:
        self.own.abort()

    def evaluate(self, problem: Problem, configs, on_trial=None) -> list:
        configs = list(configs)
        lenders = self.desk.reserve(self.slot, len(configs) - 1)
        if not lenders:
            return self.own.evaluate(problem, configs, on_trial)
        parts = _split(len(configs), len(lenders) + 1)
        trials: list = [None] * len(configs)
        reported: dict[int, Any] = {}
        lock = threading.Lock()

        def reporter(indices: list[int], loan: Loan | None = None) -> Callable[[Any], None]:
            waiting = list(indices)

            def report(trial) -> None:
                with lock:
                    index = next((i for i in waiting if _key(configs[i]) == _key(trial.config)), None)
                    if index is not None:
                        waiting.remove(index)
                        reported[index] = trial
                    if on_trial is not None:
                        try:
                            on_trial(trial)
                        except BaseException as exc:
                            if loan is not None:
                                loan.caller_error = exc
                            raise

            return report

        loans: list[Loan] = []
        try:
            for lender, part in zip(lenders, parts[1:]):
                loan = Loan(self.job, [configs[i] for i in part], part, lambda t: None)
                loan.report = reporter(part, loan)
                self.desk.hand(lender, loan)
                loans.append(loan)
        finally:
            for lender in lenders[len(loans):]:  # reserved but never handed a part: free again
                with self.desk.wake:
                    self.desk.loans.pop(id(lender), None)
                    self.desk.wake.notify_all()
        try:
            own = self.own.evaluate(problem, [configs[i] for i in parts[0]], reporter(parts[0]))
            for i, trial in zip(parts[0], own):
                trials[i] = trial
        finally:
            for loan in loans:
                loan.done.wait()
        for loan in loans:
            self._reused += loan.reused
            self._measured += loan.measured
            if loan.error is None:
                for i, trial in zip(loan.indices, loan.trials or []):
                    trials[i] = trial
                continue
            if loan.caller_error is not None:
                raise loan.caller_error
            if isinstance(loan.error, Cancelled) or self.desk.store.cancelled.is_set():
                raise Cancelled("the run was cancelled") from loan.error
            for i in loan.indices:
                if i in reported:
                    trials[i] = reported[i]
            rest = [i for i in loan.indices if i not in reported]
            if rest:  # the lender's part, less what it reported, on the job's own evaluator
                again = self.own.evaluate(problem, [configs[i] for i in rest], reporter(rest))
                for i, trial in zip(rest, again):
                    trials[i] = trial
        return trials


def _key(config: Any) -> tuple | None:
    """A config's tuned fields (as space.config_key, which loads torch; this module does not)."""
    return None if config is None else tuple(getattr(config, name, None) for name in knobs.NAMES)


def _split(n: int, parts: int) -> list[list[int]]:
    """0..n-1 in ``parts`` contiguous runs of near-equal length, the longer ones first."""
    size, extra = divmod(n, parts)
    out, start = [], 0
    for p in range(parts):
        end = start + size + (p < extra)
        out.append(list(range(start, end)))
        start = end
    return out


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
