"""Wear that evolves with the dynamics, run as a sweep: ``jaxclear wear SPEC --out DIR``.

The coupled loop of Flores (2009, "Modeling and simulation of wear in revolute clearance joints
in multibody systems") and Mukras et al. (2010, "Analysis of planar multibody systems with
revolute joint wear"), batched over a spec's variants with vmap like every sweep:

    for m = 0, 1, …, M:   simulate the run (start-up + steady window) on the bushing P_m;
                          h_{m+1} = h_m + (N_u / N_w) · S(Δh_m)              (m < M)
                          P_{m+1} = P_0 moved radially outwards by h_{m+1}    (wear.worn_points)

Δh_m: the Archard depth of every bushing point over the steady window of N_w =
``integrator.steady_revolutions`` crank cycles (``wear.increment``, accumulated in the scan);
N_u = ``wear.cycles_per_update`` (wear acceleration: the window's load history is taken to hold
for N_u cycles; the error is first order in N_u, ``tests/test_wear_evolution.py`` shows it
shrink); S the smoothing ``wear.smoothing`` (``wear.smooth``).  From the first update the
bushing is non-circular: every profile point carries its own depth.

Row m of the results is the bushing after m·N_u cycles: its profile (largest radial clearance,
worn volume, deepest wear and its angle) and the dynamics of the run on it (the mechanism's
metrics.csv columns: peak contact force, amplification factors, impacts, motion modes and the
wear rates per cycle).  M updates simulate M + 1 runs; the last is the worn joint's behaviour.

Store ``DIR/wear.zarr``, written update by update for each chunk of variants: the next depth and
the row's metrics first, the (update, chunk) flag last, so a run killed at any point resumes at
the first row not flagged and loses no finished update.  At the end ``wear_metrics.csv`` (one row
per variant and update), ``wear_summary.json`` and ``plots/wear_*.png`` are derived from it.

``sensitivity``: the gradient of the smooth peak contact force after M updates with respect to
spec keys (the wear coefficient, the initial clearance, …), by reverse-mode autodiff through the
whole loop (a ``lax.scan`` over the updates around the simulation's own scan).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from . import __version__, metrics, parallel, store, sweep, wear
from . import spec as specmod
from .spec import SpecError

NAME = "wear.zarr"
FORMAT = "jaxclear-wear-1"
DERIVED = ("wear_metrics.csv", "wear_summary.json")
PEAK = "smooth_peak_contact_force_N"  # the differentiable metric of ``sensitivity``
# An update whose deepest increment exceeds this fraction of the clearance extrapolates one load
# history over a visibly changed joint: the summary warns (make wear.cycles_per_update smaller).
INCREMENT_WARN_FRACTION = 0.1


# ---------------------------------------------------------------------------- one update (pure)
def _mechanism(spec):
    mech = sweep.mechanism_of(spec)
    if not hasattr(mech, "with_joint_tree"):
        raise SpecError(
            f"model.mechanism = {spec['model']['mechanism']!r}: jaxclear wear evolves the bushings "
            "of the crank linkages (slider_crank, four_bar, linkage)"
        )
    return mech


def worn_params(mech, p, points0, depth):
    """One variant's params on the bushing ``points0`` (J, N, 2) worn by ``depth`` (J, N) [m]."""
    jp = mech.joint_tree(p)
    pts = wear.worn_points(points0, depth).reshape(jp.points.shape)
    return mech.with_joint_tree(p, jp._replace(points=pts))


def initial_points(mech, cfg, p):
    """The bushing points of one variant's joints as (J, N, 2) [m], bearing frames."""
    pts = mech.joint_tree(p).points
    return pts.reshape((len(mech.joint_names(cfg)),) + pts.shape[-2:])


def advance(depth, window_depth, scale, smoothing):
    """h + scale · S(Δh): the depth [m] after one update (scale = N_u / N_w)."""
    return depth + wear.smooth(window_depth * scale, smoothing)


def _window_fn(mech, cfg):
    """jit(vmap(run on the worn bushing)) -> (worn params, Result), one chunk at a time, the
    variant axis sharded over the local devices as ``sweep.compiled`` does (so a chunk gives the
    same numbers whatever the device count that ran it)."""

    def one(p, points0, depth):
        pw = worn_params(mech, p, points0, depth)
        return pw, mech.simulate(cfg, pw)

    if jax.local_device_count() > 1:
        sh = parallel.variant_sharding()
        fn = jax.jit(jax.vmap(one), in_shardings=(sh, sh, sh), out_shardings=sh)
        return lambda p, pts, d: fn(*jax.device_put((p, pts, d), sh))
    return jax.jit(jax.vmap(one))


