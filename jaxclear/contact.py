"""Branch-free contact detection between a circular pin (journal) and a discretised bushing.

Xu 2015 (non-circular clearance revolute joint, steps 2–3), all in the bushing frame:

* penetration of profile point k:  d_k = R_pin − |p_k − c|  (m), in contact iff d_k > 0;
* a contact region is a maximal *circular* run of consecutive in-contact points (a run wrapping
  from point N−1 to point 0 is one region; all points in contact is one region);
* per region the maximum depth h_max = max_k d_k, the unit normal n = (p_max − c)/|p_max − c|
  from the pin centre towards the deepest bushing point, the contact point on the bushing p_max
  and on the pin c + R_pin n.

Everything is fixed-shape and branch-free (no Python control flow on values, no boolean
indexing, no ``nonzero``) so ``detect`` works under ``jit``, ``vmap`` and ``grad``.

Slot order: region slots j = 0..K−1 hold the regions sorted by the smallest profile index they
contain — i.e. in the order met walking k = 0, 1, ..., N−1 — so the region through point 0
(including a run wrapping from N−1 to 0) is slot 0.  Regions beyond K are dropped from the slots
(label K) but still counted in ``n_regions``.

``detect_deepest`` is the one-slot form (a joint with ``max_regions = 1``): the same quantities
in one pass over the points, the slot holding the deepest region, every region still counted.

Gradients: the deepest index is found on ``stop_gradient``-ed squared distances (integer
result, no tie-splitting); depth and normal are then recomputed from that point with
double-where safe norms, so gradients w.r.t. pin centre, pin radius and profile points are
finite for a centred pin, a touching pin and all points in contact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclear._math import safe_norm, safe_sqrt
from jaxclear.laws import IMPACT_VELOCITY_FLOOR

__all__ = [
    "ContactRegions",
    "WindowRegions",
    "detect",
    "detect_deepest",
    "detect_deepest_words",
    "detect_window",
    "window_start",
    "update_impact_memory",
    "region_impact_memory",
    "deepest_impact_memory",
    "window_impact_memory",
    "curvature",
    "curvature_bound",
    "RegionBound",
    "region_bound",
    "REGION_MARGIN",
    "REGION_CAP",
]


class ContactRegions(NamedTuple):
    """Contact regions of one pin in one bushing (bushing frame), K = max_regions slots.

    depth:          (K,)   maximum penetration per region (m), 0 where inactive
    normal:         (K, 2) unit normal from the pin centre towards the deepest bushing point
                           ((1, 0) where inactive)
    point_bushing:  (K, 2) deepest bushing point (m); the pin centre where inactive
    point_pin:      (K, 2) c + R_pin · normal (m)
    active:         (K,)   bool, slot holds a region
    index:          (K,)   int, profile index of the deepest point (0 where inactive)
    n_regions:      ()     int, number of regions, including those beyond K (overflow)
    labels:         (N,)   int, region slot per profile point (K: not in contact or overflow)
    mask:           (N,)   bool, point in contact (d_k > 0)
    """

    depth: jax.Array
    normal: jax.Array
    point_bushing: jax.Array
    point_pin: jax.Array
    active: jax.Array
    index: jax.Array
    n_regions: jax.Array
    labels: jax.Array
    mask: jax.Array


_MATMUL_PREFIX_MAX_N = 512


def _take_small(table, ids):
    """table[ids] for a short (K+1,) table as a chain of selects: one fused elementwise pass,
    where a per-point gather is a slow serial loop on XLA:CPU."""
    out = jnp.broadcast_to(table[0], ids.shape)
    for k in range(1, table.shape[0]):
        out = jnp.where(ids == k, table[k], out)
    return out


def _prefix_count(flags):
    """Inclusive prefix count of a bool (N,) vector as int32.

    For N <= 512 a product with the upper-triangular ones matrix (exact in float32 for these
    counts): XLA's CPU cumsum is a serial reduce-window loop, the matmul is ~4x faster batched.
    """
    n = flags.shape[-1]
    if n > _MATMUL_PREFIX_MAX_N:
        return jnp.cumsum(flags.astype(jnp.int32))
    tri = jnp.triu(jnp.ones((n, n), jnp.float32))
    return jnp.round(flags.astype(jnp.float32) @ tri).astype(jnp.int32)


def _region_labels(mask: jax.Array):
    """Circular-run labels of a boolean mask (N,), in order of first point; −1 off contact.

    Run starts s_k = m_k ∧ ¬m_{k−1} (circular).  labels = cumsum(s) − 1 + wrap, where
    wrap = m_0 ∧ m_{N−1}: the leading points of a wrapped run (cumsum 0) get label 0 and its
    trailing part (the last start, label n_starts) is folded back onto 0.
    """
    starts = mask & ~jnp.roll(mask, 1)
    cs = _prefix_count(starts)
    n_starts = cs[-1]
    wrap = (mask[0] & mask[-1]).astype(jnp.int32)
    lab = cs - 1 + wrap
    lab = jnp.where((wrap == 1) & (cs == n_starts), 0, lab)
    lab = jnp.where(mask, lab, -1)
    all_in = jnp.all(mask).astype(jnp.int32)  # no start at all, one region
    n_regions = n_starts + all_in
    return lab, n_regions


def _checked_inputs(points, pin_center, pin_radius, max_regions):
    """(points (N, 2), pin centre (2,), pin radius ()) in one float dtype; a ValueError naming the
    argument for a wrong shape or a non-static max_regions (shared by detect and detect_window)."""
    if isinstance(max_regions, bool) or not isinstance(max_regions, int) or max_regions < 1:
        raise ValueError(f"max_regions must be a Python int >= 1 (static), got {max_regions!r}")
    p = jnp.asarray(points)
    dt = jnp.result_type(p, pin_center, pin_radius, float)
    p = p.astype(dt)
    c = jnp.asarray(pin_center, dtype=dt)
    R = jnp.asarray(pin_radius, dtype=dt)
    if p.ndim != 2 or p.shape[-1] != 2 or p.shape[0] < 3:
        raise ValueError(f"points must be an (N, 2) array with N >= 3, got shape {p.shape}")
    if c.shape != (2,):
        raise ValueError(f"pin_center must have shape (2,), got {c.shape}")
    if R.shape != ():
        raise ValueError(f"pin_radius must be a scalar, got shape {R.shape}")
    return p, c, R


def detect(points, pin_center, pin_radius, max_regions: int, refine: bool = False) -> ContactRegions:
    """Contact regions between a circular pin and a discretised bushing profile (Xu 2015).

    points: (N, 2) bushing profile (m, bushing frame, consecutive points adjacent on the curve);
    pin_center: (2,) pin (journal) centre c in the bushing frame (m); pin_radius: R_pin (m);
    max_regions: static number of region slots K; refine: static, sub-grid refinement.

    d_k = R_pin − |p_k − c|, m_k = d_k > 0 (tested as |p_k − c|² < R_pin²); regions are circular
    runs of m; per region h_max = max d_k at the deepest point (ties → lowest index).

    With ``refine=True`` a parabola d(s) = d_0 + b s + a s² is fitted through the raw penetrations
    at the circular neighbours k−1, k, k+1 of the deepest point; its vertex s* = −b/(2a) ∈ [−½, ½]
    gives the depth d(s*), the bushing point by quadratic interpolation of p_{k−1}, p_k, p_{k+1}
    at s*, and the normal towards it.  On a circular bearing this takes the depth error from
    O(N⁻²) to O(N⁻⁴).
    """
    p, c, R = _checked_inputs(points, pin_center, pin_radius, max_regions)
    n = p.shape[0]
    K = max_regions

    # --- mask and labels on squared distances (no sqrt over all N points)
    # Component-wise (not a sum over a trailing axis of 2): ~8x faster batched on CPU.
    dist2 = (p[:, 0] - c[0]) ** 2 + (p[:, 1] - c[1]) ** 2
    mask = jax.lax.stop_gradient(dist2 < R * R)
    lab, n_regions = _region_labels(mask)
    in_slot = mask & (lab < K)
    seg = jnp.where(in_slot, lab, K)

    # --- deepest point per region: max of −|p − c|², then lowest index among the maxima
    key = jax.lax.stop_gradient(jnp.where(in_slot, -dist2, -jnp.inf))
    best = jax.ops.segment_max(key, seg, num_segments=K + 1)
    kk = jnp.arange(n, dtype=jnp.int32)
    is_best = in_slot & (key == _take_small(best, seg))
    idx = jax.ops.segment_min(jnp.where(is_best, kk, n), seg, num_segments=K + 1)[:K]
    active = jnp.arange(K, dtype=jnp.int32) < jnp.minimum(n_regions, K)
    idx = jnp.where(active, idx, 0).astype(jnp.int32)

    depth, pb = _refined(p, c, R, idx, refine)
    normal, depth, pb = _normal_and_mask(pb, c, depth, active)
    return ContactRegions(
        depth=depth,
        normal=normal,
        point_bushing=pb,
        point_pin=c + R * normal,
        active=active,
        index=idx,
        n_regions=n_regions,
        labels=jnp.where(in_slot, lab, K).astype(jnp.int32),
        mask=mask,
    )


def _first_argmin(d2, packed=None, rows: int = 1):
    """Index of the smallest of the non-negative values d2 (N,), ties → lowest index, as ONE
    integer min-reduction of packed keys (``_packed_keys``).

    The key packs the index into the low bits of the IEEE bit pattern (monotone for x >= 0):
    float32 → (bits << b) | k in int64 (exact); float64 → (bits with its low b bits cleared) | k,
    b = ⌈log2 N⌉, so values closer than 2^b ulp (relative 2^(b−52), ~3e-14 at N = 72) count
    as ties.  A variadic argmin is ~3x slower on XLA:CPU (benchmarks/README.md).
    packed=False (and the default without x64, where there is no int64): min, then the lowest
    index at the min (two reductions, exact ties).  rows > 1: the float64 min runs over a
    (rows, ⌈N/rows⌉) view, the view of ``pack_mask`` when rows = ⌈N/24⌉ (measured ~10 % faster
    in ``detect_deepest`` than a flat min: XLA:CPU schedules the two reductions together).
    """
    n = d2.shape[0]
    if packed is None:
        packed = bool(jax.config.jax_enable_x64)
    if not packed:
        mn = jnp.min(d2)
        return jnp.min(jnp.where(d2 == mn, jnp.arange(n), n)).astype(jnp.int32)
    key, low = _packed_keys(d2)
    if d2.dtype != jnp.float64:
        # float32 keys would be float64 subnormals (flushed to zero on some backends): int64 min
        return (jnp.min(key) & low).astype(jnp.int32)
    # The float64 key read back as float64 keeps its order (non-negative, normal numbers for
    # d2 > 1e-300): a float min, which XLA:CPU runs ~1.5x faster than the int64 one.
    keyf = jax.lax.bitcast_convert_type(key, jnp.float64)
    cols = -(-n // rows)
    keyf = jnp.pad(keyf, (0, rows * cols - n), constant_values=jnp.inf).reshape(rows, cols)
    kmin = jnp.min(jnp.min(keyf, axis=-1))
    return (jax.lax.bitcast_convert_type(kmin, jnp.int64) & low).astype(jnp.int32)


def _packed_keys(d2):
    """Integer keys of the non-negative values d2 (N,) whose min gives the smallest value and
    its index (ties → lowest index), and the mask of the index bits (see ``_first_argmin``)."""
    n = d2.shape[0]
    b = max(1, (n - 1).bit_length())
    k64 = jnp.arange(n, dtype=jnp.int64)
    if d2.dtype == jnp.float64:
        bits = jax.lax.bitcast_convert_type(d2, jnp.int64)
        return (bits & ~jnp.int64((1 << b) - 1)) | k64, (1 << b) - 1
    bits = jax.lax.bitcast_convert_type(d2.astype(jnp.float32), jnp.int32).astype(jnp.int64)
    return (bits << b) | k64, (1 << b) - 1


def _refined(p, c, R, idx, refine):
    """Depth and bushing point at profile index idx (K,), optionally with the parabolic
    sub-grid refinement through the circular neighbours (see ``detect``)."""
    n = p.shape[0]
    dt = p.dtype
    if not refine:
        pb = p[idx]
        return R - safe_norm(pb - c), pb
    if idx.shape[0] == 1:
        # one slot: rows idx-1, idx, idx+1 as ONE dynamic slice of the profile padded by a
        # point at each end (a single gather under vmap instead of three)
        ext = jnp.concatenate([p[-1:], p, p[:1]])
        tri = jax.lax.dynamic_slice(ext, (idx[0], jnp.zeros((), idx.dtype)), (3, 2))
        pm, p0, pp = tri[0:1], tri[1:2], tri[2:3]
    else:
        p0, pm, pp = p[idx], p[jnp.mod(idx - 1, n)], p[jnp.mod(idx + 1, n)]
    d0 = R - safe_norm(p0 - c)
    dm = R - safe_norm(pm - c)
    dp = R - safe_norm(pp - c)
    a = 0.5 * (dp + dm) - d0
    b = 0.5 * (dp - dm)
    # d0 is the max of the three inside a region, so a <= 0 and |s*| <= ½; guard a ≈ 0
    ok = a < -jnp.finfo(dt).tiny
    s = jnp.where(ok, -b / (2.0 * jnp.where(ok, a, -1.0)), 0.0)
    s = jnp.clip(s, -0.5, 0.5)
    depth = d0 + b * s + a * s * s
    pb = p0 + s[:, None] * (0.5 * (pp - pm)) + (s * s)[:, None] * (0.5 * (pp + pm) - p0)
    return depth, pb


def _normal_and_mask(pb, c, depth, active):
    """Safe unit normal from the pin centre c towards pb (double-where, +x where undefined),
    depth clipped at 0 and zeroed, pb replaced by c, in inactive slots."""
    dt = pb.dtype
    e = pb - c
    e2 = jnp.sum(e * e, axis=-1)
    ok_n = active & (e2 > 0)
    en = safe_sqrt(jnp.where(ok_n, e2, 1.0))
    unit_x = jnp.array([1.0, 0.0], dtype=dt)
    normal = jnp.where(ok_n[:, None], e / jnp.where(ok_n, en, 1.0)[:, None], unit_x)
    depth = jnp.where(active, jnp.maximum(depth, 0.0), 0.0)
    pb = jnp.where(active[:, None], pb, c)
    return normal, depth, pb


def _word_starts(words, n):
    """Number of run starts s_k = m_k ∧ ¬m_{k−1} (circular) of an N-point mask packed in
    24-bit words (``pack_mask``), by shifts and popcounts on the words."""
    nw = words.shape[0]
    full = (1 << MASK_CHUNK_BITS) - 1
    last_bits = n - MASK_CHUNK_BITS * (nw - 1)
    total = jnp.zeros((), jnp.int32)
    for w in range(nw):
        width = MASK_CHUNK_BITS if w < nw - 1 else last_bits
        if w == 0:
            carry = (words[nw - 1] >> (last_bits - 1)) & 1  # point N−1 precedes point 0
        else:
            carry = (words[w - 1] >> (MASK_CHUNK_BITS - 1)) & 1
        prev = ((words[w] << 1) | carry) & ((1 << width) - 1 if width < MASK_CHUNK_BITS else full)
        total = total + jax.lax.population_count(words[w] & ~prev)
    return total


def detect_deepest(points, pin_center, pin_radius, refine: bool = False) -> ContactRegions:
    """One-slot contact detection: the deepest penetrating point of the whole profile.

    Same d_k, mask and circular runs as ``detect``, but the single slot holds the region of the
    deepest point (``detect(..., max_regions=1)`` keeps the region met first from point 0);
    ``n_regions`` counts all circular runs (starts s_k = m_k ∧ ¬m_{k−1}, plus one if every
    point is in contact), so n_regions > 1 shows that other regions were left out.  Where
    n_regions <= 1 the result equals ``detect`` with any ``max_regions``.

    Cost: ONE pass over the N points, two sibling reductions over the same (⌈N/24⌉, 24) view:
    the packed integer min of the squared distances (deepest index, ``_first_argmin``) and the
    mask as 24-bit words (``pack_mask``); the run starts are counted on the words by shifts and
    popcounts.  No labels, no scatters: the fast path of a joint with ``max_regions = 1``.
    ``labels`` is 0 on points in contact and 1 elsewhere.
    """
    return detect_deepest_words(points, pin_center, pin_radius, refine)[0]


def detect_deepest_words(points, pin_center, pin_radius, refine: bool = False):
    """``detect_deepest`` and the mask words (int32, ``pack_mask``) it computed on the way
    (the joint hands them to ``deepest_impact_memory`` instead of packing the mask twice)."""
    p, c, R = _checked_inputs(points, pin_center, pin_radius, 1)
    n = p.shape[0]
    dist2 = jax.lax.stop_gradient((p[:, 0] - c[0]) ** 2 + (p[:, 1] - c[1]) ** 2)
    mask = dist2 < R * R
    idx0 = _first_argmin(dist2, rows=mask_words(n))
    words = pack_mask(mask, jnp.int32)
    n_starts = _word_starts(words, n)
    # a circular mask without a rising edge is constant: all in contact iff mask[0]
    n_regions = n_starts + ((n_starts == 0) & ((words[0] & 1) == 1)).astype(jnp.int32)
    active = (n_regions > 0)[None]
    idx = jnp.where(active, idx0[None], 0).astype(jnp.int32)
    depth, pb = _refined(p, c, R, idx, refine)
    normal, depth, pb = _normal_and_mask(pb, c, depth, active)
    return ContactRegions(
        depth=depth,
        normal=normal,
        point_bushing=pb,
        point_pin=c + R * normal,
        active=active,
        index=idx,
        n_regions=n_regions,
        labels=jnp.where(mask, 0, 1).astype(jnp.int32),
        mask=mask,
    ), words


MASK_CHUNK_BITS = 24  # bits per memory word: integers below 2^24 are exact in float32 and float64


def mask_words(n_points: int) -> int:
    """Number of float words that hold an N-point contact mask as bits (``pack_mask``)."""
    return -(-n_points // MASK_CHUNK_BITS)


def pack_mask(mask, dtype=jnp.float64):
    """Contact mask (N,) as ⌈N/24⌉ words (``dtype``) holding exact integers: bit b of word w is
    point 24w + b.  A reduction over a (⌈N/24⌉, 24) view, the shape of the deepest-point
    reduction of ``detect_deepest``, so XLA runs both in one pass."""
    n = mask.shape[0]
    nw = mask_words(n)
    w = (2 ** (jnp.arange(n) % MASK_CHUNK_BITS)).astype(jnp.int32)
    bits = jnp.where(mask, w, 0)
    bits = jnp.pad(bits, (0, nw * MASK_CHUNK_BITS - n)).reshape(nw, MASK_CHUNK_BITS)
    return jnp.sum(bits, axis=-1, dtype=jnp.int32).astype(dtype)


def deepest_impact_memory(
    regions: ContactRegions, memory, region_delta_dot, floor: float = IMPACT_VELOCITY_FLOOR, words=None
):
    """Impact-velocity memory δ̇⁻ of the one-slot ``detect_deepest``.

    memory = [δ̇⁻ of the previous step (0: no contact), the previous contact mask as
    ``pack_mask`` words].  The region continues a previous contact when some point is in
    contact at both steps (a bitwise AND of the words) and then keeps its δ̇⁻; otherwise it is a
    new impact with max(δ̇, floor).  Equals ``region_impact_memory`` (per-point memory) wherever
    n_regions <= 1 at both steps.  ``words``: the current mask already packed (int32), e.g.
    by ``detect_deepest``; else packed here.  Returns (δ̇⁻ (1,), new memory, inherited (1,)).
    """
    mem = jnp.asarray(memory)
    vdot = jnp.asarray(region_delta_dot)
    dt = jnp.result_type(mem, vdot, float)
    mem, vdot = mem.astype(dt), vdot.astype(dt)
    iw = pack_mask(regions.mask, jnp.int32) if words is None else jnp.asarray(words, jnp.int32)
    overlap = jnp.any((mem[1:].astype(jnp.int32) & iw) != 0)
    words = iw.astype(dt)
    has = ((mem[0] > 0) & overlap)[None] & regions.active
    out = jnp.where(has, mem[0], jnp.maximum(vdot, floor))
    out = jnp.where(regions.active, out, 0.0)
    return out, jnp.concatenate([out, words]), has


def update_impact_memory(
    regions: ContactRegions, prev_mask, point_memory, region_delta_dot, floor: float = IMPACT_VELOCITY_FLOOR
):
    """Impact-velocity memory by region overlap; see ``region_impact_memory`` (drops its third
    output, the (K,) mask of regions that continue a previous contact)."""
    out, new_mem, _ = region_impact_memory(regions, prev_mask, point_memory, region_delta_dot, floor)
    return out, new_mem


def region_impact_memory(
    regions: ContactRegions, prev_mask, point_memory, region_delta_dot, floor: float = IMPACT_VELOCITY_FLOOR
):
    """Impact-velocity memory δ̇⁻ by overlap of contact regions between two steps.

    point_memory (N,) holds δ̇⁻ (m/s) per profile point from the previous step (0 off contact).
    A current region inherits the max of point_memory over its points that were in contact at
    the previous step too (prev_mask ∧ mask, memory > 0); a region with no such point is a new
    impact and takes its current approach speed region_delta_dot (K,), clamped to ≥ ``floor``
    (default ``laws.IMPACT_VELOCITY_FLOOR``, the floor the hysteresis laws apply).  The region
    value is written back to all its points; points off contact (or in overflow regions beyond
    K) get 0.  Returns (region_delta_dot_minus (K,), 0 in inactive slots; new_point_memory (N,);
    inherited (K,) bool, the regions that continue a previous contact).  δ̇ = n·(ċ_pin − ṗ_point).
    """
    labels = regions.labels
    K = regions.depth.shape[0]
    mem = jnp.asarray(point_memory)
    vdot = jnp.asarray(region_delta_dot)
    dt = jnp.result_type(mem, vdot, float)
    mem, vdot = mem.astype(dt), vdot.astype(dt)
    in_slot = regions.mask & (labels < K)
    carried = in_slot & jnp.asarray(prev_mask) & (mem > 0)
    seg = jnp.where(in_slot, labels, K)
    inherited = jax.ops.segment_max(jnp.where(carried, mem, -jnp.inf), seg, num_segments=K + 1)[:K]
    has = inherited > 0  # carried points have memory > 0; one scatter instead of two
    fresh = jnp.maximum(vdot, floor)
    out = jnp.where(has, jnp.where(has, inherited, 0.0), fresh)
    out = jnp.where(regions.active, out, 0.0)
    out_ext = jnp.concatenate([out, jnp.zeros((1,), dt)])
    new_mem = jnp.where(in_slot, _take_small(out_ext, seg), 0.0)
    return out, new_mem, has


# ----------------------------------------------------------------------------- windowed detection
class WindowRegions(NamedTuple):
    """Contact regions found in a window of W consecutive profile points (``detect_window``).

    The (K,) / (K, 2) fields mean what they mean in ``ContactRegions``; ``index`` is the global
    profile index.  Slots hold the regions in window order (start, start+1, ...), which is the
    order of ``detect`` unless the window wraps past point 0.
    start:      ()    int, global index of window point 0
    mask:       (W,)  bool, window point j = (start + j) mod N in contact
    labels:     (W,)  int, region slot per window point (K: not in contact or beyond K)
    overflow:   ()    bool, the window may not hold the whole contact: a penetrating point
                      outside it or on its first/last point.  Where False, the regions equal
                      those of ``detect`` on the full profile.
    """

    depth: jax.Array
    normal: jax.Array
    point_bushing: jax.Array
    point_pin: jax.Array
    active: jax.Array
    index: jax.Array
    n_regions: jax.Array
    start: jax.Array
    mask: jax.Array
    labels: jax.Array
    overflow: jax.Array


def window_start(pin_center, n_points: int, window: int):
    """First index of the W-point window centred on the profile point nearest the direction
    of the pin centre: k_c = round(atan2(c_y, c_x)·N/2π) mod N, start = (k_c − ⌊W/2⌋) mod N.
    Assumes the uniform angles θ_k = 2πk/N of ``jaxclear.profiles``."""
    c = jax.lax.stop_gradient(jnp.asarray(pin_center))
    kc = jnp.round(jnp.arctan2(c[1], c[0]) * (n_points / (2.0 * jnp.pi))).astype(jnp.int32)
    return jnp.mod(kc - window // 2, n_points).astype(jnp.int32)


def detect_window(
    points, pin_center, pin_radius, max_regions: int, window: int, refine: bool = False, start=None
) -> WindowRegions:
    """``detect`` restricted to W = ``window`` consecutive profile points, with an overflow flag.

    points (N, 2), pin_center (2,), pin_radius, max_regions K, refine: as in ``detect``; the
    profile must be sampled at the uniform angles θ_k = 2πk/N when ``start`` is None (then
    ``window_start``).  Window point j is profile point (start + j) mod N.  The Xu (2015) rules
    run on the window: m_j = |p_j − c|² < R², regions are the runs of m in window order,
    the deepest point per region (ties → first in window order), the same parabolic
    refinement.  A full pass over the N points only counts the penetrating points:
    ``overflow`` = (count outside the window > 0) ∨ m_0 ∨ m_{W−1}.  Without overflow every
    region lies strictly inside the window and the result is that of ``detect`` (slot order
    aside when the window wraps past point 0).

    No scatters and no per-point gathers: the window is one dynamic slice of the profile
    doubled at its end, the per-slot picks are one-hot reductions over (W, K).
    """
    p, c, R = _checked_inputs(points, pin_center, pin_radius, max_regions)
    dt = p.dtype
    n = p.shape[0]
    if isinstance(window, bool) or not isinstance(window, int) or not 3 <= window <= n:
        raise ValueError(f"window must be a Python int in [3, N = {n}] (static), got {window!r}")
    K, W = max_regions, window
    if start is None:
        start = window_start(c, n, W)
    start = jnp.asarray(start, jnp.int32)
    R2 = R * R

    # full pass: count of penetrating points only (one fused reduction, no labels)
    d2_all = jax.lax.stop_gradient((p[:, 0] - c[0]) ** 2 + (p[:, 1] - c[1]) ** 2)
    n_all = jnp.sum((d2_all < R2).astype(jnp.int32), dtype=jnp.int32)

    pw = jax.lax.dynamic_slice(jnp.concatenate([p, p[: W - 1]]), (start, jnp.zeros((), jnp.int32)), (W, 2))
    xs, ys = pw[:, 0], pw[:, 1]
    # |p_j − c|² as a reduce over the (x, y) pair: XLA:CPU materialises a reduce, where the
    # component-wise sum was re-fused (with the pin-centre kinematics) into every (W, K) consumer.
    d2 = jnp.sum((pw - c) ** 2, axis=-1)
    m = jax.lax.stop_gradient(d2 < R2)
    n_win = jnp.sum(m.astype(jnp.int32), dtype=jnp.int32)
    overflow = (n_all != n_win) | m[0] | m[-1]

    # runs of m in window order (no wrap: a run touching an end is an overflow anyway)
    starts = m & ~jnp.concatenate([jnp.zeros((1,), bool), m[:-1]])
    cs = _prefix_count(starts)
    n_regions = cs[-1]
    slots = jnp.arange(K, dtype=jnp.int32)
    lab = jnp.where(m, cs - 1, K)
    labels = jnp.minimum(lab, K)
    active = slots < jnp.minimum(n_regions, K)
    # deepest point per slot on the stop-gradient keys only (integer result, ties -> first)
    onehot = lab[:, None] == slots[None, :]  # (W, K)
    key = jax.lax.stop_gradient(jnp.where(onehot, -d2[:, None], -jnp.inf))
    best = jnp.max(key, axis=0)
    jj = jnp.arange(W, dtype=jnp.int32)
    idx = jnp.min(jnp.where(onehot & (key == best[None, :]), jj[:, None], W - 1), axis=0)

    # The deepest point and its neighbours, picked by a one-hot reduction over the window: a
    # reduce is materialised once, where select chains were duplicated by XLA:CPU into every
    # consumer fusion (measured: ~7 copies).  Edge points use themselves as outer neighbour
    # (they only matter with overflow).
    pick = onehot & (jj[:, None] == idx[None, :])  # (W, K), one j per active slot
    sh_m = lambda v: jnp.concatenate([v[:1], v[:-1]])
    sh_p = lambda v: jnp.concatenate([v[1:], v[-1:]])
    V = jnp.stack([xs, ys, sh_m(xs), sh_m(ys), sh_p(xs), sh_p(ys)], axis=-1)  # (W, 6)
    T = jnp.sum(jnp.where(pick[:, :, None], V[:, None, :], 0.0), axis=0)  # (K, 6)
    x0, y0, xm, ym, xp, yp = (T[:, i] for i in range(6))
    if refine:
        d0 = R - safe_sqrt((x0 - c[0]) ** 2 + (y0 - c[1]) ** 2)
        dm = R - safe_sqrt((xm - c[0]) ** 2 + (ym - c[1]) ** 2)
        dp = R - safe_sqrt((xp - c[0]) ** 2 + (yp - c[1]) ** 2)
        a = 0.5 * (dp + dm) - d0
        b = 0.5 * (dp - dm)
        ok = a < -jnp.finfo(dt).tiny
        sv = jnp.clip(jnp.where(ok, -b / (2.0 * jnp.where(ok, a, -1.0)), 0.0), -0.5, 0.5)
        bd = d0 + b * sv + a * sv * sv
        bx = x0 + sv * (0.5 * (xp - xm)) + sv * sv * (0.5 * (xp + xm) - x0)
        by = y0 + sv * (0.5 * (yp - ym)) + sv * sv * (0.5 * (yp + ym) - y0)
    else:
        bx, by = x0, y0
        bd = R - safe_sqrt((x0 - c[0]) ** 2 + (y0 - c[1]) ** 2)
    normal, depth, pb = _normal_and_mask(jnp.stack([bx, by], axis=-1), c, bd, active)
    gidx = jnp.where(active, jnp.mod(start + idx, n), 0).astype(jnp.int32)
    return WindowRegions(
        depth=depth,
        normal=normal,
        point_bushing=pb,
        point_pin=c + R * normal,
        active=active,
        index=gidx,
        n_regions=n_regions,
        start=start,
        mask=m,
        labels=labels.astype(jnp.int32),
        overflow=overflow,
    )


def window_impact_memory(
    regions: WindowRegions,
    memory,
    region_delta_dot,
    n_points: int,
    floor: float = IMPACT_VELOCITY_FLOOR,
    max_shift: int = 2,
):
    """``region_impact_memory`` on a window; memory (W + 1,) = δ̇⁻ [m/s] at the previous window's
    points, then that window's start index (stored as a float).

    The previous window is aligned to the current one by the shift σ = start − start_prev
    (mod N, in [−N/2, N/2)): point j now was point j + σ then.  |σ| ≤ ``max_shift`` is
    handled (a select chain); a larger jump with memory present is reported as
    ``lost`` (an overflow: some inherited δ̇⁻ may be missing).
    Returns (region_delta_dot_minus (K,), new_memory (W + 1,), inherited (K,), lost ()).
    """
    W = regions.mask.shape[0]
    K = regions.depth.shape[0]
    mem = jnp.asarray(memory)
    vdot = jnp.asarray(region_delta_dot)
    dt = jnp.result_type(mem, vdot, float)
    mem, vdot = mem.astype(dt), vdot.astype(dt)
    prev, start_prev = mem[:W], jnp.round(mem[W]).astype(jnp.int32)
    sig = jnp.mod(regions.start - start_prev + n_points // 2, n_points) - n_points // 2
    # aligned_j = prev_{j+σ} (0 outside the previous window), as a select chain over σ
    aligned = jnp.zeros((W,), dt)
    for sft in range(-max_shift, max_shift + 1):
        if sft >= 0:
            rolled = jnp.concatenate([prev[sft:], jnp.zeros((sft,), dt)])
        else:
            rolled = jnp.concatenate([jnp.zeros((-sft,), dt), prev[:sft]])
        aligned = jnp.where(sig == sft, rolled, aligned)
    lost = (jnp.abs(sig) > max_shift) & jnp.any(prev > 0)
    onehot = (regions.labels[:, None] == jnp.arange(K, dtype=jnp.int32)[None, :]) & regions.mask[:, None]  # (W, K)
    inh = jnp.max(jnp.where(onehot, aligned[:, None], 0.0), axis=0)
    has = inh > 0
    out = jnp.where(has, inh, jnp.maximum(vdot, floor))
    out = jnp.where(regions.active, out, 0.0)
    new = jnp.sum(jnp.where(onehot, out[None, :], 0.0), axis=1)
    new_mem = jnp.concatenate([new, regions.start.astype(dt)[None]])
    return out, new_mem, has, lost


# ------------------------------------------------------------------ how many regions a profile can hold
REGION_MARGIN = 1e-3
"""Fixed relative margin of the single-region test, on top of the estimated error of the
discrete curvature (``curvature_bound``): κ_up·R_J·(1 + REGION_MARGIN) < 1."""
REGION_CAP = 4
"""Most slots ``region_bound`` asks for (beyond it the cost grows with every slot; regions past
the cap are still counted in ``n_regions``, i.e. ``max_contact_regions``)."""
_FLAT_TOL = 1e-9  # |κ|·R_pin below this counts as straight (round-off on collinear points)


def curvature(points, stride: int = 1):
    """Signed curvature κ_k [1/m] of a closed discretised profile (host, NumPy), shape (..., N).

    κ_k = 1/ρ_k of the circle through the three points p_{k−s}, p_k, p_{k+s} (s = ``stride``;
    circumscribed circle): κ = 2 (u × v) / (|u| |v| |u + v|), u = p_k − p_{k−s},
    v = p_{k+s} − p_k.  The sign is taken relative to the orientation of the whole profile
    (signed shoelace area), so κ > 0 on convex parts and κ < 0 on concave ones (material
    bulging into the bore) for clockwise and counter-clockwise point orders alike.
    """
    p = np.asarray(points, dtype=np.float64)
    a, c = np.roll(p, stride, axis=-2), np.roll(p, -stride, axis=-2)
    u, v = p - a, c - p
    cross = u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]
    nx = np.roll(p, -1, axis=-2)
    area = 0.5 * np.sum(p[..., 0] * nx[..., 1] - nx[..., 0] * p[..., 1], axis=-1)
    orient = np.where(area < 0, -1.0, 1.0)[..., None]
    den = np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1) * np.linalg.norm(u + v, axis=-1)
    return 2.0 * orient * cross / np.where(den > 0, den, np.inf)


def curvature_bound(points):
    """Upper estimate κ_up [1/m] of the curve's curvature around each point (host), (..., N).

    The 3-point κ_h (``curvature``) is a second-order estimate: κ_h = κ + C h² + ...  With the
    wider stencil κ_2h (stride 2) the error is (κ_2h − κ_h)/3 (Richardson); the curvature between
    samples can exceed the sampled one by about |Δ²κ_h|/8 (Δ²: second difference along the
    profile).  κ_up = κ_h + |κ_2h − κ_h| + |Δ²κ_h|/4 takes both with a factor 2–3 of safety.
    Measured: on ellipses 10.6 × 10.5 to 14 × 10 mm at N = 36…144, κ_h alone underestimates the
    exact 1/ρ_min = a/b² by up to 1.4 %, κ_up never does.
    """
    k1 = curvature(points, 1)
    k2 = curvature(points, 2)
    d2 = np.roll(k1, 1, axis=-1) - 2.0 * k1 + np.roll(k1, -1, axis=-1)
    return k1 + np.abs(k2 - k1) + 0.25 * np.abs(d2)


@dataclass(frozen=True)
class RegionBound:
    """What ``region_bound`` found over a set of profiles (foldable over blocks with ``merge``).

    single:   every profile provably gives at most one contact region at a time.
    slots:    the slot count to use: 1 when ``single``, else min(REGION_CAP, max(2, 1 + sharp
              runs within a half-turn)) (see ``region_bound``).
    needed:   the uncapped bound 1 + sharp runs within a half-turn (1 when single).
    rho_ratio: smallest ρ_min / R_pin over the profiles, ρ_min = 1/max κ_up (``curvature_bound``);
              −inf with a concave point.
    concave:  some profile has a concave point.
    worst:    index of the profile with the smallest ρ_min / R_pin (concave first).
    count:    number of profiles tested.
    """

    single: bool
    slots: int
    needed: int
    rho_ratio: float
    concave: bool
    worst: int
    count: int

    def merge(self, other: RegionBound, offset: int = 0) -> RegionBound:
        """This bound and ``other`` (profiles numbered from ``offset``) together."""
        w_other = other.rho_ratio < self.rho_ratio
        return RegionBound(
            single=self.single and other.single,
            slots=max(self.slots, other.slots),
            needed=max(self.needed, other.needed),
            rho_ratio=min(self.rho_ratio, other.rho_ratio),
            concave=self.concave or other.concave,
            worst=other.worst + offset if w_other else self.worst,
            count=self.count + other.count,
        )

    def reason(self, n_points: int, where: str = "") -> str:
        """One sentence: the choice and why (summary.json, ``jaxclear plan``); ``where`` names
        the worst profile (default: its index)."""
        ratio = "a concave point" if self.concave else f"ρ_min = {self.rho_ratio:.6g} × R_J"
        head = (
            f"auto: {self.slots} slot{'s' if self.slots > 1 else ''}; smallest radius of curvature of the "
            f"{n_points}-point bushing over {self.count} profile(s) (3-point circumscribed circles, "
            f"with their estimated error taken off): {ratio}"
            f" ({where or f'profile {self.worst}'})"
        )
        if self.single:
            return (
                head + f" >= (1 + {REGION_MARGIN:g}) × R_J: the journal touches one place at a time, "
                "one-pass deepest-region detection"
            )
        capped = f", capped at {REGION_CAP}" if self.needed > self.slots else ""
        return (
            head + f" < (1 + {REGION_MARGIN:g}) × R_J or concave: up to {self.needed} regions (1 + sharp runs "
            f"within a half-turn){capped}; multi-region detection"
        )


def _sharp_runs_in_half_turn(p, sharp):
    """Most runs of sharp points met in a half-turn of polar angle [θ_j, θ_j + π), per profile
    (b, N, 2), (b, N) -> (b,): a run under way at the window's first point counts once."""
    starts = sharp & ~np.roll(sharp, 1, axis=-1)
    th = np.arctan2(p[..., 1], p[..., 0])
    dth = np.mod(th[:, None, :] - th[:, :, None], 2 * np.pi)  # (b, j, k): angle of point k from j
    s = np.sum((dth < np.pi) & (dth > 0) & starts[:, None, :], axis=-1) + sharp
    return np.max(s, axis=-1)


