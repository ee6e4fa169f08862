"""Where the wall time of `autokernel tune` goes, phase by phase, in the main process and
in its workers: run the CLI in-process with timing wrappers around its phases.

The same wrappers run in every spawned worker: a spawned child imports this script as
``__mp_main__`` before it unpickles its task function, so the patches below are in place
there too. Events go, one JSON line each (wall-clock ``t`` from time.time(), durations in
seconds), to the file named by $AK_PHASES_LOG; at the end the main process prints a summary.

Usage (on the device): AK_PHASES_LOG=phases.jsonl python3 scripts/tune_phases.py tune --m 4096 ...
(the arguments are autokernel's). Works on any checkout whose module names match.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import sys
import time

T_SCRIPT = time.time()
LOG = os.environ.get("AK_PHASES_LOG", "phases.jsonl")


def who() -> str:
    name = multiprocessing.current_process().name
    return name.removeprefix("autokernel-") if name.startswith("autokernel-") else "main"


def log(event: str, **fields) -> None:
    fields = {"event": event, "proc": who(), "pid": os.getpid(), "t": time.time(), **fields}
    with open(LOG, "a") as f:
        f.write(json.dumps(fields, default=str) + "\n")


def timed(event: str, fn, **extra):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            log(event, start=start, dur=time.time() - start, **extra)

    return wrapper


_context_logged = False


def cuda_context_first(fn, what: str):
    """Time the CUDA context's creation separately, before the first real work of a process."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _context_logged
        if not _context_logged:
            _context_logged = True
            import torch

            if torch.cuda.is_available():
                start = time.time()
                torch.empty(1, device="cuda")
                torch.cuda.synchronize()
                log("cuda_context", start=start, dur=time.time() - start, before=what)
        return fn(*args, **kwargs)

    return wrapper


def patch_worker_tasks() -> None:
    """The worker's task functions, by name: pickled in the parent, looked up in a child."""
    import autokernel.tuning.worker as wk

    wk.compile_candidate = cuda_context_first(timed("compile_candidate", wk.compile_candidate), "compile")
    for name in ("probe_candidate", "measure_baseline"):  # the tuned-up worker's tasks, where they exist
        if hasattr(wk, name):
            setattr(wk, name, cuda_context_first(timed(name, getattr(wk, name)), name))


def patch_evaluate_module(child: bool) -> None:
    """Per-candidate pieces: launch (load/compile), correctness check, event timer, graph timer.

    A task function is pickled by name and must be the module's attribute in the parent
    when the parent pickles it: ``evaluate`` and ``time_fn`` (in the partial that older
    code builds) are patched only in a child, before it unpickles; the parent's own
    baseline (older code) through ``evaluate_torch``."""
    import autokernel.evaluate as ev
    import autokernel.timing as tm
    import autokernel.tuning.worker as wk

    ev.evaluate_torch = cuda_context_first(timed("evaluate_torch", ev.evaluate_torch), "evaluate_torch")
    if not child:
        return
    ev.launch_once = wk.launch_once = timed("launch_once", ev.launch_once)
    ev.check_correctness = timed("check", ev.check_correctness)
    ev.make_input_sets = timed("input_sets", ev.make_input_sets)
    ev.gpu_time = timed("graph_timer", ev.gpu_time)
    tm.time_fn = timed("event_timer", tm.time_fn)
    ev.evaluate = wk.evaluate = cuda_context_first(timed("evaluate", ev.evaluate), "evaluate")
    patch_worker_tasks()


if __name__ == "__mp_main__":  # a spawned worker: time its start-up, then patch before it unpickles its task
    t_import = time.time()
    import autokernel.evaluate  # noqa: F401  (torch, triton, the kernels: what the task's unpickling imports)
    import autokernel.tuning.worker  # noqa: F401

    log("worker_boot", script=T_SCRIPT, import_start=t_import, imported=time.time())
    patch_evaluate_module(child=True)


