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
    simultaneous regions seen; steps, steady_steps: counts; finite: no NaN/inf seen;
    max_penetration: (J,) largest penetration δ [m] over the run (0 where the mechanism does not
    pass penetrations to ``update``).
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
    max_penetration: jnp.ndarray = None


class Packed(NamedTuple):
    """The accumulator packed into two arrays (few scan-carry leaves are faster on CPU,
    jax#40150): f = [peak_force (J), peak_force_steady (J), peak_acc, peak_acc_steady,
    S_force (J), S_acc, max_penetration (J)] (the scaled power sums; ``unpack`` turns them into lse_*),
    i = [impacts, contact_steps, impact_steps, continuous_steps, episode, max_regions (J each),
    steps, steady_steps, finite, window_overflow_steps (J)]."""

    f: jnp.ndarray
    i: jnp.ndarray


def init(n_joints: int, dtype=jnp.float64) -> Packed:
    i = jnp.zeros((7 * n_joints + 3,), jnp.int32).at[6 * n_joints + 2].set(1)
    f = jnp.zeros((4 * n_joints + 3,), dtype)
    return Packed(f, i)


def _safe_log(x):
    """log x for x ≥ 0, floored at log 1e-30 with a zero gradient there (double where)."""
    ok = x > _TINY
    return jnp.where(ok, jnp.log(jnp.where(ok, x, 1.0)), math.log(_TINY))


def unpack(acc: Packed) -> Accumulator:
    """Packed -> Accumulator (works on batched arrays: variant axis first)."""
    J = (acc.f.shape[-1] - 3) // 4
    f, i = acc.f, acc.i
    ij = lambda k: i[..., k * J : (k + 1) * J]
    # L = log Σ F^p = p·log M + log S  (M the run peak, S the scaled sum)
    lse = lambda m, sc: SMOOTH_EXPONENT * _safe_log(m) + _safe_log(sc)
    return Accumulator(
        f[..., :J],
        f[..., J : 2 * J],
        f[..., 2 * J],
        f[..., 2 * J + 1],
        ij(0),
        ij(1),
        ij(2),
        ij(3),
        ij(4),
        ij(5),
        i[..., 6 * J],
        i[..., 6 * J + 1],
        i[..., 6 * J + 2] > 0,
        lse(f[..., :J], f[..., 2 * J + 2 : 3 * J + 2]),
        lse(f[..., 2 * J], f[..., 3 * J + 2]),
        i[..., 6 * J + 3 : 7 * J + 3],
        f[..., 3 * J + 3 : 4 * J + 3],
    )


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


def update(
    acc: Packed,
    force,
    accel,
    in_contact,
    new_impacts,
    n_regions,
    steady,
    min_continuous_steps,
    window_overflow=None,
    penetration=None,
) -> Packed:
    """Fold one step: force (J,) [N], accel scalar [m/s²], in_contact (J,) bool, new_impacts
    and n_regions (J,) ints; steady: bool, the step lies in the steady window; contact episodes
    of at least min_continuous_steps steps count as continuous contact; window_overflow (J,)
    bool or None: the windowed detection flagged an overflow this step; penetration (J,) [m] or
    None: each joint's largest penetration δ this step (its running maximum: ``max_penetration``)."""
    J = force.shape[0]
    a = jnp.abs(accel)
    peaks = jnp.concatenate([force, a[None]])
    old = jnp.concatenate([acc.f[:J], acc.f[2 * J : 2 * J + 1]])
    old_s = jnp.concatenate([acc.f[J : 2 * J], acc.f[2 * J + 1 : 2 * J + 2]])
    new = jnp.maximum(old, peaks)
    new_s = jnp.where(steady, jnp.maximum(old_s, peaks), old_s)
    # (x/M)^p through (x²/M²)^(p/2): smooth where the acceleration changes sign
    sums = _scaled_power_sum(acc.f[2 * J + 2 : 3 * J + 3], old, new, jnp.concatenate([force, accel[None]]))
    pen = acc.f[3 * J + 3 :]
    if penetration is not None:
        pen = jnp.maximum(pen, penetration.astype(pen.dtype))
    f = jnp.concatenate([new[:J], new_s[:J], new[J:], new_s[J:], sums, pen])
    i = acc.i
    episode = i[4 * J : 5 * J]
    ended = (~in_contact) & (episode > 0)
    long_ep = episode >= min_continuous_steps
    ic = in_contact.astype(jnp.int32)
    finite = (jnp.all(jnp.isfinite(force)) & jnp.isfinite(accel)).astype(jnp.int32)
    i = jnp.concatenate(
        [
            i[0:J] + new_impacts.astype(jnp.int32),
            i[J : 2 * J] + ic,
            i[2 * J : 3 * J] + jnp.where(ended & ~long_ep, episode, 0),
            i[3 * J : 4 * J] + jnp.where(ended & long_ep, episode, 0),
            jnp.where(in_contact, episode + 1, 0),
            jnp.maximum(i[5 * J : 6 * J], n_regions.astype(jnp.int32)),
            i[6 * J : 6 * J + 1] + 1,
            i[6 * J + 1 : 6 * J + 2] + steady.astype(jnp.int32),
            i[6 * J + 2 : 6 * J + 3] * finite,
            i[6 * J + 3 :] + (0 if window_overflow is None else window_overflow.astype(jnp.int32)),
        ]
    )
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
    return (
        "peak_contact_force_N",
        "smooth_peak_contact_force_N",
        f"peak_{acc_name}{acc_unit}",
        f"smooth_peak_{acc_name}{acc_unit}",
        "daf_contact_force",
        "smooth_daf_contact_force",
        f"daf_{acc_name}",
        f"smooth_daf_{acc_name}",
    )


