"""Finite particle method (FPM) for planar linkages, rigid or flexible, with clearance joints.

Zheng, Yang, Liu & Luo, "Dynamic analysis of planar mechanisms with clearance joints by the
finite particle method" (finite particle method: Ting, Shih & Wang 2004; Yu Ying's beam
formulation).  The linkage is a set of particles joined by planar beam elements; every particle
obeys Newton's second law with lumped mass and rotational inertia, no mass matrix is assembled
and no constraint equation is solved, so each step is the same elementwise work for every
variant (what ``vmap`` and accelerators want).  This module knows nothing of specs.

Particles and nodes.  A link of n elements has n + 1 particles.  Particles of different links
that meet at an ideal revolute joint share their translation ("displacement coupling": one
*node*) and keep their own rotation (one *rotation* each), so the state is

    q = Coordinates(nodes (N, 2) positions [m], rotations (R, 2) (cos θ, sin θ) pairs),
    v = Coordinates(nodes (N, 2) [m/s], rotations (R,) θ̇ [rad/s])   (``integrate.drift``).

Equations of motion of node k and rotation r (explicit, no assembly):

    m_k ẍ_k = Σ_e f_e,k + F_ext,k + F_contact,k − α m_k ẋ_k,
    I_r θ̈_r = Σ_e M_e,r + T_ext,r + T_contact,r − α I_r θ̇_r,

α the mass-proportional damping [1/s]; ground nodes do not move; a slider node keeps only the
component along its guide; a driven rotation follows its prescribed θ̈ (``drivers.crank_ramp``).

Beam element a–b (the fictitious reversed rigid-body motion).  Undo the element's rigid motion —
the translation of a and the rotation of the chord — and what is left is its pure deformation:
the elongation and the end rotations relative to the chord,

    Δ = l − l₀,   φ_a = ∠(e, t_a),   φ_b = ∠(e, t_b),

e = (x_b − x_a)/l the chord, t_a, t_b the end tangents (each particle's orientation carried from
its initial angle to the chord).  In the element's frame the Euler–Bernoulli stiffness gives

    N = (EA/l₀) Δ,   M_a = (EI/l₀)(4φ_a + 2φ_b),   M_b = (EI/l₀)(2φ_a + 4φ_b),   V = (M_a + M_b)/l,

and rotated back to the global frame the element acts on its particles with

    f_a = N e − V e⊥,   f_b = −N e + V e⊥,   M_a on a: −M_a,   M_b on b: −M_b.

The paper accumulates these as increments step by step; for a linear elastic element the
increments sum to the total above, which we evaluate directly (no internal-force history in
the state).  They derive from U = ½(EA/l₀)Δ² + (EI/l₀)(2φ_a² + 2φ_aφ_b + 2φ_b²), so an undamped
frictionless linkage conserves energy, and a rigid motion of the whole element changes neither Δ
nor φ (objectivity, exactly).

Lumping (``link_lumping``).  The paper sizes each beam's section from the link's mass m and
centroidal inertia I (A = m/(ρl), I_z = I/(ρl)) and lumps ρAl/2 and the section's rotational
inertia ρI_z l/2 on each element end; a rigid link then carries I + T, T = Σ m_α s_α² the
inertia of its point masses (m L²/12·(1 + 2/n²) for n ≥ 2 elements, m L²/4 for one), i.e. about
twice the given I for a slender bar.  ``link_lumping`` keeps the total mass m and makes the
rigid link's centroidal inertia exactly I: a share κ = 0.1 of I (at least) sits in the
particles' rotational inertias (an explicit rotation needs one) and the point masses are
shifted from the ends towards the middle until Σ m_α s_α² is the rest (n ≥ 2; with one element
the paper's lumping is kept and its inertia excess reported by ``rigid_inertia``).

Explicit update: the central difference (leapfrog) of ``integrate``.  Its critical step for an
element of stiffness K and lumped masses M is 2/ω_max(M⁻¹K); the element-by-element bound
(Irons & Treharne) makes the smallest over the elements, with each element's own share of the
particle masses, a safe bound for the whole linkage (``critical_step``); with contact use about
half of it (the paper's factor ≈ 0.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import drivers, integrate, joints
from ._math import cross2, perp, safe_norm

Coordinates = integrate.state_type("Coordinates", ("nodes", "rotations"), doc="""FPM coordinates (q, v and a alike):
    nodes (N, 2) translations [m] shared by the particles that meet there; rotations (R, 2)
    (cos θ, sin θ) pairs in q, θ̇ (R,) in v and θ̈ in a.""")

KAPPA = 0.1  # least share of a link's inertia carried by its particles' rotational inertias


@dataclass(frozen=True)
class Topology:
    """Static structure (hashable: one compiled function per distinct value).

    elements: ((node_a, node_b, rot_a, rot_b), ...); ground: nodes that do not move; sliders:
    ((node, guide index), ...) nodes that move along ``Params.guides``; fixed_rotations:
    rotations held at their initial angle; driven: rotations that follow the crank driver;
    clearance: ((journal node, journal rotation, bearing node, bearing rotation), ...);
    joint: the clearance joints' static choices (``joints.JointConfig``)."""

    n_nodes: int
    n_rotations: int
    elements: tuple
    ground: tuple = ()
    sliders: tuple = ()
    fixed_rotations: tuple = ()
    driven: tuple = ()
    clearance: tuple = ()
    joint: joints.JointConfig = joints.JointConfig()

    def index(self, k):
        return np.asarray([e[k] for e in self.elements], dtype=np.int32)


