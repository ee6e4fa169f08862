"""``autokernel.nn.Linear``: a drop-in torch.nn.Linear on Triton kernels, and a swapper.

``Linear`` subclasses torch.nn.Linear, so its parameters, their initialisation, its
state_dict keys and its repr are torch's own: a torch checkpoint loads as is.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
from torch.nn.modules.lazy import LazyModuleMixin

from autokernel import ops  # noqa: F401  (registers torch.ops.autokernel.*, which compiled forwards call)
from autokernel.api import _autocast_cast, _check_config, _config_str, linear, normalize_activation, torch_activation
from autokernel.config import KernelConfig
from autokernel.plans import _KERNEL_DEVICE_TYPE, SUPPORTED_DTYPES, check_slope, storage_kind

_CONFIGS = ("config", "dx_config", "dw_config")
"""The config attributes: their JSON is kept beside them, as ``_configs_json``, for the op
a compiled forward calls (None while all three are None, the usual case: one guard)."""


class Linear(torch.nn.Linear):
    """y = activation(x @ weight.T + bias) with a fused activation and Triton backward.

    Args:
        in_features, out_features, bias, device, dtype: as torch.nn.Linear.
        activation: None, "relu", "leaky_relu", "gelu", "gelu_tanh" or "silu", fused
            into the GEMM epilogue (forward) and into the kernels that read dY (backward).
        slope: leaky_relu's negative slope.

    The attributes ``config``, ``dx_config`` and ``dw_config`` (KernelConfig or None)
    pick the launch parameters of the forward, dX and dW GEMMs; None means the default.
    Under ``torch.autocast`` it runs in the autocast dtype like torch.nn.Linear (float32
    weights cast per call, their gradients float32).

    Inputs the kernels do not take (float64, sparse or nested tensors, or tensors on another
    device than the kernels', e.g. a model moved to the CPU on a GPU machine) run torch's
    linear and activation instead, with one warning per kind of input (none under torch.compile):
    a swapped model keeps working wherever torch's would.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        activation: str | None = None,
        *,
        slope: float = 0.01,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = normalize_activation(activation)
        self.slope = slope  # checked in __setattr__
        self.config: KernelConfig | None = None
        self.dx_config: KernelConfig | None = None
        self.dw_config: KernelConfig | None = None

    def __setattr__(self, name: str, value) -> None:
        if name in _CONFIGS:
            _check_config(name, value)
        elif name == "activation":
            value = normalize_activation(value)
        elif name == "slope":
            value = check_slope(value)
        super().__setattr__(name, value)
        if name in _CONFIGS:
            texts = tuple(_config_str(getattr(self, n, None)) for n in _CONFIGS)
            super().__setattr__("_configs_json", None if texts == (None, None, None) else texts)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        # A layer pickled by an autokernel before __setattr__ kept these: its activation
        # may be unnormalized ("GELU", set by hand), and _configs_json is missing.
        if "_configs_json" not in self.__dict__:
            self.activation = self.__dict__.get("activation")
            self.slope = self.__dict__.get("slope", 0.01)
            self.config = self.__dict__.get("config")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return self._traced_forward(input)
        if isinstance(input, torch.Tensor) and (input.device.type != _KERNEL_DEVICE_TYPE or
                                                input.dtype not in SUPPORTED_DTYPES or
                                                input.layout != torch.strided or input.is_nested):
            _warn_torch_path(input)
            return self._torch_forward(input)
        if isinstance(input, torch.Tensor) and input.is_neg():  # its sign is a flag the kernels would not read
            input = input.resolve_neg()
        return linear(
            input, self.weight, self.bias, self.activation, slope=self.slope,
            config=self.config, dx_config=self.dx_config, dw_config=self.dw_config,
        )

    def _traced_forward(self, input: torch.Tensor) -> torch.Tensor:
        """What dynamo traces: the registered op, called with the attributes as they are
        stored (activation normalized, configs as JSON), and no Python of ours in between.
        Each function or global our Python would touch is a guard that every call of the
        compiled model checks (81 against torch's 44 on a one-block model, H100,
        docs/launch.md); the op's fake implementation checks the arguments instead, once,
        while tracing. The body is ops.linear_nd's, spelled out here: calling it would add
        its module, code object and op to the guards (79 against 74 on a one-block model,
        CPU), which is what this path exists to avoid."""
        if input.device.type != _KERNEL_DEVICE_TYPE or input.dtype not in SUPPORTED_DTYPES:
            return self._torch_forward(input)
        if input.dim() == 0:  # before shape[-1]: linear's message, not an IndexError
            raise ValueError(f"x must have at least 1 dimension, got shape {tuple(input.shape)}")
        flat = input.dim() == 2
        # An explicit M: -1 is ambiguous when K = 0.
        x2d = input if flat else input.reshape(input.shape[:-1].numel(), input.shape[-1])
        weight, bias = self.weight, self.bias
        if torch.is_autocast_enabled(input.device.type):  # torch's linear would run in autocast's dtype
            x2d, weight, bias = _autocast_cast(torch.get_autocast_dtype(input.device.type), x2d, weight, bias)
        for_backward = torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad or
                                                    (bias is not None and bias.requires_grad))
        texts = self._configs_json
        config, dx_config, dw_config = (None, None, None) if texts is None else texts
        y = torch.ops.autokernel.linear_fwd(x2d, weight, bias, self.activation, self.slope, config, dx_config,
                                            dw_config, for_backward)[0]
        return y if flat else y.reshape(*input.shape[:-1], weight.shape[0])

    def _torch_forward(self, input: torch.Tensor) -> torch.Tensor:
        """torch's linear and activation, for inputs the kernels do not take."""
        y = torch.nn.functional.linear(input, self.weight, self.bias)
        return torch_activation(y, self.activation, self.slope)

    def extra_repr(self) -> str:
        act = "" if self.activation == "none" else f", activation={self.activation}"
        if self.activation == "leaky_relu":
            act += f", slope={self.slope}"
        return super().extra_repr() + act

    @classmethod
    def from_linear(cls, module: torch.nn.Linear, activation: str | None = None, slope: float = 0.01) -> "Linear":
        """An autokernel Linear that shares ``module``'s parameters (optimizers keep working)."""
        if not isinstance(module, torch.nn.Linear):
            raise TypeError(f"from_linear takes a torch.nn.Linear, got {type(module).__name__}")
        new = cls(module.in_features, module.out_features, bias=module.bias is not None,
                  activation=activation, slope=slope, device="meta")
        new.weight = module.weight
        new.bias = module.bias
        new.train(module.training)
        return new


