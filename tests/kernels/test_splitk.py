"""Split-K (kernels/splitk.py) against a float32 torch reference, under the interpreter."""

import json
import zlib

import pytest
import torch

import autokernel as ak
from autokernel import api
from autokernel.config import ConfigError, KernelConfig
from autokernel.evaluate import reference
from autokernel.kernels.splitk import SplitKLaunch
from autokernel.records import Problem
from autokernel.tuning.space import SearchSpace, config_key

from tests.helpers import FP32_TOL, inputs, rel_error

ACTS = ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]
TOL = {torch.float16: 1e-2, torch.bfloat16: 1.5e-2, torch.float32: FP32_TOL}


def cfg(split_k: int, variant: str = "grouped", bk: int = 16) -> KernelConfig:
    return KernelConfig(block_m=16, block_n=16, block_k=bk, group_m=1, num_warps=1, num_stages=1,
                        variant=variant, split_k=split_k)


@pytest.mark.parametrize("variant", ["grouped", "auto", "tma"])
def test_split_k_above_one_takes_the_split_k_kernels(variant, device):
    a, b, bias = inputs(5, 37, 300, torch.float16, device)
    c = torch.empty((5, 37), dtype=torch.float16, device=device)
    launch = api._plan_kernel(a, b, c, bias, "none", 0.0, cfg(4, variant), None)
    assert isinstance(launch, SplitKLaunch) and launch.workspace_shape == (4, 5, 37)
    assert launch.partial.grid == (3, 4, 1)
    assert not isinstance(api._plan_kernel(a, b, c, bias, "none", 0.0, cfg(1), None), SplitKLaunch)


def test_the_reduction_is_a_dependent_launch_only_where_asked_and_the_gpu_has_it(device):
    """``pdl``: the partial kernel lets the reduction start early and the reduction waits for
    it (constexprs; the sm_90 compile checks the PTX), the reduction launched with the
    dependent-launch flag. By default only on a GPU that has it: never under the
    interpreter, whose CPU has no ``griddepcontrol``."""
    from autokernel.kernels import splitk
    from autokernel.kernels.launch import dependent_launch

    assert not dependent_launch(torch.device("cpu"))
    a, b, bias = inputs(5, 37, 300, torch.float16, device)
    c = torch.empty((5, 37), dtype=torch.float16, device=device)
    interpret = device.type != "cuda"
    default = splitk.plan_matmul_splitk(a, b, c, bias, "none", 0.0, cfg(4), interpret)
    asked = splitk.plan_matmul_splitk(a, b, c, bias, "none", 0.0, cfg(4), interpret, pdl=True)
    expected = not interpret and dependent_launch(c.device)
    for launch, pdl in ((default, expected), (asked, True)):
        assert launch.partial.kwargs["LAUNCH_NEXT"] is pdl and launch.reduce.kwargs["WAIT_PRIOR"] is pdl
        assert launch.reduce.kwargs.get("launch_pdl", False) is pdl
        assert "launch_pdl" not in launch.partial.kwargs  # the partial kernel follows the stream as before


