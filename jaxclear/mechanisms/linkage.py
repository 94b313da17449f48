"""Any planar linkage declared in a spec, rigid or flexible: ``model.mechanism = "linkage"``.

The linkage is described by names — ``[points.<p>]`` (x_m, y_m), ``[links.<l>]`` (the two points
it joins, its beam elements, Young's modulus, density, mass and centroidal inertia),
``[bodies.<b>]`` (a lumped particle at a point, e.g. a slider block) and ``[joints.<j>]``
(``ground``, ``revolute``, ``clearance`` with the joint's own clearance, bushing and laws, or
``slider`` along a direction) — with the crank driver in ``[model]`` (the driven link and its
ground pivot, the speed reached after a linear ramp from rest).  ``jaxclear.fpm`` turns it into
particles and beam elements (the finite particle method of Zheng, Yang, Liu & Luo): no
equations of motion to derive; rigid or flexible is only the Young's modulus.  Each link's
section follows the paper's sizing from its mass and inertia, A = m/(ρl), I_z = I/(ρl).

The amplification reference is the same linkage with every clearance joint an ideal revolute,
simulated by the same engine with the same step (the paper's definition): DE_F = (max |F_c| −
max |R|)/max |R|, R the ideal joint's reaction, and DE of ``model.amplified`` ("link:<l>": the
link's angular acceleration; "body:<b>" or "point:<p>": the acceleration magnitude).
Every float of these tables is sweepable by its dotted path (``links.rod.youngs_modulus_Pa``,
``joints.C.clearance_m``, ``points.B.y_m``); the topology (names, members, types) is structure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from .. import drivers, fpm, integrate
from .. import spec as specmod
from .._math import cross2, safe_norm
from ..schema import NONNEGATIVE, POSITIVE, Param, Table
from ..spec import SpecError
from . import _clearance, crank_linkage, declared, params_type

STRUCTURE = ("points", "links", "bodies", "joints")
JOINT_TYPES = ("ground", "revolute", "clearance", "slider")
ELEMENTS = 4  # links.<l>.elements when not given
# per-element channels {link}_element_{k}_<quantity>: (quantity, index in fpm.element_loads, doc)
ELEMENT_LOADS = (
    ("axial_force_N", 0, "axial force N = (EA/l₀)Δ, tension > 0"),
    ("bending_moment_start_N_m", 1, "bending moment at its end towards the link's first point"),
    ("bending_moment_end_N_m", 2, "bending moment at its end towards the link's second point"),
)
MOMENT_SIGN = (
    "M = EI dθ/ds along the link from its first point to its second: > 0 where it bends "
    "counter-clockwise (concave to the left of first→second; sagging for a link drawn along +x)"
)
_ELEMENT_CHANNEL = re.compile(
    r"^(?P<link>.+)_element_(?P<k>[0-9]+)_(?P<q>" + "|".join(q for q, _, _ in ELEMENT_LOADS) + ")$"
)

MODEL = Table(
    "model",
    (
        Param("mechanism", "linkage", "registered mechanism name"),
        Param("crank", "", "the driven link (pinned to the ground at crank_pivot)"),
        Param("crank_pivot", "", "the point where the crank is pinned to the ground"),
        Param(
            "amplified",
            "",
            "amplified motion: 'link:<name>' (angular acceleration) or 'body:<name>' / "
            "'point:<name>' (acceleration magnitude)",
        ),
        Param(
            "exact_lumping",
            True,
            "particles keep every link's mass and centroidal inertia exactly; needs "
            "I > m l² (n − 2)/(12 n (1 − κ)), κ = 0.1, for a link of n elements, else "
            "refused (false: the paper's lumping, which adds m l²/12·(1 + 2/n²))",
        ),
        Param("damping_per_s", 0.0, "mass-proportional damping α", range=NONNEGATIVE, field="damping"),
        *_clearance.CRANK_DRIVE,
    ),
    doc="the linkage's crank driver and global settings (topology in points, links, bodies, joints)",
)
Params = params_type(
    "Params",
    MODEL,
    extra=("steady_start", "fpm", "ideal"),
    doc="""Declared [model]
    fields, steady_start [s], fpm: the clearance linkage's ``fpm.Params``, ideal: its ideal twin's.""",
)


def _point(name):
    return Table(
        f"points.{name}",
        (
            Param("x_m", 0.0, "x in the initial configuration", guard=_clearance.metres(100.0, "50 mm = 0.05")),
            Param("y_m", 0.0, "y in the initial configuration", guard=_clearance.metres(100.0, "50 mm = 0.05")),
            Param(
                "force_x_N", 0.0, "constant external force at the point, x (on the first member there)", optional=True
            ),
            Param("force_y_N", 0.0, "constant external force at the point, y", optional=True),
        ),
        doc=f"point {name!r}",
    )


def _link(name):
    return Table(
        f"links.{name}",
        (
            Param("points", [], "the two points it joins", items=str),
            Param("elements", ELEMENTS, "planar beam elements (particles: elements + 1)", range=(1, 1000)),
            Param(
                "youngs_modulus_Pa",
                2.07e11,
                "Young's modulus E (2.07e13: 'rigid')",
                range=POSITIVE,
                guard=(1e6, "<", "Young's modulus is in Pa (steel: 2.07e11): did you give GPa or MPa?"),
            ),
            Param("density_kg_per_m3", 7850.0, "density ρ (the section: A = m/(ρl), I_z = I/(ρl))", range=POSITIVE),
            Param("mass_kg", 1.0, "mass m", range=POSITIVE),
            Param("inertia_kg_m2", 1e-3, "inertia I about its centre of mass", range=POSITIVE),
            Param(
                "torque_N_m", 0.0, "constant external torque on the link (at its first point's particle)", optional=True
            ),
        ),
        doc=f"link {name!r}",
    )


def _body(name):
    return Table(
        f"bodies.{name}",
        (
            Param("point", "", "the point it sits at"),
            Param("mass_kg", 1.0, "mass", range=POSITIVE),
            Param("inertia_kg_m2", 1e-4, "rotational inertia", range=POSITIVE),
        ),
        doc=f"body {name!r}",
    )


def _joint(name, kind):
    own = tuple(replace(p, optional=True) for p in _clearance.JOINT.params) if kind == "clearance" else ()
    return Table(
        f"joints.{name}",
        (
            Param("type", "revolute", "joint type", choices=JOINT_TYPES),
            Param("point", "", "the point it sits at"),
            Param("members", [], "links/bodies it joins (clearance: [journal, bearing])", items=str),
            Param("rotation", "free", "slider: the member's rotation", choices=("free", "fixed")),
            Param("direction_deg", 0.0, "slider: guide direction from +x (required for a slider)", optional=True),
        )
        + own,
        doc=f"joint {name!r}",
    )


def tables(model):
    """[model], one table per declared point, link, body and joint (a clearance joint's own
    joint/profile/laws values), the shared [joint], [profile], [laws], [integrator], [outputs]."""
    skel = {t: model.get(t, {}) for t in STRUCTURE}
    clear = [j for j, d in skel["joints"].items() if isinstance(d, dict) and d.get("type") == "clearance"]
    own = [t for t in _clearance.joint_tables(clear, own_always=True) if t.path.count(".") == 2] if clear else []
    out = [
        MODEL,
        *(_point(p) for p in skel["points"]),
        *(_link(n) for n in skel["links"]),
        *(_body(b) for b in skel["bodies"]),
        *(_joint(j, d.get("type", "revolute") if isinstance(d, dict) else "") for j, d in skel["joints"].items()),
        *_clearance.TABLES,
        _clearance.WEAR,
        *own,
        _clearance.crank_integrator(
            integrate.SCHEMES,
            crank_linkage.DEFAULT_SCHEME,
            dt_s=1e-7,
            save_every=200,
            extra=(
                Param(
                    "step_factor",
                    0.5,
                    "dt at most this fraction of the critical step (0.5 with contact)",
                    range=(0.0, 1.0, True),
                ),
            ),
        ),
        _outputs_table(model),
    ]
    return out


def _n_elements(d):
    """A link's element count from its spec table (raw or merged); 0 where it is invalid (the
    table's validation names it)."""
    n = d.get("elements", ELEMENTS) if isinstance(d, dict) else ELEMENTS
    return n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1000 else 0


