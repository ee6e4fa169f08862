"""The kept readings (autokernel.tuning.readings): a rerun reuses what was measured, says
so, and measures again what a new measurement might change."""

from __future__ import annotations

import json

import pytest

from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.config import KernelConfig
from autokernel.evaluate import Trial
from autokernel.history import RETIMED, History, is_retimed
from autokernel.records import Problem
from autokernel.tuning.readings import CachingEvaluator, ReadingCache, reused_note

P = Problem(64, 48, 32, "float16")
A = KernelConfig(block_m=32, block_n=32, block_k=16, group_m=1, num_warps=2, num_stages=1)
B = A.model_copy(update={"block_n": 16})
C = A.model_copy(update={"block_k": 32})
ENV = {"device": "test", "timing": "interpreter", "torch": "t", "triton": "x", "code": "c"}


class Inner:
    """A stand-in evaluator that counts what it is asked to measure."""

    def __init__(self, status: dict | None = None) -> None:
        self.asked: list[tuple[str, tuple]] = []
        self.status = status or {}
        self.closed = False

    def _trial(self, config, note=None) -> Trial:
        status = self.status.get(config.block_n if config else None, "success")
        ms = None if status != "success" else 1.0 + len(self.asked) / 10
        return Trial(P, config, status, ms=ms, gpu_ms=ms, timing="interpreter", note=note,
                     kernel="triton" if config else "torch")

    def evaluate(self, problem, configs, on_trial=None):
        self.asked.append(("evaluate", tuple(configs)))
        out = [self._trial(c) for c in configs]
        for t in out:
            if on_trial:
                on_trial(t)
        return out

    def retime(self, problem, configs, on_trial=None):
        self.asked.append(("retime", tuple(configs)))
        out = [self._trial(c, note=RETIMED if self.status.get("retime", True) else "re-time lost with its batch")
               for c in configs]
        for t in out:
            if on_trial:
                on_trial(t)
        return out

    def baseline(self, problem, on_trial=None):
        self.asked.append(("baseline", ()))
        return self._trial(None)

    def close(self):
        self.closed = True


def _caching(tmp_path, inner, env=ENV):
    return CachingEvaluator(inner, ReadingCache(tmp_path, env))


def test_a_second_evaluation_reuses_every_kept_reading(tmp_path):
    first_inner, seen = Inner(), []
    first = _caching(tmp_path, first_inner).evaluate(P, [A, B], on_trial=seen.append)
    assert len(first_inner.asked) == 1 and [t.config for t in seen] == [A, B]

    inner, seen = Inner(), []
    ev = _caching(tmp_path, inner)  # a new run: reads the file
    again = ev.evaluate(P, [B, A, C], on_trial=seen.append)
    assert inner.asked == [("evaluate", (C,))]  # only the config never measured
    assert [t.config for t in again] == [B, A, C]
    assert [t.gpu_ms for t in again[:2]] == [first[1].gpu_ms, first[0].gpu_ms]
    assert all("reused reading of" in t.note for t in again[:2]) and again[2].note is None
    assert (ev.reused, ev.measured) == (2, 1)
    assert {t.config for t in seen} == {A, B, C}


def test_outcomes_a_new_measurement_might_change_are_measured_again(tmp_path):
    _caching(tmp_path, Inner(status={32: "timeout", 16: "compile_error"})).evaluate(P, [A, B])
    inner = Inner()
    trials = _caching(tmp_path, inner).evaluate(P, [A, B])
    assert inner.asked == [("evaluate", (A,))]  # the timeout again; the compile error kept
    assert trials[1].status == "compile_error" and trials[0].status == "success"


def test_another_environment_or_problem_shares_nothing(tmp_path):
    _caching(tmp_path, Inner()).evaluate(P, [A])
    inner = Inner()
    _caching(tmp_path, inner, env={**ENV, "code": "changed"}).evaluate(P, [A])
    other = Inner()
    _caching(tmp_path, other).evaluate(Problem(64, 48, 32, "bfloat16"), [A])
    assert inner.asked and other.asked


