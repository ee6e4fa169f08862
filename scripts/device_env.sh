# Source at the start of a device command: installs the carried wheels (.whl, see
# docs/gpu.md) the GPU image lacks (pydantic) and puts the checkout on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
autokernel() { python3 -m autokernel "$@"; }
