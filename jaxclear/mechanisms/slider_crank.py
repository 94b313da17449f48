"""Planar slider-crank with revolute clearance joints (Flores, Ambrósio, Claro & Pimenta 2008).

Bodies: crank (1, prescribed), connecting rod (2), slider (3) on the x axis; crank pivot at the
origin, gravity along −y.  A clearance joint is a force element that cuts the loop, so each
configuration is an open tree in relative coordinates (DESIGN.md, "Coordinates"):

* ``"rod_slider"`` — journal on the rod end C, bearing in the slider.  q = (θ, φ₂, x₃): the rod
  swings about the crank pin B (ideal), the slider moves on x; the mass matrix is diagonal:
      (J₂ + m₂l²) φ̈₂ = −m₂ l u⊥·a_B − m₂ g l cos φ₂ + Σ (p_J − B) × F,     m₃ ẍ₃ = −F_x.
* ``"crank_rod"`` — journal on the crank pin B, bearing in the rod big end A.  q = (θ, φ₂, x₃)
  with the rod pinned to the slider at C = (x₃, 0); 2×2 mass matrix solved in closed form:
      [m₂+m₃, m₂ l sin φ₂; m₂ l sin φ₂, J₂+m₂l²] [ẍ₃; φ̈₂] = [Q_x − m₂ l φ̇₂² cos φ₂; Q_φ].
* ``"both"`` — both joints with clearance; the rod is a free body (x_G, y_G, φ₂), diagonal mass.

Orientations are carried as (cos, sin) pairs advanced by rotation (no transcendentals in the
step); the crank angle is a driven coordinate with prescribed θ̈ (constant speed ω after a
linear ramp from rest over t_ramp), integrated exactly by the schemes for piecewise-constant θ̈.

Benchmark values (Flores et al. 2008, Table 1): crank 0.05 m, rod 0.12 m; masses 0.30, 0.21,
0.14 kg; inertias 1e-5, 2.5e-4, 1e-4 kg·m²; 5000 rpm; R_J = 10.0 mm, R_B = 10.5 mm; E = 207 GPa,
ν = 0.3; e = 0.9; μ = 0.01 (modified Coulomb, v0 = 1e-4, v1 = 1e-3 m/s).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import drivers, integrate, joints, laws, metrics
from .. import spec as specmod
from .._math import perp, safe_norm
from ..schema import POSITIVE, Param, Table
from ..spec import SpecError
from . import _clearance, declared, defaults, params_type

# Clearance joints of each configuration, in the order of the per-joint outputs.
JOINTS = {"rod_slider": ("rod_slider",), "crank_rod": ("crank_rod",), "both": ("crank_rod", "rod_slider")}
CLEARANCE_JOINTS = tuple(JOINTS)

# Channels that can be saved as time histories; J = clearance joints of the configuration.
OUTPUT_CHANNELS = {
    "crank_angle_rad": "crank angle θ (unwrapped is not kept: atan2 of the carried pair)",
    "contact_force_N": "|F| total contact force of each clearance joint",
    "normal_force_N": "Σ F_n over the joint's regions",
    "penetration_m": "largest penetration δ over the joint's regions",
    "journal_x_m": "journal centre x in the bearing frame",
    "journal_y_m": "journal centre y in the bearing frame",
    "n_regions": "number of contact regions",
    "slider_position_m": "slider x",
    "slider_velocity_m_per_s": "slider ẋ",
    "slider_acceleration_m_per_s2": "slider ẍ",
    "rod_angular_velocity_rad_per_s": "rod φ̇₂",
}
DEFAULT_OUTPUTS = ("crank_angle_rad", "contact_force_N", "journal_x_m", "journal_y_m",
                   "slider_acceleration_m_per_s2")


@dataclass(frozen=True)
class Config(_clearance.ClearanceConfig):
    """Static configuration: one compiled function per distinct Config.

    clearance_joint: one of CLEARANCE_JOINTS; the other fields are those of
    ``_clearance.ClearanceConfig`` (joint choices shared by both joints when there are two).
    """

    clearance_joint: str = "rod_slider"
    outputs: tuple = DEFAULT_OUTPUTS

    @property
    def n_joints(self) -> int:
        return len(JOINTS[self.clearance_joint])

    def validate(self):
        if self.clearance_joint not in CLEARANCE_JOINTS:
            raise ValueError(f"model.clearance_joint = {self.clearance_joint!r}; allowed: {', '.join(CLEARANCE_JOINTS)}")
        if self.scheme not in integrate.SCHEMES:
            raise ValueError(f"integrator.scheme = {self.scheme!r}; allowed: {', '.join(integrate.SCHEMES)}")
        bad = [o for o in self.outputs if o not in OUTPUT_CHANNELS]
        if bad:
            raise ValueError(f"outputs.histories contains {bad}; allowed: {', '.join(OUTPUT_CHANNELS)}")
        if self.joint.normal_law not in laws.NORMAL_LAWS:
            raise ValueError(f"laws.normal = {self.joint.normal_law!r}; allowed: {', '.join(laws.NORMAL_LAWS)}")
        if self.joint.friction not in laws.FRICTION_MODELS:
            raise ValueError(f"laws.friction = {self.joint.friction!r}; allowed: {', '.join(laws.FRICTION_MODELS)}")
        return self


MODEL = Table("model", (
    Param("mechanism", "slider_crank", "registered mechanism name"),
    Param("clearance_joint", "rod_slider", "which joint has clearance", choices=CLEARANCE_JOINTS),
    Param("crank_length_m", 0.05, "crank length r", range=POSITIVE, guard=_clearance.metres(10.0, "50 mm = 0.05"),
          field="crank_length"),
    Param("rod_length_m", 0.12, "connecting-rod length L (> r)", range=POSITIVE,
          guard=_clearance.metres(10.0, "120 mm = 0.12"), field="rod_length"),
    Param("rod_mass_kg", 0.21, "rod mass m₂", range=POSITIVE, field="rod_mass"),
    Param("slider_mass_kg", 0.14, "slider mass m₃", range=POSITIVE, field="slider_mass"),
    Param("rod_inertia_kg_m2", 2.5e-4, "rod inertia J₂ about its centre of mass", range=POSITIVE,
          field="rod_inertia"),
    *_clearance.CRANK_DRIVE,
), doc="bodies and drive (Flores et al. 2008, Table 1)", retired=(
    ("crank_mass_kg", _clearance.DRIVEN_CRANK), ("crank_inertia_kg_m2", _clearance.DRIVEN_CRANK),
    ("slider_inertia_kg_m2", "the slider translates on its guide and never rotates")))

Params = params_type("Params", MODEL, extra=("steady_start", "joint"), doc="""Numeric parameters (SI), batchable leaf by leaf.

    Fields from the declarations of MODEL (lengths [m], masses [kg], inertias about the centre of
    mass [kg·m²], crank_speed ω [rad/s], ramp_time [s] (0: constant speed from t = 0), gravity g
    [m/s²] along −y), then steady_start [s] start of the steady window and joint: clearance-joint
    parameters (for ``"both"`` a JointParams whose leaves have a leading axis of 2:
    [crank_rod, rod_slider]).
    """)


def benchmark_params(clearance=0.5e-3, crank_speed_rpm=5000.0, journal_radius=10.0e-3,
                     restitution=0.9, friction_coefficient=0.01, points=None, ramp_time=0.0,
                     steady_start=0.0, normal_law="lankarani_nikravesh", youngs_modulus=207e9,
                     poisson_ratio=0.3, stiffness=None, n_joints=1):
    """Params of the Flores et al. (2008) benchmark (the MODEL defaults); every argument may be a
    traced array.

    Stiffness (when not given) is the Lankarani–Nikravesh internal-cylinder value
    K = 4/(3(σ_J+σ_B))·√(R_J R_B/(R_B−R_J)), σ = (1−ν²)/E  (≈ 6.95e10 N/m^1.5 at c = 0.5 mm).
    """
    dt = jnp.result_type(float)
    f = lambda x: jnp.asarray(x, dtype=dt)
    jp = _clearance.benchmark_joint(clearance, journal_radius, restitution, friction_coefficient, points,
                                    normal_law, youngs_modulus, poisson_ratio, stiffness, n_joints)
    flat = {**defaults(MODEL), "model.crank_speed_rpm": crank_speed_rpm, "model.ramp_time_s": ramp_time}
    return Params(**declared(MODEL, flat, dt), steady_start=f(steady_start), joint=jp)


# ----------------------------------------------------------------------------- kinematics

def _gravity(p):
    return jnp.stack([jnp.zeros_like(p.gravity), -p.gravity])


def _on_x_axis(x, xd):
    """Position and velocity of a point sliding on the x axis (the slider, its pin)."""
    return jnp.stack([x, 0.0 * x]), jnp.stack([xd, 0.0 * xd])


def _rod(q, v):
    """Rod direction u = (cos φ₂, sin φ₂), its normal u⊥ and φ̇₂ (all layouts share them)."""
    u = q[2:4]
    return u, perp(u), v[1]


def _in_slider(r_j, v_j, w_j, x3, v3):
    """Kinematics of a journal in the slider's (translating, non-rotating) bearing at (x₃, 0)."""
    r_b, v_b = _on_x_axis(x3, v3)
    return joints.JointKinematics(r_j, v_j, w_j, r_b, v_b, jnp.array([1.0, 0.0], r_j.dtype), 0.0 * w_j)


