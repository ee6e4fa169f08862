"""Programs of the pointer kernels that share an SM: how many fit at once, which of the busiest
SM's programs run beside another, and what each of those costs in the selector's model."""

from __future__ import annotations

import json

import pytest
import torch

from autokernel import best, select
from autokernel.candidates import CANDIDATES
from autokernel.config import KernelConfig
from autokernel.kernels import fit

DECODE = next(c for c in CANDIDATES if (c.block_m, c.block_n, c.block_k, c.split_k, c.variant) == (16, 64, 128, 1, "grouped"))
TMA = next(c for c in CANDIDATES if c.variant == "tma" and not c.stream_k)


pytestmark = pytest.mark.usefixtures("shipped_files")


def test_an_sm_holds_as_many_programs_as_its_shared_memory_and_threads_allow():
    # 16x64x128 at 4 stages: three 20 KiB buffers (mma.sync keeps one stage in registers),
    # 61 KiB with the hardware's reserve: three to an SM's 228 KiB.
    assert fit.shared_memory_need(DECODE, torch.float16, tma=False) == 3 * (16 * 128 + 128 * 64) * 2
    assert fit.programs_per_sm(DECODE, torch.float16, tma=False) == 3
    wide = DECODE.model_copy(update={"block_n": 128})
    assert fit.programs_per_sm(wide, torch.float16, tma=False) == 2  # 108 KiB each
    big = KernelConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")
    assert fit.programs_per_sm(big, torch.float16, tma=False) == 1  # 128 KiB
    # Threads bind where shared memory would allow more: 8 warps, 8 programs of 256 threads.
    tiny = KernelConfig(block_m=64, block_n=64, block_k=32, num_warps=8, num_stages=1, variant="grouped")
    assert fit.programs_per_sm(tiny, torch.float16, tma=False) == fit.SM_THREADS // 256


@pytest.mark.parametrize("units, per_sm, shared", [
    (132, 3, 0),   # one program an SM
    (133, 3, 1),   # the busiest SM holds two at once: one beside the other
    (264, 3, 1),
    (396, 3, 2),   # three at once
    (397, 3, 2),   # four: a group of three, then one alone
    (529, 3, 3),   # five: three, then two
    (1000, 1, 0),  # one at a time: whole rounds
])
def test_the_busiest_sms_programs_beside_another(units, per_sm, shared):
    assert select.co_resident(units, 132, per_sm) == shared


def test_each_program_beside_another_costs_its_share_of_a_round():
    c = select.Constants(a=2.0, b=0.01, e=0.9, d=1.0, g=0.9, r=0.0, s=0.4)
    waves, k_per, nbytes, l2 = select.features(DECODE, 16, 64 * 396, 4096, torch.float16, False, 132)
    shared = select.sharing(DECODE, 16, 64 * 396, torch.float16, False, 132)
    assert (waves, shared) == (3.0, 2)
    alone = select.Constants(a=2.0, b=0.01, e=0.9, d=0.0, g=1.0, r=0.0, s=0.4)
    assert alone.predict_us(waves, k_per, 0.0, 0.0, shared=shared) == pytest.approx(  # no bytes: compute alone
        (3.0 - 0.6 * 2) * (2.0 + 0.01 * k_per))
    assert c.predict_us(waves, k_per, nbytes, l2, shared=shared) < c.predict_us(waves, k_per, nbytes, l2)
    # Constants fitted without the share count whole rounds, whatever shares the SM.
    old = select.Constants(*c.values()[:6])
    assert old.s is None and old.predict_us(waves, k_per, nbytes, l2, shared=shared) == old.predict_us(
        waves, k_per, nbytes, l2)
    # The persistent TMA kernel runs one program an SM: nothing shares.
    assert select.sharing(TMA, 4096, 4096, torch.float16, True, 132) == 0


def test_the_share_is_written_to_the_selector_file_and_read_back():
    model = select.Model("GPU X", 132, {select.config_id(DECODE): select.Constants(1.0, 0.01, 0.9, 2.0, 0.8, 0.1, 0.45)})
    back = select.Model.from_json(model.to_json())
    assert back.constants == model.constants and back.constants[select.config_id(DECODE)].s == 0.45
    # A file fitted before the share (six values) reads with none.
    data = json.loads(model.to_json())
    data["constants"] = {k: v[:6] for k, v in data["constants"].items()}
    assert select.Model.from_json(json.dumps(data)).constants[select.config_id(DECODE)].s is None


def test_the_shipped_model_shares_the_decode_tiles_sm_and_carries_it():
    h100 = best.selector_model("NVIDIA H100 80GB HBM3")
    shares = {select.config_id(c): h100.constants[select.config_id(c)].s for c in CANDIDATES
              if select.config_id(c) in h100.constants and select.kernel_kind(c, True) in select.SHARING_KINDS}
    assert shares and all(0.0 < s < 1.0 for s in shares.values())
    nvl = best.selector_model("NVIDIA H100 NVL")
    assert nvl.constants[select.config_id(DECODE)].s == h100.constants[select.config_id(DECODE)].s


def test_a_decode_problem_the_h200_ran_faster_split():
    # 2x5120x3328 fp16 on an H200: 80 tiles of 16x64, fewer than the SMs; split in 4, 320
    # programs, two or three to an SM. Raced side by side (docs/runs/select/
    # selector_ab_shared_h200.jsonl): unsplit 14.2 µs, split in 4 12.3 µs. Counted as whole
    # rounds the model kept the unsplit tile.
    tma = select.tma_aligned(2, 5120, 3328, torch.float16, "nt")
    config = best.pick(2, 5120, 3328, torch.float16, "none", False, "nt", device="NVIDIA H200", limit=232448,
                       tma=tma).config
    assert (config.block_m, config.block_n, config.split_k) == (16, 64, 4)
