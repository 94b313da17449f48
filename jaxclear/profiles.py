"""Bushing (bearing) profiles as closed curves discretised by a uniform polar angle step.

Xu 2015 (non-circular clearance revolute joint, step 1): the bushing contour is written as a
trigonometric function of the polar angle θ ∈ [0°, 360°) and sampled at θ_k = 2πk/N, k = 0..N−1.
Every constructor returns an (N, 2) array of points in metres, in the bushing frame (origin at
the nominal bearing centre), counter-clockwise.  N is static (a Python int); all other
parameters may be traced and are differentiable (radius, Fourier wear coefficients, patch
depth, ...).

Validation runs only on concrete values: under ``jit``/``grad``/``vmap`` the checks on traced
values are skipped so that tracing never breaks.
"""

from __future__ import annotations

import csv
import math
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxclear._math import safe_norm

__all__ = [
    "angles",
    "polar",
    "circle",
    "ellipse",
    "fourier",
    "wear_patch",
    "measured",
    "min_radius",
]


# ----------------------------------------------------------------------------- validation
def _concrete(x: Any):
    """``np.asarray(x)`` for concrete values, ``None`` for tracers (checks are then skipped)."""
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _check_n_points(n_points: Any, name: str = "n_points") -> int:
    if isinstance(n_points, (bool, np.bool_)) or not isinstance(n_points, (int, np.integer)):
        raise ValueError(f"{name} must be a Python int >= 3 (static number of profile points), got {n_points!r}")
    if n_points < 3:
        raise ValueError(f"{name} must be >= 3, got {n_points}")
    return int(n_points)


def _check_positive(x: Any, name: str) -> None:
    v = _concrete(x)
    if v is None:
        return
    if v.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got shape {v.shape}")
    if not np.isfinite(v) or not v > 0:
        raise ValueError(f"{name} must be finite and > 0 (metres), got {float(v)!r}")


def _check_finite_scalar(x: Any, name: str) -> None:
    v = _concrete(x)
    if v is None:
        return
    if v.ndim != 0 or not np.isfinite(v):
        raise ValueError(f"{name} must be a finite scalar, got {v!r}")


def _check_radii(r: jax.Array, what: str) -> None:
    v = _concrete(r)
    if v is None:
        return
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{what}: radii must be finite, got non-finite values")
    if np.min(v) <= 0:
        k = int(np.argmin(v))
        raise ValueError(
            f"{what}: radius r(θ) must be > 0 at every point, got min r = {float(v[k])!r} "
            f"at index {k} (θ = {2 * math.pi * k / v.shape[0]:.4f} rad)"
        )


def _float_dtype(*xs):
    dt = jnp.result_type(*xs, float)
    return dt if jnp.issubdtype(dt, jnp.floating) else jnp.result_type(float)


# ----------------------------------------------------------------------------- constructors
def angles(n_points: int, dtype=None) -> jax.Array:
    """Uniform polar angles θ_k = 2πk/N, k = 0..N−1 (rad), shape (N,)."""
    n = _check_n_points(n_points)
    dtype = jnp.result_type(float) if dtype is None else dtype
    return (2.0 * jnp.pi / n) * jnp.arange(n, dtype=dtype)


def polar(radii) -> jax.Array:
    """Points p_k = r_k (cos θ_k, sin θ_k) from radii at the uniform angles θ_k = 2πk/N.

    radii: (N,) array in metres, N ≥ 3 (its length fixes N).  Returns (N, 2), counter-clockwise.
    """
    r = jnp.asarray(radii)
    r = r.astype(_float_dtype(r))
    if r.ndim != 1:
        raise ValueError(f"radii must be a 1-D array of length N >= 3, got shape {r.shape}")
    _check_n_points(r.shape[0], "len(radii)")
    _check_radii(r, "polar")
    th = angles(r.shape[0], dtype=r.dtype)
    return jnp.stack([r * jnp.cos(th), r * jnp.sin(th)], axis=-1)


def circle(radius, n_points: int) -> jax.Array:
    """Circular bearing of radius R_b (m): r(θ) = R_b."""
    _check_positive(radius, "radius")
    n = _check_n_points(n_points)
    radius = jnp.asarray(radius)
    return polar(jnp.full((n,), 1.0, dtype=_float_dtype(radius)) * radius)


