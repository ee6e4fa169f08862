"""GPU: the launch path side by side with torch, in one run (docs/launch.md).

1. the cached launch path computes what the JIT path computes (first call through
   Triton's JIT, later calls through the cached launcher), every variant;
2. wall time per call of back-to-back calls (host-bound when the GPU work is small)
   at 256^3: torch vs autokernel.matmul (default, grouped, tma) and autokernel.linear;
3. three Linear shapes (1024x4096x4096, 2048x2048x1024, a 16-row decode): wall time per call and GPU time per call (CUDA-graph replay of
   the same call, so no launch gaps) for cuBLAS, torch linear + bias + gelu, and ours;
4. a training step at 256^3 against torch autograd, and where our step's host time goes;
5. torch.compile: graph breaks, and eager / compiled / reduce-overhead per call for a
   two-layer model on autokernel layers and its torch twin;
6. "ratios": the training step and the 256^3 calls in interleaved rounds (median ratios),
   the figures to compare when the host's speed drifts.
Run on the device: source benchmarks/device_env.sh; python3 benchmarks/launch_overhead.py
[--sections correctness,ratios,host,shapes,training,compile] [--before PACKAGE]. With
--before, an older version importable as PACKAGE (a copy of autokernel/ with every
`autokernel` name renamed) is measured too, in one process: each section first with it,
then with this checkout (rows labelled "before"/"after"); "ratios" interleaves them.
"""
import argparse
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F
import triton

import autokernel as ak
from autokernel import api, autograd
from autokernel.autograd import linear_backward, linear_forward

DEV = "cuda"
RESULTS = []
LABEL = ""  # which version's rows these are, when --before is given


def use(package: str, label: str) -> None:
    """Measure ``package`` (autokernel, or an older copy of it under another name) from here on."""
    import importlib

    global ak, api, autograd, linear_backward, linear_forward, LABEL
    ak = importlib.import_module(package)
    api = importlib.import_module(f"{package}.api")
    autograd = importlib.import_module(f"{package}.autograd")
    linear_backward, linear_forward = autograd.linear_backward, autograd.linear_forward
    LABEL = label


def row(section, name, value, unit="us"):
    RESULTS.append((LABEL, section, name, value, unit))
    print(f"[{LABEL}{section}] {name:58s} {value:10.2f} {unit}", flush=True)


