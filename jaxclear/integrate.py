"""Fixed-step explicit integration under ``jax.lax.scan``.

A model supplies
  ``accel(params, q, v, aux, t) -> (a, aux_new, out)``  the accelerations, updated non-smooth
  memory (impact velocities, contact masks) and per-step outputs (a pytree of scalars), and
  ``drift(q, v, h) -> q_new``  the position update for a velocity held over h (q + h·v for plain
  coordinates; a rotation for orientations carried as (cos φ, sin φ) pairs).
q, v and a are pytrees of one structure (a mechanism's named coordinates, e.g. ``crank``, ``rod``,
``slider``; a plain array works too): the kicks act leaf by leaf, and the default ``drift`` rotates
every leaf of q that carries one more trailing axis of 2 than its rate (a (cos, sin) pair) and
translates the others.

Schemes (all one ``accel`` call per step except RK4):
  * ``"leapfrog"`` — kick-drift-kick Störmer–Verlet (Hairer, Lubich & Wanner 2003, eq. 1.7):
    v½ = v + h/2·a(q, v);  q⁺ = q + h·v½;  a⁺ = a(q⁺, v½);  v⁺ = v½ + h/2·a⁺.  Symplectic and
    second order for conservative forces; velocity-dependent forces (contact damping δ̇,
    friction on the slip velocity) see the half-step velocity v½ = v(t⁺) − h/2·a + O(h²), an
    O(h) error in a⁺ that makes the scheme **first order** for them (measured: the Flores
    first-impact peak and ``tests/test_integrate_order.py``).
  * ``"verlet_predicted"`` — velocity Verlet with a predicted end-of-step velocity for the
    force evaluation (the velocity-dependent forces of discrete-element codes are often
    evaluated on such a predicted velocity; for conservative forces this is exactly the
    Störmer–Verlet above, Hairer, Lubich & Wanner 2003):
    v½ = v + h/2·a;  q⁺ = q + h·v½;  ṽ⁺ = v½ + h/2·a (= v + h·a, the explicit-Euler predictor
    of v(t⁺), error O(h²));  a⁺ = a(q⁺, ṽ⁺);  v⁺ = v½ + h/2·a⁺.  One ``accel`` call per step;
    second order for conservative forces (symplectic: it is the leapfrog) and for
    velocity-dependent ones: the predictor's O(h²) error reaches v⁺ through h/2·a⁺ as O(h³)
    per step, O(h²) globally — the velocity update is the trapezoidal rule with an
    explicit-Euler predictor, as in Heun's method.  Measured orders of the peak force: 2.12
    on a damped frictional impact with the peak interpolated by a parabola
    (``tests/test_integrate_order.py``, leapfrog 1.01), 2.09 on the raw largest step sample
    of the Flores first-impact peak over dt = 4 → 0.5 µs (``benchmarks/bench_work_precision.py``,
    leapfrog 0.94).  The default of the crank-driven linkages.
  * ``"symplectic_euler"`` — v⁺ = v + h·a(q, v), q⁺ = q + h·v⁺ (first order).
  * ``"rk4"`` — classical Runge–Kutta on (q, v), four ``accel`` calls per step.
  * ``"moreau_midpoint"`` — drift-kick-drift (Moreau 1988; Jean 1999): q½ = q + h/2·v;
    v⁺ = v + h·a(q½, v);  q⁺ = q½ + h/2·v⁺.  Position Verlet for smooth forces; it is the scheme
    in which the stick–slip mechanisms (impact_oscillator, plate_compactor) solve their
    set-valued friction on the impulse h·F over the step (their own step functions).

Saving: a nested scan (outer over saves, inner over ``save_every`` steps) so the stored history
is O(steps/save_every); ``reduce(acc, out, i)`` folds *every* step into running metrics
(peaks are exact, not decimated).  Time is t = i·dt (never accumulated).

Stages: every step is cut into named stages (``jax.named_scope``, the ``STAGES`` names, opened
with ``stage``): the model's ``kinematics``, ``contact_detection``, ``contact_laws`` and
``equations_of_motion``, this module's ``integrator_update`` (drift and kicks),
``metrics_reduce`` (``reduce``) and ``history_save`` (``save``), so an XLA profile (Perfetto,
TensorBoard) or the lowered HLO's op names show where a step's time goes.

Stability: for a contact of linearised stiffness k_c on mass m (ω_c = √(k_c/m)) the schemes are
stable for ω_c·dt < 2 (leapfrog, verlet_predicted, symplectic Euler) and ω_c·dt < 2.785 (RK4)
without damping; see ``stability_bound``.  With a viscous damping ratio ζ (ẍ = −ω²x − 2ζωẋ)
the spectral radius of the step's map on (x, v, a) stays ≤ 1 for
  leapfrog:          ω·dt ≤ 2(√(1 + ζ²) − ζ)      (≈ 2 − 2ζ)
  verlet_predicted:  ω·dt ≤ 2(√(1 + 4ζ²) − 2ζ)    (≈ 2 − 4ζ)
(closed forms read off the eigenvalues of the step's 3×3 amplification matrix and checked
against them on ζ ∈ [0, 1], ``tests/test_integrate_order.py``): the predictor doubles the damping's effect on the bound.
A hysteresis law F = Kδⁿ(1 + χ δ̇/δ̇⁻) has ζ = χ·√((n+1)/(8n)) at the deepest penetration of
an impact (χ/√4.8 for n = 1.5; ζ = 0.065 at e = 0.9 for Lankarani–Nikravesh: bound 1.76).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

SCHEMES = ("verlet_predicted", "leapfrog", "symplectic_euler", "rk4", "moreau_midpoint")
STAGES = (
    "kinematics",
    "contact_detection",
    "contact_laws",
    "equations_of_motion",
    "integrator_update",
    "metrics_reduce",
    "history_save",
)
# ω·dt bounds without damping; ``_DAMPED`` the damping ratio's effect where derived (module docstring)
_OMEGA_DT_MAX = {
    "verlet_predicted": 2.0,
    "leapfrog": 2.0,
    "symplectic_euler": 2.0,
    "rk4": 2.785,
    "moreau_midpoint": 2.0,
}
_DAMPED = {
    "leapfrog": lambda z: 2.0 * (jnp.sqrt(1.0 + z * z) - z),
    "verlet_predicted": lambda z: 2.0 * (jnp.sqrt(1.0 + 4.0 * z * z) - 2.0 * z),
}


class State(NamedTuple):
    """Integrator state: positions q, velocities v, last accelerations a (pytrees of one
    structure, e.g. a mechanism's named coordinates) and the model's memory aux."""

    q: jnp.ndarray
    v: jnp.ndarray
    a: jnp.ndarray
    aux: object


def state_type(name, fields, optional=(), doc=""):
    """A frozen dataclass pytree of named coordinates (MuJoCo MJX's ``types.py`` style): one class
    serves the positions q, the velocities v and the accelerations a of a mechanism (an angle
    is a (cos, sin) pair in q and a rate in v and a, ``integrate.drift``); the ``optional``
    fields default to None (absent in a configuration that has no such body: an empty subtree)."""
    fields = list(fields) + list(optional)
    spec = [f for f in fields if f not in optional] + [(f, object, dataclasses.field(default=None)) for f in optional]
    cls = dataclasses.make_dataclass(name, spec, frozen=True)
    cls.__doc__ = doc or f"{name}: " + ", ".join(fields)
    cls._fields = tuple(fields)
    cls._replace = lambda self, **kw: dataclasses.replace(self, **kw)
    return jax.tree_util.register_dataclass(cls, data_fields=fields, meta_fields=[])


def stability_bound(scheme: str, stiffness_lin, mass, damping_ratio=0.0):
    """Largest stable dt [s] for a linear oscillator of stiffness k [N/m] and mass m [kg] with
    viscous damping ratio ζ (``damping_ratio``; the leapfrog's and verlet_predicted's bounds
    fall with ζ, module docstring; the other schemes' are their undamped ones)."""
    if scheme not in _OMEGA_DT_MAX:
        raise ValueError(f"integrator.scheme = {scheme!r}; allowed: {', '.join(SCHEMES)}")
    w_dt = _DAMPED[scheme](jnp.asarray(damping_ratio)) if scheme in _DAMPED else _OMEGA_DT_MAX[scheme]
    return w_dt / jnp.sqrt(stiffness_lin / mass)


def hysteresis_damping_ratio(chi, exponent=1.5):
    """The damping ratio ζ = χ·√((n+1)/(8n)) of F = Kδⁿ(1 + χ δ̇/δ̇⁻) linearised at the deepest
    penetration of an impact (k = nKδⁿ⁻¹, c = χKδⁿ/δ̇⁻, ½mδ̇⁻² = Kδⁿ⁺¹/(n+1)): independent of K,
    m and the impact velocity, and the largest ζ over the impact (it grows with δ)."""
    return chi * jnp.sqrt((exponent + 1.0) / (8.0 * exponent))


def steps_and_saves(t_end: float, dt: float, save_every: int) -> tuple[int, int]:
    """(n_steps, n_saves) of a run over ``t_end`` [s] at step ``dt`` [s]: the whole steps that
    cover t_end (at least 1; t_end = k·dt to 1e-9 of a step is k steps, not k + 1) and the save
    blocks of ``save_every`` steps that cover those (``simulate`` runs n_saves·save_every ≥
    n_steps steps).  A run counted in steps is ``steps_and_saves(n, 1, save_every)``."""
    n_steps = max(1, math.ceil(t_end / dt - 1e-9))
    return n_steps, max(1, math.ceil(n_steps / save_every))


def stage(name: str):
    """``jax.named_scope`` of one of the ``STAGES`` of a step (a typo is an error, not a new
    name in the profile)."""
    if name not in STAGES:
        raise ValueError(f"stage {name!r}; allowed: {', '.join(STAGES)}")
    return jax.named_scope(name)


def _time(i, h, like):
    """t = i·dt in the dtype of the positions ``like`` (never accumulated; keeps float32 runs in
    float32)."""
    return (jnp.asarray(i, dtype=float) * h).astype(jax.tree_util.tree_leaves(like)[0].dtype)


def _axpy(v, c, a):
    """v + c·a leaf by leaf (v, a pytrees of one structure)."""
    return jax.tree_util.tree_map(lambda x, y: x + c * y, v, a)


def make_step(scheme: str, accel: Callable, drift: Callable | None, dt: float):
    """Return ``step(params, state, i) -> (state, out)`` advancing from t_i = i·dt to t_{i+1}.

    ``out`` is the model output at t_{i+1} for leapfrog / verlet_predicted (with the predicted
    velocity ṽ⁺ the force saw), at t_i for symplectic Euler and RK4 and
    at t_i + h/2 for the Moreau midpoint scheme.  ``drift`` None: ``drift`` of this module.
    """
    h = dt
    drift = globals()["drift"] if drift is None else drift

    # the kicks and drifts are the integrator's stage; accel opens the model's own stages
    if scheme == "leapfrog":

        def step(params, s: State, i):
            with stage("integrator_update"):
                vh = _axpy(s.v, 0.5 * h, s.a)
                q1 = drift(s.q, vh, h)
            a1, aux1, out = accel(params, q1, vh, s.aux, _time(i + 1, h, s.q))
            with stage("integrator_update"):
                v1 = _axpy(vh, 0.5 * h, a1)
            return State(q1, v1, a1, aux1), out
    elif scheme == "verlet_predicted":

        def step(params, s: State, i):
            with stage("integrator_update"):
                vh = _axpy(s.v, 0.5 * h, s.a)
                q1 = drift(s.q, vh, h)
                v_pred = _axpy(vh, 0.5 * h, s.a)  # = v + h·a: Euler predictor of v(t⁺)
            a1, aux1, out = accel(params, q1, v_pred, s.aux, _time(i + 1, h, s.q))
            with stage("integrator_update"):
                v1 = _axpy(vh, 0.5 * h, a1)
            return State(q1, v1, a1, aux1), out
    elif scheme == "symplectic_euler":

        def step(params, s: State, i):
            a0, aux1, out = accel(params, s.q, s.v, s.aux, _time(i, h, s.q))
            with stage("integrator_update"):
                v1 = _axpy(s.v, h, a0)
                q1 = drift(s.q, v1, h)
            return State(q1, v1, a0, aux1), out
    elif scheme == "moreau_midpoint":

        def step(params, s: State, i):
            with stage("integrator_update"):
                qh = drift(s.q, s.v, 0.5 * h)
            a0, aux1, out = accel(params, qh, s.v, s.aux, _time(i, h, s.q) + 0.5 * h)
            with stage("integrator_update"):
                v1 = _axpy(s.v, h, a0)
                q1 = drift(qh, v1, 0.5 * h)
            return State(q1, v1, a0, aux1), out
    elif scheme == "rk4":

        def step(params, s: State, i):
            t = _time(i, h, s.q)
            k1, aux1, out = accel(params, s.q, s.v, s.aux, t)
            with stage("integrator_update"):
                v2 = _axpy(s.v, 0.5 * h, k1)
                q2 = drift(s.q, s.v, 0.5 * h)
            k2, _, _ = accel(params, q2, v2, s.aux, t + 0.5 * h)
            with stage("integrator_update"):
                v3 = _axpy(s.v, 0.5 * h, k2)
                q3 = drift(s.q, v2, 0.5 * h)
            k3, _, _ = accel(params, q3, v3, s.aux, t + 0.5 * h)
            with stage("integrator_update"):
                v4 = _axpy(s.v, h, k3)
                q4 = drift(s.q, v3, h)
            k4, _, _ = accel(params, q4, v4, s.aux, t + h)
            with stage("integrator_update"):
                mean = lambda x1, x2, x3, x4: (x1 + 2.0 * x2 + 2.0 * x3 + x4) / 6.0
                v_mean = jax.tree_util.tree_map(mean, s.v, v2, v3, v4)
                a_mean = jax.tree_util.tree_map(mean, k1, k2, k3, k4)
                q1, v1 = drift(s.q, v_mean, h), _axpy(s.v, h, a_mean)
            return State(q1, v1, k1, aux1), out
    else:
        raise ValueError(f"integrator.scheme = {scheme!r}; allowed: {', '.join(SCHEMES)}")
    return step


# Progress from inside a compiled run: while ``reporting_progress()`` is active at trace time,
# ``simulate`` calls the host function ``_on_block`` every ~1/PROGRESS_TICKS of its save blocks
# (one ``jax.debug.callback`` per tick and device, not per variant: its argument is the unbatched
# block counter).  Off by default: gradients and the library's own jits trace without it.
PROGRESS_TICKS = 32
_REPORT = [False]
_on_block: list = [None]


class reporting_progress:
    """Context manager: functions traced inside it report save-block progress to ``set_progress``'s hook."""

    def __enter__(self):
        self._old = _REPORT[0]
        _REPORT[0] = True

    def __exit__(self, *exc):
        _REPORT[0] = self._old


def set_progress(hook):
    """``hook(blocks_done, n_saves)`` (or None): called on the host from a running chunk, once
    per device per tick."""
    _on_block[0] = hook


def _tick(done, total):
    hook = _on_block[0]
    if hook is not None:
        hook(int(done), int(total))


def _maybe_report(j, n_saves):
    if not _REPORT[0] or n_saves < 2:
        return
    every = max(1, n_saves // PROGRESS_TICKS)
    jax.lax.cond((j + 1) % every == 0, lambda: jax.debug.callback(_tick, j + 1, n_saves), lambda: None)


def simulate(
    step,
    params,
    state0: State,
    acc0,
    reduce: Callable,
    n_saves: int,
    save_every: int,
    save: Callable | None = None,
    checkpoint: bool = False,
    block_max: Callable | None = None,
):
    """Run ``n_saves·save_every`` steps; return (final state, final accumulator, history).

    history: ``save(out)`` of the last step of each save block, stacked on a leading time
    axis of length n_saves (None when ``save`` is None).  ``reduce(acc, out, i)`` sees every
    step.  ``block_max(out)`` -> {channel: array}: channels saved as their maximum over every
    step of each save block (so a plot of a sampled history keeps the impact peaks between
    samples; the maximum over time of such a channel is the exact peak).  ``checkpoint=True``
    wraps the inner scan in ``jax.checkpoint`` so reverse-mode memory is O(n_saves +
    save_every) instead of O(steps).
    """
    if block_max is not None and save is not None:
        # the running block maximum rides in the accumulator and is reset at each block start
        m_shape = jax.eval_shape(lambda: block_max(step(params, state0, jnp.int32(0))[1]))
        neg = lambda: jax.tree_util.tree_map(lambda sd: jnp.full(sd.shape, -jnp.inf, sd.dtype), m_shape)

        def reduce_m(acc_m, out, i):
            acc, m = acc_m
            return reduce(acc, out, i), jax.tree_util.tree_map(jnp.maximum, m, block_max(out))

        save_m = lambda out, m: {**save(out), **m}
        s, (acc, _), hist = _simulate(
            step,
            params,
            state0,
            (acc0, neg()),
            reduce_m,
            n_saves,
            save_every,
            save_m,
            checkpoint,
            reset=lambda acc_m: (acc_m[0], neg()),
        )
        return s, acc, hist
    return _simulate(
        step,
        params,
        state0,
        acc0,
        reduce,
        n_saves,
        save_every,
        (lambda out, _m: save(out)) if save is not None else None,
        checkpoint,
        reset=None,
    )


def _simulate(step, params, state0, acc0, reduce, n_saves, save_every, save, checkpoint, reset):
    """``simulate`` with ``save(out, acc)`` seeing the accumulator after the block's last step
    and ``reset(acc)`` applied at the start of each save block (None: no reset)."""

    # The carry travels as per-variant scalars: under vmap a (B, 5) state is read with stride 5
    # (no SIMD); B-contiguous leaves vectorise, and XLA folds the stack/slice pairs away.
    treedef = jax.tree_util.tree_structure((state0, acc0))
    shapes = [jnp.shape(x) for x in jax.tree_util.tree_leaves((state0, acc0))]

    small = [int(np.prod(sh)) <= 16 for sh in shapes]  # long per-point memories stay arrays

    def split(c):
        return tuple(
            tuple(jnp.ravel(x)[k] for k in range(int(np.prod(sh)))) if sm else x
            for x, sh, sm in zip(jax.tree_util.tree_leaves(c), shapes, small)
        )

    def join(t):
        leaves = [
            (jnp.stack(parts).reshape(sh) if sh else parts[0]) if sm else parts
            for parts, sh, sm in zip(t, shapes, small)
        ]
        return jax.tree_util.tree_unflatten(treedef, leaves)

    def reduce_(acc, out, i):
        with stage("metrics_reduce"):
            return reduce(acc, out, i)

    def save_(out, m):
        with stage("history_save"):
            return save(out, m)

    def inner(carry_t, i):
        s, acc = join(carry_t)
        s, out = step(params, s, i)
        return split((s, reduce_(acc, out, i))), None

    def block(carry, j):
        idx = j * save_every + jnp.arange(save_every)
        body = lambda c: jax.lax.scan(inner, c, idx)[0]
        if checkpoint:
            body = jax.checkpoint(body)
        out = body(carry)
        _maybe_report(j, n_saves)
        return out, None

    if save is None:
        c, _ = jax.lax.scan(block, split((state0, acc0)), jnp.arange(n_saves))
        s, acc = join(c)
        return s, acc, None

    def block_save(carry, j):
        idx = j * save_every + jnp.arange(save_every)

        def run(c):
            if reset is not None:
                s0_, a0_ = join(c)
                c = split((s0_, reset(a0_)))
            c, _ = jax.lax.scan(inner, c, idx[:-1])
            s, acc = join(c)
            s, out = step(params, s, idx[-1])
            acc = reduce_(acc, out, idx[-1])
            return split((s, acc)), save_(out, acc[1] if reset is not None else None)

        if checkpoint:
            run = jax.checkpoint(run)
        out = run(carry)
        _maybe_report(j, n_saves)
        return out

    c, hist = jax.lax.scan(block_save, split((state0, acc0)), jnp.arange(n_saves))
    s, acc = join(c)
    return s, acc, hist


def drift(q, v, h):
    """q advanced by the velocity v held over h, leaf by leaf: a leaf of q with one more trailing
    axis of 2 than its rate is a (cos φ, sin φ) pair rotated by v·h (``rotate_pair``); any other
    leaf moves to q + h·v."""

    def one(qi, vi):
        if jnp.ndim(qi) == jnp.ndim(vi) + 1 and jnp.shape(qi)[-1] == 2:
            return rotate_pair(qi, vi * h)
        return qi + h * vi

    return jax.tree_util.tree_map(one, q, v)


def pair_drift(n_pairs: int):
    """``drift(q, v, h)`` for relative coordinates whose first ``n_pairs`` angles are carried as
    (cos φ, sin φ) pairs q[2k:2k+2] with rates v[k] (rotated by v[k]·h, ``rotate_pair``) and
    whose remaining coordinates q[2·n_pairs:] are plain (q + h·v[n_pairs:])."""

    def drift(q, v, h):
        pairs = [rotate_pair(q[2 * k : 2 * k + 2], v[k] * h) for k in range(n_pairs)]
        lin = q[2 * n_pairs :] + h * v[n_pairs:]
        return jnp.concatenate(pairs + [lin])

    return drift


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
