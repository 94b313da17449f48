"""Physics of the slider-crank with clearance joints: conservation, convergence, limits, batching."""

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (float64)
from jaxclear import joints, profiles
from jaxclear.mechanisms import slider_crank as sc

# One cached jit for every run of the module (Config is a frozen dataclass: hashable, static),
# so runs of one Config share one compile; a fresh ``jax.jit(lambda ...)`` per call retraced and
# recompiled every time.
_sim = jax.jit(sc.simulate, static_argnums=0)


def _run(cfg, p, state0=None):
    return _sim(cfg, p, state0)


# 24 ms in 240 blocks of 100 steps, with the channels of the tests that share it: the small
# clearance limit, the kinematic bound (first 12 ms), the single runs of the vmap test and the
# float64 run of the float32 test (first 400 steps, from the block maxima).  Runs are cheap
# (~0.1 s); each distinct Config is a compile (~2 s).
CFG_24MS = sc.Config(
    dt=1e-6, n_saves=240, save_every=100, outputs=("contact_force_N", "slider_position_m", "penetration_m")
)


def _energy(q, v, p):
    """Rod about the fixed crank pin + slider + Hertz potential K δ^2.5/2.5 (crank at rest)."""
    l = p.rod_length / 2
    jb = p.rod_inertia + p.rod_mass * l * l
    ke = 0.5 * jb * v.rod**2 + 0.5 * p.slider_mass * v.slider**2
    c = p.crank_length * q.crank + p.rod_length * q.rod
    d = jnp.maximum(jnp.linalg.norm(c - jnp.array([q.slider, 0.0])) - p.joint.clearance, 0.0)
    return ke + p.joint.stiffness * d**2.5 / 2.5


def _state(x3, rod_rate, slider_speed):
    """Crank and rod along +x at rest but for the rod's rate and the slider's speed."""
    pair = jnp.array([1.0, 0.0])
    return (
        sc.Coordinates(crank=pair, rod=pair, slider=jnp.asarray(x3)),
        sc.Coordinates(crank=jnp.asarray(0.0), rod=jnp.asarray(rod_rate), slider=jnp.asarray(slider_speed)),
    )


def test_frictionless_undamped_impacts_conserve_energy():
    # Crank at rest, no gravity: the rod swings about B and the journal bounces in the
    # bearing 30+ times; with the Hertz law and no friction the energy is a constant.
    jc = joints.JointConfig(normal_law="hertz", friction="none")
    cfg = sc.Config(dt=1e-6, n_saves=100, save_every=100, joint=jc, outputs=())
    p = sc.benchmark_params(clearance=0.1e-3, crank_speed_rpm=0.0, friction_coefficient=0.0)
    p = p._replace(gravity=jnp.asarray(0.0))
    q0, v0 = _state(0.17, 3.0, 0.5)
    r = _run(cfg, p, (q0, v0))
    assert int(r.acc.impacts[0]) >= 20
    e0, e1 = _energy(q0, v0, p), _energy(r.q, r.v, p)
    assert abs(float((e1 - e0) / e0)) < 2e-3  # leapfrog: bounded energy error, measured 6e-4


def test_damped_impacts_dissipate_energy():
    cfg = sc.Config(dt=1e-6, n_saves=100, save_every=100, outputs=())
    p = sc.benchmark_params(clearance=0.1e-3, crank_speed_rpm=0.0, friction_coefficient=0.0, restitution=0.7)._replace(
        gravity=jnp.asarray(0.0)
    )
    q0, v0 = _state(0.17, 3.0, 0.5)
    r = _run(cfg, p, (q0, v0))
    assert float(_energy(r.q, r.v, p)) < 0.9 * float(_energy(q0, v0, p))


@jax.jit
def _first_impact_block_peaks(dt, p):
    """Block maxima of the contact force over 8 blocks of 100 steps at step ``dt`` (traced: one
    compile serves every dt of a scheme); the peak over the first k blocks is the exact peak
    over the first 100 k steps (the block maximum sees every step)."""
    return {
        scheme: sc.simulate(
            sc.Config(dt=dt, n_saves=8, save_every=100, outputs=("contact_force_N",), scheme=scheme), p
        ).history["contact_force_block_max_N"][:, 0]
        for scheme in ("leapfrog", "rk4")
    }


