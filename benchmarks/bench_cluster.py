"""Sweep throughput on a local Dask cluster (``jaxclear run --cluster``) against the plain local run.

The benchmark slider-crank (``sweeps/bench_slider_crank.toml``: circular bushing, dt = 1 µs) with
``--variants`` random variants in chunks of ``--chunk``, run end to end by ``sweep.run`` into a
fresh store: locally, then on a LocalCluster of 1 and of 2 single-threaded worker processes.  Each
engine runs once untimed (compiling, warming every worker up), then ``--rounds`` times, the engines
alternating, best kept: the rate is variants × steps / wall time of the whole run (plan, store
writes and derived files included; worker start-up and compiling excluded), "compute only" is the
run's own ``variant_steps_per_s``.  Ratios are against the local run measured in the same invocation.

    python benchmarks/bench_cluster.py                   # 8192 variants, 2000 steps, workers 1,2
    python benchmarks/bench_cluster.py --variants 2048 --steps 500 --workers 1   # smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _spec(variants, steps, chunk):
    from jaxclear import spec as specmod

    return specmod.load(
        ROOT / "sweeps" / "bench_slider_crank.toml",
        [
            f"sampling.n={variants}",
            f"integrator.t_end_s={steps * 1e-6}",
            f"integrator.chunk_size={chunk}",
            f"integrator.save_every={min(100, steps)}",
            "outputs.plots=false",
        ],
    )


def _run(spec, out, cache, cluster=None):
    """(wall s, summary) of one run into a fresh store."""
    from jaxclear import sweep

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    _, summary, _ = sweep.run(spec, out=out, log=None, compile_cache=cache, cluster=cluster)
    return time.perf_counter() - t0, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds, engines alternating, best kept (default 2)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    import distributed
    import jax

    spec = _spec(args.variants, args.steps, args.chunk)
    work = args.variants * args.steps
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_cluster_") as d, contextlib.ExitStack() as stack:
        d = Path(d)
        cache = d / "xla"
        engines = [("local (sweep.run)", 0, None)]
        for n in counts:  # every cluster started first, idle while the others run
            lc = stack.enter_context(
                distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
            )
            client = stack.enter_context(distributed.Client(lc))
            client.wait_for_workers(n)
            engines.append(("Dask LocalCluster", n, client))
        best = {}
        for r in range(args.rounds + 1):  # round 0 compiles and warms every worker up, not timed
            for _name, n, client in engines:
                wall, s = _run(spec, d / f"e{n}", cache, client)
                if r > 0 and (n not in best or wall < best[n][0]):
                    best[n] = (wall, s)
        rows = [
            dict(
                engine=name,
                workers=n,
                wall_s=best[n][0],
                rate=work / best[n][0],
                compute_rate=best[n][1]["variant_steps_per_s"],
            )
            for name, n, _ in engines
        ]
    base = rows[0]["rate"]
    print(
        f"{args.variants} variants x {args.steps} steps, chunk {args.chunk}, "
        f"{jax.devices()[0].device_kind}, {os.cpu_count()} cores, float64, load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{'engine':22s} {'workers':>7s} {'wall s':>8s} {'variant-steps/s':>16s} {'vs local':>9s} {'compute only':>13s}"
    )
    for r in rows:
        r["ratio"] = r["rate"] / base
        print(
            f"{r['engine']:22s} {r['workers']:7d} {r['wall_s']:8.2f} {r['rate']:16.3g} {r['ratio']:9.2f} "
            f"{(r['compute_rate'] or 0):13.3g}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(dict(variants=args.variants, steps=args.steps, chunk=args.chunk, rows=rows), indent=2)
        )
    return 0


if __name__ == "__main__":  # the guard the spawned worker processes need
    raise SystemExit(main())