class Params(NamedTuple):
    """Traced parameters (SI). Per element: EA [N], EI [N·m²], l0 [m], tangent offsets (E, 2, 2)
    (cos, sin) of the initial angle from each end particle's orientation to the chord; per node:
    mass [kg], x0 (N, 2) [m]; per rotation: inertia [kg·m²]; guides (S, 2) unit directions;
    damping α [1/s]; gravity [m/s²] along −y; the driver (crank_speed ω [rad/s], ramp_time [s]);
    joint: clearance-joint params with a leading axis per clearance joint; forces (N, 2) [N] and
    torques (R,) [N·m] constant external loads."""

    EA: jnp.ndarray
    EI: jnp.ndarray
    l0: jnp.ndarray
    offsets: jnp.ndarray
    mass: jnp.ndarray
    x0: jnp.ndarray
    inertia: jnp.ndarray
    guides: jnp.ndarray
    damping: jnp.ndarray
    gravity: jnp.ndarray
    crank_speed: jnp.ndarray
    ramp_time: jnp.ndarray
    joint: object
    forces: jnp.ndarray
    torques: jnp.ndarray


def _rotate(pair, cs):
    """(cos, sin) pairs rotated by the angles whose (cos, sin) are ``cs``."""
    c, s = pair[..., 0], pair[..., 1]
    return jnp.stack([c * cs[..., 0] - s * cs[..., 1], s * cs[..., 0] + c * cs[..., 1]], axis=-1)


def element_deformation(topo: Topology, p: Params, q):
    """Chord e (E, 2), length l (E,), elongation Δ and end rotations φ_a, φ_b (E,) [rad]."""
    xa, xb = q.nodes[topo.index(0)], q.nodes[topo.index(1)]
    d = xb - xa
    l = safe_norm(d)
    e = d / l[:, None]
    ta = _rotate(q.rotations[topo.index(2)], p.offsets[:, 0])
    tb = _rotate(q.rotations[topo.index(3)], p.offsets[:, 1])
    phi = lambda t: jnp.arctan2(cross2(e, t), jnp.sum(e * t, axis=-1))
    return e, l, l - p.l0, phi(ta), phi(tb)


def element_forces(topo: Topology, p: Params, q):
    """Axial force N [N] (tension > 0), end moments M_a, M_b [N·m] and the resulting node forces
    (N, 2) and rotation moments (R,) of every element (module docstring)."""
    e, l, dl, pa, pb = element_deformation(topo, p, q)
    N = p.EA / p.l0 * dl
    k = p.EI / p.l0
    Ma, Mb = k * (4.0 * pa + 2.0 * pb), k * (2.0 * pa + 4.0 * pb)
    V = (Ma + Mb) / l
    n = perp(e)
    fa = N[:, None] * e - V[:, None] * n
    F = jnp.zeros_like(q.nodes).at[topo.index(0)].add(fa).at[topo.index(1)].add(-fa)
    T = jnp.zeros(q.rotations.shape[:1], q.nodes.dtype).at[topo.index(2)].add(-Ma).at[topo.index(3)].add(-Mb)
    return N, Ma, Mb, F, T


