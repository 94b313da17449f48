"""The spec tables every clearance-joint mechanism shares: ``[joint]``, ``[profile]``, ``[laws]``.

Their declarations (``schema.Param``: defaults, ranges, unit guards, docs), their checks, and how
they become the engine's ``joints.JointConfig`` (static) and ``joints.JointParams`` (one variant).
Used by ``slider_crank`` and ``four_bar``.  With several clearance joints the shared tables give
every joint its values and each joint may override the float ones in its own tables
``joints.<name>``, ``joints.<name>.profile``, ``joints.<name>.laws`` (``joints_params``: leaves
stacked on a leading joint axis); structural keys (profile kind, points, laws) are shared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import contact, integrate, joints, laws, profiles
from .. import spec as specmod
from ..schema import NONNEGATIVE, POSITIVE, Param, Table
from ..spec import SpecError
from . import static_law_exponent

# Per-harmonic Fourier coefficients of the bushing radius [m]: optional floats of [profile] (absent
# unless given, so that specs written without them keep their spec hash), added on top of the
# fourier_a_m / fourier_b_m lists; sweepable like any float.
MAX_HARMONIC = 8
FOURIER_KEYS = tuple(f"fourier_{c}{k}_m" for c in "ab" for k in range(1, MAX_HARMONIC + 1))
PROFILE_KINDS = ("circle", "ellipse", "fourier", "wear_patch", "measured")
_MM = "did you give mm?"
POINTS_KEY = "profile.points"  # radial displacements of the profile points (sensitivity.POINTS_KEY)


def _stiffness_rule(path, value):
    ok = value == "auto" or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)
    return None if ok else '"auto" or a positive number [N/m^n]'


MAX_REGIONS_RANGE = (1, 64)


def _max_regions_rule(path, value):
    lo, hi = MAX_REGIONS_RANGE
    if value == "auto":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return None if lo <= value <= hi else f'is outside the allowed range [{lo}, {hi}] (or "auto")'
    return f'expected "auto" or an integer in [{lo}, {hi}] (contact-region slots)'


JOINT = Table(
    "joint",
    (
        Param(
            "journal_radius_m",
            0.010,
            "journal (pin) radius R_J",
            range=POSITIVE,
            guard=(1.0, ">=", "the journal radius is in metres (10 mm = 0.01): " + _MM),
        ),
        Param(
            "clearance_m",
            0.5e-3,
            "radial clearance c = R_B − R_J",
            range=POSITIVE,
            guard=(1e-2, ">=", "the clearance is the radial gap in metres (0.5 mm = 5e-4): " + _MM),
        ),
    ),
    doc="clearance joint geometry (every clearance joint; joints.<name> overrides one)",
)
PROFILE = Table(
    "profile",
    (
        Param("kind", "circle", "bushing profile", choices=PROFILE_KINDS),
        Param(
            "method",
            "auto",
            "'analytic' circle, 'points' (the point method, any profile) or 'auto'",
            choices=("auto", "analytic", "points"),
        ),
        Param("n_points", 72, "profile points N (point method)", range=(8, 4096)),
        Param(
            "max_regions",
            "auto",
            "contact-region slots K: an integer in [1, 64] (1: one-pass deepest-region "
            "path) or 'auto': 1 where every variant's bushing provably allows one region at a time (smallest radius "
            "of curvature, less its discretisation error, above R_J; nothing concave), else the regions the "
            "profile can hold, at most 4 (contact.region_bound)",
            check=_max_regions_rule,
        ),
        Param("refine", True, "parabolic sub-grid refinement of the deepest point"),
        Param("wear_depth_m", 0.0, "wear depth w (ellipse: added to the major semi-axis)", range=NONNEGATIVE),
        Param("wear_order", 2, "Fourier order k of the wear term w·½(1 + cos k(θ − θ_w))", range=(1, 1000)),
        Param("wear_angle_deg", 0.0, "wear direction θ_w (ellipse: orientation of the major axis)"),
        Param("wear_half_width_deg", 30.0, "half width of a wear patch", range=(0.0, 180.0, False)),
        Param("ellipse_ratio", 1.0, "major/minor semi-axis ratio of an ellipse", range=(1.0, math.inf, True)),
        Param("fourier_a_m", [], "Fourier cosine coefficients a_1..a_n of r(θ)", items=float, unit="m"),
        Param("fourier_b_m", [], "Fourier sine coefficients b_1..b_n of r(θ)", items=float, unit="m"),
        Param("path", "", "CSV with x_m,y_m columns (kind = 'measured'), relative to the spec"),
    )
    + tuple(
        Param(k, 0.0, f"adds {k[8]}_{k[9:-2]} {'cos' if k[8] == 'a' else 'sin'} {k[9:-2]}θ to the lists", optional=True)
        for k in FOURIER_KEYS
    ),
    doc="bushing (bearing) profile in the bearing frame",
)
LAWS = Table(
    "laws",
    (
        Param("normal", "lankarani_nikravesh", "normal-force law", choices=laws.NORMAL_LAWS),
        Param(
            "stiffness",
            "auto",
            "K; 'auto': Lankarani–Nikravesh internal-cylinder value",
            check=_stiffness_rule,
            unit="N/mⁿ",
        ),
        Param(
            "youngs_modulus_Pa",
            207e9,
            "Young's modulus E of journal and bushing",
            range=POSITIVE,
            guard=(1e6, "<", "Young's modulus is in Pa (steel: 207e9): did you give GPa or MPa?"),
        ),
        Param("poisson_ratio", 0.3, "Poisson ratio ν", range=(-1.0, 0.5, False)),
        Param("exponent", 1.5, "exponent n of K δⁿ", range=(0.0, 10.0, False)),
        Param("restitution", 0.9, "coefficient of restitution e", range=(0.0, 1.0, False)),
        Param("damping_N_s_per_m", 0.0, "damping of the linear law", range=NONNEGATIVE),
        Param("friction", "ambrosio", "friction model", choices=laws.FRICTION_MODELS),
        Param("friction_coefficient", 0.01, "Coulomb coefficient μ", range=(0.0, 10.0, True)),
        Param("friction_v0_m_per_s", 1e-4, "friction regularisation velocity v0", range=POSITIVE),
        Param("friction_v1_m_per_s", 1e-3, "friction regularisation velocity v1 (> v0)", range=POSITIVE),
    ),
    doc="contact and friction laws",
)
TABLES = (JOINT, PROFILE, LAWS)
WEAR = Table(
    "wear",
    (
        Param(
            "coefficient_m2_per_N",
            0.0,
            "Archard wear coefficient k_w of the bushing (0: off; steel on steel, dry: ~1e-13, lubricated: ~1e-16)",
            range=NONNEGATIVE,
            unit="m²/N",
        ),
        Param(
            "bushing_length_m",
            0.02,
            "axial length L of the bushing (the contact pressure)",
            range=POSITIVE,
            guard=(1.0, ">=", "lengths are in metres (20 mm = 0.02): " + _MM),
        ),
        Param(
            "updates",
            10,
            "jaxclear wear: profile updates M (M + 1 simulated windows; jaxclear run reports the "
            "first window's rates only)",
            range=(1, 100000),
        ),
        Param(
            "cycles_per_update",
            1e5,
            "jaxclear wear: crank cycles each update advances the profile by (wear "
            "acceleration; keep each update's deepest increment a few % of the clearance)",
            range=POSITIVE,
        ),
        Param(
            "smoothing",
            0.0,
            "jaxclear wear: each increment mixed with its neighbours, h ← (1 − s) h + s (h₋ + h₊)/2",
            range=(0.0, 1.0, True),
        ),
    ),
    doc="Archard wear of the bushing (jaxclear.wear; the point method): rates over the steady window "
    "(jaxclear run), the profile evolved over cycles (jaxclear wear)",
)


def wear_on(spec):
    """Whether a spec asks for the bushing's wear (a positive coefficient, or one swept)."""
    w = spec.get("wear") or {}
    swept = any(str(k).endswith("coefficient_m2_per_N") for k in (spec.get("axes") or {}))
    return bool(w) and (w.get("coefficient_m2_per_N", 0.0) > 0 or swept)