def test_a_retime_is_kept_whole_and_keeps_its_mark_last(tmp_path):
    _caching(tmp_path, Inner()).retime(P, [A, B])
    inner = Inner()
    ev = _caching(tmp_path, inner)
    trials = ev.retime(P, [A, B])
    assert inner.asked == [] and all(is_retimed(t.note) and "reused reading of" in t.note for t in trials)
    ev.retime(P, [B, A])  # another order is another race
    assert inner.asked == [("retime", (B, A))]

    lost = Inner(status={"retime": False})
    _caching(tmp_path / "lost", lost).retime(P, [A])
    again = Inner()
    _caching(tmp_path / "lost", again).retime(P, [A])
    assert again.asked == [("retime", (A,))]  # a lost batch is not kept


def test_the_baseline_is_kept_and_recorded_through_on_trial(tmp_path):
    _caching(tmp_path, Inner()).baseline(P)
    inner, seen = Inner(), []
    trial = _caching(tmp_path, inner).baseline(P, on_trial=seen.append)
    assert inner.asked == [] and seen == [trial] and trial.kernel == "torch" and trial.config is None


def test_a_cut_line_is_skipped_and_notes_compose(tmp_path):
    ev = _caching(tmp_path, Inner())
    ev.evaluate(P, [A])
    with ev.cache.path.open("a") as f:
        f.write('{"key": "abc", "env"')  # a write cut short
    inner = Inner()
    _caching(tmp_path, inner).evaluate(P, [A])
    assert inner.asked == []
    assert reused_note("why; re-timed", "T") == "why; reused reading of T; re-timed"
    assert reused_note(None, "T") == "reused reading of T"


