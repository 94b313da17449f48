"""Sweep throughput on a local Dask cluster (``jaxclear run --cluster``) against the plain local run.

The benchmark slider-crank (``sweeps/bench_slider_crank.toml``: circular bushing, dt = 1 µs) with
``--variants`` random variants in chunks of ``--chunk``, run end to end by ``sweep.run`` into a
fresh store: locally, then on a LocalCluster of 1 and of 2 single-threaded worker processes.  Each
configuration runs twice and the second run is timed, so compiling (and starting the workers) is
not counted: the rate is variants × steps / wall time of the whole run, store writes and derived
files included.  Ratios are against the local run measured in the same invocation.

    python benchmarks/bench_cluster.py                   # 8192 variants, 2000 steps, workers 1,2
    python benchmarks/bench_cluster.py --variants 2048 --steps 500 --workers 1   # smoke test
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spec(variants, steps, chunk):
    from jaxclear import spec as specmod
    return specmod.load(ROOT / "sweeps" / "bench_slider_crank.toml",
                        [f"sampling.n={variants}", f"integrator.t_end_s={steps * 1e-6}",
                         f"integrator.chunk_size={chunk}", f"integrator.save_every={min(100, steps)}",
                         "outputs.plots=false"])


def _timed(spec, tmp, cache, cluster=None):
    """(wall s, summary) of the second of two runs into fresh stores (the first one warms up)."""
    from jaxclear import sweep
    for i in range(2):
        out = tmp / f"run{i}"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        _, summary, _ = sweep.run(spec, out=out, log=None, compile_cache=cache, cluster=cluster)
        wall = time.perf_counter() - t0
    return wall, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    import distributed
    import jax

    spec = _spec(args.variants, args.steps, args.chunk)
    work = args.variants * args.steps
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as d:
        d = Path(d)
        cache = d / "xla"
        wall, s = _timed(spec, d / "local", cache)
        rows.append(dict(engine="local (sweep.run)", workers=0, wall_s=wall, rate=work / wall,
                         compute_rate=s["variant_steps_per_s"]))
        for n in [int(x) for x in args.workers.split(",") if x.strip()]:
            with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                          dashboard_address=None) as lc, distributed.Client(lc) as client:
                client.wait_for_workers(n)
                wall, s = _timed(spec, d / f"cluster{n}", cache, cluster=client)
            rows.append(dict(engine="Dask LocalCluster", workers=n, wall_s=wall, rate=work / wall,
                             compute_rate=s["variant_steps_per_s"]))
    base = rows[0]["rate"]
    print(f"{args.variants} variants x {args.steps} steps, chunk {args.chunk}, "
          f"{jax.devices()[0].device_kind}, {__import__('os').cpu_count()} cores, float64")
    print(f"{'engine':22s} {'workers':>7s} {'wall s':>8s} {'variant-steps/s':>16s} {'vs local':>9s} "
          f"{'compute only':>13s}")
    for r in rows:
        r["ratio"] = r["rate"] / base
        print(f"{r['engine']:22s} {r['workers']:7d} {r['wall_s']:8.2f} {r['rate']:16.3g} {r['ratio']:9.2f} "
              f"{(r['compute_rate'] or 0):13.3g}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(variants=args.variants, steps=args.steps, chunk=args.chunk,
                                                   rows=rows), indent=2))
    return 0


if __name__ == "__main__":  # the guard the spawned worker processes need
    raise SystemExit(main())
