"""The spec tables every clearance-joint mechanism shares: ``[joint]``, ``[profile]``, ``[laws]``.

Their defaults, ranges and checks, and how they become the engine's ``joints.JointConfig``
(static) and ``joints.JointParams`` (one variant).  Used by ``slider_crank`` and ``four_bar``;
a mechanism with several clearance joints gives all of them the same values (leaves stacked
on a leading joint axis by ``stacked``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import joints, laws, profiles
from .. import spec as specmod
from ..spec import FOURIER_KEYS, MAX_HARMONIC, PROFILE_KINDS, SpecError

TABLES = {
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
}
OPTIONAL = {"profile": {k: 0.0 for k in FOURIER_KEYS}}
SWEEPABLE = ("joint", "profile", "laws")
RANGES = {
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
}
UNIT_LIMITS = {
    "joint.clearance_m": (1e-2, ">=", "the clearance is the radial gap in metres (0.5 mm = 5e-4): did you give mm?"),
    "joint.journal_radius_m": (1.0, ">=", "the journal radius is in metres (10 mm = 0.01): did you give mm?"),
    "laws.youngs_modulus_Pa": (1e6, "<", "Young's modulus is in Pa (steel: 207e9): did you give GPa or MPa?"),
}
INT_RANGES = {"profile.n_points": (8, 4096), "profile.max_regions": (1, 64), "profile.wear_order": (1, 1000)}


@dataclass(frozen=True)
class ClearanceConfig:
    """Static configuration fields shared by the clearance-joint mechanisms (each mechanism's
    ``Config`` adds ``clearance_joint`` and its default ``outputs``).

    joint: geometry/law choices (shared by every clearance joint of the configuration);
    scheme: integrator; dt [s]; n_saves × save_every = steps; outputs: saved channels;
    min_continuous_steps: contact episodes at least this long count as continuous contact;
    checkpoint: rematerialise the saved blocks under reverse-mode differentiation.
    """

    joint: joints.JointConfig = field(default_factory=joints.JointConfig)
    scheme: str = "leapfrog"
    dt: float = 1e-6
    n_saves: int = 100
    save_every: int = 100
    outputs: tuple = ()
    min_continuous_steps: int = 500
    checkpoint: bool = False

    @property
    def n_steps(self) -> int:
        return self.n_saves * self.save_every


def validate_spec(spec):
    """Choices and static cross-key rules of the three tables."""
    pr, lw = spec["profile"], spec["laws"]
    for path, val, allowed in [("profile.kind", pr["kind"], PROFILE_KINDS),
                               ("profile.method", pr["method"], ("auto", "analytic", "points")),
                               ("laws.normal", lw["normal"], laws.NORMAL_LAWS),
                               ("laws.friction", lw["friction"], laws.FRICTION_MODELS)]:
        specmod.check_choice(path, val, allowed)
    if pr["method"] == "analytic" and pr["kind"] != "circle":
        raise SpecError(f"profile.method = 'analytic' needs profile.kind = 'circle', got {pr['kind']!r}")
    if pr["kind"] == "measured" and not pr["path"]:
        raise SpecError("profile.path = '' : profile.kind = 'measured' needs a CSV file with x_m,y_m columns")
    if pr["kind"] != "fourier":
        for k in FOURIER_KEYS:
            if pr.get(k, 0.0) != 0.0:
                raise SpecError(f"profile.{k} = {pr[k]!r}: Fourier harmonics need profile.kind = 'fourier', "
                                f"got {pr['kind']!r}")
    w = pr.get("window_points", 0)  # slider_crank only (its overflow is in metrics.csv)
    if w:
        if pr["kind"] == "circle" and pr["method"] != "points":
            raise SpecError(f"profile.window_points = {w!r} needs the point method: profile.kind other than "
                            "'circle' or profile.method = 'points' (0 = off)")
        if pr["kind"] == "measured" and not pr["n_points"]:
            raise SpecError(f"profile.window_points = {w!r} needs points at uniform angles: give profile.n_points "
                            "> 0 to resample the measured profile (profile.n_points = 0 keeps the raw points)")
        if not 5 <= w <= pr["n_points"]:
            raise SpecError(f"profile.window_points = {w!r} must be 0 (off) or in [5, profile.n_points = "
                            f"{pr['n_points']!r}]")
    if lw["friction_v1_m_per_s"] <= lw["friction_v0_m_per_s"]:
        raise SpecError(f"laws.friction_v1_m_per_s = {lw['friction_v1_m_per_s']!r} must exceed "
                        f"laws.friction_v0_m_per_s = {lw['friction_v0_m_per_s']!r}")


def check_values(cols):
    """The clearance is smaller than the journal radius (else a unit mistake), every variant."""
    rj, c = np.asarray(cols["joint.journal_radius_m"], float), np.asarray(cols["joint.clearance_m"], float)
    bad = np.broadcast_to(c >= rj, np.broadcast_shapes(c.shape, rj.shape))
    if np.any(bad):
        i = int(np.argmax(bad.ravel()))
        ci, ri = np.broadcast_to(c, bad.shape).ravel()[i], np.broadcast_to(rj, bad.shape).ravel()[i]
        raise SpecError(f"joint.clearance_m = {float(ci)!r} is not smaller than joint.journal_radius_m = {float(ri)!r}"
                        + (f" (variant {i})" if bad.ndim else "")
                        + ": the clearance is the radial gap (bearing radius − journal radius) in metres; did you give mm?")


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
    return joints.JointConfig(geometry=geom, n_points=n_points,
                              max_regions=pr["max_regions"] if geom == "points" else 1,
                              refine=pr["refine"], normal_law=lw["normal"], friction=lw["friction"],
                              window=pr.get("window_points", 0) if geom == "points" else 0)


def describe(jc: joints.JointConfig):
    """summary.json entries of the joint configuration."""
    out = {"geometry": jc.geometry, "n_points": jc.n_points, "max_regions": jc.max_regions,
           "normal_law": jc.normal_law, "friction": jc.friction}
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
        harm = {(c, h): flat[f"profile.fourier_{c}{h}_m"] for c in "ab"
                for h in range(1, MAX_HARMONIC + 1) if f"profile.fourier_{c}{h}_m" in flat}
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
    K = 4/(3(σ_J+σ_B))·√(R_J R_B/(R_B−R_J)), σ = (1−ν²)/E, both bodies of the same material.
    """
    f = lambda k: jnp.asarray(flat[k], dtype)
    lw = "laws."
    rj, c = f("joint.journal_radius_m"), f("joint.clearance_m")
    rb = rj + c
    if spec["laws"]["stiffness"] == "auto":
        k = laws.internal_cylinder_stiffness(rj, rb, f(lw + "youngs_modulus_Pa"), f(lw + "poisson_ratio"),
                                             f(lw + "youngs_modulus_Pa"), f(lw + "poisson_ratio"))
    else:
        k = jnp.asarray(spec["laws"]["stiffness"], dtype)
    if jc.geometry == "points":
        pts = profile_points(spec, flat, rb, jc.n_points, dtype).astype(dtype)
    else:
        pts = jnp.zeros((1, 2), dtype)
    return joints.JointParams(journal_radius=rj, clearance=c, points=pts, stiffness=k,
                              exponent=f(lw + "exponent"), restitution=f(lw + "restitution"),
                              damping=f(lw + "damping_N_s_per_m"),
                              friction_coefficient=f(lw + "friction_coefficient"),
                              v0=f(lw + "friction_v0_m_per_s"), v1=f(lw + "friction_v1_m_per_s"))


