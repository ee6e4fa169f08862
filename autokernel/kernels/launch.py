"""A Triton launch whose arguments, all but the tensors, are fixed: built once, replayed cheaply.

``JITFunction.run`` costs tens of µs of host time per launch: it binds and specializes
every argument (``native_specialize_impl`` per argument), hashes a cache key, looks the
compiled kernel up and only then calls its launcher. A ``KernelLaunch`` is made for one
layout (shapes, strides, dtypes, 16-byte alignment of each pointer, config, device),
which fixes everything the JIT would recompute, so after its first launch through the
JIT it replays the same arguments. Whoever holds a ``KernelLaunch`` must call it only
with tensors of the layout it was made for: ``api`` keys its caches on exactly that.

Replay goes one of two ways:
- direct: the C function that Triton 3.6's ``CudaLauncher`` wraps, called with
  pre-resolved arguments. The wrapper (``CompiledKernel.run``) otherwise costs, per
  launch, a Python frame that asks the allocator ContextVar for global and profile
  scratch, a ``launch_metadata`` dict and two calls of Triton's (empty) launch-hook
  chains. Taken only where the launcher has exactly that form (``_c_launcher``), no
  profile scratch is wanted and no launch hook is set (checked per call: profilers
  such as proton add hooks at any time).
- else ``CompiledKernel.run``, as ``JITFunction.run`` calls it (Triton >= 3.4), which
  asks Triton's allocator for scratch: ``scratch_allocator`` where none is set.
Under the interpreter every call takes the JIT path.
"""

from __future__ import annotations

import functools
import inspect

import torch

import triton
from triton.runtime import _allocation

try:
    from triton import knobs as _knobs
except ImportError:  # Triton < 3.4 passes its launch hooks otherwise: stay on the JIT path there
    _knobs = None

# The parameters of Triton 3.6's CudaLauncher.__call__, whose body the direct path replays:
# scratch from the allocators, then launch(grid, stream, function, cooperative, pdl,
# global_scratch, profile_scratch, *args) with args = (packed metadata, launch metadata,
# enter hook, exit hook, *kernel arguments).
_LAUNCHER_36 = ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]


def _c_launcher(compiled):
    """The function that ``compiled.run`` (a Triton 3.6 ``CudaLauncher``) hands its
    arguments to, or None where the launcher has another form (other Triton versions,
    other backends) or wants profile scratch (an instrumented kernel)."""
    run = compiled.run
    if type(run).__name__ != "CudaLauncher" or not callable(getattr(run, "launch", None)):
        return None
    try:
        params = list(inspect.signature(type(run).__call__).parameters)
    except (TypeError, ValueError):
        return None
    if params != _LAUNCHER_36 or getattr(run, "profile_scratch_size", 1) != 0:
        return None
    return run.launch


def _descriptor_launcher(launch, prefix_len: int):
    """(C function, metadata per descriptor, expansion) where ``launch`` is Triton 3.6's
    wrapper of the C launcher for a kernel that takes host tensor descriptors
    (``wrap_handle_tensordesc``'s ``inner``), and they are the kernel's leading parameters;
    else None. The wrapper fills each descriptor's tensor map (``cuTensorMapEncodeTiled``)
    on every launch, about 1 µs of host time each; with its parts a launch can reuse maps
    filled before for the same operands (``KernelLaunch.expand_descriptor``)."""
    code, cells = getattr(launch, "__code__", None), getattr(launch, "__closure__", None)
    if code is None or not cells:
        return None
    try:
        free = dict(zip(code.co_freevars, (cell.cell_contents for cell in cells), strict=True))
    except ValueError:  # an empty cell
        return None
    raw, indices, metas = free.get("launcher"), free.get("tensordesc_indices"), free.get("tensordesc_meta")
    scope = getattr(launch, "__globals__", {})
    make = scope.get("make_tensordesc_arg")
    if (not callable(raw) or not callable(make) or scope.get("_BASE_ARGS_FORMAT_LEN") != prefix_len
            or not isinstance(indices, (set, frozenset)) or not indices or indices != set(range(len(indices)))
            or not isinstance(metas, (list, tuple)) or len(metas) != len(indices)):
        return None
    return raw, tuple(metas), make


