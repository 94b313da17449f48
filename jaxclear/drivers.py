"""Prescribed drivers: a crank turned from rest by a linear speed ramp, then at constant speed.

The crank speed rises linearly from 0 to ω over t_r, then stays at ω (t_r = 0: ω from t = 0):

    t < t_r:  θ = θ₀ + ½ ω t²/t_r,    θ̇ = ω t/t_r,   θ̈ = ω/t_r
    t ≥ t_r:  θ = θ₀ + ω (t − t_r/2),  θ̇ = ω,        θ̈ = 0

(the driver of Flores et al. 2008 and of the four-bar of the finite-particle-method paper,
§3.1).  Branch-free (``where``), exact for piecewise-constant θ̈, safe and differentiable at
t_r = 0.  Used by the relative-coordinate mechanisms (``slider_crank``, ``four_bar``: carried
(cos θ, sin θ) pair plus θ̈ from here) and by ``multibody.driver`` (θ(t) as a constraint).
"""

from __future__ import annotations

import jax.numpy as jnp

from ._math import perp


def crank_ramp(t, omega, t_ramp, theta0=0.0):
    """(θ, θ̇, θ̈) [rad, rad/s, rad/s²] at time t ≥ 0 [s] of the ramp above: final speed
    ``omega`` [rad/s] reached after ``t_ramp`` [s] (0: no ramp), angle ``theta0`` [rad] at t = 0."""
    t = jnp.asarray(t)
    omega, t_ramp = jnp.asarray(omega), jnp.asarray(t_ramp)
    ramp = t_ramp > 0
    tr = jnp.where(ramp, t_ramp, 1.0)  # safe divisor: the ramp branch is never taken at t_r = 0
    in_ramp = ramp & (t < t_ramp)
    theta = theta0 + jnp.where(in_ramp, 0.5 * omega * t * t / tr, omega * (t - 0.5 * t_ramp))
    return theta, jnp.where(in_ramp, omega * t / tr, omega), jnp.where(in_ramp, omega / tr, 0.0 * omega)


def crank_ramp_time(angle, omega, t_ramp):
    """The time [s] at which the crank has turned by ``angle`` [rad] from θ₀ (inverse of
    ``crank_ramp``: t = √(2 angle t_r/ω) within the ramp, angle/ω + t_r/2 after; angle < 0 → 0)."""
    ang = jnp.maximum(angle, 0.0)
    ramp = t_ramp > 0
    in_ramp = ramp & (ang < 0.5 * omega * t_ramp)
    return jnp.where(
        in_ramp,
        jnp.sqrt(2.0 * ang * jnp.where(ramp, t_ramp, 1.0) / omega),
        ang / omega + jnp.where(ramp, 0.5 * t_ramp, 0.0),
    )


def crank_pin(p, q, v, t):
    """Crank pin B of a ramp-driven crank pivoted at the origin: (B, Ḃ, B̈, θ̈) with
    B = r u, Ḃ = r θ̇ u⊥, B̈ = r (θ̈ u⊥ − θ̇² u), u = (cos θ, sin θ).

    The crank angle is carried as the pair q.crank = u and its rate v.crank = θ̇ (named
    coordinates, ``integrate.drift``); θ̈ is the prescribed ``crank_ramp`` value.  ``p``:
    any params with ``crank_length`` r [m], ``crank_speed`` ω [rad/s], ``ramp_time`` t_r [s].
    """
    u, w = q.crank, v.crank
    alpha = crank_ramp(t, p.crank_speed, p.ramp_time)[2]
    r = p.crank_length
    return r * u, r * w * perp(u), r * (alpha * perp(u) - w * w * u), alpha
