"""Planar rigid multibody dynamics in Cartesian coordinates (the general fallback and cross-check).

Each body ``b`` has ``q_b = (x_b, y_b, φ_b)``: centre of mass [m] and orientation [rad] in the global
frame; the system vector is ``q = (q_0, q_1, …)`` of length ``nq = 3·n_bodies``.  Ground is body ``-1``.
Ideal joints give holonomic constraints ``Φ(q, t) = 0``; the equations of motion are the index-1 DAE

    M q̈ + Φ_qᵀ λ = Q_ext + Q_grav
    Φ_q q̈       = γ − 2α Φ̇ − β² Φ,      γ = −(Φ_q q̇)_q q̇ − 2 Φ_qt q̇ − Φ_tt,

solved as one dense KKT system (Nikravesh 1988, *Computer-Aided Analysis of Mechanical Systems*,
ch. 6 and 13; Baumgarte 1972, *Comput. Methods Appl. Mech. Eng.* 1, 1–16).  The generalised reaction
of the constraints is ``−Φ_qᵀ λ``.

Structure is static, numbers are data: a :class:`System` (frozen, hashable: body count and joints) is
closed over or passed as a static argument; masses, inertias, gravity, Baumgarte gains and any joint
value given by *name* live in a ``params`` dict, so a batch can ``vmap`` over them.  A joint value
(attachment point, axis, speed, ramp time, angle offset) may be

* a Python number or tuple (baked into the trace),
* a string: ``params[name]``,
* a callable ``f(params) -> value`` (hashed by identity: define it once, not in a loop).

Nothing here jits; the caller does.  No Python branching on traced values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from . import drivers
from ._math import cross2, perp

__all__ = [
    "Revolute",
    "Translational",
    "Driver",
    "System",
    "revolute",
    "translational",
    "driver",
    "make_params",
    "driver_motion",
    "point_position",
    "point_velocity",
    "point_force",
    "gravity_force",
    "constraints",
    "constraint_jacobian",
    "solve_accelerations",
    "make_rhs",
    "joint_reaction",
    "JointReaction",
    "consistent_state",
    "kinetic_energy",
    "potential_energy",
]

Value = float | tuple | str | Callable[[dict], Any]

#: default Baumgarte gains [1/s]; α = β gives a critically damped constraint error
#: ë + 2αė + α²e = 0 with time constant 1/α = 0.1 s.  Choose α ≈ 1/(a few time scales of the
#: motion) and keep α·dt ≪ 1 for the explicit stepper; α = β = 0 switches stabilisation off.
DEFAULT_ALPHA = 10.0
DEFAULT_BETA = 10.0
DEFAULT_GRAVITY = (0.0, -9.81)


# ----------------------------------------------------------------------------- joints (static)


@dataclass(frozen=True)
class Revolute:
    """Pin: point ``s_i`` of body i coincides with point ``s_j`` of body j (2 equations)."""

    i: int
    s_i: Value
    j: int
    s_j: Value

    n_eq = 2


@dataclass(frozen=True)
class Translational:
    """Prismatic: body i slides along a line fixed in body j (2 equations).

    Φ₁ = φ_i − φ_j − φ₀,   Φ₂ = n_j · (r_i + A_i s_i − r_j − A_j s_j),   n_j = A_j ⊥(u/|u|).
    """

    i: int
    j: int
    axis: Value
    s_i: Value
    s_j: Value
    phi0: Value

    n_eq = 2


@dataclass(frozen=True)
class Driver:
    """Rheonomic driver φ_i(t) = φ₀ + f(t) relative to ground (1 equation); see :func:`driver_motion`."""

    i: int
    omega: Value
    t_ramp: Value
    phi0: Value

    n_eq = 1


Joint = Revolute | Translational | Driver


def revolute(i: int, s_i: Value, j: int, s_j: Value) -> Revolute:
    """Revolute joint: A_i s_i + r_i = A_j s_j + r_j; s_* in body frames [m]; j = -1 is ground."""
    return Revolute(int(i), _freeze(s_i), int(j), _freeze(s_j))


def translational(
    i: int,
    j: int = -1,
    axis: Value = (1.0, 0.0),
    s_i: Value = (0.0, 0.0),
    s_j: Value = (0.0, 0.0),
    phi0: Value = 0.0,
) -> Translational:
    """Translational joint: body i slides along the line through ``s_j`` with direction ``axis``
    (both in body j's frame; ground for j = -1); relative rotation locked at ``phi0`` [rad].

    ``translational(k)`` is the slider on the global x axis: y_k = 0, φ_k = 0.
    """
    return Translational(int(i), int(j), _freeze(axis), _freeze(s_i), _freeze(s_j), _freeze(phi0))


def driver(i: int, omega: Value, t_ramp: Value = 0.0, phi0: Value = 0.0) -> Driver:
    """Crank driver on body i: constant speed ``omega`` [rad/s] reached by a linear ramp of
    duration ``t_ramp`` [s] from rest (``t_ramp = 0``: no ramp); ``phi0`` [rad] the angle at t = 0."""
    return Driver(int(i), _freeze(omega), _freeze(t_ramp), _freeze(phi0))


def _freeze(v):
    """Lists -> tuples so that joints stay hashable."""
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


@dataclass(frozen=True)
class System:
    """Static structure: number of bodies and the ideal joints (in constraint order)."""

    n_bodies: int
    joints: tuple

    def __post_init__(self):
        object.__setattr__(self, "joints", tuple(self.joints))
        for k, jt in enumerate(self.joints):
            for b in _bodies_of(jt):
                if not -1 <= b < self.n_bodies:
                    raise ValueError(f"joint {k}: body index {b} out of range")

    @property
    def nq(self) -> int:
        return 3 * self.n_bodies

    @property
    def n_constraints(self) -> int:
        return sum(jt.n_eq for jt in self.joints)

    @property
    def rows(self) -> tuple:
        """(start, stop) rows of Φ / λ for each joint."""
        out, k = [], 0
        for jt in self.joints:
            out.append((k, k + jt.n_eq))
            k += jt.n_eq
        return tuple(out)


def _bodies_of(jt):
    if isinstance(jt, Driver):
        return (jt.i,)
    return (jt.i, jt.j)


def make_params(
    mass,
    inertia,
    gravity=DEFAULT_GRAVITY,
    alpha=DEFAULT_ALPHA,
    beta=DEFAULT_BETA,
    **named,
) -> dict:
    """Params dict: ``mass`` [kg] and ``inertia`` about the centre of mass [kg·m²], shape (n_bodies,);
    ``gravity`` [m/s²]; Baumgarte ``alpha``, ``beta`` [1/s]; ``named`` values referenced by joints."""
    p = {
        "mass": jnp.asarray(mass, dtype=float),
        "inertia": jnp.asarray(inertia, dtype=float),
        "gravity": jnp.asarray(gravity, dtype=float),
        "alpha": jnp.asarray(alpha, dtype=float),
        "beta": jnp.asarray(beta, dtype=float),
    }
    for k, v in named.items():
        p[k] = jnp.asarray(v, dtype=float)
    return p


def _val(params, v):
    if isinstance(v, str):
        return jnp.asarray(params[v])
    if callable(v):
        return jnp.asarray(v(params))
    return jnp.asarray(v, dtype=float)


# ----------------------------------------------------------------------------- kinematics


def _rot(phi):
    c, s = jnp.cos(phi), jnp.sin(phi)
    return jnp.array([[c, -s], [s, c]])


def _pose(q, b: int):
    """(r_b, φ_b) of body b; ground (-1) is the origin with φ = 0."""
    if b < 0:
        return jnp.zeros(2, q.dtype), jnp.zeros((), q.dtype)
    return q[3 * b : 3 * b + 2], q[3 * b + 2]


def point_position(q, body: int, s_local):
    """Global position r_b + A(φ_b) s [m] of a body-fixed point s [m]."""
    r, phi = _pose(q, body)
    return r + _rot(phi) @ jnp.asarray(s_local, q.dtype)


def point_velocity(q, qd, body: int, s_local):
    """Global velocity ṙ_b + φ̇_b ⊥(A s) [m/s] of a body-fixed point s [m]."""
    if body < 0:
        return jnp.zeros(2, q.dtype)
    _, phi = _pose(q, body)
    rd, phid = _pose(qd, body)
    return rd + phid * perp(_rot(phi) @ jnp.asarray(s_local, q.dtype))


def point_force(q, body: int, s_local, force_global):
    """Generalised force (nq,) of a force F [N] (global frame) acting at body-fixed point s [m]:
    (F_x, F_y, (A s) × F) on body b's coordinates, zero elsewhere (Nikravesh 1988, §6.3).
    Forces on ground (body -1) give zeros."""
    Q = jnp.zeros_like(q)
    if body < 0:
        return Q
    F = jnp.asarray(force_global, q.dtype)
    _, phi = _pose(q, body)
    arm = _rot(phi) @ jnp.asarray(s_local, q.dtype)
    return Q.at[3 * body : 3 * body + 2].add(F).at[3 * body + 2].add(cross2(arm, F))


def gravity_force(system: System, params, dtype=float):
    """Q_grav (nq,): m_b g on (x_b, y_b), zero on φ_b [N]."""
    m = jnp.asarray(params["mass"], dtype)
    g = jnp.asarray(params.get("gravity", DEFAULT_GRAVITY), dtype)
    f = m[:, None] * g[None, :]
    return jnp.concatenate([f, jnp.zeros((system.n_bodies, 1), dtype)], axis=1).reshape(-1)


def _mass_diag(system: System, params, dtype):
    m = jnp.asarray(params["mass"], dtype)
    J = jnp.asarray(params["inertia"], dtype)
    return jnp.stack([m, m, J], axis=1).reshape(-1)


def kinetic_energy(system: System, params, qd):
    """T = ½ Σ (m_b |ṙ_b|² + J_b φ̇_b²) [J]."""
    return 0.5 * jnp.sum(_mass_diag(system, params, qd.dtype) * qd * qd)


def potential_energy(system: System, params, q):
    """Gravity potential V = −Σ m_b g·r_b [J] (zero at the origin)."""
    return -jnp.dot(gravity_force(system, params, q.dtype), q)


# ----------------------------------------------------------------------------- constraints


def driver_motion(t, omega, t_ramp=0.0, phi0=0.0):
    """Prescribed angle, speed and acceleration (φ, φ̇, φ̈) [rad, rad/s, rad/s²] at time t ≥ 0:

        t < t_ramp:  φ = φ₀ + ½ ω t²/t_ramp,  φ̇ = ω t/t_ramp,  φ̈ = ω/t_ramp
        otherwise:   φ = φ₀ + ω (t − t_ramp/2), φ̇ = ω,         φ̈ = 0

    (``drivers.crank_ramp``, shared with the relative-coordinate mechanisms).  Branch-free
    (``where``), safe for t_ramp = 0 (then φ = φ₀ + ω t).
    """
    return drivers.crank_ramp(t, omega, t_ramp, phi0)


def _joint_phi(jt, params, q, t):
    dt = q.dtype
    if isinstance(jt, Revolute):
        return point_position(q, jt.i, _val(params, jt.s_i).astype(dt)) - point_position(
            q, jt.j, _val(params, jt.s_j).astype(dt)
        )
    if isinstance(jt, Translational):
        _, phi_i = _pose(q, jt.i)
        _, phi_j = _pose(q, jt.j)
        u = _val(params, jt.axis).astype(dt)
        n = _rot(phi_j) @ perp(u / jnp.sqrt(jnp.sum(u * u)))
        d = point_position(q, jt.i, _val(params, jt.s_i).astype(dt)) - point_position(
            q, jt.j, _val(params, jt.s_j).astype(dt)
        )
        return jnp.stack([phi_i - phi_j - _val(params, jt.phi0).astype(dt), jnp.dot(n, d)])
    if isinstance(jt, Driver):
        _, phi_i = _pose(q, jt.i)
        # autodiff of the branch-free formula gives the exact φ̇, φ̈ in each phase
        f, _, _ = driver_motion(
            jnp.asarray(t, dt),
            _val(params, jt.omega).astype(dt),
            _val(params, jt.t_ramp).astype(dt),
            _val(params, jt.phi0).astype(dt),
        )
        return jnp.reshape(phi_i - f, (1,))
    raise TypeError(f"unknown joint {jt!r}")


def constraints(system: System, params, q, t=0.0):
    """Φ(q, t) (n_constraints,): joints stacked in the order of ``system.joints`` [m or rad]."""
    if not system.joints:
        return jnp.zeros((0,), q.dtype)
    return jnp.concatenate([_joint_phi(jt, params, q, t) for jt in system.joints])


def constraint_jacobian(system: System, params, q, t=0.0):
    """Φ_q (n_constraints, nq) by forward-mode autodiff."""
    return jax.jacfwd(lambda qq: constraints(system, params, qq, t))(q)


def _phi_dot(system, params, q, qd, t):
    """Φ̇ = Φ_q q̇ + Φ_t (one jvp along (q̇, 1))."""
    t = jnp.asarray(t, q.dtype)
    return jax.jvp(lambda qq, tt: constraints(system, params, qq, tt), (q, t), (qd, jnp.ones_like(t)))[1]


def _gamma(system, params, q, qd, t):
    """γ = −(Φ_q q̇)_q q̇ − 2Φ_qt q̇ − Φ_tt = −d/dt(Φ̇)|_{q̈=0} (nested jvp) and Φ̇."""
    t = jnp.asarray(t, q.dtype)
    phid, dphid = jax.jvp(lambda qq, tt: _phi_dot(system, params, qq, qd, tt), (q, t), (qd, jnp.ones_like(t)))
    return -dphid, phid


# ----------------------------------------------------------------------------- dynamics


def solve_accelerations(system: System, params, q, qd, t=0.0, Q_ext=None):
    """Constrained accelerations and multipliers from the dense KKT system

        [M  Φ_qᵀ] [q̈]   [Q_ext + Q_grav      ]
        [Φ_q  0 ] [λ ] = [γ − 2αΦ̇ − β²Φ      ]

    M = diag(m, m, J) per body [kg, kg·m²]; α = ``params["alpha"]``, β = ``params["beta"]`` [1/s]
    (Baumgarte 1972; defaults :data:`DEFAULT_ALPHA`, :data:`DEFAULT_BETA`).  ``Q_ext`` (nq,) [N, N·m],
    e.g. a sum of :func:`point_force` terms, or None.  Returns (q̈ (nq,), λ (n_constraints,)).
    """
    dt = q.dtype
    nq, nc = system.nq, system.n_constraints
    Q = gravity_force(system, params, dt)
    if Q_ext is not None:
        Q = Q + jnp.asarray(Q_ext, dt)
    Mdiag = _mass_diag(system, params, dt)
    if nc == 0:
        return Q / Mdiag, jnp.zeros((0,), dt)
    alpha = jnp.asarray(params.get("alpha", DEFAULT_ALPHA), dt)
    beta = jnp.asarray(params.get("beta", DEFAULT_BETA), dt)
    Phi = constraints(system, params, q, t)
    Jq = constraint_jacobian(system, params, q, t)
    gamma, phid = _gamma(system, params, q, qd, t)
    rhs_c = gamma - 2.0 * alpha * phid - beta * beta * Phi
    K = jnp.block([[jnp.diag(Mdiag), Jq.T], [Jq, jnp.zeros((nc, nc), dt)]])
    sol = jnp.linalg.solve(K, jnp.concatenate([Q, rhs_c]))
    return sol[:nq], sol[nq:]


def make_rhs(system: System, applied: Callable | None = None):
    """First-order right-hand side ``f(y, t, params) -> ẏ`` with packed state y = (q, q̇) (2·nq,).

    ``applied(q, qd, t, params) -> Q_ext (nq,)`` supplies external/contact generalised forces
    (build it from :func:`point_force`); None means gravity only.
    """
    nq = system.nq

    def rhs(y, t, params):
        q, qd = y[:nq], y[nq:]
        Q = None if applied is None else applied(q, qd, t, params)
        qdd, _ = solve_accelerations(system, params, q, qd, t, Q)
        return jnp.concatenate([qd, qdd])

    return rhs


class JointReaction(NamedTuple):
    """Reactions of each joint (rows in ``system.joints`` order), global frame.

    force_i (n_joints, 2) [N] and moment_i (n_joints,) [N·m, about body i's centre of mass] act on
    body i; force_j, moment_j on body j (zero when j is ground or for drivers).  For a driver,
    moment_i is the driving torque on body i.
    """

    force_i: Any
    moment_i: Any
    force_j: Any
    moment_j: Any


def joint_reaction(system: System, params, q, lam, t=0.0) -> JointReaction:
    """Joint reactions from the multipliers: generalised reaction −Φ_qᵀλ split per joint and body
    (Nikravesh 1988, §6.6).  For a revolute joint force_i = −λ_k and force_j = +λ_k."""
    Jq = constraint_jacobian(system, params, q, t)
    dt = q.dtype
    fi, mi, fj, mj = [], [], [], []
    for jt, (a, b) in zip(system.joints, system.rows):
        Jk, lk = Jq[a:b], lam[a:b]

        def on(body):
            if body < 0:
                return jnp.zeros(2, dt), jnp.zeros((), dt)
            gen = -(Jk[:, 3 * body : 3 * body + 3].T @ lk)
            return gen[:2], gen[2]

        f, m = on(jt.i)
        fi.append(f)
        mi.append(m)
        f, m = on(getattr(jt, "j", -1))
        fj.append(f)
        mj.append(m)
    if not fi:
        z2, z = jnp.zeros((0, 2), dt), jnp.zeros((0,), dt)
        return JointReaction(z2, z, z2, z)
    return JointReaction(jnp.stack(fi), jnp.stack(mi), jnp.stack(fj), jnp.stack(mj))


def consistent_state(system: System, params, q_guess, t0=0.0, qd_guess=None, iters: int = 10):
    """Initial state on the constraint manifold.

    Position: ``iters`` Newton steps on Φ(q, t₀) = 0 with the minimum-norm step
    Δq = −Φ_qᵀ(Φ_qΦ_qᵀ)⁻¹Φ (exact Newton when the system is kinematically determined).
    Velocity: minimum-norm correction of ``qd_guess`` (zeros if None) so that Φ_q q̇ = −Φ_t.
    Requires Φ_q of full row rank (no redundant constraints).  Returns (q, q̇).
    """
    q = jnp.asarray(q_guess, dtype=float) if not hasattr(q_guess, "dtype") else q_guess
    qd = jnp.zeros_like(q) if qd_guess is None else jnp.asarray(qd_guess, q.dtype)
    if system.n_constraints == 0:
        return q, qd

    def newton(_, qq):
        Phi = constraints(system, params, qq, t0)
        Jq = constraint_jacobian(system, params, qq, t0)
        return qq - Jq.T @ jnp.linalg.solve(Jq @ Jq.T, Phi)

    q = jax.lax.fori_loop(0, iters, newton, q)
    Jq = constraint_jacobian(system, params, q, t0)
    res = _phi_dot(system, params, q, qd, t0)  # Φ_q q̇_guess + Φ_t
    qd = qd - Jq.T @ jnp.linalg.solve(Jq @ Jq.T, res)
    return q, qd
