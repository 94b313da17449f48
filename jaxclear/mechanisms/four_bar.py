"""Planar four-bar (crank–rocker) with revolute clearance joints (``model.clearance_joint``).

Seed 001 (finite particle method, §3.1): crank driven counter-clockwise from rest, its speed
ramped linearly to ω = 50π rad/s over 0.12 s, run to 0.14 s; the crank starts perpendicular
to the ground; the coupler–follower joint has clearance, the other three are ideal (the
default, ``"coupler_follower"``; ``"crank_coupler"`` and ``"follower_ground"`` put the
clearance at the crank pin or the follower's ground pivot instead, ``"coupler_ends"`` at both
ends of the coupler, see below).  Seed 001
reports the amplification factors DE_α = (α_c − α_i)/α_i = 66.9 % of the follower angular
acceleration and DE_F = 16.6 % of the joint force over one crank cycle (its link tables are
lost from the text: our values are in ``benchmark_params`` and docs/mechanisms.md).

Bodies: crank 1 (pivot O₂ = origin, length a, prescribed θ), coupler 2 (pinned to the crank
at B, length b, angle φ), follower 3 (pivot O₄ = (d, 0), length c, angle ψ); centres of mass
at mid-length, gravity along −y.  The clearance joint cuts the loop, so the model is a tree in
relative coordinates q = (θ, φ, ψ) with a diagonal mass matrix (DESIGN.md, "Coordinates"):

    (J₂ + m₂l₂²) φ̈ = −m₂ l₂ u⊥_φ·a_B − m₂ g l₂ cos φ + Σ (p_J − B) × F,
    (J₃ + m₃l₃²) ψ̈ = −m₃ g l₃ cos ψ − Σ (p_B − O₄) × F,

F the contact force on the journal (coupler end C) at its points p_J, −F on the bearing
(follower end D, frame turning with the follower) at p_B; l = half lengths.  With the cut at
another joint the two free links hang in series (``_chain2``, 2×2 mass matrix): for
``"crank_coupler"`` O₄ → follower → coupler, journal on the crank pin B, bearing in the
coupler's B end (turning with the coupler); for ``"follower_ground"`` B → coupler →
follower, journal on the follower's ground end, bearing fixed at O₄; for ``"coupler_ends"``
(crank–coupler and coupler–follower both with clearance) the coupler is a free body with its
centre of mass in q[6:8] (``_accel_coupler_ends``, diagonal mass matrix).  Orientations are
carried as (cos, sin) pairs as in ``slider_crank``.  The ideal four-bar (``ideal``) is
closed-form position analysis, two 2×2 velocity/acceleration solves and inverse dynamics for
the three joint reactions.
"""

from __future__ import annotations

import math
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np

from .. import drivers, integrate, joints
from .._math import cross2, perp
from ..schema import POSITIVE, Param, Table
from ..spec import SpecError
from . import _clearance, crank_linkage, declared, defaults, params_type, state_type

JOINTS = {
    "coupler_follower": ("coupler_follower",),
    "crank_coupler": ("crank_coupler",),
    "follower_ground": ("follower_ground",),
    "coupler_ends": ("crank_coupler", "coupler_follower"),
}
CLEARANCE_JOINTS = tuple(JOINTS)

# Channels of this linkage beyond the per-joint ones and the crank angle (crank_linkage).
CHANNELS = {
    "follower_angle_rad": ("follower ψ", lambda q, v, a: jnp.arctan2(q.follower[1], q.follower[0])),
    "follower_angular_velocity_rad_per_s": ("follower ψ̇", lambda q, v, a: v.follower),
    "follower_angular_acceleration_rad_per_s2": ("follower ψ̈", lambda q, v, a: a.follower),
    "coupler_angular_velocity_rad_per_s": ("coupler φ̇", lambda q, v, a: v.coupler),
}
DEFAULT_OUTPUTS = (
    "crank_angle_rad",
    "contact_force_N",
    "journal_x_m",
    "journal_y_m",
    "follower_angular_velocity_rad_per_s",
    "follower_angular_acceleration_rad_per_s2",
)
Config = crank_linkage.config_type(__name__, JOINTS, DEFAULT_OUTPUTS, CHANNELS)
Config.__doc__ = """Static configuration: clearance_joint (one of CLEARANCE_JOINTS) and the fields of
    ``_clearance.ClearanceConfig``."""
