"""Sweep specs (TOML): tables and defaults from the mechanism's declarations, validation,
``--set`` overrides and variant axes.

A spec has the common tables ``sweep``, ``integrator``, ``outputs``, ``sampling``, ``axes`` and
the tables of its mechanism (``model.mechanism``, default ``"slider_crank"``).  Every key is
declared once (``jaxclear.schema.Param``: default, type, range, unit guard, doc); the mechanism
returns its tables from the spec's own content (``tables(model)``), so tables may depend on what
the spec declares (one table per named clearance joint).  Every key has a dotted path of any
depth (``joint.clearance_m``, ``joints.crank_rod.laws.restitution``); the same paths are used by
``--set``, as axis names and in error messages.  Float keys of sweepable tables may be swept;
structural keys (strings, integers, booleans, lists) are static: one compiled function per
structure.  A deprecated key (``Param.aliases``) is still read, with a warning naming its new key.

Axes: grids ``{ linspace = [lo, hi, n] }``, ``{ logspace = [lo, hi, n] }`` (lo, hi in the key's
unit), ``{ values = [...] }`` form a Cartesian product in the order written; grid axes with the
same ``zip = "group"`` attribute vary together (same length) and count as one factor of the
product.  Random axes ``{ uniform = [lo, hi] }`` / ``{ loguniform = [lo, hi] }`` /
``{ normal = [mean, std] }`` are drawn together (zipped) with ``[sampling] n, seed, method``
(``"random"``: independent draws; ``"lhs"``: Latin hypercube) and crossed with the grid.

This module knows no mechanism: it reads the declarations through ``schema.mechanism_module``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import math
import statistics
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import schema as sch_
from .schema import Param, Table
from .schema import did_you_mean as _did_you_mean

DEFAULT_MECHANISM = "slider_crank"
# Tables of an identification spec (``jaxclear identify``): present only when given.
EXTRA_TABLES = ("identify", "truth", "measurement")
GRID_KINDS = ("linspace", "logspace", "values")
RANDOM_KINDS = ("uniform", "loguniform", "normal")
AXIS_KINDS = GRID_KINDS + RANDOM_KINDS
SAMPLING_METHODS = ("random", "lhs")
PRECISIONS = ("float64", "float32")
# Most variants one sweep may have unless raised: ``jaxclear run --max-variants`` and the sweep
# service's ``Limits.max_variants`` (``jaxclear serve --max-variants``).
MAX_VARIANTS = 100_000
# The example specs shipped with the package (``jaxclear examples``; sweeps/ in the repository).
EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
_AXIS_FORMS = (
    '{linspace=[lo,hi,n]}, {logspace=[lo,hi,n]}, {values=[...]} (each optionally with zip="group"), '
    "{uniform=[lo,hi]}, {loguniform=[lo,hi]}, {normal=[mean,std]}"
)


class SpecError(ValueError):
    """A spec problem, naming the key path, the offending value and what is allowed."""


def _channel_list(path, value):
    if not isinstance(value, list):
        return "expected a list"
    if not all(isinstance(x, str) for x in value):
        return "expected a list of channel names (strings)"
    return None


# ---------------------------------------------------------------------------- common tables

SWEEP = Table(
    "sweep",
    (
        Param("name", "sweep", "name of the sweep (default output folder runs/<name>)"),
        Param("description", "", "one line shown by plan/show and the service"),
    ),
    doc="identity",
    sweepable=False,
)
SAMPLING = Table(
    "sampling",
    (
        Param("n", 0, "samples of the random axes (uniform, loguniform, normal)", range=(0, 10**8)),
        Param("seed", 0, "seed of the random axes", range=(0, 2**63 - 1)),
        Param(
            "method",
            "random",
            "'random': independent draws; 'lhs': Latin hypercube",
            choices=SAMPLING_METHODS,
            optional=True,
        ),
    ),
    doc="random axes",
    sweepable=False,
)


def integrator_table(schemes, scheme, dt_s=1e-6, t_end_s=0.0, save_every=100, extra=()) -> Table:
    """The ``[integrator]`` table: the keys every fixed-step mechanism has, with its defaults and
    scheme choices, plus the mechanism's ``extra`` keys."""
    return Table(
        "integrator",
        (
            Param("scheme", scheme, "explicit fixed-step scheme", choices=tuple(schemes)),
            Param("dt_s", dt_s, "time step", range=(0.0, 1e-2, False)),
            Param("t_end_s", t_end_s, "simulated time (0: from the mechanism's own rule)", range=(0.0, math.inf, True)),
            Param("save_every", save_every, "save histories every N steps (peaks see every step)", range=(1, 10**9)),
            Param("precision", "float64", "floating-point precision", choices=PRECISIONS),
            Param("chunk_size", 0, "variants per compiled batch (0: automatic from memory)", range=(0, 10**7)),
        )
        + tuple(extra),
        doc="time integration",
        sweepable=False,
    )


