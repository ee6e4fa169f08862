"""Best configs per device and problem: exported from the history, loaded at run time.

A best-config file (JSON, ``BestFile``) holds, for one device, the fastest successful
config of each problem the history has trials for, with its time and how it compares
with torch. ``autokernel export-best`` writes one; ``autokernel.matmul`` and
``autokernel.linear`` read them to pick a config when none is given (``resolve``):

1. a tuned entry for exactly the problem, from the file named by ``$AUTOKERNEL_CONFIG``,
   then from the file shipped for this GPU, ``autokernel/configs/<device_key(name)>.json``
   (e.g. ``nvidia-h100-80gb-hbm3.json``; package data, so an installed package has it);
2. where a selector model is fitted for the GPU (``configs/selector/<device_key>.json``
   or ``$AUTOKERNEL_SELECTOR``), the selector's choice (``autokernel.select``): it scores
   its candidate configs, the tuned entries of shapes within 4x of this one in every
   dimension (``within_reach``) and the default, and the fastest predicted wins. A
   tuned entry of another shape is a candidate, never the answer by itself: a tile
   tuned for one shape can be a poor one for another;
3. ``default_config``.

A file is used only for the device it was tuned on (device names compared through
``device_key``). ``lookup`` still answers the nearest entry of a file (the smallest
``shape_distance``), for tools that ask what a file holds.

A config is launched only where it fits the device's shared memory in the mode of the
call (``resolve``: the kernel that runs it, bias, a training forward storing Z): one
that does not is shrunk to fit, deterministically (kernels/fit.py).

Everything is cached: a file is read and validated once per process, and each
(M, N, K, dtype, activation, bias, device, mode) is resolved once, so a call costs one
cache hit. ``clear_cache()`` forgets it all (after changing ``$AUTOKERNEL_CONFIG`` or a
file).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from autokernel import gpus, knobs, runtime, select
from autokernel.config import ConfigError, KernelConfig, check_fits, default_config, fit_error, one_line
from autokernel.kernels.fit import fit_config
from autokernel.records import LAYOUTS, normalize_activation, parse_dtype

if TYPE_CHECKING:
    from autokernel.records import Problem

SCHEMA_VERSION = 1
CONFIG_ENV = "AUTOKERNEL_CONFIG"
SHIPPED_DIR = Path(__file__).parent / "configs"
"""Where the per-GPU files shipped with the package live."""

_RESOLVED_CACHE_SIZE = 4096


def device_key(name: str) -> str:
    """A device name as a file name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