def _hooks_quiet(runtime) -> bool:
    """True when no Triton launch hook would run: each is unset or an empty ``HookChain``."""
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    try:
        return (enter is None or not enter.calls) and (leave is None or not leave.calls)
    except AttributeError:  # a hook that is no chain (a plain callable): let CompiledKernel.run call it
        return False


def hash_callees_first(namespace: dict) -> None:
    """Have Triton work out the cache key of each JIT function in ``namespace`` (a kernel
    module's globals) after those of every JIT function it calls, as the module is imported.

    Triton 3.6 merges the globals a callee reads into its caller's before it works out the
    callee's key, and a caller's key lists the constexpr globals merged: a callee hashed for
    the first time inside its caller's hashing leaves its constants (the epilogue's) out of
    the caller's key. A kernel's key, and so its binary's name in the on-disk cache,
    depended on which kernel the process hashed first.
    A compile worker whose first candidate ran one kernel named its binaries differently from
    a timing worker whose first ran another, and the timing worker then compiled them again
    while it measured. Hashed callees first, every process keys every kernel alike."""
    from autokernel import runtime

    if runtime.INTERPRETER:
        return
    done: set[int] = set()

    def visit(fn) -> None:
        if id(fn) in done:
            return
        done.add(id(fn))
        for callee in _jit_callees(fn):
            visit(callee)
        try:
            fn.cache_key  # noqa: B018  (computed and kept by Triton)
        except Exception:  # noqa: BLE001  (the kernel's first launch raises it again, for that kernel alone)
            pass

    for value in list(namespace.values()):
        if _is_jit(value):
            visit(value)


def _is_jit(value) -> bool:
    return isinstance(value, triton.runtime.jit.JITFunction)


def _jit_callees(fn) -> list:
    """The JIT functions ``fn`` names, as a global or as an attribute of a module it names."""
    code, scope = fn.fn.__code__, fn.fn.__globals__
    found = []
    for name in code.co_names:
        value = scope.get(name)
        if _is_jit(value):
            found.append(value)
        elif inspect.ismodule(value):
            found.extend(attr for other in code.co_names if _is_jit(attr := getattr(value, other, None)))
    return found


INTERPRETER_PROGRAMS = 3
"""The persistent kernels' grid under the interpreter: few programs, so their loops over
tiles are exercised on the CPU too."""


@functools.lru_cache(maxsize=None)
def persistent_programs(device: torch.device) -> int:
    """One program per SM: the grid of the persistent kernels (TMA, stream-K)."""
    if device.type != "cuda":
        return INTERPRETER_PROGRAMS
    return torch.cuda.get_device_properties(device).multi_processor_count


@functools.lru_cache(maxsize=None)
def dependent_launch(device: torch.device) -> bool:
    """Whether split-K's reduction is launched as a programmatic dependent launch of its
    partial kernel on ``device``: Hopper and later (sm_90's ``griddepcontrol``). The
    reduction's programs then start while the partial kernel's last programs run, and wait
    (``gdc_wait``) before they read what it wrote. On the H100 that made split-K 1.03x
    faster where ``matmul`` picks it (1.05x under 10 µs), and the TMA stream-K tail's
    fix-up 0.997x as fast, which stays a plain launch (docs/kernel-notes.md)."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (9, 0)


_BUFFERS: dict[tuple, torch.Tensor] = {}

# Why a launch on stream 0 needs no capture check. Handle 0 is what torch's default
# stream returns, and Triton's launcher hands it to cuLaunchKernelEx (the driver API,
# not its per-thread-default-stream variant), where 0 means the legacy default stream:
# a launch with handle 0 runs on the legacy stream. CUDA never captures that
# stream: a capture may not begin on it ("Capture may not be initiated if stream is
# cudaStreamLegacy"), and while another stream captures, work on it is either an error
# (cudaErrorStreamCaptureImplicit, for blocking capturing streams) or runs eagerly outside
# the graph. So no CUDA graph can hold a launch made on stream 0: it may use the stream's
# cached scratch, which the legacy stream's order protects, and the question
# (torch._C._cuda_isCurrentStreamCapturing, a CUDA call) is asked on other streams only.


def stream_buffer(name: str, numel: int, device, stream: int, dtype: torch.dtype = torch.int8, *,
                  zeroed: bool = False, at_least: int = 0) -> torch.Tensor:
    """A buffer of at least ``numel`` elements for launches on ``stream`` (a raw CUDA stream
    handle; 0 off the GPU) of ``device``: one cached per (name, device, stream), since
    launches on one stream run in order and may share it. The device is part of the key:
    every GPU's default stream has handle 0. ``zeroed``: made with zeros (a kernel that
    uses it leaves it so); ``at_least``: the smallest size to make, so that it seldom grows."""
    make = torch.zeros if zeroed else torch.empty
    if stream and torch._C._cuda_isCurrentStreamCapturing():  # torch.cuda.is_current_stream_capturing, one call less
        # A CUDA graph owns what is allocated while it is captured: a temporary there,
        # or the graph pool could hand the cached buffer to another tensor, and a graph
        # replayed beside eager launches must not share their buffer. (Stream 0 is never
        # captured: see above.)
        return make(numel, dtype=dtype, device=device)
    key = (name, device, stream)
    buf = _BUFFERS.get(key)
    if buf is None or buf.numel() < numel:
        buf = make(max(numel, at_least), dtype=dtype, device=device)
        _BUFFERS[key] = buf
    return buf


def stream_handle(device) -> int:
    """The raw handle of ``device``'s current stream, as the launches read it (0 off the
    GPU). torch.cuda.current_stream builds a Stream object per call: 5-7 µs of a backward
    pass's host time on an H200 host."""
    if device.type != "cuda":
        return 0
    return torch._C._cuda_getCurrentRawStream(device.index if device.index is not None else torch.cuda.current_device())


