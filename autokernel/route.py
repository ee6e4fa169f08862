"""Which library runs a GEMM: autokernel's Triton kernels, or cuBLAS where it is predicted
clearly faster. Off by default: every GEMM runs on the Triton kernels.

``AUTOKERNEL_BACKEND=auto`` (read when a layout is first planned) or ``autokernel.route.use("auto")``
turns it on. Then each float16 / bfloat16 GEMM given no config compares two predictions once
per layout: the selector model's time for the config it picks (``best``), and cuBLAS's time
from a table of cuBLAS measurements on the GPU (``CublasModel``: GPU time over the datasheet
roofline, interpolated between the nearest measured shapes; a table measured on another GPU
of the same architecture speaks too, comparing the two libraries where it was measured). Where cuBLAS is predicted more
than ``MARGIN`` faster, the layout runs on torch (``torch.mm`` / ``torch.addmm`` and the
activation in place, as eager PyTorch runs it; ``TorchLaunch``), forward and backward alike;
a linear layer with one of its forward, dX and dW GEMMs routed and cuBLAS predicted no
slower on the others runs torch's own linear and autograd (``autograd.whole_layer_on_torch``:
no Python of ours on its path).
A config given by the caller, a tuned entry for exactly the problem, float32, operands with
no unit stride, a GPU with no table of its architecture, and problems whose A or C rows take
no 16-byte vectors where B's do (cuBLAS's slow paths, which its tables of aligned problems
do not show) stay on Triton. With
tuning on first use also on (``autokernel.autotune``), cuBLAS is raced beside the selector's
best configs on the call's operands instead, and the faster kept. A routed GEMM follows
torch's precision settings (``torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction``
and fp16's, on by default, let cuBLAS sum split-K partials in 16 bits).

Why: the Triton kernels trail cuBLAS on many mid-size problems (1-3 waves of tiles on the
SMs; docs/kernel-notes.md), and a layer swapped for autokernel's should not run slower than
torch's. Every figure the tool reports for its kernels (``bench``, ``report``, the selector's
checks) is the Triton kernels' own; ``autokernel explain`` says where ``auto`` would route.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from autokernel import best, gpus, select

ENV = "AUTOKERNEL_BACKEND"
BACKENDS = ("triton", "auto")
MARGIN = 0.05
"""Route to cuBLAS only where it is predicted this much faster than the Triton pick. Both
predictions err by 7-9 % (RMS of the log) on fresh problems, and at 10 % (the first choice)
every problem between went on to the Triton pick: replayed from the predictions and times of
ten side-by-side runs (834 fresh problems, H100 and H200), torch / auto 1.0033 at 10 % and
1.0145 at 5 %, higher at 5 % in each run, with 40 problems routed to a cuBLAS more than 2 %
slower than the Triton pick against 20 (docs/selector.md)."""
SCHEMA = 1
DATA_DIR = best.SHIPPED_DIR / "cublas"
NEAREST = 8
EPILOGUE_WEIGHT = 4.0
"""A problem with an activation is this far (squared, in the distance of log sizes) from one
without: torch runs it as a second kernel, so the two are measured apart. A bias alone is no
epilogue here: torch.addmm adds it inside cuBLAS's kernel."""

_switch: str | None = None
ON_CHANGE: list = []
"""What to forget when the backend switch changes (the launch plans register theirs)."""
_warned_values: set[str] = set()


def use(backend: str | None) -> None:
    """Set the backend for this process over ``$AUTOKERNEL_BACKEND``: "triton" or "auto";
    None hands the choice back to the environment. Layouts planned before are planned again."""
    global _switch
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)} (or None), got {backend!r}")
    _switch = backend
    for forget in ON_CHANGE:
        forget()


def backend() -> str:
    """The backend in force: ``use``'s where set, else ``$AUTOKERNEL_BACKEND`` ("triton" when
    unset or empty; any other value than "triton" or "auto" is "triton", with one warning)."""
    if _switch is not None:
        return _switch
    value = os.environ.get(ENV, "").strip().lower()
    if value in BACKENDS:
        return value
    if value and value not in _warned_values:
        _warned_values.add(value)
        warnings.warn(f"${ENV}={os.environ[ENV]!r} is neither of {', '.join(BACKENDS)}: every GEMM runs on "
                      "the Triton kernels", RuntimeWarning, stacklevel=2)
    return "triton"


# ---- cuBLAS's time ----------------------------------------------------------------------


