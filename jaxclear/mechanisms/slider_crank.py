"""Planar slider-crank with revolute clearance joints (Flores, Ambrósio, Claro & Pimenta 2008).

Bodies: crank (1, prescribed), connecting rod (2), slider (3) on the x axis; crank pivot at the
origin, gravity along −y.  A clearance joint is a force element that cuts the loop, so each
configuration is an open tree in relative coordinates (DESIGN.md, "Coordinates"):

* ``"rod_slider"`` — journal on the rod end C, bearing in the slider.  q = (crank θ, rod φ₂,
  slider x₃) (``Coordinates``): the rod
  swings about the crank pin B (ideal), the slider moves on x; the mass matrix is diagonal:
      (J₂ + m₂l²) φ̈₂ = −m₂ l u⊥·a_B − m₂ g l cos φ₂ + Σ (p_J − B) × F,     m₃ ẍ₃ = −F_x.
* ``"crank_rod"`` — journal on the crank pin B, bearing in the rod big end A.  Same coordinates,
  the rod pinned to the slider at C = (x₃, 0); 2×2 mass matrix solved in closed form:
      [m₂+m₃, m₂ l sin φ₂; m₂ l sin φ₂, J₂+m₂l²] [ẍ₃; φ̈₂] = [Q_x − m₂ l φ̇₂² cos φ₂; Q_φ].
* ``"both"`` — both joints with clearance; the rod is a free body (``rod_centre`` (x_G, y_G) and
  φ₂), diagonal mass.

Orientations are carried as (cos, sin) pairs advanced by rotation (no transcendentals in the
step); the crank angle is a driven coordinate with prescribed θ̈ (constant speed ω after a
linear ramp from rest over t_ramp), integrated exactly by the schemes for piecewise-constant θ̈.

Benchmark values (Flores et al. 2008, Table 1): crank 0.05 m, rod 0.12 m; masses 0.30, 0.21,
0.14 kg; inertias 1e-5, 2.5e-4, 1e-4 kg·m²; 5000 rpm; R_J = 10.0 mm, R_B = 10.5 mm; E = 207 GPa,
ν = 0.3; e = 0.9; μ = 0.01 (modified Coulomb, v0 = 1e-4, v1 = 1e-3 m/s).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import drivers, integrate, joints
from .._math import perp
from ..schema import POSITIVE, Param, Table
from ..spec import SpecError
from . import _clearance, crank_linkage, declared, defaults, params_type, state_type

# Clearance joints of each configuration, in the order of the per-joint outputs.
JOINTS = {"rod_slider": ("rod_slider",), "crank_rod": ("crank_rod",), "both": ("crank_rod", "rod_slider")}
CLEARANCE_JOINTS = tuple(JOINTS)

# Channels of this linkage beyond the per-joint ones and the crank angle (crank_linkage).
CHANNELS = {
    "slider_position_m": ("slider x", lambda q, v, a: q.slider),
    "slider_velocity_m_per_s": ("slider ẋ", lambda q, v, a: v.slider),
    "slider_acceleration_m_per_s2": ("slider ẍ", lambda q, v, a: a.slider),
    "rod_angular_velocity_rad_per_s": ("rod φ̇₂", lambda q, v, a: v.rod),
}
DEFAULT_OUTPUTS = ("crank_angle_rad", "contact_force_N", "journal_x_m", "journal_y_m", "slider_acceleration_m_per_s2")
Config = crank_linkage.config_type(__name__, JOINTS, DEFAULT_OUTPUTS, CHANNELS)
Config.__doc__ = """Static configuration: one compiled function per distinct Config.

    clearance_joint: one of CLEARANCE_JOINTS; the other fields are those of
    ``_clearance.ClearanceConfig`` (joint choices shared by both joints when there are two).
    """
Coordinates = state_type(
    "Coordinates",
    ("crank", "rod", "slider"),
    optional=("rod_centre",),
    doc="""Named
    coordinates (q, v and a alike): crank θ and rod φ₂ as (cos, sin) pairs in q and rates in v, a;
    slider x₃ [m]; rod_centre (x_G, y_G) [m] of the free rod (clearance_joint = "both" only).""",
)


MODEL = Table(
    "model",
    (
        Param("mechanism", "slider_crank", "registered mechanism name"),
        Param("clearance_joint", "rod_slider", "which joint has clearance", choices=CLEARANCE_JOINTS),
        Param(
            "crank_length_m",
            0.05,
            "crank length r",
            range=POSITIVE,
            guard=_clearance.metres(10.0, "50 mm = 0.05"),
            field="crank_length",
        ),
        Param(
            "rod_length_m",
            0.12,
            "connecting-rod length L (> r)",
            range=POSITIVE,
            guard=_clearance.metres(10.0, "120 mm = 0.12"),
            field="rod_length",
        ),
        Param("rod_mass_kg", 0.21, "rod mass m₂", range=POSITIVE, field="rod_mass"),
        Param("slider_mass_kg", 0.14, "slider mass m₃", range=POSITIVE, field="slider_mass"),
        Param(
            "rod_inertia_kg_m2", 2.5e-4, "rod inertia J₂ about its centre of mass", range=POSITIVE, field="rod_inertia"
        ),
        *_clearance.CRANK_DRIVE,
    ),
    doc="bodies and drive (Flores et al. 2008, Table 1)",
    retired=(
        ("crank_mass_kg", _clearance.DRIVEN_CRANK),
        ("crank_inertia_kg_m2", _clearance.DRIVEN_CRANK),
        ("slider_inertia_kg_m2", "the slider translates on its guide and never rotates"),
    ),
)

Params = params_type(
    "Params",
    MODEL,
    extra=("steady_start", "joint"),
    doc="""Numeric parameters (SI), batchable leaf by leaf.

    Fields from the declarations of MODEL (lengths [m], masses [kg], inertias about the centre of
    mass [kg·m²], crank_speed ω [rad/s], ramp_time [s] (0: constant speed from t = 0), gravity g
    [m/s²] along −y), then steady_start [s] start of the steady window and joint: clearance-joint
    parameters (for ``"both"`` a JointParams whose leaves have a leading axis of 2:
    [crank_rod, rod_slider]).
    """,
)


def benchmark_params(
    clearance=0.5e-3,
    crank_speed_rpm=5000.0,
    journal_radius=10.0e-3,
    restitution=0.9,
    friction_coefficient=0.01,
    points=None,
    ramp_time=0.0,
    steady_start=0.0,
    normal_law="lankarani_nikravesh",
    youngs_modulus=207e9,
    poisson_ratio=0.3,
    stiffness=None,
    n_joints=1,
):
    """Params of the Flores et al. (2008) benchmark (the MODEL defaults); every argument may be a
    traced array.

    Stiffness (when not given) is the Lankarani–Nikravesh internal-cylinder value
    K = 4/(3(σ_J+σ_B))·√(R_J R_B/(R_B−R_J)), σ = (1−ν²)/E  (≈ 6.95e10 N/m^1.5 at c = 0.5 mm).
    """
    dt = jnp.result_type(float)
    f = lambda x: jnp.asarray(x, dtype=dt)
    jp = _clearance.benchmark_joint(
        clearance,
        journal_radius,
        restitution,
        friction_coefficient,
        points,
        normal_law,
        youngs_modulus,
        poisson_ratio,
        stiffness,
        n_joints,
    )
    flat = {**defaults(MODEL), "model.crank_speed_rpm": crank_speed_rpm, "model.ramp_time_s": ramp_time}
    return Params(**declared(MODEL, flat, dt), steady_start=f(steady_start), joint=jp)


# ----------------------------------------------------------------------------- kinematics


def _gravity(p):
    return jnp.stack([jnp.zeros_like(p.gravity), -p.gravity])


def _on_x_axis(x, xd):
    """Position and velocity of a point sliding on the x axis (the slider, its pin)."""
    return jnp.stack([x, 0.0 * x]), jnp.stack([xd, 0.0 * xd])


def _in_slider(r_j, v_j, w_j, x3, v3):
    """Kinematics of a journal in the slider's (translating, non-rotating) bearing at (x₃, 0)."""
    r_b, v_b = _on_x_axis(x3, v3)
    return joints.JointKinematics(r_j, v_j, w_j, r_b, v_b, jnp.array([1.0, 0.0], r_j.dtype), 0.0 * w_j)