@pytest.mark.parametrize("block", [(8, 8), (16, 8), (8, 16)])
@pytest.mark.parametrize("shape", [(5, 37, 300), (40, 33, 129)])
def test_the_reduction_sums_in_blocks_smaller_than_the_tile(shape, block, monkeypatch, device):
    """The reduction's programs each take a block of C (``REDUCE_BLOCK``, here smaller than
    the 16x16 tile): every block summed and stored once, with bias, Z and the activation."""
    from autokernel.kernels import splitk

    monkeypatch.setattr(splitk, "REDUCE_BLOCK", block)
    m, n, k = shape
    a, b, bias = inputs(m, n, k, torch.float16, device, "nt", seed=zlib.crc32(f"{shape}{block}".encode()))
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    z = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    launch = api._plan_kernel(a, b, c, bias, "silu", 0.0, cfg(4), z)
    assert isinstance(launch, SplitKLaunch)
    assert launch.reduce.grid[0] == -(-m // block[0]) * -(-n // block[1])
    launch(a, b, c, bias, z)
    assert rel_error(z, reference(a, b, bias, "none")) < 1e-2
    assert rel_error(c, reference(a, b, bias, "silu")) < 1e-2


# (17, 33, 40) and (3, 20, 48): 3 K steps over 8 slices, so slices 3..7 are empty and
# must add nothing, masked (K % BLOCK_K != 0) or not; (16, 32, 256): K splits evenly.
@pytest.mark.parametrize("shape", [(5, 37, 300), (17, 33, 129), (1, 64, 1000), (17, 33, 40), (3, 20, 48),
                                   (16, 32, 256)])
@pytest.mark.parametrize("layout", ["nn", "tt"])
@pytest.mark.parametrize("split_k", [2, 4, 8])
def test_odd_shapes_transposed_views(shape, layout, split_k, device):
    m, n, k = shape
    a, b, bias = inputs(m, n, k, torch.float16, device, layout, seed=zlib.crc32(f"{shape}{layout}{split_k}".encode()))
    if layout == "tt" and m > 1:
        assert not a.is_contiguous() and not b.is_contiguous()
    out = ak.matmul(a, b, bias, "gelu_tanh", config=cfg(split_k))
    assert out.shape == (m, n) and out.dtype == torch.float16
    assert rel_error(out, reference(a, b, bias, "gelu_tanh")) < 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("act", ACTS)
def test_every_activation_and_dtype_with_a_strided_bias(act, dtype, device):
    a, b, _ = inputs(9, 40, 100, dtype, device, "tn", seed=zlib.crc32(f"{act}{dtype}".encode()))
    bias = torch.randn(40, 3).to(device, dtype)[:, 1]  # a column: stride 3
    assert bias.stride() == (3,)
    out = ak.matmul(a, b, bias, act, config=cfg(4))
    assert out.dtype == dtype
    assert rel_error(out, reference(a, b, bias, act)) < TOL[dtype]
    # The stride is honoured: the same values contiguous give the same result.
    assert torch.equal(out, ak.matmul(a, b, bias.contiguous(), act, config=cfg(4)))


def test_no_bias_and_a_different_slope(device):
    a, b, _ = inputs(6, 20, 90, torch.float32, device, seed=3)
    out = ak.matmul(a, b, None, "leaky_relu", slope=0.3, config=cfg(2))
    assert rel_error(out, reference(a, b, None, "leaky_relu", 0.3)) < FP32_TOL


@pytest.mark.parametrize("act", ["none", "silu"])
def test_k_zero_gives_act_of_bias(act, device):
    a = torch.empty((7, 0), dtype=torch.float16, device=device)
    b = torch.empty((0, 19), dtype=torch.float16, device=device)
    bias = torch.randn(19).to(device, torch.float16)
    out = ak.matmul(a, b, bias, act, config=cfg(4))
    assert rel_error(out, reference(a, b, bias, act).expand(7, 19)) < 1e-3
    assert torch.equal(ak.matmul(a, b, config=cfg(8)), torch.zeros((7, 19), dtype=torch.float16, device=device))


def test_poisoned_out_is_fully_written_and_runs_repeat_bitwise(device):
    a, b, bias = inputs(23, 41, 150, torch.float16, device, "nt", seed=7)
    out = torch.full((23, 41), float("nan"), dtype=torch.float16, device=device)
    got = ak.matmul(a, b, bias, "relu", config=cfg(8), out=out)
    assert got is out and not torch.isnan(out).any()
    assert rel_error(out, reference(a, b, bias, "relu")) < 1e-2
    again = torch.full_like(out, float("nan"))
    ak.matmul(a, b, bias, "relu", config=cfg(8), out=again)
    assert torch.equal(out, again)  # no atomics: the slices are summed in one order


def test_split_k_store_z_for_backward(device):
    """The reduce kernel stores the pre-activation Z beside Y when backward needs it."""
    a, b, bias = inputs(11, 30, 70, torch.float16, device, seed=5)
    y = torch.full((11, 30), float("nan"), dtype=torch.float16, device=device)
    z = torch.full_like(y, float("nan"))
    api.launch(a, b, y, bias, "gelu", 0.0, cfg(4), z=z)
    assert rel_error(z, reference(a, b, bias, "none")) < 1e-2
    assert rel_error(y, reference(a, b, bias, "gelu")) < 1e-2


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_linear_backward_with_split_k_configs(activation, device):
    """dW = dZ^T @ X is the long-K GEMM (K = tokens): forward, dX and dW all split K."""
    g = torch.Generator().manual_seed(zlib.crc32(activation.encode()))
    x = torch.randn(3, 50, 24, generator=g).to(device).requires_grad_()  # 150 tokens
    w = (torch.randn(20, 24, generator=g) / 24 ** 0.5).to(device).requires_grad_()
    bias = torch.randn(20, generator=g).to(device).requires_grad_()
    y = ak.linear(x, w, bias, activation, config=cfg(2), dx_config=cfg(4), dw_config=cfg(8))
    grad_y = torch.randn(y.shape, generator=g).to(device)
    grads = torch.autograd.grad(y, (x, w, bias), grad_y)
    refs_in = [t.detach().clone().requires_grad_() for t in (x, w, bias)]
    y_ref = reference(refs_in[0].reshape(150, 24), refs_in[1].t(), refs_in[2], activation).reshape(3, 50, 20)
    refs = torch.autograd.grad(y_ref, refs_in, grad_y)
    assert rel_error(y, y_ref) < FP32_TOL
    for name, got, ref in zip(("dx", "dw", "db"), grads, refs):
        assert rel_error(got, ref) < FP32_TOL, name


def test_config_field(device):
    assert KernelConfig().split_k == 1
    for bad in (0, 3, 32):
        with pytest.raises(ConfigError, match="split_k"):
            KernelConfig.from_dict({"split_k": bad})
    c = cfg(4)
    assert c.short() == "16x16x16 g1 w1 s1 grouped k4" and cfg(1).short() == "16x16x16 g1 w1 s1 grouped"
    assert KernelConfig.from_json(c.to_json()) == c
    old = json.loads(c.to_json())
    del old["split_k"]  # a config written before split_k existed
    assert KernelConfig.from_json(json.dumps(old)) == cfg(1)
    # Traced code carries configs as strings (torch.compile's op schema).
    from autokernel import ops

    assert ops._config(api._config_str(c)) == c


def test_search_space_prunes_split_k(device):
    skinny = SearchSpace(Problem(16, 4096, 4096, "fp16"), gpu=False)
    long_k = SearchSpace(Problem(1024, 1024, 8192, "fp16"), gpu=False)
    square = SearchSpace(Problem(1024, 1024, 1024, "fp16"), gpu=False)
    big = KernelConfig(block_m=16, block_n=64, block_k=128, group_m=1, num_warps=4, num_stages=4,
                       variant="grouped", split_k=4)
    assert skinny.why_invalid(big) is None
    assert long_k.why_invalid(big.model_copy(update={"block_m": 128})) is None
    assert "skinny" in square.why_invalid(big.model_copy(update={"block_m": 128}))
    hopper = SearchSpace(Problem(16, 4096, 4096, "fp16"), gpu=True, tma=True)  # the TMA check passes anywhere
    assert "grouped" in hopper.why_invalid(big.model_copy(update={"variant": "tma"}))
    short_k = SearchSpace(Problem(16, 4096, 256, "fp16"), gpu=False)
    assert "block_k" in short_k.why_invalid(big.model_copy(update={"split_k": 8}))
    assert short_k.why_invalid(big.model_copy(update={"split_k": 2})) is None
    # A config from before split_k keeps matching its recorded twin (replayed sweeps).
    assert config_key(KernelConfig.from_dict({"block_m": 16})) == config_key(KernelConfig(block_m=16, split_k=1))
    assert config_key(big) != config_key(big.model_copy(update={"split_k": 1}))


def test_the_selectors_split_k_candidates_where_it_would_pick_them(device):
    """Each split-K config the selector may pick, on an odd problem where it applies (the
    last K slice short, the edge tiles masked, B a transposed view): as the selector would
    launch it."""
    from autokernel.candidates import CANDIDATES
    from autokernel.select import why_not

    problems = {}
    for m, n, k in [(37, 70, 4200), (200, 130, 4200)]:
        a, b, bias = inputs(m, n, k, torch.float16, device, "nt", seed=m)
        problems[(m, n, k)] = a, b, bias, reference(a, b, bias, "silu")
    split = [c for c in CANDIDATES if c.split_k > 1]
    assert {c.split_k for c in split} == {2, 4, 8, 16}
    for config in split:
        shape = next((s for s in problems if why_not(config, *s, tma=True, programs=132) is None), None)
        assert shape is not None, config.short()
        a, b, bias, ref = problems[shape]
        assert rel_error(ak.matmul(a, b, bias, "silu", config=config), ref) < 1e-2, (config.short(), shape)