def strain_energy(topo: Topology, p: Params, q):
    """U = Σ_e ½(EA/l₀)Δ² + (EI/l₀)(2φ_a² + 2φ_aφ_b + 2φ_b²) [J]."""
    _, _, dl, pa, pb = element_deformation(topo, p, q)
    return jnp.sum(0.5 * p.EA / p.l0 * dl ** 2 + p.EI / p.l0 * 2.0 * (pa * pa + pa * pb + pb * pb))


def kinetic_energy(p: Params, v):
    return 0.5 * jnp.sum(p.mass * jnp.sum(v.nodes ** 2, axis=-1)) + 0.5 * jnp.sum(p.inertia * v.rotations ** 2)


def _kinematics(q, v, node, rot):
    pair, w = q.rotations[rot], v.rotations[rot]
    return q.nodes[node], v.nodes[node], pair, w


def accelerations(topo: Topology, p: Params, q, v, aux, t):
    """(a, impact memory, joint forces): the particles' accelerations at (q, v, t)."""
    with integrate.stage("equations_of_motion"):
        _, _, _, F, T = element_forces(topo, p, q)
        F = F + p.forces - p.damping * p.mass[:, None] * v.nodes
        F = F.at[:, 1].add(-p.gravity * p.mass)
        T = T + p.torques - p.damping * p.inertia * v.rotations
    jfs, mems = [], []
    for k, (nj, rj, nb, rb) in enumerate(topo.clearance):
        with integrate.stage("kinematics"):
            rj_, vj_, _, wj = _kinematics(q, v, nj, rj)
            rb_, vb_, ub, wb = _kinematics(q, v, nb, rb)
            kin = joints.JointKinematics(rj_, vj_, wj, rb_, vb_, ub, wb)
        jp = jax.tree_util.tree_map(lambda x: x[k], p.joint)
        jf, mem = joints.evaluate(topo.joint, jp, kin, aux[k])
        with integrate.stage("equations_of_motion"):
            F = F.at[nj].add(jf.force).at[nb].add(-jf.force)
            T = T.at[rj].add(joints.moment(jf.f_slots, jf.p_j, rj_)).at[rb].add(joints.moment(-jf.f_slots, jf.p_b, rb_))
        jfs.append(jf)
        mems.append(mem)
    with integrate.stage("equations_of_motion"):
        a_n = F / p.mass[:, None]
        a_r = T / p.inertia
        if topo.ground:
            a_n = a_n.at[np.asarray(topo.ground)].set(0.0)
        for node, g in topo.sliders:
            d = p.guides[g]
            a_n = a_n.at[node].set(jnp.dot(a_n[node], d) * d)
        if topo.fixed_rotations:
            a_r = a_r.at[np.asarray(topo.fixed_rotations)].set(0.0)
        if topo.driven:
            alpha = drivers.crank_ramp(t, p.crank_speed, p.ramp_time)[2]
            a_r = a_r.at[np.asarray(topo.driven)].set(alpha)
    aux1 = jnp.stack(mems) if mems else aux
    return Coordinates(nodes=a_n, rotations=a_r), aux1, tuple(jfs)


def initial_state(topo: Topology, p: Params, v0=None):
    """Nodes at x0, every particle at its initial angle (pairs (1, 0): the offsets carry the
    element directions), at rest (or at the velocities ``v0``); the joints' impact memory."""
    dtype = p.x0.dtype
    q = Coordinates(nodes=p.x0, rotations=jnp.stack([jnp.ones(topo.n_rotations, dtype),
                                                     jnp.zeros(topo.n_rotations, dtype)], axis=-1))
    v = v0 if v0 is not None else Coordinates(nodes=jnp.zeros_like(p.x0), rotations=jnp.zeros(topo.n_rotations, dtype))
    aux = (jnp.stack([joints.initial_memory(topo.joint, dtype) for _ in topo.clearance]) if topo.clearance
           else jnp.zeros((1, 1), dtype))
    return q, v, aux


