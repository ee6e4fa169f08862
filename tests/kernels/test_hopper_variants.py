"""The TMA kernel's Hopper options (warp_specialize, epilogue_subtile, flatten): results
against a float32 torch reference under the interpreter (which ignores warp specialization
and flattening but runs the subtiled epilogue), the config rules, and their pruning in the
search space."""

import json
import zlib

import pytest
import torch

import autokernel as ak
from autokernel import api
from autokernel.config import ConfigError, KernelConfig, check_fits, shared_memory_bytes
from autokernel.evaluate import reference
from autokernel.records import Problem
from autokernel.tuning.space import SearchSpace, config_key

from tests.helpers import H100_SMEM, gpu_space, inputs, interpreter_space, rel_error

ACTS = ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]
TOL = {torch.float16: 1e-2, torch.bfloat16: 1.5e-2}
# (warp_specialize, epilogue_subtile, flatten): each option alone, and the pair the space allows.
OPTIONS = [(False, 2, False), (True, 1, False), (False, 1, True), (False, 2, True)]


def tma(ws: bool = False, subtile: int = 1, flatten: bool = False, **fields) -> KernelConfig:
    base = dict(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=1, num_stages=1, variant="tma")
    return KernelConfig(**{**base, **fields}, warp_specialize=ws, epilogue_subtile=subtile, flatten=flatten)


def no_fallback(monkeypatch):
    import autokernel.kernels.matmul as grouped

    monkeypatch.setattr(grouped, "plan_matmul", lambda *a, **k: pytest.fail("fell back to the grouped kernel"))


# 40x72x56: the last column tile (64..95) has its right half wholly past N=72; 24x88x40:
# the right half of the last column tile (80..95) is cut at N=88. Both keep every stride
# 16-byte aligned, so descriptors are used (no_fallback checks it).
@pytest.mark.parametrize("shape", [(40, 72, 56), (24, 88, 40)])
@pytest.mark.parametrize("layout", ["nn", "tt"])
@pytest.mark.parametrize("options", OPTIONS)
def test_options_every_layout_against_fp32(shape, layout, options, device, monkeypatch):
    no_fallback(monkeypatch)
    m, n, k = shape
    a, b, bias = inputs(m, n, k, torch.float16, device, layout, seed=zlib.crc32(f"{shape}{layout}{options}".encode()))
    if layout == "tt":
        assert not a.is_contiguous() and not b.is_contiguous()
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    ak.matmul(a, b, bias, "gelu_tanh", config=tma(*options), out=out)
    assert not torch.isnan(out).any()
    assert rel_error(out, reference(a, b, bias, "gelu_tanh")) < 1e-2


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_subtiled_epilogue_bias_activation_and_z(act, dtype, device, monkeypatch):
    """Bias, every activation and the pre-activation Z for backward, through the two-half
    epilogue (flatten on too: the interpreter runs it as the plain loops), equal bit for
    bit to the one-piece epilogue."""
    no_fallback(monkeypatch)
    a, b, bias = inputs(24, 88, 40, dtype, device, "nt", seed=zlib.crc32(f"{act}{dtype}".encode()))
    got = {}
    for options in [(False, 1, False), (False, 2, True)]:
        y = torch.full((24, 88), float("nan"), dtype=dtype, device=device)
        z = torch.full_like(y, float("nan"))
        api.launch(a, b, y, bias, act, 0.05, tma(*options), z=z)
        got[options] = (y, z)
    y, z = got[(False, 2, True)]
    assert not torch.isnan(y).any() and not torch.isnan(z).any()
    assert rel_error(z, reference(a, b, bias, "none")) < TOL[dtype]
    assert rel_error(y, reference(a, b, bias, act, 0.05)) < TOL[dtype]
    assert torch.equal(y, got[(False, 1, False)][0]) and torch.equal(z, got[(False, 1, False)][1])


