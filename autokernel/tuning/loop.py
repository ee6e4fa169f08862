"""The tuning loop: propose -> evaluate -> record -> feed back, generation after generation.

Every trial is appended to the history (flushed) the moment it is final, so an
interrupted run loses nothing it measured, and a second run on the same history picks
up where the first stopped: the strategy sees every earlier trial of the problem (same
device, same timing kind) and generations are numbered on from the last.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from autokernel.best import pick, shape_distance
from autokernel.config import KernelConfig, _cdiv, default_config
from autokernel.history import best_per_problem, is_retimed, trial_row
from autokernel.records import Problem, Recorded, Trial
from autokernel.tuning.evaluator import Evaluator
from autokernel.tuning.space import SearchSpace, config_key, why_no_tma
from autokernel.tuning.strategies.base import Strategy, fresh, observations, pending, problem_rows


@dataclass
class StopRules:
    """When to stop before the generations run out (None: rule off).

    patience: generations in a row whose best-so-far improved by less than ``min_gain``
    (a fraction: 0.01 is 1 %). max_trials: new trials in this run. time_budget_s: wall
    seconds since the start: no generation starts that the last one's duration says would
    end past it, and once it is spent the leaders are not timed again.
    """

    patience: int | None = None
    min_gain: float = 0.01
    max_trials: int | None = None
    time_budget_s: float | None = None


@dataclass
class Generation:
    """One generation's outcome; ``best_ms`` is the best so far, earlier runs included."""

    generation: int
    trials: int
    ok: int
    gen_best_ms: float | None
    best_ms: float | None
    best_config: KernelConfig | None
    elapsed_s: float
    stats: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "generation": self.generation, "trials": self.trials, "ok": self.ok, "gen_best_ms": self.gen_best_ms,
            "best_ms": self.best_ms, "best_config": None if self.best_config is None else self.best_config.model_dump(),
            "elapsed_s": self.elapsed_s, "stats": self.stats,
        }


@dataclass
class TuneResult:
    problem: Problem
    strategy: str
    run_id: str
    generations: list[Generation]
    trials: list[Trial]
    best: Trial | None
    """The best so far: at the end the history's row of it (a Recorded), its re-timed
    median where the tuner measured it again."""
    prior_trials: int
    stopped: str = "generations"
    events: list[str] = field(default_factory=list)
    """What went wrong or differently along the way (a strategy's fallback, a leader left
    unconfirmed): the CLI prints them as warnings."""
    confirmation: str | None = None
    """How the leaders' side-by-side re-timing ended (None: nothing was re-timed)."""

    @property
    def failed(self) -> int:
        return sum(not t.ok for t in self.trials)


def best_of(history: Sequence[Trial]) -> Trial | None:
    return min((t for t in history if t.timed), key=lambda t: t.rank_ms, default=None)