def make_step(topo: Topology, dt: float, scheme: str = "leapfrog"):
    """``step(p, state, i)`` of ``integrate`` for this linkage (the central difference by default)."""
    return integrate.make_step(scheme, lambda p, q, v, aux, t: _accel_out(topo, p, q, v, aux, t), integrate.drift, dt)


def _accel_out(topo, p, q, v, aux, t):
    a, aux1, jfs = accelerations(topo, p, q, v, aux, t)
    return a, aux1, (a, jfs, q, v, t)


# ----------------------------------------------------------------------------- lumping, bounds

def link_lumping(mass, inertia, length, n, exact=True):
    """Point masses (n + 1,) [kg] and particle rotational inertias (n + 1,) [kg·m²] of a straight
    link of ``n`` equal elements, total mass ``mass``, centroidal inertia ``inertia``, length
    ``length`` (traceable).  exact=False: the paper's lumping (trapezoidal masses, the link's
    inertia shared by the particles ∝ their element lengths).  exact=True (n ≥ 2): rotational
    inertias κ·I at least, masses shifted from the trapezoid towards the interior particles so
    that Σ m_α s_α² = I − Σ I_α (module docstring).  The result may be non-physical (a negative
    mass) where I is below what the interior particles alone can carry: ``check_lumping``."""
    w_trap = np.full(n + 1, 1.0 / n)
    w_trap[[0, -1]] *= 0.5
    w_rot = w_trap.copy()
    s = (np.arange(n + 1) / n - 0.5)  # particle positions along the link / length
    if not exact or n < 2:
        return mass * jnp.asarray(w_trap), inertia * jnp.asarray(w_rot)
    w_int = np.zeros(n + 1)
    w_int[1:-1] = 1.0 / (n - 1)
    t_trap, t_int = float(w_trap @ s ** 2), float(w_int @ s ** 2)  # × m L²
    T = mass * length ** 2
    rot = jnp.maximum(inertia - t_trap * T, KAPPA * inertia)
    target = (inertia - rot) / T  # Σ w s² wanted
    blend = (t_trap - target) / (t_trap - t_int)
    w = (1.0 - blend) * jnp.asarray(w_trap) + blend * jnp.asarray(w_int)
    return mass * w, rot * jnp.asarray(w_rot)


def rigid_inertia(masses, inertias, length):
    """(total mass, centroidal inertia) of a rigid straight link with these particles."""
    n = masses.shape[-1] - 1
    s = (jnp.arange(n + 1) / n - 0.5) * length
    return jnp.sum(masses, -1), jnp.sum(masses * s ** 2, -1) + jnp.sum(inertias, -1)


def critical_step(topo: Topology, p: Params, own_mass, own_inertia):
    """Largest stable step [s] of the central difference over the elements (numpy, batched over
    leading axes): 2/√λ_max of each element's M⁻¹K, K the 6×6 Euler–Bernoulli stiffness in the
    element frame, M the element's own share of its end particles' masses ``own_mass`` (E, 2)
    and rotational inertias ``own_inertia`` (E, 2) (the element-by-element bound)."""
    EA, EI, l = (np.asarray(x, float) for x in (p.EA, p.EI, p.l0))
    z = np.zeros_like(l)
    a, b, c, d = EA / l, 12 * EI / l ** 3, 6 * EI / l ** 2, 4 * EI / l
    rows = [[a, z, z, -a, z, z], [z, b, c, z, -b, c], [z, c, d, z, -c, d / 2],
            [-a, z, z, a, z, z], [z, -b, -c, z, b, -c], [z, c, d / 2, z, -c, d]]
    K = np.stack([np.stack(r, -1) for r in rows], -2)
    m, J = np.asarray(own_mass, float), np.asarray(own_inertia, float)
    diag = np.stack([m[..., 0], m[..., 0], J[..., 0], m[..., 1], m[..., 1], J[..., 1]], -1)
    s = 1.0 / np.sqrt(diag)
    lam = np.linalg.eigvalsh(K * s[..., :, None] * s[..., None, :])[..., -1]
    return 2.0 / np.sqrt(np.max(lam, axis=-1))
