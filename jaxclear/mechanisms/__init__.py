"""Mechanism models and their registry: ``model.mechanism`` in a spec names one of ``REGISTRY``.

``jaxclear run SPEC`` reads ``model.mechanism`` (default ``"slider_crank"``), imports the module
registered under that name (``get``) and lets it supply the physics; everything else — spec
parsing, axes and sampling, chunking, padding, device sharding, the zarr store, resume, progress,
metrics.csv/parquet, summary.json — is shared (``jaxclear.spec``, ``jaxclear.sweep``).  A new
model is one module implementing the protocol below plus one line in ``REGISTRY``.

Protocol (module-level names; "optional" ones have the default stated)
====================================================================

Spec, plain Python (read by ``jaxclear.spec`` before any JAX work; raise ``spec.SpecError``
naming the key path, its value and what is allowed):

``SPEC_TABLES: dict[str, dict]``
    The tables of this mechanism's specs with their defaults, ``{table: {key: default}}``.
    Must contain ``"model"`` whose first key is ``"mechanism": <registry name>``.  A default's
    Python type is the key's type (float: number, sweepable; int; bool; str; list).  The common
    tables ``sweep``, ``integrator``, ``outputs``, ``sampling``, ``axes`` (``spec.COMMON_TABLES``)
    are always there; a table given here with a common name replaces the common one wholesale
    (e.g. ``"integrator"`` with other default ``dt_s``/``t_end_s``, ``"outputs"`` with the
    mechanism's default ``histories``; keep every common key in it).  Other names add tables
    (the clearance-joint mechanisms add ``joint``, ``profile``, ``laws`` from ``_clearance``).
``SPEC_OPTIONAL: dict[str, dict]`` (optional, ``{}``)
    Keys accepted in a table but present in the merged spec only when given (they do not change
    the spec hash of specs written without them).
``SWEEPABLE: tuple[str, ...]``
    Tables whose float keys may be axes (``model`` at least).
``RANGES: dict[path, (lo, hi, inclusive_lo)]``, ``INT_RANGES: dict[path, (lo, hi)]`` (optional),
``UNIT_LIMITS: dict[path, (limit, ">=" | "<", hint)]`` (optional)
    Admissible ranges of this mechanism's float keys (checked for every variant), of its integer
    keys (inclusive), and likely-unit-mistake guards.  Common ``integrator.*``/``outputs.*``/
    ``sampling.*`` ranges are added by ``spec``.
``OUTPUT_CHANNELS: dict[str, str]``
    Channels ``outputs.histories`` may name, with a one-line description (unit in the name).
``validate_spec(spec) -> None`` (optional)
    Structural checks of the merged spec: string choices, cross-key rules of static keys.
``check_values(cols) -> None`` (optional)
    Cross-field physics over every variant; ``cols`` is ``{dotted path: scalar or (B,) array}``
    for every float of the ``SWEEPABLE`` tables (swept paths as columns).

Run (``jaxclear.sweep``; the only JAX in the protocol is ``params`` and ``simulate``):

``t_end(spec, cols) -> float``
    Simulated time [s] before rounding to whole steps (``cols`` as in ``check_values``; e.g.
    ``integrator.t_end_s`` when > 0, else a number of revolutions of the slowest variant).
``make_config(spec, t_end) -> Config``
    The static configuration: a frozen (hashable) dataclass, one compiled function per distinct
    value.  It must have ``dt`` [s], ``save_every``, ``n_saves``, ``n_steps`` (= product),
    ``scheme`` (``integrate.SCHEMES``) and ``outputs`` (tuple of channel names).
``params(spec, cfg, flat, dtype, t_end) -> Params``
    The params pytree of ONE variant from ``flat = {dotted path: scalar}`` (swept values may be
    tracers: ``sweep`` vmaps this over the swept paths only); floats as ``dtype``.
``check_params(spec, cfg, p, name) -> None`` (optional)
    Checks on a block of batched params (leading variant axis) before compiling, e.g.
    ``integrator.dt_s`` against the stability bound; ``name(i)`` is the text naming the block's
    i-th variant (``"variant 12 (joint.clearance_m = 0.0005)"``) to put in the SpecError.
``simulate(cfg, p) -> Result``
    Pure, one variant; ``sweep`` runs ``jit(vmap(simulate))`` per chunk.  ``Result`` is a pytree
    with a field ``history``: ``{channel: (n_saves,) or (n_saves, J)}`` for the requested
    ``cfg.outputs`` (J = ``len(joint_names(cfg))``); every other field is for ``chunk_metrics``.
``chunk_metrics(spec, cfg, p, res, n_real, t_end) -> dict[str, np.ndarray]``
    The metrics.csv columns of one chunk (batched ``p`` and ``res`` as numpy-convertible arrays
    of the padded chunk; return the first ``n_real`` rows).  SI units in the column names.  Must
    contain ``finite`` (bool): the variant stayed finite — a NaN variant is flagged, never
    raised.  Columns must be the same for every chunk of a sweep.
``joint_names(cfg) -> tuple[str, ...]``
    Labels of the trailing axis of per-joint channels (store attr ``joints``, xarray ``joint``
    coordinate); ``()`` when every channel is a scalar per saved step.
``describe(spec, cfg) -> dict`` (optional, ``{}``)
    JSON-able entries for summary.json and ``jaxclear plan`` (e.g. ``clearance_joint``,
    ``geometry``, ``n_points``).
``bytes_per_variant(cfg, precision) -> float`` (optional)
    Device bytes of one variant, for the automatic chunk size.  Default: histories twice plus
    16 kB.
``warn_float32(spec, cols) -> None`` (optional)
    Warn (``warnings.warn``) when float32 cannot resolve the model.
``plots(outdir, spec, table, summary, hists, t) -> list[str]`` (optional, no plots)
    Write PNGs under ``outdir/plots`` and return their paths relative to ``outdir``.

A mechanism without clearance joints (one body on the ground, a 1-DOF oscillator) implements
the same names: ``SPEC_TABLES`` with ``model`` (and e.g. ``contact``/``friction`` tables),
``joint_names`` returning ``()`` or its contact labels, ``chunk_metrics`` with its own columns.
``slider_crank`` and ``four_bar`` are the worked examples.
"""

