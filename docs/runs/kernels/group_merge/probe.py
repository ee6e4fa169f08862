"""Tile orders raced on the GPU, the same configs side by side with torch (GPU time, timing.race;
each run checked against a float32 reference first). Per problem: the selector's pick, the
default and four candidate tiles, where the mode's variants differ for them.

  orders: the grouped order with a small last group merged into the one before ("half"),
          against the order before (every GROUP_M rows of tiles a group, the last one whatever
          is left) and against merging whatever is left ("floor"); configs with more tile-rows
          than GROUP_M, not a multiple of it. Run from the commit that merged the groups, with
          the two other orders as package copies:
              git archive <the commit before> autokernel | tar -x -C .dev/before  # rename the folder
              # to autokernel_before, rewrite its imports (sed 's/\bautokernel\b/autokernel_before/g');
              # .dev/floor/autokernel_floor likewise from this commit, with `merged = full_groups > 0`
              PYTHONPATH=$PYTHONPATH:$PWD/.dev/before:$PWD/.dev/floor python3 probe.py orders SHAPES OUT 470
  groups: the same configs at GROUP_M 4, 8 and 16; configs with more than 4 rows of tiles and
          more tiles than SMs, split-K aside.
              python3 probe.py groups SHAPES OUT 400

SHAPES: random_shapes.py draws filtered as docs/kernel-notes.md says ("A small last group of
tile-rows merged into the one before")."""
import csv, json, sys, time, math
import torch
from autokernel import api, matmul
from autokernel.config import KernelConfig, default_config
from autokernel.timing import race

EXTRA = [KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=5, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="grouped")]
F = {"none": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
     "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01), "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}


def orders_mode():
    """(applies(config, m), variants: [(label, launch(config json) -> (matmul, config))], key of a variant)."""
    import autokernel_before, autokernel_floor  # the package copies
    def applies(c, m):
        rows = -(-m // c.block_m)
        return c.group_m > 1 and rows > c.group_m and rows % c.group_m != 0
    variants = [("before", lambda d: (autokernel_before.matmul, autokernel_before.KernelConfig.from_dict(d))),
                ("half", lambda d: (matmul, KernelConfig.from_dict(d))),
                ("floor", lambda d: (autokernel_floor.matmul, autokernel_floor.KernelConfig.from_dict(d)))]
    return applies, variants, "variant", lambda c: c.to_json()


def groups_mode():
    def applies(c, m, n):
        rows = -(-m // c.block_m)
        return rows > 4 and rows * -(-n // c.block_n) > 132 and c.split_k == 1
    variants = [(g, lambda d, g=g: (matmul, KernelConfig.from_dict({**d, "group_m": g}))) for g in (4, 8, 16)]
    return applies, variants, "group", lambda c: c.model_copy(update={"group_m": 8}).to_json()


def main(mode: str, shapes_path: str, out_path: str, budget: float) -> None:
    applies, variants, field, canon = orders_mode() if mode == "orders" else groups_mode()
    shapes = list(csv.DictReader(open(shapes_path)))
    out = open(out_path, "w")
    t0 = time.time()
    for i, s in enumerate(shapes):
        if time.time() - t0 > budget:
            print("budget out at", i, flush=True)
            break
        m, n, k = int(s["M"]), int(s["N"]), int(s["K"])
        dt, act, has_bias = getattr(torch, s["dtype"]), s["activation"], s["bias"] == "true"
        torch.manual_seed(i)
        sets = max(2, min(8, math.ceil(150e6 / ((m * k + n * k + m * n) * dt.itemsize))))
        ins = []
        for _ in range(sets):
            a = torch.randn(m, k, device="cuda", dtype=dt)
            w = torch.randn(n, k, device="cuda", dtype=dt)
            b = w.t() if s["layout"] == "nt" else torch.randn(k, n, device="cuda", dtype=dt)
            bias = torch.randn(n, device="cuda", dtype=dt) if has_bias else None
            ins.append((a, b, bias, torch.empty(m, n, device="cuda", dtype=dt)))
        a0, b0, bias0, c0 = ins[0]
        ref = F[act](a0.float() @ b0.float() + (bias0.float() if has_bias else 0))
        tma = api.tma_runs(a0, b0, c0)
        pick = api.resolve_config(None, m, n, k, dt, act, has_bias, a0.device, tma=tma, layout=s["layout"])
        roles = {}
        for name, c in [("pick", pick), ("default", default_config(m, n, k, dt, tma=tma))] + [("extra", c) for c in EXTRA]:
            if c.variant == "tma" and not tma:
                continue
            if applies(c, m) if mode == "orders" else applies(c, m, n):
                roles.setdefault(canon(c), []).append(name)
        if not roles:
            continue
        fns, meta = [], []
        for cj, names in roles.items():
            for label, launch in variants:
                mm, cfg = launch(json.loads(cj))
                try:
                    o = mm(a0, b0, bias0, act, config=cfg, out=c0.clone())
                    torch.cuda.synchronize()
                    err = float((o.float() - ref).norm() / ref.norm())
                except Exception as e:
                    err = f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
                it = [0]
                def fn(mm=mm, cfg=cfg, it=it):
                    x = ins[it[0] % sets]; it[0] += 1
                    mm(x[0], x[1], x[2], act, config=cfg, out=x[3])
                if isinstance(err, float):
                    fns.append(fn)
                meta.append({"config": json.loads(cfg.to_json()), "roles": names, field: label, "err": err,
                             "timed": isinstance(err, float)})
        it = [0]
        def tfn(it=it):
            x = ins[it[0] % sets]; it[0] += 1
            F[act](torch.addmm(x[2], x[0], x[1]) if has_bias else torch.mm(x[0], x[1]))
        fns.append(tfn)
        ms = race(fns, rounds=10, segment_ms=1.0)
        j = 0
        for r in meta:
            if r["timed"]:
                r["gpu_us"] = round(ms[j] * 1e3, 3); j += 1
        print(json.dumps(dict(m=m, n=n, k=k, dtype=s["dtype"], activation=act, bias=has_bias, layout=s["layout"],
                              torch_us=round(ms[-1] * 1e3, 3), runs=meta)), file=out, flush=True)
        print(i, f"{m}x{n}x{k}", s["dtype"], act, f"torch {ms[-1] * 1e3:.1f}", " | ".join(
            f"{'/'.join(r['roles'])} {KernelConfig.from_dict(r['config']).short()} {r[field]} {r.get('gpu_us')}"
            for r in meta), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
