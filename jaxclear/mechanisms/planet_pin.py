"""A planet gear on a 3D cylindrical clearance joint in its carrier, loaded by a helical mesh.

The reduced test of Virlez, Brüls, Tromme & Duysinx (2013), "Modeling joints with clearance and
friction in multibody dynamic simulation of automotive differentials", Theor. Appl. Mech. Lett.
3:013003: a Torsen (type C) planet sits without an axle in a cylindrical cavity of the
housing; its tooth tips bear on the cavity wall (``jaxclear.cylindrical_joint``: the planet is
the pin, R_B its tip radius, L its face width), a thrust washer and the housing limit its axial
travel (axial gap), the housing is clamped (the source's test) or turns with the carrier (below).
A sun torque T(t) ramps linearly from 0 to T_max over
``ramp_time_s``, then linearly to −T_max over ``reversal_time_s`` and holds −T_max over
``hold_time_s`` (the source ramps to about 10 N·m and reverses).

Mesh load on the planet (quasi-static helical mesh, the sun at −x of the planet, the line of
centres along x; Shigley's Mechanical Engineering Design, 10th ed., §13-16):

    W_t = T / r_s (along +y for T > 0),   W_r = |W_t| tan α_n / cos β (along +x, separating),
    W_a = W_t tan β (along +z),

applied at the pitch point x_P = x_planet − r_p e_x: the moment about the planet's centre is
r_p W_a e_y, the helical tilting moment (the r_p W_t spin moment is carried by the planet's
second mesh in the differential and is not applied).  The planet's spin about its axis is held
to n_p (``planet_speed_rpm``, the test rig's prescribed speed) by the mesh: a torsional spring
k = k_m r_b² (k_m the mesh stiffness, r_b = r_p cos α_n) on the twist angle error ψ − ω_p t
(ψ = 2 atan2(q_z, q_w), the twist of the swing-twist split of the orientation) with damping
2ζ√(k I_a); the **resisting torque** is the joint's friction
moment about the planet axis, −b·M_joint (positive when it brakes the spin), the quantity of the
source's Fig. 7.

Rotating carrier (``carrier_speed_rpm`` Ω, ``carrier_radius_m`` r_c; optional keys, absent: the
clamped housing, today's model bit for bit): the housing is body A of
``cylindrical_joint.housing_loads`` on the prescribed rotation θ = Ω t about the carrier axis, the
line through (−r_c, 0, 0) along e_z at t = 0, parallel to the nominal planet axis on the sun's side
(the sun's axis in a planetary set: r_c = r_s + r_p for standard gears, the default 30 mm):

    R_c = R_z(Ω t),   x_A = (−r_c, 0, 0) + R_c (r_c, 0, 0),   v_A = Ω e_z × (x_A + (r_c, 0, 0)),   ω_A = Ω e_z.

The mesh load above is written in the carrier frame and turned by R_c (the sun stays on the
carrier axis); the planet starts at the hole centre with the carrier's motion (v = Ω r_c e_y,
ω = ω_p b + Ω e_z), and the end-centre offsets are reported in the carrier frame (R_cᵀ d).  The
spin spring holds the spin **relative to the carrier**: with the world-frame twist it held the
planet's absolute spin to ω_p, i.e. its spin in the housing to ω_p − Ω, and the joint's friction
then saw the wrong sliding speed; twists about the common axis e_z add, so the relative twist is
ψ − Ω t and the relative axial rate ω_z − Ω (Rᵀ e_z)_z.  At rest in the carrier the planet is
pressed on the outward side of the hole (+x) by the centrifugal force m Ω² (r_c + |d|).

Outputs: trajectories of the top and bottom end centres in the hole (the source's Fig. 5),
contact force against penetration over the first impact (its Fig. 6, re-simulated step by step
in the plots), tilt angle, resisting torque; metrics per contact end (SI units in the names).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import cylindrical_joint as cj
from .. import integrate, laws, metrics, rigid3d
from .. import spec as specmod
from ..schema import NONNEGATIVE, POSITIVE, Param, Table
from ..spec import SpecError
from . import _cylindrical, declared, params_type
from ._cylindrical import IMPACT_VELOCITY

DEG = math.pi / 180.0
NAME = "planet_pin"

# --- default planet (each value's source in its Param doc and docs/cylindrical_joint.md) ---
_R_TIP = 13.5e-3  # tip radius: r_p + m_n (module 1.5 mm, r_p = 12 mm)
_FACE = 20e-3  # face width
_CLEAR = 50e-6  # radial clearance of the cavity
_RHO = 7850.0  # steel density [kg/m³]
_MASS = _RHO * math.pi * _R_TIP**2 * _FACE  # solid steel cylinder: 0.090 kg
_I_AX = 0.5 * _MASS * _R_TIP**2  # 8.2e-6 kg·m²
_I_TR = _MASS * (3 * _R_TIP**2 + _FACE**2) / 12.0  # 7.1e-6 kg·m²
_SIGMA = 2 * (1 - 0.3**2) / 207e9  # steel on steel, σ_A + σ_B [1/Pa]
_K_RAD = 4.0 / (3.0 * _SIGMA) * math.sqrt(_R_TIP * (_R_TIP + _CLEAR) / _CLEAR)  # 2.9e11 N/m^1.5
_K_AX = 4.0 / (3.0 * _SIGMA) * math.sqrt(_R_TIP)  # Hertz sphere R_B on a flat: 1.8e10
_R_ORBIT = 18e-3 + 12e-3  # carrier radius: r_s + r_p, the sun–planet centre distance (standard gears)

OUTPUT_CHANNELS = {
    "top_x_m": "x offset of the top end centre from the hole axis (carrier frame)",
    "top_y_m": "y offset of the top end centre from the hole axis (carrier frame)",
    "bottom_x_m": "x offset of the bottom end centre from the hole axis (carrier frame)",
    "bottom_y_m": "y offset of the bottom end centre from the hole axis (carrier frame)",
    "contact_force_N": "normal force per contact (top, bottom, axial_top, axial_bottom), block maximum",
    "penetration_m": "penetration per contact (top, bottom, axial_top, axial_bottom)",
    "tilt_rad": "angle between the planet and hole axes",
    "axial_position_m": "planet centre along the hole axis",
    "resisting_torque_N_m": "joint friction moment braking the planet spin",
    "sun_torque_N_m": "applied sun torque T(t)",
}
DEFAULT_OUTPUTS = [
    "top_x_m",
    "top_y_m",
    "bottom_x_m",
    "bottom_y_m",
    "contact_force_N",
    "tilt_rad",
    "resisting_torque_N_m",
    "sun_torque_N_m",
]

MODEL = Table(
    "model",
    (
        Param("mechanism", NAME, "registered mechanism name"),
        Param(
            "planet_mass_kg",
            _MASS,
            "planet mass (solid steel cylinder r = 13.5 mm, L = 20 mm, ρ = 7850 kg/m³)",
            range=POSITIVE,
            field="mass",
        ),
        Param(
            "planet_axial_inertia_kg_m2",
            _I_AX,
            "planet moment of inertia about its axis (½ m R²)",
            range=POSITIVE,
            field="inertia_axial",
        ),
        Param(
            "planet_transverse_inertia_kg_m2",
            _I_TR,
            "planet moment of inertia about a diameter (m (3R² + L²)/12)",
            range=POSITIVE,
            field="inertia_transverse",
        ),
        Param(
            "planet_pitch_radius_m",
            12e-3,
            "planet pitch radius r_p (16 teeth × 1.5 mm module / 2: a Torsen-size planet)",
            range=(0.0, 1.0, False),
            field="r_p",
        ),
        Param(
            "sun_pitch_radius_m", 18e-3, "sun pitch radius r_s (W_t = T / r_s)", range=(0.0, 1.0, False), field="r_s"
        ),
        Param(
            "helix_angle_deg",
            20.0,
            "helix angle β (automotive helical gears: 15–30°)",
            range=(0.0, 45.0, True),
            field="helix",
            scale=DEG,
        ),
        Param(
            "pressure_angle_deg",
            20.0,
            "normal pressure angle α_n (ISO 53 basic rack)",
            range=(10.0, 30.0, True),
            field="pressure",
            scale=DEG,
        ),
        Param(
            "sun_torque_N_m",
            10.0,
            "peak sun torque T_max (the source ramps to about 10 N·m)",
            range=(-1e4, 1e4, True),
            field="torque",
            unit="N·m",
        ),
        Param("ramp_time_s", 0.2, "T rises linearly from 0 to T_max over this time", range=POSITIVE, field="t_ramp"),
        Param(
            "reversal_time_s",
            0.4,
            "then falls linearly from T_max to −T_max over this time",
            range=POSITIVE,
            field="t_reverse",
        ),
        Param("hold_time_s", 0.05, "then holds −T_max over this time", range=NONNEGATIVE, field="t_hold"),
        Param(
            "planet_speed_rpm",
            100.0,
            "prescribed planet spin speed n_p about its axis",
            range=(-1e5, 1e5, True),
            field="spin",
            scale=2 * math.pi / 60,
        ),
        Param(
            "mesh_stiffness_N_per_m",
            4e8,
            "mesh stiffness along the line of action holding the spin (ISO 6336-1: "
            "c_γ ≈ 20 N/(mm·µm) × 20 mm face width)",
            range=POSITIVE,
            field="mesh_stiffness",
        ),
        Param(
            "mesh_damping_ratio",
            0.1,
            "damping ratio of the spin held by the mesh (0.03–0.17 in the gear dynamics literature)",
            range=(0.0, 2.0, True),
            field="mesh_damping",
        ),
        Param(
            "misalignment_x_deg",
            0.0,
            "hole axis turned about x from z",
            range=(-5.0, 5.0, True),
            field="misalign_x",
            scale=DEG,
        ),
        Param(
            "misalignment_y_deg",
            0.0,
            "hole axis turned about y from z (then)",
            range=(-5.0, 5.0, True),
            field="misalign_y",
            scale=DEG,
        ),
        Param(
            "initial_tilt_deg",
            0.0,
            "initial tilt of the planet axis about x",
            range=(-5.0, 5.0, True),
            field="tilt0",
            scale=DEG,
        ),
        Param(
            "carrier_speed_rpm",
            0.0,
            "carrier (housing) speed Ω about the differential axis (parallel to z, "
            "through (−r_c, 0, 0) at t = 0); absent: 0, the clamped housing of the source's test",
            range=(-1e5, 1e5, True),
            field="carrier_speed",
            scale=2 * math.pi / 60,
            optional=True,
        ),
        Param(
            "carrier_radius_m",
            _R_ORBIT,
            "orbit radius r_c of the planet centre about the carrier axis (absent: "
            "0.03 m, r_s + r_p of the default gears, the sun–planet centre distance of standard gears); needs "
            "carrier_speed_rpm",
            range=(0.0, 1.0, True),
            field="carrier_radius",
            optional=True,
        ),
    ),
    doc="planet gear, sun-torque history (Virlez et al. 2013's reduced Torsen test)",
)
JOINT = Table(
    "joint",
    (
        Param(
            "pin_radius_m",
            _R_TIP,
            "planet tip radius R_B: the teeth tips bear on the cavity",
            range=(0.0, 1.0, False),
            field="pin_radius",
        ),
        Param(
            "clearance_m",
            _CLEAR,
            "radial clearance c = R_A − R_B (ISO 286 H8/e8 running fit at ⌀27 mm: 20–56 µm radial)",
            range=(0.0, 0.01, False),
            guard=(1e-2, ">=", "the clearance is in metres"),
            field="clearance",
        ),
        Param(
            "length_m", _FACE, "planet face width L (end-sphere centres ±L/2)", range=(0.0, 1.0, False), field="length"
        ),
        Param(
            "axial_gap_m",
            0.1e-3,
            "total axial end play between housing and thrust washer",
            range=(0.0, 0.01, True),
            field="axial_gap",
        ),
        Param(
            "face_smoothing_rad",
            1e-4,
            "tilt over which the end-face contact point slides from the rim to the centre (cylindrical_joint)",
            range=(0.0, 0.1, True),
            field="face_smoothing",
        ),
    ),
    doc="the 3D cylindrical clearance joint (jaxclear.cylindrical_joint)",
)
LAWS = Table(
    "laws",
    (
        Param(
            "normal",
            "flores",
            "normal-force law (the source: K δ^1.5 + 8(1−e)K/(5eδ̇⁻) δ^1.5 δ̇ = flores)",
            choices=laws.NORMAL_LAWS,
        ),
        IMPACT_VELOCITY,
        Param(
            "stiffness_N_per_m_n",
            _K_RAD,
            "radial contact stiffness K (laws.internal_cylinder_stiffness, steel "
            "207 GPa, ν = 0.3, R_B = 13.5 mm, c = 50 µm)",
            range=POSITIVE,
            field="stiffness",
        ),
        Param(
            "axial_stiffness_N_per_m_n",
            _K_AX,
            "end-face stiffness (Hertz sphere of radius R_B on a flat, Johnson 1985 eq. 4.22)",
            range=POSITIVE,
            field="axial_stiffness",
        ),
        Param("exponent", 1.5, "exponent n", range=(1.0, 3.0, True), field="exponent"),
        Param(
            "restitution",
            0.8,
            "coefficient of restitution e (the source's 0.8, metal on metal)",
            range=(0.0, 1.0, False),
            field="restitution",
        ),
        Param("damping_N_s_per_m", 0.0, "viscous damping of the linear law", range=NONNEGATIVE, field="damping"),
    ),
    doc="contact laws of the joint",
)
FRICTION = Table(
    "friction",
    (
        Param("model", "coulomb", "friction law", choices=laws.FRICTION_MODELS),
        Param(
            "coefficient",
            0.1,
            "kinetic friction coefficient μ (lubricated steel on steel)",
            range=(0.0, 10.0, True),
            field="friction_coefficient",
        ),
        Param("v0_m_per_s", 1e-4, "regularisation speed v0", range=(0.0, 1.0, False), field="v0"),
        Param("v1_m_per_s", 1e-3, "full-friction speed v1 (ambrosio, threlfall)", range=(0.0, 1.0, False), field="v1"),
    ),
    doc="friction on the joint's contacts",
)
TABLES = [
    MODEL,
    JOINT,
    LAWS,
    FRICTION,
    specmod.integrator_table(rigid3d.SCHEMES, "verlet_predicted", dt_s=1e-6, save_every=200),
    specmod.outputs_table(OUTPUT_CHANNELS, DEFAULT_OUTPUTS, plot_variants=4),
]
_ALL = Table("all", MODEL.params + JOINT.params + LAWS.params + FRICTION.params)
Params = params_type("Params", _ALL)


class Result(NamedTuple):
    """history {channel: (n_saves,) or (n_saves, 4)}; acc: metrics.Packed over the 4 contacts;
    max_tilt [rad]; first_impact_time [s]; last onset times [s] of a radial impact before and
    after the reversal; resisting torque mean over the hold [N·m] and peak; finite."""

    history: dict
    acc: metrics.Packed
    max_tilt: jnp.ndarray
    first_impact_time: jnp.ndarray
    last_onset_loading: jnp.ndarray
    last_onset_reversal: jnp.ndarray
    hold_torque: jnp.ndarray
    peak_resisting_torque: jnp.ndarray
    finite: jnp.ndarray


# ------------------------------------------------------------------------------- spec protocol
@dataclass(frozen=True)
class Config(_cylindrical.Config):
    """The shared static configuration plus carrier: whether the carrier moves (the spec gives or
    sweeps ``model.carrier_speed_rpm``); False: the clamped housing, today's model exactly."""

    carrier: bool = False