def _accel_rod_slider(cfg, p, q, v, aux, t):
    with integrate.stage("kinematics"):
        b, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        u, w2 = q.rod, v.rod
        up = perp(u)
        L, l = p.rod_length, 0.5 * p.rod_length
        kin = _in_slider(b + L * u, vb + L * w2 * up, w2, q.slider, v.slider)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        jb = p.rod_inertia + p.rod_mass * l * l
        tau = (
            -p.rod_mass * l * jnp.dot(up, ab) - p.rod_mass * p.gravity * l * u[0] + joints.moment(jf.f_slots, jf.p_j, b)
        )
        a = Coordinates(crank=alpha, rod=tau / jb, slider=-jf.force[0] / p.slider_mass)
    return a, mem[None], (jf,)


def _accel_crank_rod(cfg, p, q, v, aux, t):
    with integrate.stage("kinematics"):
        b, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        u, w2 = q.rod, v.rod
        up = perp(u)
        L, l = p.rod_length, 0.5 * p.rod_length
        cpt, vcpt = _on_x_axis(q.slider, v.slider)
        kin = joints.JointKinematics(b, vb, v.crank, cpt - L * u, vcpt - L * w2 * up, u, w2)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        m2, m3 = p.rod_mass, p.slider_mass
        qx = -jf.force[0]
        qphi = joints.moment(-jf.f_slots, jf.p_b, cpt) + l * m2 * p.gravity * u[0]
        m11, m12, m22 = m2 + m3, m2 * l * u[1], p.rod_inertia + m2 * l * l
        r1 = qx - m2 * l * w2 * w2 * u[0]
        det = m11 * m22 - m12 * m12
        a = Coordinates(crank=alpha, rod=(m11 * qphi - m12 * r1) / det, slider=(m22 * r1 - m12 * qphi) / det)
    return a, mem[None], (jf,)


