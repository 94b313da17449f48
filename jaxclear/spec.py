"""Sweep specs (TOML): schema, defaults, validation, ``--set`` overrides and variant axes.

A spec has the common tables ``sweep``, ``integrator``, ``outputs``, ``sampling``, ``axes`` and
the tables of its mechanism (``model.mechanism``, default ``"slider_crank"``: ``model``,
``joint``, ``profile``, ``laws``), whose defaults, ranges and checks the mechanism module
declares (``jaxclear.mechanisms`` protocol; ``schema(name)`` gathers them).  Every scalar has a
dotted key path (``joint.clearance_m``); the same paths are used by ``--set`` and as axis names.
Numeric (float) keys of the mechanism's sweepable tables may be swept; structural keys
(strings, integers, the integrator) are static: one compiled function per structure.

Axes: grids ``{ linspace = [lo, hi, n] }``, ``{ logspace = [lo, hi, n] }`` (lo, hi in the key's
unit), ``{ values = [...] }`` form a Cartesian product in the order written; grid axes with the
same ``zip = "group"`` attribute vary together (same length) and count as one factor of the
product.  Random axes ``{ uniform = [lo, hi] }`` / ``{ loguniform = [lo, hi] }`` /
``{ normal = [mean, std] }`` are drawn together (zipped) with ``[sampling] n, seed, method``
(``"random"``: independent draws; ``"lhs"``: Latin hypercube) and crossed with the grid.
Per-harmonic Fourier keys ``profile.fourier_a<k>_m`` / ``profile.fourier_b<k>_m`` (k = 1..8) add
a_k cos kθ / b_k sin kθ to the ``fourier_a_m`` / ``fourier_b_m`` lists of a ``kind = "fourier"``
bushing; they are floats, so they can be axes of any kind.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import itertools
import json
import math
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Tables every spec has, whatever its mechanism (a mechanism's SPEC_TABLES may replace one of
# them wholesale, e.g. its own integrator defaults); the mechanism adds "model" and its own.
COMMON_TABLES = {
    "sweep": {"name": "sweep", "description": ""},
    "integrator": {
        "scheme": "leapfrog",
        "dt_s": 1e-6,
        "t_end_s": 0.0,
        "revolutions": 2.0,
        "save_every": 100,
        "precision": "float64",
        "chunk_size": 0,
        "steady_revolutions": 1.0,
        "continuous_contact_s": 5e-4,
    },
    "outputs": {"histories": [], "plot_variants": 4, "plots": True},
    "sampling": {"n": 0, "seed": 0},
    "axes": {},
}
COMMON_OPTIONAL = {"sampling": {"method": "random"}}
COMMON_RANGES = {
    "integrator.dt_s": (0.0, 1e-2, False),
    "integrator.revolutions": (0.0, 1e6, False),
    "integrator.steady_revolutions": (0.0, 1e6, False),
    "integrator.continuous_contact_s": (0.0, math.inf, False),
}
COMMON_INT_RANGES = {
    "integrator.save_every": (1, 10**9), "integrator.chunk_size": (0, 10**7),
    "outputs.plot_variants": (0, 10**6), "sampling.n": (0, 10**8), "sampling.seed": (0, 2**63 - 1),
}
DEFAULT_MECHANISM = "slider_crank"
# Tables of an identification spec (``jaxclear identify``): present only when given.
EXTRA_TABLES = ("identify", "truth", "measurement")

# Per-harmonic Fourier coefficients of the bushing radius [m]: optional floats of [profile] (absent
# unless given, so that specs written without them keep their spec hash), added on top of the
# fourier_a_m / fourier_b_m lists; sweepable like any float.
MAX_HARMONIC = 8
FOURIER_KEYS = tuple(f"fourier_{c}{k}_m" for c in "ab" for k in range(1, MAX_HARMONIC + 1))
PROFILE_KINDS = ("circle", "ellipse", "fourier", "wear_patch", "measured")
GRID_KINDS = ("linspace", "logspace", "values")
RANDOM_KINDS = ("uniform", "loguniform", "normal")
AXIS_KINDS = GRID_KINDS + RANDOM_KINDS
SAMPLING_METHODS = ("random", "lhs")
_AXIS_FORMS = ("{linspace=[lo,hi,n]}, {logspace=[lo,hi,n]}, {values=[...]} (each optionally with zip=\"group\"), "
               "{uniform=[lo,hi]}, {loguniform=[lo,hi]}, {normal=[mean,std]}")


class SpecError(ValueError):
    """A spec problem, naming the key path, the offending value and what is allowed."""


@dataclass
class Schema:
    """What the specs of one mechanism may contain (``jaxclear.mechanisms`` protocol + common
    tables): ordered table defaults, optional keys, sweepable tables, ranges, channels."""

    mechanism: str
    module: object
    tables: dict
    optional: dict
    sweepable: tuple
    ranges: dict
    int_ranges: dict
    unit_limits: dict
    channels: dict

    def allowed(self, sec):
        return {**self.tables[sec], **self.optional.get(sec, {})}


@functools.lru_cache(maxsize=None)
def schema(mechanism=DEFAULT_MECHANISM) -> Schema:
    """The Schema of a registered mechanism (SpecError naming model.mechanism otherwise)."""
    from . import mechanisms
    check_choice("model.mechanism", mechanism, mechanisms.names())
    mod = mechanisms.get(mechanism)
    own = mod.SPEC_TABLES
    order = ["sweep", "model"] + [t for t in own if t not in COMMON_TABLES and t != "model"] + \
            ["integrator", "outputs", "sampling", "axes"]
    tables = {t: copy.deepcopy(own.get(t, COMMON_TABLES.get(t))) for t in order}
    optional = {**COMMON_OPTIONAL, **getattr(mod, "SPEC_OPTIONAL", {})}
    return Schema(mechanism=mechanism, module=mod, tables=tables, optional=optional,
                  sweepable=tuple(mod.SWEEPABLE), ranges={**mod.RANGES, **COMMON_RANGES},
                  int_ranges={**getattr(mod, "INT_RANGES", {}), **COMMON_INT_RANGES},
                  unit_limits=dict(getattr(mod, "UNIT_LIMITS", {})), channels=dict(mod.OUTPUT_CHANNELS))


def schema_of(spec) -> Schema:
    return schema(spec["model"]["mechanism"])


def __getattr__(name):
    # The slider-crank's tables under their historical module-level names (spec.DEFAULTS, ...).
    legacy = {"DEFAULTS": "tables", "RANGES": "ranges", "UNIT_LIMITS": "unit_limits",
              "INT_RANGES": "int_ranges", "SWEEPABLE_SECTIONS": "sweepable", "OPTIONAL": "optional"}
    if name in legacy:
        return getattr(schema(DEFAULT_MECHANISM), legacy[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _did_you_mean(key, options):
    m = difflib.get_close_matches(key, list(options), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def check_choice(path, val, allowed):
    """SpecError unless ``val`` is one of ``allowed`` (naming the path and the choices)."""
    if val not in allowed:
        raise SpecError(f"{path} = {val!r}{_did_you_mean(val, allowed)}; allowed: {', '.join(allowed)}")


def load(path_or_dict, overrides=()):
    """Read a TOML spec (path) or dict, apply ``key=value`` overrides, merge defaults, validate."""
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
    spec = merge_defaults(raw)
    spec["_base_dir"] = str(base_dir)
    validate(spec)
    return spec


def apply_override(raw, text):
    """Apply one ``section.key=value`` (value parsed as TOML, else taken as a string)."""
    if "=" not in text:
        raise SpecError(f"--set {text!r}: expected key=value, e.g. joint.clearance_m=2.5e-4")
    key, val = text.split("=", 1)
    key = key.strip()
    try:
        value = tomllib.loads(f"v = {val.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = val.strip()
    parts = key.split(".")
    if len(parts) != 2:
        raise SpecError(f"--set {key!r}: expected section.key, e.g. joint.clearance_m")
    raw.setdefault(parts[0], {})[parts[1]] = value


def merge_defaults(raw):
    """The mechanism's defaults (``model.mechanism``, default slider_crank) overlaid by ``raw``."""
    model = raw.get("model", {})
    mech = model.get("mechanism", DEFAULT_MECHANISM) if isinstance(model, dict) else DEFAULT_MECHANISM
    if not isinstance(mech, str):
        raise SpecError(f"model.mechanism = {mech!r}: expected a string")
    sch = schema(mech)
    spec = copy.deepcopy(sch.tables)
    for sec, table in raw.items():
        if sec.startswith("_"):
            continue
        if sec in EXTRA_TABLES:  # checked by the command that reads them (jaxclear.identify)
            if not isinstance(table, dict):
                raise SpecError(f"[{sec}] must be a table, got {table!r}")
            spec[sec] = copy.deepcopy(dict(table))
            continue
        if sec not in sch.tables:
            allowed = list(sch.tables) + list(EXTRA_TABLES)
            raise SpecError(f"unknown table [{sec}]{_did_you_mean(sec, allowed)}; allowed: {', '.join(allowed)}"
                            + (f" (model.mechanism = {mech!r})" if mech != DEFAULT_MECHANISM else ""))
        if not isinstance(table, dict):
            raise SpecError(f"[{sec}] must be a table, got {table!r}")
        if sec == "axes":
            spec["axes"] = dict(table)
            continue
        for k, v in table.items():
            if k not in sch.allowed(sec):
                raise SpecError(f"unknown key {sec}.{k}{_did_you_mean(k, sch.allowed(sec))}")
            spec[sec][k] = v
    return spec