def metres(limit, example):
    """The unit guard of a length in metres (a value ≥ ``limit`` was most likely given in mm)."""
    return (limit, ">=", f"lengths are in metres ({example}): " + _MM)


DRIVEN_CRANK = (
    "the crank turns at the prescribed speed (model.crank_speed_rpm, ramp_time_s): its mass and "
    "inertia only change the driving torque, which is not computed"
)
# The crank drive of the crank mechanisms: constant speed, or a linear ramp from rest.
CRANK_DRIVE = (
    Param(
        "crank_speed_rpm",
        5000.0,
        "crank speed ω (after the ramp)",
        range=(0.0, 1e6, False),
        guard=(
            1.0,
            "<",
            "the crank speed is in revolutions per minute (5000 rpm = 83.3 rev/s): "
            "did you give rev/s or Hz? (at least 1 rpm)",
        ),
        field="crank_speed",
        scale=2 * math.pi / 60,
    ),
    Param(
        "ramp_time_s",
        0.0,
        "linear ramp of the crank speed from rest (0: at speed from t = 0)",
        range=NONNEGATIVE,
        field="ramp_time",
    ),
    Param("gravity_m_per_s2", 9.81, "gravity g along −y", range=(-1e3, 1e3, True), field="gravity"),
)


def crank_integrator(schemes, scheme, dt_s=1e-6, t_end_s=0.0, save_every=100, extra=()):
    """The [integrator] of a crank mechanism: the common keys plus the run length in crank
    revolutions, the steady window and the continuous-contact threshold."""
    return specmod.integrator_table(
        schemes,
        scheme,
        dt_s,
        t_end_s,
        save_every,
        extra=(
            Param(
                "revolutions",
                2.0,
                "run length after the ramp when t_end_s = 0 [crank revolutions]",
                range=(0.0, 1e6, False),
            ),
            Param("steady_revolutions", 1.0, "steady window: the last N crank revolutions", range=(0.0, 1e6, False)),
            Param(
                "continuous_contact_s",
                5e-4,
                "contact episodes at least this long count as continuous contact",
                range=(0.0, math.inf, False),
            ),
        )
        + tuple(extra),
    )


