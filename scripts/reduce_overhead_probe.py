"""GPU probe of issue 9's two misses (docs/launch.md, "Verdicts" and "torch.compile").

tma: the TMA launch against the grouped one at 256^3 fp16 (host time per call, interleaved
   rounds), what the CUDA-graph-capture query costs, how often a launch asks it (stream 0
   and a side stream), and the TMA kernel's results under CUDA-graph capture.
compile: Sequential(n x [Linear 256->1024, GELU, Linear 1024->256]) fp16, x [256, 256], no
   grad: torch's model and ours (autokernel.nn.Linear), each compiled under the same
   settings (VARIANTS: reduce-overhead, with fullgraph, with cudagraph trees off, with the
   input at a static address), each variant in a frame of its own (_own_frame). For each:
   cudagraph skips, graph breaks, dynamo guards, cudagraph-tree nodes with their inputs
   (static, copied) and outputs, the kernel each of our plans took; then wall time per
   call (interleaved rounds, median), GPU time per call (calls queued behind a sleep
   kernel, CUDA events; and the recorded graphs replayed alone), the GPU kernels of one
   call (torch.profiler), and cProfile's per-call difference between ours and torch's by
   function.

Run on the device: source scripts/device_env.sh; python3 scripts/reduce_overhead_probe.py
[--sections tma,compile] [--blocks 1,2,4] [--variants RO,...] [--rounds 15]. Every line is tagged with its
section; a broken part prints its traceback and the rest goes on. --dry-run runs the
flow on the CPU (interpreter, small layers, aot_eager instead of reduce-overhead) to
check the script itself, not to measure.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time
import traceback
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_overhead as lo  # noqa: E402  (its models, timers and configs: the docs' figures come from it)

import autokernel as ak  # noqa: E402
from autokernel import api  # noqa: E402

T0 = time.perf_counter()
CUDA = torch.cuda.is_available()


def say(tag: str, text: str) -> None:
    print(f"[{tag} {time.perf_counter() - T0:5.0f}s] {text}", flush=True)


def guarded(tag: str, fn, *args):
    """Run one part; a failure prints its traceback and the probe goes on."""
    try:
        return fn(*args)
    except Exception:
        say(tag, "FAILED:\n" + traceback.format_exc())
        return None


def interleaved(fns: dict, rounds: int, calls: int) -> dict:
    """{name: per-round µs per call}: every round times each candidate once, in an order
    rotated per round, so that all of them see the same drift of the host."""
    names = list(fns)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(lo.wall_us(fns[name], calls) if CUDA else _wall_cpu(fns[name], calls))
    return times


def _wall_cpu(fn, n):
    for _ in range(3):
        fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def report_rounds(tag: str, times: dict, ref: str) -> None:
    for name, ts in times.items():
        ratio = statistics.median(t / r for t, r in zip(ts, times[ref]))
        say(tag, f"{name:44s} median {statistics.median(ts):8.2f} us   /{ref}: {ratio:5.3f}x "
                 f"(rounds min {min(ts):.2f} max {max(ts):.2f})")


# ---- tma: the TMA path's host time against the grouped one ----


def section_tma(rounds: int) -> None:
    tag = "tma"
    s = 256
    dt = torch.float16
    a = torch.randn(s, s, device=lo.DEV, dtype=dt)
    w = torch.randn(s, s, device=lo.DEV, dtype=dt)
    out = torch.empty(s, s, device=lo.DEV, dtype=dt)
    grouped, tma = lo.cfg("grouped"), lo.cfg("tma")
    plans = {}
    for name, c in (("grouped", grouped), ("tma", tma)):
        plan = api.gemm_plan(a, w.t(), None, "none", 0.01, c)
        plan.fire(a, w.t(), out, None, None)  # compiles; later calls replay
        plans[name] = plan
        launch = plan.launch
        say(tag, f"plan {name}: kernel {launch.fn.__name__ if hasattr(launch.fn, '__name__') else launch.fn}, "
                 f"replay {'CompiledKernel.run' if getattr(launch, 'direct', None) is None else 'direct C launch'}, "
                 f"scratch {getattr(launch, 'scratch_bytes', '?')} B, "
                 f"{len(launch.args_tail)} arguments after the tensors")
    if not CUDA:
        return
    query = torch._C._cuda_isCurrentStreamCapturing
    n = 200000
    t = time.perf_counter()
    for _ in range(n):
        query()
    say(tag, f"torch._C._cuda_isCurrentStreamCapturing(): {(time.perf_counter() - t) / n * 1e6:.3f} us per call "
             "(the query the TMA launch made on every call before; now only on side streams)")
    guarded(tag, _count_capture_queries, plans["tma"], a, w, out)
    side = torch.cuda.Stream()

    def on_side(fn):
        def call():
            with torch.cuda.stream(side):
                fn()
        return call

    pg, pt = plans["grouped"], plans["tma"]
    fns = {
        "matmul grouped": lambda: ak.matmul(a, w.t(), config=grouped),
        "matmul tma": lambda: ak.matmul(a, w.t(), config=tma),
        "launch only grouped": lambda: pg.fire(a, w.t(), out, None, None),
        "launch only tma": lambda: pt.fire(a, w.t(), out, None, None),
        "launch only grouped, side stream": on_side(lambda: pg.fire(a, w.t(), out, None, None)),
        "launch only tma, side stream (asks)": on_side(lambda: pt.fire(a, w.t(), out, None, None)),
    }
    for name in ("launch only tma, side stream (asks)", "launch only grouped, side stream"):
        fns[name]()
    torch.cuda.synchronize()
    times = interleaved(fns, rounds, 2000)
    report_rounds(tag, times, "matmul grouped")
    for x, y in (("matmul tma", "matmul grouped"), ("launch only tma", "launch only grouped"),
                 ("launch only tma, side stream (asks)", "launch only grouped, side stream")):
        say(tag, f"VERDICT-INPUT {x} / {y}: median of rounds "
                 f"{statistics.median(p / q for p, q in zip(times[x], times[y])):.3f}x")
    guarded(tag, _check_tma_under_capture, tma)


def _count_capture_queries(plan, a, w, out) -> None:
    """How many capture queries 100 TMA launches make: none on stream 0, 100 on a side stream."""
    real = torch._C._cuda_isCurrentStreamCapturing
    asked = [0]

    def counting():
        asked[0] += 1
        return real()

    torch._C._cuda_isCurrentStreamCapturing = counting
    try:
        for _ in range(100):
            plan.fire(a, w.t(), out, None, None)
        on_default = asked[0]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(100):
                plan.fire(a, w.t(), out, None, None)
        torch.cuda.current_stream().wait_stream(side)
    finally:
        torch._C._cuda_isCurrentStreamCapturing = real
    say("tma", f"capture queries per 100 TMA launches: default stream {on_default}, side stream "
               f"{asked[0] - on_default} (expect 0, and 101 on the side stream: its first launch also asks "
               "when it makes the stream's scratch buffer)")


def _check_tma_under_capture(tma) -> None:
    """Two CUDA graphs of a TMA matmul (each captured with a scratch buffer of its own)
    replayed on two side streams at once, while eager launches on the default stream use
    the stream's cached scratch: every result right against fp32 torch on new data."""
    s = 256
    a = torch.randn(s, s, device="cuda", dtype=torch.float16) / 16
    w = torch.randn(s, s, device="cuda", dtype=torch.float16)
    ak.matmul(a, w.t(), config=tma)  # the plan exists; capture only replays
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ak.matmul(a, w.t(), config=tma)
    torch.cuda.current_stream().wait_stream(side)
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g1):
        y1 = ak.matmul(a, w.t(), config=tma)
    with torch.cuda.graph(g2):
        y2 = ak.matmul(a, w.t(), config=tma)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    errs = []
    for _ in range(3):
        a.copy_(torch.randn(s, s, device="cuda", dtype=torch.float16) / 16)
        s1.wait_stream(torch.cuda.current_stream())
        s2.wait_stream(torch.cuda.current_stream())
        eager = []
        for _ in range(20):  # the three streams' launches overlap on the GPU
            with torch.cuda.stream(s1):
                g1.replay()
            with torch.cuda.stream(s2):
                g2.replay()
            eager.append(ak.matmul(a, w.t(), config=tma))
        torch.cuda.synchronize()
        ref = a.float() @ w.float().t()
        errs.append(max(lo.rel(y, ref) for y in (y1, y2, *eager)))
    ok = max(errs) < 1e-2
    say("tma", f"TMA matmul: two CUDA graphs replayed on two streams at once + eager launches on the default "
               f"stream, 3 rounds of new data: max rel err {max(errs):.2e} {'OK' if ok else 'FAIL'}")