Coordinates = state_type(
    "Coordinates",
    ("crank", "coupler", "follower"),
    optional=("coupler_centre",),
    doc="""Named
    coordinates (q, v and a alike): crank θ, coupler φ and follower ψ as (cos, sin) pairs in q and
    rates in v, a; coupler_centre (x_G, y_G) [m] of the free coupler (clearance_joint = "coupler_ends").""",
)


# Link values chosen for this benchmark (no published four-bar clearance table could be read): a
# Grashof crank–rocker a + b = 0.17 < c + d = 0.22 m, transmission angle 35.7°–100.8°, links as
# 20 × 10 mm steel bars (7850 kg/m³: m = 1.57 kg/m · L, J = m L²/12); joint as Flores et al. (2008).
_LINKS = (
    ("crank", 0.05, 0.0785, 1.635e-5),
    ("coupler", 0.12, 0.1884, 2.261e-4),
    ("follower", 0.10, 0.157, 1.308e-4),
    ("ground", 0.12, None, None),
)
MODEL = Table(
    "model",
    (
        Param("mechanism", "four_bar", "registered mechanism name"),
        Param("clearance_joint", "coupler_follower", "which joint has clearance", choices=CLEARANCE_JOINTS),
        *(
            Param(
                f"{n}_length_m",
                L,
                f"{n} length",
                range=POSITIVE,
                guard=_clearance.metres(10.0, "50 mm = 0.05"),
                field=f"{n}_length",
            )
            for n, L, _, _ in _LINKS
        ),
        *(Param(f"{n}_mass_kg", m, f"{n} mass", range=POSITIVE, field=f"{n}_mass") for n, _, m, _ in _LINKS[1:] if m),
        *(
            Param(
                f"{n}_inertia_kg_m2", J, f"{n} inertia about its centre of mass", range=POSITIVE, field=f"{n}_inertia"
            )
            for n, _, _, J in _LINKS[1:]
            if J
        ),
        replace(
            _clearance.CRANK_DRIVE[0], default=1500.0, aliases=(("model.crank_speed_rad_per_s", 60 / (2 * math.pi)),)
        ),
        replace(_clearance.CRANK_DRIVE[1], default=0.12),
        Param(
            "initial_crank_angle_deg", 90.0, "crank angle θ₀ at t = 0 from the ground line", range=(-360.0, 360.0, True)
        ),
        _clearance.CRANK_DRIVE[2],
    ),
    doc="links and drive (a Grashof crank–rocker of steel bars)",
    retired=(("crank_mass_kg", _clearance.DRIVEN_CRANK), ("crank_inertia_kg_m2", _clearance.DRIVEN_CRANK)),
)
BENCHMARK = {p.key: p.default for p in MODEL.params if p.key.endswith(("_length_m", "_mass_kg", "_inertia_kg_m2"))}

Params = params_type(
    "Params",
    MODEL,
    extra=("crank_angle0", "steady_start", "joint"),
    doc="""Lengths [m],
    masses [kg], inertias about the centres of mass [kg·m²], crank_speed ω [rad/s] reached after the
    linear ramp of ramp_time [s] (0: constant from t = 0), gravity g [m/s²] (fields from MODEL's
    declarations), crank_angle0 θ₀ [rad], steady_start [s], joint: JointParams.""",
)


