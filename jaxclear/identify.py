"""Identification of clearance parameters from a measured response, by gradient-based fitting.

A spec for ``jaxclear identify`` is a sweep spec of one variant (the model) plus the tables

    [identify]      signal = "slider_acceleration_m_per_s2"  (a saved history channel)
                    loss = "history" | "integral" | "features" | "both";  smooth_window = 1 (samples, moving mean)
                    or a list [60, 20, ...]: continuation stages, the iterations split between them
                    optimizer = "adam" | "lbfgs" | "lm";  iterations, learning_rate, starts, seed
                    screen = 0 (off) or N: a forward-only stage over N candidates first
    [identify.parameters]
                    "joint.clearance_m" = { initial = [lo, hi], bounds = [lo, hi] }   (one per key)
    [measurement]   path = "meas.csv", time_column = "time_s", signal_column = "..._m_per_s2"
    or [truth]      "joint.clearance_m" = 2.5e-4, ... ; noise_std = ... (signal units) and/or
                    noise_relative = ... (fraction of the signal's RMS); noise_seed = 0

With ``[truth]`` the tool simulates the truth, adds Gaussian noise and fits to that signal only
(the truth is reported beside the result, never used by the fit).

Model signal: the saved history y_j of the channel at t_j = (j+1)·save_every·dt, after an
optional moving mean over ``smooth_window`` samples (both model and measurement).  Losses:

    history:   L_h = mean_j (y_j(θ) − ŷ_j)² / mean_j ŷ_j²
    integral:  the same on the running integrals Y_j = Σ_{i≤j} y_i Δt (an acceleration becomes
               the velocity change: an impact is a step, whose misfit grows smoothly — about
               linearly — with the shift of its time, where a spike's misfit saturates at once)
    features:  L_f = Σ_f ((φ_f(θ) − φ̂_f)/φ̂_f)²,  φ = (smooth peak of |y| (power mean p = 16),
               RMS of y, time-weighted mean of |y|)

Impacts make the history loss rugged: a small shift of an impact time moves its spike off the
measured one.  The integral loss and the moving mean widen the basin of attraction (measured in
the README: at 0.25 mm, 1 ms of record, the integral loss decreases monotonically towards the
truth from −32 % to +40 % of the clearance, the raw history loss only within about ±5 %); a list of windows is a continuation from wide to narrow, each stage
starting where the previous ended.  Adam runs with a cosine decay of the learning rate to 5 %.

Bounds by reparametrisation: θ = lo + (hi − lo)·sigmoid(u), so every iterate is admissible
(clearance > 0, wear inside its range).  Starts: ``starts`` points drawn by Latin hypercube in
the ``initial`` ranges — or, with ``screen = N``, the ``starts`` best of N Latin-hypercube
candidates by the first stage's loss (forward simulations only, vmapped in batches: a global
stage that finds the basin in a wide box) — optimised together under ``vmap``: optax Adam,
optax L-BFGS with its zoom line search, or Levenberg–Marquardt on the residual vector
(``lm``: forward-mode Jacobian, one tangent per parameter, a step is taken only if it lowers
the loss; ``learning_rate`` is not used).  Every start ends at the best point it visited; the
best final loss wins.  Uncertainty: Gauss–Newton at the optimum,
Cov θ = s² (JᵀJ)⁻¹ with J = ∂r/∂θ of the residuals r_j = y_j(θ) − ŷ_j and
s² = rᵀr/(n − K), times the window w (see gauss_newton_std) (Seber & Wild, Nonlinear Regression, ch. 2).
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import spec as specmod
from . import study as study_
from . import sweep

LOSSES = ("history", "integral", "features", "both")
OPTIMIZERS = ("adam", "lbfgs", "lm")
LM_LAMBDA0 = 1e-2  # initial Levenberg–Marquardt damping (relative to diag JᵀJ)
DEFAULTS = {
    "signal": "slider_acceleration_m_per_s2",
    "loss": "history",
    "smooth_window": 1,
    "optimizer": "adam",
    "iterations": 100,
    "learning_rate": 0.05,
    "starts": 4,
    "seed": 0,
    "screen": 0,
}
SCREEN_BATCH = 1024  # candidates per vmapped forward batch of the screening stage
FEATURE_P = 16.0


def _err(msg):
    raise specmod.SpecError(msg)


def settings(spec):
    """The [identify] table merged with defaults and checked (raises SpecError)."""
    raw = dict(spec.get("identify") or {})
    if not raw:
        _err("identify: the spec has no [identify] table (see jaxclear.identify for its keys)")
    params = raw.pop("parameters", None)
    for k in raw:
        if k not in DEFAULTS:
            _err(
                f"unknown key identify.{k}{specmod._did_you_mean(k, DEFAULTS)}; allowed: parameters, {', '.join(DEFAULTS)}"
            )
    s = {**DEFAULTS, **raw}
    if s["loss"] not in LOSSES:
        _err(f"identify.loss = {s['loss']!r}; allowed: {', '.join(LOSSES)}")
    if s["optimizer"] not in OPTIMIZERS:
        _err(f"identify.optimizer = {s['optimizer']!r}; allowed: {', '.join(OPTIMIZERS)}")
    channels = [c for c in specmod.schema_of(spec).channels if c != "n_regions"]
    if s["signal"] not in channels:
        given = "signal" in raw
        _err(
            f"identify.signal = {s['signal']!r}"
            + ("" if given else " (the default)")
            + f" is not a channel of model.mechanism = {spec['model']['mechanism']!r}; allowed: {', '.join(channels)}"
        )
    sw = s["smooth_window"]
    s["smooth_window"] = sw = sw if isinstance(sw, list) else [sw]
    if not sw or not all(isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= 10000 for w in sw):
        _err(
            f"identify.smooth_window = {raw.get('smooth_window')!r} must be an integer in [1, 10000] or a list of them"
        )
    for k, lo, hi in (("iterations", 1, 100000), ("starts", 1, 4096), ("seed", 0, 2**63 - 1), ("screen", 0, 1 << 20)):
        if not isinstance(s[k], int) or isinstance(s[k], bool) or not lo <= s[k] <= hi:
            _err(f"identify.{k} = {s[k]!r} must be an integer in [{lo}, {hi}]")
    if not isinstance(s["learning_rate"], (int, float)) or not 0 < s["learning_rate"] <= 10:
        _err(f"identify.learning_rate = {s['learning_rate']!r} must be in (0, 10]")
    if 0 < s["screen"] < s["starts"]:
        _err(f"identify.screen = {s['screen']} must be 0 (off) or at least identify.starts = {s['starts']}")
    if not isinstance(params, dict) or not params:
        _err(
            "identify.parameters: give at least one key to fit, e.g. "
            '"joint.clearance_m" = { initial = [2e-4, 3e-4], bounds = [1e-5, 1e-3] }'
        )
    from . import sensitivity

    allowed = [k for k in sensitivity.differentiable_keys(spec) if k != sensitivity.POINTS_KEY]
    fit = {}
    for key, d in params.items():
        if key not in allowed:
            _err(
                f"identify.parameters.{key}: not a differentiable scalar of this spec"
                f"{specmod._did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}"
            )
        if not isinstance(d, dict) or "bounds" not in d:
            _err(f"identify.parameters.{key} must be a table with bounds = [lo, hi] and initial = [lo, hi] or a value")
        b = d["bounds"]
        if not (isinstance(b, list) and len(b) == 2 and all(isinstance(x, (int, float)) for x in b) and b[0] < b[1]):
            _err(f"identify.parameters.{key}.bounds = {b!r} must be [lo, hi] with lo < hi")
        # default starts: the inner 80 % of the bounds (sigmoid(u) = 0 or 1 is unreachable)
        ini = d.get("initial", [b[0] + 0.1 * (b[1] - b[0]), b[1] - 0.1 * (b[1] - b[0])])
        ini = [ini, ini] if isinstance(ini, (int, float)) else ini
        if not (isinstance(ini, list) and len(ini) == 2 and b[0] < ini[0] <= ini[1] < b[1]):
            _err(
                f"identify.parameters.{key}.initial = {d.get('initial')!r} must lie strictly inside "
                f"bounds = {b!r} (a value or [lo, hi])"
            )
        extra = set(d) - {"bounds", "initial"}
        if extra:
            _err(f"identify.parameters.{key}: unknown entries {sorted(extra)}; allowed: bounds, initial")
        fit[key] = (float(b[0]), float(b[1]), float(ini[0]), float(ini[1]))
    s["parameters"] = fit
    return s


def to_unbounded(theta, lo, hi):
    """u = logit((θ − lo)/(hi − lo)) (inverse of ``to_bounded``)."""
    z = (theta - lo) / (hi - lo)
    return jnp.log(z) - jnp.log1p(-z)


def to_bounded(u, lo, hi):
    """θ = lo + (hi − lo)·sigmoid(u): every u maps inside (lo, hi)."""
    return lo + (hi - lo) * jax.nn.sigmoid(u)


def moving_mean(y, w: int):
    """Centred moving mean over w samples ('same' length, edges averaged over what exists)."""
    if w <= 1:
        return y
    k = jnp.ones((w,), y.dtype)
    num = jnp.convolve(y, k, mode="same")
    den = jnp.convolve(jnp.ones_like(y), k, mode="same")
    return num / den


def features(y):
    """(smooth peak of |y| (power mean p = 16), RMS, mean |y|) of a signal."""
    a2 = y * y + 1e-300
    peak = jnp.exp(
        jax.scipy.special.logsumexp(0.5 * FEATURE_P * jnp.log(a2)) / FEATURE_P - jnp.log(y.shape[0]) / FEATURE_P
    )
    return jnp.stack([peak, jnp.sqrt(jnp.mean(a2)), jnp.mean(jnp.sqrt(a2))])


class Problem:
    """The model signal y(θ) of one spec and the fit keys (no measurement yet)."""

    def __init__(self, spec, keys, signal, smooth_window=1):
        spec = {**spec, "_traced": tuple(keys)}  # no fitted key is made a static constant of the model
        self.spec, self.keys, self.signal, self.w = spec, list(keys), signal, smooth_window
        pl = sweep.plan(spec)
        if pl.n_variants != 1:
            _err(f"identify: the model spec must describe one variant, got {pl.n_variants} (remove [axes])")
        self.plan = pl
        self.cfg, self._y = study_.signal_function(spec, pl, self.keys, signal)
        self.dtype = jnp.float64 if pl.dtype == "float64" else jnp.float32
        self.base = sweep.flat_values(spec)
        self.t = (np.arange(self.cfg.n_saves) + 1) * self.cfg.save_every * self.cfg.dt
        self.theta0 = np.array([float(self.base[k]) for k in self.keys])

    def signal_of(self, theta):
        """y_j(θ) [signal units] at the save times ``self.t`` (traceable in θ)."""
        return moving_mean(self._y(theta), self.w)


def measurement(spec, problem: Problem):
    """The measured signal on the model's save times and a description of where it came from."""
    meas, truth = spec.get("measurement"), spec.get("truth")
    if (meas is None) == (truth is None):
        _err("identify: give exactly one of [measurement] (a CSV file) or [truth] (a synthetic truth)")
    if meas is not None:
        for k in meas:
            if k not in ("path", "time_column", "signal_column"):
                _err(f"unknown key measurement.{k}; allowed: path, time_column, signal_column")
        path = Path(meas.get("path", ""))
        path = path if path.is_absolute() else Path(spec.get("_base_dir", ".")) / path
        tc, yc = meas.get("time_column", "time_s"), meas.get("signal_column", problem.signal)
        if not path.is_file():
            _err(f"measurement.path = {str(path)!r} does not exist")
        rows = list(csv.DictReader(open(path)))
        if not rows or tc not in rows[0] or yc not in rows[0]:
            _err(
                f"measurement.path = {str(path)!r}: needs columns {tc!r} and {yc!r} "
                f"(measurement.time_column / signal_column), has {list(rows[0]) if rows else []}"
            )
        try:
            t = np.array([float(r[tc]) for r in rows])
            y = np.array([float(r[yc]) for r in rows])
        except ValueError as e:
            _err(f"measurement.path = {str(path)!r}: {e}")
        if not (np.all(np.diff(t) > 0) and np.isfinite(y).all()):
            _err(f"measurement.path = {str(path)!r}: {tc} must increase strictly and {yc} be finite")
        if t[0] > problem.t[0] + 1e-12 or t[-1] < problem.t[-1] - 1e-12:
            _err(
                f"measurement: {tc} covers [{t[0]:g}, {t[-1]:g}] s, the model saves [{problem.t[0]:g}, "
                f"{problem.t[-1]:g}] s: shorten integrator.t_end_s or give a longer record"
            )
        yi = np.interp(problem.t, t, y)
        return np.asarray(moving_mean(jnp.asarray(yi, problem.dtype), problem.w)), {"path": str(path)}
    truth = dict(truth)
    noise_std = float(truth.pop("noise_std", 0.0))
    noise_rel = float(truth.pop("noise_relative", 0.0))
    seed = int(truth.pop("noise_seed", 0))
    if noise_std < 0 or noise_rel < 0:
        _err(f"truth.noise_std = {noise_std!r} / truth.noise_relative = {noise_rel!r} must be >= 0")
    from . import sensitivity

    allowed = sensitivity.differentiable_keys(spec)
    for k, v in truth.items():
        if k not in allowed or not isinstance(v, (int, float)):
            _err(
                f"truth.{k} = {v!r}: the truth gives numeric values of spec keys"
                f"{specmod._did_you_mean(k, allowed)}; allowed: {', '.join(allowed)}, noise_std, noise_relative, noise_seed"
            )
    tp = Problem(spec, list(truth), problem.signal, smooth_window=1)
    y = np.asarray(jax.jit(tp.signal_of)(jnp.asarray([float(v) for v in truth.values()], problem.dtype)))
    rng = np.random.default_rng(seed)
    sd = noise_std + noise_rel * float(np.sqrt(np.mean(y * y)))
    y = y + rng.normal(size=y.shape) * sd
    y = np.asarray(moving_mean(jnp.asarray(y, problem.dtype), problem.w))
    return y, {"truth": {k: float(v) for k, v in truth.items()}, "noise_std": sd, "noise_seed": seed}


