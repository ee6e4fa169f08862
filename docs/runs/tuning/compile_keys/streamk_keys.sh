source benchmarks/device_env.sh; export TRITON_INTERPRET=0
export AK_COMPILE_LOG=/tmp/cl_$(date +%s) AK_COMPILE_DETAIL=1; mkdir -p $AK_COMPILE_LOG
export PYTHONPATH=$PWD/docs/runs/tuning/compile_keys:$PYTHONPATH
python3 docs/runs/tuning/compile_keys/streamk_keys.py $OUT
