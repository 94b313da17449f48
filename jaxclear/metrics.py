"""Running reductions of step outputs: peaks, impacts, motion modes, amplification factors.

Every step is folded into the accumulator (peaks are exact, not decimated from the saved
history).  Motion of a journal is classified per step (Flores & Ambrósio 2004):
free flight (no contact), impact (part of a contact episode shorter than
``continuous_contact_time``) and continuous contact (longer episodes, the journal follows
the bearing wall).

Dynamic amplification factor (Zheng et al., eq. for DE):  DE = (max_clearance − max_ideal) / max_ideal.
The plain ratio max_clearance / max_ideal is reported as ``ratio_*``.

Smooth peaks (for gradients, ``jaxclear.sensitivity``): the power mean over the N steps of the run

    M_p = ((1/N) Σ_i F_i^p)^(1/p),      max_i F_i · N^(−1/p) ≤ M_p ≤ max_i F_i,

accumulated relative to the running peak M_t = max_{i≤t} F_i: S_t = Σ_{i≤t} (F_i/M_t)^p, rescaled
when the peak grows, S_t = S_{t−1}·(M_{t−1}/M_t)^p + (F_t/M_t)^p, with the integer power taken by
repeated squaring of (F/M)² (no transcendental per step: a per-step logsumexp cost ~30 % of a
circular-bushing step, benchmarks/README.md).  S ∈ [1, N], so it neither overflows nor
underflows (float32 included); L = p·log M + log S = log Σ F_i^p is formed at the end.  It is
scale free: its "temperature" is relative, samples within a factor e^(1/p) of the peak share
the weight (p = ``SMOOTH_EXPONENT`` = 200: within 0.5 %).  The gradient terms through M cancel
(M_p does not depend on M), so M_p keeps the gradient of the power mean.  The exact peak is
a max: its gradient (a subgradient) follows the single argmax step and jumps when the argmax
moves to another step or impact, so it is trustworthy only where one impact clearly dominates
and the parameter change does not move the peak between steps; M_p is C¹ in the forces, hence
in the parameters wherever the trajectory is (short runs through the first impacts).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

SMOOTH_EXPONENT = 200.0  # an even integer (the sums use integer powers of squared ratios)
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
    S_force (J), S_acc] (the scaled power sums; ``unpack`` turns them into lse_*),
    i = [impacts, contact_steps, impact_steps, continuous_steps, episode, max_regions (J each),
    steps, steady_steps, finite, window_overflow_steps (J)]."""

    f: jnp.ndarray
    i: jnp.ndarray


def init(n_joints: int, dtype=jnp.float64) -> Packed:
    i = jnp.zeros((7 * n_joints + 3,), jnp.int32).at[6 * n_joints + 2].set(1)
    f = jnp.zeros((3 * n_joints + 3,), dtype)
    return Packed(f, i)


def _safe_log(x):
    """log x for x ≥ 0, floored at log 1e-30 with a zero gradient there (double where)."""
    ok = x > _TINY
    return jnp.where(ok, jnp.log(jnp.where(ok, x, 1.0)), math.log(_TINY))


def unpack(acc: Packed) -> Accumulator:
    """Packed -> Accumulator (works on batched arrays: variant axis first)."""
    J = (acc.f.shape[-1] - 3) // 3
    f, i = acc.f, acc.i
    ij = lambda k: i[..., k * J:(k + 1) * J]
    # L = log Σ F^p = p·log M + log S  (M the run peak, S the scaled sum)
    lse = lambda m, sc: SMOOTH_EXPONENT * _safe_log(m) + _safe_log(sc)
    return Accumulator(f[..., :J], f[..., J:2 * J], f[..., 2 * J], f[..., 2 * J + 1],
                       ij(0), ij(1), ij(2), ij(3), ij(4), ij(5), i[..., 6 * J], i[..., 6 * J + 1],
                       i[..., 6 * J + 2] > 0, lse(f[..., :J], f[..., 2 * J + 2:3 * J + 2]),
                       lse(f[..., 2 * J], f[..., 3 * J + 2]), i[..., 6 * J + 3:7 * J + 3])


def _ipow(x, n: int):
    """x**n for a static integer n >= 1 by repeated squaring (multiplies only)."""
    out, sq = None, x
    while n:
        if n & 1:
            out = sq if out is None else out * sq
        n >>= 1
        if n:
            sq = sq * sq
    return out


