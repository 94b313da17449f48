"""3D rigid bodies (jaxclear.rigid3d): torque-free invariants, the precession of an axisymmetric
body, the order of the Lie-group verlet step, gravity and external torques."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import rigid3d as r3

jax.config.update("jax_enable_x64", True)

MASS = jnp.array([2.0])


def _no_loads(p, q, v, aux, t):
    return jnp.zeros((1, 3)), jnp.zeros((1, 3)), aux, None


@functools.partial(jax.jit, static_argnums=0)
def _free_run(scheme, inertia, w0, quat0, dt, n):
    # dt, the step count and the body traced: one compile per scheme serves every run of the module
    step = r3.make_step(scheme, MASS, inertia, _no_loads, dt)
    q0 = r3.Pose(jnp.zeros((1, 3)), r3.quat_normalize(quat0))
    v0 = r3.Twist(jnp.array([[0.1, 0.0, -0.2]]), w0)
    s0 = r3.initial_state(r3.make_accel(MASS, inertia, _no_loads), None, q0, v0, jnp.zeros(()))
    return jax.lax.fori_loop(0, n, lambda i, s: step(None, s, i)[0], s0)


def _free(inertia, w0, dt, t_end, scheme="verlet_predicted", quat0=(1.0, 0.0, 0.0, 0.0)):
    """Torque-free body from the origin: final (Pose, Twist) after t_end."""
    inertia = jnp.asarray([inertia], float)
    n = int(round(t_end / dt))
    s = _free_run(scheme, inertia, jnp.asarray([w0], float), jnp.asarray([quat0], float), jnp.asarray(dt), n)
    return s, inertia


def test_torque_free_body_conserves_energy_and_angular_momentum():
    inertia, w0 = (1.0, 2.0, 3.0), (1.0, 0.2, 2.0)  # spin near the stable major axis, tumbling
    s, I = _free(inertia, w0, 1e-3, 20.0, quat0=(0.9, 0.1, -0.3, 0.2))
    q0 = r3.Pose(jnp.zeros((1, 3)), r3.quat_normalize(jnp.array([[0.9, 0.1, -0.3, 0.2]])))
    v0 = r3.Twist(jnp.array([[0.1, 0.0, -0.2]]), jnp.array([w0]))
    E0, E1 = r3.kinetic_energy(MASS, I, v0), r3.kinetic_energy(MASS, I, s.v)
    L0, L1 = r3.angular_momentum(MASS, I, q0, v0), r3.angular_momentum(MASS, I, s.q, s.v)
    tol = 2 * (np.linalg.norm(w0) * 1e-3) ** 2  # second-order bounded error, no secular drift
    assert abs(float(E1 / E0) - 1) < tol
    assert float(jnp.linalg.norm(L1 - L0) / jnp.linalg.norm(L0)) < tol
    assert abs(float(jnp.linalg.norm(s.q.quat)) - 1.0) < 1e-14  # renormalised every step
    np.testing.assert_allclose(s.q.x[0], 20.0 * np.array([0.1, 0.0, -0.2]), rtol=1e-12)
    # the body did tumble: ω changed direction in the body frame
    assert float(jnp.linalg.norm(s.v.w[0] - jnp.array(w0))) > 0.1


def test_axisymmetric_body_precesses_at_the_analytic_rate():
    """I₁ = I₂ = I_t: body-frame ω_⊥ turns about e₃ at Ω_b = (I₃ − I_t) ω₃ / I_t (Goldstein §5.6); the symmetry
    axis turns about L in space at Ω_s = |L| / I_t."""
    It, I3, w0 = 1.0, 0.4, np.array([0.5, 0.0, 3.0])
    t_end = 2.0
    s, I = _free((It, It, I3), w0, 5e-4, t_end)
    wb = np.asarray(s.v.w[0])
    om_b = (I3 - It) * w0[2] / It
    expect = np.array([w0[0] * np.cos(om_b * t_end), w0[0] * np.sin(om_b * t_end), w0[2]])
    np.testing.assert_allclose(wb, expect, atol=2e-5)
    # space precession of the symmetry axis about L (L = I ω0 in world, body = world at t = 0)
    L = np.array([It * w0[0], 0.0, I3 * w0[2]])
    Lh = L / np.linalg.norm(L)
    e3 = np.asarray(r3.quat_to_matrix(s.q.quat[0]))[:, 2]
    perp0 = np.array([0, 0, 1.0]) - Lh * Lh[2]
    perp1 = e3 - Lh * (Lh @ e3)
    ang = np.arctan2(Lh @ np.cross(perp0, perp1), perp0 @ perp1)
    om_s = np.linalg.norm(L) / It
    assert abs(np.angle(np.exp(1j * (ang - om_s * t_end)))) < 1e-4


@pytest.mark.parametrize("scheme,order", [("verlet_predicted", 2.0), ("symplectic_euler", 1.0)])
def test_order_of_convergence(scheme, order):
    """Asymmetric top, error of ω and R at t = 1 s against a fine run: halving dt divides the
    error by 2^order (the gyroscopic term is velocity dependent)."""
    args = ((1.0, 2.0, 3.0), (1.0, 1.5, -1.0))
    ref, _ = _free(*args, 1e-3 / 64, 1.0, scheme="verlet_predicted")
    Rref = r3.quat_to_matrix(ref.q.quat[0])
    errs = []
    for dt in (4e-3, 2e-3, 1e-3):
        s, _ = _free(*args, dt, 1.0, scheme=scheme)
        e = float(jnp.linalg.norm(s.v.w - ref.v.w) + jnp.linalg.norm(r3.quat_to_matrix(s.q.quat[0]) - Rref))
        errs.append(e)
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(rates - order) < 0.15), rates


def test_gravity_and_external_torque():
    """Free fall is exact (constant acceleration); a constant world torque about a principal axis
    of a body at rest spins it up as α = τ/I (rotation angle τ t²/(2I))."""
    I = jnp.array([[0.5, 0.5, 0.2]])
    tau = 0.3
    loads = lambda p, q, v, aux, t: (jnp.zeros((1, 3)), jnp.array([[0.0, 0.0, tau]]), aux, None)
    step = r3.make_step("verlet_predicted", MASS, I, loads, 1e-3, gravity=(0.0, 0.0, -9.81))
    q0 = r3.Pose(jnp.zeros((1, 3)), jnp.array([[1.0, 0, 0, 0]]))
    v0 = r3.Twist(jnp.array([[1.0, 0, 0]]), jnp.zeros((1, 3)))
    s0 = r3.initial_state(r3.make_accel(MASS, I, loads, (0.0, 0.0, -9.81)), None, q0, v0, jnp.zeros(()))
    s, _, _ = r3.run(step, None, s0, 1000)
    np.testing.assert_allclose(s.q.x[0], [1.0, 0.0, -0.5 * 9.81], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.v.w[0], [0, 0, tau / 0.2], rtol=1e-12, atol=1e-14)
    ang = 2 * np.arctan2(float(s.q.quat[0, 3]), float(s.q.quat[0, 0]))
    assert abs(ang - tau / 0.2 / 2) < 1e-9