class BestEntry(BaseModel):
    """One problem and its best config, with how fast it ran.

    ms: median wall time per call in milliseconds; gpu_ms: GPU time per call without the
    host's launch cost, where measured; tflops: 10^12 FLOP/s at ``ms``; torch_ms: the
    fastest torch baseline of the same problem on the same device (cuBLAS, plus eager
    bias and activation when the problem has them); speedup_vs_cublas: torch_ms / ms
    (above 1: ours is faster); trials: how many configs of our kernel the history holds
    for this problem on this device, failed ones included.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    M: int = Field(ge=0)
    N: int = Field(ge=0)
    K: int = Field(ge=0)
    dtype: str
    activation: str = "none"
    bias: bool = False
    layout: str = "nn"
    config: KernelConfig
    ms: float | None = None
    gpu_ms: float | None = None
    tflops: float | None = None
    torch_ms: float | None = None
    speedup_vs_cublas: float | None = None
    trials: int | None = None

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        return parse_dtype(v)

    @field_validator("activation")
    @classmethod
    def _activation(cls, v: str) -> str:
        return normalize_activation(v)

    @field_validator("layout")
    @classmethod
    def _layout(cls, v: str) -> str:
        if v not in LAYOUTS:
            raise ValueError(f"must be one of {', '.join(LAYOUTS)}, got {v!r}")
        return v

    def same_problem(self, problem: "Problem") -> bool:
        return (self.M, self.N, self.K, self.dtype, self.activation, self.bias, self.layout) == (
            problem.m, problem.n, problem.k, problem.dtype, problem.activation, problem.bias, problem.layout)


class BestFile(BaseModel):
    """The best configs of one device (see the module docstring); ``timing`` says where the
    times were taken, "gpu" or "interpreter"."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int
    generated: str | None = None
    device: str
    timing: Literal["gpu", "interpreter"] = "gpu"
    torch_version: str | None = None
    triton_version: str | None = None
    entries: list[BestEntry] = Field(default_factory=list)

    @field_validator("schema_version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"this autokernel reads best-config files of schema {SCHEMA_VERSION}, not {v}")
        return v

    def for_device(self, name: str) -> bool:
        return device_key(self.device) == device_key(name)

    def config_for(self, problem: "Problem") -> KernelConfig | None:
        """The config of exactly ``problem`` (what ``bench --best`` measures), or None."""
        return next((e.config for e in self.entries if e.same_problem(problem)), None)

    def nearest(self, m: int, n: int, k: int, dtype: str, activation: str,
                bias: bool | None = None, layout: str | None = None) -> BestEntry | None:
        """The entry of ``dtype`` and ``activation`` nearest to M x N x K (module docstring);
        ``bias`` and ``layout`` break ties where given. None if no entry has them."""
        def distance(entry: BestEntry) -> tuple:
            return (shape_distance((m, n, k), (entry.M, entry.N, entry.K)),
                    bias is not None and entry.bias != bias, layout is not None and entry.layout != layout)

        candidates = [e for e in self.entries if e.dtype == dtype and e.activation == activation
                      and within_reach((m, n, k), (e.M, e.N, e.K))]
        return min(candidates, key=distance, default=None)  # min keeps the first of equals: file order

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


MAX_RATIO_LOG2 = 2.0
"""An entry stands in for shapes at most 4x away from its own in each of M, N and K."""


def within_reach(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """True when no dimension of the two shapes differs by more than 2**MAX_RATIO_LOG2: a
    tile tuned for 4096 rows says nothing about 16 (a decode GEMM wants thin tiles), so
    such a shape keeps the default config rather than a far entry's."""
    return all(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) <= MAX_RATIO_LOG2 for x, y in zip(a, b))


def shape_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """How far apart two GEMM shapes (M, N, K) are: the sum over the three of |log2 a - log2 b|
    (0 for the same shape, 1 for one twice as large in one dimension; sizes below 1 count as 1)."""
    return sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for x, y in zip(a, b))


def load(path: str | Path) -> BestFile:
    """Read and validate a best-config file; ConfigError (one line naming the file) if it
    can't be read or isn't one."""
    if Path(path).is_dir():
        raise ConfigError(f"best-config file {path} is a directory, not a file of `autokernel export-best`")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"cannot read best-config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"best-config file {path} is not text: expected the JSON of `autokernel export-best`") from None
    if not text.strip():
        raise ConfigError(f"best-config file {path} is empty (a failed `autokernel export-best > file` leaves one): "
                          "export it again")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"best-config file {path} is not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a best-config file: it holds a JSON {type(data).__name__}, "
                          "not an object with schema_version, device and entries")
    try:
        return BestFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(one_line(exc, f"{path} is not a best-config file")) from None


# --- run-time lookup -------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _load_cached(path: Path) -> BestFile:
    return load(path)


def _sources(device: str) -> list[tuple[str, BestFile]]:
    """The files to consult for ``device``, in order, each with how to name it in a message."""
    found = []
    env = os.environ.get(CONFIG_ENV)
    if env:
        try:
            found.append((f"${CONFIG_ENV} ({env})", _load_cached(Path(env))))
        except ConfigError as exc:
            raise ConfigError(f"${CONFIG_ENV}: {exc}") from None
    shipped = SHIPPED_DIR / f"{device_key(device)}.json"
    if shipped.is_file():
        found.append((f"the shipped {shipped.name}", _load_cached(shipped)))
    return found


def lookup(m: int, n: int, k: int, dtype: torch.dtype | str, activation: str = "none", bias: bool | None = None,
           layout: str | None = None, device: str | None = None) -> KernelConfig | None:
    """The tuned config for this problem on ``device`` (a device name; default: this
    machine's) from ``$AUTOKERNEL_CONFIG``, then the shipped file; None when neither has
    an entry of the dtype and activation for the device. See the module docstring for
    "nearest". ConfigError when ``$AUTOKERNEL_CONFIG`` names no valid file."""

    found = _lookup(m, n, k, parse_dtype(str(dtype)), normalize_activation(activation), bias, layout,
                    device or runtime.device_name())
    return found[1] if found else None


