"""Fixed-step explicit integration under ``jax.lax.scan``.

A model supplies
  ``accel(params, q, v, aux, t) -> (a, aux_new, out)``  the accelerations, updated non-smooth
  memory (impact velocities, contact masks) and per-step outputs (a pytree of scalars), and
  ``drift(q, v, h) -> q_new``  the position update for a velocity held over h (q + h·v for plain
  coordinates; a rotation for orientations carried as (cos φ, sin φ) pairs).

Schemes (all one ``accel`` call per step except RK4):
  * ``"leapfrog"`` — kick-drift-kick Störmer–Verlet (Hairer, Lubich & Wanner 2003, eq. 1.7):
    v½ = v + h/2·a(q, v);  q⁺ = q + h·v½;  a⁺ = a(q⁺, v½);  v⁺ = v½ + h/2·a⁺.  Symplectic and
    second order for conservative forces; velocity-dependent forces see the half-step velocity.
  * ``"symplectic_euler"`` — v⁺ = v + h·a(q, v), q⁺ = q + h·v⁺ (first order).
  * ``"rk4"`` — classical Runge–Kutta on (q, v), four ``accel`` calls per step.
  * ``"moreau_midpoint"`` — drift-kick-drift (Moreau 1988; Jean 1999): q½ = q + h/2·v;
    v⁺ = v + h·a(q½, v);  q⁺ = q½ + h/2·v⁺.  Position Verlet for smooth forces; it is the scheme
    in which the stick–slip mechanisms (impact_oscillator, plate_compactor) solve their
    set-valued friction on the impulse h·F over the step (their own step functions).

Saving: a nested scan (outer over saves, inner over ``save_every`` steps) so the stored history
is O(steps/save_every); ``reduce(acc, out, i)`` folds *every* step into running metrics
(peaks are exact, not decimated).  Time is t = i·dt (never accumulated).

Stability: for a contact of linearised stiffness k_c on mass m (ω_c = √(k_c/m)) the schemes are
stable for ω_c·dt < 2 (leapfrog, symplectic Euler) and ω_c·dt < 2.785 (RK4); see
``stability_bound``.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

SCHEMES = ("leapfrog", "symplectic_euler", "rk4", "moreau_midpoint")
_OMEGA_DT_MAX = {"leapfrog": 2.0, "symplectic_euler": 2.0, "rk4": 2.785, "moreau_midpoint": 2.0}


class State(NamedTuple):
    """Integrator state: positions q, velocities v, last accelerations a, model memory aux."""

    q: jnp.ndarray
    v: jnp.ndarray
    a: jnp.ndarray
    aux: object


def stability_bound(scheme: str, stiffness_lin, mass):
    """Largest stable dt [s] for a linear oscillator of stiffness k [N/m] and mass m [kg]."""
    if scheme not in _OMEGA_DT_MAX:
        raise ValueError(f"integrator.scheme = {scheme!r}; allowed: {', '.join(SCHEMES)}")
    return _OMEGA_DT_MAX[scheme] / jnp.sqrt(stiffness_lin / mass)


def _time(i, h, like):
    """t = i·dt in the state's dtype (never accumulated; keeps float32 runs in float32)."""
    return (jnp.asarray(i, dtype=float) * h).astype(like.dtype)


def make_step(scheme: str, accel: Callable, drift: Callable, dt: float):
    """Return ``step(params, state, i) -> (state, out)`` advancing from t_i = i·dt to t_{i+1}.

    ``out`` is the model output at t_{i+1} for leapfrog / symplectic Euler, at t_i for RK4 and
    at t_i + h/2 for the Moreau midpoint scheme.
    """
    h = dt

    if scheme == "leapfrog":
        def step(params, s: State, i):
            vh = s.v + 0.5 * h * s.a
            q1 = drift(s.q, vh, h)
            a1, aux1, out = accel(params, q1, vh, s.aux, _time(i + 1, h, s.q))
            return State(q1, vh + 0.5 * h * a1, a1, aux1), out
    elif scheme == "symplectic_euler":
        def step(params, s: State, i):
            a0, aux1, out = accel(params, s.q, s.v, s.aux, _time(i, h, s.q))
            v1 = s.v + h * a0
            return State(drift(s.q, v1, h), v1, a0, aux1), out
    elif scheme == "moreau_midpoint":
        def step(params, s: State, i):
            qh = drift(s.q, s.v, 0.5 * h)
            a0, aux1, out = accel(params, qh, s.v, s.aux, _time(i, h, s.q) + 0.5 * h)
            v1 = s.v + h * a0
            return State(drift(qh, v1, 0.5 * h), v1, a0, aux1), out
    elif scheme == "rk4":
        def step(params, s: State, i):
            t = _time(i, h, s.q)
            k1, aux1, out = accel(params, s.q, s.v, s.aux, t)
            v2 = s.v + 0.5 * h * k1
            k2, _, _ = accel(params, drift(s.q, s.v, 0.5 * h), v2, s.aux, t + 0.5 * h)
            v3 = s.v + 0.5 * h * k2
            k3, _, _ = accel(params, drift(s.q, v2, 0.5 * h), v3, s.aux, t + 0.5 * h)
            v4 = s.v + h * k3
            k4, _, _ = accel(params, drift(s.q, v3, h), v4, s.aux, t + h)
            v_mean = (s.v + 2.0 * v2 + 2.0 * v3 + v4) / 6.0
            a_mean = (k1 + 2.0 * k2 + 2.0 * k3 + k4) / 6.0
            return State(drift(s.q, v_mean, h), s.v + h * a_mean, k1, aux1), out
    else:
        raise ValueError(f"integrator.scheme = {scheme!r}; allowed: {', '.join(SCHEMES)}")
    return step