def _accel_rod_slider(cfg, p, q, v, aux, t):
    with integrate.stage("kinematics"):
        b, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        u, up, w2 = _rod(q, v)
        x3, v3 = q[4], v[2]
        L, l = p.rod_length, 0.5 * p.rod_length
        c = b + L * u
        vc = vb + L * w2 * up
        kin = _in_slider(c, vc, w2, x3, v3)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        jb = p.rod_inertia + p.rod_mass * l * l
        tau = (-p.rod_mass * l * jnp.dot(up, ab) - p.rod_mass * p.gravity * l * u[0]
               + joints.moment(jf.f_slots, jf.p_j, b))
        a = jnp.stack([alpha, tau / jb, -jf.force[0] / p.slider_mass])
    return a, mem[None], (jf,)


def _accel_crank_rod(cfg, p, q, v, aux, t):
    with integrate.stage("kinematics"):
        b, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        u, up, w2 = _rod(q, v)
        x3, v3 = q[4], v[2]
        L, l = p.rod_length, 0.5 * p.rod_length
        cpt, vcpt = _on_x_axis(x3, v3)
        a_end = cpt - L * u
        va = vcpt - L * w2 * up
        kin = joints.JointKinematics(b, vb, v[0], a_end, va, u, w2)
    jf, mem = joints.evaluate(cfg.joint, p.joint, kin, aux[0])
    with integrate.stage("equations_of_motion"):
        m2, m3 = p.rod_mass, p.slider_mass
        qx = -jf.force[0]
        qphi = joints.moment(-jf.f_slots, jf.p_b, cpt) + l * m2 * p.gravity * u[0]
        m11, m12, m22 = m2 + m3, m2 * l * u[1], p.rod_inertia + m2 * l * l
        r1 = qx - m2 * l * w2 * w2 * u[0]
        det = m11 * m22 - m12 * m12
        xdd = (m22 * r1 - m12 * qphi) / det
        phidd = (m11 * qphi - m12 * r1) / det
        a = jnp.stack([alpha, phidd, xdd])
    return a, mem[None], (jf,)


