"""Best configs: export from the history, the file's schema, and the run-time lookup that
autokernel.matmul / linear make (precedence, nearest shape, fallbacks, caching)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import autokernel
import autokernel.kernels.matmul
from autokernel import best, runtime
from autokernel.api import resolve_config
from autokernel.best import BestFile, device_key
from autokernel.cli import app
from autokernel.config import ConfigError, KernelConfig, default_config, shared_memory_bytes
from autokernel.history import History, make_row
from autokernel.records import Problem
from tests.helpers import FP32_TOL, one_error_line, rel_error, write_best

runner = CliRunner()
H100 = "NVIDIA H100 80GB HBM3"
SMALL = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")
OTHER = KernelConfig(block_m=32, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")
THIRD = KernelConfig(block_m=16, block_n=32, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")


@pytest.fixture(autouse=True)
def _fresh_lookup(tmp_path, monkeypatch):
    """No shipped files but the test's own, and nothing cached from other tests (or left for them)."""
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(best, "SHIPPED_DIR", shipped)
    best.clear_cache()
    yield shipped
    best.clear_cache()


def row(problem: Problem, config: KernelConfig | None, ms: float | None, *, kernel: str = "triton",
        status: str = "success", **fields) -> dict:
    return make_row("tune", problem, config, status=status, run_id="r1", kernel=kernel, ms=ms,
                    tflops=None if ms is None else problem.flops / ms / 1e9, **fields)


def entry(m: int, n: int, k: int, config: KernelConfig, **fields) -> dict:
    return {"M": m, "N": n, "K": k, "config": config.model_dump(), **fields}


# --- export -----------------------------------------------------------------------------


def test_export_round_trips_into_matmul_and_linear(hist, tmp_path, monkeypatch, device):
    p = Problem(20, 24, 12, "float32", "relu", True)
    History(hist).append_many([
        row(p, OTHER, 2.0), row(p, SMALL, 1.0), row(p, THIRD, None, status="compile_error"),
        row(p, None, 0.5, kernel="torch"), row(p, None, 0.25, kernel="cublaslt"),
    ])
    result = runner.invoke(app, ["export-best", "--history", str(hist)])
    assert result.exit_code == 0, result.output
    exported = json.loads(result.stdout)
    assert exported["schema_version"] == best.SCHEMA_VERSION and exported["device"] == runtime.device_name()
    assert exported["timing"] == ("interpreter" if runtime.INTERPRETER else "gpu")
    assert exported["torch_version"] == torch.__version__
    (e,) = exported["entries"]
    assert (e["M"], e["N"], e["K"], e["dtype"], e["activation"], e["bias"], e["layout"]) == (20, 24, 12, "float32",
                                                                                             "relu", True, "nn")
    assert KernelConfig.from_dict(e["config"]) == SMALL
    assert (e["ms"], e["torch_ms"], e["trials"]) == (1.0, 0.5, 3)  # cuBLASLt is no cuBLAS baseline
    assert e["speedup_vs_cublas"] == pytest.approx(0.5) and e["tflops"] == pytest.approx(p.flops / 1e9)

    path = tmp_path / "best.json"
    path.write_text(result.stdout)
    monkeypatch.setenv(best.CONFIG_ENV, str(path))
    best.clear_cache()
    launched = []
    real = autokernel.kernels.matmul.plan_matmul  # called once per new layout: records each GEMM's config
    monkeypatch.setattr(autokernel.kernels.matmul, "plan_matmul",
                        lambda *args, **kw: launched.append(args[6]) or real(*args, **kw))
    a, b, bias = (torch.randn(*shape, device=device) for shape in ((20, 12), (12, 24), (24,)))
    ref = torch.relu(a @ b + bias)
    assert rel_error(autokernel.matmul(a, b, bias, "relu"), ref) < FP32_TOL
    w = b.t().contiguous().requires_grad_()
    y = autokernel.linear(a, w, bias, "relu")  # through autograd: its forward resolves the same way
    assert rel_error(y, ref) < FP32_TOL
    y.sum().backward()
    assert launched[:2] == [SMALL, SMALL]
    assert launched[2] == default_config(24, 12, 20, torch.float32)  # dW = dZ^T @ X: no entry for it
    autokernel.matmul(a, b, bias, "relu", config=OTHER)
    assert launched[-1] == OTHER


