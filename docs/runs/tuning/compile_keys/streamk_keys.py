# Two GPUs tune the eight problems of benchmarks/multi_gpu.py, every Triton compile logged per
# process (sitecustomize.py beside this file); prints each compile a timing worker made itself
# and what differs from the same kernel and config compiled elsewhere. Run by streamk_keys.sh.
import argparse, importlib.util, json, os, sys, glob, collections, tempfile
from pathlib import Path
spec = importlib.util.spec_from_file_location("mg", "benchmarks/multi_gpu.py"); mg = importlib.util.module_from_spec(spec); spec.loader.exec_module(mg)
from autokernel.tuning.fleet import local_devices, parse_gpus
def main():
    args = argparse.Namespace(patience=3, max_trials=48, strategy="random", seed=0, max_generations=50, per_generation=8)
    devices = local_devices(parse_gpus("0,1"))
    probs = mg.problems(None, 8)
    os.environ["AK_RUN_LABEL"] = "many"
    with tempfile.TemporaryDirectory() as tmp:
        r = mg.one_run("many", probs, devices, Path(tmp), args)
    print("wall", r["wall_s"], {d: (s["seconds"]["timing"], s["compiled"]) for d, s in r["summary"].items()})
    recs = [json.loads(l) for f in glob.glob(os.environ["AK_COMPILE_LOG"] + "/*.jsonl") for l in open(f)]
    print(collections.Counter((x["proc"], x["cache_hit"]) for x in recs))
    json.dump(recs, open(sys.argv[1] + "/diag2_compiles.json", "w"))
    miss = [x for x in recs if not x["cache_hit"] and "timing" in (x["proc"] or "").lower()]
    print("timing-worker compiles:", len(miss))
    for m in miss:
        print("MISS", m["proc"], m["vis"], m["name"], m.get("hash"), m.get("stack"), m.get("constants", "")[:600], m.get("signature", "")[:300])
        same = [x for x in recs if x is not m and x["name"] == m["name"] and x.get("constants") == m.get("constants") and x.get("signature") == m.get("signature")]
        print("  same src elsewhere:", [(x["proc"], x["cache_hit"], x.get("hash"), x["t"] - m["t"]) for x in same][:6])
        for x in same[:1]:
            for k in ("parts", "ugv", "deps", "opts", "env", "target", "attrs", "fn_key"):
                if x.get(k) != m.get(k):
                    print("  DIFF", k, "\n   timing:", str(m.get(k))[:1500], "\n   other: ", str(x.get(k))[:1500])
if __name__ == "__main__":
    main()
