"""Running reductions of step outputs: peaks, impacts, motion modes, amplification factors.

Every step is folded into the accumulator (peaks are exact, not decimated from the saved
history).  Motion of a journal is classified per step (Flores & Ambrósio 2004):
free flight (no contact), impact (part of a contact episode shorter than
``continuous_contact_time``) and continuous contact (longer episodes, the journal follows
the bearing wall).

Dynamic amplification factor (seed 001, eq. for DE):  DE = (max_clearance − max_ideal) / max_ideal.
The plain ratio max_clearance / max_ideal is reported as ``ratio_*``.

Smooth peaks (for gradients, ``jaxclear.sensitivity``): the power mean over the N steps of the run

    M_p = ((1/N) Σ_i F_i^p)^(1/p),      max_i F_i · N^(−1/p) ≤ M_p ≤ max_i F_i,

accumulated in the log domain, L = logsumexp_i(p·log F_i), so it never overflows (float32
included) and is scale free: its "temperature" is relative, samples within a factor e^(1/p)
of the peak share the weight (p = ``SMOOTH_EXPONENT`` = 200: within 0.5 %).  The exact peak is
a max: its gradient (a subgradient) follows the single argmax step and jumps when the argmax
moves to another step or impact, so it is trustworthy only where one impact clearly dominates
and the parameter change does not move the peak between steps; M_p is C¹ in the forces, hence
in the parameters wherever the trajectory is (short runs through the first impacts).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp

SMOOTH_EXPONENT = 200.0
_TINY = 1e-30  # log floor of a zero force/acceleration (p·log 1e-30 ≈ −1.4e4: weight 0)


class Accumulator(NamedTuple):
    """Running metrics for one variant (J = number of clearance joints).

    peak_force, peak_force_steady: (J,) max |F_contact| [N] over the run / the steady window;
    peak_acc, peak_acc_steady: max |output acceleration| [m/s²];
    impacts: (J,) contact onsets; contact_steps, impact_steps, continuous_steps: (J,) step
    counts; episode: (J,) length of the open contact episode; max_regions: (J,) most
    simultaneous regions seen; steps, steady_steps: counts; finite: no NaN/inf seen.
    """

    peak_force: jnp.ndarray
    peak_force_steady: jnp.ndarray
    peak_acc: jnp.ndarray
    peak_acc_steady: jnp.ndarray
    impacts: jnp.ndarray
    contact_steps: jnp.ndarray
    impact_steps: jnp.ndarray
    continuous_steps: jnp.ndarray
    episode: jnp.ndarray
    max_regions: jnp.ndarray
    steps: jnp.ndarray
    steady_steps: jnp.ndarray
    finite: jnp.ndarray
    lse_force: jnp.ndarray
    lse_acc: jnp.ndarray
    window_overflow_steps: jnp.ndarray = None


class Packed(NamedTuple):
    """The accumulator packed into two arrays (few scan-carry leaves are faster on CPU,
    jax#40150): f = [peak_force (J), peak_force_steady (J), peak_acc, peak_acc_steady,
    lse_force (J), lse_acc],
    i = [impacts, contact_steps, impact_steps, continuous_steps, episode, max_regions (J each),
    steps, steady_steps, finite, window_overflow_steps (J)]."""

    f: jnp.ndarray
    i: jnp.ndarray


def init(n_joints: int, dtype=jnp.float64) -> Packed:
    i = jnp.zeros((7 * n_joints + 3,), jnp.int32).at[6 * n_joints + 2].set(1)
    f = jnp.zeros((3 * n_joints + 3,), dtype).at[2 * n_joints + 2:].set(SMOOTH_EXPONENT * _log_floor(dtype))
    return Packed(f, i)


def _log_floor(dtype=None):
    return math.log(_TINY)


def _safe_log(x):
    """log x for x ≥ 0, floored at log 1e-30 with a zero gradient there (double where)."""
    ok = x > _TINY
    return jnp.where(ok, jnp.log(jnp.where(ok, x, 1.0)), _log_floor(x.dtype))


def unpack(acc: Packed) -> Accumulator:
    """Packed -> Accumulator (works on batched arrays: variant axis first)."""
    J = (acc.f.shape[-1] - 3) // 3
    f, i = acc.f, acc.i
    ij = lambda k: i[..., k * J:(k + 1) * J]
    return Accumulator(f[..., :J], f[..., J:2 * J], f[..., 2 * J], f[..., 2 * J + 1],
                       ij(0), ij(1), ij(2), ij(3), ij(4), ij(5), i[..., 6 * J], i[..., 6 * J + 1],
                       i[..., 6 * J + 2] > 0, f[..., 2 * J + 2:3 * J + 2], f[..., 3 * J + 2],
                       i[..., 6 * J + 3:7 * J + 3])


def update(acc: Packed, force, accel, in_contact, new_impacts, n_regions, steady,
           min_continuous_steps, window_overflow=None) -> Packed:
    """Fold one step: force (J,) [N], accel scalar [m/s²], in_contact (J,) bool, new_impacts
    and n_regions (J,) ints; steady: bool, the step lies in the steady window; contact episodes
    of at least min_continuous_steps steps count as continuous contact; window_overflow (J,)
    bool or None: the windowed detection flagged an overflow this step."""
    J = force.shape[0]
    a = jnp.abs(accel)
    peaks = jnp.concatenate([force, a[None]])
    old = jnp.concatenate([acc.f[:J], acc.f[2 * J:2 * J + 1]])
    old_s = jnp.concatenate([acc.f[J:2 * J], acc.f[2 * J + 1:2 * J + 2]])
    new = jnp.maximum(old, peaks)
    new_s = jnp.where(steady, jnp.maximum(old_s, peaks), old_s)
    # log|a| = ½ log a² keeps the smooth peak differentiable where a changes sign.
    logs = jnp.concatenate([_safe_log(force), 0.5 * _safe_log(accel * accel)[None]])
    lse = jnp.logaddexp(acc.f[2 * J + 2:], SMOOTH_EXPONENT * logs)
    f = jnp.concatenate([new[:J], new_s[:J], new[J:], new_s[J:], lse])
    i = acc.i
    episode = i[4 * J:5 * J]
    ended = (~in_contact) & (episode > 0)
    long_ep = episode >= min_continuous_steps
    ic = in_contact.astype(jnp.int32)
    finite = (jnp.all(jnp.isfinite(force)) & jnp.isfinite(accel)).astype(jnp.int32)
    i = jnp.concatenate([
        i[0:J] + new_impacts.astype(jnp.int32),
        i[J:2 * J] + ic,
        i[2 * J:3 * J] + jnp.where(ended & ~long_ep, episode, 0),
        i[3 * J:4 * J] + jnp.where(ended & long_ep, episode, 0),
        jnp.where(in_contact, episode + 1, 0),
        jnp.maximum(i[5 * J:6 * J], n_regions.astype(jnp.int32)),
        i[6 * J:6 * J + 1] + 1,
        i[6 * J + 1:6 * J + 2] + steady.astype(jnp.int32),
        i[6 * J + 2:6 * J + 3] * finite,
        i[6 * J + 3:] + (0 if window_overflow is None else window_overflow.astype(jnp.int32)),
    ])
    return Packed(f, i)


def finalize(acc: Packed, min_continuous_steps) -> Accumulator:
    """Close the contact episode still open at the end of the run; return the Accumulator."""
    u = unpack(acc)
    long_ep = u.episode >= min_continuous_steps
    return u._replace(
        impact_steps=u.impact_steps + jnp.where(long_ep, 0, u.episode),
        continuous_steps=u.continuous_steps + jnp.where(long_ep, u.episode, 0),
        episode=jnp.zeros_like(u.episode),
    )


def smooth_peak(lse, steps, p=SMOOTH_EXPONENT):
    """M_p = exp((L − log N)/p) from the accumulated L = logsumexp(p·log F) over N steps;
    ``lse`` (..., J) over several joints is pooled (smooth max over joints and time)."""
    import jax.scipy.special as jss
    lse = jnp.asarray(lse)
    n = jnp.asarray(steps, lse.dtype)
    if lse.ndim > n.ndim:
        n = n * lse.shape[-1]
        lse = jss.logsumexp(lse, axis=-1)
    return jnp.exp((lse - jnp.log(jnp.maximum(n, 1))) / p)


def amplification(clearance_peak, ideal_peak):
    """DE = (max_clearance − max_ideal)/max_ideal  (seed 001)."""
    return (clearance_peak - ideal_peak) / ideal_peak


def motion_fractions(acc: Accumulator):
    """(free_flight, impact, continuous_contact) fractions of the run, per joint (leading
    variant axes allowed)."""
    n = jnp.maximum(acc.steps, 1)[..., None].astype(jnp.result_type(float))  # not int32/int32 -> f32
    free = (acc.steps[..., None] - acc.contact_steps) / n
    return free, acc.impact_steps / n, acc.continuous_steps / n
