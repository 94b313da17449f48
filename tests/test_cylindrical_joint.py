"""The 3D cylindrical clearance joint (jaxclear.cylindrical_joint, after Virlez et al. 2013):
geometry against brute force, energy and restitution of impacts, the tilt limit, the planar
joint as its parallel special case, vmap and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import cylindrical_joint as cj
from jaxclear import integrate, joints, metrics
from jaxclear import rigid3d as r3
from jaxclear._math import cross2

jax.config.update("jax_enable_x64", True)

# one compile of the joint geometry for the random poses (op by op it dispatches every primitive)
_geometry = jax.jit(cj.geometry)

MASS = jnp.array([0.1])
INERTIA = jnp.array([[2e-5, 2e-5, 1e-5]])


def _rot(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def test_penetration_matches_brute_force_on_random_poses():
    """δ of the end spheres (max over sphere points of the distance from the hole axis − R_A) and
    of the end-face rims (max axial reach − face position), by dense sampling, on random poses
    of both bodies with a misaligned hole axis."""
    rng = np.random.default_rng(0)
    # sphere directions (Fibonacci) and rim angles
    k = np.arange(40000) + 0.5
    phi, cth = np.pi * (1 + 5**0.5) * k, 1 - 2 * k / k.size
    sph = np.stack([np.cos(phi) * np.sqrt(1 - cth**2), np.sin(phi) * np.sqrt(1 - cth**2), cth], -1)
    ang = np.linspace(0, 2 * np.pi, 20000, endpoint=False)
    for trial in range(12):
        ax = np.asarray(cj.misaligned_axis(*rng.uniform(-0.05, 0.05, 2)))
        p = cj.reference_params(
            axis_a=ax,
            centre_a=rng.normal(size=3) * 1e-3,
            centre_b=rng.normal(size=3) * 1e-3,
            clearance=rng.uniform(20e-6, 200e-6),
            face_smoothing=0.0,
        )
        qa = _rot(rng)
        Ra = np.asarray(r3.quat_to_matrix(qa))
        xa = rng.normal(size=3) * 1e-2
        a, ca = Ra @ ax, xa + Ra @ np.asarray(p.centre_a)
        # put the pin near the hole: its axis within a few degrees of a, centre within ~2c of C_A
        tilt = rng.uniform(0, 0.01) * rng.normal(size=3)
        Rb = np.asarray(r3.quat_to_matrix(r3.quat_exp(jnp.asarray(tilt)))) @ _frame_with_z(a)
        xb = ca + rng.normal(size=3) * float(p.clearance) - Rb @ np.asarray(p.centre_b)
        kin = cj.Kinematics(
            jnp.asarray(xa), jnp.asarray(Ra), *[jnp.zeros(3)] * 2, jnp.asarray(xb), jnp.asarray(Rb), *[jnp.zeros(3)] * 2
        )
        depth = np.asarray(_geometry(p, kin)[0])
        b, cb = Rb @ np.asarray(p.axis_b), xb + Rb @ np.asarray(p.centre_b)
        R_B, L, g = float(p.pin_radius), float(p.length), float(p.axial_gap)
        R_A = R_B + float(p.clearance)
        for j, s in enumerate((1.0, -1.0)):
            E = cb + s * 0.5 * L * b
            r_of = lambda dirs: np.linalg.norm((E + R_B * dirs - ca) - np.outer((E + R_B * dirs - ca) @ a, a), axis=1)
            u = sph[np.argmax(r_of(sph))]  # coarse best direction, then two finer grids around it
            for half_width in (0.2, 0.003):  # wide: the maximum is flat along the hole's circle
                t1 = np.cross(u, [0.3, 0.5, 0.8])
                t1 /= np.linalg.norm(t1)
                t2 = np.cross(u, t1)
                gx, gy = np.meshgrid(*2 * [np.linspace(-half_width, half_width, 301)])
                fine = u + gx.reshape(-1, 1) * t1 + gy.reshape(-1, 1) * t2
                fine /= np.linalg.norm(fine, axis=1, keepdims=True)
                u = fine[np.argmax(r_of(fine))]
            assert abs(depth[j] - (r_of(fine).max() - R_A)) < 2e-10, (trial, j)
            e1 = np.cross(b, [1.0, 0, 0])
            e1 /= np.linalg.norm(e1)
            e2 = np.cross(b, e1)
            rim = E + R_B * (np.outer(np.cos(ang), e1) + np.outer(np.sin(ang), e2))
            reach = s * ((rim - ca) @ a)
            assert abs(depth[2 + j] - (reach.max() - 0.5 * (L + g))) < 2e-9, (trial, j)


def _frame_with_z(a):
    """A rotation matrix whose third column is a."""
    e1 = np.cross(a, [0.0, 1.0, 0.0])
    e1 /= np.linalg.norm(e1)
    return np.stack([e1, np.cross(a, e1), a], axis=1)


def _pin_run(
    cfg, p, x0, w0, v0, dt, n, quat0=(1.0, 0, 0, 0), external=None, reduce=None, acc0=None, save=None, save_every=1
):
    loads = cj.fixed_housing_loads(cfg, lambda pp: pp, external)
    step = r3.make_step("verlet_predicted", MASS, INERTIA, loads, dt)
    q0 = r3.Pose(jnp.asarray([x0], float), jnp.asarray([quat0], float))
    v0 = r3.Twist(jnp.asarray([v0], float), jnp.asarray([w0], float))
    s0 = r3.initial_state(r3.make_accel(MASS, INERTIA, loads), p, q0, v0, cj.initial_memory(cfg))
    return r3.run(step, p, s0, n, save_every=save_every, reduce=reduce, acc0=acc0, save=save), s0


@jax.jit
def _energy_run(dt, n):
    """(max |E/E0 − 1| over the steps, Lz/Lz0 − 1 at the end, impacts) of the first n steps at
    step dt of the spinning, tilting pin (Hertz, no friction).  dt and n are traced: every run
    scans 4000 steps with the state frozen after step n and the reductions masked there, so one
    compile serves both steps (the first n steps are those of a run of n)."""
    cfg = cj.Config("hertz", "none", True)
    p = cj.reference_params(axial_gap=40e-6)
    K = jnp.stack([p.stiffness, p.stiffness, p.axial_stiffness, p.axial_stiffness])
    loads = cj.fixed_housing_loads(cfg, lambda pp: pp)
    step = r3.make_step("verlet_predicted", MASS, INERTIA, loads, dt)
    q0 = r3.Pose(jnp.zeros((1, 3)), jnp.array([[1.0, 0, 0, 0]]))
    v0 = r3.Twist(jnp.array([[0.3, 0.1, 0.05]]), jnp.array([[30.0, -20.0, 300.0]]))
    E0 = r3.kinetic_energy(MASS, INERTIA, v0)
    s0 = r3.initial_state(r3.make_accel(MASS, INERTIA, loads), p, q0, v0, cj.initial_memory(cfg))

    def step_e(pp, s, i):  # the step's output: (joint force, energy after the step, live)
        s1, o = step(pp, s, i)
        live = i < n
        s1 = jax.tree_util.tree_map(lambda a, b: jnp.where(live, a, b), s1, s)
        return s1, (o[0], r3.kinetic_energy(MASS, INERTIA, s1.v) + jnp.sum(K / 2.5 * o[0].depth ** 2.5), live)

    def red(acc, o, i):
        imp = acc[0] + jnp.where(o[2], o[0].new_impacts, 0)
        return imp, jnp.maximum(acc[1], jnp.where(o[2], jnp.abs(o[1] / E0 - 1), 0.0))

    s, (imp, err), _ = r3.run(step_e, p, s0, 4000, reduce=red, acc0=(jnp.zeros((), jnp.int32), jnp.zeros(())))
    Lz0 = r3.angular_momentum(MASS, INERTIA, s0.q, s0.v)[2]
    Lz1 = r3.angular_momentum(MASS, INERTIA, s.q, s.v)[2]
    return err, Lz1 / Lz0 - 1, imp


def test_frictionless_elastic_impacts_conserve_energy():
    """Hertz law, no friction: a spinning, tilting pin bouncing radially and axially keeps its
    energy (kinetic + Σ K δ^(n+1)/(n+1)) to O(dt²) over every step (halving dt divides the worst
    error by ≥ 3) and its angular momentum about the hole axis (every normal force passes
    through the axis or is parallel to it)."""
    out = [tuple(float(x) for x in _energy_run(dt, int(round(2e-3 / dt)))) for dt in (1e-6, 0.5e-6)]
    out = [(e, lz, int(n)) for e, lz, n in out]
    (e1, l1, n1), (e2, l2, n2) = out
    assert n1 >= 20 and n2 >= 20  # many impacts, radial and axial
    assert e1 < 1e-3 and e2 < e1 / 3, (e1, e2)
    assert abs(l1) < 1e-6 and abs(l2) < 1e-6, (l1, l2)


@pytest.mark.parametrize(
    "law,e,tol",
    [("flores", 0.9, 0.015), ("hu_guo", 0.7, 0.02), ("gonthier", 0.5, 0.04), ("lankarani_nikravesh", 0.95, 0.015)],
)
def test_hysteresis_laws_give_their_restitution(law, e, tol):
    """A parallel pin hitting the wall with both ends leaves it at e times its impact speed
    (to the accuracy tests/test_laws.py measures for each law in a single impact)."""
    cfg = cj.Config(law, "none", False)
    p = cj.reference_params(restitution=e)
    v_in = 0.2
    x0 = (float(p.clearance) - 1e-6, 0, 0)
    (s, _, _), _ = jax.jit(lambda: _pin_run(cfg, p, x0, (0, 0, 0), (v_in, 0, 0), 2e-8, 10000))()  # one program
    assert float(s.q.x[0, 0]) < float(p.clearance)  # left the wall
    e_eff = -float(s.v.v[0, 0]) / v_in
    assert abs(e_eff - e) < tol, e_eff


def test_steady_tilting_moment_rests_at_the_geometric_tilt_limit():
    """A moment M about y tilts the pin until its ends touch opposite sides: sin θ = 2(c + δ)/L,
    δ = (F/K)^(1/n) the static penetration under F = M/(L cos θ)."""
    cfg = cj.Config("flores", "coulomb", True)
    p = cj.reference_params(restitution=0.3)
    M = 5.0
    ext = lambda pp, q, v, t: (jnp.zeros(3), jnp.array([0.0, M, 0.0]))
    (s, _, _), _ = jax.jit(lambda: _pin_run(cfg, p, (0, 0, 0), (0, 0, 0), (0, 0, 0), 1e-6, 20000, external=ext))()
    b = np.asarray(r3.quat_to_matrix(s.q.quat[0]))[:, 2]
    theta = np.arctan2(np.hypot(b[0], b[1]), b[2])
    c, L, K = float(p.clearance), float(p.length), float(p.stiffness)
    th = np.arcsin(2 * c / L)
    for _ in range(3):  # fixed point of θ and δ(θ)
        delta = (M / (L * np.cos(th)) / K) ** (1 / 1.5)
        th = np.arcsin(2 * (c + delta) / L)
    assert abs(theta / th - 1) < 2e-3, (theta, th)
    assert np.linalg.norm(np.asarray(s.v.w[0])) < 1e-3  # at rest
    assert abs(theta / np.arcsin(2 * c / L) - 1) > 2e-3  # the penetration term matters at this load


@pytest.mark.slow  # the 3D pin's and the planar joint's compiles: ~6 s on 2 cores
def test_parallel_pin_reproduces_the_planar_clearance_joint():
    """A pin parallel to the hole axis moving in the plane (spin about its axis, friction) is the
    planar circular clearance joint with twice the stiffness (two ends in contact), with the
    planar joint's rule for the impact velocity (captured at onset)."""
    p3 = cj.reference_params(restitution=0.7, friction_coefficient=0.15)
    cfg3 = cj.Config("lankarani_nikravesh", "coulomb", True, impact_velocity="onset")
    dt, n = 5e-7, 2000
    save = lambda o: o[0].force_b
    (s3, _, f3), _ = jax.jit(
        lambda: _pin_run(cfg3, p3, (0, 0, 0), (0, 0, 200.0), (0.25, 0.1, 0.0), dt, n, save=save, save_every=10)
    )()
    jcfg = joints.JointConfig("circle", normal_law="lankarani_nikravesh", friction="coulomb")
    jp = joints.JointParams(
        p3.pin_radius,
        p3.clearance,
        jnp.zeros((1, 2)),
        2 * p3.stiffness,
        p3.exponent,
        p3.restitution,
        p3.damping,
        p3.friction_coefficient,
        p3.v0,
        p3.v1,
    )
    m, Iz = float(MASS[0]), float(INERTIA[0, 2])

    def accel(pp, q, v, mem, t):
        kin = joints.JointKinematics(q[:2], v[:2], v[2], jnp.zeros(2), jnp.zeros(2), jnp.array([1.0, 0.0]), 0.0)
        f, mem = joints.evaluate(jcfg, jp, kin, mem)
        tau = jnp.sum(cross2(f.p_j - q[:2], f.f_slots))
        return jnp.concatenate([f.force / m, (tau / Iz)[None]]), mem, f.force

    step = integrate.make_step("verlet_predicted", accel, None, dt)
    q0, v0 = jnp.zeros(3), jnp.array([0.25, 0.1, 200.0])
    a0, _, _ = accel(None, q0, v0, joints.initial_memory(jcfg), 0.0)
    s2, _, f2 = jax.jit(
        lambda: integrate.simulate(
            step,
            None,
            integrate.State(q0, v0, a0, joints.initial_memory(jcfg)),
            jnp.zeros(()),
            lambda a, o, i: a,
            n // 10,
            10,
            save=lambda o: o,
        )
    )()
    assert float(jnp.max(jnp.linalg.norm(f2, axis=-1))) > 100.0  # impacts happened
    np.testing.assert_allclose(np.asarray(f3[:, :2]), np.asarray(f2), atol=1e-6 * float(jnp.max(jnp.abs(f2))))
    np.testing.assert_allclose(np.asarray(s3.q.x[0, :2]), np.asarray(s2.q[:2]), atol=1e-11)
    np.testing.assert_allclose(float(s3.v.w[0, 2]), float(s2.v[2]), rtol=1e-9)
    assert float(jnp.max(jnp.abs(s3.v.w[0, :2]))) < 1e-9 and abs(float(s3.q.x[0, 2])) < 1e-15  # stayed parallel