def residual_function(problem: Problem, y_meas, kind="history"):
    """r(θ) with L(θ) = Σ r² (the losses of the module docstring as scaled residual vectors,
    the form Levenberg–Marquardt and the Gauss–Newton covariance work on)."""
    ym = jnp.asarray(y_meas, problem.dtype)
    n = ym.shape[0]
    s_h = jnp.sqrt(n * jnp.mean(ym * ym))
    Ym = jnp.cumsum(ym)
    s_i = jnp.sqrt(n * jnp.mean(Ym * Ym))  # Δt cancels in the ratio
    fm = features(ym)

    def residuals(theta):
        y = problem.signal_of(theta)
        if kind == "history":
            return (y - ym) / s_h
        if kind == "integral":
            return (jnp.cumsum(y) - Ym) / s_i
        rf = (features(y) - fm) / fm
        return rf if kind == "features" else jnp.concatenate([rf, (y - ym) / s_h])

    return residuals


def loss_function(problem: Problem, y_meas, kind="history"):
    """L(θ) = Σ r(θ)² of the module docstring (``residual_function``)."""
    r = residual_function(problem, y_meas, kind)
    return lambda theta: jnp.sum(r(theta) ** 2)


def _starts(lo, hi, ilo, ihi, n, seed):
    rng = np.random.default_rng(seed)
    u = specmod.latin_hypercube(n, len(lo), rng) if n > 1 else np.full((1, len(lo)), 0.5)
    return ilo + (ihi - ilo) * u