def element_channel(name, k, quantity):
    """'{name}_element_{k}_{quantity}': element k (1-based, from the link's first point) of link ``name``."""
    return f"{name}_element_{k}_{quantity}"


CRANK_ANGLE = "crank_angle_rad"  # the mechanism's crank angle; a link named 'crank' never shadows it
CHORD = (
    ("angle_rad", "chord angle"),
    ("angular_velocity_rad_per_s", "chord rate"),
    ("angular_acceleration_rad_per_s2", "chord angular acceleration"),
)
WHOLE_LINK = (
    ("bending_moment_N_m", "largest |M| over its elements' ends"),
    ("axial_force_N", "largest |N| over its elements"),
)
BODY = ("x_m", "y_m", "vx_m_per_s", "vy_m_per_s", "ax_m_per_s2", "ay_m_per_s2")


def link_angle_alias(name):
    """'link_{name}_angle_rad': link ``name``'s chord angle under a name no mechanism channel
    takes (``{name}_angle_rad`` is the crank angle for a link named 'crank')."""
    return f"link_{name}_angle_rad"


def _channel_sources(model, per_element=True):
    """[(channel, source, description)] of every channel, in the order of ``output_channels``,
    the source the spec entry that produces it ('the mechanism', 'links.<l>', 'points.<p>',
    'bodies.<b>')."""
    skel = {t: model.get(t, {}) for t in STRUCTURE}
    out = [(CRANK_ANGLE, "the mechanism", "crank angle θ from +x (its drawn angle at t = 0)")]
    out += [(k, "the clearance joints", d) for k, (d, _) in crank_linkage.JOINT_CHANNELS.items()]
    for n, d in skel["links"].items():
        src = f"links.{n}"
        out += [(f"{n}_{q}", src, f"{n} {doc}") for q, doc in CHORD]
        out.append((link_angle_alias(n), src, f"{n} chord angle (= {n}_angle_rad; the name no other channel takes)"))
        out += [(f"{n}_{q}", src, f"{n}: {doc}") for q, doc in WHOLE_LINK]
        count = _n_elements(d) if per_element else f"links.{n}.elements"
        for k in range(1, count + 1) if per_element else ("<k>",):
            for q, j, doc in ELEMENT_LOADS:
                out.append(
                    (
                        element_channel(n, k, q),
                        src,
                        f"{n} element {k} (1..{count}, numbered from its first point): "
                        f"{doc}" + (f"; {MOMENT_SIGN}" if j else ""),
                    )
                )
    for p in skel["points"]:
        out += [(f"{p}_x_m", f"points.{p}", f"point {p} x"), (f"{p}_y_m", f"points.{p}", f"point {p} y")]
    for b in skel["bodies"]:
        out += [(f"{b}_{c}", f"bodies.{b}", f"body {b} {c}") for c in BODY]
    return out