def benchmark_params(
    clearance=0.5e-3,
    crank_speed=50 * math.pi,
    ramp_time=0.12,
    journal_radius=10.0e-3,
    restitution=0.9,
    friction_coefficient=0.01,
    crank_angle0=math.pi / 2,
    gravity=9.81,
    steady_start=0.0,
    normal_law="lankarani_nikravesh",
    stiffness=None,
):
    """Params of the four-bar benchmark (MODEL's default links, Flores-type joint); arguments may
    be traced arrays; crank_speed in rad/s."""
    dt = jnp.result_type(float)
    f = lambda x: jnp.asarray(x, dtype=dt)
    jp = _clearance.benchmark_joint(
        clearance, journal_radius, restitution, friction_coefficient, normal_law=normal_law, stiffness=stiffness
    )
    fields = declared(MODEL, defaults(MODEL), dt)
    fields.update(crank_speed=f(crank_speed), ramp_time=f(ramp_time), gravity=f(gravity))
    return Params(**fields, crank_angle0=f(crank_angle0), steady_start=f(steady_start), joint=jp)


# ----------------------------------------------------------------------------- ideal mechanism


def crank_angle(p: Params, t):
    """θ(t), θ̇(t), θ̈(t) of the driver (``drivers.crank_ramp``: linear ramp from rest, then ω)."""
    return drivers.crank_ramp(t, p.crank_speed, p.ramp_time, p.crank_angle0)


def time_of_crank_travel(p: Params, angle):
    """The time at which the crank has turned by ``angle`` [rad] from its start (inverse of
    ``crank_angle``, ``drivers.crank_ramp_time``)."""
    return drivers.crank_ramp_time(angle, p.crank_speed, p.ramp_time)


def _solve2(m1, m2, r):
    """x, y with x·m1 + y·m2 = r (Cramer)."""
    det = cross2(m1, m2)
    return cross2(r, m2) / det, cross2(m1, r) / det


def ideal_kinematics(p: Params, t):
    """Closed-loop positions, velocities and accelerations of the ideal four-bar at t.

    B = a u_θ; with f = O₄ − B, s = |f|, the coupler angle is φ = ∠f + γ,
    cos γ = (b² + s² − c²)/(2bs) (assembly with the coupler–follower joint above the line
    B–O₄); ψ = ∠(C − O₄).  Velocities and accelerations from the loop equation
    a u_θ + b u_φ = d e_x + c u_ψ differentiated once and twice (2×2 solves).
    """
    th, wd, al = crank_angle(p, t)
    a, b, c, d = p.crank_length, p.coupler_length, p.follower_length, p.ground_length
    ut = jnp.stack([jnp.cos(th), jnp.sin(th)])
    B = a * ut
    f = jnp.stack([d - B[0], -B[1]])
    s = jnp.hypot(f[0], f[1])
    gam = jnp.arccos(jnp.clip((b * b + s * s - c * c) / (2 * b * s), -1.0, 1.0))
    phi = jnp.arctan2(f[1], f[0]) + gam
    uf = jnp.stack([jnp.cos(phi), jnp.sin(phi)])
    C = B + b * uf
    psi = jnp.arctan2(C[1], C[0] - d)
    up = jnp.stack([jnp.cos(psi), jnp.sin(psi)])
    m1, m2 = b * perp(uf), -c * perp(up)
    phid, psid = _solve2(m1, m2, -a * wd * perp(ut))
    r = -a * (al * perp(ut) - wd * wd * ut) + b * phid * phid * uf - c * psid * psid * up
    phidd, psidd = _solve2(m1, m2, r)
    aB = a * (al * perp(ut) - wd * wd * ut)
    return {
        "theta": th,
        "theta_dot": wd,
        "theta_ddot": al,
        "phi": phi,
        "phi_dot": phid,
        "phi_ddot": phidd,
        "psi": psi,
        "psi_dot": psid,
        "psi_ddot": psidd,
        "B": B,
        "C": C,
        "a_B": aB,
    }


