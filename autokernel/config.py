"""KernelConfig: the launch parameters of one GEMM kernel, checked and serialisable."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from autokernel import runtime

_BLOCK_RANGE = (16, 256)  # tl.dot needs every tile dimension >= 16
_GROUP_RANGE = (1, 64)
_WARPS = (1, 2, 4, 8, 16)
_STAGES_RANGE = (1, 8)
_SPLIT_K = (1, 2, 4, 8, 16)
_EPILOGUE_SUBTILES = (1, 2)
WS_MAX_STAGES = 4
"""The most pipeline stages a warp-specialized config may take: on the H100 (Triton 3.6)
the TMA kernel warp-specialized at 5 stages left part of C unwritten (128x128x64 and
256x128x32, 4 warps, in every one of 30 checks: docs/runs/tuning/readings/); at 3 and 4
stages its results were correct."""


def _is_pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


class ConfigError(ValueError):
    """A KernelConfig that cannot be built or cannot run on this device."""


class KernelConfig(BaseModel):
    """Tile sizes and launch parameters of the grouped-tile GEMM kernel.

    block_m / block_n / block_k: the tile of C computed by one program and the K step,
    powers of two in [16, 256]. group_m: how many tile-rows are walked together in the
    grouped (swizzled) order, for L2 reuse. num_warps, num_stages: Triton launch options.
    variant: "grouped" (pointer loads, one program per tile: runs anywhere), "tma"
    (Hopper: tensor descriptors and a persistent grid, falling back to "grouped" where an
    operand can't have a descriptor or the GPU is older), or "auto" (tma where it can run).
    split_k: how many programs share one tile's K loop (a power of two, 1 to 16). Above 1,
    each writes its fp32 partial tile to a workspace and a second kernel sums them and
    applies the epilogue (kernels/splitk.py): more programs for skinny or long-K shapes.
    Split-K runs on pointer loads whatever the variant: the TMA kernel has no split-K.
    warp_specialize, epilogue_subtile, flatten: options of the TMA kernel
    (kernels/matmul_tma.py), so a "grouped" config has none; where "auto" or "tma" falls
    back to the pointer kernel they do nothing. warp_specialize: Triton's automatic warp
    specialization of the persistent tile loop (a producer warpgroup issues the TMA loads,
    two consumer warpgroups of num_warps warps each run the MMAs and the epilogue).
    epilogue_subtile: store each output tile in this many column slices, so the TMA
    store's staging buffer is that many times smaller (room for more stages). flatten:
    Triton fuses the tile loop and the K loop into one software-pipelined loop, so the
    next tile's loads are in flight during this tile's epilogue.
    stream_k: the data-parallel + stream-K hybrid for tail waves (kernels/streamk.py): a
    persistent grid of one program per SM runs the full waves of tiles whole and splits
    the last, partial wave's tiles along K over all SMs. Pointer loads whatever the
    variant, as for split-K, and not with split_k > 1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    variant: Literal["auto", "grouped", "tma"] = "auto"
    split_k: int = 1
    warp_specialize: bool = False
    epilogue_subtile: int = 1
    flatten: bool = False
    stream_k: bool = False

    @field_validator("block_m", "block_n", "block_k", "group_m", "num_warps", "num_stages", "split_k",
                     "epilogue_subtile", mode="before")
    @classmethod
    def _no_bool(cls, v: Any) -> Any:
        # true is an int to pydantic's lax mode ("got 1"); as a tile size it is a mistake
        if isinstance(v, bool):
            raise ValueError(f"must be an integer, got {str(v).lower()}")
        return v

    @field_validator("block_m", "block_n", "block_k")
    @classmethod
    def _check_block(cls, v: int) -> int:
        lo, hi = _BLOCK_RANGE
        if not (_is_pow2(v) and lo <= v <= hi):
            raise ValueError(f"must be a power of two in [{lo}, {hi}], got {v}")
        return v

    @field_validator("group_m")
    @classmethod
    def _check_group(cls, v: int) -> int:
        lo, hi = _GROUP_RANGE
        if not lo <= v <= hi:
            raise ValueError(f"must be in [{lo}, {hi}], got {v}")
        return v

    @field_validator("num_warps")
    @classmethod
    def _check_warps(cls, v: int) -> int:
        if v not in _WARPS:
            raise ValueError(f"must be one of {_WARPS}, got {v}")
        return v

    @field_validator("num_stages")
    @classmethod
    def _check_stages(cls, v: int) -> int:
        lo, hi = _STAGES_RANGE
        if not lo <= v <= hi:
            raise ValueError(f"must be in [{lo}, {hi}], got {v}")
        return v

    @field_validator("split_k")
    @classmethod
    def _check_split_k(cls, v: int) -> int:
        if v not in _SPLIT_K:
            raise ValueError(f"must be one of {_SPLIT_K}, got {v}")
        return v

    @field_validator("epilogue_subtile")
    @classmethod
    def _check_epilogue_subtile(cls, v: int) -> int:
        if v not in _EPILOGUE_SUBTILES:
            raise ValueError(f"must be one of {_EPILOGUE_SUBTILES}, got {v}")
        return v

    @model_validator(mode="after")
    def _check_tma_options(self) -> "KernelConfig":
        if self.tma_options() and (self.variant == "grouped" or self.split_k > 1 or self.stream_k):
            runs = ("variant grouped" if self.variant == "grouped"
                    else "split_k > 1 (pointer-load kernels)" if self.split_k > 1 else "stream_k (a pointer-load kernel)")
            raise ValueError(f"warp_specialize, epilogue_subtile and flatten are options of the TMA kernel: "
                             f"{runs} has none of them")
        return self

    @model_validator(mode="after")
    def _check_ws_stages(self) -> "KernelConfig":
        if self.warp_specialize and self.num_stages > WS_MAX_STAGES:
            raise ValueError(f"warp_specialize with num_stages > {WS_MAX_STAGES} computes wrong results on Hopper "
                             f"(Triton 3.6 left part of the output unwritten): use num_stages <= {WS_MAX_STAGES}")
        return self

    @model_validator(mode="after")
    def _check_stream_k(self) -> "KernelConfig":
        if self.stream_k and self.split_k > 1:
            raise ValueError("stream_k and split_k > 1 are two ways to split K: pick one")
        return self

    @model_validator(mode="after")
    def _check_tile_vs_warps(self) -> "KernelConfig":
        # Each warp of a tl.dot needs at least a 16x16 (m x n) piece of the tile.
        if self.block_m * self.block_n < self.num_warps * 256:
            raise ValueError(
                f"tile {self.block_m}x{self.block_n} is too small for {self.num_warps} warps"
            )
        return self

    def tma_options(self) -> bool:
        """Whether any option of the TMA kernel differs from its default."""
        return self.warp_specialize or self.epilogue_subtile > 1 or self.flatten

    def shared_memory_bytes(self, dtype: torch.dtype = torch.float16, *, tma: bool = True, bias: bool = False,
                            store_z: bool = False) -> int:
        """Shared memory one program takes on Hopper for ``dtype`` operands, in the mode
        of the call: the kernel that runs it (``tma``: whether the TMA kernel can take the
        operands; True, the larger need, where that is not known), with a bias or not,
        storing the pre-activation Z (a training forward) or not. See kernels/fit.py."""
        from autokernel.kernels.fit import shared_memory_need

        return shared_memory_need(self, dtype, tma=tma, bias=bias, store_z=store_z)

    def check_fits(self, dtype: torch.dtype = torch.float16, limit: int | None = None, *, tma: bool = True,
                   bias: bool = False, store_z: bool = False) -> None:
        """Raise ConfigError if the shared memory this config takes in this mode (see
        ``shared_memory_bytes``) exceeds the device limit.

        ``limit`` defaults to the current device's opt-in limit; under the interpreter
        there is no limit and the check passes.
        """
        limit = runtime.shared_memory_limit() if limit is None else limit
        if limit is None:
            return
        error = fit_error(self, dtype, limit, tma, bias, store_z)
        if error:
            raise ConfigError(error)

    def short(self) -> str:
        """A compact human label, e.g. 128x128x64 g8 w8 s3 (then the variant unless auto,
        k4 for split_k=4, ws for warp_specialize, st2 for epilogue_subtile=2, fl for flatten,
        sk for stream_k)."""
        label = f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} w{self.num_warps} s{self.num_stages}"
        if self.variant != "auto":
            label += f" {self.variant}"
        if self.split_k > 1:
            label += f" k{self.split_k}"
        if self.warp_specialize:
            label += " ws"
        if self.epilogue_subtile > 1:
            label += f" st{self.epilogue_subtile}"
        if self.flatten:
            label += " fl"
        if self.stream_k:
            label += " sk"
        return label

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelConfig":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(one_line(exc)) from None

    @classmethod
    def from_json(cls, text: str) -> "KernelConfig":
        """Parse a JSON object; a JSON string that names a file is read from that file."""
        source = text
        if not text.lstrip().startswith("{"):
            try:
                if Path(text).is_dir():
                    raise ConfigError(f"config file {text} is a directory: give a JSON file or a JSON object")
                if Path(text).is_file():
                    source = Path(text).read_text()
            except OSError as exc:  # a name too long, a file we may not read
                raise ConfigError(f"cannot read config file {text[:80]!r}: {exc.strerror}") from None
            except UnicodeDecodeError:
                raise ConfigError(f"config file {text} is not text: expected a JSON object") from None
        try:
            data = json.loads(source)
        except json.JSONDecodeError as exc:
            if source is text and not text.lstrip().startswith(("{", "[")):
                raise ConfigError(f"config file {text} does not exist (nor is it JSON)") from None
            where = "config" if source is text else f"config file {text}"
            raise ConfigError(f"{where} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        if isinstance(data, dict) and "config" in data and isinstance(data["config"], dict):
            data = data["config"]  # accept an exported entry that wraps the config
        if not isinstance(data, dict):
            raise ConfigError(f"config must be a JSON object, got {type(data).__name__}")
        return cls.from_dict(data)


@functools.lru_cache(maxsize=4096)
def fit_error(config: KernelConfig, dtype: torch.dtype, limit: int, tma: bool = True, bias: bool = False,
              store_z: bool = False) -> str | None:
    """Why ``config`` doesn't fit in ``limit`` bytes of shared memory in this mode (see
    ``KernelConfig.shared_memory_bytes``), or None. Cached: configs are frozen."""
    from autokernel.kernels.fit import describe

    need = config.shared_memory_bytes(dtype, tma=tma, bias=bias, store_z=store_z)
    if need <= limit:
        return None
    return (
        f"config {config.short()} needs ~{need // 1024} KiB of shared memory for "
        f"{str(dtype).removeprefix('torch.')} on {describe(config, dtype, tma=tma, bias=bias, store_z=store_z)}, "
        f"the device allows {limit // 1024} KiB"
    )


def one_line(exc: ValidationError, what: str = "invalid config") -> str:
    """A pydantic ValidationError as one line: ``what: field.path: message; ...``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "config"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return f"{what}: " + "; ".join(parts)


FILL_TILES = 66
"""default_config's largest tile must make this many tiles: half an H100's 132 SMs."""
_TILES = ((128, 256), (128, 128), (64, 128), (64, 64))
_SKINNY_TILES = _TILES[1:]  # M <= 256: 128x128 on the grouped kernel beat 128x256 and TMA


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@functools.lru_cache(maxsize=1024)
def default_config(m: int, n: int, k: int, dtype: torch.dtype = torch.float16, *, gpu: bool | None = None) -> KernelConfig:
    """A sensible config for an M x N x K problem, before any tuning.

    From the H100 sweep in docs/kernel-notes.md: large problems take 128x256x64 tiles,
    8 warps, 3 stages, on the TMA kernel where it can run ("auto"); skinny ones (M <= 256)
    take narrower tiles on the grouped pointer kernel, which beat the persistent TMA
    kernel there. A problem too small to make FILL_TILES tiles of that size takes the
    largest of 128x128, 64x128 and 64x64 that does (else 64x64), 4 warps and 5 stages
    on the smaller two: tuned small shapes on the H100 all chose those tiles, and the
    rule ran 1.8x faster than the 128x256 or 128x128 tile it replaced, geomean over 14
    problems it was read from and 14 it never saw (docs/runs/kernels/default_tiles_h100.txt).
    M <= 64 keeps its decode tiles. Under the interpreter: the smallest tiles that cover the problem, since
    each program costs Python time there. Cached: KernelConfig is frozen, and building one
    through pydantic on every call showed in the per-launch host time. ``gpu`` asks for
    the GPU's or the interpreter's choice regardless of where this process runs (replay).
    """
    if not (gpu if gpu is not None else not runtime.INTERPRETER):
        def fit(x: int, cap: int) -> int:
            return min(cap, max(16, _next_pow2(max(x, 1))))

        bm, bn, bk = fit(m, 64), fit(n, 64), fit(k, 64)
        warps = 4 if bm * bn >= 1024 else 1
        return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=warps, num_stages=1)
    wide = dtype == torch.float32  # fp32 tiles take twice the shared memory
    if m <= 64:
        bm = min(64, max(16, _next_pow2(m)))
        return KernelConfig(block_m=bm, block_n=64, block_k=64 if wide else 128,
                            group_m=8, num_warps=4, num_stages=4, variant="grouped")
    # The largest tile that still makes at least FILL_TILES tiles, else the smallest: 128x256
    # tiles on a 512x512 output are 8 tiles, and 124 of the H100's 132 SMs would sit idle.
    tiles = _SKINNY_TILES if m <= 256 else _TILES
    bm, bn = next(((bm, bn) for bm, bn in tiles if _cdiv(m, bm) * _cdiv(n, bn) >= FILL_TILES), tiles[-1])
    if (bm, bn) == (128, 256):
        return KernelConfig(block_m=128, block_n=128 if wide else 256, block_k=32 if wide else 64,
                            group_m=8, num_warps=8, num_stages=3, variant="auto")
    if (bm, bn) == (128, 128):
        return KernelConfig(block_m=128, block_n=128, block_k=32 if wide else 64,
                            group_m=8, num_warps=4, num_stages=4, variant="grouped")
    bk = 32 if wide else 128 if bn == 64 and k >= 1024 else 64
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=4,
                        num_stages=4 if wide else 5, variant="grouped")
