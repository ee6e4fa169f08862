"""The cached launch path (api's plans) and the torch.compile ops, under the interpreter."""

import pytest
import torch

import autokernel as ak
from autokernel import api, plans
from autokernel.evaluate import reference

from tests.helpers import FP32_TOL, rel_error

SMALL = dict(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=1, num_stages=1)


@pytest.fixture
def builds(monkeypatch):
    """Every plan built (a cache miss) and the configs resolve_config was asked for."""
    seen = {"plans": 0, "configs": []}
    make, resolve = plans._make_plan, plans.resolve_config

    def counting_make(*args, **kwargs):
        seen["plans"] += 1
        return make(*args, **kwargs)

    def recording_resolve(config, *args, **kwargs):
        seen["configs"].append(config)
        return resolve(config, *args, **kwargs)

    monkeypatch.setattr(plans, "_make_plan", counting_make)
    monkeypatch.setattr(plans, "resolve_config", recording_resolve)
    return seen


def _rand(*shape, dtype=torch.float16, seed=0):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) / 3).to(dtype)


def test_cached_calls_equal_the_checked_path(device, builds):
    a, b, bias = _rand(24, 40).to(device), _rand(40, 32, seed=1).to(device), _rand(32, seed=2).to(device)
    first = ak.matmul(a, b, bias, "gelu")
    for seed in (3, 4):  # fresh data, same layout: plan reused, results still right
        a2 = _rand(24, 40, seed=seed).to(device)
        cached = ak.matmul(a2, b, bias, "gelu")
        api.clear_launch_cache()
        checked = ak.matmul(a2, b, bias, "gelu")  # rebuilt: checks, config and grid again
        assert torch.equal(cached, checked)
        assert rel_error(cached, reference(a2, b, bias, "gelu")) < 1e-2
    assert rel_error(first, reference(a, b, bias, "gelu")) < 1e-2
    assert builds["plans"] == 3  # the first call and one per clear, none for cached calls


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset"])
def test_cached_linear_reads_weight_of_any_layout(device, builds, layout):
    # linear's cached call hands the launch weight in place of weight.t() (the two share
    # a data pointer; the plan fixed weight.t()'s strides): right for a weight that is a
    # transposed view or starts past its storage's first element, call after call.
    def weight(seed):
        if layout == "transposed":
            return _rand(19, 21, seed=seed).to(device).t()  # [21, 19], strides (1, 21)
        if layout == "offset":
            return _rand(23, 19, seed=seed).to(device)[2:]  # [21, 19], storage offset 38
        return _rand(21, 19, seed=seed).to(device)

    bias = _rand(21, seed=9).to(device)
    for seed in (1, 2, 3):  # fresh data each call, one layout: the plan is built once
        x, w = _rand(3, 5, 19, seed=seed).to(device), weight(seed + 10)
        y = ak.linear(x, w, bias, "silu")
        ref = torch.nn.functional.silu(torch.nn.functional.linear(x.float(), w.float(), bias.float()))
        assert y.shape == (3, 5, 21)
        assert rel_error(y, ref) < 1e-2
    assert builds["plans"] == 1


def test_a_new_stride_dtype_config_or_activation_misses(device, builds):
    # Each change below keeps every other part of the key: a key that left one out
    # would reuse the old plan, whose strides / dtype / epilogue give wrong numbers.
    a = _rand(32, 32).to(device)
    b = _rand(32, 32, seed=1).to(device)
    ak.matmul(a, b)
    assert builds["plans"] == 1
    at = _rand(32, 32, seed=2).to(device).t()  # same shape, transposed strides
    assert rel_error(ak.matmul(at, b), at.float() @ b.float()) < 1e-2
    assert builds["plans"] == 2
    a32, b32 = a.float(), b.float()
    out = ak.matmul(a32, b32)
    assert out.dtype == torch.float32 and rel_error(out, a32 @ b32) < 1e-4
    assert builds["plans"] == 3
    relu = ak.matmul(a, b, activation="relu")
    assert (relu >= 0).all() and rel_error(relu, torch.relu(a.float() @ b.float())) < 1e-2
    assert builds["plans"] == 4
    cfg = ak.KernelConfig(**SMALL)
    ak.matmul(a, b, config=cfg)
    ak.matmul(a, b, config=ak.KernelConfig(**{**SMALL, "block_n": 32}))
    assert builds["configs"][-2:] == [cfg, ak.KernelConfig(**{**SMALL, "block_n": 32})]
    assert builds["plans"] == 6
    ak.matmul(a, b, config=ak.KernelConfig(**SMALL))  # an equal config hits
    assert builds["plans"] == 6