@pytest.fixture(scope="module")
def first_impact_peaks():
    """{scheme: [peak contact force over the first 0.4 ms at dt = 4, 2, 1, 0.5 µs]}."""
    out = {"leapfrog": [], "rk4": []}
    p = sc.benchmark_params(clearance=0.5e-3)
    for dt in (4e-6, 2e-6, 1e-6, 5e-7):
        n = int(round(0.4e-3 / dt))  # 100, 200, 400, 800 steps: 1, 2, 4, 8 blocks
        for scheme, b in _first_impact_block_peaks(dt, p).items():
            out[scheme].append(float(np.max(np.asarray(b)[: n // 100])))
    return out


@pytest.mark.parametrize("scheme", ["leapfrog", "rk4"])
def test_first_impact_peak_converges_as_dt_halves(scheme, first_impact_peaks):
    # Reference: RK4 at dt = 2.5e-7 s gives 46739.0 N for the first impact (t ≈ 0.23 ms).
    ref = 46738.98
    errs = [abs(f - ref) / ref for f in first_impact_peaks[scheme]]
    assert all(b < a for a, b in zip(errs, errs[1:])), errs
    assert errs[-1] < 2e-3, errs


def test_small_clearance_approaches_ideal_joint_reaction():
    errs = []
    cfg = CFG_24MS
    for c in (1e-4, 1e-5, 1e-6):  # one Config: one compile for the three clearances
        p = sc.benchmark_params(clearance=c, restitution=0.5, steady_start=0.012)
        r = _run(cfg, p)
        t = (np.arange(240) + 1) * 100 * 1e-6
        ideal = np.asarray(sc.ideal(p, t)["reaction_rod_slider"])
        f = np.asarray(r.history["contact_force_N"][:, 0])
        m = t >= 0.012
        errs.append(np.sqrt(np.mean((f[m] - ideal[m]) ** 2)) / ideal[m].max())
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 5e-3  # measured 1.2e-3 at c = 1 µm


def test_ideal_mechanism_kinematics_and_reaction():
    p = sc.benchmark_params()
    t = jnp.linspace(0, 0.012, 2001)
    ide = sc.ideal(p, t)
    w = p.crank_speed
    # Slider acceleration of the exact kinematics against the slider position differentiated twice.
    x = np.asarray(ide["slider_position"])
    h = float(t[1] - t[0])
    xdd_fd = (x[2:] - 2 * x[1:-1] + x[:-2]) / h**2
    np.testing.assert_allclose(np.asarray(ide["slider_acceleration"])[1:-1], xdd_fd, rtol=0, atol=2e-3 * 19420)
    # Peak ideal slider acceleration r ω² (1 + r/L) at TDC.
    assert abs(float(jnp.max(jnp.abs(ide["slider_acceleration"]))) - 0.05 * w**2 * (1 + 0.05 / 0.12)) < 1.0


@pytest.mark.parametrize("joint", ["rod_slider", "crank_rod", "both"])
def test_slider_stays_within_clearance_of_ideal_motion(joint):
    # With a small clearance the slider may deviate from the ideal mechanism only by what the
    # journal offsets (clearance + penetration per joint) allow: a kinematic bound that fails
    # for wrong signs in the dynamics or the joint geometry.
    c = 2e-5
    n_j = 2 if joint == "both" else 1
    cfg = replace(CFG_24MS, clearance_joint=joint)  # rod_slider: CFG_24MS itself (shared compile)
    p = sc.benchmark_params(clearance=c, n_joints=n_j, restitution=0.5)
    r = _run(cfg, p)
    t = (np.arange(120) + 1) * 100 * 1e-6  # the first 12 ms (the run goes on to 24 ms)
    x_ideal = np.asarray(sc.ideal(p, t)["slider_position"])
    dev = np.abs(np.asarray(r.history["slider_position_m"])[:120] - x_ideal)
    pen = float(np.max(r.history["penetration_m"][:120]))
    assert bool(r.acc.finite)
    # An offset e of the journal moves the slider by at most |e|(1 + tan φ_max), tan φ_max = r/√(L² − r²).
    lever = 1 + 0.05 / np.sqrt(0.12**2 - 0.05**2)
    assert dev.max() <= 1.02 * n_j * (c + pen) * lever, (dev.max(), pen)
    assert dev.max() > 0.1 * c  # the clearance does show


@pytest.mark.slow  # two compiles (one and two clearance joints): ~8 s on 2 cores
def test_two_joints_raise_peaks_over_one():
    # Seed 001 (§3.2): a second clearance joint raises the peaks "considerably".  First 6 ms at
    # 5000 rpm, c = 0.25 mm: peak slider acceleration 2.60e5 (rod–slider joint alone) ->
    # 4.55e5 m/s² (both joints), ratio 1.75; the ideal mechanism's peak is 1.94e4 m/s².
    cfg1 = sc.Config(clearance_joint="rod_slider", dt=1e-6, n_saves=60, save_every=100, outputs=())
    cfg2 = sc.Config(clearance_joint="both", dt=1e-6, n_saves=60, save_every=100, outputs=())
    p1 = sc.benchmark_params(clearance=0.25e-3)
    r1 = _run(cfg1, p1)
    r2 = _run(cfg2, sc.benchmark_params(clearance=0.25e-3, n_joints=2))
    ideal, _ = sc.ideal_peaks(p1, 60 * 100 * 1e-6, 0.0)
    # both journals of the two-joint run fly and hit their bushings repeatedly
    assert int(r1.acc.impacts[0]) >= 5 and np.all(np.asarray(r2.acc.impacts) >= 5), (r1.acc.impacts, r2.acc.impacts)
    # impacts amplify: each peak far above the ideal one, and each joint's peak contact force
    # above that joint's ideal reaction [crank_rod, rod_slider]
    assert float(r1.acc.peak_acc) > 2 * float(ideal["slider_acceleration"])
    f2 = np.asarray(r2.acc.peak_force)
    assert f2[0] > float(ideal["reaction_crank_rod"]) and f2[1] > float(ideal["reaction_rod_slider"]), f2
    # the second joint raises the peak by a clear margin, and not by an order of magnitude
    ratio = float(r2.acc.peak_acc) / float(r1.acc.peak_acc)
    assert 1.3 < ratio < 2.5, ratio
    assert f2.max() > float(r1.acc.peak_force[0])


@pytest.mark.slow  # the point-profile joint's compile and the analytic one's: ~6 s on 2 cores
def test_point_profile_of_a_circle_matches_the_analytic_joint():
    # Xu (2015) point detection with sub-grid refinement on a circular bushing against the
    # analytic circle: same first-impact peak force to 1e-4.
    c = 0.5e-3
    cfg_a = sc.Config(dt=1e-6, n_saves=1, save_every=400, outputs=())
    cfg_p = sc.Config(
        dt=1e-6,
        n_saves=1,
        save_every=400,
        outputs=(),
        joint=joints.JointConfig(geometry="points", n_points=72, max_regions=4, refine=True),
    )
    ra = _run(cfg_a, sc.benchmark_params(clearance=c))
    rp = _run(cfg_p, sc.benchmark_params(clearance=c, points=profiles.circle(10e-3 + c, 72)))
    fa, fp = float(ra.acc.peak_force[0]), float(rp.acc.peak_force[0])
    assert abs(fp - fa) / fa < 1e-4
    assert int(ra.acc.impacts[0]) == int(rp.acc.impacts[0]) == 1


_vsim = jax.jit(jax.vmap(sc.simulate, in_axes=(None, 0)), static_argnums=0)


def test_vmap_equals_single_runs_and_nonfinite_is_isolated():
    cfg = CFG_24MS  # the single runs reuse the compile of the physics tests above
    cs = jnp.array([0.5e-3, 0.1e-3, 0.02e-3])
    es = jnp.array([0.9, jnp.nan, 0.8])  # the middle variant is poisoned
    pb = jax.vmap(lambda c, e: sc.benchmark_params(clearance=c, restitution=e))(cs, es)
    rb = _vsim(cfg, pb)
    assert list(np.asarray(rb.acc.finite)) == [True, False, True]
    for i in (0, 2):
        ri = _run(cfg, sc.benchmark_params(clearance=cs[i], restitution=es[i]))
        np.testing.assert_allclose(rb.acc.peak_force[i], ri.acc.peak_force, rtol=1e-12)
        np.testing.assert_allclose(
            rb.history["contact_force_N"][i], ri.history["contact_force_N"], rtol=1e-12, atol=1e-9
        )


# The first 300 steps (the first impact, t ≈ 0.23 ms) in three blocks; the plain gradient's
# compile serves both gradient tests.
CFG_GRAD = sc.Config(dt=1e-6, n_saves=3, save_every=100, outputs=("contact_force_N",))


def _first_peak(cfg, c):
    return sc.simulate(cfg, sc.benchmark_params(clearance=c)).acc.peak_force[0]


_first_peak_jit = jax.jit(_first_peak, static_argnums=0)
_first_peak_grad = jax.jit(jax.grad(_first_peak, argnums=1), static_argnums=0)


@pytest.mark.slow  # a reverse-mode compile and a forward one: ~6 s on 2 cores
def test_grad_through_contact_onset_is_finite_and_matches_fd():
    c0 = 0.5e-3
    g = _first_peak_grad(CFG_GRAD, c0)
    assert np.isfinite(float(g))
    h = 1e-9
    fd = (_first_peak_jit(CFG_GRAD, c0 + h) - _first_peak_jit(CFG_GRAD, c0 - h)) / (2 * h)
    assert abs(float(g) - float(fd)) / abs(float(fd)) < 1e-3


def test_float32_option_tracks_float64():
    cfg = CFG_24MS  # the float64 run reuses the shared compile
    p64 = sc.benchmark_params(clearance=0.25e-3)
    p32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), p64)
    r64, r32 = _run(cfg, p64), _run(cfg, p32)
    assert r32.q.slider.dtype == jnp.float32 and r32.acc.peak_force.dtype == jnp.float32
    # the peak contact force of the first 400 steps (the first impact): the maximum of the
    # first four block maxima, which see every step
    first = lambda r: float(np.max(np.asarray(r.history["contact_force_block_max_N"])[:4, 0]))
    assert r32.history["contact_force_block_max_N"].dtype == jnp.float32
    assert abs(first(r32) / first(r64) - 1) < 0.02


@pytest.mark.slow
def test_checkpointed_gradient_equals_plain():
    g0 = _first_peak_grad(CFG_GRAD, 0.5e-3)
    g1 = _first_peak_grad(replace(CFG_GRAD, checkpoint=True), 0.5e-3)
    assert np.isfinite(float(g0)) and float(g0) != 0.0
    np.testing.assert_allclose(float(g1), float(g0), rtol=1e-10)


def test_step_stages_are_named_in_the_lowered_hlo():
    """Every stage of a step (integrate.STAGES: kinematics, contact detection, contact laws,
    equations of motion, integrator update, metrics reduce, history save) is a
    jax.named_scope, so profiles and the HLO op names show where a step's time goes."""
    import re

    from jaxclear import integrate

    cfg = sc.Config(dt=1e-6, n_saves=1, save_every=2, outputs=("contact_force_N",))
    text = _sim.lower(cfg, sc.benchmark_params()).as_text(debug_info=True)
    for name in integrate.STAGES:
        assert re.search(r'loc\("(?:[^"]*/)?' + name + r'(?:/[^"]*)?"', text), name
    with pytest.raises(ValueError, match="kinematic"):
        integrate.stage("kinematic")
