"""autokernel.tuning.tune from Python: trials in the history, the best found, strategies by
name from the registry, refusals before any work, and several devices (fake ones) sharing
the problems, longest first, each device model tuning every problem."""

from __future__ import annotations

import _thread
import threading

import pytest

from autokernel.config import KernelConfig
from autokernel.history import History, is_retimed
from autokernel.records import Problem
from autokernel.tuning import RequestError, tune
from autokernel.tuning.fleet import Device, parse_gpus, schedule
from autokernel.tuning.replay import ReplayEvaluator
from autokernel.tuning.run import Hooks
from autokernel.tuning.space import config_key
from autokernel.tuning.timeline import KINDS, Timeline, table
from autokernel.tuning.strategies import STRATEGIES, StrategyBase, make_strategy, register_strategy
from tests.helpers import synthetic_sweep

SHAPES = [(1024, 4096, 4096), (4096, 4096, 4096), (2048, 4096, 4096), (512, 4096, 4096)]
PROBLEMS = [Problem(*s) for s in SHAPES]


@pytest.fixture(scope="module")
def sweep4(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "sweep.csv"
    synthetic_sweep(path, shapes=SHAPES)
    return path


def _first_readings(df, problem=None):
    """The rows of first readings of our kernel (no re-timing, no baseline)."""
    df = df[(df["kernel"] == "triton") & ~df["note"].map(is_retimed)]
    if problem is not None:
        df = df[(df["M"] == problem.m) & (df["N"] == problem.n) & (df["K"] == problem.k)]
    return df


def test_tune_writes_every_trial_and_finds_the_history_best(sweep4, tmp_path):
    history = History(tmp_path / "h.csv")
    run = tune(PROBLEMS[:2], strategy="random", seed=1, replay=sweep4, history=history, generations=2,
               per_generation=4, command="tune")
    assert [o.problem for o in run.outcomes] == PROBLEMS[:2] and run.untuned == []
    df = history.read()
    assert set(df["run_id"]) == {run.run_id} and set(df["timing"]) == {"replay"}
    for outcome in run.outcomes:
        rows = _first_readings(df, outcome.problem)
        assert len(rows) == len(outcome.result.trials) == 8 and rows["config"].nunique() == 8
        best = outcome.result.best
        ok = df[(df["M"] == outcome.problem.m) & (df["status"] == "success") & (df["kernel"] == "triton")]
        # a replayed sweep reads the same when re-timed: the best is the fastest row of the problem
        assert best is not None and best.rank_ms == ok["gpu_ms"].min()
        assert config_key(best.config) in {config_key(t.config) for t in outcome.result.trials}
        assert outcome.baseline is not None and outcome.baseline.ms == pytest.approx(0.19)
    # a second call continues: the strategy sees the first call's trials and proposes none of them again
    again = tune(PROBLEMS[:1], strategy="random", seed=1, replay=sweep4, history=history, generations=1,
                 per_generation=4)
    assert again.outcomes[0].result.prior_trials == 8
    rows = _first_readings(history.read(), PROBLEMS[0])
    assert len(rows) == 12 and rows["config"].nunique() == 12


class Ordered(StrategyBase):
    """Proposes the space in its own order, and says why."""

    name = "ordered"

    def __init__(self) -> None:
        self.notes = {}
        self.events = []

    def propose(self, space, history, n):
        tried = {config_key(o.config) for o in history}
        out = [c for c in space if config_key(c) not in tried][:n]
        self.notes = {config_key(c): "next in order" for c in out}
        self.events.append(f"proposed {len(out)}")
        return out


def test_a_registered_strategy_and_an_evaluator_object(sweep4, tmp_path):
    register_strategy("ordered", lambda seed=None, **options: Ordered())
    try:
        assert "ordered" in STRATEGIES and make_strategy("ordered").name == "ordered"
        warned: list[str] = []
        evaluator = ReplayEvaluator(sweep4)
        run = tune(PROBLEMS[1:2], strategy="ordered", evaluator=evaluator, history=tmp_path / "h.csv",
                   generations=2, per_generation=3, hooks=Hooks(warn=warned.append))
    finally:
        del STRATEGIES["ordered"]
    df = History(tmp_path / "h.csv").read()
    notes = _first_readings(df)["note"].fillna("")
    # the prior configs come first; each of the strategy's own proposals carries its note,
    # and its events reach the caller as warnings
    proposed = sum(int(w.split()[1]) for w in warned if w.startswith("proposed"))
    assert proposed >= 3 and notes.str.startswith("next in order").sum() == proposed
    assert set(df["strategy"].dropna()) == {"ordered"} and set(df["device"]) == {"Synthetic GPU"}
    assert run.outcomes[0].result.best is not None


@pytest.mark.parametrize("kwargs, message", [
    ({"strategy": "magic"}, "unknown strategy"),
    ({"problems": [Problem(333, 4096, 4096)]}, "has no trials of 333x4096x4096"),
    ({"generations": 0}, "must be >= 1"),
])
def test_a_bad_request_is_refused_before_any_work(sweep4, tmp_path, kwargs, message):
    problems = kwargs.pop("problems", PROBLEMS[:1])
    path = tmp_path / "h.csv"
    with pytest.raises(ValueError, match=message):
        tune(problems, **{"strategy": "random", "replay": sweep4, "history": path, **kwargs})
    assert not path.exists()


def test_gpus_spec():
    assert parse_gpus("all") == "all" and parse_gpus("0, 2") == [0, 2]
    for bad in ("a", "0,0", "-1", ""):
        with pytest.raises(ValueError, match="--gpus"):
            parse_gpus(bad)


def test_schedule_is_longest_first_once_per_device_model():
    jobs = schedule(PROBLEMS, ["A", "A", "B"])
    assert [(j.problem.m, j.device_name) for j in jobs] == [
        (4096, "A"), (4096, "B"), (2048, "A"), (2048, "B"), (1024, "A"), (1024, "B"), (512, "A"), (512, "B")]


class Gated(ReplayEvaluator):
    """A replayed device that holds its first batch of ``hold`` until ``gate`` opens (or it is closed)."""

    def __init__(self, path, name, gate: threading.Event, hold: Problem | None = None) -> None:
        super().__init__(path)
        self.device, self.gate, self.hold, self.closed, self.aborted = name, gate, hold, False, False

    def evaluate(self, problem, configs, on_trial=None):
        if problem == self.hold:
            assert self.gate.wait(60), "the gate never opened"
        return super().evaluate(problem, configs, on_trial)

    def close(self):
        self.closed = True
        self.gate.set()

    def abort(self):
        self.aborted = True
        self.close()


def test_the_next_free_device_takes_the_next_longest_problem(sweep4, tmp_path):
    """Two devices of one model: the one that got the longest problem is held until the
    other has tuned the next two, longest first; every trial lands in the one history."""
    gate = threading.Event()
    started: list[tuple[str, int]] = []
    finished: list[str] = []

    def done(slot, outcome):
        finished.append(str(slot.device))
        if finished.count(str(slot.device)) == 2 and outcome.problem.m != 4096:
            gate.set()

    devices = [Device("Fake GPU", 0), Device("Fake GPU", 1)]
    run = tune(PROBLEMS[:3], strategy="random", seed=2, history=tmp_path / "h.csv", generations=1, per_generation=3,
               devices=devices, evaluator_for=lambda d: Gated(sweep4, d.name, gate, hold=PROBLEMS[1]),
               hooks=Hooks(start=lambda slot, p, s, n: started.append((str(slot.device), p.m)), done=done))
    held = next(d for d, m in started if m == 4096)
    other = [m for d, m in started if d != held]
    assert sorted(m for _, m in started[:2]) == [2048, 4096] and other == [2048, 1024]
    assert [o.problem for o in run.outcomes] == PROBLEMS[:3]  # in the order asked, whoever finished first
    df = History(tmp_path / "h.csv").read()
    assert set(df["device"]) == {"Fake GPU"}
    assert len(_first_readings(df)) == sum(len(o.result.trials) for o in run.outcomes) == 9


def test_devices_of_two_models_each_tune_every_problem(sweep4, tmp_path):
    open_gate = threading.Event()
    open_gate.set()
    devices = [Device("Fake A", 0), Device("Fake B", 1)]
    run = tune(PROBLEMS[:2], strategy="random", seed=2, history=tmp_path / "h.csv", generations=1, per_generation=2,
               devices=devices, evaluator_for=lambda d: Gated(sweep4, d.name, open_gate))
    assert sorted((o.problem.m, o.device) for o in run.outcomes) == [
        (1024, "Fake A"), (1024, "Fake B"), (4096, "Fake A"), (4096, "Fake B")]
    df = _first_readings(History(tmp_path / "h.csv").read())
    assert df.groupby(["M", "device"]).size().to_dict() == {
        (1024, "Fake A"): 2, (1024, "Fake B"): 2, (4096, "Fake A"): 2, (4096, "Fake B"): 2}


def test_ctrl_c_keeps_every_finished_trial_of_every_device(sweep4, tmp_path):
    """Ctrl-C while one device is held mid-batch and the other is measuring: every trial
    reported before it is on disk, none after it, and every device's workers are killed."""
    gate = threading.Event()
    reported: list[tuple[int, str]] = []
    evaluators: list[Gated] = []

    def trial(slot, problem, t):
        reported.append((problem.m, config_key(t.config)))
        if len([m for m, _ in reported if m != 4096]) == 3:
            _thread.interrupt_main()  # as Ctrl-C in the terminal

    def make(device):
        evaluators.append(Gated(sweep4, device.name, gate, hold=PROBLEMS[1]))
        return evaluators[-1]

    with pytest.raises(KeyboardInterrupt):
        tune(PROBLEMS[:3], strategy="random", seed=2, history=tmp_path / "h.csv", generations=3, per_generation=2,
             devices=[Device("Fake GPU", 0), Device("Fake GPU", 1)], evaluator_for=make,
             hooks=Hooks(trial=trial))
    assert all(e.aborted for e in evaluators)
    df = History(tmp_path / "h.csv").read()
    written = [(int(r.M), config_key(KernelConfig.from_json(r.config))) for r in df.itertuples()]
    assert sorted(written) == sorted(reported) and len(written) >= 3
    # the held device's batch, let go only as its workers were closed, wrote nothing
    assert 4096 not in {m for m, _ in written}


def test_export_best_writes_one_file_per_device(sweep4, tmp_path):
    """Two GPU models tuned in one run: export-best --per-device writes a file for each."""
    import json

    from typer.testing import CliRunner

    from autokernel.cli import app

    class Measured(Gated):  # its rows pass for GPU measurements, as a real device's do
        def __init__(self, *args) -> None:
            super().__init__(*args)
            self.timing = "gpu"

    open_gate = threading.Event()
    open_gate.set()
    history = tmp_path / "h.csv"
    tune(PROBLEMS[:2], strategy="random", seed=2, history=history, generations=1, per_generation=2,
         devices=[Device("Fake A", 0), Device("Fake B", 1)],
         evaluator_for=lambda d: Measured(sweep4, d.name, open_gate))
    out = tmp_path / "best"
    result = CliRunner().invoke(app, ["export-best", "--history", str(history), "--per-device", "-o", str(out)])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in out.iterdir())
    assert files == ["fake-a.json", "fake-b.json"]
    for name, device in zip(files, ["Fake A", "Fake B"]):
        data = json.loads((out / name).read_text())
        assert data["device"] == device and len(data["entries"]) == 2
    refused = CliRunner().invoke(app, ["export-best", "--history", str(history), "--per-device"])
    assert refused.exit_code == 2 and "give -o DIR" in refused.stderr