def _check_type(path, value, default):
    if isinstance(default, bool):
        ok = isinstance(value, bool)
        want = "true/false"
    elif isinstance(default, int) and not isinstance(default, bool):
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "an integer"
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        want = "a number"
    elif isinstance(default, list):
        ok = isinstance(value, list)
        want = "a list"
    elif isinstance(default, str) and path == "laws.stiffness":
        ok = value == "auto" or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)
        want = '"auto" or a positive number [N/m^n]'
    else:
        ok = isinstance(value, str)
        want = "a string"
    if not ok:
        raise SpecError(f"{path} = {value!r}: expected {want}")
    if isinstance(default, list) and path in ("profile.fourier_a_m", "profile.fourier_b_m"):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            raise SpecError(f"{path} = {value!r}: expected a list of numbers [m]")
    if isinstance(default, list) and path == "outputs.histories":
        if not all(isinstance(x, str) for x in value):
            raise SpecError(f"{path} = {value!r}: expected a list of channel names (strings)")


def check_range(path, value, sch: Schema | None = None):
    """Refuse a value outside the mechanism's range of ``path`` or past a unit guard (naming both)."""
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
    for s in sch.sweepable:
        for k, v in spec[s].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(sch.allowed(s)[k], float):
                cols[f"{s}.{k}"] = v
    for j, p in enumerate(paths):
        cols[p] = values[:, j]
    return cols