def benchmark_joint(
    clearance=0.5e-3,
    journal_radius=10.0e-3,
    restitution=0.9,
    friction_coefficient=0.01,
    points=None,
    normal_law="lankarani_nikravesh",
    youngs_modulus=207e9,
    poisson_ratio=0.3,
    stiffness=None,
    n_joints=1,
):
    """JointParams of the Flores et al. (2008) joint (every argument may be a traced array);
    stiffness by default the Lankarani–Nikravesh internal-cylinder value."""
    f = lambda x: jnp.asarray(x, dtype=jnp.result_type(float))
    rb = f(journal_radius) + f(clearance)
    k = (
        laws.internal_cylinder_stiffness(
            f(journal_radius), rb, youngs_modulus, poisson_ratio, youngs_modulus, poisson_ratio
        )
        if stiffness is None
        else f(stiffness)
    )
    pts = jnp.zeros((1, 2)) if points is None else jnp.asarray(points)
    jp = joints.JointParams(
        journal_radius=f(journal_radius),
        clearance=f(clearance),
        points=pts,
        stiffness=k,
        exponent=f(1.0 if normal_law == "linear" else 1.5),
        restitution=f(restitution),
        damping=f(0.0),
        friction_coefficient=f(friction_coefficient),
        v0=f(1e-4),
        v1=f(1e-3),
    )
    return stacked(jp, n_joints)


def extend_profile(*params):
    """[profile] with a mechanism's own extra keys."""
    return Table("profile", PROFILE.params + tuple(params), doc=PROFILE.doc)


