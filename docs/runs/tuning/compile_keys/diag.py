import argparse, importlib.util, json, os, sys, time
from pathlib import Path
import tempfile
spec = importlib.util.spec_from_file_location("mg", "benchmarks/multi_gpu.py"); mg = importlib.util.module_from_spec(spec); spec.loader.exec_module(mg)
from autokernel.tuning import worker
from autokernel.tuning.fleet import local_devices, parse_gpus
def main():
    worker.WARM_CONTEXTS = False
    args = argparse.Namespace(patience=3, max_trials=48, strategy="random", seed=0, max_generations=50, per_generation=8)
    devices = local_devices(parse_gpus("0,1"))
    probs = mg.problems(None, 8)[:2]
    os.environ["AK_RUN_LABEL"] = "diag"
    with tempfile.TemporaryDirectory() as tmp:
        r = mg.one_run("diag", probs, devices[:1], Path(tmp), args)
        print("wall", r["wall_s"], r["summary"]["GPU 0"]["seconds"])
        import glob, collections
        recs = [json.loads(l) for f in glob.glob(os.environ["AK_COMPILE_LOG"] + "/*.jsonl") for l in open(f)]
        print(collections.Counter((x["proc"], x["name"], x["cache_hit"]) for x in recs))
        json.dump(recs, open(sys.argv[1] + "/diag_compiles.json", "w"))
if __name__ == "__main__":
    main()