def outputs_table(channels, histories, plot_variants=4, plots=True) -> Table:
    """The ``[outputs]`` table: saved channels (from ``channels``), plotted variants, plots."""
    return Table(
        "outputs",
        (
            Param(
                "histories",
                list(histories),
                "channels saved every save_every steps: " + ", ".join(channels),
                check=_channel_list,
            ),
            Param("plot_variants", plot_variants, "variants drawn in the history plots", range=(0, 10**6)),
            Param("plots", plots, "write the PNG plots"),
        ),
        doc="saved histories and plots",
        sweepable=False,
    )


# ---------------------------------------------------------------------------- schema


@dataclass
class Schema:
    """What the specs of one mechanism (with this structure) may contain: ordered tables of
    declared keys; derived views (defaults, ranges, guards) for the validation."""

    mechanism: str
    module: object
    decl: dict  # table path -> schema.Table, in spec order
    channels: dict

    def __post_init__(self):
        self.params = {f"{t.path}.{p.key}": p for t in self.decl.values() for p in t.params}
        self.tables = {}
        for path, t in self.decl.items():  # nested paths (points.B) as nested tables
            if not t.optional:
                for p in t.params:
                    if not p.optional:
                        _set(self.tables, f"{path}.{p.key}", copy.deepcopy(p.default))
                if get_table(self.tables, path) is None:  # a table of optional keys only
                    _set(self.tables, path, {})
        self.tables["axes"] = {}
        self.optional = {
            path: {p.key: p.default for p in t.params if p.optional or t.optional} for path, t in self.decl.items()
        }
        self.sweepable = tuple(path for path, t in self.decl.items() if t.sweepable)
        self.ranges = {k: p.range for k, p in self.params.items() if p.range and p.kind == "float"}
        self.int_ranges = {k: p.range for k, p in self.params.items() if p.range and p.kind == "int"}
        self.unit_limits = {k: p.guard for k, p in self.params.items() if p.guard}
        self.aliases = {}
        for k, p in self.params.items():
            for a in p.aliases:
                path, factor = (a, 1.0) if isinstance(a, str) else a
                self.aliases[path] = (k, factor)

    def allowed(self, sec):
        return {p.key: p.default for p in self.decl[sec].params}

    def floats(self):
        """Dotted paths of the sweepable float keys."""
        return [k for k, p in self.params.items() if p.kind == "float" and self.decl[k.rsplit(".", 1)[0]].sweepable]


def mechanism_tables(mod, model: dict):
    """The declared tables of mechanism module ``mod`` for a spec whose ``[model]`` is ``model``."""
    return list(mod.tables(model)) if callable(getattr(mod, "tables", None)) else list(mod.TABLES)


@functools.lru_cache(maxsize=256)
def _schema(mechanism, structure):
    mod = sch_.mechanism_module(mechanism)
    model = dict(json.loads(structure))
    own = mechanism_tables(mod, model)
    by_path = {t.path: t for t in own}
    order = (
        ["sweep", "model"]
        + [t.path for t in own if t.path not in ("sweep", "model", "integrator", "outputs")]
        + ["integrator", "outputs", "sampling"]
    )
    common = {"sweep": SWEEP, "sampling": SAMPLING}
    decl = {}
    for path in order:
        t = by_path.get(path, common.get(path))
        if t is None:
            raise TypeError(f"mechanism {mechanism!r} declares no [{path}] table")
        decl[path] = t
    channels = mod.output_channels(model) if callable(getattr(mod, "output_channels", None)) else mod.OUTPUT_CHANNELS
    return Schema(mechanism=mechanism, module=mod, decl=decl, channels=dict(channels))


def _skeleton(d):
    """The structural (non-float) values of a table, nested tables as their own skeletons."""
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out[k] = _skeleton(v)
        elif isinstance(v, (str, bool, int, list)) and not isinstance(v, float):
            out[k] = v
    return out


def _structure(model):
    """The structural values of ``[model]`` (and of the mechanism's ``STRUCTURE`` tables, folded
    into it by ``schema``): what may change a mechanism's tables."""
    return json.dumps(_skeleton(model), sort_keys=True, default=str)


def structure_tables(mechanism, spec):
    """{table: skeleton} of the top-level tables mechanism ``mechanism`` builds its schema from
    (its ``STRUCTURE``, e.g. a linkage's points, links and joints), read from a raw or merged spec."""
    mod = sch_.mechanism_module(mechanism) if mechanism in sch_.mechanism_names() else None
    return {t: _skeleton(spec.get(t)) for t in getattr(mod, "STRUCTURE", ()) if isinstance(spec.get(t), dict)}