from __future__ import annotations

import importlib

# name -> module path.  Imported on first use, so a broken or heavy model costs nothing to
# specs of the others.
REGISTRY = {
    "slider_crank": "jaxclear.mechanisms.slider_crank",
    "four_bar": "jaxclear.mechanisms.four_bar",
    "impact_oscillator": "jaxclear.mechanisms.impact_oscillator",
    "plate_compactor": "jaxclear.mechanisms.plate_compactor",
}


def names():
    """The registered mechanism names, in registration order."""
    return tuple(REGISTRY)


def get(name):
    """The module of mechanism ``name`` (KeyError listing the registered names otherwise)."""
    if name not in REGISTRY:
        raise KeyError(f"mechanism {name!r} is not registered; registered: {', '.join(REGISTRY)}")
    mod = REGISTRY[name]
    return importlib.import_module(mod) if isinstance(mod, str) else mod


def register(name, module):
    """Register a mechanism: a module path (imported on first use) or a module object (models
    living outside jaxclear, tests).  Specs are validated against the registry as it is then."""
    REGISTRY[name] = module
    from .. import spec
    spec.schema.cache_clear()


def float_params(cls, base: dict, overrides: dict, what: str):
    """``cls(**fields)`` from the defaults ``base`` updated by ``overrides``, every field cast
    to the default float dtype (arrays allowed); an unknown override is a TypeError naming it,
    ``what`` (e.g. "oscillator") and the known fields."""
    import jax.numpy as jnp

    unknown = set(overrides) - set(base)
    if unknown:
        raise TypeError(f"unknown {what} parameters {sorted(unknown)}; known: {', '.join(base)}")
    fields = {**base, **overrides}
    dt = jnp.result_type(float)
    return cls(**{k: jnp.asarray(v, dtype=dt) for k, v in fields.items()})

