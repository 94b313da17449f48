"""Physics checks of the Cartesian multibody fallback (jaxclear.multibody).

Slider-crank against closed-form kinematics, Baumgarte constraint-error dynamics against the exact
linear ODE, energy conservation of a double pendulum, Newton on the slider for the joint reactions,
power balance of the driver torque, jit/vmap consistency, point forces by virtual work.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (enables float64)
from jaxclear import multibody as mb

# ----------------------------------------------------------------------------- slider-crank

R, L = 0.05, 0.12  # crank, rod [m]
MASS = (0.30, 0.21, 0.14)  # crank, rod, slider [kg]
INERTIA = (1e-5, 2.5e-4, 1e-4)  # [kg m^2]
RPM = 5000.0
OMEGA = RPM * 2 * np.pi / 60  # [rad/s]
T_END = 2 * 2 * np.pi / OMEGA  # two revolutions [s]
DT = 5e-6  # RK4 step [s]; 4800 steps over two revolutions
N_STEPS = int(round(T_END / DT))


# attachment points as functions of the params (defined once: joints hash by identity)
def _crank_pivot(p):
    return (-p["r"] / 2, 0.0)


def _crank_pin(p):
    return (p["r"] / 2, 0.0)


def _rod_big_end(p):
    return (-p["l"] / 2, 0.0)


def _rod_small_end(p):
    return (p["l"] / 2, 0.0)


# bodies: 0 crank (CoM at r/2), 1 rod (CoM at l/2), 2 slider; ground -1
SLIDER_CRANK = mb.System(
    3,
    (
        mb.revolute(0, _crank_pivot, -1, (0.0, 0.0)),  # crank pivot at the origin
        mb.revolute(0, _crank_pin, 1, _rod_big_end),  # crank pin
        mb.revolute(1, _rod_small_end, 2, (0.0, 0.0)),  # rod–slider (gudgeon pin)
        mb.translational(2),  # slider on the global x axis: y = 0, φ = 0
        mb.driver(0, "omega"),  # crank angle φ_0 = ω t
    ),
)
J_ROD_SLIDER, J_GUIDE, J_DRIVER = 2, 3, 4


def sc_params(omega=OMEGA, alpha=1000.0, beta=1000.0):
    return mb.make_params(MASS, INERTIA, alpha=alpha, beta=beta, r=R, l=L, omega=omega)


def sc_guess():
    # top dead centre: crank along +x
    return jnp.array([R / 2, 0, 0, R + L / 2, 0, 0, R + L, 0, 0]) + 2e-3


_RK4_A = (0.0, 0.5, 0.5, 1.0)
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


def rk4_step(rhs, y, t, dt, p):
    """Classical RK4; the four stages run in a fori_loop so that rhs is traced (and compiled) once."""
    a, b = jnp.asarray(_RK4_A), jnp.asarray(_RK4_B)

    def stage(s, carry):
        k, acc = carry
        k = rhs(y + a[s] * dt * k, t + a[s] * dt, p)
        return k, acc + b[s] * k

    _, acc = jax.lax.fori_loop(0, 4, stage, (jnp.zeros_like(y), jnp.zeros_like(y)))
    return y + dt * acc


def make_sim(system, applied=None):
    rhs = mb.make_rhs(system, applied)

    def sim(y0, p, dt, n):
        def body(y, i):
            y1 = rk4_step(rhs, y, jnp.asarray(i, float) * dt, dt, p)  # t = i*dt, never accumulated
            return y1, y1

        _, ys = jax.lax.scan(body, y0, jnp.arange(n))
        return ys  # states at t = dt, 2dt, …, n dt

    return jax.jit(sim, static_argnames="n")


SC_SIM = make_sim(SLIDER_CRANK)
# jitted once per test session (System is hashable, hence a valid static argument)
CONSISTENT = jax.jit(mb.consistent_state, static_argnums=0)
OMEGAS = (OMEGA, 0.6 * OMEGA)  # the vmap batch: 5000 and 3000 rpm


def _sc_init(p):
    q, qd = CONSISTENT(SLIDER_CRANK, p, sc_guess())
    return jnp.concatenate([q, qd])


@jax.jit
def _sc_along(p, ys, ts):
    """Along a saved path: q̈, λ, reactions, Φ, energy."""

    def one(y, t):
        q, qd = y[:9], y[9:]
        qdd, lam = mb.solve_accelerations(SLIDER_CRANK, p, q, qd, t)
        reac = mb.joint_reaction(SLIDER_CRANK, p, q, lam, t)
        E = mb.kinetic_energy(SLIDER_CRANK, p, qd) + mb.potential_energy(SLIDER_CRANK, p, q)
        return qdd, lam, reac, mb.constraints(SLIDER_CRANK, p, q, t), E

    return jax.vmap(one)(ys, ts)


def closed_form(t, omega=OMEGA):
    """Slider x, ẋ, ẍ for θ = ωt: x = r cosθ + sqrt(l² − r² sin²θ)."""
    th = omega * t
    s, c = np.sin(th), np.cos(th)
    D = np.sqrt(L**2 - R**2 * s**2)
    x = R * c + D
    xd = omega * (-R * s - R**2 * s * c / D)
    xdd = omega**2 * (-R * c - R**2 * (c**2 - s**2) / D - R**4 * s**2 * c**2 / D**3)
    return x, xd, xdd


@pytest.fixture(scope="module")
def sc_batch():
    """Both crank speeds in one jit(vmap(scan)); only omega carries the variant axis."""
    p = sc_params()
    ps = dict(p, omega=jnp.asarray(OMEGAS))
    axes = {k: (0 if k == "omega" else None) for k in p}
    y0s = jax.vmap(_sc_init, in_axes=(axes,))(ps)
    run = jax.jit(jax.vmap(lambda y, pp: SC_SIM(y, pp, DT, n=N_STEPS), in_axes=(0, axes)))
    return y0s, np.asarray(run(y0s, ps))


@pytest.fixture(scope="module")
def sc_run(sc_batch):
    p = sc_params()
    ys = sc_batch[1][0]
    ts = DT * (np.arange(N_STEPS) + 1)
    qdd, lam, reac, phi, E = _sc_along(p, ys, ts)
    return dict(p=p, ys=ys, ts=ts, qdd=np.asarray(qdd), lam=lam, reac=reac, phi=np.asarray(phi), E=E)


def test_consistent_state_top_dead_centre():
    p = sc_params()
    q0, qd0 = CONSISTENT(SLIDER_CRANK, p, sc_guess())
    exact = np.array([R / 2, 0, 0, R + L / 2, 0, 0, R + L, 0, 0])
    np.testing.assert_allclose(q0, exact, atol=1e-14)
    # at TDC: crank pin moves +y at ωr, rod turns at −ωr/l, slider at rest
    vexp = np.array([0, OMEGA * R / 2, OMEGA, 0, OMEGA * R / 2, -OMEGA * R / L, 0, 0, 0])
    np.testing.assert_allclose(qd0, vexp, atol=1e-10)
    assert float(jnp.max(jnp.abs(mb.constraints(SLIDER_CRANK, p, q0, 0.0)))) < 1e-15


def test_slider_crank_matches_closed_form(sc_run):
    ys, ts = sc_run["ys"], sc_run["ts"]
    x, xd, xdd = closed_form(ts)
    err_x = np.max(np.abs(ys[:, 6] - x)) / np.max(np.abs(x))
    err_v = np.max(np.abs(ys[:, 15] - xd)) / np.max(np.abs(xd))
    err_a = np.max(np.abs(sc_run["qdd"][:, 6] - xdd)) / np.max(np.abs(xdd))
    # measured (dt = 5 µs, RK4, α = β = 1000/s): 1.3e-12 (x), 1.2e-11 (v), 2.5e-11 (a) of the peaks
    assert err_x < 1e-10, err_x
    assert err_v < 1e-10, err_v
    assert err_a < 1e-9, err_a
    # slider stays on its guide, crank follows the driver
    assert np.max(np.abs(ys[:, 7])) < 1e-11 and np.max(np.abs(ys[:, 8])) < 1e-11
    np.testing.assert_allclose(ys[:, 2], OMEGA * ts, rtol=0, atol=1e-10)
    # constraint drift over two revolutions (measured 1.3e-13)
    assert np.max(np.abs(sc_run["phi"])) < 1e-11


@pytest.mark.parametrize("alpha,beta", [(0.0, 0.0), (1000.0, 1000.0), (600.0, 1000.0)])
def test_baumgarte_error_dynamics(alpha, beta):
    """Start off the constraint manifold: the error obeys ë + 2αė + β²e = 0 exactly (Baumgarte 1972).

    α = β = 0: e = e₀ + ė₀ t (drift persists and grows); α = β: critically damped;
    α < β: underdamped with ω_d = sqrt(β² − α²).  A wrong factor or sign fails all three.
    """
    p = sc_params(alpha=alpha, beta=beta)
    y = _sc_init(p)
    rng = np.random.default_rng(0)
    y = y + np.concatenate([1e-4 * rng.standard_normal(9), 1e-2 * rng.standard_normal(9)])
    e0 = np.asarray(mb.constraints(SLIDER_CRANK, p, y[:9], 0.0))
    ed0 = np.asarray(mb._phi_dot(SLIDER_CRANK, p, y[:9], y[9:], 0.0))
    ys = SC_SIM(y, p, DT, n=N_STEPS)
    ts = DT * (np.arange(N_STEPS) + 1)
    e = np.asarray(_sc_along(p, ys, ts)[3])
    t = ts[:, None]
    if alpha == 0.0 and beta == 0.0:
        e_exact = e0 + ed0 * t
    elif alpha == beta:
        e_exact = (e0 + (ed0 + alpha * e0) * t) * np.exp(-alpha * t)
    else:
        wd = np.sqrt(beta**2 - alpha**2)
        e_exact = np.exp(-alpha * t) * (e0 * np.cos(wd * t) + (ed0 + alpha * e0) / wd * np.sin(wd * t))
    scale = np.max(np.abs(e0)) + np.max(np.abs(ed0)) * T_END
    assert np.max(np.abs(e - e_exact)) < 1e-6 * scale
    if alpha > 0:
        assert np.max(np.abs(e[-1])) < 1e-5 * scale  # decayed by e^{-α T} < 1e-6
    else:
        # no correction without Baumgarte: the velocity error makes the position error grow
        assert np.max(np.abs(e[-1])) > 2 * np.max(np.abs(e0))


def test_slider_joint_reactions(sc_run):
    reac, ts = sc_run["reac"], sc_run["ts"]
    m_s = MASS[2]
    _, _, xdd = closed_form(ts)
    scale = m_s * np.max(np.abs(xdd))
    # Newton on the slider along x: the guide carries no x force, so force of slider on rod = −m ẍ
    F_rod = np.asarray(reac.force_i[:, J_ROD_SLIDER])
    F_on_slider = np.asarray(reac.force_j[:, J_ROD_SLIDER])
    np.testing.assert_allclose(F_rod[:, 0], -m_s * xdd, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(F_on_slider, -F_rod, rtol=0, atol=1e-12 * scale)
    # along y: guide normal force + joint force + gravity = m ÿ = 0
    F_guide = np.asarray(reac.force_i[:, J_GUIDE])
    assert np.max(np.abs(F_guide[:, 0])) < 1e-12 * scale
    np.testing.assert_allclose(F_guide[:, 1], m_s * 9.81 + F_rod[:, 1], rtol=0, atol=1e-9 * scale)
    # the rod's force is not trivial (0.14 kg × ~2e4 m/s² ~ 3 kN) and has a y part from the rod angle
    assert scale > 1e3 and np.max(np.abs(F_rod[:, 1])) > 0.1 * scale


def test_driver_torque_power_balance(sc_run):
    """Driving torque × ω = d(T + V)/dt: the only non-conservative power in the ideal mechanism."""
    p, ys, qdd = sc_run["p"], sc_run["ys"], sc_run["qdd"]
    tau = np.asarray(sc_run["reac"].moment_i[:, J_DRIVER])
    Mdiag = np.ravel(np.column_stack([MASS, MASS, INERTIA]))
    qd = ys[:, 9:]
    Qg = np.asarray(mb.gravity_force(SLIDER_CRANK, p))
    dE = np.sum(Mdiag * qd * qdd, axis=1) - qd @ Qg
    np.testing.assert_allclose(tau * OMEGA, dE, rtol=0, atol=1e-9 * np.max(np.abs(dE)))
    # and the energy itself: E(t) − E(t₁) = ∫ τ ω dt (trapezoid on the 5 µs grid, O(dt²))
    E = np.asarray(sc_run["E"])
    work = np.concatenate([[0.0], np.cumsum(0.5 * (tau[1:] + tau[:-1]) * OMEGA * DT)])
    np.testing.assert_allclose(E - E[0], work, rtol=0, atol=1e-4 * np.max(np.abs(E - E[0])))


def test_jit_vmap_two_crank_speeds(sc_batch, sc_run):
    """jit(vmap) over two crank speeds equals two separate jit runs."""
    y0s, batched = sc_batch
    for k, w in enumerate(OMEGAS):
        p = sc_params(omega=w)
        y0 = _sc_init(p)
        np.testing.assert_allclose(y0s[k], y0, rtol=1e-14, atol=1e-14)
        single = np.asarray(SC_SIM(y0, p, DT, n=N_STEPS))
        np.testing.assert_allclose(batched[k], single, rtol=1e-12, atol=1e-12)
        # each run is its own kinematics, not a copy
        x, _, _ = closed_form(sc_run["ts"], w)
        assert np.max(np.abs(single[:, 6] - x)) < 1e-10
    assert np.max(np.abs(batched[0, :, 6] - batched[1, :, 6])) > 1e-3


# ----------------------------------------------------------------------------- double pendulum

L1, L2 = 1.0, 0.7
M1, M2 = 1.0, 0.5


def _dp_system():
    return mb.System(
        2,
        (
            mb.revolute(0, (-L1 / 2, 0.0), -1, (0.0, 0.0)),
            mb.revolute(1, (-L2 / 2, 0.0), 0, (L1 / 2, 0.0)),
        ),
    )


def test_double_pendulum_energy():
    """Undriven, gravity only: total energy constant (RK4, dt = 1 ms, 5 s of chaotic motion)."""
    system = _dp_system()
    p = mb.make_params([M1, M2], [M1 * L1**2 / 12, M2 * L2**2 / 12], alpha=5.0, beta=5.0)
    th1, th2 = 2.0, 0.5  # from +x, large swing
    guess = (
        jnp.array(
            [
                L1 / 2 * np.cos(th1),
                L1 / 2 * np.sin(th1),
                th1,
                L1 * np.cos(th1) + L2 / 2 * np.cos(th2),
                L1 * np.sin(th1) + L2 / 2 * np.sin(th2),
                th2,
            ]
        )
        + 1e-3
    )
    q0, qd0 = CONSISTENT(system, p, guess, 0.0, jnp.array([0, 0, 1.0, 0, 0, -2.0]))
    assert float(jnp.max(jnp.abs(mb._phi_dot(system, p, q0, qd0, 0.0)))) < 1e-13
    sim = make_sim(system)
    dt, n = 1e-3, 5000
    ys = sim(jnp.concatenate([q0, qd0]), p, dt, n=n)
    energy = jax.jit(jax.vmap(lambda y: mb.kinetic_energy(system, p, y[6:]) + mb.potential_energy(system, p, y[:6])))
    E0 = float(energy(jnp.concatenate([q0, qd0])[None])[0])
    E = np.asarray(energy(ys))
    scale = (M1 + M2) * 9.81 * (L1 + L2)  # ~25 J
    drift = np.max(np.abs(E - E0)) / scale
    assert drift < 1e-6, drift  # measured 2.2e-8 (9e-8 with α = β = 0)
    assert np.ptp(ys[:, 5]) > 3.0  # the second link really swings
    drift_c = jax.jit(jax.vmap(lambda y: jnp.max(jnp.abs(mb.constraints(system, p, y[:6])))))(ys)
    assert float(jnp.max(drift_c)) < 1e-7  # measured 6e-9 (3e-7 with α = β = 0)


# ----------------------------------------------------------------------------- small pieces


def test_driver_motion_ramp_exact():
    w, Tr, phi0 = 300.0, 0.02, 0.3
    t = jnp.linspace(0.0, 0.05, 101)
    phi, phid, phidd = jax.jit(jax.vmap(lambda tt: mb.driver_motion(tt, w, Tr, phi0)))(t)
    tn = np.asarray(t)
    ramp = tn < Tr
    np.testing.assert_allclose(phi, np.where(ramp, phi0 + 0.5 * w * tn**2 / Tr, phi0 + w * (tn - Tr / 2)))
    np.testing.assert_allclose(phid, np.where(ramp, w * tn / Tr, w))
    np.testing.assert_allclose(phidd, np.where(ramp, w / Tr, 0.0))
    # continuity at t_ramp, and autodiff of φ (what γ uses) reproduces φ̇, φ̈
    a, b = mb.driver_motion(Tr * (1 - 1e-12), w, Tr, phi0), mb.driver_motion(Tr, w, Tr, phi0)
    assert abs(a[0] - b[0]) < 1e-9 and abs(a[1] - b[1]) < 1e-6
    f = lambda tt: mb.driver_motion(tt, w, Tr, phi0)[0]  # noqa: E731
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.grad(f)))(t), phid, rtol=1e-13)
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.grad(jax.grad(f))))(t), phidd, rtol=1e-13)
    # through the constraint machinery: a driven free body has φ̈ = φ̈_driver (γ of the driver row)
    one = mb.System(1, (mb.driver(0, "w", "tr", phi0),))
    p = mb.make_params([1.0], [2.0], w=w, tr=Tr)

    @jax.jit
    def acc(tt):
        ph, phd, _ = mb.driver_motion(tt, w, Tr, phi0)
        q, qd = jnp.array([0.0, 0.0, ph]), jnp.array([0.0, 0.0, phd])
        qdd, lam = mb.solve_accelerations(one, p, q, qd, tt)
        return qdd[2], mb.joint_reaction(one, p, q, lam, tt).moment_i[0]

    for tt in (0.3 * Tr, 2 * Tr):
        a_phi, torque = acc(tt)
        exact = w / Tr if tt < Tr else 0.0
        np.testing.assert_allclose(a_phi, exact, rtol=0, atol=1e-9)
        np.testing.assert_allclose(torque, 2.0 * exact, rtol=0, atol=1e-9)  # τ = J φ̈
    # no ramp: φ = φ0 + ω t, finite gradient w.r.t. t_ramp at 0
    np.testing.assert_allclose(mb.driver_motion(0.01, w)[0], w * 0.01)
    assert np.isfinite(jax.grad(lambda tr: mb.driver_motion(0.01, w, tr)[0])(0.0))


def test_point_force_virtual_work():
    """Q = (∂r_P/∂q)ᵀ F (virtual work), and a free body obeys Newton–Euler."""
    q = jnp.array([0.1, -0.2, 0.7, 1.0, 2.0, -1.3])
    s, F = jnp.array([0.3, -0.05]), jnp.array([2.0, -5.0])
    Q = mb.point_force(q, 1, s, F)
    Jp = jax.jit(jax.jacfwd(lambda qq: mb.point_position(qq, 1, s)))(q)  # one compile, not op by op
    np.testing.assert_allclose(Q, Jp.T @ F, atol=1e-14)
    assert np.all(np.asarray(Q[:3]) == 0)
    np.testing.assert_allclose(mb.point_force(q, -1, s, F), 0.0)
    # point velocity = Jacobian × q̇
    qd = jnp.array([0.3, 0.1, -2.0, 0.5, -0.4, 3.0])
    np.testing.assert_allclose(mb.point_velocity(q, qd, 1, s), Jp @ qd, atol=1e-14)
    # free body, no joints: q̈ = M⁻¹(Q + Q_grav)
    free = mb.System(2, ())
    p = mb.make_params([2.0, 3.0], [0.1, 0.2])
    qdd, lam = jax.jit(mb.solve_accelerations, static_argnums=0)(free, p, q, qd, 0.0, Q)
    assert lam.shape == (0,)
    arm = np.asarray(mb.point_position(q, 1, s) - q[3:5])
    np.testing.assert_allclose(qdd[3:5], np.asarray(F) / 3.0 + np.array([0, -9.81]), atol=1e-13)
    np.testing.assert_allclose(qdd[5], (arm[0] * F[1] - arm[1] * F[0]) / 0.2, atol=1e-13)
    np.testing.assert_allclose(qdd[:3], [0.0, -9.81, 0.0], atol=1e-14)


def test_translational_on_moving_body():
    """A slider on a rotating arm: Φ₂ is the offset from the arm's axis, Φ₁ the locked relative angle."""
    system = mb.System(2, (mb.translational(1, 0, axis=(2.0, 0.0), s_j=(0.0, 0.1), phi0=0.2),))
    p = mb.make_params([1.0, 1.0], [1.0, 1.0])
    phi_arm = 0.4
    u = np.array([np.cos(phi_arm), np.sin(phi_arm)])
    n = np.array([-u[1], u[0]])
    base = np.array([1.0, 2.0]) + 0.1 * n
    r_s = base + 0.37 * u + 0.01 * n  # 1 cm off the line
    q = jnp.array([1.0, 2.0, phi_arm, r_s[0], r_s[1], phi_arm + 0.25])
    Phi = mb.constraints(system, p, q)
    np.testing.assert_allclose(Phi, [0.05, 0.01], atol=1e-14)


def test_system_hashable_and_validated():
    assert hash(SLIDER_CRANK) == hash(mb.System(3, list(SLIDER_CRANK.joints)))
    assert SLIDER_CRANK.nq == 9 and SLIDER_CRANK.n_constraints == 9
    with pytest.raises(ValueError):
        mb.System(1, (mb.revolute(0, (0.0, 0.0), 1, (0.0, 0.0)),))