def _mixed_history(hist) -> None:
    """Trials of three devices; on the H100 an interpreter-timed row that must never count."""
    fp16 = Problem(64, 64, 64)
    bf16 = Problem(64, 64, 64, "bfloat16", "relu")
    History(hist).append_many([
        row(fp16, SMALL, 3.0, device=H100, timing="gpu"),
        row(fp16, OTHER, 2.0, device=H100, timing="gpu"),
        row(fp16, THIRD, 0.1, device=H100, timing="interpreter"),
        row(fp16, None, 2.5, kernel="torch", device=H100, timing="gpu"),
        row(bf16, THIRD, 4.0, device=H100, timing="gpu"),
        row(fp16, THIRD, 1.5, device="NVIDIA H200", timing="gpu"),
    ])


def test_export_filters_and_skips_other_timings(hist):
    _mixed_history(hist)
    result = runner.invoke(app, ["export-best", "--history", str(hist), "--device", "h100"])
    assert result.exit_code == 0, result.output
    assert "skipped 1 successful row(s) of NVIDIA H100 80GB HBM3 timed as interpreter" in result.stderr
    out = json.loads(result.stdout)
    assert out["device"] == H100 and out["timing"] == "gpu"
    by_dtype = {e["dtype"]: e for e in out["entries"]}
    assert set(by_dtype) == {"float16", "bfloat16"}
    fp16 = by_dtype["float16"]
    assert KernelConfig.from_dict(fp16["config"]) == OTHER and fp16["ms"] == 2.0 and fp16["trials"] == 2
    assert fp16["speedup_vs_cublas"] == pytest.approx(1.25)
    assert by_dtype["bfloat16"]["speedup_vs_cublas"] is None  # no torch row of that problem

    for args, want in [(["--dtype", "bf16"], {("bfloat16", "relu")}), (["-a", "none"], {("float16", "none")}),
                       (["-d", "fp16", "-d", "bf16"], {("float16", "none"), ("bfloat16", "relu")})]:
        result = runner.invoke(app, ["export", "--history", str(hist), "--device", device_key(H100), *args])
        assert result.exit_code == 0, result.output
        assert {(e["dtype"], e["activation"]) for e in json.loads(result.stdout)["entries"]} == want, args


