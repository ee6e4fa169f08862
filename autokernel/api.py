"""Public entry points: matmul and linear, with argument checks that name the culprit."""

from __future__ import annotations

import torch

from autokernel import ops, plans, route
from autokernel.autograd import LinearFunction, whole_layer_on_torch
from autokernel.config import KernelConfig
from autokernel.plans import (  # noqa: F401  (re-exported: the launch path's names, as callers knew them here)
    SUPPORTED_DTYPES,
    GemmPlan,
    _check_config,
    _check_linear_args,
    _layout,
    _plan_kernel,
    _remember,
    cached_plan,
    check_matmul_args,
    clear_launch_cache,
    gemm_plan,
    launch,
    operand_layout,
    resolve_config,
    tma_runs,
    tma_runs_for,
)
from autokernel.records import normalize_activation


_ANY_AUTOCAST = getattr(torch._C, "_is_any_autocast_enabled", None)


def _autocast_dtype(t) -> torch.dtype | None:
    """The dtype torch.autocast runs a linear layer or a matmul in on ``t``'s device, or None
    where autocast is off there (or ``t`` is no tensor: the checks name it)."""
    if _ANY_AUTOCAST is not None and not _ANY_AUTOCAST():  # one C call: off everywhere, the usual case
        return None
    try:
        device_type = t.device.type
    except AttributeError:
        return None
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def _autocast_cast(dtype: torch.dtype, *tensors):
    """The tensors as autocast hands them to torch's linear: floating ones (but float64) in
    ``dtype``, others and None as they are. A cast is differentiable: gradients reach the
    float32 weights through it, as under torch's own autocast."""
    return tuple(t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != dtype
                 and t.dtype != torch.float64 else t for t in tensors)