def roofline_us(m: int, n: int, k: int, itemsize: int, spec: gpus.GpuSpec) -> float:
    """The datasheet roofline of an M x N x K GEMM on ``spec``'s GPU, µs: its FLOP at the
    fp16 tensor peak or its operands' and output's bytes at the DRAM bandwidth, the larger."""
    flop = 2.0 * m * n * k
    nbytes = float(itemsize) * (m * k + k * n + m * n)
    return max(flop / (spec.fp16_tflops * 1e6), nbytes / (spec.bandwidth_gbs * 1e3))


def point(m: int, n: int, k: int, epilogue: bool) -> tuple[float, float, float, float]:
    """Where a problem sits in the table: the logs of M, N and K, and whether it has an epilogue."""
    return math.log(max(m, 1)), math.log(max(n, 1)), math.log(max(k, 1)), 1.0 if epilogue else 0.0


@dataclass(frozen=True, eq=False)
class CublasModel:
    """cuBLAS's GPU time on one GPU, from measurements: per measured problem its ``point``
    and the log of its time over the roofline (the inefficiency; ``roofline_us`` on the
    measured GPU's datasheet). A prediction weights the ``NEAREST`` measured problems by
    inverse distance and scales the roofline of the GPU asked about."""

    device: str
    points: tuple[tuple[float, float, float, float, float], ...]
    source: str = ""

    @classmethod
    def from_json(cls, text: str, where: str = "cuBLAS table") -> "CublasModel":
        import json

        try:
            data = json.loads(text)
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA}")
            points = tuple(tuple(float(v) for v in p) for p in data["points"])
            if not points or any(len(p) != 5 or not all(map(math.isfinite, p)) for p in points):
                raise ValueError("points must be non-empty rows of five finite numbers")
            return cls(str(data["device"]), points, str(data.get("source", "")))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{where} is not a cuBLAS table: {exc}") from None

    def to_json(self) -> str:
        import json

        rows = ",\n".join("  " + json.dumps([round(v, 5) for v in p]) for p in self.points)
        head = json.dumps({"schema": SCHEMA, "device": self.device, "source": self.source})[:-1]
        return f'{head}, "points": [\n{rows}\n]}}\n'

    @functools.cached_property
    def spec(self) -> gpus.GpuSpec | None:
        """The datasheet entry of the GPU the table was measured on."""
        return gpus.detect_gpu(self.device)

    @functools.cached_property
    def _array(self):
        import numpy as np

        return np.asarray(self.points, dtype=np.float64)

    def inefficiency(self, m: int, n: int, k: int, epilogue: bool) -> float:
        """The log of cuBLAS's time over the roofline, interpolated at this problem."""
        import numpy as np

        pts = self._array
        d = pts[:, :4] - np.asarray(point(m, n, k, epilogue))
        dist = d[:, 0] ** 2 + d[:, 1] ** 2 + d[:, 2] ** 2 + EPILOGUE_WEIGHT * d[:, 3] ** 2
        near = np.argpartition(dist, min(NEAREST, len(dist)) - 1)[:NEAREST]
        weights = 1.0 / (dist[near] + 1e-3)
        return float((weights * pts[near, 4]).sum() / weights.sum())

    def predict_us(self, m: int, n: int, k: int, itemsize: int, epilogue: bool, spec: gpus.GpuSpec) -> float:
        """cuBLAS's predicted GPU time per call, µs, on ``spec``'s GPU (torch.mm or
        torch.addmm, and the activation's own kernel where there is an ``epilogue``)."""
        return roofline_us(m, n, k, itemsize, spec) * math.exp(self.inefficiency(m, n, k, epilogue))


@functools.lru_cache(maxsize=16)
def _load(path: Path) -> CublasModel:
    return CublasModel.from_json(path.read_text(), str(path))


@functools.lru_cache(maxsize=16)
def cublas_models(device: str) -> tuple[CublasModel, ...]:
    """The cuBLAS tables that speak for the GPU named ``device``: the one measured on it first,
    then those measured on other GPUs of its architecture (``decide`` compares the libraries
    on each such GPU); empty where there is none."""
    spec = gpus.detect_gpu(device)
    own = DATA_DIR / f"{best.device_key(device)}.json"
    tables = [_load(own)] if own.is_file() else []
    if spec is not None and spec.arch:
        for path in sorted(DATA_DIR.glob("*.json")):
            if path == own:
                continue
            table = _load(path)
            fitted = table.spec
            if fitted is not None and fitted.arch == spec.arch and fitted != spec:
                tables.append(table)
    return tuple(tables)


