"""Probe (CPU replay), not shipped: keep the default unless the predicted gain exceeds zp times
the RMS error of the predicted ratio of winner and default, measured pairwise on the
training shapes ("pair"), against the shipped rule, z times sqrt(e_winner^2 + e_default^2)
("indep"). docs/selector.md, "Keeping the default":

    python3 docs/runs/select/paired_errors.py <the five fitted files> --holdout <check_random_h100_8 to _21> \
        --rules "indep:0.3:0,indep:0.5:0,pair:0.3:0.5,pair:0.3:1.0,max:0.3:1.0"
"""
import sys, math, random, collections, json
sys.path.insert(0, "benchmarks")
import fit_selector as fs
from autokernel import select, best
from autokernel.config import KernelConfig
from autokernel.records import torch_dtype

def residuals(model, rows):
    """per shape key: {scored_as id: resid}, and the default's id"""
    out = collections.defaultdict(dict)
    dflt = {}
    for row in rows:
        if row.get("config") is None or not row.get("gpu_ms") or row.get("status", "success") != "success":
            continue
        config = KernelConfig.from_dict(row["config"])
        if select._tail_twin(config):
            continue
        dtype = torch_dtype(row["dtype"])
        tma = select.tma_aligned(row["m"], row["n"], row["k"], dtype, row.get("layout", "nt"))
        found = model.constants_for(config, tma)
        if found is None or select._left_out(config, row, tma):
            continue
        us = found[0].predict_us(*select.features(config, row["m"], row["n"], row["k"], dtype, tma, model.programs),
                                 b_rows=select.b_row_major(row.get("layout", "nt")))
        cid = select.config_id(found[1])
        r = math.log(us / (row["gpu_ms"] * 1e3))
        key = fs.shape_key(row)
        out[key][cid] = r
        if row.get("default"):
            dflt[key] = cid
    return out, dflt

def pair_errors(model, rows, min_n):
    res, dflt = residuals(model, rows)
    sq = collections.defaultdict(list)
    for key, d in res.items():
        did = dflt.get(key)
        if did is None or did not in d: continue
        for cid, r in d.items():
            if cid != did:
                sq[(cid, did)].append((r - d[did]) ** 2)
    return {k: math.sqrt(sum(v)/len(v)) for k, v in sq.items() if len(v) >= min_n}

def decide(found, errors, pairs, z, zp, mode):
    ch = found.choice
    scores = [(us, p, src) for us, p, src in ch.scores if us is not None]
    if not scores: return found.default
    bus, bp, bsrc = min(scores, key=lambda s: s[0])
    dsc = [s for s in scores if s[2] == "default"]
    if not dsc or bsrc == "default": return bp.config if dsc == [] else found.default
    dus, dp, _ = dsc[0]
    bid = select.config_id(bp.scored_as) if bp.scored_as else ""
    did = select.config_id(dp.scored_as) if dp.scored_as else ""
    emax = max(errors.values())
    indep = math.sqrt(errors.get(bid, emax) ** 2 + errors.get(did, emax) ** 2)
    gain = math.log(dus / bus)
    if mode == "indep":
        need = z * indep
    elif mode == "pair":
        need = zp * pairs[(bid, did)] if (bid, did) in pairs else z * indep
    elif mode == "max":
        need = max(z * indep, zp * pairs.get((bid, did), 0))
    return bp.config if gain > need else found.default

def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--holdout", nargs="*", default=[])
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--rules", default="indep:0.3:0,pair:0:1.0,pair:0:1.5,max:0.3:1.0")
    ap.add_argument("--min-n", type=int, default=8)
    args = ap.parse_args()
    rules = [(r.split(":")[0], float(r.split(":")[1]), float(r.split(":")[2])) for r in args.rules.split(",")]
    rows = fs.read_rows(args.sweeps)
    by = collections.defaultdict(list)
    for r in rows: by[fs.shape_key(r)].append(r)
    dev = rows[0]["device"]

    def judge_all(model, errors, pairs, keys, by_shape, results):
        for key in keys:
            rs = by_shape[key]
            r0 = rs[0]
            dtype = torch_dtype(r0["dtype"])
            tma = select.tma_aligned(r0["m"], r0["n"], r0["k"], dtype, r0["layout"])
            exact = {KernelConfig.from_dict(r["config"]): r for r in rs if r["config"] is not None and r.get("gpu_ms")}
            same = {fs.ran_as(c, tma): r for c, r in exact.items()}
            measured = lambda c: exact.get(c) or same.get(fs.ran_as(c, tma))
            found = best.pick(r0["m"], r0["n"], r0["k"], dtype, r0.get("activation", "none"), r0.get("bias", False),
                              r0["layout"], device=r0["device"], margin=0.0, z=0.0, fits=lambda c: measured(c) is not None,
                              rank=True, model=model)
            bestms = min(r["gpu_ms"] for r in rs if r["config"] is not None and r.get("gpu_ms"))
            d = measured(found.default)
            for rule in rules:
                c = decide(found, errors, pairs, rule[1], rule[2], rule[0])
                p = measured(c)
                results[rule].append((key, bestms / p["gpu_ms"], d["gpu_ms"] / p["gpu_ms"]))

    def fit(train):
        m0 = select.Model(dev, 132, select.fit(train, 132))
        errors = select.fit_errors(m0, train)
        pairs = pair_errors(m0, train, args.min_n)
        return m0, errors, pairs

    def show(title, results):
        print(title)
        for rule, res in results.items():
            g = fs.geomean(r[1] for r in res)
            print(f"  {rule}: pick/best {g:.4f}  >=0.90 {sum(r[1] >= 0.9 for r in res)}/{len(res)}  "
                  f"losses(>2% vs default) {sum(r[2] < 0.98 for r in res)}  pick/default {fs.geomean(r[2] for r in res):.4f}")
        sys.stdout.flush()

    if args.folds:
        shapes = sorted(by); random.Random(0).shuffle(shapes)
        results = collections.defaultdict(list)
        for fold in range(args.folds):
            held = set(shapes[fold::args.folds])
            m0, errors, pairs = fit([r for r in rows if fs.shape_key(r) not in held])
            judge_all(m0, errors, pairs, sorted(held), by, results)
        show(f"CV {args.folds} folds, {len(shapes)} shapes", results)
    if args.holdout:
        m0, errors, pairs = fit(rows)
        print(f"{len(pairs)} pairs with >= {args.min_n} shapes; median pair err "
              f"{sorted(pairs.values())[len(pairs)//2]:.3f}")
        allres = collections.defaultdict(list)
        for path in args.holdout:
            hr = fs.read_rows([path])
            hb = collections.defaultdict(list)
            for r in hr: hb[fs.shape_key(r)].append(r)
            results = collections.defaultdict(list)
            judge_all(m0, errors, pairs, sorted(hb), hb, results)
            for k, v in results.items(): allres[k] += v
        show("all held-out files", allres)

main()
