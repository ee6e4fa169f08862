"""Replay (CPU) of a DRAM term in which the last round of tiles streams through the SMs it holds:
the whole rounds at the config's bandwidth, then the last round's tiles at the slower of that and
one SM's reach, its bytes in flight (stages x (BM + BN) x BK x itemsize) per L_US of latency.
The model is refitted on the shipped model's twelve files with the term (and its errors), then
replayed on the held-out H100 draws (`check_random_h100_22` to `_27`), or, with H200=1, carried
to the H200 by the datasheets and replayed on the six H200 sweeps. L_US 0: the shipped formula,
refitted the same way. docs/selector.md, "The last round of tiles through fewer SMs".
Usage: [H200=1] python3 docs/runs/select/tail_memory_replay.py L_US [L_US ...]"""
import sys, inspect, math, collections, time
sys.path.insert(0, "benchmarks")
import fit_selector as fs
from autokernel import select, best
from autokernel.config import KernelConfig
from autokernel.records import torch_dtype
FIT_FILES = """benchmarks/results/select_refit_sweep_h100.jsonl.gz benchmarks/results/select_splitk_resweep_h100.jsonl.gz
benchmarks/results/select_thin_tma_h100.jsonl.gz benchmarks/results/check_broad_h100_3.jsonl.gz
benchmarks/results/check_broad_h100_9.jsonl.gz benchmarks/results/select_w4s5_fit_h100.jsonl
benchmarks/results/check_random_h100_17.jsonl benchmarks/results/check_random_h100_18.jsonl
benchmarks/results/check_random_h100_19.jsonl benchmarks/results/check_random_h100_20.jsonl
benchmarks/results/check_random_h100_21.jsonl benchmarks/results/select_train_fit_h100.jsonl""".split()
import os
H200 = os.environ.get("H200")
HELD = ["benchmarks/results/check_random_h200_3.jsonl","benchmarks/results/check_random_h200_4.jsonl","benchmarks/results/check_random_h200_5.jsonl","benchmarks/results/check_random_h200_sibling.jsonl","benchmarks/results/check_random_h200_sibling_2.jsonl","benchmarks/results/check_broad_h200_1.jsonl.gz"] if H200 else [f"benchmarks/results/check_random_h100_{i}.jsonl" for i in range(22, 28)]
L = {"us": 0.0}
select._TAIL_L = L

# --- patched choose
src = inspect.getsource(select.choose)
old = "        memory = (nbytes0 + partials * split if split > 1 else nbytes0) * p.inv_bandwidth\n"
assert old in src
new = old + """        if _TAIL_L["us"] > 0 and p.kind != "streamk" and not cut:
            mbytes = nbytes0 + partials * split if split > 1 else nbytes0
            full_r = -(-units // programs) - 1
            t_last = units - full_r * programs
            s_u = mbytes / units
            inflight = p.config.num_stages * (bm + bn) * bk * itemsize
            memory = full_r * programs * s_u * p.inv_bandwidth + max(t_last * s_u * p.inv_bandwidth, s_u * _TAIL_L["us"] / inflight)
"""
exec(compile(src.replace(old, new), "choose", "exec"), select.__dict__)

