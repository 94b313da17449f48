"""Sweep specs (TOML): schema, defaults, validation, ``--set`` overrides and variant axes.

A spec has the tables ``sweep``, ``model``, ``joint``, ``profile``, ``laws``, ``integrator``,
``outputs`` and ``axes`` (see README, "Spec format").  Every scalar has a dotted key path
(``joint.clearance_m``); the same paths are used by ``--set`` and as axis names.  Numeric
(float) keys of ``model``, ``joint``, ``profile`` and ``laws`` may be swept; structural keys
(strings, integers, the integrator) are static: one compiled function per structure.

Axes: grids ``{ linspace = [lo, hi, n] }``, ``{ logspace = [lo, hi, n] }`` (lo, hi in the key's
unit), ``{ values = [...] }`` form a Cartesian product in the order written; random axes
``{ uniform = [lo, hi] }`` / ``{ loguniform = [lo, hi] }`` are drawn together (zipped) with
``[sampling] n, seed`` and crossed with the grid.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import itertools
import json
import math
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
        "chunk_size": 256,
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
PROFILE_KINDS = ("circle", "ellipse", "fourier", "wear_patch", "measured")


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
            if k not in DEFAULTS[sec]:
                raise SpecError(f"unknown key {sec}.{k}{_did_you_mean(k, DEFAULTS[sec])}")
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


def check_range(path, value):
    if path not in RANGES:
        return
    lo, hi, inc = RANGES[path]
    v = float(value)
    bad = (not math.isfinite(v)) or v > hi or (v < lo if inc else v <= lo)
    if bad:
        br = "[" if inc else "("
        raise SpecError(f"{path} = {value!r} is outside the allowed range {br}{lo:g}, {hi:g}]")


def validate(spec):
    """Types, ranges, names and cross-field physics of a merged spec (raises SpecError)."""
    from . import integrate, laws
    from .mechanisms import MECHANISMS, slider_crank

    for sec in DEFAULTS:
        if sec == "axes":
            continue
        for k, v in spec[sec].items():
            _check_type(f"{sec}.{k}", v, DEFAULTS[sec][k])
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
               ("integrator.precision", it["precision"], ("float64", "float32"))]
    for path, val, allowed in choices:
        if val not in allowed:
            raise SpecError(f"{path} = {val!r}{_did_you_mean(val, allowed)}; allowed: {', '.join(allowed)}")
    for ch in spec["outputs"]["histories"]:
        if ch not in slider_crank.OUTPUT_CHANNELS:
            raise SpecError(f"outputs.histories entry {ch!r}{_did_you_mean(ch, slider_crank.OUTPUT_CHANNELS)}; "
                            f"allowed: {', '.join(slider_crank.OUTPUT_CHANNELS)}")
    for path, lo, hi in (("profile.n_points", 3, 100000), ("profile.max_regions", 1, 64),
                         ("profile.wear_order", 1, 1000), ("integrator.save_every", 1, 10**9),
                         ("integrator.chunk_size", 1, 10**7)):
        sec, k = path.split(".")
        if not lo <= spec[sec][k] <= hi:
            raise SpecError(f"{path} = {spec[sec][k]!r} is outside the allowed range [{lo}, {hi}]")
    if pr["method"] == "analytic" and pr["kind"] != "circle":
        raise SpecError(f"profile.method = 'analytic' needs profile.kind = 'circle', got {pr['kind']!r}")
    if pr["kind"] == "measured" and not pr["path"]:
        raise SpecError("profile.path = '' : profile.kind = 'measured' needs a CSV file with x_m,y_m columns")
    if lw["friction_v1_m_per_s"] <= lw["friction_v0_m_per_s"]:
        raise SpecError(f"laws.friction_v1_m_per_s = {lw['friction_v1_m_per_s']!r} must exceed "
                        f"laws.friction_v0_m_per_s = {lw['friction_v0_m_per_s']!r}")
    if it["t_end_s"] < 0:
        raise SpecError(f"integrator.t_end_s = {it['t_end_s']!r}: must be > 0 (or 0 to use integrator.revolutions)")
    _ = axes_values(spec)  # validates axes


def swept_paths(spec):
    return list(spec["axes"].keys())


def resolve_axis_key(spec, key):
    """An axis key is a dotted path or a bare key unique across the sweepable tables."""
    if "." in key:
        sec, k = key.split(".", 1)
        if sec not in SWEEPABLE_SECTIONS or k not in DEFAULTS.get(sec, {}):
            allk = [f"{s}.{kk}" for s in SWEEPABLE_SECTIONS for kk in DEFAULTS[s]]
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, allk)}")
        path = key
    else:
        hits = [f"{s}.{key}" for s in SWEEPABLE_SECTIONS if key in DEFAULTS[s]]
        if len(hits) != 1:
            allk = [kk for s in SWEEPABLE_SECTIONS for kk in DEFAULTS[s]]
            raise SpecError(f"axes.{key}: unknown key{_did_you_mean(key, allk)}")
        path = hits[0]
    sec, k = path.split(".")
    if not isinstance(DEFAULTS[sec][k], float):
        raise SpecError(f"axes.{key}: {path} is structural (not a float) and cannot be swept")
    return path


def axes_values(spec):
    """Return (paths, values (B, n_axes) float array) of all variants, grid × random samples."""
    grid_paths, grid_vals, rand_paths, rand_specs = [], [], [], []
    for key, ax in spec["axes"].items():
        path = resolve_axis_key(spec, key)
        if not isinstance(ax, dict) or len(ax) != 1:
            raise SpecError(f"axes.{key} = {ax!r}: expected one of {{linspace=[lo,hi,n]}}, {{logspace=[lo,hi,n]}}, "
                            "{values=[...]}, {uniform=[lo,hi]}, {loguniform=[lo,hi]}")
        (kind, arg), = ax.items()
        if kind in ("linspace", "logspace"):
            if not (isinstance(arg, list) and len(arg) == 3 and isinstance(arg[2], int) and arg[2] >= 1):
                raise SpecError(f"axes.{key}.{kind} = {arg!r}: expected [lo, hi, n] with integer n >= 1")
            lo, hi, n = arg
            if kind == "logspace":
                if lo <= 0 or hi <= 0:
                    raise SpecError(f"axes.{key}.logspace = {arg!r}: lo and hi must be > 0")
                vals = np.geomspace(lo, hi, n)
            else:
                vals = np.linspace(lo, hi, n)
        elif kind == "values":
            if not (isinstance(arg, list) and arg and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in arg)):
                raise SpecError(f"axes.{key}.values = {arg!r}: expected a non-empty list of numbers")
            vals = np.asarray(arg, float)
        elif kind in ("uniform", "loguniform"):
            if not (isinstance(arg, list) and len(arg) == 2 and arg[0] < arg[1]):
                raise SpecError(f"axes.{key}.{kind} = {arg!r}: expected [lo, hi] with lo < hi")
            if kind == "loguniform" and arg[0] <= 0:
                raise SpecError(f"axes.{key}.loguniform = {arg!r}: lo must be > 0")
            rand_paths.append(path)
            rand_specs.append((kind, arg))
            continue
        else:
            raise SpecError(f"axes.{key}: unknown axis kind {kind!r}{_did_you_mean(kind, ['linspace','logspace','values','uniform','loguniform'])}")
        for v in vals:
            check_range(path, v)
        grid_paths.append(path)
        grid_vals.append(vals)
    if grid_paths:
        grid = np.array(list(itertools.product(*grid_vals)), float).reshape(-1, len(grid_paths))
    else:
        grid = np.zeros((1, 0))  # no grid axis: one base variant
    if rand_paths:
        n = spec["sampling"]["n"]
        if n < 1:
            raise SpecError(f"sampling.n = {n!r}: random axes {rand_paths} need sampling.n >= 1")
        rng = np.random.default_rng(spec["sampling"]["seed"])
        cols = []
        for kind, (lo, hi) in rand_specs:
            u = rng.random(n)
            cols.append(lo + (hi - lo) * u if kind == "uniform" else np.exp(np.log(lo) + (np.log(hi) - np.log(lo)) * u))
        rand = np.stack(cols, axis=1)
        g = np.repeat(grid, n, axis=0)
        r = np.tile(rand, (grid.shape[0], 1))
        vals = np.concatenate([g, r], axis=1)
    else:
        vals = grid
    return grid_paths + rand_paths, vals


def column_name(path):
    """metrics.csv column of a swept key: the key itself (it carries its unit)."""
    return path.split(".", 1)[1]


def spec_hash(spec):
    clean = {k: v for k, v in spec.items() if not k.startswith("_")}
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]
