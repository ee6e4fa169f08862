source benchmarks/device_env.sh; export TRITON_INTERPRET=0
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
export AK_COMPILE_LOG=$OUT/compile_log; mkdir -p $AK_COMPILE_LOG
export PYTHONPATH=$PWD/docs/runs/tuning/compile_keys:$PYTHONPATH
python3 docs/runs/tuning/compile_keys/warm_ab.py $OUT ${1:-one_cold,many_cold}
