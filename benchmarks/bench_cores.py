#!/usr/bin/env python
"""Every core on a CPU machine: the bench spec (sweeps/bench_slider_crank.toml, B = 1024 variants
of the Flores et al. (2008) slider-crank) run by ``jaxclear.sweep`` with the chunk split over
N host XLA devices (``jaxclear run --cpu-devices N``, default every usable core) against

* the same sweep on ONE host device (``--cpu-devices 1``): the scaling (target >= 1.8x on 2 cores);
* a Numba ``prange`` kernel of the same model on every core (the "natural" scalar kernel of
  benchmarks/bench_slider_crank.py, angles with cos/sin each step, parallel over variants):
  target >= 1x.

Each jaxclear configuration runs in its own subprocess (the device count is fixed when JAX
starts); rates are variant-steps/s of the run proper (compile excluded: it is reported apart),
best of --repeats executions of the compiled chunk; all ratios come from this one invocation.

Usage::

    python benchmarks/bench_cores.py                  # B = 1024, 4000 steps
    python benchmarks/bench_cores.py --steps 1000 --json cores.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import json, sys, time
from jaxclear import parallel
parallel.set_cpu_devices(int(sys.argv[1]))
import numpy as np, jax
from jaxclear import spec as specmod, sweep
B, steps, repeats = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sp = specmod.load(sys.argv[5], [f"sampling.n={B}", f"integrator.chunk_size={B}",
                                f"integrator.t_end_s={steps * 1e-6}", "outputs.plots=false",
                                "outputs.histories=[]", "integrator.scheme=\"leapfrog\""])  # the Numba kernel's scheme
pl = sweep.plan(sp)
p = sweep.batch_params(sp, pl, sweep._padded(np.arange(B), sweep.exec_size(B)))
fn, comp = sweep.compiled(pl, p)
if jax.local_device_count() > 1:
    p = jax.device_put(p, parallel.variant_sharding())
jax.block_until_ready(fn(p))
best = float("inf")
for _ in range(repeats):
    t0 = time.perf_counter()
    res = fn(p)
    jax.block_until_ready(res)
    best = min(best, time.perf_counter() - t0)
pf = np.asarray(res.acc.peak_force).max(axis=-1)[:B]
print(json.dumps({"devices": jax.local_device_count(), "compile_s": comp, "run_s": best,
                  "variant_steps_per_s": B * pl.cfg.n_steps / best, "n_steps": pl.cfg.n_steps,
                  "peak_force": pf.tolist()}))
"""


def run_jaxclear(n_devices, B, steps, repeats):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in sys.path if p]))
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(n_devices),
            str(B),
            str(steps),
            str(repeats),
            str(ROOT / "sweeps" / "bench_slider_crank.toml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_numba_prange(B, steps, repeats, threads):
    """The natural Numba kernel of bench_slider_crank (same constants and law), parallel over
    variants with prange on ``threads`` threads; returns (variant-steps/s, peak forces)."""
    sys.path.insert(0, str(HERE))
    import bench_slider_crank as b
    import numba
    import numpy as np

    kernel = b.numba_angles_prange
    numba.set_num_threads(threads)
    c, e, mu = b.variants(B, seed=0)
    k, chi = b.derived(c, e)
    out_f, out_a = np.zeros(B), np.zeros(B)
    t0 = time.perf_counter()
    kernel(c, k, chi, mu, 10, 1e-6, b.OMEGA, out_f, out_a)  # JIT compile
    comp = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        kernel(c, k, chi, mu, steps, 1e-6, b.OMEGA, out_f, out_a)
        best = min(best, time.perf_counter() - t0)
    return {
        "threads": threads,
        "compile_s": comp,
        "run_s": best,
        "variant_steps_per_s": B * steps / best,
        "peak_force": out_f.tolist(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", type=int, default=1024, help="B, variants in the one chunk (default 1024)")
    ap.add_argument("--steps", type=int, default=4000, help="steps per variant (dt = 1 µs; default 4000)")
    ap.add_argument("--repeats", type=int, default=3, help="timed executions, best kept (default 3)")
    ap.add_argument("--cores", type=int, default=None, help="'all cores' (default: the usable cores)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from jaxclear import parallel

    n = a.cores or parallel.usable_cores()
    one = run_jaxclear(1, a.variants, a.steps, a.repeats)
    alln = run_jaxclear(n, a.variants, a.steps, a.repeats) if n > 1 else one
    nb = run_numba_prange(a.variants, one["n_steps"], a.repeats, n)
    import numpy as np

    # same model: the peaks of the three agree (the Numba kernel carries angles, jaxclear
    # rotated (cos, sin) pairs: round-off differences only, amplified at impacts)
    agree = float(np.median(np.abs(np.array(alln["peak_force"]) / np.array(nb["peak_force"]) - 1)))
    res = {
        "variants": a.variants,
        "steps": one["n_steps"],
        "cores": n,
        "jaxclear_1_device": {k: v for k, v in one.items() if k != "peak_force"},
        "jaxclear_all_devices": {k: v for k, v in alln.items() if k != "peak_force"},
        "numba_prange_all_cores": {k: v for k, v in nb.items() if k != "peak_force"},
        "ratio_all_devices_vs_1": alln["variant_steps_per_s"] / one["variant_steps_per_s"],
        "ratio_all_devices_vs_numba_prange": alln["variant_steps_per_s"] / nb["variant_steps_per_s"],
        "median_rel_diff_peak_force_vs_numba": agree,
        "load_average": os.getloadavg(),
    }
    print(f"B = {a.variants}, {one['n_steps']} steps, {n} cores (load average {res['load_average'][0]:.2f})")
    print(
        f"  jaxclear, 1 host device   : {one['variant_steps_per_s']:.3g} variant-steps/s (compile {one['compile_s']:.3g} s)"
    )
    print(
        f"  jaxclear, {n} host devices  : {alln['variant_steps_per_s']:.3g} variant-steps/s (compile {alln['compile_s']:.3g} s)"
    )
    print(f"  Numba prange, {n} threads   : {nb['variant_steps_per_s']:.3g} variant-steps/s")
    print(f"  ratio {n} devices / 1 device : {res['ratio_all_devices_vs_1']:.2f}  (target >= 1.8 on 2 cores)")
    print(f"  ratio jaxclear / Numba prange: {res['ratio_all_devices_vs_numba_prange']:.2f}  (target >= 1)")
    print(f"  median |peak force jaxclear / Numba - 1| = {agree:.2e}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