@pytest.mark.parametrize("args, message", [
    (["--gpus", "0,x"], "--gpus takes all or GPU indices"),
    (["--gpus", "0", "--cluster", "auto"], "give --gpus (this machine's GPUs) or --cluster"),
    (["--cluster", "localhost:6379"], "--cluster takes auto or ray://HOST:PORT"),
    (["--gpus", "0", "--replay", "SWEEP"], "--replay does not apply"),
])
def test_cli_refuses_bad_device_options_in_one_line(sweep4, args, message):
    from typer.testing import CliRunner

    from autokernel.cli import app
    from tests.helpers import one_error_line

    args = [str(sweep4) if a == "SWEEP" else a for a in args]
    result = CliRunner().invoke(app, ["loop", "--interpret", "-s", "16", *args])
    assert message in one_error_line(result, 2)


def test_cli_gpus_without_a_gpu_is_one_line(tmp_path):
    from typer.testing import CliRunner

    from autokernel import runtime
    from autokernel.cli import app
    from tests.helpers import one_error_line

    if not runtime.INTERPRETER:
        pytest.skip("a machine without CUDA")
    result = CliRunner().invoke(app, ["tune", "--interpret", "-s", "16", "--gpus", "all", "--history",
                                      str(tmp_path / "h.csv")])
    assert "--gpus needs CUDA GPUs" in one_error_line(result, 2)
    assert not (tmp_path / "h.csv").exists() or History(tmp_path / "h.csv").read().empty