def schema(mechanism=DEFAULT_MECHANISM, model=None, structure=None) -> Schema:
    """The Schema of a registered mechanism (SpecError naming model.mechanism otherwise);
    ``structure``: ``structure_tables`` of the spec, for mechanisms whose tables follow them."""
    check_choice("model.mechanism", mechanism, sch_.mechanism_names())
    return _schema(mechanism, _structure({**(model or {}), **(structure or {})}))


schema.cache_clear = _schema.cache_clear
sch_._listeners.append(_schema.cache_clear)


def schema_of(spec) -> Schema:
    mech = spec["model"]["mechanism"]
    return schema(mech, spec["model"], structure_tables(mech, spec))


def check_choice(path, val, allowed):
    """SpecError unless ``val`` is one of ``allowed`` (naming the path and the choices)."""
    if val not in allowed:
        raise SpecError(f"{path} = {val!r}{_did_you_mean(val, allowed)}; allowed: {', '.join(allowed)}")


# ---------------------------------------------------------------------------- nested paths


def get_table(spec, path):
    """The dict of table ``path`` (dotted, any depth) in a (merged or raw) spec, or None."""
    d = spec
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def _set(d, path, value):
    parts = path.split(".")
    for part in parts[:-1]:
        nxt = d.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise SpecError(f"{path}: {part!r} is a value ({nxt!r}), not a table")
        d = nxt
    d[parts[-1]] = value


# ---------------------------------------------------------------------------- load, merge


def load_raw(path_or_dict, overrides=()):
    """(raw spec with the ``key=value`` overrides applied, base folder): the TOML file (path) or
    dict as written, before defaults and checks (``count_variants`` reads it)."""
    base_dir = Path(".")
    if isinstance(path_or_dict, (str, Path)):
        p = Path(path_or_dict)
        if not p.exists():
            raise SpecError(f"spec file {str(p)!r} does not exist")
        try:
            raw = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise SpecError(f"spec file {str(p)!r} is not valid TOML: {e}") from None
        base_dir = p.resolve().parent
    else:
        raw = copy.deepcopy(dict(path_or_dict))
    for ov in overrides:
        apply_override(raw, ov)
    return raw, base_dir


def load(path_or_dict, overrides=()):
    """Read a TOML spec (path) or dict, apply ``key=value`` overrides, merge defaults, validate."""
    raw, base_dir = load_raw(path_or_dict, overrides)
    spec = merge_defaults(raw)
    spec["_base_dir"] = str(base_dir)
    validate(spec)
    check_overrides(spec, overrides)
    return spec


def variant_factors(raw):
    """[(axis key or zip group or ``sampling.n``, count), ...] whose product is the number of
    variants of a raw spec (``load_raw``), from the axis arguments alone: nothing is expanded, so
    an axis of 10⁷ values is counted at once.  Grid axes multiply (a zip group counts once, as
    its longest member), random axes together add the factor ``sampling.n``.  None when the axes
    are malformed (``load`` then names the problem)."""
    axes = raw.get("axes", {})
    if not isinstance(axes, dict):
        return None
    out, groups, random = [], {}, False
    for key, ax in axes.items():
        if not isinstance(ax, dict):
            return None
        kinds = [k for k in ax if k != "zip"]
        if len(kinds) != 1:
            return None
        arg = ax[kinds[0]]
        if kinds[0] in ("linspace", "logspace"):
            if not (isinstance(arg, list) and len(arg) == 3 and isinstance(arg[2], int)):
                return None
            m = arg[2]
        elif kinds[0] == "values":
            if not isinstance(arg, list):
                return None
            m = len(arg)
        else:
            random = True
            continue
        m = max(int(m), 1)
        grp = ax.get("zip")
        if isinstance(grp, str):
            if grp in groups:
                i = groups[grp]
                out[i] = (out[i][0], max(out[i][1], m))
                continue
            groups[grp] = len(out)
            out.append((f"zip group {grp!r}", m))
        else:
            out.append((f"axes.{key}", m))
    if random:
        sam = raw.get("sampling")
        sn = sam.get("n", 0) if isinstance(sam, dict) else 0
        if not isinstance(sn, int) or isinstance(sn, bool):
            return None
        out.append(("sampling.n", max(sn, 1)))
    return out


def count_variants(raw):
    """Variants of a raw spec from its axis arguments (``variant_factors``), None when malformed."""
    f = variant_factors(raw)
    return None if f is None else math.prod(m for _, m in f)


