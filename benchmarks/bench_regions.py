#!/usr/bin/env python
"""Cost of the multi-region contact path against the analytic circle (issue 22, part 1).

The slider-crank of ``bench_slider_crank.py`` (Flores et al. 2008, rod–slider clearance joint) at
B variants, float64, with its 72-point worn bushing (oval + one-sided wear of amplitude ~ c), run
as whole steps (``jit(vmap(simulate))``, ``outputs=()``) for: the analytic circle, 1 slot
(``contact.detect_deepest``), 2 and 4 slots (``contact.detect``), all compiled first and then
timed in alternating rounds (best of ``--repeats``): the ratios come from one run.  Then the
pieces of the joint step alone (vmapped over B pin positions, ``--inner`` iterations inside one
``lax.fori_loop``, so dispatch is not timed): detection, impact memory and the laws at 1 and 4
slots, and the region labelling by itself.  Last, what ``profile.max_regions = "auto"`` picks
for these profiles (``contact.region_bound``).

Usage::

    python benchmarks/bench_regions.py                       # B = 1024, 1000 steps (~2 min)
    python benchmarks/bench_regions.py --b 1024 --steps 2000 --repeats 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_slider_crank as bsc  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxclear import contact, joints, laws  # noqa: E402


def whole_steps(b, steps, repeats):
    pj = lambda k: joints.JointConfig(geometry="points", n_points=72, refine=True, max_regions=k)
    cases = [
        ("circle (analytic)", bsc.jax_config(steps), 0),
        ("72 points, 1 slot (detect_deepest)", bsc.jax_config(steps, joint=pj(1)), 72),
        ("72 points, 2 slots (detect)", bsc.jax_config(steps, joint=pj(2)), 72),
        ("72 points, 4 slots (detect)", bsc.jax_config(steps, joint=pj(4)), 72),
    ]
    c, e, mu = bsc.variants(b)
    runs = []
    for name, cfg, pts in cases:
        p = bsc.jax_params(c, e, mu, points=pts)
        comp, tc = bsc.jax_compile(cfg, p)
        jax.block_until_ready(comp(p))
        runs.append(dict(case=name, comp=comp, p=p, compile_s=tc, t=math.inf))
    for _ in range(repeats):
        for r in runs:
            t0 = time.perf_counter()
            jax.block_until_ready(r["comp"](r["p"]))
            r["t"] = min(r["t"], time.perf_counter() - t0)
    base = runs[0]["t"]
    print(f"== whole step, B = {b}, {steps} steps, float64 (alternating rounds, best of {repeats}) ==")
    print(f"{'case':<36} {'variant-steps/s':>16} {'ns/vstep':>9} {'cost/circle':>12} {'HLO ops/step':>12}")
    out = []
    for r in runs:
        h = bsc._hlo_counts(r["comp"])
        row = dict(
            case=r["case"],
            rate=b * steps / r["t"],
            ns=1e9 * r["t"] / (b * steps),
            cost_over_circle=r["t"] / base,
            compile_s=r["compile_s"],
            **h,
        )
        out.append(row)
        print(f"{row['case']:<36} {row['rate']:16.3e} {row['ns']:9.1f} {row['cost_over_circle']:12.2f} {h['ops']:12d}")
    return out, bsc.jax_params(c, e, mu, points=72)


def _timed_loop(fn, args, inner, repeats):
    """Best time per call of ``fn(*args, i)`` inside a fori_loop of ``inner`` iterations."""

    def body(i, acc):
        return acc + fn(*args, i)

    f = jax.jit(lambda *a: jax.lax.fori_loop(0, inner, body, jnp.zeros((), jnp.float64)))
    jax.block_until_ready(f(*args))
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return best / inner


def pieces(p, inner, repeats):
    """ns per variant-step of the joint's pieces alone, on the bench's own profiles."""
    pts = p.joint.points  # (B, 72, 2)
    b = pts.shape[0]
    rj = p.joint.journal_radius
    clr = p.joint.clearance
    ang = jnp.linspace(0.0, 2 * jnp.pi, b, endpoint=False)

    def centre(i):  # pins near the wall, moving with i (nothing can be hoisted out of the loop)
        a = ang + 1e-3 * i
        ecc = 1.05 * clr * (1.0 + 0.3 * jnp.cos(2 * a))
        return jnp.stack([ecc * jnp.cos(a), ecc * jnp.sin(a)], -1)

    mem1 = jnp.zeros((b, joints.JointConfig(geometry="points", n_points=72, max_regions=1).memory_size))
    memN = jnp.zeros((b, 72))

    def deepest(pts, rj, i):
        r = jax.vmap(lambda q, c, R: contact.detect_deepest(q, c, R, True))(pts, centre(i), rj)
        return jnp.sum(r.depth)

    def deepest_mem(pts, rj, i):
        def one(q, c, R, m):
            r, w = contact.detect_deepest_words(q, c, R, True)
            return jnp.sum(contact.deepest_impact_memory(r, m, r.depth, words=w)[0])

        return jnp.sum(jax.vmap(one)(pts, centre(i), rj, mem1))

    def full(k):
        def f(pts, rj, i):
            r = jax.vmap(lambda q, c, R: contact.detect(q, c, R, k, refine=True))(pts, centre(i), rj)
            return jnp.sum(r.depth)

        return f

    def full_mem(k):
        def f(pts, rj, i):
            def one(q, c, R, m):
                r = contact.detect(q, c, R, k, refine=True)
                return jnp.sum(contact.region_impact_memory(r, m > 0, m, r.depth)[0])

            return jnp.sum(jax.vmap(one)(pts, centre(i), rj, memN))

        return f

    def labels_only(pts, rj, i):
        def one(q, c, R):
            m = (q[:, 0] - c[0]) ** 2 + (q[:, 1] - c[1]) ** 2 < R * R
            lab, n = contact._region_labels(m)
            return jnp.sum(lab) + n

        return jnp.sum(jax.vmap(one)(pts, centre(i), rj)).astype(jnp.float64)

    def law(k):
        def f(pts, rj, i):
            d = jnp.abs(pts[:, :k, 0]) * 1e-3 * (1.0 + 1e-3 * i)  # (B, k) positive depths
            v = pts[:, :k, 1] * (1.0 + 1e-3 * i)
            fn = laws.normal_force(
                "lankarani_nikravesh",
                d,
                v,
                jnp.abs(v) + 1e-3,
                p.joint.stiffness[:, None],
                exponent=1.5,
                restitution=0.9,
                damping=0.0,
            )
            ft = laws.friction_force("ambrosio", v, fn, 0.01, 1e-4, 1e-3)
            return jnp.sum(fn + ft)

        return f

    cases = [
        ("detect_deepest (1 slot)", deepest),
        ("detect_deepest + words memory", deepest_mem),
        ("detect, 1 slot", full(1)),
        ("detect, 4 slots", full(4)),
        ("detect + region memory, 4 slots", full_mem(4)),
        ("region labels only (mask, prefix count)", labels_only),
        ("laws (LN + ambrosio), 1 slot", law(1)),
        ("laws (LN + ambrosio), 4 slots", law(4)),
    ]
    print(f"\n== pieces alone, B = {b}, {inner} iterations in one fori_loop, best of {repeats} ==")
    out = []
    for name, fn in cases:
        t = _timed_loop(fn, (pts, rj), inner, repeats)
        out.append(dict(piece=name, ns=1e9 * t / b))
        print(f"{name:<44} {1e9 * t / b:9.1f} ns per variant-step")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--b", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--inner", type=int, default=200)
    ap.add_argument("--no-pieces", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    rows, p = whole_steps(a.b, a.steps, a.repeats)
    res = dict(B=a.b, steps=a.steps, whole=rows, platform=jax.devices()[0].device_kind)
    if not a.no_pieces:
        res["pieces"] = pieces(p, a.inner, a.repeats)
    bound = contact.region_bound(np.asarray(p.joint.points), np.asarray(p.joint.journal_radius))
    res["auto"] = dict(slots=bound.slots, reason=bound.reason(72))
    print(f'\nprofile.max_regions = "auto" on these {a.b} bench profiles: {bound.reason(72)}')
    r4 = next(r for r in rows if r["case"].startswith("72 points, 4"))
    print(
        f"4 slots / circle = {r4['cost_over_circle']:.2f} (target <= 6: {'met' if r4['cost_over_circle'] <= 6 else 'NOT met'})"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
