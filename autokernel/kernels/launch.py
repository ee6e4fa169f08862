"""A Triton launch whose arguments, all but the tensors, are fixed: built once, replayed cheaply.

``JITFunction.run`` costs tens of µs of host time per launch: it binds and specializes
every argument (``native_specialize_impl`` per argument), hashes a cache key, looks the
compiled kernel up and only then calls its launcher. A ``KernelLaunch`` is made for one
layout (shapes, strides, dtypes, 16-byte alignment of each pointer, config, device),
which fixes everything the JIT would recompute, so after its first launch through the
JIT it calls the compiled kernel's launcher directly with the same arguments. Whoever
holds a ``KernelLaunch`` must call it only with tensors of the layout it was made for:
``api`` keys its caches on exactly that.
"""

from __future__ import annotations

import torch


try:
    from triton import knobs as _knobs
except ImportError:  # Triton < 3.4 passes its launch hooks otherwise: stay on the JIT path there
    _knobs = None


class KernelLaunch:
    """``fn[grid](*tensors, *scalars, **constexprs, **options)``, replayable.

    ``tensors`` are the kernel's leading pointer parameters, passed per call; ``scalars``
    the runtime parameters after them and ``constexprs`` the rest, both fixed here.
    """

    __slots__ = ("fn", "grid", "scalars", "kwargs", "args_tail", "device_index", "interpret", "compiled")

    def __init__(self, fn, grid: tuple[int, ...], scalars: tuple, constexprs: dict, options: dict,
                 device: torch.device, interpret: bool):
        self.fn = fn
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.scalars = scalars
        self.kwargs = {**constexprs, **options}
        if interpret:
            self.args_tail = ()
        else:
            # The launcher takes every parameter in declaration order, constexprs included.
            names = fn.arg_names[len(fn.arg_names) - len(constexprs):]
            if set(names) != set(constexprs):
                raise TypeError(f"{fn.__name__}: constexprs must be its last parameters, got {sorted(constexprs)}")
            self.args_tail = (*scalars, *(constexprs[name] for name in names))
        self.device_index = device.index if device.type == "cuda" else None
        self.interpret = interpret
        self.compiled = None

    def __call__(self, *tensors: torch.Tensor) -> None:
        compiled = self.compiled
        if compiled is None:
            kernel = self.fn[self.grid](*tensors, *self.scalars, **self.kwargs)
            if not self.interpret and _knobs is not None:
                self.compiled = kernel.result() if hasattr(kernel, "result") else kernel  # async compile mode
            return
        g = self.grid
        stream = torch._C._cuda_getCurrentRawStream(self.device_index)
        args = (*tensors, *self.args_tail)
        rt = _knobs.runtime  # profilers (proton) install launch hooks here: honour them as the JIT does
        compiled.run(g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata,
                     compiled.launch_metadata(g, stream, *args), rt.launch_enter_hook, rt.launch_exit_hook, *args)