def wall_us(fn, n=1000):
    """Wall time per call of n back-to-back calls, synchronised at both ends."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def graph_us(fn, calls=20, replays=20):
    """GPU time per call: a CUDA graph of ``calls`` calls, replayed (median of replays)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return sorted(times)[len(times) // 2]


def rel(out, ref):
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def cfg(variant, **kw):
    base = dict(block_m=64, block_n=64, block_k=64, group_m=8, num_warps=4, num_stages=3, variant=variant)
    return ak.KernelConfig(**{**base, **kw})


def section_correctness():
    # Poisoned outputs, fresh random inputs; call 1 goes through the JIT, calls 2-3 through
    # the cached launcher: all must match torch and each other.
    for variant in ("default", "grouped", "tma"):
        for (m, n, k) in ((256, 256, 256), (200, 328, 136), (16, 4096, 4096)):
            for dtype in (torch.float16, torch.bfloat16):
                w = torch.randn(n, k, device=DEV, dtype=dtype)
                bias = torch.randn(n, device=DEV, dtype=dtype)
                c = None if variant == "default" else cfg(variant)
                api.clear_launch_cache()
                outs, errs = [], []
                for i in range(3):
                    a = torch.randn(m, k, device=DEV, dtype=dtype) / k ** 0.5
                    out = torch.full((m, n), float("nan"), device=DEV, dtype=dtype)
                    ak.matmul(a, w.t(), bias, "gelu", config=c, out=out)
                    ref = F.gelu(a.float() @ w.float().t() + bias.float())
                    errs.append(rel(out, ref))
                    outs.append((a, out))
                again = ak.matmul(outs[0][0], w.t(), bias, "gelu", config=c)  # cached, same input as the JIT call
                same = torch.equal(again, outs[0][1])
                ok = max(errs) < 1e-2 and same and not any(torch.isnan(o).any() for _, o in outs)
                print(f"[check] {variant:8s} {m}x{n}x{k} {str(dtype)[6:]:9s} rel_err {max(errs):.2e} "
                      f"cached==jit {same} {'OK' if ok else 'FAIL'}", flush=True)
                assert ok
    cache = getattr(api, "_PLANS", None)  # where older versions kept the plans
    if cache is None:
        cache = sys.modules[api.__name__.rsplit(".", 1)[0] + ".plans"]._PLANS
    paths = sorted({_replay_path(p.launch) for p in cache.values() if hasattr(p, "launch") and p.launch})
    print(f"[check] replay path of the cached launches: {', '.join(paths)}", flush=True)
    _check_backward_replay()


def _replay_path(launch) -> str:
    if hasattr(launch, "kernel") and hasattr(launch, "descriptors"):  # the TMA launch: host descriptors
        kernel = launch.kernel
        kept = getattr(kernel, "expand", None) is not None
        return _replay_path(kernel) + (", tensor maps kept" if kept else ", tensor maps filled per launch")
    if not hasattr(launch, "direct"):
        return "n/a (no direct path in this version)" if hasattr(launch, "compiled") else type(launch).__name__
    return "direct C launch" if launch.direct is not None else "CompiledKernel.run"


def _check_backward_replay():
    # dX, dW, db of one step: the first through the JIT, the next replayed, on the same
    # inputs: bit-identical, and right against fp32 torch.
    for dtype in (torch.float16, torch.bfloat16):
        x = (torch.randn(200, 136, device=DEV, dtype=dtype) / 136 ** 0.5).requires_grad_()
        w = torch.randn(328, 136, device=DEV, dtype=dtype, requires_grad=True)
        b = torch.randn(328, device=DEV, dtype=dtype, requires_grad=True)
        g = torch.randn(200, 328, device=DEV, dtype=dtype)
        api.clear_launch_cache()
        runs = [torch.autograd.grad(ak.linear(x, w, b, "gelu"), (x, w, b), g) for _ in range(3)]
        same = all(torch.equal(a_, b_) for r in runs[1:] for a_, b_ in zip(runs[0], r))
        xf, wf, bf = (t.detach().float().requires_grad_() for t in (x, w, b))
        want = torch.autograd.grad(F.gelu(F.linear(xf, wf, bf)), (xf, wf, bf), g.float())
        err = max(rel(a_, b_) for a_, b_ in zip(runs[-1], want))
        ok = same and err < 1e-2
        print(f"[check] backward 200x328x136 {str(dtype)[6:]:9s} rel_err {err:.2e} replayed==jit {same} "
              f"{'OK' if ok else 'FAIL'}", flush=True)
        assert ok


def section_host_256():
    s = 256
    a = torch.randn(s, s, device=DEV, dtype=torch.float16)
    w = torch.randn(s, s, device=DEV, dtype=torch.float16)
    b = torch.randn(s, device=DEV, dtype=torch.float16)
    out = torch.empty(s, s, device=DEV, dtype=torch.float16)
    grouped, tma = cfg("grouped"), cfg("tma")  # made once: a KernelConfig is a pydantic model
    rows = {
        "torch F.linear": lambda: F.linear(a, w),
        "torch F.linear + bias + gelu": lambda: F.gelu(F.linear(a, w, b)),
        "autokernel.matmul default": lambda: ak.matmul(a, w.t()),
        "autokernel.matmul grouped": lambda: ak.matmul(a, w.t(), config=grouped),
        "autokernel.matmul tma": lambda: ak.matmul(a, w.t(), config=tma),
        "autokernel.matmul default bias gelu": lambda: ak.matmul(a, w.t(), b, "gelu"),
        "autokernel.matmul grouped bias gelu out=": lambda: ak.matmul(a, w.t(), b, "gelu", config=grouped, out=out),
        "autokernel.linear bias gelu (no grad)": lambda: ak.linear(a, w, b, "gelu"),
    }
    for variant in ("grouped", "tma"):
        plan = api.gemm_plan(a, w.t(), None, "none", 0.01, cfg(variant))
        plan.fire(a, w.t(), out, None, None)  # compiles; later calls replay
        rows[f"cached plan {variant}: launch only (no alloc)"] = (
            lambda p=plan: p.fire(a, w.t(), out, None, None))
        if getattr(plan.launch, "direct", None) is not None:
            jit_run = api.GemmPlan(plan.shape, plan.dtype, plan.device, False, _without_direct(plan.launch))
            rows[f"cached plan {variant}: launch only, via CompiledKernel.run"] = (
                lambda p=jit_run: p.fire(a, w.t(), out, None, None))
            if variant == "grouped":  # would passing addresses instead of tensors pay? (not adopted)
                operands = (a, w.t(), out, out, out)
                rows["C launch by hand: tensors"] = _by_hand(plan.launch, operands, False)
                rows["C launch by hand: data_ptr() ints"] = _by_hand(plan.launch, operands, True)
    for name, fn in rows.items():
        row("256^3 fp16 wall/call", name, wall_us(fn, 3000))
    for name in ("torch F.linear + bias + gelu", "autokernel.matmul grouped", "autokernel.matmul tma"):
        row("256^3 fp16 GPU/call (graph)", name, graph_us(rows[name]))
    for name in ("autokernel.matmul grouped", "autokernel.matmul tma"):
        _profile(name, rows[name])


def _by_hand(launch, tensors, as_ints):
    """The direct launch spelled out, its pointers passed as tensors or as addresses."""
    g, (function, cooperative, pdl, packed), tail = launch.grid, launch.head, launch.args_tail

    def call():
        stream = torch._C._cuda_getCurrentRawStream(launch.device_index)
        args = [t.data_ptr() for t in tensors] if as_ints else tensors
        launch.direct(g[0], g[1], g[2], stream, function, cooperative, pdl, None, None, packed, None, None, None,
                      *args, *tail)
    return call


def _without_direct(launch):
    """A copy of ``launch`` that replays through CompiledKernel.run (the path before the direct one)."""
    import copy

    twin = copy.copy(launch)
    twin.direct = None
    return twin


def _profile(title, fn, n=2000):
    """Where a call's host time goes (cProfile: Python frames, and C calls made from them)."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(10)
    lines = [ln for ln in text.getvalue().splitlines() if ln.strip()][-11:]
    print(f"==== {LABEL}cProfile {title}, {n} calls (tottime s)\n" + "\n".join(lines), flush=True)


def _step_inputs(s: int = 256):
    """x, w, b (with grad) and the output gradient dy of an s x s x s fp16 training step."""
    dt = torch.float16
    x = torch.randn(s, s, device=DEV, dtype=dt, requires_grad=True)
    w = torch.randn(s, s, device=DEV, dtype=dt, requires_grad=True)
    b = torch.randn(s, device=DEV, dtype=dt, requires_grad=True)
    return x, w, b, torch.randn(s, s, device=DEV, dtype=dt)


def section_ratios(versions):
    """Ratios that survive the host's drift (back-to-back rows of one run moved by up to
    30 %): every candidate is timed in each of ROUNDS rounds, in an order rotated per
    round; per round, its time over the reference's; the median of those ratios."""
    rounds = 15
    x, w, b, dy = _step_inputs()
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    steps = {"torch autograd step": lambda: torch.autograd.grad(F.gelu(F.linear(x, w, b)), (x, w, b), dy)}
    calls = {"torch F.linear + bias + gelu": lambda: F.gelu(F.linear(xd, wd, bd))}
    for package, label in versions:
        use(package, label)
        grouped, tma = cfg("grouped"), cfg("tma")
        steps[f"{label}autokernel step"] = (
            lambda m=ak: torch.autograd.grad(m.linear(x, w, b, "gelu"), (x, w, b), dy))
        calls[f"{label}autokernel.matmul default bias gelu"] = lambda m=ak: m.matmul(xd, wd.t(), bd, "gelu")
        calls[f"{label}autokernel.linear bias gelu"] = lambda m=ak: m.linear(xd, wd, bd, "gelu")
        calls[f"{label}autokernel.matmul grouped"] = lambda m=ak, c=grouped: m.matmul(xd, wd.t(), config=c)
        calls[f"{label}autokernel.matmul tma"] = lambda m=ak, c=tma: m.matmul(xd, wd.t(), config=c)
    global LABEL
    LABEL = ""  # the candidates' names carry their versions
    for tag, group, n in (("train 256^3 fp16 gelu", steps, 200), ("256^3 fp16 wall/call", calls, 1000)):
        names = list(group)
        times = {name: [] for name in names}
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(wall_us(group[name], n))
        ref = names[0]
        for name in names:
            ratios = sorted(t / t0 for t, t0 in zip(times[name], times[ref]))
            row(f"ratios, {tag}, {rounds} rounds", f"{name}: median", sorted(times[name])[rounds // 2])
            row(f"ratios, {tag}, {rounds} rounds", f"{name} / {ref}: median of rounds", ratios[rounds // 2], "x")
        for label in {label for _, label in versions}:
            tma_, grouped_ = times.get(f"{label}autokernel.matmul tma"), times.get(f"{label}autokernel.matmul grouped")
            if tma_ and grouped_:
                ratios = sorted(t / g for t, g in zip(tma_, grouped_))
                row(f"ratios, {tag}, {rounds} rounds", f"{label}matmul tma / grouped: median of rounds",
                    ratios[rounds // 2], "x")


def section_shapes():
    for (m, n, k) in ((1024, 4096, 4096), (2048, 2048, 1024), (16, 4096, 4096)):
        for dtype in (torch.float16, torch.bfloat16):
            x = torch.randn(m, k, device=DEV, dtype=dtype) / k ** 0.5
            w = torch.randn(n, k, device=DEV, dtype=dtype)
            b = torch.randn(n, device=DEV, dtype=dtype)
            fns = {
                "cuBLAS F.linear": lambda: F.linear(x, w),
                "autokernel.linear": lambda: ak.linear(x, w),
                "torch F.linear + bias + gelu": lambda: F.gelu(F.linear(x, w, b)),
                "autokernel.linear bias gelu": lambda: ak.linear(x, w, b, "gelu"),
            }
            tag = f"{m}x{n}x{k} {str(dtype)[6:]}"
            for name, fn in fns.items():
                row(tag, f"{name} wall/call", wall_us(fn, 300))
                row(tag, f"{name} GPU/call (graph)", graph_us(fn))


def section_training():
    x, w, b, dy = _step_inputs()

    def ours():
        torch.autograd.grad(ak.linear(x, w, b, "gelu"), (x, w, b), dy)

    def theirs():
        torch.autograd.grad(F.gelu(F.linear(x, w, b)), (x, w, b), dy)

    row("train 256^3 fp16 gelu", "torch autograd step", wall_us(theirs, 1000))
    row("train 256^3 fp16 gelu", "autokernel step (LinearFunction)", wall_us(ours, 1000))
    row("train 256^3 fp16 gelu", "torch forward, grad on", wall_us(lambda: F.gelu(F.linear(x, w, b)), 1000))
    row("train 256^3 fp16 gelu", "autokernel forward, grad on", wall_us(lambda: ak.linear(x, w, b, "gelu"), 1000))
    xd, wd, bd = x.detach(), w.detach(), b.detach()
    y, z = linear_forward(xd, wd, bd, "gelu", 0.01, None)
    row("train 256^3 fp16 gelu", "linear_forward + linear_backward, no autograd", wall_us(lambda: (
        linear_forward(xd, wd, bd, "gelu", 0.01, None),
        linear_backward(dy, xd, wd, z, "gelu", 0.01, needs=(True, True, True))), 1000))
    row("train 256^3 fp16 gelu", "linear_backward alone", wall_us(
        lambda: linear_backward(dy, xd, wd, z, "gelu", 0.01, needs=(True, True, True)), 1000))
    yk = ak.linear(x, w, b, "gelu")
    row("train 256^3 fp16 gelu", "autokernel autograd.grad of a kept graph", wall_us(
        lambda: torch.autograd.grad(yk, (x, w, b), dy, retain_graph=True), 1000))
    yt = F.gelu(F.linear(x, w, b))
    row("train 256^3 fp16 gelu", "torch autograd.grad of a kept graph", wall_us(
        lambda: torch.autograd.grad(yt, (x, w, b), dy, retain_graph=True), 1000))
    _profile("autokernel forward, grad on", lambda: ak.linear(x, w, b, "gelu"))
    _profile("linear_backward alone", lambda: linear_backward(dy, xd, wd, z, "gelu", 0.01, needs=(True, True, True)))
    _training_diagnostics(x, w, b, dy, ours)


class _Double(torch.autograd.Function):
    """The smallest Python autograd node: what the engine costs around any Function."""

    @staticmethod
    def forward(ctx, t):
        return t * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _training_diagnostics(x, w, b, dy, step):
    """Where the step's host time goes: the engine around a Python node, GIL, GC."""
    import gc
    import sys

    LinearFunction = autograd.LinearFunction
    tag = "train 256^3 diagnostics"
    for dev in ("cuda", "cpu"):
        t = torch.randn(256, 256, device=dev, requires_grad=True)
        g = torch.randn(256, 256, device=dev)
        y_fn, y_op = _Double.apply(t), t * 2
        row(tag, f"{dev}: autograd.grad through a Python Function (t*2)", wall_us(
            lambda: torch.autograd.grad(y_fn, (t,), g, retain_graph=True), 1000))
        row(tag, f"{dev}: autograd.grad through torch's t*2", wall_us(
            lambda: torch.autograd.grad(y_op, (t,), g, retain_graph=True), 1000))
    inside = [0.0, 0]
    real = LinearFunction.backward

    def timed(ctx, grad_y):
        t0 = time.perf_counter()
        r = real(ctx, grad_y)
        inside[0] += time.perf_counter() - t0
        inside[1] += 1
        return r

    LinearFunction.backward = staticmethod(timed)
    total = wall_us(step, 500)
    LinearFunction.backward = staticmethod(real)
    row(tag, "step, instrumented", total)
    row(tag, "  of which inside LinearFunction.backward (autograd's thread)", inside[0] / inside[1] * 1e6)
    gc.disable()
    row(tag, "step, gc disabled", wall_us(step, 1000))
    gc.enable()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    row(tag, "step, GIL switch interval 1 us", wall_us(step, 1000))
    sys.setswitchinterval(interval)
    # Backward GEMMs that take the TMA kernel run in autograd's device thread, where
    # Triton's allocator (a ContextVar) must be found too.
    xt = torch.randn(512, 256, device=DEV, dtype=torch.float16, requires_grad=True)
    wt = torch.randn(1024, 256, device=DEV, dtype=torch.float16, requires_grad=True)
    gt = torch.randn(512, 1024, device=DEV, dtype=torch.float16)
    got = torch.autograd.grad(ak.linear(xt, wt, None, "gelu"), (xt, wt), gt)
    xf, wf = xt.detach().float().requires_grad_(), wt.detach().float().requires_grad_()
    want = torch.autograd.grad(F.gelu(F.linear(xf, wf)), (xf, wf), gt.float())
    errs = [rel(a_, b_) for a_, b_ in zip(got, want)]
    print(f"[check] backward 512x1024x256 (dW on TMA) rel_err dX {errs[0]:.2e} dW {errs[1]:.2e} "
          f"{'OK' if max(errs) < 1e-2 else 'FAIL'}", flush=True)


def _models(blocks: int, d=256, ffn=1024):
    """``blocks`` x (Linear, GELU, Linear) in torch, and its twin on autokernel layers
    sharing its parameters (GELU fused into the first Linear of each block)."""
    torch.manual_seed(0)
    layers = []
    for _ in range(blocks):
        layers += [torch.nn.Linear(d, ffn), torch.nn.GELU(), torch.nn.Linear(ffn, d)]
    ref = torch.nn.Sequential(*layers).to(DEV, torch.float16)
    ours = ak.nn.swap_linear(torch.nn.Sequential(*[m for m in ref]))
    return ref, ours


def section_compile():
    import torch._dynamo

    x = torch.randn(256, 256, device=DEV, dtype=torch.float16)
    for blocks in (1, 4):
        ref, ours = _models(blocks)
        tag = f"compile {blocks}x(256->1024->256) fp16 x[256,256], no grad"
        torch._dynamo.reset()
        row(tag, "graph breaks, autokernel model forward", torch._dynamo.explain(ours)(x).graph_break_count, "breaks")
        xg = x.clone().requires_grad_()
        torch._dynamo.reset()
        explain = torch._dynamo.explain(lambda t: ours(t).float().square().sum())(xg)
        row(tag, "graph breaks, autokernel model loss (training)", explain.graph_break_count, "breaks")
        torch._dynamo.reset()
        with torch.no_grad():
            expect = ref(x)
            variants = {
                "torch eager": ref,
                "autokernel eager": ours,
                "torch compile default": torch.compile(ref),
                "autokernel compile default (fullgraph)": torch.compile(ours, fullgraph=True),
                "torch compile reduce-overhead": torch.compile(ref, mode="reduce-overhead"),
                "autokernel compile reduce-overhead (fullgraph)":
                    torch.compile(ours, mode="reduce-overhead", fullgraph=True),
            }
            for name, model in variants.items():
                for _ in range(5):
                    y = model(x)
                torch.cuda.synchronize()
                print(f"[compile] {blocks} blocks {name}: rel err vs torch eager {rel(y, expect):.2e}", flush=True)
                row(tag, name, wall_us(lambda: model(x), 1000))
                if blocks == 1 and "reduce-overhead" in name:  # where a replayed call's host time goes
                    _profile(f"{blocks} block {name}", lambda: model(x), 500)
        if blocks == 1:  # a compiled training step: forward + backward through the registered ops
            torch._dynamo.reset()
            step = torch.compile(lambda t: ours(t).float().square().sum(), fullgraph=True)
            step_ref = torch.compile(lambda t: ref(t).float().square().sum())
            for name, fn in (("torch compiled fwd+bwd", step_ref), ("autokernel compiled fwd+bwd (fullgraph)", step)):
                for _ in range(3):
                    fn(xg).backward()
                row("compile training step, 1 block", name, wall_us(lambda: fn(xg).backward(), 300))


def main(argv: list[str] | None = None) -> int:
    sections = {"correctness": section_correctness, "ratios": section_ratios, "host": section_host_256,
                "shapes": section_shapes, "training": section_training, "compile": section_compile}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(sections), help="comma-separated, of: " + ", ".join(sections))
    parser.add_argument("--before", help="package name of an older autokernel to measure beside this one")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("launch_overhead.py needs a CUDA GPU: it times the launch path on the device", file=sys.stderr)
        return 2
    versions = [(args.before, "before "), ("autokernel", "after ")] if args.before else [("autokernel", "")]
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}", flush=True)
    for name in args.sections.split(","):
        if name == "ratios":  # every version at once, interleaved
            try:
                section_ratios(versions)
            except Exception:
                traceback.print_exc()
            continue
        for package, label in versions:
            if name == "correctness" and package != "autokernel":
                continue  # checks the code under test only
            use(package, label)
            print(f"#### {label}{name}: {package} from {os.path.dirname(ak.__file__)}", flush=True)
            try:
                sections[name]()
            except Exception:  # one broken section must not hide the others' figures
                traceback.print_exc()
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, os.environ.get("TSV_NAME", "launch_overhead.tsv")), "w") as f:
            for r in RESULTS:
                f.write("\t".join(map(str, r)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
