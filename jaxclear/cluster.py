"""Sweeps on a Dask distributed cluster: every pending chunk is one task.

``sweep.run(spec, out=DIR, cluster=ADDRESS)`` / ``jaxclear run SPEC --out DIR --cluster ADDRESS``.
The client (this process) creates or reopens the store ``DIR/store.zarr`` exactly as a local run
does, lists the chunks whose ``chunk_done`` flag is not set and submits one task per chunk; each
task runs on a worker, computes the chunk (``sweep.compute_chunk``: the local code path) and
writes it into the shared store itself, data first and its flag last.  Only a few numbers come
back to the client, which writes progress.jsonl, calls the progress bar and, when every task is
done, reads the store and writes the derived files as a local run does.

Why Dask (not Ray, not ``jax.distributed``): a static split (process i takes chunks i, i+P, ...)
waits for the slowest host and loses a dead host's share; a scheduler hands chunks to whichever
worker is free and, when a worker dies (its heartbeat or connection is lost), reschedules the
tasks it held on another worker, up to ``distributed.scheduler.allowed-failures`` times (default
3, then ``KilledWorker``).  Dask is pure Python (dask + distributed, a few MB, no daemon of its
own), runs on SLURM / PBS / SGE / LSF through dask-jobqueue and on Kubernetes through
dask-kubernetes, and its worker processes are started with ``spawn`` (never forked after JAX has
initialised).  Ray would bring a ~100 MB binary wheel with its own object store and raylet.

Warm workers.  A Dask worker is a long-lived process: ``sweep.compiled`` keeps the compiled chunk
function per (mechanism, Config, precision, devices, shapes) in that process, so after its first
task a worker runs every further chunk of the same structure without compiling; the plan of a
spec is kept per worker too (``_plan_of``), and the persistent compile cache
(``parallel.enable_compile_cache``) lets a new worker load a structure another worker compiled.
Tasks inside one worker process run one at a time (``_LOCK``): each already uses every local
device (and XLA's threads), so start workers with ``--nthreads 1``, one per GPU.

Failures.  A task killed with its worker leaves a chunk whose flag is not set (maybe half its
files): the rescheduled task rewrites all of its files, so the store ends whole and identical to
a local run's (the variants of a chunk do not depend on where it runs, given the same device
kind).  ``*.partial`` temporaries the killed writer left are deleted once every task is done.
If the client dies, its tasks are released (running ones finish and write their chunk); rerun the
same command to resume from the store.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
import warnings
from dataclasses import replace
from pathlib import Path

__all__ = ["connect", "compute_pending", "chunk_task", "worker_state"]

_LOCK = threading.Lock()
_PLANS: dict = {}  # (spec_hash, chunk_size) -> Plan, per worker process
_STATE: dict = {"chunk": None, "phase": "idle", "tasks": 0, "pid": os.getpid()}


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("--cluster needs Dask distributed: pip install 'jaxclear[dask]'") from None
    return distributed


def connect(address, n_workers=None):
    """(distributed.Client, close): ``address`` is a scheduler address ("tcp://host:8786"), a
    scheduler file (JSON written by ``dask scheduler --scheduler-file``), "local" / "local:N" (a
    LocalCluster of N single-threaded worker processes on this machine, default: one per core)
    or an existing Client (left open)."""
    distributed = _distributed()
    if isinstance(address, distributed.Client):
        return address, lambda: None
    a = str(address)
    if a == "local" or a.startswith("local:"):
        tail = a.split(":", 1)[1] if ":" in a else ""
        if tail and not tail.isdigit() or tail and int(tail) < 1:
            raise ValueError(f"cluster {a!r}: expected local or local:N with N >= 1 worker processes")
        n = n_workers or (int(tail) if tail else os.cpu_count() or 1)
        import dask

        # spawn whatever the user's dask config says: this process may already have initialised JAX
        with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):
            lc = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        client = distributed.Client(lc)

        def close():
            client.close()
            lc.close()

        return client, close
    if a.endswith(".json") and Path(a).is_file():
        client = distributed.Client(scheduler_file=a)
    else:
        client = distributed.Client(a)
    return client, client.close


def worker_state():
    """This worker's state (tests, monitoring): pid, chunk in hand, phase (idle / plan / compute)."""
    return dict(_STATE)


def _plan_of(spec, h, chunk_size):
    """The spec's Plan on this worker (computed once per spec and chunk size)."""
    from . import sweep

    key = (h, int(chunk_size))
    if key not in _PLANS:
        with warnings.catch_warnings():  # the client has shown the plan's warnings already
            warnings.simplefilter("ignore")
            pl = sweep.plan(spec)
        if len(_PLANS) >= 4:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = replace(pl, chunk_size=int(chunk_size))
    return _PLANS[key]


