#!/usr/bin/env python
"""Speed benchmark of jaxclear on the Flores et al. (2008) slider-crank (rod–slider clearance joint).

Three implementations of the SAME model are run side by side:

* jaxclear:   ``jax.jit(jax.vmap(lambda p: slider_crank.simulate(cfg, p)))`` with ``outputs=()``;
* NumPy:      a Python loop over time steps, vectorised over variants (arrays of shape (B,));
* Numba:      ``@njit`` scalar code, outer loop over variants, inner loop over steps, ONE thread
              (no prange), written the natural way: crank and rod angles carried as floats with
              ``np.cos``/``np.sin`` every step, ``if`` branches for contact and friction.  A second
              Numba kernel ("numba-pairs") carries (cos, sin) pairs rotated by the same
              transcendental-free update as jaxclear; it is reported for information only.

Model (identical in all three): planar slider-crank, crank 0.05 m at constant 5000 rpm (no
ramp), rod 0.12 m (m = 0.21 kg, J = 2.5e-4 kg m²), slider 0.14 kg on x, gravity −y; journal on
the rod end C (R_J = 10 mm) in a circular bushing on the slider (R_B = R_J + c).  Circle
geometry δ = |r_C − r_slider| − c.  Lankarani–Nikravesh F_n = K δ^1.5 (1 + ¾(1−e²) δ̇/δ̇⁻) with
K = 4/(3·2σ)·√(R_J R_B/c), σ = (1−ν²)/E (steel), δ̇⁻ = max(δ̇, 1e-4 m/s) captured at contact
onset and kept while in contact; Ambrósio modified Coulomb (v0 = 1e-4, v1 = 1e-3 m/s); top dead
centre start with the journal centred and the ideal velocities; kick-drift-kick leapfrog at
dt = 1 µs; running max of |contact force| and |slider acceleration| over every step.

Usage::

    python benchmarks/bench_slider_crank.py                 # full run (several minutes)
    python benchmarks/bench_slider_crank.py --quick         # smoke test
    python benchmarks/bench_slider_crank.py --sizes 1,64,1024,4096 --steps 4000 --json out.json

Exit status: 0 when the baselines reproduce jaxclear within --rtol, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxclear  # noqa: F401  (enables float64)
from jaxclear import joints, laws, profiles
from jaxclear.mechanisms import slider_crank as sc

try:
    import numba
    from numba import njit
except ImportError:  # benchmark-only extra: pip install -e .[bench]
    numba = None

# ----------------------------------------------------------------------------- constants
# Flores, Ambrósio, Claro & Pimenta (2008), Table 1 — written out here, independently of jaxclear.
R_CRANK, L_ROD = 0.05, 0.12
M_ROD, M_SLIDER, J_ROD = 0.21, 0.14, 2.5e-4
GRAVITY = 9.81
R_JOURNAL = 10.0e-3
E_MOD, NU = 207e9, 0.3
V0, V1 = 1e-4, 1e-3
RPM = 5000.0
OMEGA = RPM * 2.0 * math.pi / 60.0
DDM_FLOOR = 1e-4  # impact velocity captured at onset is floored (joints: laws.IMPACT_VELOCITY_FLOOR)
V_FLOOR = 1e-4  # floor on |δ̇⁻| inside the law (laws.IMPACT_VELOCITY_FLOOR)
E_FLOOR = 1e-6  # restitution clip (laws.RESTITUTION_FLOOR)
assert DDM_FLOOR == V_FLOOR == laws.IMPACT_VELOCITY_FLOOR
assert E_FLOOR == laws.RESTITUTION_FLOOR


def derived(clearance, restitution):
    """Stiffness K [N/m^1.5] and hysteresis factor χ of the Lankarani–Nikravesh law (NumPy)."""
    c = np.asarray(clearance, np.float64)
    sig = 2.0 * (1.0 - NU * NU) / E_MOD
    k = 4.0 / (3.0 * sig) * np.sqrt(R_JOURNAL * (R_JOURNAL + c) / np.maximum(c, 1e-12))
    e = np.clip(np.asarray(restitution, np.float64), E_FLOOR, 1.0)
    return k, 0.75 * (1.0 - e * e)


def variants(n, seed=0):
    """Sweep variants: clearance log-uniform 0.02–0.5 mm, e ∈ U(0.8, 0.95), μ ∈ U(0, 0.05)."""
    rng = np.random.default_rng(seed)
    c = np.exp(rng.uniform(np.log(2e-5), np.log(5e-4), n))
    e = rng.uniform(0.8, 0.95, n)
    mu = rng.uniform(0.0, 0.05, n)
    return c, e, mu


# ----------------------------------------------------------------------------- NumPy baseline
def _rotate_np(c, s, h):
    """(cos, sin) rotated by the small angle h: Taylor cos/sin to h⁸/h⁷ and one Newton renorm."""
    h2 = h * h
    ch = 1.0 - h2 * (0.5 - h2 * (1.0 / 24.0 - h2 * (1.0 / 720.0 - h2 / 40320.0)))
    sh = h * (1.0 - h2 * (1.0 / 6.0 - h2 * (1.0 / 120.0 - h2 / 5040.0)))
    c1 = c * ch - s * sh
    s1 = s * ch + c * sh
    k = 1.5 - 0.5 * (c1 * c1 + s1 * s1)
    return c1 * k, s1 * k


def _accel_np(xp, ct, st, cu, su, x3, w, w2, v3, mem, prev, clr, k, chi, mu):
    """Rod and slider accelerations, |F| and the new impact memory (vectorised; xp = np or jnp)."""
    r, L = R_CRANK, L_ROD
    l = 0.5 * L
    bx, by = r * ct, r * st
    vbx, vby = -(r * w) * st, (r * w) * ct
    abx, aby = -(r * w * w) * ct, -(r * w * w) * st
    upx, upy = -su, cu
    cx, cy = bx + L * cu, by + L * su
    vcx, vcy = vbx + (L * w2) * upx, vby + (L * w2) * upy
    ex, ey = cx - x3, cy
    sq = ex * ex + ey * ey
    pos = sq > 0
    ecc = xp.where(pos, xp.sqrt(xp.where(pos, sq, 1.0)), 0.0)
    nz = ecc > 0
    den = xp.where(nz, ecc, 1.0)
    nx, ny = xp.where(nz, ex / den, 1.0), xp.where(nz, ey / den, 0.0)
    depth = ecc - clr
    active = depth > 0
    tx, ty = -ny, nx
    pjx, pjy = cx + R_JOURNAL * nx, cy + R_JOURNAL * ny
    vpjx, vpjy = vcx - w2 * (pjy - cy), vcy + w2 * (pjx - cx)
    dd = nx * (vcx - v3) + ny * vcy  # δ̇ = n·(v_C − v_slider)
    vt = tx * (vpjx - v3) + ty * vpjy  # slip of the journal surface point
    started = active & ~prev
    ddm = xp.where(active, xp.where(started, xp.maximum(dd, DDM_FLOOR), mem), 0.0)
    vminus = xp.maximum(xp.abs(ddm), V_FLOOR)
    dpos = depth > 0
    d15 = xp.where(dpos, xp.where(dpos, depth, 1.0) ** 1.5, 0.0)
    fn = xp.where(active, xp.maximum(k * d15 * (1.0 + chi * dd / vminus), 0.0), 0.0)
    cd = xp.clip((xp.abs(vt) - V0) / (V1 - V0), 0.0, 1.0)
    ft = -mu * xp.maximum(fn, 0.0) * (xp.sign(vt) * cd)
    fx, fy = -fn * nx + ft * tx, -fn * ny + ft * ty
    mom = (pjx - bx) * fy - (pjy - by) * fx
    jb = J_ROD + M_ROD * l * l
    tau = -M_ROD * l * (upx * abx + upy * aby) - M_ROD * GRAVITY * l * cu + mom
    return tau / jb, -fx / M_SLIDER, xp.sqrt(fx * fx + fy * fy), ddm, active


def _initial_np(xp, b, dtype):
    one, zero = xp.ones(b, dtype), xp.zeros(b, dtype)
    return dict(
        ct=one,
        st=zero,
        cu=one,
        su=zero,
        x3=(R_CRANK + L_ROD) * one,
        w=OMEGA * one,
        w2=(-R_CRANK * OMEGA / L_ROD) * one,
        v3=zero,
    )


def run_numpy(clearance, restitution, mu, n_steps, dt=1e-6):
    """Leapfrog over n_steps with a Python loop; returns (peak |F|, peak |ẍ_slider|), shape (B,)."""
    clr = np.asarray(clearance, np.float64)
    mu = np.asarray(mu, np.float64)
    k, chi = derived(clr, restitution)
    b = clr.size
    s = _initial_np(np, b, np.float64)
    ct, st, cu, su, x3, w, w2, v3 = (s[n] for n in ("ct", "st", "cu", "su", "x3", "w", "w2", "v3"))
    mem, prev = np.zeros(b), np.zeros(b, bool)
    aphi, ax, _, _, _ = _accel_np(np, ct, st, cu, su, x3, w, w2, v3, mem, prev, clr, k, chi, mu)
    pf, pa = np.zeros(b), np.zeros(b)
    h = dt
    for _ in range(n_steps):
        w2h = w2 + 0.5 * h * aphi
        v3h = v3 + 0.5 * h * ax
        ct, st = _rotate_np(ct, st, w * h)  # crank: θ̈ = 0, so ẇ½ = w
        cu, su = _rotate_np(cu, su, w2h * h)
        x3 = x3 + h * v3h
        aphi, ax, f, mem, prev = _accel_np(np, ct, st, cu, su, x3, w, w2h, v3h, mem, prev, clr, k, chi, mu)
        w2 = w2h + 0.5 * h * aphi
        v3 = v3h + 0.5 * h * ax
        np.maximum(pf, f, out=pf)
        np.maximum(pa, np.abs(ax), out=pa)
    return pf, pa


# ----------------------------------------------------------------------------- Numba baseline
if numba is not None:

    @njit(cache=False)
    def _nb_accel(ct, st, cp, sp, x3, w, w2, v3, mem, prev, clr, k, chi, mu):
        r, L = R_CRANK, L_ROD
        l = 0.5 * L
        bx, by = r * ct, r * st
        cx, cy = bx + L * cp, by + L * sp
        vcx = -r * w * st - L * w2 * sp
        vcy = r * w * ct + L * w2 * cp
        ex, ey = cx - x3, cy
        ecc = math.sqrt(ex * ex + ey * ey)
        depth = ecc - clr
        fx = 0.0
        fy = 0.0
        mom = 0.0
        active = depth > 0.0
        ddm = 0.0
        if active:
            nx, ny = ex / ecc, ey / ecc
            tx, ty = -ny, nx
            dd = nx * (vcx - v3) + ny * vcy
            vt = tx * (vcx - v3) + ty * vcy + w2 * R_JOURNAL
            if prev:
                ddm = mem
            else:
                ddm = max(dd, DDM_FLOOR)
            # δ^1.5 as δ·√δ, as jaxclear does for a spec that fixes the exponent (a fair baseline)
            fn = k * depth * math.sqrt(depth) * (1.0 + chi * dd / max(abs(ddm), V_FLOOR))
            if fn < 0.0:
                fn = 0.0
            avt = abs(vt)
            if avt <= V0:
                cd = 0.0
            elif avt < V1:
                cd = (avt - V0) / (V1 - V0)
            else:
                cd = 1.0
            ft = -mu * fn * cd * (1.0 if vt > 0.0 else -1.0)
            fx = -fn * nx + ft * tx
            fy = -fn * ny + ft * ty
            mom = (L * cp + R_JOURNAL * nx) * fy - (L * sp + R_JOURNAL * ny) * fx
        # u⊥·a_B with a_B = −r w² (cos θ, sin θ), u⊥ = (−sin φ, cos φ)
        upab = -r * w * w * (cp * st - sp * ct)
        tau = -M_ROD * l * upab - M_ROD * GRAVITY * l * cp + mom
        aphi = tau / (J_ROD + M_ROD * l * l)
        ax = -fx / M_SLIDER
        return aphi, ax, math.sqrt(fx * fx + fy * fy), ddm, active

    @njit(cache=False)
    def _nb_close(w2h, v3h, h, aphi, ax, f, pf, pa):
        """Second half kick of the leapfrog step and the running peaks (|force|, |slider acc.|)."""
        return w2h + 0.5 * h * aphi, v3h + 0.5 * h * ax, (f if f > pf else pf), (abs(ax) if abs(ax) > pa else pa)

    @njit(cache=False)
    def _nb_angles_one(clr, k, chi, mu, n_steps, h, omega):
        """One variant of the natural kernel: (peak |force|, peak |slider acceleration|)."""
        th, phi, x3 = 0.0, 0.0, R_CRANK + L_ROD
        w, w2, v3 = omega, -R_CRANK * omega / L_ROD, 0.0
        mem, prev = 0.0, False
        aphi, ax, f, _m, _p = _nb_accel(1.0, 0.0, 1.0, 0.0, x3, w, w2, v3, mem, prev, clr, k, chi, mu)
        pf, pa = 0.0, 0.0
        for _i in range(n_steps):
            w2h = w2 + 0.5 * h * aphi
            v3h = v3 + 0.5 * h * ax
            th += h * w
            phi += h * w2h
            x3 += h * v3h
            aphi, ax, f, mem, prev = _nb_accel(
                np.cos(th), np.sin(th), np.cos(phi), np.sin(phi), x3, w, w2h, v3h, mem, prev, clr, k, chi, mu
            )
            w2, v3, pf, pa = _nb_close(w2h, v3h, h, aphi, ax, f, pf, pa)
        return pf, pa

    @njit(cache=False)
    def numba_angles(clr, k, chi, mu, n_steps, h, omega, out_f, out_a):
        """Natural engineer's kernel: angles as floats, cos/sin each step, branches."""
        for j in range(clr.shape[0]):
            out_f[j], out_a[j] = _nb_angles_one(clr[j], k[j], chi[j], mu[j], n_steps, h, omega)

    @njit(parallel=True, cache=False)
    def numba_angles_prange(clr, k, chi, mu, n_steps, h, omega, out_f, out_a):
        """The same kernel, variants spread over the threads (``numba.set_num_threads``)."""
        for j in numba.prange(clr.shape[0]):
            out_f[j], out_a[j] = _nb_angles_one(clr[j], k[j], chi[j], mu[j], n_steps, h, omega)

    _nb_rot = njit(cache=False)(_rotate_np)  # the same scalar arithmetic, compiled

    @njit(cache=False)
    def numba_pairs(clr, k, chi, mu, n_steps, h, omega, out_f, out_a):
        """Same kernel with (cos, sin) pairs rotated without transcendentals (as jaxclear)."""
        for j in range(clr.shape[0]):
            ct, st, cp, sp, x3 = 1.0, 0.0, 1.0, 0.0, R_CRANK + L_ROD
            w, w2, v3 = omega, -R_CRANK * omega / L_ROD, 0.0
            mem, prev = 0.0, False
            aphi, ax, f, _m, _p = _nb_accel(ct, st, cp, sp, x3, w, w2, v3, mem, prev, clr[j], k[j], chi[j], mu[j])
            pf, pa = 0.0, 0.0
            for _i in range(n_steps):
                w2h = w2 + 0.5 * h * aphi
                v3h = v3 + 0.5 * h * ax
                ct, st = _nb_rot(ct, st, h * w)
                cp, sp = _nb_rot(cp, sp, h * w2h)
                x3 += h * v3h
                aphi, ax, f, mem, prev = _nb_accel(
                    ct, st, cp, sp, x3, w, w2h, v3h, mem, prev, clr[j], k[j], chi[j], mu[j]
                )
                w2, v3, pf, pa = _nb_close(w2h, v3h, h, aphi, ax, f, pf, pa)
            out_f[j] = pf
            out_a[j] = pa