def validate_spec(spec):
    """The shared static checks; a carrier radius without a carrier speed would do nothing."""
    _cylindrical.validate_spec(spec)
    _cylindrical.refuse_unpaired(
        spec,
        "carrier_radius_m",
        "carrier_speed_rpm",
        "the carrier is clamped and its radius does nothing; give model.carrier_speed_rpm "
        "(0 allowed) or remove the radius",
    )


def make_config(spec, t_end):
    carrier = _cylindrical.given(spec, "carrier_speed_rpm")
    return Config(**asdict(_cylindrical.make_config(spec, t_end)), carrier=carrier)


def check_values(cols):
    a = lambda k: np.asarray(cols[k], float)
    R, c, L = a("joint.pin_radius_m"), a("joint.clearance_m"), a("joint.length_m")
    if np.any(c >= R):
        raise SpecError(
            f"joint.clearance_m = {float(np.max(c))!r} must be smaller than joint.pin_radius_m = {float(np.min(R))!r}"
        )
    # the planet must fit in the hole at t = 0: relative tilt φ between the axes, (L/2) sin φ < c
    ax = np.stack(
        [
            np.cos(a("model.misalignment_x_deg") * DEG) * np.sin(a("model.misalignment_y_deg") * DEG),
            -np.sin(a("model.misalignment_x_deg") * DEG),
            np.cos(a("model.misalignment_x_deg") * DEG) * np.cos(a("model.misalignment_y_deg") * DEG),
        ]
    )
    t0 = a("model.initial_tilt_deg") * DEG
    b = np.stack([np.zeros_like(t0), -np.sin(t0), np.cos(t0)])
    sin_phi = np.linalg.norm(np.cross(ax, b, axis=0), axis=0)
    reach = 0.5 * L * sin_phi
    reach, c_, t0_ = np.broadcast_arrays(np.atleast_1d(reach), np.atleast_1d(c), np.atleast_1d(t0))
    if np.any(reach >= c_):
        i = int(np.argmax(reach / c_))
        raise SpecError(
            f"model.initial_tilt_deg = {float(t0_[i] / DEG)!r} with the misalignment puts the planet's "
            f"ends {float(reach[i]):.3g} m off the hole axis, beyond joint.clearance_m = {float(c_[i])!r}: "
            "the relative tilt φ must satisfy (L/2)·sin φ < c"
        )
    if np.any(a("friction.v1_m_per_s") <= a("friction.v0_m_per_s")):
        raise SpecError("friction.v1_m_per_s must exceed friction.v0_m_per_s")