def config_fields(spec, t_end):
    """The ``ClearanceConfig`` fields of a spec: the joint, the scheme, the step and save counts
    (``integrate.steps_and_saves``) and the continuous-contact threshold in steps."""
    it = spec["integrator"]
    dt = it["dt_s"]
    n_saves = integrate.steps_and_saves(t_end, dt, it["save_every"])[1]
    return dict(
        joint=joint_config(spec),
        scheme=it["scheme"],
        dt=dt,
        n_saves=n_saves,
        save_every=it["save_every"],
        outputs=tuple(spec["outputs"]["histories"]),
        min_continuous_steps=max(1, int(round(it["continuous_contact_s"] / dt))),
        wear=wear_on(spec),
    )


def joint_tables(names, profile=PROFILE, own_always=False):
    """The shared [joint], [profile], [laws] tables and, with several clearance joints, each
    joint's own optional tables ``joints.<name>``, ``joints.<name>.profile``,
    ``joints.<name>.laws``: the float keys of the shared ones, absent unless given (a joint's own
    value replaces the shared one for that joint; structural keys are shared by all joints)."""
    out = [JOINT, profile, LAWS]
    if len(names) > 1 or own_always:
        for nm in names:
            for t, sub in ((JOINT, ""), (profile, ".profile"), (LAWS, ".laws")):
                own = tuple(p for p in t.params if p.kind == "float")
                out.append(
                    Table(
                        f"joints.{nm}{sub}",
                        tuple(Param(**{**p.__dict__, "optional": True}) for p in own),
                        doc=f"joint {nm!r}'s own {t.path} values",
                        optional=True,
                    )
                )
    return out


def own_path(name, path):
    """The path of joint ``name``'s own value of shared key ``path`` (``joint.clearance_m`` →
    ``joints.<name>.clearance_m``; ``laws.restitution`` → ``joints.<name>.laws.restitution``)."""
    tbl, key = path.split(".", 1)
    return f"joints.{name}.{key}" if tbl == "joint" else f"joints.{name}.{tbl}.{key}"


def for_joint(flat, name):
    """``flat`` ({dotted path: value}) with joint ``name``'s own values in place of the shared ones."""
    out = dict(flat)
    for path in flat:
        if path.split(".", 1)[0] in ("joint", "profile", "laws"):
            own = own_path(name, path)
            if own in flat:
                out[path] = flat[own]
    return out


@dataclass(frozen=True)
class ClearanceConfig:
    """Static configuration fields shared by the clearance-joint mechanisms (each mechanism's
    ``Config`` adds ``clearance_joint`` and its default ``outputs``).

    joint: geometry/law choices (shared by every clearance joint of the configuration);
    scheme: integrator; dt [s]; n_saves × save_every = steps; outputs: saved channels;
    min_continuous_steps: contact episodes at least this long count as continuous contact;
    checkpoint: rematerialise the saved blocks under reverse-mode differentiation;
    ideal_samples: samples of the ideal mechanism for the amplification reference, one count for
    the whole sweep (``sweep.plan`` sets it from the fastest variant; 0: from the chunk's own).
    """

    joint: joints.JointConfig = field(default_factory=joints.JointConfig)
    scheme: str = "verlet_predicted"  # crank_linkage.DEFAULT_SCHEME
    dt: float = 1e-6
    n_saves: int = 100
    save_every: int = 100
    outputs: tuple = ()
    min_continuous_steps: int = 500
    checkpoint: bool = False
    ideal_samples: int = 0
    wear: bool = False  # accumulate the bushing's Archard wear per profile point (jaxclear.wear)

    @property
    def n_steps(self) -> int:
        return self.n_saves * self.save_every