def run_numba(clearance, restitution, mu, n_steps, dt=1e-6, kernel="angles"):
    clr = np.ascontiguousarray(clearance, np.float64)
    k, chi = derived(clr, restitution)
    mu = np.ascontiguousarray(mu, np.float64)
    out_f, out_a = np.zeros(clr.size), np.zeros(clr.size)
    fn = numba_angles if kernel == "angles" else numba_pairs
    t0 = time.perf_counter()
    fn(clr, k, chi, mu, n_steps, dt, OMEGA, out_f, out_a)
    NUMBA_FIRST_CALL_S.setdefault(kernel, time.perf_counter() - t0)  # first call = JIT compile
    return out_f, out_a


NUMBA_FIRST_CALL_S = {}


# ----------------------------------------------------------------------------- minimal JAX kernel
def make_minimal_jax(n_steps, dt=1e-6):
    """The NumPy step (same math) under jit + fori_loop on (B,) arrays: the XLA floor."""

    def run(clr, k, chi, mu):
        b, dtype = clr.shape[0], clr.dtype
        s = _initial_np(jnp, b, dtype)
        mem, prev = jnp.zeros(b, dtype), jnp.zeros(b, bool)
        aphi, ax, _, _, _ = _accel_np(
            jnp, s["ct"], s["st"], s["cu"], s["su"], s["x3"], s["w"], s["w2"], s["v3"], mem, prev, clr, k, chi, mu
        )
        h = dt

        def body(_, c):
            ct, st, cu, su, x3, w, w2, v3, aphi, ax, mem, prev, pf, pa = c
            w2h = w2 + 0.5 * h * aphi
            v3h = v3 + 0.5 * h * ax
            ct, st = _rotate_np(ct, st, w * h)
            cu, su = _rotate_np(cu, su, w2h * h)
            x3 = x3 + h * v3h
            aphi, ax, f, mem, prev = _accel_np(jnp, ct, st, cu, su, x3, w, w2h, v3h, mem, prev, clr, k, chi, mu)
            return (
                ct,
                st,
                cu,
                su,
                x3,
                w,
                w2h + 0.5 * h * aphi,
                v3h + 0.5 * h * ax,
                aphi,
                ax,
                mem,
                prev,
                jnp.maximum(pf, f),
                jnp.maximum(pa, jnp.abs(ax)),
            )

        z = jnp.zeros(b, dtype)
        c0 = (s["ct"], s["st"], s["cu"], s["su"], s["x3"], s["w"], s["w2"], s["v3"], aphi, ax, mem, prev, z, z)
        c = jax.lax.fori_loop(0, n_steps, body, c0)
        return c[-2], c[-1]

    return jax.jit(run)