def examples() -> dict:
    """{name: one-line description} of the example specs shipped with jaxclear (``EXAMPLES_DIR``):
    ``sweep.description``, else the start of the file's header comment (100 characters at most)."""
    out = {}
    for f in sorted(EXAMPLES_DIR.glob("*.toml")):
        text = f.read_text()
        try:
            desc = (tomllib.loads(text).get("sweep") or {}).get("description", "")
        except tomllib.TOMLDecodeError:
            desc = ""
        if not desc:
            head = []
            for ln in text.splitlines():
                if not ln.startswith("#"):
                    break
                head.append(ln.lstrip("#"))
            desc = " ".join(" ".join(head).split())
            if len(desc) > 100:
                desc = desc[:99].rsplit(" ", 1)[0].rstrip(",;:") + " …"
        out[f.stem] = " ".join(str(desc).split())
    return out


def spec_file(arg=None) -> Path:
    """The spec file a command names.  ``arg`` is a path when that file exists; otherwise a bare
    name (``default``, ``flores_slider_crank.toml``) or ``sweeps/NAME.toml`` is the shipped
    example of that name, so the commands of the README work from any folder.  No ``arg``:
    ./sweeps/default.toml when it exists, else the shipped ``default``.  SpecError otherwise."""
    if arg is None:
        local = Path("sweeps") / "default.toml"
        return local if local.is_file() else EXAMPLES_DIR / "default.toml"
    p = Path(arg)
    if p.is_file():
        return p
    name = p.name[: -len(".toml")] if p.name.endswith(".toml") else p.name
    shipped = EXAMPLES_DIR / f"{name}.toml"
    if p.parent in (Path("."), Path("sweeps")) and shipped.is_file() and not p.is_dir():
        return shipped
    names = sorted(f.stem for f in EXAMPLES_DIR.glob("*.toml"))
    raise SpecError(
        f"spec file {str(arg)!r} does not exist, nor is {name!r} the name of an example spec "
        f"({', '.join(names)}; jaxclear examples lists them)"
    )


def check_overrides(spec, overrides):
    """Refuse a ``--set`` of a key that is also an axis of the spec: the axis values would win and
    the override would be ignored without a word."""
    if not overrides or not spec.get("axes"):
        return
    sch = schema_of(spec)
    axes = axis_paths(spec)
    for ov in overrides:
        key = ov.split("=", 1)[0].strip()
        key = sch.aliases.get(key, (key, 1.0))[0]
        if key in axes:
            raise SpecError(
                f"--set {key}: {key} is an axis of this spec (axes.{axes[key]}), whose values would "
                f"replace the override; remove the axis (or set its values) to fix {key}"
            )