_WARNED: set[tuple[str, torch.dtype, str]] = set()


def _warn_torch_path(input: torch.Tensor) -> None:
    """Say once per (device type, dtype, layout) that such inputs run torch's linear."""
    layout = storage_kind(input)
    seen = (input.device.type, input.dtype, layout)
    if seen in _WARNED:
        return
    _WARNED.add(seen)
    dtype = str(input.dtype).removeprefix("torch.")
    kind, dense = (dtype, "") if layout == "strided" else (f"{layout} {dtype}", "dense ")
    warnings.warn(f"autokernel.nn.Linear: {kind} inputs on {input.device.type} run torch's linear; the kernels "
                  f"take {dense}float16, bfloat16 and float32 on {_KERNEL_DEVICE_TYPE}", stacklevel=2)


def _fusable(module: torch.nn.Module) -> tuple[str, float] | None:
    """(activation, slope) when ``module`` is an activation the kernels can fuse."""
    if isinstance(module, torch.nn.ReLU):
        return "relu", 0.01
    if isinstance(module, torch.nn.LeakyReLU):
        return "leaky_relu", float(module.negative_slope)
    if isinstance(module, torch.nn.GELU):
        return ("gelu_tanh" if module.approximate == "tanh" else "gelu"), 0.01
    if isinstance(module, torch.nn.SiLU):
        return "silu", 0.01
    return None


@dataclass(frozen=True)
class LinearSite:
    """One Linear GEMM of a model as ``swap_linear`` treats it (``linear_sites`` finds them).

    path: the module path in the model ("" for the model itself); in_features,
    out_features, bias, dtype: the layer's (dtype: its weight's). activation, slope: what
    its kernel applies, an activation module fused from its ``nn.Sequential`` or an
    autokernel Linear's own. fused: the path of that activation module, which
    ``swap_linear`` replaces by ``nn.Identity`` (None if none). skipped: None for a layer
    that runs on autokernel's kernels once swapped; else why torch runs it, and
    ``swap_linear`` leaves it be.
    """

    path: str
    in_features: int
    out_features: int
    bias: bool
    dtype: torch.dtype
    activation: str = "none"
    slope: float = 0.01
    fused: str | None = None
    skipped: str | None = None


SKIP_ATTENTION = "MultiheadAttention's projections: torch's attention reads their weights, not their forward"
SKIP_SUBCLASS = "subclasses of torch.nn.Linear: swap_linear swaps torch.nn.Linear itself only"
SKIP_LAZY = ("uninitialized LazyLinear: in_features unknown until the model has run once; "
             "run an example input through it first")


