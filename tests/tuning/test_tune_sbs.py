"""scripts/tune_sbs.py's neighbours: the variants along the fields the H100 sweep predates
that the GPU judge races beside the sweep's fastest configs and the tuner's winner. Built
on the CPU in a space shaped as the H100's (the interpreter's space holds none of these
options)."""

from pathlib import Path

import pytest
from tests.helpers import load_script

from autokernel.config import KernelConfig
from autokernel.records import Problem
from autokernel.tuning.space import GPU_CHOICES, PARAMS, SearchSpace, config_key

ROOT = Path(__file__).resolve().parents[2]
H100_SMEM = 232448  # runtime.shared_memory_limit() on the H100
H100_SMS = 132


@pytest.fixture(scope="module")
def sbs():
    return load_script("tune_sbs")


def h100_space(m: int, n: int, k: int, dtype: str = "float16") -> SearchSpace:
    return SearchSpace(Problem(m=m, n=n, k=k, dtype=dtype), dict(GPU_CHOICES), H100_SMEM, True, gpu=True,
                       programs=H100_SMS)


def tma(**fields) -> KernelConfig:
    return KernelConfig(**{"block_m": 128, "block_n": 256, "block_k": 64, "group_m": 8, "num_warps": 8,
                           "num_stages": 3, "variant": "tma", **fields})


def mma_warps(config: KernelConfig) -> int:
    return config.num_warps * (2 if config.warp_specialize else 1)


def is_variant(config: KernelConfig, base: KernelConfig, newer: tuple[str, ...]) -> bool:
    """Whether ``config`` differs from ``base`` in ``newer`` only, or in num_warps too where it
    toggles warp_specialize and keeps the MMA warps: the rule, stated apart from the script's."""
    changed = {name for name in PARAMS if getattr(config, name) != getattr(base, name)}
    if changed <= set(newer):
        return bool(changed)
    return (changed <= {*newer, "num_warps"} and config.warp_specialize != base.warp_specialize
            and mma_warps(config) == mma_warps(base))


