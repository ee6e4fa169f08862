"""Idle devices lend their evaluators to the problems still running (tuning.fleet.Sharing):
batches split between devices of one model, the same trials recorded as without lending,
a lender failing mid-batch, Ctrl-C, the timeline's "lent" spans, and a close that stops
every device's workers at once."""

from __future__ import annotations

import _thread
import dataclasses
import threading
import time
from collections import Counter

import pytest

from autokernel.config import KernelConfig
from autokernel.history import History, is_retimed
from autokernel.records import Problem
from autokernel.tuning import tune
from autokernel.tuning.evaluator import mark_retimed
from autokernel.tuning.fleet import Device, Slot
from autokernel.tuning.replay import ReplayEvaluator
from autokernel.tuning.run import Hooks, _close
from autokernel.tuning.space import config_key
from autokernel.tuning.timeline import KINDS, Timeline, table
from tests.helpers import synthetic_sweep

LONG, SHORT = Problem(4096, 4096, 4096), Problem(1024, 4096, 4096)
DEVICES = [Device("Fake GPU", 0), Device("Fake GPU", 1)]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "sweep.csv"
    synthetic_sweep(path, shapes=[(4096, 4096, 4096), (1024, 4096, 4096)])
    return path


class Slow(ReplayEvaluator):
    """A replayed device on which each config of LONG takes ``delay`` seconds, and none
    finishes before ``after`` is set (where given: SHORT's tuning done, so that the device
    that ran it is idle while LONG still runs however slowly the host runs the rest); it
    notes which problems it evaluated (``ran``: problem, config key) and re-timed."""

    def __init__(self, path, device: Device, log: list, delay: float = 0.25,
                 after: threading.Event | None = None) -> None:
        super().__init__(path)
        self.device, self.where, self.log, self.delay = device.name, str(device), log, delay
        self.after = after
        self.aborted = False

    def evaluate(self, problem, configs, on_trial=None):
        def each(trial):
            if problem == LONG:
                if self.after is not None:
                    assert self.after.wait(timeout=120), "SHORT's tuning never finished"
                time.sleep(self.delay)
            self.log.append((self.where, "evaluate", problem.m, config_key(trial.config)))
            if on_trial is not None:
                on_trial(trial)

        return super().evaluate(problem, configs, each)

    def retime(self, problem, configs, on_trial=None):
        self.log.append((self.where, "retime", problem.m, None))
        trials = [mark_retimed(t) for t in ReplayEvaluator.evaluate(self, problem, configs)]
        for trial in trials:
            if on_trial is not None:
                on_trial(trial)
        return trials

    def baseline(self, problem, on_trial=None):
        self.log.append((self.where, "baseline", problem.m, None))
        return super().baseline(problem, on_trial)

    def abort(self):
        self.aborted = True


def _run(sweep, path, *, lend=True, make=None, hooks=None, timeline=None, log=None):
    """LONG and SHORT tuned on DEVICES; ``make(device, after)`` builds each device's evaluator,
    ``after`` the event set once SHORT's tuning is done (``Slow``)."""
    log = [] if log is None else log
    make = make or (lambda d, after: Slow(sweep, d, log, after=after))
    short_done = threading.Event()
    hooks = hooks or Hooks()
    theirs = hooks.done

    def done(slot, outcome):
        theirs(slot, outcome)
        if outcome.problem == SHORT:
            short_done.set()

    return tune([LONG, SHORT], strategy="random", seed=3, cache=False, history=path, generations=4,
                per_generation=4, devices=DEVICES, evaluator_for=lambda d: make(d, short_done), lend=lend,
                hooks=dataclasses.replace(hooks, done=done), timeline=timeline)


def _owners(started):
    return {m: device for device, m in started}


def test_an_idle_device_lends_and_the_long_problem_splits_its_batches(sweep, tmp_path):
    log: list = []
    started: list = []
    timeline = Timeline()
    run = _run(sweep, tmp_path / "h.csv", log=log, timeline=timeline,
               hooks=Hooks(start=lambda slot, p, s, n: started.append((str(slot.device), p.m))))
    owner = _owners(started)[LONG.m]
    helper = next(str(d) for d in DEVICES if str(d) != owner)
    long_runs = [(w, kind) for w, kind, m, _ in log if m == LONG.m]
    assert (helper, "evaluate") in long_runs and (owner, "evaluate") in long_runs
    # the leaders' re-timing and cuBLAS stay on the problem's own device
    assert {w for w, kind in long_runs if kind != "evaluate"} == {owner}
    # every config of the long problem evaluated once, on one device or the other
    keys = [k for _, kind, m, k in log if m == LONG.m and kind == "evaluate"]
    assert len(keys) == len(set(keys)) == 16
    outcome = next(o for o in run.outcomes if o.problem == LONG)
    assert len(outcome.result.trials) == 16
    # the spans still tile each device's run; the helper's loans are "lent", tagged with the problem
    spans = timeline.spans()
    assert {s.kind for s in spans} <= set(KINDS)
    for device in map(str, DEVICES):
        mine = [s for s in spans if s.device == device]
        assert mine[0].start == 0.0 and all(a.end == b.start for a, b in zip(mine, mine[1:]))
        assert all(s.end > s.start for s in mine)
    lent = [s for s in spans if s.kind == "lent"]
    assert lent and {s.device for s in lent} == {helper} and {s.problem for s in lent} == {LONG.label()}
    summary = timeline.summary()
    assert summary[helper]["seconds"]["lent"] > 0 and summary[helper]["lent"]
    assert " lent " in table(summary)[0]


