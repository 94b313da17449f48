"""A rigid rotor in two cylindrical clearance bearings, driven at constant speed, with unbalance.

The rotor (shaft and a central disc, one 3D rigid body, ``jaxclear.rigid3d``: Euler's equations
with the gyroscopic term) runs in two dry bushings at z = ±l/2 (``jaxclear.cylindrical_joint``:
journal radius R_B, radial clearance c, bushing width w as the pin length; bearing A locates the
rotor axially between thrust faces, bearing B floats).  Loads:

* static unbalance U_s [kg·m] at the disc: F = U_s Ω² R e_x (rotating with the rotor, R its
  orientation), couple unbalance U_c [kg·m²]: M = U_c Ω² R e_y (ISO 21940-11 terms);
* gravity along −y (a horizontal rotor);
* the motor holds the spin at Ω (``speed_rpm``) by a torsional spring k_m on the twist-angle
  error (ψ − Ω t, ψ = 2 atan2(q_z, q_w)) with damping ratio ζ_m.

Static unbalance drives a cylindrical whirl (both journals in phase), couple unbalance a conical
one (in opposition): ``whirl_correlation`` = Σ (d_A − d̄_A)·(d_B − d̄_B) / √(Σ|d_A − d̄_A|² Σ|d_B −
d̄_B|²) over the second half of the run (d the journal-centre offsets from the bearing axes):
+1 cylindrical, −1 conical.  Whirl orbits of both journals are saved and plotted.

Base excitation (``base_amplitude_m`` A, ``base_frequency_hz`` f; optional keys, absent: the
clamped frame, today's model bit for bit): the frame carrying both bushings translates along y
(the vertical, gravity's line), y_b(t) = A sin(2π f t).  It is body A of both joints
(``cylindrical_joint.Kinematics``: x_A = (0, y_b, 0), R_A = I, v_A = (0, ẏ_b, 0), ω_A = 0), so
the journal offsets are relative to the moving bushings; the rotor starts centred with the
frame's velocity (0, 2π f A, 0), a consistent start.  At rest on the bottom of the bushings the
rotor follows the frame while the bearings' total force along y, m (g + ÿ_b), stays positive:
below A (2π f)² = g it stays in contact, above it lifts off and impacts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
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

NAME = "rotor_two_bearings"
DEG = math.pi / 180.0
CONTACTS = tuple(f"{b}_{c}" for b in ("A", "B") for c in cj.CONTACTS)

# default rotor: steel disc ⌀150 × 20 mm at mid-span on a steel shaft ⌀25 × 300 mm
_RHO = 7850.0
_MD, _RD, _HD = _RHO * math.pi * 0.075**2 * 0.02, 0.075, 0.02
_MS, _RS, _LS = _RHO * math.pi * 0.0125**2 * 0.3, 0.0125, 0.3
_MASS = _MD + _MS  # 3.93 kg
_IP = 0.5 * _MD * _RD**2 + 0.5 * _MS * _RS**2  # 7.9e-3 kg·m²
_IT = _MD * (3 * _RD**2 + _HD**2) / 12 + _MS * (3 * _RS**2 + _LS**2) / 12  # 1.27e-2 kg·m²
_CLEAR = 50e-6
_SIG = (1 - 0.3**2) / 207e9 + (1 - 0.34**2) / 110e9  # steel journal, bronze bushing
_K = 4.0 / (3.0 * _SIG) * math.sqrt(_RS * (_RS + _CLEAR) / _CLEAR)  # 1.9e11 N/m^1.5
_K_AX = 4.0 / (3.0 * _SIG) * math.sqrt(_RS)
_SPEED = 3000.0
_U_G63 = _MASS * 6.3e-3 / (_SPEED * 2 * math.pi / 60)  # ISO 21940-11 G 6.3: 7.9e-5 kg·m

OUTPUT_CHANNELS = {
    "journal_a_x_m": "x offset of journal A's centre from its bearing axis",
    "journal_a_y_m": "y offset of journal A's centre (gravity along −y)",
    "journal_b_x_m": "x offset of journal B's centre",
    "journal_b_y_m": "y offset of journal B's centre",
    "contact_force_N": "normal force per contact (A_top … B_axial_bottom), block maximum",
    "tilt_rad": "angle between the rotor axis and bearing A's axis",
    "friction_torque_N_m": "bearings' friction moment braking the spin",
    "base_y_m": "the frame's (both bushings') displacement y_b along y (0 when clamped)",
    "bearing_force_y_N": "y component of both bearings' total force on the rotor (what the rotor puts on the frame, "
    "reversed); m (g + ÿ_b) when the rotor rests on the bottom and follows the frame",
}
DEFAULT_OUTPUTS = ["journal_a_x_m", "journal_a_y_m", "journal_b_x_m", "journal_b_y_m", "contact_force_N"]

MODEL = Table(
    "model",
    (
        Param("mechanism", NAME, "registered mechanism name"),
        Param(
            "rotor_mass_kg",
            _MASS,
            "rotor mass (steel disc ⌀150 × 20 mm on a steel shaft ⌀25 × 300 mm)",
            range=POSITIVE,
            field="mass",
        ),
        Param(
            "polar_inertia_kg_m2", _IP, "moment of inertia about the spin axis", range=POSITIVE, field="inertia_polar"
        ),
        Param(
            "transverse_inertia_kg_m2",
            _IT,
            "moment of inertia about a diameter through the centre of mass",
            range=POSITIVE,
            field="inertia_transverse",
        ),
        Param("bearing_span_m", 0.25, "distance l between the bearing centres", range=(0.0, 10.0, False), field="span"),
        Param("speed_rpm", _SPEED, "rotor speed Ω", range=(-1e6, 1e6, True), field="speed", scale=2 * math.pi / 60),
        Param(
            "static_unbalance_kg_m",
            _U_G63,
            "static unbalance U_s at the disc (default: ISO 21940-11 grade G 6.3 at 3000 rpm)",
            range=(0.0, 1.0, True),
            field="unbalance",
            unit="kg·m",
        ),
        Param(
            "couple_unbalance_kg_m2",
            0.0,
            "couple unbalance U_c (a moment U_c Ω² turning with the rotor)",
            range=(0.0, 1.0, True),
            field="couple",
        ),
        Param(
            "gravity_m_per_s2", 9.81, "gravity along −y (horizontal rotor)", range=(0.0, 100.0, True), field="gravity"
        ),
        Param(
            "motor_stiffness_N_m_per_rad",
            1e3,
            "torsional stiffness holding the spin at Ω",
            range=POSITIVE,
            field="motor_stiffness",
            unit="N·m/rad",
        ),
        Param("motor_damping_ratio", 0.5, "damping ratio of the spin", range=(0.0, 2.0, True), field="motor_damping"),
        Param(
            "misalignment_x_deg",
            0.0,
            "bearing B's axis turned about x",
            range=(-5.0, 5.0, True),
            field="misalign_x",
            scale=DEG,
        ),
        Param(
            "misalignment_y_deg",
            0.0,
            "bearing B's axis turned about y (then)",
            range=(-5.0, 5.0, True),
            field="misalign_y",
            scale=DEG,
        ),
        Param(
            "base_amplitude_m",
            0.0,
            "amplitude A of the frame's harmonic translation along y, y_b = A sin(2π f t) "
            "(both bushings move with the frame); absent: 0, the clamped frame; needs base_frequency_hz",
            range=(0.0, 1.0, True),
            field="base_amplitude",
            optional=True,
        ),
        Param(
            "base_frequency_hz",
            0.0,
            "frequency f of the frame's translation (absent: 0, the clamped frame); needs base_amplitude_m",
            range=(0.0, 1e5, True),
            field="base_frequency",
            unit="Hz",
            optional=True,
        ),
    ),
    doc="rigid rotor, speed, unbalance, base excitation",
)
JOINT = Table(
    "joint",
    (
        Param("pin_radius_m", _RS, "journal radius R_B", range=(0.0, 1.0, False), field="pin_radius"),
        Param(
            "clearance_m",
            _CLEAR,
            "radial clearance c of both bushings",
            range=(0.0, 0.01, False),
            guard=(1e-2, ">=", "the clearance is in metres"),
            field="clearance",
        ),
        Param("length_m", 0.02, "bushing width w", range=(0.0, 1.0, False), field="length"),
        Param(
            "axial_gap_m",
            0.2e-3,
            "end play of bearing A (locating); bearing B floats",
            range=(0.0, 0.01, True),
            field="axial_gap",
        ),
        Param(
            "face_smoothing_rad",
            1e-4,
            "tilt over which an end face's contact point slides to its centre",
            range=(0.0, 0.1, True),
            field="face_smoothing",
        ),
    ),
    doc="the two cylindrical clearance bearings (jaxclear.cylindrical_joint)",
)
LAWS = Table(
    "laws",
    (
        Param("normal", "flores", "normal-force law", choices=laws.NORMAL_LAWS),
        IMPACT_VELOCITY,
        Param(
            "stiffness_N_per_m_n",
            _K,
            "radial stiffness K (laws.internal_cylinder_stiffness: steel journal "
            "207 GPa/0.3 in a bronze bushing 110 GPa/0.34, R_B = 12.5 mm, c = 50 µm)",
            range=POSITIVE,
            field="stiffness",
        ),
        Param(
            "axial_stiffness_N_per_m_n",
            _K_AX,
            "thrust-face stiffness (Hertz sphere R_B on a flat)",
            range=POSITIVE,
            field="axial_stiffness",
        ),
        Param("exponent", 1.5, "exponent n", range=(1.0, 3.0, True), field="exponent"),
        Param("restitution", 0.8, "coefficient of restitution e", range=(0.0, 1.0, False), field="restitution"),
        Param("damping_N_s_per_m", 0.0, "viscous damping of the linear law", range=NONNEGATIVE, field="damping"),
    ),
    doc="contact laws of the bushings",
)
FRICTION = Table(
    "friction",
    (
        Param("model", "coulomb", "friction law", choices=laws.FRICTION_MODELS),
        Param(
            "coefficient",
            0.1,
            "friction coefficient μ (steel on bronze, boundary lubrication)",
            range=(0.0, 10.0, True),
            field="friction_coefficient",
        ),
        Param("v0_m_per_s", 1e-4, "regularisation speed v0", range=(0.0, 1.0, False), field="v0"),
        Param("v1_m_per_s", 1e-3, "full-friction speed v1 (ambrosio, threlfall)", range=(0.0, 1.0, False), field="v1"),
    ),
    doc="friction in the bushings",
)
TABLES = [
    MODEL,
    JOINT,
    LAWS,
    FRICTION,
    specmod.integrator_table(rigid3d.SCHEMES, "verlet_predicted", dt_s=5e-6, t_end_s=0.2, save_every=20),
    specmod.outputs_table(OUTPUT_CHANNELS, DEFAULT_OUTPUTS, plot_variants=4),
]
_ALL = Table("all", MODEL.params + JOINT.params + LAWS.params + FRICTION.params)
Params = params_type("Params", _ALL)


class Result(NamedTuple):
    """history; acc: metrics.Packed over the 8 contacts; max_orbit (2,) [m] per journal; the
    whirl sums (second half); mean friction torque [N·m] (second half); finite."""

    history: dict
    acc: metrics.Packed
    max_orbit: jnp.ndarray
    whirl: jnp.ndarray
    friction_torque: jnp.ndarray
    finite: jnp.ndarray


@dataclass(frozen=True)
class Config(_cylindrical.Config):
    """The shared static configuration plus base: whether the frame moves (the spec gives or
    sweeps ``model.base_amplitude_m`` and ``model.base_frequency_hz``); False: the clamped frame,
    today's model exactly."""

    base: bool = False


