"""The pick of a new shape: the selector's fast path against its reference, and one resolution
for a named device (best.pick) behind resolve, explain and the replay."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autokernel import api, best, runtime, select
from autokernel.candidates import CANDIDATES
from autokernel.config import KernelConfig, default_config, fit_error
from autokernel.kernels.fit import fit_config
from autokernel.kernels.matmul_tma import tail_cut, tma_operands
from autokernel.records import Problem
from tests.helpers import simulate_gpu

H100 = "NVIDIA H100 80GB HBM3"
H100_SHARED_MEMORY = 232448
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def h100(monkeypatch):
    yield simulate_gpu(monkeypatch, H100, H100_SHARED_MEMORY)
    best.clear_cache()


def reference_choose(model, m, n, k, dtype, *, tma, default, tuned, fits, aligned, margin=select.DEFAULT_MARGIN,
                     z=select.UNCERTAINTY_Z, b_rows=False, activation="none", sectors=(False, False)):
    """The selector's rule read straight from its documentation, on the slow public pieces
    (why_not, features, constants_for, predict_us): (winner, source, [(config, source, µs)])."""
    pool = []
    for config, source in ((default, "default"), *tuned):
        if config.swap_ab and m > select.SWAP_AB_MAX_M and source != "default":
            continue  # a tile of C^T tuned for few rows
        if all(config != c for c, _ in pool) and fits(config):
            pool.append((config, source))
    for c in CANDIDATES:
        if fits(c) and all(c != p for p, _ in pool) and select.why_not(c, m, n, k, tma, model.programs, aligned) is None:
            pool.append((c, "candidate"))
    if tma and not aligned and m > select.SPLIT_ROWS_POINTER_MAX_M and any(
            select.kernel_kind(c, tma) == "tma" and model.constants_for(c, tma) is not None for c, _ in pool):
        pool = [(c, s) for c, s in pool if select.kernel_kind(c, tma) == "tma"]
    if any(sectors):  # pointer configs of many loads of rows that split sectors: left out
        narrow = [(c, s) for c, s in pool if select.kernel_kind(c, tma) == "tma" or
                  (c.block_m * sectors[0] + c.block_n * sectors[1]) * c.block_k
                  <= select.SPLIT_ROW_POINTER_LOADS_MAX * 32 * c.num_warps]
        if any(model.constants_for(c, tma) is not None for c, _ in narrow):
            pool = narrow
    scores = []
    for c, s in pool:
        found = model.constants_for(c, tma)
        f = select.features(c, m, n, k, dtype, tma, model.programs, model.l2_reread, model.dram_tail)
        shared = select.sharing(c, m, n, dtype, tma, model.programs)
        floor = select.split_row_floor_us(c, select.kernel_kind(c, tma), dtype.itemsize, sectors)
        us = found[0].predict_us(*f, b_rows=b_rows, shared=shared, k_floor=floor) if found else None
        units = -(-m // c.block_m) * -(-n // c.block_n)
        k_steps = -(-max(k, 1) // c.block_k)
        sk, head = tail_cut(units, model.programs, k_steps)
        if us is not None and c.stream_k and select.kernel_kind(c, tma) == "tma" and sk == units % model.programs:
            # no tail to cut: the plain kernel runs, in whole waves
            us = found[0].predict_us(float(-(-units // model.programs)), *f[1:], b_rows=b_rows, k_floor=floor)
        elif us is not None and c.stream_k and select.kernel_kind(c, tma) == "tma":  # the TMA kernel's tail
            # cut over every SM: no idle last round for Model.dram_tail to count
            f = select.features(c, m, n, k, dtype, tma, model.programs, model.l2_reread)
            waves = select.streamk_waves(units, model.programs, sk, found[0].a, max(found[0].b, floor) * f[1],
                                         c.block_m, c.block_n, max(k, 1), dtype.itemsize, head / k_steps)
            us = (found[0].predict_us(waves, *f[1:], b_rows=b_rows, k_floor=floor)
                  + select.streamk_fixup_us(sk, c.block_m, c.block_n))
        excess = select.EPILOGUE_EXCESS_NS.get(activation)
        if (us is not None and excess is not None and c.num_warps == 4 and not c.warp_specialize and c.split_k == 1
                and c.block_m * c.block_n >= 128 * 128):  # 4 warps, 128 accumulator elements a thread or more
            us += excess[0 if select.kernel_kind(c, tma) == "tma" else 1] * m * n / model.programs * 1e-3
        scores.append((c, s, us))
    default_us = next((us for _, s, us in scores if s == "default"), None)
    scored = [x for x in scores if x[2] is not None]
    best_config, best_source, best_us = min(scored, key=lambda x: x[2])

    def error(config):  # the RMS log error of the constants that score it
        found = model.constants_for(config, tma)
        return model.errors.get(select.config_id(found[1]), max(model.errors.values()))

    if best_source == "default":
        return default, "default", scores
    if default_us is not None and model.errors:
        if math.log(default_us / best_us) <= z * math.sqrt(error(best_config) ** 2 + error(default) ** 2):
            return default, "default", scores
    elif default_us is not None and best_us > default_us * (1 - margin):
        return default, "default", scores
    return best_config, "selected" if best_source == "candidate" else best_source, scores


def test_the_fast_choice_is_the_reference_choice_where_rows_split_sectors():
    """Rows of an odd multiple of 16 bytes (``select.split_rows``): the fast path's floor on
    each tile's K loop is the reference's, bit for bit, swapped tiles and stream-K tails
    included; and the pointer kernels stay among the candidates up to
    SPLIT_ROWS_POINTER_MAX_M rows only."""
    model = best.selector_model("NVIDIA H200")
    rng = random.Random(13)
    changed = 0
    for _ in range(150):
        m = rng.choice([rng.randint(1, 64), rng.randint(65, 2048), rng.randint(1, 16384)])
        n = 8 * rng.randint(1, 3000)
        k = 16 * rng.randint(1, 1500) + 8
        dtype = rng.choice([torch.float16, torch.bfloat16])
        layout = rng.choice(["nt", "nn", "tn"])
        act = rng.choice(["none", "gelu"])
        sectors = select.split_rows(m, n, k, dtype.itemsize, layout)
        default = default_config(m, n, k, dtype, gpu=True)
        kw = dict(tma=True, default=default, aligned=select.rows_aligned(k, layout),
                  b_rows=select.b_row_major(layout), activation=act)
        fast = select.choose(model, m, n, k, dtype, sectors=sectors, **kw)
        config, source, scores = reference_choose(model, m, n, k, dtype, tuned=(), fits=lambda c: True,
                                                  sectors=sectors, **kw)
        assert (fast.config, fast.source) == (config, source), (m, n, k, layout)
        assert [(p.config, s, us) for us, p, s in fast.scores] == scores, (m, n, k, layout)
        kinds = {select.kernel_kind(p.config, True) for _, p, _ in fast.scores}
        if not select.rows_aligned(k, layout) and m > select.SPLIT_ROWS_POINTER_MAX_M:
            assert kinds == {"tma"} or "tma" not in kinds, (m, n, k, layout)  # none to score: the pointer kernels stay
        changed += fast.config != select.choose(model, m, n, k, dtype, **kw).config
    assert changed > 10  # the floor moves picks: the test exercises it


def _problems(count: int, seed: int):
    rng = random.Random(seed)
    for _ in range(count):
        m = rng.choice([rng.randint(1, 64), rng.randint(1, 1024), rng.randint(1, 16384)])
        n = rng.choice([8 * rng.randint(1, 512), rng.randint(16, 20000), rng.choice([1000, 4096, 11008, 14336])])
        k = rng.choice([8 * rng.randint(1, 512), rng.randint(16, 20000), rng.choice([1000, 4096, 11008, 14336])])
        yield (m, n, k, rng.choice([torch.float16, torch.bfloat16]), rng.choice(["none", "relu", "gelu", "gelu_tanh", "silu"]),
               rng.random() < 0.5, rng.random() < 0.3, rng.random() < 0.7, rng.choice(["nn", "nt", "tn", "tt"]))


def test_the_fast_choice_is_the_reference_choice_over_random_problems(h100):
    model = best.selector_model(H100)
    limit = H100_SHARED_MEMORY
    problems = list(_problems(300, seed=11))
    for round_ in range(2):  # the second round from the per-mode caches
        for m, n, k, dtype, act, bias, store_z, tma, layout in problems:
            dt = str(dtype).removeprefix("torch.")
            mode = dict(tma=tma, bias=bias, store_z=store_z)
            default = fit_config(default_config(m, n, k, dtype, gpu=True), dtype, limit, **mode)
            tuned = tuple((c, w) for c, w in ((fit_config(c, dtype, limit, **mode), w)
                                              for c, w in best._nearby(m, n, k, dt, act, H100)) if c is not None)

            def fits(c):
                return fit_error(c, dtype, limit, tma, bias, store_z) is None

            fast = select.choose(model, m, n, k, dtype, tma=tma, default=default, tuned=tuned, fits=fits,
                                 fits_key=(dtype, limit, tma, bias, store_z), aligned=select.rows_aligned(k, layout),
                                 b_rows=select.b_row_major(layout), activation=act)
            config, source, scores = reference_choose(model, m, n, k, dtype, tma=tma, default=default, tuned=tuned,
                                                      fits=fits, aligned=select.rows_aligned(k, layout),
                                                      b_rows=select.b_row_major(layout), activation=act)
            where = (m, n, k, dtype, act, bias, store_z, tma, layout)
            assert (fast.config, fast.source) == (config, source), where
            # Every prediction, bit for bit, in the pool's order.
            assert [(p.config, s, us) for us, p, s in fast.scores] == scores, where


def test_the_fast_choice_is_the_reference_choice_under_a_model_that_discounts_l2_rereads():
    """The H200's model reads an operand's repeated tile reads at its fitted share
    (``Model.l2_reread``) and counts a persistent grid's idle last round (``Model.dram_tail``):
    the fast path and the reference agree on both too."""
    model = best.selector_model("NVIDIA H200")
    assert model.l2_reread < 1.0 and model.dram_tail > 0.0
    for m, n, k, dtype, act, bias, store_z, tma, layout in _problems(120, seed=12):
        default = default_config(m, n, k, dtype, gpu=True)
        fast = select.choose(model, m, n, k, dtype, tma=tma, default=default, aligned=select.rows_aligned(k, layout),
                             b_rows=select.b_row_major(layout), activation=act)
        config, source, scores = reference_choose(model, m, n, k, dtype, tma=tma, default=default, tuned=(),
                                                  fits=lambda c: True, aligned=select.rows_aligned(k, layout),
                                                  b_rows=select.b_row_major(layout), activation=act)
        assert (fast.config, fast.source) == (config, source), (m, n, k)
        assert [(p.config, s, us) for us, p, s in fast.scores] == scores, (m, n, k)


def test_the_exact_gelu_steers_off_four_warp_tiles_that_hold_128_elements_a_thread(h100):
    # On an H200 the exact gelu's epilogue made 2048x3072x768 run 34.5 µs on 128x128 w4
    # against 22.9 on w8 (16.6 and 18.0 without it): the pick without an activation, and
    # with gelu_tanh, is the 4-warp tile; with gelu it must not be.
    plain = best.pick(2048, 3072, 768, torch.bfloat16, "none", True, "nt", device=H100)
    tanh = best.pick(2048, 3072, 768, torch.bfloat16, "gelu_tanh", True, "nt", device=H100)
    exact = best.pick(2048, 3072, 768, torch.bfloat16, "gelu", True, "nt", device=H100)
    assert (plain.config.block_m, plain.config.block_n, plain.config.num_warps) == (128, 128, 4)
    assert tanh.config == plain.config
    assert exact.config.num_warps == 8
    # The term lands on 4-warp tiles of 128x128 and more, on neither 8 warps nor 64x128 at 4.
    model = best.selector_model(H100)

    def us(config, act):
        return select.predict_us(model, config, 2048, 3072, 768, torch.bfloat16, tma=True, layout="nt", activation=act)
    extra_ns = select.EPILOGUE_EXCESS_NS["gelu"][0] * 2048 * 3072 / model.programs * 1e-3
    def candidate(bm, bn, warps, variant, **fields):
        return next(c for c in CANDIDATES if (c.block_m, c.block_n, c.num_warps, c.variant) == (bm, bn, warps, variant)
                    and c.split_k == 1 and not c.stream_k and all(getattr(c, f) == v for f, v in fields.items()))

    four = candidate(128, 128, 4, "tma", warp_specialize=False)
    pointer = candidate(128, 128, 4, "grouped")
    assert us(four, "gelu") == pytest.approx(us(four, "none") + extra_ns)
    assert us(pointer, "gelu") == pytest.approx(us(pointer, "none") + extra_ns * select.EPILOGUE_EXCESS_NS["gelu"][1]
                                                / select.EPILOGUE_EXCESS_NS["gelu"][0])
    # Not on 8 warps, nor where 4 warps hold 64 elements a thread, nor with warp specialization.
    for other in (candidate(128, 128, 8, "tma"), candidate(64, 128, 4, "tma"),
                  candidate(128, 128, 4, "tma", warp_specialize=True)):
        assert us(other, "gelu") == us(other, "none"), other.short()


def test_a_tuned_stream_k_config_with_no_tail_to_cut_is_scored_as_the_plain_kernel(h100):
    # A TMA stream-K entry (a user's tuned file, a nearby shipped entry) meets a problem
    # whose tiles fill whole waves, or whose tail would be cut in one chunk: the launch runs
    # the plain kernel, and the selector scores it so (it once divided by the empty tail).
    model = best.selector_model(H100)
    sk = CANDIDATES[0].model_copy(update=dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3,
                                              variant="tma", flatten=True, stream_k=True))
    plain = sk.model_copy(update={"stream_k": False})
    default = default_config(1536, 2816, 4096, torch.float16, gpu=True)
    for m, n, k in ((1536, 2816, 4096), (1536, 2816, 64), (3072, 2816, 4096), (1536, 1536, 512)):
        units = -(-m // 128) * -(-n // 256)
        assert tail_cut(units, 132, -(-k // 64))[0] == units % 132, (m, n, k)  # nothing cut
        for tuned in (((sk, "env"),), ((plain, "env"),)):
            ranked = select.choose(model, m, n, k, torch.float16, tma=True, default=default, tuned=tuned)
            reference = reference_choose(model, m, n, k, torch.float16, tma=True, default=default, tuned=tuned,
                                         fits=lambda c: True, aligned=True)
            assert (ranked.config, ranked.source) == reference[:2]
        scored = {p.config: us for us, p, _ in select.choose(model, m, n, k, torch.float16, tma=True,
                                                             default=default, tuned=((sk, "env"), (plain, "x"))).scores}
        assert scored[sk] == scored[plain], (m, n, k)


def test_an_unflattened_stream_k_twin_takes_the_flattened_twins_constants(h100):
    model = best.selector_model(H100)
    for sk in (c for c in CANDIDATES if c.stream_k and c.variant == "tma" and not c.flatten):
        flat = sk.model_copy(update={"stream_k": False, "flatten": True})
        found = model.constants_for(sk, True)
        if select.config_id(flat) in model.constants:
            assert found == (model.constants[select.config_id(flat)], flat), sk.short()
        else:  # no flattened twin fitted: the nearest of the same tile, as for any config
            assert found is not None and found[1].block_m == sk.block_m and found[1].block_n == sk.block_n
        assert model.constants_for(sk, False) != found or found is None  # no TMA: the pointer kernel's


def test_unaligned_rows_keep_the_pointer_kernels_when_no_tma_config_can_be_scored(h100):
    # K = 56 rows of A are not 16-aligned; the only TMA config is a tuned entry the model has
    # no constants for: the default stays (leaving it out too once left nothing to score).
    model = best.selector_model(H100)
    odd = CANDIDATES[0].model_copy(update=dict(block_m=32, block_n=64, block_k=16, num_stages=6, variant="tma"))
    assert model.constants_for(odd, True) is None
    default = default_config(1, 3328, 56, torch.float16, gpu=True)
    ranked = select.choose(model, 1, 3328, 56, torch.float16, tma=True, default=default, tuned=((odd, "env"),),
                           aligned=False)
    assert ranked.config == default and ranked.source == "default"


def test_the_shipped_model_knows_its_errors_and_a_file_without_them_keeps_the_margin(h100):
    model = best.selector_model(H100)
    assert set(model.errors) == set(model.constants) and all(0 < e < 1 for e in model.errors.values())
    assert select.Model.from_json(model.to_json()) == model
    plain = select.Model(model.device, model.programs, model.constants)  # a file written before errors
    assert "errors" not in plain.to_json() and select.Model.from_json(plain.to_json()).errors == {}
    for m, n, k, dtype, act, bias, store_z, tma, layout in _problems(100, seed=13):
        default = default_config(m, n, k, dtype, gpu=True)
        for candidate in (model, plain):
            fast = select.choose(candidate, m, n, k, dtype, tma=tma, default=default, aligned=select.rows_aligned(k, layout))
            config, source, _ = reference_choose(candidate, m, n, k, dtype, tma=tma, default=default, tuned=(),
                                                 fits=lambda c: True, aligned=select.rows_aligned(k, layout))
            assert (fast.config, fast.source) == (config, source)
    # Within the uncertainty, the default stays and says why.
    fast = next(c for c in CANDIDATES if c.block_m == 64 and c.block_n == 256)
    default = default_config(4096, 4096, 4096, torch.float16, gpu=True)
    constants = {select.config_id(fast): select.Constants(1.0, 0.01, 0.9, 2.0),
                 select.config_id(default): select.Constants(2.2, 0.022, 0.9, 2.0)}  # ~10 % slower
    for error, winner in ((0.5, default), (0.05, fast)):
        toy = select.Model("GPU X", 132, constants, {key: error for key in constants})
        choice = select.choose(toy, 4096, 4096, 4096, torch.float16, tma=True, default=default)
        assert choice.config == winner
    assert "uncertainty" in select.choose(select.Model("GPU X", 132, constants, {key: 0.5 for key in constants}),
                                          4096, 4096, 4096, torch.float16, tma=True, default=default).reason


def test_resolve_is_pick_for_this_machine_and_explain_and_the_replay_call_pick(h100):
    for m, n, k, dtype, act, bias, store_z, tma, layout in _problems(60, seed=12):
        found = best.pick(m, n, k, dtype, act, bias, layout, device=H100, limit=H100_SHARED_MEMORY, tma=tma,
                          store_z=store_z, gpu=not runtime.INTERPRETER)
        assert best.resolve(m, n, k, dtype, act, bias, h100, store_z, tma, layout) == (found.config, found.source)
    # An exact tuned entry wins, and says so; its ranking is there when asked for.
    entry = next(e for e in best.load(best.SHIPPED_DIR / "nvidia-h100-80gb-hbm3.json").entries
                 if (e.M, e.N, e.K, e.dtype, e.layout) == (8192, 8192, 8192, "float16", "nn"))
    found = best.pick(8192, 8192, 8192, torch.float16, layout="nn", device=H100, rank=True)
    assert found.exact and found.config == entry.config and found.source == "shipped"
    assert "exactly this problem" in found.reason and found.choice is not None
    assert best.pick(8192, 8192, 8192, torch.float16, layout="nn", device=H100).choice is None
    # No model for the device: the default, and why.
    found = best.pick(100, 200, 300, torch.float16, device="GPU Z")
    assert found.source == "default" and "no selector model" in found.reason
    # The default is the one for the call's kernel: a skinny tile on the TMA kernel where that runs.
    for tma in (True, False):
        found = best.pick(100, 2304, 2048, torch.float16, layout="nt", device="GPU Z", tma=tma)
        assert found.config == found.default == default_config(100, 2304, 2048, torch.float16, gpu=True, tma=tma)
        assert (found.config.variant == "tma") == tma
    for path in ("autokernel/cli/explain.py", "benchmarks/fit_selector.py"):
        text = (ROOT / path).read_text()
        assert "best.pick(" in text and "select.choose(" not in text and "best._nearby" not in text, path


def test_tma_alignment_of_a_problem_is_the_kernels_rule_on_its_operands():
    for m in (1, 7, 8, 24):
        for n in (1, 8, 12, 16):
            for k in (1, 8, 9, 16):
                for layout in ("nn", "nt", "tn", "tt"):
                    for dtype in ("float16", "bfloat16", "float32"):
                        p = Problem(m, n, k, dtype, layout=layout)
                        a, b, _ = p.make_inputs(torch.device("cpu"), seed=0)
                        c = torch.empty(m, n, dtype=p.torch_dtype)
                        expected = all(t.data_ptr() % 16 == 0 for t in (a, b, c)) and tma_operands(a, b, c) is not None
                        assert select.tma_aligned(m, n, k, p.torch_dtype, layout) == expected, (m, n, k, layout, dtype)


def test_tma_runs_for_a_problem_as_for_its_tensors(monkeypatch):
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(runtime, "has_tma", lambda: True)
    for m, n, k, layout in [(64, 64, 64, "nt"), (64, 60, 64, "nn"), (8, 1000, 1000, "nt"), (7, 64, 64, "tn"),
                            (64, 64, 0, "nn")]:
        p = Problem(m, n, k, "float16", layout=layout)
        a, b, _ = p.make_inputs(torch.device("cpu"), seed=0)
        c = torch.empty(m, n, dtype=torch.float16)
        assert api.tma_runs_for(m, n, k, torch.float16, layout) == api.tma_runs(a, b, c), (m, n, k, layout)
    monkeypatch.setattr(runtime, "has_tma", lambda: False)
    assert not api.tma_runs_for(64, 64, 64, torch.float16, "nt")


def test_bench_untuned_times_the_default_matmul_falls_back_to(monkeypatch):
    """``bench --untuned`` and the evaluator's config-less path time the default that
    ``best.pick`` anchors on: for a skinny 16-bit problem the TMA kernel takes, its thin TMA
    tile; the pointer tile where the operands have no descriptor or the GPU no TMA."""
    from autokernel.evaluate import problem_default

    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(runtime, "has_tma", lambda: True)
    for m, n, k, layout in [(128, 4096, 4096, "nt"), (200, 1000, 3000, "nt"), (100, 4000, 4000, "nn"),
                            (100, 4000, 4001, "nt"), (4096, 4096, 4096, "nt"), (16, 4096, 4096, "nt")]:
        p = Problem(m, n, k, "bfloat16", layout=layout)
        tma = api.tma_runs_for(m, n, k, torch.bfloat16, layout)
        expected = best.pick(m, n, k, torch.bfloat16, "none", False, layout, device="NVIDIA H100 80GB HBM3",
                             gpu=True, tma=tma).default
        assert problem_default(p) == expected, (m, n, k, layout)
    assert problem_default(Problem(128, 4096, 4096, "bfloat16", layout="nt")).variant == "tma"
    assert problem_default(Problem(100, 4000, 4001, "bfloat16", layout="nt")).variant == "grouped"  # no descriptor
    monkeypatch.setattr(runtime, "has_tma", lambda: False)
    assert problem_default(Problem(128, 4096, 4096, "bfloat16", layout="nt")).variant == "grouped"


def test_bench_backward_times_the_defaults_linear_falls_back_to(monkeypatch):
    """The training step's config-less path (``bench --backward --untuned``) gives each of
    its three GEMMs the default of its own shape and layout as ``best.pick`` anchors on:
    forward nt, dX nn, dW tn; TMA-aware like the forward's ``problem_default``."""
    from autokernel.evaluate import linear_defaults

    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(runtime, "has_tma", lambda: True)
    for m, n, k in [(128, 4096, 4096), (200, 1000, 3000), (4096, 4096, 4096), (100, 4000, 4001), (16, 4096, 4096)]:
        got = linear_defaults(Problem(m, n, k, "bfloat16"))
        shapes = [(m, n, k, "nt"), (m, k, n, "nn"), (n, k, m, "tn")]
        for config, (gm, gn, gk, layout) in zip(got, shapes, strict=True):
            tma = api.tma_runs_for(gm, gn, gk, torch.bfloat16, layout)
            expected = best.pick(gm, gn, gk, torch.bfloat16, "none", False, layout, device="NVIDIA H100 80GB HBM3",
                                 gpu=True, tma=tma).default
            assert config == expected, (m, n, k, layout)
    # dX of a 128-token step (128 x 4096 x 4096, nn) takes the thin TMA tile; with K = 4001
    # the rows of X and of the weight have no descriptor: no GEMM takes a TMA tile.
    assert linear_defaults(Problem(128, 4096, 4096, "bfloat16"))[1].variant == "tma"
    assert "tma" not in [c.variant for c in linear_defaults(Problem(100, 4000, 4001, "bfloat16"))]


