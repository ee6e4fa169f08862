"""The cached launch path under ``autokernel.matmul``, ``linear`` and their backward: the
argument checks, the config each layout launches with, and its plan (checks passed, config
resolved, kernel launch built), kept per layout so that a later call costs a dict lookup.

``autokernel.api`` (the public entry points) and ``autokernel.autograd`` build on it."""

from __future__ import annotations

import numbers
import threading

import torch

from autokernel import autotune, best, route, runtime, select
from autokernel.config import KernelConfig, check_fits
from autokernel.kernels import matmul as grouped
from autokernel.kernels import aligned, matmul_tma, splitk, streamk

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_KERNEL_DEVICE_TYPE = runtime.kernel_device().type


def storage_kind(t: torch.Tensor) -> str:
    """How ``t`` stores its elements: "strided" (dense, what the kernels take), "nested", or
    another layout's name ("sparse_coo", "sparse_csr", "mkldnn", ...)."""
    return "nested" if t.is_nested else str(t.layout).removeprefix("torch.").lstrip("_")


def _check_tensor(name: str, t: object, ndim: int | None = None) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if (kind := storage_kind(t)) != "strided":
        raise TypeError(f"{name} is a {kind} tensor; the kernels take dense (strided) tensors")
    # torch._neg_view, or the .imag of a conjugated view: the sign is a flag, not in memory
    # (dynamo traces no is_neg; the registered ops see tensors torch made)
    if not torch.compiler.is_compiling() and t.is_neg():
        raise TypeError(f"{name} is a negated view (its sign is not in memory); pass {name}.resolve_neg()")
    if t.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} has dtype {t.dtype}; supported: float16, bfloat16, float32")
    if t.device.type != _KERNEL_DEVICE_TYPE:
        where = "the Triton interpreter (no GPU here)" if runtime.INTERPRETER else "the GPU"
        raise ValueError(f"{name} is on {t.device}; kernels run on {where} and need {_KERNEL_DEVICE_TYPE} tensors")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    return t


def _check_linear_args(x, weight, bias) -> None:
    """linear's checks, naming x, weight and bias (every one matmul would make)."""
    _check_tensor("x", x)
    _check_tensor("weight", weight, 2)
    if x.dim() < 1:
        raise ValueError(f"x must have at least 1 dimension, got shape {tuple(x.shape)}")
    if weight.dtype != x.dtype:
        raise TypeError(f"weight has dtype {weight.dtype} but x has {x.dtype}; both need one dtype")
    if weight.device != x.device:
        raise ValueError(f"weight is on {weight.device} but x is on {x.device}")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"x has {x.shape[-1]} features but weight is {tuple(weight.shape)} (expects in_features = {weight.shape[1]})"
        )
    if bias is not None:
        _check_tensor("bias", bias, 1)
        if bias.shape[0] != weight.shape[0]:
            raise ValueError(f"bias has length {bias.shape[0]}, expected out_features = {weight.shape[0]}")
        if bias.device != x.device:
            raise ValueError(f"bias is on {bias.device} but x is on {x.device}")


def _check_config(name: str, config: object) -> None:
    if config is not None and not isinstance(config, KernelConfig):
        raise TypeError(f"{name} must be a KernelConfig, got {type(config).__name__}")


def check_slope(slope: object) -> float:
    """leaky_relu's negative slope as a float; TypeError naming it for anything that is not
    a real number (a string, None, a bool)."""
    if isinstance(slope, bool) or not isinstance(slope, numbers.Real):
        raise TypeError(f"slope (leaky_relu's negative slope) must be a real number, got {type(slope).__name__}")
    return float(slope)