def screen(loss, lo, hi, ilo, ihi, n, keep, seed, dtype):
    """The ``keep`` best of ``n`` Latin-hypercube candidates in the initial box, by the loss.

    A forward-only global stage: the candidates are simulated in vmapped batches of
    ``SCREEN_BATCH`` (no gradients, so thousands cost about as much as a few optimiser steps),
    non-finite losses rank last.  Returns (θ of the kept candidates, best first; their losses;
    the losses of all candidates)."""
    cand = _starts(lo, hi, ilo, ihi, n, seed)
    f = jax.jit(jax.vmap(loss))
    ls = []
    for i in range(0, n, SCREEN_BATCH):
        blk = cand[i : i + SCREEN_BATCH]
        pad = np.concatenate([blk, np.repeat(blk[-1:], SCREEN_BATCH - len(blk), 0)]) if n > SCREEN_BATCH else blk
        ls.append(np.asarray(f(jnp.asarray(pad, dtype)))[: len(blk)])
    ls = np.concatenate(ls)
    ls = np.where(np.isfinite(ls), ls, np.inf)
    order = np.argsort(ls, kind="stable")[:keep]
    return cand[order], ls[order], ls


def gauss_newton_std(problem: Problem, y_meas, theta):
    """Standard deviations of θ from Cov = w·s²(JᵀJ)⁻¹ (module docstring); NaN when singular.

    The factor w (the moving-mean window) undoes the noise variance removed by the w-sample
    mean: the residuals of the smoothed signals have ≈ σ²/w variance while the information
    in JᵀJ is that of the raw samples (white noise assumed)."""
    ym = jnp.asarray(y_meas, problem.dtype)
    r = lambda th: problem.signal_of(th) - ym
    th = jnp.asarray(theta, problem.dtype)
    J = np.asarray(jax.jacfwd(r)(th))
    res = np.asarray(r(th))
    n, K = J.shape
    s2 = problem.w * float(res @ res) / max(n - K, 1)
    try:
        cov = s2 * np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError:
        return np.full(K, np.nan), np.full((K, K), np.nan)
    return np.sqrt(np.maximum(np.diag(cov), 0.0)), cov


