"""Summary of probe.py's records: the merged order (half) and floor against before, by whether
the last group is merged (its rows at most half a group), how many groups remain, and waves.
Usage: python3 summary.py RECORDS.jsonl[.gz] ..."""
import gzip
import json, math, sys, collections
rows=[json.loads(l) for f in sys.argv[1:] for l in (gzip.open(f, 'rt') if f.endswith('.gz') else open(f))]
def gm(v): return math.exp(sum(math.log(x) for x in v)/len(v)) if v else float('nan')
by=collections.defaultdict(lambda: collections.defaultdict(list)); pick=collections.defaultdict(list); errs=[]
for r in rows:
    groups=collections.defaultdict(dict)
    for x in r["runs"]:
        groups[json.dumps(x["config"],sort_keys=True)][x["variant"]]=x
        if not x["timed"] or x["err"]>2e-2: errs.append((r["m"],r["n"],r["k"],x["variant"],x["err"]))
    for cj,v in groups.items():
        if not all("gpu_us" in v[k] for k in ("before","half","floor")): continue
        c=json.loads(cj); bm=c["block_m"]; G=c["group_m"]; rows_=-(-r["m"]//bm); rem=rows_%G
        tiles=rows_*-(-r["n"]//c["block_n"])
        hb=v["before"]["gpu_us"]/v["half"]["gpu_us"]; fb=v["before"]["gpu_us"]/v["floor"]["gpu_us"]
        key=("rem<=G/2" if rem*2<=G else "rem>G/2", "1grp" if rows_<2*G else "more", "multiwave" if tiles>132 else "onewave")
        by[key]["h"].append(hb); by[key]["f"].append(fb)
        if "pick" in v["before"]["roles"]:
            pick[key[0]].append((hb,fb,r["m"],r["n"],r["k"],c))
print("problems",len(rows),"errors/untimed",errs[:5], len(errs))
for key in sorted(by):
    h,f=by[key]["h"],by[key]["f"]
    print(key, len(h), f"half/before {gm(h):.4f} [{min(h):.3f},{max(h):.3f}]  floor/before {gm(f):.4f} [{min(f):.3f},{max(f):.3f}]")
for k,v in pick.items():
    print("picks", k, len(v), f"half {gm([x[0] for x in v]):.4f} min {min(x[0] for x in v):.3f} floor {gm([x[1] for x in v]):.4f} min {min(x[1] for x in v):.3f}")
allh=[x for k in by for x in by[k]["h"]]; allf=[x for k in by for x in by[k]["f"]]
print("all", len(allh), f"half {gm(allh):.4f} floor {gm(allf):.4f}; half <0.98: {sum(x<0.98 for x in allh)}, >1.02: {sum(x>1.02 for x in allh)}; floor <0.98 {sum(x<0.98 for x in allf)} >1.02 {sum(x>1.02 for x in allf)}")