def validate_spec(spec):
    """The shared static checks; the base excitation needs both its amplitude and its frequency."""
    _cylindrical.validate_spec(spec)
    for has, lacks in (("base_amplitude_m", "base_frequency_hz"), ("base_frequency_hz", "base_amplitude_m")):
        _cylindrical.refuse_unpaired(
            spec,
            has,
            lacks,
            f"the frame's translation y_b = A sin(2π f t) needs both "
            f"(0 allowed); give model.{lacks} or remove model.{has}",
        )


def make_config(spec, t_end):
    return Config(**asdict(_cylindrical.make_config(spec, t_end)), base=_cylindrical.given(spec, "base_amplitude_m"))


def check_values(cols):
    a = lambda k: np.asarray(cols[k], float)
    if np.any(a("joint.clearance_m") >= a("joint.pin_radius_m")):
        raise SpecError(
            f"joint.clearance_m = {float(np.max(a('joint.clearance_m')))!r} must be smaller than "
            f"joint.pin_radius_m = {float(np.min(a('joint.pin_radius_m')))!r}"
        )
    if np.any(a("joint.length_m") >= a("model.bearing_span_m")):
        raise SpecError(
            f"joint.length_m = {float(np.max(a('joint.length_m')))!r} must be smaller than "
            f"model.bearing_span_m = {float(np.min(a('model.bearing_span_m')))!r}"
        )
    mis = np.hypot(a("model.misalignment_x_deg"), a("model.misalignment_y_deg")) * DEG
    reach = 0.5 * a("joint.length_m") * np.sin(mis)
    if np.any(reach >= a("joint.clearance_m")):
        raise SpecError(
            f"model.misalignment_x_deg/misalignment_y_deg ({float(np.max(mis) / DEG):.3g}°) tilt bearing B "
            f"so that a journal of width joint.length_m cannot fit its clearance joint.clearance_m"
        )