def ideal(p: Params, t):
    """Ideal four-bar over t: follower angle, rate and acceleration, and the joint reactions [N]
    by inverse dynamics (``reaction_<joint>`` = |R| for each of JOINTS, components in
    ``reaction_x/_y`` for the coupler–follower joint, ``reaction_<joint>_x/_y`` for the others;
    R_B on the coupler, R_O4 on the follower); the coupler–follower one from

        c u_ψ × R = J_O₄ ψ̈ + m₃ g l₃ cos ψ,      b u_φ × R = −(J_B φ̈ + m₂ l₂ u⊥_φ·a_B + m₂ g l₂ cos φ),

    R the force of the coupler on the follower, J about the pivots (follower about O₄, coupler
    about B); then crank–coupler R_B = m₂(a_G2 − g) + R and follower–ground
    R_O4 = m₃(a_G3 − g) − R (Newton for the coupler and the follower)."""
    k = jax.vmap(lambda tt: ideal_kinematics(p, tt))(jnp.atleast_1d(jnp.asarray(t, jnp.result_type(float))))
    b, c = p.coupler_length, p.follower_length
    l2, l3 = 0.5 * b, 0.5 * c
    jb = p.coupler_inertia + p.coupler_mass * l2 * l2
    jo = p.follower_inertia + p.follower_mass * l3 * l3
    uf = jnp.stack([jnp.cos(k["phi"]), jnp.sin(k["phi"])], -1)
    up = jnp.stack([jnp.cos(k["psi"]), jnp.sin(k["psi"])], -1)
    a3 = jo * k["psi_ddot"] + p.follower_mass * p.gravity * l3 * up[:, 0]
    a2 = -(
        jb * k["phi_ddot"]
        + p.coupler_mass * l2 * jnp.sum(perp(uf) * k["a_B"], -1)
        + p.coupler_mass * p.gravity * l2 * uf[:, 0]
    )
    # rows: u × R = u_x R_y − u_y R_x
    det = c * b * (-up[:, 1] * uf[:, 0] + up[:, 0] * uf[:, 1])
    rx = (a3 * b * uf[:, 0] - c * up[:, 0] * a2) / det
    ry = (c * (-up[:, 1]) * a2 - (-b * uf[:, 1]) * a3) / det
    r = jnp.stack([rx, ry], -1)
    # Newton for the centres of mass: R_B = m₂(a_G2 − g) + R (crank on coupler),
    # R_O4 = m₃(a_G3 − g) − R (ground on follower), g = (0, −g).
    g = jnp.stack([0.0 * p.gravity, -p.gravity])
    a_g2 = k["a_B"] + l2 * (k["phi_ddot"][:, None] * perp(uf) - (k["phi_dot"] ** 2)[:, None] * uf)
    a_g3 = l3 * (k["psi_ddot"][:, None] * perp(up) - (k["psi_dot"] ** 2)[:, None] * up)
    r_b = p.coupler_mass * (a_g2 - g) + r
    r_o4 = p.follower_mass * (a_g3 - g) - r
    return {
        "theta": k["theta"],
        "follower_angle": k["psi"],
        "follower_angular_velocity": k["psi_dot"],
        "follower_angular_acceleration": k["psi_ddot"],
        "coupler_angle": k["phi"],
        "coupler_angular_velocity": k["phi_dot"],
        "reaction_x": rx,
        "reaction_y": ry,
        "reaction_coupler_follower": jnp.hypot(rx, ry),
        "reaction_crank_coupler": jnp.hypot(r_b[:, 0], r_b[:, 1]),
        "reaction_crank_coupler_x": r_b[:, 0],
        "reaction_crank_coupler_y": r_b[:, 1],
        "reaction_follower_ground": jnp.hypot(r_o4[:, 0], r_o4[:, 1]),
        "reaction_follower_ground_x": r_o4[:, 0],
        "reaction_follower_ground_y": r_o4[:, 1],
    }