def apply_override(raw, text):
    """Apply one ``table.key=value`` (tables of any depth; value parsed as TOML, else a string)."""
    if "=" not in text:
        raise SpecError(f"--set {text!r}: expected key=value, e.g. joint.clearance_m=2.5e-4")
    key, val = text.split("=", 1)
    key = key.strip()
    try:
        value = tomllib.loads(f"v = {val.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = val.strip()
    parts = key.split(".")
    if len(parts) < 2 or not all(parts):
        raise SpecError(f"--set {key!r}: expected table.key, e.g. joint.clearance_m")
    _set(raw, key, value)


def _mechanism_of(raw):
    model = raw.get("model", {})
    mech = model.get("mechanism", DEFAULT_MECHANISM) if isinstance(model, dict) else DEFAULT_MECHANISM
    if not isinstance(mech, str):
        raise SpecError(f"model.mechanism = {mech!r}: expected a string")
    return mech, (model if isinstance(model, dict) else {})


def _apply_aliases(raw, sch):
    """Move deprecated keys to their new paths (scaled), with a warning naming the new key."""
    for old, (new, factor) in sch.aliases.items():
        tbl, key = old.rsplit(".", 1)
        d = get_table(raw, tbl)
        if not isinstance(d, dict) or key not in d:
            continue
        val = d.pop(key)
        if not d and tbl != "model":
            _drop_empty(raw, tbl)
        if get_table(raw, new.rsplit(".", 1)[0]) is not None and new.rsplit(".", 1)[1] in get_table(
            raw, new.rsplit(".", 1)[0]
        ):
            raise SpecError(f"{old} and {new} are both given: {old} is the deprecated name of {new}; keep {new}")
        warnings.warn(
            f"{old} is deprecated: use {new}" + (f" (= {old} × {factor:.12g})" if factor != 1.0 else ""),
            FutureWarning,
            stacklevel=4,
        )
        if factor != 1.0 and isinstance(val, (int, float)) and not isinstance(val, bool):
            val = val * factor
        _set(raw, new, val)
    axes = raw.get("axes")
    if isinstance(axes, dict):
        for key in list(axes):
            if key in sch.aliases:
                new, factor = sch.aliases[key]
                warnings.warn(f"axes.{key}: {key} is deprecated: use {new}", FutureWarning, stacklevel=4)
                ax = axes.pop(key)
                axes[new] = _scaled_axis(ax, factor)


def _drop_empty(raw, path):
    parts = path.split(".")
    parent = get_table(raw, ".".join(parts[:-1])) if len(parts) > 1 else raw
    if isinstance(parent, dict) and parent.get(parts[-1]) == {}:
        del parent[parts[-1]]


def _scaled_axis(ax, factor):
    if factor == 1.0 or not isinstance(ax, dict):
        return ax
    out = dict(ax)
    for kind, arg in ax.items():
        if kind in ("linspace", "logspace") and isinstance(arg, list) and len(arg) == 3:
            out[kind] = [arg[0] * factor, arg[1] * factor, arg[2]]
        elif kind in ("values", "uniform", "loguniform", "normal") and isinstance(arg, list):
            out[kind] = [x * factor if _is_num(x) else x for x in arg]
    return out


def merge_defaults(raw):
    """The mechanism's declared defaults (``model.mechanism``, default slider_crank) overlaid by
    ``raw``; an unknown table or key is a SpecError naming it (with the closest allowed name)."""
    mech, model = _mechanism_of(raw)
    sch = schema(mech, model, structure_tables(mech, raw))
    if sch.aliases:
        raw = copy.deepcopy(raw)
        _apply_aliases(raw, sch)
        sch = schema(mech, raw.get("model", {}), structure_tables(mech, raw))
    spec = copy.deepcopy(sch.tables)
    prefixes = {".".join(p.split(".")[:i]) for p in sch.decl for i in range(1, p.count(".") + 1)}
    suffix = f" (model.mechanism = {mech!r})" if mech != DEFAULT_MECHANISM else ""

    def walk(d, path):
        for k, v in d.items():
            full = f"{path}.{k}" if path else k
            if not path and (k.startswith("_")):
                continue
            if not path and k in EXTRA_TABLES:  # checked by the command that reads them (identify)
                if not isinstance(v, dict):
                    raise SpecError(f"[{k}] must be a table, got {v!r}")
                spec[k] = copy.deepcopy(dict(v))
                continue
            if not path and k == "axes":
                if not isinstance(v, dict):
                    raise SpecError(f"[axes] must be a table, got {v!r}")
                spec["axes"] = dict(v)
                continue
            if full in sch.decl:
                if not isinstance(v, dict):
                    raise SpecError(f"[{full}] must be a table, got {v!r}")
                keys = sch.decl[full].keys()
                for kk, vv in v.items():
                    sub = f"{full}.{kk}"
                    if kk in keys:
                        _set(spec, sub, vv)
                    elif sub in sch.decl or sub in prefixes:
                        walk({kk: vv}, full)
                    elif kk in dict(sch.decl[full].retired):
                        raise SpecError(
                            f"{sub} is not a key of model.mechanism = {mech!r} any more: "
                            f"{dict(sch.decl[full].retired)[kk]}; remove it"
                        )
                    else:
                        raise SpecError(
                            f"unknown key {sub}{_did_you_mean(kk, keys)}"
                            + (f"; allowed: {', '.join(keys)}" if len(keys) <= 12 else "")
                            + suffix
                        )
            elif full in prefixes:
                if not isinstance(v, dict):
                    raise SpecError(f"[{full}] must be a table, got {v!r}")
                walk(v, full)
            else:
                if path:
                    here = sorted({p[len(path) + 1 :].split(".")[0] for p in sch.decl if p.startswith(path + ".")})
                else:
                    here = list(dict.fromkeys([t.split(".")[0] for t in sch.decl] + ["axes"])) + list(EXTRA_TABLES)
                label = f"table [{full}]" if (isinstance(v, dict) or not path) else f"key {full}"
                raise SpecError(f"unknown {label}{_did_you_mean(k, here)}; allowed: {', '.join(here)}{suffix}")

    walk(raw, "")
    return spec


def _check_type(path, value, p: Param):
    kind = p.kind
    if kind == "bool":
        ok, want = isinstance(value, bool), "true/false"
    elif kind == "int":
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif kind == "float":
        ok, want = _is_num(value), "a number"
    elif kind == "list":
        ok, want = isinstance(value, list), "a list"
    else:
        ok, want = isinstance(value, str), "a string"
    if p.check is not None:  # the key's own type rule replaces the default one
        msg = p.check(path, value)
        if msg:
            raise SpecError(f"{path} = {value!r}: {msg}")
        return
    if not ok:
        raise SpecError(f"{path} = {value!r}: expected {want}")
    if kind == "list" and p.items is float and not all(_is_num(x) for x in value):
        raise SpecError(f"{path} = {value!r}: expected a list of numbers" + (f" [{p.si_unit}]" if p.si_unit else ""))


def check_range(path, value, sch: Schema | None = None):
    """Refuse a value outside the declared range of ``path`` or past its unit guard (naming both)."""
    sch = sch or schema()
    v = float(value)
    if path in sch.ranges:
        lo, hi, inc = sch.ranges[path]
        bad = (not math.isfinite(v)) or v > hi or (v < lo if inc else v <= lo)
        if bad:
            br = "[" if inc else "("
            raise SpecError(f"{path} = {value!r} is outside the allowed range {br}{lo:g}, {hi:g}]")
    if path in sch.unit_limits:
        lim, side, hint = sch.unit_limits[path]
        if (v >= lim) if side == ">=" else (v < lim):
            raise SpecError(f"{path} = {value!r} {side} {lim:g}: {hint}")


def _column_check(path, col, sch):
    """check_range over a column of variant values, naming the first offending variant."""
    col = np.asarray(col, float)
    if col.ndim == 0:
        check_range(path, float(col), sch)
        return
    for x in np.unique(col):
        try:
            check_range(path, float(x), sch)
        except SpecError as e:
            i = int(np.nonzero(col == x)[0][0])
            raise SpecError(f"{e} (variant {i})") from None


def check_values(cols, sch: Schema | None = None):
    """Ranges, unit guards and the mechanism's cross-field checks over every variant.

    ``cols``: {dotted path: scalar or (B,) array} for the floats of the sweepable tables.
    """
    sch = sch or schema()
    for path, col in cols.items():
        if path in sch.ranges or path in sch.unit_limits:
            _column_check(path, col, sch)
    hook = getattr(sch.module, "check_values", None)
    if hook is not None:
        hook(cols)


def variant_columns(spec, paths, values):
    """{path: value} of the floats of the sweepable tables, swept paths as (B,) columns."""
    sch = schema_of(spec)
    cols = {}
    for path in sch.floats():
        tbl, k = path.rsplit(".", 1)
        d = get_table(spec, tbl)
        if isinstance(d, dict) and k in d and _is_num(d[k]):
            cols[path] = d[k]
    for j, p in enumerate(paths):
        cols[p] = values[:, j]
    return cols


def flat_values(spec):
    """{dotted path: value} of every key of the sweepable tables present in the spec."""
    sch = schema_of(spec)
    out = {}
    for path in sch.sweepable:
        d = get_table(spec, path)
        if isinstance(d, dict):
            for k, v in d.items():
                if k in sch.decl[path].keys():
                    out[f"{path}.{k}"] = v
    return out


def validate(spec):
    """Types, ranges, choices and the mechanism's cross-field rules of a merged spec (SpecError)."""
    sch = schema_of(spec)
    for tpath, t in sch.decl.items():
        d = get_table(spec, tpath)
        if d is None:
            continue
        for k, v in d.items():
            p = t.get(k)
            path = f"{tpath}.{k}"
            if p is None:  # a nested table of its own (joints.<name>.laws), validated as such
                continue
            _check_type(path, v, p)
            if p.choices is not None:
                check_choice(path, v, p.choices)
            if p.kind == "int" and p.range and not p.range[0] <= v <= p.range[1]:
                raise SpecError(f"{path} = {v!r} is outside the allowed range [{p.range[0]}, {p.range[1]}]")
            if p.kind == "float":
                check_range(path, v, sch)
    hook = getattr(sch.module, "validate_spec", None)
    if hook is not None:
        hook(spec)
    for ch in spec["outputs"]["histories"]:
        if ch not in sch.channels:
            raise SpecError(
                f"outputs.histories entry {ch!r}{_did_you_mean(ch, sch.channels)}; allowed: {', '.join(sch.channels)}"
            )
    paths, values = axes_values(spec)  # validates the axes
    check_values(variant_columns(spec, paths, values), sch)


def swept_paths(spec):
    return list(spec["axes"].keys())


def axis_paths(spec) -> dict:
    """{dotted path: axis key} of the spec's axes (bare keys resolved by ``resolve_axis_key``)."""
    return {resolve_axis_key(spec, k): k for k in spec.get("axes", {})}


def resolve_axis_key(spec, key):
    """An axis key is a dotted path or a bare key unique across the sweepable tables."""
    sch = schema_of(spec)
    floats = sch.floats()
    if "." in key:
        if key not in sch.params or sch.params[key].kind == "float" and key not in floats:
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, floats)}")
        path = key
    else:
        hits = [p for p in sch.params if p.rsplit(".", 1)[1] == key and p.rsplit(".", 1)[0] in sch.sweepable]
        if len(hits) != 1:
            raise SpecError(
                f"axes.{key}: unknown key{_did_you_mean(key, [p.rsplit('.', 1)[1] for p in floats])}"
                + (f"; ambiguous: {', '.join(hits)}" if len(hits) > 1 else "")
            )
        path = hits[0]
    if sch.params[path].kind != "float":
        p = sch.params[path]
        hint = (
            (
                f"; run one spec per value instead (e.g. --set {path}={p.choices[0]!r}), choices: "
                + ", ".join(map(str, p.choices))
            )
            if p.choices
            else ""
        )
        raise SpecError(
            f"axes.{key}: {path} is structural (not a float) and cannot be swept: it selects the compiled model{hint}"
        )
    hook = getattr(sch.module, "check_axis", None)
    if hook is not None:
        hook(spec, key, path)
    return path


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def parse_axes(spec):
    """The axes as a list of dicts: key, path, kind, arg, zip (group name or None), values
    (grid kinds: the 1-D array of values; random kinds: None)."""
    out, seen = [], {}
    sch = schema_of(spec)
    for key, ax in spec["axes"].items():
        path = resolve_axis_key(spec, key)
        if path in seen:
            raise SpecError(f"axes.{key}: {path} is already an axis (axes.{seen[path]})")
        seen[path] = key
        if not isinstance(ax, dict):
            raise SpecError(f"axes.{key} = {ax!r}: expected one of {_AXIS_FORMS}")
        kinds = [k for k in ax if k != "zip"]
        if len(kinds) != 1:
            raise SpecError(
                f"axes.{key} = {ax!r}: expected exactly one of {', '.join(AXIS_KINDS)} "
                f'(optionally with zip = "group"), e.g. {_AXIS_FORMS}'
            )
        kind = kinds[0]
        arg = ax[kind]
        grp = ax.get("zip")
        if kind not in AXIS_KINDS:
            raise SpecError(
                f"axes.{key}: unknown axis kind {kind!r}{_did_you_mean(kind, AXIS_KINDS + ('zip',))}; "
                f"allowed: {', '.join(AXIS_KINDS)}"
            )
        if grp is not None:
            if not isinstance(grp, str) or not grp:
                raise SpecError(f"axes.{key}.zip = {grp!r}: expected a group name (string)")
            if kind in RANDOM_KINDS:
                raise SpecError(
                    f"axes.{key}.zip = {grp!r}: random axes ({kind}) are always drawn together "
                    "with [sampling]; zip applies to linspace / logspace / values"
                )
        vals = None
        if kind in ("linspace", "logspace"):
            if not (
                isinstance(arg, list)
                and len(arg) == 3
                and _is_num(arg[0])
                and _is_num(arg[1])
                and isinstance(arg[2], int)
                and not isinstance(arg[2], bool)
                and arg[2] >= 1
            ):
                raise SpecError(f"axes.{key}.{kind} = {arg!r}: expected [lo, hi, n] with integer n >= 1")
            lo, hi, n = arg
            if kind == "logspace":
                if lo <= 0 or hi <= 0:
                    raise SpecError(f"axes.{key}.logspace = {arg!r}: lo and hi must be > 0")
                vals = np.geomspace(lo, hi, n)
            else:
                vals = np.linspace(lo, hi, n)
        elif kind == "values":
            if not (isinstance(arg, list) and arg and all(_is_num(x) for x in arg)):
                raise SpecError(f"axes.{key}.values = {arg!r}: expected a non-empty list of numbers")
            vals = np.asarray(arg, float)
        else:
            if not (isinstance(arg, list) and len(arg) == 2 and all(_is_num(x) for x in arg)):
                want = "[mean, std]" if kind == "normal" else "[lo, hi]"
                raise SpecError(f"axes.{key}.{kind} = {arg!r}: expected {want} (two numbers)")
            if kind == "normal":
                if not arg[1] > 0:
                    raise SpecError(f"axes.{key}.normal = {arg!r}: std must be > 0")
            elif not arg[0] < arg[1]:
                raise SpecError(f"axes.{key}.{kind} = {arg!r}: expected [lo, hi] with lo < hi")
            if kind == "loguniform" and arg[0] <= 0:
                raise SpecError(f"axes.{key}.loguniform = {arg!r}: lo must be > 0")
        if vals is not None:
            for v in vals:
                try:
                    check_range(path, float(v), sch)
                except SpecError as e:
                    raise SpecError(f"axes.{key}.{kind}: {e}") from None
        out.append({"key": key, "path": path, "kind": kind, "arg": arg, "zip": grp, "values": vals})
    return out


