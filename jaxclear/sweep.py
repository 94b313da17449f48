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
from dataclasses import dataclass, fields, replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from . import __version__, integrate, mechanisms, metrics, parallel, store
from . import spec as specmod


@dataclass(frozen=True)
class Plan:
    """Everything static about a sweep: mechanism, model config, sizes, the variant table."""

    cfg: object
    paths: tuple
    values: np.ndarray  # (B, n_axes)
    t_end: float
    dtype: str
    chunk_size: int
    mechanism: str = "slider_crank"

    @property
    def n_variants(self):
        return self.values.shape[0]

    @property
    def mech(self):
        """The mechanism module (``jaxclear.mechanisms`` protocol)."""
        return mechanisms.get(self.mechanism)


def mechanism_of(spec):
    """The module of the spec's ``model.mechanism``."""
    return mechanisms.get(spec["model"]["mechanism"])


def flat_values(spec):
    """All parameters of the sweepable tables as {dotted path: value} (``spec.flat_values``)."""
    return specmod.flat_values(spec)


_flat = flat_values


def make_config(spec, t_end):
    """The mechanism's static Config for a run of ``t_end`` seconds."""
    return mechanism_of(spec).make_config(spec, t_end)


def plan(spec) -> Plan:
    paths, values = specmod.axes_values(spec)
    mech = mechanism_of(spec)
    B = max(1, values.shape[0])
    cols = specmod.variant_columns(spec, paths, values)
    t_end = mech.t_end(spec, cols)
    cfg = mech.make_config(spec, t_end)
    if hasattr(mech, "ideal_samples"):  # one reference sample count for the whole sweep
        cfg = replace(cfg, ideal_samples=mech.ideal_samples(cols, cfg.n_steps * cfg.dt))
    it = spec["integrator"]
    p = Plan(
        cfg=cfg,
        paths=tuple(paths),
        values=values,
        t_end=cfg.n_steps * cfg.dt,
        dtype=it["precision"],
        chunk_size=1,
        mechanism=spec["model"]["mechanism"],
    )
    cfg = check_variants(spec, p)  # with the static choices made from every variant (max_regions = "auto")
    cs = it["chunk_size"] or parallel.auto_chunk_size(B, bytes_per_variant(cfg, it["precision"], mech))
    p = replace(p, cfg=cfg, chunk_size=min(cs, B))
    if p.dtype == "float32" and hasattr(mech, "warn_float32"):
        mech.warn_float32(spec, variant_flat(spec, p, np.arange(p.n_variants)))
    return p


def bytes_per_variant(cfg, precision: str, mech=None) -> float:
    """Device bytes of one variant for the automatic chunk size: the mechanism's estimate, else
    the saved histories (n_saves × channels, 8 joints at most) twice plus 16 kB."""
    mech = mech or mechanisms.get("slider_crank")
    if hasattr(mech, "bytes_per_variant"):
        return mech.bytes_per_variant(cfg, precision)
    item = 4 if precision == "float32" else 8
    return 2.0 * cfg.n_saves * max(1, len(cfg.outputs)) * item + 16384


def variant_flat(spec, plan_: Plan, idx):
    """{path: np.array (b,)} for the swept paths of variants ``idx``, scalars for the others."""
    flat = flat_values(spec)
    for j, pth in enumerate(plan_.paths):
        flat[pth] = plan_.values[idx, j]
    return flat


def params_from_flat(spec, cfg, flat, dtype, t_end=None):
    """The mechanism's Params for one variant from {dotted path: scalar} (traceable)."""
    mech = mechanism_of(spec)
    return mech.params(spec, cfg, flat, dtype, cfg.n_steps * cfg.dt if t_end is None else t_end)


