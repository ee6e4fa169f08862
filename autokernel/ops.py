"""The linear layer as torch.library custom ops, for torch.compile.

``torch.ops.autokernel.linear_fwd`` and ``linear_bwd`` wrap autograd.py's forward and
backward; fake (meta) implementations give their output shapes to the tracer, and
``register_autograd`` ties them together, so dynamo and AOTAutograd see two opaque ops
(no graph break) and ``mode="reduce-overhead"`` can capture them in CUDA graphs.
Eager calls don't come here: ``api.linear`` calls the kernels directly, without the
dispatcher's per-call cost. Configs arrive as JSON strings (``api._config_str``): an op's
schema has no KernelConfig type.
"""

from __future__ import annotations

import functools

import torch

from autokernel.autograd import linear_backward, linear_forward, saves_output, stores_preactivation
from autokernel.config import KernelConfig
from autokernel.plans import _check_linear_args
from autokernel.records import normalize_activation


@functools.lru_cache(maxsize=256)
def _config(text: str | None) -> KernelConfig | None:
    return None if text is None else KernelConfig.model_validate_json(text)


def _none_as_empty(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    # An op returns tensors only: an absent result is an empty one.
    return like.new_empty((0,)) if t is None else t


@torch.library.custom_op("autokernel::linear_fwd", mutates_args=())
def linear_fwd(
    x2d: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str, slope: float,
    config: str | None, dx_config: str | None, dw_config: str | None, for_backward: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(Y, Z) with Z empty unless backward will run (``for_backward``) and needs the
    pre-activation. dx_config and dw_config are carried for backward."""
    y, z = linear_forward(x2d, weight, bias, activation, slope, _config(config), for_backward)
    return y, _none_as_empty(z, y)


@linear_fwd.register_fake
def _(x2d, weight, bias, activation, slope, config, dx_config, dw_config, for_backward):
    # linear's checks, once while tracing (a compiled nn.Linear calls the op with none of
    # linear's Python before it: docs/launch.md).
    _check_linear_args(x2d, weight, bias)
    if normalize_activation(activation) != activation:  # the kernels take the normalized name only
        raise ValueError(f"activation {activation!r} must be given as {normalize_activation(activation)!r}")
    y = x2d.new_empty((x2d.shape[0], weight.shape[0]))
    keeps_z = for_backward and stores_preactivation(activation, slope)
    return y, (y.new_empty(y.shape) if keeps_z else y.new_empty((0,)))


@torch.library.custom_op("autokernel::linear_bwd", mutates_args=())
def linear_bwd(
    dy: torch.Tensor, x2d: torch.Tensor, weight: torch.Tensor, saved: torch.Tensor | None,
    activation: str, slope: float, need_dx: bool, need_dw: bool, need_db: bool,
    dx_config: str | None, dw_config: str | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dX, dW, db in dY's dtype), each empty unless asked for."""
    dx, dw, db = linear_backward(dy, x2d, weight, saved, activation, slope, needs=(need_dx, need_dw, need_db),
                                 dx_config=_config(dx_config), dw_config=_config(dw_config))
    return _none_as_empty(dx, dy), _none_as_empty(dw, dy), _none_as_empty(db, dy)


@linear_bwd.register_fake
def _(dy, x2d, weight, saved, activation, slope, need_dx, need_dw, need_db, dx_config, dw_config):
    def out(shape, wanted):
        return dy.new_empty(shape if wanted else (0,))

    return out(x2d.shape, need_dx), out(weight.shape, need_dw), out((weight.shape[0],), need_db)


def _setup_context(ctx, inputs, output):
    x2d, weight, bias, activation, slope, _config_text, dx_config, dw_config, _for_backward = inputs
    y, z = output
    if activation == "none":
        saved = None
    elif saves_output(activation, slope):
        saved = y  # sign activations: act'(Z) is read off Y
    else:
        saved = z
    ctx.save_for_backward(x2d, weight, saved)
    ctx.args = (activation, slope, dx_config, dw_config)
    ctx.bias_dtype = None if bias is None else bias.dtype


def _backward(ctx, grad_y, grad_z):
    x2d, weight, saved = ctx.saved_tensors
    activation, slope, dx_config, dw_config = ctx.args
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    need_db = need_db and ctx.bias_dtype is not None
    dx, dw, db = linear_bwd(grad_y, x2d, weight, saved, activation, slope, need_dx, need_dw, need_db,
                            dx_config, dw_config)
    return (dx if need_dx else None, dw if need_dw else None, db.to(ctx.bias_dtype) if need_db else None,
            None, None, None, None, None, None)


linear_fwd.register_autograd(_backward, setup_context=_setup_context)


def linear_nd(x, weight, bias, activation: str, slope: float, config, dx_config, dw_config) -> torch.Tensor:
    """Y = act(x @ weight.T + bias) for x of any number of dimensions (>= 1) through the
    registered op, arguments as the op takes them (activation normalized, configs as JSON
    strings): what traced code calls, api.linear's and nn.Linear's. Z is stored only where
    backward can run: grad mode and requires_grad are known (and guarded on) when dynamo
    traces this, so inference graphs skip Z's allocation and store."""
    flat = x.dim() == 2
    x2d = x if flat else x.reshape(x.shape[:-1].numel(), x.shape[-1])  # an explicit M: -1 is ambiguous when K = 0
    for_backward = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or
                                                (bias is not None and bias.requires_grad))
    y = linear_fwd(x2d, weight, bias, activation, slope, config, dx_config, dw_config, for_backward)[0]
    return y if flat else y.reshape(*x.shape[:-1], weight.shape[0])
