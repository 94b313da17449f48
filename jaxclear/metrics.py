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


def init(n_joints: int, dtype=jnp.float64) -> Accumulator:
    zf = jnp.zeros((n_joints,), dtype)
    zi = jnp.zeros((n_joints,), jnp.int32)
    z = jnp.zeros((), dtype)
    return Accumulator(zf, zf, z, z, zi, zi, zi, zi, zi, zi, jnp.zeros((), jnp.int32),
                       jnp.zeros((), jnp.int32), jnp.ones((), bool))


def update(acc: Accumulator, force, accel, in_contact, new_impacts, n_regions, steady,
           min_continuous_steps) -> Accumulator:
    """Fold one step: force (J,) [N], accel scalar [m/s²], in_contact (J,) bool, ...

    steady: bool, the step lies in the steady window; min_continuous_steps: episodes of at
    least this many steps count as continuous contact.
    """
    a = jnp.abs(accel)
    ended = (~in_contact) & (acc.episode > 0)
    long_ep = acc.episode >= min_continuous_steps
    finite = acc.finite & jnp.all(jnp.isfinite(force)) & jnp.isfinite(accel)
    return Accumulator(
        peak_force=jnp.maximum(acc.peak_force, force),
        peak_force_steady=jnp.where(steady, jnp.maximum(acc.peak_force_steady, force), acc.peak_force_steady),
        peak_acc=jnp.maximum(acc.peak_acc, a),
        peak_acc_steady=jnp.where(steady, jnp.maximum(acc.peak_acc_steady, a), acc.peak_acc_steady),
        impacts=acc.impacts + new_impacts.astype(jnp.int32),
        contact_steps=acc.contact_steps + in_contact.astype(jnp.int32),
        impact_steps=acc.impact_steps + jnp.where(ended & ~long_ep, acc.episode, 0),
        continuous_steps=acc.continuous_steps + jnp.where(ended & long_ep, acc.episode, 0),
        episode=jnp.where(in_contact, acc.episode + 1, 0),
        max_regions=jnp.maximum(acc.max_regions, n_regions.astype(jnp.int32)),
        steps=acc.steps + 1,
        steady_steps=acc.steady_steps + steady.astype(jnp.int32),
        finite=finite,
    )


def finalize(acc: Accumulator, min_continuous_steps) -> Accumulator:
    """Close the contact episode still open at the end of the run."""
    long_ep = acc.episode >= min_continuous_steps
    return acc._replace(
        impact_steps=acc.impact_steps + jnp.where(long_ep, 0, acc.episode),
        continuous_steps=acc.continuous_steps + jnp.where(long_ep, acc.episode, 0),
        episode=jnp.zeros_like(acc.episode),
    )


def amplification(clearance_peak, ideal_peak):
    """DE = (max_clearance − max_ideal)/max_ideal  (seed 001)."""
    return (clearance_peak - ideal_peak) / ideal_peak


def motion_fractions(acc: Accumulator):
    """(free_flight, impact, continuous_contact) fractions of the run, per joint."""
    n = jnp.maximum(acc.steps, 1)
    free = (acc.steps - acc.contact_steps) / n
    return free, acc.impact_steps / n, acc.continuous_steps / n
