"""The selector: its model, its choice, and what matmul launches by it on a simulated H100."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from autokernel import best, runtime, select
from autokernel.candidates import CANDIDATES, SWAPPED, thin_tma
from autokernel.kernels.matmul_tma import tail_cut
from autokernel.cli import app
from autokernel.config import KernelConfig, default_config
from tests.helpers import simulate_gpu

H100 = "NVIDIA H100 80GB HBM3"
LARGE = next(c for c in CANDIDATES if (c.block_m, c.block_n) == (128, 256) and not c.stream_k)
"""A large-tile candidate with constants of its own."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def h100(monkeypatch):
    yield simulate_gpu(monkeypatch, H100)
    best.clear_cache()


def _synthetic_rows(constants: dict[KernelConfig, select.Constants], shapes, noise=0.0, seed=0, layouts=("nt",)):
    rng = random.Random(seed)
    rows = []
    for i, (m, n, k) in enumerate(shapes):
        layout = layouts[i % len(layouts)]
        for config, c in constants.items():
            f = select.features(config, m, n, k, torch.float16, True, 132)
            shared = select.sharing(config, m, n, torch.float16, True, 132)
            us = c.predict_us(*f, b_rows=select.b_row_major(layout), shared=shared) * (1 + noise * rng.uniform(-1, 1))
            rows.append({"m": m, "n": n, "k": k, "dtype": "float16", "layout": layout,
                         "config": json.loads(config.to_json()), "gpu_ms": us / 1e3, "status": "success"})
    return rows


def test_fit_learns_what_b_row_major_does_to_each_config():
    """A config that runs 15 % faster with B row-major ("nn") than as a transposed view, and
    one alike either way: the fit finds each one's ratio, the predictions and the pick apply
    it only where B is row-major, and a file without it predicts both layouts alike."""
    truth = {CANDIDATES[0]: select.Constants(a=1.0, b=0.002, e=0.85, d=3.0, g=0.6, r=math.log(0.85)),
             LARGE: select.Constants(a=5.0, b=0.01, e=0.8, d=1.0, g=0.9, r=0.0)}
    rng = random.Random(2)
    shapes = [(rng.choice([1, 16, 256, 2048, 8192]), rng.choice([1024, 4096, 14336]), rng.choice([1024, 4096, 11008]))
              for _ in range(60)]
    fitted = select.fit(_synthetic_rows(truth, shapes, noise=0.01, layouts=("nt", "nn")), steps=800)
    for config, c in truth.items():
        assert fitted[select.config_id(config)].r == pytest.approx(c.r, abs=0.03), config.short()
    got = fitted[select.config_id(CANDIDATES[0])]
    f = select.features(CANDIDATES[0], 16, 4096, 4096, torch.float16, True, 132)
    assert got.predict_us(*f, b_rows=True) == pytest.approx(got.predict_us(*f) * math.exp(got.r))
    assert select.b_row_major("nn") and select.b_row_major("tn") and not select.b_row_major("nt")
    model = select.Model("GPU X", 132, fitted)
    default = CANDIDATES[0]
    by_layout = [{p.config: us for us, p, _ in select.choose(model, 16, 4096, 4096, torch.float16, tma=True,
                                                             default=default, b_rows=rows).scores}
                 for rows in (False, True)]
    assert by_layout[1][default] == pytest.approx(by_layout[0][default] * math.exp(got.r))
    old = select.Constants(*got.values()[:5])  # a file fitted before the layout term
    assert old.r is None and old.predict_us(*f, b_rows=True) == old.predict_us(*f)


def test_fit_recovers_a_known_model():
    # The L2 term's fraction g is a fraction of a ceiling (at most 1): the thin decode tile
    # reads its operands through L2 at 60 % of it, the large tile at 90 %. The decode tile's
    # programs run three to an SM, each beside another at 40 % of a round.
    truth = {CANDIDATES[0]: select.Constants(a=1.0, b=0.002, e=0.85, d=3.0, g=0.6, s=0.4),
             LARGE: select.Constants(a=5.0, b=0.01, e=0.8, d=1.0, g=0.9)}
    rng = random.Random(1)
    shapes = [(rng.choice([1, 16, 256, 2048, 8192]), rng.choice([1024, 4096, 14336]), rng.choice([1024, 4096, 11008]))
              for _ in range(40)]
    fitted = select.fit(_synthetic_rows(truth, shapes, noise=0.02), steps=800)
    for config, c in truth.items():
        got = fitted[select.config_id(config)]
        for m, n, k in [(4096, 4096, 4096), (16, 11008, 4096), (2048, 1024, 1024)]:
            f = select.features(config, m, n, k, torch.float16, True, 132)
            shared = select.sharing(config, m, n, torch.float16, True, 132)
            assert got.predict_us(*f, shared=shared) == pytest.approx(c.predict_us(*f, shared=shared), rel=0.1), (
                config.short(), m, n, k)
    assert fitted[select.config_id(CANDIDATES[0])].s == pytest.approx(0.4, abs=0.1)


def test_fit_reaches_past_the_h100s_copy_bandwidth_on_a_gpu_of_faster_dram():
    """A decode tile that copies at 1.3x COPY_BANDWIDTH (an H200's DRAM): fitted under the
    H100's ceiling its bandwidth stops at it and memory-bound problems are predicted slow;
    with ``dram_scale`` (the datasheets' ratio) the fit finds it."""
    truth = {CANDIDATES[0]: select.Constants(a=1.0, b=0.002, e=1.3, d=3.0, g=0.6, s=0.4)}
    shapes = [(m, n, k) for m in (1, 4, 16) for n in (4096, 8192, 14336) for k in (4096, 8192)]
    rows = _synthetic_rows(truth, shapes)
    key = select.config_id(CANDIDATES[0])
    capped, scaled = select.fit(rows, steps=800)[key], select.fit(rows, steps=800, dram_scale=1.43)[key]
    assert capped.e < 1.0 and scaled.e == pytest.approx(1.3, rel=0.05)
    f = select.features(CANDIDATES[0], 1, 14336, 8192, torch.float16, True, 132)
    want = truth[CANDIDATES[0]].predict_us(*f)
    assert scaled.predict_us(*f) == pytest.approx(want, rel=0.05) and capped.predict_us(*f) > want * 1.1