def _accel_both(cfg, p, q, v, aux, t):
    with integrate.stage("kinematics"):
        b, vb, ab, alpha = drivers.crank_pin(p, q, v, t)
        u, up, w2 = _rod(q, v)
        g2, vg = q[4:6], v[2:4]
        x3, v3 = q[6], v[4]
        l = 0.5 * p.rod_length
        jp1 = jax.tree_util.tree_map(lambda x: x[0], p.joint)
        jp2 = jax.tree_util.tree_map(lambda x: x[1], p.joint)
        a_end, va = g2 - l * u, vg - l * w2 * up
        c_end, vc = g2 + l * u, vg + l * w2 * up
        kin1 = joints.JointKinematics(b, vb, v[0], a_end, va, u, w2)
        kin2 = _in_slider(c_end, vc, w2, x3, v3)
    jf1, mem1 = joints.evaluate(cfg.joint, jp1, kin1, aux[0])
    jf2, mem2 = joints.evaluate(cfg.joint, jp2, kin2, aux[1])
    with integrate.stage("equations_of_motion"):
        m2 = p.rod_mass
        ag = (-jf1.force + jf2.force) / m2 + _gravity(p)
        tau = joints.moment(-jf1.f_slots, jf1.p_b, g2) + joints.moment(jf2.f_slots, jf2.p_j, g2)
        a = jnp.concatenate([jnp.stack([alpha, tau / p.rod_inertia]), ag,
                             jnp.stack([-jf2.force[0] / p.slider_mass])])
    return a, jnp.stack([mem1, mem2]), (jf1, jf2)