def t_end(spec, cols):
    return spec["integrator"]["t_end_s"]


def params(spec, cfg, flat, dtype, t_end):
    """Params of one variant; an optional key absent from the spec takes its declared default."""
    return Params(**{k: v for t in (MODEL, JOINT, LAWS, FRICTION) for k, v in declared(t, flat, dtype).items()})


def check_params(spec, cfg, p, name):
    """dt below the stability bound of a bushing's contact linearised at 20× the largest of the
    rotor weight, the unbalance forces and the frame's inertia force m A (2π f)², on half the
    rotor mass and on I_t/(l/2)²; the base excitation resolved by at least 20 steps a period."""
    if not cfg.base and np.any(np.asarray(p.base_amplitude) != 0):
        raise SpecError(
            "params with a base amplitude need a Config with base = True (make_config of a spec that "
            "gives model.base_amplitude_m and model.base_frequency_hz)"
        )
    f_ref = 20.0 * (
        p.mass * p.gravity
        + p.unbalance * p.speed**2
        + 2 * p.couple * p.speed**2 / p.span
        + 1.0
        + p.mass * p.base_amplitude * (2 * math.pi * p.base_frequency) ** 2
    )
    n = p.exponent
    k = n * jnp.maximum(p.stiffness, p.axial_stiffness) ** (1.0 / n) * f_ref ** ((n - 1.0) / n)
    m_eff = jnp.minimum(0.5 * p.mass, p.inertia_transverse / (0.5 * p.span) ** 2)
    chi = laws.hysteresis_factor(cfg.normal_law, p.restitution) if cfg.normal_law in laws.HYSTERESIS_MODELS else 0.0
    sch = cfg.scheme if cfg.scheme != "symplectic_euler" else "leapfrog"
    bound = np.atleast_1d(
        np.asarray(integrate.stability_bound(sch, k, m_eff, integrate.hysteresis_damping_ratio(chi, n)))
    )
    motor = np.atleast_1d(
        np.asarray(integrate.stability_bound(sch, p.motor_stiffness, p.inertia_polar, p.motor_damping))
    )
    for b, what in ((bound, "the bushing contact"), (motor, "the motor's torsional spring")):
        if np.any(cfg.dt > b):
            i = int(np.argmin(b))
            raise SpecError(
                f"integrator.dt_s = {cfg.dt:g} exceeds the stability bound {b[i]:.3g} s of {what} "
                f"({name(i)}); lower dt_s"
            )
    f_b = np.atleast_1d(np.asarray(p.base_frequency, float))
    steps = 1.0 / (cfg.dt * np.maximum(f_b, 1e-300))  # steps per period; f = 0 (clamped): ~inf
    if np.any(steps < 20):
        i = int(np.argmin(steps))
        raise SpecError(
            f"integrator.dt_s = {cfg.dt:g} resolves model.base_frequency_hz = "
            f"{float(f_b[i]):g} by {steps[i]:.3g} steps a period "
            f"({name(i)}); at least 20 needed: lower dt_s"
        )


