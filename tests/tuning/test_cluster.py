"""Tuning on a real local Ray cluster (CPU actors answering from a recorded sweep): the
same trials as one process with the same seed, and an actor killed mid-run loses and
duplicates nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from autokernel.history import History, is_retimed  # noqa: E402
from autokernel.records import Problem  # noqa: E402
from autokernel.tuning import tune  # noqa: E402
from autokernel.tuning.run import Hooks  # noqa: E402
from tests.helpers import synthetic_sweep  # noqa: E402

# Three dtypes: a problem's prior configs then never come from the other one's winner, which
# a single process (one problem after the other) would see and actors side by side not.
SHAPES = [(4096, 4096, 4096, "float16"), (2048, 4096, 4096, "bfloat16"), (1024, 4096, 4096, "float32")]
PROBLEMS = [Problem(*s) for s in SHAPES]
CPU_ACTORS = {"actors": 2, "num_gpus": 0}
# One xdist worker runs this module's tests (pyproject: --dist loadgroup): Ray starts once.
pytestmark = pytest.mark.xdist_group("ray")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One local Ray for the module; its workers import this checkout of autokernel."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path, "TRITON_INTERPRET": "1"}})
    sweep = tmp_path_factory.mktemp("sweep") / "sweep.csv"
    synthetic_sweep(sweep, shapes=SHAPES)
    yield sweep
    ray.shutdown()


def _rows(path) -> list[tuple]:
    """The history's trials, without what differs run to run (time of day, run id)."""
    df = History(path).read()
    cols = ["M", "N", "K", "dtype", "config", "status", "gpu_ms", "generation", "note", "device", "timing"]
    return sorted(tuple(str(v) for v in row) for row in df[cols].itertuples(index=False))


def test_a_cluster_run_records_what_one_process_records(local_ray, tmp_path):
    kw = {"strategy": "random", "seed": 4, "replay": local_ray, "generations": 2, "per_generation": 3}
    single = tune(PROBLEMS, history=tmp_path / "single.csv", **kw)
    spread = tune(PROBLEMS, history=tmp_path / "ray.csv", cluster="auto", cluster_options=CPU_ACTORS, **kw)
    assert _rows(tmp_path / "ray.csv") == _rows(tmp_path / "single.csv")
    assert len(_rows(tmp_path / "single.csv")) >= 3 * 6
    assert [o.problem for o in spread.outcomes] == PROBLEMS
    assert [o.result.best.config for o in spread.outcomes] == [o.result.best.config for o in single.outcomes]


def test_an_actor_killed_mid_run_loses_and_duplicates_nothing(local_ray, tmp_path):
    reported: list[tuple] = []
    killed: list[str] = []

    def trial(slot, problem, t):
        reported.append((problem.m, t.config.model_dump_json(), is_retimed(t.note)))
        if not killed and problem.m == 4096 and len([r for r in reported if r[0] == 4096]) == 4:
            killed.append(str(slot.device))
            ray.kill(slot.evaluator.actor)  # mid-batch: the batch has 3 configs per generation

    run = tune(PROBLEMS, strategy="random", seed=4, replay=local_ray, generations=3, per_generation=3,
               history=tmp_path / "h.csv", cluster="auto", cluster_options=CPU_ACTORS, hooks=Hooks(trial=trial))
    assert killed and len(run.lost) == 1 and killed[0] in run.lost[0]
    assert sorted(o.problem.m for o in run.outcomes) == [1024, 2048, 4096] and run.untuned == []
    df = History(tmp_path / "h.csv").read()
    written = sorted((int(r.M), r.config, is_retimed(r.note)) for r in df.itertuples())
    assert written == sorted(reported)  # every reported trial is on disk, and nothing else
    first = df[~df["note"].map(is_retimed)]
    assert not first.duplicated(["M", "config"]).any()  # no config measured twice for a problem
    # the killed problem went on elsewhere from the trials it had: 4 before the kill, more after
    assert (first["M"] == 4096).sum() > 4
    gens = first[first["M"] == 4096]["generation"].tolist()
    assert gens == sorted(gens)
