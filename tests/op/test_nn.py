"""autokernel.nn.Linear and swap_linear against torch.nn, under the interpreter."""

import copy

import pytest
import torch

import autokernel
from autokernel import runtime
from autokernel.nn import Linear, swap_linear
from tests.helpers import FP32_TOL, fp32_tol

DEVICE = runtime.kernel_device()


def rel_err(got, ref):
    got, ref = got.detach().float(), ref.detach().float()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-12))


def test_linear_is_a_torch_linear_with_its_init_and_state_dict():
    torch.manual_seed(0)
    ours = Linear(33, 17, activation="gelu", device=DEVICE)
    torch.manual_seed(0)
    ref = torch.nn.Linear(33, 17, device=DEVICE)
    assert isinstance(ours, torch.nn.Linear)
    assert torch.equal(ours.weight, ref.weight) and torch.equal(ours.bias, ref.bias)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    assert "activation=gelu" in repr(ours)
    assert Linear(4, 5, bias=False).bias is None


def test_loads_a_torch_checkpoint_and_computes_the_same():
    ref = torch.nn.Linear(29, 23, device=DEVICE)
    ours = Linear(29, 23, activation=None, device=DEVICE)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 5, 29, device=DEVICE)
    torch.testing.assert_close(ours(x), ref(x), atol=fp32_tol(1e-5), rtol=fp32_tol(1e-5))


def test_fp16_parameters_and_fused_activation():
    ref = torch.nn.Linear(24, 40, device=DEVICE, dtype=torch.float16)
    ours = Linear(24, 40, activation="silu", device=DEVICE, dtype=torch.float16)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(7, 24, device=DEVICE, dtype=torch.float16, requires_grad=True)
    y = ours(x)
    y.float().square().sum().backward()
    xr = x.detach().float().requires_grad_()
    wr, br = (p.detach().float().requires_grad_() for p in (ref.weight, ref.bias))
    torch.nn.functional.silu(torch.nn.functional.linear(xr, wr, br)).square().sum().backward()
    assert rel_err(y, torch.nn.functional.silu(torch.nn.functional.linear(xr, wr, br))) < 3e-3
    for got, want in ((x.grad, xr.grad), (ours.weight.grad, wr.grad), (ours.bias.grad, br.grad)):
        assert got.dtype == torch.float16
        assert rel_err(got, want) < 5e-3


def test_swap_linear_fuses_activations_and_shares_parameters():
    model = torch.nn.Sequential(
        torch.nn.Linear(12, 20), torch.nn.ReLU(),
        torch.nn.Sequential(torch.nn.Linear(20, 20), torch.nn.GELU(approximate="tanh")),
        torch.nn.Linear(20, 16), torch.nn.LeakyReLU(0.2),
        torch.nn.Linear(16, 8), torch.nn.SiLU(),
        torch.nn.Linear(8, 3),
    ).to(DEVICE)
    keys = model.state_dict().keys()
    params = list(model.parameters())
    x = torch.randn(6, 12, device=DEVICE)
    expected = model(x)
    swapped = swap_linear(model)
    assert swapped is model
    assert model[0].activation == "relu" and isinstance(model[1], torch.nn.Identity)
    assert model[2][0].activation == "gelu_tanh"
    assert model[3].activation == "leaky_relu" and model[3].slope == 0.2
    assert model[5].activation == "silu" and model[7].activation == "none"
    assert all(type(m) is not torch.nn.Linear for m in model.modules())
    assert model.state_dict().keys() == keys
    assert all(a is b for a, b in zip(model.parameters(), params))
    torch.testing.assert_close(model(x), expected, atol=fp32_tol(1e-5), rtol=fp32_tol(1e-5))


def test_swap_linear_without_fusion_and_on_a_bare_linear():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    swap_linear(model, fuse_activations=False)
    assert model[0].activation == "none" and isinstance(model[1], torch.nn.ReLU)
    assert isinstance(swap_linear(torch.nn.Linear(3, 2)), Linear)


def _mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(16, 48), torch.nn.GELU(),
        torch.nn.Linear(48, 48), torch.nn.ReLU(),
        torch.nn.Linear(48, 5),
    ).to(DEVICE)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mlp_trains_like_torch(optimizer):
    torch.manual_seed(0)
    ref = _mlp()
    ours = swap_linear(copy.deepcopy(ref))
    make = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), "adam": lambda p: torch.optim.Adam(p, lr=3e-3)}
    opt_ref, opt_ours = make[optimizer](ref.parameters()), make[optimizer](ours.parameters())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(20, 64, 16, generator=g).to(DEVICE)
    labels = (x @ torch.randn(16, 5, generator=g).to(DEVICE)).argmax(-1)  # a learnable teacher
    curves = {"ref": [], "ours": []}
    for step in range(20):
        for name, model, opt in (("ref", ref, opt_ref), ("ours", ours, opt_ours)):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[step]), labels[step])
            loss.backward()
            opt.step()
            curves[name].append(loss.item())
    assert curves["ref"][-1] < curves["ref"][0]  # it learns at all
    for a, b in zip(curves["ours"], curves["ref"]):
        assert abs(a - b) <= FP32_TOL * max(1.0, abs(b)), (curves["ours"], curves["ref"])