def validate(spec):
    """Types, ranges, names and cross-field physics of a merged spec (raises SpecError)."""
    from . import integrate

    sch = schema_of(spec)
    for sec in sch.tables:
        if sec == "axes":
            continue
        for k, v in spec[sec].items():
            _check_type(f"{sec}.{k}", v, sch.allowed(sec)[k])
            if not isinstance(v, (list, str, bool)):
                check_range(f"{sec}.{k}", v, sch)
    it = spec["integrator"]
    hook = getattr(sch.module, "validate_spec", None)
    if hook is not None:
        hook(spec)
    check_choice("integrator.scheme", it["scheme"], integrate.SCHEMES)
    check_choice("integrator.precision", it["precision"], ("float64", "float32"))
    check_choice("sampling.method", spec["sampling"].get("method", "random"), SAMPLING_METHODS)
    for ch in spec["outputs"]["histories"]:
        if ch not in sch.channels:
            raise SpecError(f"outputs.histories entry {ch!r}{_did_you_mean(ch, sch.channels)}; "
                            f"allowed: {', '.join(sch.channels)}")
    for path, (lo, hi) in sch.int_ranges.items():
        sec, k = path.split(".")
        if not lo <= spec[sec][k] <= hi:
            raise SpecError(f"{path} = {spec[sec][k]!r} is outside the allowed range [{lo}, {hi}]")
    if it["t_end_s"] < 0:
        raise SpecError(f"integrator.t_end_s = {it['t_end_s']!r}: must be > 0 (or 0 to use integrator.revolutions)")
    paths, values = axes_values(spec)  # validates the axes
    check_values(variant_columns(spec, paths, values), sch)


def swept_paths(spec):
    return list(spec["axes"].keys())


def _sweepable_keys(sch):
    return [f"{s}.{kk}" for s in sch.sweepable for kk in sch.allowed(s) if isinstance(sch.allowed(s)[kk], float)]


