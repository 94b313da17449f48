"""Design sensitivities: derivatives of peak contact force and amplification factors by autodiff.

For every variant of a spec of any registered mechanism, the metrics of its study
(``jaxclear.study``; for the slider-crank

    peak_contact_force_N, smooth_peak_contact_force_N, peak_slider_acceleration_m_per_s2,
    smooth_peak_slider_acceleration_m_per_s2, daf_contact_force, smooth_daf_contact_force,
    daf_slider_acceleration, smooth_daf_slider_acceleration,

the four-bar the same with the follower's angular acceleration, the impact oscillator its peak
stop force, peak displacement and friction work, the plate compactor its advance speed,
amplitudes and peaks) and their derivatives d(metric)/d(KEY) with respect to scalar spec keys (the dotted paths that
``jaxclear run --set`` takes: ``joint.clearance_m``, ``joint.journal_radius_m``,
``profile.fourier_a2_m``, ``laws.restitution``, ``laws.friction_coefficient``,
``laws.youngs_modulus_Pa`` or a numeric ``laws.stiffness``, ``model.crank_speed_rpm``,
``model.rod_mass_kg``, ...) and, for a measured bushing, ``profile.points``: the radial
displacement of each measured point (columns ``d(metric)/d(profile.points[k])``, 1/m).

Differentiation goes through the whole fixed-step simulation (``lax.scan``):

* ``mode="forward"``: ``jax.jacfwd`` (one tangent per key; memory independent of the steps),
* ``mode="reverse"``: ``jax.jacrev`` with ``jax.checkpoint`` around each save block of the
  nested scan, so memory is O(n_saves + save_every) states instead of O(steps) (choose
  ``integrator.save_every`` ≈ √steps),
* ``mode="auto"``: forward when the keys are not more than the metrics, else reverse;

both batched with ``vmap`` over the variants.  The run length is fixed by the spec (it does
not move with ``model.crank_speed_rpm``).  Bearing radius R_B = R_J + c: ∂/∂R_B at fixed R_J is
∂/∂c; ∂/∂R_J at fixed R_B is ∂/∂R_J − ∂/∂c.

What is differentiable: every metric is a differentiable function of the trajectory where the
trajectory is; the contact laws are C¹ at contact onset (δ^n, n > 1, with the double-where
guards of ``_math``) and norms at zero use the double-where trick, so gradients stay finite
when contact starts or ends within a step.  The exact peaks are maxima: their derivative is a
subgradient (see ``metrics``); the smooth peaks (power means, ``metrics.smooth_peak``) are C¹.
Long runs through many impacts are chaotic: derivatives then exist but grow with time and stop
being informative; sensitivity specs simulate through the first impacts (a few ms).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from . import metrics, sweep
from . import spec as specmod
from . import study as study_
from .mechanisms import _clearance

MODES = ("auto", "forward", "reverse")
POINTS_KEY = _clearance.POINTS_KEY  # radial displacements of a measured bushing's points (clearance mechanisms)


def __getattr__(name):
    if name == "METRICS":  # the slider-crank's metrics, under their older module-level name
        from .mechanisms import slider_crank

        return slider_crank.STUDY_METRICS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def column(metric, key):
    """The sensitivity.csv column of d(metric)/d(key)."""
    return f"d({metric})/d({key})"


def differentiable_keys(spec):
    """The keys ``--wrt`` accepts for this spec: every float of its sweepable tables (a joint's
    own ``joints.<name>...`` values where the spec gives them) and the mechanism's extra ones."""
    flat = specmod.flat_values(spec)
    keys = [k for k in specmod.schema_of(spec).floats() if k in flat]
    hook = getattr(sweep.mechanism_of(spec), "differentiable_keys", None)
    return keys + (list(hook(spec)) if hook else [])


def check_keys(spec, keys):
    """Raise SpecError for an empty, repeated or non-differentiable key (naming the allowed ones)."""
    if not keys:
        raise specmod.SpecError("--wrt: give at least one key, e.g. --wrt joint.clearance_m,laws.restitution")
    allowed = differentiable_keys(spec)
    for k in keys:
        if k not in allowed:
            hint = specmod._did_you_mean(k, allowed)
            why = ""
            if k == "laws.stiffness":
                why = " (laws.stiffness = 'auto' is computed from laws.youngs_modulus_Pa: differentiate that)"
            elif k == POINTS_KEY:
                why = " (needs profile.kind = 'measured')"
            raise specmod.SpecError(
                f"--wrt {k!r}: not a differentiable scalar of this spec{why}{hint}; allowed: {', '.join(allowed)}"
            )
    if len(set(keys)) != len(keys):
        raise specmod.SpecError(f"--wrt {','.join(keys)}: a key is repeated")


