"""Roofline arithmetic, the device table and its lookups, the chart."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from autokernel.records import Problem
from autokernel.roofline import GPUS, analyze, detect_gpu, lookup_gpu, measure_ceilings, plot_roofline

# The seeds' example: a 4096^3 fp16 GEMM on an A100 80GB PCIe taken at 1939 GB/s.
SEEDS_A100 = replace(lookup_gpu("A100 PCIe"), bandwidth_gbs=1939.0)


def test_seed_example_memory_bound_is_in_tflops_not_thousandths() -> None:
    r = analyze((4096, 4096, 4096), SEEDS_A100)
    assert r.flops == 2 * 4096**3
    assert r.bytes == 3 * 4096 * 4096 * 2
    assert r.arithmetic_intensity == pytest.approx(1365.333, rel=1e-5)
    assert r.memory_bound_tflops == pytest.approx(2647.4, rel=1e-4)  # the seeds printed 2.65
    assert r.compute_bound_tflops == 312.0
    assert r.roofline_tflops == 312.0
    assert r.bound == "compute"
    assert r.ridge_point == pytest.approx(312e12 / 1939e9)
    assert r.achieved_tflops is None and r.efficiency is None


def test_achieved_and_efficiency_from_a_time() -> None:
    r = analyze(Problem(4096, 4096, 4096), "A100", ms=0.5)
    assert r.achieved_tflops == pytest.approx(2 * 4096**3 / 0.5e-3 / 1e12)
    assert r.efficiency == pytest.approx(r.achieved_tflops / 312.0)


def test_small_problem_is_memory_bound() -> None:
    # 256 x 256 x 16: intensity 2*256*256*16 / ((256*16*2 + 256*256) * 2) = 14.2 FLOP/B, far left of the ridge.
    r = analyze((256, 256, 16), "H100")
    assert r.arithmetic_intensity == pytest.approx(2 * 256 * 256 * 16 / ((2 * 256 * 16 + 256 * 256) * 2))
    assert r.bound == "memory"
    assert r.roofline_tflops == pytest.approx(3350e9 * r.arithmetic_intensity / 1e12)
    assert r.roofline_tflops < r.compute_bound_tflops


def test_float32_uses_tf32_peak_and_bias_counts_bytes() -> None:
    fp32 = analyze(Problem(1024, 1024, 1024, "float32"), "A100")
    assert fp32.compute_bound_tflops == 156.0
    assert fp32.bytes == 3 * 1024 * 1024 * 4
    with_bias = analyze(Problem(1024, 1024, 1024, bias=True), "A100")
    assert with_bias.bytes == 3 * 1024 * 1024 * 2 + 1024 * 2


def test_analyze_rejects_empty_problems_and_bad_times() -> None:
    with pytest.raises(ValueError, match="M, N and K > 0"):
        analyze((0, 16, 16), "A100")
    with pytest.raises(ValueError, match="> 0 ms"):
        analyze((16, 16, 16), "A100", ms=0)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("H100", "H100 SXM5"),
        ("h100-sxm", "H100 SXM5"),
        ("H100 PCIe", "H100 PCIe"),
        ("A100", "A100 SXM4 80GB"),
        ("a100_pcie", "A100 PCIe 80GB"),
        ("H200", "H200 SXM"),
        ("4090", "RTX 4090"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
    ],
)
def test_lookup_by_short_or_device_name(name: str, expected: str) -> None:
    assert lookup_gpu(name).name == expected


def test_h100_sxm_datasheet_numbers() -> None:
    h100 = lookup_gpu("H100")
    assert (h100.fp16_tflops, h100.tf32_tflops, h100.fp8_tflops, h100.bandwidth_gbs) == (989.5, 494.5, 1979.0, 3350.0)
    a100 = lookup_gpu("A100")
    assert (a100.fp16_tflops, a100.tf32_tflops, a100.fp32_tflops, a100.fp8_tflops, a100.bandwidth_gbs) == (
        312.0, 156.0, 19.5, None, 2039.0)


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GH200 480GB", None),
        ("cpu (triton interpreter)", None),
    ],
)
def test_detect_from_torch_device_names(device: str, expected: str | None) -> None:
    spec = detect_gpu(device)
    assert (spec.name if spec else None) == expected


def test_every_table_entry_is_found_by_its_own_name() -> None:
    for spec in GPUS:
        assert lookup_gpu(spec.name) is spec


def test_unknown_gpu_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU 'B200'; known: A100 SXM4 80GB, .*RTX 4090"):
        lookup_gpu("B200")


def test_measure_ceilings_needs_a_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        measure_ceilings()


def test_plot_writes_a_png(tmp_path) -> None:
    r = analyze((4096, 4096, 4096), "A100", ms=0.6)
    out = plot_roofline([r, analyze((256, 256, 16), "A100")], lookup_gpu("A100"), tmp_path / "sub" / "roof.png",
                        trials=[(r.arithmetic_intensity, 150.0), (r.arithmetic_intensity, 200.0)])
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 5_000 < len(data) < 500_000