def t_end(spec, cols):
    """integrator.t_end_s, or ramp + reversal + hold of the longest variant [s]."""
    te = spec["integrator"]["t_end_s"]
    if te > 0:
        return te
    tot = sum(np.asarray(cols[f"model.{k}"], float) for k in ("ramp_time_s", "reversal_time_s", "hold_time_s"))
    return float(np.max(tot))


def params(spec, cfg, flat, dtype, t_end):
    """Params of one variant; an optional key absent from the spec takes its declared default."""
    return Params(**{k: v for t in (MODEL, JOINT, LAWS, FRICTION) for k, v in declared(t, flat, dtype).items()})


def _linear_stiffness(p: Params):
    """Contact stiffness linearised at 20× (the peak mesh resultant + the centrifugal force
    m Ω² r_c) [N/m]."""
    wt = jnp.abs(p.torque) / p.r_s
    f_ref = 20.0 * (
        wt * jnp.sqrt(1.0 + (jnp.tan(p.pressure) / jnp.cos(p.helix)) ** 2 + jnp.tan(p.helix) ** 2)
        + p.mass * p.carrier_speed**2 * p.carrier_radius
    )
    n = p.exponent
    k = jnp.maximum(p.stiffness, p.axial_stiffness)
    return n * k ** (1.0 / n) * f_ref ** ((n - 1.0) / n)


