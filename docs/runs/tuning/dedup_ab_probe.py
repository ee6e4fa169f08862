"""One GPU, then two GPUs with the compile pool's shared compiles (compile_key), then two GPUs
without them (compile_key patched to None), each from nothing, as benchmarks/multi_gpu.py
runs them (8 problems, random strategy, patience 3, at most 48 trials).
Usage, on a machine of two GPUs: python3 docs/runs/tuning/dedup_ab_probe.py OUT.json"""
import argparse, importlib.util, json, os, sys, tempfile, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("mg", "benchmarks/multi_gpu.py"); mg = importlib.util.module_from_spec(spec); spec.loader.exec_module(mg)
from autokernel.tuning import worker
from autokernel.tuning.fleet import local_devices, parse_gpus
def main():
    args = argparse.Namespace(patience=3, max_trials=48, strategy="random", seed=0, max_generations=50, per_generation=8)
    devices = local_devices(parse_gpus("0,1"))
    probs = mg.problems(None, 8)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label in ("one", "many_dedup", "many_nodedup"):
            if label == "many_nodedup":
                worker.compile_key = lambda problem, config: None
            r = mg.one_run(label, probs, devices[:1] if label == "one" else devices, work, args)
            per = {d: {k: round(v, 2) for k, v in s["seconds"].items()} for d, s in r["summary"].items()}
            out[label] = {"wall_s": r["wall_s"], "trials": r["trials"], "seconds": per, "jobs": {d: s["jobs"] for d, s in r["summary"].items()},
                          "winners": {k: c.short() for k, c in r["winners"].items()}}
            timing = sum(s["timing"] for s in per.values())
            print(f"{label}: wall {r['wall_s']:.1f} s, {r['trials']} trials, timing {timing:.1f} s, per device {json.dumps(per)}", flush=True)
    one = out["one"]["wall_s"]
    print(f"speedup with shared compiles {one / out['many_dedup']['wall_s']:.3f}, without {one / out['many_nodedup']['wall_s']:.3f}")
    print("same winners:", out["many_dedup"]["winners"] == out["one"]["winners"], out["many_nodedup"]["winners"] == out["one"]["winners"])
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
