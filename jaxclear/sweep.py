"""Sweeps: spec -> static model config + batched params -> chunks of jit(vmap(simulate)) -> results.

The variant axis is the leading axis of every leaf of the params pytree; each chunk is padded
to ``integrator.chunk_size`` (repeating its last variant) so one compiled function serves all
chunks.  Each finished chunk is written to the zarr store ``DIR/store.zarr`` (``jaxclear.store``:
data first, its completion flag last), so an interrupted run resumed on the same DIR recomputes
only the chunks not marked done; a store of another spec is refused unless ``force``.
"""

from __future__ import annotations

import json
import math
import platform
import time
import warnings
from dataclasses import dataclass, fields, replace
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from . import __version__, integrate, joints, laws, metrics, parallel, profiles, spec as specmod, store
from .mechanisms import slider_crank as sc

JOINT_NAMES = sc.JOINTS


@dataclass(frozen=True)
class Plan:
    """Everything static about a sweep: model config, sizes, the variant table."""

    cfg: sc.Config
    paths: tuple
    values: np.ndarray  # (B, n_axes)
    t_end: float
    dtype: str
    chunk_size: int

    @property
    def n_variants(self):
        return self.values.shape[0]


def _flat(spec):
    """All scalar/list parameters as {dotted path: value} from the sweepable tables."""
    return {f"{s}.{k}": v for s in specmod.SWEEPABLE_SECTIONS for k, v in spec[s].items()}


def make_config(spec, t_end) -> sc.Config:
    pr, lw, it = spec["profile"], spec["laws"], spec["integrator"]
    method = pr["method"]
    if method == "auto":
        method = "analytic" if pr["kind"] == "circle" else "points"
    geom = "circle" if method == "analytic" else "points"
    n_points = pr["n_points"] if geom == "points" else 0
    if pr["kind"] == "measured":
        n_points = len(_measured(spec, None)) if not n_points else n_points
    jc = joints.JointConfig(geometry=geom, n_points=n_points,
                            max_regions=pr["max_regions"] if geom == "points" else 1,
                            refine=pr["refine"], normal_law=lw["normal"], friction=lw["friction"])
    dt = it["dt_s"]
    save_every = it["save_every"]
    n_steps = max(1, int(math.ceil(t_end / dt - 1e-9)))
    n_saves = max(1, int(math.ceil(n_steps / save_every)))
    min_cont = max(1, int(round(it["continuous_contact_s"] / dt)))
    return sc.Config(clearance_joint=spec["model"]["clearance_joint"], joint=jc, scheme=it["scheme"],
                     dt=dt, n_saves=n_saves, save_every=save_every,
                     outputs=tuple(spec["outputs"]["histories"]), min_continuous_steps=min_cont).validate()


def _measured(spec, n_points):
    """Measured bushing points from profile.path (CSV), errors re-raised naming the key."""
    path = _profile_path(spec)
    try:
        return np.asarray(profiles.measured(path=path, n_points=n_points))
    except ValueError as e:
        raise specmod.SpecError(f"profile.path = {str(path)!r}: {e}") from None


def _profile_path(spec):
    p = Path(spec["profile"]["path"])
    return p if p.is_absolute() else Path(spec.get("_base_dir", ".")) / p


def plan(spec) -> Plan:
    paths, values = specmod.axes_values(spec)
    flat = _flat(spec)
    rpm = np.full(values.shape[0], float(flat["model.crank_speed_rpm"]))
    ramp = np.full(values.shape[0], float(flat["model.ramp_time_s"]))
    for j, pth in enumerate(paths):
        if pth == "model.crank_speed_rpm":
            rpm = values[:, j]
        if pth == "model.ramp_time_s":
            ramp = values[:, j]
    it = spec["integrator"]
    if it["t_end_s"] > 0:
        t_end = float(it["t_end_s"])
    else:
        t_end = float(np.max(ramp + it["revolutions"] * 60.0 / rpm))
    cfg = make_config(spec, t_end)
    B = max(1, values.shape[0])
    cs = it["chunk_size"] or parallel.auto_chunk_size(B, bytes_per_variant(cfg, it["precision"]))
    p = Plan(cfg=cfg, paths=tuple(paths), values=values, t_end=cfg.n_steps * cfg.dt,
             dtype=it["precision"], chunk_size=min(cs, B))
    check_variants(spec, p)
    if p.dtype == "float32":
        _warn_float32(spec, p)
    return p


def bytes_per_variant(cfg: sc.Config, precision: str) -> float:
    """Rough device bytes of one variant (for the automatic chunk size): the saved histories
    (n_saves × channels × joints) twice (result + scan stacking) plus params, carry and
    per-step temporaries (~16 kB, more with profile points)."""
    item = 4 if precision == "float32" else 8
    hist = cfg.n_saves * max(1, len(cfg.outputs)) * cfg.n_joints * item
    return 2.0 * hist + 16384 + 64 * cfg.joint.n_points * item


