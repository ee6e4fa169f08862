import json

import pytest
import torch

from autokernel import ConfigError, KernelConfig, default_config
from autokernel.candidates import THIN_TMA
from autokernel.config import FILL_TILES, check_fits, shared_memory_bytes


def test_json_round_trip():
    cfg = KernelConfig(block_m=64, block_n=128, block_k=32, group_m=4, num_warps=4, num_stages=2)
    assert KernelConfig.from_json(cfg.to_json()) == cfg
    assert json.loads(cfg.to_json())["block_n"] == 128


def test_from_json_file_and_wrapped_entry(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"m": 1, "config": {"block_m": 32, "block_n": 32, "block_k": 32, "num_warps": 4}}))
    assert KernelConfig.from_json(str(path)).block_m == 32


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("block_m", 48, "power of two"),
        ("block_n", 512, r"\[16, 256\]"),
        ("block_k", 8, "power of two in"),
        ("group_m", 0, r"\[1, 64\]"),
        ("num_warps", 3, "must be one of"),
        ("num_stages", 9, r"\[1, 8\]"),
    ],
)
@pytest.mark.parametrize("build", ["from_dict", "keywords"])
def test_rejects_bad_fields(field, value, match, build):
    """From a dict or built directly with keywords: a ConfigError of one line naming the field."""
    with pytest.raises(ConfigError, match=match) as info:
        KernelConfig.from_dict({field: value}) if build == "from_dict" else KernelConfig(**{field: value})
    assert field in str(info.value)
    assert "\n" not in str(info.value)


def test_rejects_unknown_field_and_bad_json():
    with pytest.raises(ConfigError, match="block_q"):
        KernelConfig.from_dict({"block_q": 16})
    with pytest.raises(ConfigError, match="not valid JSON"):
        KernelConfig.from_json("{not json")


