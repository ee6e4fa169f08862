"""Edge cases of side-by-side re-timing, re-time medians and the tuner's prior: each failed before its fix."""

from __future__ import annotations

import dataclasses

import pytest

from autokernel import evaluate as ev
from autokernel.config import KernelConfig
from autokernel.evaluate import Trial
from autokernel.history import History, as_read, best_per_problem, drop_superseded
from autokernel.records import Problem
from autokernel.tuning import loop
from autokernel.tuning.replay import ReplayEvaluator
from autokernel.tuning.strategies import make_strategy
from autokernel.tuning.worker import BATCH_LOST

from tests.helpers import BIG_SHAPE

SMALL = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)
CFG = KernelConfig(block_m=64, block_n=64, block_k=32).to_json()
OTHER = KernelConfig(block_m=32, block_n=64, block_k=32).to_json()
BASE = dict(M=64, N=64, K=64, dtype="float16", activation="none", bias=False, layout="nn",
            device="GPU", timing="gpu", kernel="triton")


def row(config, ms, note=None, run="new", status="success"):
    return dict(BASE, config=config, gpu_ms=ms, ms=ms, status=status, note=note, run_id=run)


# --- 1. evaluate_side_by_side: the per-config fallback crashes -----------------------------

def test_side_by_side_fallback_survives_a_config_that_fails_alone_too(monkeypatch):
    """evaluate.py:367-373: the outer ``except Exception as exc`` is read in the loop after
    the inner ``except Exception as exc`` has unbound it: the second config raises
    UnboundLocalError, the worker turns the whole re-time into one failure (BATCH_LOST for
    every config). The case it exists for: a config whose capture broke the race usually
    fails alone too."""
    problem = Problem(19, 23, 17, "float32")
    second = SMALL.model_copy(update={"block_n": 32})
    fns = {}

    def race_call(problem, kernel="triton", config=None, **_):
        fns[config] = fn = (lambda: None)
        return fn

    def gpu_time(fn, **_):
        if fn is fns[SMALL]:
            raise RuntimeError("capture failed")
        return 1.0

    def broken(fns):
        raise RuntimeError("capture failed")

    monkeypatch.setattr(ev, "timing_label", lambda: "gpu")
    monkeypatch.setattr(ev, "race_call", race_call)
    monkeypatch.setattr(ev, "race", broken)
    monkeypatch.setattr(ev, "gpu_time", gpu_time)
    trials = ev.evaluate_side_by_side(problem, [SMALL, second])
    assert trials[0].status == "runtime_error"
    assert trials[1].ok and trials[1].gpu_ms == 1.0


# --- 2. drop_superseded: missing run ids, and the pooling test that cannot fail -------------

def test_drop_superseded_with_missing_run_ids_still_supersedes():
    """history.py:374: with pandas 3 ``astype(str)`` keeps NaN; transform("last") of an
    all-missing group is NaN and ``run == NaN`` is False everywhere, so nothing is
    superseded: the lucky first reading (0.5) is the best again."""
    trials = as_read([row(CFG, 0.5, run=None)] + [row(CFG, ms, "re-timed", run=None) for ms in (1.0, 2.0, 3.0)])
    assert [t.gpu_ms for t in drop_superseded(trials)] == [2.0]
    assert best_per_problem(trials)[0].gpu_ms == 2.0


def test_drop_superseded_does_not_pool_an_older_runs_re_times():
    """The shipped test of 'not pooled' passes with the latest-run filter removed (pooled
    upper middle 1.1 also loses to 1.06). Here pooling gives a 1.0 (0.5, 0.5, 1.0, 1.1,
    1.2), the latest run alone 1.1: b (1.05) must win."""
    runs = as_read([row(CFG, 0.5, "re-timed", run="old")] * 2
                   + [row(CFG, ms, "re-timed") for ms in (1.0, 1.1, 1.2)]
                   + [row(OTHER, 1.05, "re-timed")])
    (best,) = best_per_problem(runs)
    assert best.config_text == OTHER


def test_drop_superseded_latest_run_is_write_order_not_name_order():
    trials = as_read([row(CFG, 0.5, "re-timed", run="z-older"), row(CFG, 2.0, "re-timed", run="a-newer")])
    assert [t.gpu_ms for t in drop_superseded(trials)] == [2.0]