def _accel_both(cfg, p, q, v, aux, t):
    with integrate.stage("kinematics"):
        b, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        u, w2 = q.rod, v.rod
        up = perp(u)
        g2, vg = q.rod_centre, v.rod_centre
        l = 0.5 * p.rod_length
        jp1 = jax.tree_util.tree_map(lambda x: x[0], p.joint)
        jp2 = jax.tree_util.tree_map(lambda x: x[1], p.joint)
        kin1 = joints.JointKinematics(b, vb, v.crank, g2 - l * u, vg - l * w2 * up, u, w2)
        kin2 = _in_slider(g2 + l * u, vg + l * w2 * up, w2, q.slider, v.slider)
    jf1, mem1 = joints.evaluate(cfg.joint, jp1, kin1, aux[0])
    jf2, mem2 = joints.evaluate(cfg.joint, jp2, kin2, aux[1])
    with integrate.stage("equations_of_motion"):
        tau = joints.moment(-jf1.f_slots, jf1.p_b, g2) + joints.moment(jf2.f_slots, jf2.p_j, g2)
        a = Coordinates(
            crank=alpha,
            rod=tau / p.rod_inertia,
            slider=-jf2.force[0] / p.slider_mass,
            rod_centre=(-jf1.force + jf2.force) / p.rod_mass + _gravity(p),
        )
    return a, jnp.stack([mem1, mem2]), (jf1, jf2)


def initial_state(cfg: Config, p: Params):
    """Top dead centre, journals centred, every body at the ideal mechanism's velocity:
    θ = 0 (crank along +x), φ₂ = 0, x₃ = r + L; θ̇ = ω (0 with a ramp), φ̇₂ = −r θ̇/L, ẋ₃ = 0.
    Returns (q, v, aux): named coordinates and the (J, M) impact memory of the joints."""
    r, L = p.crank_length, p.rod_length
    dt = jnp.result_type(r)
    w = jnp.where(p.ramp_time > 0, 0.0, p.crank_speed)
    one, zero = jnp.ones((), dt), jnp.zeros((), dt)
    pair = jnp.stack([one, zero])
    both = cfg.clearance_joint == "both"
    q = Coordinates(crank=pair, rod=pair, slider=r + L, rod_centre=jnp.stack([r + 0.5 * L, zero]) if both else None)
    v = Coordinates(crank=w, rod=-r * w / L, slider=zero, rod_centre=jnp.stack([zero, 0.5 * r * w]) if both else None)
    aux = jnp.stack([joints.initial_memory(cfg.joint, dt) for _ in range(cfg.n_joints)])
    return q, v, aux


_ACCEL = {"rod_slider": _accel_rod_slider, "crank_rod": _accel_crank_rod, "both": _accel_both}


# ----------------------------------------------------------------------------- ideal mechanism