def test_misaligned_base_and_out_layout_miss(device, builds):
    big = _rand(16, 72).to(device)
    b = _rand(64, 24, seed=1).to(device)
    ak.matmul(big[:, :64], b)
    ak.matmul(big[:, 1:65], b)  # same shape and strides, base off 16-byte alignment
    assert builds["plans"] == 2
    out = torch.empty(24, 16, dtype=torch.float16, device=device).t()  # a strided out=
    ak.matmul(big[:, :64], b, out=out)
    assert builds["plans"] == 3
    assert rel_error(out, big[:, :64].float() @ b.float()) < 1e-2


def test_clear_launch_cache_resolves_configs_again(device, builds):
    a, b = _rand(16, 16).to(device), _rand(16, 16, seed=1).to(device)
    ak.matmul(a, b)
    ak.matmul(a, b)
    assert builds["configs"] == [None]  # resolve_config once per layout
    api.clear_launch_cache()
    ak.matmul(a, b)
    assert builds["configs"] == [None, None]


def test_bad_arguments_still_fail_clearly_after_a_cached_call(device):
    a, b = _rand(8, 8).to(device), _rand(8, 8, seed=1).to(device)
    ak.matmul(a, b)
    with pytest.raises(TypeError, match="b must be a torch.Tensor"):
        ak.matmul(a, [[1.0]])
    with pytest.raises(ValueError, match="activation must be one of"):
        ak.matmul(a, b, activation="tanh")
    with pytest.raises(TypeError, match="config must be a KernelConfig"):
        ak.matmul(a, b, config={"block_m": 16})


@pytest.mark.parametrize("slope", [None, "0.3", [0.1], True])
def test_a_slope_that_is_no_number_is_named(slope, device):
    """leaky_relu's slope: a string, None, a list or a bool is a TypeError naming the slope,
    in matmul, linear (with and without grad) and the module, before anything runs."""
    a, b = _rand(8, 8).to(device), _rand(8, 8, seed=1).to(device)
    for call in (lambda: ak.matmul(a, b, activation="leaky_relu", slope=slope),
                 lambda: ak.linear(a, b, None, "leaky_relu", slope=slope),
                 lambda: ak.linear(a.requires_grad_(), b, None, "leaky_relu", slope=slope),
                 lambda: ak.nn.Linear(8, 8, activation="leaky_relu", slope=slope)):
        with pytest.raises(TypeError, match="slope"):
            call()
    layer = ak.nn.Linear(8, 8, activation="leaky_relu", slope=0.2)
    with pytest.raises(TypeError, match="slope"):
        layer.slope = slope
    assert layer.slope == 0.2


def test_linear_training_step_reuses_plans(device, builds):
    layer = ak.nn.Linear(24, 40, activation="silu", device=device)
    x = torch.randn(2, 7, 24, device=device, requires_grad=True)
    layer(x).sum().backward()
    first = builds["plans"]
    for _ in range(2):
        layer(x).square().sum().backward()
    assert builds["plans"] == first  # forward, dX and dW plans all reused


# ---- torch.compile: the registered ops, no graph break ----


def _graph_recorder(graphs):
    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    return backend


def test_compile_fullgraph_traces_autokernel_layers(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        ak.nn.Linear(16, 32, activation="gelu"), ak.nn.Linear(32, 8, activation="relu"), ak.nn.Linear(8, 4),
    ).to(device)
    x = torch.randn(3, 5, 16, device=device, requires_grad=True)
    expected = model(x)
    expected.square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    graphs = []
    torch._dynamo.reset()
    y = torch.compile(model, backend=_graph_recorder(graphs), fullgraph=True)(x)
    assert len(graphs) == 1 and graphs[0].count("autokernel.linear_fwd") == 3
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    y.square().sum().backward()
    for got, ref in zip([p.grad for p in model.parameters()] + [x.grad], want):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