# ----------------------------------------------------------------------------- jaxclear
def jax_config(n_steps, joint=None, outputs=(), save_every=None):
    se = save_every or next(s for s in (100, 50, 40, 25, 20, 10, 5, 4, 2, 1) if n_steps % s == 0)
    # the leapfrog, as the baselines below (the linkages' default is verlet_predicted: see
    # bench_work_precision.py for both schemes against Numba at equal accuracy)
    kw = dict(dt=1e-6, n_saves=n_steps // se, save_every=se, outputs=outputs, scheme="leapfrog")
    if joint is not None:
        kw["joint"] = joint
    cfg = sc.Config(**kw)
    # the exponent n = 1.5 static, as a sweep that fixes it runs (δ^1.5 as δ·√δ; the Numba baseline too)
    return dataclasses.replace(cfg, joint=dataclasses.replace(cfg.joint, exponent=1.5))


def jax_params(clearance, restitution, mu, dtype=jnp.float64, points=0):
    """Batched benchmark params; points = N > 0 adds a worn (Fourier) bushing profile of N points."""

    def one(c, e, m):
        pts = None
        if points:
            rb = R_JOURNAL + c
            # oval + one-sided wear of amplitude ~ c: r(θ) = R_B + c/2 + 0.3c cos 2θ + 0.2c sin θ
            pts = profiles.fourier(rb + 0.5 * c, jnp.stack([0.0 * c, 0.3 * c]), jnp.stack([0.2 * c]), points)
        return sc.benchmark_params(clearance=c, restitution=e, friction_coefficient=m, points=pts)

    p = jax.vmap(one)(jnp.asarray(clearance), jnp.asarray(restitution), jnp.asarray(mu))
    if dtype != jnp.float64:
        p = jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, p)
    return p


