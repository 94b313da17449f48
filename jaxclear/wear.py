"""Archard wear of a bushing profile, point by point (engine only: no spec, no files).

Archard's law at every profile point k of the bushing (the point profile of Xu 2015 carries its
own wear depth), as in the wear–dynamics coupling of Flores (2009) and Mukras et al. (2010):

    dh_k = k_w · p_k · ds,        ds = |v_t| dt,

k_w the dimensional wear coefficient [m³/(N·m) = m²/N], p_k the contact pressure at the point
[Pa], ds the sliding distance of the contact during the step (v_t the relative tangential
velocity at the contact point).  The pressure follows the elastic-foundation (Winkler) model:
proportional to the point's penetration d_k = R_J − |b_k − e| > 0 (b_k the point, e the journal
centre, bearing frame; computed as (R_J² − |b_k − e|²)/(2R_J) = d_k(1 − d_k/2R_J), without a square
root per point, ``overlap``), scaled so that it integrates over the contact arc and the bushing
length L to the joint's normal force F_n:

    p_k = F_n · d_k / (L · Σ_j d_j Δs_j),      Δs_k = ½(|b_{k+1} − b_k| + |b_k − b_{k−1}|),

so the worn volume of a step is Σ_k dh_k Δs_k L = k_w F_n ds: Archard's volume exactly, whatever
the discretisation.  Only the bushing wears (the journal is taken as the harder part); the depth
moves each point radially outwards (``worn_points``).  Branch-free: masked by the penetrating
points, safe at no contact.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._math import safe_norm


def arc_lengths(points):
    """Δs_k [m] of a closed profile (…, N, 2): half the distance to each neighbour."""
    d_next = safe_norm(jnp.roll(points, -1, axis=-2) - points)
    return 0.5 * (d_next + jnp.roll(d_next, 1, axis=-1))


def penetration(points, centre, journal_radius):
    """d_k = R_J − |b_k − e| [m] (positive where the journal overlaps the point)."""
    return journal_radius - safe_norm(points - centre)


def overlap(points, centre, journal_radius):
    """(R_J² − |b_k − e|²)/(2 R_J) = d_k (1 − d_k/(2 R_J)) [m]: the penetration to a relative
    d/(2R_J) (≤ 1e-3 at any realistic depth) without a square root per point, from the same
    squared distances as the contact detection (``contact.detect_deepest``)."""
    rel = points - centre
    dist2 = rel[..., 0] ** 2 + rel[..., 1] ** 2
    return (journal_radius * journal_radius - dist2) / (2.0 * journal_radius)


def increment(points, centre, journal_radius, normal_force, slip_speed, dt, coefficient, length, ds=None):
    """(N,) wear depth dh_k [m] of one step (module docstring): ``normal_force`` F_n [N] (the
    joint's total, ≥ 0), ``slip_speed`` |v_t| [m/s], ``dt`` [s], ``coefficient`` k_w [m²/N],
    ``length`` L [m]; 0 wherever the point does not penetrate or F_n = 0.  ``ds``: the points'
    ``arc_lengths`` when the caller has them (a run's profile is fixed: computed once).

    The Winkler weights use ``overlap`` (the penetration without a square root per point); the
    volume Σ dh Δs L = k_w F_n ds is exact whatever the weights."""
    d = jnp.maximum(overlap(points, centre, journal_radius), 0.0)
    ds = arc_lengths(points) if ds is None else ds
    weight = jnp.sum(d * ds)
    safe = jnp.where(weight > 0, weight, 1.0)
    pressure = jnp.where(weight > 0, normal_force * d / (length * safe), 0.0)
    return coefficient * pressure * jnp.abs(slip_speed) * dt


def worn_points(points, depth):
    """The profile with every point moved radially outwards by its wear depth [m]."""
    r = safe_norm(points)
    return points * ((r + depth) / jnp.where(r > 0, r, 1.0))[..., None]


def worn_volume(points, depth, length):
    """Σ_k h_k Δs_k L [m³]: the material removed (to first order in h)."""
    return jnp.sum(depth * arc_lengths(points), axis=-1) * length


def smooth(increment, smoothing):
    """h ← (1 − s) h + s (h₋ + h₊)/2 along the profile (last axis, closed): damps the
    point-to-point noise of a sampled contact; keeps Σ h (the volume, for uniform points)."""
    if isinstance(smoothing, (int, float)) and smoothing == 0:
        return increment
    nb = 0.5 * (jnp.roll(increment, 1, -1) + jnp.roll(increment, -1, -1))
    return (1.0 - smoothing) * increment + smoothing * nb


def deepest(points, depth):
    """The deepest wear of each variant over all its joints' points (numpy): (depth [m], its angle
    in the bearing frame [deg], NaN where nothing wears); ``points`` (B, …, N, 2), ``depth`` (B, …, N)."""
    depth = np.asarray(depth)
    B = depth.shape[0]
    flat = depth.reshape(B, -1)
    k = np.argmax(flat, axis=1)
    xy = np.asarray(points).reshape(B, -1, 2)[np.arange(B), k]
    h = flat[np.arange(B), k]
    return h, np.where(h > 0, np.degrees(np.arctan2(xy[:, 1], xy[:, 0])), np.nan)


def evolve(window, points0, updates, cycles_per_update, cycles_per_window, smoothing=0.0):
    """Wear that evolves with the dynamics (Flores 2009; Mukras et al. 2010): simulate a window,
    take each point's wear per cycle, advance the profile by ``cycles_per_update`` cycles (wear
    acceleration: the load history is taken as unchanged over those cycles), optionally smooth,
    repeat ``updates`` times; each update simulates on the previous update's (worn) bushing.

    window(points) -> (depth, info): the Archard depth [m] of every point (…, N) over one window
    of ``cycles_per_window`` cycles on the bushing ``points`` (…, N, 2), and a dict of scalars or
    arrays to record (e.g. the window's peak contact force).  smoothing s ∈ [0, 1): each update's
    increment mixed with its neighbours' (h ← (1 − s) h + s (h₋ + h₊)/2), damping the point-to-point
    noise of a sampled contact.  Returns (depth after each update (updates, …, N), [info of each
    window]), the depth measured from ``points0``; the profile after update m is
    ``worn_points(points0, depth[m])``.  Python loop over updates; ``window`` is the compiled part.
    """
    depth = jnp.zeros(points0.shape[:-1], points0.dtype)
    depths, infos = [], []
    for _ in range(int(updates)):
        d, info = window(worn_points(points0, depth))
        depth = depth + smooth(d * (cycles_per_update / cycles_per_window), smoothing)
        depths.append(depth)
        infos.append(info)
    return jnp.stack(depths), infos