def _warn_float32(spec, plan_: Plan):
    """Warn when float32 cannot resolve µm penetrations: the position of the slider,
    ~(r + L), carries a rounding of eps₃₂·(r + L); above 1 % of the clearance the contact
    force is noise."""
    flat = _variant_flat(spec, plan_, np.arange(plan_.n_variants))
    scale = np.max(np.asarray(flat["model.crank_length_m"]) + np.asarray(flat["model.rod_length_m"]))
    c = float(np.min(flat["joint.clearance_m"]))
    res = float(np.finfo(np.float32).eps) * scale
    if res > 0.01 * c:
        warnings.warn(f"integrator.precision = 'float32' resolves positions to {res:.2g} m, more than 1% of "
                      f"joint.clearance_m = {c:g}: penetrations and contact forces will be noisy; use float64",
                      stacklevel=3)


def _variant_flat(spec, plan_: Plan, idx):
    """{path: np.array (b,)} for the swept paths, scalars for the others."""
    flat = _flat(spec)
    for j, pth in enumerate(plan_.paths):
        flat[pth] = plan_.values[idx, j]
    return flat


def _profile_points(spec, flat, rb, n_points, dtype):
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
                for h in range(1, specmod.MAX_HARMONIC + 1) if f"profile.fourier_{c}{h}_m" in flat}
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
        return jnp.asarray(_measured(spec, n_points), dtype)
    raise specmod.SpecError(f"profile.kind = {kind!r}")


def params_from_flat(spec, cfg: sc.Config, flat, dtype):
    """Build slider-crank Params for one variant from {dotted path: scalar} (traceable)."""
    f = lambda k: jnp.asarray(flat[k], dtype)
    m, lw = "model.", "laws."
    rj, c = f("joint.journal_radius_m"), f("joint.clearance_m")
    rb = rj + c
    if spec["laws"]["stiffness"] == "auto":
        k = laws.internal_cylinder_stiffness(rj, rb, f(lw + "youngs_modulus_Pa"), f(lw + "poisson_ratio"),
                                             f(lw + "youngs_modulus_Pa"), f(lw + "poisson_ratio"))
    else:
        k = jnp.asarray(spec["laws"]["stiffness"], dtype)
    if cfg.joint.geometry == "points":
        pts = _profile_points(spec, flat, rb, cfg.joint.n_points, dtype).astype(dtype)
    else:
        pts = jnp.zeros((1, 2), dtype)
    jp = joints.JointParams(journal_radius=rj, clearance=c, points=pts, stiffness=k,
                            exponent=f(lw + "exponent"), restitution=f(lw + "restitution"),
                            damping=f(lw + "damping_N_s_per_m"),
                            friction_coefficient=f(lw + "friction_coefficient"),
                            v0=f(lw + "friction_v0_m_per_s"), v1=f(lw + "friction_v1_m_per_s"))
    if cfg.n_joints == 2:
        jp = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), jp)
    omega = f(m + "crank_speed_rpm") * (2 * math.pi / 60)
    ramp = f(m + "ramp_time_s")
    return sc.Params(crank_length=f(m + "crank_length_m"), rod_length=f(m + "rod_length_m"),
                     crank_mass=f(m + "crank_mass_kg"), rod_mass=f(m + "rod_mass_kg"),
                     slider_mass=f(m + "slider_mass_kg"), crank_inertia=f(m + "crank_inertia_kg_m2"),
                     rod_inertia=f(m + "rod_inertia_kg_m2"), slider_inertia=f(m + "slider_inertia_kg_m2"),
                     crank_speed=omega, ramp_time=ramp, gravity=f(m + "gravity_m_per_s2"),
                     steady_start=jnp.asarray(0.0, dtype), joint=jp)


def batch_params(spec, plan_: Plan, idx):
    """Params with a leading variant axis for the variant indices ``idx``."""
    dtype = jnp.float64 if plan_.dtype == "float64" else jnp.float32
    flat = _variant_flat(spec, plan_, idx)
    swept = {k: jnp.asarray(flat[k], dtype) for k in plan_.paths}
    fixed = {k: v for k, v in flat.items() if k not in swept}
    steady_rev = spec["integrator"]["steady_revolutions"]

    def one(sw):
        p = params_from_flat(spec, plan_.cfg, {**fixed, **sw}, dtype)
        period = 2 * math.pi / p.crank_speed
        return p._replace(steady_start=jnp.maximum(plan_.t_end - steady_rev * period, 0.0).astype(dtype))

    if not swept:
        p = one({})
        return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (len(idx),) + x.shape), p)
    return jax.vmap(one)(swept)


def stability_dt(p: sc.Params, scheme):
    """Conservative stable dt [s] per variant (``integrate.stability_bound``).

    Linearised Hertz stiffness k = n K δ^(n−1) at the penetration δ reached when the smaller of
    the rod and slider masses hits at the crank-pin speed r·ω (energy balance
    ½ m v² = K δ^(n+1)/(n+1)); ω_c = √(k/m).
    """
    jp = p.joint
    m = jnp.minimum(p.rod_mass, p.slider_mass)
    v = p.crank_length * p.crank_speed
    n = jp.exponent
    K = jp.stiffness
    if K.ndim > m.ndim:  # two joints: take the stiffer
        K, n = jnp.max(K, axis=-1), jnp.max(n, axis=-1)
    delta = (0.5 * m * v * v * (n + 1) / K) ** (1.0 / (n + 1))
    k_lin = n * K * delta ** (n - 1)
    return integrate.stability_bound(scheme, k_lin, m)


