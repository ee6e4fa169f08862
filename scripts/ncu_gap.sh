#!/usr/bin/env bash
# Issue 10's "what separates us from cuBLAS": hardware counters of our kernel and cuBLAS's
# on the shapes where the gap is widest, and the SM clock under sustained load (why the
# 750 TFLOP/s target at 8192^3 bf16 is out of reach or not).
# Usage on the device: source scripts/device_env.sh; bash scripts/ncu_gap.sh OUTDIR
set -u
out=$1
SHAPES=("1024 1024 1024 float16" "2048 2048 2048 float16" "2048 2048 2048 bfloat16" "8192 8192 8192 bfloat16")
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,enforced.power.limit --format=csv | tee "$out/gpu_clocks.txt"
ncu --profile-from-start off --clock-control none --set full --nvtx --print-summary none \
    -f -o "$out/ncu_gap" python3 scripts/ncu_gap.py "${SHAPES[@]}" 2>&1 | tail -20
ncu --import "$out/ncu_gap.ncu-rep" --page details --csv > "$out/ncu_gap_details.csv"
ncu --import "$out/ncu_gap.ncu-rep" --page raw --csv \
    --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,launch__grid_size,launch__registers_per_thread,launch__shared_mem_per_block,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active \
    > "$out/ncu_gap_raw.csv"
# The SM clock under sustained 8192^3 bf16 load (cuBLAS, then ours), sampled every 100 ms.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > "$out/clock_under_load.csv" &
smi=$!
python3 - <<'PY' | tee "$out/sustained.txt"
import time, torch, autokernel
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
flop = 2 * 8192**3
for name, fn in (("cublas", torch.matmul), ("ours", autokernel.matmul)):
    fn(a, b); torch.cuda.synchronize()
    for phase in range(3):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t = time.time(); e0.record()
        for _ in range(1000): fn(a, b)
        e1.record(); torch.cuda.synchronize()
        ms = e0.elapsed_time(e1) / 1000
        print(f"{time.strftime('%H:%M:%S')} {name} 1000 back-to-back calls, second {phase}: {ms*1e3:.1f} us/call {flop/ms/1e9:.0f} TFLOP/s", flush=True)
    time.sleep(2)
PY
kill $smi