def _shadowed_crank_angle(channel, source):
    """A link named 'crank': its chord angle's plain name is the crank angle's, which keeps it
    (the chord angle is link_crank_angle_rad); the one documented, allowed shadowing."""
    return channel == CRANK_ANGLE and source == "links.crank"


def output_channels(model, per_element=True):
    """Per clearance joint, the crank angle, per link (chord) angle, rate, acceleration, largest
    bending moment and axial force, per element of a link its axial force and end bending moments
    (``per_element=False``: one '<k>' entry per quantity, for the docs), per point and body
    position, per body velocity and acceleration.  Every link's chord angle is also
    ``link_<name>_angle_rad``; ``crank_angle_rad`` is always the crank angle (a link named 'crank'
    gives its chord angle as ``link_crank_angle_rad`` only).  Any other name two entries would
    produce is refused by ``validate_spec`` (``_check_channel_names``)."""
    ch = {}
    for k, src, doc in _channel_sources(model, per_element):
        if _shadowed_crank_angle(k, src):
            ch[k] += f" (link crank's chord angle: {link_angle_alias('crank')})"
        else:
            ch.setdefault(k, doc)
    return ch


def _check_channel_names(spec):
    """Link names free of '_element_' (its channels would read as another link's element
    channels); no channel name produced by two entries (the crank angle against a link named
    'crank' aside: ``output_channels``)."""
    for n in spec.get("links", {}):
        if "_element_" in n:
            raise SpecError(
                f"links.{n}: a link name may not contain '_element_' (its channels, e.g. "
                f"{n + '_axial_force_N'!r}, would read as per-element channels "
                f"<link>_element_<k>_<quantity> of another link): rename the link, e.g. "
                f"{n.replace('_element_', '_el_')!r}"
            )
    seen = {}
    for k, src, _ in _channel_sources(spec):
        if _shadowed_crank_angle(k, src):
            continue
        if k in seen and seen[k] != src:
            raise SpecError(
                f"channel {k!r} is produced by both {seen[k]} and {src}: the names would make one "
                f"shadow the other; rename {src if src != 'the clearance joints' else seen[k]} "
                f"(its channels are named after it)"
            )
        seen.setdefault(k, src)


def _outputs_table(model):
    return specmod.outputs_table(
        output_channels(model, per_element=False), ["crank_angle_rad", "contact_force_N", "journal_x_m", "journal_y_m"]
    )


@dataclass(frozen=True)
class Config(_clearance.ClearanceConfig):
    """ClearanceConfig plus the assembled layouts (clearance and ideal twin), the amplified
    quantity (kind, name), the links' point names and the particles of the named points."""

    clearance_joint: str = "linkage"
    layout: object = None
    ideal: object = None
    amplified: tuple = ("", "")
    links: tuple = ()
    point_nodes: tuple = ()

    @property
    def n_joints(self):
        return len(self.layout.clearance)

    def validate(self):
        return self


def _describe(spec):
    """(links {name: (a, b, n)}, joints {name: (kind, point, members, rotation)}, drivers, bodies)."""
    links = {n: (*(d["points"] + [None, None])[:2], d["elements"]) for n, d in spec.get("links", {}).items()}
    for n, d in spec.get("links", {}).items():
        if len(d["points"]) != 2:
            raise SpecError(f"links.{n}.points = {d['points']!r}: a link joins exactly two points")
        for p in d["points"]:
            if p not in spec.get("points", {}):
                raise SpecError(
                    f"links.{n}.points: unknown point {p!r}; declared: {', '.join(spec.get('points', {})) or 'none'}"
                )
    bodies = {n: d["point"] for n, d in spec.get("bodies", {}).items()}
    for n, p in bodies.items():
        if p not in spec.get("points", {}):
            raise SpecError(f"bodies.{n}.point = {p!r}: unknown point")
    jts = {}
    for n, d in spec.get("joints", {}).items():
        if d["point"] not in spec.get("points", {}):
            raise SpecError(f"joints.{n}.point = {d['point']!r}: unknown point")
        jts[n] = (d["type"], d["point"], tuple(d["members"]), d["rotation"])
    m = spec["model"]
    return links, jts, {"crank": (m["crank"], m["crank_pivot"])}, bodies


