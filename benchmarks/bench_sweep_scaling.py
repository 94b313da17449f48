"""Sweep throughput against chunk size and device count, and memory per variant.

Runs the sweep machinery itself (``sweep.plan`` → ``batch_params`` → ``compiled`` →
``_execute_chunk``) on the benchmark slider-crank of ``sweeps/bench_slider_crank.toml``
(circular bushing, dt = 1 µs), for each chunk size, in a fresh process per device count
(``XLA_FLAGS=--xla_force_host_platform_device_count=D`` on CPU; the real devices on a GPU
machine).  Rates are variant-steps per second without compile; ratios are against the
smallest device count / the reference chunk size measured in the same run.

    python benchmarks/bench_sweep_scaling.py                     # chunks 64..4096, devices 1,2
    python benchmarks/bench_sweep_scaling.py --sizes 1024,65536 --devices 0   # GPU: real devices
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(sizes, steps, repeats):
    import jax
    import numpy as np

    from jaxclear import spec as specmod
    from jaxclear import sweep

    rows = []
    for cs in sizes:
        sp = specmod.load(
            ROOT / "sweeps" / "bench_slider_crank.toml",
            [
                f"integrator.t_end_s={steps * 1e-6}",
                f"integrator.chunk_size={cs}",
                f"sampling.n={cs}",
                f"integrator.save_every={min(100, steps)}",
            ],
        )
        pl = sweep.plan(sp)
        ex = sweep.exec_size(pl.chunk_size)
        p = sweep.batch_params(sp, pl, sweep._padded(np.arange(pl.chunk_size), ex))
        fn, comp_s = sweep.compiled(pl, p)
        sweep._execute_chunk(pl, p)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            sweep._execute_chunk(pl, p)
            best = min(best, time.perf_counter() - t0)
        mem = None
        try:
            ma = fn.memory_analysis()
            # memory_analysis describes one device's program: its share is ex / devices variants
            mem = (ma.temp_size_in_bytes + ma.output_size_in_bytes + ma.argument_size_in_bytes) / (
                ex / jax.local_device_count()
            )
        except Exception:  # backend without memory analysis
            pass
        rows.append(
            dict(
                chunk=pl.chunk_size,
                executed=ex,
                steps=pl.cfg.n_steps,
                compile_s=comp_s,
                rate=pl.chunk_size * pl.cfg.n_steps / best,
                bytes_per_variant_measured=mem,
                bytes_per_variant_estimate=sweep.bytes_per_variant(pl.cfg, pl.dtype),
            )
        )
    print(json.dumps(dict(devices=jax.local_device_count(), kind=jax.devices()[0].device_kind, rows=rows)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1024,4096", help="chunk sizes (variants)")
    ap.add_argument("--devices", default="1,2", help="forced host device counts; 0 = the real devices")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--_worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    sizes = [int(x) for x in a.sizes.split(",")]
    if a._worker:
        return worker(sizes, a.steps, a.repeats)
    results = []
    for d in (int(x) for x in a.devices.split(",")):
        env = dict(os.environ)
        if d > 0:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={d}").strip()
        cmd = [
            sys.executable,
            __file__,
            "--_worker",
            "--sizes",
            a.sizes,
            "--steps",
            str(a.steps),
            "--repeats",
            str(a.repeats),
        ]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    ref_cs = 1024 if 1024 in sizes else sizes[0]
    base = {r["chunk"]: r["rate"] for r in results[0]["rows"]}
    print(f"steps per variant {a.steps}, dt = 1 µs, circular bushing, float64; rate = variant-steps/s without compile")
    print(
        f"{'devices':>7} {'chunk':>6} {'executed':>8} {'rate':>10} {'vs chunk ' + str(ref_cs):>14} "
        f"{'vs ' + str(results[0]['devices']) + ' dev':>9} {'compile s':>9} {'B/variant meas.':>15} {'B/variant est.':>14}"
    )
    for res in results:
        ref = next((r["rate"] for r in res["rows"] if r["chunk"] == ref_cs), res["rows"][0]["rate"])
        for r in res["rows"]:
            meas = f"{r['bytes_per_variant_measured']:.3g}" if r["bytes_per_variant_measured"] else "—"
            print(
                f"{res['devices']:>7} {r['chunk']:>6} {r['executed']:>8} {r['rate']:10.3e} {r['rate'] / ref:14.2f} "
                f"{r['rate'] / base[r['chunk']]:9.2f} {r['compile_s']:9.1f} {meas:>15} "
                f"{r['bytes_per_variant_estimate']:14.3g}"
            )
    print(f"device kind: {results[0]['kind']}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