def test_subtiled_epilogue_strided_bias_and_linear_backward(device):
    """A bias read with a stride in each half, and autograd's dX/dW through the subtiled
    forward (Z stored for gelu's derivative)."""
    a, b, _ = inputs(40, 72, 56, torch.float16, device, seed=9)
    bias = torch.randn(144, generator=torch.Generator().manual_seed(2)).to(device, torch.float16)[::2]
    out = ak.matmul(a, b, bias, "leaky_relu", config=tma(subtile=2))
    assert rel_error(out, reference(a, b, bias.contiguous(), "leaky_relu")) < 1e-2

    g = torch.Generator().manual_seed(4)
    x = torch.randn(40, 56, generator=g).to(device).requires_grad_()
    w = (torch.randn(72, 56, generator=g) / 56**0.5).to(device).requires_grad_()
    bb = torch.randn(72, generator=g).to(device).requires_grad_()
    # fp32 runs on the pointer kernel; cast to fp16 so the forward takes the TMA kernel.
    x16, w16, b16 = (t.detach().half().requires_grad_() for t in (x, w, bb))
    y = ak.linear(x16, w16, b16, "gelu", config=tma(subtile=2, flatten=True))
    dy = torch.randn(y.shape, generator=g).to(device, torch.float16)
    grads = torch.autograd.grad(y, (x16, w16, b16), dy)
    ref_y = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, bb))
    refs = torch.autograd.grad(ref_y, (x, w, bb), dy.float())
    assert rel_error(y, ref_y) < 1e-2
    for name, got, ref in zip(("dx", "dw", "db"), grads, refs):
        assert rel_error(got, ref) < 1e-2, name


@pytest.mark.parametrize("shape", [(17, 33, 65), (40, 72, 0)])
def test_options_fall_back_with_the_tma_kernel(shape, device):
    # No descriptor for these strides (or no K): the grouped kernel runs, without the options.
    m, n, k = shape
    a, b, bias = inputs(m, n, k, torch.float16, device, seed=3)
    out = ak.matmul(a, b, bias, "silu", config=tma(True, 2, True))
    assert rel_error(out, reference(a, b, bias, "silu")) < 1e-2


def test_config_fields():
    default = KernelConfig()
    assert (default.warp_specialize, default.epilogue_subtile, default.flatten) == (False, 1, False)
    with pytest.raises(ConfigError, match="epilogue_subtile"):
        KernelConfig.from_dict({"epilogue_subtile": 3})
    for fields in ({"warp_specialize": True}, {"epilogue_subtile": 2}, {"flatten": True}):
        with pytest.raises(ConfigError, match="options of the TMA kernel"):
            KernelConfig.from_dict({**fields, "variant": "grouped"})
    assert KernelConfig(warp_specialize=True, epilogue_subtile=2).variant == "auto"  # used where tma runs
    c = tma(True, 2, True)
    assert c.short() == "16x32x16 g2 w1 s1 tma ws st2 fl" and tma().short() == "16x32x16 g2 w1 s1 tma"
    assert KernelConfig.from_json(c.to_json()) == c
    old = json.loads(c.to_json())
    del old["warp_specialize"], old["epilogue_subtile"], old["flatten"]  # a history row from before the options
    assert KernelConfig.from_json(json.dumps(old)) == tma()
    from autokernel import ops

    assert ops._config(api._config_str(c)) == c  # traced code carries configs as strings


def test_shared_memory_estimate_counts_the_subtile():
    big = dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=4, variant="tma")
    whole, halves = KernelConfig(**big), KernelConfig(**big, epilogue_subtile=2)
    assert shared_memory_bytes(whole, torch.float16) - shared_memory_bytes(halves, torch.float16) == 128 * 256
    with pytest.raises(ConfigError, match="shared memory"):
        check_fits(whole, torch.float16, limit=H100_SMEM)
    check_fits(halves, torch.float16, limit=H100_SMEM)  # the fourth stage fits once the C tile is halved