def _assemble(spec, jc, ideal=False):
    links, jts, drv, bodies = _describe(spec)
    if ideal:
        jts = {n: (("revolute",) + j[1:]) if j[0] == "clearance" else j for n, j in jts.items()}
    try:
        return fpm.assemble(links, jts, drv, bodies, jc)
    except fpm.LinkageError as e:
        raise SpecError(f"linkage: {e}") from None


def validate_spec(spec):
    m = spec["model"]
    if not spec.get("links"):
        raise SpecError("links: a linkage needs at least one [links.<name>] table")
    for k in ("crank", "crank_pivot"):
        if not m[k]:
            raise SpecError(
                f"model.{k} = '': name the driven link and its ground pivot (model.crank, model.crank_pivot)"
            )
    if m["crank"] not in spec["links"]:
        raise SpecError(f"model.crank = {m['crank']!r}: not a link; declared: {', '.join(spec['links'])}")
    _check_channel_names(spec)  # before the topology: a bad name is refused as such
    _clearance.validate_spec(spec)
    if not any(d["type"] == "clearance" for d in spec.get("joints", {}).values()):
        raise SpecError(
            "joints: a linkage needs at least one clearance joint (joints.<name>.type = 'clearance'); "
            "its contact forces and their amplification are what the sweep measures"
        )
    for n, d in spec.get("joints", {}).items():
        if d["type"] == "slider" and "direction_deg" not in d:
            raise SpecError(f"joints.{n}: a slider needs its guide direction, joints.{n}.direction_deg (0: along +x)")
        if d["type"] != "slider" and "direction_deg" in d:
            raise SpecError(f"joints.{n}.direction_deg: only a slider has a guide (joints.{n}.type = {d['type']!r})")
        if d["type"] == "clearance" and len(d["members"]) != 2:
            raise SpecError(f"joints.{n}.members = {d['members']!r}: a clearance joint has [journal, bearing]")
    _assemble(spec, _clearance.joint_config(spec))
    _amplified(spec)
    _check_element_channels(spec)
    _check_lumping(spec)
    if m["ramp_time_s"] == 0:
        import warnings

        warnings.warn(
            "model.ramp_time_s = 0: a start at speed loads the elastic links suddenly; the ideal twin's "
            "reference (ideal_peak_* and the DAF columns) then carries their vibration (docs/fpm.md): "
            "use a ramp for amplification factors",
            stacklevel=3,
        )


def _check_element_channels(spec):
    """outputs.histories: an element channel of a declared link names one of its elements
    (1..links.<l>.elements, written without leading zeros)."""
    for ch in (spec.get("outputs") or {}).get("histories") or ():
        m = _ELEMENT_CHANNEL.match(ch) if isinstance(ch, str) else None
        if m is None or m["link"] not in spec["links"]:
            continue  # the generic check names unknown channels
        link, d = m["link"], spec["links"][m["link"]]
        n = _n_elements(d)
        if not (n and 1 <= int(m["k"]) <= n and m["k"] == str(int(m["k"]))):
            a, b = (list(d.get("points", [])) + ["?", "?"])[:2]
            raise SpecError(
                f"outputs.histories entry {ch!r}: link {link!r} has {n} element(s) (links.{link}.elements = {n}), "
                f"numbered 1..{n} from its first point {a!r} to {b!r}: use "
                f"{element_channel(link, min(max(int(m['k']), 1), n), m['q'])!r} or another index in 1..{n}"
            )


def _check_lumping(spec):
    """model.exact_lumping: every link of n ≥ 2 elements, in every variant, has I > m L² (n − 2)/
    (12 n (1 − κ)) (``fpm.exact_lumping_min_inertia``; below it the end particles' masses would
    be ≤ 0 and nothing could run)."""
    if not spec["model"]["exact_lumping"] or all(_n_elements(d) < 3 for d in spec["links"].values()):
        return  # one element: the paper's lumping; two: always feasible (the bound is 0)
    paths, values = specmod.axes_values(spec)
    cols = specmod.variant_columns(spec, paths, values)
    val = lambda path, default: np.atleast_1d(np.asarray(cols.get(path, default), float))
    for n_, d in spec["links"].items():
        n = _n_elements(d)
        if n < 3:
            continue  # one element: the paper's lumping; two: always feasible
        a, b = d["points"]
        m, inertia = val(f"links.{n_}.mass_kg", d["mass_kg"]), val(f"links.{n_}.inertia_kg_m2", d["inertia_kg_m2"])
        xy = [val(f"points.{p}.{c}", spec["points"][p].get(c, 0.0)) for p in (a, b) for c in ("x_m", "y_m")]
        length = np.hypot(xy[2] - xy[0], xy[3] - xy[1])
        bound = fpm.exact_lumping_min_inertia(m, length, n)
        bad = ~(inertia > bound)
        if not np.any(bad):
            continue
        shape = np.broadcast_shapes(bad.shape, m.shape, inertia.shape, length.shape)
        i = int(np.argmax(np.broadcast_to(bad, shape)))
        mi, Ii, Li = (float(np.broadcast_to(x, shape)[i]) for x in (m, inertia, length))
        bi = float(np.broadcast_to(bound, shape)[i])
        nmax = fpm.exact_lumping_max_elements(mi, Ii, Li)
        which = (
            f" (variant {i}: " + ", ".join(f"{p} = {values[i, j]:.6g}" for j, p in enumerate(paths)) + ")"
            if paths
            else ""
        )
        raise SpecError(
            f"links.{n_}: model.exact_lumping = true cannot keep its mass and inertia{which}: "
            f"mass_kg = {mi:g}, inertia_kg_m2 = {Ii:g}, length {Li:g} m ({a!r} to {b!r}), elements = {n} need "
            f"inertia_kg_m2 > m L² (n − 2)/(12 n (1 − κ)) = {bi:.4g} (κ = {fpm.KAPPA:g}); below it the end "
            f"particles' masses would be ≤ 0. Use links.{n_}.elements <= {nmax}, or model.exact_lumping = false "
            f"(the paper's lumping, which adds m L²/12·(1 + 2/n²) to the inertia)"
        )


