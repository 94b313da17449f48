"""The sweep service: specs submitted over HTTP, a SQLite queue, worker processes, results.

``jaxclear serve --data DIR`` runs one HTTP server (FastAPI on uvicorn) and, by default, one
worker process.  Layout of DIR:

    queue.sqlite          the job table (WAL mode: the server reads while a worker writes)
    jobs/<id>/spec.json   the submitted spec (after ``--set``-like overrides)
    jobs/<id>/out/        the sweep directory (store.zarr, metrics.csv, summary.json, plots/, ...)
    jobs/<id>/job.log     what the sweep printed
    xla-cache/            JAX's persistent compilation cache (unless --cache-dir)
    worker-<i>.log        each worker's log (tracebacks of failed jobs go here, not to clients)

Life of a job: ``queued`` → ``compiling`` → ``running`` → ``done`` | ``failed`` | ``cancelled``.
A worker is a long-lived process: ``jaxclear.sweep`` keeps compiled chunk functions per model
structure in memory, so a second job of the same structure compiles nothing, and the persistent
cache serves them across restarts.  Workers die with the server (PR_SET_PDEATHSIG, and a parent
check); when the server starts, jobs left ``compiling``/``running`` are queued again at the head
of the queue and ``sweep.run`` resumes them from their store (finished chunks are not
recomputed, the result is bit-identical).

Security defaults: bind 127.0.0.1; a bearer token always (a random one printed once in a login
URL unless one is given; ``--no-token`` for a trusted machine: loopback names only); requests
that change something refused from other origins; spec content types that force a CORS
preflight; submitted specs limited in bytes, nesting, variants, chunks, store bytes and
estimated wall time; job ids 128-bit random; files served only from the job's own ``out/``
folder; every bad request a 4xx whose ``detail`` names the problem.
"""

import errno
import hmac
import html
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
import traceback
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .spec import MAX_VARIANTS

STATUSES = ("queued", "compiling", "running", "done", "failed", "cancelled")
ACTIVE = ("compiling", "running")
FINAL = ("done", "failed", "cancelled")
ID_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")  # secrets.token_urlsafe(16)
MAX_ATTEMPTS = 3  # a job whose worker died this many times (deaths the running server saw) is failed
CANCEL_GRACE_S = 5.0  # a running job not stopped at a chunk boundary by then: its worker is killed
WORKER_WINDOW_S = 60.0  # a worker up this long is healthy again (its death streak is forgotten)
WORKER_DEATHS_UNHEALTHY = 3  # deaths in a row that make /api/health answer ok: false
RESPAWN_BACKOFF_S = (0.5, 30.0)  # wait before restarting a worker after its 2nd death in a row, doubling up to the 2nd
RETRY_S = 1.0  # a queue write refused by a full disk is tried again this often

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  created REAL NOT NULL,
  started REAL,
  finished REAL,
  spec_json TEXT NOT NULL,
  spec_hash TEXT NOT NULL,
  variants_total INTEGER NOT NULL,
  steps_per_variant INTEGER NOT NULL,
  variants_done INTEGER NOT NULL DEFAULT 0,
  variant_steps_per_s REAL,
  eta_s REAL,
  compile_s REAL,
  error TEXT,
  warnings TEXT NOT NULL DEFAULT '[]',
  cancel_requested REAL NOT NULL DEFAULT 0,  -- time of the request (0: none)
  attempts INTEGER NOT NULL DEFAULT 0,
  resumed INTEGER NOT NULL DEFAULT 0,
  worker INTEGER,
  updated REAL,
  deaths INTEGER NOT NULL DEFAULT 0  -- deaths of its worker that a running server saw
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(status, seq);
"""


@dataclass(frozen=True)
class Limits:
    """Limits on what one submission may ask for (``jaxclear serve --max-...``)."""

    max_spec_bytes: int = 256 * 1024
    max_variants: int = MAX_VARIANTS  # as jaxclear run --max-variants
    max_steps: int = 10**12  # variants × steps per variant
    max_queued: int = 1000
    max_store_bytes: int = 16 * 2**30  # histories (variants × saves × channels × 8 B) + file overhead
    min_free_bytes: int = 512 * 2**20  # free space on DATA below which submissions get 507 and workers wait
    max_chunks: int = 256  # chunks of one job (each chunk writes ~35 files into the store)
    max_job_seconds: float = 86400.0  # wall time of one job (estimated at submit, enforced running); 0: none
    max_depth: int = 16  # nesting of a submitted spec (tables, arrays, inline tables)
    max_name_chars: int = 200  # sweep.name
    max_description_chars: int = 2000  # sweep.description


# What a chunk costs on disk beyond its data (file-system blocks of its zarr chunk files): the
# store writes per chunk one chunk_done flag, one file per input axis, one per metric column
# (~30) and one of histories; each takes at least a 4 KiB block.
FILE_OVERHEAD_B = 4096
METRIC_FILES_PER_CHUNK = 32


# ----------------------------------------------------------------------------------------- queue


def connect(data: Path) -> sqlite3.Connection:
    """A connection to DIR/queue.sqlite (created on first use), WAL mode, 30 s busy timeout."""
    data.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(data / "queue.sqlite"), timeout=30.0, isolation_level=None, check_same_thread=False)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.executescript(SCHEMA)
    if "deaths" not in {r["name"] for r in con.execute("PRAGMA table_info(jobs)")}:  # a queue of an older version
        con.execute("ALTER TABLE jobs ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0")
    return con


def disk_full(e) -> bool:
    """Whether ``e`` (or an exception it was raised from) is a full disk: OSError ENOSPC / EDQUOT or
    SQLite's 'database or disk is full'."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(e, sqlite3.OperationalError) and "full" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def free_bytes(path):
    """Free bytes on the file system of ``path`` (None when it cannot be asked)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def low_space(data, min_free_bytes):
    """A message naming both numbers when DATA has less than ``min_free_bytes`` free, else None."""
    free = free_bytes(data)
    if not min_free_bytes or free is None or free >= min_free_bytes:
        return None
    return (
        f"{data} has {free} bytes ({free / 2**20:.1f} MiB) free, less than the minimum of {min_free_bytes} "
        f"bytes ({min_free_bytes / 2**20:.1f} MiB; jaxclear serve --min-free-bytes)"
    )


def _error_text(e, data):
    """A job's error message for exception ``e``; a full disk says so and how much is free."""
    msg = f"{type(e).__name__}: {e}"
    if disk_full(e):
        msg = (
            f"the disk is full ({data}: {free_bytes(data)} bytes free): {msg}; the finished chunks are kept "
            "in the job's store"
        )
    return msg


def requeue_interrupted(con, worker=None, died=None):
    """Jobs left compiling/running (all of them, or those of ``worker``) go back to the queue,
    keeping their place (seq) and their store (``sweep.run`` resumes from the finished chunks).
    ``died``: the last error of a worker death the running server saw; only such deaths count,
    and a job after MAX_ATTEMPTS of them is failed with that error.  A stop or restart of the
    server (``died=None``) counts nothing.  Returns the ids requeued."""
    q = "SELECT id, deaths, cancel_requested FROM jobs WHERE status IN ('compiling', 'running')"
    rows = con.execute(
        q + ("" if worker is None else " AND worker = ?"), () if worker is None else (worker,)
    ).fetchall()
    back = []
    now = time.time()
    for r in rows:
        deaths = r["deaths"] + (died is not None)
        if r["cancel_requested"]:
            con.execute("UPDATE jobs SET status='cancelled', finished=?, updated=? WHERE id=?", (now, now, r["id"]))
        elif deaths >= MAX_ATTEMPTS:
            con.execute(
                "UPDATE jobs SET status='failed', finished=?, updated=?, deaths=?, error=? WHERE id=?",
                (now, now, deaths, f"the worker died {deaths} times while running this job; last: {died}", r["id"]),
            )
        else:
            con.execute(
                "UPDATE jobs SET status='queued', resumed=resumed+1, deaths=?, updated=? WHERE id=?",
                (deaths, now, r["id"]),
            )
            back.append(r["id"])
    return back


def claim(con, worker: int):
    """Atomically take the oldest queued job (status -> compiling); None when the queue is empty."""
    # (cancelling a queued job and claiming it are both single UPDATEs on status='queued')
    con.execute("BEGIN IMMEDIATE")
    try:
        r = con.execute("SELECT id FROM jobs WHERE status='queued' ORDER BY seq LIMIT 1").fetchone()
        if r is None:
            con.execute("COMMIT")
            return None
        now = time.time()
        con.execute(
            "UPDATE jobs SET status='compiling', started=COALESCE(started, ?), worker=?, "
            "attempts=attempts+1, updated=? WHERE id=?",
            (now, worker, now, r["id"]),
        )
        con.execute("COMMIT")
        return r["id"]
    except BaseException:
        if con.in_transaction:  # (SQLite may have rolled back already, e.g. on a full disk)
            con.execute("ROLLBACK")
        raise


def job_dir(data: Path, job_id: str) -> Path:
    return data / "jobs" / job_id


# ---------------------------------------------------------------------------------------- worker


class JobCancelled(Exception):
    pass


