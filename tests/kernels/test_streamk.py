"""Stream-K for tail waves (kernels/streamk.py) against a float32 torch reference, under
the interpreter, where ``programs`` stands in for the GPU's SM count."""

import zlib

import pytest
import torch

import autokernel as ak
from autokernel import api
from autokernel.config import ConfigError, KernelConfig, shared_memory_bytes
from autokernel.evaluate import reference
from autokernel.kernels import streamk
from autokernel.kernels.streamk import StreamKLaunch, plan_matmul_streamk, tail_split
from autokernel.records import Problem
from autokernel.tuning.space import GPU_CHOICES, SearchSpace

from tests.helpers import FP32_TOL, interpreter_space, rel_error

TOL = {torch.float16: 1e-2, torch.bfloat16: 1.5e-2, torch.float32: FP32_TOL}


def cfg(bm: int = 16, bn: int = 16, bk: int = 16, variant: str = "grouped", **extra) -> KernelConfig:
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=2, num_warps=1, num_stages=1,
                        variant=variant, stream_k=True, **extra)


def inputs(m, n, k, dtype, device, layout="nn", seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    bias = torch.randn(n, generator=g)
    return (a / max(k, 1) ** 0.5).to(device, dtype), b.to(device, dtype), bias.to(device, dtype)


def run(a, b, bias, act, config, programs, z=None, slope=0.01):
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)
    launch = plan_matmul_streamk(a, b, c, bias, act, slope, config, True, z=z, programs=programs)
    launch(a, b, c, bias if bias is not None else c, z if z is not None else c)
    return c, launch


