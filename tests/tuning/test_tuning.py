"""The tuning core without a GPU: the space's pruning, the strategies' contract, the loop on a replayed sweep."""

from __future__ import annotations

import random

import pytest

from autokernel.config import KernelConfig
from autokernel.history import History
from autokernel.records import Problem, Trial
from autokernel.tuning import loop
from autokernel.tuning.replay import ReplayEvaluator
from autokernel.tuning.space import SearchSpace, config_key
from autokernel.tuning.strategies import StrategyBase, make_strategy

from tests.helpers import BIG_SHAPE, gpu_space

BIG = Problem(*BIG_SHAPE)


def test_space_prunes_impossible_configs() -> None:
    space = gpu_space()
    ok = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma")
    assert space.why_invalid(ok) is None
    too_much_smem = ok.model_copy(update={"block_k": 128, "num_stages": 5})
    assert "shared memory" in space.why_invalid(too_much_smem)
    spills = ok.model_copy(update={"num_warps": 4})  # 128x256 fp32 accumulators on 128 threads
    assert "registers" in space.why_invalid(spills)
    thin = ok.model_copy(update={"block_m": 16, "num_warps": 4, "block_n": 64})
    assert "thinner" in space.why_invalid(thin)
    skinny = gpu_space(Problem(16, 4096, 4096))
    assert "exceeds" in skinny.why_invalid(ok)  # a 128-row tile for 16 rows
    thin_ok = ok.model_copy(update={"block_m": 16, "block_n": 128, "num_warps": 4, "group_m": 1})
    assert skinny.why_invalid(thin_ok) is None
    assert "acts as" in skinny.why_invalid(thin_ok.model_copy(update={"group_m": 8}))  # one tile-row: same as 1
    assert skinny.canonical(thin_ok.model_copy(update={"group_m": 8})) == thin_ok
    # 9 rows of 128-row tiles: a group of 8 takes the ninth row (one group), as 16 does
    nine = gpu_space(Problem(1100, 4096, 4096))
    assert "acts as 8" in nine.why_invalid(ok.model_copy(update={"group_m": 16}))
    assert nine.canonical(ok.model_copy(update={"group_m": 16})) == ok
    thirteen = gpu_space(Problem(1600, 4096, 4096))  # 13 rows: groups of 8 and 5, against 13 in one
    assert nine.why_invalid(ok) is None and thirteen.why_invalid(ok.model_copy(update={"group_m": 16})) is None
    fp32 = gpu_space(Problem(4096, 4096, 4096, "float32"))
    assert "float16 and bfloat16" in fp32.why_invalid(ok)
    configs = space.configs()
    assert configs and all(space.contains(c) for c in configs)
    assert len({config_key(c) for c in configs}) == len(configs)
    assert len(configs) < len(gpu_space(Problem(4096, 4096, 4096)).choices["block_m"]) * 2000


def test_interpreter_space_is_small_and_valid() -> None:
    space = SearchSpace.for_problem(Problem(40, 24, 72))
    configs = space.configs()
    assert 0 < len(configs) <= 200
    assert all(c.block_m <= 64 and c.block_n <= 32 and c.variant == "grouped" for c in configs)


@pytest.mark.parametrize("name", ["grid", "random", "optuna"])
def test_strategy_proposes_valid_unique_untried_configs(name: str) -> None:
    space = gpu_space()
    strategy = make_strategy(name, seed=3)
    history: list[Trial] = []
    rng = random.Random(0)
    for _ in range(4):
        proposed = strategy.propose(space, history, 6)
        assert len(proposed) == 6
        keys = [config_key(c) for c in proposed]
        assert len(set(keys)) == 6, "duplicates within one proposal"
        assert not set(keys) & {config_key(o.config) for o in history}, "re-proposed a tried config"
        assert all(space.contains(c) for c in proposed)
        history += [Trial(space.problem, c, "success", ms=rng.uniform(0.1, 1.0)) if i % 5
                    else Trial(space.problem, c, "compile_error") for i, c in enumerate(proposed)]