def ideal_peaks(p: Params, t_end, steady_start, n_samples: int = 20001, joint: str = "coupler_follower"):
    """Peaks of |ψ̈| and of the reactions at the joints of ``JOINTS[joint]`` of the ideal
    four-bar over [0, t_end] and [steady_start, t_end]."""
    t = jnp.linspace(0.0, 1.0, n_samples) * t_end
    ts = steady_start + jnp.linspace(0.0, 1.0, n_samples) * (t_end - steady_start)
    keys = ("follower_angular_acceleration",) + tuple(f"reaction_{n}" for n in JOINTS[joint])
    full, st = ideal(p, t), ideal(p, ts)
    return ({k: jnp.max(jnp.abs(full[k])) for k in keys}, {k: jnp.max(jnp.abs(st[k])) for k in keys})


# ----------------------------------------------------------------------------- clearance model


def _accel_coupler_follower(cfg, p, q, v, aux, t):
    """Journal on the coupler end C, bearing on the follower end D (turning with the follower):
    two single links, about B and O₄ (diagonal mass matrix, module docstring)."""
    with integrate.stage("kinematics"):
        b_pt, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        uf, up = q.coupler, q.follower
        wf, wp = v.coupler, v.follower
        b, c = p.coupler_length, p.follower_length
        l2, l3 = 0.5 * b, 0.5 * c
        o4 = jnp.stack([p.ground_length, 0.0 * p.ground_length])
        r_j = b_pt + b * uf
        v_j = vb + b * wf * perp(uf)
        r_b = o4 + c * up
        v_b = c * wp * perp(up)
        kin = joints.JointKinematics(r_j, v_j, wf, r_b, v_b, up, wp)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        jb = p.coupler_inertia + p.coupler_mass * l2 * l2
        jo = p.follower_inertia + p.follower_mass * l3 * l3
        tau2 = (
            -p.coupler_mass * l2 * jnp.dot(perp(uf), ab)
            - p.coupler_mass * p.gravity * l2 * uf[0]
            + joints.moment(jf.f_slots, jf.p_j, b_pt)
        )
        tau3 = -p.follower_mass * p.gravity * l3 * up[0] + joints.moment(-jf.f_slots, jf.p_b, o4)
        a = Coordinates(crank=alpha, coupler=tau2 / jb, follower=tau3 / jo)
    return a, mem[None], (jf,)


def _chain2(g, a0, u1, w1, L1, c1, m1, J1, u2, w2, c2, m2, J2, Q1, Q2):
    """(α̈₁, α̈₂) of two links in series hanging from a base point of acceleration a0: link 1
    (direction u1, rate w1, length L1, centre of mass c1 along u1) pinned at the base, link 2
    (u2, w2, centre of mass c2 from the pin at link 1's end); g gravity vector, Q1, Q2 the
    generalised forces of the contact loads.  Virtual work with
    a_G1 = a0 + c1(α̈₁u₁⊥ − w1²u₁), a_G2 = a0 + L1(α̈₁u₁⊥ − w1²u₁) + c2(α̈₂u₂⊥ − w2²u₂):

        [J1 + m1c1² + m2L1²,  m2L1c2 u₁·u₂] [α̈₁]   [Q1 + m1c1 u₁⊥·(g − b1) + m2L1 u₁⊥·(g − b2)]
        [m2L1c2 u₁·u₂,        J2 + m2c2²  ] [α̈₂] = [Q2 + m2c2 u₂⊥·(g − b2)                   ],

    b1 = a0 − c1w1²u₁, b2 = a0 − L1w1²u₁ − c2w2²u₂ (the α̈-free parts); Cramer's rule."""
    b1 = a0 - c1 * w1 * w1 * u1
    b2 = a0 - L1 * w1 * w1 * u1 - c2 * w2 * w2 * u2
    m11 = J1 + m1 * c1 * c1 + m2 * L1 * L1
    m12 = m2 * L1 * c2 * jnp.dot(u1, u2)
    m22 = J2 + m2 * c2 * c2
    r1 = Q1 + m1 * c1 * jnp.dot(perp(u1), g - b1) + m2 * L1 * jnp.dot(perp(u1), g - b2)
    r2 = Q2 + m2 * c2 * jnp.dot(perp(u2), g - b2)
    det = m11 * m22 - m12 * m12
    return (r1 * m22 - m12 * r2) / det, (m11 * r2 - m12 * r1) / det


