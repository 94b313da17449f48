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
the paper's lumping is kept and its inertia excess reported by ``rigid_inertia``).  The end
particles keep a positive mass only while I > m L² (n − 2)/(12 n (1 − κ))
(``exact_lumping_min_inertia``, derived in ``link_lumping``).

Explicit update: the central difference (leapfrog) of ``integrate``.  Its critical step for an
element of stiffness K and lumped masses M is 2/ω_max(M⁻¹K); the element-by-element bound
(Irons & Treharne) makes the smallest over the elements, with each element's own share of the
particle masses, a safe bound for the whole linkage (``critical_step``); with contact use about
half of it (the paper's factor ≈ 0.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import drivers, integrate, joints
from ._math import perp, safe_norm, safe_sqrt

Coordinates = integrate.state_type(
    "Coordinates",
    ("nodes", "rotations"),
    doc="""FPM coordinates (q, v and a alike):
    nodes (N, 2) translations [m] shared by the particles that meet there; rotations (R, 2)
    (cos θ, sin θ) pairs in q, θ̇ (R,) in v and θ̈ in a.""",
)

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
    particle_mass: jnp.ndarray = None


def _rotate(pair, cs):
    """(cos, sin) pairs rotated by the angles whose (cos, sin) are ``cs``."""
    c, s = pair[..., 0], pair[..., 1]
    return jnp.stack([c * cs[..., 0] - s * cs[..., 1], s * cs[..., 0] + c * cs[..., 1]], axis=-1)


# The element loop below works component by component on (E,) arrays, with the element ends
# taken by static slices and the forces summed onto the nodes by static slices too: under vmap a
# gather/scatter of (B, N, 2) node arrays reads and writes them index by index, in layouts that
# force transposes, and the (B, E, 2) intermediates are reduced over a minor axis of 2.  At
# B = 1024 this form ran the four-bar's step 1.57-1.76× and the slider-crank's 1.26-1.42× faster
# (benchmarks/bench_fpm.py --sizes 1024 --cost-ms 0, old and new trees alternated, issue 17).
# Numerics: the same operations, but XLA fuses them differently, so round-off moves at the ulp
# level (as a change of chunk size already moves it in chaotic contact runs).
def _take(x, idx):
    """``x[..., idx]`` for a static index list, as slices of its consecutive runs (no gather)."""
    idx = [int(i) for i in idx]
    if not idx:
        return x[..., :0]
    parts, start = [], 0
    for k in range(1, len(idx) + 1):
        if k == len(idx) or idx[k] != idx[k - 1] + 1:
            parts.append(x[..., idx[start] : idx[k - 1] + 1])
            start = k
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


def _scatter_add(n, terms):
    """``zeros(n).at[i1].add(v1).at[i2].add(v2)...`` (last axis) for ``terms`` = ((v, i), ...)
    with static index lists, the additions in the same order, without a scatter: slot d of node
    k is the d-th value added to it; slot by slot the values are sliced out in runs and summed,
    a node without a d-th value adding 0 (exact: a sum started from +0 never holds −0)."""
    slots = [[] for _ in range(n)]
    for t, (_, idx) in enumerate(terms):
        for e, k in enumerate(idx):
            slots[int(k)].append((t, e))
    v0 = terms[0][0]
    acc = jnp.zeros(v0.shape[:-1] + (n,), v0.dtype)
    for d in range(max((len(s) for s in slots), default=0)):
        runs = []  # (term or None for zeros, first element, count)
        for k in range(n):
            t, e = slots[k][d] if d < len(slots[k]) else (None, 0)
            if runs and runs[-1][0] == t and (t is None or runs[-1][1] + runs[-1][2] == e):
                runs[-1] = (t, runs[-1][1], runs[-1][2] + 1)
            else:
                runs.append((t, e, 1))
        cols = [
            jnp.zeros(v0.shape[:-1] + (c,), v0.dtype) if t is None else terms[t][0][..., e : e + c] for t, e, c in runs
        ]
        acc = acc + (cols[0] if len(cols) == 1 else jnp.concatenate(cols, axis=-1))
    return acc


def _deformation(topo: Topology, p: Params, q):
    """Chord (e_x, e_y), length l, elongation Δ and end rotations φ_a, φ_b (E,) [rad] (φ: the
    angle from e to the end tangent t = (cos, sin) pair rotated by the element's offset)."""
    x, y = q.nodes[..., 0], q.nodes[..., 1]
    c, s = q.rotations[..., 0], q.rotations[..., 1]
    ia, ib, ra, rb = (topo.index(k) for k in range(4))
    dx, dy = _take(x, ib) - _take(x, ia), _take(y, ib) - _take(y, ia)
    l = safe_sqrt(dx * dx + dy * dy)
    ex, ey = dx / l, dy / l

    def phi(r, off):
        cr, sr = _take(c, r), _take(s, r)
        tx, ty = cr * off[..., 0] - sr * off[..., 1], sr * off[..., 0] + cr * off[..., 1]  # _rotate
        return jnp.arctan2(ex * ty - ey * tx, ex * tx + ey * ty)

    return ex, ey, l, l - p.l0, phi(ra, p.offsets[:, 0]), phi(rb, p.offsets[:, 1])


def element_deformation(topo: Topology, p: Params, q):
    """Chord e (E, 2), length l (E,), elongation Δ and end rotations φ_a, φ_b (E,) [rad]."""
    ex, ey, l, dl, pa, pb = _deformation(topo, p, q)
    return jnp.stack([ex, ey], axis=-1), l, dl, pa, pb


def element_end_forces(topo: Topology, p: Params, q):
    """(E, 2) force of every element on its end a [N] (on its end b: the opposite)."""
    ex, ey, l, dl, pa, pb = _deformation(topo, p, q)
    N = p.EA / p.l0 * dl
    k = p.EI / p.l0
    V = (k * 6.0 * (pa + pb)) / l
    return jnp.stack([N * ex - V * -ey, N * ey - V * ex], axis=-1)  # N e − V e⊥


def element_forces(topo: Topology, p: Params, q):
    """Axial force N [N] (tension > 0), end moments M_a, M_b [N·m] and the resulting node forces
    (N, 2) and rotation moments (R,) of every element (module docstring)."""
    ex, ey, l, dl, pa, pb = _deformation(topo, p, q)
    N = p.EA / p.l0 * dl
    k = p.EI / p.l0
    Ma, Mb = k * (4.0 * pa + 2.0 * pb), k * (2.0 * pa + 4.0 * pb)
    V = (Ma + Mb) / l
    fx, fy = N * ex - V * -ey, N * ey - V * ex  # f_a = N e − V e⊥ (f_b = −f_a)
    ia, ib, ra, rb = (topo.index(k) for k in range(4))
    F = jnp.stack(
        [_scatter_add(topo.n_nodes, ((fx, ia), (-fx, ib))), _scatter_add(topo.n_nodes, ((fy, ia), (-fy, ib)))], axis=-1
    )
    T = _scatter_add(topo.n_rotations, ((-Ma, ra), (-Mb, rb)))
    return N, Ma, Mb, F, T


def element_loads(topo: Topology, p: Params, q):
    """Axial force N [N] (tension > 0) and the internal bending moments at every element's ends a
    and b [N·m] in the beam convention M = EI dθ/ds (s from a to b, θ the tangent's angle):
    positive where the element bends counter-clockwise going from a to b (concave towards e⊥,
    sagging for an element drawn along +x).  From ``element_forces``' moments on the element's
    ends (counter-clockwise): M(a) = −M_a, M(b) = M_b; at rest, with no torque on the particle
    between them, M(b) of one element = M(a) of the next."""
    N, Ma, Mb, _, _ = element_forces(topo, p, q)
    return N, -Ma, Mb


def strain_energy(topo: Topology, p: Params, q):
    """U = Σ_e ½(EA/l₀)Δ² + (EI/l₀)(2φ_a² + 2φ_aφ_b + 2φ_b²) [J]."""
    _, _, dl, pa, pb = element_deformation(topo, p, q)
    return jnp.sum(0.5 * p.EA / p.l0 * dl**2 + p.EI / p.l0 * 2.0 * (pa * pa + pa * pb + pb * pb))


def kinetic_energy(p: Params, v):
    return 0.5 * jnp.sum(p.mass * jnp.sum(v.nodes**2, axis=-1)) + 0.5 * jnp.sum(p.inertia * v.rotations**2)


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
    q = Coordinates(
        nodes=p.x0,
        rotations=jnp.stack([jnp.ones(topo.n_rotations, dtype), jnp.zeros(topo.n_rotations, dtype)], axis=-1),
    )
    v = v0 if v0 is not None else Coordinates(nodes=jnp.zeros_like(p.x0), rotations=jnp.zeros(topo.n_rotations, dtype))
    aux = (
        jnp.stack([joints.initial_memory(topo.joint, dtype) for _ in topo.clearance])
        if topo.clearance
        else jnp.zeros((1, 1), dtype)
    )
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
    that Σ m_α s_α² = I − Σ I_α (module docstring).

    Feasibility of exact=True (n ≥ 2).  With s_α = α/n − ½ (× L), the trapezoid w_T (ends 1/(2n),
    interior 1/n) has Σ w_T s² = (1 + 2/n²)/12 =: t_T and the interior-only weights w_I (1/(n − 1)
    on α = 1 … n − 1, the ends 0) have the variance of the discrete uniform on 1 … n − 1 over n²,
    Σ w_I s² = (n − 2)/(12 n) =: t_I.  If I − t_T m L² ≥ κ I the trapezoid is kept (blend 0);
    otherwise the rotational inertias carry κ I and the masses are w = (1 − β) w_T + β w_I with
    β = (t_T − t)/(t_T − t_I), t = (1 − κ) I/(m L²): the end masses m (1 − β)/(2n) are positive iff
    β < 1, i.e. t > t_I, i.e.

        I > m L² (n − 2) / (12 n (1 − κ))        (``exact_lumping_min_inertia``; 0 for n = 2)

    (interior masses and the rotational inertias stay positive).  Below it the end masses are
    ≤ 0 (non-physical); ``jaxclear.mechanisms.linkage`` refuses such a spec, ``critical_step``
    such particles."""
    w_trap = np.full(n + 1, 1.0 / n)
    w_trap[[0, -1]] *= 0.5
    w_rot = w_trap.copy()
    s = np.arange(n + 1) / n - 0.5  # particle positions along the link / length
    if not exact or n < 2:
        return mass * jnp.asarray(w_trap), inertia * jnp.asarray(w_rot)
    w_int = np.zeros(n + 1)
    w_int[1:-1] = 1.0 / (n - 1)
    t_trap, t_int = float(w_trap @ s**2), float(w_int @ s**2)  # × m L²
    T = mass * length**2
    rot = jnp.maximum(inertia - t_trap * T, KAPPA * inertia)
    target = (inertia - rot) / T  # Σ w s² wanted
    blend = (t_trap - target) / (t_trap - t_int)
    w = (1.0 - blend) * jnp.asarray(w_trap) + blend * jnp.asarray(w_int)
    return mass * w, rot * jnp.asarray(w_rot)


def exact_lumping_min_inertia(mass, length, n):
    """The centroidal inertia [kg·m²] that exact lumping of a link of ``n`` elements needs to
    exceed (strictly) to keep every particle mass positive: m L² (n − 2)/(12 n (1 − κ)) for n ≥ 2
    (derivation in ``link_lumping``), 0 for n = 1 (the paper's lumping).  numpy, elementwise."""
    mass, length = np.asarray(mass, float), np.asarray(length, float)
    if n < 2:
        return np.zeros(np.broadcast_shapes(mass.shape, length.shape))
    return mass * length**2 * (n - 2) / (12.0 * n * (1.0 - KAPPA))


def exact_lumping_max_elements(mass, inertia, length):
    """The most elements (≥ 2) exact lumping can give a link of this mass, inertia and length
    (``exact_lumping_min_inertia`` < inertia); a large number where every count is feasible."""
    r = 12.0 * (1.0 - KAPPA) * inertia / (mass * length**2)  # (n − 2)/n < r
    return 10**9 if r >= 1.0 else max(2, math.ceil(2.0 / (1.0 - r)) - 1)


class ParticleError(ValueError):
    """A particle with a mass or rotational inertia that is not positive (``critical_step``);
    ``variant``: the flat index over the leading (batch) axes, ``element``, ``side``."""

    def __init__(self, message, variant=0, element=0, side=0):
        super().__init__(message)
        self.variant, self.element, self.side = variant, element, side


def rigid_inertia(masses, inertias, length):
    """(total mass, centroidal inertia) of a rigid straight link with these particles."""
    n = masses.shape[-1] - 1
    s = (jnp.arange(n + 1) / n - 0.5) * length
    return jnp.sum(masses, -1), jnp.sum(masses * s**2, -1) + jnp.sum(inertias, -1)


def critical_step(topo: Topology, p: Params, own_mass, own_inertia, labels=None):
    """Largest stable step [s] of the central difference over the elements (numpy, batched over
    leading axes): 2/√λ_max of each element's M⁻¹K, K the 6×6 Euler–Bernoulli stiffness in the
    element frame, M the element's own share of its end particles' masses ``own_mass`` (E, 2)
    and rotational inertias ``own_inertia`` (E, 2) (the element-by-element bound).

    A share that is not a positive finite number (a negative mass from an infeasible exact
    lumping, a zero or NaN) raises ``ParticleError`` naming the element (``labels[e]`` where
    given, e.g. the link and its element number), the end particle, the quantity and its value."""
    EA, EI, l = (np.asarray(x, float) for x in (p.EA, p.EI, p.l0))
    z = np.zeros_like(l)
    a, b, c, d = EA / l, 12 * EI / l**3, 6 * EI / l**2, 4 * EI / l
    rows = [
        [a, z, z, -a, z, z],
        [z, b, c, z, -b, c],
        [z, c, d, z, -c, d / 2],
        [-a, z, z, a, z, z],
        [z, -b, -c, z, b, -c],
        [z, c, d / 2, z, -c, d],
    ]
    K = np.stack([np.stack(r, -1) for r in rows], -2)
    m, J = np.asarray(own_mass, float), np.asarray(own_inertia, float)
    for what, x in (("mass", m), ("rotational inertia", J)):
        bad = ~(np.isfinite(x) & (x > 0))
        if np.any(bad):
            at = np.argwhere(bad)[0]
            e, side = int(at[-2]), int(at[-1])
            lead = at[:-2]
            variant = int(np.ravel_multi_index(tuple(lead), x.shape[:-2])) if len(lead) else 0
            label = labels[e] if labels is not None else f"element {e}"
            raise ParticleError(
                f"{label}: the {what} of its end particle towards the link's "
                f"{'first' if side == 0 else 'second'} point is {float(x[tuple(at)]):.6g} (must be "
                "positive; a particle needs a mass and a rotational inertia)",
                variant,
                e,
                side,
            )
    diag = np.stack([m[..., 0], m[..., 0], J[..., 0], m[..., 1], m[..., 1], J[..., 1]], -1)
    s = 1.0 / np.sqrt(diag)
    lam = np.linalg.eigvalsh(K * s[..., :, None] * s[..., None, :])[..., -1]
    return 2.0 / np.sqrt(np.max(lam, axis=-1))


# ----------------------------------------------------------------------------- assembly


@dataclass(frozen=True)
class Layout:
    """Where every particle of a described linkage lives (static, from ``assemble``).

    topology: the Topology; link_particles: {link: ((node, rotation), ...) along the link};
    bodies: {body: (node, rotation)}; elements: {link: element indices}; own: (E, 2) indices of
    each element's end particles in the particle list (for the critical step's shares);
    clearance: joint names in Topology.clearance order."""

    topology: Topology
    link_particles: tuple
    bodies: tuple
    elements: tuple
    clearance: tuple
    guides: tuple

    def particles(self, link):
        return dict(self.link_particles)[link]

    def body(self, name):
        return dict(self.bodies)[name]


class LinkageError(ValueError):
    """A described linkage that cannot be assembled (names the entry and the problem)."""


_DEFAULT_JOINT = joints.JointConfig()


def assemble(links, joints_, drivers_=(), bodies=(), joint_config=_DEFAULT_JOINT, need_driver=True) -> Layout:
    """The static layout of a linkage described by names (plain Python, no JAX):

    links: {name: (point_a, point_b, n_elements)}; bodies: {name: point} (a lumped particle,
    e.g. a slider block); joints_: {name: (kind, point, members, extra)} with kind "ground"
    (members pinned to the ground at the point), "revolute" (members share the point's node),
    "clearance" (members = (journal, bearing): separate nodes, the contact force between them),
    "slider" (one member whose node moves along a guide; extra = "free" or "fixed" rotation);
    drivers_: {name: (link, point)} the link's particle at the point follows the crank driver.
    Members are link or body names; a link end is named by its point."""
    bodies = dict(bodies or {})
    for name, (pa, pb, n) in links.items():
        if pa == pb:
            raise LinkageError(f"links.{name}: its two points are the same ({pa!r}): a link joins two points")
        if not isinstance(n, int) or n < 1:
            raise LinkageError(f"links.{name}.elements = {n!r}: at least 1")
    particles, rot_of, node_of = [], {}, {}

    def new_particle(key):
        rot_of[key] = len(particles)
        particles.append(key)

    for name, (_pa, _pb, n) in links.items():
        for k in range(n + 1):
            new_particle((name, k))
    for name in bodies:
        new_particle((name, 0))

    def end(member, point):
        """The particle of link/body ``member`` at ``point``."""
        if member in bodies:
            if bodies[member] != point:
                raise LinkageError(f"body {member!r} sits at point {bodies[member]!r}, not {point!r}")
            return (member, 0)
        if member not in links:
            raise LinkageError(
                f"{member!r} is neither a link ({', '.join(links) or 'none'}) nor a body "
                f"({', '.join(bodies) or 'none'})"
            )
        pa, pb, n = links[member]
        if point not in (pa, pb):
            raise LinkageError(f"link {member!r} joins {pa!r} and {pb!r}, not {point!r}")
        return (member, 0 if point == pa else n)

    # nodes: one per particle, then merged at revolute / ground / slider joints
    parent = {key: key for key in particles}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    ground, sliders, fixed_rot, clearance, guides, clear_names = [], [], [], [], [], []
    joined = set()
    for name, (kind, point, members, extra) in joints_.items():
        ends = [end(m, point) for m in members]
        joined.update(members)
        if kind in ("ground", "revolute"):
            if kind == "revolute" and len(ends) < 2:
                raise LinkageError(f"joints.{name}: a revolute joint joins at least two members, got {list(members)}")
            for e in ends[1:]:
                parent[find(e)] = find(ends[0])
            if kind == "ground":
                ground.append(ends[0])
        elif kind == "clearance":
            if len(ends) != 2:
                raise LinkageError(f"joints.{name}: a clearance joint has a journal and a bearing, got {list(members)}")
            clearance.append(tuple(ends))
            clear_names.append(name)
        elif kind == "slider":
            if len(ends) != 1:
                raise LinkageError(f"joints.{name}: a slider guides one member, got {list(members)}")
            sliders.append((ends[0], len(guides)))
            guides.append(name)
            if extra == "fixed":
                fixed_rot.append(ends[0])
        else:
            raise LinkageError(f"joints.{name}.type = {kind!r}; allowed: ground, revolute, clearance, slider")
    at = {}
    for name, (pa, pb, _) in links.items():
        at.setdefault(pa, []).append(name)
        at.setdefault(pb, []).append(name)
    for name, point in bodies.items():
        at.setdefault(point, []).append(name)
    for point, members in at.items():
        together = [set(m) for kind, pt, m, _ in joints_.values() if pt == point]
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if not any(a in g and b in g for g in together):
                    raise LinkageError(
                        f"{a!r} and {b!r} both end at point {point!r} but no joint there joins "
                        "them: add a revolute or clearance joint (or move one of them)"
                    )
    loose = [m for m in list(links) + list(bodies) if m not in joined]
    if loose:
        raise LinkageError(f"{loose[0]!r} is connected to nothing: add a joint at one of its points")
    roots = sorted({find(k) for k in particles}, key=particles.index)
    node_index = {r: i for i, r in enumerate(roots)}
    for k in particles:
        node_of[k] = node_index[find(k)]
    ground_nodes = sorted({node_of[k] for k in ground})
    for nj_, nb_ in clearance:
        if node_of[nj_] == node_of[nb_]:
            raise LinkageError("a clearance joint's journal and bearing are also joined by an ideal joint")
    driven = []
    for name, (link, point) in dict(drivers_).items():
        k = end(link, point)
        if node_of[k] not in ground_nodes:
            raise LinkageError(f"drivers.{name}: the driven link {link!r} must be pinned to the ground at {point!r}")
        driven.append(rot_of[k])
    if not driven and need_driver:
        raise LinkageError("no driver: add a crank driver (a link pinned to the ground at a point)")
    for name, (link, point) in dict(drivers_).items():
        other = [p for p in links[link][:2] if p != point][0]
        if node_of[end(link, other)] in ground_nodes:
            raise LinkageError(
                f"drivers.{name}: the crank {link!r} is pinned to the ground at both {point!r} and "
                f"{other!r}: the mechanism cannot move"
            )
    if len(set(driven)) != len(driven):
        raise LinkageError("two drivers drive the same particle")
    elements, per_link = [], []
    for name, (_pa, _pb, n) in links.items():
        idx = []
        for k in range(n):
            a, b = (name, k), (name, k + 1)
            idx.append(len(elements))
            elements.append((node_of[a], node_of[b], rot_of[a], rot_of[b]))
        per_link.append((name, tuple(idx)))
    topo = Topology(
        n_nodes=len(roots),
        n_rotations=len(particles),
        elements=tuple(elements),
        ground=tuple(ground_nodes),
        sliders=tuple((node_of[k], g) for k, g in sliders),
        fixed_rotations=tuple(sorted({rot_of[k] for k in fixed_rot})),
        driven=tuple(driven),
        clearance=tuple((node_of[j], rot_of[j], node_of[b], rot_of[b]) for j, b in clearance),
        joint=joint_config,
    )
    return Layout(
        topology=topo,
        link_particles=tuple(
            (nm, tuple((node_of[(nm, k)], rot_of[(nm, k)]) for k in range(n + 1))) for nm, (_, _, n) in links.items()
        ),
        bodies=tuple((nm, (node_of[(nm, 0)], rot_of[(nm, 0)])) for nm in bodies),
        elements=tuple(per_link),
        clearance=tuple(clear_names),
        guides=tuple(guides),
    )


def linkage_params(
    layout: Layout,
    points,
    links,
    bodies=None,
    guides=None,
    joint=None,
    damping=0.0,
    gravity=9.81,
    crank_speed=0.0,
    ramp_time=0.0,
    exact_lumping=True,
):
    """Params of an assembled linkage (traceable in every float):

    points: {name: (x, y)} [m]; links: {name: dict(youngs_modulus [Pa], density [kg/m³],
    mass [kg], inertia [kg·m²] about the link's centre, points (a, b))} — the section from the
    paper's sizing, A = m/(ρl), I_z = I/(ρl); bodies: {name: (point, mass, inertia)}; guides: {slider joint: (dx, dy)};
    joint: JointParams stacked over the clearance joints (``layout.clearance`` order)."""
    topo = layout.topology
    f = lambda x: jnp.asarray(x, dtype=jnp.result_type(float))
    n_nodes, n_rot = topo.n_nodes, topo.n_rotations
    x0 = jnp.zeros((n_nodes, 2), jnp.result_type(float))
    mass = jnp.zeros(n_nodes, x0.dtype)
    inertia = jnp.zeros(n_rot, x0.dtype)
    pmass = jnp.zeros(n_rot, x0.dtype)
    EA, EI, l0, offsets = [], [], [], []
    for name, parts in layout.link_particles:
        lk = links[name]
        pa, pb = (jnp.stack([f(c) for c in points[k]]) for k in lk["points"])
        n = len(parts) - 1
        d = pb - pa
        length = safe_norm(d)
        frac = jnp.arange(n + 1) / n
        xs = pa[None, :] + frac[:, None] * d[None, :]
        nodes = np.asarray([nd for nd, _ in parts])
        rots = np.asarray([r for _, r in parts])
        x0 = x0.at[nodes].set(xs)  # shared nodes get the same coordinates from every link
        m, J = link_lumping(f(lk["mass"]), f(lk["inertia"]), length, n, exact=exact_lumping)
        mass = mass.at[nodes].add(m)
        pmass = pmass.at[rots].set(m)
        inertia = inertia.at[rots].add(J)
        area, iz = f(lk["mass"]) / (f(lk["density"]) * length), f(lk["inertia"]) / (f(lk["density"]) * length)
        EA.append(jnp.full(n, f(lk["youngs_modulus"]) * area))
        EI.append(jnp.full(n, f(lk["youngs_modulus"]) * iz))
        l0.append(jnp.full(n, length / n))
        e0 = d / length
        offsets.append(jnp.broadcast_to(jnp.stack([e0, e0]), (n, 2, 2)))
    for name, (node, rot) in layout.bodies:
        point, m, J = (bodies or {})[name]
        x0 = x0.at[node].set(jnp.stack([f(c) for c in points[point]]))
        mass = mass.at[node].add(f(m))
        pmass = pmass.at[rot].set(f(m))
        inertia = inertia.at[rot].add(f(J))
    g = (
        jnp.stack([jnp.stack([f(c) for c in guides[nm]]) for nm in layout.guides])
        if layout.guides
        else jnp.zeros((0, 2))
    )
    g = g / safe_norm(g)[:, None] if layout.guides else g
    return Params(
        EA=jnp.concatenate(EA),
        EI=jnp.concatenate(EI),
        l0=jnp.concatenate(l0),
        offsets=jnp.concatenate(offsets),
        mass=mass,
        x0=x0,
        inertia=inertia,
        guides=g,
        damping=f(damping),
        gravity=f(gravity),
        crank_speed=f(crank_speed),
        ramp_time=f(ramp_time),
        joint=joint,
        forces=jnp.zeros_like(x0),
        torques=jnp.zeros(n_rot, x0.dtype),
        particle_mass=pmass,
    )


def element_shares(layout: Layout, p: Params):
    """(E, 2) masses and (E, 2) rotational inertias each element owns of its end particles (a
    link's interior particle is shared by its two elements, an end particle belongs to one; the
    masses of other links and bodies at a shared node are left out: a safe bound)."""
    topo = layout.topology
    m = np.zeros(np.shape(p.mass)[:-1] + (len(topo.elements), 2))
    J = np.zeros_like(m)
    # a link's particle masses are recomputed from the node masses only where a node holds one
    # particle; shared nodes keep the element's own half (their other masses only slow it down)
    count = np.bincount(
        np.asarray(
            [nd for _, parts in layout.link_particles for nd, _ in parts] + [nd for _, (nd, _) in layout.bodies]
        ),
        minlength=topo.n_nodes,
    )
    pm, pj = np.asarray(p.mass), np.asarray(p.inertia)
    for name, idx in layout.elements:
        parts = layout.particles(name)
        n = len(idx)
        for k, e in enumerate(idx):
            for side, kk in ((0, k), (1, k + 1)):
                nd, rr = parts[kk]
                share = 1.0 if kk in (0, n) else 0.5
                m[..., e, side] = pm[..., nd] * share / count[nd]
                J[..., e, side] = pj[..., rr] * share
    return m, J


def rigid_velocities(layout: Layout, ideal: Layout, p: Params, omega):
    """Every particle's velocity in the rigid, ideal mechanism with the driven rotations at rate
    ``omega`` [rad/s] (traceable): each link or body moves rigidly, (v_m, ω_m) about its first
    particle, and the least-squares solution of the joints' velocity constraints — particles
    joined in the ideal layout ``ideal`` (clearance joints as pins) move together, ground nodes
    rest, slider nodes move along their guides, fixed rotations do not turn, driven ones turn at
    ω — gives the start of a run at speed.  Returns ``Coordinates`` of ``layout``'s nodes and
    rotations (a clearance joint's journal and bearing start at the same velocity: centred)."""
    members = [parts for _, parts in layout.link_particles] + [(b,) for _, b in layout.bodies]
    x0 = p.x0
    n_m = len(members)
    rows, rhs = [], []

    def vel_row(m, k, comp):
        """Coefficients of the particle's velocity component ``comp`` in the member unknowns."""
        node, rot = members[m][k]
        d = x0[node] - x0[members[m][0][0]]
        r = jnp.zeros(3 * n_m, x0.dtype)
        r = r.at[3 * m + comp].set(1.0)
        return r.at[3 * m + 2].set(-d[1] if comp == 0 else d[0])  # ω × d = (−ω d_y, ω d_x)

    where = {}  # ideal node -> [(member, particle index)]
    rot_member = {}
    for m, parts in enumerate(members):
        for k, (_node, rot) in enumerate(parts):
            where.setdefault(node_of(ideal, rot), []).append((m, k))
            rot_member[rot] = m
    zero = jnp.zeros((), x0.dtype)
    for node, group in where.items():
        (m0, k0), rest = group[0], group[1:]
        for m, k in rest:
            for c in (0, 1):
                rows.append(vel_row(m, k, c) - vel_row(m0, k0, c))
                rhs.append(zero)
        if node in ideal.topology.ground:
            for c in (0, 1):
                rows.append(vel_row(m0, k0, c))
                rhs.append(zero)
    for node, g in ideal.topology.sliders:
        m, k = where[node][0]
        n = perp(p.guides[g])
        rows.append(n[0] * vel_row(m, k, 0) + n[1] * vel_row(m, k, 1))
        rhs.append(zero)
    for rot in ideal.topology.fixed_rotations:
        rows.append(jnp.zeros(3 * n_m, x0.dtype).at[3 * rot_member[rot] + 2].set(1.0))
        rhs.append(zero)
    for rot in ideal.topology.driven:
        rows.append(jnp.zeros(3 * n_m, x0.dtype).at[3 * rot_member[rot] + 2].set(1.0))
        rhs.append(jnp.asarray(omega, x0.dtype))
    A, b = jnp.stack(rows), jnp.stack(rhs)
    u = jnp.linalg.lstsq(A, b)[0]
    topo = layout.topology
    v_nodes = jnp.zeros((topo.n_nodes, 2), x0.dtype)
    w = jnp.zeros(topo.n_rotations, x0.dtype)
    for m, parts in enumerate(members):
        for k, (node, rot) in enumerate(parts):
            v_nodes = v_nodes.at[node].set(jnp.stack([vel_row(m, k, 0) @ u, vel_row(m, k, 1) @ u]))
            w = w.at[rot].set(u[3 * m + 2])
    return Coordinates(nodes=v_nodes, rotations=w)


def node_of(layout: Layout, rot):
    """The node of the particle whose rotation index is ``rot`` in ``layout``."""
    for _, parts in layout.link_particles:
        for nd, r in parts:
            if r == rot:
                return nd
    for _, (nd, r) in layout.bodies:
        if r == rot:
            return nd
    raise KeyError(rot)
