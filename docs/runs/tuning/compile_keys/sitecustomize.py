# Probe: log every Triton compile() call (a kernel specialization first seen by a process)
# with cache_hit, per process, to $AK_COMPILE_LOG/<pid>.jsonl.
import importlib.abc, importlib.machinery, json, os, sys, time
LOG = os.environ.get("AK_COMPILE_LOG")
_PATCH = [lambda: None]
if LOG:
    def _install(knobs):
        parts = {}

        def patch():
            import triton.compiler.compiler as cc
            if getattr(cc, "_ak_patched", False):
                return
            orig = cc.get_cache_key

            def get_cache_key(src, backend, backend_options, *a, **k):
                try:
                    from triton.compiler.compiler import triton_key
                    tk = triton_key()
                except Exception as exc:
                    tk = f"<{exc}>"
                import hashlib
                parts.clear()
                parts.update(src=src.hash(), backend=backend.hash(), options=backend_options.hash(),
                             opts_full=repr(backend_options)[:4000], tk=hashlib.sha256(str(tk).encode()).hexdigest()[:16])
                return orig(src, backend, backend_options, *a, **k)
            cc.get_cache_key = get_cache_key
            cc._ak_patched = True

        def listener(*, src, metadata, metadata_group, times, cache_hit, **kw):
            import multiprocessing
            patch()
            try:
                total = times.total if times is not None else None
            except Exception:
                total = None
            rec = {"pid": os.getpid(), "proc": multiprocessing.current_process().name,
                   "label": os.environ.get("AK_RUN_LABEL"), "vis": os.environ.get("CUDA_VISIBLE_DEVICES"),
                   "t": time.time(), "name": getattr(src, "name", None) or metadata.get("name"),
                   "cache_hit": cache_hit, "us": total}
            if os.environ.get("AK_COMPILE_DETAIL"):
                import traceback
                rec["stack"] = [f.name for f in traceback.extract_stack() if "autokernel" in f.filename]
                rec["hash"] = metadata.get("hash")
                rec["parts"] = dict(parts)
                try:
                    fn = src.fn
                    rec["fn_key"] = fn.cache_key
                    rec["ugv"] = repr(sorted((k, repr(v)[:80]) for k, v in getattr(fn, "used_global_vals", {}).items()))[:4000]
                    import triton.runtime.jit as J
                    deps = {}
                    for mod in ("autokernel.kernels.matmul", "autokernel.kernels.matmul_tma", "autokernel.kernels.epilogue", "autokernel.kernels.streamk", "autokernel.kernels.splitk"):
                        m = sys.modules.get(mod)
                        if m is None:
                            deps[mod] = None
                            continue
                        for name, v in vars(m).items():
                            if isinstance(v, J.JITFunction) or type(v).__name__ in ("JITFunction", "JITCallable"):
                                deps[f"{mod}.{name}"] = getattr(v, "hash", None)
                    rec["deps"] = deps
                except Exception as exc:
                    rec["fn_key"] = f"<{exc}>"
                rec["opts"] = {k: metadata.get(k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg", "arch", "ptx_version", "enable_fp_fusion", "launch_pdl", "debug", "instrumentation_mode")}
                try:
                    from triton._C.libtriton import get_cache_invalidating_env_vars
                    rec["env"] = str(sorted(get_cache_invalidating_env_vars().items()))
                except Exception as exc:
                    rec["env"] = f"<{exc}>"
                rec["backend_hash"] = None
                try:
                    from triton.runtime.driver import driver
                    rec["target"] = repr(driver.active.get_current_target())
                except Exception as exc:
                    rec["target"] = f"<{exc}>"
                for attr in ("signature", "constants", "attrs"):
                    try:
                        rec[attr] = repr(getattr(src, attr, None))[:3000]
                    except Exception as exc:
                        rec[attr] = f"<{exc}>"
            with open(os.path.join(LOG, f"{os.getpid()}.jsonl"), "a") as f:
                f.write(json.dumps(rec) + "\n")
        knobs.compilation.listener = listener
        _PATCH[0] = patch

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name not in ("triton.knobs", "triton.compiler.compiler"):
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            orig = spec.loader.exec_module
            def exec_module(module):
                orig(module)
                try:
                    if name == "triton.knobs":
                        _install(module)
                    else:
                        _PATCH[0]()
                except Exception as exc:
                    print("compile-log probe:", name, exc, file=sys.stderr)
            spec.loader.exec_module = exec_module
            return spec
    sys.meta_path.insert(0, _Hook())