@pytest.mark.parametrize("name", ["random", "optuna"])
def test_seeded_strategies_repeat_themselves(name: str) -> None:
    space = gpu_space()
    hist = [Trial(space.problem, c, "success", ms=0.1 * (i + 1)) for i, c in enumerate(space.configs()[:10])]
    first = make_strategy(name, seed=7).propose(space, hist, 8)
    again = make_strategy(name, seed=7).propose(space, hist, 8)
    other = make_strategy(name, seed=8).propose(space, hist, 8)
    assert first == again
    assert first != other


def test_optuna_starts_from_the_valid_configs_without_asking_tpe(monkeypatch) -> None:
    """Before the history holds TPE's start-up trials, optuna proposes uniform samples of
    the valid untried configs at once (TPE's own start, which in this space asks mostly for
    invalid field combinations); from then on TPE is asked."""
    optuna = pytest.importorskip("optuna")
    asks = []
    real_ask = optuna.study.Study.ask
    monkeypatch.setattr(optuna.study.Study, "ask", lambda self, *a, **k: asks.append(1) or real_ask(self, *a, **k))
    space = gpu_space()
    strategy = make_strategy("optuna", seed=5)
    first = strategy.propose(space, [], 8)
    assert not asks and len({config_key(c) for c in first}) == 8 and all(space.contains(c) for c in first)
    assert first == make_strategy("optuna", seed=5).propose(space, [], 8)
    history = [Trial(space.problem, c, "success", ms=0.1 * (i + 1)) for i, c in enumerate(first)]
    strategy.propose(space, history, 8)
    assert asks  # past the start-up trials: TPE proposes


def test_strategies_stop_when_the_space_is_exhausted() -> None:
    space = SearchSpace.for_problem(Problem(16, 16, 16))
    everything = space.configs()
    hist = [Trial(space.problem, c, "success", ms=1.0) for c in everything[:-2]]
    for name in ("grid", "random", "optuna"):
        proposed = make_strategy(name, seed=1).propose(space, hist, 5)
        assert {config_key(c) for c in proposed} == {config_key(c) for c in everything[-2:]}


def _tune(replay: ReplayEvaluator, store: History, problem: Problem, name: str, seed: int, generations: int = 3,
          stop: loop.StopRules | None = None):
    space = replay.space(problem)
    seeds = loop.prior_configs(problem, space, store.trials(), device=replay.device, timing=replay.timing)
    return loop.tune(problem, strategy=make_strategy(name, seed=seed), evaluator=replay, store=store, space=space,
                     generations=generations, per_generation=8, run_id="t", device=replay.device,
                     timing=replay.timing, seeds=seeds, stop=stop)


def test_replay_gives_the_same_answer_twice_with_one_seed(sweep, tmp_path) -> None:
    replay = ReplayEvaluator(sweep)
    runs = []
    for i in range(2):
        result = _tune(replay, History(tmp_path / f"h{i}.csv"), BIG, "optuna", seed=11)
        runs.append(([config_key(t.config) for t in result.trials], result.best.rank_ms))
    assert runs[0] == runs[1]
    assert len(runs[0][0]) == 24
    exhaustive = replay.best(BIG)
    assert runs[0][1] >= exhaustive.rank_ms  # nothing beats the exhaustive best of the sweep


def test_a_second_run_continues_where_the_first_stopped(sweep, tmp_path) -> None:
    replay = ReplayEvaluator(sweep)
    store = History(tmp_path / "h.csv")
    first = _tune(replay, store, BIG, "random", seed=1, generations=2)
    second = _tune(replay, store, BIG, "random", seed=2, generations=2)
    assert [g.generation for g in first.generations] == [1, 2]
    assert [g.generation for g in second.generations] == [3, 4]
    assert second.prior_trials == 16
    df = store.read()
    fresh = df[~df["note"].fillna("").str.endswith("re-timed")]  # a far-ahead winner may be measured again
    assert len(fresh) == 32
    assert fresh["config"].nunique() == 32  # the second run re-tried nothing
    assert second.best.rank_ms <= first.best.rank_ms