def test_the_stream_k_tail_fits_no_constants_of_its_own():
    """Rows of the TMA kernel's stream-K tail neither get constants nor count in the
    errors: the tail is scored with its data-parallel twin's constants and its own model."""
    twin = next(c for c in CANDIDATES if c.stream_k and c.variant == "tma")
    dp = twin.model_copy(update={"stream_k": False})
    truth = {dp: select.Constants(a=5.0, b=0.01, e=0.8, d=1.0, g=0.9, r=0.0),
             twin: select.Constants(a=50.0, b=0.1, e=0.1, d=30.0, g=0.1, r=0.0)}
    shapes = [(m, n, 8192) for m in (512, 2048, 4096) for n in (1024, 4096, 8192)]
    rows = _synthetic_rows(truth, shapes)
    fitted = select.fit(rows, steps=50)
    assert select.config_id(dp) in fitted and select.config_id(twin) not in fitted
    model = select.Model("GPU X", 132, fitted)
    assert model.constants_for(twin, True)[1] == dp
    without = [r for r in rows if not r["config"]["stream_k"]]
    assert select.fit_errors(model, rows) == select.fit_errors(model, without)



def test_dram_and_l2_terms_meet_in_a_sharp_maximum():
    """A memory-bound tile whose DRAM and L2 terms are both at their bound runs at about the
    slower of the two (the bytes stream through both in a pipeline), not at their sum; the
    compute term still adds in the softer SMOOTH_P maximum. ``choose`` predicts alike."""
    c = select.Constants(a=0.0, b=0.0, e=1.0, d=0.0, g=1.0)
    both = c.predict_us(0.0, 0.0, select.COPY_BANDWIDTH * 100e-6, select.L2_BANDWIDTH * 100e-6)  # 100 µs each
    assert 100.0 < both < 100.0 * 2 ** (1 / 6)
    assert both == pytest.approx(select._memory_max(100.0, 100.0))
    with_compute = select.Constants(a=100.0, b=0.0, e=1.0, d=0.0, g=1.0).predict_us(
        1.0, 0.0, select.COPY_BANDWIDTH * 100e-6, select.L2_BANDWIDTH * 100e-6)
    assert with_compute == pytest.approx((100.0 ** select.SMOOTH_P + both ** select.SMOOTH_P) ** (1 / select.SMOOTH_P))
    config = next(x for x in CANDIDATES if x.variant == "tma" and x.block_m == 64)
    fitted = select.Constants(a=1.5, b=0.002, e=0.9, d=2.0, g=0.9, r=0.0)
    model = select.Model("GPU X", 132, {select.config_id(config): fitted})
    m, n, k = 128, 3584, 18944
    scores = select.choose(model, m, n, k, torch.float16, tma=True, default=config).scores
    f = select.features(config, m, n, k, torch.float16, True, 132)
    assert scores[0][0] == fitted.predict_us(*f)


def test_a_selector_file_of_the_old_form_is_refused_in_one_line():
    """Schema 1 files put all three terms in one smooth maximum: their constants mean other
    times under this model, so reading one says so instead of mispredicting."""
    model = select.Model("GPU X", 132, {select.config_id(CANDIDATES[0]): select.Constants(1.0, 0.01, 0.9, 2.0)})
    old = json.loads(model.to_json())
    assert old["schema"] == select.SCHEMA
    old["schema"] = 1
    with pytest.raises(ValueError) as err:
        select.Model.from_json(json.dumps(old), "old.json")
    assert "schema 1" in str(err.value) and "\n" not in str(err.value)

def test_model_json_round_trips_and_a_bad_file_is_one_line():
    model = select.Model("GPU X", 132, {select.config_id(CANDIDATES[0]): select.Constants(1.0, 0.01, 0.9, 2.0)})
    again = select.Model.from_json(model.to_json())
    assert again.device == "GPU X" and again.constants == model.constants
    with pytest.raises(ValueError) as err:
        select.Model.from_json('{"schema": 99}', "x.json")
    assert "x.json is not a selector file" in str(err.value) and "\n" not in str(err.value)


def _model(fast: KernelConfig, others_us: float = 100.0, fast_us: float = 50.0) -> select.Model:
    """A model that predicts ``fast`` at fast_us and every other candidate near others_us,
    whatever the shape (b = 0, memory term negligible)."""
    constants = {}
    for c in CANDIDATES:
        us = fast_us if c == fast else others_us
        constants[select.config_id(c)] = select.Constants(a=0.0, b=0.0, e=1e9, d=us)
    return select.Model("GPU X", 132, constants)


def _choose(model, m=4096, n=4096, k=4096, **kw):
    default = kw.pop("default", default_config(m, n, k, torch.float16, gpu=True))
    return select.choose(model, m, n, k, torch.float16, tma=kw.pop("tma", True), default=default, **kw)


def test_choose_takes_the_fastest_prediction_and_says_why():
    fast = next(c for c in CANDIDATES if c.block_m == 64 and c.block_n == 256)
    choice = _choose(_model(fast))
    assert choice.config == fast and choice.source == "selected"
    assert choice.ranked[0].config == fast and "predicted 50.0" in choice.reason


def test_the_default_stays_unless_beaten_by_the_margin():
    fast = next(c for c in CANDIDATES if c.block_m == 64 and c.block_n == 256)
    default = default_config(4096, 4096, 4096, torch.float16, gpu=True)
    choice = _choose(_model(fast, others_us=100.0, fast_us=98.0), default=default)
    assert choice.config == default and "within 3%" in choice.reason


def test_close_calls_count_the_configs_predicted_within_the_picks_error():
    fast = next(c for c in CANDIDATES if c.block_m == 64 and c.block_n == 256)
    near = next(c for c in CANDIDATES if c.block_m == 128 and c.block_n == 128 and c.split_k == 1 and not c.stream_k)
    plain = _model(fast, others_us=100.0, fast_us=50.0)
    constants = dict(plain.constants)
    constants[select.config_id(near)] = select.Constants(a=0.0, b=0.0, e=1e9, d=53.0)
    with_errors = select.Model("GPU X", 132, constants, {key: 0.1 for key in constants})
    choice = _choose(with_errors)
    assert choice.config == fast
    assert all(s.error == pytest.approx(0.1) for s in choice.ranked if s.predicted_us is not None)
    # 53 µs lies within exp(0.1) of 50; the others (100 µs) do not.
    assert select.close_calls(choice.ranked, fast) == (1, pytest.approx(math.exp(0.1) - 1))
    # A model fitted without errors knows no band.
    assert select.close_calls(_choose(select.Model("GPU X", 132, constants)).ranked, fast) is None