def batch_params(spec, plan_: Plan, idx):
    """Params with a leading variant axis for the variant indices ``idx`` (vmap over the swept
    paths only; the fixed values enter as constants)."""
    dtype = jnp.float64 if plan_.dtype == "float64" else jnp.float32
    flat = variant_flat(spec, plan_, idx)
    swept = {k: jnp.asarray(flat[k], dtype) for k in plan_.paths}
    fixed = {k: v for k, v in flat.items() if k not in swept}
    mech = plan_.mech

    def one(sw):
        return mech.params(spec, plan_.cfg, {**fixed, **sw}, dtype, plan_.t_end)

    if not swept:
        p = one({})
        return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (len(idx),) + x.shape), p)
    return jax.vmap(one)(swept)


def check_variants(spec, plan_: Plan, block=4096):
    """Physics checks over all variants before compiling (raises SpecError): ranges, unit
    guards and cross-field checks (``spec.check_values``), then, block by block of params,
    the mechanism's ``check_params`` (for the clearance-joint mechanisms: the bushing staying
    outside the journal and dt under the stability bound) and its ``resolve_config`` (static
    choices from every variant: ``profile.max_regions = "auto"``).  Returns the config, resolved."""
    B = plan_.n_variants
    specmod.check_values(variant_flat(spec, plan_, np.arange(B)), specmod.schema_of(spec))
    hook = getattr(plan_.mech, "check_params", None)
    resolve = getattr(plan_.mech, "resolve_config", None)
    cfg, acc = plan_.cfg, None
    if hook is None and resolve is None:
        return cfg
    for i0 in range(0, B, block):
        idx = np.arange(i0, min(B, i0 + block))
        p = batch_params(spec, plan_, idx)
        if hook is not None:
            hook(spec, plan_.cfg, p, lambda i, i0=i0: f"variant {i0 + i}{_swept_text(plan_, i0 + i)}")
        if resolve is not None:
            cfg, acc = resolve(spec, cfg, p, acc, i0)
    return cfg


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
    spec = (
        spec_or_path
        if isinstance(spec_or_path, dict) and "_base_dir" in spec_or_path
        else specmod.load(spec_or_path, overrides)
    )
    pl = plan(spec)
    cfg, B, cs = pl.cfg, pl.n_variants, pl.chunk_size
    n_chunks = math.ceil(B / cs)
    ex = exec_size(cs)  # the executed (device-padded) chunk: what the compiled function sees
    example = batch_params(spec, pl, padded(np.arange(cs), ex))
    mech = pl.mech
    out_shape = jax.eval_shape(jax.vmap(lambda p: mech.simulate(cfg, p)), example)
    params_b, out_b, hist_chunk_b = _nbytes(example), _nbytes(out_shape), _nbytes(out_shape.history)
    sizes = _store_sizes(pl, hist_chunk_b // ex)
    est = {
        "name": spec["sweep"]["name"],
        "n_variants": int(B),
        "axes": specmod.axes_info(spec),
        "sampling": {
            "n": spec["sampling"]["n"],
            "seed": spec["sampling"]["seed"],
            "method": spec["sampling"].get("method", "random"),
        },
        "chunk_size": int(cs),
        "n_chunks": int(n_chunks),
        "padding": int(n_chunks * cs - B),
        "steps_per_variant": int(cfg.n_steps),
        "dt_s": cfg.dt,
        "t_end_s": pl.t_end,
        "save_every": cfg.save_every,
        "n_saves": cfg.n_saves,
        "channels": list(cfg.outputs),
        "precision": pl.dtype,
        "scheme": cfg.scheme,
        "mechanism": pl.mechanism,
        **_describe(spec, pl),
        "params_bytes_per_chunk": params_b,
        "output_bytes_per_chunk": out_b,
        "history_bytes_per_chunk": hist_chunk_b,
        "temp_bytes_per_chunk": None,
        "memory_bytes_per_chunk": params_b + out_b,
        **sizes,
        "probe_steps": 0,
        "compile_s": None,
        "probe_run_s": None,
        "variant_steps_per_s": None,
        "run_s_per_chunk": None,
        "run_s": None,
        "total_s": None,
        "device_kind": jax.devices()[0].device_kind,
        "device_count": len(jax.devices()),
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
    est.update(
        {
            "probe_steps": int(pcfg.n_steps),
            "compile_s": compile_s,
            "probe_run_s": t_probe,
            "variant_steps_per_s": cs * pcfg.n_steps / t_probe if t_probe > 0 else None,
            "run_s_per_chunk": per_chunk,
            "run_s": per_chunk * n_chunks,
            "total_s": per_chunk * n_chunks + compile_s,
            "temp_bytes_per_chunk": temp,
            "memory_bytes_per_chunk": params_b + out_b + (temp or 0),
        }
    )
    return est


def _store_sizes(pl: Plan, hist_per_variant):
    """history_bytes, metrics_bytes, store_bytes (uncompressed) of a plan's result store."""
    B = pl.n_variants
    n_joints = len(pl.mech.joint_names(pl.cfg))
    n_metrics = 25 + (8 * n_joints if n_joints > 1 else 0)  # chunk_metrics columns (approximate)
    metrics_b = B * (n_metrics + len(pl.paths)) * 8
    return {
        "history_bytes": int(B * hist_per_variant),
        "metrics_bytes": int(metrics_b),
        "store_bytes": int(B * hist_per_variant + metrics_b),
    }


def store_estimate(spec, pl: Plan) -> dict:
    """The result store's size as ``estimate`` gives it (history_bytes, metrics_bytes,
    store_bytes, uncompressed; history_bytes_per_variant), without compiling: the shapes of
    one variant's outputs (``jax.eval_shape``, traced once per Config in this process) times
    the variants."""
    one = batch_params(spec, pl, np.arange(1))
    leaves = jax.tree_util.tree_leaves(one)
    key = (pl.mechanism, pl.cfg, pl.dtype, jax.tree_util.tree_structure(one), tuple(x.shape for x in leaves))
    if key not in _HISTORY_BYTES:
        out_shape = jax.eval_shape(jax.vmap(lambda p: pl.mech.simulate(pl.cfg, p)), one)
        _HISTORY_BYTES[key] = _nbytes(out_shape.history)
    per = _HISTORY_BYTES[key]
    return {**_store_sizes(pl, per), "history_bytes_per_variant": int(per)}


_HISTORY_BYTES: dict = {}  # store_estimate: history bytes of one variant per (mechanism, Config, ...)


def _cast(p, dtype):
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, p)


# Within-chunk progress ticks (``integrate.reporting_progress``) embed a host-callback pointer in
# the executable, which keeps it out of the persistent compile cache (the pointer differs per
# process).  "auto" ticks only chunks long enough for a silent bar to matter.
TICK_MIN_VARIANT_STEPS = 20_000_000


def wants_ticks(plan_: Plan, ticks="auto", compile_cache=True):
    """Whether the chunk function reports save-block progress: ``ticks`` True/False, or "auto":
    when a chunk has >= TICK_MIN_VARIANT_STEPS variant-steps or the compile cache is off."""
    if ticks != "auto":
        return bool(ticks)
    return compile_cache is False or plan_.chunk_size * plan_.cfg.n_steps >= TICK_MIN_VARIANT_STEPS


def compiled(plan_: Plan, example, ticks=False):
    """jit(vmap(simulate)) lowered and compiled for the chunk shape, cached per Config in this
    process (and across processes by the persistent compile cache, ``parallel``); with several
    local devices the variant axis is sharded over them (``parallel.variant_sharding``).
    Returns (compiled function, seconds spent compiling now: 0 on an in-process hit)."""
    nd = jax.local_device_count()
    key = (
        plan_.mechanism,
        plan_.cfg,
        plan_.dtype,
        nd,
        jax.tree_util.tree_structure(example),
        tuple(x.shape for x in jax.tree_util.tree_leaves(example)),
        bool(ticks),
    )
    if key in _CACHE:
        return _CACHE[key], 0.0
    mech = plan_.mech
    sim = jax.vmap(lambda p: mech.simulate(plan_.cfg, p))
    if nd > 1:
        sh = parallel.variant_sharding()
        fn = jax.jit(sim, in_shardings=(sh,), out_shardings=sh)
        example = jax.device_put(example, sh)
    else:
        fn = jax.jit(sim)
    t0 = time.perf_counter()
    if ticks:
        with integrate.reporting_progress():  # the chunk reports its save blocks (progress bar)
            _CACHE[key] = fn.lower(example).compile()
    else:
        _CACHE[key] = fn.lower(example).compile()
    return _CACHE[key], time.perf_counter() - t0


def exec_size(chunk_size: int) -> int:
    """Variants per executed call: the chunk padded to a multiple of the local device count."""
    return parallel.padded_size(chunk_size, jax.local_device_count())


_CACHE: dict = {}


def chunk_metrics(spec, plan_: Plan, p, res, n_real):
    """Metrics table rows (dict of arrays) for one chunk: the mechanism's ``chunk_metrics``."""
    return plan_.mech.chunk_metrics(spec, plan_.cfg, p, res, n_real, plan_.t_end)


def _describe(spec, pl: Plan):
    """The mechanism's summary entries (``describe``), {} when it has none."""
    hook = getattr(pl.mech, "describe", None)
    return dict(hook(spec, pl.cfg)) if hook is not None else {}


def _chunk_indices(ci, cs, n):
    return np.arange(ci * cs, min(n, (ci + 1) * cs))


def padded(idx, cs):
    """A chunk's variant indices padded to ``cs`` by repeating its last variant."""
    return np.concatenate([idx, np.full(cs - len(idx), idx[-1])])


_variant_flat, _padded = variant_flat, padded  # older private names


def _pending_chunks(st, n_chunks):
    """Indices of the chunks still to compute, in order: those whose ``chunk_done`` flag is not set
    (every chunk when there is no store).  A multi-host runner takes its share of this list."""
    if st is None:
        return list(range(n_chunks))
    return [int(i) for i in np.nonzero(~store.done_flags(st))[0]]


def _execute_chunk(pl, p, ticks=False):
    """Run the compiled sweep function on one padded chunk ``p`` (leading axis chunk_size) and
    return its Result once computed (the unit a multi-device runner places per device)."""
    fn, _ = compiled(pl, p, ticks)
    if jax.local_device_count() > 1:
        p = jax.device_put(p, parallel.variant_sharding())
    res = fn(p)
    jax.block_until_ready(res)
    return res


def compute_chunk(spec, pl, ci, st=None, tick=False, on_compiled=None, progress=None):
    """Compute sweep chunk ``ci`` and, with a store ``st``, write it there: data first, its
    ``chunk_done`` flag last (the one write path of local, multi-host and cluster runs).
    Returns (metrics, histories, stats) for the chunk's real variants; stats: chunk, variants,
    compile_s (0 when the function was already compiled in this process), run_s.
    progress(n): the chunk's variants as they complete (fractional from save-block ticks when
    ``tick``); on_compiled(compile_s): called between compiling and running."""
    idx = _chunk_indices(ci, pl.chunk_size, pl.n_variants)
    p = batch_params(spec, pl, padded(idx, exec_size(pl.chunk_size)))
    _, c_s = compiled(pl, p, tick)
    if on_compiled is not None:
        on_compiled(c_s)
    t0 = time.perf_counter()
    ticks_ = _ChunkProgress(progress, len(idx)) if progress else None
    integrate.set_progress(ticks_ if tick else None)
    try:
        res = _execute_chunk(pl, p, tick)
    finally:
        integrate.set_progress(None)
    r_s = time.perf_counter() - t0
    m = chunk_metrics(spec, pl, p, res, len(idx))
    hh = {name: np.asarray(v)[: len(idx)] for name, v in res.history.items()}
    if st is not None:
        store.write_chunk(st, ci, m, hh)  # data first ...
        store.mark_done(st, ci)  # ... the flag last
    if ticks_ is not None:
        ticks_.finish()
    return m, hh, {"chunk": int(ci), "variants": len(idx), "compile_s": c_s, "run_s": r_s}


def write_progress(plog, ci, process, done, total, elapsed_s, rate, eta_s, **extra):
    """One line of progress.jsonl (a finished chunk)."""
    plog.write(
        json.dumps(
            {
                "chunk": int(ci),
                "process": process,
                "variants_done": int(done),
                "variants_total": int(total),
                "elapsed_s": round(elapsed_s, 4),
                "variant_steps_per_s": rate,
                "eta_s": round(eta_s, 4),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                **extra,
            }
        )
        + "\n"
    )
    plog.flush()


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
    names = tuple(pl.mech.joint_names(pl.cfg))
    g = store.create(
        outdir,
        spec_json=json.dumps(_clean_spec(spec), sort_keys=True),
        spec_hash=h,
        version=__version__,
        name=spec["sweep"]["name"],
        n_variants=pl.n_variants,
        chunk_size=pl.chunk_size,
        t_s=_times(pl),
        inputs=_inputs(pl),
        joints=names,
        dt_s=pl.cfg.dt,
        save_every=pl.cfg.save_every,
        base_dir=spec.get("_base_dir", "."),
    )
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
            "use --force to delete them and rerun (force=True from Python), or choose another --out"
        )