def ideal(p: Params, t):
    """Ideal (no clearance) slider-crank by closed-form kinematics and inverse dynamics.

    θ(t) from the driver; sin φ₂ = −r sin θ / L, x₃ = r cos θ + L cos φ₂; slider Newton
    m₃ẍ₃ = R_x; rod Newton–Euler gives the joint reactions R_C (rod–slider, on the slider)
    and R_B (crank–rod, on the rod).  Returns a dict of arrays over t: slider acceleration
    [m/s²], |R_C| and |R_B| [N], and the kinematics.
    """
    theta, wd, al = drivers.crank_ramp(t, p.crank_speed, p.ramp_time)
    r, L, l = p.crank_length, p.rod_length, 0.5 * p.rod_length
    ct, st = jnp.cos(theta), jnp.sin(theta)
    sp = -r * st / L
    cp = jnp.sqrt(1.0 - sp * sp)
    pd = -r * wd * ct / (L * cp)
    pdd = (-r * (al * ct - wd * wd * st) + L * pd * pd * sp) / (L * cp)
    abx = r * (-al * st - wd * wd * ct)
    aby = r * (al * ct - wd * wd * st)
    xdd = abx - L * (pdd * sp + pd * pd * cp)
    agx = abx + l * (-pdd * sp - pd * pd * cp)
    agy = aby + l * (pdd * cp - pd * pd * sp)
    m2, m3 = p.rod_mass, p.slider_mass
    rcx = m3 * xdd
    # Rod: m₂a_G = R_B − R_C + m₂g,  J₂φ̈ = −l u × (R_B + R_C)  ⇒  u × R_C = −(J₂φ̈/l + u × (m₂a_G − m₂g))/2
    fx, fy = m2 * agx, m2 * agy + m2 * p.gravity
    uxf = cp * fy - sp * fx
    x_cross = -(p.rod_inertia * pdd / l + uxf) / 2.0
    rcy = (x_cross + sp * rcx) / cp
    rbx, rby = fx + rcx, fy + rcy
    return {
        "theta": theta,
        "slider_acceleration": xdd,
        "slider_position": r * ct + L * cp,
        "rod_angle": jnp.arcsin(sp),
        "reaction_rod_slider": jnp.hypot(rcx, rcy),
        "reaction_crank_rod": jnp.hypot(rbx, rby),
    }


def ideal_peaks(p: Params, t_end, steady_start, n_samples: int = 20001):
    """Peaks of the ideal mechanism over [0, t_end] and [steady_start, t_end] (sampled)."""
    t = jnp.linspace(0.0, 1.0, n_samples) * t_end
    ts = steady_start + jnp.linspace(0.0, 1.0, n_samples) * (t_end - steady_start)
    full, st = ideal(p, t), ideal(p, ts)
    keys = ("slider_acceleration", "reaction_rod_slider", "reaction_crank_rod")
    return ({k: jnp.max(jnp.abs(full[k])) for k in keys}, {k: jnp.max(jnp.abs(st[k])) for k in keys})


# ----------------------------------------------------------------------------- sweep protocol

# profile.window_points = W > 0: contact.detect_window on the W points around the pin direction
# (same results as the full pass unless window_overflow_steps > 0); 0 = off.
PROFILE = _clearance.extend_profile(
    Param("window_points", 0, "windowed detection on W points around the pin direction (0: off)", range=(0, 4096))
)


def _check_geometry(cols):
    r, L = np.asarray(cols["model.crank_length_m"], float), np.asarray(cols["model.rod_length_m"], float)
    if np.any(L <= r):
        raise SpecError(
            f"model.rod_length_m = {float(np.min(L))!r} must exceed model.crank_length_m = {float(np.max(r))!r}"
        )


def _steady_start(spec, p, t_end):
    """The last integrator.steady_revolutions crank revolutions before t_end (at full speed)."""
    return jnp.maximum(t_end - spec["integrator"]["steady_revolutions"] * (2 * math.pi / p.crank_speed), 0.0)


def _effective_mass(p, clearance_joint):
    """The lighter of the rod and the slider (stability bound)."""
    return jnp.minimum(p.rod_mass, p.slider_mass)


MECHANISM = crank_linkage.CrankLinkage(
    name="slider_crank",
    model=MODEL,
    joints=JOINTS,
    config=Config,
    params_cls=Params,
    accel=_ACCEL,
    initial_state=initial_state,
    channels=CHANNELS,
    default_outputs=DEFAULT_OUTPUTS,
    acc_key="slider_acceleration",
    acc_unit="_m_per_s2",
    acc_of=lambda a: a.slider,
    ideal_peaks=ideal_peaks,
    samples=(1024, 2048),  # ≥ 1024 per revolution: peak sampling error < 1e-5
    steady_start=_steady_start,
    effective_mass=_effective_mass,
    check_geometry=_check_geometry,
    steady_doc="of each variant, t >= t_end - steady_revolutions*60/crank_speed_rpm",
    profile=PROFILE,
    float32_scale=lambda cols: np.max(
        np.asarray(cols["model.crank_length_m"]) + np.asarray(cols["model.rod_length_m"])
    ),
)
simulate, stability_dt, STUDY_METRICS = MECHANISM.simulate, MECHANISM.stability_dt, MECHANISM.STUDY_METRICS
Result = crank_linkage.Result