def test_compiled_inference_keeps_no_preactivation(device):
    # Z is stored for backward only: a graph traced under no_grad asks the op for no Z
    # (one allocation and one M x N store fewer), one traced for training does.
    torch.manual_seed(2)
    layer = ak.nn.Linear(16, 8, activation="gelu").to(device)
    x = torch.randn(4, 16, device=device)
    flags = {}
    for grad in (False, True):
        graphs = []
        torch._dynamo.reset()
        with torch.set_grad_enabled(grad):
            y = torch.compile(layer, backend=_graph_recorder(graphs), fullgraph=True)(x)
            torch.testing.assert_close(y, layer(x), atol=1e-6, rtol=1e-6)
        (call,) = [line for line in graphs[0].splitlines() if "autokernel.linear_fwd" in line]
        flags[grad] = call.split("args = (")[1].split(")")[0].split(", ")[-1]
    assert flags == {False: "False", True: "True"}


def test_compile_aot_eager_backward_through_the_ops(device):
    # aot_eager traces forward and backward with fake tensors: register_fake and
    # register_autograd must agree with the kernels.
    torch.manual_seed(1)
    w = torch.randn(12, 20, device=device, requires_grad=True)
    bias = torch.randn(12, device=device, requires_grad=True)
    x = torch.randn(6, 20, device=device, requires_grad=True)

    def step(x, w, bias):
        return ak.linear(x, w, bias, "leaky_relu", slope=0.2).sum() + ak.matmul(x, w.detach().t(), None, "silu").sum()

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(x, w, bias), (x, w, bias))
    ref = torch.autograd.grad(
        torch.nn.functional.leaky_relu(torch.nn.functional.linear(x, w, bias), 0.2).sum()
        + torch.nn.functional.silu(x @ w.detach().t()).sum(), (x, w, bias))
    for g, r in zip(got, ref):  # fp32: tf32 on the GPU
        torch.testing.assert_close(g, r, atol=FP32_TOL, rtol=FP32_TOL)


def test_replayed_arguments_follow_the_kernel_signature(device):
    # On the GPU a KernelLaunch replays (*tensors, *args_tail) into the compiled kernel's
    # launcher, which takes every parameter in declaration order: check that order here.
    from autokernel.kernels.matmul import _matmul_kernel, plan_matmul

    a, b = _rand(20, 24).to(device), _rand(24, 8, seed=1).to(device)
    c = torch.empty(20, 8, dtype=torch.float16, device=device)
    launch = plan_matmul(a, b, c, None, "relu", 0.5, ak.KernelConfig(**SMALL), interpret=False)
    names = _matmul_kernel.arg_names
    tail = dict(zip(names[5:], launch.args_tail))
    assert len(names) == 5 + len(launch.args_tail)
    assert (tail["M"], tail["N"], tail["K"], tail["stride_am"], tail["slope"]) == (20, 8, 24, 24, 0.5)
    assert tail["ACTIVATION"] == "relu" and tail["BLOCK_N"] == 16 and tail["HAS_BIAS"] is False


@pytest.mark.parametrize("rows", [40, 300], ids=["db written by the kernel", "db from partial sums"])
def test_bias_gradient_both_ways(rows, device):
    # Up to one program row of the elementwise pass, the kernel stores db itself in the
    # bias dtype; beyond, float32 partial sums are added up: both must match torch.
    x = torch.randn(rows, 24, device=device, dtype=torch.float16, requires_grad=True)
    layer = ak.nn.Linear(24, 20, activation="silu", device=device, dtype=torch.float16)
    g = torch.randn(rows, 20, device=device, dtype=torch.float16)
    (db,) = torch.autograd.grad(layer(x), (layer.bias,), g)
    zf = torch.nn.functional.linear(x.detach().float(), layer.weight.detach().float(), layer.bias.detach().float())
    zf.requires_grad_()
    (want,) = torch.autograd.grad(torch.nn.functional.silu(zf), (zf,), g.float())
    assert db.dtype == torch.float16
    assert rel_error(db, want.sum(0)) < 5e-3


# ---- replaying a compiled kernel: the direct C launch and its fallback ----
# Triton's GPU launcher does not exist here; these fakes have the form of Triton 3.6's
# (backends/nvidia/driver.py: CudaLauncher.__call__ allocates scratch, then hands every
# argument to the C ``launch``), so the host logic of each replay path runs on the CPU.