def jax_compile(cfg, p):
    f = jax.jit(jax.vmap(lambda q: sc.simulate(cfg, q)))
    t0 = time.perf_counter()
    comp = f.lower(p).compile()
    return comp, time.perf_counter() - t0


def run_jax(cfg, p, comp=None):
    comp = comp or jax_compile(cfg, p)[0]
    r = comp(p)
    jax.block_until_ready(r)
    return np.asarray(r.acc.peak_force)[:, 0], np.asarray(r.acc.peak_acc), r


# ----------------------------------------------------------------------------- timing helpers
def best_of(fn, repeats, min_time=0.0):
    """Best wall time of `repeats` calls (and at least until min_time seconds have been spent)."""
    best, spent, n = math.inf, 0.0, 0
    while n < repeats or spent < min_time:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent, n = min(best, dt), spent + dt, n + 1
        if n >= 50:
            break
    return best


def fmt_rate(x):
    return "—" if x is None or not np.isfinite(x) else f"{x:10.3e}"


# ----------------------------------------------------------------------------- sections
def check_agreement(steps, rtol, have_numba):
    print(f"\n== 1. Agreement with jaxclear ({steps} steps, dt = 1 µs, 5000 rpm, float64) ==")
    cases = [(0.5e-3, 0.9, 0.01), (0.1e-3, 0.9, 0.01), (0.02e-3, 0.9, 0.01), (0.02e-3, 0.8, 0.05), (0.25e-3, 0.95, 0.0)]
    c, e, mu = (np.array(x) for x in zip(*cases))
    p = jax_params(c, e, mu)
    k_ref, _ = derived(c, e)
    k_rel = float(np.max(np.abs(np.asarray(p.joint.stiffness) - k_ref) / k_ref))
    jf, ja, res = run_jax(jax_config(steps), p)
    impacts = np.asarray(res.acc.impacts)[:, 0]
    impl = {"numpy": run_numpy(c, e, mu, steps)}
    if have_numba:
        impl["numba"] = run_numba(c, e, mu, steps, kernel="angles")
        impl["numba-pairs"] = run_numba(c, e, mu, steps, kernel="pairs")
    print(f"stiffness K (baseline formula vs jaxclear): max rel diff {k_rel:.1e}")
    hdr = f"{'c [mm]':>7} {'e':>5} {'mu':>5} {'impacts':>7} {'peak|F| jaxclear [N]':>21} {'peak|a| jaxclear':>17}"
    for name in impl:
        hdr += f" {'dF ' + name:>16} {'da ' + name:>16}"
    print(hdr)
    worst = {name: 0.0 for name in impl}
    rows = []
    for i in range(len(c)):
        line = f"{c[i] * 1e3:7.3f} {e[i]:5.2f} {mu[i]:5.2f} {impacts[i]:7d} {jf[i]:21.10e} {ja[i]:17.10e}"
        row = dict(
            clearance_m=float(c[i]),
            restitution=float(e[i]),
            friction=float(mu[i]),
            impacts=int(impacts[i]),
            peak_force_N=float(jf[i]),
            peak_acc=float(ja[i]),
        )
        for name, (f_, a_) in impl.items():
            df = abs(f_[i] - jf[i]) / abs(jf[i])
            da = abs(a_[i] - ja[i]) / abs(ja[i])
            worst[name] = max(worst[name], df, da)
            line += f" {df:16.2e} {da:16.2e}"
            row[f"rel_diff_force_{name}"] = float(df)
            row[f"rel_diff_acc_{name}"] = float(da)
        print(line)
        rows.append(row)
    ok = all(v <= rtol for v in worst.values()) and k_rel <= rtol
    for name, v in worst.items():
        print(
            f"  worst relative difference {name:>11} vs jaxclear: {v:.2e}  "
            f"({'OK' if v <= rtol else 'FAIL'}, rtol = {rtol:.0e})"
        )
    if not have_numba:
        print("  numba not installed: Numba baselines skipped (pip install -e .[bench])")
    return ok, dict(steps=steps, rtol=rtol, stiffness_rel_diff=k_rel, rows=rows, worst=worst, ok=ok)


