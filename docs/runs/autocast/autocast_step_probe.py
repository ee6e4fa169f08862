"""Mixed-precision training steps under torch.autocast (float32 weights): an MLP block of
torch.nn.Linear layers against the same block swapped to autokernel.nn.Linear, side by
side. Checks the loss and every weight gradient against torch's, then times a step
(forward + backward, no optimizer) per model two ways: the two models interleaved over
rounds of 5 steps (CUDA events), and 50 steps of one model back to back, as a training loop
runs them (host clock, synchronized; 3 repeats in alternating order, median). The loss
is scaled by 2^16 before backward, as GradScaler does (float16 gradients underflow
without it). The control: the same blocks with bfloat16 weights and no autocast.
Usage: python3 docs/runs/autocast/autocast_step_probe.py OUT.jsonl"""
import copy, json, statistics, sys, time
import torch
import autokernel

SHAPES = [(8192, 4096, 14336), (4096, 4096, 11008), (2048, 1024, 4096), (512, 768, 3072)]  # tokens, d, hidden


def block(d, hidden):
    return torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, d)).cuda()


SCALE = 2.0 ** 16


def step(model, x, dtype):
    with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
        loss = model(x).float().square().mean()
    (loss * SCALE).backward()
    return loss.detach()


def main():
    out = open(sys.argv[1], "w")
    for dtype in (torch.bfloat16, torch.float16, None):  # None: bfloat16 weights, no autocast
        for tokens, d, hidden in SHAPES:
            torch.manual_seed(0)
            ref = block(d, hidden)
            if dtype is None:
                ref = ref.to(torch.bfloat16)
            ours = autokernel.nn.swap_linear(copy.deepcopy(ref))
            x = torch.randn(tokens, d, device="cuda", dtype=torch.bfloat16 if dtype is None else torch.float32)
            losses, grads = [], []
            for model in (ref, ours):
                model.zero_grad(set_to_none=True)
                losses.append(float(step(model, x, dtype)))
                grads.append([p.grad.float() for p in model.parameters()])
            grad_err = max(float((g - r).norm() / r.norm()) for g, r in zip(grads[1], grads[0]))
            times = {"torch": [], "autokernel": []}
            for model in (ref, ours):  # warm-up: compiles, plans
                for _ in range(3):
                    step(model, x, dtype)
            for rnd in range(10):
                for name, model in (("torch", ref), ("autokernel", ours))[:: 1 if rnd % 2 == 0 else -1]:
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(5):
                        step(model, x, dtype)
                    end.record()
                    torch.cuda.synchronize()
                    times[name].append(start.elapsed_time(end) / 5)
            med = {k: statistics.median(v) for k, v in times.items()}
            alone = {"torch": [], "autokernel": []}
            for rep in range(3):
                for name, model in (("torch", ref), ("autokernel", ours))[:: 1 if rep % 2 == 0 else -1]:
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for _ in range(50):
                        step(model, x, dtype)
                    torch.cuda.synchronize()
                    alone[name].append((time.perf_counter() - t0) / 50 * 1e3)
            alone = {k: statistics.median(v) for k, v in alone.items()}
            row = dict(dtype="bfloat16 weights, no autocast" if dtype is None else str(dtype).split(".")[1], tokens=tokens, d=d, hidden=hidden, loss_torch=losses[0],
                       loss_ours=losses[1], grad_rel_err=grad_err, step_ms=med,
                       torch_over_ours=med["torch"] / med["autokernel"], back_to_back_ms=alone,
                       back_to_back_torch_over_ours=alone["torch"] / alone["autokernel"])
            print(json.dumps(row), file=out, flush=True)
            print(f"{row['dtype']} {tokens}x{d}x{hidden}: loss {losses[0]:.5f} / {losses[1]:.5f}, grad rel err "
                  f"{grad_err:.2e}, step ms torch {med['torch']:.3f} ours {med['autokernel']:.3f} "
                  f"(torch / ours {row['torch_over_ours']:.3f}); back to back torch {alone['torch']:.3f} ours "
                  f"{alone['autokernel']:.3f} ({row['back_to_back_torch_over_ours']:.3f})", flush=True)


if __name__ == "__main__":
    main()