def _accel_crank_coupler(cfg, p, q, v, aux, t):
    """Journal on the crank pin B, bearing in the coupler's B end (turning with the coupler);
    coupler–follower and follower–ground ideal: the chain O₄ → follower (ψ) → coupler (the
    link from C to its B end, direction −u_φ) hangs from the fixed pivot (``_chain2``)."""
    with integrate.stage("kinematics"):
        b_pt, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        uf, up = q.coupler, q.follower
        wf, wp = v.coupler, v.follower
        b, c = p.coupler_length, p.follower_length
        o4 = jnp.stack([p.ground_length, 0.0 * p.ground_length])
        c_pt = o4 + c * up
        v_c = c * wp * perp(up)
        r_b = c_pt - b * uf
        v_b = v_c - b * wf * perp(uf)
        kin = joints.JointKinematics(b_pt, vb, v.crank, r_b, v_b, uf, wf)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        f_b = -jf.f_slots  # on the coupler's bearing
        q1 = c * cross2(up, jnp.sum(f_b, axis=0))
        q2 = joints.moment(f_b, jf.p_b, c_pt)
        g = jnp.stack([0.0 * p.gravity, -p.gravity])
        psidd, phidd = _chain2(
            g,
            0.0 * o4,
            up,
            wp,
            c,
            0.5 * c,
            p.follower_mass,
            p.follower_inertia,
            -uf,
            wf,
            0.5 * b,
            p.coupler_mass,
            p.coupler_inertia,
            q1,
            q2,
        )
    return Coordinates(crank=alpha, coupler=phidd, follower=psidd), mem[None], (jf,)


def _accel_follower_ground(cfg, p, q, v, aux, t):
    """Journal on the follower's ground end, bearing fixed at O₄; crank–coupler and
    coupler–follower ideal: the chain B → coupler (φ) → follower (the link from C to its
    ground end, direction −u_ψ) hangs from the crank pin (``_chain2``)."""
    with integrate.stage("kinematics"):
        b_pt, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        uf, up = q.coupler, q.follower
        wf, wp = v.coupler, v.follower
        b, c = p.coupler_length, p.follower_length
        c_pt = b_pt + b * uf
        r_j = c_pt - c * up
        v_j = vb + b * wf * perp(uf) - c * wp * perp(up)
        o4 = jnp.stack([p.ground_length, 0.0 * p.ground_length])
        kin = joints.JointKinematics(r_j, v_j, wp, o4, 0.0 * o4, jnp.stack([1.0 + 0.0 * wp, 0.0 * wp]), 0.0 * wp)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        q1 = b * cross2(uf, jnp.sum(jf.f_slots, axis=0))
        q2 = joints.moment(jf.f_slots, jf.p_j, c_pt)
        g = jnp.stack([0.0 * p.gravity, -p.gravity])
        phidd, psidd = _chain2(
            g,
            ab,
            uf,
            wf,
            b,
            0.5 * b,
            p.coupler_mass,
            p.coupler_inertia,
            -up,
            wp,
            0.5 * c,
            p.follower_mass,
            p.follower_inertia,
            q1,
            q2,
        )
    return Coordinates(crank=alpha, coupler=phidd, follower=psidd), mem[None], (jf,)