def _amplified(spec):
    """(kind, name) of model.amplified (default: the first non-crank link's angular acceleration)."""
    a = spec["model"]["amplified"] or "link:" + next(
        (n for n in spec["links"] if n != spec["model"]["crank"]), spec["model"]["crank"]
    )
    kind, _, name = a.partition(":")
    pool = {"link": spec.get("links", {}), "body": spec.get("bodies", {}), "point": spec.get("points", {})}
    if kind not in pool or name not in pool[kind]:
        raise SpecError(
            f"model.amplified = {a!r}: expected 'link:<name>', 'body:<name>' or 'point:<name>' of a declared one"
        )
    return kind, name


def check_values(cols):
    """Every clearance joint's clearance below its journal radius (its own values where given)."""
    own = sorted(
        {k.split(".")[1] for k in cols if k.startswith("joints.") and k.endswith(("clearance_m", "journal_radius_m"))}
    )
    _clearance.check_values(cols, tuple(own))


def make_config(spec, t_end):
    base = _clearance.config_fields(spec, t_end)
    lay = _assemble(spec, base["joint"])
    ideal = _assemble(spec, base["joint"], ideal=True)
    return Config(
        layout=lay,
        ideal=ideal,
        amplified=_amplified(spec),
        links=tuple((n, tuple(spec["links"][n]["points"])) for n in spec["links"]),
        point_nodes=tuple(sorted(_point_nodes(spec, lay).items())),
        **base,
    )


def _fpm_params(spec, layout, flat, dtype, joint):
    f = lambda k: jnp.asarray(flat[k], dtype)
    points = {p: (f(f"points.{p}.x_m"), f(f"points.{p}.y_m")) for p in spec.get("points", {})}
    links = {
        n: dict(
            points=tuple(d["points"]),
            youngs_modulus=f(f"links.{n}.youngs_modulus_Pa"),
            density=f(f"links.{n}.density_kg_per_m3"),
            mass=f(f"links.{n}.mass_kg"),
            inertia=f(f"links.{n}.inertia_kg_m2"),
        )
        for n, d in spec["links"].items()
    }
    bodies = {
        n: (d["point"], f(f"bodies.{n}.mass_kg"), f(f"bodies.{n}.inertia_kg_m2"))
        for n, d in spec.get("bodies", {}).items()
    }
    guides = {
        n: (jnp.cos(jnp.deg2rad(f(f"joints.{n}.direction_deg"))), jnp.sin(jnp.deg2rad(f(f"joints.{n}.direction_deg"))))
        for n in layout.guides
    }
    m = declared(MODEL, flat, dtype)
    pf = fpm.linkage_params(
        layout,
        points,
        links,
        bodies,
        guides,
        joint,
        m["damping"],
        m["gravity"],
        m["crank_speed"],
        m["ramp_time"],
        spec["model"]["exact_lumping"],
    )
    forces, torques = pf.forces, pf.torques
    nodes = _point_nodes(spec, layout)
    for pt in spec.get("points", {}):  # external loads: constant, on the first member's particle there
        for c, key in ((0, "force_x_N"), (1, "force_y_N")):
            if f"points.{pt}.{key}" in flat:
                forces = forces.at[nodes[pt], c].add(f(f"points.{pt}.{key}"))
    for n in spec["links"]:
        if f"links.{n}.torque_N_m" in flat:
            torques = torques.at[layout.particles(n)[0][1]].add(f(f"links.{n}.torque_N_m"))
    return pf._replace(forces=forces, torques=torques)


def _point_nodes(spec, layout):
    """{point: node} of the first member (links, then bodies) with a particle at each point."""
    nodes = {}
    for n, parts in layout.link_particles:
        a, b = spec["links"][n]["points"]
        nodes.setdefault(a, parts[0][0])
        nodes.setdefault(b, parts[-1][0])
    for n, (nd, _) in layout.bodies:
        nodes.setdefault(spec["bodies"][n]["point"], nd)
    return nodes