def _lookup(m, n, k, dtype: str, activation: str, bias, layout, device: str) -> tuple[str, KernelConfig] | None:
    for where, best in _sources(device):
        if not best.for_device(device):
            _warn_once(f"{where} holds configs for {best.device}, not this {device}: not used")
            continue
        entry = best.nearest(m, n, k, dtype, activation, bias, layout)
        if entry is not None:
            return where, entry.config
    return None


SELECTOR_ENV = "AUTOKERNEL_SELECTOR"


@functools.lru_cache(maxsize=None)
def _model_cached(path: Path) -> "select.Model":
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read selector file {path}: {exc.strerror or exc}") from None
    try:
        return select.Model.from_json(text, str(path))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def selector_model(device: str) -> "select.Model | None":
    """The selector's fitted model for ``device`` (a device name): the file named by
    ``$AUTOKERNEL_SELECTOR``, else the one shipped for the GPU
    (``autokernel/configs/selector/<device_key>.json``), else a shipped model carried to it
    from a GPU of the same architecture (``sibling_model``); None where none is for it.
    Looked up once per device and value of the variable (``clear_cache`` forgets it)."""
    return _selector_model(device, os.environ.get(SELECTOR_ENV) or None)


def sibling_model(device: str) -> "select.Model | None":
    """A shipped model carried to ``device``, a GPU no model was fitted for, from one of the
    same architecture (``select.carried``): its SM count (this machine's where ``device`` is
    its GPU), and its DRAM bandwidth and tensor throughput per SM against the fitted GPU's,
    from the datasheet table (``gpus``). Of several such models, the one fitted on the GPU
    nearest to it (``_distance``): an H100 NVL takes the H100's model with 1.16x its DRAM
    bandwidth and 0.84x its clock, an H200 NVL the H200's with its clock. The GPU at hand, if
    the table does not know it, is placed by its compute capability and SM count, its
    bandwidth and clock taken as the first fitted GPU's. None where neither tells the
    architecture, or no shipped model is of it."""
    spec = gpus.detect_gpu(device)
    here = _runs_on(device)
    if spec is not None and spec.arch and spec.sms:
        arch, programs = spec.arch, runtime.sm_count() if here else spec.sms
    elif here:
        arch, programs = "sm_{}{}".format(*torch.cuda.get_device_capability()), runtime.sm_count()
    else:
        return None
    siblings = [(model, fitted) for model, fitted in _shipped_models() if fitted.arch == arch]
    if not siblings:
        return None
    model, fitted = min(siblings, key=lambda item: _distance(item[1], spec))  # min keeps the first of ties
    return _carry(model, fitted, device, spec, programs)


def _distance(fitted: "gpus.GpuSpec", spec: "gpus.GpuSpec | None") -> float:
    """How far a model fitted on ``fitted`` is carried to ``spec``: the log ratios of their DRAM
    bandwidths and of their tensor throughputs per SM, added (0 where ``spec`` is unknown)."""
    if spec is None or not spec.sms:
        return 0.0
    return abs(math.log(spec.bandwidth_gbs / fitted.bandwidth_gbs)) + abs(math.log(_per_sm(spec, fitted)))


def _per_sm(spec: "gpus.GpuSpec", fitted: "gpus.GpuSpec") -> float:
    """``spec``'s tensor throughput per SM over ``fitted``'s (the datasheets': the clock)."""
    return (spec.fp16_tflops / spec.sms) / (fitted.fp16_tflops / fitted.sms)


def carry(model: "select.Model", device: str) -> "select.Model | None":
    """``model`` (a selector model of another GPU, e.g. one fitted before the shipped one)
    carried to ``device`` as ``sibling_model`` carries the shipped one; None where the
    datasheet table does not place both GPUs in one architecture."""
    spec, fitted = gpus.detect_gpu(device), gpus.detect_gpu(model.device)
    if spec is None or fitted is None or not (spec.sms and fitted.sms) or spec.arch != fitted.arch:
        return None
    return _carry(model, fitted, device, spec, runtime.sm_count() if _runs_on(device) else spec.sms)