def test_explain_shows_each_prediction_s_error_and_where_a_race_would_settle_the_pick(h100):
    # 3000x2560x5632 bf16 on the H100: the model keeps the default against configs it
    # predicts a few per cent faster, within their errors.
    args = ["explain", "--m", "3000", "--n", "2560", "--k", "5632", "-d", "bf16", "--device", "h100"]
    out = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert out["source"] == "default" and out["ranked"][0]["config"] != out["config"]
    assert all(r["error"] > 0 for r in out["ranked"] if r["predicted_us"] is not None)
    assert out["close_calls"]["configs"] >= 1 and 0 < out["close_calls"]["within"] < 0.5
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "AUTOKERNEL_AUTOTUNE=1" in text.output and "±" in text.output
    # Where the pick is the model's own best prediction, no race is suggested.
    sure = CliRunner().invoke(app, ["explain", "--m", "1024", "--n", "1024", "--k", "8192", "-d", "bf16",
                                    "--device", "h100"])
    assert sure.exit_code == 0 and "AUTOKERNEL_AUTOTUNE" not in sure.output


def test_configs_that_do_not_fit_are_never_chosen():
    fast = next(c for c in CANDIDATES if c.block_m == 64 and c.block_n == 256)
    choice = _choose(_model(fast), fits=lambda c: c != fast)
    assert choice.config != fast and all(s.config != fast for s in choice.ranked)


def test_a_tuned_entry_of_another_shape_is_scored_not_handed_over():
    tuned = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=16, num_warps=8, num_stages=3,
                         variant="tma", flatten=True)
    fast = next(c for c in CANDIDATES if c.block_m == 64 and c.block_n == 256)
    choice = _choose(_model(fast), tuned=((tuned, "shipped, 4096x4096x11008"),))
    scored = next(s for s in choice.ranked if s.config == tuned)
    assert scored.predicted_us == pytest.approx(100.0) and scored.scored_as is not None
    assert choice.config == fast


def test_unaligned_rows_along_k_leave_the_pointer_kernels_out_where_tma_runs():
    assert not select.rows_aligned(1000, "nt") and select.rows_aligned(1024, "nt") and select.rows_aligned(1000, "tn")
    fast = next(c for c in CANDIDATES if c.variant == "grouped" and c.block_m == 128 and c.split_k == 1)
    choice = _choose(_model(fast), m=568, n=2816, k=1000, aligned=False)
    assert select.kernel_kind(choice.config, True) == "tma"
    assert _choose(_model(fast), m=568, n=2816, k=1000, aligned=True).config == fast
    # No TMA kernel to run: the pointer kernels stay.
    assert select.kernel_kind(_choose(_model(fast), m=568, n=2816, k=1000, tma=False, aligned=False).config,
                              False) != "tma"


def test_rows_that_take_no_vectors_leave_out_configs_of_many_scalar_loads():
    # K of 50257 halves: 100514 bytes a row, no 16-byte vectors; A row-major (n), B a
    # transposed view (t): both operands' rows lie along K.
    assert select.unvectorized(50257, 2, "nn") == (True, False)
    assert select.unvectorized(50257, 2, "nt") == (True, True)
    assert select.unvectorized(50257, 2, "tn") == (False, False)
    assert select.unvectorized(30522, 2, "nt") == (True, True)  # 61044 bytes: 4-byte aligned only
    assert select.unvectorized(4096, 2, "nt") == (False, False) and select.unvectorized(1000, 2, "nt") == (False, False)
    # A as a transposed view with rows along M (dW's dY^T of BERT's 30522-word vocabulary), from 1024 rows
    assert select.unvectorized(2048, 2, "tn", m=30522) == (True, False)
    assert select.unvectorized(2048, 2, "tn", m=30528) == (False, False)  # aligned rows
    assert select.unvectorized(2048, 2, "tn", m=select.SCALAR_ROWS_MIN_M - 1) == (False, False)  # odd, too few
    assert select.unvectorized(2048, 2, "nn", m=30522) == (False, False)  # A's rows along K: M does not count
    # A model that predicts a 128-row, 4-warp tile fastest (64 elements of A a thread per K step).
    fast = next(c for c in CANDIDATES if c.variant == "grouped" and c.block_m == 128 and c.block_n == 128
                and c.split_k == 1 and c.num_warps == 4)
    choice = _choose(_model(fast), m=2048, n=768, k=50257, tma=False, scalar=(True, False))
    assert choice.config != fast and choice.config.variant != "tma"
    assert choice.config.block_m * choice.config.block_k <= select.SCALAR_LOADS_MAX * 32 * choice.config.num_warps
    assert all(s.config.block_m * s.config.block_k <= select.SCALAR_LOADS_MAX * 32 * s.config.num_warps
               for s in choice.ranked if s.predicted_us is not None)
    # With B's rows unvectorized too, B's tile is held to the same bound.
    both = _choose(_model(fast), m=2048, n=768, k=50257, tma=False, scalar=(True, True))
    assert both.config.block_n * both.config.block_k <= select.SCALAR_LOADS_MAX * 32 * both.config.num_warps
    # Aligned rows: the model's pick as before.
    assert _choose(_model(fast), m=2048, n=768, k=50304, tma=False).config == fast


def test_where_no_config_loads_few_enough_scalars_those_that_load_fewest_remain():
    # Decode with B as nn.Linear's weight at an odd K: every decode tile loads 64 or more of
    # B's elements a thread per K step; a model that likes the 16x128 tile (128 a thread).
    wide = next(c for c in CANDIDATES if (c.block_m, c.block_n, c.split_k) == (16, 128, 1))
    choice = _choose(_model(wide), m=9, n=13824, k=2301, tma=False, scalar=(True, True))
    c = choice.config
    assert c != wide and c.block_n * c.block_k // (32 * c.num_warps) == 64
    assert "left out that load more than 64 elements" in choice.reason
    # Aligned, the model's pick stands.
    assert _choose(_model(wide), m=9, n=13824, k=2304, tma=False).config == wide


def test_the_square_pointer_tile_joins_where_both_operands_take_no_vectors():
    square = select.SCALAR_SQUARE
    assert square.block_m * square.block_k == square.block_n * square.block_k == select.SCALAR_LOADS_MAX * 32 * square.num_warps
    model = _model(CANDIDATES[0])
    model.constants[select.config_id(square)] = select.Constants(a=0.0, b=0.0, e=1e9, d=10.0)  # the fastest
    assert _choose(model, m=665, n=5248, k=3458, tma=False, scalar=(True, True)).config == square
    # Not where only A's rows are unvectorized, nor for 64 rows or fewer, nor on aligned rows.
    for m, scalar in ((665, (True, False)), (64, (True, True)), (665, (False, False))):
        ranked = _choose(model, m=m, n=5248, k=3458, tma=False, scalar=scalar).ranked
        assert square not in [r.config for r in ranked]