def tune(
    problem: Problem,
    *,
    strategy: Strategy,
    evaluator: Evaluator,
    store,
    space: SearchSpace,
    generations: int,
    per_generation: int,
    run_id: str,
    device: str,
    timing: str,
    command: str = "tune",
    seeds: Sequence[KernelConfig] = (),
    stop: StopRules | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    on_generation: Callable[[Generation], None] | None = None,
) -> TuneResult:
    """Tune ``problem`` for up to ``generations`` generations of ``per_generation`` configs.

    ``seeds`` (e.g. the default config, the best configs of other problems) are tried
    first when the problem has no trials yet. ``store`` is the History every trial is
    appended to (rows carry the run id, generation, strategy and the strategy's note).
    A KeyboardInterrupt propagates after the trials finished so far are on disk.
    """
    stop = stop or StopRules()
    recorded = store.trials()
    history: list[Trial] = list(observations(recorded, problem, device=device, timing=timing))
    rows = problem_rows(recorded, problem, device=device, timing=timing)
    first_gen = 1 + max((t.generation for t in rows if t.generation is not None), default=0)
    result = TuneResult(problem, strategy.name, run_id, [], [], best_of(history), len(history))
    started = time.perf_counter()
    stale = 0
    events_seen = len(strategy.events)

    last_gen_s = 0.0
    for gen in range(first_gen, first_gen + generations):
        # A generation that would end past the time budget is not started: the last one
        # took last_gen_s (the budget bounds the run, not only when it stops).
        if (stop.time_budget_s is not None and result.generations
                and time.perf_counter() - started + last_gen_s > stop.time_budget_s):
            result.stopped = "time budget"
            break
        budget = per_generation
        if stop.max_trials is not None:
            budget = min(budget, stop.max_trials - len(result.trials))
        if budget <= 0:
            result.stopped = "max_trials"
            break
        proposals: list[KernelConfig] = []
        if not history and seeds:  # prior_configs chose them: the space's rules and what they let past
            proposals = fresh(seeds, history, budget)
        if len(proposals) < budget:
            # The strategy sees the seeds as pending: it must not propose them again.
            seen = [*history, *pending(problem, proposals)]
            proposals += _fresh_valid(strategy.propose(space, seen, budget - len(proposals)),
                                      space, seen, budget - len(proposals))
        if not proposals:
            result.stopped = "space exhausted"
            break
        notes = strategy.notes
        gen_start = time.perf_counter()

        def record(trial: Trial, gen: int = gen, new: bool = True) -> None:
            rationale = notes.get(config_key(trial.config))
            if rationale and is_retimed(rationale):  # a strategy's words must not pass for the mark
                rationale = f"{rationale} (rationale)"
            if rationale and rationale not in (trial.note or ""):
                # The rationale first: a "re-timed" mark must stay last (history.is_retimed).
                trial.note = f"{rationale}; {trial.note}" if trial.note else rationale
            store.append(trial_row(command, trial, run_id=run_id, strategy=strategy.name, generation=gen,
                                   name="triton", device=device))
            if new:  # a re-timed config is not a new trial: it counts for no budget
                result.trials.append(trial)
            if on_trial is not None:
                on_trial(trial)

        trials = evaluator.evaluate(problem, proposals, on_trial=record)
        history += trials
        before = result.best
        result.best = best_of(history)
        ok = [t for t in trials if t.ok and t.rank_ms is not None]
        summary = Generation(
            generation=gen, trials=len(trials), ok=len(ok),
            gen_best_ms=min((t.rank_ms for t in ok), default=None),
            best_ms=None if result.best is None else result.best.rank_ms,
            best_config=None if result.best is None else result.best.config,
            elapsed_s=time.perf_counter() - gen_start,
            stats=dict(strategy.last_stats or {}),
        )
        last_gen_s = summary.elapsed_s
        result.generations.append(summary)
        events = strategy.events
        result.events += list(events[events_seen:])  # the strategy's events are append-only
        events_seen = len(events)
        if on_generation is not None:
            on_generation(summary)
        # No success yet counts as no gain: a problem where everything fails stops on patience too.
        gained = result.best is not None and (before is None
                                              or result.best.rank_ms < before.rank_ms * (1 - stop.min_gain))
        stale = 0 if gained else stale + 1
        if stop.patience is not None and stale >= stop.patience:
            result.stopped = "converged"
            break
        if stop.time_budget_s is not None and time.perf_counter() - started >= stop.time_budget_s:
            result.stopped = "time budget"
            break
    spent = stop.time_budget_s is not None and time.perf_counter() - started >= stop.time_budget_s
    if result.trials and spent:
        result.events.append("the leaders were not timed again side by side: the time budget is spent")
    elif result.trials:
        line, confirmed = _confirm_leaders(problem, space, store, evaluator, record, device=device, timing=timing)
        result.confirmation = line
        if line and not confirmed:
            result.events.append(line)
    if result.trials:
        # From the history as written: a re-timed row supersedes its config's earlier ones,
        # and the best carries its row (ms, gpu_ms, tflops), this run's or an earlier one's.
        result.best = best_of(observations(store.trials(), problem, device=device, timing=timing))
    return result