def check_params(spec, cfg, p, name):
    """The step must resolve the contact: dt below the stability bound of the contact linearised
    at 20× the peak mesh load on the smaller of the planet's mass and I_t/(L/2)² (tilting)."""
    if not cfg.carrier and np.any(np.asarray(p.carrier_speed) != 0):
        raise SpecError(
            "params with a carrier speed need a Config with carrier = True (make_config of a spec that "
            "gives model.carrier_speed_rpm)"
        )
    m_eff = jnp.minimum(p.mass, p.inertia_transverse / (0.5 * p.length) ** 2)
    k_spin = p.mesh_stiffness * (p.r_p * jnp.cos(p.pressure)) ** 2
    spin = np.asarray(
        integrate.stability_bound(
            cfg.scheme if cfg.scheme != "symplectic_euler" else "leapfrog", k_spin, p.inertia_axial, p.mesh_damping
        )
    )
    if np.any(cfg.dt > spin):
        i = int(np.argmin(np.atleast_1d(spin)))
        raise SpecError(
            f"integrator.dt_s = {cfg.dt:g} exceeds the stability bound {np.atleast_1d(spin)[i]:.3g} s of "
            f"the mesh's torsional spring ({name(i)}); lower dt_s or model.mesh_stiffness_N_per_m"
        )
    chi = laws.hysteresis_factor(cfg.normal_law, p.restitution) if cfg.normal_law in laws.HYSTERESIS_MODELS else 0.0
    zeta = integrate.hysteresis_damping_ratio(chi, p.exponent)
    bound = np.asarray(
        integrate.stability_bound(
            cfg.scheme if cfg.scheme != "symplectic_euler" else "leapfrog", _linear_stiffness(p), m_eff, zeta
        )
    )
    bound = np.broadcast_to(bound, np.shape(bound))
    if np.any(cfg.dt > bound):
        i = int(np.argmin(np.atleast_1d(bound)))
        raise SpecError(
            f"integrator.dt_s = {cfg.dt:g} exceeds the stability bound {np.atleast_1d(bound)[i]:.3g} s of "
            f"the contact ({name(i)}); lower dt_s"
        )