def metric_function(spec, plan_: sweep.Plan, keys, checkpoint=False, cfg=None):
    """f(theta, swept, dr) -> the study's metrics (M,) of one variant (pure, traceable; names
    in ``study.of(spec, plan_).metrics``): theta (K,) values of the scalar keys (``profile.points``
    excluded), swept {path: value} the variant's other swept inputs, dr (N,) radial
    displacements [m] of the measured profile points or None.  The same model ``jaxclear run``
    simulates (``jaxclear.study``); ``cfg`` replaces the plan's static configuration."""
    scalar_keys = [k for k in keys if k != POINTS_KEY]
    _, f = study_.metric_function(spec, plan_, scalar_keys, checkpoint=checkpoint, cfg=cfg)
    return lambda theta, swept, dr=None: f(theta, swept, None if dr is None else {POINTS_KEY: dr})


def _choose_mode(mode, n_inputs, n_metrics):
    if mode not in MODES:
        raise specmod.SpecError(f"--mode {mode!r}; allowed: {', '.join(MODES)}")
    if mode == "auto":
        return "forward" if n_inputs <= n_metrics else "reverse"
    return mode


def _variant_inputs(spec, plan_, keys, idx, dtype):
    """theta (b, K) for the scalar keys and the other swept inputs {path: (b,)} of variants idx."""
    flat = sweep.variant_flat(spec, plan_, idx)
    scalar_keys = [k for k in keys if k != POINTS_KEY]
    theta = (
        np.stack([np.broadcast_to(np.asarray(flat[k], float), (len(idx),)) for k in scalar_keys], axis=-1)
        if scalar_keys
        else np.zeros((len(idx), 0))
    )
    swept = {k: jnp.asarray(flat[k], dtype) for k in plan_.paths if k not in scalar_keys}
    return jnp.asarray(theta, dtype), swept


def compute(spec_or_path, keys, overrides=(), mode="auto", log=None, chunk=None):
    """Metrics and their derivatives for every variant of a spec.

    Returns a dict: ``inputs`` {column: (B,)} (the swept inputs), ``metrics`` {name: (B,)},
    ``gradients`` {column(metric, key): (B,)}, ``finite`` (B,), ``keys`` (the expanded key
    list: ``profile.points`` becomes ``profile.points[k]``), ``values`` {key: (B,)} (the point
    at which each derivative is taken), ``mode``, ``wall_s``, ``compile_s``.
    """
    spec = (
        spec_or_path
        if isinstance(spec_or_path, dict) and "_base_dir" in spec_or_path
        else specmod.load(spec_or_path, overrides)
    )
    keys = list(keys)
    check_keys(spec, keys)
    spec = {**spec, "_traced": tuple(keys)}  # no traced key is made a static constant of the model
    pl = sweep.plan(spec)
    dtype = jnp.float64 if pl.dtype == "float64" else jnp.float32
    scalar_keys = [k for k in keys if k != POINTS_KEY]
    n_pts = pl.cfg.joint.n_points if POINTS_KEY in keys else 0
    st = study_.of(spec, pl)
    mode = _choose_mode(mode, len(scalar_keys) + n_pts, len(st.metrics))
    f = metric_function(spec, pl, keys, checkpoint=(mode == "reverse"))

    def g(x, swept):  # x = [theta, dr]: one flat input vector, one Jacobian
        theta, dr = x[: len(scalar_keys)], (x[len(scalar_keys) :] if n_pts else None)
        y = f(theta, swept, dr)
        return y, y

    jac = jax.jacfwd(g, has_aux=True) if mode == "forward" else jax.jacrev(g, has_aux=True)
    fn = jax.jit(jax.vmap(jac))
    B = pl.n_variants
    chunk = min(B, chunk or pl.chunk_size)
    J, Y = [], []
    t0 = time.perf_counter()
    compiled, compile_s = None, 0.0
    for i0 in range(0, B, chunk):
        idx = np.arange(i0, min(B, i0 + chunk))
        pidx = np.concatenate([idx, np.full(chunk - len(idx), idx[-1])])  # pad: one compiled shape
        theta, swept = _variant_inputs(spec, pl, keys, pidx, dtype)
        x = jnp.concatenate([theta, jnp.zeros((chunk, n_pts), dtype)], axis=1)
        if compiled is None:
            tc = time.perf_counter()
            compiled = fn.lower(x, swept).compile()
            compile_s = time.perf_counter() - tc
        jj, yy = compiled(x, swept)
        J.append(np.asarray(jj)[: len(idx)])
        Y.append(np.asarray(yy)[: len(idx)])
        if log:
            log(f"sensitivity: {idx[-1] + 1}/{B} variants ({mode} mode)")
    Jm, Ym = np.concatenate(J), np.concatenate(Y)
    wall = time.perf_counter() - t0 - compile_s
    exp_keys = scalar_keys + [f"{POINTS_KEY}[{k}]" for k in range(n_pts)]
    flat = sweep.variant_flat(spec, pl, np.arange(B))
    out = {
        "keys": exp_keys,
        "mode": mode,
        "inputs": {specmod.column_name(p): pl.values[:, j] for j, p in enumerate(pl.paths)},
        "values": {k: np.broadcast_to(np.asarray(flat[k], float), (B,)).copy() for k in scalar_keys},
        "metrics": {m: Ym[:, i] for i, m in enumerate(st.metrics)},
        "metric_names": list(st.metrics),
        "primary": st.primary,
        "gradients": {column(m, k): Jm[:, i, j] for i, m in enumerate(st.metrics) for j, k in enumerate(exp_keys)},
        "wall_s": wall,
        "compile_s": compile_s,
        "steps_per_variant": pl.cfg.n_steps,
        "dt_s": pl.cfg.dt,
    }
    out["finite"] = np.isfinite(Ym).all(axis=1) & np.isfinite(Jm).all(axis=(1, 2))
    return out