def test_matmul_keeps_to_few_scalar_loads_on_the_h200_where_rows_take_no_vectors(monkeypatch):
    # The dX GEMM of GPT-2's vocabulary projection (2048 tokens): K = 50257.
    cuda = simulate_gpu(monkeypatch, "NVIDIA H200")
    c, _ = best.resolve(2048, 768, 50257, torch.float16, "none", False, cuda, layout="nn")
    assert select.kernel_kind(c, False) != "tma"
    assert c.block_m * c.block_k <= 32 * 32 * c.num_warps  # at most 32 of A's elements a thread per K step
    aligned, _ = best.resolve(2048, 768, 50304, torch.float16, "none", False, cuda, layout="nn")
    best.clear_cache()
    assert select.kernel_kind(aligned, True) == "tma"  # aligned rows: the TMA kernel, unaffected


def test_matmul_picks_by_the_selector_on_a_simulated_h100(h100):
    config, source = best.resolve(3072, 3072, 3072, torch.bfloat16, "none", False, h100, layout="nt")
    choice = best.choice(3072, 3072, 3072, torch.bfloat16, "none", False, h100, layout="nt")
    assert config == choice.config and source not in ("default", "exact")  # the model's pick, not a fallback
    # An exact tuned entry wins; its layout must match.
    entry = next(e for e in best.load(best.SHIPPED_DIR / "nvidia-h100-80gb-hbm3.json").entries
                 if (e.M, e.N, e.K, e.dtype, e.layout) == (8192, 8192, 8192, "float16", "nn"))
    assert best.resolve(8192, 8192, 8192, torch.float16, "none", False, h100, layout="nn") == (entry.config, "shipped")
    other, source = best.resolve(8192, 8192, 8192, torch.float16, "none", False, h100, layout="nt")
    assert source != "shipped"


def test_the_shipped_model_scores_every_candidate():
    model = select.Model.from_json((best.SHIPPED_DIR / "selector" / "nvidia-h100-80gb-hbm3.json").read_text())
    assert best.device_key(model.device) == "nvidia-h100-80gb-hbm3" and model.programs == 132
    missing = [c.short() for c in CANDIDATES if select.config_id(c) not in model.constants]
    # The stream-K tails are scored with their data-parallel twin's constants (the flattened
    # twin's where the tail is not flattened and that twin is fitted); the tiles of C^T were
    # swept on the H200 alone: the H100's model scores them as nothing, and never picks them.
    assert missing == [c.short() for c in CANDIDATES if c.stream_k or c.swap_ab]
    assert all(model.constants_for(c, True) is None for c in SWAPPED)
    h200 = select.Model.from_json((best.SHIPPED_DIR / "selector" / "nvidia-h200.json").read_text())
    assert all(select.config_id(c) in h200.constants for c in SWAPPED)
    for c in CANDIDATES:
        if c.stream_k:
            twin = c.model_copy(update={"stream_k": False})
            flat = twin.model_copy(update={"flatten": True})
            assert model.constants_for(c, True)[1] == (flat if select.config_id(flat) in model.constants else twin)