class CudaLauncher:
    """Triton 3.6's CudaLauncher, its ``__call__`` as there; ``launch`` records calls."""

    def __init__(self, global_scratch_size=0, profile_scratch_size=0):
        self.calls = []
        self.launch = lambda *args: self.calls.append(args)
        self.num_ctas = 1
        self.global_scratch_size, self.global_scratch_align = global_scratch_size, 128
        self.profile_scratch_size, self.profile_scratch_align = profile_scratch_size, 1
        self.launch_cooperative_grid, self.launch_pdl = False, False

    def __call__(self, gridX, gridY, gridZ, stream, function, *args):
        from triton.runtime import _allocation

        def allocate_scratch(size, align, allocator):
            if size > 0:
                return allocator.get()(gridX * gridY * gridZ * self.num_ctas * size, align, stream)
            return None

        global_scratch = allocate_scratch(self.global_scratch_size, self.global_scratch_align, _allocation._allocator)
        profile_scratch = allocate_scratch(self.profile_scratch_size, self.profile_scratch_align,
                                           _allocation._profile_allocator)
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    global_scratch, profile_scratch, *args)


class LaterCudaLauncher(CudaLauncher):
    """A launcher of another form (Triton 3.9 passes metadata and hooks by name)."""

    def __call__(self, gridX, gridY, gridZ, stream, function, kernel_metadata, launch_metadata, launch_enter_hook,
                 launch_exit_hook, *args):
        self.launch(gridX, gridY, gridZ, stream, function, kernel_metadata, launch_metadata, launch_enter_hook,
                    launch_exit_hook, *args)


LaterCudaLauncher.__name__ = "CudaLauncher"


class _Compiled:
    function, packed_metadata = 0xF00, (4, 1, 0)

    def __init__(self, run):
        self.run = run

    def launch_metadata(self, grid, stream, *args):
        return {"grid": grid}


class _Kernel:
    """A @triton.jit stand-in: ``fn[grid](...)`` records the JIT launch."""

    arg_names = ["a_ptr", "b_ptr", "M", "slope", "BLOCK"]

    def __init__(self, run):
        self.compiled, self.jit_calls = _Compiled(run), []

    def __getitem__(self, grid):
        def jit(*args, **kwargs):
            self.jit_calls.append((grid, args, kwargs))
            return self.compiled
        return jit


class _Buffer:
    """A scratch buffer stand-in: what Triton's C launcher reads off one is its address."""

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


@pytest.fixture
def gpu_stand_ins(monkeypatch):
    """The CUDA calls a replay makes: stream 77, no graph capture (``capturing[0]``), and
    scratch buffers, each new one 0x1000 bytes above the last, recorded as (size, stream)."""
    from autokernel.kernels import launch as launch_module

    scratch, capturing = [], [False]

    def fake_scratch(size, stream):
        scratch.append((size, stream))
        return _Buffer(0x1000 * len(scratch))

    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: 77, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", lambda: capturing[0], raising=False)
    monkeypatch.setattr(launch_module, "scratch_buffer", fake_scratch)
    return scratch, capturing


def _replayed(runner, scratch_size=0):
    from autokernel.kernels.launch import KernelLaunch

    kernel = _Kernel(runner)
    launch = KernelLaunch(kernel, (3, 2), (12, 0.5), {"BLOCK": 16}, {"num_warps": 4},
                          torch.device("cuda", 0), interpret=False)
    return kernel, launch


def test_direct_launch_passes_what_the_launcher_would(gpu_stand_ins, monkeypatch):
    from triton import knobs
    from triton.runtime import _allocation

    scratch, capturing = gpu_stand_ins
    monkeypatch.setattr(_allocation, "_allocator", _allocation.ContextVar("test_allocator",
                                                                          default=_allocation.NullAllocator()))
    runner = CudaLauncher(global_scratch_size=256)
    kernel, launch = _replayed(runner)
    a, b = torch.ones(2), torch.zeros(3)
    launch(a, b)  # the JIT: compiles, launches, and hands over its compiled kernel
    assert len(kernel.jit_calls) == 1 and kernel.jit_calls[0][1] == (a, b, 12, 0.5)
    assert launch.direct is runner.launch and launch.scratch_bytes == 3 * 2 * 256
    launch(a, b)  # no hook set: the C launch directly
    hook = lambda metadata: None  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        launch(a, b)  # a profiler's hook: through CudaLauncher.__call__, hooks and metadata passed
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(kernel.jit_calls) == 1 and len(runner.calls) == 2
    direct, wrapped = runner.calls
    assert direct[10:13] == (None, None, None)  # launch metadata and hooks: nothing to call
    assert wrapped[10] == {"grid": (3, 2, 1)} and wrapped[11] is knobs.runtime.launch_enter_hook
    # The scratch: the cached buffer's address, where the wrapped call passed the buffer
    # that the allocator autokernel installed returned. Everything else equal.
    assert direct[7] == 0x1000 and wrapped[7].data_ptr() == 0x2000
    assert direct[:7] + direct[8:10] + direct[13:] == wrapped[:7] + wrapped[8:10] + wrapped[13:]
    assert direct == (3, 2, 1, 77, 0xF00, False, False, 0x1000, None, (4, 1, 0), None, None, None,
                      a, b, 12, 0.5, 16)
    assert scratch == [(1536, 77), (1536, 77)]
    launch(a, b)  # the stream's prefix is reused: no new scratch
    capturing[0] = True
    launch(a, b)  # a CUDA graph is being captured: a scratch buffer of its own
    assert scratch == [(1536, 77), (1536, 77), (1536, 77)]
    assert runner.calls[2] == direct and runner.calls[3][7].data_ptr() == 0x3000