def check_variants(spec, plan_: Plan, block=4096):
    """Physics checks over all variants before compiling (raises SpecError): ranges, unit
    guards and cross-field checks (``spec.check_values``), then, block by block of params,
    the bushing staying outside the journal and dt under the stability bound."""
    B = plan_.n_variants
    specmod.check_values(_variant_flat(spec, plan_, np.arange(B)))
    dt = plan_.cfg.dt
    for i0 in range(0, B, block):
        idx = np.arange(i0, min(B, i0 + block))
        p = batch_params(spec, plan_, idx)
        if plan_.cfg.joint.geometry == "points":
            rmin = np.min(np.linalg.norm(np.asarray(p.joint.points), axis=-1), axis=-1)
            rj = np.asarray(p.joint.journal_radius).reshape(rmin.shape[0], -1)[:, 0]
            if np.any(rmin <= rj):
                i = int(np.argmin(rmin - rj))
                raise specmod.SpecError(f"profile: the bushing profile of variant {i0 + i}{_swept_text(plan_, i0 + i)} "
                                        f"comes within {rmin[i]:.6g} m of its centre, not larger than "
                                        f"joint.journal_radius_m = {rj[i]:.6g}: the journal must be smaller than "
                                        "the bearing")
        bound = np.asarray(stability_dt(p, plan_.cfg.scheme))
        if np.any(dt > bound):
            i = int(np.argmin(bound))
            raise specmod.SpecError(f"integrator.dt_s = {dt:g} exceeds the stability bound {bound[i]:.3g} s of "
                                    f"scheme {plan_.cfg.scheme!r} (variant {i0 + i}{_swept_text(plan_, i0 + i)}; "
                                    "contact stiffness and masses, see integrate.stability_bound); reduce dt_s")


def _swept_text(plan_: Plan, i):
    if not plan_.paths:
        return ""
    return " (" + ", ".join(f"{pth} = {plan_.values[i, j]:.6g}" for j, pth in enumerate(plan_.paths)) + ")"


def _nbytes(tree):
    return int(sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(tree)))


def estimate(spec_or_path, overrides=(), probe_steps=200):
    """What a sweep costs, without running it (``jaxclear plan``): a dict of sizes, chunking,
    memory per chunk, result-store size and, from a probe, compile and run time.

    Memory per chunk = params + outputs of the compiled chunk function (shapes of the full run,
    ``jax.eval_shape``) + its temporaries (``Compiled.memory_analysis()`` of the probe, when
    the backend reports it).  The probe compiles the chunk function with the same structure and
    chunk size for ~``probe_steps`` steps, runs it once to warm up, times a second run and
    extrapolates linearly to the full step count and every chunk (contact-dependent branches
    are selects under vmap, so the cost per step is nearly uniform).  ``probe_steps=0`` skips
    the probe (no compile; time and temporaries are then None).
    """
    spec = (spec_or_path if isinstance(spec_or_path, dict) and "_base_dir" in spec_or_path
            else specmod.load(spec_or_path, overrides))
    pl = plan(spec)
    cfg, B, cs = pl.cfg, pl.n_variants, pl.chunk_size
    n_chunks = math.ceil(B / cs)
    ex = exec_size(cs)  # the executed (device-padded) chunk: what the compiled function sees
    example = batch_params(spec, pl, _padded(np.arange(cs), ex))
    out_shape = jax.eval_shape(jax.vmap(lambda p: sc.simulate(cfg, p)), example)
    params_b, out_b, hist_chunk_b = _nbytes(example), _nbytes(out_shape), _nbytes(out_shape.history)
    hist_per_variant = hist_chunk_b // ex
    n_joints = cfg.n_joints
    n_metrics = 22 + (6 * n_joints if n_joints > 1 else 0)  # chunk_metrics columns (approximate)
    metrics_b = B * (n_metrics + len(pl.paths)) * 8
    est = {
        "name": spec["sweep"]["name"], "n_variants": int(B),
        "axes": specmod.axes_info(spec),
        "sampling": {"n": spec["sampling"]["n"], "seed": spec["sampling"]["seed"],
                     "method": spec["sampling"].get("method", "random")},
        "chunk_size": int(cs), "n_chunks": int(n_chunks), "padding": int(n_chunks * cs - B),
        "steps_per_variant": int(cfg.n_steps), "dt_s": cfg.dt, "t_end_s": pl.t_end,
        "save_every": cfg.save_every, "n_saves": cfg.n_saves, "channels": list(cfg.outputs),
        "precision": pl.dtype, "scheme": cfg.scheme, "geometry": cfg.joint.geometry,
        "n_points": cfg.joint.n_points, "clearance_joint": cfg.clearance_joint,
        "params_bytes_per_chunk": params_b, "output_bytes_per_chunk": out_b,
        "history_bytes_per_chunk": hist_chunk_b, "temp_bytes_per_chunk": None,
        "memory_bytes_per_chunk": params_b + out_b,
        "history_bytes": int(B * hist_per_variant), "metrics_bytes": int(metrics_b),
        "store_bytes": int(B * hist_per_variant + metrics_b),
        "probe_steps": 0, "compile_s": None, "probe_run_s": None, "variant_steps_per_s": None,
        "run_s_per_chunk": None, "run_s": None, "total_s": None,
        "device_kind": jax.devices()[0].device_kind, "device_count": len(jax.devices()),
    }
    if probe_steps <= 0:
        return est
    se = min(cfg.save_every, probe_steps)
    pcfg = replace(cfg, save_every=se, n_saves=max(1, math.ceil(probe_steps / se)))
    ppl = replace(pl, cfg=pcfg)
    parallel.enable_compile_cache()
    fn, compile_s = compiled(ppl, example)
    if jax.local_device_count() > 1:
        example = jax.device_put(example, parallel.variant_sharding())
    jax.block_until_ready(fn(example))  # warm-up (first-call transfers)
    t0 = time.perf_counter()
    jax.block_until_ready(fn(example))
    t_probe = time.perf_counter() - t0
    temp = None
    try:
        ma = fn.memory_analysis()
        temp = int(ma.temp_size_in_bytes) if ma is not None else None
    except (AttributeError, NotImplementedError, jax.errors.JaxRuntimeError):
        pass
    per_chunk = t_probe * cfg.n_steps / pcfg.n_steps
    est.update({
        "probe_steps": int(pcfg.n_steps), "compile_s": compile_s, "probe_run_s": t_probe,
        "variant_steps_per_s": cs * pcfg.n_steps / t_probe if t_probe > 0 else None,
        "run_s_per_chunk": per_chunk, "run_s": per_chunk * n_chunks, "total_s": per_chunk * n_chunks + compile_s,
        "temp_bytes_per_chunk": temp,
        "memory_bytes_per_chunk": params_b + out_b + (temp or 0),
    })
    return est


