"""The differentiable linear layer: Y = act(X @ W^T + b) as a torch.autograd.Function.

What forward saves for backward's act'(Z):
- "none": nothing beyond X and W (dZ = dY).
- "relu", "leaky_relu" (slope > 0): the output Y itself. Y has the sign of Z, and these
  derivatives depend only on that sign, so no extra tensor is written.
- "gelu", "gelu_tanh", "silu": Z = X @ W^T + b in the operands' dtype, stored by the
  GEMM's epilogue beside Y. Recomputing Z in backward would cost a third GEMM (+50 %
  backward FLOPs) instead.

Backward (kernels/backward.py), computing only the gradients autograd asks for:
1. one elementwise pass over dY: dZ = dY * act'(Z), and db's column sums in the same
   pass (skipped for "none" when db is not wanted: then dZ is dY itself, any strides);
2. dX = dZ @ W and dW = dZ^T @ X: the forward GEMM kernel on strided views.
Fusing act'(Z) into the GEMMs' operand loads was measured and lost (docs/backward.md).
"""

from __future__ import annotations

import torch

from autokernel import runtime
from autokernel.api import _layout, cached_plan, gemm_plan
from autokernel.config import KernelConfig


def saves_output(activation: str, slope: float) -> bool:
    """True when backward reads act'(Z) off the output Y instead of a saved Z."""
    return activation == "relu" or (activation == "leaky_relu" and slope > 0)


def stores_preactivation(activation: str, slope: float) -> bool:
    """True when forward must store Z for backward (gelu, gelu_tanh, silu)."""
    return activation != "none" and not saves_output(activation, slope)


def linear_forward(x2d, weight, bias, activation: str, slope: float, config: KernelConfig | None):
    """(Y, Z) for [M, K] x2d, arguments already checked: Z is the pre-activation when
    backward needs it, else None."""
    wt = weight.t()
    # One launch: the epilogue stores Z beside Y when backward needs it
    # (docs/backward.md: one launch and one M x N pass fewer than an act kernel after).
    plan = gemm_plan(x2d, wt, bias, activation, slope, config, store_z=stores_preactivation(activation, slope))
    return plan.run(x2d, wt, bias)


def activation_grad_pass(dy, z, store_dz: bool, activation: str, slope: float, sum_dtype: torch.dtype | None):
    """(dZ or None, db or None): backward's one elementwise pass; db = column sums of dZ
    in ``sum_dtype`` (None: not wanted)."""
    from autokernel.kernels.backward import plan_activation_grad

    z_ = z if activation != "none" else None
    key = ("activation_grad", _layout(dy), _layout(z_), store_dz, activation, slope, sum_dtype)
    launch = cached_plan(key, lambda: plan_activation_grad(
        dy, z_, torch.empty(dy.shape, dtype=dy.dtype, device=dy.device) if store_dz else None,
        activation, slope, sum_dtype is not None, runtime.INTERPRETER))
    dz = torch.empty(dy.shape, dtype=dy.dtype, device=dy.device) if store_dz else None
    partial = None
    if sum_dtype is not None:
        # One program row sums every row: it writes db itself (the store casts), which
        # saves the launch of a separate sum (the key holds sum_dtype, so the compiled
        # kernel's pointer type matches).
        rows = launch.grid[0]
        partial = torch.empty((rows, dy.shape[1]), dtype=sum_dtype if rows == 1 else torch.float32, device=dy.device)
    launch(dy, z_ if z_ is not None else dy, dz if dz is not None else dy, partial if partial is not None else dy)
    if partial is None:
        return dz, None
    return dz, (partial[0] if partial.shape[0] == 1 else partial.sum(0, dtype=sum_dtype))


def linear_backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    z: torch.Tensor | None,
    activation: str,
    slope: float,
    *,
    needs: tuple[bool, bool, bool],
    bias_dtype: torch.dtype | None = None,
    dx_config: KernelConfig | None = None,
    dw_config: KernelConfig | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """(dX, dW, db) of Y = act(X @ W^T + b), each None unless asked for in ``needs``.

    Args:
        dy: [M, N] gradient of Y, any strides.
        x: [M, K] input; weight: [N, K].
        z: [M, N] what act'(.) is evaluated on (Z, or Y for sign activations); unused for "none".
        needs: (dX, dW, db) wanted.
        bias_dtype: dtype of db (default: dy's).
        dx_config: config of the [M, K] = [M, N] @ [N, K] GEMM (default: as matmul picks one for M, K, N).
        dw_config: config of the [N, K] = [N, M] @ [M, K] GEMM (default: as matmul picks one for N, K, M).
    """
    need_dx, need_dw, need_db = needs
    m, n = dy.shape
    dtype = dy.dtype
    dz = dy
    db = None
    if m > 0 and n > 0:
        gemm_needs_dz = activation != "none" and (need_dx or need_dw)
        if gemm_needs_dz or need_db:
            dz_, db = activation_grad_pass(dy, z, gemm_needs_dz, activation, slope,
                                           (bias_dtype or dtype) if need_db else None)
            if gemm_needs_dz:
                dz = dz_
    if need_db and db is None:  # an empty reduction (M = 0)
        db = torch.zeros((n,), dtype=bias_dtype or dtype, device=dy.device)
    dx = dw = None
    if need_dx:
        dx = gemm_plan(dz, weight, None, "none", 0.0, dx_config).run(dz, weight, None)[0]
    if need_dw:
        dzt = dz.t()
        dw = gemm_plan(dzt, x, None, "none", 0.0, dw_config).run(dzt, x, None)[0]
    return dx, dw, db


class LinearFunction(torch.autograd.Function):
    """Y = act(X @ W^T + b) with Triton kernels for forward and backward."""

    # Per-step host time counts here (a step at 256^3 is host-bound): 2-D inputs skip the
    # reshapes, and ctx gets one attribute.
    @staticmethod
    def forward(ctx, x, weight, bias, activation, slope, config, dx_config, dw_config):
        flat = x.dim() == 2
        x2d = x if flat else x.reshape(x.shape[:-1].numel(), x.shape[-1])
        y, z = linear_forward(x2d, weight, bias, activation, slope, config)
        if activation == "none":
            saved = None
        elif z is None:
            saved = y  # sign activations: act'(Z) is read off Y
        else:
            saved = z
        ctx.save_for_backward(x2d, weight, saved)
        ctx.args = (activation, slope, None if bias is None else bias.dtype, dx_config, dw_config,
                    None if flat else x.shape)
        return y if flat else y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad_y):
        x2d, weight, saved = ctx.saved_tensors
        activation, slope, bias_dtype, dx_config, dw_config, x_shape = ctx.args
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dy = grad_y if x_shape is None else grad_y.reshape(x2d.shape[0], weight.shape[0])  # a view when strides allow
        dx, dw, db = linear_backward(
            dy, x2d, weight, saved, activation, slope,
            needs=(need_x, need_w, need_b and bias_dtype is not None),
            bias_dtype=bias_dtype, dx_config=dx_config, dw_config=dw_config,
        )
        if dx is not None and x_shape is not None:
            dx = dx.reshape(x_shape)
        return dx, dw, db, None, None, None, None, None
