"""One prepared run for the day a CUDA device is lent: throughput, compile time, memory and a CPU
cross-check of the sweep kernels, printed as one table.

Needs only what a jax-with-CUDA machine has: jax, numpy (optax and matplotlib, which jaxclear
imports).  No zarr: the library functions are called directly (``sweep.plan`` → ``batch_params``
→ ``compiled``), never the result store.  Cases, all at ``--batch`` variants of the benchmark
slider-crank (``sweeps/bench_slider_crank.toml``: clearance 0.02–0.5 mm, restitution, friction;
dt = 1 µs, ``--steps`` steps):

    circle float64 / float32           the analytic circular bushing
    worn72 float64 / float32           a 72-point worn bushing (2nd-order Fourier wear of 10 µm,
                                       ``profile.kind = "fourier"``), the profile's default max_regions
    circle float64, sharded            jit with the variant axis explicitly sharded over every local
                                       device (``parallel.variant_sharding``), even a single one

Columns: variant-steps/s (best of ``--repeats`` timed calls after a warm-up, no compile), compile s
(lower + compile), memory per variant (XLA ``memory_analysis``: arguments + outputs + temporaries
/ variants), and the max relative difference to the CPU: the first ``--check`` variants run again
on the CPU backend in the same precision; per metric column and history channel
max |device − cpu| / max |cpu|, the worst over all of them (and its name) in the table.

    bash benchmarks/gpu_check.sh                       # on the GPU machine: B = 65536, 4000 steps
    python benchmarks/gpu_check.py --batch 64 --steps 200 --check 8    # CPU smoke test, ~1 min
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's jaxclear, even when another one is installed

WORN = ["profile.kind=fourier", "profile.wear_order=2", "profile.wear_depth_m=1e-5", "profile.n_points=72"]
TARGET_CIRCLE_F64 = 1e9  # variant-steps/s on one H200 (issue: GPU check)


def _spec(batch, steps, precision, extra=()):
    from jaxclear import spec as specmod

    return specmod.load(
        ROOT / "sweeps" / "bench_slider_crank.toml",
        [
            f"sampling.n={batch}",
            f"integrator.chunk_size={batch}",
            f"integrator.t_end_s={steps * 1e-6}",
            f"integrator.save_every={min(100, steps)}",
            f"integrator.precision={precision}",
            "outputs.plots=false",
            *extra,
        ],
    )


def _per_variant_bytes(comp, n):
    try:
        ma = comp.memory_analysis()
        return (ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes) / n
    except Exception:  # backend without memory analysis
        return None


def _best(fn, p, repeats):
    import jax

    jax.block_until_ready(fn(p))  # warm-up (first-call transfers)
    best = math.inf
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(p))
        best = min(best, time.perf_counter() - t0)
    return best


def _max_rel_diff(dev, cpu):
    """(worst normwise relative difference, its column) over {name: array} pairs."""
    import numpy as np

    worst, where = 0.0, None
    for k, c in cpu.items():
        c = np.asarray(c, np.float64)
        g = np.asarray(dev[k], np.float64)[: len(c)]
        if not np.issubdtype(np.asarray(cpu[k]).dtype, np.floating):
            d = float(np.any(g != c))  # integer / bool columns: 0 or 1 (any mismatch)
        else:
            ok = np.isfinite(c) & np.isfinite(g)
            if (np.isfinite(c) != np.isfinite(g)).any():
                d = math.inf
            elif not ok.any():
                continue
            else:
                scale = np.abs(c[ok]).max()
                d = float(np.abs(g[ok] - c[ok]).max() / scale) if scale > 0 else float(np.abs(g[ok]).max() > 0)
        if d > worst:
            worst, where = d, k
    return worst, where


def _flatten(metrics, history, n):
    out = {f"metric:{k}": v[:n] for k, v in metrics.items()}
    out.update({f"history:{k}": v[:n] for k, v in history.items()})
    return out


def run_case(name, spec, repeats, check, sharded=False):
    """One row of the table (a dict)."""
    import jax
    import numpy as np

    from jaxclear import parallel, sweep

    pl = sweep.plan(spec)
    nd = jax.local_device_count()
    B = parallel.padded_size(pl.chunk_size, nd)
    idx = np.minimum(np.arange(B), pl.n_variants - 1)
    p = sweep.batch_params(spec, pl, idx)
    if sharded:  # the multi-device path, explicitly, whatever the device count
        sh = parallel.variant_sharding()
        fn = jax.jit(jax.vmap(lambda q: pl.mech.simulate(pl.cfg, q)), in_shardings=(sh,), out_shardings=sh)
        p = jax.device_put(p, sh)
        t0 = time.perf_counter()
        comp = fn.lower(p).compile()
        compile_s = time.perf_counter() - t0
    else:  # the sweep's own compiled chunk function (sharded by itself when nd > 1)
        comp, compile_s = sweep.compiled(pl, p)
        if nd > 1:
            p = jax.device_put(p, parallel.variant_sharding())
    t = _best(comp, p, repeats)
    row = dict(
        case=name,
        precision=pl.dtype,
        batch=B,
        steps=pl.cfg.n_steps,
        devices=nd,
        rate=B * pl.cfg.n_steps / t,
        compile_s=compile_s,
        bytes_per_variant=_per_variant_bytes(comp, B),
        max_regions=getattr(pl.mech, "describe", lambda s, c: {})(spec, pl.cfg).get("max_regions"),
        check_variants=0,
        max_rel_diff=None,
        worst_column=None,
    )
    if check > 0:
        k = min(check, B)
        res = comp(p)
        dev = _flatten(sweep.chunk_metrics(spec, pl, p, res, B), {n: np.asarray(v) for n, v in res.history.items()}, k)
        cpu = jax.devices("cpu")[0]
        pc = jax.device_put(sweep.batch_params(spec, pl, idx[:k]), cpu)
        rc = jax.jit(jax.vmap(lambda q: pl.mech.simulate(pl.cfg, q)))(pc)  # runs where its inputs live: the CPU
        ref = _flatten(sweep.chunk_metrics(spec, pl, pc, rc, k), {n: np.asarray(v) for n, v in rc.history.items()}, k)
        row["check_variants"] = k
        row["max_rel_diff"], row["worst_column"] = _max_rel_diff(dev, ref)
    return row


def _fmt_bytes(b):
    if b is None:
        return "n/a"
    return f"{b / 1024:.3g} kB" if b < 1024**2 else f"{b / 1024**2:.3g} MB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=65536, help="variants per case (default 65536)")
    ap.add_argument("--steps", type=int, default=4000, help="time steps of dt = 1 µs (default 4000, the bench spec)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per case, best kept (default 3)")
    ap.add_argument("--check", type=int, default=256, help="variants recomputed on the CPU (default 256; 0: none)")
    ap.add_argument(
        "--cases",
        default="circle64,circle32,worn64,worn32,sharded",
        help="comma-separated subset of circle64,circle32,worn64,worn32,sharded",
    )
    ap.add_argument("--json", help="also write the rows (and the environment) to this file")
    args = ap.parse_args(argv)
    if args.batch < 1 or args.steps < 1:
        ap.error(f"--batch {args.batch} / --steps {args.steps}: both must be >= 1")

    import jax

    import jaxclear

    cases = {
        "circle64": ("circle", "float64", (), False),
        "circle32": ("circle", "float32", (), False),
        "worn64": ("worn72", "float64", WORN, False),
        "worn32": ("worn72", "float32", WORN, False),
        "sharded": ("circle, sharded", "float64", (), True),
    }
    chosen = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in chosen if c not in cases]
    if bad:
        ap.error(f"--cases {','.join(bad)}: allowed {','.join(cases)}")
    dev = jax.devices()[0]
    env = dict(
        jax=jax.__version__,
        jaxclear=jaxclear.__version__,
        python=platform.python_version(),
        platform=dev.platform,
        device_kind=dev.device_kind,
        local_devices=jax.local_device_count(),
        cpu_check=args.check > 0,
        xla_flags=os.environ.get("XLA_FLAGS", ""),
    )
    print(
        f"gpu_check: {env['local_devices']}x {dev.device_kind} ({dev.platform}), jax {jax.__version__}, "
        f"B = {args.batch}, {args.steps} steps, best of {args.repeats}",
        flush=True,
    )
    if dev.platform == "cpu":
        print("note: no accelerator: this is a smoke test (the CPU check compares the CPU with itself)", flush=True)
    import warnings

    rows = []
    for c in chosen:
        label, prec, extra, sharded = cases[c]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float32 resolution warnings: the diff column shows it
            row = run_case(label, _spec(args.batch, args.steps, prec, extra), args.repeats, args.check, sharded)
        rows.append(row)
        print(f"  done {label} {prec}: {row['rate']:.3g} variant-steps/s", flush=True)
    head = (
        f"{'case':18s} {'precision':9s} {'B':>7s} {'dev':>3s} {'variant-steps/s':>15s} {'compile s':>9s} "
        f"{'mem/variant':>11s} {'max rel diff to CPU':>19s}  worst column"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for r in rows:
        d = "n/a" if r["max_rel_diff"] is None else f"{r['max_rel_diff']:.2e} ({r['check_variants']})"
        print(
            f"{r['case']:18s} {r['precision']:9s} {r['batch']:7d} {r['devices']:3d} {r['rate']:15.3e} "
            f"{r['compile_s']:9.2f} {_fmt_bytes(r['bytes_per_variant']):>11s} {d:>19s}  {r['worst_column'] or ''}"
        )
    circ = [r for r in rows if r["case"] == "circle" and r["precision"] == "float64"]
    if circ and dev.platform == "gpu":
        met = "met" if circ[0]["rate"] >= TARGET_CIRCLE_F64 else "NOT met"
        print(f"target circle float64 >= {TARGET_CIRCLE_F64:.0e} variant-steps/s: {met}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(env=env, batch=args.batch, steps=args.steps, rows=rows), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