def ellipse(semi_major, semi_minor, n_points: int, orientation=0.0) -> jax.Array:
    """Elliptical bearing, polar form about its centre:

        r(θ) = a b / sqrt((b cos(θ − ψ))² + (a sin(θ − ψ))²)

    a = semi_major (along ψ = orientation, rad), b = semi_minor (m).  b > a is allowed (the long
    axis is then at ψ + π/2); both must be > 0.
    """
    _check_positive(semi_major, "semi_major")
    _check_positive(semi_minor, "semi_minor")
    _check_finite_scalar(orientation, "orientation")
    n = _check_n_points(n_points)
    a = jnp.asarray(semi_major)
    b = jnp.asarray(semi_minor)
    dt = _float_dtype(a, b, orientation)
    t = angles(n, dtype=dt) - orientation
    r = a * b / jnp.sqrt((b * jnp.cos(t)) ** 2 + (a * jnp.sin(t)) ** 2)
    return polar(r)


def fourier(radius, a, b, n_points: int) -> jax.Array:
    """Fourier wear model: r(θ) = R_b + Σ_{k=1..K} a_k cos kθ + b_k sin kθ  (m).

    a, b: 1-D arrays of harmonic amplitudes (m); they may have different lengths (missing
    harmonics are zero).  r(θ) must stay > 0 (checked on concrete values).
    """
    _check_positive(radius, "radius")
    n = _check_n_points(n_points)
    a = jnp.atleast_1d(jnp.asarray(a))
    b = jnp.atleast_1d(jnp.asarray(b))
    for name, c in (("a", a), ("b", b)):
        if c.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of harmonic amplitudes, got shape {c.shape}")
        cv = _concrete(c)
        if cv is not None and not np.all(np.isfinite(cv)):
            raise ValueError(f"{name} must be finite, got {cv!r}")
    dt = _float_dtype(radius, a, b)
    th = angles(n, dtype=dt)
    ka = jnp.arange(1, a.shape[0] + 1, dtype=dt)
    kb = jnp.arange(1, b.shape[0] + 1, dtype=dt)
    r = (
        jnp.asarray(radius, dtype=dt)
        + jnp.cos(th[:, None] * ka[None, :]) @ a.astype(dt)
        + jnp.sin(th[:, None] * kb[None, :]) @ b.astype(dt)
    )
    _check_radii(r, "fourier")
    return polar(r)


def wear_patch(radius, depth, center_angle, half_width, n_points: int) -> jax.Array:
    """Circular bearing with a smooth (C¹) local wear patch:

        r(θ) = R_b + depth · ½ (1 + cos(π Δ / w))   for |Δ| < w,   r = R_b otherwise,

    Δ = θ − θ_c wrapped to [−π, π), w = half_width ∈ (0, π] (rad).  depth ≥ 0 is material
    removed (radius grows); a negative depth (deposit) is allowed while R_b + depth > 0.
    """
    _check_positive(radius, "radius")
    _check_finite_scalar(depth, "depth")
    _check_finite_scalar(center_angle, "center_angle")
    n = _check_n_points(n_points)
    w_c = _concrete(half_width)
    if w_c is not None and (w_c.ndim != 0 or not (0 < w_c <= math.pi)):
        raise ValueError(f"half_width must be a scalar in (0, π] rad, got {w_c!r}")
    r_c, d_c = _concrete(radius), _concrete(depth)
    if r_c is not None and d_c is not None and not r_c + d_c > 0:
        raise ValueError(
            f"depth must satisfy radius + depth > 0, got depth = {float(d_c)!r} with radius = {float(r_c)!r}"
        )
    dt = _float_dtype(radius, depth, center_angle, half_width)
    th = angles(n, dtype=dt)
    delta = jnp.mod(th - center_angle + jnp.pi, 2.0 * jnp.pi) - jnp.pi
    inside = jnp.abs(delta) < half_width
    bump = jnp.where(inside, 0.5 * (1.0 + jnp.cos(jnp.pi * delta / half_width)), 0.0)
    return polar(jnp.asarray(radius, dtype=dt) + depth * bump)