# --- 3. a lost confirmation batch is reported as a confirmed winner -------------------------

class LostRetime(ReplayEvaluator):
    """Every re-time task is lost as a whole, as WorkerEvaluator.retime reports it."""

    def retime(self, problem, configs, on_trial=None):
        out = []
        for config in configs:
            trial = Trial(problem, config, "runtime_error", timing=self.timing,
                          error="timing worker died (exit code 1)", note=BATCH_LOST)
            if on_trial is not None:
                on_trial(trial)
            out.append(trial)
        return out


def test_a_lost_confirmation_is_not_reported_as_confirmed(sweep, tmp_path):
    """loop.py:241: confirmed.update(...) counts configs whose every re-time was lost; the
    line then says 're-timed ... winner X' with confirmed=True: a note, no warning, though
    nothing was re-timed (before BATCH_LOST the lost rows failed the leaders instead)."""
    replay = LostRetime(sweep)
    store = History(tmp_path / "h.csv")
    problem = Problem(*BIG_SHAPE)
    space = replay.space(problem)
    result = loop.tune(problem, strategy=make_strategy("random", seed=1), evaluator=replay, store=store,
                       space=space, generations=1, per_generation=8, run_id="t", device=replay.device,
                       timing=replay.timing)
    assert result.confirmation is not None
    assert "winner" not in result.confirmation, result.confirmation
    assert result.confirmation in result.events  # a leader left unconfirmed warns


# --- 4. (pre-existing, now visible) the tuner's "default" on fp32 is a config it cannot try ---

def test_space_default_is_in_the_space_for_fp32_on_a_tma_gpu():
    """loop.space_default makes "auto" explicit as "tma" whenever space.tma, but the space
    (and api._plan_kernel's "auto") take TMA for fp16/bf16 only: for fp32 the default the
    confirmation looks for (loop.py:221) is a config prior_configs filtered out, so the
    default never stands beside the leaders; prior_configs now seeds the grouped twin instead."""
    from tests.helpers import gpu_space

    problem = Problem(4096, 4096, 4096, "float32")
    space = gpu_space(problem)
    assert space.contains(loop.space_default(problem, space)), space.why_invalid(loop.space_default(problem, space))


@pytest.mark.parametrize("m, n, k", [(100, 2304, 2048), (219, 1792, 2176), (48, 4096, 4096), (40, 5120, 14336)])
def test_the_thin_tma_tiles_and_a_skinny_default_are_in_the_space(m, n, k):
    """The thin TMA tiles (6 and 8 stages, 32 columns) that matmul's selector considers for
    few rows, and the default skinny problems take, are configs a tune can try: prior_configs
    seeds the default."""
    from autokernel.candidates import THIN_TMA
    from autokernel.select import why_not
    from tests.helpers import gpu_space

    problem = Problem(m, n, k, "float16", layout="nt")
    space = dataclasses.replace(gpu_space(problem), programs=132)  # an H100's SMs, for stream-K's rule
    considered = [c for c in THIN_TMA if why_not(c, m, n, k, True, 132) is None]
    assert considered
    for config in considered:
        assert space.contains(space.canonical(config)), (config.short(), space.why_invalid(space.canonical(config)))
    default = loop.space_default(problem, space)
    assert space.canonical(default) in loop.prior_configs(problem, space, None, device="NVIDIA H100 80GB HBM3",
                                                          timing="gpu")
    if m > 64:
        assert default.variant == "tma" and default.num_stages == 6


@pytest.mark.parametrize("m, n, k", [(44, 896, 512), (12, 512, 19328), (64, 512, 2816)])
def test_the_gpu_space_holds_the_decode_picks(m, n, k):
    """matmul's untuned pick for few rows (16-row pointer tiles up to M = 64, split-K 16) is
    a config of the tuning space, so its strategies can propose it and its neighbours; the
    TMA kernel's tiles stay at the rows rounded up (its thinner ones are the THIN_TMA tiles)."""
    from tests.helpers import gpu_space

    problem = Problem(m, n, k, "float16", layout="nt")
    space = dataclasses.replace(gpu_space(problem), programs=132)
    untuned = space.canonical(loop._explicit(loop.untuned_pick(problem, space, "NVIDIA H100 80GB HBM3"), problem, space))
    assert untuned.block_m == 16 and space.contains(untuned), space.why_invalid(untuned)
    if k >= 16 * untuned.block_k:  # K slices long enough for 16 of them
        assert space.contains(space.canonical(untuned.model_copy(update={"split_k": 16})))
    thin_tma = KernelConfig(block_m=16, block_n=64, block_k=128, group_m=1, num_warps=4, num_stages=4, variant="tma")
    if m > 16:
        assert "thinner" in space.why_invalid(thin_tma)
    assert "thinner" in gpu_space(Problem(128, n, k, "float16", layout="nt")).why_invalid(
        untuned.model_copy(update={"split_k": 1, "group_m": 8}))