def torch_activation(x: torch.Tensor, activation: str, slope: float = 0.01) -> torch.Tensor:
    """``activation`` (a normalized name) of ``x`` by torch's functions: what the kernels'
    epilogue computes, for references, baselines and the layers' torch path."""
    F = torch.nn.functional
    if activation == "relu":
        return F.relu(x)
    if activation == "leaky_relu":
        return F.leaky_relu(x, slope)
    if activation == "gelu":
        return F.gelu(x)
    if activation == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if activation == "silu":
        return F.silu(x)
    return x


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    *,
    slope: float = 0.01,
    config: KernelConfig | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """C = activation(A @ B + bias), accumulated in float32.

    Args:
        a: [M, K] float16, bfloat16 or float32 (tf32 on the GPU); any strides.
        b: [K, N], same dtype and device as ``a``; any strides (``w.t()`` is read in place).
        bias: optional [N], added in float32 before the activation; it may be of another
            floating dtype than ``a`` (a float32 bias of a bfloat16 layer), where torch.addmm
            refuses one.
        activation: None, "relu", "leaky_relu", "gelu" (exact), "gelu_tanh" or "silu".
        slope: negative slope of leaky_relu.
        config: tile and launch parameters; by default a tuned entry for exactly the problem
            ($AUTOKERNEL_CONFIG, then the file shipped for this GPU), else the selector's pick
            among its candidates, the nearby tuned entries and the default, else (no model
            for the GPU) ``default_config(M, N, K, dtype, tma=...)``: ``autokernel.best.pick``.
        out: optional preallocated [M, N] output of the operands' dtype; it must not share
            memory with a, b or bias; an inference tensor only inside ``torch.inference_mode()``.

    Returns:
        [M, N] in the operands' dtype. Zero-size M or N gives an empty result; K = 0
        gives activation(bias) (or activation(0)) broadcast over the rows.

    Differentiable: when grad mode is on and any of a, b, bias requires grad, it runs as
    ``linear(a, b.t(), bias)`` through ``autokernel.autograd.LinearFunction``; ``out=``
    then raises RuntimeError, as torch's does, and so does an ``out`` that requires grad
    itself. Otherwise arguments are checked, and the config resolved, once per layout
    (``GemmPlan``); an ``out=`` is checked against the inputs' memory on every call (data
    pointers are not part of a layout).

    Under ``torch.autocast`` it runs as torch.matmul does there: floating inputs cast to
    the autocast dtype (none with ``out=``, which autocast leaves alone too).
    """
    if out is None and (cast := _autocast_dtype(a)) is not None:
        a, b, bias = _autocast_cast(cast, a, b, bias)
    if torch.compiler.is_compiling():
        return _traced_matmul(a, b, bias, activation, slope, config, out)
    try:  # per call: spelled out, a third of the generator's host time
        grad = torch.is_grad_enabled() and (a.requires_grad or b.requires_grad or
                                            (bias is not None and bias.requires_grad) or
                                            (out is not None and out.requires_grad))
    except AttributeError:  # not tensors: the checks below name the culprit
        grad = False
    if grad:
        check_matmul_args(a, b, bias, out)
        _check_config("config", config)
        if out is not None:
            raise RuntimeError("matmul(): out= does not support automatic differentiation, but one of the "
                               "arguments requires grad")
        # A @ B is linear's X @ W^T with W = B^T, a view: nothing is copied.
        return linear(a, b.t(), bias, activation, slope=slope, config=config)
    try:
        key = (_layout(a), _layout(b), _layout(bias), _layout(out), activation, slope, config, False)
        plan = plans._PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):  # not tensors, unhashable, or sparse or nested
        key = plan = None  # (no strides or storage): the checks below name the culprit
    if plan is None:
        check_matmul_args(a, b, bias, out)
        _check_config("config", config)
        plan = plans._make_plan(a, b, bias, normalize_activation(activation), slope, config, out, False)
        if key is not None:
            _remember(plans._PLANS, key, plan)
    elif out is not None:
        plan.check_out(out, a, b, bias)
    if out is not None:  # the kernel writes out behind autograd's back: mark it modified, as torch's out= does
        if out.is_inference() and not torch.is_inference_mode_enabled():
            raise RuntimeError("matmul(): out is an inference tensor, which may be written only inside "
                               "torch.inference_mode() (as torch's out= requires); pass out.clone() or a new tensor")
        torch.autograd.graph.increment_version(out)
    return plan.run(a, b, bias, out)[0]


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    *,
    slope: float = 0.01,
    config: KernelConfig | None = None,
    dx_config: KernelConfig | None = None,
    dw_config: KernelConfig | None = None,
) -> torch.Tensor:
    """activation(x @ weight.T + bias), like torch.nn.functional.linear plus an activation.

    Differentiable: when grad mode is on and any of x, weight, bias requires grad, it runs
    through ``autokernel.autograd.LinearFunction`` (Triton kernels for backward too; under
    the backend "auto", a layout whose forward, dX and dW GEMMs route to cuBLAS, or tie
    with the kernels where they do not, runs torch's own linear and activation instead:
    ``autograd.whole_layer_on_torch``).
    Under ``torch.compile`` it is the registered op ``torch.ops.autokernel.linear``. Under
    ``torch.autocast`` x, weight and bias are cast to the autocast dtype, as torch's linear
    takes them there: float32 weights get their gradients through the cast.

    Args:
        x: [..., in_features]; leading dimensions are flattened into M.
        weight: [out_features, in_features], as in torch.nn.Linear (read transposed in place).
        bias: optional [out_features], of any floating dtype (as in ``matmul``); its
            gradient comes back in its own dtype.
        config: forward GEMM config ([M, out] = [M, in] @ [in, out]).
        dx_config: backward config of dX ([M, in] = [M, out] @ [out, in]).
        dw_config: backward config of dW ([out, in] = [out, M] @ [M, in]).
    Returns:
        [..., out_features] in x's dtype.
    """
    if (cast := _autocast_dtype(x)) is not None:
        x, weight, bias = _autocast_cast(cast, x, weight, bias)
    if torch.compiler.is_compiling():
        return _traced_linear(x, weight, bias, activation, slope, config, dx_config, dw_config)
    try:
        key = (_layout(x), _layout(weight), _layout(bias), activation, slope, config, dx_config, dw_config)
        entry = plans._LINEARS.get(key)
    except (AttributeError, TypeError, RuntimeError):  # not tensors, unhashable, or sparse or nested
        key = entry = None  # (no strides or storage): the checks below name the culprit
    if entry is None:
        _check_linear_args(x, weight, bias)
        act = normalize_activation(activation)
        for name, cfg in (("config", config), ("dx_config", dx_config), ("dw_config", dw_config)):
            _check_config(name, cfg)
        lead = x.shape[:-1]
        entry = LinearEntry(act, plans.check_slope(slope), lead.numel(), (*lead, weight.shape[0]), x.dim() == 2,
                            None if bias is None else bias.dtype, config, dx_config, dw_config)
        if key is not None:
            _remember(plans._LINEARS, key, entry)
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)):
        on_torch = entry.on_torch
        if on_torch is None:
            x2d = x if entry.flat else x.reshape(entry.m, x.shape[-1])
            on_torch = entry.on_torch = route.backend() == "auto" and whole_layer_on_torch(x2d, weight, bias, entry)
        if on_torch:  # its GEMMs on cuBLAS: torch's linear and autograd, as eager PyTorch runs them
            if bias is not None and bias.dtype != x.dtype:
                bias = bias.to(x.dtype)  # as the routed addmm takes it; the cast carries bias's gradient back
            return torch_activation(torch.nn.functional.linear(x, weight, bias), entry.act, entry.slope)
        return LinearFunction.apply(x, weight, bias, entry)
    flat = entry.flat
    x2d = x if flat else x.reshape(entry.m, x.shape[-1])  # explicit M: -1 is ambiguous when K = 0
    plan = entry.plan
    if plan is None:  # x2d's and weight.t()'s layouts follow from x's and weight's, which the key holds
        plan = entry.plan = gemm_plan(x2d, weight.t(), bias, entry.act, entry.slope, config)
    # weight stands in for weight.t(): a plan's launch reads only its operands' data
    # pointers (the strides it was built with are fixed in it), and the two share theirs.
    # Making the view costs a tensor per call (1 µs of this function's 6 on a CPU).
    y = plan.run(x2d, weight, bias)[0]
    return y if flat else y.view(entry.out_shape)


