"""scripts/race_entries.py's candidates: what it races against each shipped config (CPU)."""

import pytest
from tests.helpers import load_script

from autokernel.config import KernelConfig
from autokernel.records import Problem
from autokernel.tuning.space import GPU_CHOICES, SearchSpace, config_key

@pytest.fixture(scope="module")
def race():
    return load_script("race_entries")


def space(problem: Problem) -> SearchSpace:
    return SearchSpace(problem, dict(GPU_CHOICES), 232448, True, gpu=True, programs=132)


def tma(**fields) -> KernelConfig:
    return KernelConfig(**{"block_m": 128, "block_n": 256, "block_k": 64, "group_m": 8, "num_warps": 8,
                           "num_stages": 3, "variant": "tma", **fields})


def test_the_shipped_config_is_raced_whatever_its_group_m(race):
    """A shipped group_m 1 on a problem of several tile-rows (2048³ took 128x256x64 g1):
    it races beside its variants, not only the group_m 8 and 16 ones."""
    problem = Problem(2048, 2048, 2048, "float16")
    shipped = tma(group_m=1)
    got = race.candidates(problem, shipped, space(problem))
    assert got[config_key(shipped)] == (shipped, "shipped")
    assert list(got)[0] == config_key(shipped)
    assert {c.group_m for c, _ in got.values()} == {1, 8, 16}
    assert {(c.flatten, c.epilogue_subtile) for c, _ in got.values()} == {(False, 1), (True, 1), (False, 2), (True, 2)}
    assert all(space(problem).contains(c) for c, _ in got.values())


def test_the_half_height_tile_is_raced_where_waves_fill_poorly(race):
    problem = Problem(4096, 11008, 4096, "bfloat16", "gelu_tanh", True, "nt")
    got = race.candidates(problem, tma(group_m=16, flatten=True), space(problem))
    halves = [(c, role) for c, role in got.values() if c.block_m == 64]
    assert halves and all(role.startswith("half-height") for _, role in halves)
    assert tma(block_m=64, num_warps=4, num_stages=4, group_m=16, flatten=True, epilogue_subtile=2) in \
        [c for c, _ in halves]
    square = Problem(4096, 4096, 4096, "bfloat16", "relu", True, "nt")  # 128x256 tiles fill 0.97
    assert all(c.block_m == 128 for c, _ in race.candidates(square, tma(), space(square)).values())


def test_a_pointer_kernel_config_varies_group_m_only(race):
    problem = Problem(64, 4096, 4096, "float16", layout="nt")
    shipped = KernelConfig(block_m=64, block_n=64, block_k=128, group_m=8, num_warps=4, num_stages=4,
                           variant="grouped")
    got = race.candidates(problem, space(problem).canonical(shipped), space(problem))
    assert len(got) == 1  # one tile-row: every group_m is the same launch, nothing to race


def test_neighbours_step_one_field_at_a_time_within_what_can_run(race):
    """--neighbours: from a decode tile that fills 64 of 132 programs, one step along each
    field: halved and doubled tiles (the 32-wide ones too, which the tuner's space leaves
    out: here they double the programs), a stage fewer and more (past the space's 5, not
    past shared memory), other warps, split-K, the TMA kernel."""
    problem = Problem(64, 4096, 4096, "float16", layout="nt")
    sp = space(problem)
    shipped = KernelConfig(block_m=64, block_n=64, block_k=128, group_m=1, num_warps=4, num_stages=5,
                           variant="grouped")
    got = dict(race.neighbours(shipped, sp))
    roles = set(got.values())
    assert {"shipped+block_m=32", "shipped+block_n=32", "shipped+block_k=64", "shipped+num_stages=4",
            "shipped+num_stages=6", "shipped+num_warps=8", "shipped+split_k=2", "shipped+variant=tma"} <= roles
    assert "shipped+block_n=128" not in roles  # 64x128x128 in 5 stages needs more shared memory than there is
    assert all(sum(getattr(c, f) != getattr(shipped, f) for f in race.NEIGHBOURS) == 1 for c in got)
    six = KernelConfig(**{**shipped.model_dump(), "num_stages": 6})
    assert "shipped+num_stages=7" in dict(race.neighbours(six, sp)).values()  # 224 KiB of 227
    six_tma = KernelConfig(**{**shipped.model_dump(), "num_stages": 6, "variant": "tma"})
    assert "shipped+num_stages=7" not in dict(race.neighbours(six_tma, sp)).values()  # + C's staging: 232 KiB
    filled = Problem(4096, 4096, 4096, "float16")  # 128x256 tiles: 512 programs, nothing thinner raced
    big = KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma")
    assert not any(c.block_m < 64 or c.block_n < 64 for c, _ in race.neighbours(big, space(filled)))
    cands = race.candidates(problem, shipped, sp, with_neighbours=True)
    assert list(cands)[0] == config_key(shipped) and len(cands) == 1 + len(got)


def test_a_tma_configs_pointer_kernel_neighbour_drops_the_tma_options(race):
    problem = Problem(2048, 2048, 2048, "float16")
    shipped = tma(group_m=8, flatten=True, epilogue_subtile=2)
    got = {role: c for c, role in race.neighbours(shipped, space(problem))}
    grouped = got["shipped+variant=grouped"]
    assert (grouped.variant, grouped.flatten, grouped.epilogue_subtile) == ("grouped", False, 1)
    assert (grouped.block_m, grouped.block_n, grouped.block_k) == (128, 256, 64)
