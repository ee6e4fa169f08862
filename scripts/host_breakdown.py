import time, torch, autokernel as ak
from autokernel.autograd import linear_backward, linear_forward
from autokernel.kernels.backward import launch_activation_grad
from autokernel.api import launch
from autokernel.config import default_config
def us(fn, n=1000):
    for _ in range(20): fn()
    torch.cuda.synchronize(); t=time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter()-t)/n*1e6
s=256; dt=torch.float16
x=torch.randn(s,s,device="cuda",dtype=dt); w=torch.randn(s,s,device="cuda",dtype=dt); b=torch.randn(s,device="cuda",dtype=dt)
dy=torch.randn(s,s,device="cuda",dtype=dt)
y,z=linear_forward(x,w,b,"gelu",0.01,None)
dz=torch.empty_like(dy); dx=torch.empty_like(x); dw=torch.empty_like(w)
cfg=default_config(s,s,s,dt)
rows={
 "torch.empty": lambda: torch.empty((s,s),dtype=dt,device="cuda"),
 "linear_forward gelu": lambda: linear_forward(x,w,b,"gelu",0.01,None),
 "linear_backward all": lambda: linear_backward(dy,x,w,z,"gelu",0.01,needs=(True,True,True)),
 "linear_backward dx only": lambda: linear_backward(dy,x,w,z,"gelu",0.01,needs=(True,False,False)),
 "act_grad + db": lambda: launch_activation_grad(dy,z,dz,"gelu",0.01,True,False),
 "act_grad no db": lambda: launch_activation_grad(dy,z,dz,"gelu",0.01,False,False),
 "launch dX": lambda: launch(dz,w,dx,None,"none",0.0,cfg),
 "launch dW": lambda: launch(dz.t(),x,dw,None,"none",0.0,cfg),
 "default_config": lambda: default_config(s,s,s,dt),
}
for k,f in rows.items(): print(f"{k:28s} {us(f):8.1f} us")
xr=x.clone().requires_grad_(); wr=w.clone().requires_grad_(); br=b.clone().requires_grad_()
def step_ours():
    y=ak.linear(xr,wr,br,"gelu"); torch.autograd.grad(y,[xr,wr,br],dy)
def step_torch():
    y=torch.nn.functional.gelu(torch.nn.functional.linear(xr,wr,br)); torch.autograd.grad(y,[xr,wr,br],dy)
def fwd_ours(): ak.linear(xr,wr,br,"gelu")
print(f"{'step ours (grad)':28s} {us(step_ours,300):8.1f} us")
print(f"{'step torch (grad)':28s} {us(step_torch,300):8.1f} us")
print(f"{'fwd ours grad-on':28s} {us(fwd_ours,300):8.1f} us")

# Where does the autograd step's time go? Time spent inside our backward, per step.
import threading
import autokernel.autograd as agmod
inside = [0.0, 0]
real_bw = agmod.linear_backward
def timed_bw(*a, **k):
    t = time.perf_counter(); r = real_bw(*a, **k); inside[0] += time.perf_counter() - t; inside[1] += 1; return r
agmod.linear_backward = timed_bw
n = 300
t_step = us(step_ours, n)
print(f"{'step ours, instrumented':28s} {t_step:8.1f} us; inside linear_backward {inside[0] / inside[1] * 1e6:8.1f} us/call")
agmod.linear_backward = real_bw
yk = ak.linear(xr, wr, br, "gelu")
print(f"{'ours autograd.grad only':28s} {us(lambda: torch.autograd.grad(yk, [xr, wr, br], dy, retain_graph=True), 300):8.1f} us")
yt = torch.nn.functional.gelu(torch.nn.functional.linear(xr, wr, br))
print(f"{'torch autograd.grad only':28s} {us(lambda: torch.autograd.grad(yt, [xr, wr, br], dy, retain_graph=True), 300):8.1f} us")
def in_thread():
    th = threading.Thread(target=lambda: [linear_backward(dy, x, w, z, "gelu", 0.01, needs=(True, True, True)) for _ in range(300)])
    torch.cuda.synchronize(); t = time.perf_counter(); th.start(); th.join(); torch.cuda.synchronize()
    return (time.perf_counter() - t) / 300 * 1e6
print(f"{'linear_backward in a thread':28s} {in_thread():8.1f} us")
import gc
gc.disable()
print(f"{'step ours, gc disabled':28s} {us(step_ours, 300):8.1f} us")
print(f"{'step torch, gc disabled':28s} {us(step_torch, 300):8.1f} us")
gc.enable()
def step_ours_retain():
    y = ak.linear(xr, wr, br, "gelu"); torch.autograd.grad(y, [xr, wr, br], dy, retain_graph=True)
print(f"{'step ours, retain_graph':28s} {us(step_ours_retain, 300):8.1f} us")
def step_ours_none():
    y = ak.linear(xr, wr, br, None); torch.autograd.grad(y, [xr, wr, br], dy)
print(f"{'step ours, no activation':28s} {us(step_ours_none, 300):8.1f} us")
def fwd_then_free():
    y = ak.linear(xr, wr, br, "gelu"); del y
print(f"{'fwd grad-on then free':28s} {us(fwd_then_free, 300):8.1f} us")