def resolve_axis_key(spec, key):
    """An axis key is a dotted path or a bare key unique across the sweepable tables."""
    sch = schema_of(spec)
    if "." in key:
        sec, k = key.split(".", 1)
        if sec not in sch.sweepable or k not in sch.allowed(sec):
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, _sweepable_keys(sch))}")
        path = key
    else:
        hits = [f"{s}.{key}" for s in sch.sweepable if key in sch.allowed(s)]
        if len(hits) != 1:
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, [p.split('.', 1)[1] for p in _sweepable_keys(sch)])}")
        path = hits[0]
    sec, k = path.split(".")
    if not isinstance(sch.allowed(sec)[k], float):
        raise SpecError(f"axes.{key}: {path} is structural (not a float) and cannot be swept")
    if k in FOURIER_KEYS and sec == "profile" and spec["profile"]["kind"] != "fourier":
        raise SpecError(f"axes.{key}: Fourier harmonic axes need profile.kind = 'fourier' (and profile points), "
                        f"got profile.kind = {spec['profile']['kind']!r}")
    return path


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def parse_axes(spec):
    """The axes as a list of dicts: key, path, kind, arg, zip (group name or None), values
    (grid kinds: the 1-D array of values; random kinds: None)."""
    out, seen = [], {}
    for key, ax in spec["axes"].items():
        path = resolve_axis_key(spec, key)
        if path in seen:
            raise SpecError(f"axes.{key}: {path} is already an axis (axes.{seen[path]})")
        seen[path] = key
        if not isinstance(ax, dict):
            raise SpecError(f"axes.{key} = {ax!r}: expected one of {_AXIS_FORMS}")
        kinds = [k for k in ax if k != "zip"]
        if len(kinds) != 1:
            raise SpecError(f"axes.{key} = {ax!r}: expected exactly one of {', '.join(AXIS_KINDS)} "
                            f"(optionally with zip = \"group\"), e.g. {_AXIS_FORMS}")
        kind = kinds[0]
        arg = ax[kind]
        grp = ax.get("zip")
        if kind not in AXIS_KINDS:
            raise SpecError(f"axes.{key}: unknown axis kind {kind!r}{_did_you_mean(kind, AXIS_KINDS + ('zip',))}; "
                            f"allowed: {', '.join(AXIS_KINDS)}")
        if grp is not None:
            if not isinstance(grp, str) or not grp:
                raise SpecError(f"axes.{key}.zip = {grp!r}: expected a group name (string)")
            if kind in RANDOM_KINDS:
                raise SpecError(f"axes.{key}.zip = {grp!r}: random axes ({kind}) are always drawn together "
                                "with [sampling]; zip applies to linspace / logspace / values")
        vals = None
        if kind in ("linspace", "logspace"):
            if not (isinstance(arg, list) and len(arg) == 3 and _is_num(arg[0]) and _is_num(arg[1])
                    and isinstance(arg[2], int) and not isinstance(arg[2], bool) and arg[2] >= 1):
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
                    check_range(path, float(v), schema_of(spec))
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
            raise SpecError(f"axes.{members[0]['key']}.zip = {name!r}: zip group {name!r} has only this axis; "
                            "give the same zip name to at least two grid axes")
        lens = {m["path"]: len(m["values"]) for m in members}
        if len(set(lens.values())) > 1:
            raise SpecError(f"zip group {name!r}: the axes must have the same length, got "
                            + ", ".join(f"axes.{m['key']}: {len(m['values'])}" for m in members))
    grid_paths = [m["path"] for f in factors for m in f]
    if factors:
        blocks = [np.stack([m["values"] for m in f], axis=1) for f in factors]
        rows = [np.concatenate([blocks[j][i] for j, i in enumerate(ix)])
                for ix in itertools.product(*[range(len(b)) for b in blocks])]
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
        out.append({"name": p, "kind": kind,
                    "count": int(len(ax["values"]) if ax["values"] is not None else spec["sampling"]["n"]),
                    "zip": ax["zip"], "min": float(np.min(vals[:, j])), "max": float(np.max(vals[:, j]))})
    return out


def column_name(path):
    """metrics.csv column of a swept key: the key itself (it carries its unit)."""
    return path.split(".", 1)[1]


def spec_hash(spec):
    clean = {k: v for k, v in spec.items() if not k.startswith("_")}
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]