# ----------------------------------------------------------------------------- measured
def _read_csv(path) -> np.ndarray:
    if not os.path.isfile(path):
        raise ValueError(f"path: file not found: {str(path)!r}")
    rows = []
    with open(path, newline="") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                rows.append(line)
    if not rows:
        raise ValueError(f"path: {str(path)!r} has no header (expected columns 'x_m,y_m')")
    reader = csv.reader(rows)
    header = [h.strip() for h in next(reader)]
    missing = [c for c in ("x_m", "y_m") if c not in header]
    if missing:
        raise ValueError(
            f"path: {str(path)!r} is missing column(s) {missing}; header is {header}, "
            "expected columns 'x_m,y_m' (metres)"
        )
    ix, iy = header.index("x_m"), header.index("y_m")
    pts = []
    for lineno, rec in enumerate(reader, start=2):
        try:
            pts.append((float(rec[ix]), float(rec[iy])))
        except (ValueError, IndexError) as e:
            raise ValueError(f"path: {str(path)!r} data row {lineno}: cannot read x_m, y_m from {rec!r}") from e
    return np.asarray(pts, dtype=np.float64).reshape(-1, 2)


def measured(points=None, path=None, n_points: int | None = None) -> jax.Array:
    """Measured bushing profile from points (M, 2) in metres or a CSV file with header ``x_m,y_m``.

    Lines (or their tails) starting with '#' are comments.  Without ``n_points`` the points are
    returned in their given order, reversed if that order is clockwise (shoelace area < 0), so
    the result is counter-clockwise.  With ``n_points`` the profile is resampled at the uniform
    angles θ_k = 2πk/N by periodic linear interpolation of r(θ) in polar coordinates about the
    origin (points sorted by angle); this assumes the contour is star-shaped about the origin.
    """
    if (points is None) == (path is None):
        raise ValueError(
            f"give exactly one of points or path, got points={'None' if points is None else 'array'}, path={path!r}"
        )
    if path is not None:
        p = jnp.asarray(_read_csv(path))
        src = "path"
    else:
        p = jnp.asarray(points)
        p = p.astype(_float_dtype(p))
        src = "points"
    if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] < 3:
        raise ValueError(f"{src} must hold an (M, 2) array of x, y in metres with M >= 3, got shape {p.shape}")
    pv = _concrete(p)
    if pv is not None:
        if not np.all(np.isfinite(pv)):
            raise ValueError(f"{src}: all coordinates must be finite")
        if np.min(np.hypot(pv[:, 0], pv[:, 1])) <= 0:
            raise ValueError(f"{src}: a point lies at the origin (radius 0); the origin must be inside the bushing")
    if n_points is None:
        area2 = jnp.sum(p[:, 0] * jnp.roll(p[:, 1], -1) - jnp.roll(p[:, 0], -1) * p[:, 1])
        if pv is not None:
            return p[::-1] if float(area2) < 0 else p
        return jnp.where(area2 < 0, p[::-1], p)
    n = _check_n_points(n_points)
    th_m = jnp.mod(jnp.arctan2(p[:, 1], p[:, 0]), 2.0 * jnp.pi)
    r_m = safe_norm(p)
    order = jnp.argsort(th_m)
    th_s, r_s = th_m[order], r_m[order]
    # periodic linear interpolation: pad one point on each side across 0 / 2π
    xp = jnp.concatenate([th_s[-1:] - 2.0 * jnp.pi, th_s, th_s[:1] + 2.0 * jnp.pi])
    fp = jnp.concatenate([r_s[-1:], r_s, r_s[:1]])
    r = jnp.interp(angles(n, dtype=p.dtype), xp, fp)
    return polar(r)


# ----------------------------------------------------------------------------- helpers
def min_radius(points) -> jax.Array:
    """Smallest distance from the bushing-frame origin to the profile points (m).

    A pin of radius R_pin centred at the origin fits without contact iff R_pin < min_radius.
    """
    p = jnp.asarray(points)
    return jnp.min(safe_norm(p, axis=-1), axis=-1)