def random_agreement(steps, n, have_numba):
    """Informational: the sweep's random variants (chaotic: differences grow with impacts)."""
    c, e, mu = variants(n)
    jf, ja, res = run_jax(jax_config(steps), jax_params(c, e, mu))
    out = {}
    impl = {"numpy": run_numpy(c, e, mu, steps)}
    if have_numba:
        impl["numba"] = run_numba(c, e, mu, steps, kernel="angles")
    for name, (f_, a_) in impl.items():
        d = np.maximum(np.abs(f_ - jf) / jf, np.abs(a_ - ja) / ja)
        out[name] = dict(median=float(np.median(d)), max=float(np.max(d)), frac_below_1e_9=float(np.mean(d <= 1e-9)))
    imp = np.asarray(res.acc.impacts)[:, 0]
    print(
        f"  random sweep variants (n = {n}, {steps} steps, impacts {imp.min()}–{imp.max()}): "
        + "; ".join(
            f"{k}: median {v['median']:.1e}, max {v['max']:.1e}, {100 * v['frac_below_1e_9']:.0f}% ≤ 1e-9"
            for k, v in out.items()
        )
    )
    return out


def measure_rates(sizes, steps, np_steps, repeats, have_numba):
    print(
        f"\n== 2. Throughput, circular bushing, float64 (variant-steps/s; jax/numba: {steps} steps, "
        f"numpy: {np_steps} steps; best of {repeats}) =="
    )
    rows = []
    if have_numba:  # warm-up calls compile (already done by the agreement check)
        run_numba(*variants(2), 10, kernel="angles")
        run_numba(*variants(2), 10, kernel="pairs")
        print("numba compile (first call): " + ", ".join(f"{k} {v:.2f} s" for k, v in NUMBA_FIRST_CALL_S.items()))
    print(
        f"{'B':>6} {'compile[s]':>10} {'jaxclear':>10} {'min-JAX':>10} {'numba':>10} {'nb-pairs':>10} "
        f"{'numpy':>10} {'jax/numba':>10} {'jax/nb-pr':>10} {'jax/numpy':>10} {'ns/vstep jax':>12}"
    )
    for b in sizes:
        c, e, mu = variants(b)
        p = jax_params(c, e, mu)
        comp, t_comp = jax_compile(jax_config(steps), p)
        run_jax(jax_config(steps), p, comp)  # warm
        t_j = best_of(lambda: jax.block_until_ready(comp(p)), repeats)
        r_j = b * steps / t_j
        k, chi = derived(c, e)
        mj = make_minimal_jax(steps)
        args = tuple(jnp.asarray(x) for x in (c, k, chi, mu))
        jax.block_until_ready(mj(*args))
        r_m = b * steps / best_of(lambda: jax.block_until_ready(mj(*args)), repeats)
        r_n = r_p = None
        if have_numba:
            r_n = b * steps / best_of(lambda: run_numba(c, e, mu, steps, kernel="angles"), repeats)
            r_p = b * steps / best_of(lambda: run_numba(c, e, mu, steps, kernel="pairs"), repeats)
        r_np = b * np_steps / best_of(lambda: run_numpy(c, e, mu, np_steps), 1 if b > 64 else 2)
        row = dict(
            B=b,
            compile_s=t_comp,
            jaxclear=r_j,
            minimal_jax=r_m,
            numba=r_n,
            numba_pairs=r_p,
            numpy=r_np,
            jax_over_numba=(r_j / r_n if r_n else None),
            jax_over_numba_pairs=(r_j / r_p if r_p else None),
            jax_over_numpy=r_j / r_np,
        )
        rows.append(row)
        ratio = lambda x: "—" if x is None else f"{x:10.3f}"
        print(
            f"{b:6d} {t_comp:10.2f} {fmt_rate(r_j)} {fmt_rate(r_m)} {fmt_rate(r_n)} {fmt_rate(r_p)} "
            f"{fmt_rate(r_np)} {ratio(row['jax_over_numba'])} {ratio(row['jax_over_numba_pairs'])} "
            f"{ratio(row['jax_over_numpy'])} {1e9 / r_j:12.1f}"
        )
    return rows