def region_bound(points, journal_radius, margin: float = REGION_MARGIN, cap: int = REGION_CAP) -> RegionBound:
    """How many contact regions a journal of radius R_J can make in each bushing profile (host).

    points (..., N, 2) [m] closed profiles, journal_radius broadcastable to (...) [m].

    Single region (``single``): at every point κ_k >= 0 (nothing concave; |κ|·R_J < 1e-9 counts as
    straight) and κ_up,k·R_J·(1 + margin) < 1 (``curvature_bound``: the 3-point circumscribed
    curvature plus its estimated discretisation error), i.e. the smallest radius of curvature
    ρ_min = 1/max κ_up exceeds R_J by the margin.  Why:
    a convex curve with ρ >= R_J everywhere has, between any two of its points inside a disc of
    radius R_J, an arc of curvature <= 1/R_J; such an arc stays inside the lens of the two R_J
    arcs through its ends (comparison of curves), and the lens lies inside every R_J-disc holding
    the two points, so the points of the curve inside the journal form one arc (Blaschke's
    rolling-disc setting: the journal rolls freely inside the bore).  κ_up covers the error of the
    3-point estimate of κ, ``REGION_MARGIN`` (relative) round-off and a bit more; the sampled points of that one arc are one
    circular run, which is what ``detect`` calls a region.

    Otherwise the "sharp" points (κ_up,k·R_J >= 1/(1 + margin), or κ_k·R_J < −1e-9: concave) bound the
    count: by the same lens argument, two consecutive regions are separated by an arc holding a
    sharp point; all points in contact lie within 90° of the pin direction (every profile point
    is farther than R_J from the origin, so |p − c| < R_J needs p̂·ĉ > 0), so a journal can make
    at most 1 + S regions, S = the most runs of sharp points met in any half-turn of polar angle.
    ``slots`` = min(cap, max(2, 1 + S)): a run that straddles a region would let two gaps share
    it, which is why the result is a bound of the sampled geometry, not a proof; regions beyond the
    slots are counted in ``n_regions`` (``max_contact_regions``), never silently lost.
    """
    p = np.asarray(points, dtype=np.float64)
    if p.ndim < 2 or p.shape[-1] != 2 or p.shape[-2] < 3:
        raise ValueError(f"points must be (..., N, 2) with N >= 3, got shape {p.shape}")
    n = p.shape[-2]
    p = p.reshape(-1, n, 2)
    R = np.broadcast_to(np.asarray(journal_radius, np.float64).reshape(-1), (p.shape[0],))
    if np.any(~(R > 0)):
        raise ValueError(f"journal_radius must be > 0, got {R[~(R > 0)][0]!r}")
    kr = curvature(p) * R[:, None]  # κ·R_J, (B, N)
    kup = curvature_bound(p) * R[:, None]  # its upper estimate
    concave = kr < -_FLAT_TOL
    sharp = concave | (kup * (1.0 + margin) >= 1.0)
    single = ~np.any(sharp, axis=-1)
    with np.errstate(divide="ignore"):
        ratio = np.where(np.any(concave, axis=-1), -np.inf, 1.0 / np.max(kup, axis=-1))
    # runs of sharp points counted within each half-turn [θ_j, θ_j + π), profiles that fail the
    # single-region test only, in blocks of <= 2^22 (j, k) pairs, until the cap is reached
    S = np.zeros(p.shape[0], np.int64)
    todo = np.flatnonzero(~single)
    step = max(1, (1 << 22) // (n * n))
    for i0 in range(0, len(todo), step):
        ids = todo[i0 : i0 + step]
        S[ids] = _sharp_runs_in_half_turn(p[ids], sharp[ids])
        if 1 + S.max() >= cap:
            break
    needed = np.where(single, 1, 1 + S)
    slots = np.where(single, 1, np.minimum(cap, np.maximum(2, needed)))
    worst = int(np.argmin(ratio))
    return RegionBound(
        single=bool(np.all(single)),
        slots=int(np.max(slots)),
        needed=int(np.max(needed)),
        rho_ratio=float(ratio[worst]),
        concave=bool(np.any(concave)),
        worst=worst,
        count=int(p.shape[0]),
    )