def check_matmul_args(a, b, bias=None, out=None) -> None:
    _check_tensor("a", a, 2)
    _check_tensor("b", b, 2)
    if b.dtype != a.dtype:
        raise TypeError(f"b has dtype {b.dtype} but a has {a.dtype}; both operands need one dtype")
    if b.device != a.device:
        raise ValueError(f"b is on {b.device} but a is on {a.device}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    n = b.shape[1]
    if bias is not None:
        _check_tensor("bias", bias, 1)
        if bias.shape[0] != n:
            raise ValueError(f"bias has length {bias.shape[0]}, expected N = {n}")
        if bias.device != a.device:
            raise ValueError(f"bias is on {bias.device} but a is on {a.device}")
    if out is not None:
        _check_tensor("out", out, 2)
        if tuple(out.shape) != (a.shape[0], n):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(a.shape[0], n)}")
        if out.dtype != a.dtype:
            raise TypeError(f"out has dtype {out.dtype}, expected {a.dtype}")
        _check_out_memory(out, {"a": a, "b": b, "bias": bias})


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) bytes of memory that the elements of a non-empty ``t`` touch."""
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def _shares_bytes(out: torch.Tensor, t: torch.Tensor) -> bool:
    """True when some element of ``out`` lies on bytes of an element of ``t``. Views of one
    buffer that touch disjoint elements (two halves, interleaved columns) do not."""
    (o0, o1), (t0, t1) = _byte_span(out), _byte_span(t)
    if o1 <= t0 or t1 <= o0:
        return False
    # The spans meet (views of one buffer, a rare case): mark t's bytes, look for out's.
    base = min(o0, t0)
    touched = torch.zeros(max(o1, t1) - base, dtype=torch.bool)
    for byte in range(t.element_size()):
        _element_bytes(touched, t, base, byte).fill_(True)
    return any(bool(_element_bytes(touched, out, base, byte).any()) for byte in range(out.element_size()))


def _element_bytes(buffer: torch.Tensor, t: torch.Tensor, base: int, byte: int) -> torch.Tensor:
    """The view of ``buffer`` (one bool per byte from address ``base``) that holds byte
    ``byte`` of each element of ``t``."""
    size = t.element_size()
    return buffer.as_strided(t.shape, [s * size for s in t.stride()], t.data_ptr() - base + byte)


def _byte_extent(t: torch.Tensor | None) -> int:
    """The bytes ``_byte_span`` finds for ``t`` (0 for None or an empty tensor): a property
    of its layout, not of its address."""
    if t is None or t.numel() == 0:
        return 0
    first, end = _byte_span(t)
    return end - first


def _check_out_memory(out: torch.Tensor, inputs: dict) -> None:
    """``out`` must not overwrite an input the kernel still reads, nor itself (stride 0)."""
    if out.numel() == 0:
        return
    if torch._debug_has_internal_overlap(out) == 1:  # 1: some elements share memory
        raise ValueError(f"out has elements that share memory (stride {tuple(out.stride())}); pass a dense tensor")
    for name, t in inputs.items():
        if t is not None and t.numel() > 0 and _shares_bytes(out, t):
            raise ValueError(f"out overlaps {name} in memory: the kernel would overwrite {name} while reading it; "
                             "pass a separate output tensor")


def resolve_config(config: KernelConfig | None, m: int, n: int, k: int, dtype: torch.dtype, activation: str,
                   bias: bool, device: torch.device, *, store_z: bool = False, tma: bool = True,
                   layout: str = "nn", copied: tuple[bool, bool] = (False, False)) -> KernelConfig:
    """The config to launch an [M, K] @ [K, N] GEMM with on ``device``: the given one, else
    a tuned one ($AUTOKERNEL_CONFIG, then the file shipped for the GPU: autokernel.best),
    else the default. Checked against the device's shared memory in the mode of the call
    (``tma``: whether the TMA kernel can take the operands; ``store_z``: a training
    forward storing Z): ConfigError if the given one can't fit; a tuned or default one
    that can't is shrunk to fit (best.resolve). ``copied``: which operands run as copies
    into aligned rows (``Padding``), whose rows take vectors whatever K and the layout say.

    Called once per layout: its result is cached in a ``GemmPlan`` (see clear_launch_cache)."""
    if config is None:
        return best.resolved_config(m, n, k, dtype, activation, bias, device, store_z, tma, layout, copied)
    check_fits(config, dtype, tma=tma, bias=bias, store_z=store_z)
    return config


# ---- the cached launch path ----
# A GEMM's launch depends on its operands only through their layouts; a plan holds what
# that layout and the arguments fix (checks passed, config resolved, grid, kernel
# handle), so a call after the first costs a dict lookup, the output's allocation and
# the launch. Keys hold every input of the plan: a new shape, stride, dtype, device,
# alignment, activation, slope or config misses and builds a new plan.

_PLANS: dict = {}
_LINEARS: dict = {}
_MAX_ENTRIES = 4096  # a program that makes a new config or shape per call must not grow memory


def _layout(t: torch.Tensor | None):
    """What a launch depends on in a tensor: shape, strides, dtype, device, whether its base
    is 16-byte aligned (Triton specializes pointers on it), and whether it is a negated view
    (refused by the checks, which a cached layout skips)."""
    if t is None:
        return None
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0, t.is_neg()


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= _MAX_ENTRIES:
        cache.clear()
    cache[key] = value


def clear_launch_cache() -> None:
    """Forget every cached launch plan: the next call of each layout resolves its config
    (``resolve_config``) and checks its arguments again. Call it when what
    ``resolve_config`` returns may have changed (``best.clear_cache`` calls it)."""
    _PLANS.clear()
    _LINEARS.clear()


best.ON_CLEAR.append(clear_launch_cache)
route.ON_CHANGE.append(clear_launch_cache)


class GemmPlan:
    """One GEMM layout's launch: out [M, N] (and Z beside it when ``store_z``); with ``pad``
    (``Padding``) the launch is of the operands' padded copies, made on each call."""

    __slots__ = ("shape", "dtype", "device", "store_z", "launch", "guard", "extents", "pad")

    def __init__(self, shape, dtype, device, store_z: bool, launch):
        self.shape, self.dtype, self.device, self.store_z, self.launch = shape, dtype, device, store_z, launch
        # Only a machine of several GPUs can launch on the wrong one: skip the check elsewhere.
        self.guard = device.type == "cuda" and torch.cuda.device_count() > 1
        self.extents = None
        self.pad = None

    def run(self, a, b, bias, out=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(out, Z or None) for operands of this plan's layout, or tensors that share their
        data pointers (a view's base, as linear passes weight for weight.t()): launches read
        only pointers, their strides fixed when the plan was built."""
        # a's dtype and device are the plan's (its key holds them); new_empty skips
        # torch.empty's keyword parsing, and sizes as separate ints parse faster than one
        # tuple (0.9 against 1.4 µs on a CPU).
        m, n = self.shape
        if out is None:
            out = a.new_empty(m, n)
        z = a.new_empty(m, n) if self.store_z else None
        if self.launch is not None:
            self.fire(a, b, out, bias, z)
        return out, z

    @property
    def on_torch(self) -> bool:
        """Whether this layout runs on torch's cuBLAS (routed by the backend "auto")."""
        return isinstance(self.launch, route.TorchLaunch)

    def check_out(self, out, a, b, bias) -> None:
        """``_check_out_memory`` for operands of this plan's layout, ``out`` included (the
        plan was made with an out=, which was checked then, its own overlap too): each
        operand's byte extent is fixed by its layout, so a call compares addresses, and only
        where out's span meets an operand's (views of one buffer) checks the bytes."""
        extents = self.extents
        if extents is None:
            extents = self.extents = tuple(map(_byte_extent, (out, a, b, bias)))
        if not extents[0]:
            return
        o0 = out.data_ptr()
        o1 = o0 + extents[0]
        for name, t, extent in (("a", a, extents[1]), ("b", b, extents[2]), ("bias", bias, extents[3])):
            if extent:
                t0 = t.data_ptr()
                if t0 < o1 and o0 < t0 + extent:
                    _check_out_memory(out, {name: t})

    def fire(self, a, b, out, bias, z) -> None:
        if self.guard and self.device.index != torch.cuda.current_device():
            with torch.cuda.device(self.device):  # Triton launches on the current device
                self._fire(a, b, out, bias, z)
        else:
            self._fire(a, b, out, bias, z)

    def _fire(self, a, b, out, bias, z) -> None:
        bias, z = bias if bias is not None else out, z if z is not None else out
        if self.pad is None:
            self.launch(a, b, out, bias, z)
            return
        # The copies may live in the stream's buffer: another thread's copy on the same
        # stream must not land between this copy and the launch that reads it.
        with _PADDED_LAUNCH:
            self.launch(*self.pad(a, b), out, bias, z)


def gemm_plan(a, b, bias, act: str, slope: float, config: KernelConfig | None, store_z: bool = False) -> GemmPlan:
    """The cached plan of act(a @ b + bias) into a fresh output, arguments already checked
    (``act`` normalized); with ``store_z`` it also returns the pre-activation Z."""
    key = (_layout(a), _layout(b), _layout(bias), None, act, slope, config, store_z)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _make_plan(a, b, bias, act, slope, config, None, store_z)
        _remember(_PLANS, key, plan)
    return plan


def cached_plan(key, build):
    """A launch plan other than a GEMM's (backward's elementwise pass), kept with the
    GEMM plans so that clear_launch_cache forgets it too. ``key`` must hold every input
    of ``build``."""
    plan = _PLANS.get(key)
    if plan is None:
        plan = build()
        _remember(_PLANS, key, plan)
    return plan


_PADDED_LAUNCH = threading.Lock()

PAD_MIN_REUSE = 64
"""The fewest columns of C (rows, for B) that reuse each element of an operand for ``Padding``
to copy it: below, the copy is a large share of a memory-bound problem's traffic (16 x 896 x
12029 with the weight copied ran 0.46x as fast)."""
PAD_MIN_FLOP = 5e8
"""The least work (2 M N K) for which ``Padding`` copies an operand: below, the copy's own
launch is a large share of the time (91 x 512 x 3075 ran 0.89x as fast)."""
PAD_MIN_ROWS = 16
"""The fewest rows M for which ``Padding`` copies an operand: the copies' pick is then a thin
TMA tile, whose 64-row box the model rates too well at a few rows (docs/kernel-notes.md, "Rows
of a TMA box past M cost more than rows in M"): at M = 8 two problems ran 0.46x and 0.88x as
fast as on the operands as they were, from M = 20 on they ran 1.3-2.1x faster."""
PAD_A_ALONE_MIN_ROWS = 32
"""The fewest rows M for which ``Padding`` copies A while B's rows stay unaligned (B reused by
fewer than PAD_MIN_REUSE rows: nn.Linear's weight with an odd K at a few tokens). B's element
loads then bound the kernel, and at 16-24 rows A's copy gained nothing (six problems 0.85-1.01x,
the 32-row tiles slower with A loaded in vectors), where at 38-61 rows it ran 1.09-1.32x
(four problems; H200, docs/selector.md, "Operands copied into aligned rows")."""


def rows_unaligned(t: torch.Tensor) -> bool:
    """Whether a 2-D operand read in place (one unit stride, both dimensions above 1) has rows,
    along that stride, that take no 16-byte vectors: its other stride or its base address no
    multiple of 16 bytes. The pointer kernels then load it an element at a time and the TMA
    kernel cannot describe it."""
    if min(t.shape) < 2:
        return False
    s0, s1 = t.stride()
    lead = s0 if s1 == 1 else s1 if s0 == 1 else None
    return lead is not None and ((lead * t.element_size()) % 16 != 0 or t.data_ptr() % 16 != 0)


class Padding:
    """Which operands of a layout are copied before each launch into rows that start on
    32-byte boundaries (``aligned.AlignedCopy``: one launch for both), and the views the
    plan was made for (linear passes its weight for ``weight.t()``, a tensor sharing its
    data: the view is made again from it). Measured on an H200 against the pick on the
    operands as they were (docs/selector.md, "Operands copied into aligned rows"): 24 GEMMs
    with K off 16-byte rows, 1.30-5.75x faster (geomean 2.47); a second draw with vocabulary
    GEMMs and transposed views of odd M, 26 padded, 1.70x (0.77-3.91), 2 of them slower."""

    __slots__ = ("a", "b", "a_view", "b_view", "copy")

    def __init__(self, a: torch.Tensor, b: torch.Tensor, pad_a: bool, pad_b: bool):
        self.a, self.b = pad_a, pad_b
        self.a_view = (a.shape, a.stride())
        self.b_view = (b.shape, b.stride())
        self.copy = aligned.AlignedCopy(a, b, pad_a, pad_b, runtime.INTERPRETER)

    @staticmethod
    def of(a: torch.Tensor, b: torch.Tensor, m: int, n: int, k: int) -> "Padding | None":
        """The padding of a [M, K] @ [K, N] GEMM of 16-bit operands: each operand whose rows
        take no 16-byte vectors (``rows_unaligned``), where enough columns of C reuse it
        (PAD_MIN_REUSE), M is at least PAD_MIN_ROWS and the work at least PAD_MIN_FLOP; None
        where none is."""
        pad_a, pad_b = _padded_operands(m, n, k, a.dtype, lambda: rows_unaligned(a), lambda: rows_unaligned(b))
        return Padding(a, b, pad_a, pad_b) if pad_a or pad_b else None

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.copy(route.planned_view(a, self.a_view) if self.a else a,
                         route.planned_view(b, self.b_view) if self.b else b)


def padding_for(m: int, n: int, k: int, dtype: torch.dtype, layout: str) -> tuple[bool, bool]:
    """``Padding.of``'s answer (A, B) for a problem's operands as ``Problem.make_inputs``
    stores them (``rows_unaligned_for``): for ``autokernel explain``, which has no tensors."""
    a_unaligned, b_unaligned = rows_unaligned_for(m, n, k, dtype, layout)
    return _padded_operands(m, n, k, dtype, lambda: a_unaligned, lambda: b_unaligned)


def rows_unaligned_for(m: int, n: int, k: int, dtype: torch.dtype, layout: str) -> tuple[bool, bool]:
    """``rows_unaligned`` of A and B as ``Problem.make_inputs`` stores them: rows along K for
    A row-major and B a transposed view, along M and N otherwise, on aligned bases."""
    size = dtype.itemsize
    a_lead = k if layout[0] == "n" else m
    b_lead = n if layout[1] == "n" else k
    return min(m, k) > 1 and (a_lead * size) % 16 != 0, min(k, n) > 1 and (b_lead * size) % 16 != 0


def _padded_operands(m: int, n: int, k: int, dtype: torch.dtype, a_unaligned, b_unaligned) -> tuple[bool, bool]:
    """The rule of ``Padding.of`` and ``padding_for``: (A copied, B copied), given whether each
    operand's rows take no 16-byte vectors (asked only where the rest of the rule holds)."""
    if dtype not in matmul_tma.TMA_DTYPES or m < PAD_MIN_ROWS or 2.0 * m * n * k < PAD_MIN_FLOP:
        return False, False
    pad_b = m >= PAD_MIN_REUSE and b_unaligned()
    pad_a = n >= PAD_MIN_REUSE and a_unaligned() and (pad_b or m >= PAD_A_ALONE_MIN_ROWS or not b_unaligned())
    return pad_a, pad_b


def _make_plan(a, b, bias, act: str, slope: float, config, out, store_z: bool,
               copied: tuple[bool, bool] = (False, False)) -> GemmPlan:
    slope = check_slope(slope)
    m, k = a.shape
    n = b.shape[1]
    launch = None
    if config is None and m > 0 and n > 0 and not any(copied) and (pad := Padding.of(a, b, m, n, k)) is not None:
        # the plan of the padded copies' layout (their rows aligned: no padding again)
        plan = _make_plan(*pad(a, b), bias, act, slope, None, out, store_z, (pad.a, pad.b))
        plan.pad = pad
        return plan
    if m > 0 and n > 0:
        # Layout stand-ins for the outputs this plan allocates (fresh: contiguous, aligned).
        c = out if out is not None else a.new_empty(m, n)
        tma, layout = tma_runs(a, b, c), operand_layout(a, b)
        cfg = resolve_config(config, m, n, k, a.dtype, act, bias is not None, a.device, store_z=store_z,
                             tma=tma, layout=layout, copied=copied)
        if config is None:
            auto = route.backend() == "auto" and route.may_run(a, b)
            won = (_tuned_on_first_use(a, b, bias, act, slope, store_z, tma, layout, auto, copied)
                   if autotune.enabled() else None)
            if won is None and auto and _on_cublas(a, b, bias, act, store_z, tma, layout):
                won = autotune.CUBLAS
            if won == autotune.CUBLAS:
                return GemmPlan((m, n), a.dtype, a.device, store_z,
                                route.TorchLaunch(a, b, bias is not None, act, slope, store_z))
            cfg = won or cfg
        launch = _plan_kernel(a, b, c, bias, act, slope, cfg, c if store_z else None)
    return GemmPlan((m, n), a.dtype, a.device, store_z, launch)


def _on_cublas(a, b, bias, act: str, store_z: bool, tma: bool, layout: str, margin: float = route.MARGIN) -> bool:
    """Whether ``route.decide`` sends this layout to cuBLAS (the backend is "auto")."""
    m, k = a.shape
    n = b.shape[1]
    found = best.ranked(m, n, k, a.dtype, act, bias is not None, a.device, store_z, tma, layout)
    where = route.decide(m, n, k, a.dtype, act, bias is not None, runtime.device_name(a.device), found, layout,
                         margin=margin)
    return where.library == "cublas"


def cublas_not_slower(plan: GemmPlan, a, b, bias, act: str) -> bool:
    """Whether ``auto`` predicts cuBLAS at least as fast as the Triton pick on ``plan``'s
    layout, the plan of act(a @ b + bias) made with no config (``route.decide`` with no
    margin): true of a routed plan; false where tuning on first use decides (its race
    measured the two), where the plan copies operands into aligned rows, and where ``auto``
    may not route the operands at all."""
    if plan.on_torch:
        return True
    if plan.pad is not None or autotune.enabled() or route.backend() != "auto" or not route.may_run(a, b):
        return False
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or k == 0:
        return False
    c = a.new_empty(m, n)  # a stand-in of the output's layout, as _make_plan's
    return _on_cublas(a, b, bias, act, plan.store_z, tma_runs(a, b, c), operand_layout(a, b), margin=0.0)


def _tuned_on_first_use(a, b, bias, act: str, slope: float, store_z: bool, tma: bool, layout: str,
                        cublas: bool, copied: tuple[bool, bool] = (False, False)) -> KernelConfig | str | None:
    """What tuning on first use keeps for this problem (``autokernel.autotune``): the
    selector's best few configs (and, with ``cublas``, torch's cuBLAS: ``autotune.CUBLAS``)
    raced on these operands into scratch outputs, once per problem and GPU, the winner kept
    in the user's cache. None where nothing is raced: an exact tuned entry exists, or timing
    is not allowed now (CUDA-graph capture, torch.compile tracing)."""
    m, k = a.shape
    n = b.shape[1]
    candidates = best.race_candidates(m, n, k, a.dtype, act, bias is not None, a.device, store_z, tma, layout,
                                      copied=copied)
    if not candidates:
        return None
    key = autotune.Key.of(m, n, k, a.dtype, act, bias is not None,
                          mode=layout + ("/z" if store_z else "") + ("" if tma else "/no-tma") + ("/auto" if cublas else "")
                          + "".join(f"/{name}-copied" for name, c in zip("AB", copied) if c))

    def make_call(config: KernelConfig | str):
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
        z = torch.empty((m, n), dtype=a.dtype, device=a.device) if store_z else None
        if config == autotune.CUBLAS:
            launch = route.TorchLaunch(a, b, bias is not None, act, slope, store_z)
        else:
            launch = _plan_kernel(a, b, out, bias, act, slope, config, z)
        args = (a, b, out, bias if bias is not None else out, z if z is not None else out)
        return lambda: launch(*args)

    if cublas:
        return autotune.first_use(key, [*candidates, autotune.CUBLAS], make_call,
                                  max_candidates=len(candidates) + 1)
    return autotune.first_use(key, candidates, make_call)


def operand_layout(a, b) -> str:
    """The ``Problem.layout`` of operands a [M, K] and b [K, N]: "n" for each stored
    row-major, "t" for a transposed view (its first dimension contiguous)."""
    return ("t" if a.stride(1) != 1 and a.stride(0) == 1 else "n") + ("t" if b.stride(1) != 1 and b.stride(0) == 1 else "n")


def tma_runs(a, b, out) -> bool:
    """Whether a "tma" or "auto" config runs the TMA kernel on these operands here (see
    _plan_kernel): what decides the shared memory a config needs. A GPU with TMA
    descriptors (``runtime.has_tma``) and operands the kernel takes (its own rule,
    ``tma_operands``). Under the interpreter there is no limit to fit; True there, the
    larger need."""
    if runtime.INTERPRETER:
        return True
    return runtime.has_tma() and a.shape[1] > 0 and matmul_tma.tma_operands(a, b, out) is not None


def tma_runs_for(m: int, n: int, k: int, dtype: torch.dtype, layout: str) -> bool:
    """``tma_runs`` for a problem's operands as ``Problem.make_inputs`` stores them (the same
    rule, asked of their shapes and strides: ``select.tma_aligned``)."""
    if runtime.INTERPRETER:
        return True
    return runtime.has_tma() and select.tma_aligned(m, n, k, dtype, layout)


def _plan_kernel(a, b, out, bias, act: str, slope: float, config: KernelConfig, z):
    """The kernel launch of this layout, after the config's variant: "tma" and "auto" take
    the TMA kernel where it can run (a Hopper GPU with Triton >= 3.4) and the operands
    allow descriptors, else the grouped pointer kernel. The interpreter runs the TMA
    kernel only for an explicit "tma", so tests can exercise it. A config with split_k > 1
    takes the split-K kernels (pointer loads) whatever its variant: the TMA kernel has no
    split-K, and the config asked for it. stream_k takes the TMA kernel's stream-K tail with
    variant "tma" where the TMA kernel runs, else the stream-K kernel (pointer loads)."""
    if config.split_k > 1:
        return splitk.plan_matmul_splitk(a, b, out, bias, act, slope, config, runtime.INTERPRETER, z=z)
    if config.variant == "grouped" or (config.stream_k and config.variant != "tma"):
        use_tma = False
    elif runtime.INTERPRETER:
        use_tma = config.variant == "tma"
    else:
        use_tma = runtime.has_tma()
    if use_tma and a.shape[1] > 0:
        operands = matmul_tma.tma_operands(a, b, out)
        if operands is not None:
            return matmul_tma.plan_matmul_tma(a, b, out, bias, act, slope, config, operands, runtime.INTERPRETER, z=z)
    if config.stream_k:
        return streamk.plan_matmul_streamk(a, b, out, bias, act, slope, config, runtime.INTERPRETER, z=z)
    return grouped.plan_matmul(a, b, out, bias, act, slope, config, runtime.INTERPRETER, z=z)


def launch(a, b, out, bias, act: str, slope: float, config: KernelConfig, z: torch.Tensor | None = None) -> None:
    """Launch into ``out`` (and the pre-activation into ``z`` when given, shaped like
    ``out``), arguments already checked, M and N > 0, without caching: for callers that
    own their buffers (tests, benchmarks). The hot paths go through ``gemm_plan``."""
    plan = GemmPlan(tuple(out.shape), out.dtype, out.device, False,
                    _plan_kernel(a, b, out, bias, act, float(slope), config, z))
    plan.fire(a, b, out, bias, z)