def _scaled_power_sum(s_old, m_old, m_new, x):
    """S_t = S_{t−1}·(M_{t−1}/M_t)^p + (x/M_t)^p for x ≥ 0 (see the module docstring), via
    squared ratios to the power p/2 (smooth in x at 0 too); 0 while M_t = 0."""
    h = int(SMOOTH_EXPONENT) // 2
    ok = m_new > 0
    inv = jnp.where(ok, 1.0 / jnp.where(ok, m_new * m_new, 1.0), 0.0)  # one division per channel
    shrink = (m_old * m_old) * inv
    q = (x * x) * inv
    return s_old * _ipow(shrink, h) + _ipow(q, h)


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
    # (x/M)^p through (x²/M²)^(p/2): smooth where the acceleration changes sign
    sums = _scaled_power_sum(acc.f[2 * J + 2:], old, new, jnp.concatenate([force, accel[None]]))
    f = jnp.concatenate([new[:J], new_s[:J], new[J:], new_s[J:], sums])
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
    """DE = (max_clearance − max_ideal)/max_ideal  (Zheng et al.)."""
    return (clearance_peak - ideal_peak) / ideal_peak


def motion_fractions(acc: Accumulator):
    """(free_flight, impact, continuous_contact) fractions of the run, per joint (leading
    variant axes allowed)."""
    n = jnp.maximum(acc.steps, 1)[..., None].astype(jnp.result_type(float))  # not int32/int32 -> f32
    free = (acc.steps[..., None] - acc.contact_steps).astype(n.dtype) / n
    return free, acc.impact_steps.astype(n.dtype) / n, acc.continuous_steps.astype(n.dtype) / n


def peak_vector_names(acc_name, acc_unit):
    """The names of ``peak_vector``'s entries for an acceleration channel ``acc_name`` [acc_unit]."""
    return ("peak_contact_force_N", "smooth_peak_contact_force_N", f"peak_{acc_name}{acc_unit}",
            f"smooth_peak_{acc_name}{acc_unit}", "daf_contact_force", "smooth_daf_contact_force",
            f"daf_{acc_name}", f"smooth_daf_{acc_name}")


def peak_vector(acc: Accumulator, force_reference, acc_reference):
    """The differentiable metrics of one variant (``jaxclear.study``), in the order
    peak force, smooth peak force, peak acceleration, smooth peak acceleration, then the
    amplification factors DE of each against its reference (``amplification``)."""
    pf, pa = jnp.max(acc.peak_force), acc.peak_acc
    sf = smooth_peak(acc.lse_force, acc.steps)
    sa = smooth_peak(acc.lse_acc, acc.steps)
    return jnp.stack([pf, sf, pa, sa, amplification(pf, force_reference), amplification(sf, force_reference),
                      amplification(pa, acc_reference), amplification(sa, acc_reference)])


# ----------------------------------------------------------------------------- metrics.csv columns

def peak_columns(out, what, unit, ideal_col, peak, peak_s, ideal_, ideal_s):
    """peak_<what><unit>, its steady twin, the ideal peak, DE (Flores et al. 2008) and plain ratios."""
    out[f"peak_{what}{unit}"] = peak
    out[f"peak_{what}_steady{unit}"] = peak_s
    out[ideal_col] = ideal_
    out[ideal_col.replace(unit, "_steady" + unit)] = ideal_s
    out[f"daf_{what}"] = amplification(peak, ideal_)
    out[f"daf_{what}_steady"] = amplification(peak_s, ideal_s)
    out[f"ratio_{what}"] = peak / ideal_
    out[f"ratio_{what}_steady"] = peak_s / ideal_s


def motion_columns(out, acc, names, ideal_full=None):
    """Impacts and the free-flight / impact / continuous-contact fractions (all joints together
    and, with several joints, per joint ``_<name>`` with the joint's peak force and, given the
    ideal peaks ``ideal_full``, its DE against that joint's ideal reaction)."""
    free, imp, cont = (np.asarray(x) for x in motion_fractions(acc))
    out["impacts"] = acc.impacts.sum(axis=1)
    out["free_flight_fraction"] = free.mean(axis=1)
    out["impact_fraction"] = imp.mean(axis=1)
    out["continuous_contact_fraction"] = cont.mean(axis=1)
    out["max_contact_regions"] = acc.max_regions.max(axis=1)
    if len(names) > 1 and ideal_full is not None:
        for j, nm in enumerate(names):
            out[f"peak_contact_force_{nm}_N"] = acc.peak_force[:, j]
            out[f"daf_contact_force_{nm}"] = amplification(acc.peak_force[:, j], ideal_full["reaction_" + nm])
            out[f"impacts_{nm}"] = acc.impacts[:, j]
            out[f"free_flight_fraction_{nm}"] = free[:, j]
            out[f"impact_fraction_{nm}"] = imp[:, j]
            out[f"continuous_contact_fraction_{nm}"] = cont[:, j]
    return free, imp, cont