def test_gpus_of_two_models_on_one_machine_are_refused(tmp_path, monkeypatch):
    """Locally the search space comes from the driver's GPU: a mix is refused in one line."""
    from autokernel.tuning import fleet

    monkeypatch.setattr(fleet, "local_devices", lambda gpus: [Device("NVIDIA H100", 0), Device("NVIDIA A100", 1)])
    with pytest.raises(RequestError, match="the GPUs differ .*GPU 1 is NVIDIA A100"):
        tune(PROBLEMS[:1], strategy="random", gpus="all", history=tmp_path / "h.csv")
    assert not (tmp_path / "h.csv").exists()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_timeline_cuts_each_device_run_into_spans():
    clock = FakeClock()
    timeline = Timeline(clock)
    on_a = timeline.recorder("A")
    clock.now = 1.0
    with timeline.job("A", "p1"):
        on_a("compile", 1.5, 2.5)
        on_a("timing", 2.5, 4.0)
        clock.now = 5.0
    with timeline.job("A", "p2"):
        clock.now = 7.0
    clock.now = 1.0
    with timeline.job("B", "p3"):
        clock.now = 10.0
    clock.now = 11.0
    timeline.end()
    got = [(s.device, s.kind, s.start, s.end, s.problem) for s in timeline.spans()]
    assert got == [
        ("A", "setup", 0.0, 1.0, None), ("A", "driver", 1.0, 1.5, "p1"), ("A", "compile", 1.5, 2.5, "p1"),
        ("A", "timing", 2.5, 4.0, "p1"), ("A", "driver", 4.0, 5.0, "p1"), ("A", "driver", 5.0, 7.0, "p2"),
        ("A", "tail", 7.0, 10.0, None), ("A", "close", 10.0, 11.0, None),
        ("B", "setup", 0.0, 1.0, None), ("B", "driver", 1.0, 10.0, "p3"), ("B", "close", 10.0, 11.0, None)]
    summary = timeline.summary()
    assert summary["A"]["busy"] == pytest.approx(1.5 / 11) and summary["A"]["seconds"]["tail"] == 3.0
    assert summary["A"]["jobs"] == [("p1", 4.0), ("p2", 2.0)]
    lines = table(summary)
    assert len(lines) == 3 and lines[1].startswith("A") and "14%" in lines[1]