def joint_names(cfg):
    return cj.CONTACTS


def describe(spec, cfg):
    return {
        "contacts": list(cj.CONTACTS),
        "contact_law": cfg.normal_law,
        "friction": cfg.friction,
        "scheme_order": 2 if cfg.scheme == "verlet_predicted" else 1,
    }


# ------------------------------------------------------------------------------- physics
def sun_torque(p: Params, t):
    """T(t) [N·m]: 0 → T_max over t_ramp, → −T_max over t_reverse, then held."""
    t1, t2 = p.t_ramp, p.t_ramp + p.t_reverse
    up = p.torque * t / t1
    down = p.torque * (1.0 - 2.0 * (t - t1) / p.t_reverse)
    return jnp.where(t < t1, up, jnp.where(t < t2, down, -p.torque))


def carrier(p: Params, t):
    """The carrier's (body A's) prescribed motion at t [s]: (x [m] the hole centre, R (3, 3),
    v [m/s], w [rad/s]), world frame: rotation θ = Ω t about e_z through (−r_c, 0, 0), so
    x = (−r_c, 0, 0) + R_z(θ) (r_c, 0, 0), v = Ω e_z × (x + (r_c, 0, 0)), w = Ω e_z (module
    docstring).  Ω = 0: at rest at the origin, R = I."""
    th = p.carrier_speed * t
    c, s = jnp.cos(th), jnp.sin(th)
    zero, one = jnp.zeros_like(c), jnp.ones_like(c)
    R = jnp.stack([jnp.stack([c, -s, zero]), jnp.stack([s, c, zero]), jnp.stack([zero, zero, one])])
    arm = jnp.stack([p.carrier_radius * c, p.carrier_radius * s, zero])  # carrier axis → hole centre
    x = jnp.stack([-p.carrier_radius, zero, zero]) + arm
    v = jnp.stack([-p.carrier_speed * arm[1], p.carrier_speed * arm[0], zero])
    w = jnp.stack([zero, zero, p.carrier_speed * one])
    return x, R, v, w


def mesh_load(p: Params, t):
    """(force [N] on the planet, moment [N·m] about its centre) in the carrier frame (world frame
    when the carrier is at rest; module docstring)."""
    wt = sun_torque(p, t) / p.r_s
    wr = jnp.abs(wt) * jnp.tan(p.pressure) / jnp.cos(p.helix)
    wa = wt * jnp.tan(p.helix)
    zero = jnp.zeros_like(wt)
    force = jnp.stack([wr, wt, wa])
    moment = jnp.stack([zero, p.r_p * wa, zero])  # (−r_p e_x) × (W_a e_z)
    return force, moment


def joint_params(p: Params):
    z = jnp.zeros(3, p.pin_radius.dtype)
    e3 = jnp.array([0.0, 0.0, 1.0], p.pin_radius.dtype)
    return cj.Params(
        p.pin_radius,
        p.clearance,
        p.length,
        p.axial_gap,
        p.stiffness,
        p.axial_stiffness,
        p.exponent,
        p.restitution,
        p.damping,
        p.friction_coefficient,
        p.v0,
        p.v1,
        cj.misaligned_axis(p.misalign_x, p.misalign_y),
        z,
        e3,
        z,
        p.face_smoothing,
    )


def spin_torque(p: Params, quat, w_body, t, moving=True):
    """Torque [N·m] about the planet axis holding its spin **relative to the carrier** to ω_p:
    −k e − c (ω_rel − ω_p), e = ψ − Ω t − ω_p t the twist-angle error wrapped to (−π, π] (the
    world twist ψ = 2 atan2(q_z, q_w) less the carrier's angle: twists about the common axis e_z
    add), ω_rel = ω_z − Ω (Rᵀ e_z)_z the body-frame axial rate less the carrier's (module
    docstring).  w_body (3,) [rad/s] the planet's body-frame angular velocity; moving (static):
    False drops the carrier's terms (Ω = 0, the clamped housing)."""
    k = p.mesh_stiffness * (p.r_p * jnp.cos(p.pressure)) ** 2
    c = 2.0 * p.mesh_damping * jnp.sqrt(k * p.inertia_axial)
    if moving:
        R = rigid3d.quat_to_matrix(quat)
        e = 2.0 * jnp.arctan2(quat[3], quat[0]) - p.carrier_speed * t - p.spin * t
        rate = w_body[2] - p.carrier_speed * R[2, 2]
    else:
        e = 2.0 * jnp.arctan2(quat[3], quat[0]) - p.spin * t
        rate = w_body[2]
    e = jnp.arctan2(jnp.sin(e), jnp.cos(e))
    return -k * e - c * (rate - p.spin)