def test_explain_prints_the_ranking_and_the_pick(h100):
    # A long-K problem of few output tiles, where the model's pick (split-K) beats the
    # default by far more than its uncertainty.
    result = CliRunner().invoke(app, ["explain", "--m", "1024", "--n", "1024", "--k", "8192", "-d", "bf16",
                                      "--device", "h100", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    config, _ = best.resolve(1024, 1024, 8192, torch.bfloat16, "none", False, h100, layout="nt")
    assert KernelConfig.from_dict(out["config"]) == config and out["source"] == "selected"
    times = [r["predicted_us"] for r in out["ranked"] if r["predicted_us"] is not None]
    assert times == sorted(times) and len(times) > 3
    bad = CliRunner().invoke(app, ["explain", "--m", "8", "--n", "8", "--k", "8", "--device", "no-such-gpu"])
    assert bad.exit_code == 2 and "no selector model" in bad.output


def test_explain_says_how_a_picked_stream_k_tail_is_cut(h100):
    args = ["explain", "--m", "1440", "--n", "1792", "--k", "28416", "-d", "bf16", "--device", "h100"]
    out = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert out["config"]["stream_k"] and out["config"]["variant"] == "tma"
    assert out["stream_k_tail"].startswith("84 tiles of 444 K steps, each cut in 1 head of 296 and a tail of 148")
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "stream-K tail: 84 tiles" in text.output
    cut = json.loads(CliRunner().invoke(app, ["explain", "--m", "1024", "--n", "1024", "--k", "8192",
                                              "--device", "h100", "--json"]).stdout)
    assert cut["stream_k_tail"].startswith("64 tiles of 128 K steps, each cut in 2 equal chunks")  # no whole wave
    plain = json.loads(CliRunner().invoke(app, ["explain", "--m", "4096", "--n", "4096", "--k", "4096",
                                                "--device", "h100", "--json"]).stdout)
    assert not plain["config"]["stream_k"] and plain["stream_k_tail"] is None  # whole waves: no tail to describe


def test_explain_says_how_the_pick_s_tiles_fill_the_sms(h100):
    from autokernel.kernels.fit import programs_per_sm

    def explained(m, n, k):
        out = CliRunner().invoke(app, ["explain", "--m", str(m), "--n", str(n), "--k", str(k), "--device", "h100",
                                       "--json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    programs = best.selector_model(H100).programs
    # A mid-size problem of few tiles: the last (only) round leaves SMs idle, which explain says.
    out = explained(1024, 768, 3072)
    config, grid = KernelConfig.from_dict(out["config"]), out["grid"]
    tiles = math.ceil(1024 / config.block_m) * math.ceil(768 / config.block_n)
    per_sm = 1 if select.kernel_kind(config, True) == "tma" else programs_per_sm(config, torch.float16, tma=True)
    assert (grid["tiles"], grid["units"], grid["per_sm"]) == (tiles, tiles * config.split_k, per_sm)
    assert grid["rounds"] == pytest.approx(tiles * config.split_k / (programs * per_sm)) and grid["rounds"] < 1
    assert grid["last_round_full"] == pytest.approx(grid["rounds"]) and grid["idle_costs"]
    text = CliRunner().invoke(app, ["explain", "--m", "1024", "--n", "768", "--k", "3072", "--device", "h100"]).output
    assert f"grid: {tiles} tiles of {config.block_m}x{config.block_n}" in text and "SMs idle in the last round" in text
    # Rounds past the first: the last one's share.
    grid = explained(11945, 640, 5888)["grid"]
    assert grid["rounds"] > 1
    assert grid["last_round_full"] == pytest.approx(grid["rounds"] - math.ceil(grid["rounds"]) + 1)
    # Decode rows are memory-bound: a part-filled round is not where they trail, and explain says nothing of it.
    assert not explained(8, 4096, 4096)["grid"]["idle_costs"]
    # A stream-K tail balances the last round: its cut is described instead.
    out = explained(1024, 1024, 8192)
    assert out["config"]["stream_k"] and out["grid"] is None and out["stream_k_tail"]


def test_explain_says_how_c_is_stored_where_its_rows_take_no_descriptor():
    from autokernel.kernels.matmul_tma import POINTER_C_MIN_K

    def explained(k, n=50257):
        args = ["explain", "--m", "2048", "--n", str(n), "--k", str(k), "--device", "NVIDIA H200"]
        json_out = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
        return json_out, CliRunner().invoke(app, args).output

    long_k, text = explained(POINTER_C_MIN_K)
    assert long_k["c_rows_unaligned"] == "pointers" and "stores C through pointers" in text
    short_k, text = explained(768)  # GPT-2's vocabulary projection: K under min(2048, 4 M)
    assert short_k["c_rows_unaligned"] == "pointer kernels" and "the pointer kernels run it" in text
    aligned, text = explained(768, n=50304)
    assert aligned["c_rows_unaligned"] is None and "take no TMA descriptor" not in text


def test_explain_says_which_operands_are_copied_and_picks_for_the_copies():
    """GPT-2's dX (K = 50257, the vocabulary: A's rows odd) copies A; its pick is the one the
    copies' layout gets (TMA configs where the GPU has the kernel, pointer configs where the
    weight's rows stay odd); a decode problem with the weight's rows odd copies nothing."""
    from autokernel import plans

    def explained(*args):
        args = ["explain", *args, "--device", "NVIDIA H200"]
        return json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout), CliRunner().invoke(app, args).output

    dx, text = explained("--m", "2048", "--n", "768", "--k", "50257", "--layout", "nn")
    assert dx["padded"] == ["A"] and "each call copies it first" in text
    # picked as the copies run: TMA, and A's rows taking vectors
    assert dx["config"] == best.pick(2048, 768, 50257, torch.float16, layout="nn", device="NVIDIA H200",
                                     tma=True, copied=(True, False)).config.model_dump()
    rows = plans.PAD_A_ALONE_MIN_ROWS
    skinny, text = explained("--m", str(rows), "--n", "4096", "--k", "4095", "--layout", "nt")
    assert skinny["padded"] == ["A"] and plans.padding_for(rows, 4096, 4095, torch.float16, "nt") == (True, False)
    # the weight's rows stay odd: the copies' pick is a pointer kernel's, as the layout's own
    assert skinny["config"] == best.pick(rows, 4096, 4095, torch.float16, layout="nt",
                                         device="NVIDIA H200", copied=(True, False)).config.model_dump()
    decode, text = explained("--m", str(rows - 1), "--n", "4096", "--k", "4095", "--layout", "nt")
    assert decode["padded"] == [] and "copies" not in text
    few, text = explained("--m", str(plans.PAD_MIN_ROWS - 1), "--n", "8192", "--k", "8191", "--layout", "nt")
    assert few["padded"] == [] and "copies" not in text
    aligned, text = explained("--m", "2048", "--n", "768", "--k", "50304", "--layout", "nn")
    assert aligned["padded"] == [] and "copies" not in text


def test_explain_says_what_the_exact_gelu_epilogue_costs_on_four_warp_tiles(h100):
    args = ["explain", "--m", "2048", "--n", "3072", "--k", "768", "-d", "bf16", "--bias", "--device", "h100"]
    out = json.loads(CliRunner().invoke(app, [*args, "-a", "gelu", "--json"]).stdout)
    programs = best.selector_model("NVIDIA H100 80GB HBM3").programs
    assert out["epilogue_excess_us"]["tma"] == pytest.approx(
        select.EPILOGUE_EXCESS_NS["gelu"][0] * 2048 * 3072 / programs * 1e-3)
    assert out["config"]["num_warps"] == 8
    text = CliRunner().invoke(app, [*args, "-a", "gelu"])
    assert text.exit_code == 0 and "the gelu epilogue costs 13.3 µs more here" in text.output
    relu = json.loads(CliRunner().invoke(app, [*args, "-a", "relu", "--json"]).stdout)
    assert relu["epilogue_excess_us"] is None  # alike on every tile: nothing to say


def test_a_stream_k_tail_is_scored_where_a_small_tail_follows_whole_waves():
    """The shipped model picks the TMA kernel's stream-K tail for a long-K problem whose
    tiles leave a small partial wave, and for one with fewer tiles than SMs (all of them
    the tail; skinny ones and decode rows of 33-64 too), after whole waves for a skinny problem
    (M <= 256) only on the thin 64-row tile's flattened twin, and never for tiles that fill
    whole waves, or where the tail is not worth cutting."""
    model = select.Model.from_json((best.SHIPPED_DIR / "selector" / "nvidia-h100-80gb-hbm3.json").read_text())
    default = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3)

    def pick(m, n, k):
        return select.choose(model, m, n, k, torch.float16, tma=True, default=default)

    tail = pick(3071, 1536, 21888)  # 128x256 tiles: 144, a wave and 12
    assert tail.config.stream_k and tail.config.variant == "tma", tail.reason
    sk = [s for s in tail.ranked if s.config.stream_k]
    assert sk and all(s.scored_as == s.config.model_copy(update={"stream_k": False}) for s in sk)
    few = pick(910, 1280, 18944)  # 128x256 tiles: 40, each cut in 3 chunks
    assert few.config.stream_k and few.config.variant == "tma", few.reason
    skinny = pick(215, 1536, 18304)  # 128x128 tiles: 24, each cut in 5 chunks
    assert skinny.config.stream_k and skinny.config.variant == "tma", skinny.reason
    for m, n, k in [(199, 9088, 6016), (103, 17408, 22144)]:  # skinny: a tail after whole waves on thin tiles only
        for s in pick(m, n, k).ranked:
            if s.config.stream_k and -(-m // s.config.block_m) * -(-n // s.config.block_n) >= model.programs:
                assert thin_tma(s.config) and s.config.flatten, (m, n, k, s.config.short())
    # decode rows of 33-64 (64-row tiles): the twins where the tiles are fewer than the SMs; below 33 none
    assert not any(s.config.stream_k for s in pick(32, 1536, 18304).ranked)
    decode = [s.config for s in pick(64, 1536, 18304).ranked if s.config.stream_k]
    assert any(thin_tma(c) for c in decode)
    assert all(c.block_m == 64 and -(-1536 // c.block_n) < model.programs for c in decode)
    assert not any(s.config.stream_k for s in pick(64, 40000, 18304).ranked)  # after whole waves: from 65 rows
    for m, n, k in [(4096, 4096, 4096), (1408, 3072, 4096), (910, 1280, 18944), (3071, 1536, 21888)]:
        for s in pick(m, n, k).ranked:
            if s.config.stream_k:
                tiles = -(-m // s.config.block_m) * -(-n // s.config.block_n)
                tail = tiles % model.programs
                assert tail and tail_cut(tiles, model.programs, -(-k // s.config.block_k))[0] >= 2 * tail, (m, n, k)
    assert not pick(4096, 4096, 4096).config.stream_k  # 128x256 tiles: whole waves


def test_a_tail_of_more_tiles_than_half_the_sms_is_cut_in_heads_where_k_is_long():
    """72 tiles of 128x256 on 132 SMs: equal chunks would leave 60 SMs idle, heads and tails
    do not. The shipped model takes the cut for a long K (on the H100 1440x1536x28416 ran
    273 -> 204 µs with it) and not for a short one (1536 cubed: 18.7 -> 26.8 µs), where the
    fix-up's partials cost more than the idle SMs."""
    model = select.Model.from_json((best.SHIPPED_DIR / "selector" / "nvidia-h100-80gb-hbm3.json").read_text())
    default = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3)
    long_k = select.choose(model, 1440, 1536, 28416, torch.bfloat16, tma=True, default=default)
    assert long_k.config.stream_k and long_k.config.variant == "tma", long_k.reason
    assert tail_cut(72, model.programs, 28416 // 64) == (144, 296)  # a head of 296 steps, two rounds of 148
    short_k = select.choose(model, 1536, 1536, 1536, torch.bfloat16, tma=True, default=default)
    assert not short_k.config.stream_k
    ranked = {s.config: s.predicted_us for s in short_k.ranked}
    twin = next(c for c in ranked if c.stream_k and c.block_m == 128 and c.block_n == 256 and c.flatten)
    assert ranked[twin] > ranked[twin.model_copy(update={"stream_k": False})]


def test_the_waves_of_heads_and_tails():
    """With made-up constants that give a tile no time, a cut tail's waves are the whole ones
    plus the longer of a head and one program's tails, as shares of a tile."""
    # 132 + 72 tiles: a whole wave, then 72 tiles in one head of 0.6 and tails of 0.4, two each
    assert select.streamk_waves(204, 132, 144, 0.0, 0.0, 128, 256, 1000, 2, head=0.6) == pytest.approx(1.8)
    # 50 tiles: two heads of 0.4 and a tail of 0.2, 32 programs running two tails each
    assert select.streamk_waves(50, 132, 150, 0.0, 0.0, 128, 256, 1000, 2, head=0.4) == pytest.approx(0.4)
    # equal chunks: 10 tiles in 8 chunks
    assert select.streamk_waves(10, 132, 80, 0.0, 0.0, 128, 256, 1000, 2) == pytest.approx(1 / 8)


def test_explain_backward_names_the_gemms_linear_launches(h100, monkeypatch):
    """explain --backward: the three GEMMs a training step of autokernel.linear resolves a
    config for (shapes, layouts, epilogue, whether the forward stores Z), each as explain
    answers for one problem; a --layout other than nn.Linear's is refused."""
    from autokernel import api, plans

    m, n, k = 24, 40, 56
    asked = []
    real = best.resolved_config

    def spy(m_, n_, k_, dtype, activation, bias, device, store_z, tma, layout, copied=(False, False)):
        asked.append((m_, n_, k_, activation, bias, store_z, layout))
        return real(m_, n_, k_, dtype, activation, bias, device, store_z, tma, layout, copied)

    monkeypatch.setattr(best, "resolved_config", spy)
    plans.clear_launch_cache()
    on = runtime.kernel_device()
    x = torch.randn(m, k, dtype=torch.float16, device=on, requires_grad=True)
    w = torch.randn(n, k, dtype=torch.float16, device=on, requires_grad=True)
    b = torch.randn(n, dtype=torch.float16, device=on, requires_grad=True)
    api.linear(x, w, b, "gelu").float().sum().backward()
    plans.clear_launch_cache()
    args = ["explain", "--m", str(m), "--n", str(n), "--k", str(k), "-a", "gelu", "--bias", "--device", "h100",
            "--backward", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    explained = [(g["problem"]["m"], g["problem"]["n"], g["problem"]["k"], g["problem"]["activation"],
                  g["problem"]["bias"], g["gemm"].startswith("forward"), g["problem"]["layout"]) for g in out]
    assert sorted(explained) == sorted(asked), (explained, asked)  # gelu: the forward stores Z
    for g in out:
        p = g["problem"]
        one = json.loads(CliRunner().invoke(app, ["explain", "--m", str(p["m"]), "--n", str(p["n"]), "--k", str(p["k"]),
                                                  "-a", p["activation"], *(["--bias"] if p["bias"] else []),
                                                  "--layout", p["layout"], "--device", "h100", "--json"]).stdout)
        if g["gemm"].startswith("forward"):  # the forward stores Z, which explain of one problem does not ask
            found = best.pick(m, n, k, torch.float16, "gelu", True, "nt", device=H100, store_z=True)
            assert KernelConfig.from_dict(g["config"]) == found.config and g["source"] == found.source
        else:
            assert one["config"] == g["config"] and one["source"] == g["source"]
    bad = CliRunner().invoke(app, [*args[:-1], "--layout", "nn"])
    assert bad.exit_code == 2 and "--backward explains nn.Linear's layout" in bad.output


def test_a_selector_file_keeps_the_l2_ceiling_it_was_fitted_with():
    # g is a fraction of select.L2_BANDWIDTH; a file fitted under another ceiling (or one
    # written before files stored it: 12e12) predicts the same times under the current one.
    c = select.Constants(a=1.0, b=0.01, e=0.9, d=2.0, g=0.9, r=0.0, s=0.5)
    model = select.Model("GPU X", 132, {select.config_id(LARGE): c})
    data = json.loads(model.to_json())
    assert data["l2_bandwidth"] == select.L2_BANDWIDTH
    assert select.Model.from_json(model.to_json()).constants == model.constants
    del data["l2_bandwidth"]
    legacy = select.Model.from_json(json.dumps(data)).constants[select.config_id(LARGE)]
    assert legacy.g * select.L2_BANDWIDTH == pytest.approx(0.9 * select.LEGACY_L2_BANDWIDTH)
    f = select.features(LARGE, 4096, 4096, 4096, torch.float16, True, 132)
    l2_us = f[3] / (select.LEGACY_L2_BANDWIDTH * 0.9) * 1e6  # the legacy file's L2 time, as it was fitted
    assert l2_us == pytest.approx(f[3] / (select.L2_BANDWIDTH * legacy.g) * 1e6)


def test_a_selector_file_keeps_the_share_its_l2_rereads_were_fitted_with():
    """``Model.l2_reread``: each read of an operand after its first, at that share of the
    first. Stored in the file; a file without it reads every one at full cost, as it was
    fitted. The H200's shipped model discounts them, the H100's does not, and a model
    carried to another GPU keeps its file's share."""
    c = select.Constants(a=1.0, b=0.01, e=0.9, d=2.0, g=0.9, r=0.0, s=0.5)
    model = select.Model("GPU X", 132, {select.config_id(LARGE): c}, l2_reread=0.5)
    data = json.loads(model.to_json())
    assert data["l2_reread"] == 0.5 and select.Model.from_json(model.to_json()).l2_reread == 0.5
    with pytest.raises(ValueError, match="is not a selector file: l2_reread 1.5 is not a share"):
        select.Model.from_json(json.dumps({**data, "l2_reread": 1.5}))
    del data["l2_reread"]
    assert select.Model.from_json(json.dumps(data)).l2_reread == select.LEGACY_L2_REREAD == 1.0
    thin = KernelConfig(block_m=64, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4, variant="tma")
    m, n, k = 180, 8192, 4096  # 3 rows and 64 columns of tiles
    full = select.features(thin, m, n, k, torch.float16, True, 132)[3]
    half = select.features(thin, m, n, k, torch.float16, True, 132, 0.5)[3]
    assert full == (m * k * 64 + k * n * 3) * 2
    assert half == (m * k * (1 + 0.5 * 63) + k * n * (1 + 0.5 * 2)) * 2
    assert select.features(thin, 64, 128, k, torch.float16, True, 132, 0.5)[3] == (64 * k + k * 128) * 2  # one tile
    h200 = best.selector_model("NVIDIA H200")
    assert h200.l2_reread == 0.5 and best.selector_model("NVIDIA H100 80GB HBM3").l2_reread == 1.0
    nvl = best.selector_model("NVIDIA H200 NVL")
    assert nvl.based_on and nvl.l2_reread == h200.l2_reread
    # the choice scores with the model's share: the fast path's prediction is predict_us's
    us = select.predict_us(h200, thin, m, n, k, torch.float16, tma=True, layout="nt")
    found = h200.constants_for(thin, True)[0]
    assert us == pytest.approx(found.predict_us(*select.features(thin, m, n, k, torch.float16, True, 132, 0.5,
                                                                 h200.dram_tail)))


def test_a_persistent_grid_whose_last_round_leaves_sms_idle_counts_its_bytes_longer():
    """``Model.dram_tail``: on the TMA kernel, past one round, the DRAM term's bytes grow by
    the share times the idle part of the SMs' rounds; within one round, on whole rounds and on
    the pointer kernels (programs side by side, not a persistent grid) they do not. Stored in
    the file; a file without it has none; the H200's model holds one, the H100's not."""
    assert select.round_idle(100, 132) == 0.0 and select.round_idle(264, 132) == 0.0
    assert select.round_idle(148, 132) == pytest.approx((2 - 148 / 132) / 2)
    assert select.round_idle(296, 132) == pytest.approx((3 - 296 / 132) / 3)
    thin = KernelConfig(block_m=64, block_n=128, block_k=128, group_m=8, num_warps=4, num_stages=4, variant="tma")
    m, n, k = 46, 128 * 148, 8192  # 148 tiles: a last round of 16 on 132 SMs
    plain = select.features(thin, m, n, k, torch.float16, True, 132, 1.0)[2]
    assert plain == (m * k + k * n + m * n) * 2
    assert select.features(thin, m, n, k, torch.float16, True, 132, 1.0, 0.5)[2] == pytest.approx(
        plain * (1 + 0.5 * select.round_idle(148, 132)))
    assert select.features(thin, m, 128 * 132, k, torch.float16, True, 132, 1.0, 0.5)[2] == (m * k + k * 128 * 132 + m * 128 * 132) * 2
    pointer = thin.model_copy(update={"variant": "grouped"})
    assert select.features(pointer, m, n, k, torch.float16, True, 132, 1.0, 0.5)[2] == plain
    c = select.Constants(a=1.0, b=0.01, e=0.9, d=2.0, g=0.9, r=0.0, s=0.5)
    model = select.Model("GPU X", 132, {select.config_id(thin): c}, dram_tail=0.5)
    data = json.loads(model.to_json())
    assert data["dram_tail"] == 0.5 and select.Model.from_json(model.to_json()).dram_tail == 0.5
    with pytest.raises(ValueError, match="is not a selector file: dram_tail -1.0 is not between 0 and 2"):
        select.Model.from_json(json.dumps({**data, "dram_tail": -1.0}))
    del data["dram_tail"]
    assert select.Model.from_json(json.dumps(data)).dram_tail == select.LEGACY_DRAM_TAIL == 0.0
    # choose scores with it: a grid of a last round nearly empty is predicted longer
    without = select.Model("GPU X", 132, {select.config_id(thin): c})
    longer = select.predict_us(model, thin, m, n, k, torch.float16, tma=True, layout="nt")
    assert longer > select.predict_us(without, thin, m, n, k, torch.float16, tma=True, layout="nt")
    assert longer == pytest.approx(c.predict_us(*select.features(thin, m, n, k, torch.float16, True, 132, 1.0, 0.5)))
    h200 = best.selector_model("NVIDIA H200")
    assert h200.dram_tail == 0.5 and best.selector_model("NVIDIA H100 80GB HBM3").dram_tail == 0.0
    assert best.selector_model("NVIDIA H200 NVL").dram_tail == h200.dram_tail


def test_operands_copied_into_aligned_rows_are_picked_for_as_vector_rows():
    """The copies' rows take 16-byte vectors: no config is left out for element loads of a
    copied operand, where an operand left as it is still bounds them."""
    args = (380, 896, 1921, torch.float16)
    as_is = best.pick(*args, layout="nt", device="NVIDIA H200", tma=True)
    both = best.pick(*args, layout="nt", device="NVIDIA H200", tma=True, copied=(True, True))
    a_only = best.pick(*args, layout="nt", device="NVIDIA H200", tma=False, copied=(True, False))
    assert "take no 16-byte vectors" in as_is.reason and "take no 16-byte vectors" not in both.reason
    assert "take no 16-byte vectors" in a_only.reason  # B, nn.Linear's weight, not copied
    assert both.config != as_is.config


def test_rows_of_an_odd_multiple_of_16_bytes_split_sectors():
    # K of 1000 halves: 2000 bytes a row, 16-byte aligned, every other row mid-sector. A row-major
    # ("n") and B as nn.Linear's weight ("t") store rows along K; otherwise along M or N.
    assert select.split_rows(512, 4096, 1000, 2, "nt") == (True, True)
    assert select.split_rows(512, 4096, 1024, 2, "nt") == (False, False)
    assert select.split_rows(512, 4096, 1000, 2, "nn") == (True, False)  # B's rows: 4096 halves
    assert select.split_rows(512, 3000, 1024, 2, "nn") == (False, True)  # B's rows: 3000 halves
    assert select.split_rows(3000, 4096, 1024, 2, "tn") == (True, False)  # A^T's rows: 3000 halves
    assert select.split_rows(512, 4096, 1004, 2, "nt") == (False, False)  # 2008 bytes: no vectors at all
    assert select.split_rows(512, 4096, 1004, 4, "nt") == (False, False)  # float32: not measured, no floor
    assert select.split_rows(1, 4096, 1000, 2, "nt") == (False, True)  # a single row is one run
    # The floor a tile's K loop gets: its rows of such operands at the bandwidth of its kernel.
    tile = next(c for c in CANDIDATES if c.variant == "tma" and (c.block_m, c.block_n) == (128, 128))
    per_k = select.split_row_floor_us(tile, "tma", 2, (True, True))
    assert per_k == pytest.approx(256 * 2 * 1e6 / select.SPLIT_ROW_BANDWIDTH["tma"])
    assert select.split_row_floor_us(tile, "tma", 2, (True, False)) == pytest.approx(per_k / 2)
    assert select.split_row_floor_us(tile, "tma", 2, (False, False)) == 0.0


def test_rows_that_split_sectors_rank_wide_tiles_and_keep_decode_pointer_tiles():
    """Measured on an H200 (docs/selector.md, "Rows that split 32-byte sectors"): at 3000^3
    bf16 the 128x128 TMA tile ran 140 µs on such rows against 90 on padded ones, where wide
    tiles lose less; at a few rows the pointer kernels' decode tiles ran up to 3x faster than
    the thin TMA tile that the TMA-only rule had left."""
    model = best.selector_model("NVIDIA H200")

    def pick(m, n, k, dtype=torch.bfloat16, sectors=None):
        default = default_config(m, n, k, dtype, gpu=True)
        kw = {} if sectors is None else {"sectors": sectors}
        return select.choose(model, m, n, k, dtype, tma=True, default=default,
                             aligned=select.rows_aligned(k, "nt"), **kw).config

    split = select.split_rows(3000, 3000, 3000, 2, "nt")
    assert split == (True, True)
    assert pick(3000, 3000, 3000).block_n == 128  # the floor left out: the 128x128 tile
    assert pick(3000, 3000, 3000, sectors=split).block_n == 256
    decode = pick(3, 768, 23160, torch.float16, sectors=select.split_rows(3, 768, 23160, 2, "nt"))
    assert select.kernel_kind(decode, True) != "tma"
    # Pointer tiles that load many elements of such rows a thread per K step are left out.
    ranked = select.choose(model, 12, 4096, 3000, torch.float16, tma=True, aligned=False, sectors=(True, True),
                           default=default_config(12, 4096, 3000, torch.float16, gpu=True)).ranked
    loads = [(s.config.block_m + s.config.block_n) * s.config.block_k / (32 * s.config.num_warps)
             for s in ranked if select.kernel_kind(s.config, True) != "tma"]
    assert loads and max(loads) <= select.SPLIT_ROW_POINTER_LOADS_MAX
    # Above SPLIT_ROWS_POINTER_MAX_M rows only the TMA kernel's configs are scored.
    m = select.SPLIT_ROWS_POINTER_MAX_M + 1
    assert select.kernel_kind(pick(m, 768, 23160, torch.float16, sectors=select.split_rows(m, 768, 23160, 2, "nt")),
                              True) == "tma"


def test_explain_says_which_operands_split_sectors():
    def explained(*args):
        args = ["explain", *args, "--device", "NVIDIA H200"]
        return json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout), CliRunner().invoke(app, args).output

    out, text = explained("--m", "3000", "--n", "3000", "--k", "3000")
    assert out["sector_split"] == ["A", "B"] and "32-byte sector" in text
    out, text = explained("--m", "3000", "--n", "3000", "--k", "3072")
    assert out["sector_split"] == [] and "32-byte sector" not in text


def test_rows_that_split_sectors_neither_fit_constants_nor_count_in_errors():
    tile = next(c for c in CANDIDATES if c.variant == "tma" and (c.block_m, c.block_n) == (128, 256))
    row = {"m": 3000, "n": 3000, "k": 3000, "dtype": "bfloat16", "layout": "nt"}
    assert select._left_out(tile, row, True)
    assert not select._left_out(tile, {**row, "k": 3008}, True)
    assert not select._left_out(tile, {**row, "dtype": "float32"}, True)  # no floor for float32 rows
    # Rows that split sectors change no fitted constant.
    def rows(ks, ms):
        return [{**row, "k": k, "config": json.loads(tile.to_json()), "gpu_ms": ms * k / 3000, "status": "success"}
                for k in ks]

    whole = rows([2048, 3008, 4096, 6144], 0.1)
    assert select.fit(whole, steps=30) == select.fit(whole + rows([1000, 3000, 5000, 7000], 0.3), steps=30)
    assert select.config_id(tile) not in select.fit(rows([1000, 3000, 5000, 7000], 0.3), steps=30)
