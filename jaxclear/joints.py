"""Clearance revolute joints: body states -> contact -> force pair on journal and bearing.

A clearance joint is a force element (Flores & Ambrósio 2004): the journal (pin, radius R_J)
moves freely inside the bearing (bushing) until they touch, then a normal contact force along
the contact normal and a friction force along the tangent act at the contact points.

Two geometries share one force routine:

* ``"circle"`` — analytic (Flores et al. 2004): e = r_J − r_B, δ = |e| − c, n = e/|e|.
* ``"points"`` — the discretized non-circular bushing of Xu 2015 (``contact.detect``):
  up to ``max_regions`` simultaneous contact regions, each with its own deepest point.

Per region the law needs the penetration rate δ̇ = n·(ṙ_J − ṗ_B) (pin centre against the
bushing material point) and, for hysteresis laws, the impact velocity δ̇⁻ captured
at onset.  The journal receives F = −F_n n + F_t t (t = perp(n)) at p_J = r_J + R_J n,
the bearing receives −F at its deepest profile point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import jax.numpy as jnp

from . import contact, integrate, laws
from ._math import cross2, perp, safe_norm

AUTO_PENDING = "auto: pending (sweep.plan decides from every variant's profile)"


@dataclass(frozen=True)
class JointConfig:
    """Static (hashable) description of one clearance joint.

    geometry: "circle" (analytic) or "points" (discretized profile, Xu 2015).
    n_points, max_regions, refine: static shape choices of the point method.
    window: 0 (default) runs ``contact.detect`` on all N points; W > 0 runs
    ``contact.detect_window`` on the W points around the pin direction (same results unless
    ``JointForce.window_overflow`` is set; the profile must be sampled at uniform angles).
    normal_law: a name of ``laws.NORMAL_LAWS``; friction: a name of ``laws.FRICTION_MODELS``.
    regions_choice: how ``max_regions`` was chosen (``profile.max_regions = "auto"``: the reason
    from ``contact.region_bound``; ``AUTO_PENDING`` until ``sweep.plan`` has seen every variant's
    profile; "" when given as an integer).  Not part of equality or hash: two configs with the
    same slots compile to the same function.  exponent: the contact law's exponent when the spec
    fixes it for every variant and joint (``mechanisms.static_law_exponent``; the params'
    exponent must equal it): δ^1.5 as δ·√δ (``laws.normal_force``'s static_exponent); None: read
    from the params only.
    """

    geometry: str = "circle"
    n_points: int = 0
    max_regions: int = 1
    refine: bool = True
    normal_law: str = "lankarani_nikravesh"
    friction: str = "ambrosio"
    window: int = 0
    regions_choice: str = field(default="", compare=False)
    exponent: float | None = None

    @property
    def slots(self) -> int:
        return 1 if self.geometry == "circle" else self.max_regions

    @property
    def memory_size(self) -> int:
        """Length of the per-joint impact memory (1 for the circle, N points, or W window
        points and the window start)."""
        if self.geometry == "circle":
            return 1
        if self.window:
            return self.window + 1
        if self.max_regions == 1:
            return 1 + contact.mask_words(self.n_points)
        return self.n_points


class JointParams(NamedTuple):
    """Numeric (batchable) joint parameters, SI units.

    journal_radius [m]; clearance [m] (circle geometry); points (N, 2) [m] bushing profile
    in the bearing frame (points geometry); stiffness K [N/m^n]; exponent n; restitution e;
    damping c [N·s/m] (linear law); friction_coefficient μ; v0, v1 [m/s] friction
    regularisation speeds.
    """

    journal_radius: jnp.ndarray
    clearance: jnp.ndarray
    points: jnp.ndarray
    stiffness: jnp.ndarray
    exponent: jnp.ndarray
    restitution: jnp.ndarray
    damping: jnp.ndarray
    friction_coefficient: jnp.ndarray
    v0: jnp.ndarray
    v1: jnp.ndarray
    wear_coefficient: jnp.ndarray = None  # Archard k_w [m²/N] (jaxclear.wear; None: no wear)
    bushing_length: jnp.ndarray = None  # axial length L [m] of the bushing (wear pressure)


class JointKinematics(NamedTuple):
    """Global-frame states of the two sides of a clearance joint.

    r_j, v_j: journal centre position [m] and velocity [m/s]; w_j: journal body angular
    velocity [rad/s]; r_b, v_b: bearing-frame origin (nominal bearing centre) and its
    velocity; rot_b = (cos ψ, sin ψ) bearing orientation; w_b bearing angular velocity.
    """

    r_j: jnp.ndarray
    v_j: jnp.ndarray
    w_j: jnp.ndarray
    r_b: jnp.ndarray
    v_b: jnp.ndarray
    rot_b: jnp.ndarray
    w_b: jnp.ndarray


class JointForce(NamedTuple):
    """Result of one joint evaluation (global frame, SI units).

    force: total force on the journal [N] (the bearing gets −force); p_j, p_b: per region slot
    application points on journal and bearing [m]; f_slots: (K, 2) force on journal per slot;
    normal_force: (K,) F_n [N]; depth: (K,) δ [m]; active: (K,) bool; n_regions: int;
    new_impacts: number of regions that started this step; e_local: journal centre in the
    bearing frame [m]; window_overflow: bool, the windowed detection may have missed contact
    (always False without a window).
    """

    force: jnp.ndarray
    f_slots: jnp.ndarray
    p_j: jnp.ndarray
    p_b: jnp.ndarray
    normal_force: jnp.ndarray
    depth: jnp.ndarray
    active: jnp.ndarray
    n_regions: jnp.ndarray
    new_impacts: jnp.ndarray
    e_local: jnp.ndarray
    window_overflow: jnp.ndarray = None
    slip_speed: jnp.ndarray = None  # (K,) |v_t| [m/s] relative tangential speed at each slot's contact


def _rotate(rot, v):
    c, s = rot[0], rot[1]
    return jnp.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


def _rotate_back(rot, v):
    c, s = rot[0], rot[1]
    return jnp.stack([c * v[..., 0] + s * v[..., 1], -s * v[..., 0] + c * v[..., 1]], axis=-1)


def evaluate(cfg: JointConfig, p: JointParams, kin: JointKinematics, memory):
    """Contact forces of one clearance joint and the updated impact-velocity memory.

    memory: impact velocity δ̇⁻ [m/s] per slot (circle: shape (1,)) or per profile point
    (points: shape (N,)), as carried from the previous step.  The memory is 0 exactly where
    there was no contact and ≥ a floor where there was, so it also is the previous contact mask
    (one carry leaf instead of two).  Returns (JointForce, new_memory).
    """
    with integrate.stage("contact_detection"):  # geometry, normals, contact-point velocities
        prev_active = memory > 0
        e_glob = kin.r_j - kin.r_b
        e_loc = _rotate_back(kin.rot_b, e_glob)
        if cfg.geometry == "circle":
            ecc = safe_norm(e_loc)
            # Centred journal: any unit normal will do, the depth is negative there anyway.
            n_loc = jnp.where(ecc > 0, e_loc / jnp.where(ecc > 0, ecc, 1.0), jnp.array([1.0, 0.0], e_loc.dtype))
            depth = (ecc - p.clearance)[None]
            n_loc = n_loc[None, :]
            pb_loc = n_loc * (p.journal_radius + p.clearance)
            active = depth > 0
            n_regions = jnp.sum(active.astype(jnp.int32))
        elif cfg.geometry == "points":
            if cfg.window:
                reg = contact.detect_window(
                    p.points, e_loc, p.journal_radius, cfg.max_regions, cfg.window, refine=cfg.refine
                )
            elif cfg.max_regions == 1:
                reg, words = contact.detect_deepest_words(p.points, e_loc, p.journal_radius, cfg.refine)
            else:
                reg = contact.detect(p.points, e_loc, p.journal_radius, cfg.max_regions, refine=cfg.refine)
            depth = reg.depth
            n_loc = reg.normal
            pb_loc = reg.point_bushing
            active = reg.active
            n_regions = reg.n_regions
        else:
            raise ValueError(f"joint geometry = {cfg.geometry!r}; allowed: 'circle', 'points'")

        n = _rotate(kin.rot_b, n_loc)  # (K, 2)
        t = perp(n)
        p_b = kin.r_b + _rotate(kin.rot_b, pb_loc)
        p_j = kin.r_j + p.journal_radius * n
        # Material point velocities: v + ω × r  (planar: ω × r = ω·perp(r)).
        v_pb = kin.v_b + kin.w_b * perp(p_b - kin.r_b)
        v_pj = kin.v_j + kin.w_j * perp(p_j - kin.r_j)
        delta_dot = jnp.sum(n * (kin.v_j - v_pb), axis=-1)
        v_t = jnp.sum(t * (v_pj - v_pb), axis=-1)

    with integrate.stage("contact_laws"):  # impact memory, normal and friction laws
        overflow = jnp.zeros((), bool)
        if cfg.geometry == "circle":
            started = active & ~prev_active
            dd_minus = jnp.where(started, jnp.maximum(delta_dot, laws.IMPACT_VELOCITY_FLOOR), memory)
            dd_minus = jnp.where(active, dd_minus, 0.0)
            new_memory = dd_minus
            new_impacts = jnp.sum(started.astype(jnp.int32))
        elif cfg.window:
            dd_minus, new_memory, inherited, lost = contact.window_impact_memory(reg, memory, delta_dot, cfg.n_points)
            new_impacts = jnp.sum((active & ~inherited).astype(jnp.int32))
            overflow = reg.overflow | lost
        elif cfg.max_regions == 1:
            dd_minus, new_memory, inherited = contact.deepest_impact_memory(reg, memory, delta_dot, words=words)
            new_impacts = jnp.sum((active & ~inherited).astype(jnp.int32))
        else:
            # A region is new when none of its points was in contact at the previous step.
            dd_minus, new_memory, inherited = contact.region_impact_memory(reg, prev_active, memory, delta_dot)
            new_impacts = jnp.sum((active & ~inherited).astype(jnp.int32))

        fn = laws.normal_force(
            cfg.normal_law,
            depth,
            delta_dot,
            dd_minus,
            p.stiffness,
            exponent=p.exponent,
            restitution=p.restitution,
            damping=p.damping,
            static_exponent=cfg.exponent,
        )
        fn = jnp.where(active, fn, 0.0)
        ft = laws.friction_force(cfg.friction, v_t, fn, p.friction_coefficient, p.v0, p.v1)
        f_slots = -fn[:, None] * n + ft[:, None] * t
        force = jnp.sum(f_slots, axis=0)
    out = JointForce(
        force=force,
        f_slots=f_slots,
        p_j=p_j,
        p_b=p_b,
        normal_force=fn,
        depth=jnp.where(active, depth, 0.0),
        active=active,
        n_regions=n_regions,
        new_impacts=new_impacts,
        e_local=e_loc,
        window_overflow=overflow,
        slip_speed=jnp.abs(v_t),
    )
    return out, new_memory


def moment(force_slots, points, about):
    """Σ (p − about) × F  [N·m]: moment of per-slot forces about a point."""
    return jnp.sum(cross2(points - about, force_slots))


def initial_memory(cfg: JointConfig, dtype=jnp.float64):
    """Zero impact memory (no contact anywhere) for a joint."""
    return jnp.zeros((cfg.memory_size,), dtype)