# ---------------------------------------------------------------------------- the store
def path_of(out) -> Path:
    return Path(out) / NAME


def _open(out, spec, pl, names, n_points, h, force, log):
    """(group, fresh): the store of this spec in ``out``, else a new one (another spec's store is
    refused unless ``force``)."""
    zarr = store.zarr
    path = path_of(out)
    store.remove_partial(path)  # a half-built store or chunk file of a killed run
    if (path / "zarr.json").exists():
        g = zarr.open_group(str(path), mode="r+", zarr_format=3)
        old = g.attrs.get("spec_hash")
        if old == h and g.attrs.get("format") == FORMAT:
            return g, False
        if not force:
            raise SpecError(
                f"{out} holds the wear evolution of another spec (spec_hash {old}, this spec {h}); "
                "use --force to delete it and rerun, or choose another --out"
            )
        log(f"--force: deleting {path} (spec_hash {old}) and starting over")
    U, n, cs = spec["wear"]["updates"], pl.n_variants, pl.chunk_size
    n_chunks = -(-n // cs)
    J = len(names)
    with store.built_in_place(
        path,
        {
            "format": FORMAT,
            "spec": json.dumps({k: v for k, v in spec.items() if not k.startswith("_")}, sort_keys=True),
            "spec_hash": h,
            "version": __version__,
            "name": spec["sweep"]["name"],
            "n_variants": int(n),
            "chunk_size": int(cs),
            "n_chunks": int(n_chunks),
            "updates": int(U),
            "joints": list(names),
            "axes": [specmod.column_name(pth) for pth in pl.paths],
        },
    ) as g:
        g.create_array(
            "done",
            shape=(U + 1, n_chunks),
            dtype=bool,
            chunks=(1, 1),
            fill_value=False,
            dimension_names=("update", "chunk"),
        )
        # depth after m updates; row 0 is the new bushing (zero), row m+1 is written before row m's flag
        g.create_array(
            "depth_m",
            shape=(U + 1, n, J, n_points),
            dtype="float64",
            chunks=(1, cs, J, n_points),
            fill_value=0.0,
            dimension_names=("update", "variant", "joint", "point"),
        )
        g.create_array(
            "points0_m",
            shape=(n, J, n_points, 2),
            dtype="float64",
            chunks=(cs, J, n_points, 2),
            fill_value=np.nan,
            dimension_names=("variant", "joint", "point", "xy"),
        )
        g.create_array(
            "cycles_per_update",
            shape=(n,),
            dtype="float64",
            chunks=(cs,),
            fill_value=np.nan,
            dimension_names=("variant",),
        )
        g.create_array(
            "journal_radius_m",
            shape=(n, J),
            dtype="float64",
            chunks=(cs, J),
            fill_value=np.nan,
            dimension_names=("variant", "joint"),
        )
        gi = g.create_group("inputs")
        g.create_group("metrics")
        for j, pth in enumerate(pl.paths):
            gi.create_array(
                specmod.column_name(pth),
                shape=(n,),
                dtype="float64",
                chunks=(cs,),
                fill_value=np.nan,
                dimension_names=("variant",),
            )[...] = pl.values[:, j]
    return zarr.open_group(str(path), mode="r+", zarr_format=3), True


def _write_row(g, ci, m, a, b, cols, next_depth):
    """Row m of chunk ci: the next depth and the metrics first, the flag last."""
    U1, n = g["done"].shape[0], g.attrs["n_variants"]
    cs = g.attrs["chunk_size"]
    if next_depth is not None:
        g["depth_m"][m + 1, a:b] = next_depth
    gm = g["metrics"]
    for i, (col, v) in enumerate(cols.items()):
        v = np.asarray(v)
        arr = store._require(
            gm, col, (U1, n), v.dtype, (1, cs), store._fill(v.dtype), ("update", "variant"), {"column_index": i}
        )
        arr[m, a:b] = v
    g["done"][m, ci] = True


def read(out):
    """The evolution in ``out`` as numpy: dict with attrs, done (U+1, chunks), depth_m (U+1, B, J, N),
    points0_m (B, J, N, 2), cycles_per_update (B,), inputs {col: (B,)}, metrics {col: (U+1, B)}
    (NaN where not done)."""
    zarr = store.zarr
    path = path_of(out)
    if not (path / "zarr.json").exists():
        raise FileNotFoundError(f"no wear evolution store at {path}")
    g = zarr.open_group(str(path), mode="r", zarr_format=3)
    at = dict(g.attrs)
    done = np.asarray(g["done"][...], bool)
    rows = np.repeat(done, at["chunk_size"], axis=1)[:, : at["n_variants"]]
    met = {}
    for k in sorted(g["metrics"].array_keys(), key=lambda k: g["metrics"][k].attrs.get("column_index", 0)):
        v = np.asarray(g["metrics"][k][...])
        met[k] = np.where(rows, v, np.nan) if v.dtype.kind == "f" else v
    depth = np.asarray(g["depth_m"][...])
    return {
        "attrs": at,
        "done": done,
        "row_done": rows,
        "depth_m": np.where(rows[..., None, None], depth, np.nan),
        "points0_m": np.asarray(g["points0_m"][...]),
        "journal_radius_m": np.asarray(g["journal_radius_m"][...]),
        "cycles_per_update": np.asarray(g["cycles_per_update"][...]),
        "inputs": {k: np.asarray(g["inputs"][k][...]) for k in g["inputs"].array_keys()},
        "metrics": met,
    }


# ---------------------------------------------------------------------------- profile columns
def profile_columns(points0, depth, journal_radius, length):
    """Columns of the bushings after some wear (numpy; leading variant axis): the largest radial
    clearance max_k |P_k| − R_J [m] over the joints, the worn volume Σ h Δs L [m³] of all the
    joints, the deepest wear [m] and its angle in the bearing frame [deg] (NaN before any wear)."""
    pts = np.asarray(wear.worn_points(points0, depth))
    B, J = depth.shape[:2]
    rj = np.broadcast_to(np.asarray(journal_radius, float).reshape(B, -1), (B, J))
    r = np.linalg.norm(pts, axis=-1) - rj[..., None]
    ln = np.broadcast_to(np.asarray(length, float).reshape(B, -1), (B, J))
    vol = np.asarray(wear.worn_volume(points0, depth, 1.0)) * ln
    deepest, angle = wear.deepest(points0, depth)
    return {
        "max_radial_clearance_m": r.reshape(B, -1).max(axis=1),
        "worn_volume_m3": vol.sum(axis=1),
        "max_wear_depth_m": deepest,
        "max_wear_depth_angle_deg": angle,
    }


def _joint_values(mech, p, name, b):
    v = getattr(mech.joint_tree(p), name)
    return np.asarray(v)[:b]


# ---------------------------------------------------------------------------- the run
def load_spec(spec_or_path, overrides=()):
    """The spec of a wear evolution (SpecError where it cannot evolve)."""
    spec = spec_or_path if isinstance(spec_or_path, dict) else specmod.load(spec_or_path, overrides)
    _mechanism(spec)  # a mechanism without clearance-joint bushings: SpecError
    from .mechanisms import _clearance

    if not _clearance.wear_on(spec):
        raise SpecError(
            f"wear.coefficient_m2_per_N = {spec.get('wear', {}).get('coefficient_m2_per_N', 0.0)!r}: "
            "jaxclear wear needs a positive Archard coefficient (steel on steel, lubricated: "
            "~1e-16 m²/N) or an axis over it"
        )
    return spec


def run(spec_or_path, out, overrides=(), log=print, force=False, on_update=None):
    """Evolve the wear of every variant of a spec (module docstring); results in ``out``.
    Returns (table, summary): the wear_metrics.csv columns and the summary.
    on_update(chunk, m): called after each stored row (tests interrupt a run there)."""
    spec = load_spec(spec_or_path, overrides)
    pl = sweep.plan(spec)
    mech = pl.mech
    pl = replace(pl, cfg=replace(pl.cfg, outputs=()))  # the evolution keeps no histories
    cfg, cs = pl.cfg, pl.chunk_size
    U, s = spec["wear"]["updates"], spec["wear"]["smoothing"]
    revs = spec["integrator"]["steady_revolutions"]
    names = tuple(mech.joint_names(cfg))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    h = specmod.spec_hash(spec)
    n_points = cfg.joint.n_points
    g, fresh = _open(out, spec, pl, names, n_points, h, force, log)
    for f in DERIVED:  # derived files never describe a store other than the one next to them
        (out / f).unlink(missing_ok=True)
    done = np.asarray(g["done"][...], bool)
    n_chunks = done.shape[1]
    if not fresh and not done.all():
        log(f"resuming {path_of(out)}: {int(done.sum())} of {done.size} (update, chunk) rows done")
    fn = _window_fn(mech, cfg)
    plog = out / "progress.jsonl"
    t_start, compile_s, window_s = time.perf_counter(), 0.0, []
    computed = 0
    for ci in range(n_chunks):
        m0 = int(np.argmin(done[:, ci])) if not done[:, ci].all() else U + 1
        if m0 > U:
            continue
        idx = sweep._chunk_indices(ci, cs, pl.n_variants)
        a, b = int(idx[0]), int(idx[-1]) + 1
        pidx = sweep.padded(idx, sweep.exec_size(cs))
        pad = np.r_[np.arange(len(idx)), np.full(len(pidx) - len(idx), len(idx) - 1)]
        p = sweep.batch_params(spec, pl, pidx)
        points0 = jax.vmap(lambda pp: initial_points(mech, cfg, pp))(p)
        flat = sweep.variant_flat(spec, pl, pidx)
        cpu = np.broadcast_to(np.asarray(flat["wear.cycles_per_update"], float), (len(pidx),))
        rj = _joint_values(mech, p, "journal_radius", len(idx))
        ln = _joint_values(mech, p, "bushing_length", len(idx))
        if m0 == 0:
            g["points0_m"][a:b] = np.asarray(points0)[: len(idx)]
            g["cycles_per_update"][a:b] = cpu[: len(idx)]
            g["journal_radius_m"][a:b] = np.broadcast_to(rj.reshape(len(idx), -1), (len(idx), len(names)))
        depth = jnp.asarray(np.asarray(g["depth_m"][m0, a:b])[pad], points0.dtype)
        scale = jnp.asarray(cpu / revs, points0.dtype)[:, None, None]
        for m in range(m0, U + 1):
            t0 = time.perf_counter()
            pw, res = fn(p, points0, depth)
            jax.block_until_ready(res)
            dt_s = time.perf_counter() - t0
            if computed == 0:
                compile_s = dt_s
            else:
                window_s.append(dt_s)
            computed += 1
            cols = profile_columns(np.asarray(points0)[: len(idx)], np.asarray(depth)[: len(idx)], rj, ln)
            cols.update(mech.chunk_metrics(spec, cfg, pw, res, len(idx), pl.t_end))
            nxt = advance(depth, res.wear, scale, s) if m < U else None
            _write_row(g, ci, m, a, b, cols, None if nxt is None else np.asarray(nxt)[: len(idx)])
            with open(plog, "a") as fh:
                fh.write(
                    json.dumps({"chunk": ci, "update": m, "variants": len(idx), "s": dt_s, "time": time.time()}) + "\n"
                )
            log(f"chunk {ci + 1}/{n_chunks} update {m}/{U}: {dt_s:.2f} s")
            if on_update is not None:
                on_update(ci, m)
            depth = nxt
    table, summary = finish(out, spec, log=log)
    summary.update(
        {
            "elapsed_s": time.perf_counter() - t_start,
            "windows_computed": computed,
            "first_window_s_with_compile": compile_s,
            "window_s_median": float(np.median(window_s)) if window_s else None,
        }
    )
    (out / "wear_summary.json").write_text(json.dumps(summary, indent=2))
    return table, summary


def table_of(ev):
    """wear_metrics.csv columns from ``read``: one row per (variant, update), variant-major."""
    at, met = ev["attrs"], ev["metrics"]
    U1, n = ev["done"].shape[0], at["n_variants"]
    v, m = np.meshgrid(np.arange(n), np.arange(U1), indexing="ij")
    t = {"variant": v.ravel(), "update": m.ravel(), "crank_cycles": (m * ev["cycles_per_update"][:, None]).ravel()}
    for k, x in ev["inputs"].items():
        t[k] = np.repeat(x, U1)
    for k, x in met.items():
        t[k] = np.asarray(x).T.ravel()
    return t


def finish(out, spec=None, log=print):
    """wear_metrics.csv, wear_summary.json and the plots from the store in ``out``; returns
    (table, summary).  Pending rows: NaN in the table, the files are still written."""
    out = Path(out)
    ev = read(out)
    spec = spec or json.loads(ev["attrs"]["spec"])
    table = table_of(ev)
    sweep.write_csv(out / "wear_metrics.csv", table)
    depth = ev["depth_m"]
    inc = np.nanmax(np.diff(depth, axis=0), axis=(2, 3)) if depth.shape[0] > 1 else np.zeros((1, depth.shape[1]))
    c0 = np.nanmin(np.linalg.norm(ev["points0_m"], axis=-1), axis=(1, 2))
    rj = ev["metrics"].get("max_radial_clearance_m")
    clearance0 = rj[0] if rj is not None else c0
    frac = np.nanmax(inc / clearance0[None, :], axis=0) if inc.size else np.zeros(1)
    warnings = []
    if np.nanmax(frac) > INCREMENT_WARN_FRACTION:
        warnings.append(
            {
                "code": "large_wear_update",
                "message": f"one update deepens the wear by up to {np.nanmax(frac):.0%} of the initial clearance "
                f"(> {INCREMENT_WARN_FRACTION:.0%}): the load history of one window is extrapolated over a "
                "visibly changed joint; make wear.cycles_per_update smaller",
            }
        )
    fin = ev["metrics"].get("finite")
    if fin is not None and not np.all(np.asarray(fin)[ev["row_done"]]):
        bad = sorted(set(np.nonzero(~np.asarray(fin, bool) & ev["row_done"])[1].tolist()))
        warnings.append(
            {
                "code": "non_finite",
                "message": f"variants {bad} went non-finite (finite = false "
                "in wear_metrics.csv); the other variants are unaffected",
            }
        )
    for w in warnings:
        log(f"warning: {w['message']}")
    at = ev["attrs"]
    summary = {
        "name": at["name"],
        "spec_hash": at["spec_hash"],
        "version": __version__,
        "n_variants": at["n_variants"],
        "updates": at["updates"],
        "joints": at["joints"],
        "complete": bool(ev["done"].all()),
        "cycles_per_update": sorted(
            set(np.asarray(ev["cycles_per_update"])[np.isfinite(ev["cycles_per_update"])].tolist())
        ),
        "max_increment_fraction_of_clearance": float(np.nanmax(frac)) if frac.size else 0.0,
        "warnings": warnings,
    }
    if ev["done"].all() and spec.get("outputs", {}).get("plots", True):
        from . import plots

        summary["plots"] = plots.wear_evolution_plots(out, ev, table, spec)
    (out / "wear_summary.json").write_text(json.dumps(summary, indent=2))
    return table, summary


# ---------------------------------------------------------------------------- sensitivity
def peak_after_updates(spec, pl, keys):
    """f(values (K,), swept {path: value}) -> the smooth peak contact force [N] of the run after
    ``wear.updates`` updates of one variant (pure: a ``lax.scan`` over the updates around the
    simulation's scan; jax.grad goes through all of it).  The spec's other values are constants."""
    mech = pl.mech
    cfg = replace(pl.cfg, outputs=())
    U, s = spec["wear"]["updates"], spec["wear"]["smoothing"]
    revs = spec["integrator"]["steady_revolutions"]
    dtype = jnp.float64 if pl.dtype == "float64" else jnp.float32
    fixed = sweep.flat_values(spec)

    def f(values, swept):
        flat = {**fixed, **swept, **dict(zip(keys, values))}
        p = sweep.params_from_flat(spec, cfg, flat, dtype, pl.t_end)
        points0 = initial_points(mech, cfg, p)
        scale = jnp.asarray(flat["wear.cycles_per_update"], dtype) / revs

        def update(depth, _):
            res = mech.simulate(cfg, worn_params(mech, p, points0, depth))
            return advance(depth, res.wear, scale, s), None

        depth, _ = jax.lax.scan(update, jnp.zeros(points0.shape[:-1], dtype), None, length=U)
        res = mech.simulate(cfg, worn_params(mech, p, points0, depth))
        return metrics.smooth_peak(res.acc.lse_force, res.acc.steps)

    return f


def sensitivity(spec_or_path, keys, overrides=(), variants=None):
    """d(smooth peak contact force after M updates)/d(key) [N per unit of the key] for every
    variant (or the indices ``variants``): {"variant", inputs..., PEAK, "d(PEAK)/d(key)"...}."""
    from .sensitivity import check_keys, column

    spec = load_spec(spec_or_path, overrides)
    keys = tuple(keys)
    check_keys(spec, list(keys))
    pl = sweep.plan(spec)
    dtype = jnp.float64 if pl.dtype == "float64" else jnp.float32
    vg = jax.jit(jax.value_and_grad(peak_after_updates(spec, pl, keys)))
    idx = np.arange(pl.n_variants) if variants is None else np.asarray(variants)
    rows = {"variant": idx}
    for j, pth in enumerate(pl.paths):
        rows[specmod.column_name(pth)] = pl.values[idx, j]
    fixed = sweep.flat_values(spec)
    vals, grads = [], []
    for i in idx:
        swept = {pth: jnp.asarray(pl.values[i, j], dtype) for j, pth in enumerate(pl.paths)}
        x = jnp.asarray([swept[k] if k in swept else fixed[k] for k in keys], dtype)
        v, gr = vg(x, swept)
        vals.append(float(v))
        grads.append(np.asarray(gr))
    rows[PEAK] = np.asarray(vals)
    for j, k in enumerate(keys):
        rows[column(PEAK, k)] = np.asarray(grads)[:, j]
    return rows