# ---- compile: reduce-overhead, ours against torch's ----


class SkipRecorder:
    """Every 'skipping cudagraphs ...' message, wherever inductor logs one."""

    MODULES = ("torch._inductor.cudagraph_utils", "torch._inductor.cudagraph_trees",
               "torch._inductor.output_code", "torch._dynamo.backends.cudagraphs")

    def __init__(self):
        import importlib

        self.messages = []
        self.patched = []
        for name in self.MODULES:
            try:
                mod = importlib.import_module(name)
            except Exception:
                continue
            real = getattr(mod, "log_cudagraph_skip_and_bump_counter", None)
            if real is None:
                continue

            def record(msg, *args, _real=real, **kwargs):
                self.messages.append(str(msg).splitlines()[0][:200])
                return _real(msg, *args, **kwargs)

            setattr(mod, "log_cudagraph_skip_and_bump_counter", record)
            self.patched.append((mod, real))

    def take(self):
        out, self.messages = self.messages, []
        return out


def _counters_snapshot():
    from torch._dynamo.utils import counters

    return {(k, kk): v for k, d in counters.items() for kk, v in d.items()}


def _counter_delta(before, after):
    keys = [k for k in after if after[k] != before.get(k, 0)]
    wanted = [k for k in keys if k[0] in ("graph_break", "inductor", "stats", "aot_autograd")
              and any(s in k[1] for s in ("cudagraph", "unique_graphs", "calls_captured", "total", "break",
                                          "ok", "fxgraph"))]
    return ", ".join(f"{a}.{b}={after[(a, b)] - before.get((a, b), 0)}" for a, b in wanted) or "none"