def test_missing_config_file_is_named(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(ConfigError, match=f"config file {missing} does not exist"):
        KernelConfig.from_json(str(missing))


def test_tile_too_small_for_warps():
    with pytest.raises(ConfigError, match="too small for 8 warps"):
        KernelConfig.from_dict({"block_m": 16, "block_n": 16, "num_warps": 8})
    with pytest.raises(ConfigError, match="^invalid config: config: tile 16x16 is too small for 8 warps$"):
        KernelConfig(block_m=16, block_n=16)


def test_shared_memory_estimate_against_limit():
    cfg = KernelConfig(block_m=256, block_n=256, block_k=128, num_stages=4, variant="grouped")
    assert shared_memory_bytes(cfg, torch.float16) == 4 * (256 * 128 * 2) * 2
    # the TMA variant also stages the C tile for its store, beside an mbarrier per stage
    tma = KernelConfig(block_m=128, block_n=256, block_k=64, num_stages=3, variant="tma")
    pipeline_and_c = 3 * (128 * 64 + 64 * 256) * 2 + 128 * 256 * 2
    assert 0 < shared_memory_bytes(tma, torch.float16) - pipeline_and_c <= 128
    # where the TMA kernel can't take the operands, the grouped kernel runs: no C tile
    assert shared_memory_bytes(tma, torch.float16, tma=False) == 3 * (128 * 64 + 64 * 256) * 2
    with pytest.raises(ConfigError, match="shared memory"):
        check_fits(cfg, torch.float16, limit=232448)
    check_fits(KernelConfig(), torch.float16, limit=232448)
    assert shared_memory_bytes(cfg, torch.float32) == 2 * shared_memory_bytes(cfg, torch.float16)


@pytest.mark.parametrize("shape", [(1, 1, 1), (16, 4096, 4096), (8192, 8192, 8192), (300, 17, 5)])
def test_default_config_is_valid_and_fits(shape):
    cfg = default_config(*shape, torch.float16)
    check_fits(cfg, torch.float16, limit=232448)


@pytest.mark.parametrize("shape, tile", [
    ((256, 1024, 256), (64, 64, 64)),       # 64 tiles of 64x64: nothing larger makes 66
    ((256, 256, 1024), (64, 64, 128)),      # long K on a small tile: block_k 128
    ((512, 2048, 512), (64, 128, 64)),      # 128 tiles of 64x128
    ((128, 11008, 4096), (128, 128, 64)),   # 86 tiles of 128x128; M <= 256 never takes 128x256
    ((2048, 2048, 1024), (128, 256, 64)),   # 128 tiles of 128x256
    ((8192, 8192, 8192), (128, 256, 64)),
])
def test_default_config_takes_the_largest_tile_that_fills_the_gpu(shape, tile):
    cfg = default_config(*shape, torch.float16, gpu=True)
    assert (cfg.block_m, cfg.block_n, cfg.block_k) == tile
    check_fits(cfg, torch.float16, limit=232448)
    m, n, _ = shape
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    assert tiles >= FILL_TILES or (cfg.block_m, cfg.block_n) == (64, 64)


@pytest.mark.parametrize("shape, tile", [
    ((16384, 2, 4096), (128, 64, 64)),      # 128 tiles of 128x64; 128x256 made 128 too, 254 of 256 columns idle
    ((32768, 63, 4096), (128, 64, 64)),
    ((8192, 8, 4096), (64, 64, 128)),       # 64 tiles of 128x64 fall short of 66: 64x64
    ((2048, 1, 4096), (64, 64, 128)),       # nothing fills: the smallest
    ((16384, 64, 4096), (128, 256, 64)),    # 64 columns: no longer narrow
])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_narrow_outputs_take_tiles_64_columns_wide(shape, tile, dtype):
    cfg = default_config(*shape, dtype, gpu=True, tma=True)
    if dtype == torch.float32:  # fp32 halves block_k (and 128x256 halves block_n)
        tile = (tile[0], 128 if tile[1] == 256 else tile[1], 32)
    assert (cfg.block_m, cfg.block_n, cfg.block_k) == tile
    check_fits(cfg, dtype, limit=232448, tma=True)


@pytest.mark.parametrize("shape", [(65, 1024, 512), (100, 2304, 2048), (256, 1024, 256), (200, 4096, 4096)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_skinny_default_takes_its_tile_on_the_tma_kernel_where_that_runs(shape, dtype):
    pointer = default_config(*shape, dtype, gpu=True)
    tma = default_config(*shape, dtype, gpu=True, tma=True)
    assert pointer.variant == "grouped" and pointer.block_m == 64
    assert tma in THIN_TMA and tma.flatten and not tma.stream_k
    assert (tma.block_m, tma.block_n) == (pointer.block_m, pointer.block_n)
    check_fits(tma, dtype, limit=232448, tma=True)


@pytest.mark.parametrize("shape, dtype", [
    ((48, 4096, 4096), torch.float16),      # decode tiles (M <= 64) stay on the pointer kernel
    ((128, 11008, 4096), torch.float16),    # the 128x128 tile stays on the pointer kernel
    ((257, 1024, 1024), torch.float16),     # past the skinny rows
    ((8192, 8192, 8192), torch.float16),    # "auto": TMA where it runs either way
    ((100, 2304, 2048), torch.float32),     # float32 never runs on the TMA kernel
])
def test_default_config_on_the_tma_kernel_only_for_skinny_16_bit_64_row_tiles(shape, dtype):
    assert default_config(*shape, dtype, gpu=True, tma=True) == default_config(*shape, dtype, gpu=True)


@pytest.mark.parametrize("shape", [(256, 1024, 256), (512, 512, 2048), (768, 768, 768), (8192, 8192, 8192)])
def test_default_config_fits_in_float32(shape):
    check_fits(default_config(*shape, torch.float32, gpu=True), torch.float32, limit=232448)


@pytest.mark.parametrize("args, error, message", [
    ((-1, 64, 64), ValueError, "m must be >= 0, got -1"),
    ((64, 1.5, 64), TypeError, "n must be an integer, got 1.5"),
    ((64, 64, True), TypeError, "k must be an integer, got True"),
    ((64, 1.0, 64), TypeError, "n must be an integer, got 1.0"),
    ((64, 64, "64"), TypeError, "k must be an integer, got '64'"),
    ((64, 64, 64, "float16"), TypeError, "dtype must be torch.float16, torch.bfloat16 or torch.float32"),
    ((64, 64, 64, torch.float64), TypeError, "got torch.float64"),
])
def test_default_config_names_a_bad_argument(args, error, message):
    default_config(64, 64, 1, gpu=True)  # cached first: the cache takes True for 1, 1.5 for nothing
    default_config(64, 1, 64, gpu=True)
    with pytest.raises(error, match=message):
        default_config(*args, gpu=True)


def test_default_config_takes_numpy_integers():
    np = pytest.importorskip("numpy")
    assert default_config(np.int64(300), 4096, 4096, gpu=True) == default_config(300, 4096, 4096, gpu=True)


def test_config_error_keeps_its_field_rule_pairs():
    with pytest.raises(ConfigError) as info:
        KernelConfig(block_m=17, num_warps=3)
    assert [field for field, _ in info.value.problems] == ["block_m", "num_warps"]
    assert str(info.value) == "invalid config: " + "; ".join(f"{f}: {r}" for f, r in info.value.problems)
    with pytest.raises(ConfigError) as info:
        KernelConfig(block_m=16, block_n=16, num_warps=16)  # a rule across fields: the config's own
    assert info.value.problems == (("", "tile 16x16 is too small for 16 warps"),)