@pytest.mark.parametrize("change", [
    {"ms": "fast"}, {"ms": -1.0}, {"gpu_ms": 0}, {"p20": float("inf")}, {"tflops": "x"}, {"config": {"block_m": 17}},
    {"status": 5}, {"status": "timeout"}, {"problem": {"m": 1}}, {"problem": None}, {"timing": "abacus"},
    {"note": ["x"]}, {"extra": 1},
], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_a_kept_reading_edited_by_hand_is_measured_again(change, tmp_path):
    ev = _caching(tmp_path, Inner())
    ev.evaluate(P, [A])
    records = [json.loads(line) for line in ev.cache.path.read_text().splitlines()]
    records[0]["payload"][0].update(change)
    ev.cache.path.write_text("".join(json.dumps(r) + "\n" for r in records))
    inner = Inner()
    [trial] = _caching(tmp_path, inner).evaluate(P, [A])
    assert inner.asked == [("evaluate", (A,))] and trial.ok and trial.note is None


@pytest.mark.parametrize("payload", ["x", [1], 5, None])
def test_a_kept_payload_that_is_no_list_of_trials_is_measured_again(payload, tmp_path):
    ev = _caching(tmp_path, Inner())
    ev.baseline(P)
    record = json.loads(ev.cache.path.read_text())
    ev.cache.path.write_text(json.dumps({**record, "payload": payload}) + "\n")
    inner = Inner()
    _caching(tmp_path, inner).baseline(P)
    assert inner.asked == [("baseline", ())]


def test_tune_twice_with_one_seed_measures_nothing_the_second_time(tmp_path):
    runner = CliRunner()
    # Two configs: the confirmation races them in the same order in its first and third round.
    args = ["tune", "--interpret", "--m", "20", "--n", "24", "--k", "16", "-g", "1", "-n", "2", "--seed", "2",
            "--strategy", "optuna", "--json"]
    first = json.loads(runner.invoke(app, [*args, "--history", str(tmp_path / "a.csv")]).stdout)[0]
    result = runner.invoke(app, [*args, "--history", str(tmp_path / "b.csv")])
    second = json.loads(result.stdout)[0]
    assert first["reused_readings"] == 0 and second["reused_readings"] > 0
    assert second["best"] == first["best"] and second["baseline"]["ms"] == first["baseline"]["ms"]
    rows = History(tmp_path / "b.csv").read()
    assert len(rows) == second["reused_readings"] and rows["note"].str.contains("reused reading of").all()
    cold = History(tmp_path / "a.csv").read()  # the same rows, reading for reading
    assert rows["config"].tolist() == cold["config"].tolist() and rows["ms"].tolist() == cold["ms"].tolist()
    assert "reused" in result.stderr and "--no-cache" in result.stderr

    fresh = json.loads(runner.invoke(app, [*args, "--no-cache", "--history", str(tmp_path / "c.csv")]).stdout)[0]
    assert fresh["reused_readings"] == 0
    assert not History(tmp_path / "c.csv").read()["note"].fillna("").str.contains("reused").any()


def test_kept_proposals_come_back_for_the_same_space_and_history_only(tmp_path):
    from autokernel.tuning.readings import KeptProposals, proposal_store
    from autokernel.records import Trial
    from autokernel.tuning.strategies import make_strategy

    from tests.helpers import interpreter_space

    class Counting:
        name = "random"

        def __init__(self):
            self.inner, self.calls, self.notes = make_strategy("random", seed=3), 0, {"kept": "attr"}

        def propose(self, space, history, n):
            self.calls += 1
            return self.inner.propose(space, history, n)

    space = interpreter_space(P)
    history = [Trial(P, A, "success", ms=1.0)]
    first = Counting()
    proposed = KeptProposals(first, 3, proposal_store(tmp_path)).propose(space, history, 4)
    again = Counting()
    wrapped = KeptProposals(again, 3, proposal_store(tmp_path))  # a new run: reads the file
    assert wrapped.propose(space, history, 4) == proposed and again.calls == 0 and wrapped.reused == 1
    assert wrapped.name == "random" and wrapped.notes == {"kept": "attr"}  # the strategy's own attributes
    wrapped.propose(space, [Trial(P, A, "success", ms=2.0)], 4)  # another reading: worked out anew
    wrapped.propose(space, history, 3)
    assert again.calls == 2
    other_seed = Counting()
    KeptProposals(other_seed, 4, proposal_store(tmp_path)).propose(space, history, 4)
    assert other_seed.calls == 1


def test_machine_failures_are_not_kept(tmp_path):
    from autokernel.tuning.readings import repeatable
    from autokernel.tuning.worker import WORKER_LOST

    assert repeatable(Trial(P, A, "compile_error", error="CompilationError: x"))
    assert not repeatable(Trial(P, A, "compile_error", error="the compile worker died (exit code 9)", note=WORKER_LOST))
    assert not repeatable(Trial(P, A, "out_of_resources", error="OutOfMemoryError: CUDA out of memory"))
    assert repeatable(Trial(P, A, "out_of_resources", error="OutOfResources: out of resource: shared memory"))


def test_a_write_after_a_cut_line_is_read_back(tmp_path):
    ev = _caching(tmp_path, Inner())
    ev.evaluate(P, [A])
    with ev.cache.path.open("a") as f:
        f.write('{"key": "abc", "env"')  # a write cut short, no newline
    _caching(tmp_path, Inner()).evaluate(P, [B])  # appended after the cut line
    inner = Inner()
    _caching(tmp_path, inner).evaluate(P, [A, B])
    assert inner.asked == []


def test_an_unusable_cache_dir_warns_once_and_loses_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(blocker))
    runner = CliRunner()
    args = ["tune", "--interpret", "--size", "16", "--size", "24", "-g", "2", "-n", "2", "--seed", "1",
            "--history", str(tmp_path / "h.csv"), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    outs = json.loads(result.stdout)
    rows = History(tmp_path / "h.csv").read()
    assert len(outs) == 2 and len(rows) >= sum(o["trials"] + 1 for o in outs)  # every trial and the baselines
    warned = [ln for ln in result.stderr.splitlines() if "a-file" in ln]
    assert len(warned) == 2 and all("nothing more is kept there" in ln for ln in warned)  # readings, proposals
    assert len({ln.split(":")[1] for ln in warned}) == 2


def test_no_cache_measures_again_and_keeps_the_new_readings(tmp_path):
    runner = CliRunner()
    args = ["tune", "--interpret", "--m", "20", "--n", "24", "--k", "16", "-g", "1", "-n", "2", "--seed", "2",
            "--strategy", "optuna", "--json"]
    first = json.loads(runner.invoke(app, [*args, "--no-cache", "--history", str(tmp_path / "a.csv")]).stdout)[0]
    again = json.loads(runner.invoke(app, [*args, "--history", str(tmp_path / "b.csv")]).stdout)[0]
    assert first["reused_readings"] == 0 and again["reused_readings"] > 0
    assert again["best"] == first["best"]


@pytest.mark.parametrize("strategy, seed, cache, llm, wrapped", [
    ("optuna", 1, True, False, True),
    ("auto", 1, True, False, True),
    ("auto", 1, True, True, False),     # an LLM's proposals follow from no seed
    ("random", 1, True, False, False),  # its generator carries state from call to call
    ("optuna", None, True, False, False),
    ("optuna", 1, False, False, False),
])
def test_which_strategies_have_their_proposals_kept(strategy, seed, cache, llm, wrapped, monkeypatch):
    from autokernel.tuning.readings import KeptProposals
    from autokernel.tuning.run import _strategy_maker

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    if llm:
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    made = _strategy_maker(strategy, seed, None, print, proposals=cache and seed is not None)()
    assert isinstance(made, KeptProposals) == wrapped


def test_the_same_race_twice_in_a_run_is_two_readings(tmp_path):
    """The confirmation races two configs in the same order in its first and third round:
    each race is kept and given back as its own reading, in turn."""
    first = _caching(tmp_path, Inner())
    kept = [first.retime(P, [A, B])[0].gpu_ms, first.retime(P, [A, B])[0].gpu_ms]
    assert kept[0] != kept[1]
    inner = Inner()
    again = _caching(tmp_path, inner)
    assert [again.retime(P, [A, B])[0].gpu_ms, again.retime(P, [A, B])[0].gpu_ms] == kept and inner.asked == []
    again.retime(P, [A, B])  # a third: never measured before
    assert inner.asked == [("retime", (A, B))]


def test_cache_info_and_clear(tmp_path, monkeypatch):
    from tests.helpers import one_error_line

    runner = CliRunner()
    directory = tmp_path / "autokernel-cache"  # conftest's AUTOKERNEL_CACHE_DIR
    assert "nothing kept yet" in runner.invoke(app, ["cache", "info"]).stdout
    args = ["tune", "--interpret", "--m", "20", "--n", "24", "--k", "16", "-g", "1", "-n", "2", "--seed", "2",
            "--strategy", "optuna", "--json", "--history", str(tmp_path / "h.csv")]
    assert runner.invoke(app, args).exit_code == 0
    # a file another autokernel wrote: a stale one
    old = ReadingCache(directory, {**ENV, "code": "older"})
    old.put("evaluate", P, [A], [Trial(P, A, "success", ms=1.0).to_dict()])
    listed = json.loads(runner.invoke(app, ["cache", "info", "--json"]).stdout)["files"]
    assert sorted((f["kind"], f["stale"]) for f in listed) == [("proposals", False), ("readings", False),
                                                                ("readings", True)]
    assert all(f["entries"] > 0 for f in listed)

    result = runner.invoke(app, ["cache", "clear", "--stale"])
    assert result.exit_code == 0 and "deleted 1 file(s), 1 kept entry" in result.stderr
    assert not old.path.exists()
    runner.invoke(app, ["cache", "clear", "--kind", "readings"])
    left = json.loads(runner.invoke(app, ["cache", "info", "--json"]).stdout)["files"]
    assert [f["kind"] for f in left] == ["proposals"]

    assert "--kind must be" in one_error_line(runner.invoke(app, ["cache", "clear", "--kind", "x"]), 2)
    blocker = tmp_path / "f"
    blocker.write_text("")
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(blocker))
    assert "is a file" in one_error_line(runner.invoke(app, ["cache", "info"]), 2)


def test_a_bad_byte_costs_its_line_only(tmp_path):
    ev = _caching(tmp_path, Inner())
    ev.evaluate(P, [A])
    with ev.cache.path.open("ab") as f:
        f.write(b"\xff\xfe not utf-8\n")
    ev.evaluate(P, [B])  # kept after the bad line
    inner = Inner()
    _caching(tmp_path, inner).evaluate(P, [A, B])
    assert inner.asked == []


def test_files_of_an_older_torch_are_stale(tmp_path, monkeypatch):
    import autokernel.tuning.readings as readings

    cache = ReadingCache(tmp_path, {**ENV, "code": readings.code_fingerprint(), "torch": "1.0.0+cu1"})
    cache.put("evaluate", P, [A], [Trial(P, A, "success", ms=1.0).to_dict()])
    monkeypatch.setattr(readings, "_installed", lambda name: {"torch": "1.0.0"}.get(name))
    assert [f["stale"] for f in readings.kept_files(tmp_path)] == [False]  # the local tag aside, the same torch
    monkeypatch.setattr(readings, "_installed", lambda name: {"torch": "2.0.0"}.get(name))
    assert [f["stale"] for f in readings.kept_files(tmp_path)] == [True]
