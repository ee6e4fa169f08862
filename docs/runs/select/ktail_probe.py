# The probe behind ktail_h100.txt, as run on the tree of commit fb38bfd (the package then had autokernel/problem.py:
# today autokernel.records). Its two older kernel files came from git:
#   git show e729e50:autokernel/kernels/matmul.py > .probe/old_matmul.py
#   git show 4c43017:autokernel/kernels/matmul.py > .probe/peel_matmul.py
# run on the GPU machine: source scripts/device_env.sh; TRITON_INTERPRET=0 python3 .probe/ktail_ab2.py
"""Old pointer kernel (before the lead-stride hint and K-tail peel) vs new, raced with cuBLAS."""
import importlib.util, itertools, sys, torch
from autokernel.config import KernelConfig
from autokernel.kernels import matmul as new
from autokernel.problem import Problem
from autokernel.timing import race, make_input_sets, GRAPH_INPUT_SETS
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
old = load("old_matmul", ".probe/old_matmul.py"); loop = load("peel_loop", ".probe/peel_matmul.py")
def cfg(bm, bn, bk, w, s): return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="grouped")
cases = [((5289,1536,1000,"nt"), cfg(128,128,64,4,4)), ((92,6912,1000,"nn"), cfg(64,128,64,4,5)),
         ((2,18944,1000,"nt"), cfg(16,128,128,4,4)), ((2,18944,1000,"nt"), cfg(16,64,128,4,4)),
         ((1024,1024,4000,"nt"), cfg(128,128,64,4,4)), ((64,4096,4000,"nt"), cfg(64,64,128,4,4)),
         ((2048,2048,2000,"nt"), cfg(128,128,64,4,4)), ((4096,4096,4096,"nn"), cfg(128,128,64,4,4)),
         ((16,4096,4096,"nt"), cfg(16,64,128,4,4))]
for (m,n,k,layout), c in cases:
    for dtype in ("bfloat16",):
        p = Problem(m,n,k,dtype,layout=layout); dev=torch.device("cuda")
        sets = make_input_sets(lambda i: (*p.make_inputs(dev, seed=i)[:2], torch.empty(m,n,dtype=p.torch_dtype,device=dev)), p.bytes, GRAPH_INPUT_SETS)
        a,b,o = sets[0]
        ref = (a.float() @ b.float())
        fns=[]; errs=[]
        for mod in (old, loop, new):
            launch = mod.plan_matmul(a, b, o, None, "none", 0.0, c, False)
            launch(a, b, o, o, o); torch.cuda.synchronize()
            errs.append(float((o.float()-ref).norm()/ref.norm()))
            cyc = itertools.cycle(sets)
            def f(launch=launch, cyc=cyc):
                x,y,z = next(cyc); launch(x,y,z,z,z)
            fns.append(f)
        cyc2 = itertools.cycle(sets)
        fns.append(lambda: torch.mm(*next(cyc2)[:2]))
        t_old, t_loop, t_new, t_cub = race(fns, rounds=15, segment_ms=1.0)
        print(f"{m}x{n}x{k} {layout} {dtype:8s} {c.short():28s} old {t_old*1e3:8.1f} us  peel-loop {t_loop*1e3:8.1f}  peel-if {t_new*1e3:8.1f}  cublas {t_cub*1e3:7.1f}  old/peel-if {t_old/t_new:5.2f}x  cublas/peel-if {t_cub/t_new:.3f}  errs {max(errs):.1e}", flush=True)