_ACCEL = {"rod_slider": _accel_rod_slider, "crank_rod": _accel_crank_rod, "both": _accel_both}


def initial_state(cfg: Config, p: Params):
    """Top dead centre, journals centred, every body at the ideal mechanism's velocity.

    θ = 0 (crank along +x), φ₂ = 0, x₃ = r + L; θ̇ = ω (0 with a ramp), φ̇₂ = −r θ̇/L, ẋ₃ = 0.
    """
    r, L = p.crank_length, p.rod_length
    dt = jnp.result_type(r)
    w = jnp.where(p.ramp_time > 0, 0.0, p.crank_speed)
    w2 = -r * w / L
    one, zero = jnp.ones((), dt), jnp.zeros((), dt)
    if cfg.clearance_joint == "both":
        q = jnp.stack([one, zero, one, zero, r + 0.5 * L, zero, r + L])
        v = jnp.stack([w, w2, zero, 0.5 * r * w, zero])
    else:
        q = jnp.stack([one, zero, one, zero, r + L])
        v = jnp.stack([w, w2, zero])
    # Impact-velocity memory of every joint, packed as one (J, M) array.
    aux = jnp.stack([joints.initial_memory(cfg.joint, dt) for _ in range(cfg.n_joints)])
    return q, v, aux


def _outputs(cfg, q, v, a, jfs, t):
    ch = {}
    if "crank_angle_rad" in cfg.outputs:
        ch["crank_angle_rad"] = jnp.arctan2(q[1], q[0])
    if "contact_force_N" in cfg.outputs:
        ch["contact_force_N"] = jnp.stack([safe_norm(j.force) for j in jfs])
    if "normal_force_N" in cfg.outputs:
        ch["normal_force_N"] = jnp.stack([jnp.sum(j.normal_force) for j in jfs])
    if "penetration_m" in cfg.outputs:
        ch["penetration_m"] = jnp.stack([jnp.max(j.depth) for j in jfs])
    if "journal_x_m" in cfg.outputs:
        ch["journal_x_m"] = jnp.stack([j.e_local[0] for j in jfs])
    if "journal_y_m" in cfg.outputs:
        ch["journal_y_m"] = jnp.stack([j.e_local[1] for j in jfs])
    if "n_regions" in cfg.outputs:
        ch["n_regions"] = jnp.stack([j.n_regions for j in jfs]).astype(q.dtype)
    if "slider_position_m" in cfg.outputs:
        ch["slider_position_m"] = q[-1]
    if "slider_velocity_m_per_s" in cfg.outputs:
        ch["slider_velocity_m_per_s"] = v[-1]
    if "slider_acceleration_m_per_s2" in cfg.outputs:
        ch["slider_acceleration_m_per_s2"] = a[-1]
    if "rod_angular_velocity_rad_per_s" in cfg.outputs:
        ch["rod_angular_velocity_rad_per_s"] = v[1]
    return ch


class Result(NamedTuple):
    """One variant's result: accumulated metrics, saved histories (dict of (n_saves, ...)),
    final positions q and velocities v."""

    acc: metrics.Accumulator
    history: dict
    q: jnp.ndarray
    v: jnp.ndarray