def simulate(step, params, state0: State, acc0, reduce: Callable, n_saves: int, save_every: int,
             save: Callable | None = None, checkpoint: bool = False):
    """Run ``n_saves·save_every`` steps; return (final state, final accumulator, history).

    history: ``save(out)`` of the last step of each save block, stacked on a leading time
    axis of length n_saves (None when ``save`` is None).  ``reduce(acc, out, i)`` sees every
    step.  ``checkpoint=True`` wraps the inner scan in ``jax.checkpoint`` so reverse-mode
    memory is O(n_saves + save_every) instead of O(steps).
    """

    # The carry travels as per-variant scalars: under vmap a (B, 5) state is read with stride 5
    # (no SIMD); B-contiguous leaves vectorise, and XLA folds the stack/slice pairs away.
    treedef = jax.tree_util.tree_structure((state0, acc0))
    shapes = [jnp.shape(x) for x in jax.tree_util.tree_leaves((state0, acc0))]

    small = [int(np.prod(sh)) <= 16 for sh in shapes]  # long per-point memories stay arrays

    def split(c):
        return tuple(tuple(jnp.ravel(x)[k] for k in range(int(np.prod(sh)))) if sm else x
                     for x, sh, sm in zip(jax.tree_util.tree_leaves(c), shapes, small))

    def join(t):
        leaves = [(jnp.stack(parts).reshape(sh) if sh else parts[0]) if sm else parts
                  for parts, sh, sm in zip(t, shapes, small)]
        return jax.tree_util.tree_unflatten(treedef, leaves)

    def inner(carry_t, i):
        s, acc = join(carry_t)
        s, out = step(params, s, i)
        return split((s, reduce(acc, out, i))), None

    def block(carry, j):
        idx = j * save_every + jnp.arange(save_every)
        body = lambda c: jax.lax.scan(inner, c, idx)[0]
        if checkpoint:
            body = jax.checkpoint(body)
        return body(carry), None

    if save is None:
        c, _ = jax.lax.scan(block, split((state0, acc0)), jnp.arange(n_saves))
        s, acc = join(c)
        return s, acc, None

    def block_save(carry, j):
        idx = j * save_every + jnp.arange(save_every)

        def run(c):
            c, _ = jax.lax.scan(inner, c, idx[:-1])
            s, acc = join(c)
            s, out = step(params, s, idx[-1])
            return split((s, reduce(acc, out, idx[-1]))), save(out)

        if checkpoint:
            run = jax.checkpoint(run)
        return run(carry)

    c, hist = jax.lax.scan(block_save, split((state0, acc0)), jnp.arange(n_saves))
    s, acc = join(c)
    return s, acc, hist


def rotate_pair(cs, angle):
    """Rotate (cos φ, sin φ) pairs by small angles without transcendentals.

    cos h and sin h by their Taylor series to h⁸ / h⁷ (relative error < 1e-15 for |h| < 0.05);
    one Newton step of 1/√(c²+s²) keeps the pair on the unit circle.  The transcendental-free
    update is the main CPU lever (a float64 sin costs ~60 adds).
    """
    h2 = angle * angle
    ch = 1.0 - h2 * (0.5 - h2 * (1.0 / 24.0 - h2 * (1.0 / 720.0 - h2 / 40320.0)))
    sh = angle * (1.0 - h2 * (1.0 / 6.0 - h2 * (1.0 / 120.0 - h2 / 5040.0)))
    c, s = cs[..., 0], cs[..., 1]
    c1 = c * ch - s * sh
    s1 = s * ch + c * sh
    k = 1.5 - 0.5 * (c1 * c1 + s1 * s1)
    return jnp.stack([c1 * k, s1 * k], axis=-1)
