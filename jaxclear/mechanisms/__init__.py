"""Mechanism models and their registry: ``model.mechanism`` in a spec names one of them.

``jaxclear run SPEC`` reads ``model.mechanism`` (default ``"slider_crank"``), imports the module
registered under that name (``schema.REGISTRY``; ``get``, ``register``) and lets it supply the
physics; everything else — spec parsing, axes and sampling, chunking, padding, device sharding,
the zarr store, resume, progress, metrics.csv/parquet, summary.json, sensitivities and
identification (``jaxclear.study``) — is shared.  A new model is one module implementing the
protocol below plus one ``register`` call; ``docs/architecture.md`` has the shortest complete
example.

Protocol (module-level names; "optional" ones have the default stated)
====================================================================

Spec (plain Python, read by ``jaxclear.spec`` before any JAX work):

``TABLES: list[schema.Table]`` or ``tables(model: dict) -> list[schema.Table]``
    The mechanism's tables, every key declared once (``schema.Param``: default, doc, range,
    unit guard, choices, params field).  ``tables`` receives the spec's ``[model]`` as given
    (structural values only matter), for tables that depend on the spec's content.  Must
    contain ``model`` (whose ``mechanism`` key defaults to the registry name), ``integrator``
    (``spec.integrator_table``) and ``outputs`` (``spec.outputs_table``).  Every key a mechanism
    declares must be used by it: a key that does nothing is not declared, and is then refused.
``OUTPUT_CHANNELS: dict[str, str]``
    Channels ``outputs.histories`` may name, with a one-line description (unit in the name).
``validate_spec(spec)``, ``check_axis(spec, key, path)``, ``check_values(cols)`` (optional)
    Cross-key rules of static keys; of an axis; and cross-field physics over every variant
    (``cols``: {dotted path: scalar or (B,) array} of the floats of the sweepable tables).
    Raise ``spec.SpecError`` naming the key path, its value and what is allowed.

Run (``jaxclear.sweep``, ``jaxclear.study``):

``t_end(spec, cols) -> float``, ``make_config(spec, t_end) -> Config``
    Simulated time [s]; the static configuration (frozen, hashable: one compiled function per
    value) with ``dt``, ``save_every``, ``n_saves``, ``n_steps``, ``scheme``, ``outputs``.
``params(spec, cfg, flat, dtype, t_end) -> Params``
    The params pytree of ONE variant from ``flat = {dotted path: scalar}`` (swept values may be
    tracers); ``declared(table, flat, dtype)`` fills the fields its declarations name.
``check_params(spec, cfg, p, name)`` (optional)
    Checks of a block of batched params before compiling (stability bound...).
``resolve_config(spec, cfg, p, acc, offset) -> (cfg, acc)`` (optional)
    Static choices made from every variant's params (``profile.max_regions = "auto"``):
    ``sweep.plan`` folds the blocks of batched params (variants from ``offset``) through it,
    ``acc`` None at the first block, and keeps the last cfg: one compiled structure per sweep.
``simulate(cfg, p) -> Result``
    Pure, one variant; ``Result.history`` = {channel: (n_saves,) or (n_saves, J)}.
``study(spec, cfg) -> study.Study`` (optional for ``run``; needed by ``sensitivity``/``identify``)
    The differentiable metrics of one variant and the amplification reference (closed form or
    a simulated ideal twin), the one definition ``run``, ``sensitivity`` and ``identify`` share.
``chunk_metrics(spec, cfg, p, res, n_real, t_end) -> dict[str, np.ndarray]``
    The metrics.csv columns of one chunk (SI units in the names; a ``finite`` bool column).
``joint_names(cfg)``, ``describe(spec, cfg)``, ``bytes_per_variant(cfg, precision)``,
``warn_float32(spec, cols)``, ``plots(outdir, spec, table, summary, hists, t)`` (optional)
    Labels of the per-joint axis; summary.json entries; device bytes per variant; float32
    warnings; the PNGs.
"""

from __future__ import annotations

import dataclasses

from .. import schema as _schema
from ..schema import REGISTRY  # noqa: F401  (the registry itself lives with the declarations)


def names():
    """The registered mechanism names, in registration order."""
    return _schema.mechanism_names()


def get(name):
    """The module of mechanism ``name`` (KeyError listing the registered names otherwise)."""
    return _schema.mechanism_module(name)


def register(name, module):
    """Register a mechanism: a module path (imported on first use) or a module object (models
    living outside jaxclear, tests).  Specs are validated against the registry as it is then."""
    _schema.register(name, module)


def params_type(name, table, extra=(), doc=""):
    """A frozen dataclass pytree (every field a leaf) with one field per declared ``Param.field``
    of ``table`` (in declaration order) followed by ``extra`` field names: the params type is
    generated from the declarations, so a parameter is written once.  It keeps the NamedTuple
    conveniences ``_fields`` and ``_replace``."""
    import jax

    fields = [p.field for p in table.params if p.field] + list(extra)
    cls = dataclasses.make_dataclass(name, fields, frozen=True)
    cls.__doc__ = doc or f"{name}: " + ", ".join(fields)
    cls._fields = tuple(fields)
    cls._replace = lambda self, **kw: dataclasses.replace(self, **kw)
    return jax.tree_util.register_dataclass(cls, data_fields=fields, meta_fields=[])


def state_type(name, fields, optional=(), doc=""):
    """``integrate.state_type``: named coordinates (kept here for the mechanisms)."""
    from .. import integrate

    return integrate.state_type(name, fields, optional, doc)


def static_law_exponent(spec):
    """``laws.exponent`` as a Python float when it is one value for every variant and joint and
    nothing traces it: not swept, no joint's own ``joints.<name>.laws.exponent``, not a key that
    ``sensitivity`` or ``identify`` differentiates (they list theirs in the spec's private
    ``_traced``); else None.  The contact laws then compute δ^1.5 as δ·√δ
    (``laws.normal_force``'s static_exponent)."""
    from .. import spec as specmod

    flat = specmod.flat_values(spec)
    paths = [k for k in flat if k.endswith("laws.exponent")]
    if paths != ["laws.exponent"]:
        return None
    if any(p.endswith("laws.exponent") for p in specmod.axis_paths(spec)):
        return None
    if any(str(k).endswith("laws.exponent") for k in spec.get("_traced", ())):
        return None
    return float(flat["laws.exponent"])


def declared(table, flat, dtype):
    """{field: value in SI} for every ``Param`` of ``table`` that names a params field, read from
    ``flat`` = {dotted path: value} (value × ``Param.scale``, e.g. rpm → rad/s); an optional key
    absent from ``flat`` (the spec did not give it) takes its declared default."""
    import jax.numpy as jnp

    out = {}
    for p in table.params:
        if p.field:
            path = f"{table.path}.{p.key}"
            x = jnp.asarray(flat[path] if path in flat or not p.optional else p.default, dtype)
            out[p.field] = x * p.scale if p.scale != 1.0 else x
    return out


def defaults(table):
    """{dotted path: default} of a table's keys (for building params outside a spec)."""
    return {f"{table.path}.{p.key}": p.default for p in table.params}


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
