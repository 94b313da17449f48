"""Sweep specs (TOML): schema, defaults, validation, ``--set`` overrides and variant axes.

A spec has the tables ``sweep``, ``model``, ``joint``, ``profile``, ``laws``, ``integrator``,
``outputs``, ``sampling`` and ``axes`` (see README, "Spec format").  Every scalar has a
dotted key path (``joint.clearance_m``); the same paths are used by ``--set`` and as axis names.
Numeric (float) keys of ``model``, ``joint``, ``profile`` and ``laws`` may be swept; structural
keys (strings, integers, the integrator) are static: one compiled function per structure.

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
import hashlib
import itertools
import json
import math
import statistics
import tomllib
from pathlib import Path

import numpy as np

DEFAULTS = {
    "sweep": {"name": "sweep", "description": ""},
    "model": {
        "mechanism": "slider_crank",
        "clearance_joint": "rod_slider",
        "crank_length_m": 0.05,
        "rod_length_m": 0.12,
        "crank_mass_kg": 0.30,
        "rod_mass_kg": 0.21,
        "slider_mass_kg": 0.14,
        "crank_inertia_kg_m2": 1e-5,
        "rod_inertia_kg_m2": 2.5e-4,
        "slider_inertia_kg_m2": 1e-4,
        "crank_speed_rpm": 5000.0,
        "ramp_time_s": 0.0,
        "gravity_m_per_s2": 9.81,
    },
    "joint": {"journal_radius_m": 0.010, "clearance_m": 0.5e-3},
    "profile": {
        "kind": "circle",
        "method": "auto",
        "n_points": 72,
        "max_regions": 4,
        "refine": True,
        "wear_depth_m": 0.0,
        "wear_order": 2,
        "wear_angle_deg": 0.0,
        "wear_half_width_deg": 30.0,
        "ellipse_ratio": 1.0,
        "fourier_a_m": [],
        "fourier_b_m": [],
        "path": "",
    },
    "laws": {
        "normal": "lankarani_nikravesh",
        "stiffness": "auto",
        "youngs_modulus_Pa": 207e9,
        "poisson_ratio": 0.3,
        "exponent": 1.5,
        "restitution": 0.9,
        "damping_N_s_per_m": 0.0,
        "friction": "ambrosio",
        "friction_coefficient": 0.01,
        "friction_v0_m_per_s": 1e-4,
        "friction_v1_m_per_s": 1e-3,
    },
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
    "outputs": {
        "histories": ["crank_angle_rad", "contact_force_N", "journal_x_m", "journal_y_m",
                      "slider_acceleration_m_per_s2"],
        "plot_variants": 4,
        "plots": True,
    },
    "sampling": {"n": 0, "seed": 0},
    "axes": {},
}

SWEEPABLE_SECTIONS = ("model", "joint", "profile", "laws")

# Per-harmonic Fourier coefficients of the bushing radius [m]: optional floats of [profile] (absent
# unless given, so that specs written without them keep their spec hash), added on top of the
# fourier_a_m / fourier_b_m lists; sweepable like any float.
MAX_HARMONIC = 8
FOURIER_KEYS = tuple(f"fourier_{c}{k}_m" for c in "ab" for k in range(1, MAX_HARMONIC + 1))
# Optional keys: accepted in their table, present in the merged spec only when given.
OPTIONAL = {"profile": {k: 0.0 for k in FOURIER_KEYS}, "sampling": {"method": "random"}}

RANGES = {
    # key: (lo, hi, inclusive_lo) — physically admissible ranges, checked for every variant.
    "model.crank_length_m": (0.0, math.inf, False),
    "model.rod_length_m": (0.0, math.inf, False),
    "model.crank_mass_kg": (0.0, math.inf, False),
    "model.rod_mass_kg": (0.0, math.inf, False),
    "model.slider_mass_kg": (0.0, math.inf, False),
    "model.crank_inertia_kg_m2": (0.0, math.inf, False),
    "model.rod_inertia_kg_m2": (0.0, math.inf, False),
    "model.slider_inertia_kg_m2": (0.0, math.inf, False),
    "model.crank_speed_rpm": (0.0, 1e6, False),
    "model.ramp_time_s": (0.0, math.inf, True),
    "model.gravity_m_per_s2": (-1e3, 1e3, True),
    "joint.journal_radius_m": (0.0, math.inf, False),
    "joint.clearance_m": (0.0, math.inf, False),
    "profile.wear_depth_m": (0.0, math.inf, True),
    "profile.ellipse_ratio": (1.0, math.inf, True),
    "profile.wear_half_width_deg": (0.0, 180.0, False),
    "laws.youngs_modulus_Pa": (0.0, math.inf, False),
    "laws.poisson_ratio": (-1.0, 0.5, False),
    "laws.exponent": (0.0, 10.0, False),
    "laws.restitution": (0.0, 1.0, False),
    "laws.damping_N_s_per_m": (0.0, math.inf, True),
    "laws.friction_coefficient": (0.0, 10.0, True),
    "laws.friction_v0_m_per_s": (0.0, math.inf, False),
    "laws.friction_v1_m_per_s": (0.0, math.inf, False),
    "integrator.dt_s": (0.0, 1e-2, False),
    "integrator.revolutions": (0.0, 1e6, False),
    "integrator.steady_revolutions": (0.0, 1e6, False),
    "integrator.continuous_contact_s": (0.0, math.inf, False),
}
# Likely unit mistakes, refused with a hint: key: (limit, ">=" | "<", hint).
UNIT_LIMITS = {
    "joint.clearance_m": (1e-2, ">=", "the clearance is the radial gap in metres (0.5 mm = 5e-4): did you give mm?"),
    "joint.journal_radius_m": (1.0, ">=", "the journal radius is in metres (10 mm = 0.01): did you give mm?"),
    "model.crank_length_m": (10.0, ">=", "lengths are in metres (50 mm = 0.05): did you give mm?"),
    "model.rod_length_m": (10.0, ">=", "lengths are in metres (120 mm = 0.12): did you give mm?"),
    "model.crank_speed_rpm": (1.0, "<", "the crank speed is in revolutions per minute (5000 rpm = 83.3 rev/s): "
                                        "did you give rev/s or Hz? (at least 1 rpm)"),
    "laws.youngs_modulus_Pa": (1e6, "<", "Young's modulus is in Pa (steel: 207e9): did you give GPa or MPa?"),
}
# Integer keys: inclusive ranges.
INT_RANGES = {
    "profile.n_points": (8, 4096), "profile.max_regions": (1, 64), "profile.wear_order": (1, 1000),
    "integrator.save_every": (1, 10**9), "integrator.chunk_size": (0, 10**7),
    "outputs.plot_variants": (0, 10**6), "sampling.n": (0, 10**8), "sampling.seed": (0, 2**63 - 1),
}
PROFILE_KINDS = ("circle", "ellipse", "fourier", "wear_patch", "measured")
GRID_KINDS = ("linspace", "logspace", "values")
RANDOM_KINDS = ("uniform", "loguniform", "normal")
AXIS_KINDS = GRID_KINDS + RANDOM_KINDS
SAMPLING_METHODS = ("random", "lhs")
_AXIS_FORMS = ("{linspace=[lo,hi,n]}, {logspace=[lo,hi,n]}, {values=[...]} (each optionally with zip=\"group\"), "
               "{uniform=[lo,hi]}, {loguniform=[lo,hi]}, {normal=[mean,std]}")


class SpecError(ValueError):
    """A spec problem, naming the key path, the offending value and what is allowed."""


def _did_you_mean(key, options):
    m = difflib.get_close_matches(key, list(options), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


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


def _allowed(sec):
    return {**DEFAULTS[sec], **OPTIONAL.get(sec, {})}


def merge_defaults(raw):
    spec = copy.deepcopy(DEFAULTS)
    for sec, table in raw.items():
        if sec.startswith("_"):
            continue
        if sec not in DEFAULTS:
            raise SpecError(f"unknown table [{sec}]{_did_you_mean(sec, DEFAULTS)}; allowed: {', '.join(DEFAULTS)}")
        if not isinstance(table, dict):
            raise SpecError(f"[{sec}] must be a table, got {table!r}")
        if sec == "axes":
            spec["axes"] = dict(table)
            continue
        for k, v in table.items():
            if k not in _allowed(sec):
                raise SpecError(f"unknown key {sec}.{k}{_did_you_mean(k, _allowed(sec))}")
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


def check_range(path, value):
    """Refuse a value outside RANGES[path] or past a UNIT_LIMITS guard (naming both)."""
    v = float(value)
    if path in RANGES:
        lo, hi, inc = RANGES[path]
        bad = (not math.isfinite(v)) or v > hi or (v < lo if inc else v <= lo)
        if bad:
            br = "[" if inc else "("
            raise SpecError(f"{path} = {value!r} is outside the allowed range {br}{lo:g}, {hi:g}]")
    if path in UNIT_LIMITS:
        lim, side, hint = UNIT_LIMITS[path]
        if (v >= lim) if side == ">=" else (v < lim):
            raise SpecError(f"{path} = {value!r} {side} {lim:g}: {hint}")


def _column_check(path, col):
    """check_range over a column of variant values, naming the first offending variant."""
    col = np.asarray(col, float)
    if col.ndim == 0:
        check_range(path, float(col))
        return
    for x in np.unique(col):
        try:
            check_range(path, float(x))
        except SpecError as e:
            i = int(np.nonzero(col == x)[0][0])
            raise SpecError(f"{e} (variant {i})") from None


def check_values(cols):
    """Ranges, unit guards and cross-field checks over every variant.

    ``cols``: {dotted path: scalar or (B,) array} for the floats of the sweepable tables.
    """
    for path, col in cols.items():
        if path in RANGES or path in UNIT_LIMITS:
            _column_check(path, col)
    rj, c = np.asarray(cols["joint.journal_radius_m"], float), np.asarray(cols["joint.clearance_m"], float)
    bad = np.broadcast_to(c >= rj, np.broadcast_shapes(c.shape, rj.shape))
    if np.any(bad):
        i = int(np.argmax(bad.ravel()))
        ci, ri = np.broadcast_to(c, bad.shape).ravel()[i], np.broadcast_to(rj, bad.shape).ravel()[i]
        raise SpecError(f"joint.clearance_m = {float(ci)!r} is not smaller than joint.journal_radius_m = {float(ri)!r}"
                        + (f" (variant {i})" if bad.ndim else "")
                        + ": the clearance is the radial gap (bearing radius − journal radius) in metres; did you give mm?")
    r, L = np.asarray(cols["model.crank_length_m"], float), np.asarray(cols["model.rod_length_m"], float)
    if np.any(L <= r):
        raise SpecError(f"model.rod_length_m = {float(np.min(L))!r} must exceed model.crank_length_m = {float(np.max(r))!r}")


def variant_columns(spec, paths, values):
    """{path: value} of the floats of the sweepable tables, swept paths as (B,) columns."""
    cols = {}
    for s in SWEEPABLE_SECTIONS:
        for k, v in spec[s].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(_allowed(s)[k], float):
                cols[f"{s}.{k}"] = v
    for j, p in enumerate(paths):
        cols[p] = values[:, j]
    return cols


def validate(spec):
    """Types, ranges, names and cross-field physics of a merged spec (raises SpecError)."""
    from . import integrate, laws
    from .mechanisms import MECHANISMS, slider_crank

    for sec in DEFAULTS:
        if sec == "axes":
            continue
        for k, v in spec[sec].items():
            _check_type(f"{sec}.{k}", v, _allowed(sec)[k])
            if not isinstance(v, (list, str, bool)):
                check_range(f"{sec}.{k}", v)
    m, pr, lw, it = spec["model"], spec["profile"], spec["laws"], spec["integrator"]
    choices = [("model.mechanism", m["mechanism"], tuple(MECHANISMS)),
               ("model.clearance_joint", m["clearance_joint"], slider_crank.CLEARANCE_JOINTS),
               ("profile.kind", pr["kind"], PROFILE_KINDS),
               ("profile.method", pr["method"], ("auto", "analytic", "points")),
               ("laws.normal", lw["normal"], laws.NORMAL_LAWS),
               ("laws.friction", lw["friction"], laws.FRICTION_MODELS),
               ("integrator.scheme", it["scheme"], integrate.SCHEMES),
               ("integrator.precision", it["precision"], ("float64", "float32")),
               ("sampling.method", spec["sampling"].get("method", "random"), SAMPLING_METHODS)]
    for path, val, allowed in choices:
        if val not in allowed:
            raise SpecError(f"{path} = {val!r}{_did_you_mean(val, allowed)}; allowed: {', '.join(allowed)}")
    for ch in spec["outputs"]["histories"]:
        if ch not in slider_crank.OUTPUT_CHANNELS:
            raise SpecError(f"outputs.histories entry {ch!r}{_did_you_mean(ch, slider_crank.OUTPUT_CHANNELS)}; "
                            f"allowed: {', '.join(slider_crank.OUTPUT_CHANNELS)}")
    for path, (lo, hi) in INT_RANGES.items():
        sec, k = path.split(".")
        if not lo <= spec[sec][k] <= hi:
            raise SpecError(f"{path} = {spec[sec][k]!r} is outside the allowed range [{lo}, {hi}]")
    if pr["method"] == "analytic" and pr["kind"] != "circle":
        raise SpecError(f"profile.method = 'analytic' needs profile.kind = 'circle', got {pr['kind']!r}")
    if pr["kind"] == "measured" and not pr["path"]:
        raise SpecError("profile.path = '' : profile.kind = 'measured' needs a CSV file with x_m,y_m columns")
    if pr["kind"] != "fourier":
        for k in FOURIER_KEYS:
            if pr.get(k, 0.0) != 0.0:
                raise SpecError(f"profile.{k} = {pr[k]!r}: Fourier harmonics need profile.kind = 'fourier', "
                                f"got {pr['kind']!r}")
    if lw["friction_v1_m_per_s"] <= lw["friction_v0_m_per_s"]:
        raise SpecError(f"laws.friction_v1_m_per_s = {lw['friction_v1_m_per_s']!r} must exceed "
                        f"laws.friction_v0_m_per_s = {lw['friction_v0_m_per_s']!r}")
    if it["t_end_s"] < 0:
        raise SpecError(f"integrator.t_end_s = {it['t_end_s']!r}: must be > 0 (or 0 to use integrator.revolutions)")
    paths, values = axes_values(spec)  # validates the axes
    check_values(variant_columns(spec, paths, values))


def swept_paths(spec):
    return list(spec["axes"].keys())


def _sweepable_keys():
    return [f"{s}.{kk}" for s in SWEEPABLE_SECTIONS for kk in _allowed(s) if isinstance(_allowed(s)[kk], float)]


def resolve_axis_key(spec, key):
    """An axis key is a dotted path or a bare key unique across the sweepable tables."""
    if "." in key:
        sec, k = key.split(".", 1)
        if sec not in SWEEPABLE_SECTIONS or k not in _allowed(sec):
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, _sweepable_keys())}")
        path = key
    else:
        hits = [f"{s}.{key}" for s in SWEEPABLE_SECTIONS if key in _allowed(s)]
        if len(hits) != 1:
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, [p.split('.', 1)[1] for p in _sweepable_keys()])}")
        path = hits[0]
    sec, k = path.split(".")
    if not isinstance(_allowed(sec)[k], float):
        raise SpecError(f"axes.{key}: {path} is structural (not a float) and cannot be swept")
    if k in FOURIER_KEYS and spec["profile"]["kind"] != "fourier":
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
                    check_range(path, float(v))
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
