"""One GPU then two GPUs, each from nothing, as benchmarks/multi_gpu.py runs them, with every
Triton compile logged per process (sitecustomize.py here, on PYTHONPATH: warm_ab.sh).
Labels ending in "warm" set worker.WARM_CONTEXTS, a change measured once and not kept
(compile workers made a CUDA context on every GPU as they started); without it, run
the "cold" labels only. Usage: python3 warm_ab.py OUT one_cold,many_cold"""
import argparse, importlib.util, json, os, sys, time
from pathlib import Path
import tempfile
spec = importlib.util.spec_from_file_location("mg", "benchmarks/multi_gpu.py"); mg = importlib.util.module_from_spec(spec); spec.loader.exec_module(mg)
from autokernel.tuning import worker
from autokernel.tuning.fleet import local_devices, parse_gpus
def main():
    out_dir = Path(sys.argv[1]); order = sys.argv[2].split(",")
    args = argparse.Namespace(patience=3, max_trials=48, strategy="random", seed=0, max_generations=50, per_generation=8)
    devices = local_devices(parse_gpus("0,1"))
    probs = mg.problems(None, 8)
    out = {"device": devices[0].name, "order": order}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label in order:
            if label.endswith("warm"):
                worker.WARM_CONTEXTS = True
            os.environ["AK_RUN_LABEL"] = label
            t0 = time.time()
            r = mg.one_run(label, probs, devices[:1] if label.startswith("one") else devices, work, args)
            r["t0"] = t0
            r["winners"] = {k: c.short() for k, c in r["winners"].items()}
            out[label] = r
            per = {d: {k: round(v, 2) for k, v in s["seconds"].items()} for d, s in r["summary"].items()}
            timing = sum(s["timing"] + s.get("lent", 0) for s in per.values())
            print(f"{label}: wall {r['wall_s']:.1f} s, {r['trials']} trials, timing {timing:.1f} s, per device {json.dumps(per)}", flush=True)
    for v in ("cold", "warm"):
        if f"one_{v}" in out and f"many_{v}" in out:
            print(f"{v}: speedup {out[f'one_{v}']['wall_s'] / out[f'many_{v}']['wall_s']:.3f}, same winners {out[f'one_{v}']['winners'] == out[f'many_{v}']['winners']}")
    (out_dir / "warm_ab.json").write_text(json.dumps(out, indent=1, default=str))
    logs = {}
    for f in Path(os.environ["AK_COMPILE_LOG"]).glob("*.jsonl"):
        for line in f.read_text().splitlines():
            rec = json.loads(line); key = (rec["label"], rec["proc"], rec["cache_hit"])
            logs[key] = logs.get(key, 0) + 1
    for k in sorted(logs, key=str):
        print("compiles", k, logs[k])
if __name__ == "__main__":
    main()