def measure_jax_variant(b, steps, repeats, cfg, dtype=jnp.float64, points=0):
    c, e, mu = variants(b)
    p = jax_params(c, e, mu, dtype=dtype, points=points)
    comp, t_comp = jax_compile(cfg, p)
    jax.block_until_ready(comp(p))
    t = best_of(lambda: jax.block_until_ready(comp(p)), repeats)
    return b * steps / t, t_comp, comp


def _regions_seen(b, steps, cfg):
    """(most contact regions any variant had at one step (1: a one-slot joint missed nothing),
    window overflow steps summed over the variants or None without a window), from one run."""
    p = jax_params(*variants(b), points=72)
    r = jax.jit(jax.vmap(lambda q: sc.simulate(cfg, q)))(p)
    ovf = int(np.asarray(r.acc.window_overflow_steps).sum()) if cfg.joint.window else None
    return int(np.asarray(r.acc.max_regions).max()), ovf


def extra_costs(b, steps, repeats, base_rate, windows=(32, 16)):
    """Cost of the 72-point worn bushing (and float32) against the circle, all compiled first and
    then timed in alternating rounds (best of `repeats` rounds each): ratios from one run."""
    print(f"\n== 3. jaxclear cost factors at B = {b} ({steps} steps, alternating rounds) ==")
    pj = lambda **kw: joints.JointConfig(geometry="points", n_points=72, refine=True, **kw)
    cases = [
        ("circle float64", jax_config(steps), jnp.float64, 0),
        ("points72, 1 slot (detect_deepest)", jax_config(steps, joint=pj(max_regions=1)), jnp.float64, 72),
        ("points72, 4 slots (detect)", jax_config(steps, joint=pj(max_regions=4)), jnp.float64, 72),
    ]
    cases += [
        (f"points72 window {w}, 4 slots", jax_config(steps, joint=pj(max_regions=4, window=w)), jnp.float64, 72)
        for w in windows
    ]
    cases += [("circle float32", jax_config(steps), jnp.float32, 0)]
    c, e, mu = variants(b)
    runs = []
    for name, cfg, dt, pts in cases:
        p = jax_params(c, e, mu, dtype=dt, points=pts)
        comp, tc = jax_compile(cfg, p)
        jax.block_until_ready(comp(p))
        runs.append([name, cfg, comp, p, tc, math.inf])
    for _ in range(max(repeats, 3)):
        for r in runs:
            t0 = time.perf_counter()
            jax.block_until_ready(r[2](r[3]))
            r[5] = min(r[5], time.perf_counter() - t0)
    base_t = runs[0][5]
    out = dict(B=b, steps=steps, circle_f64=b * steps / base_t, cases=[])
    for name, cfg, _comp, _p, tc, t in runs:
        ratio = t / base_t
        row = dict(case=name, rate=b * steps / t, cost_over_circle=ratio, compile_s=tc)
        extra = ""
        if name.startswith("points72"):
            row["max_regions_seen"], ovf = _regions_seen(b, steps, cfg)
            extra = f"; most regions at one step {row['max_regions_seen']}"
            if ovf is not None:
                row["overflow_steps"] = ovf
                extra += f"; window overflow steps {ovf} of {b * steps}"
            extra += f"  (target <= 3: {'met' if ratio <= 3 else 'NOT met'})"
        print(f"{name:<36} {b * steps / t:.3e} variant-steps/s  cost/circle {ratio:6.2f}  (compile {tc:.1f} s){extra}")
        out["cases"].append(row)
    by = {r["case"]: r for r in out["cases"]}
    out.update(
        points72_f64=by["points72, 4 slots (detect)"]["rate"],
        points72_one_slot_cost=by["points72, 1 slot (detect_deepest)"]["cost_over_circle"],
        points_over_circle_cost=by["points72, 4 slots (detect)"]["cost_over_circle"],
        f32_over_f64_rate=base_t / runs[-1][5],
        _points_comp=runs[2][2],
    )
    print(
        f"circle float32 / float64 rate: {out['f32_over_f64_rate']:.2f}; the 1-slot joint holds the "
        f"deepest region and counts the others (max_contact_regions in metrics.csv)"
    )
    return out