@pytest.mark.slow  # two compiles (fixed and moving housing): ~6 s on 2 cores
def test_prescribed_housing_motion_is_galilean():
    """A housing in uniform translation (prescribed through the joint's kinematics) with the pin
    given the same extra velocity: the same contact forces and relative motion as at rest."""
    cfg = cj.Config("flores", "coulomb", True)
    p = cj.reference_params(axis_a=cj.misaligned_axis(0.0, 1e-3))
    V = jnp.array([0.7, -0.4, 0.3])
    moving = lambda pp, t: (V * t, jnp.eye(3), V, jnp.zeros(3))
    runs = []
    for housing, v_extra in ((None, jnp.zeros(3)), (moving, V)):
        loads = cj.housing_loads(cfg, lambda pp: pp, housing)
        step = r3.make_step("verlet_predicted", MASS, INERTIA, loads, 1e-6)
        q0 = r3.Pose(jnp.zeros((1, 3)), jnp.array([[1.0, 0, 0, 0]]))
        v0 = r3.Twist((jnp.array([0.25, 0.1, 0.05]) + v_extra)[None], jnp.array([[20.0, -10.0, 100.0]]))
        s0 = r3.initial_state(r3.make_accel(MASS, INERTIA, loads), p, q0, v0, cj.initial_memory(cfg))
        s, _, f = jax.jit(lambda: r3.run(step, p, s0, 1500, save_every=10, save=lambda o: o[0].normal_force))()
        runs.append((s, f))
    (s1, f1), (s2, f2) = runs
    assert float(jnp.max(f1)) > 100.0
    np.testing.assert_allclose(np.asarray(f2), np.asarray(f1), atol=1e-6 * float(jnp.max(f1)))
    np.testing.assert_allclose(np.asarray(s2.q.x[0] - V * 1.5e-3), np.asarray(s1.q.x[0]), atol=1e-12)
    np.testing.assert_allclose(np.asarray(s2.v.w), np.asarray(s1.v.w), rtol=1e-8, atol=1e-8)