def _runs_on(device: str) -> bool:
    """Whether this process runs on the GPU named ``device`` (its SM count is then this machine's)."""
    return not runtime.INTERPRETER and torch.cuda.is_available() and runtime.device_name() == device


def _carry(model: "select.Model", fitted: "gpus.GpuSpec", device: str, spec: "gpus.GpuSpec | None",
           programs: int) -> "select.Model":
    if spec is None or not spec.sms:
        return select.carried(model, device, programs, 1.0, 1.0)
    return select.carried(model, device, programs, spec.bandwidth_gbs / fitted.bandwidth_gbs, _per_sm(spec, fitted))


def _shipped_models() -> list[tuple["select.Model", "gpus.GpuSpec"]]:
    """The shipped selector models whose GPU the datasheet table knows (with its SM count),
    each with that GPU's entry: what a model can be carried from."""
    out = []
    for path in sorted((SHIPPED_DIR / "selector").glob("*.json")):
        model = _model_cached(path)
        fitted = gpus.detect_gpu(model.device)
        if fitted is not None and fitted.sms:
            out.append((model, fitted))
    return out


def selector_coverage(spec: "gpus.GpuSpec") -> str | None:
    """How the selector serves a GPU of the datasheet table: "fitted" where a shipped model
    was fitted on it, "carried" where one of its architecture is carried to it
    (``sibling_model``), None where the default config serves it."""
    shipped = [fitted for _, fitted in _shipped_models()]
    if any(fitted.name == spec.name for fitted in shipped):
        return "fitted"
    if spec.arch and spec.sms and any(fitted.arch == spec.arch for fitted in shipped):
        return "carried"
    return None


@functools.lru_cache(maxsize=16)
def _selector_model(device: str, env: str | None) -> "select.Model | None":
    if env:
        model = _model_cached(Path(env))
        if device_key(model.device) == device_key(device):
            return model
        _warn_once(f"${SELECTOR_ENV} ({env}) was fitted on {model.device}, not this {device}: not used")
    shipped = SHIPPED_DIR / "selector" / f"{device_key(device)}.json"
    return _model_cached(shipped) if shipped.is_file() else sibling_model(device)


def _exact(m: int, n: int, k: int, dtype: str, activation: str, bias: bool, layout: str | None,
           device: str) -> tuple[str, KernelConfig] | None:
    """(where, config) of a tuned entry for exactly this problem, bias and operand layout
    too (``layout`` None: any layout): ``$AUTOKERNEL_CONFIG``'s first, then the shipped
    file's. (The layout decides which kernel a config runs: a config tuned for row-major
    B can be slow on B^T.)"""
    return _exact_index(device, os.environ.get(CONFIG_ENV) or None).get((m, n, k, dtype, activation, bias, layout))


@functools.lru_cache(maxsize=16)
def _exact_index(device: str, env: str | None) -> dict[tuple, tuple[str, KernelConfig]]:
    index: dict[tuple, tuple[str, KernelConfig]] = {}
    for where, found in _sources(device):
        if not found.for_device(device):
            _warn_once(f"{where} holds configs for {found.device}, not this {device}: not used")
            continue
        for e in found.entries:
            index.setdefault((e.M, e.N, e.K, e.dtype, e.activation, e.bias, e.layout), (where, e.config))
            index.setdefault((e.M, e.N, e.K, e.dtype, e.activation, e.bias, None), (where, e.config))
    return index


@functools.lru_cache(maxsize=64)
def _tuned_shapes(dtype: str, activation: str, device: str) -> tuple[tuple, ...]:
    """(log2 M, log2 N, log2 K, config, where, (M, N)) of every tuned entry of this dtype
    and activation for ``device``, from ``$AUTOKERNEL_CONFIG`` and the shipped file."""
    out = []
    for where, found in _sources(device):
        if found.for_device(device):
            label = _source(where)
            out += [(math.log2(max(e.M, 1)), math.log2(max(e.N, 1)), math.log2(max(e.K, 1)), e.config,
                     f"{label}, {e.M}x{e.N}x{e.K}", (e.M, e.N))
                    for e in found.entries if e.dtype == dtype and e.activation == activation]
    return tuple(out)