def joint_names(cfg):
    return CONTACTS


def describe(spec, cfg):
    return {
        "contacts": list(CONTACTS),
        "contact_law": cfg.normal_law,
        "friction": cfg.friction,
        "whirl_correlation": "+1 cylindrical whirl (journals in phase), -1 conical (in opposition)",
    }


def _joint_params(p: Params, which: int):
    dt = p.mass.dtype
    z = 0.5 * p.span * (1.0 if which == 0 else -1.0)
    e3 = jnp.array([0.0, 0.0, 1.0], dt)
    centre = jnp.stack([0.0 * z, 0.0 * z, z])
    axis = e3 if which == 0 else cj.misaligned_axis(p.misalign_x, p.misalign_y)
    gap = p.axial_gap if which == 0 else 0.5 * p.span + 0.0 * p.axial_gap  # B floats: its faces out of reach
    return cj.Params(
        p.pin_radius,
        p.clearance,
        p.length,
        gap,
        p.stiffness,
        p.axial_stiffness,
        p.exponent,
        p.restitution,
        p.damping,
        p.friction_coefficient,
        p.v0,
        p.v1,
        axis,
        centre,
        e3,
        centre,
        p.face_smoothing,
    )


def base(p: Params, t):
    """The frame's (body A's) prescribed motion at t [s]: (x [m], R (3, 3), v [m/s], w [rad/s]),
    world frame: y_b = A sin(2π f t) along y, R = I, ω = 0 (module docstring)."""
    om = 2 * math.pi * p.base_frequency
    s, c = jnp.sin(om * t), jnp.cos(om * t)
    zero = jnp.zeros_like(s)
    return (
        jnp.stack([zero, p.base_amplitude * s, zero]),
        jnp.eye(3, dtype=s.dtype),
        jnp.stack([zero, p.base_amplitude * om * c, zero]),
        jnp.stack([zero, zero, zero]),
    )


