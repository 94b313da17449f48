#!/usr/bin/env python
"""Speed benchmark of the finite particle method engine (``jaxclear.fpm``) against Numba.

Mechanisms (built with ``fpm.assemble`` / ``fpm.linkage_params``, as ``tests/test_fpm.py``):

* ``slider_crank`` — the stiff FPM slider-crank of ``tests/test_fpm.py::_fpm_slider_crank``
  (Flores et al. 2008 masses and inertias, E = 2.07e13 Pa): crank one element, rod four, the
  slider a lumped particle on a horizontal guide with its rotation fixed; clearance at the
  rod–slider joint (circle geometry, Lankarani–Nikravesh with impact-velocity memory, Ambrósio
  friction: jaxclear's defaults).  8 particles (rotations), 7 nodes, 5 elements.
* ``four_bar`` — the four-bar of ``sweeps/linkage_four_bar.toml`` (4 elements per link, clearance
  at the coupler–follower joint).  15 particles, 13 nodes, 12 elements.

Variants: clearance log-uniform 0.1–0.5 mm, restitution U(0.8, 0.95), friction μ U(0, 0.05);
every Params leaf carries the variant axis (as ``sweep`` batches them).  Time step: half the
element-by-element critical step (``fpm.critical_step`` / ``fpm.element_shares``), the same for
every variant.  The timed window starts from a state in contact: every variant is first run by
jaxclear from rest (crank ramped to its speed over ``RAMP`` s) to ``T_PRE`` s, past the ramp;
both implementations then continue from that same state with ``ramp_time = 0`` (the crank at
constant speed, θ̈ = 0, as after the ramp), so the window has impacts and contact.

Implementations of the SAME step (leapfrog, kick-drift-kick, ``integrate.make_step``):

* jaxclear: ``jax.jit(jax.vmap(sim))``, sim = ``integrate.simulate`` over ``fpm.make_step`` with
  no histories and one running metric (the peak |contact force| over every step);
* Numba: a generic ``@njit`` FPM kernel written from the equations of ``fpm``'s docstring
  (element loop with the atan2 end rotations, the same lumped masses and inertias read from
  ``Params``, the same contact law and impact memory, the same transcendental-free rotation of the
  (cos, sin) pairs), scalar loops, a branch on contact, outer loop over variants on ONE thread;
  and the same kernel with ``numba.prange`` over the variants (all threads).

Checks first: from the same state both run ``--check-steps`` steps; the final state and the peak
contact force must agree to ``--rtol`` (relative to the largest value; default 1e-8), the final
accelerations to ``--rtol-acc`` (1e-4): the stiff elements' forces (EA/l₀)(l − l₀) turn a round-off
ε·l in a position into ~ε·l/|l − l₀| of the force, and impacts amplify it over the steps
(measured on the slider-crank: 300 steps 1e-12 state / 6e-9 accelerations, 4000 steps 9e-10 /
1.3e-6; four-bar, 4000 steps: 2.5e-9 / 1.1e-5, the rotation accelerations, whose particles carry
only a share of the links' inertia, amplifying most).  The script exits 1 when a check fails.

Second part: the cost of the stiff FPM slider-crank against the hand-derived
``mechanisms.slider_crank`` (dt = 1 µs) for the same simulated time (1000 rpm reached over 5 ms,
as the test), both ``jit(vmap)`` at B = ``--cost-batch``, from rest.

Usage::

    python benchmarks/bench_fpm.py --quick          # smoke run (~1-2 min)
    python benchmarks/bench_fpm.py                  # B = 1, 64, 1024; slider-crank and four-bar
    python benchmarks/bench_fpm.py --json fpm.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import re
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

# shared with bench_slider_crank (this folder is on sys.path when run as a script): the pair
# rotation of integrate.rotate_pair in plain Python, and the optimised-HLO readers
from bench_slider_crank import _TRIVIAL, _rotate_np  # noqa: E402
from bench_slider_crank import _hlo_computations as _computations

import jaxclear  # noqa: F401  (float64)
from jaxclear import fpm, integrate, joints, laws
from jaxclear.mechanisms import _clearance

try:
    import numba
    from numba import njit, prange
except ImportError:  # benchmark-only extra: pip install -e .[bench]
    numba = None

RPM, RAMP, T_PRE = 5000.0, 1.0e-3, 1.2e-3


# ----------------------------------------------------------------------------- the mechanisms
def slider_crank(c=0.5e-3, e=0.9, mu=0.01, rpm=RPM, ramp=RAMP):
    """The stiff FPM slider-crank of tests/test_fpm.py (clearance at the rod–slider joint)."""
    links = {"crank": ("O", "B", 1), "rod": ("B", "C", 4)}
    jts = {
        "O": ("ground", "O", ("crank",), None),
        "B": ("revolute", "B", ("crank", "rod"), None),
        "C": ("clearance", "C", ("rod", "slider"), None),
        "guide": ("slider", "C", ("slider",), "fixed"),
    }
    lay = fpm.assemble(links, jts, {"crank": ("crank", "O")}, bodies={"slider": "C"})
    jp = jax.tree_util.tree_map(
        lambda x: jnp.asarray(x)[None], _clearance.benchmark_joint(clearance=c, restitution=e, friction_coefficient=mu)
    )
    steel = dict(youngs_modulus=2.07e13, density=7850.0)
    p = fpm.linkage_params(
        lay,
        {"O": (0.0, 0.0), "B": (0.05, 0.0), "C": (0.17, 0.0)},
        {
            "crank": dict(points=("O", "B"), mass=0.30, inertia=1e-4, **steel),
            "rod": dict(points=("B", "C"), mass=0.21, inertia=2.5e-4, **steel),
        },
        bodies={"slider": ("C", 0.14, 1e-4)},
        guides={"guide": (1.0, 0.0)},
        joint=jp,
        crank_speed=rpm * 2 * np.pi / 60,
        ramp_time=ramp,
    )
    return lay, p


def four_bar(c=0.5e-3, e=0.9, mu=0.01, rpm=RPM, ramp=RAMP):
    """The four-bar of sweeps/linkage_four_bar.toml (4 elements per link, clearance at C)."""
    links = {"crank": ("O2", "B", 4), "coupler": ("B", "C", 4), "follower": ("O4", "C", 4)}
    jts = {
        "O2": ("ground", "O2", ("crank",), None),
        "B": ("revolute", "B", ("crank", "coupler"), None),
        "C": ("clearance", "C", ("coupler", "follower"), None),
        "O4": ("ground", "O4", ("follower",), None),
    }
    lay = fpm.assemble(links, jts, {"crank": ("crank", "O2")}, bodies={})
    jp = jax.tree_util.tree_map(
        lambda x: jnp.asarray(x)[None], _clearance.benchmark_joint(clearance=c, restitution=e, friction_coefficient=mu)
    )
    steel = dict(youngs_modulus=2.07e13, density=7850.0)
    pts = {"O2": (0.0, 0.0), "B": (0.0, 0.05), "C": (0.1093461926484556, 0.09943086235629348), "O4": (0.12, 0.0)}
    p = fpm.linkage_params(
        lay,
        pts,
        {
            "crank": dict(points=("O2", "B"), mass=0.0785, inertia=1.635e-5, **steel),
            "coupler": dict(points=("B", "C"), mass=0.1884, inertia=2.261e-4, **steel),
            "follower": dict(points=("O4", "C"), mass=0.157, inertia=1.308e-4, **steel),
        },
        joint=jp,
        crank_speed=rpm * 2 * np.pi / 60,
        ramp_time=ramp,
    )
    return lay, p


MECHANISMS = {"slider_crank": slider_crank, "four_bar": four_bar}


def variants(n, seed=0):
    rng = np.random.default_rng(seed)
    return (np.exp(rng.uniform(np.log(1e-4), np.log(5e-4), n)), rng.uniform(0.8, 0.95, n), rng.uniform(0.0, 0.05, n))


def batched_params(build, c, e, mu):
    """Params with a leading variant axis on every leaf (as sweep.py batches them)."""
    return jax.vmap(lambda c_, e_, m_: build(c_, e_, m_)[1])(jnp.asarray(c), jnp.asarray(e), jnp.asarray(mu))


def time_step(lay, p1):
    """Half the element-by-element critical step of one (unbatched) variant."""
    return float(0.5 * fpm.critical_step(lay.topology, p1, *fpm.element_shares(lay, p1)))


# ----------------------------------------------------------------------------- jaxclear
def _peak(acc, out, i):
    jfs = out[1]
    return jnp.maximum(acc, jnp.max(jnp.stack([jnp.linalg.norm(jf.force) for jf in jfs])))


def make_jax(topo, dt, n_steps):
    """jit(vmap(sim)): (p, state) -> (final state, peak |contact force|), no histories."""
    step = fpm.make_step(topo, dt, "leapfrog")

    def sim(p, s0):
        s, pk, _ = integrate.simulate(step, p, s0, jnp.zeros((), s0.q.nodes.dtype), _peak, 1, n_steps)
        return s, pk

    return jax.jit(jax.vmap(sim))


def initial_states(topo, pb):
    def one(p):
        q0, v0, aux0 = fpm.initial_state(topo, p)
        return integrate.State(q0, v0, fpm._accel_out(topo, p, q0, v0, aux0, 0.0)[0], aux0)

    return jax.jit(jax.vmap(one))(pb)


def pre_roll(topo, pb, dt, n_pre, chunk=2000):
    """Every variant from rest to n_pre·dt by jaxclear (untimed); then ramp_time = 0."""
    s = initial_states(topo, pb)
    n_chunks = max(1, n_pre // chunk)
    step = fpm.make_step(topo, dt, "leapfrog")
    run = jax.jit(
        jax.vmap(lambda p, s0: integrate.simulate(step, p, s0, jnp.zeros(()), lambda a, o, i: a, n_chunks, chunk)[0])
    )
    s = run(pb, s)
    jax.block_until_ready(s)
    # simulate counts time from 0 again: beyond the ramp θ̈ = 0, which ramp_time = 0 gives at any t
    return s, pb._replace(ramp_time=jnp.zeros_like(pb.ramp_time)), n_chunks * chunk


# ----------------------------------------------------------------------------- Numba baseline
def numba_args(topo, pb, state):
    """Plain NumPy arrays for the Numba kernel (topology ints, per-variant floats, state)."""
    a = lambda x: np.ascontiguousarray(np.asarray(x, np.float64))
    i32 = lambda x, w: np.asarray(x, np.int64).reshape(-1, w) if len(x) else np.zeros((0, w), np.int64)
    J = pb.joint
    e = np.clip(np.asarray(J.restitution), laws.RESTITUTION_FLOOR, 1.0)
    assert dataclasses.replace(topo.joint, exponent=None) == joints.JointConfig(), (
        "the Numba kernel implements the circle/LN/ambrosio joint"
    )
    topo_arrays = (
        i32(topo.elements, 4),
        np.asarray(topo.ground, np.int64),
        i32(topo.sliders, 2),
        np.asarray(topo.fixed_rotations, np.int64),
        np.asarray(topo.driven, np.int64),
        i32(topo.clearance, 4),
    )
    par = (
        a(pb.EA),
        a(pb.EI),
        a(pb.l0),
        a(pb.offsets),
        a(pb.mass),
        a(pb.inertia),
        a(pb.guides),
        a(pb.damping),
        a(pb.gravity),
        a(pb.crank_speed),
        a(pb.ramp_time),
        a(pb.forces),
        a(pb.torques),
        a(J.journal_radius),
        a(J.clearance),
        a(J.stiffness),
        a(J.exponent),
        a(0.75 * (1.0 - e * e)),
        a(J.friction_coefficient),
        a(J.v0),
        a(J.v1),
    )
    st = (
        a(state.q.nodes).copy(),
        a(state.q.rotations).copy(),
        a(state.v.nodes).copy(),
        a(state.v.rotations).copy(),
        a(state.a.nodes).copy(),
        a(state.a.rotations).copy(),
        a(state.aux[..., 0]).copy(),
    )
    return topo_arrays, par, st


if numba is not None:
    FLOOR = laws.IMPACT_VELOCITY_FLOOR

    # (cos, sin) rotated by h without transcendentals (integrate.rotate_pair), as bench_slider_crank
    _rot = njit(cache=False, inline="always")(_rotate_np)

    @njit(cache=False)
    def _accel_full(
        j,
        t,
        el,
        ground,
        sliders,
        fixed,
        driven,
        cl,
        EA,
        EI,
        l0,
        off,
        mass,
        inertia,
        guides,
        damping,
        gravity,
        omega,
        ramp,
        forces,
        torques,
        RJ,
        clr,
        K,
        expo,
        chi,
        mu,
        v0,
        v1,
        qn,
        qr,
        vn,
        vr,
        an,
        ar,
        mem,
        F,
        T,
        fa,
        Mab,
    ):
        """Accelerations of variant j into an, ar (fpm.accelerations: the elements by the reversed
        rigid-body motion, external loads and damping, the clearance joints, the constraints);
        returns the largest |clearance-joint force| of this evaluation."""
        nN, nR, nE = qn.shape[0], qr.shape[0], el.shape[0]
        for k in range(nN):
            F[k, 0] = 0.0
            F[k, 1] = 0.0
        for r in range(nR):
            T[r] = 0.0
        for e in range(nE):
            ia, ib, ra, rb = el[e, 0], el[e, 1], el[e, 2], el[e, 3]
            dx, dy = qn[ib, 0] - qn[ia, 0], qn[ib, 1] - qn[ia, 1]
            sq = dx * dx + dy * dy
            l = math.sqrt(sq) if sq > 0.0 else 0.0
            ex, ey = dx / l, dy / l
            c, s = qr[ra, 0], qr[ra, 1]
            tax, tay = c * off[j, e, 0, 0] - s * off[j, e, 0, 1], s * off[j, e, 0, 0] + c * off[j, e, 0, 1]
            c, s = qr[rb, 0], qr[rb, 1]
            tbx, tby = c * off[j, e, 1, 0] - s * off[j, e, 1, 1], s * off[j, e, 1, 0] + c * off[j, e, 1, 1]
            pa = math.atan2(ex * tay - ey * tax, ex * tax + ey * tay)
            pb = math.atan2(ex * tby - ey * tbx, ex * tbx + ey * tby)
            N = EA[j, e] / l0[j, e] * (l - l0[j, e])
            kk = EI[j, e] / l0[j, e]
            Ma, Mb = kk * (4.0 * pa + 2.0 * pb), kk * (2.0 * pa + 4.0 * pb)
            V = (Ma + Mb) / l
            fa[e, 0] = N * ex - V * (-ey)
            fa[e, 1] = N * ey - V * ex
            Mab[e, 0] = Ma
            Mab[e, 1] = Mb
        # the scatter order of fpm.element_forces: every a end, then every b end
        for e in range(nE):
            F[el[e, 0], 0] += fa[e, 0]
            F[el[e, 0], 1] += fa[e, 1]
        for e in range(nE):
            F[el[e, 1], 0] += -fa[e, 0]
            F[el[e, 1], 1] += -fa[e, 1]
        for e in range(nE):
            T[el[e, 2]] += -Mab[e, 0]
        for e in range(nE):
            T[el[e, 3]] += -Mab[e, 1]
        g, dmp = gravity[j], damping[j]
        for k in range(nN):
            F[k, 0] = F[k, 0] + forces[j, k, 0] - dmp * mass[j, k] * vn[k, 0]
            F[k, 1] = F[k, 1] + forces[j, k, 1] - dmp * mass[j, k] * vn[k, 1]
            F[k, 1] += -(g * mass[j, k])
        for r in range(nR):
            T[r] = T[r] + torques[j, r] - dmp * inertia[j, r] * vr[r]
        # clearance joints (joints.evaluate, circle geometry), branch on contact
        peak = 0.0
        for q in range(cl.shape[0]):
            nj, rj, nb, rb = cl[q, 0], cl[q, 1], cl[q, 2], cl[q, 3]
            c, s = qr[rb, 0], qr[rb, 1]
            gx, gy = qn[nj, 0] - qn[nb, 0], qn[nj, 1] - qn[nb, 1]
            lx, ly = c * gx + s * gy, -s * gx + c * gy
            sq = lx * lx + ly * ly
            ecc = math.sqrt(sq) if sq > 0.0 else 0.0
            depth = ecc - clr[j, q]
            if depth <= 0.0:
                mem[q] = 0.0
                continue
            nlx, nly = lx / ecc, ly / ecc
            rr = RJ[j, q] + clr[j, q]
            pblx, pbly = nlx * rr, nly * rr
            nx, ny = c * nlx - s * nly, s * nlx + c * nly
            tx, ty = -ny, nx
            dbx, dby = c * pblx - s * pbly, s * pblx + c * pbly  # p_b − r_b
            djx, djy = RJ[j, q] * nx, RJ[j, q] * ny  # p_j − r_j
            wb, wj = vr[rb], vr[rj]
            vpbx, vpby = vn[nb, 0] + wb * (-dby), vn[nb, 1] + wb * dbx
            vpjx, vpjy = vn[nj, 0] + wj * (-djy), vn[nj, 1] + wj * djx
            dd = nx * (vn[nj, 0] - vpbx) + ny * (vn[nj, 1] - vpby)
            vt = tx * (vpjx - vpbx) + ty * (vpjy - vpby)
            if mem[q] > 0.0:
                ddm = mem[q]
            else:
                ddm = max(dd, FLOOR)
            mem[q] = ddm
            # δ^1.5 as δ·√δ, as jaxclear does for a spec that fixes the exponent (a fair baseline)
            pw = depth * math.sqrt(depth) if expo[j, q] == 1.5 else depth ** expo[j, q]
            fn = K[j, q] * pw * (1.0 + chi[j, q] * dd / max(abs(ddm), FLOOR))
            if fn < 0.0:
                fn = 0.0
            cd = (abs(vt) - v0[j, q]) / (v1[j, q] - v0[j, q])
            cd = 0.0 if cd < 0.0 else (1.0 if cd > 1.0 else cd)
            sg = 1.0 if vt > 0.0 else (-1.0 if vt < 0.0 else 0.0)
            ft = -mu[j, q] * fn * (sg * cd)
            fx, fy = -fn * nx + ft * tx, -fn * ny + ft * ty
            F[nj, 0] += fx
            F[nj, 1] += fy
            F[nb, 0] += -fx
            F[nb, 1] += -fy
            T[rj] += djx * fy - djy * fx
            T[rb] += dbx * (-fy) - dby * (-fx)
            f = math.sqrt(fx * fx + fy * fy)
            if f > peak:
                peak = f
        for k in range(nN):
            an[k, 0] = F[k, 0] / mass[j, k]
            an[k, 1] = F[k, 1] / mass[j, k]
        for r in range(nR):
            ar[r] = T[r] / inertia[j, r]
        for k in range(ground.shape[0]):
            an[ground[k], 0] = 0.0
            an[ground[k], 1] = 0.0
        for k in range(sliders.shape[0]):
            nd, gi = sliders[k, 0], sliders[k, 1]
            dx, dy = guides[j, gi, 0], guides[j, gi, 1]
            dot = an[nd, 0] * dx + an[nd, 1] * dy
            an[nd, 0] = dot * dx
            an[nd, 1] = dot * dy
        for k in range(fixed.shape[0]):
            ar[fixed[k]] = 0.0
        if driven.shape[0]:
            tr = ramp[j]
            alpha = omega[j] / tr if (tr > 0.0 and t < tr) else 0.0 * omega[j]
            for k in range(driven.shape[0]):
                ar[driven[k]] = alpha
        return peak

    @njit(cache=False)
    def _run_one(
        j,
        n_steps,
        h,
        el,
        ground,
        sliders,
        fixed,
        driven,
        cl,
        EA,
        EI,
        l0,
        off,
        mass,
        inertia,
        guides,
        damping,
        gravity,
        omega,
        ramp,
        forces,
        torques,
        RJ,
        clr,
        K,
        expo,
        chi,
        mu,
        v0,
        v1,
        QN,
        QR,
        VN,
        VR,
        AN,
        AR,
        MEM,
        PEAK,
    ):
        """n_steps leapfrog steps of variant j, its state updated in place."""
        qn, qr, vn, vr, an, ar, mem = (
            QN[j].copy(),
            QR[j].copy(),
            VN[j].copy(),
            VR[j].copy(),
            AN[j].copy(),
            AR[j].copy(),
            MEM[j].copy(),
        )
        nN, nR, nE = qn.shape[0], qr.shape[0], el.shape[0]
        F = np.empty((nN, 2))
        T = np.empty(nR)
        fa = np.empty((nE, 2))
        Mab = np.empty((nE, 2))
        peak = 0.0
        for i in range(n_steps):
            for k in range(nN):  # kick (half) and drift
                vn[k, 0] += 0.5 * h * an[k, 0]
                vn[k, 1] += 0.5 * h * an[k, 1]
                qn[k, 0] += h * vn[k, 0]
                qn[k, 1] += h * vn[k, 1]
            for r in range(nR):
                vr[r] += 0.5 * h * ar[r]
                qr[r, 0], qr[r, 1] = _rot(qr[r, 0], qr[r, 1], vr[r] * h)
            t = float(i + 1) * h
            f = _accel_full(
                j,
                t,
                el,
                ground,
                sliders,
                fixed,
                driven,
                cl,
                EA,
                EI,
                l0,
                off,
                mass,
                inertia,
                guides,
                damping,
                gravity,
                omega,
                ramp,
                forces,
                torques,
                RJ,
                clr,
                K,
                expo,
                chi,
                mu,
                v0,
                v1,
                qn,
                qr,
                vn,
                vr,
                an,
                ar,
                mem,
                F,
                T,
                fa,
                Mab,
            )
            for k in range(nN):  # second half kick
                vn[k, 0] += 0.5 * h * an[k, 0]
                vn[k, 1] += 0.5 * h * an[k, 1]
            for r in range(nR):
                vr[r] += 0.5 * h * ar[r]
            if f > peak:
                peak = f
        QN[j], QR[j], VN[j], VR[j], AN[j], AR[j], MEM[j] = qn, qr, vn, vr, an, ar, mem
        PEAK[j] = peak

    @njit(cache=False)
    def numba_serial(n_steps, h, topo, par, st, peak):
        for j in range(peak.shape[0]):
            _run_one(j, n_steps, h, *topo, *par, *st, peak)

    @njit(parallel=True, cache=False)
    def numba_prange(n_steps, h, topo, par, st, peak):
        for j in prange(peak.shape[0]):
            _run_one(j, n_steps, h, *topo, *par, *st, peak)


def run_numba(kernel, n_steps, dt, args):
    topo, par, st0 = args
    st = tuple(x.copy() for x in st0)
    peak = np.zeros(st[0].shape[0])
    kernel(n_steps, dt, topo, par, st, peak)
    return st, peak


# ----------------------------------------------------------------------------- helpers
def timings(fn, repeats):
    """(best, median) wall time of `repeats` calls."""
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def _rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-300))


def setup(name, b_max, quick):
    """Layout, dt, pre-rolled state and batched params (ramp 0) of b_max variants."""
    build = MECHANISMS[name]
    lay, p1 = build()
    dt = time_step(lay, p1)
    pb = batched_params(build, *variants(b_max))
    n_pre = int(round((0.3e-3 if quick else T_PRE) / dt))
    t0 = time.perf_counter()
    s, pb0, n_pre = pre_roll(lay.topology, pb, dt, n_pre)
    print(
        f"\n#### {name}: {lay.topology.n_rotations} particles, {lay.topology.n_nodes} nodes, "
        f"{len(lay.topology.elements)} elements; dt = {dt:.4e} s (half the element bound); "
        f"pre-roll {n_pre} steps ({n_pre * dt * 1e3:.2f} ms, ramp {RAMP * 1e3:g} ms to {RPM:g} rpm) "
        f"of {b_max} variants by jaxclear in {time.perf_counter() - t0:.1f} s"
    )
    return lay, dt, s, pb0


def take(tree, b):
    return jax.tree_util.tree_map(lambda x: x[:b], tree)


def check(lay, dt, s, pb, n_steps, rtol, rtol_acc, have_numba):
    """Final state and peak contact force of jaxclear and Numba from the same state."""
    b = min(16, pb.mass.shape[0])
    s, pb = take(s, b), take(pb, b)
    f = make_jax(lay.topology, dt, n_steps)
    sj, pkj = f(pb, s)
    jax.block_until_ready(sj)
    mem = np.asarray(sj.aux[..., 0])
    print(
        f"== agreement over {n_steps} steps from the pre-rolled state ({b} variants; jaxclear peak "
        f"|F| {np.min(pkj):.4g}–{np.max(pkj):.4g} N; in contact at the end: {int(np.sum(mem > 0))}/{b}) =="
    )
    if not have_numba:
        return True, {}
    args = numba_args(lay.topology, pb, s)
    t0 = time.perf_counter()
    st, pkn = run_numba(numba_serial, n_steps, dt, args)
    t_first = time.perf_counter() - t0
    names = (
        "nodes",
        "rotations",
        "node velocities",
        "rotation rates",
        "node accelerations",
        "rotation accelerations",
        "impact memory",
    )
    ref = (sj.q.nodes, sj.q.rotations, sj.v.nodes, sj.v.rotations, sj.a.nodes, sj.a.rotations, mem)
    diffs = {nm: _rel(r, x) for nm, r, x in zip(names, ref, st)}
    diffs["peak contact force"] = _rel(pkj, pkn)
    stp, pkp = run_numba(numba_prange, n_steps, dt, args)
    diffs["prange vs serial (peak)"] = _rel(pkn, pkp)
    for nm, d in diffs.items():
        print(f"  max |Numba − jaxclear| / max |jaxclear|, {nm:<24} {d:.2e}")
    # The accelerations are the stiff elements' forces (EA/l₀)(l − l₀) with l − l₀ ~ 1e-8 l: a
    # round-off ε·l in a node position is ~ε·l/|l − l₀| ~ 1e-8 of the force, so they get rtol_acc.
    worst = max(v for k, v in diffs.items() if "prange" not in k and "accelerations" not in k)
    worst_a = max(v for k, v in diffs.items() if "accelerations" in k)
    ok = worst <= rtol and worst_a <= rtol_acc
    print(
        f"  worst {worst:.2e} (tolerance {rtol:g}), accelerations {worst_a:.2e} (tolerance {rtol_acc:g}): "
        f"{'OK' if ok else 'FAILED'}; Numba first call (compile + run) {t_first:.1f} s"
    )
    return ok, diffs


def contact_fraction(lay, dt, s, pb, n_steps):
    """Share of variant-steps in contact over the timed window (Numba's branch), from Numba."""
    if numba is None:
        return None
    topo, par, st = numba_args(lay.topology, take(pb, 64), take(s, 64))
    # count with a short serial re-run that records the memory each step (Python-level, coarse)
    hits, total, chunk = 0, 0, max(1, n_steps // 50)
    st = tuple(x.copy() for x in st)
    for _ in range(n_steps // chunk):
        peak = np.zeros(st[0].shape[0])
        numba_serial(chunk, dt, topo, par, st, peak)
        hits += int(np.sum(st[6] > 0))
        total += st[6].size
    return hits / max(total, 1)


def measure(lay, dt, s, pb, sizes, n_steps, repeats, have_numba):
    n_part = lay.topology.n_rotations
    rows = []
    print(
        f"== throughput, float64, leapfrog, {n_steps} steps per run, best/median of {repeats} "
        f"(Numba threads for prange: {numba.get_num_threads() if have_numba else '—'}) =="
    )
    print(
        f"{'B':>5} {'compile':>8} {'jaxclear v-st/s':>16} {'particle-st/s':>14} {'Numba 1 thr':>12} "
        f"{'Numba prange':>13} {'jax/Numba':>10} {'jax/prange':>11} {'ns/v-step jax':>13}"
    )
    for b in sizes:
        sb, pbb = take(s, b), take(pb, b)
        f = make_jax(lay.topology, dt, n_steps)
        t0 = time.perf_counter()
        comp = f.lower(pbb, sb).compile()
        tc = time.perf_counter() - t0
        jax.block_until_ready(comp(pbb, sb))
        tj, tjm = timings(lambda: jax.block_until_ready(comp(pbb, sb)), repeats)
        rj = b * n_steps / tj
        rn = rp = None
        tn = tnm = tp = tpm = None
        if have_numba:
            args = numba_args(lay.topology, pbb, sb)
            run_numba(numba_serial, 2, dt, args)
            run_numba(numba_prange, 2, dt, args)
            tn, tnm = timings(lambda: run_numba(numba_serial, n_steps, dt, args), repeats)
            tp, tpm = timings(lambda: run_numba(numba_prange, n_steps, dt, args), repeats)
            rn, rp = b * n_steps / tn, b * n_steps / tp
        row = dict(
            B=b,
            compile_s=tc,
            jax_best_s=tj,
            jax_median_s=tjm,
            jax_variant_steps_per_s=rj,
            jax_particle_steps_per_s=rj * n_part,
            numba_best_s=tn,
            numba_median_s=tnm,
            numba_variant_steps_per_s=rn,
            prange_best_s=tp,
            prange_median_s=tpm,
            prange_variant_steps_per_s=rp,
            jax_over_numba=(rj / rn if rn else None),
            jax_over_prange=(rj / rp if rp else None),
            jax_over_numba_median=(tnm / tjm if tnm else None),
        )
        rows.append(row)
        fm = lambda x: "—" if x is None else f"{x:.3e}"
        fr = lambda x: "—" if x is None else f"{x:.3f}"
        print(
            f"{b:5d} {tc:7.1f}s {rj:16.3e} {rj * n_part:14.3e} {fm(rn):>12} {fm(rp):>13} "
            f"{fr(row['jax_over_numba']):>10} {fr(row['jax_over_prange']):>11} {1e9 / rj:13.1f}"
        )
    return rows


# ----------------------------------------------------------------------------- where the time goes
def hlo_profile(comp):
    """Ops of one time step (the innermost while body of the optimised HLO, fusions opened) by
    the integrate.STAGES name in their op_name metadata; kernels = top-level instructions."""
    comps = _computations(comp.as_text())
    bodies = {
        m.group(1) for ls in comps.values() for l in ls for m in [re.search(r" while\(.*body=%([\w.\-]+)", l)] if m
    }
    inner = [b for b in bodies if b in comps and not any(" while(" in l for l in comps[b])]
    if not inner:
        return None
    top = [l for l in comps[inner[0]] if not any(t in l for t in _TRIVIAL)]
    ops = []

    def walk(lines, depth=0):
        for l in lines:
            if any(t in l for t in _TRIVIAL):
                continue
            m = re.search(r" (?:fusion|call)\(.*(?:calls|to_apply)=%([\w.\-]+)", l)
            if m and depth < 4 and m.group(1) in comps:
                walk(comps[m.group(1)], depth + 1)
            else:
                ops.append(l)

    walk(top)
    by = {st: 0 for st in integrate.STAGES}
    by["(other)"] = 0
    kinds = {}
    for l in ops:
        st = next((s for s in integrate.STAGES if f"/{s}/" in l or f'/{s}"' in l), "(other)")
        by[st] += 1
        k = re.search(r"= \S+ ([\w\-]+)\(", l)
        k = k.group(1) if k else "?"
        kinds[k] = kinds.get(k, 0) + 1
    return dict(
        kernels=len(top),
        ops=len(ops),
        by_stage={k: v for k, v in by.items() if v},
        top_ops=dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:12]),
    )


def where_time_goes(lay, dt, s, pb, b, n_steps, repeats):
    """HLO op counts of one step by stage, and the rate with the contact branch never taken
    (clearance 5 mm: the journal never touches) against the normal run."""
    sb, pbb = take(s, b), take(pb, b)
    f = make_jax(lay.topology, dt, n_steps)
    comp = f.lower(pbb, sb).compile()
    h = hlo_profile(comp)
    print(f"== where the time goes (jaxclear, B = {b}) ==")
    if h:
        print(
            f"  one step: {h['kernels']} top-level HLO instructions (kernels), {h['ops']} ops inside; by stage: "
            + ", ".join(f"{k} {v}" for k, v in h["by_stage"].items())
        )
        print("  most frequent ops: " + ", ".join(f"{k} {v}" for k, v in h["top_ops"].items()))
    free = pbb._replace(joint=pbb.joint._replace(clearance=jnp.full_like(pbb.joint.clearance, 5e-3)))
    sf = sb._replace(aux=jnp.zeros_like(sb.aux))
    jax.block_until_ready(comp(free, sf))
    tf, _ = timings(lambda: jax.block_until_ready(comp(free, sf)), repeats)
    tc, _ = timings(lambda: jax.block_until_ready(comp(pbb, sb)), repeats)
    out = dict(B=b, hlo=h, ns_per_vstep=1e9 * tc / (b * n_steps), ns_per_vstep_no_contact=1e9 * tf / (b * n_steps))
    line = (
        f"  jaxclear ns/variant-step: {out['ns_per_vstep']:.1f} with contact, "
        f"{out['ns_per_vstep_no_contact']:.1f} with the journal never touching (selects: the same work)"
    )
    if numba is not None:
        a1, a2 = numba_args(lay.topology, pbb, sb), numba_args(lay.topology, free, sf)
        t1, _ = timings(lambda: run_numba(numba_serial, n_steps, dt, a1), repeats)
        t2, _ = timings(lambda: run_numba(numba_serial, n_steps, dt, a2), repeats)
        out.update(numba_ns=1e9 * t1 / (b * n_steps), numba_ns_no_contact=1e9 * t2 / (b * n_steps))
        line += (
            f"; Numba 1 thread {out['numba_ns']:.1f} / {out['numba_ns_no_contact']:.1f} (the branch skips the joint)"
        )
    print(line)
    return out


# ----------------------------------------------------------------------------- FPM vs hand-derived
def cost_vs_hand(b, t_end, repeats):
    """The same simulated time, stiff FPM slider-crank (dt = half its element bound) against
    mechanisms.slider_crank (dt = 1 µs): both jit(vmap), from rest, 1000 rpm over 5 ms."""
    from jaxclear.mechanisms import slider_crank as sc

    c, e, mu = variants(b, seed=1)
    build = lambda c_, e_, m_: slider_crank(c_, e_, m_, rpm=1000.0, ramp=0.005)
    lay, p1 = build(0.5e-3, 0.9, 0.01)
    dt = time_step(lay, p1)
    pb = batched_params(build, c, e, mu)
    n_fpm = int(math.ceil(t_end / dt))
    k = 1000
    n_fpm = k * int(math.ceil(n_fpm / k))
    step = fpm.make_step(lay.topology, dt, "leapfrog")

    def sim_fpm(p):
        q0, v0, aux0 = fpm.initial_state(lay.topology, p)
        s0 = integrate.State(q0, v0, fpm._accel_out(lay.topology, p, q0, v0, aux0, 0.0)[0], aux0)
        return integrate.simulate(step, p, s0, jnp.zeros(()), _peak, n_fpm // k, k)[1]

    n_sc = int(round(t_end / 1e-6))
    cfg = sc.Config(dt=1e-6, n_saves=n_sc // 100, save_every=100, outputs=(), scheme="leapfrog")
    psc = jax.vmap(
        lambda c_, e_, m_: sc.benchmark_params(
            clearance=c_, restitution=e_, friction_coefficient=m_, crank_speed_rpm=1000.0, ramp_time=0.005
        )
    )(jnp.asarray(c), jnp.asarray(e), jnp.asarray(mu))
    f_fpm = jax.jit(jax.vmap(sim_fpm)).lower(pb).compile()
    f_sc = jax.jit(jax.vmap(lambda p: sc.simulate(cfg, p).acc.peak_force[0])).lower(psc).compile()
    pk_f = np.asarray(f_fpm(pb))
    pk_s = np.asarray(f_sc(psc))
    tf, tfm = timings(lambda: jax.block_until_ready(f_fpm(pb)), repeats)
    ts, tsm = timings(lambda: jax.block_until_ready(f_sc(psc)), repeats)
    hit = pk_s > 0  # variants with a contact in the window
    dev = np.abs(pk_f[hit] / pk_s[hit] - 1.0) if hit.any() else np.array([np.nan])
    print(
        f"\n== stiff FPM slider-crank vs the hand-derived slider_crank: {t_end * 1e3:g} ms simulated, B = {b}, "
        f"from rest, 1000 rpm over 5 ms, leapfrog, best of {repeats} =="
    )
    print(
        f"  FPM: dt = {dt:.3e} s, {n_fpm} steps, {tf:.2f} s (median {tfm:.2f}); hand-derived: dt = 1e-6 s, "
        f"{n_sc} steps, {ts:.3f} s (median {tsm:.3f}); FPM/hand-derived wall time {tf / ts:.0f}× "
        f"(steps {n_fpm / n_sc:.0f}×, per step {tf / n_fpm / (ts / n_sc):.1f}×)"
    )
    print(
        f"  peak contact force ({int(hit.sum())}/{b} variants in contact) FPM/hand-derived − 1: median {np.median(dev):.2%}, max {np.max(dev):.2%} "
        f"(hand-derived peaks {pk_s.min():.0f}–{pk_s.max():.0f} N)"
    )
    return dict(
        B=b,
        t_end_s=t_end,
        fpm_dt=dt,
        fpm_steps=n_fpm,
        fpm_s=tf,
        fpm_median_s=tfm,
        hand_dt=1e-6,
        hand_steps=n_sc,
        hand_s=ts,
        hand_median_s=tsm,
        ratio=tf / ts,
        peak_dev_median=float(np.median(dev)),
        peak_dev_max=float(np.max(dev)),
    )


# ----------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: B = 1, 64, fewer steps")
    ap.add_argument("--sizes", default=None, help="batch sizes (default 1,64,1024)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed run (default 4000)")
    ap.add_argument("--check-steps", type=int, default=None, help="steps of the agreement check (default 4000)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 3)")
    ap.add_argument("--mechanisms", default=None, help="comma list of slider_crank,four_bar (default both)")
    ap.add_argument("--cost-ms", type=float, default=None, help="simulated time of part 2 [ms] (default 10)")
    ap.add_argument("--cost-batch", type=int, default=64, help="B of part 2")
    ap.add_argument(
        "--rtol",
        type=float,
        default=1e-8,
        help="agreement tolerance of state and peak (relative; impacts amplify round-off over the steps)",
    )
    ap.add_argument(
        "--rtol-acc",
        type=float,
        default=1e-4,
        help="agreement tolerance of the accelerations (stiff elements amplify round-off)",
    )
    ap.add_argument("--no-numba", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    quick = a.quick
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else ([1, 64] if quick else [1, 64, 1024])
    steps = a.steps or (500 if quick else 4000)
    check_steps = a.check_steps or (1000 if quick else 4000)
    repeats = a.repeats or (1 if quick else 3)
    mechs = a.mechanisms.split(",") if a.mechanisms else (["slider_crank"] if quick else ["slider_crank", "four_bar"])
    cost_ms = a.cost_ms if a.cost_ms is not None else (2.0 if quick else 10.0)
    have_numba = numba is not None and not a.no_numba
    print("jaxclear FPM benchmark: " + " ".join(sys.argv))
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')}; python {platform.python_version()}, jax {jax.__version__} on "
        f"{jax.devices()[0].platform}, numba {numba.__version__ if numba else 'not installed'}; "
        f"{os.cpu_count()} CPU cores; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    t_start = time.perf_counter()
    out, ok_all = (
        dict(
            meta=dict(
                argv=sys.argv,
                date=time.strftime("%Y-%m-%d %H:%M"),
                load=os.getloadavg(),
                cpu_count=os.cpu_count(),
                sizes=sizes,
                steps=steps,
                repeats=repeats,
            ),
            mechanisms={},
        ),
        True,
    )
    for name in mechs:
        lay, dt, s, pb = setup(name, max(sizes), quick)
        ok, diffs = check(lay, dt, s, pb, check_steps, a.rtol, a.rtol_acc, have_numba)
        ok_all &= ok
        frac = contact_fraction(lay, dt, s, pb, steps) if have_numba else None
        if frac is not None:
            print(f"  share of variant-steps in contact over the timed window (64 variants): {frac:.2f}")
        rows = measure(lay, dt, s, pb, sizes, steps, repeats, have_numba)
        prof = where_time_goes(lay, dt, s, pb, max(sizes), steps, repeats)
        out["mechanisms"][name] = dict(
            dt=dt,
            particles=lay.topology.n_rotations,
            nodes=lay.topology.n_nodes,
            elements=len(lay.topology.elements),
            agreement=diffs,
            contact_share=frac,
            rates=rows,
            profile=prof,
        )
        tr = rows[-1]
        if tr["jax_over_numba"] is not None:
            print(
                f"  target at B = {tr['B']}: jaxclear ≥ Numba 1 thread: ratio {tr['jax_over_numba']:.3f} "
                f"-> {'met' if tr['jax_over_numba'] >= 1 else 'NOT met'}"
            )
    if cost_ms > 0:
        out["fpm_vs_hand"] = cost_vs_hand(a.cost_batch, cost_ms * 1e-3, repeats)
    print(
        f"\ntotal {time.perf_counter() - t_start:.0f} s; agreement {'OK' if ok_all else 'FAILED'}; "
        f"load average now {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=2, default=float)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