ENTRY_GROUP_M = 8
"""The tile order (``group_m``) a tuned entry takes on other shapes where its own shape could
not have chosen one: the default config's."""


def reorderable(config: KernelConfig, m: int, n: int, programs: int | None) -> KernelConfig | None:
    """``config`` (tuned for an M x N output) with ``ENTRY_GROUP_M`` where all its programs
    ran at once on its own shape (at most ``programs``, the GPU's SMs): the order of its
    tiles could not matter there, so its ``group_m`` is whichever the tuner met first. None
    where the order was timed, or is the default's already. On the H100 every group_m = 1
    entry of the shipped file was tuned on at most 132 tiles, and the 2048³ one (128x256
    pointer tile, g1) ran 3.6-5.5 % behind the default where the selector took it for 3584³,
    6144³ and 4096x8192x8192 (nn) and 8192x8192x4096 (tn) (docs/selector.md)."""
    if programs is None or config.group_m == ENTRY_GROUP_M:
        return None
    rows, cols = knobs.tile_grid(config.swap_ab, config.block_m, config.block_n, m, n)
    if rows * cols * config.split_k > programs:
        return None
    return config.model_copy(update={"group_m": ENTRY_GROUP_M})


def _as_candidate(m: int, n: int, config: KernelConfig, where: str, home: tuple[int, int],
                  programs: int | None) -> tuple[KernelConfig, str]:
    """A tuned entry of another shape (its own output ``home``, M x N) as a candidate for
    M x N: in the default's tile order (``reorderable``) where the order matters here (at
    least ``ENTRY_GROUP_M`` rows of tiles, more programs than SMs), else as tuned."""
    rows, cols = knobs.tile_grid(config.swap_ab, config.block_m, config.block_n, m, n)
    if rows < ENTRY_GROUP_M or programs is None or rows * cols * config.split_k <= programs:
        return config, where
    reordered = reorderable(config, *home, programs)
    return (config, where) if reordered is None else (reordered, f"{where}, g{ENTRY_GROUP_M}")


def _nearby(m: int, n: int, k: int, dtype: str, activation: str, device: str) -> tuple[tuple[KernelConfig, str], ...]:
    """The tuned configs of other shapes within reach (``within_reach``) of the same dtype
    and activation, each with where it came from: candidates for the selector
    (``_as_candidate``)."""
    lm, ln, lk = math.log2(max(m, 1)), math.log2(max(n, 1)), math.log2(max(k, 1))
    reach = MAX_RATIO_LOG2
    model = selector_model(device)
    programs = model.programs if model is not None else None
    return tuple(_as_candidate(m, n, config, where, home, programs)
                 for em, en, ek, config, where, home in _tuned_shapes(dtype, activation, device)
                 if abs(em - lm) <= reach and abs(en - ln) <= reach and abs(ek - lk) <= reach)


@dataclass(frozen=True)
class Pick:
    """What ``pick`` answers: the config, where it came from (``resolve``'s sources), why,
    the default as it fits the call's mode, whether the config is a tuned entry for exactly
    the problem, and the selector's ranking (None where no model is fitted for the GPU, or
    where an exact entry won and no ranking was asked for)."""

    config: KernelConfig
    source: str
    reason: str
    default: KernelConfig
    exact: bool
    choice: "select.Choice | None" = field(default=None, repr=False)


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def _fitted(config: KernelConfig, dtype: torch.dtype, limit: int | None, tma: bool, bias: bool,
            store_z: bool) -> KernelConfig | None:
    """``fit_config``, kept per config and mode (a few configs recur on every shape): the
    config itself where it fits (callers tell a shrunk one by identity), else its shrunk
    form or None."""
    fitted = _fit_cached(config, dtype, limit, tma, bias, store_z)
    return config if fitted is _FITS else fitted


_FITS = object()


@functools.lru_cache(maxsize=1024)
def _fit_cached(config, dtype, limit, tma, bias, store_z):
    fitted = fit_config(config, dtype, limit, tma=tma, bias=bias, store_z=store_z)
    return _FITS if fitted is config else fitted