@pytest.mark.parametrize("m, n, k, dtype", [(559, 1536, 4992, "bfloat16"), (28, 6144, 1152, "bfloat16")])
def test_a_gpu_tune_tries_the_untuned_pick_first_even_outside_the_space(m, n, k, dtype, tmp_path):
    """What matmul runs untuned (here a shipped tuned entry's config the space's rules leave
    out: split-K at 559 rows, a 64-row tile for 28 rows) is seeded and evaluated in the first
    generation: a tune that never tried it could export a slower winner. A replayed sweep's
    space (its configs only) is left as it is."""
    from autokernel.tuning.protocols import EvaluatorBase
    from tests.helpers import gpu_space

    class Recording(EvaluatorBase):
        def __init__(self):
            self.seen = []

        def evaluate(self, problem, configs, on_trial=None):
            out = []
            for c in configs:
                self.seen.append(c)
                t = Trial(problem, c, "success", ms=1.0 + 0.01 * len(self.seen), gpu_ms=1.0, timing="gpu")
                if on_trial:
                    on_trial(t)
                out.append(t)
            return out

        def retime(self, problem, configs, on_trial=None):
            return self.evaluate(problem, configs, on_trial)

    device = "NVIDIA H100 80GB HBM3"
    problem = Problem(m, n, k, dtype, layout="nt")
    space = dataclasses.replace(gpu_space(problem), programs=132)
    untuned = space.canonical(loop.untuned_pick(problem, space, device))
    assert not space.contains(untuned)
    seeds = loop.prior_configs(problem, space, None, device=device, timing="gpu")
    assert untuned in seeds
    evaluator = Recording()
    loop.tune(problem, strategy=make_strategy("random", seed=1), evaluator=evaluator, store=History(tmp_path / "h.csv"),
              space=space, generations=1, per_generation=len(seeds) + 2, run_id="t", device=device, timing="gpu",
              seeds=seeds)
    assert untuned in evaluator.seen[:len(seeds)]
    replayed = dataclasses.replace(space, allowed=frozenset())
    assert untuned not in loop.prior_configs(problem, replayed, None, device=device, timing="gpu")


def test_prior_configs_try_the_default_tile_on_both_kernels_and_keep_limit():
    """Coverage gap: with the twin removed from prior_configs the whole suite still passed."""
    from autokernel.history import make_row
    from tests.helpers import gpu_space

    problem = Problem(1024, 4096, 4096, "float16")
    space = gpu_space(problem)
    rows = []
    for i, (m, n) in enumerate([(2048, 4096), (4096, 4096), (512, 4096), (8192, 4096)]):
        cfg = KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=3 + i % 3,
                           variant="tma")
        rows.append(make_row("tune", Problem(m, n, 4096, "float16"), cfg, status="success", run_id="r",
                             device="H100", timing="gpu", ms=1.0 + i, name="triton"))
    seeds = loop.prior_configs(problem, space, as_read(rows), device="H100", timing="gpu", limit=2)
    default = loop.space_default(problem, space)
    assert seeds[:3] == [default, default.on_variant("grouped"), default.model_copy(update={"flatten": False})]
    assert len(seeds) == 5  # still `limit` configs from the history


