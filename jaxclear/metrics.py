"""Running reductions of step outputs: peaks, impacts, motion modes, amplification factors.

Every step is folded into the accumulator (peaks are exact, not decimated from the saved
history).  Motion of a journal is classified per step (Flores & Ambrósio 2004):
free flight (no contact), impact (part of a contact episode shorter than
``continuous_contact_time``) and continuous contact (longer episodes, the journal follows
the bearing wall).

Dynamic amplification factor (seed 001, eq. for DE):  DE = (max_clearance − max_ideal) / max_ideal.
The plain ratio max_clearance / max_ideal is reported as ``ratio_*``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp


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


class Packed(NamedTuple):
    """The accumulator packed into two arrays (few scan-carry leaves are faster on CPU,
    jax#40150): f = [peak_force (J), peak_force_steady (J), peak_acc, peak_acc_steady],
    i = [impacts, contact_steps, impact_steps, continuous_steps, episode, max_regions (J each),
    steps, steady_steps, finite]."""

    f: jnp.ndarray
    i: jnp.ndarray


def init(n_joints: int, dtype=jnp.float64) -> Packed:
    i = jnp.zeros((6 * n_joints + 3,), jnp.int32).at[-1].set(1)
    return Packed(jnp.zeros((2 * n_joints + 2,), dtype), i)


def unpack(acc: Packed) -> Accumulator:
    """Packed -> Accumulator (works on batched arrays: variant axis first)."""
    J = (acc.f.shape[-1] - 2) // 2
    f, i = acc.f, acc.i
    ij = lambda k: i[..., k * J:(k + 1) * J]
    return Accumulator(f[..., :J], f[..., J:2 * J], f[..., 2 * J], f[..., 2 * J + 1],
                       ij(0), ij(1), ij(2), ij(3), ij(4), ij(5), i[..., 6 * J], i[..., 6 * J + 1],
                       i[..., 6 * J + 2] > 0)


def update(acc: Packed, force, accel, in_contact, new_impacts, n_regions, steady,
           min_continuous_steps) -> Packed:
    """Fold one step: force (J,) [N], accel scalar [m/s²], in_contact (J,) bool, new_impacts
    and n_regions (J,) ints; steady: bool, the step lies in the steady window; contact episodes
    of at least min_continuous_steps steps count as continuous contact."""
    J = force.shape[0]
    a = jnp.abs(accel)
    peaks = jnp.concatenate([force, a[None]])
    old = jnp.concatenate([acc.f[:J], acc.f[2 * J:2 * J + 1]])
    old_s = jnp.concatenate([acc.f[J:2 * J], acc.f[2 * J + 1:]])
    new = jnp.maximum(old, peaks)
    new_s = jnp.where(steady, jnp.maximum(old_s, peaks), old_s)
    f = jnp.concatenate([new[:J], new_s[:J], new[J:], new_s[J:]])
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
        i[6 * J + 2:] * finite,
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


def amplification(clearance_peak, ideal_peak):
    """DE = (max_clearance − max_ideal)/max_ideal  (seed 001)."""
    return (clearance_peak - ideal_peak) / ideal_peak


def motion_fractions(acc: Accumulator):
    """(free_flight, impact, continuous_contact) fractions of the run, per joint (leading
    variant axes allowed)."""
    n = jnp.maximum(acc.steps, 1)[..., None].astype(jnp.result_type(float))  # not int32/int32 -> f32
    free = (acc.steps[..., None] - acc.contact_steps) / n
    return free, acc.impact_steps / n, acc.continuous_steps / n