def pick(m: int, n: int, k: int, dtype: torch.dtype, activation: str = "none", bias: bool = False,
         layout: str = "nn", *, device: str, limit: int | None = None, tma: bool | None = None,
         store_z: bool = False, gpu: bool = True, margin: float = select.DEFAULT_MARGIN,
         z: float = select.UNCERTAINTY_Z, fits=None,
         rank: bool = False, model: "select.Model | None" = None, copied: tuple[bool, bool] = (False, False)) -> Pick:
    """The config ``autokernel.matmul`` launches an M x N x K problem with on the GPU named
    ``device``, and why; no GPU needed (the tuned files and the selector's model are data).
    ``resolve`` is this with this machine's device, shared memory and TMA answer; ``autokernel
    explain`` and the selector's replay (benchmarks/fit_selector.py) call it for a named GPU.

    The order (module docstring): a tuned entry for exactly the problem (``layout`` too),
    fitted to the mode; else the selector's choice among its candidates, the nearby tuned
    entries and the default; else, with no model for the GPU, an entry for this shape in
    another layout, else the default.

    limit: the device's shared memory per program in bytes, which every config must fit
    in the call's mode (``tma``, ``bias``, ``store_z``; None: no limit). tma: whether the
    TMA kernel can take the operands (None: as ``Problem.make_inputs`` stores them in this
    layout, ``select.tma_aligned``). gpu: the GPU's default config (False: the interpreter's).
    margin, z: the selector's (``select.choose``). fits: a further filter of the configs the
    selector may pick (a replay: those measured); given, nothing is kept per mode. rank:
    compute the selector's ranking even where an exact entry wins (``explain``). model: the
    selector's model to rank with (default: ``selector_model(device)``; a replay passes one
    fitted without the shapes it picks for). copied: (A, B), whether each operand runs as a
    copy whose rows are aligned (``plans.Padding``): its rows then take 16-byte vectors
    whatever K and the layout say (``select.unvectorized``)."""
    dt = _dtype_name(dtype)
    if tma is None:
        tma = select.tma_aligned(m, n, k, dtype, layout)
    mode = (tma, bias, store_z)
    found = _exact(m, n, k, dt, activation, bias, layout, device)
    exact = None
    if found is not None:
        exact = _fitted_entry(found, dtype, limit, mode)
        if exact is None:
            try:
                check_fits(found[1], dtype, limit, tma=tma, bias=bias, store_z=store_z)
            except ConfigError as exc:
                _warn_once(f"{found[0]}: {exc}; using the default config")
    config = default_config(m, n, k, dtype, gpu=gpu, tma=tma)
    default = _fitted(config, dtype, limit, *mode)
    if default is None:
        check_fits(config, dtype, limit, tma=tma, bias=bias, store_z=store_z)  # raises: no shrink of it fits
    default_source = "default" if default is config else "default, fitted"
    if model is None and (exact is None or rank):
        model = selector_model(device)
    ranked = None
    if model is not None and (exact is None or rank):
        if fits is None:
            fits_key = (dtype, limit, tma, bias, store_z)
            allowed = (lambda c: True) if limit is None else (lambda c: fit_error(c, dtype, limit, tma, bias, store_z) is None)
        else:
            fits_key, allowed = None, fits
        tuned = _nearby_fitted(m, n, k, dt, activation, device, dtype, limit, mode, model.programs)
        ranked = select.choose(model, m, n, k, dtype, tma=tma, default=default, tuned=tuned, fits=allowed,
                               fits_key=fits_key, margin=margin, z=z, aligned=select.rows_aligned(k, layout),
                               b_rows=select.b_row_major(layout), activation=activation,
                               scalar=_scalar(m, k, dtype, layout, copied),
                               sectors=_split(m, n, k, dtype, layout, copied))
    if exact is not None:
        return Pick(exact[0], exact[1], f"a tuned entry for exactly this problem ({found[0]})", default, True, ranked)
    if ranked is not None:
        if ranked.config is default:
            return Pick(default, default_source, ranked.reason, default, False, ranked)
        return Pick(ranked.config, ranked.source, ranked.reason, default, False, ranked)
    # No model to score with: an entry for this shape in another layout is the best guess.
    found = _exact(m, n, k, dt, activation, bias, None, device)
    other = found is not None and _fitted_entry(found, dtype, limit, mode)
    if other:
        return Pick(other[0], other[1], f"no selector model for {device}; a tuned entry for this shape in "
                    f"another layout ({found[0]})", default, False)
    return Pick(default, default_source, f"no selector model for {device}", default, False)