# (m, n, k, programs) -> tiles of 16x16 and 16 K steps, and what the tail looks like:
CASES = {
    "no tail": (48, 40, 50, 3),           # 9 tiles on 3 programs: whole waves only
    "tail of 2 tiles": (40, 50, 100, 5),  # 12 tiles: 2 full waves + 2 tail tiles over 5 programs
    "all tail": (20, 20, 128, 5),  # 4 tiles on 5 programs, 32 K steps: 7 per program
    "one tile, 3 helpers": (16, 16, 128, 5),  # 8 K steps, 2 per program: 4 programs share it
    "fewer tiles than SMs, K not a multiple": (17, 33, 120, 7),  # 6 tiles, 8 K steps with a tail of 8
    "K not a multiple": (33, 70, 37, 6),  # 15 tiles: 2 waves + 3 tail tiles over 6, K tail of 5
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_tails_odd_shapes_transposed_views(case, layout, device):
    m, n, k, programs = CASES[case]
    a, b, bias = inputs(m, n, k, torch.float16, device, layout, seed=zlib.crc32(f"{case}{layout}".encode()))
    if layout == "tt":
        assert not a.is_contiguous() and not b.is_contiguous()
    out, launch = run(a, b, bias, "gelu_tanh", cfg(), programs)
    tiles = -(-m // 16) * -(-n // 16)
    assert launch.sk_tiles == tiles % programs
    assert (launch.sk_tiles == 0) == (case == "no tail")
    assert not torch.isnan(out).any()
    assert rel_error(out, reference(a, b, bias, "gelu_tanh")) < 1e-2


def test_split_tail_off_is_the_persistent_data_parallel_kernel(device):
    """split_tail=False (the baseline the stream-K measurements in docs/kernel-notes.md time) splits no tile and
    still computes every tile, the tail's whole."""
    a, b, bias = inputs(40, 50, 100, torch.float16, device, seed=4)
    c = torch.full((40, 50), float("nan"), dtype=torch.float16, device=device)
    launch = plan_matmul_streamk(a, b, c, bias, "relu", 0.0, cfg(), True, programs=5, split_tail=False)
    launch(a, b, c, bias, c)
    assert launch.sk_tiles == 0
    assert rel_error(c, reference(a, b, bias, "relu")) < 1e-2


def test_tail_split_geometry():
    # 2048x2816 in 128x128 tiles on 132 SMs: 352 tiles, 2 whole waves and 88 tail tiles
    # whose 16 K steps (K=1024, block_k 64) are spread 11 per program.
    assert tail_split(2048, 2816, 1024, 128, 128, 64, 132) == (88, 11)
    assert tail_split(1536, 1408, 1024, 128, 128, 64, 132) == (0, 0)  # 132 tiles: one whole wave
    assert tail_split(20, 20, 128, 16, 16, 16, 5) == (4, 7)  # 32 steps over 5 programs
    assert tail_split(20, 20, 0, 16, 16, 16, 5) == (0, 0)  # no K loop: nothing to split


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("act", ["none", "relu", "leaky_relu", "gelu", "silu"])
def test_activations_dtypes_strided_bias(act, dtype, device):
    a, b, _ = inputs(40, 50, 100, dtype, device, "tn", seed=zlib.crc32(f"{act}{dtype}".encode()))
    bias = torch.randn(50, 3).to(device, dtype)[:, 1]  # a column: stride 3
    out, launch = run(a, b, bias, act, cfg(), 5, slope=0.2)
    assert launch.sk_tiles == 2 and out.dtype == dtype
    assert rel_error(out, reference(a, b, bias, act, 0.2)) < TOL[dtype]


def test_store_z_and_no_bias(device):
    a, b, _ = inputs(33, 70, 37, torch.float16, device, "nt", seed=5)
    z = torch.full((33, 70), float("nan"), dtype=torch.float16, device=device)
    y, launch = run(a, b, None, "gelu", cfg(), 6, z=z)
    assert launch.sk_tiles == 3
    assert rel_error(z, reference(a, b, None, "none")) < 1e-2
    assert rel_error(y, reference(a, b, None, "gelu")) < 1e-2


def test_runs_repeat_bitwise_and_leave_the_locks_at_zero(device):
    a, b, bias = inputs(20, 20, 128, torch.float32, device, seed=9)
    first, launch = run(a, b, bias, "relu", cfg(), 5)
    assert launch.sk_tiles == 4
    from autokernel.kernels import launch as launch_module

    locks = [buf for key, buf in launch_module._BUFFERS.items() if key[0] == "locks"]
    assert locks
    for buf in locks:
        assert not buf.any()  # owners reset their tile's lock: the next launch starts from 0
    again, _ = run(a, b, bias, "relu", cfg(), 5)
    assert torch.equal(first, again)  # partials summed in program order, no float atomics
    assert rel_error(first, reference(a, b, bias, "relu")) < FP32_TOL


@pytest.mark.parametrize("variant", ["grouped", "auto", "tma"])
def test_dispatch_through_matmul(variant, device):
    """api takes the stream-K kernel for stream_k whatever the variant, on the interpreter's
    3 programs (launch.persistent_programs); K=0 splits nothing and gives act(bias)."""
    a, b, bias = inputs(40, 50, 70, torch.float16, device, seed=2)  # 12 tiles: no tail on 3
    c = torch.empty((40, 50), dtype=torch.float16, device=device)
    assert isinstance(api._plan_kernel(a, b, c, bias, "none", 0.0, cfg(variant=variant), None), StreamKLaunch)
    a, b, bias = inputs(30, 60, 70, torch.float16, device, seed=3)  # 8 tiles: 2 tail tiles on 3
    out = ak.matmul(a, b, bias, "silu", config=cfg(variant=variant))
    assert rel_error(out, reference(a, b, bias, "silu")) < 1e-2
    empty_a = torch.empty((7, 0), dtype=torch.float16, device=device)
    empty_b = torch.empty((0, 19), dtype=torch.float16, device=device)
    got = ak.matmul(empty_a, empty_b, bias[:19], "relu", config=cfg())
    assert rel_error(got, reference(empty_a, empty_b, bias[:19], "relu").expand(7, 19)) < 1e-3


def test_linear_backward_with_stream_k_configs(device):
    """Forward (STORE_Z for gelu's backward), dX and dW all on stream-K configs."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 25, 24, generator=g).to(device).requires_grad_()  # 50 tokens
    w = (torch.randn(40, 24, generator=g) / 24 ** 0.5).to(device).requires_grad_()
    bias = torch.randn(40, generator=g).to(device).requires_grad_()
    y = ak.linear(x, w, bias, "gelu", config=cfg(), dx_config=cfg(), dw_config=cfg())
    grad_y = torch.randn(y.shape, generator=g).to(device)
    grads = torch.autograd.grad(y, (x, w, bias), grad_y)
    refs_in = [t.detach().clone().requires_grad_() for t in (x, w, bias)]
    y_ref = reference(refs_in[0].reshape(50, 24), refs_in[1].t(), refs_in[2], "gelu").reshape(2, 25, 40)
    refs = torch.autograd.grad(y_ref, refs_in, grad_y)
    assert rel_error(y, y_ref) < FP32_TOL
    for name, got, ref in zip(("dx", "dw", "db"), grads, refs):
        assert rel_error(got, ref) < FP32_TOL, name


def test_config_field():
    assert KernelConfig().stream_k is False
    assert cfg().short() == "16x16x16 g2 w1 s1 grouped sk"
    assert KernelConfig.from_json(cfg().to_json()) == cfg()
    with pytest.raises(ConfigError, match="two ways to split K"):
        KernelConfig.from_dict({"stream_k": True, "split_k": 2, "variant": "grouped"})
    # The pointer-load kernels have no TMA options: refused, not silently dropped.
    for fields in ({"stream_k": True, "flatten": True}, {"split_k": 2, "variant": "tma", "warp_specialize": True}):
        with pytest.raises(ConfigError, match="options of the TMA kernel"):
            KernelConfig.from_dict(fields)
    # and no C staging tile: the estimate is the grouped kernel's whatever the variant says
    big = dict(block_m=256, block_n=256, block_k=64, num_warps=8, num_stages=3)
    assert (shared_memory_bytes(KernelConfig(**big, stream_k=True))
            == shared_memory_bytes(KernelConfig(**big, variant="grouped")))


def test_search_space_prunes_stream_k():
    def space(m, n, k, programs=132):
        return SearchSpace(Problem(m, n, k, "fp16"), dict(GPU_CHOICES), 232448, True, gpu=True, programs=programs)

    tile = KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3,
                        variant="grouped", stream_k=True)
    tail = space(2048, 2816, 1024)  # 352 tiles: 88 in the last wave of 132
    assert tail.why_invalid(tile) is None
    assert "no tail" in space(1536, 1408, 1024).why_invalid(tile)  # 132 tiles
    assert "nearly full" in space(2048, 2816, 1024, programs=90).why_invalid(tile)  # 352 % 90 = 82 of 90
    from autokernel import knobs
    assert "grouped or tma" in knobs.why_broken(vars(tile.model_copy(update={"variant": "auto"})))
    assert tail.why_invalid(tile.model_copy(update={"variant": "tma"})) is None  # the TMA kernel's tail
    assert "SM count" in space(2048, 2816, 1024, programs=None).why_invalid(tile)
    assert "one block_k" in space(2048, 2816, 64).why_invalid(tile)
    configs = list(tail)
    assert any(c.stream_k for c in configs) and not any(c.stream_k and c.split_k > 1 for c in configs)
    assert not any(c.stream_k for c in space(1536, 1408, 1024, programs=None))
    # The interpreter's space leaves stream-K out, but knows its 3 programs: with stream_k
    # in its choices, 40x24 in 16x16 tiles is 6 tiles (no tail), in 16x32 tiles 3 (none), in
    # 32x16 tiles 4 (a tail of 1).
    assert not any(c.stream_k for c in interpreter_space(Problem(40, 24, 72)))
    interp = interpreter_space(Problem(40, 24, 72))
    with_sk = SearchSpace(interp.problem, {**interp.choices, "stream_k": (False, True)}, programs=interp.programs)
    tiles = {(c.block_m, c.block_n) for c in with_sk if c.stream_k}
    assert (32, 16) in tiles and (16, 16) not in tiles and (16, 32) not in tiles


def test_a_captured_graph_gets_locks_of_its_own(monkeypatch):
    """A CUDA graph replays on whatever stream is current then, beside eager launches: the
    lock counters it captures must not be the stream's cached ones (mixed counts release
    an owner early, or never). torch's CUDA calls are stand-ins; the caching is real."""
    import types

    from autokernel.kernels import launch as launch_module

    capturing = [False]
    monkeypatch.setattr(launch_module, "torch", types.SimpleNamespace(
        cuda=types.SimpleNamespace(current_device=lambda: 0),
        _C=types.SimpleNamespace(_cuda_isCurrentStreamCapturing=lambda: capturing[0],
                                 _cuda_getCurrentRawStream=lambda index: 0x5000 + index),
        zeros=lambda n, dtype, device: torch.zeros(n, dtype=dtype), empty=torch.empty, int8=torch.int8,
        int32=torch.int32))
    monkeypatch.setattr(launch_module, "_BUFFERS", {})

    class Gpu:  # hashable, like a torch.device
        type = "cuda"
        index = None  # torch.device("cuda"): the current device's stream

    gpu = Gpu()
    eager = streamk.tile_locks(gpu, 88)
    assert eager.dtype == torch.int32 and eager.numel() >= 88 and not eager.any()
    assert streamk.tile_locks(gpu, 50) is eager  # cached per (device, stream)
    from autokernel.kernels.backward import column_counts

    assert column_counts(gpu, 50) is not eager  # the backward pass's counters keep apart
    capturing[0] = True
    in_graph = streamk.tile_locks(gpu, 88)
    assert in_graph is not eager and not in_graph.any()