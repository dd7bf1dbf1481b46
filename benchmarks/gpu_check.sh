#!/usr/bin/env bash
# Issue 2's GPU points in one prepared run, for a lent CUDA machine (its image has torch, Triton,
# pytest, hypothesis and Lightning; nothing is installed): the kernel and gradient tests on the
# device (the `device` fixture gains a CUDA case, tests/test_gpu_kernels.py compiles the Triton
# kernels instead of interpreting them), then the kernel benchmark with its bandwidth columns
# (complex64 and complex128, n = 20..28; the fused layer in place and rotating).
#
#     OUT=/some/dir bash benchmarks/gpu_check.sh        # logs and the table land in $OUT
set -uo pipefail
OUT=${OUT:-/tmp/tql_gpu_check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
$PY -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())" >> "$OUT/gpu.txt" 2>&1
timeout 300 $PY -m pytest -q -p no:cacheprovider -x tests/test_gpu_kernels.py tests/test_kernels.py \
    tests/test_recorded.py tests/test_gates.py 2>&1 | tee "$OUT/tests.log" | tail -5
timeout 240 $PY benchmarks/kernels.py --device cuda --nmin 20 --nmax 28 --step 2 --fuse-widths 4 --rounds 5 \
    2> "$OUT/kernels.err" | tee "$OUT/kernels.md"
# last, so that a slow run still leaves the points above: the MPS simulator's tests on the device
timeout 60 $PY -m pytest -q -p no:cacheprovider tests/test_mps.py tests/test_mps_layer.py 2>&1 | tee "$OUT/mps_tests.log" | tail -3
