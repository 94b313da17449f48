"""3D rigid bodies: position, unit-quaternion orientation, body-frame angular velocity.

State of n bodies (leading axis n on every leaf):

* ``Pose(x, quat)``: centre of mass x [m] (n, 3) in the world frame and the unit quaternion
  quat = (w, x, y, z) (n, 4) that rotates body-frame vectors into the world frame, R(quat);
* ``Twist(v, w)``: centre-of-mass velocity v [m/s] (n, 3) (world) and angular velocity ω [rad/s]
  (n, 3) in the **body** frame; accelerations are a ``Twist`` of (a [m/s²], α [rad/s²]).

Equations of motion (principal body axes, inertia diag(I₁, I₂, I₃) [kg·m²]):

    m a = F + m g,                  I α = τ_b − ω × (I ω)     (Euler's equations, with the
                                                              gyroscopic term ω × Iω),
    ẋ = v,                          q̇ = ½ q ⊗ (0, ω)         (body-frame ω),

F [N] the world-frame force at the centre of mass, τ_b = Rᵀ τ [N·m] the torque about it in body
axes (Goldstein, Poole & Safko 2002, "Classical Mechanics", §5.6; the quaternion kinematics:
Shuster 1993, J. Astronaut. Sci. 41:439-517).

Time stepping: ``integrate.make_step`` with this module's ``drift`` (the Lie-group drift
x⁺ = x + h v, q⁺ = q ⊗ exp(h ω / 2), renormalised every step, so |q| = 1 to round-off).
With ``"verlet_predicted"`` (the default) the step is

    v½ = v + h/2·a(q, ṽ),  q⁺ = drift(q, v½, h),  ṽ⁺ = v + h·a,  v⁺ = v½ + h/2·a(q⁺, ṽ⁺),

**second order** in h for the orientation and the angular velocity: the drift's rotation
vector h ω½ = h ω + h²/2 ω̇ matches the Magnus expansion of R(t + h) = R exp(∫ω) to O(h³) per
step, and the velocity update is the trapezoidal rule with an Euler predictor (velocity-
dependent gyroscopic term included).  Measured order 2.0 on a torque-free asymmetric top
(``tests/test_rigid3d.py``); ``"symplectic_euler"`` is first order there (measured 1.0).
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp

from . import integrate

Pose = integrate.state_type("Pose", ("x", "quat"), doc="Pose(x [m] (n, 3), quat (w, x, y, z) (n, 4))")
Twist = integrate.state_type(
    "Twist", ("v", "w"), doc="Twist(v [m/s] (n, 3) world, w [rad/s] (n, 3) body frame); also (a, α)"
)

#: Schemes of ``integrate`` that this module's drift supports, with their measured order on
#: the torque-free asymmetric top (velocity-dependent gyroscopic term).
SCHEMES = ("verlet_predicted", "symplectic_euler", "leapfrog")


# ------------------------------------------------------------------------------- quaternions
def quat_mul(p, q):
    """Hamilton product p ⊗ q of quaternions (w, x, y, z) (last axis 4)."""
    pw, px, py, pz = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    qw, qx, qy, qz = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [
            pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
        ],
        axis=-1,
    )


def quat_exp(rotvec):
    """Unit quaternion of the rotation vector θ = |θ| u [rad]: (cos |θ|/2, sin(|θ|/2) u).

    Without transcendentals (a float64 sin/cos pair costs more than the rest of the drift): the
    Taylor series of cos φ and sin φ/φ to φ¹⁰ at φ = |θ|/64, then five angle doublings
    (sin 2φ/2φ = (sin φ/φ) cos φ, cos 2φ = 1 − 2 φ² (sin φ/φ)²).  Exact to round-off for
    |θ| ≲ 10 rad (a step's rotation h|ω|, far beyond any stable step); safe gradient at θ = 0
    (only |θ|² enters)."""
    t2 = rotvec[..., 0] ** 2 + rotvec[..., 1] ** 2 + rotvec[..., 2] ** 2
    p2 = t2 / (4.0 * 32.0 * 32.0)  # φ² with φ = |θ|/2 / 32
    c = 1.0 - p2 * (0.5 - p2 * (1.0 / 24 - p2 * (1.0 / 720 - p2 * (1.0 / 40320 - p2 / 3628800))))
    sc = 1.0 - p2 * (1.0 / 6 - p2 * (1.0 / 120 - p2 * (1.0 / 5040 - p2 * (1.0 / 362880 - p2 / 39916800))))
    for _ in range(5):
        sc, c, p2 = sc * c, 1.0 - 2.0 * p2 * sc * sc, 4.0 * p2
    k = 0.5 * sc  # sin(|θ|/2)/|θ|
    return jnp.concatenate([c[..., None], k[..., None] * rotvec], axis=-1)


def quat_normalize(q):
    """q/|q| (the squares summed written out: XLA's CPU backend runs a reduction over an axis
    of 4 as a separate, slow kernel)."""
    n2 = q[..., 0] ** 2 + q[..., 1] ** 2 + q[..., 2] ** 2 + q[..., 3] ** 2
    return q / jnp.sqrt(n2)[..., None]


def quat_to_matrix(q):
    """Rotation matrix R(q) (…, 3, 3) of a unit quaternion: world = R · body."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def quat_from_axis_angle(axis, angle):
    """Unit quaternion of a rotation by ``angle`` [rad] about the unit ``axis``."""
    axis = jnp.asarray(axis, float)
    return quat_exp(axis * jnp.asarray(angle)[..., None])


def rotate(q, v):
    """R(q) v (body → world).  Written out elementwise: a batched 3×3 product would be a
    separate dot per variant on XLA's CPU backend."""
    R = quat_to_matrix(q)
    return jnp.stack(
        [R[..., i, 0] * v[..., 0] + R[..., i, 1] * v[..., 1] + R[..., i, 2] * v[..., 2] for i in range(3)], -1
    )


def rotate_back(q, v):
    """R(q)ᵀ v (world → body)."""
    R = quat_to_matrix(q)
    return jnp.stack(
        [R[..., 0, i] * v[..., 0] + R[..., 1, i] * v[..., 1] + R[..., 2, i] * v[..., 2] for i in range(3)], -1
    )


# ------------------------------------------------------------------------------- dynamics
def drift(q: Pose, v: Twist, h):
    """x + h v and q ⊗ exp(h ω/2) (body-frame ω held over h), renormalised."""
    return Pose(q.x + h * v.v, quat_normalize(quat_mul(q.quat, quat_exp(h * v.w))))


def euler_alpha(inertia, w, torque_body):
    """α = I⁻¹ (τ_b − ω × I ω) [rad/s²]: Euler's equations in principal axes (inertia (…, 3))."""
    return (torque_body - jnp.cross(w, inertia * w)) / inertia


def make_accel(mass, inertia, loads: Callable, gravity=(0.0, 0.0, 0.0)):
    """``accel(params, q, v, aux, t) -> (Twist(a, α), aux, out)`` for ``integrate.make_step``.

    mass (n,) [kg] and inertia (n, 3) [kg·m²] may be functions of params (callables) or arrays;
    ``loads(params, q, v, aux, t) -> (F (n, 3) [N] world, τ (n, 3) [N·m] world, about each
    centre of mass, aux, out)`` the external and interaction loads; gravity g [m/s²] world (or a
    callable of params)."""
    val = lambda x, p: x(p) if callable(x) else x

    def accel(p, q: Pose, v: Twist, aux, t):
        with integrate.stage("equations_of_motion"):
            F, tau, aux1, out = loads(p, q, v, aux, t)
            m = jnp.asarray(val(mass, p))
            inertia_ = jnp.asarray(val(inertia, p))
            g = jnp.asarray(val(gravity, p), dtype=q.x.dtype)
            a = F / m[..., None] + g
            alpha = euler_alpha(inertia_, v.w, rotate_back(q.quat, tau))
        return Twist(a, alpha), aux1, out

    return accel


def make_step(scheme, mass, inertia, loads, dt, gravity=(0.0, 0.0, 0.0)):
    """``step(params, integrate.State, i)`` of n rigid bodies (``integrate.make_step``)."""
    if scheme not in SCHEMES:
        raise ValueError(f"integrator.scheme = {scheme!r}; allowed for 3D rigid bodies: {', '.join(SCHEMES)}")
    return integrate.make_step(scheme, make_accel(mass, inertia, loads, gravity), drift, dt)


def initial_state(step_accel, params, q: Pose, v: Twist, aux):
    """integrate.State with the accelerations at (q, v, t = 0) (the first kick needs them)."""
    a, _, _ = step_accel(params, q, v, aux, jnp.zeros((), q.x.dtype))
    return integrate.State(q, v, a, aux)


def kinetic_energy(mass, inertia, v: Twist):
    """Σ ½ m |v|² + ½ ωᵀ I ω [J]."""
    return 0.5 * jnp.sum(mass * jnp.sum(v.v * v.v, -1)) + 0.5 * jnp.sum(inertia * v.w * v.w)


def angular_momentum(mass, inertia, q: Pose, v: Twist):
    """Σ (x × m v + R I ω) [kg·m²/s]: total angular momentum about the world origin."""
    return jnp.sum(jnp.cross(q.x, mass[..., None] * v.v) + rotate(q.quat, inertia * v.w), axis=0)


def point_velocity(q: Pose, v: Twist, point):
    """World velocity of the material point at world position ``point`` (n, …, 3): v + ω × r."""
    w_world = rotate(q.quat, v.w)
    return v.v + jnp.cross(w_world, point - q.x)


def run(step, params, state0, n_steps, save_every=1, reduce=None, acc0=None, save=None):
    """``integrate.simulate`` over n_steps (a multiple of save_every); default: no reduction."""
    if n_steps % save_every:
        raise ValueError(f"n_steps = {n_steps} must be a multiple of save_every = {save_every}")
    red = reduce or (lambda acc, out, i: acc)
    acc0 = jnp.zeros(()) if acc0 is None else acc0
    return integrate.simulate(step, params, state0, acc0, red, n_steps // save_every, save_every, save=save)


__all__ = [
    "Pose",
    "Twist",
    "SCHEMES",
    "quat_mul",
    "quat_exp",
    "quat_normalize",
    "quat_to_matrix",
    "quat_from_axis_angle",
    "rotate",
    "rotate_back",
    "drift",
    "euler_alpha",
    "make_accel",
    "make_step",
    "initial_state",
    "kinetic_energy",
    "angular_momentum",
    "point_velocity",
    "run",
]