def peak_vector(acc: Accumulator, force_reference, acc_reference):
    """The differentiable metrics of one variant (``jaxclear.study``), in the order
    peak force, smooth peak force, peak acceleration, smooth peak acceleration, then the
    amplification factors DE of each against its reference (``amplification``)."""
    pf, pa = jnp.max(acc.peak_force), acc.peak_acc
    sf = smooth_peak(acc.lse_force, acc.steps)
    sa = smooth_peak(acc.lse_acc, acc.steps)
    return jnp.stack(
        [
            pf,
            sf,
            pa,
            sa,
            amplification(pf, force_reference),
            amplification(sf, force_reference),
            amplification(pa, acc_reference),
            amplification(sa, acc_reference),
        ]
    )


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


def motion_columns(out, acc, names, ideal_full=None, clearance=None):
    """Impacts and the free-flight / impact / continuous-contact fractions (all joints together
    and, with several joints, per joint ``_<name>`` with the joint's peak force and, given the
    ideal peaks ``ideal_full``, its DE against that joint's ideal reaction).

    Also the quality columns that ``table_warnings`` reads: ``steady_window_fraction`` (steps in
    the steady window / steps of the run; 1 when the window is the whole run, start-up included)
    and, given each variant's radial ``clearance`` [m] ((n,) or (n, J)) and an accumulator fed
    with penetrations, ``max_penetration_m`` (largest δ over the run and the joints) and
    ``max_penetration_fraction`` (largest δ/c over the joints; per joint ``_<name>`` too)."""
    free, imp, cont = (np.asarray(x) for x in motion_fractions(acc))
    steps = np.maximum(np.asarray(acc.steps), 1)
    out["steady_window_fraction"] = np.asarray(acc.steady_steps) / steps
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
    if clearance is not None and acc.max_penetration is not None:
        pen = np.asarray(acc.max_penetration)
        c = np.asarray(clearance)[: pen.shape[0]]
        c = np.broadcast_to(c[:, None] if c.ndim == 1 else c, pen.shape)
        frac = pen / c
        out["max_penetration_m"] = pen.max(axis=1)
        out["max_penetration_fraction"] = frac.max(axis=1)
        if len(names) > 1:
            for j, nm in enumerate(names):
                out[f"max_penetration_{nm}_m"] = pen[:, j]
                out[f"max_penetration_fraction_{nm}"] = frac[:, j]
    return free, imp, cont


# ----------------------------------------------------------------------------- questionable results