def simulate(cfg: Config, p: Params, state0=None) -> Result:
    """Integrate one variant over cfg.n_steps steps (pure; jit/vmap/grad at the caller).

    state0: optional (q, v) replacing the top-dead-centre start (layout of ``initial_state``).
    """
    accel_impl = _ACCEL[cfg.clearance_joint]
    n_pairs = 2  # (cos, sin) of the crank and of the rod

    def accel(params, q, v, aux, t):
        a, aux1, jfs = accel_impl(cfg, params, q, v, aux, t)
        out = (a, jfs, q, v, t)
        return a, aux1, out

    step = integrate.make_step(cfg.scheme, accel, integrate.pair_drift(n_pairs), cfg.dt)
    q0, v0, aux0 = initial_state(cfg, p)
    if state0 is not None:
        q0, v0 = (jnp.asarray(x, q0.dtype) for x in state0)
    a0, _, _ = accel(p, q0, v0, aux0, 0.0)
    s0 = integrate.State(q0, v0, a0, aux0)
    dtype = q0.dtype

    def reduce(acc, out, i):
        a, jfs, q, v, t = out
        force = jnp.stack([safe_norm(j.force) for j in jfs])
        in_contact = jnp.stack([jnp.any(j.active) for j in jfs])
        new_imp = jnp.stack([j.new_impacts for j in jfs])
        nreg = jnp.stack([j.n_regions for j in jfs])
        steady = t >= p.steady_start
        ovf = jnp.stack([j.window_overflow for j in jfs]) if cfg.joint.window else None
        return metrics.update(acc, force, a[-1], in_contact, new_imp, nreg, steady,
                              cfg.min_continuous_steps, window_overflow=ovf)

    def save(out):
        a, jfs, q, v, t = out
        return _outputs(cfg, q, v, a, jfs, t)

    def block_max(out):
        # the contact force's maximum over each save block: the impact peaks between samples
        return {"contact_force_block_max_N": jnp.stack([safe_norm(j.force) for j in out[1]])}

    acc0 = metrics.init(cfg.n_joints, dtype)
    s, acc, hist = integrate.simulate(step, p, s0, acc0, reduce, cfg.n_saves, cfg.save_every,
                                      save=save if cfg.outputs else None,
                                      checkpoint=cfg.checkpoint,
                                      block_max=block_max if "contact_force_N" in cfg.outputs else None)
    acc = metrics.finalize(acc, cfg.min_continuous_steps)
    return Result(acc, hist if hist is not None else {}, s.q, s.v)


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
    return {"theta": theta, "slider_acceleration": xdd, "slider_position": r * ct + L * cp,
            "rod_angle": jnp.arcsin(sp), "reaction_rod_slider": jnp.hypot(rcx, rcy),
            "reaction_crank_rod": jnp.hypot(rbx, rby)}


def ideal_peaks(p: Params, t_end, steady_start, n_samples: int = 20001):
    """Peaks of the ideal mechanism over [0, t_end] and [steady_start, t_end] (sampled)."""
    t = jnp.linspace(0.0, 1.0, n_samples) * t_end
    ts = steady_start + jnp.linspace(0.0, 1.0, n_samples) * (t_end - steady_start)
    full, st = ideal(p, t), ideal(p, ts)
    keys = ("slider_acceleration", "reaction_rod_slider", "reaction_crank_rod")
    return ({k: jnp.max(jnp.abs(full[k])) for k in keys}, {k: jnp.max(jnp.abs(st[k])) for k in keys})


# ----------------------------------------------------------------------------- sweep protocol
# (jaxclear.mechanisms: what `jaxclear run` needs to sweep this mechanism)

def tables(model):
    """The spec tables: [model], the clearance-joint tables (and each joint's own with
    clearance_joint = "both"), [integrator], [outputs]."""
    names = JOINTS.get(model.get("clearance_joint", "rod_slider"), ("rod_slider",))
    return [MODEL, *_clearance.joint_tables(names, profile=PROFILE),
            _clearance.crank_integrator(integrate.SCHEMES, "leapfrog"),
            specmod.outputs_table(OUTPUT_CHANNELS, DEFAULT_OUTPUTS)]


# profile.window_points = W > 0: contact.detect_window on the W points around the pin direction
# (same results as the full pass unless window_overflow_steps > 0); 0 = off.
PROFILE = _clearance.extend_profile(Param(
    "window_points", 0, "windowed detection on W points around the pin direction (0: off)", range=(0, 4096)))


def validate_spec(spec):
    _clearance.validate_spec(spec)


check_axis = _clearance.check_axis
differentiable_keys = _clearance.differentiable_keys


def check_values(cols):
    _clearance.check_values(cols, JOINTS["both"])
    r, L = np.asarray(cols["model.crank_length_m"], float), np.asarray(cols["model.rod_length_m"], float)
    if np.any(L <= r):
        raise SpecError(f"model.rod_length_m = {float(np.min(L))!r} must exceed model.crank_length_m = {float(np.max(r))!r}")