class LinearEntry:
    """What linear's checks found for one layout of (x, weight, bias) and its arguments,
    and the plans of that layout once used: ``plan`` (no grad), ``train`` (forward that
    keeps what backward reads) and ``backward`` (autograd.BackwardPlan per layout of dY
    and gradients asked for). Everything a plan depends on follows from the key of
    ``plans._LINEARS``, so a step after the first computes no key but dY's."""

    __slots__ = ("act", "slope", "m", "out_shape", "flat", "bias_dtype", "config", "dx_config", "dw_config",
                 "plan", "train", "backward", "on_torch")

    def __init__(self, act: str, slope: float, m: int, out_shape: tuple, flat: bool, bias_dtype,
                 config, dx_config, dw_config):
        self.act, self.slope, self.m, self.out_shape, self.flat = act, slope, m, out_shape, flat
        self.bias_dtype, self.config, self.dx_config, self.dw_config = bias_dtype, config, dx_config, dw_config
        self.plan = self.train = None
        self.backward = {}
        self.on_torch = None  # under grad: whether torch's linear runs the layer (autograd.whole_layer_on_torch)


# ---- torch.compile: the ops as torch.library custom ops ----
# Eager calls skip the dispatcher (it costs host time per call); traced code calls the
# registered ops, which dynamo keeps in its graph without breaks and which CUDA graphs
# can capture. Configs travel as strings of their fields (an op's schema has no
# KernelConfig type).


def _config_str(config) -> str | None:
    if config is None:
        return None
    if not isinstance(config, KernelConfig):
        raise TypeError(f"config must be a KernelConfig, got {type(config).__name__}")
    return config.to_json()  # every field, whatever fields KernelConfig grows


def _traced_linear(x, weight, bias, activation, slope, config, dx_config, dw_config):
    _check_linear_args(x, weight, bias)
    return ops.linear_nd(x, weight, bias, normalize_activation(activation), plans.check_slope(slope),
                         _config_str(config), _config_str(dx_config), _config_str(dw_config))


def _traced_matmul(a, b, bias, activation, slope, config, out):
    check_matmul_args(a, b, bias, out)
    y = _traced_linear(a, b.t(), bias, activation, slope, config, None, None)
    if out is None:
        return y
    return out.copy_(y)
