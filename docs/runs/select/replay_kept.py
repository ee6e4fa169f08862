"""Replay (CPU): matmul's pick on recorded sweeps with one tuned file (--shipped, default the
package's) against another (--kept), each pick's GPU time read from the sweep where it was
measured; picks that change to a config the sweep did not time are counted, not judged.
    python3 docs/runs/select/replay_kept.py --shipped OLD.json --kept NEW.json SWEEP.jsonl[.gz] ...
docs/selector.md's two replays, against the 58-entry file before any was dropped:
    git show 989422b:autokernel/configs/nvidia-h100-80gb-hbm3.json > old.json
    ... --shipped old.json --kept docs/runs/select/race_entries_kept_h100.json      (the 40 tied and slower dropped)
    ... --shipped old.json --kept autokernel/configs/nvidia-h100-80gb-hbm3.json    (the 3 slower dropped)"""
import argparse
import json, gzip, sys, math, collections, tempfile, shutil
from pathlib import Path
import torch
from autokernel import runtime, best, api
from autokernel.config import KernelConfig
from autokernel.records import Problem
runtime.device_name=lambda device=None: "NVIDIA H100 80GB HBM3"
runtime.shared_memory_limit=lambda: 232448
def rd(f):
    op=gzip.open if f.endswith('gz') else open
    return [json.loads(l) for l in op(f,'rt')]
def picks(problems, shipped_dir):
    orig=best.SHIPPED_DIR; best.SHIPPED_DIR=shipped_dir; best.clear_cache()
    try:
        return [api.resolve_config(None,p.m,p.n,p.k,p.torch_dtype,p.activation,p.bias,torch.device("cuda"),
                 tma=api.tma_runs_for(p.m,p.n,p.k,p.torch_dtype,p.layout), layout=p.layout) for p in problems]
    finally:
        best.SHIPPED_DIR=orig; best.clear_cache()
ap=argparse.ArgumentParser(); ap.add_argument('--shipped'); ap.add_argument('--kept', required=True); ap.add_argument('sweeps', nargs='+')
args=ap.parse_args()
def as_dir(path):
    d=Path(tempfile.mkdtemp()); shutil.copy(path, d/'nvidia-h100-80gb-hbm3.json'); (d/'selector').symlink_to(best.SHIPPED_DIR/'selector')
    return d
base=as_dir(args.shipped) if args.shipped else best.SHIPPED_DIR
tmp=as_dir(args.kept)
import autokernel.api as A
A.tma_runs_for=lambda m,n,k,dt,layout: __import__('autokernel.select',fromlist=['x']).tma_aligned(m,n,k,dt,layout)
for f in args.sweeps:
    rows=[r for r in rd(f) if r.get('status')=='success' and r.get('gpu_ms')]
    by=collections.defaultdict(dict)
    for r in rows:
        key=(r['m'],r['n'],r['k'],r['dtype'],r['activation'],r['bias'],r['layout'])
        if r.get('config'): by[key][json.dumps(r['config'],sort_keys=True)]=r
        else: by[key]['torch']=r
    probs=[Problem(*k) for k in by]
    old=picks(probs, base); new=picks(probs, tmp)
    ch=[];miss=0; lo=ln=0; tot=[]
    for p,o,n,k in zip(probs,old,new,by):
        d=by[k]; ok=json.dumps(o.model_dump(),sort_keys=True); nk=json.dumps(n.model_dump(),sort_keys=True)
        dflt=[r for r in d.values() if 'default' in (r.get('roles') or [])]
        if ok not in d or nk not in d: 
            if ok!=nk: miss+=1
            continue
        to,tn=d[ok]['gpu_ms'],d[nk]['gpu_ms']
        if dflt:
            td=dflt[0]['gpu_ms']; lo+= td/to<0.98; ln+= td/tn<0.98
        tot.append(to/tn)
        if ok!=nk: ch.append((to/tn,p.m,p.n,p.k,p.dtype,o.short(),n.short()))
    g=lambda xs: math.exp(sum(map(math.log,xs))/len(xs)) if xs else float('nan')
    print(f.split('/')[-1], 'problems',len(probs),'changed (measured)',len(ch),'unmeasured changes',miss,'old/new over changed',round(g([c[0] for c in ch]),4),'over all',round(g(tot),4),'losses to default old',lo,'new',ln)
    for c in sorted(ch)[:6]: print('   ',[round(c[0],3)]+list(c[1:]))