def _rows(path):
    df = History(path).read()
    return Counter((int(r.M), r.kernel, r.config, r.status, r.generation, is_retimed(r.note))
                   for r in df.itertuples())


def test_lending_records_the_same_trials_as_a_run_without_it(sweep, tmp_path):
    log: list = []
    _run(sweep, tmp_path / "lent.csv", log=log)
    assert len({w for w, kind, m, _ in log if m == LONG.m and kind == "evaluate"}) == 2  # it did lend
    _run(sweep, tmp_path / "alone.csv", lend=False)
    assert _rows(tmp_path / "lent.csv") == _rows(tmp_path / "alone.csv")


class Failing(Slow):
    """A device that raises in the middle of the first batch it runs for another device's problem."""

    def __init__(self, *args, own: dict, after: threading.Event | None = None) -> None:
        super().__init__(*args, after=after)
        self.own, self.failed = own, False

    def evaluate(self, problem, configs, on_trial=None):
        if self.own.get(problem.m) == self.where or self.failed:
            return super().evaluate(problem, configs, on_trial)
        self.failed = True
        super().evaluate(problem, configs[:1], on_trial)
        raise RuntimeError("the timing worker broke")


def test_a_lender_that_fails_mid_batch_loses_and_duplicates_nothing(sweep, tmp_path):
    log: list = []
    started: list = []
    own: dict = {}
    warnings: list[str] = []

    def start(slot, problem, strategy, total):
        started.append((str(slot.device), problem.m))
        own[problem.m] = str(slot.device)

    run = _run(sweep, tmp_path / "h.csv", log=log, make=lambda d, after: Failing(sweep, d, log, own=own, after=after),
               hooks=Hooks(start=start, warn=warnings.append))
    owner = own[LONG.m]
    helper = next(str(d) for d in DEVICES if str(d) != owner)
    lent = [k for w, kind, m, k in log if w == helper and m == LONG.m]
    assert len(lent) == 1  # it reported one trial, then raised
    first = History(tmp_path / "h.csv").read()
    first = first[(first["kernel"] == "triton") & ~first["note"].map(is_retimed) & (first["M"] == LONG.m)]
    assert len(first) == 16 and first["config"].nunique() == 16  # none lost, none twice
    outcome = next(o for o in run.outcomes if o.problem == LONG)
    assert len(outcome.result.trials) == 16
    assert len(run.lost) == 1 and "failed while helping" in run.lost[0]
    assert any("failed while helping" in w for w in warnings)


def test_ctrl_c_while_lending_keeps_every_finished_trial(sweep, tmp_path):
    log: list = []
    reported: list = []
    evaluators: list[Slow] = []
    started: list = []
    fired = threading.Event()

    def trial(slot, problem, t):
        reported.append((problem.m, config_key(t.config)))
        owner = _owners(started).get(LONG.m)
        helped = any(w != owner and m == LONG.m for w, kind, m, _ in log)
        if helped and len(reported) >= 12 and not fired.is_set():
            fired.set()
            _thread.interrupt_main()  # as Ctrl-C in the terminal

    def make(device):
        evaluators.append(Slow(sweep, device, log, delay=0.05))
        return evaluators[-1]

    with pytest.raises(KeyboardInterrupt):
        tune([LONG, SHORT], strategy="random", seed=3, cache=False, history=tmp_path / "h.csv", generations=20,
             per_generation=4, devices=DEVICES, evaluator_for=make,
             hooks=Hooks(trial=trial, start=lambda slot, p, s, n: started.append((str(slot.device), p.m))))
    assert fired.is_set() and all(e.aborted for e in evaluators)
    df = History(tmp_path / "h.csv").read()
    written = [(int(r.M), config_key(KernelConfig.from_json(r.config))) for r in df.itertuples()]
    assert sorted(written) == sorted(reported)


class SlowClose(ReplayEvaluator):
    def close(self):
        time.sleep(0.5)


def test_close_stops_every_device_at_once(sweep):
    slots = [Slot(Device("Fake GPU", i), SlowClose(sweep)) for i in range(3)]
    timeline = Timeline()
    start = time.perf_counter()
    _close(slots, [], kill=False, timeline=timeline)
    assert time.perf_counter() - start < 1.2  # one after the other: 1.5 s
    assert sorted(timeline.closing) == ["GPU 0", "GPU 1", "GPU 2"]
    assert all(0.4 < s < 1.2 for s in timeline.closing.values())
