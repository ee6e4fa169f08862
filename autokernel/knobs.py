"""The knobs of the GEMM kernels and the rules between them, stated once.

``KNOBS`` holds one ``Knob`` per field of ``records.KernelConfig``, in its order: the
values it may take, its default, the kernels that read it and what it means. ``RULES``
holds the constraints across knobs, each a predicate on a config's values with the
message a config that breaks it gets and the sentence that states it. Every reader
takes them from here:

- ``records.KernelConfig`` validates each field by its knob and refuses the configs that
  break a rule of ``CONFIG`` level (they cannot run, or compute wrong results);
- the tuner's space (``tuning/space.py``) takes its axes from the knobs (narrowing the
  ranges it tries, per device) and prunes by every rule, those of ``SPACE`` level too
  (configs that build the same kernel as another, or fail to compile, on the Triton
  measured);
- the LLM strategy's prompt (``tuning/strategies/llm_prompt.py``) describes each knob and
  states each rule from the same entries.

Plain data: this module imports nothing of autokernel, neither torch nor Triton.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

Values = Mapping[str, Any]
"""A config's values by knob name (a KernelConfig's fields, or the dict a strategy builds)."""

KERNELS: dict[str, str] = {
    "grouped": "the pointer-load kernel, one program per tile of C in grouped order (runs anywhere)",
    "tma": "the persistent Hopper kernel on TMA tensor descriptors (variant tma, or auto where it can run)",
    "splitk": "split-K: split_k programs share one tile's K loop and a second kernel sums their fp32 partials",
    "streamk": ("stream-K: a persistent grid of one program per SM runs the full waves of tiles whole and "
                "splits the last, partial wave's tiles along K"),
}
"""The kernels a config can select, by name, each in one line."""
ALL_KERNELS = tuple(KERNELS)

WS_MAX_STAGES = 4
"""The most pipeline stages a warp-specialized config may take: on the H100 (Triton 3.6)
the TMA kernel warp-specialized at 5 stages left part of C unwritten (128x128x64 and
256x128x32, 4 warps, in every one of 30 checks: docs/runs/tuning/readings/); at 3 and 4
stages its results were correct."""
WS_NUM_WARPS = 4
"""Hopper warp specialization happens at num_warps=4 only (docs/kernel-notes.md)..."""
WS_CONSUMER_GROUPS = 2
"""...and then splits the tile over two consumer warpgroups beside a producer."""


@dataclass(frozen=True)
class Knob:
    """One field of KernelConfig: what it may take, its default, who reads it.

    The allowed values are ``choices`` where given, else the integers in ``bounds``
    (inclusive; only the powers of two where ``pow2``). ``kernels``: the kernels (of
    KERNELS) that read it; a knob that one kernel alone reads is that kernel's option, and
    its default means "off". ``tag``: how ``KernelConfig.short`` writes a value other than
    the default ("{}" is the value); empty for the knobs the label always shows.
    """

    name: str
    default: Any
    kernels: tuple[str, ...]
    meaning: str
    choices: tuple = ()
    bounds: tuple[int, int] | None = None
    pow2: bool = False
    tag: str = ""

    @property
    def values(self) -> tuple:
        """Every value KernelConfig accepts, in order."""
        if self.choices:
            return self.choices
        lo, hi = self.bounds
        return tuple(v for v in range(lo, hi + 1) if not self.pow2 or _is_pow2(v))

    @property
    def is_int(self) -> bool:
        """An integer knob (booleans and names are left to pydantic's types)."""
        return self.bounds is not None or all(type(v) is int for v in self.choices)

    @property
    def categorical(self) -> bool:
        """Its values are names with no order (a strategy steps through the others)."""
        return any(isinstance(v, str) for v in self.values)

    @property
    def option(self) -> bool:
        """An option of one kernel alone: a config (or an LLM's reply) may leave it out
        for its default, which turns it off."""
        return len(self.kernels) == 1

    def why_not(self, value: Any) -> str | None:
        """Why ``value`` is not allowed (KernelConfig's message), or None."""
        if self.choices:
            return None if value in self.choices else f"must be one of {self.choices}, got {value}"
        lo, hi = self.bounds
        if self.pow2:
            return None if _is_pow2(value) and lo <= value <= hi else f"must be a power of two in [{lo}, {hi}], got {value}"
        return None if lo <= value <= hi else f"must be in [{lo}, {hi}], got {value}"

    def allowed(self) -> str:
        """The allowed values in words, e.g. "a power of two in [16, 256]"."""
        if self.choices:
            return ", ".join(_word(v) for v in self.choices)
        lo, hi = self.bounds
        return f"{'a power of two' if self.pow2 else 'an integer'} in [{lo}, {hi}]"

    def describe(self) -> str:
        """The knob in one line: its meaning, default and the kernels that read it."""
        if set(self.kernels) == set(ALL_KERNELS):
            read = "every kernel"
        else:
            read = f"the {self.kernels[0]} kernel alone" if self.option else f"the {_set(self.kernels)} kernels"
        return f"{self.meaning} (default {_word(self.default)}; read by {read})"


def _is_pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def _word(v: Any) -> str:
    """A value as JSON writes it: true, 4, "tma"."""
    return "true" if v is True else "false" if v is False else f'"{v}"' if isinstance(v, str) else str(v)


KNOBS: tuple[Knob, ...] = (
    # tl.dot needs every tile dimension >= 16
    Knob("block_m", 128, ALL_KERNELS, "rows of the tile of C one program computes", bounds=(16, 256), pow2=True),
    Knob("block_n", 128, ALL_KERNELS, "columns of the tile of C one program computes", bounds=(16, 256), pow2=True),
    Knob("block_k", 64, ALL_KERNELS, "the step of the K loop", bounds=(16, 256), pow2=True),
    Knob("group_m", 8, ("grouped", "tma", "splitk"),
         "how many tile-rows are walked together in the grouped (swizzled) order, for L2 reuse", bounds=(1, 64)),
    Knob("num_warps", 8, ALL_KERNELS, "warps per program, a launch option of Triton", choices=(1, 2, 4, 8, 16)),
    Knob("num_stages", 3, ALL_KERNELS, "buffers of the software pipeline of the K loop, a launch option of Triton",
         bounds=(1, 8)),
    Knob("variant", "auto", ("grouped", "tma"),
         "the kernel: grouped (pointer loads, runs anywhere), tma (Hopper: tensor descriptors and a persistent "
         "grid, falling back to grouped where an operand can't have a descriptor or the GPU is older) or auto "
         "(tma where it can run)", choices=("auto", "grouped", "tma"), tag="{}"),
    Knob("split_k", 1, ("splitk",),
         "above 1, this many programs share one tile's K loop, each writing its fp32 partial tile to a workspace "
         "that a second kernel sums and applies the epilogue to: more programs for skinny or long-K shapes; "
         "pointer loads whatever the variant", choices=(1, 2, 4, 8, 16), tag="k{}"),
    Knob("warp_specialize", False, ("tma",),
         "Triton's automatic warp specialization of the persistent tile loop: a producer warpgroup issues the "
         f"TMA loads, {WS_CONSUMER_GROUPS} consumer warpgroups of num_warps warps each run the MMAs and the "
         "epilogue", choices=(False, True), tag="ws"),
    Knob("epilogue_subtile", 1, ("tma",),
         "store each output tile in this many column slices, so the TMA store's staging buffer is that many "
         "times smaller (room for more stages)", choices=(1, 2), tag="st{}"),
    Knob("flatten", False, ("tma",),
         "fuse the tile loop and the K loop into one software-pipelined loop, so the next tile's loads are in "
         "flight during this tile's epilogue", choices=(False, True), tag="fl"),
    Knob("stream_k", False, ("streamk",),
         "the data-parallel + stream-K hybrid for tail waves: a persistent grid of one program per SM runs the "
         "full waves of tiles whole and splits the last, partial wave's tiles along K over the SMs; with variant "
         "tma on the TMA kernel (its partials summed by a second kernel), else on pointer loads",
         choices=(False, True), tag="sk"),
    Knob("swap_ab", False, ("tma",),
         "compute C^T = B^T A^T: the tile's rows run along N and its columns along M, so that a few rows of A "
         "sit on the MMA's narrow side (16-256 wide) rather than its 64-row one; block_m then tiles N and "
         "block_n tiles M", choices=(False, True), tag="sw"),
)
"""The knobs, in KernelConfig's field order (the order of the tuner's PARAMS)."""
KNOB: dict[str, Knob] = {k.name: k for k in KNOBS}
NAMES: tuple[str, ...] = tuple(KNOB)
DEFAULTS: dict[str, Any] = {k.name: k.default for k in KNOBS}


def options_of(kernel: str) -> tuple[str, ...]:
    """The knobs that ``kernel`` alone reads, in order."""
    return tuple(k.name for k in KNOBS if k.kernels == (kernel,))


TMA_OPTIONS = options_of("tma")
"""The TMA kernel's own options (warp_specialize, epilogue_subtile, flatten, swap_ab)."""


SWAP_AB_MAX_M = 64
"""The most rows M for which the tuner's space and the selector consider ``swap_ab``: it pays
where M is too thin for the MMA's 64-row side (on an H200, 17-32 rows against a wide weight:
1.02-1.32x the pointer kernels' thin tiles); from 65 rows on the plain tiles ran faster
(docs/kernel-notes.md, "Few rows on the MMA's narrow side")."""


def oriented(swap_ab: bool, m: int, n: int) -> tuple[int, int]:
    """(the dimension block_m tiles, the one block_n tiles) of an M x N output: (M, N), or
    (N, M) where ``swap_ab`` (the kernel computes C^T)."""
    return (n, m) if swap_ab else (m, n)


def tile_grid(swap_ab: bool, block_m: int, block_n: int, m: int, n: int) -> tuple[int, int]:
    """(rows, columns) of the block_m x block_n tiles that cover an M x N output, as the
    kernel lays them (``oriented``: over N x M where ``swap_ab``)."""
    rows, cols = oriented(swap_ab, m, n)
    return -(-rows // block_m), -(-cols // block_n)


def kernel_of(v: Values) -> str:
    """The kernel ``v`` selects: stream-K (pointer loads) but with variant tma, split-K, the
    grouped kernel for variant grouped, else the TMA kernel, with a stream-K tail where
    ``stream_k`` (where that cannot run, the grouped or stream-K kernel runs instead:
    kernels/fit.py's kernel_for knows the call)."""
    if v["stream_k"] and v["variant"] != "tma":
        return "streamk"
    if v["split_k"] > 1:
        return "splitk"
    return "grouped" if v["variant"] == "grouped" else "tma"


_TMA_DEFAULTS = tuple((name, DEFAULTS[name]) for name in TMA_OPTIONS)


def tma_options(v: Values) -> bool:
    """Whether any option of the TMA kernel differs from its default."""
    for name, default in _TMA_DEFAULTS:  # a loop: the space asks it of every config it enumerates
        if v[name] != default:
            return True
    return False


def _set(names: tuple[str, ...]) -> str:
    """Knobs as a sentence's list: "a, b and c"."""
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def _off_default(names: tuple[str, ...]) -> str:
    """Each knob at its first value off the default, as the prompt writes it: "a true, b 2 or c true"."""
    said = [f"{n} {_word(next(x for x in KNOB[n].values if x != KNOB[n].default))}" for n in names]
    return ", ".join(said[:-1]) + f" or {said[-1]}" if len(said) > 1 else said[0]


def _pointer_kernel(v: Values) -> str:
    """Which setting puts ``v`` on a pointer-load kernel, as the TMA options' message says it."""
    return ("variant grouped" if v["variant"] == "grouped"
            else "split_k > 1 (pointer-load kernels)" if v["split_k"] > 1 else "stream_k (a pointer-load kernel)")


CONFIG: Literal["config"] = "config"
"""A rule KernelConfig itself holds: a config that breaks it cannot run or computes wrong results."""
SPACE: Literal["space"] = "space"
"""A rule the tuner's space prunes by: KernelConfig takes such a config, but it builds the
same kernel as another config, or it failed to compile, on the Triton measured."""


@dataclass(frozen=True)
class Rule:
    """One constraint across knobs.

    ``broken``: whether a config's values break it; ``message``: why, for that config
    (the error KernelConfig raises, or the reason the space gives); ``statement``: the
    rule as a sentence for the LLM prompt, "" where an earlier rule's statement says it
    (the space-level form of a config-level rule). ``when``: the knobs that must be off
    their default for the rule to bite (none: always): a prompt leaves out a rule that
    its space's values cannot break. ``level``: CONFIG or SPACE.
    """

    name: str
    level: Literal["config", "space"]
    knobs: tuple[str, ...]
    broken: Callable[[Values], bool]
    message: Callable[[Values], str]
    statement: str
    when: tuple[str, ...] = ()


RULES: tuple[Rule, ...] = (
    Rule("tma_options_need_tma", SPACE, (*TMA_OPTIONS, "variant", "split_k"),
         lambda v: tma_options(v) and (v["variant"] != "tma" or v["split_k"] > 1),
         lambda v: (f"{_set(TMA_OPTIONS)} are options of the TMA kernel: pair them with "
                    "variant tma and split_k 1"),
         f"{_off_default(TMA_OPTIONS)} only with variant \"tma\" and split_k 1 "
         "(options of the TMA kernel)", when=TMA_OPTIONS),
    Rule("tma_options_not_on_pointers", CONFIG, (*TMA_OPTIONS, "variant", "split_k", "stream_k"),
         lambda v: tma_options(v) and kernel_of(v) != "tma",
         lambda v: (f"{_set(TMA_OPTIONS)} are options of the TMA kernel: "
                    f"{_pointer_kernel(v)} has none of them"),
         "", when=TMA_OPTIONS),
    Rule("ws_stages", CONFIG, ("warp_specialize", "num_stages"),
         lambda v: v["warp_specialize"] and v["num_stages"] > WS_MAX_STAGES,
         lambda v: (f"warp_specialize with num_stages > {WS_MAX_STAGES} computes wrong results on Hopper "
                    f"(Triton 3.6 left part of the output unwritten): use num_stages <= {WS_MAX_STAGES}"),
         f"warp_specialize only with num_stages <= {WS_MAX_STAGES} (more left part of C unwritten on the H100)",
         when=("warp_specialize",)),
    Rule("one_way_to_split_k", CONFIG, ("stream_k", "split_k"),
         lambda v: v["stream_k"] and v["split_k"] > 1,
         lambda v: "stream_k and split_k > 1 are two ways to split K: pick one",
         "stream_k not with split_k > 1 (two ways to split K: pick one)", when=("stream_k",)),
    Rule("tile_vs_warps", CONFIG, ("block_m", "block_n", "num_warps"),
         lambda v: v["block_m"] * v["block_n"] < v["num_warps"] * 256,
         lambda v: f"tile {v['block_m']}x{v['block_n']} is too small for {v['num_warps']} warps",
         "block_m * block_n >= num_warps * 256 (each warp needs a 16x16 piece of the tile)"),
    Rule("ws_warps", SPACE, ("warp_specialize", "num_warps"),
         lambda v: v["warp_specialize"] and v["num_warps"] != WS_NUM_WARPS,
         lambda v: (f"warp_specialize takes num_warps={WS_NUM_WARPS} (per consumer warpgroup); Triton builds "
                    f"num_warps={v['num_warps']} without it, the same kernel as warp_specialize=False"),
         f"warp_specialize only with num_warps {WS_NUM_WARPS} (the tile is then split over {WS_CONSUMER_GROUPS} "
         "consumer warpgroups of num_warps warps each, beside a producer warpgroup)", when=("warp_specialize",)),
    Rule("ws_subtile", SPACE, ("warp_specialize", "epilogue_subtile"),
         lambda v: v["warp_specialize"] and v["epilogue_subtile"] > 1,
         lambda v: "warp_specialize with epilogue_subtile fails to compile (Triton 3.6's Hopper warp specialization)",
         "warp_specialize not with epilogue_subtile 2 (fails to compile)", when=("warp_specialize",)),
    Rule("ws_flatten", SPACE, ("warp_specialize", "flatten"),
         lambda v: v["warp_specialize"] and v["flatten"],
         lambda v: "warp_specialize with flatten: Triton does not warp-specialize a flattened loop on Hopper",
         "warp_specialize not with flatten (Triton does not warp-specialize a flattened loop)",
         when=("warp_specialize",)),
    # Compiled for sm_90 by Triton 3.9 (not checked with 3.6): below 64 rows it builds the
    # plain 4-warp kernel; 64x256 tiles fail in its warp-specialization pass.
    Rule("ws_rows", SPACE, ("warp_specialize", "block_m"),
         lambda v: v["warp_specialize"] and v["block_m"] < 64,
         lambda v: "warp_specialize needs block_m >= 64 (below, Triton builds the plain kernel)",
         "warp_specialize only with block_m >= 64 (below, Triton builds the plain kernel)",
         when=("warp_specialize",)),
    Rule("ws_64x256", SPACE, ("warp_specialize", "block_m", "block_n"),
         lambda v: v["warp_specialize"] and v["block_m"] == 64 and v["block_n"] == 256,
         lambda v: "warp_specialize with a 64x256 tile fails to compile (Triton 3.9's Hopper warp specialization)",
         "warp_specialize not with a 64x256 tile (fails to compile)", when=("warp_specialize",)),
    Rule("split_k_on_grouped", SPACE, ("split_k", "variant"),
         lambda v: v["split_k"] > 1 and v["variant"] != "grouped",
         lambda v: (f"split_k={v['split_k']} runs the grouped kernel: pair it with variant grouped, "
                    f"not {v['variant']}"),
         "split_k > 1 only with variant \"grouped\" (split-K runs on pointer loads)", when=("split_k",)),
    Rule("stream_k_on_grouped_or_tma", SPACE, ("stream_k", "variant"),
         lambda v: v["stream_k"] and v["variant"] == "auto",
         lambda v: "stream_k runs the pointer-load or the TMA kernel: pair it with variant grouped or tma, not auto",
         "stream_k only with variant \"grouped\" or \"tma\" (auto runs the pointer-load kernel's)",
         when=("stream_k",)),
    Rule("swap_not_warp_specialized", CONFIG, ("swap_ab", "warp_specialize"),
         lambda v: v["swap_ab"] and v["warp_specialize"],
         lambda v: "swap_ab has no warp-specialized kernel: pick one of swap_ab and warp_specialize",
         "swap_ab not with warp_specialize (no such kernel)", when=("swap_ab",)),
    Rule("stream_k_not_warp_specialized", CONFIG, ("stream_k", "warp_specialize"),
         lambda v: v["stream_k"] and v["warp_specialize"],
         lambda v: "stream_k has no warp-specialized kernel: pick one of stream_k and warp_specialize",
         "stream_k not with warp_specialize (no such kernel)", when=("warp_specialize",)),
)
"""The rules, in the order they are checked (the first broken one is the reason given)."""
CONFIG_RULES = tuple(r for r in RULES if r.level == CONFIG)


def breaks(v: Values, rules: tuple[Rule, ...] = RULES) -> bool:
    """Whether ``v`` breaks any of ``rules`` (why_broken without the message)."""
    for rule in rules:
        if rule.broken(v):
            return True
    return False


def why_broken(v: Values, rules: tuple[Rule, ...] = RULES) -> str | None:
    """The message of the first of ``rules`` that ``v`` breaks, or None."""
    for rule in rules:
        if rule.broken(v):
            return rule.message(v)
    return None


def narrow(**choices: tuple) -> dict[str, tuple]:
    """Each knob's values for a search space, in knob order: those given (a subset of what
    the knob allows, in the order given), the knob's own values for the rest."""
    unknown = set(choices) - set(NAMES)
    if unknown:
        raise ValueError(f"no knob named {', '.join(sorted(unknown))}")
    out = {}
    for knob in KNOBS:
        values = tuple(choices.get(knob.name, knob.values))
        bad = [v for v in values if type(v) is not type(knob.default) or knob.why_not(v) is not None]
        if bad or not values:
            raise ValueError(f"{knob.name}: {bad or 'no values'} outside what the knob allows ({knob.allowed()})")
        out[knob.name] = values
    return out