def test_first_generation_tries_the_default_and_other_problems_best(sweep, tmp_path) -> None:
    replay = ReplayEvaluator(sweep)
    store = History(tmp_path / "h.csv")
    other = Problem(1024, 4096, 4096)
    _tune(replay, store, other, "random", seed=1, generations=2)
    result = _tune(replay, store, BIG, "random", seed=1, generations=1)
    default = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma",
                           flatten=True)
    assert config_key(result.trials[0].config) == config_key(default)
    other_best = min((t for t in loop.observations(store.trials(), other, device=replay.device, timing="replay")
                      if t.timed), key=lambda t: t.rank_ms).config
    # The priors come first: the default, its tile on the other kernel, not flattened, at half height
    # (where that fills the last wave better), then the other problems' best unless already there.
    assert config_key(other_best) in {config_key(t.config) for t in result.trials[:5]}


def test_stop_rules(sweep, tmp_path) -> None:
    replay = ReplayEvaluator(sweep)
    capped = _tune(replay, History(tmp_path / "a.csv"), BIG, "random", seed=1, generations=10,
                   stop=loop.StopRules(max_trials=12))
    assert len(capped.trials) == 12 and capped.stopped == "max_trials"
    patient = _tune(replay, History(tmp_path / "b.csv"), BIG, "random", seed=1, generations=50,
                    stop=loop.StopRules(patience=2, min_gain=0.5))
    assert patient.stopped == "converged" and len(patient.generations) == 3


def test_failed_trials_are_recorded_with_their_reason(sweep, tmp_path) -> None:
    replay = ReplayEvaluator(sweep)
    store = History(tmp_path / "h.csv")
    _tune(replay, store, BIG, "grid", seed=0, generations=20)
    df = store.read()
    failed = df[df["status"] != "success"]
    assert len(failed) > 0
    assert failed["error"].str.contains("CompilationError").all()
    assert (df["generation"].notna()).all() and (df["strategy"] == "grid").all()


def test_a_lucky_winner_is_retimed_and_the_new_figure_counts(sweep, tmp_path) -> None:
    """The leading configs are measured again side by side; the lucky winner's re-timed row
    supersedes its first reading in the result, the history's observations and export's ranking."""
    import dataclasses

    from autokernel.history import best_per_problem

    class Flaky(ReplayEvaluator):
        """Reports the default config 3x faster the first time it is measured."""

        lied = False

        def evaluate(self, problem, configs, on_trial=None):
            def lie(trial):
                if trial.ok and trial.config.block_n == 256 and trial.config.block_m == 128 and not self.lied:
                    self.lied = True
                    trial = dataclasses.replace(trial, gpu_ms=trial.gpu_ms / 3, note="lucky")
                if on_trial:
                    on_trial(trial)
                return trial
            return [lie(t) for t in super().evaluate(problem, configs)]

    replay = Flaky(sweep)
    store = History(tmp_path / "h.csv")
    result = _tune(replay, store, BIG, "random", seed=1, generations=1)
    lucky = [t for t in result.trials if t.note == "lucky"]
    assert lucky, "the default config (128x256) is tried first"
    assert "re-timed" in result.confirmation and not result.events  # confirmed: a note, no warning
    assert result.best.rank_ms > lucky[0].gpu_ms * 2  # the honest figure, not the lucky one
    df = store.read()
    assert df["note"].fillna("").str.endswith("re-timed").sum() == loop.CONFIRM_LEADERS * loop.CONFIRM_REPEATS
    assert best_per_problem(store.trials())[0].gpu_ms == pytest.approx(result.best.rank_ms)