@pytest.mark.parametrize("m, n, k, layout, aligned", [
    (4096, 4096, 4096, "nn", True),
    (16, 50257, 4096, "nn", False),   # a vocabulary-sized N: C's and B's rows are 100514 bytes
    (4096, 4096, 4095, "nt", False),  # the weight's stored rows (K) are odd
    (4095, 4096, 4096, "nn", True),   # M is no row length in nn
    (4095, 4096, 4096, "tn", False),  # ... but A's stored rows are M in tn
])
def test_tma_configs_only_where_descriptors_can_be_made(m, n, k, layout, aligned):
    """Where a row of A, B or C is not a multiple of 16 bytes the "tma" variant runs the
    pointer kernel: the space refuses it (a duplicate trial), and the default and the
    prior's twin are the pointer kernel's."""
    from autokernel.records import Problem
    from autokernel.tuning import loop
    from tests.helpers import gpu_space

    problem = Problem(m, n, k, "float16", layout=layout)
    space = gpu_space(problem)
    default = loop.space_default(problem, space)
    assert default.variant == ("tma" if aligned else "grouped")
    tma = default.model_copy(update={"variant": "tma"})
    assert (space.why_invalid(tma) is None or "16 bytes" not in space.why_invalid(tma)) == aligned
    seeds = loop.prior_configs(problem, space, None, device="x", timing="gpu")
    assert [(c.variant, c.flatten) for c in seeds] == (
        [("tma", True), ("grouped", False), ("tma", False)] if aligned else [("grouped", False)])


def test_prior_configs_count_only_history_configs_the_space_takes():
    """A nearest problem's config the space refuses (here: too much shared memory) or one
    already proposed does not use up the limit: the next nearest ones fill it."""
    from autokernel.history import make_row
    from tests.helpers import gpu_space

    problem = Problem(1024, 4096, 4096, "float16")
    space = gpu_space(problem)
    default = loop.space_default(problem, space)
    too_big = KernelConfig(block_m=256, block_n=256, block_k=128, group_m=8, num_warps=8, num_stages=5,
                           variant="grouped")
    assert not space.contains(space.canonical(too_big))
    good = [KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=s, variant="tma")
            for s in (3, 4)]
    configs = [too_big, default, *good]  # nearest first
    rows = [make_row("tune", Problem(1024 * (i + 1), 4096, 4096, "float16"), cfg, status="success", run_id="r",
                     device="H100", timing="gpu", ms=1.0, name="triton") for i, cfg in enumerate(configs)]
    seeds = loop.prior_configs(problem, space, as_read(rows), device="H100", timing="gpu", limit=2)
    assert seeds[3:] == [space.canonical(c) for c in good]
    assert len(set(map(str, seeds))) == len(seeds)


def test_wave_fill_counts_the_persistent_grids_empty_slots():
    # 4096x11008 in 128x256 tiles: 32 x 43 = 1376 tiles, 11 waves of 132 SMs.
    assert loop.wave_fill(Problem(4096, 11008, 4096, "bfloat16"), 128, 256, 132) == pytest.approx(1376 / 1452)
    assert loop.wave_fill(Problem(4096, 11008, 4096, "bfloat16"), 64, 256, 132) == pytest.approx(2752 / 2772)
    assert loop.wave_fill(Problem(3072, 2816, 2048, "float16"), 128, 256, 132) == 1.0  # 264 tiles: 2 full waves
    assert loop.wave_fill(Problem(4096, 0, 4096, "float16"), 128, 256, 132) == 1.0  # no tiles


@pytest.mark.parametrize("m, n, k, wanted", [
    (4096, 11008, 4096, True),    # fill 0.948 -> 0.993
    (2048, 11008, 4096, True),    # 0.869 -> 0.948
    (4096, 4096, 4096, False),    # 512 tiles: fill 0.970
    (8192, 8192, 1024, False),    # 0.970
    (4096, 2816, 2048, False),    # 352 tiles, 0.889; 704 half tiles fill no better
])
def test_prior_tries_the_half_height_tile_where_waves_fill_poorly(m, n, k, wanted):
    from dataclasses import replace

    from tests.helpers import gpu_space

    problem = Problem(m, n, k, "bfloat16", layout="nt")
    space = replace(gpu_space(problem), programs=132)
    seeds = loop.prior_configs(problem, space, None, device="x", timing="gpu")
    half = [c for c in seeds if c.block_m == 64]
    if not wanted:
        assert half == []
        return
    assert half == [KernelConfig(block_m=64, block_n=256, block_k=64, group_m=16, num_warps=4, num_stages=4,
                                 variant="tma", flatten=True, epilogue_subtile=2)]
    assert seeds.index(half[0]) == 3  # after the default tile's three, before any history config
    assert space.contains(half[0])
    # The SM count unknown (a replayed sweep): no wave rule.
    assert all(c.block_m != 64 for c in loop.prior_configs(problem, gpu_space(problem), None, device="x",
                                                           timing="gpu"))


