#!/usr/bin/env bash
# The prepared GPU check (benchmarks/gpu_check.py) with the defaults of the issue: bench spec at
# B = 65536, 72-point worn bushing, float64 and float32, the sharded path, a CPU cross-check.
# Installs nothing: needs jax with CUDA, numpy, optax, matplotlib (zarr is not used).
# Extra arguments go to gpu_check.py, e.g. `bash benchmarks/gpu_check.sh --batch 16384`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python - <<'PY'
import importlib
for m in ("jax", "jaxlib", "numpy", "optax", "matplotlib", "zarr"):
    try:
        print(f"{m} {importlib.import_module(m).__version__}")
    except ImportError:
        print(f"{m}: not installed" + (" (not needed here)" if m == "zarr" else " (NEEDED: the check cannot run)"))
PY
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec python benchmarks/gpu_check.py --json gpu_check.json "$@"