def validate_spec(spec):
    """Static cross-key rules of the three tables (choices are checked from the declarations)."""
    pr, lw = spec["profile"], spec["laws"]
    if pr["method"] == "analytic" and pr["kind"] != "circle":
        raise SpecError(f"profile.method = 'analytic' needs profile.kind = 'circle', got {pr['kind']!r}")
    if pr["kind"] == "measured" and not pr["path"]:
        raise SpecError("profile.path = '' : profile.kind = 'measured' needs a CSV file with x_m,y_m columns")
    if pr["kind"] != "fourier":
        for k in FOURIER_KEYS:
            if pr.get(k, 0.0) != 0.0:
                raise SpecError(
                    f"profile.{k} = {pr[k]!r}: Fourier harmonics need profile.kind = 'fourier', got {pr['kind']!r}"
                )
    w = pr.get("window_points", 0)  # slider_crank only (its overflow is in metrics.csv)
    if w:
        if pr["kind"] == "circle" and pr["method"] != "points":
            raise SpecError(
                f"profile.window_points = {w!r} needs the point method: profile.kind other than "
                "'circle' or profile.method = 'points' (0 = off)"
            )
        if pr["kind"] == "measured" and not pr["n_points"]:
            raise SpecError(
                f"profile.window_points = {w!r} needs points at uniform angles: give profile.n_points "
                "> 0 to resample the measured profile (profile.n_points = 0 keeps the raw points)"
            )
        if not 5 <= w <= pr["n_points"]:
            raise SpecError(
                f"profile.window_points = {w!r} must be 0 (off) or in [5, profile.n_points = {pr['n_points']!r}]"
            )
    if wear_on(spec) and joint_config(spec).geometry != "points":
        raise SpecError(
            "wear.coefficient_m2_per_N > 0: the wear of the bushing needs its point profile: "
            "profile.method = 'points' (a circle is then sampled at profile.n_points)"
        )
    if lw["friction_v1_m_per_s"] <= lw["friction_v0_m_per_s"]:
        raise SpecError(
            f"laws.friction_v1_m_per_s = {lw['friction_v1_m_per_s']!r} must exceed "
            f"laws.friction_v0_m_per_s = {lw['friction_v0_m_per_s']!r}"
        )


def check_axis(spec, key, path):
    """Fourier harmonic axes need a Fourier bushing."""
    k = path.rsplit(".", 1)[1]
    if k in FOURIER_KEYS and spec["profile"]["kind"] != "fourier":
        raise SpecError(
            f"axes.{key}: Fourier harmonic axes need profile.kind = 'fourier' (and profile points), "
            f"got profile.kind = {spec['profile']['kind']!r}"
        )


def differentiable_keys(spec):
    """Keys beyond the sweepable floats that sensitivity and identify may differentiate: a
    numeric ``laws.stiffness`` and, for a measured bushing, ``profile.points``."""
    extra = ["laws.stiffness"] if isinstance(spec["laws"]["stiffness"], (int, float)) else []
    return extra + ([POINTS_KEY] if spec["profile"]["kind"] == "measured" else [])


def check_values(cols, names=()):
    """The clearance is smaller than the journal radius (else a unit mistake), every variant and
    every clearance joint ``names``' own values where it has them."""
    pairs = [("joint.journal_radius_m", "joint.clearance_m", "")]
    pairs += [
        (own_path(nm, "joint.journal_radius_m"), own_path(nm, "joint.clearance_m"), f" of joint {nm!r}") for nm in names
    ]
    for rk, ck, which in pairs:
        if rk not in cols and ck not in cols:
            continue
        rj = np.asarray(cols.get(rk, cols["joint.journal_radius_m"]), float)
        c = np.asarray(cols.get(ck, cols["joint.clearance_m"]), float)
        bad = np.broadcast_to(c >= rj, np.broadcast_shapes(c.shape, rj.shape))
        if np.any(bad):
            i = int(np.argmax(bad.ravel()))
            ci, ri = np.broadcast_to(c, bad.shape).ravel()[i], np.broadcast_to(rj, bad.shape).ravel()[i]
            raise SpecError(
                f"{ck} = {float(ci)!r} is not smaller than {rk} = {float(ri)!r}{which}"
                + (f" (variant {i})" if bad.ndim else "")
                + ": the clearance is the radial gap (bearing radius − journal radius) in metres; "
                "did you give mm?"
            )