def _set_pdeathsig():
    """Linux: the kernel kills this process when its parent dies (server SIGKILLed)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class _Log:
    """An append-only, line-buffered log that outlives a full disk: lines it could not write are
    counted and the count is written once space is back.  Other OSErrors are raised."""

    def __init__(self, path):
        self.path, self.f, self.lost, self._last = Path(path), None, 0, None

    def write(self, text):
        try:
            if self.f is None:
                self.f = open(self.path, "a", buffering=1)
            if self.lost:
                self.f.write(f"({self.lost} log line(s) lost: the disk was full)\n")
                self.lost = 0
            self.f.write(text)
        except OSError as e:
            if not disk_full(e):
                raise
            self.lost += 1

    def once(self, message):
        """``message`` (a condition, e.g. a full disk) written once, not at every poll; None resets."""
        if message is not None and message != self._last:
            self.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n")
        self._last = message

    def close(self):
        if self.f is not None:
            try:
                self.f.close()
            except OSError as e:
                if not disk_full(e):
                    raise
            self.f = None


def worker_main(data, index=0, cache_dir=None, parent=None, poll_s=0.2, cluster=None, min_free_bytes=0):
    """The worker loop: take the oldest queued job, run it with ``sweep.run``, record progress,
    until the parent process (the server) is gone.  With ``cluster`` (a Dask scheduler address
    or file) the job's chunks run as tasks on that cluster (``jaxclear.cluster``); this process
    is then their client.  No job is taken while DATA has less than ``min_free_bytes`` free."""
    data = Path(data)
    from . import parallel, sweep
    from . import spec as specmod

    cache = parallel.enable_compile_cache(cache_dir or (data / "xla-cache"))
    con = connect(data)
    log = _Log(data / f"worker-{index}.log")
    log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} worker {index} pid {os.getpid()} up, compile cache {cache}\n")

    def alive():
        return parent is None or os.getppid() == parent

    while alive():
        if work_once(con, data, index, cache, log, specmod, sweep, cluster, min_free_bytes, alive) is None:
            time.sleep(poll_s)
    return 0


def work_once(con, data, index, cache, log, specmod, sweep, cluster=None, min_free_bytes=0, alive=None):
    """One turn of the worker loop: unless DATA is short of space, claim the oldest queued job and
    run it.  Returns the job id run, or None (nothing taken).  A queue that cannot be read or
    written (a full disk) is logged once and tried again at the next turn."""
    low = low_space(data, min_free_bytes)
    if low:
        log.once(f"not taking jobs: {low}")
        return None
    try:
        job_id = claim(con, index)
    except (sqlite3.Error, OSError) as e:
        log.once(f"cannot take a job from the queue, trying again: {_error_text(e, data)}")
        return None
    log.once(None)
    if job_id is None:
        return None
    try:
        _run_job(con, data, job_id, cache, log, specmod, sweep, cluster, alive)
    except Exception as e:  # a job never takes the worker down
        log.write(f"job {job_id}: unexpected {traceback.format_exc()}\n")
        _finish(con, job_id, "failed", _error_text(e, data), alive=alive)
    return job_id


def _finish(con, job_id, status, error=None, alive=None, **fields):
    """Record a job's end; a write refused by a full disk is tried again every RETRY_S (while
    ``alive()``, the server, is there)."""
    sets = ", ".join(f"{k}=?" for k in fields)
    while True:
        now = time.time()
        try:
            con.execute(
                f"UPDATE jobs SET status=?, finished=?, updated=?, error=?{', ' + sets if sets else ''} WHERE id=?",
                (status, now, now, error, *fields.values(), job_id),
            )
            return True
        except sqlite3.OperationalError as e:
            if not (disk_full(e) or "locked" in str(e)) or (alive is not None and not alive()):
                raise
            time.sleep(RETRY_S)


def _run_job(con, data, job_id, cache, log, specmod, sweep, cluster=None, alive=None):
    row = con.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
    jd = job_dir(data, job_id)
    out = jd / "out"
    log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} job {job_id} ({row['name']}) attempt {row['attempts']}\n")
    jlog = _Log(jd / "job.log")
    try:
        spec = specmod.load(json.loads(row["spec_json"]))
        spec["_base_dir"] = str(jd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pl = sweep.plan(spec)
    except specmod.SpecError as e:
        jlog.write(f"failed: {e}\n")
        jlog.close()
        _finish(con, job_id, "failed", str(e), alive=alive)
        return
    compiled = {"s": 0.0}

    def stage(name, **info):
        # sweep.run compiles before its first chunk: 'compiling' and 'running' told apart, and
        # the compile time the API reports is the one summary.json records
        if name == "running":
            compiled["s"] = float(info.get("compile_s") or 0.0)
            con.execute(
                "UPDATE jobs SET status='running', compile_s=?, updated=? WHERE id=? AND status='compiling'",
                (compiled["s"], time.time(), job_id),
            )
        jlog.write(
            f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {name}" + "".join(f" {k}={v:.3g}" for k, v in info.items()) + "\n"
        )

    state = {"done": 0, "t0": time.perf_counter()}
    n_steps = pl.cfg.n_steps

    def progress(n):
        state["done"] += n
        rate = eta = None
        try:  # sweep.run has just appended this chunk's line (variant-steps/s without compile)
            last = (out / "progress.jsonl").read_text().strip().splitlines()[-1]
            rec = json.loads(last)
            rate, eta = rec.get("variant_steps_per_s"), rec.get("eta_s")
        except (OSError, IndexError, ValueError):
            pass
        r = con.execute("SELECT cancel_requested FROM jobs WHERE id=?", (job_id,)).fetchone()
        con.execute(
            "UPDATE jobs SET variants_done=?, variant_steps_per_s=?, eta_s=?, updated=? WHERE id=?",
            (min(int(state["done"] + 1e-9), pl.n_variants), rate, eta, time.time(), job_id),
        )
        if r["cancel_requested"] and state["done"] < pl.n_variants - 1e-9:
            # (a cancel that lands in the last chunk has nothing left to stop: the job ends done)
            raise JobCancelled()

    def cancelled():
        r = con.execute("SELECT cancel_requested FROM jobs WHERE id=?", (job_id,)).fetchone()
        return bool(r and r["cancel_requested"])

    try:
        _, summary, _ = sweep.run(
            spec,
            out=out,
            progress=progress,
            compile_cache=cache,
            stage=stage,
            cluster=cluster,
            log=lambda m: jlog.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {m}\n"),
        )
    except JobCancelled:
        jlog.write("cancelled\n")
        _finish(con, job_id, "cancelled", alive=alive)
        return
    except specmod.SpecError as e:
        _finish(con, job_id, "failed", str(e), alive=alive)
        return
    except Exception as e:
        if not disk_full(e) and cancelled():  # JobCancelled raised inside a running chunk's progress callback
            jlog.write("cancelled (within a chunk)\n")
            _finish(con, job_id, "cancelled", alive=alive)
            return
        jlog.write(traceback.format_exc())
        log.write(f"job {job_id} failed: {traceback.format_exc()}\n")
        _finish(con, job_id, "failed", _error_text(e, data), alive=alive)
        return
    finally:
        jlog.close()
    # the job's warnings: those of the submission, then the questionable results (summary.json "warnings")
    warns = json.loads(row["warnings"] or "[]") + [f"{w['code']}: {w['message']}" for w in summary.get("warnings", [])]
    _finish(
        con,
        job_id,
        "done",
        None,
        alive=alive,
        variants_done=pl.n_variants,
        variant_steps_per_s=summary.get("variant_steps_per_s"),
        eta_s=0.0,
        compile_s=float(summary.get("compile_s") or 0.0),
        warnings=json.dumps(warns),
    )
    log.write(
        f"job {job_id} done: {pl.n_variants} variants × {n_steps} steps, compile {summary.get('compile_s', 0):.3g} s, "
        f"wall {summary['wall_s']:.3g} s\n"
    )


# ------------------------------------------------------------------------------------ submission


class BadRequest(Exception):
    """A client error: HTTP ``status`` with a message naming the problem."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message


def parse_spec(body: bytes, content_type: str, limits: Limits) -> dict:
    """The raw spec dict from a request body: TOML text (``application/toml``, ``text/*``) or
    JSON (``application/json``: the spec tables, or ``{"spec": {...} | "TOML text", "set": [...]}``)."""
    if len(body) > limits.max_spec_bytes:
        raise BadRequest(
            413,
            f"spec is {len(body)} bytes, more than the limit of {limits.max_spec_bytes} "
            "bytes (jaxclear serve --max-spec-bytes)",
        )
    ct = (content_type or "").split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(400, f"request body is not UTF-8 text: {e}") from None
    overrides = []
    if ct not in JSON_TYPES + TOML_TYPES:
        why = (
            "no Content-Type"
            if not ct
            else f"Content-Type {ct!r}"
            + (" (a web page on any site can send it without asking)" if ct in SIMPLE_TYPES else "")
        )
        raise BadRequest(415, f"{why}: send the spec as application/toml or application/json")
    if ct in JSON_TYPES:
        try:
            obj = json.loads(text)
        except RecursionError:
            raise BadRequest(422, f"spec: nested deeper than the limit of {limits.max_depth} levels") from None
        except ValueError as e:
            raise BadRequest(400, f"request body is not valid JSON: {e}") from None
        check_depth(obj, limits.max_depth)
        if not isinstance(obj, dict):
            raise BadRequest(422, "spec: a JSON spec must be an object of tables (sweep, model, axes, ...)")
        if "spec" in obj:
            extra = sorted(set(obj) - {"spec", "set"})
            if extra:
                raise BadRequest(422, f"{extra[0]}: unknown field of a submission (allowed: spec, set)")
            overrides = obj.get("set") or []
            if not isinstance(overrides, list) or not all(isinstance(s, str) for s in overrides):
                raise BadRequest(422, f"set = {overrides!r}: expected a list of 'key=value' strings")
            obj = obj["spec"]
            if isinstance(obj, str):
                obj = _toml(obj, limits)
            if not isinstance(obj, dict):
                raise BadRequest(422, "spec: expected an object of tables or a TOML string")
        raw = obj
    else:
        raw = _toml(text, limits)
    raw = dict(raw)
    raw["_set"] = overrides
    return raw