def _external(moving):
    """external(p, q, v, t) -> (F [N], τ [N·m]) world: the mesh load turned with the carrier
    and the spin torque along the planet axis b."""

    def external(p: Params, q, v, t):
        f, m = mesh_load(p, t)
        if moving:
            _, Rc, _, _ = carrier(p, t)
            f, m = Rc @ f, Rc @ m
        b = rigid3d.quat_to_matrix(q.quat[0])[:, 2]
        return f, m + spin_torque(p, q.quat[0], v.w[0], t, moving) * b

    return external


def _loads(cfg: Config):
    return cj.housing_loads(cfg.joint, joint_params, carrier if cfg.carrier else None, _external(cfg.carrier))


def _bodies(p: Params):
    mass = p.mass[None]
    inertia = jnp.stack([p.inertia_transverse, p.inertia_transverse, p.inertia_axial])[None]
    return mass, inertia


def initial_state(cfg: Config, p: Params):
    """The planet at the hole centre moving with the carrier: v = Ω e_z × (r_c, 0, 0), body-frame
    ω = ω_p e_z + Rᵀ Ω e_z (its spin ω_p relative to the carrier)."""
    dtype = p.mass.dtype
    loads = _loads(cfg)
    quat = rigid3d.quat_exp(jnp.stack([p.tilt0, 0.0 * p.tilt0, 0.0 * p.tilt0]))[None]
    q0 = rigid3d.Pose(jnp.zeros((1, 3), dtype), quat)
    w0 = jnp.stack([0.0 * p.spin, 0.0 * p.spin, p.spin])
    if cfg.carrier:  # the carrier's point at the hole centre is the planet's centre
        _, _, vc, wc = carrier(p, jnp.zeros((), dtype))
        v0 = rigid3d.Twist(vc[None], (w0 + rigid3d.quat_to_matrix(quat[0]).T @ wc)[None])
    else:
        v0 = rigid3d.Twist(jnp.zeros((1, 3), dtype), w0[None])
    mass, inertia = _bodies(p)
    return rigid3d.initial_state(
        rigid3d.make_accel(mass, inertia, loads), p, q0, v0, cj.initial_memory(cfg.joint, dtype)
    )


def make_step(cfg: Config):
    loads = _loads(cfg)

    def step(p, s, i):
        mass, inertia = _bodies(p)
        inner = rigid3d.make_step(cfg.scheme, mass, inertia, loads, cfg.dt)
        s1, (f, fe, te) = inner(p, s, i)
        t = (jnp.asarray(i, s.q.x.dtype) + 1.0) * cfg.dt
        b = rigid3d.quat_to_matrix(s1.q.quat[0])[:, 2]
        resisting = -(b @ f.moment_b)
        if cfg.carrier:
            _, Rc, _, _ = carrier(p, t)
            f = f._replace(offset=f.offset @ Rc)  # end-centre offsets in the carrier frame: Rᵀ d
        return s1, (f, resisting, sun_torque(p, t), t)

    return step


def _channels(cfg, o):
    f, resisting, torque, _ = o
    full = {
        "top_x_m": f.offset[0, 0],
        "top_y_m": f.offset[0, 1],
        "bottom_x_m": f.offset[1, 0],
        "bottom_y_m": f.offset[1, 1],
        "penetration_m": f.depth,
        "tilt_rad": f.tilt,
        "axial_position_m": f.axial,
        "resisting_torque_N_m": resisting,
        "sun_torque_N_m": torque,
    }
    return {k: full[k] for k in cfg.outputs if k != "contact_force_N"}


def simulate(cfg: Config, p: Params) -> Result:
    """One variant (pure; vmap over p): the planet from rest at the hole centre under the mesh load."""
    dtype = p.mass.dtype
    step = make_step(cfg)
    s0 = initial_state(cfg, p)
    t_cross = p.t_ramp + 0.5 * p.t_reverse  # the load's sign change
    t_hold = p.t_ramp + p.t_reverse
    zero = jnp.zeros((), dtype)
    big = jnp.asarray(jnp.inf, dtype)
    acc0 = (metrics.init(4, dtype), zero, big, -big, -big, zero, zero, zero)

    def reduce(acc, o, i):
        m, tilt, first, lo_load, lo_rev, tq_sum, tq_n, tq_peak = acc
        f, resisting, _, t = o
        onset = jnp.any(f.started[:2])
        m = metrics.update(
            m,
            f.normal_force,
            jnp.zeros((), dtype),
            f.active,
            f.started.astype(jnp.int32),
            f.active.astype(jnp.int32),
            jnp.ones((), bool),
            1,
            penetration=f.depth,
        )
        first = jnp.where(onset, jnp.minimum(first, t), first)
        lo_load = jnp.where(onset & (t < t_cross), t, lo_load)
        lo_rev = jnp.where(onset & (t >= t_cross), t, lo_rev)
        in_hold = (t >= t_hold).astype(dtype)
        return (
            m,
            jnp.maximum(tilt, f.tilt),
            first,
            lo_load,
            lo_rev,
            tq_sum + in_hold * resisting,
            tq_n + in_hold,
            jnp.maximum(tq_peak, jnp.abs(resisting)),
        )

    save = (lambda o: _channels(cfg, o)) if cfg.outputs else None
    block_max = (lambda o: {"contact_force_N": o[0].normal_force}) if "contact_force_N" in cfg.outputs else None
    s, acc, hist = integrate.simulate(
        step,
        p,
        s0,
        acc0,
        reduce,
        cfg.n_saves,
        cfg.save_every,
        save=save,
        checkpoint=cfg.checkpoint,
        block_max=block_max,
    )
    m, tilt, first, lo_load, lo_rev, tq_sum, tq_n, tq_peak = acc
    finite = jnp.all(jnp.isfinite(s.q.x)) & jnp.all(jnp.isfinite(s.v.w))
    hold = jnp.where(tq_n > 0, tq_sum / jnp.maximum(tq_n, 1.0), jnp.nan)
    return Result(hist or {}, m, tilt, first, lo_load, lo_rev, hold, tq_peak, finite)


