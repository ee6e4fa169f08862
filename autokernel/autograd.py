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
from autokernel.api import launch, resolve_config
from autokernel.config import KernelConfig


def saves_output(activation: str, slope: float) -> bool:
    """True when backward reads act'(Z) off the output Y instead of a saved Z."""
    return activation == "relu" or (activation == "leaky_relu" and slope > 0)


def linear_forward(x2d, weight, bias, activation: str, slope: float, config: KernelConfig | None):
    """(Y, Z) for [M, K] x2d, arguments already checked: Z is the pre-activation when
    backward needs it, else None."""
    m, k = x2d.shape
    n = weight.shape[0]
    y = torch.empty((m, n), dtype=x2d.dtype, device=x2d.device)
    z = None if activation == "none" or saves_output(activation, slope) else torch.empty_like(y)
    if m > 0 and n > 0:
        cfg = resolve_config(config, m, n, k, x2d.dtype, activation, bias is not None, x2d.device)
        # One launch: the epilogue stores Z beside Y when backward needs it
        # (docs/backward.md: one launch and one M x N pass fewer than an act kernel after).
        launch(x2d, weight.t(), y, bias, activation, slope, cfg, z=z)
    return y, z


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
    from autokernel.kernels.backward import launch_activation_grad

    need_dx, need_dw, need_db = needs
    m, n = dy.shape
    k = x.shape[1]
    dtype = dy.dtype
    interp = runtime.INTERPRETER
    dz = dy
    db = None
    if m > 0 and n > 0:
        gemm_needs_dz = activation != "none" and (need_dx or need_dw)
        if gemm_needs_dz:
            dz = torch.empty((m, n), dtype=dtype, device=dy.device)
        if gemm_needs_dz or need_db:
            sums = launch_activation_grad(dy, z, dz if gemm_needs_dz else None, activation, slope, need_db, interp)
            if need_db:
                db = sums.to(bias_dtype or dtype)
    if need_db and db is None:  # an empty reduction (M = 0)
        db = torch.zeros((n,), dtype=bias_dtype or dtype, device=dy.device)
    dx = dw = None
    if need_dx:
        dx = torch.empty((m, k), dtype=dtype, device=dy.device)
        if m > 0 and k > 0:
            launch(dz, weight, dx, None, "none", 0.0, resolve_config(dx_config, m, k, n, dtype, "none", False, dy.device))
    if need_dw:
        dw = torch.empty((n, k), dtype=weight.dtype, device=dy.device)
        if n > 0 and k > 0:
            launch(dz.t(), x, dw, None, "none", 0.0, resolve_config(dw_config, n, k, m, dtype, "none", False, dy.device))
    return dx, dw, db


class LinearFunction(torch.autograd.Function):
    """Y = act(X @ W^T + b) with Triton kernels for forward and backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, activation, slope, config, dx_config, dw_config):
        x2d = x.reshape(x.shape[:-1].numel(), x.shape[-1])
        y, z = linear_forward(x2d, weight, bias, activation, slope, config)
        if activation == "none":
            saved = None
        elif z is None:
            saved = y  # sign activations: act'(Z) is read off Y
        else:
            saved = z
        ctx.save_for_backward(x2d, weight, saved)
        ctx.activation = activation
        ctx.slope = slope
        ctx.bias_dtype = bias.dtype if bias is not None else None
        ctx.configs = (dx_config, dw_config)
        ctx.x_shape = x.shape
        return y.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad_y):
        x2d, weight, saved = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dy = grad_y.reshape(x2d.shape[0], weight.shape[0])  # a view whenever strides allow: no copy
        dx, dw, db = linear_backward(
            dy, x2d, weight, saved, ctx.activation, ctx.slope,
            needs=(need_x, need_w, need_b and ctx.bias_dtype is not None),
            bias_dtype=ctx.bias_dtype,
            dx_config=ctx.configs[0],
            dw_config=ctx.configs[1],
        )
        if dx is not None:
            dx = dx.reshape(ctx.x_shape)
        return dx, dw, db, None, None, None, None, None