# Content types a spec may come as.  Not text/plain, nor none: a form or a no-cors fetch on any
# web page sends those without a CORS preflight, so the browser would let any site queue jobs.
JSON_TYPES = ("application/json",)
TOML_TYPES = ("application/toml", "text/toml", "text/x-toml", "application/x-toml")
SIMPLE_TYPES = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data")


def _toml(text, limits: Limits):
    try:
        obj = tomllib.loads(text)
    except RecursionError:
        raise BadRequest(422, f"spec: nested deeper than the limit of {limits.max_depth} levels") from None
    except tomllib.TOMLDecodeError as e:
        raise BadRequest(422, f"spec is not valid TOML: {e}") from None
    check_depth(obj, limits.max_depth)
    return obj


def check_depth(obj, limit: int):
    """BadRequest 422 naming the path when ``obj`` nests tables/arrays deeper than ``limit``
    (iterative: a hostile depth never recurses here)."""
    stack = [(obj, 0, "")]
    while stack:
        o, d, path = stack.pop()
        if d > limit:
            path = path if len(path) <= 200 else path[:200] + "..."
            raise BadRequest(
                422,
                f"{path or 'spec'}: nested {d} levels deep, more than the limit of {limit} "
                "(a spec needs 3: table, key, value list)",
            )
        if isinstance(o, dict):
            stack.extend((v, d + 1, f"{path}.{k}" if path else str(k)) for k, v in o.items())
        elif isinstance(o, list):
            stack.extend((v, d + 1, f"{path}[{i}]") for i, v in enumerate(o))


def count_variants(raw: dict):
    """Deprecated alias of ``jaxclear.spec.count_variants`` (one counter for the CLI and the service)."""
    from . import spec as specmod

    return specmod.count_variants(raw)


def _underscore_key(obj, path=""):
    """The first key (as a dotted path) starting with '_' at any depth, or None."""
    stack = [(obj, path)]
    while stack:
        o, pth = stack.pop()
        if isinstance(o, dict):
            for k, v in o.items():
                full = f"{pth}.{k}" if pth else str(k)
                if str(k).startswith("_"):
                    return full
                stack.append((v, full))
        elif isinstance(o, list):
            stack.extend((v, pth) for v in o)
    return None


def chunk_step_rate(con, n=100):
    """The fastest chunk-steps/s of this server's last ``n`` finished jobs (variant-steps/s ÷ the
    variants of a chunk): a job's wall time is about chunks × steps ÷ this rate (an optimistic
    estimate: a chunk of more variants is no faster per step).  None before any job finished."""
    best = None
    for r in con.execute(
        "SELECT variant_steps_per_s, variants_total, spec_json FROM jobs WHERE status='done' "
        "AND variant_steps_per_s > 0 ORDER BY seq DESC LIMIT ?",
        (n,),
    ):
        try:
            cs = int(((json.loads(r["spec_json"]).get("integrator") or {}).get("chunk_size")) or 0)
        except (ValueError, TypeError, AttributeError):
            cs = 0
        lanes = max(1, min(r["variants_total"], cs if cs > 0 else 1024))  # 0: automatic (1024 on CPU)
        rate = r["variant_steps_per_s"] / lanes
        best = rate if best is None else max(best, rate)
    return best