# --- patched fit
src = inspect.getsource(select.fit)
o1 = '            data.append((index[key], (*f, float(b_row_major(row.get("layout", "nt"))), row["gpu_ms"] * 1e3)))\n'
n1 = '''            units = -(-row["m"] // config.block_m) * -(-row["n"] // config.block_n) * config.split_k
            tail_ok = float(kernel_kind(config, tma) != "streamk")
            inflight = config.num_stages * (config.block_m + config.block_n) * config.block_k * dtype.itemsize
            data.append((index[key], (*f, float(b_row_major(row.get("layout", "nt"))), float(units), float(inflight), tail_ok, row["gpu_ms"] * 1e3)))
'''
o2 = "    waves, k_per, nbytes, l2_bytes, b_rows, t = x.unbind(1)\n"
n2 = "    waves, k_per, nbytes, l2_bytes, b_rows, units_, inflight_, tail_ok_, t = x.unbind(1)\n"
o3 = "        memory = nbytes / (COPY_BANDWIDTH * e) * 1e6\n"
n3 = '''        memory = nbytes / (COPY_BANDWIDTH * e) * 1e6
        if _TAIL_L["us"] > 0:
            full_r = torch.ceil(units_ / programs) - 1
            t_last = units_ - full_r * programs
            s_u = nbytes / units_
            inv = 1e6 / (COPY_BANDWIDTH * e)
            tailm = full_r * programs * s_u * inv + torch.maximum(t_last * s_u * inv, s_u * _TAIL_L["us"] / inflight_)
            memory = torch.where(tail_ok_ > 0, tailm, memory)
'''
s = inspect.getsource(select.fit)
for a, b in ((o1, n1), (o2, n2), (o3, n3)):
    assert a in s, a
    s = s.replace(a, b)
exec(compile(s, "fit", "exec"), select.__dict__)

def errors(model, rows):
    sq = collections.defaultdict(list)
    for row in rows:
        if row.get("config") is None or not row.get("gpu_ms") or row.get("status", "success") != "success": continue
        c = KernelConfig.from_dict(row["config"])
        if select._tail_twin(c): continue
        dt = torch_dtype(row["dtype"]); tma = select.tma_aligned(row["m"], row["n"], row["k"], dt, row.get("layout", "nt"))
        found = model.constants_for(c, tma)
        if found is None or select._left_out(c, row, tma): continue
        us = select.predict_us(model, c, row["m"], row["n"], row["k"], dt, tma=tma, layout=row.get("layout", "nt"))
        if us: sq[select.config_id(found[1])].append(math.log(us / (row["gpu_ms"] * 1e3)) ** 2)
    return {k: math.sqrt(sum(v) / len(v)) for k, v in sq.items()}

fit_rows = fs.read_rows(FIT_FILES)
held = collections.defaultdict(list)
for r in fs.read_rows(HELD): held[fs.shape_key(r)].append(r)
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
for l_us in map(float, sys.argv[1:]):
    L["us"] = l_us; t0 = time.time()
    m0 = select.Model("NVIDIA H100 80GB HBM3", 132, select.fit(fit_rows, 132))
    model = select.Model(m0.device, 132, m0.constants, errors(m0, fit_rows))
    if H200: model = select.carried(model, "NVIDIA H200", 132, 4.8 / 3.35, 1.0)
    res = [x for x in (fs.judge(model, k, held[k], rule) for k in sorted(held)) if x]
    pb = [x[1] for x in res]; pd = [x[2] for x in res]
    # held-out RMS log error over all non-tail rows
    err = []
    for k, rows in held.items():
        for row in rows:
            if not row.get("config") or not row.get("gpu_ms"): continue
            c = KernelConfig.from_dict(row["config"])
            if select._tail_twin(c): continue
            dt = torch_dtype(row["dtype"]); tma = select.tma_aligned(row["m"], row["n"], row["k"], dt, row["layout"])
            if model.constants_for(c, tma) is None: continue
            us = select.predict_us(model, c, row["m"], row["n"], row["k"], dt, tma=tma, layout=row["layout"], activation=row.get("activation", "none"))
            if us: err.append(math.log(us / (row["gpu_ms"] * 1e3)))
    g = math.exp(sum(map(math.log, pb)) / len(pb))
    print(f"L={l_us:4.1f}us held-out: pick/best {g:.4f} >=0.90 {sum(x >= 0.9 for x in pb)}/{len(pb)} losses>2% {sum(x < 0.98 for x in pd)} RMS {math.sqrt(sum(e*e for e in err)/len(err)):.4f} ({time.time()-t0:.0f}s)", flush=True)