def t_end(spec, cols):
    """integrator.t_end_s, or (when 0) the ramp plus integrator.revolutions at the slowest speed."""
    it = spec["integrator"]
    if it["t_end_s"] > 0:
        return float(it["t_end_s"])
    rpm = np.asarray(cols["model.crank_speed_rpm"], float)
    ramp = np.asarray(cols["model.ramp_time_s"], float)
    return float(np.max(ramp + it["revolutions"] * 60.0 / rpm))


def make_config(spec, t_end) -> Config:
    return Config(clearance_joint=spec["model"]["clearance_joint"],
                  **_clearance.config_fields(spec, t_end)).validate()


def params(spec, cfg: Config, flat, dtype, t_end) -> Params:
    """Params of one variant from {dotted path: scalar} (traceable).  The steady window is the
    last integrator.steady_revolutions crank revolutions before t_end."""
    jp = _clearance.joints_params(spec, cfg.joint, flat, dtype, JOINTS[cfg.clearance_joint])
    fields = declared(MODEL, flat, dtype)
    period = 2 * math.pi / fields["crank_speed"]
    steady = jnp.maximum(t_end - spec["integrator"]["steady_revolutions"] * period, 0.0).astype(dtype)
    return Params(**fields, steady_start=steady, joint=jp)


def stability_dt(p: Params, scheme):
    """Conservative stable dt [s] per variant (``integrate.stability_bound``).

    Linearised Hertz stiffness k = n K δ^(n−1) at the penetration δ reached when the smaller of
    the rod and slider masses hits at the crank-pin speed r·ω (energy balance
    ½ m v² = K δ^(n+1)/(n+1)); ω_c = √(k/m).
    """
    jp = p.joint
    m = jnp.minimum(p.rod_mass, p.slider_mass)
    v = p.crank_length * p.crank_speed
    n = jp.exponent
    K = jp.stiffness
    if K.ndim > m.ndim:  # two joints: take the stiffer
        K, n = jnp.max(K, axis=-1), jnp.max(n, axis=-1)
    delta = (0.5 * m * v * v * (n + 1) / K) ** (1.0 / (n + 1))
    k_lin = n * K * delta ** (n - 1)
    return integrate.stability_bound(scheme, k_lin, m)


def check_params(spec, cfg: Config, p: Params, name):
    """The bushing stays outside the journal; dt is under the stability bound."""
    _clearance.check_bushing(cfg.joint, p.joint, name)
    _clearance.check_dt(cfg, np.asarray(stability_dt(p, cfg.scheme)), name)


def joint_names(cfg: Config):
    return JOINTS[cfg.clearance_joint]


def resolve_config(spec, cfg: Config, p: Params, acc, offset):
    """``profile.max_regions = "auto"``: the slots from every variant's profiles
    (``_clearance.resolve_config``, called by ``sweep.plan`` block by block)."""
    return _clearance.resolve_config(spec, cfg, p, acc, offset, joint_names(cfg))


def describe(spec, cfg: Config):
    return {"clearance_joint": cfg.clearance_joint, **_clearance.describe(cfg.joint),
            "steady_window": f"last {spec['integrator']['steady_revolutions']:g} crank revolution(s) of each variant, "
                             "t >= t_end - steady_revolutions*60/crank_speed_rpm",
            "continuous_contact_s": spec["integrator"]["continuous_contact_s"]}


def bytes_per_variant(cfg: Config, precision: str) -> float:
    """Rough device bytes of one variant (for the automatic chunk size): the saved histories
    (n_saves × channels × joints) twice (result + scan stacking) plus params, carry and
    per-step temporaries (~16 kB, more with profile points)."""
    item = 4 if precision == "float32" else 8
    hist = cfg.n_saves * max(1, len(cfg.outputs)) * cfg.n_joints * item
    return 2.0 * hist + 16384 + 64 * cfg.joint.n_points * item


def warn_float32(spec, cols):
    """Warn when float32 cannot resolve µm penetrations: the position of the slider,
    ~(r + L), carries a rounding of eps₃₂·(r + L); above 1 % of the clearance the contact
    force is noise."""
    scale = np.max(np.asarray(cols["model.crank_length_m"]) + np.asarray(cols["model.rod_length_m"]))
    c = float(np.min(cols["joint.clearance_m"]))
    res = float(np.finfo(np.float32).eps) * scale
    if res > 0.01 * c:
        warnings.warn(f"integrator.precision = 'float32' resolves positions to {res:.2g} m, more than 1% of "
                      f"joint.clearance_m = {c:g}: penetrations and contact forces will be noisy; use float64",
                      stacklevel=4)