def _accel_coupler_ends(cfg, p, q, v, aux, t):
    """Clearance at both coupler ends (crank pin in the coupler's B bearing, coupler end C in
    the follower's bearing): the coupler is a free body, centre of mass G = q.coupler_centre with
    velocity v.coupler_centre; the follower swings about O₄; diagonal mass matrix:

        m₂ G̈ = −F_B + F_C + m₂g,   J₂ φ̈ = Σ (p_B − G) × (−F_B) + Σ (p_J − G) × F_C,
        (J₃ + m₃l₃²) ψ̈ = −m₃ g l₃ cos ψ − Σ (p_D − O₄) × F_C,

    F_B, F_C the contact forces on the journals (crank pin, coupler end C)."""
    with integrate.stage("kinematics"):
        b_pt, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        uf, up = q.coupler, q.follower
        wf, wp = v.coupler, v.follower
        gc, vg = q.coupler_centre, v.coupler_centre
        b, c = p.coupler_length, p.follower_length
        l2, l3 = 0.5 * b, 0.5 * c
        o4 = jnp.stack([p.ground_length, 0.0 * p.ground_length])
        jp1 = jax.tree_util.tree_map(lambda x: x[0], p.joint)
        jp2 = jax.tree_util.tree_map(lambda x: x[1], p.joint)
        kin1 = joints.JointKinematics(b_pt, vb, v.crank, gc - l2 * uf, vg - l2 * wf * perp(uf), uf, wf)
        kin2 = joints.JointKinematics(gc + l2 * uf, vg + l2 * wf * perp(uf), wf, o4 + c * up, c * wp * perp(up), up, wp)
    jf1, mem1 = joints.evaluate(cfg.joint, jp1, kin1, aux[0])
    jf2, mem2 = joints.evaluate(cfg.joint, jp2, kin2, aux[1])
    with integrate.stage("equations_of_motion"):
        g = jnp.stack([0.0 * p.gravity, -p.gravity])
        ag = (-jf1.force + jf2.force) / p.coupler_mass + g
        tau2 = joints.moment(-jf1.f_slots, jf1.p_b, gc) + joints.moment(jf2.f_slots, jf2.p_j, gc)
        jo = p.follower_inertia + p.follower_mass * l3 * l3
        tau3 = -p.follower_mass * p.gravity * l3 * up[0] + joints.moment(-jf2.f_slots, jf2.p_b, o4)
        a = Coordinates(crank=alpha, coupler=tau2 / p.coupler_inertia, follower=tau3 / jo, coupler_centre=ag)
    return a, jnp.stack([mem1, mem2]), (jf1, jf2)


_ACCEL = {
    "coupler_follower": _accel_coupler_follower,
    "crank_coupler": _accel_crank_coupler,
    "follower_ground": _accel_follower_ground,
    "coupler_ends": _accel_coupler_ends,
}


def initial_state(cfg: Config, p: Params):
    """The ideal assembly at θ₀ (journal centred in the bearing), every body at the ideal
    mechanism's velocity (at rest with a ramp).  Returns (q, v, aux) (``Coordinates``)."""
    k = ideal_kinematics(p, jnp.zeros((), jnp.result_type(p.crank_length)))
    pair = lambda x: jnp.stack([jnp.cos(x), jnp.sin(x)])
    q = Coordinates(crank=pair(k["theta"]), coupler=pair(k["phi"]), follower=pair(k["psi"]))
    v = Coordinates(crank=k["theta_dot"], coupler=k["phi_dot"], follower=k["psi_dot"])
    if cfg.clearance_joint == "coupler_ends":  # the coupler's centre of mass, free
        uf = pair(k["phi"])
        vb = p.crank_length * k["theta_dot"] * perp(pair(k["theta"]))
        q = q._replace(coupler_centre=k["B"] + 0.5 * p.coupler_length * uf)
        v = v._replace(coupler_centre=vb + 0.5 * p.coupler_length * k["phi_dot"] * perp(uf))
    aux = jnp.stack([joints.initial_memory(cfg.joint, q.crank.dtype)] * cfg.n_joints)
    return q, v, aux


# ----------------------------------------------------------------------------- sweep protocol


