"""GPU: forward + backward of autokernel.nn.Linear against torch autograd, and one
training step of a small transformer with its Linear layers swapped.

Run on the device (see scripts/device_env.sh):
    . scripts/device_env.sh && python3 scripts/bench_backward.py [--quick] [--out DIR]

Prints, in one run: a gradient check per dtype and activation; a table of
forward+backward and backward-only medians (triton.testing.do_bench, L2 cleared) for
torch.nn.Linear (+ torch activation) and autokernel.nn.Linear (activation fused) at
2048/4096/8192 cubed, fp16 and bf16, on random data; a breakdown of the backward GEMMs
at 8192; and the transformer step (loss and every parameter gradient against torch).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys

import torch
import triton

import autokernel
import autokernel.autograd
from autokernel.autograd import linear_backward
from autokernel.config import KernelConfig
from autokernel.evaluate import reference_activation

COMMAND = ". scripts/device_env.sh && python3 scripts/bench_backward.py"
SLOPE = 0.01


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    got, ref = got.detach().float(), ref.detach().float()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-30))


def make_layers(size: int, dtype: torch.dtype, activation: str):
    ours = autokernel.nn.Linear(size, size, activation=activation, slope=SLOPE, device="cuda", dtype=dtype)
    ref = torch.nn.Linear(size, size, device="cuda", dtype=dtype)
    ref.load_state_dict(ours.state_dict())

    def torch_forward(x):
        return reference_activation(ref(x), activation, SLOPE)

    return ours, ref, torch_forward


def check_gradients() -> list[dict]:
    """Every gradient against float32 torch autograd on upcast inputs, odd shapes.

    float32 runs as tf32 in the kernels: relu / leaky_relu derivatives then flip where
    |Z| is within tf32 error of 0, a few 1e-4 of the elements, ~2e-2 relative RMSE.
    """
    rows = []
    m, n, k = 1000, 1536, 777
    for dtype, tol in ((torch.float16, 1e-2), (torch.bfloat16, 3e-2), (torch.float32, 3e-2)):
        for act in autokernel.ACTIVATIONS:
            x = torch.randn(m, k, device="cuda", dtype=dtype, requires_grad=True)
            w = (torch.randn(n, k, device="cuda") / k**0.5).to(dtype).requires_grad_()
            b = torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
            y = autokernel.linear(x, w, b, act, slope=SLOPE)
            g = torch.randn_like(y)
            grads = torch.autograd.grad(y, (x, w, b), g)
            xr, wr, br = (t.detach().float().requires_grad_() for t in (x, w, b))
            yr = reference_activation(torch.nn.functional.linear(xr, wr, br), act, SLOPE)
            refs = torch.autograd.grad(yr, (xr, wr, br), g.float())
            errs = [rel(y, yr)] + [rel(a, r) for a, r in zip(grads, refs)]
            rows.append({"dtype": str(dtype)[6:], "activation": act, "y": errs[0], "dx": errs[1],
                         "dw": errs[2], "db": errs[3], "ok": max(errs) < tol})
    return rows


def time_layer(size: int, dtype: torch.dtype, activation: str) -> dict:
    ours, ref, torch_forward = make_layers(size, dtype, activation)
    x = torch.randn(size, size, device="cuda", dtype=dtype, requires_grad=True)
    g = torch.randn(size, size, device="cuda", dtype=dtype)
    params_ours = (x, ours.weight, ours.bias)
    params_ref = (x, ref.weight, ref.bias)

    def step(forward, params):
        return lambda: torch.autograd.grad(forward(x), params, g)

    row = {"size": size, "dtype": str(dtype)[6:], "activation": activation}
    row["torch_fwd_bwd"] = bench(step(torch_forward, params_ref))
    row["ours_fwd_bwd"] = bench(step(ours, params_ours))
    y_ref, y_ours = torch_forward(x), ours(x)
    row["torch_bwd"] = bench(lambda: torch.autograd.grad(y_ref, params_ref, g, retain_graph=True))
    row["ours_bwd"] = bench(lambda: torch.autograd.grad(y_ours, params_ours, g, retain_graph=True))
    return row


def breakdown(size: int, dtype: torch.dtype) -> dict:
    """The pieces of forward and backward at one size (ms, medians)."""
    from autokernel.kernels.backward import plan_activation_grad

    def grad_pass(dy, z, act):
        """The elementwise pass as backward runs it: dZ = dY * act'(Z) and db's sums."""
        launch = plan_activation_grad(dy, z, dy, act, SLOPE, True, False)

        def run():
            dz = torch.empty_like(dy)
            partial = torch.empty((launch.grid[0], dy.shape[1]), dtype=torch.float32, device=dy.device)
            launch(dy, z if z is not None else dy, dz, partial)
            return partial.sum(0, dtype=dtype)

        return run

    x = torch.randn(size, size, device="cuda", dtype=dtype)
    w = torch.randn(size, size, device="cuda", dtype=dtype) / size**0.5
    b = torch.randn(size, device="cuda", dtype=dtype)
    dy = torch.randn(size, size, device="cuda", dtype=dtype)
    z = torch.randn(size, size, device="cuda", dtype=dtype)
    out = {
        "torch mm dX": bench(lambda: dy @ w),
        "torch mm dW": bench(lambda: dy.t() @ x),
        "ours GEMM dX": bench(lambda: linear_backward(dy, x, w, None, "none", SLOPE, needs=(True, False, False))),
        "ours GEMM dW": bench(lambda: linear_backward(dy, x, w, None, "none", SLOPE, needs=(False, True, False))),
        "torch db = dY.sum(0)": bench(lambda: dy.sum(0)),
        "ours db (column sums)": bench(lambda: linear_backward(dy, x, w, None, "none", SLOPE,
                                                               needs=(False, False, True), bias_dtype=dtype)[2]),
    }
    for act in ("leaky_relu", "gelu"):
        grad_fn = {"leaky_relu": lambda: torch.ops.aten.leaky_relu_backward(dy, z, SLOPE, False),
                   "gelu": lambda: torch.ops.aten.gelu_backward(dy, z)}[act]
        out[f"{act}: torch act backward"] = bench(grad_fn)
        out[f"{act}: torch act backward + db"] = bench(lambda: grad_fn().sum(0))
        out[f"{act}: ours dZ + db pass"] = bench(grad_pass(dy, z, act))
    with torch.no_grad():
        out["torch fwd addmm+gelu"] = bench(lambda: torch.nn.functional.gelu(torch.addmm(b, x, w.t())))
        out["ours fwd gelu, no grad"] = bench(lambda: autokernel.linear(x, w, b, "gelu"))
        out["ours fwd gelu, Z saved"] = bench(lambda: autokernel.autograd.linear_forward(x, w, b, "gelu", SLOPE, None))
    return out


def config_sweep(size: int, dtype: torch.dtype) -> list[dict]:
    """A few configs for the dX and dW GEMMs at one size (ms)."""
    x = torch.randn(size, size, device="cuda", dtype=dtype)
    w = torch.randn(size, size, device="cuda", dtype=dtype) / size**0.5
    dy = torch.randn(size, size, device="cuda", dtype=dtype)
    candidates = [
        KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3),
        KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=4),
        KernelConfig(block_m=256, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3),
        KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4),
    ]
    rows = []
    for cfg in candidates:
        row = {"config": cfg.short()}
        for name, needs in (("dX", (True, False, False)), ("dW", (False, True, False))):
            try:
                row[name] = bench(lambda: linear_backward(
                    dy, x, w, None, "none", SLOPE, needs=needs, dx_config=cfg, dw_config=cfg))
            except Exception as exc:  # a config that does not fit is a row, not a crash
                row[name] = f"{type(exc).__name__}"
        rows.append(row)
    return rows


def forward_variants(size: int, dtype: torch.dtype) -> dict:
    """The cost of saving Z for gelu: the GEMM epilogue storing Z beside Y (ms)."""
    from autokernel.api import launch
    from autokernel.config import default_config

    x = torch.randn(size, size, device="cuda", dtype=dtype)
    w = torch.randn(size, size, device="cuda", dtype=dtype) / size**0.5
    b = torch.randn(size, device="cuda", dtype=dtype)
    y, z = torch.empty_like(x), torch.empty_like(x)
    cfg = default_config(size, size, size, dtype)
    return {
        f"{size} GEMM + bias + gelu, one store": bench(lambda: launch(x, w.t(), y, b, "gelu", SLOPE, cfg)),
        f"{size} GEMM + bias + gelu, Z stored too": bench(lambda: launch(x, w.t(), y, b, "gelu", SLOPE, cfg, z=z)),
    }


def host_overhead(size: int = 256, steps: int = 200) -> dict:
    """Host microseconds per forward+backward step at a size where the GPU idles."""
    import cProfile
    import io
    import pstats
    import time

    out = {}
    for name in ("torch", "ours"):
        ours, ref, torch_forward = make_layers(size, torch.float16, "gelu")
        forward, params = (ours, (ours.weight, ours.bias)) if name == "ours" else (torch_forward, (ref.weight, ref.bias))
        x = torch.randn(size, size, device="cuda", dtype=torch.float16, requires_grad=True)
        g = torch.randn(size, size, device="cuda", dtype=torch.float16)
        params = (x, *params)
        for _ in range(20):
            torch.autograd.grad(forward(x), params, g)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            torch.autograd.grad(forward(x), params, g)
        torch.cuda.synchronize()
        out[f"{name} us/step"] = (time.perf_counter() - t0) / steps * 1e6
        if name == "ours":
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(steps):
                torch.autograd.grad(forward(x), params, g)
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
            out["profile"] = text.getvalue()[-3500:]
    return out


def transformer_step(dtype: torch.dtype) -> dict:
    """One training step of a small Llama (random weights) against its swapped copy."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=2048, hidden_size=512, intermediate_size=1376, num_hidden_layers=2,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256)
    torch.manual_seed(0)
    ref = LlamaForCausalLM(cfg).to("cuda", dtype)
    ours = autokernel.nn.swap_linear(copy.deepcopy(ref))
    swapped = sum(isinstance(m, autokernel.nn.Linear) for m in ours.modules())
    ids = torch.randint(0, cfg.vocab_size, (4, 128), device="cuda")
    out = {"dtype": str(dtype)[6:], "linear_layers_swapped": swapped}
    losses = {}
    for name, model in (("torch", ref), ("ours", ours)):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        losses[name] = loss.item()
    out["loss_torch"], out["loss_ours"] = losses["torch"], losses["ours"]
    errs = {n: rel(p.grad, q.grad) for (n, p), q in zip(ours.named_parameters(), ref.parameters())}
    out["max_grad_rel_err"] = max(errs.values())
    out["worst_param"] = max(errs, key=errs.get)
    tol = 1e-2 if dtype == torch.float32 else 5e-2
    out["ok"] = abs(losses["torch"] - losses["ours"]) <= tol * abs(losses["torch"]) and out["max_grad_rel_err"] < tol
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2048 only, no sweep")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"command: {COMMAND}{' --quick' if args.quick else ''}")
    results: dict = {"device": torch.cuda.get_device_name()}

    results["gradients"] = check_gradients()
    print("\ngradient check (rel. error vs fp32 torch autograd, 1000x1536x777, bias on):")
    for r in results["gradients"]:
        print(f"  {r['dtype']:9} {r['activation']:10} y {r['y']:.1e} dx {r['dx']:.1e} dw {r['dw']:.1e} "
              f"db {r['db']:.1e} {'ok' if r['ok'] else 'FAIL'}")

    for dtype in (torch.float32, torch.bfloat16):
        try:
            results[f"transformer_{str(dtype)[6:]}"] = t = transformer_step(dtype)
            print(f"\ntransformer step: {t}")
        except ImportError as exc:
            print(f"\ntransformer step skipped: {exc}")

    sizes = (2048,) if args.quick else (2048, 4096, 8192)
    rows = []
    for size in sizes:
        for dtype in (torch.float16, torch.bfloat16):
            for act in ("none", "leaky_relu", "gelu"):
                rows.append(time_layer(size, dtype, act))
                r = rows[-1]
                print(f"  {size} {r['dtype']} {act}: fwd+bwd torch {r['torch_fwd_bwd']:.3f} ours {r['ours_fwd_bwd']:.3f}"
                      f" | bwd torch {r['torch_bwd']:.3f} ours {r['ours_bwd']:.3f}", flush=True)
    results["timing"] = rows

    if not args.quick:
        results["breakdown_8192_fp16"] = bd = breakdown(8192, torch.float16)
        print("\nbackward pieces at 8192^3 fp16 (ms):")
        for key, v in bd.items():
            print(f"  {key:34} {v:.3f}")
        results["forward_variants"] = fv = {**forward_variants(4096, torch.float16),
                                            **forward_variants(8192, torch.float16)}
        print("\nforward variants for gelu, fp16 (ms):")
        for key, v in fv.items():
            print(f"  {key:34} {v:.3f}")
        results["host"] = host = host_overhead()
        print(f"\nhost time per fwd+bwd step at 256^3 fp16 gelu: torch {host['torch us/step']:.0f} us, "
              f"ours {host['ours us/step']:.0f} us\n{host['profile']}")
        results["config_sweep_8192_fp16"] = sweep = config_sweep(8192, torch.float16)
        print("\nconfig sweep at 8192^3 fp16 (ms):")
        for r in sweep:
            print("  " + "  ".join(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}" for k, v in r.items()))

    with open(os.path.join(args.out, "bench_backward.json"), "w") as f:
        json.dump(results, f, indent=1)

    print(f"\n{COMMAND}{' --quick' if args.quick else ''}")
    print("| size | dtype | act | torch fwd+bwd ms | ours fwd+bwd ms | speedup | torch bwd ms | ours bwd ms | speedup |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['size']} | {r['dtype']} | {r['activation']} | {r['torch_fwd_bwd']:.3f} | {r['ours_fwd_bwd']:.3f} | "
              f"{r['torch_fwd_bwd'] / r['ours_fwd_bwd']:.2f}x | {r['torch_bwd']:.3f} | {r['ours_bwd']:.3f} | "
              f"{r['torch_bwd'] / r['ours_bwd']:.2f}x |")
    ok = all(r["ok"] for r in results["gradients"]) and all(
        v["ok"] for k, v in results.items() if k.startswith("transformer_"))
    print("checks:", "all passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