def params(spec, cfg: Config, flat, dtype, t_end):
    """Params of one variant (traceable): the clearance linkage, its ideal twin, the steady window
    (the last integrator.steady_revolutions crank revolutions before t_end, by crank angle)."""
    names = cfg.layout.clearance
    per = [_clearance.joint_params(spec, cfg.joint, _clearance.for_joint(flat, nm), dtype) for nm in names]
    joint = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *per) if per else None
    pf = _fpm_params(spec, cfg.layout, flat, dtype, joint)
    pi = _fpm_params(spec, cfg.ideal, flat, dtype, None)
    m = declared(MODEL, flat, dtype)
    travel = drivers.crank_ramp(jnp.asarray(t_end, dtype), m["crank_speed"], m["ramp_time"])[0]
    steady = drivers.crank_ramp_time(
        travel - 2 * math.pi * spec["integrator"]["steady_revolutions"], m["crank_speed"], m["ramp_time"]
    )
    return Params(**m, steady_start=jnp.asarray(steady, dtype), fpm=pf, ideal=pi)


def _crank_of(cfg):
    """The driven link's name (the link whose particle is the driven rotation)."""
    r = cfg.layout.topology.driven[0]
    return next(n for n, parts in cfg.layout.link_particles if any(rr == r for _, rr in parts))


def _element_loads(cfg, pf, q):
    """{link: (N, M_start, M_end)} (cfg.links order), each (n_elements,) from the link's first
    point to its second: axial force [N] (tension > 0) and bending moments [N·m] at the
    elements' ends (``fpm.element_loads``: M = EI dθ/ds)."""
    loads = fpm.element_loads(cfg.layout.topology, pf, q)
    idx = dict(cfg.layout.elements)
    return {n: tuple(fpm._take(x, idx[n]) for x in loads) for n, _ in cfg.links}  # slices, no gather


def _link_loads(cfg, pf, q):
    """Per link (cfg.links order): the largest |M| over its elements' ends [N·m] and the largest
    |N| over its elements [N] at this configuration."""
    per = _element_loads(cfg, pf, q).values()
    bend = jnp.stack([jnp.max(jnp.maximum(jnp.abs(m0), jnp.abs(m1))) for _, m0, m1 in per])
    axial = jnp.stack([jnp.max(jnp.abs(N)) for N, _, _ in per])
    return bend, axial


def _link_nodes(layout, name):
    parts = layout.particles(name)
    return parts[0][0], parts[-1][0]


def _chord_rates(layout, name, q, v, a):
    """Chord angle ψ, ψ̇ = d×ḋ/|d|², ψ̈ = d×d̈/|d|² − 2(d·ḋ)(d×ḋ)/|d|⁴ of a link (d = x_b − x_a)."""
    na, nb = _link_nodes(layout, name)
    d, dd, ddd = (x.nodes[nb] - x.nodes[na] for x in (q, v, a))
    r2 = jnp.sum(d * d)
    w = cross2(d, dd) / r2
    return jnp.arctan2(d[1], d[0]), w, cross2(d, ddd) / r2 - 2.0 * jnp.dot(d, dd) * cross2(d, dd) / (r2 * r2)


def _amplified_value(cfg, layout, q, v, a):
    kind, name = cfg.amplified
    if kind == "link":
        return _chord_rates(layout, name, q, v, a)[2]
    node = layout.body(name)[0] if kind == "body" else dict(cfg.point_nodes)[name]
    return safe_norm(a.nodes[node])