def test_direct_launch_follows_the_current_stream(gpu_stand_ins, monkeypatch):
    from triton import knobs

    streams = iter([77, 78, 77, 77])
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: next(streams), raising=False)
    runner = CudaLauncher()
    kernel, launch = _replayed(runner)
    a = torch.ones(2)
    launch(a, a)  # JIT (stream 77 is Triton's business there)
    for _ in range(3):
        launch(a, a)
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", lambda metadata: None)  # a plain callable, no chain
    launch(a, a)  # through CompiledKernel.run, which calls it
    assert [call[3] for call in runner.calls] == [77, 78, 77, 77]
    assert [call[12] is None for call in runner.calls] == [True, True, True, False]


@pytest.mark.parametrize("runner", [LaterCudaLauncher(), CudaLauncher(profile_scratch_size=64)],
                         ids=["another launcher form", "profile scratch wanted"])
def test_launchers_of_another_form_replay_through_compiled_run(runner, gpu_stand_ins, monkeypatch):
    from triton.runtime import _allocation

    class ProfileAllocator:  # what a profiler (proton) installs when it instruments kernels
        def get(self):
            return lambda size, align, stream: ("profile scratch", size)

    monkeypatch.setattr(_allocation, "_profile_allocator", ProfileAllocator())
    kernel, launch = _replayed(runner)
    a = torch.ones(2)
    for _ in range(3):
        launch(a, a)
    assert launch.direct is None and len(kernel.jit_calls) == 1 and len(runner.calls) == 2
    for call in runner.calls:  # as JITFunction.run calls it: grid, stream, function, metadata, hooks, arguments
        assert call[:5] == (3, 2, 1, 77, 0xF00) and call[-5:] == (a, a, 12, 0.5, 16)


def test_backward_plans_follow_the_gradient_layout(device):
    # LinearFunction caches backward plans per layout of dY and gradients wanted: a
    # gradient of new strides (an expanded one from .sum(), a transposed one) or a new
    # set of wanted gradients must not reuse a plan made for another.
    torch.manual_seed(3)
    w = torch.randn(20, 24, device=device, requires_grad=True)
    b = torch.randn(20, device=device, requires_grad=True)
    x = torch.randn(2, 9, 24, device=device, requires_grad=True)
    g = torch.randn(2, 20, 9, device=device).transpose(1, 2)  # [2, 9, 20], not contiguous

    def grads(fn, wanted):
        got = torch.autograd.grad(fn(ak.linear(x, w, b, "gelu")), wanted)
        ref = torch.autograd.grad(fn(torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))), wanted)
        for a_, r in zip(got, ref):
            torch.testing.assert_close(a_, r, atol=FP32_TOL, rtol=FP32_TOL)

    for _ in range(2):  # the second round replays every plan
        grads(lambda y: (y * g).sum(), (x, w, b))
        grads(lambda y: y.sum(), (x, w, b))  # dY expanded: strides (0, 0, 0)
        grads(lambda y: (y * g).sum(), (w,))  # dW alone
        grads(lambda y: y.sum(), (x, b))


