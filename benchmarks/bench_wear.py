#!/usr/bin/env python
"""Wear evolution (``jaxclear wear``, issue 20): the cost of one update against a plain run of the
same window, and the convergence of the evolved bushing as the cycles per update shrink.

1. Cost.  The spec ``sweeps/wear_evolution.toml`` at B variants (its axis tiled): one update is
   the compiled run with the Archard accumulation on the worn bushing, the metrics of the row,
   the profile columns and the next depth (``wear_evolution``'s per-update work, the store's
   writes excluded); the plain run is ``sweep``'s compiled run of the same spec with wear off
   (k_w = 0) and its metrics.  Both compiled first, then timed in alternating rounds, best of
   ``--repeats``: the ratio comes from one run on one machine (target: ≤ 1.5).
2. Convergence.  The same bushing evolved to ``--cycles`` crank cycles in M = 5, 10, 20, 40
   updates (cycles per update = cycles / M): the deepest wear, the worn volume and the peak
   contact force after the last update, and the deepest wear's distance from the finest M.

Usage::

    python benchmarks/bench_wear.py                  # B = 64, 10^6 cycles (~2 min on 2 cores)
    python benchmarks/bench_wear.py --b 8 --repeats 2 --quick
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxclear import spec as specmod
from jaxclear import sweep
from jaxclear import wear_evolution as W

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "sweeps" / "wear_evolution.toml"


def _spec(b, k_w):
    s = specmod.load(SPEC, [f"integrator.chunk_size={b}"])
    s["axes"] = {"model.crank_speed_rpm": {"values": list(np.linspace(4000.0, 6000.0, b))}}
    s["wear"]["coefficient_m2_per_N"] = k_w
    specmod.validate(s)
    return s


def cost(b, repeats):
    worn, plain = _spec(b, 1e-15), _spec(b, 0.0)
    pl_w, pl_p = sweep.plan(worn), sweep.plan(plain)
    pl_w = replace(pl_w, cfg=replace(pl_w.cfg, outputs=()))
    pl_p = replace(pl_p, cfg=replace(pl_p.cfg, outputs=()))
    assert pl_w.cfg.wear and not pl_p.cfg.wear
    idx = np.arange(b)
    p_w, p_p = sweep.batch_params(worn, pl_w, idx), sweep.batch_params(plain, pl_p, idx)
    fn_w = W._window_fn(pl_w.mech, pl_w.cfg)
    pts0 = jax.vmap(lambda p: W.initial_points(pl_w.mech, pl_w.cfg, p))(p_w)
    depth = jnp.zeros(pts0.shape[:-1], pts0.dtype)
    scale = jnp.full((b, 1, 1), 5e4, pts0.dtype)
    rj, ln = W._joint_values(pl_w.mech, p_w, "journal_radius", b), W._joint_values(pl_w.mech, p_w, "bushing_length", b)

    def update():
        pw, res = fn_w(p_w, pts0, depth)
        cols = W.profile_columns(np.asarray(pts0), np.asarray(depth), rj, ln)
        cols.update(pl_w.mech.chunk_metrics(worn, pl_w.cfg, pw, res, b, pl_w.t_end))
        return np.asarray(W.advance(depth, res.wear, scale, 0.0))

    def plain_run():
        res = sweep._execute_chunk(pl_p, p_p)
        return sweep.chunk_metrics(plain, pl_p, p_p, res, b)

    t0 = time.perf_counter()
    update()
    c_w = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain_run()
    c_p = time.perf_counter() - t0
    best = {"update": math.inf, "plain": math.inf}
    for _ in range(repeats):
        for name, f in (("plain", plain_run), ("update", update)):
            t0 = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t0)
    steps = pl_w.cfg.n_steps
    print(f"== cost of one update, B = {b}, {steps} steps per window (alternating rounds, best of {repeats}) ==")
    print(
        f"plain run of the window (k_w = 0) : {best['plain']:.3f} s   ({b * steps / best['plain']:.3g} variant-steps/s; "
        f"first call {c_p:.1f} s)"
    )
    print(
        f"one wear update                   : {best['update']:.3f} s   ({b * steps / best['update']:.3g} variant-steps/s; "
        f"first call {c_w:.1f} s)"
    )
    ratio = best["update"] / best["plain"]
    print(f"update / plain run                : {ratio:.3f}   (target <= 1.5)")
    return {"b": b, "steps": steps, "plain_s": best["plain"], "update_s": best["update"], "ratio": ratio}


def convergence(cycles, updates=(5, 10, 20, 40)):
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for M in updates:
            s = specmod.load(SPEC, [f"wear.updates={M}", f"wear.cycles_per_update={cycles / M}", "outputs.plots=false"])
            t0 = time.perf_counter()
            table, _ = W.run(s, Path(d) / f"m{M}", log=lambda m: None)
            last = np.asarray(table["update"]) == M
            rows.append(
                {
                    "updates": M,
                    "cycles_per_update": cycles / M,
                    "wall_s": time.perf_counter() - t0,
                    "k_w": np.asarray(table["coefficient_m2_per_N"])[last].tolist(),
                    "max_wear_depth_m": np.asarray(table["max_wear_depth_m"])[last].tolist(),
                    "worn_volume_m3": np.asarray(table["worn_volume_m3"])[last].tolist(),
                    "peak_contact_force_steady_N": np.asarray(table["peak_contact_force_steady_N"])[last].tolist(),
                }
            )
    fine = rows[-1]
    print(f"\n== convergence in the cycles per update, {cycles:.3g} cycles (sweeps/wear_evolution.toml) ==")
    print(
        f"{'M':>4} {'cycles/update':>14} {'k_w':>9} {'deepest [µm]':>13} {'vs finest':>10} {'volume [mm³]':>13} "
        f"{'vs finest':>10} {'peak F [N]':>11}"
    )
    for r in rows:
        for j, k in enumerate(r["k_w"]):
            dd = r["max_wear_depth_m"][j] / fine["max_wear_depth_m"][j] - 1
            dv = r["worn_volume_m3"][j] / fine["worn_volume_m3"][j] - 1
            print(
                f"{r['updates']:>4} {r['cycles_per_update']:>14.4g} {k:>9.2g} {r['max_wear_depth_m'][j] * 1e6:>13.4g} "
                f"{dd:>+10.2%} {r['worn_volume_m3'][j] * 1e9:>13.4g} {dv:>+10.2%} {r['peak_contact_force_steady_N'][j]:>11.5g}"
            )
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--b", type=int, default=64, help="variants per chunk for the cost (default 64)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating timing rounds (default 3)")
    ap.add_argument("--cycles", type=float, default=1e6, help="crank cycles of the convergence study (default 1e6)")
    ap.add_argument("--quick", action="store_true", help="cost only (no convergence study)")
    ap.add_argument("--json", help="write the figures to this JSON file")
    a = ap.parse_args()
    out = {"cost": cost(a.b, a.repeats)}
    if not a.quick:
        out["convergence"] = convergence(a.cycles)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