def _scalar(m: int, k: int, dtype: torch.dtype, layout: str, copied: tuple[bool, bool]) -> tuple[bool, bool]:
    """``select.unvectorized`` of the operands as they run: a copy into aligned rows takes
    vectors."""
    a, b = select.unvectorized(k, dtype.itemsize, layout, m)
    return a and not copied[0], b and not copied[1]


def _split(m: int, n: int, k: int, dtype: torch.dtype, layout: str, copied: tuple[bool, bool]) -> tuple[bool, bool]:
    """``select.split_rows`` of the operands as they run: a copy's rows are padded to whole
    sectors (``kernels.aligned``)."""
    a, b = select.split_rows(m, n, k, dtype.itemsize, layout)
    return a and not copied[0], b and not copied[1]


def _nearby_fitted(m: int, n: int, k: int, dt: str, activation: str, device: str, dtype: torch.dtype,
                   limit: int | None, mode: tuple, programs: int) -> tuple[tuple[KernelConfig, str], ...]:
    """``_nearby`` for a selector model of ``programs`` SMs, each entry fitted to the call's
    mode (``_fitted``; "fitted" added to where it came from where it was shrunk, left out
    where it cannot fit)."""
    lm, ln, lk = math.log2(max(m, 1)), math.log2(max(n, 1)), math.log2(max(k, 1))
    reach = MAX_RATIO_LOG2
    return tuple(_as_candidate(m, n, config, where, home, programs)
                 for em, en, ek, config, where, home in _tuned_fitted(dt, activation, device, dtype, limit, mode)
                 if abs(em - lm) <= reach and abs(en - ln) <= reach and abs(ek - lk) <= reach)


@functools.lru_cache(maxsize=64)
def _tuned_fitted(dt: str, activation: str, device: str, dtype: torch.dtype, limit: int | None,
                  mode: tuple) -> tuple[tuple, ...]:
    return tuple((em, en, ek, shrunk, where if shrunk is config else f"{where}, fitted", home)
                 for em, en, ek, config, where, home in _tuned_shapes(dt, activation, device)
                 if (shrunk := _fitted(config, dtype, limit, *mode)) is not None)


def choice(m: int, n: int, k: int, dtype: torch.dtype, activation: str, bias: bool, device: torch.device,
           store_z: bool = False, tma: bool = True, layout: str = "nn") -> "select.Choice | None":
    """The selector's ranking for this problem on ``device`` in the call's mode, as
    ``resolve`` makes it, or None where no model is fitted for the GPU."""
    return ranked(m, n, k, dtype, activation, bias, device, store_z, tma, layout).choice


def ranked(m: int, n: int, k: int, dtype: torch.dtype, activation: str, bias: bool, device: torch.device,
           store_z: bool = False, tma: bool = True, layout: str = "nn",
           copied: tuple[bool, bool] = (False, False)) -> Pick:
    """``resolve``'s pick with the selector's ranking (where a model is fitted for the GPU)."""
    return _here(m, n, k, dtype, activation, bias, device, store_z, tma, layout, rank=True, copied=copied)


def _here(m, n, k, dtype, activation, bias, device, store_z, tma, layout, rank=False,
          copied=(False, False)) -> Pick:
    """``pick`` for this machine's ``device``: its name, shared memory and kind of default."""
    return pick(m, n, k, dtype, activation, bias, layout, device=runtime.device_name(device),
                limit=runtime.shared_memory_limit(), tma=tma, store_z=store_z, gpu=not runtime.INTERPRETER,
                rank=rank, copied=copied)