def test_confirmation_goes_on_until_a_re_timed_config_leads(sweep, tmp_path) -> None:
    """Every first reading lucky (2x fast): once the three leaders read honestly, the next
    lucky config leads and is confirmed in a further batch, beside the default config; the
    final best is a re-timed reading, within CONFIRM_ROUNDS batches."""
    import dataclasses

    from autokernel.history import is_retimed
    from autokernel.tuning.evaluator import mark_retimed

    class Lucky(ReplayEvaluator):
        batches = 0

        def evaluate(self, problem, configs, on_trial=None):
            out = []
            for t in super().evaluate(problem, configs):
                if t.ok:  # a copy: the replay hands out its recorded trials again on retime
                    t = dataclasses.replace(t, gpu_ms=t.gpu_ms / 2, ms=t.ms / 2)
                if on_trial:
                    on_trial(t)
                out.append(t)
            return out

        def retime(self, problem, configs, on_trial=None):  # honest: the recorded figures
            self.batches += 1
            trials = [mark_retimed(t) for t in ReplayEvaluator.evaluate(self, problem, configs)]
            for t in trials:
                on_trial(t)
            return trials

    replay = Lucky(sweep)
    store = History(tmp_path / "h.csv")
    result = _tune(replay, store, BIG, "random", seed=3, generations=1)
    assert 2 * loop.CONFIRM_REPEATS <= replay.batches <= loop.CONFIRM_ROUNDS * loop.CONFIRM_REPEATS
    assert is_retimed(result.best.note)
    df = store.read()
    retimed = df[df["note"].fillna("").str.endswith("re-timed")]
    default = loop.space_default(BIG, replay.space(BIG))
    assert default.to_json() in set(retimed["config"])  # the default, tried first, stood beside the leaders
    assert "with the default" in result.confirmation


def test_one_lucky_re_timed_reading_does_not_decide(sweep, tmp_path) -> None:
    """The leaders are re-timed in CONFIRM_REPEATS interleaved rounds, each round in another
    order, and each config counts by its median: a config whose one re-timed reading came
    out 3x fast (a clock peak), in the last round, keeps its honest rank, and so does the export."""
    import dataclasses

    from autokernel.history import best_per_problem
    from autokernel.tuning.evaluator import mark_retimed

    class OneLucky(ReplayEvaluator):
        orders: list = []

        def retime(self, problem, configs, on_trial=None):
            self.orders.append([c.short() for c in configs])
            trials = [mark_retimed(t) for t in ReplayEvaluator.evaluate(self, problem, configs)]
            if len(self.orders) == loop.CONFIRM_REPEATS:  # the last round: "latest wins" would take it
                trials[0] = dataclasses.replace(trials[0], gpu_ms=trials[0].gpu_ms / 3)
            for t in trials:
                on_trial(t)
            return trials

    replay = OneLucky(sweep)
    honest = _tune(ReplayEvaluator(sweep), History(tmp_path / "honest.csv"), BIG, "random", seed=2, generations=1)
    store = History(tmp_path / "h.csv")
    result = _tune(replay, store, BIG, "random", seed=2, generations=1)
    first = replay.orders[0]
    assert len(replay.orders) >= loop.CONFIRM_REPEATS
    assert [sorted(o) for o in replay.orders[:loop.CONFIRM_REPEATS]] == [sorted(first)] * loop.CONFIRM_REPEATS
    assert replay.orders[1] == first[1:] + first[:1]  # interleaved: each round starts one config later
    assert result.best.config == honest.best.config
    assert result.best.rank_ms == pytest.approx(honest.best.rank_ms)
    assert best_per_problem(store.trials())[0].gpu_ms == pytest.approx(honest.best.rank_ms)