def normalised(res, metric=None):
    """Elasticities (θ/M)·∂M/∂θ of one metric (default: the study's primary) per scalar key, per
    variant {key: (B,)}."""
    m = res["metrics"][metric or res["primary"]]
    return {k: res["values"][k] * res["gradients"][column(metric, k)] / m for k in res["values"]}


def write(res, out):
    """DIR/sensitivity.csv, DIR/sensitivity.json and DIR/tornado.png."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = {**res["inputs"], **res["metrics"], **res["gradients"], "finite": res["finite"]}
    sweep.write_csv(out / "sensitivity.csv", table)
    doc = {k: res[k] for k in ("keys", "mode", "wall_s", "compile_s", "steps_per_variant", "dt_s")}
    names = res["metric_names"]
    doc["metrics_names"] = names
    doc["primary"] = res["primary"]
    doc["smooth_exponent"] = metrics.SMOOTH_EXPONENT
    doc["variants"] = []
    norm = {m: normalised(res, m) for m in names}
    B = len(res["finite"])
    for i in range(B):
        doc["variants"].append(
            {
                "inputs": {k: float(v[i]) for k, v in res["inputs"].items()},
                "values": {k: float(v[i]) for k, v in res["values"].items()},
                "metrics": {k: float(v[i]) for k, v in res["metrics"].items()},
                "gradients": {m: {k: float(res["gradients"][column(m, k)][i]) for k in res["keys"]} for m in names},
                "normalised": {m: {k: float(norm[m][k][i]) for k in norm[m]} for m in names},
                "finite": bool(res["finite"][i]),
            }
        )
    (out / "sensitivity.json").write_text(json.dumps(doc, indent=1, default=float))
    if res["values"]:
        tornado(res, out / "tornado.png")


def tornado(res, path, metrics_=None):
    """Tornado plot (``plots.tornado``) of the elasticities (θ/M)·∂M/∂θ, mean over variants: by
    default the study's primary metric and, where it is a smooth peak, its exact twin."""
    from . import plots

    primary = res["primary"]
    if metrics_ is None:
        twin = primary.replace("smooth_", "", 1)
        metrics_ = (primary, twin) if twin != primary and twin in res["metrics"] else (primary,)
    e = {m: {k: float(np.nanmean(v)) for k, v in normalised(res, m).items()} for m in metrics_}
    fig, ax = plots.plt.subplots(figsize=(7, 0.5 * len(res["values"]) + 1.5))
    plots.tornado(ax, e)
    ax.set_title(f"Sensitivity of {primary}")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.08)
    plots.plt.close(fig)