def test_export_to_a_file(hist, tmp_path):
    _mixed_history(hist)
    out = tmp_path / "out" / "h200.json"
    result = runner.invoke(app, ["export", "--history", str(hist), "--device", "NVIDIA H200", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "wrote 1 configs" in result.stderr
    loaded = best.load(out)
    assert loaded.device == "NVIDIA H200" and [e.config for e in loaded.entries] == [THIRD]


@pytest.mark.parametrize("args", [["--device", "H100", "--activation", "gelu"], ["--device", "A100"]])
def test_no_successful_trial_exits_1(hist, args):
    _mixed_history(hist)
    History(hist).append(row(Problem(8, 8, 8, activation="gelu"), SMALL, None, status="compile_error", device=H100,
                             timing="gpu"))
    result = runner.invoke(app, ["export-best", "--history", str(hist), *args])
    assert "no successful trial" in one_error_line(result, 1)
    assert result.stdout == ""


def test_several_devices_need_a_choice(hist, monkeypatch):
    _mixed_history(hist)
    monkeypatch.setattr(runtime, "device_name", lambda device=None: "NVIDIA A100")
    result = runner.invoke(app, ["export-best", "--history", str(hist)])
    assert "--device" in one_error_line(result, 2) and result.stdout == ""


def test_export_of_an_empty_history_and_bad_filters(hist):
    hist.touch()
    assert "no successful trial" in one_error_line(runner.invoke(app, ["export-best", "--history", str(hist)]), 1)
    result = runner.invoke(app, ["export-best", "--history", str(hist), "--dtype", "fp8"])
    assert "dtype" in one_error_line(result, 2)
    _mixed_history(hist)
    result = runner.invoke(app, ["export-best", "--history", str(hist), "--device", "nvidia"])
    assert "matches several devices" in one_error_line(result, 2)


# --- the file -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, needle",
    [("{", "not JSON"),
     ("[]", "JSON list"),
     ('{"schema_version": 1, "entries": []}', "device: Field required"),
     ('{"schema_version": 9, "device": "x"}', "schema 1, not 9"),
     ('{"schema_version": 1, "device": "x", "entries": [{"M": 1, "N": 1, "K": 1, "dtype": "fp16", '
      '"config": {"block_m": 17}}]}', "entries.0.config.block_m: must be a power of two"),
     ('{"schema_version": 1, "device": "x", "entries": [{"M": 1, "N": 1, "K": 1, "dtype": "fp8", "config": {}}]}',
      "entries.0.dtype"),
     ('{"schema_version": 1, "device": "x", "extra": 1}', "extra: Extra inputs are not permitted")],
)
def test_bad_file_is_one_clear_error(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        best.load(path)
    message = str(err.value)
    assert needle in message and str(path) in message and "\n" not in message


def test_bad_or_missing_env_file_fails_matmul_clearly(tmp_path, monkeypatch, device):
    a = torch.randn(8, 8, device=device)
    monkeypatch.setenv(best.CONFIG_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match=r"AUTOKERNEL_CONFIG: cannot read .*missing\.json"):
        autokernel.matmul(a, a)
    (tmp_path / "bad.json").write_text('{"schema_version": 1}')
    monkeypatch.setenv(best.CONFIG_ENV, str(tmp_path / "bad.json"))
    with pytest.raises(ConfigError, match="device: Field required"):
        autokernel.matmul(a, a)


def test_bench_best_rejects_a_bad_file(hist, tmp_path):
    (tmp_path / "bad.json").write_text("[1]")
    where = ["--interpret"] if runtime.INTERPRETER else []
    result = runner.invoke(app, ["bench", *where, "-s", "16", "--best", str(tmp_path / "bad.json")])
    assert "--best" in one_error_line(result, 2) and not hist.exists()


# --- the lookup -----------------------------------------------------------------------------


def test_nearest_shape_within_dtype_and_activation():
    configs = [KernelConfig(block_m=bm, block_n=bn, block_k=16, num_warps=1, num_stages=1)
               for bm in (16, 32, 64, 128) for bn in (16, 32)]
    f = BestFile(schema_version=1, device=H100, entries=[
        entry(16, 16, 16, configs[0], dtype="fp16"),
        entry(64, 64, 64, configs[1], dtype="fp16"),
        entry(256, 256, 32, configs[2], dtype="fp16"),
        entry(64, 64, 64, configs[3], dtype="bf16"),
        entry(64, 64, 64, configs[4], dtype="fp16", activation="relu"),
        entry(64, 64, 64, configs[5], dtype="fp16", bias=True),
        entry(64, 64, 64, configs[6], dtype="fp16", layout="nt"),
    ])

    def pick(m, n, k, dtype="float16", activation="none", bias=None, layout=None):
        found = f.nearest(m, n, k, dtype, activation, bias, layout)
        return None if found is None else configs.index(found.config)

    assert pick(16, 16, 16) == 0 and pick(256, 256, 32) == 2  # exact shapes
    assert pick(60, 70, 50) == 1 and pick(20, 12, 24) == 0 and pick(200, 300, 40) == 2
    assert pick(1024, 1024, 128) == 2 and pick(4, 4, 4) == 0  # nearest, up to 4x away in each dimension
    assert pick(4096, 4096, 4096) is None and pick(1, 1, 1) is None  # farther: the default config's job
    assert pick(16, 4096, 64) is None  # a decode-like shape borrows no square tile
    assert pick(100, 100, 100, "bfloat16") == 3 and pick(16, 16, 16, activation="relu") == 4
    assert pick(64, 64, 64, activation="gelu") is None and pick(64, 64, 64, "float32") is None
    assert pick(64, 64, 64, bias=False) == 1 and pick(64, 64, 64, bias=True) == 5  # ties: bias, then layout
    assert pick(64, 64, 64, bias=False, layout="nt") == 6 and pick(64, 64, 64) == 1  # then file order


def test_lookup_is_for_the_file_device(tmp_path, monkeypatch):
    path = tmp_path / "h100.json"
    write_best(path, entry(64, 64, 64, SMALL), device=H100)
    monkeypatch.setenv(best.CONFIG_ENV, str(path))
    assert best.lookup(64, 64, 64, torch.float16, device="nvidia-h100-80gb-hbm3") == SMALL
    assert best.lookup(64, 64, 64, "fp16", "None", device=H100) == SMALL
    assert best.lookup(64, 64, 64, torch.bfloat16, device=H100) is None
    with pytest.warns(RuntimeWarning, match="holds configs for NVIDIA H100 80GB HBM3, not this NVIDIA H200"):
        assert best.lookup(64, 64, 64, torch.float16, device="NVIDIA H200") is None


def test_precedence_config_env_shipped_default(tmp_path, monkeypatch, _fresh_lookup, device):
    here = runtime.device_name()
    write_best(_fresh_lookup / f"{device_key(here)}.json", entry(64, 64, 64, SMALL), entry(64, 64, 64, SMALL,
                                                                                            dtype="bf16"))
    env = tmp_path / "env.json"
    write_best(env, entry(64, 64, 64, OTHER))

    def resolve(dtype=torch.float16, config=None):
        return resolve_config(config, 64, 64, 64, dtype, "none", False, device)

    assert resolve() == SMALL  # the shipped file
    assert resolve(torch.float32) == default_config(64, 64, 64, torch.float32)  # no entry anywhere
    monkeypatch.setenv(best.CONFIG_ENV, str(env))
    assert resolve() == SMALL  # cached: the environment is read again only after clear_cache
    best.clear_cache()
    assert resolve() == OTHER  # $AUTOKERNEL_CONFIG first
    assert resolve(torch.bfloat16) == SMALL  # its file has no bf16 entry: the shipped one has
    assert resolve(config=THIRD) == THIRD  # config= beats every file


def test_a_tuned_config_that_does_not_fit_falls_back_once(monkeypatch, _fresh_lookup, device):
    big = KernelConfig(block_m=256, block_n=256, block_k=64, num_warps=8, num_stages=4)
    write_best(_fresh_lookup / f"{device_key(runtime.device_name())}.json", entry(64, 64, 64, big))
    limit = max(shared_memory_bytes(default_config(m, 64, 64, torch.float16)) for m in (48, 64))
    assert shared_memory_bytes(big) > limit
    monkeypatch.setattr(runtime, "shared_memory_limit", lambda: limit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for m in (64, 48, 64):
            got = resolve_config(None, m, 64, 64, torch.float16, "none", False, device)
            assert got == default_config(m, 64, 64, torch.float16)
    (w,) = caught
    assert "shared memory" in str(w.message) and "using the default config" in str(w.message)


def test_shipped_files_load_and_are_named_for_their_device():
    shipped = sorted(Path(best.__file__).parent.joinpath("configs").glob("*.json"))
    for path in shipped:
        f = best.load(path)
        assert path.stem == device_key(f.device) and f.timing == "gpu" and f.entries, path
    assert device_key(H100) == "nvidia-h100-80gb-hbm3"
    assert device_key("cpu (triton interpreter)") == "cpu-triton-interpreter"


def test_export_skips_rows_whose_config_is_no_kernel_config(hist):
    p = Problem(64, 64, 64)
    History(hist).append_many([row(p, SMALL, 2.0, device=H100, timing="gpu"),
                               {**row(p, None, 1.0, device=H100, timing="gpu"), "config": '{"block_m": 17}'},
                               {**row(p, None, 0.5, device=H100, timing="gpu"), "config": "results/x.json"}])
    result = runner.invoke(app, ["export-best", "--history", str(hist)])
    assert result.exit_code == 0, result.output
    assert "skipped 2 successful row(s) whose config is not a valid KernelConfig" in result.stderr
    (e,) = json.loads(result.stdout)["entries"]
    assert KernelConfig.from_dict(e["config"]) == SMALL and e["trials"] == 3


def test_a_gpu_s_name_is_asked_of_torch_once_per_device(monkeypatch):
    """Every new shape's pick reads the GPU's name: asked of torch once per device index (it
    cost ~10 µs a call on the H100 machine), whichever way the device is given."""
    asked = []
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: asked.append(device) or f"GPU {device}")
    runtime._gpu_name.cache_clear()
    try:
        for _ in range(3):
            assert runtime.device_name(torch.device("cuda", 0)) == "GPU 0"
            assert runtime.device_name() == "GPU 1"  # the current device
            assert runtime.device_name(torch.device("cuda")) == "GPU 1"
        assert sorted(asked) == [0, 1]
        assert runtime.device_name("cuda:0") == "GPU cuda:0"  # a string goes to torch as it is
    finally:
        runtime._gpu_name.cache_clear()
