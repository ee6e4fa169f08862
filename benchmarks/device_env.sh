# Source at the start of a device command: installs the carried wheels (.whl, see
# docs/gpu.md) the GPU image lacks (pydantic) and puts the checkout on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
# Byte-compiled once, as pip install does (--no-compile above): else every process
# compiles each imported module anew (2.4 s of a tune rerun on the H100).
python3 -m compileall -q -j 0 /tmp/site autokernel benchmarks > /dev/null
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
autokernel() { python3 -m autokernel "$@"; }