def _loads(cfg: Config):
    def loads(p: Params, q, v, memory, t):
        dt = q.x.dtype
        z3, eye = jnp.zeros(3, dt), jnp.eye(3, dtype=dt)
        R = rigid3d.quat_to_matrix(q.quat[0])
        frame = base(p, t) if cfg.base else (z3, eye, z3, z3)
        kin = cj.Kinematics(*frame, q.x[0], R, v.v[0], rigid3d.rotate(q.quat[0], v.w[0]))
        fa, ma = cj.evaluate(cfg.joint, _joint_params(p, 0), kin, memory[:4])
        fb, mb = cj.evaluate(cfg.joint, _joint_params(p, 1), kin, memory[4:])
        w2 = p.speed**2
        f_unb = p.unbalance * w2 * R[:, 0]
        m_unb = p.couple * w2 * R[:, 1]
        k = p.motor_stiffness
        c = 2.0 * p.motor_damping * jnp.sqrt(k * p.inertia_polar)
        e = 2.0 * jnp.arctan2(q.quat[0, 3], q.quat[0, 0]) - p.speed * t
        e = jnp.arctan2(jnp.sin(e), jnp.cos(e))
        m_motor = (-k * e - c * (v.w[0, 2] - p.speed)) * R[:, 2]
        grav = jnp.stack([0.0 * p.gravity, -p.gravity * p.mass, 0.0 * p.gravity])
        F = fa.force_b + fb.force_b + f_unb + grav
        M = fa.moment_b + fb.moment_b + m_unb + m_motor
        return F[None], M[None], jnp.concatenate([ma, mb]), (fa, fb, R)

    return loads


def _bodies(p):
    return p.mass[None], jnp.stack([p.inertia_transverse, p.inertia_transverse, p.inertia_polar])[None]


def initial_state(cfg, p):
    """Centred rotor spinning at Ω (the journals on their bearing axes), moving with the frame
    (v = (0, 2π f A, 0)) when it is excited."""
    dtype = p.mass.dtype
    mass, inertia = _bodies(p)
    q0 = rigid3d.Pose(jnp.zeros((1, 3), dtype), jnp.array([[1.0, 0.0, 0.0, 0.0]], dtype))
    vel = base(p, jnp.zeros((), dtype))[2][None] if cfg.base else jnp.zeros((1, 3), dtype)
    v0 = rigid3d.Twist(vel, jnp.stack([0.0 * p.speed, 0.0 * p.speed, p.speed])[None])
    return rigid3d.initial_state(rigid3d.make_accel(mass, inertia, _loads(cfg)), p, q0, v0, jnp.zeros(8, dtype))