def n_ideal_samples(max_crank_speed_rad_per_s, t_end):
    """Samples of the ideal mechanism over [0, t_end]: ≥ 1024 per crank revolution of the fastest variant (peak sampling
    error < 1e-5), at least 2049, at most 2^18 + 1."""
    return _clearance.ideal_sample_count(max_crank_speed_rad_per_s, t_end, 1024, 2048)


ideal_samples = _clearance.sweep_ideal_samples(n_ideal_samples)
STUDY_METRICS = metrics.peak_vector_names("slider_acceleration", "_m_per_s2")  # the differentiable metrics
# simulate + peaks + the closed-form ideal reference (jaxclear.study)
study = _clearance.crank_study(STUDY_METRICS, "slider_acceleration", ideal_peaks, ideal_samples, simulate,
                               joint_names=lambda cfg: JOINTS[cfg.clearance_joint])


def reaction_reference(ideal_peaks_, names):
    """The ideal reference of the contact-force amplification: the largest ideal reaction
    peak over the clearance joints ``names`` (from ``ideal_peaks``; arrays or traced)."""
    return functools.reduce(jnp.maximum, [ideal_peaks_["reaction_" + n] for n in names])


@partial(jax.jit, static_argnums=(2,))
def _ideal_peaks_batch(p, t_end, n_samples):
    p = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x, p)  # reference in float64
    return jax.vmap(lambda pp: ideal_peaks(pp, t_end, pp.steady_start, n_samples=n_samples))(p)


def chunk_metrics(spec, cfg: Config, p, res, n_real, t_end):
    """Metrics table rows (dict of arrays) for one chunk."""
    acc = jax.tree_util.tree_map(lambda x: np.asarray(x)[:n_real], res.acc)
    n_samples = cfg.ideal_samples or n_ideal_samples(float(np.max(np.asarray(p.crank_speed))), t_end)
    ideal_full, ideal_steady = _ideal_peaks_batch(p, t_end, n_samples)
    ideal_full = {k: np.asarray(v)[:n_real] for k, v in ideal_full.items()}
    ideal_steady = {k: np.asarray(v)[:n_real] for k, v in ideal_steady.items()}
    names = JOINTS[cfg.clearance_joint]
    out = {}
    ref, refs = (np.asarray(reaction_reference(d, names)) for d in (ideal_full, ideal_steady))
    metrics.peak_columns(out, "contact_force", "_N", "ideal_peak_reaction_N",
                  acc.peak_force.max(axis=1), acc.peak_force_steady.max(axis=1), ref, refs)
    metrics.peak_columns(out, "slider_acceleration", "_m_per_s2", "ideal_peak_slider_acceleration_m_per_s2",
                  acc.peak_acc, acc.peak_acc_steady,
                  ideal_full["slider_acceleration"], ideal_steady["slider_acceleration"])
    # Smooth (power-mean, p = metrics.SMOOTH_EXPONENT) peaks over the run: the differentiable
    # twins that jaxclear sensitivity / identify use.
    sm_f = np.asarray(metrics.smooth_peak(acc.lse_force, acc.steps))
    sm_a = np.asarray(metrics.smooth_peak(acc.lse_acc, acc.steps))
    out["smooth_peak_contact_force_N"] = sm_f
    out["smooth_peak_slider_acceleration_m_per_s2"] = sm_a
    out["smooth_daf_contact_force"] = metrics.amplification(sm_f, ref)
    out["smooth_daf_slider_acceleration"] = metrics.amplification(sm_a, ideal_full["slider_acceleration"])
    metrics.motion_columns(out, acc, names, ideal_full)
    if cfg.joint.window:
        out["window_overflow_steps"] = acc.window_overflow_steps.sum(axis=1)
    fin = acc.finite & np.isfinite(np.asarray(res.q)[:n_real]).all(axis=1) & np.isfinite(np.asarray(res.v)[:n_real]).all(axis=1)
    out["finite"] = fin
    return out



def plots(outdir, spec, table, summary, hists, t):
    """The standard sweep PNGs (contact force vs crank angle, orbits, DAF maps)."""
    if "journal_x_m" not in hists:
        return []
    from .. import plots as plots_
    return plots_.sweep_plots(outdir, table, summary, hists, t, spec)
