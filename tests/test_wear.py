"""Archard wear of the bushing profile (jaxclear.wear): volume, symmetry, zero wear."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import profiles, wear

RJ, RB, N = 10.0e-3, 10.1e-3, 72

# One compile of the increment for every direct call below (op by op it costs ~2 s of first-use
# compiles of its primitives).
_increment = jax.jit(wear.increment)


@pytest.mark.parametrize("angle_deg", [-90.0, -87.5, 33.0])
def test_a_pin_pressed_and_sliding_removes_the_archard_volume(angle_deg):
    # A pin pressed on the bushing with a constant force F while sliding at a constant speed v:
    # the worn volume after n steps is k·F·(v·n·dt) (Archard), wherever the pin presses (on a
    # point or between two), to round-off.
    pts = profiles.circle(RB, N)
    a = np.deg2rad(angle_deg)
    centre = (RB - RJ + 20e-6) * jnp.array([np.cos(a), np.sin(a)])  # 20 µm into the bore
    k, F, v, dt, L, n = 1e-13, 500.0, 0.3, 1e-5, 0.02, 1000
    depth = n * _increment(pts, centre, RJ, F, v, dt, k, L)
    assert int(jnp.sum(depth > 0)) >= 3  # a contact arc, not a point
    np.testing.assert_allclose(float(wear.worn_volume(pts, depth, L)), k * F * v * n * dt, rtol=1e-12)
    # the deepest wear faces the pin
    theta = np.arctan2(np.asarray(pts[:, 1]), np.asarray(pts[:, 0]))
    k_max = int(jnp.argmax(depth))
    assert abs(np.angle(np.exp(1j * (theta[k_max] - a)))) <= np.pi / N + 1e-12


def test_a_load_symmetric_about_an_axis_wears_a_symmetric_profile():
    pts = profiles.circle(RB, N)  # points at 2πk/N: symmetric about the y axis for even N
    centre = jnp.array([0.0, -(RB - RJ + 15e-6)])
    depth = np.asarray(_increment(pts, centre, RJ, 800.0, 0.5, 1e-5, 1e-13, 0.02))
    mirror = [(N // 2 - k) % N for k in range(N)]  # θ → π − θ
    np.testing.assert_allclose(depth, depth[mirror], rtol=1e-12, atol=0.0)
    assert depth.max() > 0


def test_zero_wear_coefficient_and_no_contact_leave_the_profile_bit_identical():
    pts = profiles.circle(RB, N)
    centre = jnp.array([0.0, -(RB - RJ + 15e-6)])
    zero = _increment(pts, centre, RJ, 800.0, 0.5, 1e-5, 0.0, 0.02)
    assert np.array_equal(np.asarray(wear.worn_points(pts, zero)), np.asarray(pts))
    free = _increment(pts, jnp.zeros(2), RJ, 800.0, 0.5, 1e-5, 1e-13, 0.02)  # centred: no contact
    assert not np.any(np.asarray(free))


@functools.cache
def _window_fn():
    """One steady crank revolution (after one of start-up) of the Flores slider-crank at 5000 rpm,
    c = 0.1 mm, 72-point bushing, wear on: jitted f(points, k_w) with the wear coefficient
    traced, so the worn and the zero-wear windows share one compile."""
    from jaxclear import joints
    from jaxclear.mechanisms import slider_crank as sc

    jc = joints.JointConfig(geometry="points", n_points=72, max_regions=1, refine=True)
    T = 2 * 60 / 5000
    cfg = sc.Config(dt=1e-6, n_saves=24, save_every=1000, joint=jc, outputs=(), wear=True)
    p0 = sc.benchmark_params(clearance=0.1e-3, points=profiles.circle(RB, N), steady_start=T / 2)
    p0 = p0._replace(joint=p0.joint._replace(bushing_length=jnp.asarray(0.02)))

    @jax.jit
    def window(pts, k_w):
        r = sc.simulate(cfg, p0._replace(joint=p0.joint._replace(points=pts, wear_coefficient=k_w)))
        return r.wear[0], {"peak_contact_force_N": r.acc.peak_force[0]}

    return window, p0.joint.points


def _window(k_w=1e-13):
    """(window(points), the initial points) of ``_window_fn`` at wear coefficient k_w."""
    window, pts = _window_fn()
    k = jnp.asarray(k_w, dtype=pts.dtype)
    return (lambda points: window(points, k)), pts


def test_the_evolved_profile_converges_at_first_order_in_the_cycles_per_update():
    # A deterministic coupled window: a journal pressed 10 µm into the current bore (at its support
    # along the load), the load swinging ±60° about −y, 200 load directions per window.  The wear
    # moves the contact, so the loop is a true feedback; 20 000 cycles in 2, 4, 8, 16 updates
    # against 32: the profile's relative L2 distance falls at least 2× per halving (first order:
    # 3× against the finest; measured 10.7 %, 3.2 %, 0.67 %, 0.18 %).
    pts = profiles.circle(RB, N)
    phis = jnp.deg2rad(-90.0 + 60.0 * jnp.sin(jnp.linspace(0.0, 2 * np.pi, 200, endpoint=False)))

    def one(points, phi):
        u = jnp.stack([jnp.cos(phi), jnp.sin(phi)])
        e = u * (jnp.max(points @ u) - RJ + 10e-6)
        return wear.increment(points, e, RJ, 800.0, 0.5, 1e-4, 1e-13, 0.02)

    import jax

    window = jax.jit(lambda points: (jnp.sum(jax.vmap(lambda ph: one(points, ph))(phis), axis=0), {}))
    final = {M: np.asarray(wear.evolve(window, pts, M, 2e4 / M, 1.0)[0][-1]) for M in (2, 4, 8, 16, 32)}
    err = [np.linalg.norm(final[M] - final[32]) / np.linalg.norm(final[32]) for M in (2, 4, 8, 16)]
    assert 20e-6 < final[32].max() < 40e-6
    assert all(a > 2.0 * b for a, b in zip(err, err[1:])) and err[-1] < 0.005, err


@pytest.mark.slow  # 32 windows of 24 000 steps of a 72-point bushing: ~8 s on 2 cores
def test_the_mechanism_evolution_converges_to_its_impact_scatter():
    # The Flores slider-crank (5000 rpm, c = 0.1 mm): 4000 cycles (~24 µm) in 2, 4, 8 and 16
    # updates.  Its window is one cycle of a chaotic impact sequence, so the profile converges
    # only down to the cycle-to-cycle scatter: the L2 distance to the finest shrinks (measured
    # 5.1 %, 4.0 %, 2.9 %), the worn volume stays within 1.5 %; the contact force grows as the
    # bore wears.
    window, pts = _window()
    out = {M: wear.evolve(window, pts, M, 4000 / M, 1.0) for M in (2, 4, 8, 16)}
    final = {M: np.asarray(d[-1]) for M, (d, _) in out.items()}
    vol = {M: float(wear.worn_volume(pts, d, 0.02)) for M, d in final.items()}
    assert 10e-6 < final[16].max() < 50e-6
    err = [np.linalg.norm(final[M] - final[16]) / np.linalg.norm(final[16]) for M in (2, 4, 8)]
    assert err[0] > err[1] > err[2] and err[0] < 0.1, err
    assert all(abs(vol[M] / vol[16] - 1.0) < 0.015 for M in (2, 4, 8)), vol
    peaks = [float(i["peak_contact_force_N"]) for i in out[16][1]]
    assert peaks[-1] > peaks[0]
    # zero wear: the dynamics and the profile are untouched
    w0, _ = _window(0.0)
    d0, info0 = wear.evolve(w0, pts, 2, 1000.0, 1.0)
    assert not np.any(np.asarray(d0)) and float(info0[1]["peak_contact_force_N"]) == float(
        info0[0]["peak_contact_force_N"]
    )


@pytest.mark.slow  # a sweep of 2 × 24 000 steps on a 72-point bushing, its compile: ~7 s on 2 cores
def test_a_sweep_reports_the_wear_rates_and_they_scale_with_the_coefficient():
    # [wear] in a spec: the steady window's wear per crank cycle in metrics.csv; Archard's law is
    # linear in k_w (the dynamics do not see the wear within a run), so doubling it doubles the
    # worn volume and the deepest wear exactly, at the same angle.
    from jaxclear import spec as specmod
    from jaxclear import sweep

    raw = {
        "profile": {"method": "points", "n_points": 72},
        "joint": {"clearance_m": 1e-4},
        "wear": {"coefficient_m2_per_N": 1e-13},
        "integrator": {"dt_s": 1e-6, "t_end_s": 0.024, "steady_revolutions": 1.0},
        "outputs": {"histories": [], "plots": False},
        "axes": {"wear.coefficient_m2_per_N": {"values": [1e-13, 2e-13]}},
    }
    table, _, _ = sweep.run(specmod.load(raw), log=lambda *a, **k: None)
    v, d, a = (
        np.asarray(table[c]) for c in ("worn_volume_per_cycle_m3", "max_wear_depth_per_cycle_m", "max_wear_angle_deg")
    )
    assert v[0] > 0 and 1e-10 < d[0] < 1e-7
    np.testing.assert_allclose([v[1] / v[0], d[1] / d[0]], [2.0, 2.0], rtol=1e-12)
    assert a[0] == a[1]
    raw["profile"] = {"method": "analytic"}
    with pytest.raises(specmod.SpecError, match="needs its point profile"):
        specmod.load(raw)