def make_step(cfg):
    loads = _loads(cfg)

    def step(p, s, i):
        mass, inertia = _bodies(p)
        s1, (fa, fb, R) = rigid3d.make_step(cfg.scheme, mass, inertia, loads, cfg.dt)(p, s, i)
        b = R[:, 2]
        friction = -(b @ (fa.moment_b + fb.moment_b))
        d_a, d_b = 0.5 * (fa.offset[0] + fa.offset[1]), 0.5 * (fb.offset[0] + fb.offset[1])
        y_b = base(p, (jnp.asarray(i, b.dtype) + 1.0) * cfg.dt)[0][1] if cfg.base else jnp.zeros((), b.dtype)
        return s1, (fa, fb, d_a, d_b, friction, y_b)

    return step


def simulate(cfg: Config, p: Params) -> Result:
    dtype = p.mass.dtype
    step = make_step(cfg)
    half = cfg.n_steps // 2
    zero = jnp.zeros((), dtype)
    acc0 = (metrics.init(8, dtype), jnp.zeros(2, dtype), jnp.zeros(10, dtype), zero)

    def reduce(acc, o, i):
        m, orbit, w, tq = acc
        fa, fb, d_a, d_b, friction, _ = o
        fn = jnp.concatenate([fa.normal_force, fb.normal_force])
        act = jnp.concatenate([fa.active, fb.active])
        started = jnp.concatenate([fa.started, fb.started]).astype(jnp.int32)
        m = metrics.update(
            m,
            fn,
            zero,
            act,
            started,
            act.astype(jnp.int32),
            jnp.ones((), bool),
            1,
            penetration=jnp.concatenate([fa.depth, fb.depth]),
        )
        orbit = jnp.maximum(orbit, jnp.stack([jnp.linalg.norm(d_a[:2]), jnp.linalg.norm(d_b[:2])]))
        rec = (i >= half).astype(dtype)
        da, db = d_a[:2], d_b[:2]
        # Σ 1, Σ d_A (2), Σ d_B (2), Σ d_A·d_B, Σ|d_A|², Σ|d_B|², Σ friction torque, pad
        w = w + rec * jnp.concatenate(
            [
                jnp.ones(1, dtype),
                da,
                db,
                (da @ db)[None],
                (da @ da)[None],
                (db @ db)[None],
                friction[None],
                jnp.zeros(1, dtype),
            ]
        )
        return m, orbit, w, tq

    def save(o):
        fa, fb, d_a, d_b, friction, y_b = o
        full = {
            "journal_a_x_m": d_a[0],
            "journal_a_y_m": d_a[1],
            "journal_b_x_m": d_b[0],
            "journal_b_y_m": d_b[1],
            "tilt_rad": fa.tilt,
            "friction_torque_N_m": friction,
            "base_y_m": y_b,
            "bearing_force_y_N": fa.force_b[1] + fb.force_b[1],
        }
        return {k: full[k] for k in cfg.outputs if k != "contact_force_N"}

    block_max = (
        (lambda o: {"contact_force_N": jnp.concatenate([o[0].normal_force, o[1].normal_force])})
        if "contact_force_N" in cfg.outputs
        else None
    )
    s, (m, orbit, w, _), hist = integrate.simulate(
        step,
        p,
        initial_state(cfg, p),
        acc0,
        reduce,
        cfg.n_saves,
        cfg.save_every,
        save=save if cfg.outputs else None,
        checkpoint=cfg.checkpoint,
        block_max=block_max,
    )
    finite = jnp.all(jnp.isfinite(s.q.x)) & jnp.all(jnp.isfinite(s.v.w))
    return Result(hist or {}, m, orbit, w, w[8] / jnp.maximum(w[0], 1.0), finite)


def whirl_correlation(w):
    """+1 cylindrical, −1 conical (module docstring) from the second-half sums (..., 10)."""
    w = np.asarray(w, float)
    n = np.maximum(w[..., 0], 1.0)
    ma, mb = w[..., 1:3] / n[..., None], w[..., 3:5] / n[..., None]
    cab = w[..., 5] / n - np.sum(ma * mb, -1)
    caa = w[..., 6] / n - np.sum(ma * ma, -1)
    cbb = w[..., 7] / n - np.sum(mb * mb, -1)
    return cab / np.sqrt(np.maximum(caa * cbb, 1e-300))


STUDY_METRICS = ("peak_contact_force_N", "smooth_peak_contact_force_N", "max_orbit_m")


