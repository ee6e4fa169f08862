"""A GPU no model was fitted for takes the shipped model of its architecture fitted on the nearest GPU,
carried over by the datasheets' ratios (SM count, DRAM bandwidth, throughput per SM); others get none."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from autokernel import best, gpus, runtime, select
from autokernel.cli import app

H100 = "NVIDIA H100 80GB HBM3"
ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("shipped_files")


def test_the_datasheet_knows_each_gpus_sms_and_architecture():
    assert gpus.detect_gpu(H100).name == "H100 SXM5"
    for name, sms, arch in [("NVIDIA H200", 132, "sm_90"), ("NVIDIA H100 PCIe", 114, "sm_90"),
                            ("NVIDIA A100-SXM4-80GB", 108, "sm_80"), ("NVIDIA L40S", 142, "sm_89")]:
        spec = gpus.detect_gpu(name)
        assert (spec.sms, spec.arch) == (sms, arch), name
    assert all(spec.sms and spec.arch for spec in gpus.GPUS)
    assert gpus.detect_gpu("GPU Z") is None


def test_an_h100_nvl_takes_the_h100_model_with_its_dram_bandwidth_and_clock():
    h100 = best.selector_model(H100)
    nvl = best.selector_model("NVIDIA H100 NVL")
    assert h100.based_on is None and nvl is not None and nvl.device == "NVIDIA H100 NVL"
    assert nvl.programs == 132 and "fitted on NVIDIA H100 80GB HBM3" in nvl.based_on
    assert nvl.constants.keys() == h100.constants.keys() and nvl.errors == h100.errors
    ratio, per_sm = 3900.0 / 3350.0, 835.5 / 989.5
    for key, c in h100.constants.items():
        d = nvl.constants[key]
        assert (d.d, d.r, d.s) == (c.d, c.r, c.s)
        assert d.e == pytest.approx(c.e * ratio) and d.a == pytest.approx(c.a / per_sm)
        assert d.g == pytest.approx(c.g * per_sm)
    # A memory-bound problem is predicted faster there, a compute-bound one slower.
    key = next(iter(h100.constants))
    c, d = h100.constants[key], nvl.constants[key]
    assert d.predict_us(1, 64, 256e6) < c.predict_us(1, 64, 256e6) * 0.9
    assert d.predict_us(40, 4096, 1e3) > c.predict_us(40, 4096, 1e3) * 1.1


def test_the_h200_has_a_model_of_its_own():
    """Fitted on the H200's sweeps with its DRAM's ceiling: the decode tile's bandwidth beyond
    the H100's copy bandwidth, no carried gain; what those sweeps do not measure (configs they
    never timed, the layout factor: nearly every problem was nt) is the H100's, carried."""
    h100, h200 = best.selector_model(H100), best.selector_model("NVIDIA H200")
    assert h200.device == "NVIDIA H200" and h200.based_on is None and h200.dram_gain == 1.0
    assert h200.programs == 132
    decode = select.config_id(select.CANDIDATES[0])
    assert h200.constants[decode].e > 1.0 and h200.constants[decode] != h100.constants[decode]
    assert h200.constants.keys() >= h100.constants.keys()
    # the layout factor: the H100's, carried, unless the H200's sweeps hold ROW_MAJOR_MIN or more
    # problems with B row-major for the config (its training-GEMM sweep: nn and tn)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fit_selector

    row_major = fit_selector.row_major_counts(
        fit_selector.read_rows(sorted(str(p) for p in (ROOT / "benchmarks" / "results").glob("*_h200*.jsonl*"))))
    own = {key for key, c in h100.constants.items() if h200.constants[key].r != c.r}
    assert own and all(row_major[key] >= fit_selector.ROW_MAJOR_MIN for key in own)
    assert all(h200.constants[key].r == c.r for key, c in h100.constants.items()
               if row_major[key] < fit_selector.ROW_MAJOR_MIN)
    for config in select.CANDIDATES:
        for tma in (True, False):
            if h100.constants_for(config, tma) is not None:
                assert h200.constants_for(config, tma) is not None, (config.short(), tma)


