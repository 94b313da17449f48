"""Measured convergence orders of the fixed-step schemes on a damped impact with friction, and
their stability bounds with damping (``integrate``).

The impact: a rod (m = 1 kg, L = 0.2 m, J = mL²/12) inclined at 0.5 rad slides at 2 m/s and
falls at 1 m/s onto the ground, 10 µm above it; its lower end meets the ground under the
Lankarani–Nikravesh law (K = 1e9 N/m^1.5, e = 0.8: damping on δ̇ with the impact velocity
captured at onset, as ``joints`` does) and Ambrósio friction (μ = 0.3 on the slip velocity of
the end).  Friction turns the rod, which changes the end's normal velocity, so both
velocity-dependent forces act on the normal force.  No gravity: the approach velocity is
constant before contact, so every scheme captures the same impact velocity and the only error
is the integrator's.  The peak is read off the step samples with a parabola through the largest
sample and its neighbours (so the grid's sampling of the peak, O(h²) with a coefficient that
jumps with the grid's phase, does not hide the integrator's order); the reference is RK4 at
10 ns (its error there is below 1e-12 relative).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import integrate, laws

M, L, K, E, MU = 1.0, 0.2, 1e9, 0.8, 0.3
J = M * L * L / 12.0
PHI0, GAP, T_END = 0.5, 1e-5, 8e-4
DTS = (2e-6, 1e-6, 5e-7, 2.5e-7)  # three halvings


def _accel(params, q, v, aux, t):
    """q = (x, y, φ) of the rod's centre; the lower end r = −L/2 (cos φ, sin φ) from it."""
    prev, mem = aux
    rx, ry = -0.5 * L * jnp.cos(q[2]), -0.5 * L * jnp.sin(q[2])
    delta, delta_dot = -(q[1] + ry), -(v[1] + v[2] * rx)
    slip = v[0] - v[2] * ry
    active = delta > 0
    mem1 = jnp.where(active, jnp.where(prev, mem, jnp.maximum(delta_dot, laws.IMPACT_VELOCITY_FLOOR)), 0.0)
    fn = laws.normal_force("lankarani_nikravesh", delta, delta_dot, mem1, K, 1.5, E)
    ft = laws.friction_force("ambrosio", slip, fn, MU)
    a = jnp.stack([ft / M, fn / M, (rx * fn - ry * ft) / J])
    return a, (active, mem1), jnp.hypot(fn, ft)


def _hertz(params, q, v, aux, t):
    """The same rod on a purely elastic contact (no velocity dependence)."""
    rx, ry = -0.5 * L * jnp.cos(q[2]), -0.5 * L * jnp.sin(q[2])
    fn = laws.normal_force("hertz", -(q[1] + ry), 0.0, 0.0, K, 1.5)
    return jnp.stack([0.0 * fn, fn / M, rx * fn / J]), aux, fn


def _forces(scheme, dt, accel=_accel):
    """|F| at every step of a run to T_END (the whole first impact)."""
    n = int(round(T_END / dt))
    step = integrate.make_step(scheme, accel, None, dt)
    q = jnp.array([0.0, 0.5 * L * math.sin(PHI0) + GAP, PHI0])
    v = jnp.array([2.0, -1.0, 0.0])
    aux = (jnp.array(False), jnp.array(0.0))
    s = integrate.State(q, v, accel(None, q, v, aux, 0.0)[0], aux)
    run = jax.jit(lambda s: jax.lax.scan(lambda c, i: step(None, c, i), s, jnp.arange(n)))
    s1, f = run(s)
    return np.asarray(f), s1


def _peak(f):
    """The largest sample refined by the parabola through it and its neighbours."""
    k = int(np.argmax(f))
    a, b, c = f[k - 1], f[k], f[k + 1]
    return b - 0.125 * (c - a) ** 2 / (a - 2.0 * b + c)


@pytest.fixture(scope="module")
def reference():
    f, _ = _forces("rk4", 1e-8)
    return _peak(f), f.sum() * 1e-8


def _slope(errors):
    """Least-squares slope of log2(error) against log2(dt) over DTS."""
    return float(np.polyfit(np.log2(DTS), np.log2(errors), 1)[0])


def test_verlet_predicted_is_second_order_and_leapfrog_first_on_a_damped_frictional_impact(reference):
    peak_ref, impulse_ref = reference
    orders = {}
    for scheme in ("verlet_predicted", "leapfrog"):
        peak, impulse = [], []
        for dt in DTS:
            f, _ = _forces(scheme, dt)
            assert f[0] == 0.0 and f[-1] == 0.0  # the run holds the whole first impact
            peak.append(abs(_peak(f) - peak_ref) / peak_ref)
            impulse.append(abs(f.sum() * dt - impulse_ref) / impulse_ref)
        orders[scheme] = (_slope(peak), _slope(impulse), peak)
    print({k: v[:2] for k, v in orders.items()})  # measured: {vp: (2.12, 2.00), leapfrog: (1.01, 1.02)}
    p_vp, i_vp, e_vp = orders["verlet_predicted"]
    p_lf, i_lf, e_lf = orders["leapfrog"]
    assert abs(p_vp - 2.0) < 0.3 and abs(i_vp - 2.0) < 0.3, orders
    assert abs(p_lf - 1.0) < 0.2 and abs(i_lf - 1.0) < 0.3, orders
    # and the difference in error at equal step: ~100× at 1 µs
    assert e_vp[1] < 0.05 * e_lf[1], orders


def test_verlet_predicted_is_the_leapfrog_for_velocity_independent_forces():
    f_vp, s_vp = _forces("verlet_predicted", 1e-6, accel=_hertz)
    f_lf, s_lf = _forces("leapfrog", 1e-6, accel=_hertz)
    np.testing.assert_array_equal(f_vp, f_lf)
    np.testing.assert_array_equal(s_vp.v, s_lf.v)


@pytest.mark.parametrize("scheme", ["verlet_predicted", "leapfrog"])
def test_damped_stability_bound_is_the_edge_of_the_spectral_radius(scheme):
    """ẍ = −ω²x − 2ζωẋ (ω = 1): the step's 3×3 map on (x, v, a) has spectral radius ≤ 1 just
    under ``stability_bound`` and > 1 just over it, for ζ from 0 to 1."""

    def radius(h, z):
        accel = lambda p, q, v, aux, t: (-q - 2.0 * z * v, aux, None)
        step = integrate.make_step(scheme, accel, None, h)

        def f(x):
            s, _ = step(None, integrate.State(x[0], x[1], x[2], None), 0)
            return jnp.stack([s.q, s.v, s.a])

        return max(abs(np.linalg.eigvals(np.asarray(jax.jacfwd(f)(jnp.zeros(3))))))

    for z in (0.0, 0.065, 0.2, 0.5, 1.0):
        h = float(integrate.stability_bound(scheme, 1.0, 1.0, z))
        assert radius(0.999 * h, z) <= 1.0 + 1e-9 and radius(1.001 * h, z) > 1.0 + 1e-9, (z, h)
    assert float(integrate.stability_bound(scheme, 1.0, 1.0)) == 2.0


def test_hysteresis_damping_ratio_of_lankarani_nikravesh():
    chi = laws.hysteresis_factor("lankarani_nikravesh", 0.9)
    assert float(integrate.hysteresis_damping_ratio(chi)) == pytest.approx(float(chi) / math.sqrt(4.8))
    assert float(
        integrate.stability_bound("verlet_predicted", 1.0, 1.0, integrate.hysteresis_damping_ratio(chi))
    ) == pytest.approx(1.757, abs=1e-3)