_TRIVIAL = ("parameter(", "get-tuple-element(", "tuple(", "constant(", "bitcast(")


def _hlo_computations(txt):
    comps, cur = {}, None
    for line in txt.splitlines():
        if line.startswith(("%", "ENTRY")) and line.rstrip().endswith("{"):
            name = (line.split()[1] if line.startswith("ENTRY") else line.split()[0]).lstrip("%")
            cur = comps.setdefault(name, [])
        elif line.startswith("}"):
            cur = None
        elif cur is not None and " = " in line:
            cur.append(line.strip())
    return comps


def _hlo_counts(comp):
    """Per-step figures of the optimised HLO: the innermost while body (one time step) launches
    `kernels` fused/unfused kernels holding `ops` non-trivial HLO ops in all."""
    comps = _hlo_computations(comp.as_text())
    bodies = {
        m.group(1) for ls in comps.values() for l in ls for m in [re.search(r" while\(.*body=%([\w.\-]+)", l)] if m
    }
    inner = [b for b in bodies if b in comps and not any(" while(" in l for l in comps[b])]
    if not inner:
        return dict(kernels=-1, ops=-1)
    ls = comps[inner[0]]
    kern = [l for l in ls if not any(t in l for t in _TRIVIAL)]
    fused = [m.group(1) for l in kern if " fusion(" in l for m in [re.search(r"calls=%([\w.\-]+)", l)] if m]
    ops = (
        len(kern)
        - len(fused)
        + sum(sum(1 for l in comps.get(f, []) if not any(t in l for t in _TRIVIAL)) for f in fused)
    )
    return dict(kernels=len(kern), ops=ops)


def profile(b, steps, repeats, base_rate, base_comp, points=None):
    print(f"\n== 4. Where the time goes (jaxclear step, B = {b}, {steps} steps) ==")
    variants_ = [
        ("baseline: LN + ambrosio, outputs=()", jax_config(steps), 0),
        ("friction = 'none'", jax_config(steps, joint=joints.JointConfig(friction="none")), 0),
        ("normal law = 'hertz' (no δ̇⁻ damping)", jax_config(steps, joint=joints.JointConfig(normal_law="hertz")), 0),
        ("hertz + no friction", jax_config(steps, joint=joints.JointConfig(normal_law="hertz", friction="none")), 0),
        ("default outputs saved every 100 steps", jax_config(steps, outputs=sc.DEFAULT_OUTPUTS, save_every=100), 0),
    ]
    rows = []
    print(f"{'variant':<42} {'rate':>10} {'ns/vstep':>9} {'Δ vs base':>10} {'kernels/step':>12} {'HLO ops/step':>12}")
    for name, cfg, pts in variants_:
        if name.startswith("baseline"):
            rate, comp = base_rate, base_comp
        else:
            rate, _, comp = measure_jax_variant(b, steps, repeats, cfg, points=pts)
        h = _hlo_counts(comp)
        d = 1e9 / rate - 1e9 / base_rate
        rows.append(dict(variant=name, rate=rate, ns_per_variant_step=1e9 / rate, delta_ns=d, **h))
        print(f"{name:<42} {rate:10.3e} {1e9 / rate:9.1f} {d:+10.1f} {h['kernels']:12d} {h['ops']:12d}")
    if points is not None:
        rate, comp = points
        h = _hlo_counts(comp)
        rows.append(
            dict(
                variant="points72 geometry",
                rate=rate,
                ns_per_variant_step=1e9 / rate,
                delta_ns=1e9 / rate - 1e9 / base_rate,
                **h,
            )
        )
        print(
            f"{'points geometry, 72 points, 4 regions':<42} {rate:10.3e} {1e9 / rate:9.1f} "
            f"{1e9 / rate - 1e9 / base_rate:+10.1f} {h['kernels']:12d} {h['ops']:12d}"
        )
    # Fixed per-step cost: B = 1 (the while-loop iteration, dispatch of every fused kernel).
    r1, _, _ = measure_jax_variant(1, steps, repeats, jax_config(steps))
    # The same math written flat (minimal JAX) at the same B: the cost of jaxclear's generality.
    c, e, mu = variants(b)
    k, chi = derived(c, e)
    mj = make_minimal_jax(steps)
    args = tuple(jnp.asarray(x) for x in (c, k, chi, mu))
    mcomp = mj.lower(*args).compile()
    jax.block_until_ready(mcomp(*args))
    rm = b * steps / best_of(lambda: jax.block_until_ready(mcomp(*args)), repeats)
    hm = _hlo_counts(mcomp)
    print(
        f"{'minimal JAX kernel, same math, (B,) arrays':<42} {rm:10.3e} {1e9 / rm:9.1f} "
        f"{1e9 / rm - 1e9 / base_rate:+10.1f} {hm['kernels']:12d} {hm['ops']:12d}"
    )
    print(
        f"fixed per-step cost (jaxclear at B = 1): {1e6 / r1:.2f} µs/step "
        f"= {1e9 / r1 / b:.1f} ns per variant-step when spread over B = {b}"
    )
    rows.append(dict(variant="minimal JAX kernel", rate=rm, ns_per_variant_step=1e9 / rm, **hm))
    return dict(B=b, steps=steps, rows=rows, per_step_us_at_B1=1e6 / r1)


