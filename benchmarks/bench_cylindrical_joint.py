#!/usr/bin/env python
"""Speed of the 3D cylindrical clearance joint (``jaxclear.cylindrical_joint`` on a
``jaxclear.rigid3d`` pin) against a one-thread Numba implementation of the same model.

The model: one pin (mass 0.1 kg, inertia (2e-5, 2e-5, 1e-5) kg·m²) in a fixed hole
(``cylindrical_joint.reference_params``: R_B = 10 mm, L = 40 mm, axial gap 0.2 mm), four contacts
(two end spheres, two end-face rims), the Flores hysteresis law with the episode's largest approach
rate as δ̇⁻, regularised Coulomb friction on the 3D slip, a constant load F = (300, 200, 50) N and
tilting moment (0, 2, 0) N·m, started at (0.2, 0.1, 0) m/s with 100 rad/s spin (impacts, then
contact).  Step: ``rigid3d.make_step("verlet_predicted", ...)`` (the Lie-group drift, second
order), dt = 1 µs.  The exponent n = 1.5 is static (``cylindrical_joint.Config.exponent``, as a
sweep that does not sweep it runs: δ^1.5 as δ·√δ), and the Numba kernel does the same.  Variants: clearance log-uniform 30–100 µm, restitution U(0.6, 0.9), friction
μ U(0.05, 0.15), hole axis misaligned U(−1, 1) mrad about y; every leaf carries the variant axis.

* jaxclear: ``jax.jit(jax.vmap(sim))``, sim = ``rigid3d.run`` with one running metric (the peak
  normal force over every step);
* Numba: an ``@njit`` scalar kernel written from the equations of ``cylindrical_joint`` and
  ``rigid3d`` (same quaternion drift with its Taylor branch, same contact geometry, law, memory
  and friction), the loop over variants on ONE thread.

Agreement first: after ``--check-steps`` steps from the same state the final states and peak forces
must agree to ``--rtol`` (relative to the largest value); the script exits 1 otherwise.  Then
variant-steps/s at each B (default 1, 64, 1024), both measured in this run, and their ratio.

Every core (``--cpu-devices N``, default every usable core; 1 skips it): the same jaxclear
function with the batch split over N XLA host devices (``jaxclear.parallel.variant_sharding``,
what ``jaxclear run`` does by default), in a subprocess (the device count is fixed when JAX
starts), against a Numba ``prange`` kernel of the same model on N threads; both at the largest B.

Usage::

    python benchmarks/bench_cylindrical_joint.py --quick
    python benchmarks/bench_cylindrical_joint.py --sizes 1,64,1024 --steps 2000 --json cyl.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxclear  # noqa: F401  (float64)
from jaxclear import cylindrical_joint as cj
from jaxclear import rigid3d as r3

try:
    import numba
    from numba import njit
except ImportError:  # benchmark-only extra: pip install -e .[bench]
    numba = None

DT = 1e-6
MASS = 0.1
INERTIA = (2e-5, 2e-5, 1e-5)
F_EXT = (300.0, 200.0, 50.0)
T_EXT = (0.0, 2.0, 0.0)
V0 = (0.2, 0.1, 0.0)
W0 = (0.0, 0.0, 100.0)
CFG = cj.Config("flores", "coulomb", True, exponent=1.5)  # the exponent static, as a sweep that fixes it


def variants(n, seed=0):
    rng = np.random.default_rng(seed)
    return (
        np.exp(rng.uniform(np.log(30e-6), np.log(100e-6), n)),
        rng.uniform(0.6, 0.9, n),
        rng.uniform(0.05, 0.15, n),
        rng.uniform(-1e-3, 1e-3, n),
    )


def batched_params(c, e, mu, mis):
    B = len(c)
    base = cj.reference_params()
    tile = lambda x: jnp.broadcast_to(jnp.asarray(x), (B,) + jnp.shape(x))
    p = jax.tree_util.tree_map(tile, base)
    axes = jax.vmap(lambda m: cj.misaligned_axis(0.0, m))(jnp.asarray(mis))
    return p._replace(
        clearance=jnp.asarray(c), restitution=jnp.asarray(e), friction_coefficient=jnp.asarray(mu), axis_a=axes
    )


def make_jax(n_steps):
    mass, inertia = jnp.array([MASS]), jnp.array([INERTIA])
    ext = lambda p, q, v, t: (jnp.asarray(F_EXT), jnp.asarray(T_EXT))
    loads = cj.fixed_housing_loads(CFG, lambda p: p, ext)
    step = r3.make_step("verlet_predicted", mass, inertia, loads, DT)

    def sim(p):
        q0 = r3.Pose(jnp.zeros((1, 3)), jnp.array([[1.0, 0.0, 0.0, 0.0]]))
        v0 = r3.Twist(jnp.array([V0]), jnp.array([W0]))
        s0 = r3.initial_state(r3.make_accel(mass, inertia, loads), p, q0, v0, cj.initial_memory(CFG))
        red = lambda acc, o, i: jnp.maximum(acc, jnp.max(o[0].normal_force))
        s, peak, _ = r3.run(step, p, s0, n_steps, reduce=red, acc0=jnp.zeros(()))
        return jnp.concatenate([s.q.x[0], s.q.quat[0], s.v.v[0], s.v.w[0]]), peak

    return jax.jit(jax.vmap(sim))


def numba_args(p):
    a = lambda x: np.ascontiguousarray(np.asarray(x, float))
    return (
        a(p.pin_radius),
        a(p.clearance),
        a(p.length),
        a(p.axial_gap),
        a(p.stiffness),
        a(p.axial_stiffness),
        a(p.exponent),
        a(p.restitution),
        a(p.friction_coefficient),
        a(p.v0),
        a(p.axis_a),
        a(p.face_smoothing),
    )


if numba is not None:
    # scalar code on tuples (no heap arrays inside the step): 3-vectors as (x, y, z)
    @njit(inline="always")
    def _dot(a, b):
        return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]

    @njit(inline="always")
    def _cross(a, b):
        return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])

    @njit(inline="always")
    def _axpy(x, s, y):  # x + s·y
        return (x[0] + s * y[0], x[1] + s * y[1], x[2] + s * y[2])

    @njit(inline="always")
    def _contact(k, x, v, ww, a, b, u, root, reach, mem_k, RB, c, L, g, K, Kax, n_exp, chi, mu, v0):
        """One contact: (force on the pin, its point − x, new memory, F_n)."""
        s = 1.0 if k % 2 == 0 else -1.0
        E = _axpy(x, s * 0.5 * L, b)
        ra = _dot(E, a)
        if k < 2:
            d = _axpy(E, -ra, a)
            dn2 = _dot(d, d)
            dn = math.sqrt(dn2) if dn2 > 0 else 0.0
            if dn > 0:
                n = (d[0] / dn, d[1] / dn, d[2] / dn)
            else:
                ref = (1.0, 0.0, 0.0) if abs(a[0]) < 0.9 else (0.0, 1.0, 0.0)
                n0 = _cross(a, ref)
                nn = math.sqrt(_dot(n0, n0))
                n = (n0[0] / nn, n0[1] / nn, n0[2] / nn)
            depth = dn - c
            r = (E[0] + RB * n[0] - x[0], E[1] + RB * n[1] - x[1], E[2] + RB * n[2] - x[2])
            Kk = K
        else:
            depth = s * ra + RB * reach - 0.5 * (L + g)
            n = (s * a[0], s * a[1], s * a[2])
            inv = 1.0 / root if root > 0 else 0.0
            r = (
                E[0] + RB * s * u[0] * inv - x[0],
                E[1] + RB * s * u[1] * inv - x[1],
                E[2] + RB * s * u[2] * inv - x[2],
            )
            Kk = Kax
        wr = _cross(ww, r)
        rel = (v[0] + wr[0], v[1] + wr[1], v[2] + wr[2])
        dd = _dot(n, rel)
        vt = _axpy(rel, -dd, n)
        sl2 = _dot(vt, vt)
        slip = math.sqrt(sl2) if sl2 > 0 else 0.0
        active = depth > 0
        started = active and not (mem_k > 0)
        dm = max(0.0 if started else mem_k, max(dd, 1e-4))
        fn = 0.0
        if active:
            vm = max(abs(dm), 1e-4)
            # δ^1.5 as δ·√δ, as jaxclear does for a static exponent (a fair baseline)
            pw = depth * math.sqrt(depth) if n_exp == 1.5 else depth**n_exp
            fn = max(Kk * pw * (1.0 + chi * dd / vm), 0.0)
        else:
            dm = 0.0
        ft = -mu * fn * math.tanh(slip / v0)
        sc = ft / slip if slip > 0 else ft
        f = (-fn * n[0] + sc * vt[0], -fn * n[1] + sc * vt[1], -fn * n[2] + sc * vt[2])
        return f, r, dm, fn

    @njit
    def _accel(x, qu, v, w, mem, prm):
        """(a, α, new memory (4-tuple), largest F_n) at the state (x, quat, v, ω_body)."""
        RB, c, L, g, K, Kax, n_exp, e, mu, v0, ax0, ax1, ax2, eps = prm
        qw, qx, qy, qz = qu
        R00 = 1 - 2 * (qy * qy + qz * qz)
        R01 = 2 * (qx * qy - qw * qz)
        R02 = 2 * (qx * qz + qw * qy)
        R10 = 2 * (qx * qy + qw * qz)
        R11 = 1 - 2 * (qx * qx + qz * qz)
        R12 = 2 * (qy * qz - qw * qx)
        R20 = 2 * (qx * qz - qw * qy)
        R21 = 2 * (qy * qz + qw * qx)
        R22 = 1 - 2 * (qx * qx + qy * qy)
        ww = (
            R00 * w[0] + R01 * w[1] + R02 * w[2],
            R10 * w[0] + R11 * w[1] + R12 * w[2],
            R20 * w[0] + R21 * w[1] + R22 * w[2],
        )
        a = (ax0, ax1, ax2)
        b = (R02, R12, R22)
        ab = _dot(a, b)
        u = _axpy(a, -ab, b)
        un2 = _dot(u, u)
        un = math.sqrt(un2) if un2 > 0 else 0.0
        r2 = un * un + eps * eps
        root = math.sqrt(r2) if r2 > 0 else 0.0
        reach = root - eps
        ec = min(max(e, 1e-6), 1.0)
        chi = 8.0 * (1.0 - ec) / (5.0 * ec)
        F = F_EXT
        T = T_EXT
        peak = 0.0
        m = [0.0, 0.0, 0.0, 0.0]
        for k in range(4):
            f, r, dm, fn = _contact(k, x, v, ww, a, b, u, root, reach, mem[k], RB, c, L, g, K, Kax, n_exp, chi, mu, v0)
            m[k] = dm
            peak = max(peak, fn)
            F = (F[0] + f[0], F[1] + f[1], F[2] + f[2])
            t = _cross(r, f)
            T = (T[0] + t[0], T[1] + t[1], T[2] + t[2])
        acc = (F[0] / MASS, F[1] / MASS, F[2] / MASS)
        tb = (
            R00 * T[0] + R10 * T[1] + R20 * T[2],
            R01 * T[0] + R11 * T[1] + R21 * T[2],
            R02 * T[0] + R12 * T[1] + R22 * T[2],
        )
        Iw = (INERTIA[0] * w[0], INERTIA[1] * w[1], INERTIA[2] * w[2])
        gy = _cross(w, Iw)
        al = ((tb[0] - gy[0]) / INERTIA[0], (tb[1] - gy[1]) / INERTIA[1], (tb[2] - gy[2]) / INERTIA[2])
        return acc, al, (m[0], m[1], m[2], m[3]), peak

    @njit(inline="always")
    def _drift(x, qu, v, w, h):
        x1 = _axpy(x, h, v)
        th = (h * w[0], h * w[1], h * w[2])
        t2 = _dot(th, th)
        t = math.sqrt(t2) if t2 > 0 else 0.0
        if t < 1e-3:
            kk = 0.5 - t2 / 48.0 + t2 * t2 / 3840.0
            cc = 1.0 - t2 / 8.0 + t2 * t2 / 384.0
        else:
            kk = math.sin(0.5 * t) / t
            cc = math.cos(0.5 * t)
        pw, px, py, pz = qu
        rw, rx, ry, rz = cc, kk * th[0], kk * th[1], kk * th[2]
        o0 = pw * rw - px * rx - py * ry - pz * rz
        o1 = pw * rx + px * rw + py * rz - pz * ry
        o2 = pw * ry - px * rz + py * rw + pz * rx
        o3 = pw * rz + px * ry - py * rx + pz * rw
        nn = math.sqrt(o0 * o0 + o1 * o1 + o2 * o2 + o3 * o3)
        return x1, (o0 / nn, o1 / nn, o2 / nn, o3 / nn)

    @njit
    def _run_one(n_steps, prm):
        x, qu, v, w = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), V0, W0
        mem = (0.0, 0.0, 0.0, 0.0)
        a, al, _, _ = _accel(x, qu, v, w, mem, prm)  # a(t = 0); the memory starts at 0 (rigid3d.initial_state)
        peak = 0.0
        h = DT
        for _ in range(n_steps):
            vh, wh = _axpy(v, 0.5 * h, a), _axpy(w, 0.5 * h, al)
            x, qu = _drift(x, qu, vh, wh, h)
            a, al, mem, pk = _accel(x, qu, _axpy(vh, 0.5 * h, a), _axpy(wh, 0.5 * h, al), mem, prm)
            peak = max(peak, pk)
            v, w = _axpy(vh, 0.5 * h, a), _axpy(wh, 0.5 * h, al)
        return (x[0], x[1], x[2], qu[0], qu[1], qu[2], qu[3], v[0], v[1], v[2], w[0], w[1], w[2]), peak

    @njit
    def _variant(j, n_steps, RB, c, L, g, K, Kax, n_exp, e, mu, v0, axis, eps, states, peaks):
        """Variant j: its run, final state and peak written into row j."""
        prm = (
            RB[j],
            c[j],
            L[j],
            g[j],
            K[j],
            Kax[j],
            n_exp[j],
            e[j],
            mu[j],
            v0[j],
            axis[j, 0],
            axis[j, 1],
            axis[j, 2],
            eps[j],
        )
        st, pk = _run_one(n_steps, prm)
        for i in range(13):
            states[j, i] = st[i]
        peaks[j] = pk

    @njit
    def numba_serial(n_steps, RB, c, L, g, K, Kax, n_exp, e, mu, v0, axis, eps, states, peaks):
        for j in range(c.shape[0]):
            _variant(j, n_steps, RB, c, L, g, K, Kax, n_exp, e, mu, v0, axis, eps, states, peaks)

    @njit(parallel=True)
    def numba_parallel(n_steps, RB, c, L, g, K, Kax, n_exp, e, mu, v0, axis, eps, states, peaks):
        for j in numba.prange(c.shape[0]):
            _variant(j, n_steps, RB, c, L, g, K, Kax, n_exp, e, mu, v0, axis, eps, states, peaks)


def run_numba_parallel(n_steps, args, threads):
    B = args[1].shape[0]
    states, peaks = np.empty((B, 13)), np.empty(B)
    numba.set_num_threads(threads)
    numba_parallel(n_steps, *args, states, peaks)
    return states, peaks


CHILD = r"""
import json, sys, time
from jaxclear import parallel
parallel.set_cpu_devices(int(sys.argv[1]))
import jax, numpy as np
sys.path.insert(0, sys.argv[5])
import bench_cylindrical_joint as b
B, n_steps, repeats = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = jax.device_put(b.batched_params(*b.variants(B)), parallel.variant_sharding())
fn = b.make_jax(n_steps)
st, pk = jax.block_until_ready(fn(p))
t = b.best_time(lambda: jax.block_until_ready(fn(p)), repeats)
print(json.dumps({"devices": jax.local_device_count(), "rate": B * n_steps / t, "peak": np.asarray(pk).tolist()}))
"""


def measure_all_cores(n_dev, B, n_steps, repeats):
    """jaxclear on n_dev host devices (subprocess) and Numba prange on n_dev threads, at B."""
    import subprocess
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n_dev), str(B), str(n_steps), str(repeats), here],
        capture_output=True,
        text=True,
        check=True,
    )
    child = json.loads(out.stdout.strip().splitlines()[-1])
    rn = None
    if numba is not None:
        na = numba_args(batched_params(*variants(B)))
        st, pk = run_numba_parallel(n_steps, na, n_dev)  # compile + the peaks to compare
        tn = best_time(lambda: run_numba_parallel(n_steps, na, n_dev), repeats)
        rn = B * n_steps / tn
        d = float(np.max(np.abs(np.asarray(child["peak"]) - pk)) / np.max(np.abs(pk)))
        print(f"  (all cores: peak forces of the sharded run and the prange kernel agree to {d:.1e})")
    return child["devices"], child["rate"], rn


def run_numba(n_steps, args):
    B = args[1].shape[0]
    states, peaks = np.empty((B, 13)), np.empty(B)
    numba_serial(n_steps, *args, states, peaks)
    return states, peaks


def best_time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: B = 1, 64, 500 steps")
    ap.add_argument("--sizes", default=None, help="batch sizes (default 1,64,1024)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed run (default 2000)")
    ap.add_argument("--check-steps", type=int, default=500, help="steps of the agreement check")
    ap.add_argument("--rtol", type=float, default=1e-8, help="agreement tolerance (relative to the largest value)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None, help="write the results to this file")
    ap.add_argument(
        "--cpu-devices",
        type=int,
        default=None,
        help="all-cores row: N host devices vs Numba prange on N threads (default: usable cores; 1 skips)",
    )
    args = ap.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("1,64" if args.quick else "1,64,1024")).split(",")]
    n_steps = args.steps or (500 if args.quick else 2000)
    print(
        f"jax {jax.__version__} on {jax.devices()[0].device_kind} ×{len(jax.devices())}, "
        f"numba {numba.__version__ if numba else 'missing'}, {platform.processor() or platform.machine()}"
    )
    # agreement
    c, e, mu, mis = variants(8, seed=1)
    p = batched_params(c, e, mu, mis)
    st_j, pk_j = (np.asarray(x) for x in make_jax(args.check_steps)(p))
    ok = True
    if numba is not None:
        st_n, pk_n = run_numba(args.check_steps, numba_args(p))
        d_state = float(np.max(np.abs(st_n - st_j) / np.maximum(np.max(np.abs(st_j), axis=0), 1e-300)))
        d_peak = float(np.max(np.abs(pk_n - pk_j)) / np.max(np.abs(pk_j)))
        ok = d_state <= args.rtol and d_peak <= args.rtol
        print(
            f"agreement after {args.check_steps} steps (8 variants): state {d_state:.2e}, peak force {d_peak:.2e} "
            f"(peak {np.max(pk_j):.4g} N) — {'ok' if ok else 'FAILED'} (rtol {args.rtol:g})"
        )
    rows = []
    print(
        f"\n{'B':>6} {'jaxclear':>12} {'Numba 1 thread':>15} {'jaxclear/Numba':>15}   (variant-steps/s, {n_steps} steps)"
    )
    for B in sizes:
        c, e, mu, mis = variants(B)
        p = batched_params(c, e, mu, mis)
        fn = make_jax(n_steps)
        jax.block_until_ready(fn(p))  # compile + warm-up
        tj = best_time(lambda: jax.block_until_ready(fn(p)), args.repeats)
        rj = B * n_steps / tj
        rn = None
        if numba is not None:
            na = numba_args(p)
            run_numba(10, na)  # compile
            tn = best_time(lambda: run_numba(n_steps, na), max(1, args.repeats if B <= 64 else 1))
            rn = B * n_steps / tn
        rows.append({"B": B, "jaxclear": rj, "numba_1_thread": rn, "ratio": rj / rn if rn else None})
        print(f"{B:>6} {rj:>12.3g} {rn if rn else float('nan'):>15.3g} {rj / rn if rn else float('nan'):>15.3g}")
    from jaxclear import parallel

    n_dev = args.cpu_devices or parallel.usable_cores()
    cores = None
    if n_dev > 1 and not args.quick:
        B = max(sizes)
        dev, rj, rp = measure_all_cores(n_dev, B, n_steps, args.repeats)
        r1 = next(r for r in rows if r["B"] == B)["numba_1_thread"]
        cores = {"B": B, "devices": dev, "jaxclear": rj, "numba_prange": rp, "numba_1_thread": r1}
        print(
            f"\nevery core, B = {B}: jaxclear on {dev} host devices {rj:.3g}, Numba prange on {n_dev} threads "
            f"{rp if rp else float('nan'):.3g}; jaxclear/Numba-prange {rj / rp if rp else float('nan'):.3g}, "
            f"jaxclear/Numba-1-thread {rj / r1 if r1 else float('nan'):.3g}"
        )
    r1024 = next((r for r in rows if r["B"] == 1024 and r["ratio"]), None)
    if r1024 is not None:
        best = max(r1024["ratio"], cores["jaxclear"] / r1024["numba_1_thread"] if cores else 0.0)
        print(
            f"\ntarget at B = 1024, jaxclear >= the one-thread Numba rate: {'met' if best >= 1 else 'NOT met'} "
            f"(one XLA device {r1024['ratio']:.2f}"
            + (f", every core {cores['jaxclear'] / r1024['numba_1_thread']:.2f}" if cores else "")
            + ")"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": n_steps, "dt_s": DT, "agreement_ok": ok, "rows": rows, "all_cores": cores}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