def test_drop_superseded_keeps_the_median_re_timed_row() -> None:
    """Of a config's re-timed rows of the latest run that re-timed it the median one stays
    (failures rank last; the upper middle of an even count); rows of other configs and
    problems are untouched; an older run's re-times are not pooled in."""
    from autokernel.history import as_read, best_per_problem, drop_superseded

    cfg = KernelConfig(block_m=64, block_n=64, block_k=32).to_json()
    other = KernelConfig(block_m=32, block_n=64, block_k=32).to_json()
    base = dict(M=64, N=64, K=64, dtype="float16", activation="none", bias=False, layout="nn",
                device="GPU", timing="gpu", kernel="triton")

    def row(config, gpu_ms, note=None, status="success", m=64, run="new"):
        return dict(base, M=m, config=config, gpu_ms=gpu_ms, ms=gpu_ms, status=status, note=note, run_id=run)

    def times(trials, config):
        return [t.gpu_ms for t in trials if t.config_text == config]

    rows = [
        row(cfg, 0.5),  # a first reading: superseded
        row(cfg, 1.0, "re-timed"), row(cfg, 3.0, "re-timed"), row(cfg, 2.0, "re-timed"),
        row(other, 1.0, "re-timed"), row(other, 1.5, "re-timed"),  # even: the upper middle
        row(cfg, 9.0, m=128),  # another problem
    ]
    kept = drop_superseded(as_read(rows))
    assert sorted(times(kept, cfg)) == [2.0, 9.0]
    assert times(kept, other) == [1.5]
    failing = as_read(rows + [row(other, None, "re-timed", status="runtime_error")])
    assert times(drop_superseded(failing), other) == [1.5]  # 1.0, 1.5, failed
    # An earlier run's lucky re-time is not pooled with this run's: B (median 1.06) beats A (1.1).
    a, b = cfg, other
    runs = as_read([row(a, 0.5, "re-timed", run="old")] + [row(a, ms, "re-timed") for ms in (1.0, 1.1, 1.2)]
                   + [row(b, ms, "re-timed") for ms in (1.05, 1.06, 1.07)])
    (best,) = best_per_problem(runs)
    assert best.config_text == b and best.gpu_ms == pytest.approx(1.06)


def test_the_reported_winner_is_the_retimed_figure(sweep, tmp_path) -> None:
    """The CLI's winner line and JSON read the row behind result.best: after a re-time, the
    re-timed figure, never the lucky first one (review finding)."""
    from autokernel.cli.tune import _best_trial

    class Lucky(ReplayEvaluator):
        lied = False

        def evaluate(self, problem, configs, on_trial=None):
            out = []
            for t in super().evaluate(problem, configs):
                if t.ok and not self.lied:
                    self.lied = True
                    t.gpu_ms, t.ms = t.gpu_ms / 3, t.ms / 3
                if on_trial:
                    on_trial(t)
                out.append(t)
            return out

    result = _tune(Lucky(sweep), History(tmp_path / "h.csv"), BIG, "random", seed=1, generations=1)
    best = _best_trial(result)
    assert best["rank_ms"] == pytest.approx(result.best.rank_ms) and best["gpu_ms"] == pytest.approx(result.best.rank_ms)
    assert best["ms"] > best["gpu_ms"] / 2  # the honest event-timer figure came with it


def test_a_failed_retime_supersedes_in_export_too(tmp_path) -> None:
    from autokernel.export import export_best as export
    from autokernel.history import best_per_problem, make_row

    p = Problem(64, 64, 64)
    a, b = KernelConfig(block_m=64), KernelConfig(block_m=32)
    rows = [make_row("tune", p, a, status="success", run_id="r", ms=0.01, gpu_ms=0.01, timing="gpu", device="GPU X"),
            make_row("tune", p, b, status="success", run_id="r", ms=0.05, gpu_ms=0.05, timing="gpu", device="GPU X"),
            make_row("tune", p, a, status="timeout", run_id="r", timing="gpu", device="GPU X", note="re-timed")]
    store = History(tmp_path / "h.csv")
    store.append_many(rows)
    trials = store.trials()
    assert [t.gpu_ms for t in best_per_problem(trials)] == [0.05]
    assert [e.config for e in export(trials, device="GPU X").entries] == [b]
    assert loop.best_of(loop.observations(trials, p, device="GPU X", timing="gpu")).config == b


def test_patience_stops_a_problem_where_everything_fails(tmp_path) -> None:
    from autokernel.history import make_row

    sweep = tmp_path / "fail.csv"
    History(sweep).append_many([make_row("tune", BIG, c, status="compile_error", run_id="s", timing="gpu",
                                         device="GPU X", error="CompilationError: x") for c in gpu_space()])
    replay = ReplayEvaluator(sweep)
    result = _tune(replay, History(tmp_path / "h.csv"), BIG, "random", seed=1, generations=30,
                   stop=loop.StopRules(patience=2))
    assert result.stopped == "converged" and len(result.generations) == 2 and result.best is None


