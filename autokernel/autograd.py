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

import functools

import torch

from autokernel import runtime
from autokernel.kernels.backward import column_counts, plan_activation_grad
from autokernel.plans import _layout, cached_plan, cublas_not_slower, gemm_plan
from autokernel.config import KernelConfig


def saves_output(activation: str, slope: float) -> bool:
    """True when backward reads act'(Z) off the output Y instead of a saved Z."""
    return activation == "relu" or (activation == "leaky_relu" and slope > 0)


def stores_preactivation(activation: str, slope: float) -> bool:
    """True when forward must store Z for backward (gelu, gelu_tanh, silu)."""
    return activation != "none" and not saves_output(activation, slope)


def linear_forward(x2d, weight, bias, activation: str, slope: float, config: KernelConfig | None,
                   for_backward: bool = True):
    """(Y, Z) for [M, K] x2d, arguments already checked: Z is the pre-activation when
    backward will run (``for_backward``) and needs it, else None."""
    # weight for weight.t(): see api.linear
    return _forward_plan(x2d, weight, bias, activation, slope, config, for_backward).run(x2d, weight, bias)


def _forward_plan(x2d, weight, bias, activation: str, slope: float, config: KernelConfig | None,
                  for_backward: bool = True):
    # One launch: the epilogue stores Z beside Y when backward needs it
    # (docs/backward.md: one launch and one M x N pass fewer than an act kernel after).
    return gemm_plan(x2d, weight.t(), bias, activation, slope, config,
                     store_z=for_backward and stores_preactivation(activation, slope))


def whole_layer_on_torch(x2d, weight, bias, entry) -> bool:
    """Whether torch's own linear and activation run this linear layout, autograd's backward
    included, with no Python of ours in between: where the backend routes at least one of
    its three GEMMs (forward, and dX and dW for a dY laid out as autograd hands it,
    contiguous) to cuBLAS and predicts cuBLAS at least as fast as the Triton pick on the
    others (``plans.cublas_not_slower``). A layer whose GEMMs are split between the two
    libraries pays the host for our Python and for torch's cuBLAS calls both (an eager GPT-2
    block at 2048 tokens, its GEMMs nearly all routed, ran at 0.61x torch's wall time with
    that Python, 0.89x without; BERT-large's, every layer split, 0.67-0.77x: docs/selector.md).
    Configs given for any of the three keep it on the kernels."""
    if entry.config is not None or entry.dx_config is not None or entry.dw_config is not None:
        return False
    if entry.m == 0 or weight.shape[0] == 0 or weight.shape[1] == 0:
        return False
    plan = entry.train
    if plan is None:
        plan = entry.train = _forward_plan(x2d, weight, bias, entry.act, entry.slope, None)
    dy = torch.empty((entry.m, weight.shape[0]), dtype=x2d.dtype, device=x2d.device)  # a stand-in of its layout
    gemms = [(plan, x2d, weight.t(), bias, entry.act)]  # (plan, a, b, bias, activation) of each GEMM
    for a, b in ((dy, weight), (dy.t(), x2d)):  # dX = dY W, dW = dY^T X
        gemms.append((gemm_plan(a, b, None, "none", 0.0, None), a, b, None, "none"))
    return any(p.on_torch for p, *_ in gemms) and all(cublas_not_slower(*g) for g in gemms)


class BackwardPlan:
    """Backward's launches for one layout of (dY, X, W, Z), activation and gradients
    wanted: the elementwise pass (dZ and db) when one is needed, then the dX and dW GEMMs.
    Built once per layout; a call allocates the results and launches."""

    __slots__ = ("grad_pass", "store_dz", "use_z", "db_rows", "db_dtype", "dz_shape", "dx", "dw")

    def __init__(self, dy, x, weight, z, activation: str, slope: float, needs: tuple[bool, bool, bool],
                 bias_dtype: torch.dtype | None, dx_config: KernelConfig | None, dw_config: KernelConfig | None):
        need_dx, need_dw, need_db = needs
        m, n = dy.shape
        self.dz_shape = (m, n)
        self.db_dtype = (bias_dtype or dy.dtype) if need_db else None
        self.use_z = activation != "none"
        self.store_dz = self.use_z and (need_dx or need_dw)
        self.grad_pass = None
        self.db_rows = 0
        dz = dy
        if m > 0 and n > 0 and (self.store_dz or need_db):
            if self.store_dz:
                dz = torch.empty(dy.shape, dtype=dy.dtype, device=dy.device)  # a stand-in of dZ's layout
            self.grad_pass = plan_activation_grad(dy, z if self.use_z else None, dz if self.store_dz else None,
                                                  activation, slope, need_db, runtime.INTERPRETER)
            self.db_rows = self.grad_pass.grid[0] if need_db else 0
        self.dx = gemm_plan(dz, weight, None, "none", 0.0, dx_config) if need_dx else None
        self.dw = gemm_plan(dz.t(), x, None, "none", 0.0, dw_config) if need_dw else None

    def run(self, dy, x, weight, z) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """(dX, dW, db), None where not wanted, for tensors of this plan's layout."""
        dz = dy
        db = None
        if self.grad_pass is not None:
            if self.store_dz:
                dz = torch.empty(self.dz_shape, dtype=dy.dtype, device=dy.device)
            rows = self.db_rows
            n = self.dz_shape[1]
            counts = dy
            if rows == 1:
                # One program row sums every row: it stores db itself (the store casts to
                # the bias dtype).
                db = partial = torch.empty(n, dtype=self.db_dtype, device=dy.device)
            elif rows:
                # The pass's last program of each column block sums the partials into db.
                partial = torch.empty((rows, n), dtype=torch.float32, device=dy.device)
                db = torch.empty(n, dtype=self.db_dtype, device=dy.device)
                counts = column_counts(dy.device, self.grad_pass.grid[1])
            else:
                partial = dy
            self.grad_pass(dy, z if self.use_z else dy, dz, partial, db if db is not None else dy, counts)
        elif self.db_dtype is not None:  # an empty reduction (M or N = 0)
            db = torch.zeros(self.dz_shape[1], dtype=self.db_dtype, device=dy.device)
        dx = None if self.dx is None else self.dx.run(dz, weight, None)[0]
        dw = None if self.dw is None else self.dw.run(dz.t(), x, None)[0]
        return dx, dw, db


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
    z_ = z if activation != "none" else None
    key = ("backward", _layout(dy), _layout(x), _layout(weight), _layout(z_), activation, slope, tuple(needs),
           bias_dtype, dx_config, dw_config)
    plan = cached_plan(key, lambda: BackwardPlan(dy, x, weight, z_, activation, slope, tuple(needs), bias_dtype,
                                                 dx_config, dw_config))
    return plan.run(dy, x, weight, z_)