CONFIRM_LEADERS = 4
"""How many of the fastest configs are measured again, side by side, when a problem's
tuning ends. On the H100 six configs of 8192x8192x1024 lay within 1.2 % of the best raced
(docs/tuning.md): first readings 2-3 % apart by the clock's phase rank such near-equals at
random, so the best of them is less often among the first three than the first four."""
CONFIRM_ROUNDS = 3
"""At most this many batches of re-timing per problem."""
CONFIRM_REPEATS = 5
"""Readings per config in a batch, in interleaved rounds; the median decides. On the H100
at its power cap the SM clock swings by ~15 % about once a second (docs/tuning.md), so
one reading of ~0.25 s per config ranks configs 2-3 % apart by the clock's phase; the
median of five separates configs 1 % apart (docs/tuning.md)."""


def _confirm_leaders(problem: Problem, space: SearchSpace, store, evaluator, record, *, device: str,
                     timing: str) -> tuple[str | None, bool]:
    """Measure the CONFIRM_LEADERS fastest configs of ``problem`` again in one batch, with the
    default config (and the half-height tile, half_height_tile) beside them where it was
    tried, and let those readings decide.

    The best of many noisy readings is biased: on the H100 a winner picked by one reading
    measured up to 6 % slower than the default config when the two were timed side by side
    (configs/README.md). A batch takes CONFIRM_REPEATS readings of each config, round after
    round, each round in another order; a config's median re-timed reading supersedes its
    earlier ones (observations). When a config not yet re-timed then leads on its first reading, it is
    re-timed in a further batch beside the best confirmed config, up to CONFIRM_ROUNDS
    batches; if one still leads after that, the line returned says so. ``record`` appends
    the new trials. Returns (line, confirmed): the line None when there was nothing to
    confirm; confirmed False when the leader was left unconfirmed or nothing succeeded."""
    tried = space_default(problem, space)
    default = config_key(space.canonical(tried))  # as prior_configs tried it
    # The configs tried for a reason other than a first reading stand beside the leaders
    # where they were tried: the default, and the half-height tile of a shape whose waves
    # fill poorly. A first reading is taken alone, at whatever phase the clock is in: on the
    # H100 the half-height tile of 4096x11008x4096, 1-2 % ahead of the 128x256 tiles when
    # raced, read 4 % behind them alone and missed the leaders (docs/tuning.md).
    standing = {default} | {config_key(space.canonical(c)) for c in _wave_priors(problem, space, tried)}
    confirmed: set[tuple] = set()
    first: dict[tuple, float] = {}

    def ranked() -> list[Recorded]:
        return sorted((t for t in observations(store.trials(), problem, device=device, timing=timing) if t.timed),
                      key=lambda t: t.rank_ms)

    order = ranked()
    batch = order[:CONFIRM_LEADERS] + [o for o in order[CONFIRM_LEADERS:] if config_key(o.config) in standing]
    rounds = 0
    lost: set[tuple] = set()  # re-timed in no batch: every task of theirs was lost
    got: set[tuple] = set()

    def retimed(trial: Trial) -> None:
        record(trial, new=False)
        (got if is_retimed(trial.note) else lost).add(config_key(trial.config))

    while batch and rounds < CONFIRM_ROUNDS:
        rounds += 1
        for o in batch:
            first.setdefault(config_key(o.config), o.rank_ms)
        configs = [o.config for o in batch]
        for repeat in range(CONFIRM_REPEATS):  # each round starts one config later
            shift = repeat % len(configs)
            evaluator.retime(problem, configs[shift:] + configs[:shift], on_trial=retimed)
        confirmed.update(config_key(o.config) for o in batch if config_key(o.config) in got)
        order = ranked()
        best_confirmed = next((o for o in order if config_key(o.config) in confirmed), None)
        ahead = [o for o in order if config_key(o.config) not in confirmed
                 and (best_confirmed is None or o.rank_ms < best_confirmed.rank_ms)][:CONFIRM_LEADERS]
        batch = ahead + ([best_confirmed] if ahead and best_confirmed is not None else [])
    if not confirmed:
        if lost:
            return f"re-timed none of {len(lost)} leading config(s): every re-time task was lost", False
        return None, True
    if not order:
        return f"re-timed {len(confirmed)} leading config(s): none succeeded again", False
    win = order[0]
    key = config_key(win.config)
    what = (f"re-timed {len(confirmed)} leading config(s) side by side"
            f"{' with the default' if default in confirmed else ''} in {rounds} batch(es) of "
            f"{CONFIRM_REPEATS} interleaved rounds, by their medians: ")
    if key not in confirmed:
        return what + f"{win.config.short()} still leads on its first reading {win.rank_ms:.4g} ms, not confirmed", False
    return what + f"winner {win.config.short()} {win.rank_ms:.4g} ms (first reading {first[key]:.4g} ms)", True


