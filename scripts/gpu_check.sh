#!/usr/bin/env bash
# The one-shot GPU check: each architecture in fp32/bf16/fp16 against
# fp32, torchrun with NCCL (NaN on one rank, identical parameters, resume), and the
# transformer-base benchmark (tokens/s, MFU, host syncs per step, translation speed), eager,
# under train.compile: true, and compiled static over 4 fixed batch shapes (data.shapes, CUDA
# graphs), then pytest with CUDA visible.
# Writes benchmarks/benchmark-<gpu>.json and prints a table; about 4 minutes on one H200 before
# the compiled phase was added (unmeasured since).
#   scripts/gpu_check.sh              # on a machine with a GPU
#   scripts/gpu_check.sh --cpu        # no GPU: small configs on the CPU, fp16 skipped (CI)
# Other options: --out FILE, --steps N, --pytest-workers N,
#   --skip precisions|ddp|benchmark|compiled|static|pytest
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
exec "$PY" scripts/gpu_check.py "$@"