def _lm_step(res, u, lam):
    """One Levenberg–Marquardt step on L(u) = Σ r(u)² (Marquardt 1963, diagonal scaling):
    solve (JᵀJ + λ·diag JᵀJ) δ = −Jᵀr, take u + δ if it lowers L (then λ/3), else stay (λ·4).
    J comes from forward mode (one tangent per fitted parameter: cheap for a few parameters)."""
    r, J = res(u), jax.jacfwd(res)(u)
    val = r @ r
    A, g = J.T @ J, J.T @ r
    d = jnp.diag(A)
    d = d + 1e-12 * jnp.max(d) + jnp.finfo(d.dtype).tiny  # a parameter without effect stays put
    delta = -jnp.linalg.solve(A + lam * jnp.diag(d), g)
    trial = u + delta
    rt = res(trial)
    new = rt @ rt
    ok = jnp.isfinite(new) & (new < val)
    return jnp.where(ok, trial, u), jnp.where(ok, lam / 3.0, lam * 4.0), val


def _optimise(res, u0, s, iterations):
    """``iterations`` optimiser steps from every start (rows of u0) at once; returns (u, losses).

    res(u): the residual vector in the unbounded coordinates; the loss is Σ res(u)²."""
    obj = lambda uu: jnp.sum(res(uu) ** 2)
    if s["optimizer"] == "lm":
        step = lambda u, lam: _lm_step(res, u, lam)
        st = jnp.full(u0.shape[:1], LM_LAMBDA0, u0.dtype)
        vstep = jax.jit(jax.vmap(step))
        return _iterate(vstep, obj, u0, st, iterations)
    if s["optimizer"] == "adam":
        lr = optax.cosine_decay_schedule(s["learning_rate"], max(iterations, 1), alpha=0.05)
        opt = optax.adam(lr)

        def step(u, st):
            val, g = jax.value_and_grad(obj)(u)
            with jax.numpy_dtype_promotion("standard"):  # optax mixes int32 counts with floats
                upd, st = opt.update(g, st, u)
            return optax.apply_updates(u, upd), st, val
    else:
        opt = optax.lbfgs()
        vg = optax.value_and_grad_from_state(obj)

        def step(u, st):
            val, g = vg(u, state=st)
            with jax.numpy_dtype_promotion("standard"):  # optax's L-BFGS mixes int32 and int64
                upd, st = opt.update(g, st, u, value=val, grad=g, value_fn=obj)
            return optax.apply_updates(u, upd), st, val

    return _iterate(jax.jit(jax.vmap(step)), obj, u0, jax.vmap(opt.init)(u0), iterations)