def test_space_prunes_the_options():
    space = gpu_space()
    ws = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=3, variant="tma",
                      warp_specialize=True)
    assert space.why_invalid(ws) is None  # 128 accumulators a thread over two consumer warpgroups
    assert "num_warps=4" in space.why_invalid(ws.model_copy(update={"num_warps": 8}))
    assert "registers" in space.why_invalid(ws.model_copy(update={"warp_specialize": False}))
    assert "registers" in space.why_invalid(ws.model_copy(update={"block_m": 256, "block_k": 32}))
    s4 = ws.model_copy(update={"warp_specialize": False, "num_warps": 8, "num_stages": 4})
    assert "shared memory" in space.why_invalid(s4)
    assert space.why_invalid(s4.model_copy(update={"epilogue_subtile": 2})) is None  # the halved C tile makes room
    # Triton 3.6 failed to compile warp specialization with the subtiled epilogue, and
    # builds no warp specialization in a flattened loop.
    assert "fails to compile" in space.why_invalid(ws.model_copy(update={"epilogue_subtile": 2}))
    assert "flatten" in space.why_invalid(ws.model_copy(update={"flatten": True}))
    flat = ws.model_copy(update={"warp_specialize": False, "num_warps": 8, "flatten": True, "epilogue_subtile": 2})
    assert space.why_invalid(flat) is None
    # model_copy skips validation: the space must still say why a grouped kernel can't have them.
    assert "variant tma" in space.why_invalid(flat.model_copy(update={"variant": "grouped"}))
    configs = space.configs()
    assert all(space.contains(c) for c in configs)
    assert len({config_key(c) for c in configs}) == len(configs)
    with_options = [c for c in configs if c.tma_options()]
    assert with_options and all(c.variant == "tma" for c in with_options)
    assert all(c.num_warps == 4 and c.block_m >= 64 and (c.block_m, c.block_n) != (64, 256)
               for c in with_options if c.warp_specialize)
    assert "block_m >= 64" in space.why_invalid(ws.model_copy(update={"block_m": 32, "block_n": 256}))
    assert "fails to compile" in space.why_invalid(ws.model_copy(update={"block_m": 64, "block_n": 256}))
    assert {(c.warp_specialize, c.epilogue_subtile, c.flatten) for c in configs} == {(False, 1, False), *OPTIONS} - {
        (True, 2, False)}
    fp32 = gpu_space(Problem(4096, 4096, 4096, "float32"))
    assert not [c for c in fp32.configs() if c.tma_options()]


def test_interpreter_space_has_neither_option():
    space = interpreter_space(Problem(40, 24, 72))
    configs = space.configs()
    assert configs and not [c for c in configs if c.tma_options()]
    assert "outside the space" in space.why_invalid(configs[0].model_copy(update={"epilogue_subtile": 2}))


def test_llm_reply_without_the_options_means_neither():
    from autokernel.tuning.strategies.llm import _check_item

    space = gpu_space()
    item = dict(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma")
    config, why = _check_item(item, space)
    assert why is None and not config.tma_options() and config.split_k == 1
    config, why = _check_item({**item, "num_warps": 4, "warp_specialize": True}, space)
    assert why is None and config.warp_specialize


def test_warp_specialize_past_four_stages_is_refused():
    """On the H100 (Triton 3.6) the warp-specialized TMA kernel at 5 stages left part of C
    unwritten in every check: a user's config is refused with one clear error, and the
    search space never proposes one (a model_copy skips KernelConfig's validators)."""
    from tests.helpers import gpu_space

    ok = KernelConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="tma",
                      warp_specialize=True)
    with pytest.raises(ValueError, match="num_stages <= 4"):
        KernelConfig(**{**ok.model_dump(), "num_stages": 5})
    space = gpu_space()
    assert space.why_invalid(ok) is None
    assert "num_stages > 4" in space.why_invalid(ok.model_copy(update={"num_stages": 5}))
    assert not any(c.warp_specialize and c.num_stages > 4 for c in space.configs())