def _tree_manager():
    from torch._inductor import cudagraph_trees

    return cudagraph_trees.get_container(torch.cuda.current_device()).tree_manager


def _nodes_of(manager, function_ids):
    """Every recorded CUDAGraphNode of these functions (their roots and descendants; of
    every function when ``function_ids`` is None)."""
    nodes, stack = [], []
    for fid, roots in getattr(manager, "roots", {}).items():
        stack.extend(roots)
    while stack:
        node = stack.pop()
        for children in getattr(node, "children", {}).values():
            stack.extend(children)
        fid = getattr(getattr(node, "wrapped_function", None), "id", None)
        if function_ids is None or fid in function_ids:
            nodes.append(node)
    return nodes


def _describe_nodes(tag, name, manager, function_ids):
    nodes = _nodes_of(manager, function_ids)
    say(tag, f"{name}: {len(function_ids)} compiled function(s) in the cudagraph tree, {len(nodes)} recorded node(s)")
    for node in nodes:
        wf = node.wrapped_function
        static = list(getattr(wf, "static_input_idxs", []))
        copied = list(getattr(node, "non_static_input_idx", []))
        n_in = len(getattr(node, "static_input_data_ptrs", [])) or len(static) + len(copied)
        outs = getattr(node, "outputs_metadata", [])
        cached = sum(t is not None for t in getattr(node, "cached_tensor_outputs", []))
        alias = [type(a).__name__ if a is not None and not isinstance(a, type) else getattr(a, "__name__", str(a))
                 for a in getattr(node, "output_storage_alias", [])]
        say(tag, f"  node {getattr(node, 'id', '?')}: inputs {n_in} (static {len(static)}, copied per call "
                 f"{len(copied)}: idx {copied}), outputs {len(outs)} (cached tensors {cached}; storage "
                 f"{alias}), children {sum(len(c) for c in node.children.values())}, "
                 f"rerecord_if_static_inputs_change {getattr(node, 'rerecord_if_static_inputs_change', '?')}")


def _guard_summary(entries) -> str:
    """Dynamo's cache entries on one variant's frame: how many, and each one's guards by kind."""
    out = []
    for entry in entries:
        lines = [ln for ln in str(entry.guard_manager).splitlines() if "+- " in ln]
        guards = [ln for ln in lines if "GuardManager" not in ln and "KeyValueManager" not in ln]
        kinds = {}
        for ln in guards:
            kind = ln.split("+- ")[1].split(":")[0].strip()
            kinds[kind] = kinds.get(kind, 0) + 1
        top = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:6])
        out.append(f"{len(guards)} guards ({top})")
    return f"cache entries {len(entries)}: " + "; ".join(out)