# ------------------------------------------------------------------------------- study, metrics
STUDY_METRICS = ("peak_contact_force_N", "smooth_peak_contact_force_N", "max_tilt_rad")


def study(spec, cfg, t_end):
    """Differentiable metrics of one variant: the exact peak normal force over the four contacts
    (a subgradient), its smooth power-mean peak (metrics.smooth_peak, C¹) and the largest tilt."""
    from ..study import Study

    def evaluate(p):
        r = simulate(replace(cfg, outputs=()), p)
        u = metrics.unpack(r.acc)
        return jnp.stack([jnp.max(u.peak_force), metrics.smooth_peak(u.lse_force, u.steps), r.max_tilt])

    return Study(STUDY_METRICS, evaluate, "smooth_peak_contact_force_N")


def chunk_metrics(spec, cfg, p, res, n_real, t_end):
    r = slice(0, n_real)
    a = lambda x: np.asarray(x)[r]
    u = metrics.unpack(jax.tree_util.tree_map(np.asarray, res.acc))
    peak = np.asarray(u.peak_force)[r]
    imp = np.asarray(u.impacts)[r]
    t_cross = a(p.t_ramp) * np.ones(n_real) + 0.5 * a(p.t_reverse)
    first = a(res.first_impact_time)
    settle_load = np.where(
        np.isfinite(first) & np.isfinite(a(res.last_onset_loading)),
        a(res.last_onset_loading) - np.where(np.isfinite(first), first, 0.0),
        np.nan,
    )
    settle_rev = np.where(np.isfinite(a(res.last_onset_reversal)), a(res.last_onset_reversal) - t_cross, np.nan)
    out = {f"peak_contact_force_{c}_N": peak[:, k] for k, c in enumerate(cj.CONTACTS)}
    out.update(
        {
            "smooth_peak_contact_force_N": np.asarray(metrics.smooth_peak(u.lse_force, u.steps))[r],
            "impacts_top": imp[:, 0].astype(int),
            "impacts_bottom": imp[:, 1].astype(int),
            "impacts_axial": (imp[:, 2] + imp[:, 3]).astype(int),
            "max_penetration_m": np.max(np.asarray(u.max_penetration)[r], axis=1),
            "max_tilt_rad": a(res.max_tilt),
            "first_impact_time_s": np.where(np.isfinite(first), first, np.nan),
            "settle_time_after_loading_s": settle_load,
            "settle_time_after_reversal_s": settle_rev,
            "hold_resisting_torque_N_m": a(res.hold_torque),
            "peak_resisting_torque_N_m": a(res.peak_resisting_torque),
            "finite": a(res.finite) & np.all(np.isfinite(peak), axis=1),
        }
    )
    return out


# ------------------------------------------------------------------------------- plots
@partial(jax.jit, static_argnums=(0, 1))
def _step_by_step(c1: Config, n: int, p: Params):
    """Radial depth and normal force [m, N] (n, 2) of top/bottom at every one of n steps (compiled once per
    config and length, so a rerun's plots reuse it)."""
    save = lambda o: (o[0].depth[:2], o[0].normal_force[:2])
    return integrate.simulate(
        make_step(c1), p, initial_state(c1, p), jnp.zeros(()), lambda a, o, i: a, n, 1, save=save
    )[2]


def first_impact(cfg: Config, p: Params, t_first, window_s=2e-4):
    """(t [s], penetration δ [m] (n, 2) radial top/bottom, normal force [N] (n, 2)) step by step from
    t_first − window/4 to t_first + window: the hysteresis loop of the first impact (one variant)."""
    n = int(math.ceil((t_first + window_s) / cfg.dt))
    c1 = replace(cfg, outputs=("penetration_m",), save_every=1, n_saves=n)
    d, f = _step_by_step(c1, n, p)
    t = (np.arange(n) + 1) * cfg.dt
    keep = t >= t_first - 0.25 * window_s
    return t[keep], np.asarray(d)[keep], np.asarray(f)[keep]