def _check_geometry(cols):
    """A Grashof crank–rocker (the crank shortest and s + l < p + q), so that the crank turns
    fully with the loop closed."""
    L = {k: np.asarray(cols[f"model.{k}_length_m"], float) for k in ("crank", "coupler", "follower", "ground")}
    Lb = np.broadcast_arrays(*L.values())
    st = np.stack(Lb, axis=-1)
    ok = (np.argmin(st, axis=-1) == 0) & (st.min(-1) + st.max(-1) < st.sum(-1) - st.min(-1) - st.max(-1))
    if not np.all(ok):
        i = int(np.argmin(ok.ravel()))
        vals = ", ".join(f"model.{k}_length_m = {float(np.ravel(v)[i if v.ndim else 0]):g}" for k, v in zip(L, Lb))
        raise SpecError(
            f"{vals}"
            + (f" (variant {i})" if ok.ndim else "")
            + ": not a Grashof crank–rocker (the crank must be the shortest link and "
            "shortest + longest < sum of the other two)"
        )


def _steady_start(spec, p, t_end):
    """The last integrator.steady_revolutions crank revolutions before t_end, by crank angle (so
    the window is defined during a ramp too)."""
    travel = crank_angle(p, t_end)[0] - p.crank_angle0
    return time_of_crank_travel(p, travel - 2 * math.pi * spec["integrator"]["steady_revolutions"])


def _effective_mass(p: Params, joint: str):
    """The lighter side of the joint as a mass at the joint: coupler_follower — coupler about B
    or follower about O₄ (J/L²); crank_coupler / follower_ground — the coupler / follower end of
    the hanging chain, bounded below by the free link's 1/(1/m + (L/2)²/J) (constraints only add
    mass); coupler_ends — the free coupler's end or the follower about O₄."""
    l2, l3 = 0.5 * p.coupler_length, 0.5 * p.follower_length
    m2 = (p.coupler_inertia + p.coupler_mass * l2 * l2) / p.coupler_length**2
    m3 = (p.follower_inertia + p.follower_mass * l3 * l3) / p.follower_length**2
    m2_free = 1.0 / (1.0 / p.coupler_mass + l2 * l2 / p.coupler_inertia)
    return {
        "crank_coupler": m2_free,
        "follower_ground": 1.0 / (1.0 / p.follower_mass + l3 * l3 / p.follower_inertia),
        "coupler_ends": jnp.minimum(m2_free, m3),
    }.get(joint, jnp.minimum(m2, m3))


MECHANISM = crank_linkage.CrankLinkage(
    name="four_bar",
    model=MODEL,
    joints=JOINTS,
    config=Config,
    params_cls=Params,
    accel=_ACCEL,
    initial_state=initial_state,
    channels=CHANNELS,
    default_outputs=DEFAULT_OUTPUTS,
    acc_key="follower_angular_acceleration",
    acc_unit="_rad_per_s2",
    acc_of=lambda a: a.follower,
    ideal_peaks=ideal_peaks,
    ideal_kw=lambda cfg: {"joint": cfg.clearance_joint},
    samples=(2048, 4096),
    steady_start=_steady_start,
    effective_mass=_effective_mass,
    check_geometry=_check_geometry,
    steady_doc="before t_end (by crank angle)",
    extra_params=lambda flat, dtype: {
        "crank_angle0": jnp.deg2rad(jnp.asarray(flat["model.initial_crank_angle_deg"], dtype))
    },
    integrator={"t_end_s": 0.14, "save_every": 50},
    # as Zheng et al. Fig. 6(a)–(c): the follower's rate and acceleration and the joint force against the ideal
    versus_ideal=(
        ("follower_angular_velocity_rad_per_s", "follower_angular_velocity", "follower ψ̇ [rad/s]"),
        ("follower_angular_acceleration_rad_per_s2", "follower_angular_acceleration", "follower ψ̈ [rad/s²]"),
        ("contact_force_N", "reaction", "joint force [N]"),
    ),
    versus_ideal_title="last crank revolution (as Fig. 6 of Zheng et al.)",
)
simulate, STUDY_METRICS = MECHANISM.simulate, MECHANISM.STUDY_METRICS
Result = crank_linkage.Result


def stability_dt(p: Params, scheme, joint: str = "coupler_follower"):
    """Conservative stable dt [s] (``crank_linkage.CrankLinkage.stability_dt``, ``_effective_mass``)."""
    return MECHANISM.stability_dt(p, scheme, joint)