def stacked(jp: joints.JointParams, n_joints: int) -> joints.JointParams:
    """The same joint parameters for ``n_joints`` joints (leading axis), or unchanged for 1."""
    if n_joints == 1:
        return jp
    return jax.tree_util.tree_map(lambda x: jnp.stack([x] * n_joints), jp)


def check_bushing(jc: joints.JointConfig, jp: joints.JointParams, name):
    """SpecError when a bushing profile of a block of variants reaches inside its journal."""
    if jc.geometry != "points":
        return
    rmin = np.min(np.linalg.norm(np.asarray(jp.points), axis=-1), axis=-1)
    rmin = rmin.reshape(rmin.shape[0], -1)[:, 0]
    rj = np.asarray(jp.journal_radius).reshape(rmin.shape[0], -1)[:, 0]
    if np.any(rmin <= rj):
        i = int(np.argmin(rmin - rj))
        raise SpecError(f"profile: the bushing profile of {name(i)} "
                        f"comes within {rmin[i]:.6g} m of its centre, not larger than "
                        f"joint.journal_radius_m = {rj[i]:.6g}: the journal must be smaller than "
                        "the bearing")


def check_dt(cfg, bound, name):
    """SpecError naming the first variant whose stable step ``bound`` [s] is below cfg.dt."""
    if np.any(cfg.dt > bound):
        i = int(np.argmin(bound))
        raise SpecError(f"integrator.dt_s = {cfg.dt:g} exceeds the stability bound {bound[i]:.3g} s of "
                        f"scheme {cfg.scheme!r} ({name(i)}; "
                        "contact stiffness and masses, see integrate.stability_bound); reduce dt_s")