def _iterate(vstep, obj, u0, st, iterations):
    """Run a vmapped step; each start ends at the best point it visited."""
    # the step returns its state without the weak types init gave some leaves (optax's L-BFGS
    # info): strong types from the start, or the jitted step compiles a second time
    st = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=x.dtype), st)
    u, hist = u0, []
    best_u, best = np.array(u0), np.full(u0.shape[0], np.inf)
    for _ in range(iterations):
        u_before = np.asarray(u)
        u, st, val = vstep(u, st)
        val = np.asarray(val)  # the loss at u_before
        hist.append(val)
        better = np.isfinite(val) & (val < best)
        best_u[better], best[better] = u_before[better], val[better]
    # an optimiser step may leave the basin (Adam's fixed step near a kink): each start ends at
    # the best point it visited, so a fit never ends worse than its start (or its screening)
    last = np.asarray(jax.jit(jax.vmap(obj))(u))
    better = np.isfinite(last) & (last < best)
    best_u[better] = np.asarray(u)[better]
    return jnp.asarray(best_u), hist


def fit(spec_or_path, overrides=(), log=None, iterations=None):
    """Run an identification spec; returns a result dict (see ``write``)."""
    spec = (
        spec_or_path
        if isinstance(spec_or_path, dict) and "_base_dir" in spec_or_path
        else specmod.load(spec_or_path, overrides)
    )
    s = settings(spec)
    if iterations is not None:
        s["iterations"] = int(iterations)
    keys = list(s["parameters"])
    lo, hi, ilo, ihi = (np.array([s["parameters"][k][i] for k in keys]) for i in range(4))
    stages = s["smooth_window"]
    prob = Problem(spec, keys, s["signal"], 1)
    y_raw, source = measurement(spec, prob)
    dt = prob.dtype
    lo_j, hi_j = jnp.asarray(lo, dt), jnp.asarray(hi, dt)
    t0 = time.perf_counter()
    screened = None
    if s["screen"]:
        prob.w = stages[0]
        y0 = np.asarray(moving_mean(jnp.asarray(y_raw, dt), stages[0]))
        theta_init, kept, all_l = screen(
            loss_function(prob, y0, s["loss"]), lo, hi, ilo, ihi, s["screen"], s["starts"], s["seed"], dt
        )
        screened = {
            "candidates": int(s["screen"]),
            "kept_losses": kept.tolist(),
            "finite": int(np.isfinite(all_l).sum()),
            "median_loss": float(np.median(all_l)),
        }
        if log:
            log(f"identify: screened {s['screen']} candidates, kept {s['starts']} (best loss {kept[0]:.4g})")
    else:
        theta_init = _starts(lo, hi, ilo, ihi, s["starts"], s["seed"])
    u = jnp.asarray(to_unbounded(jnp.asarray(theta_init, dt), lo_j, hi_j))
    hist = []
    n_it = s["iterations"]
    per = [n_it // len(stages) + (1 if i < n_it % len(stages) else 0) for i in range(len(stages))]
    for si, (w, its) in enumerate(zip(stages, per)):
        prob.w = w
        y_meas = np.asarray(moving_mean(jnp.asarray(y_raw, dt), w))
        res = (lambda r: lambda uu: r(to_bounded(uu, lo_j, hi_j)))(residual_function(prob, y_meas, s["loss"]))
        obj = lambda uu, res=res: jnp.sum(res(uu) ** 2)
        u, h = _optimise(res, u, s, its)
        hist.extend(h)
        if log:
            log(f"identify: stage {si + 1}/{len(stages)} (window {w}) done, best loss {np.nanmin(h[-1]):.4g}")
    final = np.asarray(jax.jit(jax.vmap(obj))(u))
    hist.append(final)
    wall = time.perf_counter() - t0
    ok = np.isfinite(final)
    if not ok.any():
        raise RuntimeError("identify: every start diverged (non-finite loss); narrow identify.parameters.*.initial")
    best = int(np.nanargmin(np.where(ok, final, np.inf)))
    theta = np.asarray(to_bounded(u[best], lo_j, hi_j))
    std, cov = gauss_newton_std(prob, y_meas, theta)
    y_fit = np.asarray(jax.jit(prob.signal_of)(jnp.asarray(theta, dt)))
    y_init = np.asarray(jax.jit(prob.signal_of)(jnp.asarray(theta_init[best], dt)))
    return {
        "parameters": {
            k: {"value": float(theta[i]), "std": float(std[i]), "initial": float(theta_init[best][i])}
            for i, k in enumerate(keys)
        },
        "loss": float(final[best]),
        "loss_kind": s["loss"],
        "optimizer": s["optimizer"],
        "iterations": s["iterations"],
        "starts": [
            {
                "initial": {k: float(theta_init[j][i]) for i, k in enumerate(keys)},
                "value": {k: float(to_bounded(u[j], lo_j, hi_j)[i]) for i, k in enumerate(keys)},
                "loss": float(final[j]),
            }
            for j in range(len(final))
        ],
        "best_start": best,
        "screen": screened,
        "covariance": cov.tolist(),
        "signal": s["signal"],
        "source": source,
        "wall_s": wall,
        "_history": np.array(hist),
        "_t": prob.t,
        "_y_meas": y_meas,
        "_y_fit": y_fit,
        "_y_init": y_init,
    }


def write(res, out):
    """DIR/identified.json, DIR/loss_history.csv (iteration, loss of each start, best) and
    DIR/fit.png (measurement, initial guess and fit)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {k: v for k, v in res.items() if not k.startswith("_")}
    (out / "identified.json").write_text(json.dumps(doc, indent=1))
    h = res["_history"]
    with open(out / "loss_history.csv", "w") as f:
        f.write("iteration," + ",".join(f"loss_start{j}" for j in range(h.shape[1])) + ",best_loss\n")
        for i, row in enumerate(h):
            f.write(f"{i}," + ",".join(repr(float(x)) for x in row) + f",{float(np.nanmin(row))!r}\n")
    from . import plots

    plt = plots.plt
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6.5))
    plots.identification_fit(a1, res["_t"], res["_y_meas"], res["_y_init"], res["_y_fit"], signal=res["signal"])
    txt = ", ".join(f"{k} = {v['value']:.4g} ± {v['std']:.2g}" for k, v in res["parameters"].items())
    a1.set_title(txt, fontsize=7)
    plots.loss_history(a2, h, kind=res["loss_kind"])
    fig.tight_layout()
    fig.savefig(out / "fit.png", dpi=110)
    plt.close(fig)