def _cast(p, dtype):
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, p)


def compiled(plan_: Plan, example):
    """jit(vmap(simulate)) lowered and compiled for the chunk shape, cached per Config in this
    process (and across processes by the persistent compile cache, ``parallel``); with several
    local devices the variant axis is sharded over them (``parallel.variant_sharding``).
    Returns (compiled function, seconds spent compiling now: 0 on an in-process hit)."""
    nd = jax.local_device_count()
    key = (plan_.cfg, plan_.dtype, nd, jax.tree_util.tree_structure(example),
           tuple(x.shape for x in jax.tree_util.tree_leaves(example)))
    if key in _CACHE:
        return _CACHE[key], 0.0
    sim = jax.vmap(lambda p: sc.simulate(plan_.cfg, p))
    if nd > 1:
        sh = parallel.variant_sharding()
        fn = jax.jit(sim, in_shardings=(sh,), out_shardings=sh)
        example = jax.device_put(example, sh)
    else:
        fn = jax.jit(sim)
    t0 = time.perf_counter()
    _CACHE[key] = fn.lower(example).compile()
    return _CACHE[key], time.perf_counter() - t0


def exec_size(chunk_size: int) -> int:
    """Variants per executed call: the chunk padded to a multiple of the local device count."""
    return parallel.padded_size(chunk_size, jax.local_device_count())


_CACHE: dict = {}


@partial(jax.jit, static_argnums=(2,))
def _ideal_peaks_batch(p, t_end, n_samples):
    return jax.vmap(lambda pp: sc.ideal_peaks(pp, t_end, pp.steady_start, n_samples=n_samples))(p)


def _peak_columns(out, what, unit, ideal_col, peak, peak_s, ideal, ideal_s):
    """peak_<what><unit>, its steady twin, the ideal peak, DE (seed 001) and plain ratios."""
    out[f"peak_{what}{unit}"] = peak
    out[f"peak_{what}_steady{unit}"] = peak_s
    out[ideal_col] = ideal
    out[ideal_col.replace(unit, "_steady" + unit)] = ideal_s
    out[f"daf_{what}"] = metrics.amplification(peak, ideal)
    out[f"daf_{what}_steady"] = metrics.amplification(peak_s, ideal_s)
    out[f"ratio_{what}"] = peak / ideal
    out[f"ratio_{what}_steady"] = peak_s / ideal_s