def test_the_half_height_tile_stands_beside_the_leaders(tmp_path):
    """A first reading is taken alone, at the clock's phase of the moment: the half-height
    tile the prior tried for a shape whose waves fill poorly is re-timed beside the leaders
    even when its first reading ranks it past them, and wins where the race says so."""
    from dataclasses import replace

    from autokernel.evaluate import Trial
    from autokernel.history import History, is_retimed, make_row, trial_row
    from autokernel.tuning.evaluator import mark_retimed
    from tests.helpers import gpu_space

    problem = Problem(4096, 11008, 4096, "bfloat16", layout="nt")
    space = replace(gpu_space(problem), programs=132)
    seeds = loop.prior_configs(problem, space, None, device="H100", timing="gpu")
    half = next(c for c in seeds if c.block_m == 64)
    others = [seeds[0].model_copy(update={"group_m": g, "flatten": f}) for g in (8, 16) for f in (False, True)]
    others += [seeds[0].model_copy(update={"num_stages": 4, "epilogue_subtile": 2})]
    first = {**{space.canonical(c).to_json(): 0.55 + 0.002 * i for i, c in enumerate(others)},
             half.to_json(): 0.58}  # alone, it read last
    raced = {**{k: v + 0.02 for k, v in first.items()}, half.to_json(): 0.565}  # side by side, it leads
    store = History(tmp_path / "h.csv")
    for text, ms in first.items():
        store.append(make_row("tune", problem, KernelConfig.from_json(text), status="success", run_id="r",
                              device="H100", timing="gpu", ms=ms, gpu_ms=ms, name="triton"))

    class Race:
        def retime(self, problem, configs, on_trial=None):
            for config in configs:
                ms = raced[config.to_json()]
                on_trial(mark_retimed(Trial(problem, config, "success", ms=ms, gpu_ms=ms, timing="gpu")))

    def record(trial, new=True):
        store.append(trial_row("tune", trial, run_id="r2", device="H100", name="triton"))

    line, confirmed = loop._confirm_leaders(problem, space, store, Race(), record, device="H100", timing="gpu")
    df = store.read()
    retimed = {c for c, n in zip(df["config"], df["note"]) if is_retimed(n)}
    assert half.to_json() in retimed and confirmed
    assert f"winner {half.short()}" in line
    # Without the wave rule (SM count unknown) it stays out: only the leaders and the default.
    store2 = History(tmp_path / "h2.csv")
    for text, ms in first.items():
        store2.append(make_row("tune", problem, KernelConfig.from_json(text), status="success", run_id="r",
                               device="H100", timing="gpu", ms=ms, gpu_ms=ms, name="triton"))
    store = store2
    loop._confirm_leaders(problem, gpu_space(problem), store2, Race(), record, device="H100", timing="gpu")
    df = store2.read()
    assert half.to_json() not in {c for c, n in zip(df["config"], df["note"]) if is_retimed(n)}


def test_prior_tries_what_matmul_runs_untuned():
    """The selector's pick for the named GPU joins the priors after the default's tiles: a
    tune never exports a winner it did not race against what ran before it. Where it is
    one of them (no model for the GPU: the default), nothing is added."""
    from dataclasses import replace

    import torch

    from autokernel import best
    from tests.helpers import gpu_space

    h100 = "NVIDIA H100 80GB HBM3"
    problem = Problem(4, 8960, 640, "float16", layout="nt")
    space = replace(gpu_space(problem), programs=132)
    pick = best.pick(4, 8960, 640, torch.float16, "none", False, "nt", device=h100, limit=space.smem_limit,
                     tma=True).config
    seeds = loop.prior_configs(problem, space, None, device=h100, timing="gpu")
    without = loop.prior_configs(problem, space, None, device="x", timing="gpu")
    assert space.canonical(pick) not in without
    assert seeds == [*without, space.canonical(pick)]
    assert space.canonical(loop.untuned_pick(problem, space, "x")) in without