def study(spec, cfg, t_end):
    from ..study import Study

    def evaluate(p):
        r = simulate(replace(cfg, outputs=()), p)
        u = metrics.unpack(r.acc)
        return jnp.stack([jnp.max(u.peak_force), metrics.smooth_peak(u.lse_force, u.steps), jnp.max(r.max_orbit)])

    return Study(STUDY_METRICS, evaluate, "smooth_peak_contact_force_N")


def chunk_metrics(spec, cfg, p, res, n_real, t_end):
    r = slice(0, n_real)
    a = lambda x: np.asarray(x)[r]
    u = metrics.unpack(jax.tree_util.tree_map(np.asarray, res.acc))
    peak = np.asarray(u.peak_force)[r]
    imp = np.asarray(u.impacts)[r]
    orbit = a(res.max_orbit)
    return {
        "peak_contact_force_bearing_a_N": peak[:, :4].max(axis=1),
        "peak_contact_force_bearing_b_N": peak[:, 4:].max(axis=1),
        "smooth_peak_contact_force_N": np.asarray(metrics.smooth_peak(u.lse_force, u.steps))[r],
        "impacts_bearing_a": imp[:, :4].sum(axis=1).astype(int),
        "impacts_bearing_b": imp[:, 4:].sum(axis=1).astype(int),
        "max_orbit_a_m": orbit[:, 0],
        "max_orbit_b_m": orbit[:, 1],
        "max_penetration_m": np.max(np.asarray(u.max_penetration)[r], axis=1),
        "whirl_correlation": whirl_correlation(a(res.whirl)),
        "mean_friction_torque_N_m": a(res.friction_torque),
        "finite": a(res.finite) & np.all(np.isfinite(peak), axis=1),
    }


def _label(table, axes_cols, i):
    """'#1: couple unbalance 0.0005 kg·m²' (the declared units)."""
    parts = []
    for c in axes_cols:
        p = next((q for q in _ALL.params if q.key == c), None)
        u = p.si_unit if p is not None else ""
        name = c
        for suf in ("_kg_m2", "_kg_m", "_N_per_m_n", "_m_per_s2", "_rpm", "_deg", "_kg", "_m"):
            if name.endswith(suf):
                name = name[: -len(suf)]
                break
        parts.append(f"{name.replace('_', ' ')} {float(table[c][i]):.3g} {u}".rstrip())
    return f"#{i}" + (": " + ", ".join(parts) if parts else "")


def plots(outdir, spec, table, summary, hists, t):
    """Whirl orbits of both journals (second half of the run, the clearance circle dotted)."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    from .. import plots as _p

    if not all(k in hists for k in ("journal_a_x_m", "journal_a_y_m", "journal_b_x_m", "journal_b_y_m")):
        return []
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    idx = _p.pick_variants(table, max(1, int(spec["outputs"]["plot_variants"])))
    axes_cols = [c for c in summary.get("axes", []) if c in table]
    n = np.asarray(hists["journal_a_x_m"]).shape[1]
    fig, axs = plt.subplots(1, 2, figsize=(9.0, 4.2))  # equal-aspect panels: no room left above them
    for ax, j in zip(axs, ("a", "b")):
        for i in idx:
            c = float(table["clearance_m"][i]) if "clearance_m" in table else spec["joint"]["clearance_m"]
            x, y = (
                1e6 * np.asarray(hists[f"journal_{j}_x_m"][i, n // 2 :]),
                1e6 * np.asarray(hists[f"journal_{j}_y_m"][i, n // 2 :]),
            )
            lab = _label(table, axes_cols, i) + f" (ρ = {float(table['whirl_correlation'][i]):+.2f})"
            (line,) = ax.plot(x, y, lw=0.7, label=lab)
            th = np.linspace(0, 2 * np.pi, 200)
            ax.plot(1e6 * c * np.cos(th), 1e6 * c * np.sin(th), ":", color=line.get_color(), lw=0.7)
        ax.set_aspect("equal")
        ax.set_xlabel("x [µm]")
        ax.set_ylabel("y [µm] (gravity −y)")
        ax.set_title(f"journal {j.upper()}, second half of the run (dotted: clearance)", fontsize=8)
    handles, labels = axs[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=1)
    fig.suptitle("whirl: ρ = +1 cylindrical (journals in phase), −1 conical (in opposition)", fontsize=9)
    fig.tight_layout()
    fig.savefig(pdir / "journal_orbits.png", dpi=130, bbox_inches="tight")
    plt.close(fig)
    return ["plots/journal_orbits.png"]