def stream_counters(name: str, device, size: int) -> torch.Tensor:
    """At least ``size`` zeroed int32 counters named ``name`` for launches on the current
    stream of ``device`` (a ``stream_buffer``): kernels that count arrivals across programs
    leave them at 0 when they end, so launches on one stream share them with no memset."""
    return stream_buffer(name, size, device, stream_handle(device), torch.int32, zeroed=True, at_least=1024)


def scratch_buffer(size: int, stream: int) -> torch.Tensor:
    """At least ``size`` bytes of global scratch for a launch on ``stream`` of the current
    device (the TMA kernel's descriptors): a ``stream_buffer``."""
    return stream_buffer("scratch", size, torch.cuda.current_device(), stream, at_least=1 << 16)


def scratch_allocator(size: int, alignment: int, stream) -> torch.Tensor:
    """``scratch_buffer`` as a Triton allocator (``triton.set_allocator``). torch's
    allocations are 512-byte aligned, more than Triton asks for."""
    return scratch_buffer(size, stream)


FP_FUSION = {"enable_fp_fusion": True}
"""The compile option every GPU launch passes: multiply-adds contracted to FMAs, as Triton
<= 3.9 does by default."""


class KernelLaunch:
    """``fn[grid](*tensors, *scalars, **constexprs, **options)``, replayable.

    ``tensors`` are the kernel's leading pointer parameters, passed per call; ``scalars``
    the runtime parameters after them and ``constexprs`` the rest, both fixed here.
    """

    __slots__ = ("fn", "grid", "scalars", "kwargs", "args_tail", "device_index", "interpret", "compiled",
                 "direct", "head", "scratch_bytes", "cached", "expand")

    def __init__(self, fn, grid: tuple[int, ...], scalars: tuple, constexprs: dict, options: dict,
                 device: torch.device, interpret: bool):
        self.fn = fn
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.scalars = scalars
        # FP fusion (FMA contraction) asked for, not left to the default: Triton 3.9 warns
        # that its default turns to off in 3.10, which would change the epilogues' rounding.
        self.kwargs = {**constexprs, **options} if interpret else {**constexprs, **FP_FUSION, **options}
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
        self.compiled = self.direct = self.head = self.cached = self.expand = None
        self.scratch_bytes = 0

    def __call__(self, *tensors: torch.Tensor) -> None:
        direct = self.direct
        if direct is not None and _hooks_quiet(_knobs.runtime):
            direct(*self._direct_prefix(), *tensors, *self.args_tail)
            return
        if not self.interpret and isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
            # Kernels that make TMA descriptors on the device ask Triton's allocator for
            # scratch. It lives in a ContextVar: one set in the main thread is not seen in
            # autograd's device threads, where backward GEMMs run; install ours where unset.
            triton.set_allocator(scratch_allocator)
        compiled = self.compiled
        if compiled is None:
            kernel = self.fn[self.grid](*tensors, *self.scalars, **self.kwargs)
            if not self.interpret and _knobs is not None:
                self._replay_with(kernel.result() if hasattr(kernel, "result") else kernel)  # async compile mode
            return
        g = self.grid
        stream = torch._C._cuda_getCurrentRawStream(self.device_index)
        args = (*tensors, *self.args_tail)
        rt = _knobs.runtime  # profilers (proton) install launch hooks here: honour them as the JIT does
        compiled.run(g[0], g[1], g[2], stream, compiled.function, compiled.packed_metadata,
                     compiled.launch_metadata(g, stream, *args), rt.launch_enter_hook, rt.launch_exit_hook, *args)

    def _direct_prefix(self) -> tuple:
        """The C launch's leading arguments for a launch on the current stream."""
        stream = torch._C._cuda_getCurrentRawStream(self.device_index)
        if stream and self.scratch_bytes and torch._C._cuda_isCurrentStreamCapturing():
            # The graph being captured gets a scratch buffer of its own (scratch_buffer).
            # Stream 0 is never captured (see stream_buffer): eager launches on the default
            # stream, the common case, skip the CUDA call that asks.
            return self._prefix(stream, scratch_buffer(self.scratch_bytes, stream))
        cached = self.cached  # (stream, prefix, scratch): one attribute, so threads see a consistent triple
        if cached is not None and cached[0] == stream:
            return cached[1]
        # The stream's cached scratch, held here too: its address in the prefix stays valid
        # after another launch grows the stream's buffer.
        scratch = scratch_buffer(self.scratch_bytes, stream) if self.scratch_bytes else None
        prefix = self._prefix(stream, None if scratch is None else scratch.data_ptr())
        self.cached = (stream, prefix, scratch)
        return prefix

    def expand_descriptor(self, index: int, descriptor) -> tuple | None:
        """What the C launcher takes for ``descriptor``, the kernel's ``index``-th parameter,
        a host tensor descriptor (the descriptors lead the parameters): its filled tensor map,
        shape and strides (Triton's own expansion, ``make_tensordesc_arg``). None until the
        launch replays directly through a launcher that expands descriptors
        (``_descriptor_launcher``). The caller keeps the result with the operand it describes
        and hands the expansions, in order, to ``call_expanded``: a launch then fills no
        tensor map."""
        parts = self.expand
        if parts is None:
            return None
        _, metas, make = parts
        return tuple(make(descriptor, metas[index]))

    def call_expanded(self, expanded: tuple, *tensors: torch.Tensor) -> bool:
        """Launch with the leading descriptors already expanded (``expand_descriptor``,
        made by this launch) and the other tensors; False where the direct path is not
        open now (a launch hook is set): then call the launch with the descriptors."""
        parts = self.expand
        if parts is None or not _hooks_quiet(_knobs.runtime):
            return False
        parts[0](*self._direct_prefix(), *expanded, *tensors, *self.args_tail)
        return True

    def _prefix(self, stream: int, scratch) -> tuple:
        """The C launch's arguments before the kernel's: grid, stream, function, launch
        flags, global and profile scratch, packed metadata, launch metadata and hooks
        (None: no hook runs, so none needs metadata)."""
        function, cooperative, pdl, packed = self.head
        return (*self.grid, stream, function, cooperative, pdl, scratch, None, packed, None, None, None)

    def _replay_with(self, compiled) -> None:
        """Replay later calls on ``compiled``: directly where its launcher allows."""
        self.compiled = compiled
        launch = _c_launcher(compiled)
        if launch is None:
            return
        run = compiled.run
        g = self.grid
        size = run.global_scratch_size
        # CudaLauncher's own sizing: bytes per CTA times every CTA of the grid.
        self.scratch_bytes = g[0] * g[1] * g[2] * run.num_ctas * size if size > 0 else 0
        self.head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, compiled.packed_metadata)
        self.expand = _descriptor_launcher(launch, len(self._prefix(0, None)))
        self.direct = launch