WAVE_FILL_MIN = 0.95
"""Below this share of busy SM-slots over the persistent grid's waves, the prior tries a
smaller tile too (half_height_tile)."""


def wave_fill(problem: Problem, block_m: int, block_n: int, programs: int) -> float:
    """The share of the persistent grid's tile slots that hold a tile: T tiles on
    ``programs`` SMs run in ceil(T / programs) waves, and the last one may be part-empty."""
    tiles = _cdiv(problem.m, block_m) * _cdiv(problem.n, block_n)
    return tiles / (_cdiv(tiles, programs) * programs) if tiles else 1.0  # no tiles: no empty slot


def half_height_tile(problem: Problem, tma: KernelConfig, programs: int | None) -> KernelConfig | None:
    """The TMA tile ``tma`` at half its block_m, where its own tiles fill the persistent
    grid's waves worse than WAVE_FILL_MIN and the half tiles fill them better; else None.

    Each warpgroup of the TMA kernel computes 64 x block_n of the tile, so half the rows
    at half the warps keeps each warpgroup's MMA shape; a stage holds less, so one more
    fits; group_m doubles, so that a group of tiles spans the same output rows (and reuses
    the same B columns from L2: in the H100 sweep 64x256x64 w4 s4 ran 3.4 % faster at
    group_m 16 than at 8); and the loops are flattened with the epilogue split in two,
    which hides the epilogue that twice the tiles make twice as frequent. On the H100 at 4096x11008x4096
    bf16 (128x256 tiles: 1376 on 132 SMs, 10.4 waves, fill 0.947; 64x256: 0.993) this
    tile, 64x256x64 w4 s4 flattened with the split epilogue, was the fastest of 23 configs
    raced side by side, 2.6 % ahead of the tuner's 128x256 winner; at the three other
    tuning-target shapes (fill 0.97) the 128x256 tile won (docs/tuning.md)."""
    if programs is None or tma.block_m < 128 or tma.num_warps < 8 or tma.swap_ab:
        return None
    fill = wave_fill(problem, tma.block_m, tma.block_n, programs)
    half = tma.block_m // 2
    if fill >= WAVE_FILL_MIN or wave_fill(problem, half, tma.block_n, programs) <= fill:
        return None
    return tma.model_copy(update={"block_m": half, "num_warps": tma.num_warps // 2, "group_m": 2 * tma.group_m,
                                  "num_stages": tma.num_stages + 1, "flatten": True, "epilogue_subtile": 2})


def _wave_priors(problem: Problem, space: SearchSpace, default: KernelConfig) -> list[KernelConfig]:
    """The half-height tile of ``default`` (space_default's) on the TMA kernel, where the
    prior tries it (half_height_tile), as a list of none or one."""
    if not space.tma or default.variant not in ("tma", "grouped"):
        return []
    half = half_height_tile(problem, default.model_copy(update={"variant": "tma"}), space.programs)
    return [] if half is None else [half]


def _tma_runs(problem: Problem, space: SearchSpace) -> bool:
    """Whether the TMA kernel takes ``problem``'s operands in ``space``."""
    return space.tma and why_no_tma(problem) is None


def _explicit(config: KernelConfig, problem: Problem, space: SearchSpace) -> KernelConfig:
    """``config`` with an "auto" variant made explicit, as api._plan_kernel resolves it: TMA
    where descriptors can be made."""
    if config.variant != "auto":
        return config
    return config.on_variant("tma" if _tma_runs(problem, space) else "grouped")


def space_default(problem: Problem, space: SearchSpace) -> KernelConfig:
    """The default config of ``problem`` as the space writes it ("auto" made explicit)."""
    return _explicit(default_config(problem.m, problem.n, problem.k, problem.torch_dtype, gpu=space.gpu,
                                    tma=_tma_runs(problem, space)), problem, space)