def plots(outdir, spec, table, summary, hists, t):
    """Trajectories of the top and bottom end centres in the hole (one line per plotted variant,
    the clearance circle), tilt / torques against time, and the contact force against the
    penetration over the first impact of variant 0 (re-simulated step by step)."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    from .. import plots as _p

    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    written = []
    t = np.asarray(t)
    idx = _p.pick_variants(table, max(1, int(spec["outputs"]["plot_variants"])))
    axes_cols = [c for c in summary.get("axes", []) if c in table]
    c_of = lambda i: float(table["clearance_m"][i]) if "clearance_m" in table else spec["joint"]["clearance_m"]
    if all(k in hists for k in ("top_x_m", "top_y_m", "bottom_x_m", "bottom_y_m")):
        fig, axs = plt.subplots(1, 2, figsize=(10.5, 4.8))
        for ax, end in zip(axs, ("top", "bottom")):
            for i in idx:
                x, y = 1e6 * np.asarray(hists[f"{end}_x_m"][i]), 1e6 * np.asarray(hists[f"{end}_y_m"][i])
                (line,) = ax.plot(x, y, lw=0.8, label=_p.variant_label(table, axes_cols, i))
                ax.plot(x[:1], y[:1], "o", color=line.get_color(), ms=3)
                th = np.linspace(0, 2 * np.pi, 200)
                ax.plot(1e6 * c_of(i) * np.cos(th), 1e6 * c_of(i) * np.sin(th), ":", color=line.get_color(), lw=0.7)
            ax.set_aspect("equal")
            ax.set_xlabel("x [µm] (away from the sun)")
            ax.set_ylabel("y [µm] (sun's tangential load at T > 0)")
            ax.set_title(f"{end} end centre in the hole (dotted: clearance)", fontsize=9)
        _p._legend_outside(axs[1])
        note = _p.sampling_note(t, spec["integrator"]["save_every"], False).split(";")[0]
        fig.suptitle(f"{summary.get('name', NAME)}: planet end centres ({note}; dot: start)", fontsize=9)
        fig.tight_layout()
        fig.savefig(pdir / "end_centre_trajectories.png", dpi=130, bbox_inches="tight")
        plt.close(fig)
        written.append("plots/end_centre_trajectories.png")
    chans = [c for c in ("sun_torque_N_m", "tilt_rad", "resisting_torque_N_m", "contact_force_N") if c in hists]
    if chans:
        fig, axs = plt.subplots(len(chans), 1, figsize=(9, 1.9 * len(chans)), sharex=True)
        axs = np.atleast_1d(axs)
        for ax, c in zip(axs, chans):
            for i in idx:
                y = np.asarray(hists[c][i])
                scale = 1e3 if c == "tilt_rad" else 1.0
                if c == "contact_force_N":
                    if i == idx[0]:
                        for k, name in enumerate(cj.CONTACTS):
                            ax.plot(t, y[:, k], lw=0.6, label=name)
                    continue
                ax.plot(t, scale * y, lw=0.7, label=_p.variant_label(table, axes_cols, i))
            ylab = {
                "sun_torque_N_m": "sun torque [N·m]",
                "tilt_rad": "tilt [mrad]",
                "resisting_torque_N_m": "resisting torque [N·m]",
                "contact_force_N": "contact force [N]\n(block max)",
            }[c]
            ax.set_ylabel(ylab, fontsize=8)
            if c == "contact_force_N":
                ax.legend(fontsize=7, loc="upper right", title=f"variant #{idx[0]}", title_fontsize=7)
        _p._legend_outside(axs[0])
        axs[-1].set_xlabel("time [s]")
        fig.tight_layout()
        fig.savefig(pdir / "histories.png", dpi=130, bbox_inches="tight")
        plt.close(fig)
        written.append("plots/histories.png")
    t1 = float(table["first_impact_time_s"][idx[0]]) if "first_impact_time_s" in table else float("nan")
    if np.isfinite(t1):
        from .. import sweep as _sweep

        i = idx[0]
        flat = {
            **_sweep.flat_values(spec),
            **{k: table[k.rsplit(".", 1)[-1]][i] for k in spec.get("axes", {}) if k.rsplit(".", 1)[-1] in table},
        }
        it = spec["integrator"]
        cfg = make_config(spec, t1 + 2e-4)
        p = params(spec, cfg, flat, jnp.float64, t1)
        tt, d, f = first_impact(cfg, p, t1)
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for k, name in enumerate(("top", "bottom")):
            on = d[:, k] > 0
            if np.any(on):  # the first contact episode of this end only
                i0 = int(np.argmax(on))
                i1 = i0 + (int(np.argmin(on[i0:])) if not np.all(on[i0:]) else len(on) - i0)
                ax.plot(
                    1e6 * d[i0:i1, k],
                    f[i0:i1, k],
                    ".-",
                    ms=2,
                    lw=0.7,
                    label=f"{name} end ({1e6 * (i1 - i0) * cfg.dt:.0f} µs)",
                )
        ax.set_xlabel("penetration δ [µm]")
        ax.set_ylabel("normal contact force [N]")
        ax.set_title(
            f"first contact episode of each end, {_p.variant_label(table, axes_cols, i)}\n"
            f"(law {spec['laws']['normal']}, e = {float(p.restitution):.2f}, every step of dt = {it['dt_s']:g} s)",
            fontsize=8,
        )
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(pdir / "first_impact_hysteresis.png", dpi=130)
        plt.close(fig)
        written.append("plots/first_impact_hysteresis.png")
    return written