@dataclass(frozen=True, eq=False)
class Linkage(crank_linkage.CrankLinkage):
    """The crank-linkage protocol with the structure read from the spec (module docstring)."""

    STRUCTURE = STRUCTURE  # the top-level tables the schema is built from (spec.structure_tables)

    def output_channels(self, model):
        return output_channels(model)

    def joint_tree(self, p):
        return p.fpm.joint

    def with_joint_tree(self, p, jp):
        return p._replace(fpm=p.fpm._replace(joint=jp))

    def joint_names(self, cfg):
        return cfg.layout.clearance

    def accel_of(self, cfg):
        return lambda cfg_, p, q, v, aux, t: fpm.accelerations(cfg.layout.topology, p.fpm, q, v, aux, t)

    def amplified(self, cfg):
        kind, name = cfg.amplified
        return (
            (f"{name}_angular_acceleration", "_rad_per_s2") if kind == "link" else (f"{name}_acceleration", "_m_per_s2")
        )

    def acc_value(self, cfg, q, v, a):
        return _amplified_value(cfg, cfg.layout, q, v, a)

    def tables(self, model):
        return tables(model)

    def validate_spec(self, spec):
        validate_spec(spec)

    def check_values(self, cols):
        check_values(cols)

    def make_config(self, spec, t_end):
        return make_config(spec, t_end)

    def params(self, spec, cfg, flat, dtype, t_end):
        return params(spec, cfg, flat, dtype, t_end)

    def check_params(self, spec, cfg, p, name):
        """Every link has a length; the bushings stay outside their journals; dt ≤
        integrator.step_factor × the critical step."""
        l0 = np.asarray(p.fpm.l0).reshape(-1, len(cfg.layout.topology.elements))
        for link, idx in cfg.layout.elements:
            bad = np.nonzero(~(l0[:, list(idx)] > 1e-9).all(axis=1))[0]
            if len(bad):
                a, b = dict(cfg.links)[link]
                raise SpecError(
                    f"links.{link}: points {a!r} and {b!r} coincide ({name(int(bad[0]))}): a link needs "
                    "a length (check points.<name>.x_m, y_m)"
                )
        if cfg.layout.clearance:
            _clearance.check_bushing(
                cfg.joint, jax.tree_util.tree_map(lambda x: np.asarray(x)[:, 0], p.fpm.joint), name
            )
        labels = [""] * len(cfg.layout.topology.elements)
        for link, idx in cfg.layout.elements:
            for k, e in enumerate(idx):
                labels[e] = f"links.{link}, element {k + 1} of {len(idx)}"
        try:
            bound = fpm.critical_step(cfg.layout.topology, p.fpm, *fpm.element_shares(cfg.layout, p.fpm), labels=labels)
        except fpm.ParticleError as e:
            raise SpecError(
                f"{e} ({name(e.variant)}): check the link's mass_kg and inertia_kg_m2 (and the bodies' at its points)"
            ) from None
        factor = spec["integrator"]["step_factor"]
        if np.any(cfg.dt > factor * bound):
            i = int(np.argmin(bound))
            raise SpecError(
                f"integrator.dt_s = {cfg.dt:g} exceeds integrator.step_factor = {factor:g} × the critical "
                f"step {bound[i]:.3g} s of the beam elements ({name(i)}): use dt_s <= {factor * bound[i]:.3g}"
            )

    def describe(self, spec, cfg):
        topo = cfg.layout.topology
        return {
            "particles": topo.n_rotations,
            "nodes": topo.n_nodes,
            "elements": len(topo.elements),
            "clearance_joints": list(cfg.layout.clearance),
            "amplified": ":".join(cfg.amplified),
            **_clearance.describe(cfg.joint),
            "steady_window": f"last {spec['integrator']['steady_revolutions']:g} crank revolution(s) before t_end "
            "(by crank angle)",
            "reference": "the ideal twin (clearance joints as ideal pins), simulated",
        }

    def bytes_per_variant(self, cfg, precision):
        item = 4 if precision == "float32" else 8
        topo = cfg.layout.topology
        return (
            2.0 * cfg.n_saves * max(1, len(cfg.outputs)) * max(1, cfg.n_joints) * item
            + 64 * (topo.n_nodes + topo.n_rotations + len(topo.elements)) * item
            + 16384
        )

    def peak_names(self, cfg):
        """Per link: the largest |bending moment| and |axial force| over its elements and the run."""
        names = [n for n, _ in cfg.links]
        return tuple(f"peak_bending_moment_{n}_N_m" for n in names) + tuple(f"peak_axial_force_{n}_N" for n in names)

    def step_peaks(self, cfg, p, q):
        bend, axial = _link_loads(cfg, p.fpm, q)
        return jnp.concatenate([bend, axial])

    def plots(self, outdir, spec, table, summary, hists, t):
        """The shared sweep PNGs and every other saved scalar channel against the crank angle."""
        from .. import plots as plots_

        written = super().plots(outdir, spec, table, summary, hists, t)
        rest = [c for c in spec["outputs"]["histories"] if c not in crank_linkage.JOINT_CHANNELS and c != CRANK_ANGLE]
        return written + plots_.channels_vs_crank_angle(outdir, spec, table, summary, hists, t, rest)

    def _outputs(self, cfg, q, v, a, jfs, p=None):
        out = {}
        lay = cfg.layout
        dtype = q.nodes.dtype
        names = [n for n, _ in cfg.links]
        # every channel by its exact name (validate_spec refuses a name two entries produce)
        per_element = {
            element_channel(n, k + 1, qn): (n, k, j)
            for n, idx in lay.elements
            for k in range(len(idx))
            for qn, j, _ in ELEMENT_LOADS
        }
        whole = {f"{n}_{qn}": (j, i) for i, n in enumerate(names) for j, (qn, _) in enumerate(WHOLE_LINK)}
        chord = {f"{n}_{qn}": (n, j) for n in names for j, (qn, _) in enumerate(CHORD)}
        chord.update({link_angle_alias(n): (n, 0) for n in names})
        body = {f"{b}_{c}": (node, c) for b, (node, _) in lay.bodies for c in BODY}
        point = {f"{pnt}_{c}_m": (node, i) for pnt, node in cfg.point_nodes for i, c in enumerate("xy")}
        loads = link_loads = None
        for k in cfg.outputs:
            if k in crank_linkage.JOINT_CHANNELS:
                out[k] = jnp.stack([crank_linkage.JOINT_CHANNELS[k][1](j) for j in jfs]).astype(dtype)
            elif k == CRANK_ANGLE:  # the driven particle turned from the crank's drawn angle
                e = dict(lay.elements)[_crank_of(cfg)][0]
                pair = fpm._rotate(q.rotations[lay.topology.driven[0]], p.fpm.offsets[e, 0])
                out[k] = jnp.arctan2(pair[1], pair[0])
            elif k in per_element:  # one element's axial force or end moment, signed
                loads = _element_loads(cfg, p.fpm, q) if loads is None else loads
                link, e, j = per_element[k]
                out[k] = loads[link][j][e]
            elif k in whole:
                link_loads = _link_loads(cfg, p.fpm, q) if link_loads is None else link_loads
                j, i = whole[k]
                out[k] = link_loads[j][i]
            elif k in chord:
                link, j = chord[k]
                out[k] = _chord_rates(lay, link, q, v, a)[j]
            elif k in body:
                node, c = body[k]
                src = {
                    "x_m": q.nodes[node, 0],
                    "y_m": q.nodes[node, 1],
                    "vx_m_per_s": v.nodes[node, 0],
                    "vy_m_per_s": v.nodes[node, 1],
                    "ax_m_per_s2": a.nodes[node, 0],
                    "ay_m_per_s2": a.nodes[node, 1],
                }
                out[k] = src[c]
            elif k in point:
                node, i = point[k]
                out[k] = q.nodes[node, i]
            else:
                raise KeyError(k)
        return out