class Phased(Gated):
    """A replayed device that reports its batches as timing phases, as the timing worker does."""

    def __init__(self, *args, on_phase) -> None:
        super().__init__(*args)
        self.on_phase = on_phase

    def evaluate(self, problem, configs, on_trial=None):
        import time

        start = time.perf_counter()
        try:
            return super().evaluate(problem, configs, on_trial)
        finally:
            self.on_phase("timing", start, time.perf_counter())


def test_a_run_on_two_devices_records_where_its_time_went(sweep4, tmp_path):
    """Each device's spans follow each other from the call to its return, and every
    problem's job is there, on the device that tuned it."""
    import time

    timeline = Timeline()
    open_gate = threading.Event()
    open_gate.set()
    devices = [Device("Fake GPU", 0), Device("Fake GPU", 1)]
    start = time.perf_counter()
    run = tune(PROBLEMS, strategy="random", seed=2, history=tmp_path / "h.csv", generations=2, per_generation=2,
               devices=devices, timeline=timeline,
               evaluator_for=lambda d: Phased(sweep4, d.name, open_gate, on_phase=timeline.recorder(str(d))))
    wall = time.perf_counter() - start
    spans = timeline.spans()
    assert {s.device for s in spans} == {"GPU 0", "GPU 1"} and {s.kind for s in spans} <= set(KINDS)
    for device in ("GPU 0", "GPU 1"):
        mine = [s for s in spans if s.device == device]
        assert mine[0].start == 0.0 and all(a.end == b.start for a, b in zip(mine, mine[1:]))
        assert all(s.end > s.start for s in mine)
        assert mine[-1].end == pytest.approx(wall, abs=0.05)
        assert any(s.kind == "timing" for s in mine)
    tuned = {(str(o.problem.label())) for o in run.outcomes}
    jobs = [p for row in timeline.summary().values() for p, _ in row["jobs"]]
    assert sorted(jobs) == sorted(tuned) and len(jobs) == len(PROBLEMS)
    assert timeline.as_dicts()[0].keys() == {"device", "kind", "start", "end", "problem"}
