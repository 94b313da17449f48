"""benchmarks/gpu_check.py at a tiny size on the CPU, as the GPU machine will run it: without
zarr (blocked), the sharded path over two forced host devices, the CPU cross-check."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a fresh process with two forced host devices: interpreter, JAX and compiles, ~12 s
def test_gpu_check_runs_without_zarr_at_tiny_size(tmp_path):
    out = tmp_path / "gpu_check.json"
    code = (
        "import sys, runpy; sys.modules['zarr'] = None; "  # an import of zarr now fails
        f"sys.argv = ['gpu_check.py', '--batch', '6', '--steps', '30', '--check', '3', '--repeats', '1', "
        f"'--cases', 'sharded', '--json', {str(out)!r}]; "
        f"runpy.run_path({str(ROOT / 'benchmarks' / 'gpu_check.py')!r}, run_name='__main__')"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "max rel diff to CPU" in p.stdout and "circle, sharded" in p.stdout
    r = json.loads(out.read_text())
    assert r["env"]["local_devices"] == 2  # (an import of zarr would have failed the run)
    (row,) = r["rows"]
    assert row["devices"] == 2 and row["batch"] == 6 and row["steps"] == 30
    assert row["rate"] > 0 and row["bytes_per_variant"] > 0
    # two CPU devices against the plain CPU backend: the same per-variant program
    assert row["check_variants"] == 3 and row["max_rel_diff"] < 1e-9