# A penetration above this fraction of the radial clearance is warned about: the contact laws
# (Hertz, Lankarani–Nikravesh, Flores, ...) model a small local deformation of the contact zone,
# δ ≪ the clearance that separates journal and bore; at δ = c/2 the journal centre has travelled
# 1.5·c from the bearing centre and the contact zone spans a wide arc (conformal contact), where
# those laws are an extrapolation.  (Flores et al. 2008 at c = 0.02 mm, 5000 rpm: 0.59·c.)
PENETRATION_WARN_FRACTION = 0.5
WARN_LISTED = 10  # variants named in a warning's message; the rest are counted
WARN_JSON_VARIANTS = 1000  # variant indices kept in a warning's "variants" list (all counted in "count")


def _variant_names(idx, table, axes, extra=None):
    """'3 (clearance_m = 2e-05, δ/c = 0.59)' for the first WARN_LISTED of ``idx``, then '… and N more'."""
    parts = []
    for i in idx[:WARN_LISTED]:
        vals = [f"{a} = {float(table[a][i]):.4g}" for a in axes if a in table]
        if extra is not None:
            vals.append(extra(i))
        parts.append(f"{int(i)}" + (f" ({', '.join(vals)})" if vals else ""))
    more = len(idx) - WARN_LISTED
    return "; ".join(parts) + (f"; … and {more} more" if more > 0 else "")


def _warning(code, idx, n, what, advice, table, axes, extra=None):
    idx = [int(i) for i in idx]
    return {
        "code": code,
        "count": len(idx),
        "variants": idx[:WARN_JSON_VARIANTS],
        "message": f"{what} in {len(idx)} of {n} variant{'s' if n != 1 else ''}: "
        f"{_variant_names(idx, table, axes, extra)}. {advice}",
    }


def table_warnings(table, axes=()):
    """Warnings about questionable results, from the metrics table alone (so the same for every
    mechanism whose ``chunk_metrics`` writes the columns; none where a column is missing):

    - ``non_finite``: the run produced NaN/inf (``finite`` false); its metrics are not valid.
    - ``steady_window_is_whole_run``: ``steady_window_fraction`` ≥ 1, the steady window began at
      t = 0, so every ``*_steady`` column equals its whole-run twin, start-up transient included.
    - ``deep_penetration``: ``max_penetration_fraction`` > PENETRATION_WARN_FRACTION (δ/c).

    Returns a list of {"code", "message", "variants" (indices, the first WARN_JSON_VARIANTS),
    "count" (all of them)}; the message names the first WARN_LISTED variants with their swept
    values (columns ``axes``)."""
    if not table:
        return []
    n = len(next(iter(table.values())))
    out = []
    if "finite" in table:
        bad = np.nonzero(~np.asarray(table["finite"]).astype(bool))[0]
        if len(bad):
            out.append(
                _warning(
                    "non_finite",
                    bad,
                    n,
                    "non-finite values (NaN or inf)",
                    "Their metrics are not valid; reduce integrator.dt_s.",
                    table,
                    axes,
                )
            )
    if "steady_window_fraction" in table:
        whole = np.nonzero(np.asarray(table["steady_window_fraction"], float) >= 1.0 - 1e-12)[0]
        if len(whole):
            out.append(
                _warning(
                    "steady_window_is_whole_run",
                    whole,
                    n,
                    "steady window = the whole run",
                    "Their *_steady columns equal the whole-run ones, start-up transient included (the window "
                    "would start before t = 0): lengthen the run (integrator.t_end_s or integrator.revolutions) "
                    "beyond the steady window (integrator.steady_revolutions).",
                    table,
                    axes,
                )
            )
    if "max_penetration_fraction" in table:
        frac = np.asarray(table["max_penetration_fraction"], float)
        deep = np.nonzero(frac > PENETRATION_WARN_FRACTION)[0]
        if len(deep):
            pen = table.get("max_penetration_m")
            out.append(
                _warning(
                    "deep_penetration",
                    deep,
                    n,
                    f"penetration δ above {PENETRATION_WARN_FRACTION:g}·c (c the radial clearance)",
                    "The contact laws model a small local deformation, δ ≪ c: these forces and peaks "
                    "extrapolate the law; read them as qualitative.",
                    table,
                    axes,
                    extra=lambda i: (
                        f"δ/c = {frac[i]:.3g}" + (f", δ = {float(pen[i]):.3g} m" if pen is not None else "")
                    ),
                )
            )
    return out