def store_estimate(pl, n_axes: int):
    """(bytes, files) of a plan's store: its histories plus, per chunk, the files it writes
    (chunk flag, one per input axis, metric columns, histories) at FILE_OVERHEAD_B each."""
    cfg = pl.cfg
    names = pl.mech.joint_names(cfg) if hasattr(pl.mech, "joint_names") else ()
    hist_b = pl.n_variants * cfg.n_saves * max(1, len(cfg.outputs)) * max(1, len(names)) * 8
    n_chunks = -(-pl.n_variants // max(1, pl.chunk_size))
    files = n_chunks * (2 + n_axes + METRIC_FILES_PER_CHUNK)
    return hist_b + files * FILE_OVERHEAD_B, files


def validate_submission(raw: dict, limits: Limits, rate=None):
    """Load and check a submitted spec as ``jaxclear run`` would (every variant), plus the service's
    own rules.  Returns (clean raw spec with overrides applied, plan, warnings); BadRequest 422
    naming the key otherwise.  ``rate``: chunk-steps/s (``chunk_step_rate``) for the wall-time
    estimate checked against ``limits.max_job_seconds``; None: not checked here."""
    from . import spec as specmod
    from . import sweep

    overrides = raw.pop("_set", [])
    for k in raw:
        if k.startswith("_"):
            raise BadRequest(422, f"{k}: unknown table (keys starting with '_' are internal)")
    try:
        import copy

        applied = copy.deepcopy(raw)
        for ov in overrides:
            specmod.apply_override(applied, ov)
        bad = _underscore_key(applied)
        if bad is not None:
            keys = [(ov, ov.split("=", 1)[0].strip()) for ov in overrides]
            via = [ov for ov, k in keys if k == bad or k.startswith(bad + ".") or bad.startswith(k + ".")]
            raise BadRequest(
                422,
                f"{bad}: unknown key (keys starting with '_' are internal)"
                + (f", set by set = {via[0]!r}" if via else ""),
            )
        check_depth(applied, limits.max_depth)
        sw = applied.get("sweep") if isinstance(applied.get("sweep"), dict) else {}
        for key, cap in (("name", limits.max_name_chars), ("description", limits.max_description_chars)):
            v = sw.get(key)
            if isinstance(v, str) and len(v) > cap:
                raise BadRequest(
                    422, f"sweep.{key} = {v[:40]!r}... is {len(v)} characters, the limit is {cap} (1..{cap})"
                )
        path = (applied.get("profile") or {}).get("path", "") if isinstance(applied.get("profile"), dict) else ""
        if path:
            raise BadRequest(
                422,
                f"profile.path = {path!r}: the service does not read files named in a "
                "submitted spec; run measured bushings with 'jaxclear run' locally",
            )
        n = count_variants(applied)
        if n is not None and n > limits.max_variants:
            raise BadRequest(
                422,
                f"the spec has {n} variants, more than the limit of "
                f"{limits.max_variants} (jaxclear serve --max-variants)",
            )
        spec = specmod.load(applied)
        specmod.check_overrides(spec, overrides)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pl = sweep.plan(spec)
    except specmod.SpecError as e:
        raise BadRequest(422, str(e)) from None
    if pl.n_variants > limits.max_variants:
        raise BadRequest(
            422,
            f"the spec has {pl.n_variants} variants, more than the limit of "
            f"{limits.max_variants} (jaxclear serve --max-variants)",
        )
    steps = pl.n_variants * pl.cfg.n_steps
    if steps > limits.max_steps:
        raise BadRequest(
            422,
            f"the spec asks for {steps:.3g} variant-steps ({pl.n_variants} variants × "
            f"{pl.cfg.n_steps} steps), more than the limit of {limits.max_steps:.3g} "
            "(jaxclear serve --max-steps)",
        )
    cfg = pl.cfg
    n_chunks = -(-pl.n_variants // max(1, pl.chunk_size))
    if n_chunks > limits.max_chunks:
        need = -(-pl.n_variants // limits.max_chunks)
        raise BadRequest(
            422,
            f"integrator.chunk_size = {pl.chunk_size} makes {n_chunks} chunks of {pl.n_variants} variants, "
            f"more than the limit of {limits.max_chunks} chunks (each writes ~35 files; jaxclear serve "
            f"--max-chunks): use integrator.chunk_size >= {need} (or 0, automatic)",
        )
    store_b, files = store_estimate(pl, len(pl.paths))
    if store_b > limits.max_store_bytes:
        raise BadRequest(
            422,
            f"the store of this spec takes ~{store_b / 2**30:.3g} GiB (histories of {pl.n_variants} variants × "
            f"{cfg.n_saves} saves × {len(cfg.outputs)} channels, plus {files} files of "
            f"{FILE_OVERHEAD_B} B overhead in {n_chunks} chunks), more than the limit of "
            f"{limits.max_store_bytes / 2**30:.3g} GiB (jaxclear serve --max-store-bytes; "
            "raise integrator.save_every, shorten outputs.histories or raise integrator.chunk_size)",
        )
    if rate and limits.max_job_seconds:
        est = n_chunks * cfg.n_steps / rate
        if est > limits.max_job_seconds:
            raise BadRequest(
                422,
                f"the spec would run ~{_duration(est)} ({n_chunks} chunks × {cfg.n_steps} steps at "
                f"{rate:.3g} chunk-steps/s, the fastest of this server's recent jobs), more than the "
                f"limit of {limits.max_job_seconds:.0f} s (jaxclear serve --max-job-seconds)",
            )
    return applied, spec, pl, [str(w.message) for w in caught]


def _duration(s):
    for unit, n in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{s / n:.3g} {unit} ({s:.3g} s)"
    return f"{s:.3g} s"


def enqueue(con, data: Path, raw_applied, spec, pl, warns, limits: Limits, overrides=()) -> str:
    """Queue a checked submission: its folder (spec.json, overrides.json, out/) and its row.  On a
    full disk nothing is left behind and the client gets 507."""
    from . import spec as specmod

    n_q = con.execute("SELECT COUNT(*) FROM jobs WHERE status IN ('queued', 'compiling', 'running')").fetchone()[0]
    if n_q >= limits.max_queued:
        raise BadRequest(
            429,
            f"{n_q} jobs are queued or running, the limit is {limits.max_queued} "
            "(jaxclear serve --max-queued); try again later",
        )
    job_id = secrets.token_urlsafe(16)
    jd = job_dir(data, job_id)
    spec_json = json.dumps(raw_applied, sort_keys=True)
    now = time.time()
    try:
        (jd / "out").mkdir(parents=True)
        (jd / "spec.json").write_text(spec_json)
        # what was asked, as asked: the job page shows it (two jobs named alike told apart)
        (jd / "overrides.json").write_text(json.dumps(list(overrides)))
        con.execute(
            "INSERT INTO jobs (id, name, status, created, spec_json, spec_hash, variants_total, "
            "steps_per_variant, warnings, updated) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
            (
                job_id,
                spec["sweep"]["name"],
                now,
                spec_json,
                specmod.spec_hash(spec),
                pl.n_variants,
                pl.cfg.n_steps,
                json.dumps(warns),
                now,
            ),
        )
    except (OSError, sqlite3.Error) as e:
        shutil.rmtree(jd, ignore_errors=True)
        left = " (and its folder could not be removed: " + str(jd) + ")" if jd.exists() else ""
        if disk_full(e):
            raise BadRequest(
                507,
                f"the disk of the data folder is full ({free_bytes(data)} bytes free): the job was not queued{left}",
            ) from None
        raise
    return job_id


def job_record(con, row, base="") -> dict:
    """The JSON status of a job."""
    d = {
        k: row[k]
        for k in (
            "id",
            "seq",
            "name",
            "status",
            "created",
            "started",
            "finished",
            "spec_hash",
            "variants_total",
            "variants_done",
            "steps_per_variant",
            "variant_steps_per_s",
            "eta_s",
            "compile_s",
            "error",
            "attempts",
            "resumed",
            "deaths",
        )
    }
    d["warnings"] = json.loads(row["warnings"])
    d["cancel_requested"] = bool(row["cancel_requested"])
    d["progress"] = row["variants_done"] / row["variants_total"] if row["variants_total"] else 0.0
    if row["status"] == "queued":
        d["queue_position"] = con.execute(
            "SELECT COUNT(*) FROM jobs WHERE status='queued' AND seq < ?", (row["seq"],)
        ).fetchone()[0]
    end = row["finished"] or time.time()
    d["elapsed_s"] = (end - row["started"]) if row["started"] else None
    d["links"] = {
        "self": f"{base}/api/jobs/{row['id']}",
        "files": f"{base}/api/jobs/{row['id']}/files",
        "metrics": f"{base}/api/jobs/{row['id']}/files/metrics.csv",
        "summary": f"{base}/api/jobs/{row['id']}/files/summary.json",
        "store": f"{base}/api/jobs/{row['id']}/store.zip",
        "page": f"{base}/jobs/{row['id']}",
    }
    return d


def safe_file(data: Path, job_id: str, rel: str) -> Path | None:
    """The file ``rel`` inside the job's out/ folder, or None (unknown job, no such file, or any
    path that would leave the folder: '..', absolute paths, backslashes, symlinks)."""
    if not ID_RE.match(job_id or ""):
        return None
    root = (job_dir(data, job_id) / "out").resolve()
    if not rel or "\\" in rel or "\x00" in rel or rel.startswith("/"):
        return None
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    try:
        p = (root / rel).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if root not in p.parents or not p.is_file():
        return None
    return p


def list_files(data: Path, job_id: str):
    """The result files of a job's out/ folder, the store left out (never walked: a store has a
    file per chunk and column; it is downloaded whole as store.zip)."""
    root = job_dir(data, job_id) / "out"
    out = []
    for d, dirs, names in os.walk(root):
        rel = Path(d).relative_to(root)
        dirs[:] = sorted(x for x in dirs if not (x == "store.zarr" or x.startswith("store.zarr.")))
        for n in names:
            p = Path(d) / n
            if not p.is_symlink() and p.is_file():
                out.append({"path": (rel / n).as_posix(), "bytes": p.stat().st_size})
    return sorted(out, key=lambda f: f["path"])


class _Sink:
    """A write-only stream whose bytes are taken out as they come (zipfile writes to it)."""

    def __init__(self):
        self.parts = []

    def write(self, b):
        self.parts.append(bytes(b))
        return len(b)

    def flush(self):
        pass

    def take(self) -> bytes:
        b = b"".join(self.parts)
        self.parts.clear()
        return b


def zip_stream(root: Path, arc_root="store.zarr", block=1 << 20):
    """The folder ``root`` as a zip archive (stored, zip64 where needed), yielded in pieces of
    about ``block`` bytes: memory stays at one block whatever the store's size."""
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for d, dirs, names in os.walk(root):
            dirs.sort()
            for n in sorted(names):
                p = Path(d) / n
                if p.is_symlink() or not p.is_file():
                    continue
                info = zipfile.ZipInfo.from_file(p, (arc_root / p.relative_to(root)).as_posix())
                with open(p, "rb") as src, z.open(info, "w") as dst:
                    while chunk := src.read(block):
                        dst.write(chunk)
                        yield sink.take()
                yield sink.take()
    yield sink.take()


def delete_job(con, data: Path, job_id: str) -> dict:
    """Remove a finished (or still queued) job: its row and its folder.  BadRequest 404 for an
    unknown job, 409 while it is compiling or running (cancel it first)."""
    import shutil

    r = con.execute("SELECT status FROM jobs WHERE id=?", (job_id,)).fetchone()
    if r is None:
        raise BadRequest(404, f"no job {job_id!r}")
    # one statement: a worker claiming the job at this moment either wins (409) or finds nothing
    cur = con.execute("DELETE FROM jobs WHERE id=? AND status IN ('queued', 'done', 'failed', 'cancelled')", (job_id,))
    if cur.rowcount == 0:
        st = con.execute("SELECT status FROM jobs WHERE id=?", (job_id,)).fetchone()
        raise BadRequest(
            409,
            f"job {job_id} is {st['status'] if st else 'gone'}: cancel it first "
            "(POST /api/jobs/{id}/cancel), then delete it once it has stopped",
        )
    jd = job_dir(data, job_id)
    freed = sum(f.stat().st_size for f in jd.rglob("*") if f.is_file() and not f.is_symlink()) if jd.exists() else 0
    shutil.rmtree(jd, ignore_errors=True)
    return {"id": job_id, "deleted": True, "status": r["status"], "bytes_freed": freed}


def purge_expired(con, data: Path, retention_s: float, now=None) -> list:
    """Delete the jobs finished (done, failed, cancelled) more than ``retention_s`` ago; returns
    their ids (``jaxclear serve --retention-days``)."""
    now = time.time() if now is None else now
    rows = con.execute(
        "SELECT id FROM jobs WHERE status IN ('done', 'failed', 'cancelled') AND finished < ?", (now - retention_s,)
    ).fetchall()
    gone = []
    for r in rows:
        try:
            delete_job(con, data, r["id"])
            gone.append(r["id"])
        except BadRequest:
            pass
    return gone


def enforce_job_seconds(con, max_s: float, now=None) -> list:
    """Jobs running longer than ``max_s`` (wall time since they first started) are stopped as a
    cancel is (at the next chunk boundary, or their worker killed after CANCEL_GRACE_S); a job so
    stopped ends ``failed`` with an error naming the limit.  Returns the ids stopped this call."""
    now = time.time() if now is None else now
    rows = con.execute(
        "SELECT id FROM jobs WHERE status IN ('compiling', 'running') AND cancel_requested = 0 AND started < ?",
        (now - max_s,),
    ).fetchall()
    for r in rows:
        con.execute(
            "UPDATE jobs SET cancel_requested=?, updated=? WHERE id=? AND cancel_requested=0", (now, now, r["id"])
        )
    # stopped by the limit (asked at or after started + max_s, no other error): failed, saying why
    con.execute(
        "UPDATE jobs SET status='failed', error=? WHERE status='cancelled' AND error IS NULL AND "
        "started IS NOT NULL AND cancel_requested >= started + ?",
        (
            f"stopped after the limit of {max_s:.0f} s wall time per job (jaxclear serve --max-job-seconds); "
            "the chunks it finished are kept in its store",
            max_s,
        ),
    )
    return [r["id"] for r in rows]


# --------------------------------------------------------------------------------------- the app


def _same_origin(origin: str, host_header: str, scheme: str) -> bool:
    """Whether an Origin header names this server as the request reached it (scheme, host, port)."""
    from urllib.parse import urlsplit

    try:
        o = urlsplit(origin)
        h = urlsplit(f"{scheme}://{host_header}")
        default = {"http": 80, "https": 443}
        return (
            o.scheme == scheme
            and o.hostname is not None
            and o.hostname == h.hostname
            and (o.port or default.get(o.scheme)) == (h.port or default.get(scheme))
        )
    except ValueError:
        return False


def _is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def create_app(data, token=None, limits: Limits = Limits(), supervisor=None, local_only=False):
    """The ASGI app (FastAPI).  ``supervisor``: the Workers object whose health /api/health reports.
    ``local_only`` (a server without a token, bound to loopback): requests whose Host header is not
    a loopback name are refused (403), so a web page cannot reach the service by DNS rebinding."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, StreamingResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from . import __version__

    data = Path(data)
    local = threading.local()

    def db():
        c = getattr(local, "con", None)
        if c is None:
            c = local.con = connect(data)
        return c

    app = FastAPI(
        title="jaxclear sweep service",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        description="Submit jaxclear sweep specs (TOML or JSON), follow their progress, fetch results. "
        "Authorization: `Bearer <token>` when the server was started with a token.",
    )

    @app.exception_handler(BadRequest)
    async def _bad(request, exc: BadRequest):
        return JSONResponse(
            {"detail": exc.message},
            status_code=exc.status,
            headers={"WWW-Authenticate": "Bearer"} if exc.status == 401 else None,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request, exc):
        msg = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and msg == "Not Found":
            msg = f"no such resource: {request.url.path}"
        return JSONResponse({"detail": msg}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc):
        errs = exc.errors()
        e = errs[0] if errs else {}
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("query", "path", "body"))
        return JSONResponse({"detail": f"{loc}: {e.get('msg', 'invalid')} (got {e.get('input')!r})"}, status_code=422)

    @app.exception_handler(Exception)
    async def _crash(request, exc):  # never a traceback to the client; it goes to the server log
        traceback.print_exception(exc)
        return JSONResponse({"detail": f"internal error ({type(exc).__name__}); see the server log"}, status_code=500)

    @app.middleware("http")
    async def _auth(request: Request, call_next):
        resp = await _guard(request)
        if resp is None:
            resp = await call_next(request)
        # no page of this server inside another site's frame (clickjacking the Cancel button)
        resp.headers.setdefault("Content-Security-Policy", "frame-ancestors 'none'")
        resp.headers.setdefault("X-Frame-Options", "DENY")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        return resp

    async def _guard(request: Request):
        """None when the request may go on, else the refusal."""
        hh = request.headers.get("host", "")
        if local_only:
            name = hh[1:].split("]")[0] if hh.startswith("[") else hh.rsplit(":", 1)[0]
            if not _is_loopback(name):
                return JSONResponse(
                    {
                        "detail": f"Host {hh!r} is not a loopback name: this server has no token "
                        "and answers only requests to localhost / 127.0.0.1 / [::1]"
                    },
                    status_code=403,
                )
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            # a request that changes something comes from this server's own pages or from a
            # program, never from another site's page (browsers say where a request comes from)
            site = request.headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return JSONResponse(
                    {
                        "detail": f"Sec-Fetch-Site {site!r}: {request.method} requests from another site are "
                        "refused (allowed: same-origin, none)"
                    },
                    status_code=403,
                )
            origin = request.headers.get("origin")
            if origin is not None and not _same_origin(origin, hh, request.url.scheme):
                return JSONResponse(
                    {
                        "detail": f"Origin {origin!r} is not this server ({request.url.scheme}://{hh}): "
                        f"{request.method} requests from other sites are refused"
                    },
                    status_code=403,
                )
        if token is not None and request.url.path not in ("/api/health",):
            given = None
            h = request.headers.get("authorization", "")
            if h.lower().startswith("bearer "):
                given = h[7:].strip()
            q = request.query_params.get("token")
            html_login = q is not None and request.method == "GET" and not request.url.path.startswith("/api/")
            if q is not None and not html_login:
                return JSONResponse(
                    {
                        "detail": f"token in the URL of {request.method} {request.url.path}: a URL token is "
                        "accepted only to log in on the HTML pages (GET /?token=...); send "
                        "'Authorization: Bearer <token>'"
                    },
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            given = given or (q if html_login else None) or request.cookies.get("jaxclear_token")
            if given is None or not hmac.compare_digest(given.encode(), token.encode()):
                msg = (
                    "missing bearer token: send 'Authorization: Bearer <token>'"
                    if given is None
                    else "wrong bearer token"
                )
                return JSONResponse({"detail": msg}, status_code=401, headers={"WWW-Authenticate": "Bearer"})
            if html_login:
                # a browser opened /?token=...: keep it in a cookie and drop it from the address
                resp = RedirectResponse(str(request.url.remove_query_params("token")), status_code=303)
                resp.set_cookie("jaxclear_token", token, httponly=True, samesite="strict")
                return resp
        return None

    def row_of(job_id):
        if not ID_RE.match(job_id):
            raise BadRequest(404, f"no job {job_id!r}")
        r = db().execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
        if r is None:
            raise BadRequest(404, f"no job {job_id!r}")
        return r

    @app.get("/api/health", summary="Server and worker health (ok: false with the reasons)")
    def health():
        reasons = []
        counts = {s: 0 for s in STATUSES}
        try:
            for r in db().execute("SELECT status, COUNT(*) n FROM jobs GROUP BY status"):
                counts[r["status"]] = r["n"]
        except sqlite3.Error as e:
            reasons.append(f"the queue cannot be read: {_error_text(e, data)}")
        low = low_space(data, limits.min_free_bytes)
        if low:
            reasons.append(low + ": submissions are refused (507) and no job is started")
        if supervisor:
            reasons += supervisor.problems()
        return {
            "ok": not reasons,
            "reasons": reasons,
            "version": __version__,
            "jobs": counts,
            "free_bytes": free_bytes(data),
            "min_free_bytes": limits.min_free_bytes,
            "workers": supervisor.alive() if supervisor else None,
            "worker_pids": supervisor.pids() if supervisor else None,
            "worker_deaths": supervisor.deaths_total if supervisor else None,
        }

    @app.post(
        "/api/jobs",
        status_code=201,
        summary="Submit a spec (TOML or JSON); returns the job",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/toml": {"schema": {"type": "string"}},
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "description": "the spec tables, or {spec: tables | TOML text, set: ['key=value', ...]}",
                        }
                    },
                },
            }
        },
    )
    async def submit(request: Request):
        low = low_space(data, limits.min_free_bytes)
        if low:
            raise BadRequest(507, f"not accepting jobs: {low}")
        cl = request.headers.get("content-length")
        if cl and cl.isdigit() and int(cl) > limits.max_spec_bytes:
            raise BadRequest(
                413,
                f"spec is {cl} bytes, more than the limit of {limits.max_spec_bytes} bytes "
                "(jaxclear serve --max-spec-bytes)",
            )
        body = b""
        async for part in request.stream():
            body += part
            if len(body) > limits.max_spec_bytes:
                break
        raw = parse_spec(body, request.headers.get("content-type", ""), limits)
        overrides = list(raw.get("_set") or [])
        from starlette.concurrency import run_in_threadpool

        rate = chunk_step_rate(db())
        applied, spec, pl, warns = await run_in_threadpool(validate_submission, raw, limits, rate)
        job_id = enqueue(db(), data, applied, spec, pl, warns, limits, overrides)
        rec = job_record(db(), db().execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone())
        n_chunks = -(-pl.n_variants // max(1, pl.chunk_size))
        rec["estimated_s"] = n_chunks * pl.cfg.n_steps / rate if rate else None
        return rec

    @app.get("/api/jobs", summary="List jobs (newest first)")
    def jobs(status: str | None = None, limit: int = 100):
        if status is not None and status not in STATUSES:
            raise BadRequest(422, f"status = {status!r}: expected one of {', '.join(STATUSES)}")
        if not 1 <= limit <= 10000:
            raise BadRequest(422, f"limit = {limit}: expected 1..10000")
        q = "SELECT * FROM jobs" + (" WHERE status=?" if status else "") + " ORDER BY seq DESC LIMIT ?"
        rows = db().execute(q, ((status,) if status else ()) + (limit,)).fetchall()
        return {"jobs": [job_record(db(), r) for r in rows]}

    @app.get("/api/jobs/{job_id}", summary="A job's status and progress")
    def job(job_id: str):
        return job_record(db(), row_of(job_id))

    @app.get("/api/jobs/{job_id}/spec", summary="The spec as submitted (overrides applied)")
    def job_spec(job_id: str):
        return json.loads(row_of(job_id)["spec_json"])

    @app.post("/api/jobs/{job_id}/cancel", summary="Cancel a queued job, or a running one after its current chunk")
    def cancel(job_id: str):
        r = row_of(job_id)
        c = db()
        if r["status"] in FINAL:
            raise BadRequest(409, f"job {job_id} is {r['status']}: nothing to cancel")
        now = time.time()
        c.execute(
            "UPDATE jobs SET status='cancelled', finished=?, updated=? WHERE id=? AND status='queued'",
            (now, now, job_id),
        )
        c.execute("UPDATE jobs SET cancel_requested=?, updated=? WHERE id=? AND cancel_requested=0", (now, now, job_id))
        return job_record(c, row_of(job_id))

    @app.delete("/api/jobs/{job_id}", summary="Delete a job (queued or finished): its record and all its files")
    def delete(job_id: str):
        row_of(job_id)
        return delete_job(db(), data, job_id)

    @app.get("/api/jobs/{job_id}/files", summary="Files of a job's results (the store: store.zip)")
    def files(job_id: str):
        row_of(job_id)
        return {"files": list_files(data, job_id)}

    @app.get(
        "/api/jobs/{job_id}/files/{path:path}",
        summary="Download one result file (metrics.csv, summary.json, plots/...)",
    )
    def file(job_id: str, path: str):
        row_of(job_id)
        p = safe_file(data, job_id, path)
        if p is None:
            raise BadRequest(404, f"job {job_id} has no file {path!r}")
        return FileResponse(p)

    @app.get("/api/jobs/{job_id}/store.zip", summary="The job's zarr store as a zip archive")
    def store_zip(job_id: str):
        r = row_of(job_id)
        root = job_dir(data, job_id) / "out" / "store.zarr"
        if not root.is_dir():
            raise BadRequest(404, f"job {job_id} ({r['status']}) has no store yet")
        # streamed as it is built: memory stays at one block per download, whatever the store's size
        return StreamingResponse(
            zip_stream(root),
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{job_id}-store.zip"'},
        )

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs():
        # The API reference from the OpenAPI schema, self-contained: FastAPI's Swagger page loads
        # its scripts from a CDN and is blank offline.
        return _page_docs(app.openapi())

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index():
        rows = db().execute("SELECT * FROM jobs ORDER BY seq DESC LIMIT 200").fetchall()
        return _page_index([job_record(db(), r) for r in rows])

    @app.get("/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
    def page(job_id: str):
        r = job_record(db(), row_of(job_id))
        return _page_job(r, data)

    return app


# ------------------------------------------------------------------------------------ HTML pages

_CSS = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}th{background:#f3f3f3}
.bar{width:160px;height:12px;background:#eee;border-radius:3px;overflow:hidden;display:inline-block;vertical-align:middle}
.bar>div{height:100%;background:#2a7}.failed{color:#b00}.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:48%;margin:4px;border:1px solid #ddd}code{background:#f3f3f3;padding:0 3px}
pre{background:#f7f7f7;padding:8px;max-height:24em;overflow:auto}button{font:inherit;padding:2px 10px}"""

# Live progress without a build step: poll the JSON API and patch the rows in place.
_JS = """
function showError(msg){ const p = document.getElementById('page-error'); p.textContent = msg; p.hidden = !msg; }
async function refresh(){
  try{
    const r = await fetch('/api/jobs?limit=200', {credentials:'same-origin'});
    if(!r.ok) throw new Error('GET /api/jobs: HTTP ' + r.status + ' ' + await r.text());
    for(const j of (await r.json()).jobs){
      const tr = document.getElementById('job-'+j.id);
      if(!tr){ if(!document.getElementById('job-'+j.id)) location.reload(); return; }
      tr.querySelector('.status').textContent = j.status;
      tr.querySelector('.bar>div').style.width = (100*j.progress).toFixed(1)+'%';
      tr.querySelector('.done').textContent = j.variants_done+'/'+j.variants_total;
      tr.querySelector('.rate').textContent = j.variant_steps_per_s ? j.variant_steps_per_s.toPrecision(3) : '';
      tr.querySelector('.eta').textContent = (j.eta_s!=null && j.status=='running') ? j.eta_s.toFixed(0)+' s' : '';
      tr.querySelector('.error').textContent = j.error || '';
    }
    showError('');
  }catch(e){
    console.error('jaxclear jobs page: update failed:', e);
    showError('update failed (trying again every second): ' + e.message);
  }
}
setInterval(refresh, 1000);
"""


def _e(x):
    return html.escape("" if x is None else str(x))


def _page_index(jobs):
    rows = []
    for j in jobs:
        rate = f"{j['variant_steps_per_s']:.3g}" if j["variant_steps_per_s"] else ""
        eta = f"{j['eta_s']:.0f} s" if j["eta_s"] is not None and j["status"] == "running" else ""
        rows.append(
            f"<tr id='job-{_e(j['id'])}'><td><a href='/jobs/{_e(j['id'])}'>{_e(j['id'])}</a></td>"
            f"<td>{_e(j['name'])}</td><td class='status'>{_e(j['status'])}</td>"
            f"<td><div class='bar'><div style='width:{100 * j['progress']:.1f}%'></div></div> "
            f"<span class='done'>{j['variants_done']}/{j['variants_total']}</span></td>"
            f"<td class='rate num'>{rate}</td><td class='eta num'>{eta}</td>"
            f"<td>{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(j['created']))}</td>"
            f"<td class='error failed'>{_e(j['error'])}</td></tr>"
        )
    body = (
        (
            "<table id='jobs'><tr><th>job</th><th>name</th><th>status</th><th>variants</th>"
            "<th>variant-steps/s</th><th>ETA</th><th>submitted</th><th>error</th></tr>" + "".join(rows) + "</table>"
        )
        if rows
        else "<p id='empty'>No jobs yet.</p>"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'><title>jaxclear jobs</title><style>{_CSS}</style>"
        f"</head><body><h1>jaxclear sweep service</h1><p>{len(jobs)} job(s). Submit with "
        "<code>jaxclear submit SPEC --server URL</code>; API: <a href='/docs'>reference</a>, "
        "<a href='/openapi.json'>OpenAPI</a>.</p><p id='page-error' class='failed' hidden></p>"
        f"{body}<script>{_JS}</script></body></html>"
    )


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return repr(v)


def spec_toml(spec: dict) -> str:
    """A spec dict as TOML text (tables of scalars, lists and inline tables: what specs hold)."""
    lines = []
    for sec, tab in spec.items():
        if not isinstance(tab, dict):
            continue
        lines.append(f"[{sec}]")
        for k, v in tab.items():
            key = json.dumps(k) if "." in k or " " in k else k
            lines.append(f"{key} = {_toml_value(v)}")
        lines.append("")
    return "\n".join(lines)


# The job page follows its job: poll the JSON API, patch the status cells and the bar, and once the
# job has ended fetch the page again and swap in its results (summary, plots, downloads): no reload.
# A failed update is shown on the page (#page-error) and logged with console.error; it is retried.
_JOB_JS = """
const JOB = document.body.dataset.job, FINAL = ['done', 'failed', 'cancelled'];
function fmt(v){ return (typeof v === 'number' && !Number.isInteger(v)) ? v.toPrecision(4) : (v == null ? '' : String(v)); }
function showError(msg){ const p = document.getElementById('page-error'); p.textContent = msg; p.hidden = !msg; }
async function showResults(status){
  const r = await fetch(location.pathname, {credentials: 'same-origin'});
  if(!r.ok) throw new Error('GET ' + location.pathname + ': HTTP ' + r.status);
  const doc = new DOMParser().parseFromString(await r.text(), 'text/html');
  for(const id of ['warnings-box', 'results']){
    const now = document.getElementById(id), next = doc.getElementById(id);
    if(!now || !next) throw new Error('the page has no #' + id);
    now.replaceWith(next);
  }
  const b = document.getElementById('cancel');
  if(b) b.remove();
  document.body.dataset.status = status;
  clearInterval(timer);
}
async function follow(){
  try{
    const r = await fetch('/api/jobs/' + JOB, {credentials: 'same-origin'});
    if(!r.ok) throw new Error('GET /api/jobs/' + JOB + ': HTTP ' + r.status + ' ' + await r.text());
    const j = await r.json();
    for(const td of document.querySelectorAll('#status td[class]')){
      if(td.className in j) td.textContent = fmt(j[td.className]);
    }
    document.querySelector('#progress>div').style.width = (100*j.progress).toFixed(1) + '%';
    const b = document.getElementById('cancel');
    if(b) b.disabled = FINAL.includes(j.status) || j.cancel_requested;
    if(FINAL.includes(j.status) && !FINAL.includes(document.body.dataset.status)) await showResults(j.status);
    showError('');
  }catch(e){
    console.error('jaxclear job page: update failed:', e);
    showError('update failed (trying again every second): ' + e.message);
  }
}
async function cancelJob(){
  const b = document.getElementById('cancel');
  b.disabled = true;
  const r = await fetch('/api/jobs/' + JOB + '/cancel', {method: 'POST', credentials: 'same-origin'});
  document.getElementById('cancel-msg').textContent = r.ok ? 'cancel requested' : ('cancel refused: ' + (await r.json()).detail);
  follow();
}
const timer = setInterval(follow, 1000);
"""


def _page_job(j, data):
    import numpy as np

    jid = j["id"]
    final = j["status"] in FINAL
    parts = [
        f"<h1>{_e(j['name'])} <small>{_e(jid)}</small></h1>",
        f"<p><a href='/'>all jobs</a> · submitted {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(j['created']))}"
        f" · spec hash <code>{_e(j['spec_hash'])}</code></p>",
        # (a <div> is a block: never inside <p> or <span>, where the parser would move it out)
        f"<div id='controls'><div class='bar' id='progress'><div style='width:{100 * j['progress']:.1f}%'></div></div> "
        + (
            ""
            if final
            else "<button id='cancel' onclick='cancelJob()'"
            + (" disabled" if j["cancel_requested"] else "")
            + ">Cancel job</button> "
        )
        + "<span id='cancel-msg'></span></div><p id='page-error' class='failed' hidden></p><table id='status'>",
    ]
    for k in (
        "status",
        "variants_done",
        "variants_total",
        "steps_per_variant",
        "variant_steps_per_s",
        "eta_s",
        "compile_s",
        "elapsed_s",
        "resumed",
        "error",
    ):
        v = j[k]
        if isinstance(v, float):
            v = f"{v:.4g}"
        parts.append(f"<tr><th>{k}</th><td class='{k}'>{_e(v)}</td></tr>")
    parts.append("</table><div id='warnings-box'>")
    if j.get("warnings"):
        parts.append(
            "<h2>Warnings</h2><ul id='warnings'>" + "".join(f"<li>{_e(w)}</li>" for w in j["warnings"]) + "</ul>"
        )
    parts.append("</div>")
    jd = job_dir(data, jid)
    try:
        overrides = json.loads((jd / "overrides.json").read_text())
    except (OSError, ValueError):
        overrides = []
    try:
        spec = json.loads((jd / "spec.json").read_text())
    except (OSError, ValueError):
        spec = {}
    parts.append(
        "<h2>Submitted spec</h2><p>overrides (<code>--set</code>): "
        + (
            "<span id='overrides'>" + ", ".join(f"<code>{_e(o)}</code>" for o in overrides) + "</span>"
            if overrides
            else "<span id='overrides'>none</span>"
        )
        + f"</p><details open><summary>spec (overrides applied)</summary><pre id='spec'>{_e(spec_toml(spec))}"
        "</pre></details>"
    )
    out = jd / "out"
    parts.append("<div id='results'>")
    if j["status"] == "done" and (out / "metrics.csv").exists():
        from .client import parse_csv

        table = parse_csv((out / "metrics.csv").read_text())
        parts.append(
            "<h2>Summary</h2><table id='summary'><tr><th>column</th><th>min</th><th>median</th><th>max</th></tr>"
        )
        for k, v in table.items():
            v = np.asarray(v, float)
            v = v[np.isfinite(v)]
            if v.size:
                parts.append(
                    f"<tr><td>{_e(k)}</td><td class='num'>{v.min():.4g}</td>"
                    f"<td class='num'>{np.median(v):.4g}</td><td class='num'>{v.max():.4g}</td></tr>"
                )
        parts.append("</table><h2>Plots</h2><div id='plots'>")
        for p in sorted((out / "plots").glob("*.png")):
            url = f"/api/jobs/{_e(jid)}/files/plots/{_e(p.name)}"
            parts.append(
                f"<a href='{url}' target='_blank'><img alt='{_e(p.name)}' title='{_e(p.name)} (full size)' "
                f"src='{url}'></a>"
            )
        parts.append("</div><h2>Downloads</h2><ul>")
        for f in list_files(data, jid):
            parts.append(
                f"<li><a href='/api/jobs/{_e(jid)}/files/{_e(f['path'])}'>{_e(f['path'])}</a> ({f['bytes']} bytes)</li>"
            )
        parts.append(f"<li><a href='/api/jobs/{_e(jid)}/store.zip'>store.zarr (zip)</a></li></ul>")
    parts.append("</div>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'><title>jaxclear job {_e(jid)}</title>"
        f"<style>{_CSS}</style></head><body data-job='{_e(jid)}' data-status='{_e(j['status'])}'>"
        f"{''.join(parts)}<script>{_JOB_JS}</script></body></html>"
    )


def _page_docs(openapi: dict) -> str:
    """The HTTP API reference (paths, methods, summaries, parameters) as one static page."""
    parts = [
        f"<h1>{_e(openapi.get('info', {}).get('title'))} API <small>{_e(openapi.get('info', {}).get('version'))}"
        "</small></h1>",
        f"<p>{_e(openapi.get('info', {}).get('description'))}</p>",
        "<p>Machine-readable schema: <a href='/openapi.json'>/openapi.json</a>. Python: "
        "<code>jaxclear.client.Client</code>; command line: <code>jaxclear submit / status / cancel</code>.</p>",
        "<table id='endpoints'><tr><th>method</th><th>path</th><th>what</th><th>parameters</th></tr>",
    ]
    for path, ops in openapi.get("paths", {}).items():
        for method, op in ops.items():
            params = ", ".join(f"{p['name']} ({p.get('in')})" for p in op.get("parameters", []))
            body = op.get("requestBody", {}).get("content", {})
            if body:
                params = (params + "; " if params else "") + "body: " + ", ".join(body)
            parts.append(
                f"<tr><td><code>{_e(method.upper())}</code></td><td><code>{_e(path)}</code></td>"
                f"<td>{_e(op.get('summary'))}</td><td>{_e(params)}</td></tr>"
            )
    parts.append("</table>")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'><title>jaxclear API</title><style>{_CSS}</style>"
        f"</head><body>{''.join(parts)}</body></html>"
    )


# ------------------------------------------------------------------------------------- supervisor


def _exit_text(code):
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


class Workers:
    """The worker processes of a server: started with the server, killed with it (PDEATHSIG),
    restarted when one dies.  A death is printed on the server's stderr with the worker's last
    output line (its whole output is in DATA/worker-<i>.log); the job it held is queued again,
    or failed with that line after MAX_ATTEMPTS deaths; a worker that keeps dying is restarted
    after a growing wait (RESPAWN_BACKOFF_S) and makes ``problems()`` (health) non-empty.  The
    watch thread outlives errors of the queue (a full disk): it reports them and tries again."""

    def __init__(self, data: Path, n=1, cache_dir=None, cluster=None, min_free_bytes=0):
        self.data, self.n, self.cache_dir, self.cluster = Path(data), n, cache_dir, cluster
        self.min_free_bytes = min_free_bytes
        self.procs: dict[int, subprocess.Popen] = {}
        self.tick_s = 0.5
        self.deaths_total = 0  # worker deaths this server saw (not the kills of a cancel, not its stop)
        self.error = self._error_key = None  # the watch thread's last error (None once a turn went through)
        self._streak = {}  # worker -> deaths in a row (reset once a worker has lived WORKER_WINDOW_S)
        self._last = {}  # worker -> its last death's message
        self._due = {}  # worker -> time it is started again (a dead worker waiting)
        self._pending = {}  # worker -> death message whose job could not be requeued yet
        self._killed = set()  # workers killed on purpose (a cancelled chunk ran too long)
        self._started = {}  # worker -> start time
        self._log_at = {}  # worker -> its log's size when it started (the tail after is its output)
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def _command(self, i):
        """The worker's command line.  ``-P``: the current folder is not put on sys.path, so a
        folder named jaxclear there (a clone, a broken copy) is not imported instead of the
        installed package; PYTHONPATH and site-packages still apply."""
        return [
            sys.executable,
            "-P",
            "-c",
            "from jaxclear.service import _worker_entry; _worker_entry()",
            str(self.data),
            str(i),
            str(self.cache_dir or ""),
            str(os.getpid()),
            str(self.cluster or ""),
            str(self.min_free_bytes),
        ]

    def _spawn(self, i):
        env = dict(os.environ)
        if env.pop("JAXCLEAR_SERVER_JAX_PLATFORMS_SET", None):  # the workers get the accelerators
            env.pop("JAX_PLATFORMS", None)
        with open(self.data / f"worker-{i}.log", "ab") as err:
            self._log_at[i] = err.tell()
            # No preexec_fn: running Python between fork and exec in this multithreaded (JAX, uvicorn)
            # process can deadlock, and it forces a plain fork; without it CPython spawns the worker
            # with posix_spawn/vfork + exec, and the worker sets its own parent-death signal.
            self.procs[i] = subprocess.Popen(
                self._command(i), env=env, stdout=err, stderr=err, stdin=subprocess.DEVNULL, close_fds=True
            )
        self._started[i] = time.time()

    def _last_line(self, i):
        """The last line worker ``i`` wrote since it started (its error, for a crash)."""
        try:
            with open(self.data / f"worker-{i}.log", "rb") as f:
                start = self._log_at.get(i, 0)
                f.seek(max(start, f.seek(0, 2) - 4096))
                lines = [x.strip() for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
        except OSError as e:
            return f"(its log cannot be read: {e})"
        return lines[-1] if lines else "(no output)"

    def start(self):
        for i in range(self.n):
            self._spawn(i)
        threading.Thread(target=self._watch, daemon=True, name="jaxclear-workers").start()

    def _watch(self):
        con = None
        while not self._stop.wait(self.tick_s):
            try:
                if con is None:
                    con = connect(self.data)
                with self._lock:
                    if self._stop.is_set():
                        break
                    self._tick(con)
                if self.error is not None:
                    print(
                        f"jaxclear serve: the worker supervisor works again ({self.error})", file=sys.stderr, flush=True
                    )
                    self.error = self._error_key = None
            except Exception as e:  # the supervisor outlives a full disk: reported here and in health
                if f"{type(e).__name__}: {e}" != self._error_key:  # once per error, not every tick
                    print(
                        f"jaxclear serve: worker supervisor error, trying again: {_error_text(e, self.data)}",
                        file=sys.stderr,
                        flush=True,
                    )
                self.error, self._error_key = _error_text(e, self.data), f"{type(e).__name__}: {e}"

    def _tick(self, con):
        now = time.time()
        # a cancelled job still running after the grace time (a long chunk): kill its worker;
        # requeue_interrupted below then marks the job cancelled and a new worker starts
        for r in con.execute(
            "SELECT worker FROM jobs WHERE status IN ('compiling', 'running') AND "
            "cancel_requested > 0 AND cancel_requested < ?",
            (now - CANCEL_GRACE_S,),
        ).fetchall():
            p = self.procs.get(r["worker"])
            if p is not None and p.poll() is None and r["worker"] not in self._due:
                self._killed.add(r["worker"])
                p.kill()
                p.wait()
        for i, p in list(self.procs.items()):
            if i in self._pending:  # a death whose job is not requeued yet (the queue refused)
                requeue_interrupted(con, worker=i, died=self._pending[i])
                del self._pending[i]
            if i in self._due:
                if now >= self._due[i]:
                    del self._due[i]
                    self._spawn(i)
                continue
            if p.poll() is None:
                if now - self._started[i] >= WORKER_WINDOW_S:
                    self._streak[i] = 0
                continue
            if i in self._killed:
                self._killed.discard(i)
                self._due[i] = now
                self._pending[i] = None
            else:
                n = self._streak[i] = self._streak.get(i, 0) + 1
                self.deaths_total += 1
                msg = self._last[i] = (
                    f"worker {i} (pid {p.pid}) exited with {_exit_text(p.returncode)} after "
                    f"{now - self._started[i]:.3g} s: {self._last_line(i)}"
                )
                wait = 0.0 if n < 2 else min(RESPAWN_BACKOFF_S[1], RESPAWN_BACKOFF_S[0] * 2.0 ** (n - 2))
                print(
                    f"jaxclear serve: {msg} (death {n} in a row; its output is in {self.data / f'worker-{i}.log'}; "
                    f"restarted in {wait:.3g} s)",
                    file=sys.stderr,
                    flush=True,
                )
                self._due[i] = now + wait
                self._pending[i] = f"{msg} (see worker-{i}.log in {self.data})"
            requeue_interrupted(con, worker=i, died=self._pending[i])
            del self._pending[i]

    def problems(self):
        """What is wrong with the workers, one message each ([] when healthy)."""
        out = []
        now = time.time()
        for i in sorted(self.procs):
            n = self._streak.get(i, 0)
            if n >= WORKER_DEATHS_UNHEALTHY:
                when = (
                    f"; restarted in {self._due[i] - now:.0f} s"
                    if i in self._due
                    else f"; up again for {now - self._started[i]:.0f} s"
                )
                out.append(f"worker {i} died {n} times in a row{when}; last: {self._last.get(i)}")
        if self.error:
            out.append(f"the worker supervisor cannot use the queue: {self.error}")
        return out

    def alive(self):
        return [i not in self._due and p.poll() is None for i, p in sorted(self.procs.items())]

    def pids(self):
        return [p.pid for _, p in sorted(self.procs.items())]

    def stop(self):
        self._stop.set()
        with self._lock:
            for p in self.procs.values():
                if p.poll() is None:
                    p.terminate()
            for p in self.procs.values():
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()


def _worker_entry():
    data, i, cache, parent, cluster, min_free = (sys.argv[1:7] + ["", "0"])[:6]
    _set_pdeathsig()
    if os.getppid() != int(parent):  # the server died before the signal was armed
        sys.exit(0)
    cpu = os.environ.get("JAXCLEAR_CPU_DEVICES")
    from . import parallel

    parallel.set_cpu_devices(
        int(cpu) if cpu else None,  # every core by default, before JAX starts
        source=os.environ.get("JAXCLEAR_CPU_DEVICES_SOURCE"),
    )
    sys.exit(
        worker_main(
            data, int(i), cache or None, int(parent), cluster=cluster or None, min_free_bytes=int(min_free or 0)
        )
    )


def _exit_gracefully(signum, frame):
    raise SystemExit(0)


class DataDirBusy(Exception):
    pass


def _lock_data(data: Path):
    """An exclusive lock on DIR (one server per data directory); held until the process exits.
    The file is opened without truncation and written only once the lock is held, so a second
    server that is refused leaves the running one's pid in it."""
    import fcntl

    fd = os.open(data / "server.lock", os.O_RDWR | os.O_CREAT, 0o644)
    f = os.fdopen(fd, "r+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = f.read().strip()
        f.close()
        raise DataDirBusy(
            f"{data} is in use by another jaxclear serve" + (f" (pid {holder})" if holder.isdigit() else "")
        ) from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    return f


class PortBusy(Exception):
    pass


def _bind(host: str, port: int):
    """The listening socket, bound before anything else starts (a port in use is reported
    before any worker runs or any banner is printed)."""
    import socket

    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(fam, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise PortBusy(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
    sock.set_inheritable(False)
    return sock


def _protocol(header_timeout: float):
    """uvicorn's h11 protocol with a header timeout: a connection that has not sent a whole
    request head within ``header_timeout`` s of connecting (or of its last response) is closed,
    so slow or idle clients cannot hold connections open (uvicorn has no such timeout)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        _head_timer = None

        def _arm(self):
            self._disarm()
            self._head_timer = self.loop.call_later(header_timeout, self._head_expired)

        def _disarm(self):
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self):
            self._head_timer = None
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self.transport.close()

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc):
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self):
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:  # a whole request head arrived
                self._disarm()

        def on_response_complete(self):
            self._arm()
            super().on_response_complete()

    return HeaderTimeoutProtocol


def make_server(app, *, header_timeout=10.0, max_connections=100, log_level="warning"):
    """The uvicorn server of ``serve`` (h11 with a header timeout; at most ``max_connections``
    open connections, a request on any further one answered 503)."""
    import uvicorn

    config = uvicorn.Config(
        app,
        http=_protocol(header_timeout),
        log_level=log_level,
        access_log=False,
        limit_concurrency=max_connections + 1,  # uvicorn counts the new connection itself
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=64 * 1024,
    )
    return uvicorn.Server(config)


def _housekeeping(data: Path, limits: Limits, retention_s, stop: threading.Event, every_s=5.0):
    """The server's own thread: the wall-time limit of running jobs and the retention of finished ones."""
    con = connect(data)
    last_purge = 0.0
    while not stop.wait(every_s):
        try:
            if limits.max_job_seconds:
                enforce_job_seconds(con, limits.max_job_seconds)
            if retention_s and time.time() - last_purge > 60:
                last_purge = time.time()
                gone = purge_expired(con, data, retention_s)
                if gone:
                    print(
                        f"jaxclear serve: retention: deleted {len(gone)} finished job(s)", file=sys.stderr, flush=True
                    )
        except Exception:  # never takes the server down; retried next time
            traceback.print_exc()


def serve(
    host="127.0.0.1",
    port=8642,
    data="jaxclear-data",
    token=None,
    workers=1,
    cache_dir=None,
    limits: Limits = Limits(),
    log_level="warning",
    cluster=None,
    no_token=False,
    retention_days=None,
    header_timeout=10.0,
    max_connections=100,
):
    """Start the server and its workers (blocks).  Raises ValueError for an insecure or invalid
    configuration, DataDirBusy when another server holds DIR, PortBusy when the port cannot be
    bound.  ``token`` None: a random one is made and printed once in a login URL, unless
    ``no_token`` (a trusted machine: then only loopback names are answered).  ``cluster``: a
    Dask scheduler address or file; each job's chunks then run as tasks there (DATA on a shared
    file system).  ``retention_days``: finished jobs older than that are deleted (None: kept)."""
    if no_token and token:
        raise ValueError("--no-token and a token (--token, --token-file or $JAXCLEAR_TOKEN) exclude each other")
    if no_token and not _is_loopback(host):
        raise ValueError(
            f"--host {host} with --no-token: a token is required to bind an address other than localhost "
            "(leave out --no-token for a random one, or give --token-file / $JAXCLEAR_TOKEN)"
        )
    generated = False
    if token is None and not no_token:
        token, generated = secrets.token_urlsafe(24), True
    if token is not None and len(token) < 8:
        raise ValueError(
            "--token: use at least 8 characters (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    if workers < 1:
        raise ValueError(f"--workers {workers}: expected >= 1")
    if retention_days is not None and not retention_days > 0:
        raise ValueError(f"--retention-days {retention_days}: expected > 0 (leave it out to keep every job)")
    if not header_timeout > 0:
        raise ValueError(f"--header-timeout {header_timeout}: expected > 0 seconds")
    if max_connections < 1:
        raise ValueError(f"--max-connections {max_connections}: expected >= 1")
    if limits.max_job_seconds < 0:
        raise ValueError(f"--max-job-seconds {limits.max_job_seconds}: expected >= 0 (0: no limit)")
    if limits.max_chunks < 1:
        raise ValueError(f"--max-chunks {limits.max_chunks}: expected >= 1")
    data = Path(data).resolve()
    data.mkdir(parents=True, exist_ok=True)
    lock = _lock_data(data)
    try:
        sock = _bind(host, port)
    except PortBusy:
        lock.close()
        raise
    # The server validates specs on the CPU only, leaving the accelerators to the workers.
    if "JAX_PLATFORMS" not in os.environ:
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ["JAXCLEAR_SERVER_JAX_PLATFORMS_SET"] = "1"
    con = connect(data)
    back = requeue_interrupted(con)  # a restart: nothing counted against the jobs
    con.close()
    sup = Workers(data, workers, cache_dir, cluster, min_free_bytes=limits.min_free_bytes)
    app = create_app(data, token=token, limits=limits, supervisor=sup, local_only=token is None)
    server = make_server(app, header_timeout=header_timeout, max_connections=max_connections, log_level=log_level)
    sup.start()  # after the port is bound: a busy port never starts a worker
    stop = threading.Event()
    threading.Thread(
        target=_housekeeping,
        args=(data, limits, retention_days * 86400 if retention_days else None, stop),
        daemon=True,
        name="jaxclear-housekeeping",
    ).start()
    shown = "[::1]" if host == "::1" else host
    url = f"http://{shown}:{port}/"
    print(
        f"jaxclear serve: {url} data {data} workers {workers}"
        + (f", {len(back)} interrupted job(s) queued again" if back else "")
        + (", no token (--no-token: loopback names only)" if token is None else ", bearer token required"),
        file=sys.stderr,
        flush=True,
    )
    if generated:  # printed once, here: a browser logs in with it, programs send it as a bearer token
        print(
            f"jaxclear serve: log in at {url}?token={token}\n"
            f"jaxclear serve: or use it from programs: export JAXCLEAR_TOKEN={token}",
            file=sys.stderr,
            flush=True,
        )
    if threading.current_thread() is threading.main_thread():
        # uvicorn (>= 0.29) re-raises the SIGTERM it handled once it has shut down; with the default
        # action that kills the process before the workers are stopped and the lock released.
        # Raised as SystemExit(0) instead: a SIGTERM is a graceful stop, exit status 0.
        signal.signal(signal.SIGTERM, _exit_gracefully)
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        sup.stop()
        sock.close()
        lock.close()