def joint_config(spec):
    """Static ``joints.JointConfig`` from ``[profile]`` and ``[laws]``."""
    pr, lw = spec["profile"], spec["laws"]
    method = pr["method"]
    if method == "auto":
        method = "analytic" if pr["kind"] == "circle" else "points"
    geom = "circle" if method == "analytic" else "points"
    n_points = pr["n_points"] if geom == "points" else 0
    if pr["kind"] == "measured":
        n_points = len(measured_points(spec, None)) if not n_points else n_points
    k, choice = pr["max_regions"], ""
    if geom != "points":
        k = 1
    elif k == "auto":  # provisional: the full pass until sweep.plan has seen the profiles (resolve_config)
        k, choice = contact.REGION_CAP, joints.AUTO_PENDING
    return joints.JointConfig(
        geometry=geom,
        n_points=n_points,
        max_regions=k,
        regions_choice=choice,
        refine=pr["refine"],
        normal_law=lw["normal"],
        friction=lw["friction"],
        window=pr.get("window_points", 0) if geom == "points" else 0,
        exponent=static_law_exponent(spec),
    )


def resolve_config(spec, cfg, jp, acc, offset, names):
    """``profile.max_regions = "auto"``: fold one block of variants into the decision (host).

    ``jp``: the clearance joints' ``JointParams`` of variants ``offset``, ``offset + 1``, ...
    (``jp.points`` (b, [J,] N, 2), the clearance joints ``names``); ``acc``: the ``contact.RegionBound`` of the
    blocks before (None for the first).  Returns (cfg with ``joint.max_regions`` and
    ``joint.regions_choice`` set from every block so far, the new acc).  ``sweep.plan`` calls it on
    every block, so the slots are one static value for the whole sweep: 1 (``detect_deepest``)
    when every profile of every variant and joint passes the curvature test of
    ``contact.region_bound`` (ρ_min >= (1 + ``contact.REGION_MARGIN``)·R_J, nothing concave),
    else that function's bound on the regions (2 to ``contact.REGION_CAP``).  An integer
    ``profile.max_regions``, the circle geometry: cfg unchanged.
    """
    jc = cfg.joint
    if jc.geometry != "points" or spec["profile"]["max_regions"] != "auto":
        return cfg, acc
    pts = np.asarray(jp.points, np.float64)
    n = pts.shape[-2]
    b = pts.shape[0]
    pts = pts.reshape(-1, n, 2)
    nj = pts.shape[0] // b
    rj = np.broadcast_to(np.asarray(jp.journal_radius, np.float64).reshape(b, -1), (b, nj)).reshape(-1)
    # variants sharing a profile (only non-profile keys swept) are tested once
    key = np.concatenate([rj[:, None], pts.reshape(len(rj), -1)], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    bound = contact.region_bound(pts[first], rj[first])
    bound = replace(bound, worst=int(first[bound.worst]), count=len(rj))
    acc = bound if acc is None else acc.merge(bound, offset * nj)
    v, j = divmod(acc.worst, nj)
    where = f"variant {v}" + (f", joint {names[j]!r}" if nj > 1 else "")
    jc = replace(jc, max_regions=acc.slots, regions_choice=acc.reason(n, where))
    return replace(cfg, joint=jc), acc


def describe(jc: joints.JointConfig):
    """summary.json entries of the joint configuration (``max_regions_choice``: how the slots were
    chosen, with ``profile.max_regions = "auto"``)."""
    out = {
        "geometry": jc.geometry,
        "n_points": jc.n_points,
        "max_regions": jc.max_regions,
        "normal_law": jc.normal_law,
        "friction": jc.friction,
    }
    if jc.regions_choice:
        out["max_regions_choice"] = jc.regions_choice
    if jc.window:
        out["window_points"] = jc.window
    return out


def measured_points(spec, n_points):
    """Measured bushing points from profile.path (CSV), errors re-raised naming the key."""
    path = _profile_path(spec)
    try:
        return np.asarray(profiles.measured(path=path, n_points=n_points))
    except ValueError as e:
        raise SpecError(f"profile.path = {str(path)!r}: {e}") from None


def _profile_path(spec):
    p = Path(spec["profile"]["path"])
    return p if p.is_absolute() else Path(spec.get("_base_dir", ".")) / p


def profile_points(spec, flat, rb, n_points, dtype):
    """(n_points, 2) bushing points [m] in the bearing frame for bearing radius ``rb``."""
    pr = spec["profile"]
    kind = pr["kind"]
    w = flat["profile.wear_depth_m"]
    ang = jnp.deg2rad(flat["profile.wear_angle_deg"])
    if kind == "circle":
        return profiles.circle(rb, n_points)
    if kind == "ellipse":
        ratio = flat["profile.ellipse_ratio"]
        return profiles.ellipse(rb * ratio + w, rb, n_points, orientation=ang)
    if kind == "fourier":
        # Material removal only: r = R_b + w·½(1 + cos k(θ − θ_w)) + Σ a_k cos kθ + b_k sin kθ,
        # a_k, b_k = the fourier_a_m / fourier_b_m lists plus the per-harmonic keys
        # profile.fourier_a<k>_m / fourier_b<k>_m (scalars of [profile] or axes).
        k = pr["wear_order"]
        harm = {
            (c, h): flat[f"profile.fourier_{c}{h}_m"]
            for c in "ab"
            for h in range(1, MAX_HARMONIC + 1)
            if f"profile.fourier_{c}{h}_m" in flat
        }
        top = {c: max([h for (cc, h) in harm if cc == c], default=0) for c in "ab"}
        na = max(k, len(pr["fourier_a_m"]), top["a"])
        nb = max(k, len(pr["fourier_b_m"]), top["b"])
        a = jnp.zeros(na, dtype).at[: len(pr["fourier_a_m"])].set(jnp.asarray(pr["fourier_a_m"], dtype))
        b = jnp.zeros(nb, dtype).at[: len(pr["fourier_b_m"])].set(jnp.asarray(pr["fourier_b_m"], dtype))
        for (c, h), v in harm.items():
            if c == "a":
                a = a.at[h - 1].add(jnp.asarray(v, dtype))
            else:
                b = b.at[h - 1].add(jnp.asarray(v, dtype))
        a = a.at[k - 1].add(0.5 * w * jnp.cos(k * ang))
        b = b.at[k - 1].add(0.5 * w * jnp.sin(k * ang))
        return profiles.fourier(rb + 0.5 * w, a, b, n_points)
    if kind == "wear_patch":
        return profiles.wear_patch(rb, w, ang, jnp.deg2rad(flat["profile.wear_half_width_deg"]), n_points)
    if kind == "measured":
        with jax.ensure_compile_time_eval():  # file data: a constant, also under jit (sensitivity)
            return jnp.asarray(measured_points(spec, n_points), dtype)
    raise SpecError(f"profile.kind = {kind!r}")


def joint_params(spec, jc: joints.JointConfig, flat, dtype) -> joints.JointParams:
    """``joints.JointParams`` of one variant from ``[joint]``, ``[profile]``, ``[laws]`` (traceable).

    ``laws.stiffness = "auto"``: the Lankarani–Nikravesh internal-cylinder stiffness
    K = 4/(3(σ_J+σ_B))·√(R_J R_B/(R_B−R_J)), σ = (1−ν²)/E, both bodies of the same material;
    a numeric ``laws.stiffness`` is read from ``flat`` (so it can be differentiated).
    ``flat["profile.points"]`` (optional, (N,) [m]): radial displacements of the profile points
    (the sensitivity of a measured bushing, ``POINTS_KEY``).
    """
    f = lambda k: jnp.asarray(flat[k], dtype)
    lw = "laws."
    rj, c = f("joint.journal_radius_m"), f("joint.clearance_m")
    rb = rj + c
    if spec["laws"]["stiffness"] == "auto":
        k = laws.internal_cylinder_stiffness(
            rj,
            rb,
            f(lw + "youngs_modulus_Pa"),
            f(lw + "poisson_ratio"),
            f(lw + "youngs_modulus_Pa"),
            f(lw + "poisson_ratio"),
        )
    else:
        k = jnp.asarray(flat.get("laws.stiffness", spec["laws"]["stiffness"]), dtype)
    if jc.geometry == "points":
        pts = profile_points(spec, flat, rb, jc.n_points, dtype).astype(dtype)
        if flat.get(POINTS_KEY) is not None:
            dr = jnp.asarray(flat[POINTS_KEY], dtype)
            pts = pts + dr[:, None] * (pts / jnp.linalg.norm(pts, axis=-1, keepdims=True))  # points far from 0
    else:
        pts = jnp.zeros((1, 2), dtype)
    worn = wear_on(spec)
    return joints.JointParams(
        journal_radius=rj,
        clearance=c,
        points=pts,
        stiffness=k,
        exponent=f(lw + "exponent"),
        restitution=f(lw + "restitution"),
        damping=f(lw + "damping_N_s_per_m"),
        friction_coefficient=f(lw + "friction_coefficient"),
        v0=f(lw + "friction_v0_m_per_s"),
        v1=f(lw + "friction_v1_m_per_s"),
        wear_coefficient=f("wear.coefficient_m2_per_N") if worn else None,
        bushing_length=f("wear.bushing_length_m") if worn else None,
    )


def stacked(jp: joints.JointParams, n_joints: int) -> joints.JointParams:
    """The same joint parameters for ``n_joints`` joints (leading axis), or unchanged for 1."""
    if n_joints == 1:
        return jp
    return jax.tree_util.tree_map(lambda x: jnp.stack([x] * n_joints), jp)


def joints_params(spec, jc: joints.JointConfig, flat, dtype, names) -> joints.JointParams:
    """JointParams of the clearance joints ``names`` of one variant: one joint as it is; several
    stacked on a leading joint axis, each with its own ``joints.<name>...`` values where given."""
    if len(names) == 1:
        return joint_params(spec, jc, flat, dtype)
    if not any(k.startswith("joints.") for k in flat):  # every joint shares the tables: build once
        return stacked(joint_params(spec, jc, flat, dtype), len(names))
    per = [joint_params(spec, jc, for_joint(flat, nm), dtype) for nm in names]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *per)