class TinyTransformer(torch.nn.Module):
    """Embedding, pre-norm encoder layers, LM head: torch's own layers, random weights."""

    def __init__(self, vocab=50, d_model=32, heads=4, ffn=64, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0, activation="gelu",
                                                 batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)))


def test_transformer_training_step_matches_torch():
    torch.manual_seed(0)
    ref = TinyTransformer().to(DEVICE)
    ours = swap_linear(copy.deepcopy(ref))
    assert sum(isinstance(m, Linear) for m in ours.modules()) == 5  # linear1/linear2 per layer + head
    ids = torch.randint(0, 50, (2, 9)).to(DEVICE)
    losses = {}
    for name, model in (("ref", ref), ("ours", ours)):
        logits = model(ids)
        losses[name] = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.roll(-1, 1).flatten())
        losses[name].backward()
    torch.testing.assert_close(losses["ours"], losses["ref"], atol=fp32_tol(1e-5), rtol=fp32_tol(1e-5))
    for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert rel_err(p.grad, q.grad) < FP32_TOL, name


def test_nn_is_exported():
    assert autokernel.nn.Linear is Linear


def test_a_pickled_layer_keeps_its_configs_for_compiled_forwards():
    """The config JSON that a compiled forward hands the op survives pickling, and a layer
    pickled before that attribute existed gets it on load."""
    import pickle

    layer = Linear(8, 4, activation="relu")
    layer.config = autokernel.KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)
    again = pickle.loads(pickle.dumps(layer))
    assert again._configs_json == (layer.config.to_json(), None, None) and again.config == layer.config
    state = dict(layer.__dict__)
    del state["_configs_json"]  # as an older autokernel pickled it
    old = Linear.__new__(Linear)
    old.__setstate__(state)
    assert old._configs_json == (layer.config.to_json(), None, None)


def test_compiled_linear_edges_match_eager():
    """Under torch.compile: K = 0 with a batch of rows (-1 would be ambiguous), a 0-D input
    gets linear's message, and an old pickle's unnormalized activation is normalized on load."""
    import pickle

    import warnings

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: "Initializing zero-element tensors is a no-op"
        empty_k = Linear(0, 4, device=DEVICE)
    x = torch.randn(2, 3, 0, device=DEVICE)
    torch.testing.assert_close(torch.compile(empty_k, backend="aot_eager")(x), empty_k(x))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="at least 1 dimension"):
        torch.compile(Linear(4, 2, device=DEVICE), backend="aot_eager")(torch.tensor(1.0, device=DEVICE))
    with pytest.raises(TypeError, match="dx_config must be a KernelConfig"):
        Linear(4, 2).dx_config = {"block_m": 16}
    layer = Linear(8, 4, activation="gelu", device=DEVICE)
    state = dict(layer.__dict__)
    del state["_configs_json"]
    state["activation"] = "GELU"  # set by hand under an older autokernel, stored as given
    old = Linear.__new__(Linear)
    old.__setstate__(pickle.loads(pickle.dumps(state)))
    assert old.activation == "gelu"
    torch._dynamo.reset()
    x = torch.randn(3, 8, device=DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(old, backend="aot_eager")(x), layer(x))


@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "gelu", "gelu_tanh", "silu", None])
def test_inputs_the_kernels_do_not_take_run_torch_with_one_warning(activation):
    """float64, and tensors on another device than the kernels' (meta here; the CPU on a GPU
    machine): torch's linear and activation, gradients included, eagerly and compiled, and
    one warning per device and dtype (none under torch.compile)."""
    import warnings

    from autokernel import nn as aknn
    from autokernel.api import torch_activation

    aknn._WARNED.clear()
    layer = Linear(8, 5, activation=activation, slope=0.2, device=DEVICE, dtype=torch.float64)
    ref = torch.nn.Linear(8, 5, device=DEVICE, dtype=torch.float64)
    ref.load_state_dict(layer.state_dict())
    x = torch.randn(2, 3, 8, device=DEVICE, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, y2 = layer(x), layer(x)
    assert [str(w.message) for w in caught] == [
        f"autokernel.nn.Linear: float64 inputs on {DEVICE.type} run torch's linear; the kernels take float16, "
        f"bfloat16 and float32 on {DEVICE.type}"]
    y_ref = torch_activation(ref(x_ref), layer.activation, 0.2)
    assert y.dtype == torch.float64 and y.shape == (2, 3, 5)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=0)
    y.sum().backward()
    y_ref.sum().backward()
    for ours, theirs in ((x.grad, x_ref.grad), (layer.weight.grad, ref.weight.grad), (layer.bias.grad, ref.bias.grad)):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(x.detach())
    torch.testing.assert_close(compiled, y.detach(), rtol=0, atol=0)

    other = "meta" if DEVICE.type != "meta" else "cpu"
    meta = Linear(8, 5, activation=activation, device=other)
    with pytest.warns(UserWarning, match=f"float32 inputs on {other} run torch's linear"):
        out = meta(torch.randn(4, 8, device=other))
    assert out.device.type == other and out.shape == (4, 5)
    if DEVICE.type == "cuda":  # a model moved to the CPU on a GPU machine
        cpu = Linear(8, 5, activation=activation, slope=0.2).float()
        x = torch.randn(3, 8)
        with pytest.warns(UserWarning, match="float32 inputs on cpu"):
            torch.testing.assert_close(cpu(x), torch_activation(torch.nn.functional.linear(x, cpu.weight, cpu.bias),
                                                                 cpu.activation, 0.2))


