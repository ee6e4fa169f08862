"""The records at the bottom of autokernel: plain data every layer above shares.

``Problem`` (one GEMM to run, check and time: the key everything is indexed by), the names
it is built from (dtypes, activations, operand layouts) and their parsing,
``KernelConfig`` (the launch parameters of one kernel, checked: the rules each kernel
variant puts on its knobs) with its one JSON form, ``Trial`` (one measured problem and
implementation: what every evaluation produces and the history records) and ``Recorded``
(a Trial as the history holds it, with the run that wrote it), with their one CSV row
form (HISTORY_COLUMNS: ``Trial.to_row``, ``Recorded.from_row``). Importing this
module imports neither torch nor Triton (a test and an import-linter contract hold it to
that): the history, the CLI's argument checks and the tuner's records need neither.
"""

from __future__ import annotations

import math
import secrets
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from autokernel import knobs

if TYPE_CHECKING:
    import torch

DTYPE_SIZES: dict[str, int] = {"float16": 2, "bfloat16": 2, "float32": 4}
"""The dtypes the kernels take, by canonical name, with their element size in bytes."""
_DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32", "float": "float32"}
LAYOUTS = ("nn", "tn", "nt", "tt")
ACTIVATIONS = ("none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu")
"""The epilogue's activations (kernels/epilogue.py); "gelu" is exact (erf), "gelu_tanh"
the tanh approximation."""


def normalize_activation(activation: str | None) -> str:
    """None and "none" mean no activation; anything else must be a known name."""
    name = "none" if activation is None else str(activation).lower().replace("-", "_")
    if name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got {activation!r}")
    return name


def torch_dtype(name: str) -> "torch.dtype":
    """The torch dtype of a dtype name or alias."""
    import torch  # heavy: only callers that hold tensors get here

    return getattr(torch, parse_dtype(name))


def fresh_seed() -> int:
    """A random seed that leaves torch's global generator alone (torch.seed() would
    reseed it under the user's manual_seed)."""
    return secrets.randbits(62)


def parse_dtype(name: str) -> str:
    """Canonical dtype name ("float16", "bfloat16", "float32") from a name or alias."""
    key = str(name).lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_SIZES:
        raise ValueError(f"unknown dtype {name!r}; choose float16 (fp16), bfloat16 (bf16) or float32 (fp32)")
    return key


MAX_NUMEL = 2 ** 63
"""More elements than a torch tensor can hold (its sizes are int64)."""


@dataclass(frozen=True)
class Problem:
    """C[M, N] = act(A[M, K] @ B[K, N] + bias).

    layout: two letters for A and B, "n" for a row-major tensor, "t" for a transposed
    view of a row-major tensor (A given as a [K, M] tensor's .t(), B as a [N, K] tensor's
    .t() — the nn.Linear weight layout).
    """

    m: int
    n: int
    k: int
    dtype: str = "float16"
    activation: str = "none"
    bias: bool = False
    layout: str = "nn"

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name.upper()} must be an integer >= 0, got {v!r}")
        if max(self.m * self.k, self.k * self.n, self.m * self.n) >= MAX_NUMEL:
            raise ValueError(f"{self.m}x{self.n}x{self.k}: an operand would hold 2^63 elements or more, "
                             "more than a tensor can")
        object.__setattr__(self, "dtype", parse_dtype(self.dtype))
        object.__setattr__(self, "activation", normalize_activation(self.activation))
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {self.layout!r}")

    @property
    def torch_dtype(self) -> "torch.dtype":
        return torch_dtype(self.dtype)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    @property
    def bytes(self) -> int:
        """Fewest bytes moved: A, B (and bias) read once, C written once."""
        elem = DTYPE_SIZES[self.dtype]
        total = (self.m * self.k + self.k * self.n + self.m * self.n) * elem
        if self.bias:
            total += self.n * elem
        return total

    def label(self) -> str:
        extra = [self.dtype]
        if self.layout != "nn":
            extra.append(self.layout)
        if self.bias:
            extra.append("bias")
        if self.activation != "none":
            extra.append(self.activation)
        return f"{self.m}x{self.n}x{self.k} " + " ".join(extra)

    def to_dict(self) -> dict:
        return asdict(self)

    def make_inputs(self, device: "torch.device | str", seed: int | None = None):
        """Fresh random (a, b, bias) in the problem's layout and dtype.

        A is scaled by 1/sqrt(K) so that C stays O(1) whatever K is, and errors are
        comparable across sizes. One seed gives the same inputs on one kind of device.
        """
        # Drawn where they are used: on a GPU, drawing 4096^2 values on the CPU and copying
        # them over took most of a tuning trial's time.
        import torch  # heavy: only callers that make tensors get here

        device = torch.device(device)
        gen = torch.Generator(device=device)
        gen.manual_seed(seed if seed is not None else fresh_seed())
        dt = self.torch_dtype
        scale = 1.0 / math.sqrt(max(self.k, 1))

        def randn(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float32, device=device)

        a = randn(self.k, self.m).t() if self.layout[0] == "t" else randn(self.m, self.k)
        b = randn(self.n, self.k).t() if self.layout[1] == "t" else randn(self.k, self.n)
        a = (a * scale).to(device=device, dtype=dt)
        b = b.to(device=device, dtype=dt)
        bias = randn(self.n).to(device=device, dtype=dt) if self.bias else None
        return a, b, bias


