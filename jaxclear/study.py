"""A study: simulate + metrics + the amplification reference of one mechanism, one definition for
``jaxclear run``, ``sensitivity``, ``identify`` and the service.

A mechanism supplies ``study(spec, cfg, t_end) -> Study``: the names of its differentiable
metrics and ``metrics(p) -> (M,)`` for one variant's params (pure, traceable, differentiable where
the trajectory is).  The reference of an amplification factor DE = (peak − reference)/reference
(Flores et al. 2008; the finite particle method papers call it the dynamic amplification) is the
mechanism's business: a closed-form ideal mechanism (slider-crank, four-bar: inverse dynamics of
the one-degree-of-freedom ideal linkage, sampled ``cfg.ideal_samples`` times, one count for the
whole sweep), or a simulated ideal twin.

``metric_function(spec, plan, keys)`` turns a study into f(θ, swept) over dotted spec keys, the
function ``sensitivity`` differentiates; ``signal_function`` the saved channel ``identify`` fits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import jax.numpy as jnp

from . import spec as specmod
from . import sweep


@dataclass(frozen=True)
class Study:
    """metrics: names (SI units in them, as the metrics.csv columns); evaluate: p -> (M,) array;
    primary: the metric a tornado plot and the elasticities show by default; reference: batched
    p -> the amplification references (``run``'s DAF columns use the same ones; None: none)."""

    metrics: tuple
    evaluate: Callable
    primary: str
    reference: Callable | None = None


def of(spec, plan_: sweep.Plan, cfg=None) -> Study:
    """The Study of a planned spec (SpecError when the mechanism has none)."""
    mech = plan_.mech
    if not hasattr(mech, "study"):
        raise specmod.SpecError(
            f"model.mechanism = {plan_.mechanism!r} has no differentiable study "
            "(jaxclear.study); sensitivity and identify need one"
        )
    return mech.study(spec, cfg or plan_.cfg, plan_.t_end)


def metric_function(spec, plan_: sweep.Plan, keys, checkpoint=False, cfg=None):
    """(study, f) with f(theta, swept, extra) -> (M,) metrics of one variant: theta the values of
    the dotted ``keys``, swept {path: value} the variant's other swept inputs, extra {path: array}
    further inputs a mechanism reads from the flat values (e.g. ``profile.points``); ``cfg``
    replaces the plan's static configuration (default: no histories, ``checkpoint`` as given)."""
    if cfg is None:
        names = {f.name for f in fields(plan_.cfg)}
        cfg = replace(plan_.cfg, outputs=(), **({"checkpoint": checkpoint} if "checkpoint" in names else {}))
    st = of(spec, plan_, cfg)
    dtype = jnp.float64 if plan_.dtype == "float64" else jnp.float32
    base = sweep.flat_values(spec)

    def f(theta, swept, extra=None):
        flat = {**base, **swept, **{k: theta[i] for i, k in enumerate(keys)}, **(extra or {})}
        return st.evaluate(sweep.params_from_flat(spec, cfg, flat, dtype))

    return st, f


def signal_function(spec, plan_: sweep.Plan, keys, signal):
    """y(θ): the saved channel ``signal`` of one variant (joint 0 of a per-joint channel) at the
    save times, as a function of the values of the dotted ``keys``."""
    if signal not in specmod.schema_of(spec).channels:
        raise specmod.SpecError(
            f"identify.signal = {signal!r}; allowed: " + ", ".join(specmod.schema_of(spec).channels)
        )
    cfg = replace(plan_.cfg, outputs=(signal,))
    dtype = jnp.float64 if plan_.dtype == "float64" else jnp.float32
    base = sweep.flat_values(spec)
    mech = plan_.mech

    def y(theta):
        flat = {**base, **{k: theta[i] for i, k in enumerate(keys)}}
        h = mech.simulate(cfg, sweep.params_from_flat(spec, cfg, flat, dtype, plan_.t_end)).history[signal]
        return h[:, 0] if h.ndim > 1 else h

    return cfg, y