def patch_main() -> None:
    """Patch the CLI and the worker pool now; what imports torch (the loop, the history, the
    evaluate module) once the CLI reaches its first problem, so that the patches import
    nothing the CLI would not have imported by then."""
    import autokernel.cli.tune as cli_tune
    import autokernel.tuning.worker as wk

    patch_worker_tasks()

    started: dict[int, float] = {}
    orig_start, orig_receive = wk._Pool._start, wk._Pool._receive

    def start(self):
        w = orig_start(self)
        started[id(w)] = time.time()
        log("worker_spawn", name=self._name, dur=time.time() - started[id(w)])
        return w

    def receive(self, w, emit):
        was_ready = w.ready
        out = orig_receive(self, w, emit)
        if not was_ready and w.ready:
            log("worker_ready", name=self._name, since_spawn=time.time() - started.get(id(w), time.time()))
        return out

    wk._Pool._start, wk._Pool._receive = start, receive
    ev_cls = wk.WorkerEvaluator
    orig_eval = ev_cls.evaluate

    def evaluate(self, problem, configs, on_trial=None):
        start = time.time()
        try:
            return orig_eval(self, problem, configs, on_trial)
        finally:
            log("gen_evaluate", start=start, dur=time.time() - start, n=len(configs), phase_s=dict(self.phase_s))

    ev_cls.evaluate = evaluate
    for name in ("retime", "close", "start", "baseline"):
        if hasattr(ev_cls, name):
            setattr(ev_cls, name, timed(f"evaluator_{name}", getattr(ev_cls, name)))
    orig_init = ev_cls.__init__

    def init(self, **kwargs):
        if os.environ.get("AK_COMPILE_WORKERS"):  # a variant: e.g. 0, the timing worker loads (or compiles) each binary
            kwargs["compile_workers"] = int(os.environ["AK_COMPILE_WORKERS"])
        orig_init(self, **kwargs)

    ev_cls.__init__ = timed("evaluator_init", init)
    cli_tune._baseline = timed("baseline", cli_tune._baseline)
    orig_tune_one = cli_tune._tune_one

    def tune_one(*args, **kwargs):
        import autokernel.tuning.loop as loop
        from autokernel.history import History

        if not hasattr(loop.tune, "__wrapped__"):
            loop.tune = timed("loop_tune", loop.tune)
            History.read = timed("history_read", History.read)
            History.append = timed("history_append", History.append)
            patch_evaluate_module(child=False)
        return orig_tune_one(*args, **kwargs)

    cli_tune._tune_one = tune_one
    orig_strategy = cli_tune._strategy

    def strategy(options):
        s = orig_strategy(options)
        s.propose = timed("propose", s.propose)
        return s

    cli_tune._strategy = strategy


def summary() -> None:
    print = functools.partial(__builtins__.print, file=sys.stderr)  # stdout may hold the CLI's JSON
    rows = [json.loads(line) for line in open(LOG)]
    main = [r for r in rows if r["proc"] == "main"]
    t0 = next(r["created"] for r in main if r["event"] == "main_boot")
    print(f"\n== phases (s since the main process was created); log {LOG}")
    for r in main:
        if r["event"] in ("history_read", "history_append", "propose", "launch_once", "event_timer", "graph_timer",
                          "input_sets", "check"):
            continue
        at = r.get("start", r["t"]) - t0
        print(f"  main {r['event']:<18} at {at:7.2f}  dur {r.get('dur', 0):6.2f}  "
              f"{ {k: v for k, v in r.items() if k not in ('event', 'proc', 'pid', 't', 'start', 'dur', 'created')} }")
    for ev in ("history_read", "history_append", "propose"):
        d = [r["dur"] for r in main if r["event"] == ev]
        if d:
            print(f"  main {ev:<18} n {len(d):3d}  total {sum(d):6.2f}")
    for r in (r for r in rows if r["event"] == "worker_boot"):
        print(f"  {r['proc']:<7} pid {r['pid']:<7} python+spawn done at {r['script'] - t0:6.2f}  "
              f"imports {r['imported'] - r['import_start']:5.2f}")
    print("  per process kind (worker side): event  n  total  median")
    for proc in sorted({r["proc"] for r in rows}):
        for ev in ("cuda_context", "evaluate", "compile_candidate", "probe_candidate", "measure_baseline",
                   "evaluate_torch", "launch_once", "check", "input_sets", "event_timer", "graph_timer"):
            d = sorted(r["dur"] for r in rows if r["proc"] == proc and r["event"] == ev)
            if d:
                print(f"    {proc:<8} {ev:<18} {len(d):3d} {sum(d):7.2f} {d[len(d) // 2]:6.3f}")


if __name__ == "__main__":
    # $AK_T0: the shell's `date +%s.%N` just before python started, so the summary counts python's start-up too.
    log("main_boot", created=float(os.environ.get("AK_T0", T_SCRIPT)), script=T_SCRIPT)
    start = time.time()
    import autokernel.cli as cli

    log("cli_import", start=start, dur=time.time() - start)
    start = time.time()
    patch_main()
    log("patch_import", start=start, dur=time.time() - start)
    code = 0
    try:
        cli.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code or 0
    log("main_end")
    summary()
    sys.exit(code)  # the interpreter's teardown is part of the CLI's wall time