# ---- kernel configs ----------------------------------------------------------------------

_INT_KNOBS = tuple(k.name for k in knobs.KNOBS if k.is_int)
_D = knobs.DEFAULTS


class ConfigError(ValueError):
    """A KernelConfig that cannot be built or cannot run on this device. ``problems``: the
    (field path, rule) pairs its message was made of, where it came from validation (a
    model holding a config reports them under its own field)."""

    def __init__(self, message: str, problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class KernelConfig(BaseModel):
    """Tile sizes and launch parameters of the GEMM kernels.

    Each field is a knob of autokernel/knobs.py, which says what it may take, its default,
    which kernels read it and what it means; a config that breaks one of its rules of
    CONFIG level is refused with that rule's message. In short: block_m / block_n /
    block_k are the tile of C and the K step, group_m the grouped order's height,
    num_warps and num_stages Triton's launch options; variant picks the grouped pointer
    kernel, the TMA kernel or "auto" (tma where it can run); split_k > 1 runs the split-K
    pointer kernels whatever the variant; stream_k runs the TMA kernel with a stream-K tail
    with variant "tma", else the stream-K pointer kernel; warp_specialize,
    epilogue_subtile, flatten and swap_ab are options of the TMA kernel alone.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_m: int = _D["block_m"]
    block_n: int = _D["block_n"]
    block_k: int = _D["block_k"]
    group_m: int = _D["group_m"]
    num_warps: int = _D["num_warps"]
    num_stages: int = _D["num_stages"]
    variant: Literal[knobs.KNOB["variant"].choices] = _D["variant"]
    split_k: int = _D["split_k"]
    warp_specialize: bool = _D["warp_specialize"]
    epilogue_subtile: int = _D["epilogue_subtile"]
    flatten: bool = _D["flatten"]
    stream_k: bool = _D["stream_k"]
    swap_ab: bool = _D["swap_ab"]

    @field_validator(*_INT_KNOBS, mode="before")
    @classmethod
    def _no_bool(cls, v: Any) -> Any:
        # true is an int to pydantic's lax mode ("got 1"); as a tile size it is a mistake
        if isinstance(v, bool):
            raise ValueError(f"must be an integer, got {str(v).lower()}")
        return v

    @field_validator(*_INT_KNOBS)
    @classmethod
    def _check_knob(cls, v: int, info: ValidationInfo) -> int:
        why = knobs.KNOB[info.field_name].why_not(v)
        if why:
            raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _check_rules(self) -> "KernelConfig":
        why = knobs.why_broken(self.__dict__, knobs.CONFIG_RULES)
        if why:
            raise ValueError(why)
        return self

    def on_variant(self, variant: str) -> "KernelConfig":
        """This config with ``variant``, the TMA kernel's options dropped where that is
        "grouped", which has none of them."""
        update: dict[str, Any] = {"variant": variant}
        if variant == "grouped":
            update.update({name: _D[name] for name in knobs.TMA_OPTIONS})
        return self.model_copy(update=update)

    def tma_options(self) -> bool:
        """Whether any option of the TMA kernel differs from its default."""
        return knobs.tma_options(self.__dict__)

    def short(self) -> str:
        """A compact human label, e.g. 128x128x64 g8 w8 s3, then each other knob off its
        default by its tag (knobs.py): the variant unless auto, k4 for split_k=4, ws for
        warp_specialize, st2 for epilogue_subtile=2, fl for flatten, sk for stream_k."""
        label = f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} w{self.num_warps} s{self.num_stages}"
        for knob in knobs.KNOBS:
            value = getattr(self, knob.name)
            if knob.tag and value != knob.default:
                label += " " + knob.tag.format(value)
        return label

    def __init__(self, **fields: Any) -> None:
        """The fields by keyword; ConfigError, one line naming the field and its rule, where
        one breaks a rule (as ``from_dict``), rather than pydantic's report."""
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise ConfigError(one_line(exc), _problems(exc)) from None

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelConfig":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(one_line(exc), _problems(exc)) from None

    @classmethod
    def from_json(cls, text: str) -> "KernelConfig":
        """Parse a JSON object; a JSON string that names a file is read from that file."""
        source = text
        if not text.lstrip().startswith("{"):
            try:
                if Path(text).is_dir():
                    raise ConfigError(f"config file {text} is a directory: give a JSON file or a JSON object")
                if Path(text).is_file():
                    source = Path(text).read_text(encoding="utf-8-sig")
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


def _problems(exc: ValidationError) -> tuple[tuple[str, str], ...]:
    """(field path, rule) of each error of ``exc``; a nested config's ConfigError (raised by
    KernelConfig's __init__, which pydantic calls for a field holding a config) gives its
    own pairs under the field's path."""
    out: list[tuple[str, str]] = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        inner = (err.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigError) and inner.problems:
            out += [(f"{where}.{field}" if where and field else where or field, rule)
                    for field, rule in inner.problems]
        else:
            out.append((where, err["msg"].removeprefix("Value error, ")))
    return tuple(out)


def one_line(exc: ValidationError, what: str = "invalid config") -> str:
    """A pydantic ValidationError as one line: ``what: field.path: message; ...``."""
    return f"{what}: " + "; ".join(f"{where or 'config'}: {rule}" for where, rule in _problems(exc))


# ---- trials -------------------------------------------------------------------------------


@dataclass
class Trial:
    """One measured (problem, implementation): the record every evaluation produces.

    ``kernel`` is "triton" or one of TORCH_KERNELS; ``config`` is None for torch. Times in
    milliseconds (median, 20th and 80th percentile), ``tflops`` in 10^12 FLOP/s; ``timing``
    is "gpu" or "interpreter". ``gpu_ms`` is the GPU time per call without host launch
    cost (CUDA-graph replay), where measured; tuning ranks by it. ``wall_ms`` is the time
    per call of calls made back to back, host included (timing.wall_race), where measured
    (bench): above gpu_ms, the call is host-bound. ``note`` is free text
    (an LLM's rationale, "re-timed"). On failure ``status`` says which kind and ``error`` why.
    The history's rows read back as Recorded, a Trial with the run that wrote it.
    """

    problem: Problem
    config: KernelConfig | None
    status: str
    kernel: str = "triton"
    ms: float | None = None
    p20: float | None = None
    p80: float | None = None
    tflops: float | None = None
    rel_error: float | None = None
    max_abs_diff: float | None = None
    timing: str | None = None
    error: str | None = None
    gpu_ms: float | None = None
    note: str | None = None
    wall_ms: float | None = None

    @property
    def rank_ms(self) -> float | None:
        """The time tuning ranks by: GPU time where measured, else the timer's median."""
        return self.gpu_ms if self.gpu_ms is not None else self.ms

    @property
    def ok(self) -> bool:
        return self.status == "success"

    @property
    def timed(self) -> bool:
        """A success with a time to rank by (a check's success has none)."""
        return self.status == "success" and self.rank_ms is not None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["problem"] = self.problem.to_dict()
        d["config"] = None if self.config is None else self.config.model_dump()
        return d

    def to_row(self) -> dict[str, Any]:
        """The history columns this trial fills (HISTORY_COLUMNS), by their names."""
        row = {**problem_columns(self.problem), "config": None if self.config is None else self.config.to_json(),
               "status": self.status}
        row.update({column: getattr(self, attr) for column, attr in _MEASURED.items()})
        return row


# ---- the history's rows ---------------------------------------------------------------------

HISTORY_SCHEMA = 2
"""The schema version of the history's rows (HISTORY_COLUMNS)."""
HISTORY_COLUMNS: list[str] = [
    "timestamp", "run_id", "command", "strategy", "generation", "name", "kernel",
    "M", "N", "K", "dtype", "activation", "bias", "layout", "config",
    "status", "ms", "ms_p20", "ms_p80", "tflops", "rel_error", "max_abs_diff",
    "timing", "device", "torch_version", "triton_version", "error", "schema_version",
    "gpu_ms", "note",
]
"""The history's columns, in the order of its CSV header. Units: ``ms``, ``ms_p20``,
``ms_p80`` and ``gpu_ms`` in milliseconds; ``tflops`` in 10^12 FLOP/s."""
STATUSES = ("success", "failed_correctness", "compile_error", "out_of_resources", "runtime_error", "timeout")
TIMINGS = ("gpu", "interpreter", "replay")


def time_error(value: object) -> str | None:
    """Why a recorded time (JSON's number of milliseconds) is none, or None where it is one:
    a number > 0 and finite (a NaN, zero or negative time makes every ratio over it nonsense)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "must be a number"
    if not 0 < value < math.inf:
        return "must be > 0 and finite"
    return None
PROBLEM_COLUMNS = ["M", "N", "K", "dtype", "activation", "bias", "layout"]
"""The columns that identify a problem."""
INT_COLUMNS = ("generation", "M", "N", "K", "schema_version")
BIAS_CELLS = {"True": True, "true": True, "False": False, "false": False}
"""The bias cells a history holds (written as Python's True and False), and their values."""
FLOAT_COLUMNS = ("ms", "ms_p20", "ms_p80", "tflops", "rel_error", "max_abs_diff", "gpu_ms")
_MEASURED = {"kernel": "kernel", "ms": "ms", "ms_p20": "p20", "ms_p80": "p80", "tflops": "tflops",
             "rel_error": "rel_error", "max_abs_diff": "max_abs_diff", "timing": "timing", "error": "error",
             "gpu_ms": "gpu_ms", "note": "note"}
"""The columns a Trial's own fields fill, and those fields' names."""
_CONTEXT = ("timestamp", "run_id", "command", "strategy", "generation", "name", "device", "torch_version",
            "triton_version", "schema_version")
"""The columns of the run that wrote a row: the fields Recorded adds to a Trial."""


def problem_columns(problem: Problem) -> dict[str, Any]:
    """The history columns of ``problem``."""
    return {"M": problem.m, "N": problem.n, "K": problem.k, "dtype": problem.dtype,
            "activation": problem.activation, "bias": problem.bias, "layout": problem.layout}


@dataclass
class Recorded(Trial):
    """A Trial as the history holds it: the measurement and the run that wrote it.

    ``config`` is the row's KernelConfig, None where the row has none or its text is no
    valid config; ``config_text`` is that text as written (None for an empty cell).
    ``kernel`` is "triton" where the cell is empty (rows older than the column). ``line``
    is the file line it was read from. Times and the rest as in Trial and HISTORY_COLUMNS.
    """

    timestamp: str | None = None
    run_id: str | None = None
    command: str | None = None
    strategy: str | None = None
    generation: int | None = None
    name: str | None = None
    device: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    schema_version: int | None = None
    config_text: str | None = None
    line: int | None = None

    @property
    def same_config(self) -> "KernelConfig | str | None":
        """What a re-time is matched by: the config, or its text where that is no config."""
        return self.config if self.config is not None else self.config_text

    def to_row(self) -> dict[str, Any]:
        row = dict.fromkeys(HISTORY_COLUMNS)
        row.update(super().to_row())
        row["config"] = self.config_text if self.config_text is not None else row["config"]
        row.update({column: getattr(self, column) for column in _CONTEXT})
        return row

    @classmethod
    def from_row(cls, cells: dict[str, str], *, line: int | None = None,
                 configs: dict[str, KernelConfig | None] | None = None) -> "Recorded | None":
        """The record of one history row (cells as text, by column; missing or empty cells
        are None), or None where its cells name no valid problem. ``configs`` memoizes the
        parse of each config text across rows."""
        value = {c: _cell_value(c, cells.get(c)) for c in HISTORY_COLUMNS}
        if value["bias"] is None and cells.get("bias") not in (None, ""):  # "yes", "1": no bias we wrote
            return None
        try:
            problem = Problem(value["M"], value["N"], value["K"], value["dtype"], value["activation"] or "none",
                              bool(value["bias"]), value["layout"] or "nn")
        except (ValueError, TypeError):
            return None
        text = value["config"]
        config = None
        if text is not None and configs is None:
            config = _parse_config(text)
        elif text is not None:
            if text not in configs:
                configs[text] = _parse_config(text)
            config = configs[text]
        measured = {attr: value[column] for column, attr in _MEASURED.items()}
        measured["kernel"] = measured["kernel"] or "triton"
        return cls(problem, config, value["status"] or "", **measured,
                   **{column: value[column] for column in _CONTEXT}, config_text=text, line=line)


def _cell_value(column: str, text: str | None) -> Any:
    """A history cell as its value: numbers as numbers (not-a-number as None), bias as a
    bool (None unless true or false), empty text as None."""
    if text is None or text == "":
        return None
    if column in FLOAT_COLUMNS or column in INT_COLUMNS:
        try:
            number = float(text)
        except ValueError:
            return None
        if number != number:
            return None
        if column in INT_COLUMNS:  # a whole number (16.0 as a spreadsheet writes it), else none
            return int(number) if math.isfinite(number) and number == int(number) else None
        return number
    if column == "bias":
        return BIAS_CELLS.get(text)
    return text


def _parse_config(text: str) -> KernelConfig | None:
    try:
        return KernelConfig.from_dict(json.loads(text))
    except (ValueError, TypeError):  # not JSON, or no valid config (ConfigError)
        return None