def test_prior_configs_skip_rows_without_a_config(sweep, tmp_path) -> None:
    from autokernel.history import make_row

    store = History(tmp_path / "h.csv")
    store.append(make_row("bench", Problem(2048, 2048, 2048), None, status="success", run_id="r", name="triton",
                          device="Synthetic GPU", ms=0.1, timing="replay"))
    replay = ReplayEvaluator(sweep)
    seeds = loop.prior_configs(BIG, replay.space(BIG), store.trials(), device="Synthetic GPU", timing="replay")
    assert seeds and all(isinstance(c, KernelConfig) for c in seeds)


_OLD_A = '{"block_m":128,"block_n":256,"block_k":64,"group_m":8,"num_warps":8,"num_stages":3,"variant":"tma"}'


def test_a_retime_supersedes_rows_written_before_a_config_field_existed(tmp_path):
    """The tuner matches configs by their fields (config_key); export must too: a row written
    before split_k ... stream_k existed spells its config with fewer keys."""
    from autokernel.export import export_best as export
    from autokernel.history import best_per_problem, make_row

    p = Problem(4096, 4096, 4096)
    a = KernelConfig.from_json(_OLD_A)
    b = a.model_copy(update={"block_k": 32})
    common = dict(run_id="r", timing="gpu", device="GPU X")
    old = make_row("tune", p, None, status="success", ms=0.10, gpu_ms=0.10, **common)
    old["config"] = _OLD_A  # as written by yesterday's code
    rows = [old,
            make_row("tune", p, b, status="success", ms=0.15, gpu_ms=0.15, **common),
            # today's run confirms the leaders: a's honest figure is 0.20
            make_row("loop", p, a, status="success", ms=0.20, gpu_ms=0.20, note="re-timed", **common)]
    store = History(tmp_path / "h.csv")
    store.append_many(rows)
    trials = store.trials()
    tuner = loop.best_of(loop.observations(trials, p, device="GPU X", timing="gpu"))
    assert tuner.config == b  # the tuner: a was superseded by its re-time
    assert [t.gpu_ms for t in best_per_problem(trials)] == [0.15]
    assert [e.config for e in export(trials, device="GPU X").entries] == [b]


def test_the_default_stands_beside_the_leaders_on_a_skinny_shape(tmp_path) -> None:
    """The default as prior_configs tried it (space.canonical: group_m 8 -> 1 for one tile-row)."""
    from tests.helpers import synthetic_sweep

    skinny = Problem(64, 4096, 4096)
    synthetic_sweep(tmp_path / "sweep.csv", shapes=((64, 4096, 4096),))
    replay = ReplayEvaluator(tmp_path / "sweep.csv")
    store = History(tmp_path / "h.csv")
    result = _tune(replay, store, skinny, "random", seed=1, generations=2)
    tried_default = result.trials[0].config
    assert tried_default.group_m == 1
    df = store.read()
    retimed = {c for c, n in zip(df["config"], df["note"].fillna("")) if n.endswith("re-timed")}
    assert tried_default.to_json() in retimed
    assert "with the default" in result.confirmation


def test_the_winner_is_a_retimed_reading_when_re_times_run_slower(sweep, tmp_path) -> None:
    """Re-timed readings 3 % slower than first readings (a GPU warmer late in a run): the
    confirmed configs lose to unconfirmed first readings, which are re-timed in turn beside
    the best confirmed one; the winner is a re-timed reading, or the event says it is not."""
    import dataclasses

    from autokernel.history import is_retimed
    from autokernel.tuning.evaluator import mark_retimed

    class Drift(ReplayEvaluator):
        def retime(self, problem, configs, on_trial=None):
            out = []
            for t in ReplayEvaluator.evaluate(self, problem, configs):
                if t.ok:
                    t = dataclasses.replace(t, ms=t.ms * 1.03, gpu_ms=t.gpu_ms * 1.03)
                t = mark_retimed(t)
                if on_trial:
                    on_trial(t)
                out.append(t)
            return out

    for seed in (1, 3):
        store = History(tmp_path / f"h{seed}.csv")
        result = _tune(Drift(sweep), store, BIG, "optuna", seed=seed, generations=8)
        event = result.confirmation
        assert is_retimed(result.best.note) != ("not confirmed" in event), event
        assert (event in result.events) == ("not confirmed" in event)  # a leader left unconfirmed warns


