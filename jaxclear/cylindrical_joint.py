"""3D cylindrical clearance joint: a pin that can tilt in its hole, with axial end play.

After Virlez, Brüls, Tromme & Duysinx (2013), "Modeling joints with clearance and friction in
multibody dynamic simulation of automotive differentials", Theor. Appl. Mech. Lett. 3:013003.

Geometry (world frame; body A carries the hole, body B the pin):

* hole: radius R_A = R_B + c (c the radial clearance), centre C_A, unit axis a (body-A frame,
  tilted from its nominal direction by the misalignment angles, ``misaligned_axis``);
* pin: radius R_B, unit axis b (body-B frame), centre C_B; its two ends are spheres of radius R_B
  centred on the axis at E_± = C_B ± (L/2) b (the pin's end-face centres, L the pin length).

Radial contact of each end (the source's eqs. 16-18):

    d = (I − a aᵀ)(E − C_A),   n = d/|d|,   δ = |d| + R_B − R_A = |d| − c,

(|d| a double-where safe norm: finite gradients at a centred pin).  Axial contact (end play):
the housing's end faces (or thrust washers) sit at a·(x − C_A) = ±(L + g)/2 (g the total axial
gap); the pin's end face is a disc of radius R_B about E_± normal to b, whose rim point furthest
along ±a is E_± ± R_B u, u = (a − (a·b) b)/|a − (a·b) b|, so

    δ_ax,± = ±a·(E_± − C_A) + R_B |a − (a·b) b| − (L + g)/2,   n = ±a,

with |u| = |a − (a·b) b| (= sin of the tilt) replaced by √(|u|² + ε²) − ε and the contact point
by E_± ± R_B u/√(|u|² + ε²) (ε = ``face_smoothing``, rad): the point slides from the rim to the
face centre as the faces align, as the centre of pressure of a flat face does, the rim reach
loses at most 0.41 R_B ε, and the axial force stays conservative (its point is the gradient of
the reach: the envelope theorem) without the kink of |u| at zero tilt.  ε = 0 is the exact rim.

Per contact k (4 of them: radial top, radial bottom, axial top, axial bottom): the contact point
on the pin Q = E + R_B n (radial) or the rim point (axial), on the housing P = Q − δ n; the
penetration rate δ̇ = n·(v_B(Q) − v_A(P)) (the material points' approach; for the spheres it is
n·(v_B(E) − v_A(P)) as in the planar joint, ``jaxclear.joints``, and for a rim it includes the
tilting rate, the envelope theorem); the normal force F_n = ``laws.normal_force`` (every
law of ``laws.NORMAL_LAWS``; the hysteresis laws with the impact velocity δ̇⁻ of each contact,
the largest approach rate since its onset (the onset rate of an ordinary impact; the memory is
one value per contact: 0 off contact, ≥ a floor in contact); friction
``laws.friction_force`` on the relative tangential velocity v_t = (I − n nᵀ)(v_B(Q) − v_A(P)),
F_t = f(|v_t|) v_t/|v_t| (the source's eqs. 30-36).  The pin receives −F_n n + F_t at Q, the
housing the opposite at P; the moments are taken about each body's reference point.

The source evaluates the law F = K δ^1.5 + C δ^1.5 δ̇ with C = 8(1 − e)K/(5 e δ̇⁻): the
``"flores"`` hysteresis law here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp

from . import integrate, laws
from ._math import safe_sqrt

CONTACTS = ("top", "bottom", "axial_top", "axial_bottom")


@dataclass(frozen=True)
class Config:
    """Static: normal_law (``laws.NORMAL_LAWS``), friction (``laws.FRICTION_MODELS``), axial
    (whether the end faces' axial contacts are evaluated), impact_velocity: δ̇⁻ of the hysteresis
    laws, "episode_max" (the largest approach rate since the contact began) or "onset" (the rate
    at its first step, the rule of the planar ``jaxclear.joints``); exponent: the contact law's
    exponent n when every variant shares it and nothing traces it (a Python float; the Params'
    exponent must then equal it, ``laws.normal_force``'s static_exponent: δ^1.5 as δ·√δ, a
    float64 pow being the costliest operation of the step), None: n read from Params only."""

    normal_law: str = "flores"
    friction: str = "coulomb"
    axial: bool = True
    impact_velocity: str = "episode_max"
    exponent: float | None = None

    def validate(self):
        if self.normal_law not in laws.NORMAL_LAWS:
            raise ValueError(f"laws.normal = {self.normal_law!r}; allowed: {', '.join(laws.NORMAL_LAWS)}")
        if self.friction not in laws.FRICTION_MODELS:
            raise ValueError(f"friction.model = {self.friction!r}; allowed: {', '.join(laws.FRICTION_MODELS)}")
        if self.impact_velocity not in ("episode_max", "onset"):
            raise ValueError(f"impact_velocity = {self.impact_velocity!r}; allowed: 'episode_max', 'onset'")
        return self


class Params(NamedTuple):
    """Joint parameters (SI), every leaf batchable.

    pin_radius R_B [m]; clearance c = R_A − R_B [m]; length L [m] between the pin's end faces;
    axial_gap g [m] total end play; stiffness K [N/m^n] radial, axial_stiffness [N/m^n] of the end
    faces; exponent n; restitution e; damping [N·s/m] (linear law only); friction_coefficient μ;
    v0, v1 [m/s] friction regularisation speeds; axis_a (3,) unit hole axis in body A's frame;
    centre_a (3,) [m] hole centre in body A's frame; axis_b (3,), centre_b (3,) the pin's in B's;
    face_smoothing ε [rad] of the end faces' rim reach (module docstring).
    """

    pin_radius: jnp.ndarray
    clearance: jnp.ndarray
    length: jnp.ndarray
    axial_gap: jnp.ndarray
    stiffness: jnp.ndarray
    axial_stiffness: jnp.ndarray
    exponent: jnp.ndarray
    restitution: jnp.ndarray
    damping: jnp.ndarray
    friction_coefficient: jnp.ndarray
    v0: jnp.ndarray
    v1: jnp.ndarray
    axis_a: jnp.ndarray
    centre_a: jnp.ndarray
    axis_b: jnp.ndarray
    centre_b: jnp.ndarray
    face_smoothing: jnp.ndarray


class Kinematics(NamedTuple):
    """World-frame states of the two bodies: x [m] reference point, R (3, 3) rotation (world =
    R · body), v [m/s] velocity of the reference point, w [rad/s] angular velocity (world frame)."""

    x_a: jnp.ndarray
    R_a: jnp.ndarray
    v_a: jnp.ndarray
    w_a: jnp.ndarray
    x_b: jnp.ndarray
    R_b: jnp.ndarray
    v_b: jnp.ndarray
    w_b: jnp.ndarray


class Force(NamedTuple):
    """One evaluation (world frame, SI).  force_b [N], moment_b [N·m] about x_b on the pin;
    force_a, moment_a (about x_a) on the housing; per contact (``CONTACTS`` order, 4):
    normal_force [N], friction [N] (|F_t|), depth δ [m] (0 off contact), active, point_b Q [m],
    point_a P [m], normal n, started (onset this step); new_impacts (int); offset (2, 3) [m]
    the radial offsets d of the top and bottom end centres from the hole axis; tilt [rad] the
    angle between the pin and hole axes; axial [m] the pin centre's axial position a·(C_B − C_A)."""

    force_b: jnp.ndarray
    moment_b: jnp.ndarray
    force_a: jnp.ndarray
    moment_a: jnp.ndarray
    normal_force: jnp.ndarray
    friction: jnp.ndarray
    depth: jnp.ndarray
    active: jnp.ndarray
    point_b: jnp.ndarray
    point_a: jnp.ndarray
    normal: jnp.ndarray
    started: jnp.ndarray
    new_impacts: jnp.ndarray
    offset: jnp.ndarray
    tilt: jnp.ndarray
    axial: jnp.ndarray


def misaligned_axis(angle_x, angle_y, dtype=None):
    """Unit axis e_z turned by angle_x [rad] about x, then angle_y [rad] about y:
    a = (cos θx sin θy, −sin θx, cos θx cos θy)."""
    cx, sx, cy, sy = jnp.cos(angle_x), jnp.sin(angle_x), jnp.cos(angle_y), jnp.sin(angle_y)
    a = jnp.stack([cx * sy, -sx, cx * cy])
    return a if dtype is None else a.astype(dtype)


def _mv(R, v):
    """R v for R (..., 3, 3), v (..., 3), written out elementwise (no batched dot)."""
    return jnp.stack(
        [R[..., i, 0] * v[..., 0] + R[..., i, 1] * v[..., 1] + R[..., i, 2] * v[..., 2] for i in range(3)], -1
    )


def _dot(a, b):
    """a·b over the last axis (3), written out: XLA's CPU backend runs a reduction over so short
    an axis as a separate, slow kernel."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _sum_rows(f):
    """Σ_k f[k] over the contacts (the leading axis), written out (as ``_dot``)."""
    out = f[0]
    for k in range(1, f.shape[0]):
        out = out + f[k]
    return out


def geometry(p: Params, kin: Kinematics, axial=True):
    """(δ (4,), n (4, 3), Q (4, 3), E (4, 3) the end centres the radial rates use, offset (2, 3),
    tilt, axial position): the penetrations of the four contacts (module docstring)."""
    a = _mv(kin.R_a, p.axis_a)
    b = _mv(kin.R_b, p.axis_b)
    ca = kin.x_a + _mv(kin.R_a, p.centre_a)
    cb = kin.x_b + _mv(kin.R_b, p.centre_b)
    half = 0.5 * p.length
    ends = jnp.stack([cb + half * b, cb - half * b])  # top (+b), bottom
    rel = ends - ca
    d = rel - _dot(rel, a)[:, None] * a  # (I − a aᵀ)(E − C_A)
    dn = safe_sqrt(_dot(d, d))
    ok = dn > 0
    # centred end: any unit normal ⊥ a will do (the depth is −c there)
    fallback = jnp.cross(a, jnp.where(jnp.abs(a[0]) < 0.9, jnp.eye(3, dtype=a.dtype)[0], jnp.eye(3, dtype=a.dtype)[1]))
    fallback = fallback / jnp.sqrt(_dot(fallback, fallback))
    n_rad = jnp.where(ok[:, None], d / jnp.where(ok, dn, 1.0)[:, None], fallback)
    depth_rad = dn - p.clearance
    q_rad = ends + p.pin_radius * n_rad
    # tilt between the axes: |a × b| = |a − (a·b) b| (safe at aligned axes)
    ab = _dot(a, b)
    u = a - ab * b
    un = safe_sqrt(_dot(u, u))
    tilt = jnp.arctan2(un, jnp.abs(ab))
    outputs = (d, tilt, _dot(cb - ca, a))
    if not axial:
        return depth_rad, n_rad, q_rad, ends, *outputs
    # rim reach R_B·s(|u|), s = √(|u|² + ε²) − ε (ε = face_smoothing; s = |u| at ε = 0): the
    # contact point moves from the rim to the face centre as the faces align (no kink at tilt 0)
    eps = p.face_smoothing
    root = safe_sqrt(un * un + eps * eps)
    reach = root - eps
    lever = jnp.where(root > 0, u / jnp.where(root > 0, root, 1.0), jnp.zeros_like(u))  # ∂s/∂u
    face = 0.5 * (p.length + p.axial_gap)
    sgn = jnp.array([1.0, -1.0], a.dtype)
    depth_ax = sgn * _dot(rel, a) + p.pin_radius * reach - face
    n_ax = sgn[:, None] * a
    q_ax = ends + p.pin_radius * sgn[:, None] * lever
    return (
        jnp.concatenate([depth_rad, depth_ax]),
        jnp.concatenate([n_rad, n_ax]),
        jnp.concatenate([q_rad, q_ax]),
        jnp.concatenate([ends, ends]),
        *outputs,
    )


def evaluate(cfg: Config, p: Params, kin: Kinematics, memory):
    """Loads of the joint on both bodies and the new impact memory (shape (4,) or (2,) without
    the axial contacts; 0 off contact, δ̇⁻ ≥ floor in contact: the largest approach rate since the
    contact began).  Returns (Force,
    memory)."""
    with integrate.stage("contact_detection"):
        depth, n, q_b, ends, offset, tilt, axial_pos = geometry(p, kin, cfg.axial)
        q_a = q_b - depth[:, None] * n
        vel_a = lambda pt: kin.v_a + jnp.cross(kin.w_a, pt - kin.x_a)
        vel_b = lambda pt: kin.v_b + jnp.cross(kin.w_b, pt - kin.x_b)
        rel = vel_b(q_b) - vel_a(q_a)
        delta_dot = _dot(n, rel)  # = n·(v_B(E) − v_A(P)) for the spheres: ω × (Q − E) ⊥ n
        v_t = rel - delta_dot[:, None] * n
        slip = safe_sqrt(_dot(v_t, v_t))
        active = depth > 0
    with integrate.stage("contact_laws"):
        prev = memory > 0
        started = active & ~prev
        # δ̇⁻: the largest approach rate of the contact episode (the onset rate for an ordinary
        # impact, which decelerates from first touch; a fast hit that begins as a graze is not
        # left with the floor value, whose δ̇/δ̇⁻ would blow the damping term up)
        onset_rate = jnp.maximum(delta_dot, laws.IMPACT_VELOCITY_FLOOR)
        if cfg.impact_velocity == "episode_max":
            dd_minus = jnp.maximum(jnp.where(started, 0.0, memory), onset_rate)
        else:  # "onset": captured at the first step of contact (jaxclear.joints' rule)
            dd_minus = jnp.where(started, onset_rate, memory)
        dd_minus = jnp.where(active, dd_minus, 0.0)
        k = len(depth)
        stiff = jnp.stack([p.stiffness, p.stiffness, p.axial_stiffness, p.axial_stiffness][:k])
        fn = laws.normal_force(
            cfg.normal_law,
            depth,
            delta_dot,
            dd_minus,
            stiff,
            exponent=p.exponent,
            restitution=p.restitution,
            damping=p.damping,
            static_exponent=cfg.exponent,
        )
        fn = jnp.where(active, fn, 0.0)
        ft = laws.friction_force(cfg.friction, slip, fn, p.friction_coefficient, p.v0, p.v1)  # ≤ 0
        t_hat = v_t / jnp.where(slip > 0, slip, 1.0)[:, None]
        f_b = -fn[:, None] * n + ft[:, None] * t_hat  # on the pin, per contact
        force_b = _sum_rows(f_b)
        moment_b = _sum_rows(jnp.cross(q_b - kin.x_b, f_b))
        force_a = -force_b
        moment_a = -_sum_rows(jnp.cross(q_a - kin.x_a, f_b))
    out = Force(
        force_b,
        moment_b,
        force_a,
        moment_a,
        fn,
        jnp.abs(ft),
        jnp.where(active, depth, 0.0),
        active,
        q_b,
        q_a,
        n,
        started,
        jnp.sum(started, dtype=jnp.int32),
        offset,
        tilt,
        axial_pos,
    )
    return out, dd_minus


def initial_memory(cfg: Config, dtype=jnp.float64):
    return jnp.zeros((4 if cfg.axial else 2,), dtype)


def reference_params(**kw) -> Params:
    """A steel pin of radius 10 mm and length 40 mm with 50 µm radial clearance and 0.2 mm end
    play (end faces smoothed over 1e-4 rad), Hertz-type stiffness of a steel journal in a steel bore (``laws.internal_cylinder_
    stiffness``, E = 207 GPa, ν = 0.3), e = 0.8, μ = 0.1, hole and pin axes along z (SI)."""
    R, c = 10e-3, 50e-6
    sigma = 2 * (1 - 0.3**2) / 207e9  # σ_A + σ_B, steel on steel
    K = 4.0 / (3.0 * sigma) * (R * (R + c) / c) ** 0.5  # laws.internal_cylinder_stiffness at c = 50 µm
    z = jnp.array([0.0, 0.0, 1.0])
    base = dict(
        pin_radius=R,
        clearance=c,
        length=40e-3,
        axial_gap=0.2e-3,
        stiffness=K,
        axial_stiffness=K,
        exponent=1.5,
        restitution=0.8,
        damping=0.0,
        friction_coefficient=0.1,
        v0=1e-4,
        v1=1e-3,
        axis_a=z,
        centre_a=jnp.zeros(3),
        axis_b=z,
        centre_b=jnp.zeros(3),
        face_smoothing=1e-4,
    )
    base.update(kw)
    return Params(**{k: jnp.asarray(v, float) for k, v in base.items()})


def fixed_housing_loads(cfg: Config, joint_params, external=None):
    """``loads`` for ``rigid3d.make_step`` of one pin (body B, n = 1) in a fixed housing (body A
    at the origin, world axes): ``housing_loads`` with a housing at rest."""
    return housing_loads(cfg, joint_params, None, external)


def housing_loads(cfg: Config, joint_params, housing=None, external=None):
    """``loads`` for ``rigid3d.make_step`` of one pin (body B, n = 1) in a housing (body A) whose
    motion is prescribed: ``housing(p, t) -> (x [m], R (3, 3), v [m/s], w [rad/s] world)`` (None:
    at rest at the origin), plus ``external(p, q, v, t) -> (F (3,) [N], τ (3,) [N·m] world, about
    the centre of mass)``.  The aux is the joint's impact memory; the step output is (Force,
    F_ext, τ_ext)."""
    from . import rigid3d

    def loads(p, q, v, memory, t):
        dt = q.x.dtype
        z3, eye = jnp.zeros(3, dt), jnp.eye(3, dtype=dt)
        xa, Ra, va, wa = housing(p, t) if housing is not None else (z3, eye, z3, z3)
        R_b = rigid3d.quat_to_matrix(q.quat[0])
        kin = Kinematics(xa, Ra, va, wa, q.x[0], R_b, v.v[0], _mv(R_b, v.w[0]))
        f, mem = evaluate(cfg, joint_params(p), kin, memory)
        fe, te = external(p, q, v, t) if external is not None else (z3, z3)
        return (f.force_b + fe)[None], (f.moment_b + te)[None], mem, (f, fe, te)

    return loads