def _plan_kernels(tag):
    seen = {}
    for plan in list(api._PLANS.values()):
        launch = getattr(plan, "launch", None)
        fn = getattr(launch, "fn", None)
        if fn is None or not hasattr(plan, "shape"):
            continue
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "fn", None), "__name__", str(fn))
        seen[f"{plan.shape} {str(plan.dtype)[6:]} store_z={plan.store_z}"] = (
            f"{name}, grid {launch.grid}, scratch {getattr(launch, 'scratch_bytes', '?')} B")
    for k, v in sorted(seen.items()):
        say(tag, f"  our plan {k}: {v}")


def _gpu_us_queued(fn, calls=20, sleep_cycles=int(2e7)):
    """GPU time per call with no launch gaps: a sleep kernel holds the stream while the
    host queues ``calls`` calls behind it; events time the calls only. Returns (µs per
    call, whether the host had queued every call before the sleep ended)."""
    torch.cuda.synchronize()
    torch.cuda._sleep(sleep_cycles)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(calls):
        fn()
    e1.record()
    queued = not e0.query()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1e3 / calls, queued


def _graphs_replayed_us(nodes, replays=50):
    """GPU µs of one replay of these recorded graphs (replayed alone, queued behind a sleep)."""
    graphs = [n.graph for n in nodes if getattr(n, "graph", None) is not None]
    if not graphs:
        return None, False

    def replay():
        for g in graphs:
            g.replay()

    return _gpu_us_queued(replay, replays, int(1e7))