def test_a_replayed_space_keeps_the_sweeps_stream_k_configs(tmp_path) -> None:
    """A sweep records no SM count; the stream-K configs it ran stay in its replayed space."""
    from autokernel.history import make_row
    from autokernel.tuning.space import GPU_CHOICES
    from tests.helpers import H100_SMEM

    p = Problem(1024, 4096, 4096)
    space = SearchSpace(p, dict(GPU_CHOICES), H100_SMEM, True, gpu=True, programs=132)  # an H100's space
    configs = [c for c in space if c.stream_k][:20] + [c for c in space if not c.stream_k][:20]
    assert len(configs) == 40
    History(tmp_path / "sweep.csv").append_many([
        make_row("tune", p, c, status="success", run_id="s", timing="gpu", device="GPU X",
                 ms=0.1 if c.stream_k else 0.2, gpu_ms=0.1 if c.stream_k else 0.2) for c in configs])
    replay = ReplayEvaluator(tmp_path / "sweep.csv")
    assert replay.best(p).config.stream_k and replay.space(p).size() == 40


def test_a_rationale_does_not_pass_for_the_retime_mark(sweep, tmp_path) -> None:
    """A strategy's rationale ending in "re-timed" must not make a first reading final."""
    import dataclasses

    from autokernel.history import is_retimed

    class Chatty(StrategyBase):
        name = "llm"

        def __init__(self):
            self.inner, self.notes = make_strategy("random", seed=0), {}

        def propose(self, space, history, n):
            out = self.inner.propose(space, history, n)
            self.notes = {config_key(c): "bigger tiles, as for the leader that was re-timed" for c in out}
            return out

    class Plain(ReplayEvaluator):  # like the workers' trials: no note of their own
        def evaluate(self, problem, configs, on_trial=None):
            out = [dataclasses.replace(t, note=None) for t in super().evaluate(problem, configs)]
            for t in out:
                if on_trial:
                    on_trial(t)
            return out

    replay = Plain(sweep)
    store = History(tmp_path / "h.csv")
    loop.tune(BIG, strategy=Chatty(), evaluator=replay, store=store, space=replay.space(BIG), generations=1,
              per_generation=4, run_id="t", device=replay.device, timing=replay.timing)
    notes = store.read()["note"].fillna("")
    first = notes[notes.str.startswith("bigger") & ~notes.str.endswith("; re-timed")]
    assert len(first) == 4 and not any(is_retimed(n) for n in first)
    assert notes.map(is_retimed).sum() >= 3  # the confirmation's own marks still count


def test_the_time_budget_bounds_the_run(sweep, tmp_path, monkeypatch) -> None:
    """A generation the last one's duration says would end past the budget is not started,
    and with the budget spent the leaders are not timed again: a 100 s budget with 40 s
    generations stops after two (80 s), where checking only after each generation ran a
    third to 120 s."""
    import types

    now = [0.0]
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    class Slow(ReplayEvaluator):
        """40 s per generation's evaluation; the side-by-side re-time takes no time."""

        retiming = False

        def evaluate(self, *args, **kwargs):
            if not self.retiming:
                now[0] += 40.0
            return super().evaluate(*args, **kwargs)

        def retime(self, *args, **kwargs):
            self.retiming = True
            try:
                return super().retime(*args, **kwargs)
            finally:
                self.retiming = False

    slow = Slow(sweep)
    result = _tune(slow, History(tmp_path / "a.csv"), BIG, "random", seed=1, generations=10,
                   stop=loop.StopRules(time_budget_s=100))
    assert result.stopped == "time budget" and len(result.generations) == 2 and now[0] == 80.0
    spent = _tune(slow, History(tmp_path / "b.csv"), BIG, "random", seed=1, generations=10,
                  stop=loop.StopRules(time_budget_s=30))
    assert len(spent.generations) == 1 and spent.confirmation is None
    assert any("time budget is spent" in e for e in spent.events)