def _first_derivative_only(backward):
    """``backward`` whose gradients, under ``create_graph`` (a gradient penalty, a
    Hessian-vector product), raise when differentiated again instead of contributing
    nothing: the kernels build no graph. torch's ``once_differentiable`` looks at dY alone;
    here the gradients depend on the saved X and W too."""

    @functools.wraps(backward)
    def wrapper(ctx, grad_y):
        grad_y = grad_y.resolve_neg()  # a negated view's sign is a flag the kernels would not read
        if not torch.is_grad_enabled():  # no create_graph (the common case): nothing to guard
            return backward(ctx, grad_y)
        with torch.no_grad():
            grads = backward(ctx, grad_y)
        if not any(t is not None and t.requires_grad for t in (grad_y, *ctx.saved_tensors)):
            return grads
        error = torch._C._functions.DelayedError(
            b"autokernel.linear has no second derivative: its backward runs kernels that build no "
            b"graph (create_graph=True and differentiating the gradients again need torch.nn.functional.linear)",
            len(grads))

        def marked(t):
            if t is None:
                return None
            t = t.detach()
            t.requires_grad = True
            return t

        return error(*[marked(t) for t in grads])

    return wrapper


class LinearFunction(torch.autograd.Function):
    """Y = act(X @ W^T + b) with Triton kernels for forward and backward.

    ``entry`` (api.LinearEntry) holds the checked arguments of this layout and caches
    its plans: a training step is host-bound at small sizes, and this saves it every
    cache key but dY's."""

    @staticmethod
    def forward(ctx, x, weight, bias, entry):
        x2d = x if entry.flat else x.reshape(entry.m, x.shape[-1])
        plan = entry.train
        if plan is None:
            plan = entry.train = _forward_plan(x2d, weight, bias, entry.act, entry.slope, entry.config)
        y, z = plan.run(x2d, weight, bias)  # weight for weight.t(): see api.linear
        if entry.act == "none":
            saved = None
        elif z is None:
            saved = y  # sign activations: act'(Z) is read off Y
        else:
            saved = z
        ctx.save_for_backward(x2d, weight, saved)
        ctx.entry = entry
        return y if entry.flat else y.view(entry.out_shape)

    @staticmethod
    @_first_derivative_only
    def backward(ctx, grad_y):
        x2d, weight, saved = ctx.saved_tensors
        entry = ctx.entry
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dy = grad_y if entry.flat else grad_y.reshape(entry.m, weight.shape[0])  # a view when strides allow
        # Shape, dtype and device of dY, X, W and Z follow from the entry; dY's strides
        # and alignment do not (autograd may hand any layout).
        key = (dy.stride(), dy.data_ptr() % 16 == 0, need_x, need_w, need_b)
        plan = entry.backward.get(key)
        if plan is None:
            needs = (need_x, need_w, need_b and entry.bias_dtype is not None)
            plan = entry.backward[key] = BackwardPlan(dy, x2d, weight, saved if entry.act != "none" else None,
                                                      entry.act, entry.slope, needs, entry.bias_dtype,
                                                      entry.dx_config, entry.dw_config)
        dx, dw, db = plan.run(dy, x2d, weight, saved)
        if dx is not None and not entry.flat:
            dx = dx.view(*entry.out_shape[:-1], weight.shape[1])
        return dx, dw, db, None