# Target shapes, a skinny one (split-K) and bases that stream-K takes (a partial last wave).
SHAPES = [(4096, 4096, 4096, "float16"), (4096, 11008, 4096, "bfloat16"), (1024, 4096, 4096, "float16"),
          (8192, 8192, 1024, "bfloat16"), (128, 4096, 8192, "float16")]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_neighbours_are_exactly_the_spaces_variants(sbs, shape):
    """For bases across the space (and a non-canonical one): every variant is in the space,
    differs from the canonical base only as the rule allows, comes once, and is named by
    its suffix; and every config of the space the rule allows is there."""
    space = h100_space(*shape)
    configs = space.configs()
    # group_m 64: the canonical base has a smaller group wherever the shape has <= 16 tile-rows.
    bases = configs[::len(configs) // 40] + [tma(group_m=64)]
    changed_fields = set()
    for base in bases:
        canonical = space.canonical(base)
        got = sbs.neighbours(base, space)
        keys = [config_key(config) for _, config in got]
        assert len(keys) == len(set(keys)), base.short()
        assert config_key(canonical) not in keys
        want = {config_key(c) for c in configs if is_variant(c, canonical, sbs.NEWER_FIELDS)}
        assert set(keys) == want, base.short()
        for suffix, config in got:
            assert space.contains(config), (base.short(), config.short(), space.why_invalid(config))
            changed = [name for name in PARAMS if getattr(config, name) != getattr(canonical, name)]
            assert suffix == "".join(sbs._change(name, getattr(config, name)) for name in changed)
            changed_fields.update(changed)
    assert len(bases) > 40
    # Not vacuous: a target shape varies every field the GPU can (stream-K and split-K only
    # where the shape allows them), the skinny one split_k.
    if shape[0] == 128:
        assert "split_k" in changed_fields
    else:
        assert {"warp_specialize", "epilogue_subtile", "flatten", "num_warps"} <= changed_fields


def test_neighbours_of_the_sweeps_best_at_4096(sbs):
    """The H100 sweep's best at 4096^3 (128x256x64 w8 s3 tma): the subtiled epilogue, flatten,
    both, and warp specialization at 4 warps per consumer warpgroup; not warp specialization
    at 8 warps (Triton builds the plain kernel) nor with the subtiled epilogue or flatten."""
    got = {suffix: config.short() for suffix, config in sbs.neighbours(tma(), h100_space(4096, 4096, 4096))}
    assert got == {
        "+epilogue_subtile=2": "128x256x64 g8 w8 s3 tma st2",
        "+flatten": "128x256x64 g8 w8 s3 tma fl",
        "+epilogue_subtile=2+flatten": "128x256x64 g8 w8 s3 tma st2 fl",
        "+num_warps=4+warp_specialize": "128x256x64 g8 w4 s3 tma ws",
    }


def test_neighbours_leave_out_invalid_variants(sbs):
    """A flattened 128x128 4-warp base: its warp-specialized variant keeping flatten (Hopper
    does not warp-specialize a flattened loop) or with the subtile is not produced, nor one
    at 2 warps (the same MMA warps: outside the space); without flatten it is. A grouped
    base gets no TMA option, and stream-K only where the space takes it."""
    space = h100_space(4096, 4096, 4096)
    base = tma(block_n=128, num_warps=4, flatten=True)
    got = {suffix: config for suffix, config in sbs.neighbours(base, space)}
    assert space.contains(base) and not space.contains(base.model_copy(update={"warp_specialize": True}))
    assert not any(c.warp_specialize and (c.flatten or c.epilogue_subtile > 1) for c in got.values())
    assert got["+warp_specialize-flatten"] == tma(block_n=128, num_warps=4, warp_specialize=True)
    assert set(got) == {"+warp_specialize-flatten", "-flatten", "+epilogue_subtile=2",
                        "+epilogue_subtile=2-flatten"}

    grouped = tma(block_n=128, variant="grouped")  # 32x32 tiles: 1024 % 132 leaves a partial last wave
    assert {s: c.short() for s, c in sbs.neighbours(grouped, space)} == {"+stream_k": "128x128x64 g8 w8 s3 grouped sk"}
    assert sbs.neighbours(tma(variant="grouped"), space) == []  # 512 tiles: the last wave is nearly full


def test_race_roles_label_and_deduplicate(sbs):
    """Each config races once with all its roles; a variant reached from two bases carries
    both labels; without neighbours the race is the winner, the sweep's top and the default."""
    space = h100_space(4096, 4096, 4096)
    problem = space.problem
    ranked = [tma(), tma(group_m=16), tma(variant="grouped", num_stages=4)]
    winner = tma(epilogue_subtile=2)
    roles = sbs.race_roles(problem, winner, ranked, space, top=3, neighbour_top=2)
    assert len(roles) == len({config_key(c) for c, _ in roles.values()})
    labels = {config.short(): role for config, role in roles.values()}
    assert labels["128x256x64 g8 w8 s3 tma st2"] == ["winner", "sweep#1+epilogue_subtile=2"]
    assert labels["128x256x64 g8 w8 s3 tma"] == ["sweep#1", "default", "winner+epilogue_subtile=1"]
    assert labels["128x256x64 g16 w8 s3 tma fl"] == ["sweep#2+flatten"]
    assert "128x256x64 g8 w8 s4 grouped" in labels  # sweep#3 races, its variants not (neighbour_top=2)
    assert not any(role.startswith("sweep#3+") for role in sum(labels.values(), []))
    plain = sbs.race_roles(problem, winner, ranked, space, top=3, neighbour_top=None)
    assert sorted(sum((role for _, role in plain.values()), [])) == [
        "default", "sweep#1", "sweep#2", "sweep#3", "winner"]


def test_newer_fields_are_those_the_sweep_lacks(sbs):
    """NEWER_FIELDS: the tuned fields no config of tests/data/sweep_h100.csv names."""
    import csv
    import json

    with open(ROOT / "tests" / "data" / "sweep_h100.csv", newline="") as f:
        named = set().union(*(json.loads(row["config"]) for row in csv.DictReader(f) if row["config"]))
    assert set(sbs.NEWER_FIELDS) == set(PARAMS) - named