def chunk_task(spec, h, chunk_size, out, ci, compile_cache=None):
    """The task of one chunk, run on a worker: compute chunk ``ci`` of ``spec`` (hash ``h``) and
    write it into the store of ``out`` (``sweep.compute_chunk``).  Returns its stats with the
    worker's pid.  Refuses a store of another spec (replaced since the task was submitted)."""
    from . import parallel, store, sweep

    with _LOCK:
        _STATE.update(chunk=int(ci), phase="plan")
        try:
            parallel.enable_compile_cache(compile_cache)
            pl = _plan_of(spec, h, chunk_size)
            st = store.open(out)
            if st.attrs.get("spec_hash") != h:
                raise RuntimeError(
                    f"{store.path_of(out)} now holds spec_hash {st.attrs.get('spec_hash')}, "
                    f"not {h}: chunk {ci} not written"
                )
            _STATE["phase"] = "compute"
            _, _, stats = sweep.compute_chunk(spec, pl, ci, st)
        finally:
            _STATE.update(chunk=None, phase="idle", tasks=_STATE["tasks"] + 1)
    return {**stats, "pid": os.getpid()}


def compute_pending(
    cluster, spec, pl, h, out, pending, *, done, progress=None, plog=None, log=None, compile_cache=True
):
    """Run the ``pending`` chunks as tasks on ``cluster`` (see ``connect``), writing into the
    store of ``out``; progress.jsonl lines and ``progress(n)`` as chunks finish.  Returns stats:
    steps, run_s and compile_s (the busiest worker's sums), variant_steps_per_s (sum over
    workers of their steps / run_s), workers, retried (tasks whose first worker died), address."""
    from . import store, sweep

    distributed = _distributed()
    if not pending:  # everything reused from the store: no cluster needed
        return {
            "steps": 0,
            "run_s": 0.0,
            "compile_s": 0.0,
            "variant_steps_per_s": None,
            "workers": 0,
            "retried": 0,
            "address": str(cluster),
        }
    client, close = connect(cluster)
    cc = None if compile_cache is True else (False if compile_cache is False else str(compile_cache))
    B, n_steps = pl.n_variants, pl.cfg.n_steps
    run_id = uuid.uuid4().hex[:8]
    futures = []
    by_pid: dict = {}
    retried = 0
    try:
        n_workers = len(client.nthreads())
        if log:
            log(f"cluster {client.scheduler.address}: {len(pending)} chunk tasks on {n_workers} workers")
        futures = [
            client.submit(
                chunk_task,
                spec,
                h,
                pl.chunk_size,
                str(out),
                ci,
                cc,
                key=f"jaxclear-chunk-{ci}-{h[:8]}-{run_id}",
                pure=False,
            )
            for ci in pending
        ]
        t0 = time.perf_counter()
        for k, fut in enumerate(distributed.as_completed(futures)):
            try:
                s = fut.result()
            except distributed.client.FutureCancelledError:
                raise RuntimeError(
                    f"cluster task {fut.key} was cancelled (scheduler restarted?); rerun to resume from the store"
                ) from None
            except distributed.KilledWorker as e:
                raise RuntimeError(
                    f"cluster task {fut.key} lost every worker it ran on ({e}); "
                    "the chunk may need more memory than a worker has; done chunks are "
                    "kept, rerun to resume from the store"
                ) from None
            w = by_pid.setdefault(s["pid"], [0, 0.0, 0.0])
            w[0] += s["variants"] * n_steps
            w[1] += s["run_s"]
            w[2] += s["compile_s"]
            done += s["variants"]
            if plog is not None:
                el = time.perf_counter() - t0
                rate = sum(v[0] / v[1] for v in by_pid.values() if v[1] > 0) or None
                sweep.write_progress(
                    plog,
                    s["chunk"],
                    0,
                    done,
                    B,
                    el,
                    rate,
                    el / (k + 1) * (len(futures) - k - 1),
                    worker_pid=s["pid"],
                    compile_s=round(s["compile_s"], 4),
                )
            if progress:
                progress(s["variants"])
        retried = _retried(client, futures)
    finally:
        for f in futures:
            if not f.done():
                f.cancel()
        close()
    store.remove_partial_files(out)  # temporaries of writers killed mid-chunk (no writer is left)
    rows = list(by_pid.values())
    return {
        "steps": sum(r[0] for r in rows),
        "run_s": max((r[1] for r in rows), default=0.0),
        "compile_s": max((r[2] for r in rows), default=0.0),
        "variant_steps_per_s": sum(r[0] / r[1] for r in rows if r[1] > 0) or None,
        "workers": len(rows),
        "retried": retried,
        "address": str(cluster) if not isinstance(cluster, distributed.Client) else client.scheduler.address,
    }


def _retried(client, futures):
    """How many of ``futures`` ran more than once (their worker died): from the scheduler's
    per-task retry record, 0 when the scheduler does not tell."""
    keys = {f.key for f in futures}

    def count(dask_scheduler=None, keys=keys):
        return sum(1 for k in keys if k in dask_scheduler.tasks and dask_scheduler.tasks[k].suspicious > 0)

    try:
        return int(client.run_on_scheduler(count))
    except Exception:  # older scheduler without task.suspicious, or tasks already forgotten
        return 0