def chunk_metrics(spec, plan_: Plan, p, res, n_real):
    """Metrics table rows (dict of arrays) for one chunk."""
    t_end = plan_.t_end
    acc = jax.tree_util.tree_map(lambda x: np.asarray(x)[:n_real], res.acc)
    # ≥ 1024 samples per crank revolution of the fastest variant: peak sampling error < 1e-5.
    revs = float(np.max(np.asarray(p.crank_speed))) * t_end / (2 * math.pi)
    n_samples = int(min(2 ** 18, max(2048, 1024 * math.ceil(revs)))) + 1
    ideal_full, ideal_steady = _ideal_peaks_batch(p, t_end, n_samples)
    ideal_full = {k: np.asarray(v)[:n_real] for k, v in ideal_full.items()}
    ideal_steady = {k: np.asarray(v)[:n_real] for k, v in ideal_steady.items()}
    names = JOINT_NAMES[plan_.cfg.clearance_joint]
    out = {}
    ref = np.maximum.reduce([ideal_full["reaction_" + n] for n in names])
    refs = np.maximum.reduce([ideal_steady["reaction_" + n] for n in names])
    _peak_columns(out, "contact_force", "_N", "ideal_peak_reaction_N",
                  acc.peak_force.max(axis=1), acc.peak_force_steady.max(axis=1), ref, refs)
    _peak_columns(out, "slider_acceleration", "_m_per_s2", "ideal_peak_slider_acceleration_m_per_s2",
                  acc.peak_acc, acc.peak_acc_steady,
                  ideal_full["slider_acceleration"], ideal_steady["slider_acceleration"])
    free, imp, cont = (np.asarray(x) for x in metrics.motion_fractions(acc))
    out["impacts"] = acc.impacts.sum(axis=1)
    out["free_flight_fraction"] = free.mean(axis=1)
    out["impact_fraction"] = imp.mean(axis=1)
    out["continuous_contact_fraction"] = cont.mean(axis=1)
    out["max_contact_regions"] = acc.max_regions.max(axis=1)
    if len(names) > 1:
        for j, nm in enumerate(names):
            out[f"peak_contact_force_{nm}_N"] = acc.peak_force[:, j]
            out[f"daf_contact_force_{nm}"] = metrics.amplification(acc.peak_force[:, j], ideal_full["reaction_" + nm])
            out[f"impacts_{nm}"] = acc.impacts[:, j]
            out[f"free_flight_fraction_{nm}"] = free[:, j]
            out[f"impact_fraction_{nm}"] = imp[:, j]
            out[f"continuous_contact_fraction_{nm}"] = cont[:, j]
    fin = acc.finite & np.isfinite(np.asarray(res.q)[:n_real]).all(axis=1) & np.isfinite(np.asarray(res.v)[:n_real]).all(axis=1)
    out["finite"] = fin
    return out


def _chunk_indices(ci, cs, n):
    return np.arange(ci * cs, min(n, (ci + 1) * cs))


def _padded(idx, cs):
    """A chunk's variant indices padded to ``cs`` by repeating its last variant."""
    return np.concatenate([idx, np.full(cs - len(idx), idx[-1])])


def _pending_chunks(st, n_chunks):
    """Indices of the chunks still to compute, in order: those whose ``chunk_done`` flag is not set
    (every chunk when there is no store).  A multi-host runner takes its share of this list."""
    if st is None:
        return list(range(n_chunks))
    return [int(i) for i in np.nonzero(~store.done_flags(st))[0]]


def _execute_chunk(pl, p):
    """Run the compiled sweep function on one padded chunk ``p`` (leading axis chunk_size) and
    return its Result once computed (the unit a multi-device runner places per device)."""
    fn, _ = compiled(pl, p)
    if jax.local_device_count() > 1:
        p = jax.device_put(p, parallel.variant_sharding())
    res = fn(p)
    jax.block_until_ready(res)
    return res


def _clean_spec(spec):
    return {k: v for k, v in spec.items() if not k.startswith("_")}


def _open_store(outdir, spec, pl, h, force, log):
    """(store group, fresh): the existing store of the same spec, else a new one.  A store of a
    different spec is refused (SpecError) unless ``force``, which deletes it."""
    path = store.path_of(outdir)
    store.remove_partial_files(outdir)
    if store.exists(outdir):
        try:
            g = store.open(outdir)
            old = g.attrs.get("spec_hash")
        except Exception as e:  # unreadable / other format
            g, old = None, f"unreadable ({e})"
        if g is not None and old == h and not force:
            if g.attrs.get("version") != __version__:
                log(f"note: {path} was started by jaxclear {g.attrs.get('version')}, resuming with {__version__}")
            return g, False
        _check_other_spec(outdir, h, force)  # another spec: refused unless force
        log(f"--force: deleting {path} (spec_hash {old}) and starting over")
    names = JOINT_NAMES[pl.cfg.clearance_joint]
    g = store.create(outdir, spec_json=json.dumps(_clean_spec(spec), sort_keys=True), spec_hash=h,
                     version=__version__, name=spec["sweep"]["name"], n_variants=pl.n_variants,
                     chunk_size=pl.chunk_size, t_s=_times(pl), inputs=_inputs(pl), joints=names,
                     dt_s=pl.cfg.dt, save_every=pl.cfg.save_every, base_dir=spec.get("_base_dir", "."))
    return g, True


def _times(pl):
    return (np.arange(pl.cfg.n_saves) + 1) * pl.cfg.save_every * pl.cfg.dt


def _inputs(pl):
    return {specmod.column_name(pth): pl.values[:, j] for j, pth in enumerate(pl.paths)}


