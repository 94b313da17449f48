"""Parameter declarations: every spec key is declared once, and the declaration gives its table
default, its type, its range and unit guard, its documentation, its place in the params pytree and
the README's spec reference.

A mechanism declares ``Table``s of ``Param``s (``jaxclear.mechanisms``: ``tables(raw)``, built
from the spec's own content, so a mechanism whose tables depend on what the spec declares, e.g.
one table per named clearance joint, is expressible).  Paths are dotted and may be of any depth:
table ``joints.crank_rod.laws`` holds ``joints.crank_rod.laws.restitution``.

Pure Python and NumPy: nothing here imports JAX or any mechanism (the import graph runs
mechanisms → schema, never back).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass

POSITIVE = (0.0, math.inf, False)
NONNEGATIVE = (0.0, math.inf, True)
# Unit read off a key's suffix (the project's naming rule: the unit is in the name).
_SUFFIX_UNITS = (
    ("_N_s_per_m2", "N·s/m²"),
    ("_N_s_per_m", "N·s/m"),
    ("_N_per_m1_5", "N/m^1.5"),
    ("_N_per_m_n", "N/mⁿ"),
    ("_N_per_m", "N/m"),
    ("_rad_per_s2", "rad/s²"),
    ("_rad_per_s", "rad/s"),
    ("_m_per_s2", "m/s²"),
    ("_m_per_s", "m/s"),
    ("_kg_m2", "kg·m²"),
    ("_kg", "kg"),
    ("_Pa", "Pa"),
    ("_rpm", "rev/min"),
    ("_deg", "°"),
    ("_rad", "rad"),
    ("_N", "N"),
    ("_s", "s"),
    ("_m", "m"),
)


def unit_of(key: str) -> str:
    """The SI unit a key's name carries (``clearance_m`` → m), '' for a dimensionless key."""
    for suf, unit in _SUFFIX_UNITS:
        if key.endswith(suf):
            return unit
    return ""


@dataclass(frozen=True)
class Param:
    """One spec key.

    key: name inside its table; default: its value when not given (its Python type is the key's
    type: a float is a number and sweepable, int, bool, str, list); doc: one line for the
    reference; range: (lo, hi, inclusive_lo) for floats, (lo, hi) inclusive for ints; choices:
    allowed strings; guard: (limit, ">=" | "<", hint) a likely unit mistake; field: the params
    pytree field it fills (None: not a params leaf); scale: factor from the spec's unit to the
    field's SI unit (rpm → rad/s); optional: absent from the merged spec unless given (keeps the
    hash of specs written without it); aliases: deprecated names (full dotted paths) still read,
    with a warning naming this key; check: ``check(path, value) -> str | None`` an extra type
    rule (the message when the value is refused); items: the element type of a list.
    """

    key: str
    default: object
    doc: str = ""
    range: tuple | None = None
    choices: tuple | None = None
    guard: tuple | None = None
    field: str | None = None
    scale: float = 1.0
    optional: bool = False
    aliases: tuple = ()
    check: Callable | None = None
    items: type | None = None
    unit: str | None = None

    @property
    def kind(self) -> str:
        d = self.default
        if isinstance(d, bool):
            return "bool"
        if isinstance(d, int):
            return "int"
        if isinstance(d, float):
            return "float"
        if isinstance(d, list):
            return "list"
        return "str"

    @property
    def si_unit(self) -> str:
        return unit_of(self.key) if self.unit is None else self.unit


@dataclass(frozen=True)
class Table:
    """A table of a spec: its dotted path, its keys, whether its floats may be swept and a doc."""

    path: str
    params: tuple
    doc: str = ""
    sweepable: bool = True
    optional: bool = False  # a whole table present only when given (e.g. one joint's own values)
    retired: tuple = ()  # (key, why it is refused): keys earlier releases accepted that do nothing

    def __post_init__(self):
        object.__setattr__(self, "params", tuple(self.params))

    def get(self, key) -> Param | None:
        for p in self.params:
            if p.key == key:
                return p
        return None

    def keys(self):
        return [p.key for p in self.params]


def did_you_mean(key, options):
    m = difflib.get_close_matches(key, list(options), n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""


def reference_markdown(tables, title=None) -> str:
    """The README's spec reference of a list of tables: one Markdown table per spec table."""
    out = [f"#### {title}\n"] if title else []
    for t in tables:
        if not t.params:
            continue
        head = f"`[{t.path}]`" + (f" — {t.doc}" if t.doc else "")
        out.append(head + "\n")
        out.append("| key | default | unit | allowed | description |")
        out.append("|---|---|---|---|---|")
        for p in t.params:
            out.append(f"| `{p.key}` | {_fmt_default(p)} | {p.si_unit} | {_fmt_allowed(p, t)} | {_md(p.doc)} |")
        out.append("")
    return "\n".join(out)


def _md(s):
    return s.replace("|", "\\|")


def _fmt_default(p: Param) -> str:
    if p.optional:
        return "(absent)"
    d = p.default
    if isinstance(d, str):
        return f'`"{d}"`'
    if isinstance(d, bool):
        return f"`{str(d).lower()}`"
    if isinstance(d, float):
        return f"`{d:g}`"
    return f"`{d!r}`"


def _fmt_allowed(p: Param, t: Table) -> str:
    parts = []
    if p.choices:
        parts.append(", ".join(f'`"{c}"`' for c in p.choices))
    if p.range:
        if p.kind == "int":
            parts.append(f"[{p.range[0]}, {p.range[1]}]")
        else:
            lo, hi, inc = p.range
            parts.append(f"{'[' if inc else '('}{lo:g}, {hi:g}{')' if math.isinf(hi) else ']'}".replace("inf", "∞"))
    if p.guard:
        parts.append(f"refused {p.guard[1]} {p.guard[0]:g} (unit guard)")
    if p.kind == "float" and t.sweepable:
        parts.append("sweepable")
    if p.aliases:
        parts.append("was " + ", ".join(f"`{a}`" for a in p.aliases))
    return "; ".join(parts)


# ---------------------------------------------------------------------------- mechanism registry
# name -> module path (imported on first use, so a broken or heavy model costs nothing to the
# specs of the others) or a module object (models living outside jaxclear, tests).
REGISTRY = {
    "slider_crank": "jaxclear.mechanisms.slider_crank",
    "four_bar": "jaxclear.mechanisms.four_bar",
    "impact_oscillator": "jaxclear.mechanisms.impact_oscillator",
    "plate_compactor": "jaxclear.mechanisms.plate_compactor",
    "linkage": "jaxclear.mechanisms.linkage",
    "planet_pin": "jaxclear.mechanisms.planet_pin",
    "rotor_two_bearings": "jaxclear.mechanisms.rotor_two_bearings",
}
_listeners = []


def mechanism_names():
    """The registered mechanism names, in registration order."""
    return tuple(REGISTRY)


def mechanism_module(name):
    """The protocol object of mechanism ``name``: its module, or the module's ``MECHANISM`` when
    it defines one (KeyError listing the registered names otherwise)."""
    import importlib

    if name not in REGISTRY:
        raise KeyError(f"mechanism {name!r} is not registered; registered: {', '.join(REGISTRY)}")
    mod = REGISTRY[name]
    mod = importlib.import_module(mod) if isinstance(mod, str) else mod
    return getattr(mod, "MECHANISM", mod)


def register(name, module):
    """Register a mechanism (module path or module object); cached schemas are dropped."""
    REGISTRY[name] = module
    for f in _listeners:
        f()