class _ChunkProgress:
    """Turns the save-block ticks of a running chunk (``integrate.set_progress``) into fractional
    ``progress(n)`` calls, so a bar moves within a chunk; ``finish`` reports the rest.  The tick
    carries the number of blocks done, so a tick seen once per device counts once."""

    def __init__(self, progress, n_real):
        self.progress, self.n_real = progress, n_real
        self.blocks, self.sent = 0, 0.0

    def __call__(self, done, total):
        self.blocks = max(self.blocks, done)
        frac = min(1.0, self.blocks / total)
        inc = frac * self.n_real - self.sent
        if inc > 0 and frac < 1.0:  # the last part comes with the chunk's results
            self.sent += inc
            self.progress(inc)

    def finish(self):
        if self.n_real - self.sent > 0:
            self.progress(self.n_real - self.sent)
        self.sent = self.n_real


def _previous_summary(outdir, h):
    """summary.json of the run that computed a finished store (same spec hash), else None."""
    try:
        s = json.loads((Path(outdir) / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    return s if s.get("spec_hash") == h else None


def run(
    spec_or_path,
    out=None,
    overrides=(),
    progress=None,
    log=print,
    force=False,
    compile_cache=True,
    stage=None,
    ticks="auto",
    cluster=None,
):
    """Run a sweep; return (metrics dict of columns, summary dict, histories dict).

    With ``out`` the results go to that directory: ``store.zarr`` (the chunked result store,
    see ``jaxclear.store``), progress.jsonl, metrics.csv (+ metrics.parquet with pyarrow),
    summary.json, plots/.  Rerun on the same ``out`` with the same spec, only chunks not marked
    done are computed; a store of another spec raises SpecError unless ``force`` (start over).

    Devices and hosts (``jaxclear.parallel``): each executed chunk is sharded over the local
    devices; in a ``jax.distributed`` run (``parallel.initialize`` first) process i computes
    pending chunks i, i+P, ... into the shared store and process 0 writes the derived files.
    compile_cache: True (default dir), a directory, or False: JAX's persistent compile cache.
    cluster: a Dask scheduler address ("tcp://host:8786"), a scheduler file, "local[:N]" or a
    ``distributed.Client``: every pending chunk becomes a task on its workers, which write into
    the store at ``out`` (required, on a file system they share); ``jaxclear.cluster``.
    progress(n): called as variants complete, with fractional n while a chunk runs (save-block
    ticks from the compiled function); stage(name, **info): "compiling" before the chunk
    function is built, "running" (compile_s=...) after, "plotting", "done".  ticks: True, False
    or "auto" (``wants_ticks``): the fractional within-chunk updates.
    A rerun of a finished directory keeps the timings of the run that computed its chunks in
    summary.json and records itself under ``rerun``.
    """
    cache_dir = parallel.enable_compile_cache(None if compile_cache is True else compile_cache)
    spec = (
        spec_or_path
        if isinstance(spec_or_path, dict) and "_base_dir" in spec_or_path
        else specmod.load(spec_or_path, overrides)
    )
    pl = plan(spec)
    h = specmod.spec_hash(spec)
    outdir = Path(out) if out else None
    log = log or (lambda *a, **k: None)
    pi, pc = parallel.process_index(), parallel.process_count()
    lead = pi == 0
    if cluster is not None and (outdir is None or pc > 1):
        raise ValueError(
            "cluster: a cluster run needs out (a directory its workers share) and a single "
            f"client process (got out={out!r}, jax.distributed process_count={pc})"
        )
    t_wall = time.perf_counter()
    st, fresh = None, True
    if outdir:
        outdir.mkdir(parents=True, exist_ok=True)
        _check_other_spec(outdir, h, force)  # every process, before anyone changes anything
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
    stage = stage or (lambda name, **info: None)
    prev = _previous_summary(outdir, h) if (outdir and not pending_all) else None
    tick = bool(progress) and wants_ticks(pl, ticks, compile_cache)
    t_loop = time.perf_counter()
    cstats = None
    try:
        if cluster is not None:  # every pending chunk a task on a Dask cluster (jaxclear.cluster)
            from . import cluster as cluster_mod

            stage("running", compile_s=0.0)
            cstats = cluster_mod.compute_pending(
                cluster,
                spec,
                pl,
                h,
                outdir,
                pending,
                done=done,
                progress=progress,
                plog=plog,
                log=log,
                compile_cache=compile_cache,
            )
            steps_done, run_s, compile_s = cstats["steps"], cstats["run_s"], cstats["compile_s"]
        for k, ci in enumerate(pending if cluster is None else ()):
            if k == 0:
                stage("compiling")
                log(f"compiling the chunk function ({cs_exec} variants × {pl.cfg.n_steps} steps) ...")

            def on_compiled(c_s, first=(k == 0)):
                if first:
                    log(f"compiled in {c_s:.2f} s" if c_s > 0 else "compiled function reused from this process")
                    stage("running", compile_s=c_s)

            m, hh, cst = compute_chunk(spec, pl, ci, st, tick=tick, on_compiled=on_compiled, progress=progress)
            if st is None:
                mem[ci] = (m, hh)
            compile_s += cst["compile_s"]
            run_s += cst["run_s"]
            steps_done += cst["variants"] * pl.cfg.n_steps  # real variants only, not the padding
            done += cst["variants"]
            if plog is not None:
                el = time.perf_counter() - t_loop
                per_chunk = max(el - compile_s, 0.0) / (k + 1)
                write_progress(
                    plog,
                    ci,
                    pi,
                    done,
                    B,
                    el,
                    (steps_done / run_s) if run_s > 0 else None,
                    per_chunk * (len(pending) - k - 1),
                )
    finally:
        if plog is not None:
            plog.close()
    parallel.barrier("jaxclear:chunks")  # every process's chunks are in the store
    rows = parallel.gather_rows([steps_done, run_s, compile_s, len(pending)])
    rate = float(sum(r[0] / r[1] for r in rows if r[1] > 0)) or None  # processes run side by side
    if cstats is not None:  # workers run side by side: the sum of their rates
        rate = cstats["variant_steps_per_s"]
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
        "name": spec["sweep"]["name"],
        "spec_hash": h,
        "version": __version__,
        "variants": int(B),
        "steps_per_variant": int(pl.cfg.n_steps),
        "dt_s": pl.cfg.dt,
        "t_end_s": pl.t_end,
        "save_every": pl.cfg.save_every,
        "chunk_size": int(cs),
        "chunks": n_chunks,
        "chunks_reused": reused,
        "chunks_computed": int(rows[:, 3].sum()),
        "store": str(store.path_of(outdir)) if outdir else None,
        "wall_s": wall,
        "compile_s": float(rows[:, 2].max()),
        "run_s": float(rows[:, 1].max()),
        "variant_steps_per_s": rate,
        "device_kind": dev[0].device_kind,
        "device_platform": dev[0].platform,
        "device_count": len(dev),
        "local_device_count": jax.local_device_count(),
        "process_count": pc,
        "cpu_devices": parallel.cpu_devices_choice(),
        "executed_chunk_size": int(cs_exec),
        "compile_cache": str(cache_dir) if cache_dir else None,
        "precision": pl.dtype,
        "scheme": pl.cfg.scheme,
        "mechanism": pl.mechanism,
        **_describe(spec, pl),
        "failed_variants": failed,
        "axes": [specmod.column_name(p) for p in pl.paths],
        "joints": list(pl.mech.joint_names(pl.cfg)),
        "python": platform.python_version(),
        "jax": jax.__version__,
    }
    if cstats is not None:
        summary.update(cluster=cstats["address"], cluster_workers=cstats["workers"], chunks_retried=cstats["retried"])
    if prev is not None:
        # nothing computed now: keep the figures of the run that computed the chunks, report this one apart
        rerun = {k: summary[k] for k in ("wall_s", "chunks_reused", "chunks_computed", "version", "device_count")}
        rerun["time"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        summary = {**prev, "rerun": rerun}
        summary.pop("plots", None)
        summary.pop("plot_s", None)
    # questionable results, from the table (every mechanism with the columns; metrics.table_warnings)
    summary["warnings"] = metrics.table_warnings(table, summary["axes"])
    if lead:
        for w in summary["warnings"]:
            log(f"warning: {w['message']}")
    if outdir and lead:
        stage("plotting")
        log(f"writing metrics.csv, summary.json{', plots/' if spec['outputs']['plots'] else ''} ...")
        summary = write_outputs(outdir, spec, table, summary, hists, _times(pl))
    stage("done")
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
    if spec["outputs"]["plots"] and hasattr(mechanism_of(spec), "plots"):
        t0 = time.perf_counter()
        written = _plots(outdir, spec, table, summary, hists, t)
        if written:
            summary["plots"] = written
            summary["plot_s"] = time.perf_counter() - t0
    (outdir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _plots(outdir, spec, table, summary, hists, t):
    return mechanism_of(spec).plots(outdir, spec, table, summary, hists, t)


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

    def to_pandas(self):
        """The metrics table (inputs then metrics, as metrics.csv) as a ``pandas.DataFrame``
        indexed by variant (ImportError with the install hint when pandas is missing)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Results.to_pandas() needs pandas: pip install pandas (or 'jaxclear[io]')") from None
        df = pd.DataFrame({k: np.asarray(v) for k, v in self.table.items()})
        df.index.name = "variant"
        return df

    def to_xarray(self, unstack=True):
        """``to_xarray(self, unstack)``."""
        return to_xarray(self, unstack=unstack)


def load(out, as_xarray=False, histories=True):
    """Read a sweep directory (or its store.zarr) back: a ``Results``, or with ``as_xarray`` an
    ``xarray.Dataset`` (``to_xarray``: a grid sweep has one dimension per swept column, so
    ``ds.sel(clearance_m=1e-4, crank_speed_rpm=3000)`` works; other sweeps keep a flat
    ``variant`` dimension).  An incomplete store loads too: ``missing_chunks`` lists the chunks
    not done."""
    g = store.open(out, mode="r")
    r = store.read(g, histories=histories)
    at = r["attrs"]
    summary = None
    sj = store.path_of(out).parent / "summary.json"
    if r["chunk_done"].all() and sj.exists():
        s = json.loads(sj.read_text())
        summary = s if s.get("spec_hash") == at["spec_hash"] else None
    res = Results(
        metrics=r["metrics"],
        inputs=r["inputs"],
        histories=r["histories"],
        t_s=r["t_s"],
        spec=store.spec_of(g),
        summary=summary,
        chunk_done=r["chunk_done"],
        variant_done=r["variant_done"],
        attrs=at,
    )
    return to_xarray(res) if as_xarray else res


def is_full_grid(inputs) -> bool:
    """Whether the swept columns form a full Cartesian grid (each combination once)."""
    if not inputs:
        return False
    cols = [np.asarray(v, float) for v in inputs.values()]
    n = len(cols[0])
    if math.prod(len(np.unique(c)) for c in cols) != n:
        return False
    return len(np.unique(np.stack(cols, axis=1), axis=0)) == n


def to_xarray(res: Results, unstack=True):
    """Results -> xarray.Dataset (ImportError with the install hint when xarray is missing).

    Dims variant, time, joint; with ``unstack`` and a full grid of swept values (``is_full_grid``)
    the variant dimension is replaced by one dimension per swept column (sorted values), the
    variant number kept as the data variable ``variant``."""
    try:
        import xarray as xr
    except ImportError:
        raise ImportError(
            "sweep.load(..., as_xarray=True) needs xarray: pip install xarray (or 'jaxclear[io]')"
        ) from None
    n = len(res.variant_done)
    coords = {"variant": np.arange(n), "time": ("time", res.t_s, {"units": "s"}), "joint": list(res.attrs["joints"])}
    for c, v in res.inputs.items():
        coords[c] = ("variant", v)
    data = {"done": ("variant", res.variant_done)}
    for c, v in res.metrics.items():
        data[c] = ("variant", v)
    for c, v in res.histories.items():
        data[c] = (("variant", "time") if v.ndim == 2 else ("variant", "time", "joint"), v)
    at = res.attrs
    ds = xr.Dataset(
        data,
        coords=coords,
        attrs={
            "name": at["name"],
            "spec_hash": at["spec_hash"],
            "jaxclear_version": at["version"],
            "spec": at["spec"],
            "chunk_size": at["chunk_size"],
            "missing_chunks": res.missing_chunks,
        },
    )
    if unstack and len(res.inputs) >= 1 and is_full_grid(res.inputs):
        ds = ds.assign(variant_number=("variant", np.arange(n)))
        ds = ds.set_index(variant=list(res.inputs)).unstack("variant")
        ds = ds.rename({"variant_number": "variant"})
        ds = ds.transpose(*list(res.inputs), ...)
    return ds


def _done_subset(res: Results):
    """(table, histories) of the done variants only."""
    sel = res.variant_done
    table = {k: np.asarray(v)[sel] for k, v in res.table.items()}
    return table, {k: np.asarray(v)[sel] for k, v in res.histories.items()}


def plot_results(out, res: Results | None = None):
    """Regenerate DIR/plots from the store (done variants only); returns the written paths."""
    res = res if res is not None else load(out)
    spec = res.spec
    if not res.variant_done.any() or not hasattr(mechanism_of(spec), "plots"):
        return []
    table, hists = _done_subset(res)
    summary = {
        "name": res.attrs["name"],
        "mechanism": spec["model"]["mechanism"],
        "axes": list(res.attrs["axes"]),
        "joints": list(res.attrs["joints"]),
        "save_every": res.attrs.get("save_every"),
    }
    if "clearance_joint" in spec["model"]:
        summary["clearance_joint"] = spec["model"]["clearance_joint"]
    return _plots(Path(out) if Path(out).name != store.NAME else Path(out).parent, spec, table, summary, hists, res.t_s)


def export(out, fmt="csv", output=None):
    """Write the metrics table of a sweep directory as csv or parquet; returns the file written
    (default DIR/metrics.<fmt>).  Variants of chunks not done are rows of NaN."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"export format {fmt!r}: use 'csv' or 'parquet'")
    res = load(out, histories=False)
    dest = Path(output) if output else store.path_of(out).parent / f"metrics.{fmt}"
    (write_csv if fmt == "csv" else write_parquet)(dest, res.table)
    return dest