def test_an_h200_nvl_takes_the_nearest_model_the_h200s():
    h200, nvl = best.selector_model("NVIDIA H200"), best.selector_model("NVIDIA H200 NVL")
    assert "fitted on NVIDIA H200" in nvl.based_on and nvl.dram_gain == 1.0
    per_sm = 835.5 / 989.5
    for key, c in h200.constants.items():
        d = nvl.constants[key]
        assert d.e == pytest.approx(c.e) and d.b == pytest.approx(c.b / per_sm)


def test_a_grid_short_of_the_sms_gets_the_dram_gain_in_proportion():
    """A faster DRAM lifts a grid whose reads in flight fill the SMs by the whole ratio, one of
    fewer programs by the share of the SMs it holds; a model on its own GPU is unchanged."""
    config = select.CANDIDATES[0]  # 16x64x128, 4 stages: 80 KiB of reads in flight per program
    assert (config.block_m, config.block_n, config.block_k, config.num_stages, config.split_k) == (16, 64, 128, 4, 1)
    memory_bound = {select.config_id(config): select.Constants(1e-6, 1e-9, 1.0, 0.0)}
    gain = 1.5

    def us(m, n, k, dram_gain):
        model = select.Model("x", 132, dict(memory_bound), dram_gain=dram_gain)
        return select.predict_us(model, config, m, n, k, torch.float16, tma=False)

    for n, programs in [(64 * 33, 33), (64 * 66, 66), (64 * 120, 120)]:
        reach = programs * config.num_stages * (16 + 64) * 128 * 2 / (132 * select.REACH_BYTES)
        assert us(1, n, 8192, gain) / us(1, n, 8192, 1.0) == pytest.approx(gain / (1 + (gain - 1) * reach), rel=1e-3)
    assert us(1, 64 * 264, 8192, gain) == pytest.approx(us(1, 64 * 264, 8192, 1.0))
    h100 = best.selector_model(H100)
    assert h100.dram_gain == 1.0 and best.selector_model("NVIDIA H100 PCIe").dram_gain == 1.0
    assert best.selector_model("NVIDIA H100 NVL").dram_gain == pytest.approx(3900.0 / 3350.0)


def test_the_h200_splits_k_for_few_rows_against_a_weight_that_leaves_sms_idle():
    """A few rows against a weight of 5-6k x 5k (as nn.Linear lays it out): the unsplit 16x64
    tile's 80-88 programs hold 80-88 of 132 SMs and reach less of the H200's faster DRAM than
    the datasheets' ratio promises; split in 4 or 8 they hold every SM. Measured on an H200:
    1x5120x5504 23.7 µs unsplit, 18.0 in 4, 19.0 in 8; 4x5632x4736 18.5, 17.1, 18.1."""
    for m, n, k in [(1, 5120, 5504), (4, 5632, 4736)]:
        found = best.pick(m, n, k, torch.float16, layout="nt", device="NVIDIA H200")
        assert found.config.block_m == 16 and found.config.split_k in (4, 8), found.config.short()


def test_an_h100_pcie_takes_fewer_sms_and_slower_tiles():
    h100, pcie = best.selector_model(H100), best.selector_model("NVIDIA H100 PCIe")
    assert pcie.programs == 114
    per_sm = (756.5 / 114) / (989.5 / 132)
    key = next(iter(h100.constants))
    c, d = h100.constants[key], pcie.constants[key]
    assert d.a == pytest.approx(c.a / per_sm) and d.b == pytest.approx(c.b / per_sm) and per_sm < 1
    assert d.e == pytest.approx(c.e * 2000.0 / 3350.0)
    assert d.g == pytest.approx(c.g * per_sm)