def test_scratch_is_per_device_and_stream(monkeypatch):
    """Every GPU's default stream has handle 0: a TMA launch on cuda:1 must not get the
    scratch buffer made on cuda:0 (its descriptors would land in another GPU's memory).
    torch's CUDA calls are stand-ins here; the caching logic is the real one."""
    import types

    from autokernel.kernels import launch

    class Buf:
        def __init__(self, n, device):
            self.n, self.device = n, device

        def numel(self):
            return self.n

    current, capturing, asked = [0], [False], []

    def is_capturing():
        asked.append(capturing[0])
        return capturing[0]

    monkeypatch.setattr(launch, "torch", types.SimpleNamespace(
        _C=types.SimpleNamespace(_cuda_isCurrentStreamCapturing=is_capturing),
        cuda=types.SimpleNamespace(current_device=lambda: current[0]),
        empty=lambda n, dtype, device: Buf(n, device), zeros=None, int8=torch.int8))
    monkeypatch.setattr(launch, "_BUFFERS", {})
    on0 = launch.scratch_buffer(4096, 0)
    assert launch.scratch_buffer(100, 0) is on0  # cached per stream
    current[0] = 1
    on1 = launch.scratch_buffer(4096, 0)
    assert on1.device == 1 and on1 is not on0
    on1_side = launch.scratch_buffer(4096, 5)
    assert on1_side is not on1 and launch.scratch_buffer(4096, 5) is on1_side
    capturing[0] = True  # a graph being captured (on a side stream) gets its own temporary
    assert launch.scratch_buffer(4096, 5) is not on1_side
    # Stream 0, the legacy default stream, is never captured: CUDA is not asked there.
    assert asked == [False, False, True]
    assert launch.scratch_buffer(4096, 0) is on1 and len(asked) == 3


def test_default_stream_launches_ask_no_capture_state(gpu_stand_ins, monkeypatch):
    """A launch with scratch (the TMA kernel) on stream 0 makes no CUDA call to learn
    whether a graph is being captured: the legacy default stream never is. On another
    stream it asks on every call, and a capture there gets a scratch buffer of its own."""
    scratch, capturing = gpu_stand_ins
    stream, asked = [0], []

    def is_capturing():
        asked.append(stream[0])
        return capturing[0]

    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda index: stream[0], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", is_capturing, raising=False)
    runner = CudaLauncher(global_scratch_size=256)
    kernel, launch = _replayed(runner)
    a = torch.ones(2)
    launch(a, a)  # the JIT
    for _ in range(3):
        launch(a, a)
    assert asked == [] and scratch == [(1536, 0)]
    assert [call[3] for call in runner.calls] == [0, 0, 0] and {call[7] for call in runner.calls} == {0x1000}
    stream[0] = 5
    capturing[0] = True
    launch(a, a)  # captured on stream 5: a buffer of its own, passed as the buffer
    capturing[0] = False
    launch(a, a)
    launch(a, a)  # stream 5's cached prefix
    assert asked == [5, 5, 5] and scratch == [(1536, 0), (1536, 5), (1536, 5)]
    assert runner.calls[3][7].data_ptr() == 0x2000 and runner.calls[4][7] == runner.calls[5][7] == 0x3000


def test_a_compiled_linear_traces_none_of_our_python(device):
    """nn.Linear under torch.compile calls the registered op with its stored attributes:
    no guard on autokernel.api's functions or globals (each one a check on every call of
    the compiled model), its configs reach the op as JSON, and a bad input still gets
    linear's message, from the op's fake implementation while tracing."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    torch.manual_seed(3)
    layer = ak.nn.Linear(16, 8, activation="GELU").to(device)
    assert layer.activation == "gelu"  # normalized when set, as the op expects it
    layer.dx_config = ak.KernelConfig(**SMALL)
    assert layer._configs_json == (None, layer.dx_config.to_json(), None)
    with pytest.raises(TypeError, match="KernelConfig"):
        layer.config = {"block_m": 16}
    x = torch.randn(4, 16, device=device)
    graphs = []
    torch._dynamo.reset()
    compiled = torch.compile(layer, backend=_graph_recorder(graphs), fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), layer(x), atol=1e-6, rtol=1e-6)
    assert layer.dx_config.to_json().replace('"', "'") in graphs[0] or layer.dx_config.to_json() in graphs[0]
    codes = (torch._dynamo.external_utils.wrap_inline(lambda: 0).__code__, ak.nn.Linear.forward.__code__)
    guards = "\n".join(str(e.guard_manager) for code in codes for e in _debug_get_cache_entry_list(code))
    assert "TENSOR_MATCH" in guards  # the compiled layer's entry was found
    assert "autokernel_dot_api" not in guards
    torch._dynamo.reset()
    with pytest.raises(Exception, match="features"):
        torch.compile(ak.nn.Linear(12, 8).to(device), backend="aot_eager", fullgraph=True)(x)
