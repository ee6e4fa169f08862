"""Tuning as a library call: ``autokernel.tuning.tune(problems, ...)``.

For each problem: a fresh strategy proposes, the evaluator checks and times, every trial
goes to the history the moment it is final, the leaders are timed again side by side,
and cuBLAS is measured beside the winner. ``autokernel tune`` and ``autokernel loop`` are
this call plus option parsing and rendering.

Where the candidates run: by default in isolated worker processes on this machine's GPU
(or the interpreter), their readings kept and reused (tuning.readings); ``replay`` answers
from a recorded sweep; ``evaluator`` takes any Evaluator. ``gpus`` spreads the problems
over several GPUs of this machine, ``cluster`` over the GPUs of a Ray cluster
(tuning.fleet, tuning.cluster); the history is written by this process alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autokernel import runtime
from autokernel.history import History, new_run_id, resolve_history_path, trial_row
from autokernel.records import Problem, Trial
from autokernel.tuning import fleet, loop
from autokernel.tuning.fleet import Device, Job, SharedStore, Slot
from autokernel.tuning.loop import StopRules, TuneResult
from autokernel.timing import timing_label
from autokernel.tuning.protocols import Evaluator
from autokernel.tuning.readings import (CachingEvaluator, KeptProposals, ReadingCache, cache_dir, environment,
                                        proposal_store)
from autokernel.tuning.replay import ReplayEvaluator
from autokernel.tuning.strategies import make_strategy
from autokernel.tuning.timeline import Timeline
from autokernel.tuning.worker import CompilePool, WorkerEvaluator, node_compile_workers

if TYPE_CHECKING:
    from autokernel.tuning.strategies.base import Strategy


class RequestError(ValueError):
    """A request that cannot run, found before any work: one line for the user."""


@dataclass
class TuneOutcome:
    """One problem tuned on one device: the loop's result, cuBLAS measured beside it (None
    where there is none), the size of the space searched, and how many readings were
    reused from earlier runs rather than measured."""

    problem: Problem
    device: str
    result: TuneResult
    baseline: Trial | None
    space_size: int
    reused: int = 0


@dataclass
class Hooks:
    """What a caller hears while the run goes on (each optional; called from the thread of
    the device that did the work, so they must be quick and thread-safe).

    note/warn: one line of news. start(slot, problem, strategy name, planned trials),
    trial(slot, problem, trial) after the trial is written to the history, done(slot,
    outcome)."""

    note: Callable[[str], None] = lambda line: None
    warn: Callable[[str], None] = lambda line: None
    start: Callable[[Slot, Problem, str, int], None] = lambda slot, problem, strategy, total: None
    trial: Callable[[Slot, Problem, Trial], None] = lambda slot, problem, trial: None
    done: Callable[[Slot, TuneOutcome], None] = lambda slot, outcome: None


@dataclass
class TuneRun:
    """What ``tune`` returns: the outcomes in the order of the problems (one per device
    name where several were tuned), the run id of its rows, and the problems left untuned
    (a spent time budget, or no device left to run them)."""

    outcomes: list[TuneOutcome]
    run_id: str
    untuned: list[tuple[Problem, str]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


def tune(
    problems: Sequence[Problem],
    *,
    strategy: "str | Callable[[], Strategy]" = "auto",
    evaluator: Evaluator | None = None,
    history: Any = None,
    generations: int = 5,
    per_generation: int = 8,
    seed: int | None = None,
    stop: StopRules | None = None,
    replay: str | Path | None = None,
    cache: bool = True,
    model: str | None = None,
    timeout_s: float = 120.0,
    gpus: "str | Sequence[int] | None" = None,
    devices: Sequence[Device] | None = None,
    evaluator_for: Callable[[Device], Evaluator] | None = None,
    cluster: str | None = None,
    cluster_options: dict | None = None,
    workers: Any = None,
    command: str = "tune",
    run_id: str | None = None,
    hooks: Hooks | None = None,
    timeline: Timeline | None = None,
    lend: bool = True,
) -> TuneRun:
    """Tune each of ``problems`` (records.Problem) and record every trial in ``history``.

    strategy: a registered name (strategies.STRATEGIES; ``seed`` and ``model`` go to its
        factory) or a callable giving a fresh Strategy per problem.
    evaluator: the Evaluator to use (closed at the end); default: timing workers on this
        machine (``timeout_s`` per candidate) with kept readings (``cache``), or the
        recorded sweep ``replay``.
    history: a History, a CSV path, or None ($AUTOKERNEL_HISTORY, else results/history.csv).
    generations, per_generation, stop (loop.StopRules): how long each problem is tuned;
        ``stop.time_budget_s`` is for the whole run.
    gpus: "all" or CUDA ordinals: one timing worker per GPU, problems to the next free GPU,
        longest first; GPUs of several models each tune every problem. ``devices`` and
        ``evaluator_for(device)`` replace this machine's GPUs and their workers (tests).
    cluster: "auto" or "ray://HOST:PORT": one Ray actor per GPU of the cluster (tuning.cluster;
        ``cluster_options`` go to cluster.cluster_slots: ``actors``, ``num_gpus``); with
        ``replay`` the actors answer from the recorded sweep.
    workers: the default evaluator's timing workers, started already (WorkerEvaluator.start:
        their start-up then overlaps the caller's).
    timeline: where the time goes, recorded there (tuning.timeline: per device, each
        problem's compile waits, timing and the driver's own work, the idle tail); the
        run's span is this call, from its start to its return.
    lend: on several GPUs of this machine, a GPU with no problem left lends its timing
        worker to the problems still running: their batches of candidates are split
        between their own GPU and the idle ones (tuning.fleet.Sharing); re-timing the
        leaders and cuBLAS stay on the problem's own GPU. Not on a Ray cluster.

    Raises ValueError for a request that cannot run (an unknown strategy, a problem the
    sweep lacks, no GPU); KeyboardInterrupt passes through once every evaluator is closed,
    every trial finished before it on disk.
    """
    if timeline is not None:
        timeline.begin()
    hooks = hooks or Hooks()
    stop = stop or StopRules()
    if generations < 1 or per_generation < 1:
        raise ValueError(f"generations and per_generation must be >= 1, got {generations} and {per_generation}")
    store = history if isinstance(history, History) else History(resolve_history_path(history))
    run_id = run_id or new_run_id()
    make_strategy = _strategy_maker(strategy, seed, model, hooks.warn, proposals=cache and seed is not None
                                    and replay is None and evaluator is None and isinstance(strategy, str))
    slots: list[Slot] = []
    pools: list[CompilePool] = []  # the machine's compile pool, shared by its GPUs' slots
    try:
        try:
            make_strategy()  # an unknown name or a missing LLM key: refused before any work
            slots = _slots(evaluator, replay, cache, timeout_s, gpus, devices, evaluator_for, cluster, workers,
                           hooks.warn, cluster_options or {}, pools, timeline)
            for pool in pools:  # their start-up beside the timing workers', not after the first probe
                pool.start(min(pool.size, per_generation * len(slots)))
            for slot in slots:  # a problem the sweep lacks: refused now, not after hours of tuning
                for problem in problems:
                    slot.evaluator.space(problem)
        except (ValueError, TypeError) as exc:
            raise RequestError(str(exc)) from None
    except BaseException:
        if workers is not None:
            workers.close()
        _close(slots, pools, kill=False, timeline=timeline)
        raise
    shared = SharedStore(store)
    started = time.perf_counter()
    failed = False  # Ctrl-C or an error: the compile workers are killed, not asked to stop
    try:
        several = len(slots) > 1 or cluster is not None
        # Side by side, problems take their prior configs from the history as it stood at the
        # start: which problem finishes first must not change what another one tries.
        snapshot = store.trials() if several else None
        tuner = _Tuner(generations, per_generation, stop, make_strategy, shared, run_id, command, hooks, snapshot)

        def may_start(job: Job) -> bool:
            """False once the time budget (for the whole run) is spent; else the job gets what is left."""
            if stop.time_budget_s is None:
                return True
            job.time_left = stop.time_budget_s - (time.perf_counter() - started)
            if job.time_left > 0:
                return True
            hooks.warn(f"time budget spent: {job.problem.label()} not tuned")
            return False

        def work(slot: Slot, job: Job) -> TuneOutcome:
            evaluator = job.evaluator or slot.evaluator
            if timeline is None:
                return tuner.one(slot, job.problem, job.time_left, evaluator)
            with timeline.job(str(slot.device), job.problem.label()):
                return tuner.one(slot, job.problem, job.time_left, evaluator)

        def on_loan(slot: Slot, job: Job):
            if timeline is None:
                return contextlib.nullcontext()
            return timeline.lent(str(slot.device), job.problem.label())

        if not several:
            return _sequential(problems, slots[0], work, may_start, run_id, hooks)
        jobs = fleet.schedule(problems, [s.device_name for s in slots])
        report = fleet.run_jobs(jobs, slots, work, store=shared, may_start=may_start,
                                on_lost=lambda slot, job, why: hooks.warn(
                                    f"{slot.device} lost while tuning {job.problem.label()} ({why}); "
                                    "its trials so far are kept and the problem goes to another device"),
                                lend=lend and cluster is None, on_loan=on_loan,
                                on_lender_lost=lambda slot, job, why: hooks.warn(
                                    f"{slot.device} failed while helping {job.problem.label()} ({why}); "
                                    "the candidates it had not finished go back to that problem's own device, "
                                    f"and {slot.device} takes no more work"))
        outcomes = [o for order in sorted(report.outcomes) for o in report.outcomes[order]]
        return TuneRun(outcomes, run_id, [(j.problem, j.device_name) for j in report.skipped], report.lost)
    except BaseException:
        failed = True
        raise
    finally:
        _close(slots, pools, kill=failed, timeline=timeline)


def _close(slots: Sequence[Slot], pools: Sequence[CompilePool], *, kill: bool, timeline: Timeline | None) -> None:
    """Close every slot's evaluator and the shared compile pools (at once with ``kill``), all
    together: each waits for its worker processes to exit (a CUDA context's teardown takes
    a while), so one after the other the waits would add up. The first error is raised once
    all are closed; the timeline's run ends here."""
    closers = [(str(slot.device), slot.evaluator.close) for slot in slots]
    closers += [("compile pool", functools.partial(pool.close, kill=kill)) for pool in pools]
    errors: list[BaseException] = []

    def close(what: str, closer: Callable[[], None]) -> None:
        start = time.perf_counter()
        try:
            closer()
        except BaseException as exc:  # noqa: BLE001  (raised in the calling thread below)
            errors.append(exc)
        finally:
            if timeline is not None:
                timeline.closed(what, time.perf_counter() - start)

    if len(closers) == 1:
        close(*closers[0])
    else:
        threads = [threading.Thread(target=close, args=c, name="autokernel-close", daemon=True) for c in closers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if timeline is not None:
        timeline.end()
    if errors:
        raise errors[0]


def _sequential(problems, slot: Slot, work, may_start, run_id: str, hooks: Hooks) -> TuneRun:
    """One device: each problem in the order given, in this thread."""
    outcomes: list[TuneOutcome] = []
    for i, problem in enumerate(problems):
        job = Job(problem, slot.device_name, i)
        if not may_start(job):
            rest = [(p, slot.device_name) for p in problems[i:]]
            if len(rest) > 1:
                hooks.warn(f"{len(rest) - 1} later problem(s) not tuned either")
            return TuneRun(outcomes, run_id, rest)
        outcomes.append(work(slot, job))
    return TuneRun(outcomes, run_id)


class _Tuner:
    """Tunes one problem on one slot: loop.tune, then cuBLAS beside the winner."""

    def __init__(self, generations, per_generation, stop, make_strategy, store: SharedStore, run_id, command, hooks,
                 snapshot) -> None:
        self.generations, self.per_generation, self.stop = generations, per_generation, stop
        self.make_strategy, self.store, self.run_id, self.command = make_strategy, store, run_id, command
        self.hooks, self.snapshot = hooks, snapshot

    def one(self, slot: Slot, problem: Problem, time_left: float | None, evaluator: Evaluator | None = None) -> TuneOutcome:
        """``evaluator``: the job's (fleet.Job.evaluator), else the slot's."""
        evaluator, device, timing = evaluator or slot.evaluator, slot.device_name, slot.timing
        stop = self.stop if time_left is None else dataclasses.replace(self.stop, time_budget_s=time_left)
        strategy = self.make_strategy()
        space = evaluator.space(problem)
        trials = self.snapshot if self.snapshot is not None else self.store.trials()
        seeds = loop.prior_configs(problem, space, trials, device=device, timing=timing)
        total = self.generations * self.per_generation
        if stop.max_trials is not None:
            total = min(total, stop.max_trials)
        self.hooks.start(slot, problem, strategy.name, total)
        counted = (evaluator.reused, evaluator.measured)
        result = loop.tune(problem, strategy=strategy, evaluator=evaluator, store=self.store, space=space,
                           generations=self.generations, per_generation=self.per_generation, run_id=self.run_id,
                           device=device, timing=timing, command=self.command, seeds=seeds, stop=stop,
                           on_trial=lambda t: self.hooks.trial(slot, problem, t))
        # side by side, lines of several problems interleave: each says whose it is
        whose = f"{problem.label()} on {slot.device}: " if self.snapshot is not None else ""
        if result.confirmation and result.confirmation not in result.events:
            self.hooks.note(whose + result.confirmation)
        for event in result.events:
            self.hooks.warn(whose + event)
        # cuBLAS (torch) on the same problem: measured now in the timing worker (gpu_ms, like
        # the candidates') and recorded, or, when replaying, the sweep's own torch row.
        baseline = evaluator.baseline(problem, on_trial=lambda t: self.store.append(trial_row(
            self.command, t, run_id=self.run_id, name="torch", device=device)))
        reused = evaluator.reused - counted[0]
        measured = evaluator.measured - counted[1]
        if reused:
            self.hooks.note(f"{whose}reused {reused} earlier reading(s) of the same configs on this device and software "
                            f"(each row's note says when it was measured), measured {measured} anew; "
                            "--no-cache measures every config again")
        outcome = TuneOutcome(problem, device, result, baseline, space.size(), reused)
        self.hooks.done(slot, outcome)
        return outcome


def _strategy_maker(strategy, seed, model, warn, *, proposals: bool) -> "Callable[[], Strategy]":
    """A fresh strategy per problem; a seeded, history-pure one keeps its proposals with
    the readings (readings.KeptProposals), so a rerun takes them instead of working them out."""
    if callable(strategy):
        return strategy
    extra = {"model": model} if model else {}
    store = None
    if proposals:
        store = proposal_store(cache_dir(), on_error=warn)

    def make() -> "Strategy":
        made = make_strategy(strategy, seed=seed, **extra)
        if store is not None and made.history_pure:
            return KeptProposals(made, seed, store)
        return made

    return make


def _slots(evaluator, replay, cache, timeout_s, gpus, devices, evaluator_for, cluster, workers, warn,
           cluster_options: dict, pools: list[CompilePool], timeline: Timeline | None) -> list[Slot]:
    """The devices of the run, each with its evaluator; a compile pool the GPUs of this
    machine share goes to ``pools`` (the caller closes it), and each device to ``timeline``."""
    slots = _made_slots(evaluator, replay, cache, timeout_s, gpus, devices, evaluator_for, cluster, workers, warn,
                        cluster_options, pools, timeline)
    if timeline is not None:
        for slot in slots:
            timeline.device(str(slot.device))
    return slots


def _made_slots(evaluator, replay, cache, timeout_s, gpus, devices, evaluator_for, cluster, workers, warn,
                cluster_options: dict, pools: list[CompilePool], timeline: Timeline | None) -> list[Slot]:
    if sum(x is not None for x in (evaluator, replay)) > 1:
        raise ValueError("give an evaluator or a replay file, not both")
    if cluster is not None:
        if gpus is not None or devices is not None:
            raise ValueError("--cluster runs on the cluster's GPUs: give --gpus or --cluster, not both")
        from autokernel.tuning.cluster import cluster_slots  # cluster imports this module (local_slot)

        if evaluator is not None or workers is not None:
            raise ValueError("--cluster runs candidates on the cluster's actors: no evaluator of this machine applies")
        return cluster_slots(cluster, replay=replay, cache=cache, timeout_s=timeout_s, **cluster_options)
    if gpus is None and devices is None:
        if replay is not None:
            return [_labelled(Device(""), ReplayEvaluator(replay))]
        if evaluator is not None:
            return [_labelled(Device(""), evaluator)]
        return [local_slot(None, cache, timeout_s, workers=workers, on_error=warn, timeline=timeline)]
    if replay is not None or evaluator is not None or workers is not None:
        raise ValueError("--gpus runs candidates on this machine's GPUs: --replay does not apply")
    devices = list(devices) if devices is not None else fleet.local_devices(gpus)
    if evaluator_for is not None:
        return [_labelled(d, evaluator_for(d)) for d in devices]
    models = sorted({d.name for d in devices})
    if len(models) > 1:  # the search space is read from the driver's GPU: one model per run here
        raise ValueError(f"--gpus: the GPUs differ ({'; '.join(f'{d} is {d.name}' for d in devices)}); give GPUs of "
                         "one model, or run on a Ray cluster (--cluster), where each model is tuned on its own")
    pool = None
    if not runtime.INTERPRETER and all(d.index is not None for d in devices):  # the interpreter compiles nothing
        pool = CompilePool(node_compile_workers(len(devices)),
                           env=fleet.visible_devices_env([d.index for d in devices]))
        pools.append(pool)
    return [local_slot(d, cache, timeout_s, compile_pool=pool, compile_device=i if pool else None, on_error=warn,
                       timeline=timeline) for i, d in enumerate(devices)]


def _labelled(device: Device, evaluator: Evaluator) -> Slot:
    """The slot of ``evaluator`` on ``device``: its rows carry the evaluator's own device and
    timing where it declares them (a replayed sweep), else the device's and this machine's."""
    name = evaluator.device or device.name or runtime.device_name()
    return Slot(device, evaluator, name, evaluator.timing or timing_label())


def local_slot(device: Device | None, cache: bool, timeout_s: float, *, workers=None,
               compile_pool: CompilePool | None = None, compile_device: int | None = None,
               on_error: Callable[[str], None] | None = None, timeline: Timeline | None = None) -> Slot:
    """A slot on this machine: timing workers (``workers``, started already, or new ones
    given ``device``'s GPU alone, compiling in ``compile_pool`` on its GPU ``compile_device``
    where the machine's GPUs share one), their readings kept and reused with ``cache``;
    their phases go to ``timeline``."""
    if workers is None:
        env = None
        if device is not None and device.index is not None:
            env = fleet.visible_devices_env(device.index)
        workers = WorkerEvaluator(timeout_s=timeout_s, env=env, compile_pool=compile_pool,
                                  compile_device=compile_device)
        workers.start()
    name = device.name if device is not None and device.name else runtime.device_name()
    slot_device = device or Device(name)
    if timeline is not None:
        workers.on_phase = timeline.recorder(str(slot_device))
        workers.on_compiled = timeline.compiler(str(slot_device))
    timing = timing_label()
    readings = ReadingCache(cache_dir(), environment(name, timing), on_error=on_error)
    return Slot(slot_device, CachingEvaluator(workers, readings, reuse=cache), name, timing)