@pytest.mark.parametrize("device", ["NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "GPU Z"])
def test_no_model_for_another_architecture_or_an_unknown_gpu(device):
    assert best.selector_model(device) is None
    found = best.pick(100, 200, 300, torch.float16, device=device)
    assert found.source == "default" and "no selector model" in found.reason


def test_a_sibling_ranks_and_picks_like_a_fitted_model():
    """On the H200 NVL every problem is ranked by the carried model (no default for want of a
    model), and a memory-bound decode problem's pick is predicted faster than on the H100."""
    for m, n, k in [(1, 4096, 4096), (128, 8192, 8192), (3000, 3000, 3000), (8192, 8192, 1024)]:
        found = best.pick(m, n, k, torch.bfloat16, layout="nt", device="NVIDIA H200 NVL", rank=True)
        assert found.choice is not None and "no selector model" not in found.reason
        times = [s.predicted_us for s in found.choice.ranked if s.predicted_us is not None]
        assert times == sorted(times) and all(math.isfinite(t) and t > 0 for t in times)
    on = {d: best.pick(1, 8192, 8192, torch.float16, layout="nt", device=d, rank=True).choice.ranked[0].predicted_us
          for d in (H100, "NVIDIA H200 NVL")}
    assert on["NVIDIA H200 NVL"] < on[H100] * 0.85


def test_explain_says_the_model_was_carried():
    runner = CliRunner()
    result = runner.invoke(app, ["explain", "--m", "128", "--n", "8192", "--k", "8192", "-d", "bf16",
                                 "--device", "NVIDIA H100 NVL"])
    assert result.exit_code == 0, result.output
    assert "no model was fitted for this GPU" in result.stdout and "1.16x its DRAM bandwidth" in result.stdout
    out = json.loads(runner.invoke(app, ["explain", "--m", "64", "--n", "64", "--k", "64", "--device",
                                         "NVIDIA H100 NVL", "--json"]).stdout)
    assert out["model_carried"].startswith("fitted on NVIDIA H100 80GB HBM3")
    for device in ("h100", "h200"):
        fitted = json.loads(runner.invoke(app, ["explain", "--m", "64", "--n", "64", "--k", "64", "--device", device,
                                                "--json"]).stdout)
        assert fitted["model_carried"] is None, device


def test_the_sm_count_of_this_gpu_wins_over_the_datasheets(monkeypatch):
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime, "device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(runtime, "sm_count", lambda: 120)
    assert best.sibling_model("NVIDIA H200").programs == 120
    assert best.sibling_model("NVIDIA H200 NVL").programs == 132  # not this machine's GPU
    assert select.carried(best.selector_model(H100), "x", 7, 1.0, 1.0).programs == 7


def test_a_hopper_gpu_the_datasheet_does_not_know_is_placed_by_its_capability(monkeypatch):
    """The GPU at hand with a name the table lacks: its compute capability says Hopper, so it
    takes the H100's model with its own SM count, bandwidth and clock taken as the H100's; an
    Ampere one, or such a name that is not the GPU at hand, gets none."""
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(runtime, "device_name", lambda device=None: "NVIDIA H999")
    monkeypatch.setattr(runtime, "sm_count", lambda: 78)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    h100, here = best.selector_model(H100), best.sibling_model("NVIDIA H999")
    assert gpus.detect_gpu("NVIDIA H999") is None and here.programs == 78
    assert here.constants == h100.constants and "1.00x its DRAM bandwidth" in here.based_on
    assert best.sibling_model("NVIDIA H998") is None  # not the GPU at hand: nothing tells its architecture
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert best.sibling_model("NVIDIA H999") is None


def test_any_model_of_the_architecture_is_carried_as_the_shipped_one():
    # A selector file fitted on the H100 (e.g. the one before a change) reaches an H100 NVL as
    # the shipped model does, and no GPU of another architecture.
    h100 = best.selector_model(H100)
    carried = best.carry(h100, "NVIDIA H100 NVL")
    shipped = best.selector_model("NVIDIA H100 NVL")
    assert carried.constants == shipped.constants and carried.dram_gain == shipped.dram_gain
    assert best.carry(h100, "NVIDIA A100-SXM4-80GB") is None and best.carry(h100, "GPU Z") is None