def check_bushing(jc: joints.JointConfig, jp: joints.JointParams, name):
    """SpecError when a bushing profile of a block of variants reaches inside its journal."""
    if jc.geometry != "points":
        return
    rmin = np.min(np.linalg.norm(np.asarray(jp.points), axis=-1), axis=-1)
    rmin = rmin.reshape(rmin.shape[0], -1)[:, 0]
    rj = np.asarray(jp.journal_radius).reshape(rmin.shape[0], -1)[:, 0]
    if np.any(rmin <= rj):
        i = int(np.argmin(rmin - rj))
        raise SpecError(
            f"profile: the bushing profile of {name(i)} "
            f"comes within {rmin[i]:.6g} m of its centre, not larger than "
            f"joint.journal_radius_m = {rj[i]:.6g}: the journal must be smaller than "
            "the bearing"
        )


def fastest_crank_speed(cols):
    """The largest crank speed [rad/s] over the variants ``cols`` ({path: scalar or (B,)})."""
    return float(np.max(np.asarray(cols["model.crank_speed_rpm"], float) * (2 * math.pi / 60)))


def ideal_sample_count(max_crank_speed_rad_per_s, t_end, per_revolution, minimum):
    """Samples of an ideal crank mechanism over [0, t_end]: ``per_revolution`` per crank
    revolution of the fastest variant, at least ``minimum`` + 1, at most 2^18 + 1."""
    revs = max_crank_speed_rad_per_s * t_end / (2 * math.pi)
    return int(min(2**18, max(minimum, per_revolution * math.ceil(revs)))) + 1


def check_dt(cfg, bound, name):
    """SpecError naming the first variant whose stable step ``bound`` [s] is below cfg.dt."""
    if np.any(cfg.dt > bound):
        i = int(np.argmin(bound))
        raise SpecError(
            f"integrator.dt_s = {cfg.dt:g} exceeds the stability bound {bound[i]:.3g} s of "
            f"scheme {cfg.scheme!r} ({name(i)}; "
            "contact stiffness and masses, see integrate.stability_bound); reduce dt_s"
        )