def _kernels_per_call(fn, calls=10):
    """(kernels, µs of kernel time) per call, from torch.profiler's CUDA activity."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = {}
    for e in kernels:
        names[e.name[:60]] = names.get(e.name[:60], 0) + 1
    busy = sum(e.time_range.elapsed_us() for e in kernels)
    return len(kernels) / calls, busy / calls, names, prof


def _cprofile(fn, calls):
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    if CUDA:
        torch.cuda.synchronize()
    prof.disable()
    return pstats.Stats(prof).stats, calls


def _short(key):
    file, line, func = key
    parts = file.replace("\\", "/").split("/")
    where = "/".join(parts[-2:]) if len(parts) > 1 else file
    return f"{where}:{line}({func})"


def _cprofile_diff(tag, a_name, a, b_name, b, top=16):
    """Per call µs (tottime) and calls per call, of b minus a, by function: where b's host time goes beyond a's."""
    (sa, na), (sb, nb) = a, b
    per_a = {k: (v[2] / na * 1e6, v[1] / na) for k, v in sa.items()}
    per_b = {k: (v[2] / nb * 1e6, v[1] / nb) for k, v in sb.items()}
    total_a, total_b = sum(v[0] for v in per_a.values()), sum(v[0] for v in per_b.values())
    say(tag, f"cProfile (tottime, under the profiler) per call: {a_name} {total_a:.1f} us, {b_name} {total_b:.1f} us")
    keys = set(per_a) | set(per_b)
    rows = sorted(keys, key=lambda k: -abs(per_b.get(k, (0, 0))[0] - per_a.get(k, (0, 0))[0]))[:top]
    say(tag, f"  {'function':70s} {a_name[:12]:>12s} {b_name[:12]:>12s}   delta   calls/call a->b")
    for k in rows:
        ta, ca = per_a.get(k, (0.0, 0.0))
        tb, cb = per_b.get(k, (0.0, 0.0))
        say(tag, f"  {_short(k)[-70:]:70s} {ta:12.2f} {tb:12.2f} {tb - ta:+7.2f}   {ca:.1f} -> {cb:.1f}")
    for name, (stats, n) in ((a_name, a), (b_name, b)):
        found = [(k, v) for k, v in stats.items() if k[2] == "__getattr__" and k[0].endswith("_config_module.py")]
        calls = sum(v[1] for _, v in found) / n
        callers = sorted(((c, cv[1] / n) for _, v in found for c, cv in v[4].items()), key=lambda kv: -kv[1])
        say(tag, f"  {name}: torch config __getattr__ {calls:.1f} per call, from "
                 + ("; ".join(f"{_short(c)} x{per:.1f}" for c, per in callers[:8]) or "-"))


def _call_model(x):
    return model(x)  # noqa: F821  (a global of each clone's namespace: _own_frame)


def _own_frame(model, name: str):
    """``x -> model(x)`` as a function with a code object of its own. torch.compile(module)
    compiles the frame of dynamo's wrap_inline, whose code every compiled module shares
    (torch 2.11 wraps an exec'd function there too), so the cache entries of all variants
    would sit on one list, checked newest first: the oldest variant paid for failing the
    others' guards on every call. A clone of _call_model's code, renamed, is a code object
    of its own with a source file, so each variant has one entry, as a program with one
    compiled model does."""
    label = "call_" + "".join(c if c.isalnum() else "_" for c in name)
    names = {"co_name": label}
    if hasattr(_call_model.__code__, "co_qualname"):  # Python 3.11+
        names["co_qualname"] = label
    code = _call_model.__code__.replace(**names)
    return types.FunctionType(code, {"model": model, "__builtins__": __builtins__}, label)


# name -> (torch.compile keywords, input marked static), each for both models. "RO" is
# mode="reduce-overhead" with fullgraph off for both models (neither has a graph break);
# fullgraph=True costs every call a few set-and-restore steps of dynamo state, the same
# for both, and ours alone was measured that way before session 7. The others are
# settings a user can pick when the tree's per-call host time is what they pay for.
VARIANTS = {
    "RO": (dict(mode="reduce-overhead"), False),
    "RO fullgraph": (dict(mode="reduce-overhead", fullgraph=True), False),
    "RO trees off": (dict(options={"triton.cudagraphs": True, "triton.cudagraph_trees": False}), False),
    "RO static x": (dict(mode="reduce-overhead"), True),
    "RO trees off + static x": (dict(options={"triton.cudagraphs": True, "triton.cudagraph_trees": False}), True),
}


def section_compile(blocks_list, rounds: int, variants: list[str], dry_run: bool) -> None:
    import torch._dynamo
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    recorder = SkipRecorder()
    dims = dict(d=32, ffn=64) if dry_run else {}
    for blocks in blocks_list:
        tag = f"compile {blocks}blk"
        if blocks > 1 and time.perf_counter() - T0 > 200:
            say(tag, "skipped: over 200 s already")
            continue
        torch._dynamo.reset()
        api.clear_launch_cache()
        ref, ours = lo._models(blocks, **dims)
        rows = min(dims.get("d", 256), 256)
        x = torch.randn(rows, dims.get("d", 256), device=lo.DEV, dtype=ref[0].weight.dtype)
        x_static = x.clone()
        torch._dynamo.mark_static_address(x_static)
        compiled, fids, inputs = {}, {}, {}
        with torch.no_grad():
            expect = ref(x)
            eager = {"torch eager": ref, "ours eager": ours}
            for name, model in eager.items():
                model(x)
            manager_ids = set()
            for variant in variants:
                kwargs, static = VARIANTS[variant]
                if dry_run:
                    kwargs = dict(backend="aot_eager", fullgraph=kwargs.get("fullgraph", False))
                for who, model in (("torch", ref), ("ours", ours)):
                    name = f"{who} {variant}"
                    xin = x_static if static else x
                    before = _counters_snapshot()
                    recorder.take()
                    cmodel = torch.compile(_own_frame(model, name), **kwargs)
                    t = time.perf_counter()
                    for _ in range(5):  # warm-up, record, replay
                        y = cmodel(xin)
                    if CUDA:
                        torch.cuda.synchronize()
                    compiled[name], inputs[name] = cmodel, xin
                    skips = recorder.take()
                    entries = _debug_get_cache_entry_list(cmodel._torchdynamo_orig_callable.__code__)
                    say(tag, f"{name}: compiled + 5 calls in {time.perf_counter() - t:.1f} s; rel err vs torch eager "
                             f"{lo.rel(y, expect):.2e}; counters: {_counter_delta(before, _counters_snapshot())}; "
                             f"cudagraph skips: {skips or 'none'}; {_guard_summary(entries)}")
                    del y  # a live output of the tree's pool would change which paths it takes later
                    if CUDA and not dry_run:
                        def describe(name=name):
                            manager = _tree_manager()
                            ids = set(getattr(manager, "ids_to_funcs", {})) - manager_ids
                            manager_ids.update(ids)
                            if ids:
                                _describe_nodes(tag, name, manager, ids)
                            return ids
                        fids[name] = guarded(tag, describe) or set()
            _plan_kernels(tag)
            import torch._inductor.config as inductor_config

            say(tag, f"graph partition (torch._inductor.config.graph_partition): "
                     f"{getattr(inductor_config, 'graph_partition', 'n/a')}")
            fns = {name: (lambda m=m: m(x)) for name, m in eager.items()}
            fns.update({name: (lambda m=m, xin=inputs[name]: m(xin)) for name, m in compiled.items()})
            times = interleaved(fns, rounds, 200 if CUDA else 20)
            report_rounds(tag, times, "torch RO")

            def ratio(a, b):
                return statistics.median(p / q for p, q in zip(times[a], times[b]))

            say(tag, "VERDICT-INPUT ours RO / torch RO: " + f"{ratio('ours RO', 'torch RO'):.3f}x; "
                     + "; ".join(f"ours {v} / torch {v}: {ratio('ours ' + v, 'torch ' + v):.3f}x"
                                 for v in variants if v != "RO")
                     + "; " + "; ".join(f"{who} {v} / {who} eager: {ratio(f'{who} {v}', f'{who} eager'):.3f}x"
                                        for who in ("ours", "torch") for v in variants))
            gc.collect()
            gc.disable()
            try:
                times = interleaved({k: fns[k] for k in ("torch RO", "ours RO")}, 5, 200 if CUDA else 20)
            finally:
                gc.enable()
            say(tag, "gc disabled, 5 rounds: "
                     + ", ".join(f"{k} {statistics.median(v):.2f} us" for k, v in times.items()))
            if CUDA:
                for name in compiled:
                    def gpu(name=name):
                        per_call, queued = _gpu_us_queued(fns[name])
                        nodes = _nodes_of(_tree_manager(), fids[name]) if fids.get(name) else []
                        graph_us, g_queued = _graphs_replayed_us(nodes) if nodes else (None, False)
                        k, busy, names, _ = _kernels_per_call(fns[name])
                        say(tag, f"{name}: GPU per call {per_call:.2f} us (calls queued behind a sleep: {queued}); "
                                 f"recorded graph(s) alone {graph_us if graph_us is None else round(graph_us, 2)} us "
                                 f"(queued {g_queued}); profiler: {k:.1f} kernels, {busy:.2f} us kernel time per call")
                        say(tag, f"  kernels of {name}: " + "; ".join(f"{n} x{c / 10:.1f}" for n, c in names.items()))
                    guarded(tag, gpu)
            if blocks == blocks_list[0]:
                n = 300 if CUDA else 30
                profiles = {name: _cprofile(fns[name], n) for name in ("torch RO", "ours RO")}
                guarded(tag, _cprofile_diff, tag, "torch RO", profiles["torch RO"], "ours RO", profiles["ours RO"])


def _variants(text: str) -> list[str]:
    names = list(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))  # each once
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    return ["RO"] + [v for v in names if v != "RO"]


def main():
    sections = ("tma", "compile")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(sections))
    parser.add_argument("--blocks", default="1,2,4")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"compile settings, each for torch's model and ours (RO first): {', '.join(VARIANTS)}")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--dry-run", action="store_true", help="CPU, interpreter, aot_eager: checks the script only")
    args = parser.parse_args()
    if args.dry_run:
        lo.DEV = "cpu"
    elif not CUDA:
        sys.exit("no GPU: use --dry-run to check the script on the CPU")
    import triton

    say("env", f"{torch.cuda.get_device_name() if CUDA else 'cpu (dry run)'}  torch {torch.__version__}  "
               f"triton {triton.__version__}")
    for name in args.sections.split(","):
        if name == "tma":
            guarded("tma", section_tma, args.rounds)
        elif name == "compile":
            guarded("compile", section_compile, [int(b) for b in args.blocks.split(",")], args.rounds,
                    _variants(args.variants), args.dry_run)
        else:
            sys.exit(f"unknown section {name!r}; known: {', '.join(sections)}")
    say("env", "done")


if __name__ == "__main__":
    main()