def latin_hypercube(n, d, rng):
    """(n, d) Latin-hypercube sample of [0, 1)^d: in every column each of the n strata
    [i/n, (i+1)/n) holds exactly one point (independent permutation per column)."""
    u = np.empty((n, d))
    for j in range(d):
        u[:, j] = (rng.permutation(n) + rng.random(n)) / n
    return u


def _from_unit(kind, arg, u):
    if kind == "uniform":
        lo, hi = arg
        return lo + (hi - lo) * u
    if kind == "loguniform":
        lo, hi = arg
        return np.exp(np.log(lo) + (np.log(hi) - np.log(lo)) * u)
    mean, std = arg  # normal: inverse CDF, u kept inside (0, 1)
    nd = statistics.NormalDist(float(mean), float(std))
    return np.array([nd.inv_cdf(x) for x in np.clip(u, 1e-16, 1 - 1e-16)])


def axes_values(spec):
    """Return (paths, values (B, n_axes) float array) of all variants, grid × random samples.

    Grid factors (single axes, or zipped groups in the place of their first member) form a
    Cartesian product, the first factor varying slowest; random axes are drawn together for
    ``sampling.n`` samples and tiled over the grid (the grid point varies slowest).
    """
    axes = parse_axes(spec)
    factors, groups = [], {}
    for ax in axes:
        if ax["values"] is None:
            continue
        if ax["zip"] is None:
            factors.append([ax])
        elif ax["zip"] in groups:
            groups[ax["zip"]].append(ax)
        else:
            groups[ax["zip"]] = [ax]
            factors.append(groups[ax["zip"]])
    for name, members in groups.items():
        if len(members) < 2:
            raise SpecError(
                f"axes.{members[0]['key']}.zip = {name!r}: zip group {name!r} has only this axis; "
                "give the same zip name to at least two grid axes"
            )
        lens = {m["path"]: len(m["values"]) for m in members}
        if len(set(lens.values())) > 1:
            raise SpecError(
                f"zip group {name!r}: the axes must have the same length, got "
                + ", ".join(f"axes.{m['key']}: {len(m['values'])}" for m in members)
            )
    grid_paths = [m["path"] for f in factors for m in f]
    if factors:
        blocks = [np.stack([m["values"] for m in f], axis=1) for f in factors]
        rows = [
            np.concatenate([blocks[j][i] for j, i in enumerate(ix)])
            for ix in itertools.product(*[range(len(b)) for b in blocks])
        ]
        grid = np.array(rows, float).reshape(-1, len(grid_paths))
    else:
        grid = np.zeros((1, 0))  # no grid axis: one base variant
    rand = [ax for ax in axes if ax["values"] is None]
    rand_paths = [ax["path"] for ax in rand]
    if rand:
        n = spec["sampling"]["n"]
        if n < 1:
            raise SpecError(f"sampling.n = {n!r}: random axes {rand_paths} need sampling.n >= 1")
        rng = np.random.default_rng(spec["sampling"]["seed"])
        if spec["sampling"].get("method", "random") == "lhs":
            u = latin_hypercube(n, len(rand), rng)
        else:  # one column after the other: the draws of existing specs stay bit-identical
            u = np.stack([rng.random(n) for _ in rand], axis=1)
        cols = np.stack([_from_unit(ax["kind"], ax["arg"], u[:, j]) for j, ax in enumerate(rand)], axis=1)
        g = np.repeat(grid, n, axis=0)
        r = np.tile(cols, (grid.shape[0], 1))
        vals = np.concatenate([g, r], axis=1)
    else:
        vals = grid
    return grid_paths + rand_paths, vals


def axes_info(spec):
    """One dict per axis column (order of ``axes_values``): name (path), kind, count (values of
    the axis: grid length or sampling.n), zip group, min and max over the variants."""
    axes = {ax["path"]: ax for ax in parse_axes(spec)}
    paths, vals = axes_values(spec)
    out = []
    for j, p in enumerate(paths):
        ax = axes[p]
        kind = ax["kind"] if ax["values"] is not None else f"{ax['kind']} ({spec['sampling'].get('method', 'random')})"
        out.append(
            {
                "name": p,
                "kind": kind,
                "count": int(len(ax["values"]) if ax["values"] is not None else spec["sampling"]["n"]),
                "zip": ax["zip"],
                "min": float(np.min(vals[:, j])),
                "max": float(np.max(vals[:, j])),
            }
        )
    return out


def column_name(path):
    """metrics.csv column of a swept key: the key without its first table (it carries its unit),
    e.g. ``clearance_m``; a key of a nested table keeps the nesting (``crank_rod.clearance_m``)."""
    return path.split(".", 1)[1]


def spec_hash(spec):
    clean = {k: v for k, v in spec.items() if not k.startswith("_")}
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]