# Derived files, regenerated from the store at the end of a run; removed while chunks are pending
# so that they never describe a store other than the one next to them.
DERIVED = ("metrics.csv", "metrics.parquet", "summary.json")


def _check_other_spec(outdir, h, force):
    """SpecError when DIR holds a store of another spec and not ``force`` (read-only check that
    every process of a multi-host run makes before the coordinator changes anything)."""
    if force or not store.exists(outdir):
        return
    try:
        old = store.open(outdir, mode="r").attrs.get("spec_hash")
    except Exception as e:  # unreadable / other format
        old = f"unreadable ({e})"
    if old != h:
        raise specmod.SpecError(
            f"{outdir} holds the results of another spec (store spec_hash {old}, this spec {h}); "
            "use --force to delete them and rerun (force=True from Python), or choose another --out")


def run(spec_or_path, out=None, overrides=(), progress=None, log=print, force=False, compile_cache=True):
    """Run a sweep; return (metrics dict of columns, summary dict, histories dict).

    With ``out`` the results go to that directory: ``store.zarr`` (the chunked result store,
    see ``jaxclear.store``), progress.jsonl, metrics.csv (+ metrics.parquet with pyarrow),
    summary.json, plots/.  Rerun on the same ``out`` with the same spec, only chunks not marked
    done are computed; a store of another spec raises SpecError unless ``force`` (start over).

    Devices and hosts (``jaxclear.parallel``): each executed chunk is sharded over the local
    devices; in a ``jax.distributed`` run (``parallel.initialize`` first) process i computes
    pending chunks i, i+P, ... into the shared store and process 0 writes the derived files.
    compile_cache: True (default dir), a directory, or False: JAX's persistent compile cache.
    """
    cache_dir = parallel.enable_compile_cache(None if compile_cache is True else compile_cache)
    spec = spec_or_path if isinstance(spec_or_path, dict) and "_base_dir" in spec_or_path else specmod.load(spec_or_path, overrides)
    pl = plan(spec)
    h = specmod.spec_hash(spec)
    outdir = Path(out) if out else None
    log = log or (lambda *a, **k: None)
    pi, pc = parallel.process_index(), parallel.process_count()
    lead = pi == 0
    t_wall = time.perf_counter()
    st, fresh = None, True
    if outdir:
        outdir.mkdir(parents=True, exist_ok=True)
        _check_other_spec(outdir, h, force)   # every process, before anyone changes anything
        parallel.barrier("jaxclear:checked")
        if lead:
            st, fresh = _open_store(outdir, spec, pl, h, force, log)
        parallel.barrier("jaxclear:store")
        if not lead:
            st, fresh = store.open(outdir), False
        if st.attrs["chunk_size"] != pl.chunk_size:
            # same spec hash, so chunk_size = 0 (automatic) chose differently on this machine:
            # keep the store's chunking to resume it
            pl = replace(pl, chunk_size=int(st.attrs["chunk_size"]))
    B, cs = pl.n_variants, pl.chunk_size
    n_chunks = math.ceil(B / cs)
    cs_exec = exec_size(cs)
    pending_all = _pending_chunks(st, n_chunks)
    pending = parallel.my_chunks(pending_all, pi, pc) if st is not None else pending_all
    reused = n_chunks - len(pending_all)
    plog = None
    if outdir:
        if pending_all and lead:
            for f in DERIVED:
                (outdir / f).unlink(missing_ok=True)
        name = "progress.jsonl" if lead else f"progress.{pi}.jsonl"
        plog = open(outdir / name, "w" if fresh or not lead else "a")
    done = B - sum(len(_chunk_indices(ci, cs, B)) for ci in pending_all)
    if reused:
        log(f"resuming {outdir}: {reused} of {n_chunks} chunks ({done} variants) reused from {store.NAME}")
        if progress:
            progress(done)
    mem: dict = {}
    compile_s = 0.0
    run_s = 0.0
    steps_done = 0
    t_loop = time.perf_counter()
    try:
        for k, ci in enumerate(pending):
            idx = _chunk_indices(ci, cs, B)
            p = batch_params(spec, pl, _padded(idx, cs_exec))
            _, c_s = compiled(pl, p)
            compile_s += c_s
            t0 = time.perf_counter()
            res = _execute_chunk(pl, p)
            run_s += time.perf_counter() - t0
            steps_done += len(idx) * pl.cfg.n_steps  # real variants only, not the padding
            m = chunk_metrics(spec, pl, p, res, len(idx))
            hh = {name: np.asarray(v)[: len(idx)] for name, v in res.history.items()}
            if st is not None:
                store.write_chunk(st, ci, m, hh)  # data first ...
                store.mark_done(st, ci)           # ... the flag last
            else:
                mem[ci] = (m, hh)
            done += len(idx)
            if plog is not None:
                el = time.perf_counter() - t_loop
                per_chunk = max(el - compile_s, 0.0) / (k + 1)
                plog.write(json.dumps({
                    "chunk": ci, "process": pi, "variants_done": done, "variants_total": B, "elapsed_s": round(el, 4),
                    "variant_steps_per_s": (steps_done / run_s) if run_s > 0 else None,
                    "eta_s": round(per_chunk * (len(pending) - k - 1), 4),
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")
                plog.flush()
            if progress:
                progress(len(idx))
    finally:
        if plog is not None:
            plog.close()
    parallel.barrier("jaxclear:chunks")  # every process's chunks are in the store
    rows = parallel.gather_rows([steps_done, run_s, compile_s, len(pending)])
    rate = float(sum(r[0] / r[1] for r in rows if r[1] > 0)) or None  # processes run side by side
    wall = time.perf_counter() - t_wall
    if st is not None:
        r = store.read(st)
        table = {**r["inputs"], **r["metrics"]}
        hists = r["histories"]
    else:
        table, hists = _concat(_inputs(pl), [mem[ci] for ci in range(n_chunks)])
    failed = [int(i) for i in np.nonzero(~table["finite"].astype(bool))[0]]
    dev = jax.devices()
    summary = {
        "name": spec["sweep"]["name"], "spec_hash": h, "version": __version__,
        "variants": int(B), "steps_per_variant": int(pl.cfg.n_steps), "dt_s": pl.cfg.dt,
        "t_end_s": pl.t_end, "save_every": pl.cfg.save_every, "chunk_size": int(cs), "chunks": n_chunks,
        "chunks_reused": reused, "chunks_computed": int(rows[:, 3].sum()),
        "store": str(store.path_of(outdir)) if outdir else None,
        "wall_s": wall, "compile_s": float(rows[:, 2].max()), "run_s": float(rows[:, 1].max()),
        "variant_steps_per_s": rate,
        "device_kind": dev[0].device_kind, "device_platform": dev[0].platform, "device_count": len(dev),
        "local_device_count": jax.local_device_count(), "process_count": pc,
        "executed_chunk_size": int(cs_exec), "compile_cache": str(cache_dir) if cache_dir else None,
        "precision": pl.dtype, "scheme": pl.cfg.scheme, "clearance_joint": pl.cfg.clearance_joint,
        "geometry": pl.cfg.joint.geometry, "n_points": pl.cfg.joint.n_points,
        "max_regions": pl.cfg.joint.max_regions, "normal_law": pl.cfg.joint.normal_law,
        "friction": pl.cfg.joint.friction,
        "steady_window": f"last {spec['integrator']['steady_revolutions']:g} crank revolution(s) of each variant, "
                         "t >= t_end - steady_revolutions*60/crank_speed_rpm",
        "continuous_contact_s": spec["integrator"]["continuous_contact_s"],
        "failed_variants": failed, "axes": [specmod.column_name(p) for p in pl.paths],
        "python": platform.python_version(), "jax": jax.__version__,
    }
    if outdir and lead:
        summary = write_outputs(outdir, spec, table, summary, hists, _times(pl))
    return table, summary, hists


def _concat(table, parts):
    """Inputs table + per-chunk (metrics, histories) in chunk order -> (table, histories)."""
    table = dict(table)
    hists = {}
    for k in parts[0][0]:
        table[k] = np.concatenate([m[k] for m, _ in parts])
    for k in parts[0][1]:
        hists[k] = np.concatenate([hh[k] for _, hh in parts])
    return table, hists


def write_csv(path, table):
    keys = list(table)
    n = len(next(iter(table.values())))
    with open(path, "w") as f:
        f.write(",".join(keys) + "\n")
        for i in range(n):
            row = []
            for k in keys:
                v = table[k][i]
                if isinstance(v, (bool, np.bool_)):
                    row.append("true" if v else "false")
                elif isinstance(v, (int, np.integer)):
                    row.append(str(int(v)))
                else:
                    row.append(repr(float(v)))
            f.write(",".join(row) + "\n")


def read_csv(path):
    """metrics.csv back into {column: np.ndarray}."""
    with open(path) as f:
        keys = f.readline().strip().split(",")
        rows = [line.strip().split(",") for line in f if line.strip()]
    out = {}
    for j, k in enumerate(keys):
        col = [r[j] for r in rows]
        if all(c in ("true", "false") for c in col):
            out[k] = np.array([c == "true" for c in col])
        else:
            out[k] = np.array([float(c) for c in col])
    return out


def write_parquet(path, table):
    """metrics table -> Parquet (needs pyarrow; ImportError naming the extra otherwise)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("Parquet output needs pyarrow: pip install pyarrow (or 'jaxclear[io]')") from None
    pq.write_table(pa.table({k: np.asarray(v) for k, v in table.items()}), str(path))


def read_parquet(path):
    import pyarrow.parquet as pq
    t = pq.read_table(str(path))
    return {k: t.column(k).to_numpy() for k in t.column_names}


def write_outputs(outdir, spec, table, summary, hists, t):
    """metrics.csv, metrics.parquet (when pyarrow imports), plots/, summary.json; returns the
    summary as written."""
    outdir = Path(outdir)
    write_csv(outdir / "metrics.csv", table)
    try:
        write_parquet(outdir / "metrics.parquet", table)
    except ImportError:
        pass
    summary = dict(summary)
    if spec["outputs"]["plots"] and "journal_x_m" in hists:
        t0 = time.perf_counter()
        summary["plots"] = _plots(outdir, spec, table, summary, hists, t)
        summary["plot_s"] = time.perf_counter() - t0
    (outdir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _plots(outdir, spec, table, summary, hists, t):
    from . import plots
    return plots.sweep_plots(outdir, table, summary, hists, t, spec)


@dataclass
class Results:
    """A sweep read back from its store (``load``); also indexable: ``r["metrics"]``.

    metrics: {column: (n_variants,)} as in metrics.csv (not-done variants: NaN, ``finite`` False,
    integer columns then float); inputs: {swept column: (n_variants,)}; histories: {channel:
    (n_variants, n_saves) or (n_variants, n_saves, n_joints)} (NaN where not done); t_s:
    (n_saves,); spec: the spec dict; summary: summary.json of the finished run (None while
    chunks are missing); chunk_done: (n_chunks,) bool; variant_done: (n_variants,) bool;
    attrs: the store's root attributes (spec_hash, version, joints, chunk_size, ...).
    """

    metrics: dict
    inputs: dict
    histories: dict
    t_s: np.ndarray
    spec: dict
    summary: dict | None
    chunk_done: np.ndarray
    variant_done: np.ndarray
    attrs: dict

    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return [f.name for f in fields(self)]

    @property
    def missing_chunks(self):
        return [int(i) for i in np.nonzero(~self.chunk_done)[0]]

    @property
    def complete(self):
        return bool(self.chunk_done.all())

    @property
    def table(self):
        """Inputs then metrics: the columns of metrics.csv."""
        return {**self.inputs, **self.metrics}


def load(out, as_xarray=False, histories=True):
    """Read a sweep directory (or its store.zarr) back: a ``Results``, or with ``as_xarray`` an
    ``xarray.Dataset`` (dims variant, time, joint; inputs as variant coordinates).  An incomplete
    store loads too: ``missing_chunks`` lists the chunks not done."""
    g = store.open(out, mode="r")
    r = store.read(g, histories=histories)
    at = r["attrs"]
    summary = None
    sj = store.path_of(out).parent / "summary.json"
    if r["chunk_done"].all() and sj.exists():
        s = json.loads(sj.read_text())
        summary = s if s.get("spec_hash") == at["spec_hash"] else None
    res = Results(metrics=r["metrics"], inputs=r["inputs"], histories=r["histories"], t_s=r["t_s"],
                  spec=store.spec_of(g), summary=summary, chunk_done=r["chunk_done"],
                  variant_done=r["variant_done"], attrs=at)
    return to_xarray(res) if as_xarray else res


def to_xarray(res: Results):
    """Results -> xarray.Dataset (ImportError with the install hint when xarray is missing)."""
    try:
        import xarray as xr
    except ImportError:
        raise ImportError("sweep.load(..., as_xarray=True) needs xarray: pip install xarray "
                          "(or 'jaxclear[io]')") from None
    n = len(res.variant_done)
    coords = {"variant": np.arange(n), "time": ("time", res.t_s, {"units": "s"}),
              "joint": list(res.attrs["joints"])}
    for c, v in res.inputs.items():
        coords[c] = ("variant", v)
    data = {"done": ("variant", res.variant_done)}
    for c, v in res.metrics.items():
        data[c] = ("variant", v)
    for c, v in res.histories.items():
        data[c] = (("variant", "time") if v.ndim == 2 else ("variant", "time", "joint"), v)
    at = res.attrs
    return xr.Dataset(data, coords=coords, attrs={
        "name": at["name"], "spec_hash": at["spec_hash"], "jaxclear_version": at["version"],
        "spec": at["spec"], "chunk_size": at["chunk_size"], "missing_chunks": res.missing_chunks})


def _done_subset(res: Results):
    """(table, histories) of the done variants only."""
    sel = res.variant_done
    table = {k: np.asarray(v)[sel] for k, v in res.table.items()}
    return table, {k: np.asarray(v)[sel] for k, v in res.histories.items()}


def plot_results(out, res: Results | None = None):
    """Regenerate DIR/plots from the store (done variants only); returns the written paths."""
    res = res if res is not None else load(out)
    if not res.variant_done.any() or "journal_x_m" not in res.histories:
        return []
    spec = res.spec
    table, hists = _done_subset(res)
    summary = {"name": res.attrs["name"], "clearance_joint": spec["model"]["clearance_joint"],
               "axes": list(res.attrs["axes"])}
    return _plots(Path(out) if Path(out).name != store.NAME else Path(out).parent, spec, table, summary,
                  hists, res.t_s)


def export(out, fmt="csv", output=None):
    """Write the metrics table of a sweep directory as csv or parquet; returns the file written
    (default DIR/metrics.<fmt>).  Variants of chunks not done are rows of NaN."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"export format {fmt!r}: use 'csv' or 'parquet'")
    res = load(out, histories=False)
    dest = Path(output) if output else store.path_of(out).parent / f"metrics.{fmt}"
    (write_csv if fmt == "csv" else write_parquet)(dest, res.table)
    return dest