def _fresh_valid(candidates: Sequence[KernelConfig], space: SearchSpace, history: Sequence[Trial],
                 n: int) -> list[KernelConfig]:
    """Up to ``n`` of ``candidates`` that the space accepts, untried and unrepeated (a
    guard against a strategy that breaks its contract)."""
    return fresh((c for c in candidates if space.contains(c)), history, n)


def untuned_pick(problem: Problem, space: SearchSpace, device: str) -> KernelConfig:
    """What ``autokernel.matmul`` launches ``problem`` with on the GPU named ``device`` before
    this tune (``best.pick``: a shipped or user tuned entry for exactly it, else the
    selector's choice, else the default), with the space's shared memory and TMA answer.
    A tune that never tried it could export a winner slower than what ran untuned: on the
    H100, 48 random trials at 4x8960x640 kept a config 1.08x slower than the pick
    (docs/selector.md)."""
    return pick(problem.m, problem.n, problem.k, problem.torch_dtype, problem.activation, problem.bias,
                problem.layout, device=device, limit=space.smem_limit, tma=_tma_runs(problem, space),
                gpu=space.gpu).config


def prior_configs(problem: Problem, space: SearchSpace, trials: Sequence[Recorded] | None, *, device: str, timing: str,
                  limit: int = 3) -> list[KernelConfig]:
    """Configs worth trying first on a problem with no trials: the default config (its
    "auto" variant made explicit), its tile on the other kernel where the space has both
    (which kernel wins depends on the shape: the pointer kernel at 1024x4096x4096 and
    2048³ on the H100, TMA at most larger ones) and on the TMA kernel with its loops
    flattened if the default's are not and the other way round; where the TMA tile's tiles
    fill the persistent grid's last wave poorly, the tile half as tall (half_height_tile);
    what ``autokernel.matmul`` runs untuned (``untuned_pick``); and the best configs of the
    nearest other problems of the same dtype in the history, on this device. Only those the
    space accepts, but for the untuned pick, which a GPU's tune tries wherever it runs.
    ``trials``: the history (None: none)."""
    default = space_default(problem, space)
    base = [default]
    if space.tma and default.variant in ("tma", "grouped"):
        base.append(default.on_variant("grouped" if default.variant == "tma" else "tma"))
        # The TMA tile with its loops flattened or not, whichever the default is not: the
        # default flattens (config.default_config), which 22 of the 24 TMA entries above
        # M = 128 in the H100's tuned file (autokernel/configs/) chose too, and on an H200
        # the best config of 3 of the 4 tuning-target shapes (docs/tuning.md).
        tma = base[0] if default.variant == "tma" else base[1]
        base.append(tma.model_copy(update={"flatten": not tma.flatten}))
        base.extend(_wave_priors(problem, space, default))
    out: list[KernelConfig] = []

    def add(config: KernelConfig) -> bool:
        """Keep ``config`` as the space writes it, if the space takes it and it is new."""
        config = space.canonical(config)
        if not space.contains(config) or config in out:
            return False
        out.append(config)
        return True

    for config in base:
        add(config)
    untuned = _explicit(untuned_pick(problem, space, device), problem, space)
    if not add(untuned) and space.gpu and space.allowed is None and space.canonical(untuned) not in out:
        # What matmul runs untuned is tried even where the space's rules leave it out (a
        # shipped tuned entry's config: split-K past 256 rows, a tile larger than the
        # problem): a tune that never tried it could keep, and export, a slower winner.
        out.append(space.canonical(untuned))
    if trials:
        best = [t for t in best_per_problem(trials)
                if t.device == device and t.timing == timing and t.problem.dtype == problem.dtype
                and t.config_text is not None]  # a configless row (an old baseline) proposes nothing

        def distance(t: Recorded) -> float:
            return shape_distance((t.problem.m, t.problem.n, t.problem.k), (problem.m, problem.n, problem.k))

        taken = 0  # from the history: only configs the space takes and that are new count toward limit
        for t in sorted(best, key=distance):
            if taken >= limit:
                break
            if t.config is not None:  # a hand-edited config that is none proposes nothing either
                taken += add(t.config)
    return out