# ---- the decision -----------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """Where a GEMM runs under ``auto``: ``library`` "triton" or "cublas", the two predicted
    GPU times per call (µs, None where there is none) and why; ``by_table``: what each cuBLAS
    table predicted (its GPU's name, µs), of which ``cublas_us`` is the geometric mean."""

    library: str
    triton_us: float | None
    cublas_us: float | None
    reason: str
    by_table: tuple[tuple[str, float], ...] = ()


def decide(m: int, n: int, k: int, dtype: torch.dtype, activation: str, bias: bool, device: str,
           found: "best.Pick", layout: str = "nt", margin: float = MARGIN,
           tables: tuple[CublasModel, ...] | None = None) -> Route:
    """Where ``auto`` runs an M x N x K problem in ``layout`` on the GPU named ``device``,
    whose Triton pick is ``found`` (``best.pick`` with its ranking); ``tables``: cuBLAS's
    (default ``cublas_models(device)``).

    Each table predicts this GPU's cuBLAS time, and the prediction is their geometric mean.
    A table measured on this GPU predicts it directly. One measured on another GPU compares
    the two libraries where both were measured: the pick's time by the selector model of
    the table's GPU against the table's prediction there; this GPU's cuBLAS time is then the
    pick's predicted time here over that ratio. (Replayed on the H200's recorded checks, a
    table of its own alone errs 11.7 % RMS, the H100's carried 10.2 %, the two together
    9.3 %; on the H100's, 7.9 %, 12.2 % and 8.4 %: docs/selector.md.)"""
    if dtype not in (torch.float16, torch.bfloat16):
        return Route("triton", None, None, "cuBLAS is modelled for float16 and bfloat16 only")
    if found.exact:
        return Route("triton", None, None, "a tuned entry for exactly this problem runs as tuned")
    if found.choice is None:
        return Route("triton", None, None, f"no selector model for {device}")
    triton_us = next((s.predicted_us for s in found.choice.ranked if s.config == found.config), None)
    tables = cublas_models(device) if tables is None else tables
    spec = gpus.detect_gpu(device)
    if not tables or spec is None:
        return Route("triton", triton_us, None, f"no cuBLAS table for {device}")
    epilogue = activation != "none"  # torch.addmm adds a bias in cuBLAS's own epilogue: one kernel
    if triton_us is None:
        return Route("triton", None, tables[0].predict_us(m, n, k, dtype.itemsize, epilogue, spec),
                     "the Triton pick has no prediction")
    a_odd, b_odd = select.unvectorized(k, dtype.itemsize, layout, m)  # A's rows along K, or along M where transposed
    if a_odd and not b_odd and layout[0] == "n":
        # cuBLAS's tables hold aligned problems only; where A's rows take no vectors its own
        # kernels slow down too: on an H200 the Triton pick ran 1.49-1.73x cuBLAS (geomean of
        # 37 such problems, none where cuBLAS was more than 10 % faster; docs/selector.md).
        return Route("triton", triton_us, None, "A's rows take no 16-byte vectors, where cuBLAS was measured slower "
                     "(its tables hold aligned problems)")
    if odd_output(n, dtype.itemsize, layout) and not b_odd:
        # C's rows (N of 50257: GPT-2's vocabulary) take no vectors while B's, along K, do:
        # there cuBLAS ran 1.4-6.0x slower than the Triton pick on every one of 32 such
        # problems of an H200 (nt; docs/selector.md), where its tables of aligned problems
        # predicted it up to 5x faster. (With K unaligned too, not measured: the tables decide.)
        return Route("triton", triton_us, None, "C's rows take no 16-byte vectors, where cuBLAS was measured "
                     "slower (its tables hold aligned problems)")
    if a_odd and not b_odd and layout[0] == "t" and (n * dtype.itemsize) % 16 == 0:
        # A as a transposed view whose rows, along M, take no vectors (dW's dY^T of a
        # vocabulary: BERT's 30522 rows), B's and C's aligned: cuBLAS ran 1.1-2.9x slower
        # than the Triton pick on all 34 such problems of 1024 rows or more measured (H200;
        # docs/selector.md), its tables of aligned problems predicting it faster.
        return Route("triton", triton_us, None, "A's rows (a transposed view, along M) take no 16-byte vectors, "
                     "where cuBLAS was measured slower (its tables hold aligned problems)")
    by_table = []
    tma = select.tma_aligned(m, n, k, dtype, layout)
    for table in tables:
        measured_on = table.spec
        if measured_on == spec:
            by_table.append((table.device, table.predict_us(m, n, k, dtype.itemsize, epilogue, spec)))
            continue
        there = best.selector_model(table.device)
        pick_there = None if there is None else select.predict_us(there, found.config, m, n, k, dtype, tma=tma,
                                                                      layout=layout, activation=activation)
        if pick_there is not None:
            by_table.append((table.device, triton_us * table.predict_us(m, n, k, dtype.itemsize, epilogue,
                                                                        measured_on) / pick_there))
    if not by_table:
        return Route("triton", triton_us, None, "the pick has no prediction on "
                     f"{', '.join(t.device for t in tables)}, where cuBLAS was measured")
    cublas_us = math.exp(sum(math.log(us) for _, us in by_table) / len(by_table))
    if cublas_us * (1 + margin) < triton_us:
        return Route("cublas", triton_us, cublas_us,
                     f"cuBLAS is predicted {triton_us / cublas_us:.2f}x faster (more than {margin:.0%})", tuple(by_table))
    return Route("triton", triton_us, cublas_us,
                 f"cuBLAS is not predicted more than {margin:.0%} faster ({triton_us / cublas_us:.2f}x)", tuple(by_table))


def odd_output(n: int, itemsize: int, layout: str) -> bool:
    """Whether C's rows (N elements) are no multiple of 16 bytes while B stores its rows
    along K (a transposed view, nn.Linear's weight: layouts "nt" and "tt"), so that N leaves
    B's rows aligned. With B row-major ("nn", "tn") its rows are unaligned too; there
    cuBLAS led the Triton pick on most problems measured, and the tables decide."""
    return (n * itemsize) % 16 != 0 and layout[1] == "t"


def may_run(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``auto`` may send a GEMM of these operands to cuBLAS: float16 or bfloat16, each
    read in place (row-major or a transposed view: a unit stride; others cuBLAS would copy)."""
    return a.dtype in (torch.float16, torch.bfloat16) and all(t.stride(1) == 1 or t.stride(0) == 1 for t in (a, b))


# ---- the torch launch -------------------------------------------------------------------


class TorchLaunch:
    """A plan's launch on torch: ``launch(a, b, out, bias or out, z or out)`` as the Triton
    launches take it. Operands are restored to the shapes and strides the plan was made
    for where a caller passes a tensor sharing their data (linear's weight for weight.t()).
    The bias is added by ``torch.addmm`` (cast to the operands' dtype where it is of
    another), then the activation runs in place, or from Z into out where Z is kept."""

    __slots__ = ("a_view", "b_view", "bias", "act", "slope", "store_z")

    def __init__(self, a, b, has_bias: bool, act: str, slope: float, store_z: bool):
        self.a_view, self.b_view = (a.shape, a.stride()), (b.shape, b.stride())
        self.bias, self.act, self.slope, self.store_z = has_bias, act, float(slope), store_z

    def __call__(self, a, b, out, bias, z) -> None:
        a, b = planned_view(a, self.a_view), planned_view(b, self.b_view)
        pre = z if self.store_z else out
        if self.bias:
            torch.addmm(bias if bias.dtype == a.dtype else bias.to(a.dtype), a, b, out=pre)
        else:
            torch.mm(a, b, out=pre)
        if self.act != "none":
            activate(pre, out, self.act, self.slope)


def planned_view(t: torch.Tensor, view: tuple) -> torch.Tensor:
    """``t`` in the view (shape, strides) its plan was made for. A caller may pass a tensor
    sharing the operand's data in another view (linear passes weight for weight.t()), which
    a launch reading only pointers takes as it is; one that reads the tensor restores the
    view. Compared by strides too: a square weight has its transpose's shape."""
    return t if (t.shape, t.stride()) == view else t.as_strided(*view)


def activate(src: torch.Tensor, dst: torch.Tensor, act: str, slope: float) -> None:
    """dst = act(src) by torch's kernels (in place where they are one tensor)."""
    aten = torch.ops.aten
    if act == "relu":
        aten.clamp_min.out(src, 0, out=dst)
    elif act == "leaky_relu":
        aten.leaky_relu.out(src, slope, out=dst)
    elif act in ("gelu", "gelu_tanh"):
        aten.gelu.out(src, approximate="tanh" if act == "gelu_tanh" else "none", out=dst)
    elif act == "silu":
        aten.silu.out(src, out=dst)
    else:
        raise ValueError(f"unknown activation {act!r}")