def _smooth_peak_run(clearance, misalign, n=200, dt=1e-6):
    cfg = cj.Config("flores", "coulomb", True)
    p = cj.reference_params(clearance=clearance, axis_a=cj.misaligned_axis(0.0, misalign))

    def red(acc, o, i):
        f = o[0]
        return metrics.update(
            acc,
            f.normal_force,
            jnp.zeros(()),
            f.active,
            f.started.astype(jnp.int32),
            f.active.astype(jnp.int32),
            jnp.ones((), bool),
            10,
        )

    (s, acc, _), _ = _pin_run(
        cfg, p, (30e-6, 0, 0), (0, 0, 50.0), (0.2, 0.05, 0.0), dt, n, reduce=red, acc0=metrics.init(4)
    )
    u = metrics.unpack(acc)
    return metrics.smooth_peak(u.lse_force, u.steps), jnp.max(u.peak_force)


# (smooth peak, peak) of one run of 200 steps: the vmap test's single runs and the slow gradient
# test's finite differences (one compile)
_smooth_peak = jax.jit(_smooth_peak_run)


@pytest.mark.slow  # the batched and the single compile: ~6 s on 2 cores (the gradient test reuses the single)
def test_vmap_equals_single_runs():
    cs = jnp.array([30e-6, 50e-6, 80e-6])
    ms = jnp.array([0.0, 1e-3, -2e-3])
    f = _smooth_peak
    batched = jax.jit(jax.vmap(_smooth_peak_run))(cs, ms)
    for i in range(3):
        single = f(cs[i], ms[i])
        np.testing.assert_allclose([float(x) for x in single], [float(batched[0][i]), float(batched[1][i])], rtol=1e-12)


@pytest.mark.slow
def test_gradient_of_the_smooth_peak_matches_finite_differences():
    """d(smooth peak contact force)/d(clearance, misalignment) by autodiff through the run vs
    central differences (the first impact of a tilted-axis pin)."""
    f = lambda th: _smooth_peak(th[0], th[1])[0]
    th = jnp.array([50e-6, 1.5e-3])
    peak, g = jax.jit(jax.value_and_grad(lambda th: _smooth_peak_run(th[0], th[1])[0]))(th)
    peak = float(peak)
    assert peak > 100.0
    # the smooth peak over discrete steps ripples when a parameter shifts the impact against the
    # step grid (relative 1e-3 of the misalignment already does): steps well below that
    for k, h in ((0, 1e-11), (1, 1e-8)):
        e = jnp.zeros(2).at[k].set(h)
        fd = (float(f(th + e)) - float(f(th - e))) / (2 * h)
        assert abs(float(g[k]) - fd) < 1e-3 * abs(fd) + 1e-9 * peak / h, (k, float(g[k]), fd)
        assert abs(float(g[k]) * float(th[k])) > 1e-3 * peak  # a real sensitivity (elasticity > 1e-3)