def linear_sites(model: torch.nn.Module, fuse_activations: bool = True) -> Iterator[LinearSite]:
    """Every Linear GEMM of ``model``, in module order: those ``swap_linear`` runs on
    autokernel's kernels (``skipped`` None) with the activation it fuses into each, and
    those it leaves to torch (``skipped`` says why). ``swap_linear`` and
    ``autokernel shapes`` both walk the model through this, so what is tuned is what runs."""
    yield from _sites(model, "", fuse_activations)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _site(module: torch.nn.Linear, path: str, skipped: str | None = None) -> LinearSite:
    own = isinstance(module, Linear)
    return LinearSite(path, module.in_features, module.out_features, module.bias is not None, module.weight.dtype,
                      module.activation if own else "none", module.slope if own else 0.01, skipped=skipped)


def _attention_sites(mha: torch.nn.MultiheadAttention, path: str) -> Iterator[LinearSite]:
    e, dtype = mha.embed_dim, mha.out_proj.weight.dtype
    bias = mha.in_proj_bias is not None
    if mha._qkv_same_embed_dim:  # one packed [3E, E] weight
        yield LinearSite(_join(path, "in_proj"), e, 3 * e, bias, dtype, skipped=SKIP_ATTENTION)
    else:
        for name, dim in (("q_proj", e), ("k_proj", mha.kdim), ("v_proj", mha.vdim)):
            yield LinearSite(_join(path, name), dim, e, bias, dtype, skipped=SKIP_ATTENTION)
    yield _site(mha.out_proj, _join(path, "out_proj"), SKIP_ATTENTION)


def _sites(module: torch.nn.Module, path: str, fuse: bool) -> Iterator[LinearSite]:
    if isinstance(module, Linear) or type(module) is torch.nn.Linear:
        yield _site(module, path)
    elif isinstance(module, torch.nn.Linear) and isinstance(module, LazyModuleMixin) \
            and module.has_uninitialized_params():
        yield LinearSite(path, 0, module.out_features, module.bias is not None, module.weight.dtype,
                         skipped=SKIP_LAZY)
    elif isinstance(module, torch.nn.MultiheadAttention):
        yield from _attention_sites(module, path)
    else:
        if isinstance(module, torch.nn.Linear):  # a subclass: its owner may read its weight directly
            yield _site(module, path, SKIP_SUBCLASS)
        children = list(module.named_children())
        for i, (name, child) in enumerate(children):
            for site in _sites(child, _join(path, name), fuse):
                if (fuse and isinstance(module, torch.nn.Sequential) and site.path == _join(path, name)
                        and site.skipped is None and site.activation == "none" and i + 1 < len(children)):
                    after, act = children[i + 1]
                    fused = _fusable(act)
                    if fused is not None:
                        site = replace(site, activation=fused[0], slope=fused[1], fused=_join(path, after))
                yield site


def swap_linear(model: torch.nn.Module, fuse_activations: bool = True) -> torch.nn.Module:
    """Replace, in place, every torch.nn.Linear of ``model`` by ``autokernel.nn.Linear``.

    The new modules share the old parameters, so optimizers and state_dicts are unchanged.
    Only modules whose type is exactly torch.nn.Linear are swapped (subclasses such as
    MultiheadAttention's out_proj are used by their owners through their weights, not
    their forward; an uninitialized LazyLinear is left, with a warning, until the model
    has run once). With ``fuse_activations``, a Linear followed inside an
    ``nn.Sequential`` by ReLU, LeakyReLU, GELU or SiLU takes that activation into its
    kernel and the activation module becomes ``nn.Identity`` (state_dict keys keep).
    ``linear_sites`` lists what this does without doing it.

    Returns:
        ``model``, for chaining; a bare torch.nn.Linear cannot change in place, so for
        one the new module is returned instead.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"swap_linear takes a torch.nn.Module, got {type(model).__name__}")
    if type(model) is torch.nn.Linear:
        return Linear.from_linear(model)
    sites = list(linear_sites(model, fuse_activations))  # walked before anything changes
    lazy = [s.path for s in sites if s.skipped == SKIP_LAZY]
    if lazy:
        warnings.warn(f"swap_linear left {', '.join(lazy)} to torch: an uninitialized LazyLinear has no "
                      "in_features until the model has run once; run an example input through it first",
                      RuntimeWarning, stacklevel=2)
    for site in sites:
        if site.skipped is not None:
            continue
        module = model.get_submodule(site.path)
        if type(module) is torch.nn.Linear:
            _replace(model, site.path, Linear.from_linear(module, site.activation, site.slope))
        elif site.fused is not None:  # already ours: it takes the activation that follows it
            module.activation, module.slope = site.activation, site.slope
        if site.fused is not None:
            _replace(model, site.fused, torch.nn.Identity())
    return model


def _replace(model: torch.nn.Module, path: str, new: torch.nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(model.get_submodule(parent), name, new)