# ----------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--sizes", default=None, help="comma-separated batch sizes (default 1,64,1024,4096)")
    ap.add_argument("--steps", type=int, default=None, help="time steps for the timed runs (default 4000)")
    ap.add_argument("--numpy-steps", type=int, default=None, help="steps for the NumPy loop (default min(steps, 1000))")
    ap.add_argument("--check-steps", type=int, default=None, help="steps of the agreement check (default 4000)")
    ap.add_argument("--repeats", type=int, default=None, help="best of N timed runs (default 3)")
    ap.add_argument("--rtol", type=float, default=1e-9, help="agreement tolerance (relative)")
    ap.add_argument("--no-numba", action="store_true", help="skip the Numba baselines")
    ap.add_argument("--json", default=None, help="write all tables to this JSON file")
    a = ap.parse_args(argv)

    if a.quick:
        sizes = [1, 64]
        steps, check_steps, repeats = a.steps or 500, a.check_steps or 1000, a.repeats or 1
    else:
        sizes = [1, 64, 1024, 4096]
        steps, check_steps, repeats = a.steps or 4000, a.check_steps or 4000, a.repeats or 3
    if a.sizes:
        sizes = [int(s) for s in a.sizes.split(",")]
    np_steps = a.numpy_steps or min(steps, 1000)
    have_numba = numba is not None and not a.no_numba

    print("jaxclear slider-crank speed benchmark")
    print(
        f"python {platform.python_version()}, jax {jax.__version__} on {jax.devices()[0].platform}, "
        f"numpy {np.__version__}, numba {numba.__version__ if numba else 'not installed'}; "
        f"{os.cpu_count()} CPU cores; Numba runs single-threaded; load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if numba is None:
        print("numba is not installed: the Numba baseline is skipped (pip install -e .[bench])")

    t_start = time.perf_counter()
    ok, agree = check_agreement(check_steps, a.rtol, have_numba)
    agree["random"] = random_agreement(check_steps, 16 if a.quick else 64, have_numba)

    rows = measure_rates(sizes, steps, np_steps, repeats, have_numba)
    target_b = 1024 if 1024 in sizes else max(sizes)
    tr = next(r for r in rows if r["B"] == target_b)
    if tr["jax_over_numba"] is not None:
        print(
            f"target: jaxclear at B = 1024 >= Numba single-thread (ratio >= 1). "
            f"Measured at B = {target_b}: jaxclear/Numba = {tr['jax_over_numba']:.3f} "
            f"-> {'met' if tr['jax_over_numba'] >= 1 else 'NOT met'}; "
            f"jaxclear/Numba-pairs = {tr['jax_over_numba_pairs']:.3f}; "
            f"jaxclear/NumPy = {tr['jax_over_numpy']:.1f}"
        )

    b_x = target_b
    _, _, base_comp = measure_jax_variant(b_x, steps, 1, jax_config(steps))
    extra = extra_costs(b_x, steps, repeats, tr["jaxclear"])
    prof = profile(
        b_x, steps, repeats, tr["jaxclear"], base_comp, points=(extra["points72_f64"], extra.pop("_points_comp"))
    )
    print(f"\ntotal benchmark time {time.perf_counter() - t_start:.0f} s; agreement {'OK' if ok else 'FAILED'}")

    if a.json:
        out = dict(
            meta=dict(
                python=platform.python_version(),
                jax=jax.__version__,
                numpy=np.__version__,
                numba=numba.__version__ if numba else None,
                cpu_count=os.cpu_count(),
                platform=platform.platform(),
                sizes=sizes,
                steps=steps,
                numpy_steps=np_steps,
                repeats=repeats,
                dt=1e-6,
                rpm=RPM,
                quick=a.quick,
            ),
            agreement=agree,
            rates=rows,
            cost_factors=extra,
            profile=prof,
            target=dict(B=target_b, jax_over_numba=tr["jax_over_numba"], met=(tr["jax_over_numba"] or 0) >= 1),
        )
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2, default=float)
        print(f"wrote {a.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