@functools.lru_cache(maxsize=_RESOLVED_CACHE_SIZE)
def resolve(m: int, n: int, k: int, dtype: torch.dtype, activation: str, bias: bool,
            device: torch.device, store_z: bool = False, tma: bool = True,
            layout: str = "nn", copied: tuple[bool, bool] = (False, False)) -> tuple[KernelConfig, str]:
    """(config, source): the config ``autokernel.matmul`` launches with when given none,
    and where it came from (``pick`` for this machine's GPU).

    1. A tuned entry for exactly this problem (``layout``: "n" or "t" for each of A and
       B, as in ``Problem``): "env" ($AUTOKERNEL_CONFIG), else "shipped" (the file shipped
       for the GPU).
    2. Else, where a selector model is fitted for the GPU (``selector_model``), its choice
       among the candidates, the tuned entries of nearby shapes and the default config
       (``select.choose``): "selected", "default", or where a tuned entry of another shape
       won, "env, MxNxK" / "shipped, MxNxK".
    3. Else (no model for the GPU) an entry for this problem in another layout, else
       ``default_config``: "default".

    The config must fit this device's shared memory in the mode of the call: the kernel
    that runs it (``tma``: whether the TMA kernel can take the operands), with a bias or
    not, storing Z (a training forward, ``store_z``) or not (kernels/fit.py). The selector
    considers only configs that fit. A tuned entry or default that does not is shrunk
    (``fit.fit_config``: the TMA store in half-width slices, then one stage fewer at a
    time down to 2) and its source says so ("shipped, fitted"); a tuned config that
    cannot be shrunk to fit gives way with one warning; a default that cannot fit raises
    ConfigError. Cached per argument tuple: the per-call cost is one hit."""
    found = _here(m, n, k, dtype, activation, bias, device, store_z, tma, layout, copied=copied)
    return found.config, found.source


def _source(where: str) -> str:
    """A tuned file's name in a pick's source: "env" ($AUTOKERNEL_CONFIG) or "shipped"."""
    return "env" if where.startswith(f"${CONFIG_ENV}") else "shipped"


def _fitted_entry(found: tuple[str, KernelConfig], dtype: torch.dtype, limit: int | None,
                  mode: tuple) -> tuple[KernelConfig, str] | None:
    """(config, source) of a tuned entry (``_exact``'s answer) as it fits the call's mode
    (tma, bias, store_z), shrunk where needed, and then said; None where it cannot fit."""
    where, config = found
    fitted = _fitted(config, dtype, limit, *mode)
    if fitted is None:
        return None
    return fitted, _source(where) if fitted is config else f"{_source(where)}, fitted"


def race_candidates(m: int, n: int, k: int, dtype: torch.dtype, activation: str, bias: bool, device: torch.device,
                    store_z: bool = False, tma: bool = True, layout: str = "nn", count: int = 8,
                    copied: tuple[bool, bool] = (False, False)) -> list[KernelConfig]:
    """What tuning on first use races for a problem: none where a tuned entry for exactly
    this problem exists (it wins), else the selector's ``count`` best-ranked configs that
    fit the call's mode, with what ``resolve`` picks first and the default among them."""
    found = _here(m, n, k, dtype, activation, bias, device, store_z, tma, layout, rank=True, copied=copied)
    if found.exact:
        return []
    pool = [found.config, found.default]
    if found.choice is not None:
        pool += [s.config for s in found.choice.ranked if s.predicted_us is not None]
    out: list[KernelConfig] = []
    for c in pool:
        if c not in out:
            out.append(c)
    return out[:count]


def resolved_config(m: int, n: int, k: int, dtype: torch.dtype, activation: str, bias: bool,
                    device: torch.device, store_z: bool = False, tma: bool = True,
                    layout: str = "nn", copied: tuple[bool, bool] = (False, False)) -> KernelConfig:
    """The config of ``resolve``, without its source."""
    return resolve(m, n, k, dtype, activation, bias, device, store_z, tma, layout, copied)[0]


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=2)


ON_CLEAR: list = []
"""What else to forget on ``clear_cache``: the layers above register their caches built on
resolved configs (api registers its launch plans), so that this module need not import
them."""


def clear_cache() -> None:
    """Forget loaded files and resolved configs (and the launch cache built on them), so
    the next call reads ``$AUTOKERNEL_CONFIG`` and the files again."""
    _load_cached.cache_clear()
    _model_cached.cache_clear()
    _selector_model.cache_clear()
    _exact_index.cache_clear()
    _tuned_shapes.cache_clear()
    _tuned_fitted.cache_clear()
    _fit_cached.cache_clear()
    resolve.cache_clear()
    _warned.clear()
    for forget in ON_CLEAR:
        forget()