def test_pick_overhead_benchmark_reports_both_figures():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pick_overhead.py"), "--n", "12", "--json"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("pick", "plan"):
        assert out[key]["shapes"] == 12 and 0 < out[key]["median_us"] <= out[key]["p90_us"]


def test_an_entry_tuned_on_one_wave_takes_the_default_tile_order_where_order_matters(h100):
    g1 = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=1, num_warps=8, num_stages=3, variant="grouped")
    # Tuned on 2048 x 2048 (128 tiles, every program at once on 132 SMs): its order was never timed.
    reordered = best.reorderable(g1, 2048, 2048, 132)
    assert reordered == g1.model_copy(update={"group_m": best.ENTRY_GROUP_M})
    assert best.reorderable(g1, 4096, 4096, 132) is None  # 512 tiles: the order was timed
    assert best.reorderable(reordered, 2048, 2048, 132) is None and best.reorderable(g1, 2048, 2048, None) is None
    # As a candidate: reordered where the problem has several waves and enough rows of tiles
    # for the order to matter, as tuned elsewhere.
    assert best._as_candidate(6144, 6144, g1, "shipped, 2048x2048x2048", (2048, 2048), 132) == \
        (reordered, "shipped, 2048x2048x2048, g8")
    assert best._as_candidate(512, 16384, g1, "w", (2048, 2048), 132) == (g1, "w")  # 4 rows of tiles
    assert best._as_candidate(1024, 2048, g1, "w", (2048, 2048), 132) == (g1, "w")  # 64 tiles, one wave
    # The shipped 2048³ nn entry: exact on its own shape, reordered as a candidate at 6144³.
    assert best.resolve(2048, 2048, 2048, torch.bfloat16, "none", False, h100, layout="nn")[0].group_m == 1
    choice = best.choice(6144, 6144, 6144, torch.bfloat16, "none", False, h100, layout="nn")
    entries = [s for s in choice.ranked if s.source.startswith("shipped, 2048x2048x2048")]
    assert entries and all(s.config.group_m == best.ENTRY_GROUP_M and s.source.endswith(", g8") for s in entries)