def _initial_state(cfg, p):
    """At rest with a ramp (model.ramp_time_s > 0); at speed without one: every particle at the
    rigid ideal mechanism's velocity with the crank at ω (``fpm.rigid_velocities``)."""
    q, v, aux = fpm.initial_state(cfg.layout.topology, p.fpm)
    v_speed = fpm.rigid_velocities(cfg.layout, cfg.ideal, p.fpm, p.crank_speed)
    v = jax.tree_util.tree_map(lambda a, b: jnp.where(p.ramp_time > 0, a, b), v, v_speed)
    return q, v, aux


def _end_force(topo, fa, rot):
    """Force [N] on the particle ``rot`` from its own link's elements (0 for a body), from the
    elements' end forces ``fa`` (``fpm.element_end_forces``)."""
    own_a, own_b = np.nonzero(topo.index(2) == rot)[0], np.nonzero(topo.index(3) == rot)[0]
    return jnp.sum(fa[own_a], axis=0) - jnp.sum(fa[own_b], axis=0)


def _twin_start(cfg, p):
    q0, v0, aux0 = fpm.initial_state(cfg.ideal.topology, p.ideal)
    v_speed = fpm.rigid_velocities(cfg.ideal, cfg.ideal, p.ideal, p.crank_speed)
    return q0, jax.tree_util.tree_map(lambda a, b: jnp.where(p.ramp_time > 0, a, b), v0, v_speed), aux0


def _twin_peaks(p: Params, t_end, steady_start, n_samples=0, cfg: Config = None):
    """Peaks of the ideal twin over [0, t_end] and [steady_start, t_end]: |R| at each former
    clearance joint (the force on the journal particle from the bearing side, R = m_j(a − g) −
    f_own + α m_j v, f_own the journal link's element force) and |amplified|, simulated with
    the run's step (the paper's reference)."""
    lay, topo = cfg.ideal, cfg.ideal.topology
    pi = p.ideal
    ends = [
        (j, _ideal_particle(cfg, rj)) for j, (_, rj, _, _) in zip(cfg.layout.clearance, cfg.layout.topology.clearance)
    ]
    step = fpm.make_step(topo, cfg.dt, cfg.scheme)
    q0, v0, aux0 = _twin_start(cfg, p)
    s0 = integrate.State(q0, v0, fpm._accel_out(topo, pi, q0, v0, aux0, 0.0)[0], aux0)
    dtype = q0.nodes.dtype
    k = len(ends) + 1

    def reduce(acc, out, i):
        a, _, q, v, t = out
        fa = fpm.element_end_forces(topo, pi, q)
        vals = [
            safe_norm(
                pi.particle_mass[r] * (a.nodes[nd] + jnp.stack([0.0 * pi.gravity, pi.gravity]))
                + pi.damping * pi.particle_mass[r] * v.nodes[nd]
                - _end_force(topo, fa, r)
            )
            for _, (nd, r) in ends
        ]
        x = jnp.abs(jnp.stack(vals + [_amplified_value(cfg, lay, q, v, a)]))
        steady = t >= steady_start
        return jnp.maximum(acc[0], x), jnp.where(steady, jnp.maximum(acc[1], x), acc[1])

    zero = jnp.zeros(k, dtype)
    _, (full, st), _ = integrate.simulate(step, pi, s0, (zero, zero), reduce, cfg.n_saves, cfg.save_every)
    key = MECHANISM.amplified(cfg)[0]
    pack = lambda x: {**{f"reaction_{j}": x[i] for i, (j, _) in enumerate(ends)}, key: x[-1]}
    return pack(full), pack(st)


def _ideal_particle(cfg, rot):
    """(node, rotation) in the ideal twin of the clearance layout's particle ``rot`` (same particle
    order: links then bodies)."""
    return fpm.node_of(cfg.ideal, rot), rot


MECHANISM = Linkage(
    name="linkage",
    model=MODEL,
    joints={"linkage": ()},
    config=Config,
    params_cls=Params,
    accel={},
    initial_state=_initial_state,
    channels={},
    default_outputs=("crank_angle_rad", "contact_force_N"),
    acc_key="amplified",
    acc_unit="",
    acc_of=None,
    ideal_peaks=_twin_peaks,
    ideal_kw=lambda cfg: {"cfg": cfg},
    samples=(2, 2),
    steady_start=None,
    effective_mass=None,
    check_geometry=lambda cols: None,
    steady_doc="before t_end (by crank angle)",
)