@pytest.mark.parametrize("kind", ["sparse_coo", "nested"])
def test_sparse_and_nested_inputs_run_torch_with_one_warning(kind):
    """Sparse and nested tensors, which torch's linear takes and the kernels do not: torch's
    linear and activation, with one warning naming the kind of input."""
    import warnings

    from autokernel import nn as aknn
    from autokernel.api import torch_activation

    aknn._WARNED.clear()
    layer = Linear(8, 5, activation="gelu", device=DEVICE)
    x = torch.randn(3, 8, device=DEVICE)
    odd = x.to_sparse() if kind == "sparse_coo" else torch.nested.nested_tensor([x, x[:2]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, _ = layer(odd), layer(odd)
    assert [str(w.message) for w in caught if "autokernel" in str(w.message)] == [
        f"autokernel.nn.Linear: {kind} float32 inputs on {DEVICE.type} run torch's linear; the kernels take "
        f"dense float16, bfloat16 and float32 on {DEVICE.type}"]
    if kind == "nested":
        y = y.to_padded_tensor(0.0)[0]
    ref = torch_activation(torch.nn.functional.linear(x, layer.weight, layer.bias), "gelu")
    torch.testing.assert_close(y, ref, rtol=FP32_TOL, atol=FP32_TOL)


def test_linear_sites_is_what_swap_linear_does():
    """The walk that `autokernel shapes` lists: each site it runs is swapped with that
    activation, each activation it fuses becomes Identity, each one it skips is left."""
    from autokernel.nn import linear_sites

    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(),
        torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
        torch.nn.MultiheadAttention(16, 2, kdim=8, vdim=4),
        torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LeakyReLU(0.3)),
    )
    sites = list(linear_sites(model))
    runs = {s.path: (s.activation, s.slope, s.fused) for s in sites if s.skipped is None}
    assert runs == {"0": ("gelu", 0.01, "1"), "2.linear1": ("none", 0.01, None), "2.linear2": ("none", 0.01, None),
                    "4.0": ("leaky_relu", 0.3, "4.1")}
    skipped = {s.path: (s.out_features, s.in_features) for s in sites if s.skipped is not None}
    assert skipped == {"2.self_attn.in_proj": (48, 16), "2.self_attn.out_proj": (16, 16), "3.q_proj": (16, 16),
                       "3.k_proj": (16, 8), "3.v_proj": (16, 4), "3.out_proj": (16, 16)}
    swap_linear(model)
    for path, (act, slope, fused) in runs.items():
        layer = model.get_submodule(path)
        assert type(layer) is Linear and (layer.activation, layer.slope) == (act, slope)
        assert fused is None or isinstance(model.get_submodule(fused), torch.nn.Identity)
    assert type(model.get_submodule("2.self_attn.out_proj")) is not Linear
    assert type(model.get_submodule("3.out_proj")) is not Linear


def test_swap_linear_warns_of_an_unrun_lazy_linear():
    model = torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU())
    with pytest.warns(RuntimeWarning, match="0 to torch: an uninitialized LazyLinear"):
        swap_linear(model)
    assert isinstance(model[0], torch.nn.LazyLinear) and isinstance(model[1], torch.nn.ReLU)
    model(torch.randn(2, 3))  # run once: now a torch.nn.Linear, swapped with its ReLU
    swap_linear(model)
    assert type(model[0]) is Linear and model[0].activation == "relu"


@pytest.mark.parametrize("call", ["from_linear", "swap_linear"])
def test_a_module_that_is_not_one_is_named(call):
    with pytest.raises(TypeError, match="torch.nn"):
        Linear.from_linear("x") if call == "from_linear" else swap_linear(5)
