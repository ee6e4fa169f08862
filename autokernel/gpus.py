"""The datasheet of the GPUs autokernel knows: peaks, DRAM bandwidth, SM count and
architecture, and how to tell them from ``torch.cuda.get_device_name()``. Data only: the
roofline draws its ceilings from it, and the selector carries a model fitted on one GPU to
another of the same architecture with it (``best.selector_model``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet peaks of one GPU, dense (no 2:4 sparsity), tensor cores accumulating in fp32.

    fp16_tflops: fp16 and bf16 tensor-core peak. tf32_tflops: tf32 tensor-core peak (what
    a float32 ``tl.dot`` uses). fp32_tflops: non-tensor fp32 FMA peak. fp8_tflops: None
    where the GPU has no fp8 tensor cores. bandwidth_gbs: DRAM bandwidth in GB/s.
    patterns: regular expressions that recognise ``torch.cuda.get_device_name()``;
    aliases: short names accepted by :func:`lookup_gpu`. sms: streaming multiprocessors.
    arch: the compute capability as ``sm_XY``: GPUs of one architecture run the same
    kernels, so a model fitted on one of them can be carried to another (``best``).
    """

    name: str
    fp16_tflops: float
    tf32_tflops: float
    fp32_tflops: float
    fp8_tflops: float | None
    bandwidth_gbs: float
    patterns: tuple[str, ...] = field(repr=False)
    aliases: tuple[str, ...] = field(default=(), repr=False)
    note: str = ""
    sms: int | None = None
    arch: str | None = None

    def compute_tflops(self, dtype: str) -> float:
        """The compute ceiling for a GEMM on ``dtype`` inputs, in TFLOP/s."""
        return self.tf32_tflops if dtype == "float32" else self.fp16_tflops

    def to_dict(self) -> dict:
        d = asdict(self)
        del d["patterns"], d["aliases"]
        return d


# Hopper and Ada datasheets quote sparse peaks; the dense figure is half of it.
GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("A100 SXM4 80GB", 312.0, 156.0, 19.5, None, 2039.0,
            (r"\ba100.*sxm.*80",), ("a100", "a100 sxm", "a100 sxm4", "a100 80gb"),
            "80 GB HBM2e", 108, "sm_80"),
    GpuSpec("A100 SXM4 40GB", 312.0, 156.0, 19.5, None, 1555.0,
            (r"\ba100.*sxm.*40",), ("a100 40gb", "a100 sxm 40gb"), "40 GB HBM2", 108, "sm_80"),
    GpuSpec("A100 PCIe 80GB", 312.0, 156.0, 19.5, None, 1935.0,
            (r"\ba100.*80gb.*pcie", r"\ba100.*pcie.*80"), ("a100 pcie", "a100 pcie 80gb"),
            "80 GB HBM2e", 108, "sm_80"),
    GpuSpec("A100 PCIe 40GB", 312.0, 156.0, 19.5, None, 1555.0,
            (r"\ba100.*pcie.*40", r"\ba100.*40gb.*pcie"), ("a100 pcie 40gb",), "40 GB HBM2", 108, "sm_80"),
    GpuSpec("H100 SXM5", 989.5, 494.5, 67.0, 1979.0, 3350.0,
            (r"\bh100.*sxm", r"\bh100.*hbm3"), ("h100", "h100 sxm", "h100 sxm5"),
            "80 GB HBM3", 132, "sm_90"),
    GpuSpec("H100 PCIe", 756.5, 378.0, 51.0, 1513.0, 2000.0,
            (r"\bh100.*pcie",), ("h100 pcie",), "80 GB HBM2e", 114, "sm_90"),
    GpuSpec("H100 NVL", 835.5, 417.5, 60.0, 1670.5, 3900.0,
            (r"\bh100.*nvl",), ("h100 nvl",), "94 GB HBM3", 132, "sm_90"),
    GpuSpec("H200 SXM", 989.5, 494.5, 67.0, 1979.0, 4800.0,
            (r"\bh200\b(?!.*nvl)",), ("h200", "h200 sxm"), "141 GB HBM3e", 132, "sm_90"),
    GpuSpec("H200 NVL", 835.5, 417.5, 60.0, 1670.5, 4800.0,
            (r"\bh200.*nvl",), ("h200 nvl",), "141 GB HBM3e", 132, "sm_90"),
    GpuSpec("L40S", 362.05, 183.0, 91.6, 733.0, 864.0,
            (r"\bl40s\b",), ("l40s",), "48 GB GDDR6", 142, "sm_89"),
    GpuSpec("RTX 4090", 165.2, 82.6, 82.6, 330.3, 1008.0,
            (r"\b4090\b(?! d\b)",), ("4090", "rtx 4090", "geforce rtx 4090"),
            "fp32-accumulate peaks", 128, "sm_89"),
)


def _normalize(name: str) -> str:
    text = re.sub(r"[-_\s]+", " ", name.lower()).strip()
    return text.removeprefix("nvidia ").strip()


def detect_gpu(device_name: str) -> GpuSpec | None:
    """The table entry for a ``torch.cuda.get_device_name()`` string; None when the name
    matches no entry."""
    text = _normalize(device_name)
    for spec in GPUS:
        if any(re.search(p, text) for p in spec.patterns):
            return spec
    return None


def lookup_gpu(name: str) -> GpuSpec:
    """A table entry by name, short alias ("A100", "H100 PCIe") or full device name.

    Raises ValueError naming the known GPUs when nothing matches.
    """
    text = _normalize(name)
    for spec in GPUS:
        if text == _normalize(spec.name) or text in spec.aliases:
            return spec
    spec = detect_gpu(name) if text else None
    if spec is None:
        known = ", ".join(s.name for s in GPUS)
        raise ValueError(f"unknown GPU {name!r}; known: {known}")
    return spec
