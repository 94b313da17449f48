"""Command line: ``jaxclear run [SPEC] [--out DIR] [--set key=value ...] [--force] [--max-variants N] [--yes]
[--cluster ADDRESS]``, ``jaxclear examples [--copy NAME [DEST]]``, ``jaxclear show DIR``,
``jaxclear export DIR [--format csv|parquet] [--output FILE]``,
``jaxclear serve`` / ``submit SPEC --server URL`` / ``status JOB --server URL`` / ``cancel JOB`` (the sweep
service), ``sensitivity``, ``identify``; ``jaxclear --version``."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

DEFAULT_SPEC = Path("sweeps") / "default.toml"  # else the shipped example (spec.spec_file)


class _Bar:
    """A plain progress bar on stderr: variants done, variant-steps/s, ETA.

    Moves within a chunk (fractional updates from the running chunk's save blocks); rate and
    ETA count run time only: the clock starts when compiling has finished (``stage``)."""

    def __init__(self, total, steps_per_variant, quiet=False, min_interval_s=0.2):
        self.total, self.done, self.spv, self.quiet = total, 0.0, steps_per_variant, quiet
        self.t0 = time.perf_counter()
        self.start_done = 0.0
        self.min_interval_s, self.last = min_interval_s, 0.0

    def stage(self, name, **info):
        """Restart the clock when the run proper starts (the messages come from sweep.run's log)."""
        if name == "running":
            self.t0, self.start_done = time.perf_counter(), self.done

    def __call__(self, n):
        self.done += n
        if self.quiet:
            return
        now = time.perf_counter()
        finished = self.done >= self.total - 1e-9
        if not finished and now - self.last < self.min_interval_s:
            return
        self.last = now
        el = now - self.t0
        ran = self.done - self.start_done
        rate = ran * self.spv / el if el > 0 else 0.0
        eta = (self.total - self.done) * el / ran if ran > 0 else float("nan")
        w = 30
        fill = int(w * self.done / self.total)
        sys.stderr.write(
            f"\r[{'#' * fill}{'.' * (w - fill)}] {int(self.done + 1e-9)}/{self.total} variants "
            f"{rate:.3g} variant-steps/s ETA {eta:.0f}s "
        )
        sys.stderr.flush()
        if finished:
            sys.stderr.write("\n")


def _bytes(n):
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024


def _secs(s):
    if s is None:
        return "n/a"
    return f"{s:.3g} s" if s < 120 else (f"{s / 60:.3g} min" if s < 7200 else f"{s / 3600:.3g} h")


def cmd_plan(args):
    """What a sweep will do and cost, without running it (``sweep.estimate``)."""
    from . import spec as specmod
    from . import sweep

    try:
        path = specmod.spec_file(args.spec)
        e = sweep.estimate(path, args.set or (), probe_steps=0 if args.no_probe else args.probe_steps)
    except specmod.SpecError as err:
        print(f"jaxclear: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(e, indent=2))
        return 0
    lines = [f"{e['name']} ({path}): {e['n_variants']} variants", "axes:"]
    for a in e["axes"] or []:
        z = f", zip {a['zip']!r}" if a["zip"] else ""
        lines.append(f"  {a['name']:34s} {a['kind']:20s} {a['count']:6d} values{z}  {a['min']:.4g} – {a['max']:.4g}")
    if not e["axes"]:
        lines.append("  (none: one variant)")
    lines += [
        f"chunks: {e['n_chunks']} × {e['chunk_size']} variants (last chunk padded with {e['padding']})",
        f"steps per variant: {e['steps_per_variant']} (dt = {e['dt_s']:g} s, t_end = {e['t_end_s']:.6g} s), "
        f"saves: {e['n_saves']} every {e['save_every']} steps × {len(e['channels'])} channels",
        f"model: {e['mechanism']}"
        + "".join(f", {e[k]}" for k in ("clearance_joint", "geometry") if k in e)
        + (f" ({e['n_points']} points)" if e.get("n_points") else "")
        + f", {e['scheme']}, {e['precision']}",
    ]
    if e.get("max_regions_choice"):
        lines.append(
            f"contact regions: {e['max_regions_choice'].split(';', 1)[0][len('auto: ') :]} "
            f'(profile.max_regions = "auto"; {e["max_regions_choice"].split("; ", 1)[1]})'
        )
    lines += [
        f"memory per chunk: {_bytes(e['memory_bytes_per_chunk'])} (params {_bytes(e['params_bytes_per_chunk'])}, "
        f"outputs {_bytes(e['output_bytes_per_chunk'])} of which histories {_bytes(e['history_bytes_per_chunk'])}, "
        f"temporaries {_bytes(e['temp_bytes_per_chunk'])})",
        f"result store: ~{_bytes(e['store_bytes'])} uncompressed (histories {_bytes(e['history_bytes'])}, "
        f"metrics {_bytes(e['metrics_bytes'])})",
    ]
    if e["probe_steps"]:
        lines.append(
            f"time: compile {_secs(e['compile_s'])}, run ~{_secs(e['run_s'])} "
            f"({_secs(e['run_s_per_chunk'])} per chunk, {e['variant_steps_per_s']:.3g} variant-steps/s "
            f"from a {e['probe_steps']}-step probe on {e['device_count']}× {e['device_kind']}), "
            f"total ~{_secs(e['total_s'])}"
        )
    else:
        lines.append("time: not probed (--no-probe)")
    print("\n".join(lines))
    return 0


def _summary_table(table, summary):
    lines = [
        f"{summary['name']}: {summary['variants']} variants × {summary['steps_per_variant']} steps "
        f"(dt = {summary['dt_s']:g} s, {summary['precision']}, {summary['device_count']}× {summary['device_kind']})",
        f"wall {summary['wall_s']:.2f} s, compile {summary['compile_s']:.2f} s, "
        f"{(summary['variant_steps_per_s'] or 0):.4g} variant-steps/s (without compile); "
        f"failed variants: {len(summary['failed_variants'])}"
        + "".join(f"; warning {w['code']}: {w['count']} variant(s)" for w in summary.get("warnings", [])),
        f"{'metric':44s} {'min':>11s} {'median':>11s} {'max':>11s}",
    ]
    return "\n".join(lines + _metric_rows(table))


def _metric_rows(table):
    """min / median / max of the headline metrics over the finite values."""
    import numpy as np

    lines = []
    keys = [
        k
        for k in (
            "peak_contact_force_N",
            "peak_contact_force_steady_N",
            "daf_contact_force",
            "daf_contact_force_steady",
            "daf_slider_acceleration",
            "daf_slider_acceleration_steady",
            "impacts",
            "free_flight_fraction",
        )
        if k in table
    ]
    if "daf_slider_acceleration" not in table:  # another mechanism: its own amplification factors
        keys[3:3] = [k for k in table if k.startswith("daf_") and k not in keys]
    for k in keys or [k for k in table if k != "finite"]:  # other mechanisms: every column
        v = np.asarray(table[k], float)
        v = v[np.isfinite(v)]
        if v.size:
            lines.append(f"{k:44s} {v.min():11.4g} {np.median(v):11.4g} {v.max():11.4g}")
    return lines


def _init_distributed(args):
    """jax.distributed for a multi-host run, before any computation (error text, or None)."""
    if not (args.distributed or args.coordinator or args.num_processes or args.process_id is not None):
        return None
    from . import parallel

    try:
        parallel.initialize(args.coordinator, args.num_processes, args.process_id)
    except (ValueError, RuntimeError) as e:
        return f"jax.distributed.initialize failed: {e}"
    return None


def _free_space_folder(out: Path) -> Path:
    """``out`` or its nearest existing parent (where the store will be written)."""
    p = out.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _store_still_needed(out, spec, est_bytes):
    """Bytes the run will still add: the estimate, less the done share of a store of this spec
    already in ``out`` (a resume)."""
    from . import spec as specmod
    from . import store

    if not store.exists(out):
        return est_bytes
    try:
        g = store.open(out, mode="r")
        if g.attrs.get("spec_hash") != specmod.spec_hash(spec):
            return est_bytes  # another spec: refused by the run, or deleted with --force
        done = store.done_flags(g)
    except Exception:  # unreadable: the run says why
        return est_bytes
    return int(est_bytes * (1.0 - done.mean())) if done.size else est_bytes


def _check_size(args, raw):
    """Refuse a sweep with more variants than --max-variants, counted from the axis arguments
    before any variant is built (error text, or None)."""
    from . import spec as specmod

    if args.max_variants < 1:
        return f"--max-variants = {args.max_variants}: expected an integer >= 1"
    factors = specmod.variant_factors(raw)
    if factors is None:  # malformed axes: the spec check names the problem
        return None
    n = math.prod(m for _, m in factors)
    if n <= args.max_variants:
        return None
    how = " × ".join(f"{k}: {m}" for k, m in factors)
    default = " (the default)" if args.max_variants == specmod.MAX_VARIANTS else ""
    return (
        f"the spec has {n} variants ({how}), more than --max-variants = {args.max_variants}{default}; "
        f"shorten the axes, or pass --max-variants {n} to run them all"
    )


def _check_disk(args, spec, pl, out):
    """Refuse a sweep whose result store (estimate) does not fit in the free space of the output
    folder, unless --yes (error text, or None)."""
    import shutil

    from . import sweep

    est = sweep.store_estimate(spec, pl)
    need = _store_still_needed(out, spec, est["store_bytes"])
    where = _free_space_folder(out)
    free = shutil.disk_usage(where).free
    if need <= free or args.yes:
        return None
    return (
        f"the result store needs ~{_bytes(need)} ({need} bytes, uncompressed estimate: {pl.n_variants} variants "
        f"× {_bytes(est['history_bytes_per_variant'])} of histories + metrics) but {where} has {_bytes(free)} "
        f"({free} bytes) free; save less (outputs.histories, integrator.save_every), choose another --out, "
        "or pass --yes to run anyway"
    )


def _interrupted(out, pl):
    """The line for a Ctrl-C: the chunks whose done flag is in the store are kept."""
    from . import store

    kept, total = 0, (math.ceil(pl.n_variants / pl.chunk_size) if pl is not None else None)
    try:
        if out is not None and store.exists(out):
            g = store.open(out, mode="r")
            flags = store.done_flags(g)
            kept, total = int(flags.sum()), int(g.attrs.get("n_chunks", flags.size))
    except Exception:  # an unreadable store: nothing to count, the rerun says what it finds
        pass
    if total is None:
        return "interrupted before the sweep started: nothing computed"
    return f"interrupted: {kept} of {total} chunks kept, rerun the same command to resume"


def cmd_run(args):
    """Run a sweep; Ctrl-C keeps the finished chunks (exit status 130)."""
    state = {"out": None, "plan": None}
    try:
        return _cmd_run(args, state)
    except KeyboardInterrupt:
        import signal

        try:  # a second Ctrl-C while counting: ignored
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread
            old = None
        try:
            sys.stderr.write("\n" + _interrupted(state["out"], state["plan"]) + "\n")
            sys.stderr.flush()
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)
        return 130


def _cmd_run(args, state):
    err = _init_distributed(args)
    if err:
        print(f"jaxclear: error: {err}", file=sys.stderr)
        return 2
    from . import parallel, sweep
    from . import spec as specmod

    lead = parallel.process_index() == 0
    args.quiet = args.quiet or not lead
    try:
        path = specmod.spec_file(args.spec)
        raw, _ = specmod.load_raw(path, args.set or ())
        err = _check_size(args, raw)
        if err:
            print(f"jaxclear: error: {err}", file=sys.stderr)
            return 2
        spec = specmod.load(path, args.set or ())
        pl = sweep.plan(spec)
    except specmod.SpecError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("runs") / spec["sweep"]["name"]
    err = _check_disk(args, spec, pl, out)
    if err:
        print(f"jaxclear: error: {err}", file=sys.stderr)
        return 2
    state.update(out=out, plan=pl)
    bar = _Bar(pl.n_variants, pl.cfg.n_steps, quiet=args.quiet)
    if not args.quiet:
        print(
            f"running {path} -> {out}: {pl.n_variants} variants, {pl.cfg.n_steps} steps each, chunk {pl.chunk_size}",
            file=sys.stderr,
        )
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    from .mechanisms import _clearance

    if "wear" in spec and _clearance.wear_on(spec):
        log(
            "note: run reports the wear rates of one steady window (wear.updates, wear.cycles_per_update and "
            "wear.smoothing are read by `jaxclear wear`, which evolves the bushing over cycles)"
        )
    try:
        cache = False if args.no_compile_cache else (args.cache_dir or True)
        ticks = {"auto": "auto", "on": True, "off": False}[args.progress_ticks]
        table, summary, _ = sweep.run(
            spec,
            out=out,
            progress=bar,
            log=log,
            force=args.force,
            compile_cache=cache,
            stage=bar.stage,
            ticks=ticks,
            cluster=args.cluster,
        )
    except specmod.SpecError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, ImportError, OSError, RuntimeError) as e:
        if not args.cluster:
            raise
        # bad address, scheduler unreachable (OSError: timed out), distributed not installed,
        # a chunk that kills its workers (RuntimeError)
        print(f"jaxclear: error: --cluster {args.cluster}: {e}", file=sys.stderr)
        return 2
    if not lead:
        print(
            f"process {parallel.process_index()}/{parallel.process_count()}: "
            f"{summary['chunks_computed']} chunks computed in total, results in {out}/"
        )
        return 0
    if args.quiet:  # the log was silent: questionable results are still said (sweep.run logs them otherwise)
        for w in summary.get("warnings", []):
            print(f"warning: {w['message']}", file=sys.stderr)
    print(_summary_table(table, summary))
    print(f"results in {out}/ (store.zarr, metrics.csv, summary.json, progress.jsonl, plots/)")
    return 0


def cmd_show(args):
    """Summary of a run directory from its store (finished or not); regenerates DIR/plots."""
    import numpy as np

    from . import sweep

    try:
        res = sweep.load(args.dir)
    except (FileNotFoundError, ValueError) as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    at, done = res.attrs, res.variant_done
    fin = np.asarray(res.metrics.get("finite", np.zeros(len(done), bool)), bool)
    failed = [int(i) for i in np.nonzero(done & ~fin)[0]]
    print(
        f"{at['name']}: spec_hash {at['spec_hash']} (jaxclear {at['version']}), store {sweep.store.path_of(args.dir)}"
    )
    print(
        f"variants done {int(done.sum())}/{at['n_variants']}, chunks done {int(res.chunk_done.sum())}/{at['n_chunks']}"
        + (f" (missing: {_ranges(res.missing_chunks)})" if res.missing_chunks else "")
    )
    print(
        f"failed variants: {len(failed)}" + (f" {failed[:20]}" + (" ..." if len(failed) > 20 else "") if failed else "")
    )
    if res.summary:
        s = res.summary
        print(
            f"wall {s['wall_s']:.2f} s, compile {s['compile_s']:.2f} s, "
            f"{(s['variant_steps_per_s'] or 0):.4g} variant-steps/s, {s['device_count']}× {s['device_kind']}"
        )
        for w in s.get("warnings", []):
            print(f"warning: {w['message']}")
    if done.any():
        table = {k: np.asarray(v)[done] for k, v in res.table.items()}
        print(f"{'metric':44s} {'min':>11s} {'median':>11s} {'max':>11s}")
        print("\n".join(_metric_rows(table)))
        written = sweep.plot_results(args.dir, res)
        if written:
            print(f"plots: {', '.join(written)} in {args.dir}/")
    return 0


def _ranges(idx):
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, i = [], 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(str(idx[i]) if i == j else f"{idx[i]}-{idx[j]}")
        i = j + 1
    return ", ".join(out)


def cmd_export(args):
    """The metrics table of a run directory as csv or parquet."""
    from . import sweep

    try:
        dest = sweep.export(args.dir, args.format, args.output)
    except (FileNotFoundError, ValueError, ImportError) as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    print(dest)
    return 0


def cmd_serve(args):
    """The sweep service (``jaxclear.service.serve``): HTTP API + HTML page + worker processes."""
    import os

    from . import service

    token = _serve_token(args)
    if token is False:
        return 2
    from . import parallel

    per_worker = args.cpu_devices or max(1, parallel.usable_cores() // max(1, args.workers))
    os.environ["JAXCLEAR_CPU_DEVICES"] = str(per_worker)  # read by each worker before JAX starts
    os.environ["JAXCLEAR_CPU_DEVICES_SOURCE"] = (
        "serve --cpu-devices"
        if args.cpu_devices
        else f"serve: {parallel.usable_cores()} usable cores / {args.workers} worker(s)"
    )
    lim = service.Limits(
        max_spec_bytes=args.max_spec_bytes,
        max_variants=args.max_variants,
        max_steps=args.max_steps,
        max_queued=args.max_queued,
        max_store_bytes=args.max_store_bytes,
        max_chunks=args.max_chunks,
        max_job_seconds=args.max_job_seconds,
        min_free_bytes=args.min_free_bytes,
    )
    try:
        service.serve(
            args.host,
            args.port,
            args.data,
            token=token,
            workers=args.workers,
            cache_dir=args.cache_dir,
            limits=lim,
            cluster=args.cluster,
            no_token=args.no_token,
            retention_days=args.retention_days,
            header_timeout=args.header_timeout,
            max_connections=args.max_connections,
        )
    except (ValueError, service.DataDirBusy, service.PortBusy) as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(
            f"jaxclear: error: jaxclear serve needs the 'service' extra (pip install 'jaxclear[service]'): {e}",
            file=sys.stderr,
        )
        return 2
    return 0


def _serve_token(args):
    """The server's token: --token-file, else --token (warned: other users see it in ps), else
    $JAXCLEAR_TOKEN, else None (serve then makes a random one, unless --no-token).  False after
    printing an error."""
    import os

    given = [n for n, v in (("--token-file", args.token_file), ("--token", args.token)) if v]
    if len(given) > 1:
        print("jaxclear: error: --token-file and --token exclude each other", file=sys.stderr)
        return False
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as e:
            print(f"jaxclear: error: --token-file {args.token_file}: {e.strerror or e}", file=sys.stderr)
            return False
        if not token:
            print(f"jaxclear: error: --token-file {args.token_file} is empty", file=sys.stderr)
            return False
        return token
    if args.token:
        print(
            "jaxclear: warning: --token on the command line is visible to every user of this machine in the "
            "process list (ps, /proc); prefer $JAXCLEAR_TOKEN or --token-file",
            file=sys.stderr,
        )
        return args.token
    env = os.environ.get("JAXCLEAR_TOKEN") or None
    if env and args.no_token:
        print(
            "jaxclear: error: --no-token, but $JAXCLEAR_TOKEN is set: unset it or leave out --no-token", file=sys.stderr
        )
        return False
    return env


def _client(args):
    import os

    from .client import Client

    return Client(args.server, token=args.token or os.environ.get("JAXCLEAR_TOKEN") or None)


def _status_line(s):
    rate = f", {s['variant_steps_per_s']:.3g} variant-steps/s" if s.get("variant_steps_per_s") else ""
    eta = f", ETA {s['eta_s']:.0f} s" if s.get("eta_s") is not None and s["status"] == "running" else ""
    err = f": {s['error']}" if s.get("error") else ""
    return f"{s['id']} {s['name']} {s['status']} {s['variants_done']}/{s['variants_total']} variants{rate}{eta}{err}"


def cmd_submit(args):
    """Submit a spec to a service; prints the job id (with --wait, waits and prints the status)."""
    from . import spec as specmod
    from .client import JobFailed, ServiceError

    try:
        path = specmod.spec_file(args.spec)
    except specmod.SpecError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    try:
        job = _client(args).submit(path.read_text(), set=args.set or ())
        print(job.id)
        if args.wait:
            st = job.wait()
            print(_status_line(st))
            for w in st.get("warnings", []):  # the submission's, then the questionable results
                print(f"warning: {w}", file=sys.stderr)
    except ServiceError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    except JobFailed as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"jaxclear: error: cannot reach {args.server}: {e}", file=sys.stderr)
        return 2
    return 0


def _service_call(args, fn):
    """Run ``fn(client)`` against the service; errors as 'jaxclear: error: ...' with status 2."""
    from .client import ServiceError

    try:
        fn(_client(args))
    except ServiceError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"jaxclear: error: cannot reach {args.server}: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_status(args):
    """Status of one job (or of all jobs) on a service."""

    def show(c):
        if args.job:
            s = c.job(args.job).status()
            print(json.dumps(s, indent=2) if args.json else _status_line(s))
        else:
            jobs = [j.info for j in c.jobs()]
            print(json.dumps(jobs, indent=2) if args.json else "\n".join(_status_line(s) for s in jobs))

    return _service_call(args, show)


def cmd_cancel(args):
    """Cancel one job on a service (queued: at once; running: at its next progress report)."""

    def cancel(c):
        job = c.job(args.job)
        s = job.cancel()
        print(_status_line(job.wait(raise_on_failure=False) if args.wait else s))

    return _service_call(args, cancel)


def _log(args):
    """Progress messages on stderr unless --quiet."""
    return None if args.quiet else (lambda m: print(m, file=sys.stderr))


def _load_and_compute(args, compute):
    """Load ``args.spec`` with its --set overrides and return (compute(spec), output dir);
    a SpecError (bad spec or input) is printed and gives None (exit status 2)."""
    from . import spec as specmod

    try:
        spec = specmod.load(specmod.spec_file(args.spec), args.set or ())
        res = compute(spec)
    except specmod.SpecError as err:
        print(f"jaxclear: error: {err}", file=sys.stderr)
        return None
    return res, Path(args.out) if args.out else Path("runs") / spec["sweep"]["name"]


def cmd_sensitivity(args):
    """Derivatives of the peak metrics w.r.t. spec keys (``jaxclear.sensitivity``)."""
    from . import sensitivity

    keys = [k.strip() for k in ",".join(args.wrt).split(",") if k.strip()]
    got = _load_and_compute(args, lambda spec: sensitivity.compute(spec, keys, mode=args.mode, log=_log(args)))
    if got is None:
        return 2
    res, out = got
    sensitivity.write(res, out)
    n = len(res["finite"])
    print(
        f"{n} variant(s), {res['steps_per_variant']} steps, {res['mode']} mode: "
        f"{res['wall_s']:.3g} s (+ {res['compile_s']:.3g} s compile)"
    )
    prim = res["primary"]
    twin = prim.replace("smooth_", "", 1)
    for m in dict.fromkeys((twin, prim) if twin in res["metrics"] else (prim,)):
        print(f"  {m} = {res['metrics'][m][0]:.6g}  (variant 0)")
        for k in res["keys"][:12]:
            print(f"    d/d({k}) = {res['gradients'][sensitivity.column(m, k)][0]:.6g}")
    if (~res["finite"]).any():
        print(f"  non-finite variants: {list(map(int, (~res['finite']).nonzero()[0]))}")
    print(f"results in {out}/ (sensitivity.csv, sensitivity.json, tornado.png)")
    return 0


def cmd_wear(args):
    """Evolve the bushings' wear over cycles (``jaxclear.wear_evolution``)."""
    import numpy as np

    from . import spec as specmod
    from . import wear_evolution

    try:
        spec = wear_evolution.load_spec(specmod.spec_file(args.spec), args.set or ())
    except specmod.SpecError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    keys = [k.strip() for k in ",".join(args.wrt or ()).split(",") if k.strip()]
    out = Path(args.out) if args.out else Path("runs") / spec["sweep"]["name"]
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    try:
        if keys:  # before the run: a bad key costs nothing
            from . import sensitivity

            sensitivity.check_keys(spec, keys)
        table, summary = wear_evolution.run(spec, out, log=log, force=args.force)
        if keys:
            from . import sweep

            log(f"gradients of {wear_evolution.PEAK} after {spec['wear']['updates']} updates w.r.t. {', '.join(keys)}")
            sweep.write_csv(out / "wear_sensitivity.csv", wear_evolution.sensitivity(spec, keys))
    except specmod.SpecError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    U = summary["updates"]
    last = table["update"] == U
    for col, unit, sc in (
        ("max_radial_clearance_m", "µm", 1e6),
        ("max_wear_depth_m", "µm", 1e6),
        ("worn_volume_m3", "mm³", 1e9),
        ("peak_contact_force_steady_N", "N", 1.0),
    ):
        if col in table:
            v0, v1 = table[col][table["update"] == 0] * sc, table[col][last] * sc
            print(
                f"{col:32s} new {np.nanmedian(v0):10.4g} -> after {U} updates {np.nanmedian(v1):10.4g} {unit} (median)"
            )
    print(
        f"{summary['n_variants']} variant(s), {U} updates of {', '.join(f'{c:g}' for c in summary['cycles_per_update'])} "
        f"cycles: {summary['elapsed_s']:.3g} s"
    )
    files = "wear.zarr, wear_metrics.csv, wear_summary.json, plots/" + (", wear_sensitivity.csv" if keys else "")
    print(f"results in {out}/ ({files})")
    return 0


def cmd_identify(args):
    """Fit clearance parameters to a measurement (``jaxclear.identify``)."""
    from . import identify

    got = _load_and_compute(args, lambda spec: identify.fit(spec, log=_log(args), iterations=args.iterations))
    if got is None:
        return 2
    res, out = got
    identify.write(res, out)
    print(
        f"{res['optimizer']}, {res['iterations']} iterations x {len(res['starts'])} starts: "
        f"loss {res['loss']:.4g} ({res['wall_s']:.3g} s)"
    )
    truth = res["source"].get("truth", {})
    for k, v in res["parameters"].items():
        t = f"   truth {truth[k]:.6g}" if k in truth else ""
        print(f"  {k:28s} {v['value']:.6g} ± {v['std']:.2g}   (start {v['initial']:.6g}){t}")
    print(f"results in {out}/ (identified.json, loss_history.csv, fit.png)")
    return 0


def cmd_examples(args):
    """The example specs shipped with jaxclear: list them, or copy one (or all) to a folder."""
    import shutil

    from . import spec as specmod

    names = specmod.examples()
    if not args.copy:
        if args.dest:
            print("jaxclear: error: DEST is the destination of --copy NAME; give --copy too", file=sys.stderr)
            return 2
        w = max(map(len, names))
        print("\n".join(f"{n:{w}s}  {d}" for n, d in names.items()))
        print(
            f"\n{len(names)} example specs in {specmod.EXAMPLES_DIR}\n"
            "run one: jaxclear run NAME (e.g. jaxclear run default); "
            "copy one to edit: jaxclear examples --copy NAME [DEST]"
        )
        return 0
    want = list(names) if args.copy == "all" else [args.copy.removesuffix(".toml")]
    for n in want:
        if n not in names:
            print(
                f"jaxclear: error: --copy {args.copy!r}: no example spec of that name; "
                f"allowed: all, {', '.join(names)}",
                file=sys.stderr,
            )
            return 2
    dest = Path(args.dest) if args.dest else Path(".")
    as_dir = len(want) > 1 or dest.is_dir() or str(args.dest or ".").endswith(("/", "\\"))
    targets = [(dest / f"{n}.toml") if as_dir else dest for n in want]
    if not args.force:
        there = [str(t) for t in targets if t.exists()]
        if there:
            print(f"jaxclear: error: {', '.join(there)} exists already; pass --force to overwrite", file=sys.stderr)
            return 2
    for n, t in zip(want, targets):
        t.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(specmod.EXAMPLES_DIR / f"{n}.toml", t)
        print(t)
    return 0


EXAMPLES = {
    "plan": "jaxclear plan sweeps/default.toml\n  jaxclear plan sweeps/default.toml --no-probe --json",
    "run": (
        "jaxclear run sweeps/flores_slider_crank.toml --out runs/flores\n"
        "  jaxclear run sweeps/default.toml --set integrator.revolutions=1 --cpu-devices 1\n"
        "  jaxclear run default --out runs/default   # a shipped example by name, from any folder"
    ),
    "show": "jaxclear show runs/flores",
    "examples": (
        "jaxclear examples\n  jaxclear examples --copy flores_slider_crank my_sweep.toml\n"
        "  jaxclear examples --copy all specs/"
    ),
    "export": "jaxclear export runs/flores --format parquet --output flores.parquet",
    "serve": "jaxclear serve --port 8642 --workers 1 --data jaxclear-data",
    "submit": "jaxclear submit sweeps/flores_slider_crank.toml --set laws.restitution=0.5 --wait",
    "status": "jaxclear status            # every job\n  jaxclear status 3f2a9c1e   # one job",
    "cancel": "jaxclear cancel 3f2a9c1e",
    "sensitivity": "jaxclear sensitivity sweeps/sensitivity_slider_crank.toml --wrt joint.clearance_m,laws.restitution",
    "identify": "jaxclear identify sweeps/identify_clearance.toml --iterations 10",
    "wear": (
        "jaxclear wear sweeps/wear_evolution.toml --out runs/wear_evolution\n"
        "  jaxclear wear sweeps/wear_evolution.toml --set wear.updates=4 --wrt wear.coefficient_m2_per_N,joint.clearance_m"
    ),
}


def _parser(sub, name, help_):
    return sub.add_parser(
        name,
        help=help_,
        description=help_[:1].upper() + help_[1:] + ".",
        epilog="example:\n  " + EXAMPLES[name],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _cpu_option(p):
    p.add_argument(
        "--cpu-devices",
        type=int,
        metavar="N",
        help="split the CPU into N XLA devices that run a chunk side by side (default: every usable "
        "core; ignored on GPU/TPU)",
    )


SPEC_HELP = "TOML spec file, or the name of a shipped example (jaxclear examples; default: sweeps/default.toml if present, else the example 'default')"


def main(argv=None):
    from . import __version__
    from .spec import MAX_VARIANTS

    ap = argparse.ArgumentParser(
        prog="jaxclear",
        description="Dynamics of mechanisms with clearance joints.",
        epilog="example:\n  jaxclear run sweeps/flores_slider_crank.toml --out runs/flores\n"
        "  jaxclear <command> --help   (options and an example of each command)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--version", action="version", version=f"jaxclear {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = _parser(sub, "plan", "print variants, axes, chunking, memory, store size and estimated run time")
    pp.add_argument("spec", nargs="?", help=SPEC_HELP)
    pp.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a spec value, e.g. joint.clearance_m=2.5e-4"
    )
    pp.add_argument("--json", action="store_true", help="print the estimate as JSON")
    pp.add_argument("--probe-steps", type=int, default=200, help="steps of the timing probe (default 200)")
    pp.add_argument("--no-probe", action="store_true", help="no compile / timing probe (sizes only)")
    _cpu_option(pp)
    pp.set_defaults(func=cmd_plan)
    r = _parser(sub, "run", "run a sweep spec (default: sweeps/default.toml); Ctrl-C keeps the finished chunks")
    r.add_argument("spec", nargs="?", help=SPEC_HELP)
    r.add_argument("--out", help="output directory (default: runs/<sweep.name>)")
    r.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override a spec value, e.g. joint.clearance_m=2.5e-4"
    )
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--force", action="store_true", help="delete a store of another spec in DIR and start over")
    r.add_argument(
        "--max-variants",
        type=int,
        default=MAX_VARIANTS,
        metavar="N",
        help="refuse a spec of more than N variants, counted from the axes before anything is built "
        f"(default {MAX_VARIANTS}, as jaxclear serve)",
    )
    r.add_argument(
        "--yes",
        action="store_true",
        help="run even when the estimated result store is larger than the free space of the output folder",
    )
    r.add_argument(
        "--cache-dir", help="persistent compilation cache (default: $JAXCLEAR_CACHE_DIR or ~/.cache/jaxclear/xla)"
    )
    r.add_argument("--no-compile-cache", action="store_true", help="do not use the persistent compilation cache")
    r.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run every pending chunk as a task on a Dask cluster: scheduler address (tcp://host:8786), "
        "scheduler file (.json), or local[:N] (N local worker processes); needs 'jaxclear[dask]'",
    )
    r.add_argument(
        "--progress-ticks",
        choices=("auto", "on", "off"),
        default="auto",
        help="progress within a chunk from the running computation; such executables skip the "
        "persistent compile cache, so 'auto' uses them only for chunks of >= 2e7 variant-steps",
    )
    _cpu_option(r)
    mh = r.add_argument_group("multi-host (jax.distributed; one process per host, all on the same --out)")
    mh.add_argument(
        "--distributed",
        action="store_true",
        help="join a multi-process run, cluster auto-detected (SLURM, Open MPI, JAX_* variables)",
    )
    mh.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0")
    mh.add_argument("--num-processes", type=int, metavar="N", help="number of processes")
    mh.add_argument("--process-id", type=int, metavar="I", help="rank of this process, 0..N-1")
    r.set_defaults(func=cmd_run)
    eg = _parser(sub, "examples", "list the example specs shipped with jaxclear, or copy one to edit")
    eg.add_argument("--copy", metavar="NAME", help="copy example NAME (or 'all') to DEST")
    eg.add_argument("dest", nargs="?", help="file or folder to copy to (default: the current folder)")
    eg.add_argument("--force", action="store_true", help="overwrite existing files")
    eg.set_defaults(func=cmd_examples)
    sh = _parser(sub, "show", "summary of a run directory (finished or not); regenerates its plots")
    sh.add_argument("dir", help="run directory (holding store.zarr)")
    sh.set_defaults(func=cmd_show)
    ex = _parser(sub, "export", "write the metrics table of a run directory as csv or parquet")
    ex.add_argument("dir", help="run directory (holding store.zarr)")
    ex.add_argument("--format", choices=("csv", "parquet"), default="csv", help="file format (default csv)")
    ex.add_argument("--output", help="file to write (default: DIR/metrics.<format>)")
    ex.set_defaults(func=cmd_export)
    sv = _parser(sub, "serve", "start the sweep service (HTTP API, HTML page, worker)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need a token)")
    sv.add_argument("--port", type=int, default=8642, help="TCP port (default 8642)")
    sv.add_argument("--data", default="jaxclear-data", help="queue, jobs and results (default ./jaxclear-data)")
    sv.add_argument(
        "--token",
        help="bearer token required on every request (visible in the process list: prefer $JAXCLEAR_TOKEN "
        "or --token-file; default: $JAXCLEAR_TOKEN, else a random token printed once in a login URL)",
    )
    sv.add_argument("--token-file", metavar="PATH", help="read the bearer token from this file (first line)")
    sv.add_argument(
        "--no-token",
        action="store_true",
        help="no token (a trusted single-user machine): loopback only, Host must be a loopback name",
    )
    sv.add_argument("--workers", type=int, default=1, help="sweeps run at the same time (default 1)")
    sv.add_argument("--cache-dir", help="persistent compilation cache (default DATA/xla-cache)")
    sv.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run each job's chunks as tasks on this Dask cluster (scheduler address or file)",
    )
    sv.add_argument("--max-spec-bytes", type=int, default=256 * 1024, help="largest spec accepted (default 256 KiB)")
    sv.add_argument(
        "--max-variants", type=int, default=MAX_VARIANTS, help=f"most variants per job (default {MAX_VARIANTS})"
    )
    sv.add_argument(
        "--max-steps", type=lambda x: int(float(x)), default=10**12, help="most variant-steps per job (default 1e12)"
    )
    sv.add_argument(
        "--max-store-bytes",
        type=lambda x: int(float(x)),
        default=16 * 2**30,
        help="largest histories of one job (default 16 GiB)",
    )
    sv.add_argument("--max-queued", type=int, default=1000, help="most jobs queued or running (default 1000)")
    sv.add_argument(
        "--max-chunks", type=int, default=256, help="most chunks per job (each writes ~35 store files; default 256)"
    )
    sv.add_argument(
        "--max-job-seconds",
        type=float,
        default=86400.0,
        help="wall time of one job: refused at submit when the estimate exceeds it, stopped (failed) when "
        "running past it (default 86400 = 1 day; 0: no limit)",
    )
    sv.add_argument(
        "--retention-days",
        type=float,
        metavar="D",
        help="delete finished jobs (record and files) D days after they ended (default: keep them)",
    )
    sv.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a connection may take to send a request head (default 10)",
    )
    sv.add_argument(
        "--max-connections", type=int, default=100, help="open connections at most; more get 503 (default 100)"
    )
    sv.add_argument(
        "--min-free-bytes",
        type=lambda x: int(float(x)),
        default=512 * 2**20,
        help="free space on the data folder's disk below which submissions get 507 and no job is started "
        "(default 512 MiB; 0: no check)",
    )
    sv.add_argument(
        "--cpu-devices",
        type=int,
        metavar="N",
        help="CPU devices of each worker (default: the usable cores divided among the workers)",
    )
    sv.set_defaults(func=cmd_serve)
    for name, hlp in (
        ("submit", "submit a spec to a service; prints the job id"),
        ("status", "status of a job (or all jobs) on a service"),
        ("cancel", "cancel a queued or running job on a service"),
    ):
        c = _parser(sub, name, hlp)
        if name == "submit":
            c.add_argument("spec", nargs="?", help=SPEC_HELP)
            c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value")
            c.add_argument("--wait", action="store_true", help="wait for the job to finish")
            c.set_defaults(func=cmd_submit)
        elif name == "status":
            c.add_argument("job", nargs="?", help="job id (default: list all jobs)")
            c.add_argument("--json", action="store_true", help="print the status as JSON")
            c.set_defaults(func=cmd_status)
        else:
            c.add_argument("job", help="job id (as submit printed it)")
            c.add_argument("--wait", action="store_true", help="wait until the job has stopped")
            c.set_defaults(func=cmd_cancel)
        c.add_argument("--server", default="http://127.0.0.1:8642", help="service URL (default http://127.0.0.1:8642)")
        c.add_argument("--token", help="bearer token (default $JAXCLEAR_TOKEN)")
    se = _parser(sub, "sensitivity", "derivatives of peak contact force and amplification factors w.r.t. spec keys")
    se.add_argument("spec", help="TOML spec, e.g. sweeps/sensitivity_slider_crank.toml")
    se.add_argument(
        "--wrt",
        action="append",
        required=True,
        metavar="KEY[,KEY...]",
        help="dotted spec keys (as --set takes), e.g. joint.clearance_m,laws.restitution; "
        "profile.points for the points of a measured bushing",
    )
    se.add_argument("--out", help="output directory (default: runs/<sweep.name>)")
    se.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value")
    se.add_argument(
        "--mode",
        choices=("auto", "forward", "reverse"),
        default="auto",
        help="forward (jvp) or reverse (vjp with checkpointing) mode; auto: forward when keys <= metrics",
    )
    se.add_argument("--quiet", action="store_true", help="no progress messages")
    _cpu_option(se)
    se.set_defaults(func=cmd_sensitivity)
    idp = _parser(sub, "identify", "fit clearance / wear / law parameters to a measured or synthetic signal")
    idp.add_argument(
        "spec", help="TOML spec with [identify] and [measurement] or [truth], e.g. sweeps/identify_clearance.toml"
    )
    idp.add_argument("--out", help="output directory (default: runs/<sweep.name>)")
    idp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value")
    idp.add_argument("--iterations", type=int, help="override identify.iterations")
    idp.add_argument("--quiet", action="store_true", help="no progress messages")
    _cpu_option(idp)
    idp.set_defaults(func=cmd_identify)
    we = _parser(sub, "wear", "evolve the bushing's Archard wear with the dynamics over cycles ([wear] table)")
    we.add_argument("spec", help="TOML spec with a [wear] table, e.g. sweeps/wear_evolution.toml")
    we.add_argument("--out", help="output directory (default: runs/<sweep.name>); rerun to resume")
    we.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value, e.g. wear.updates=4")
    we.add_argument(
        "--wrt",
        action="append",
        metavar="KEY[,KEY...]",
        help="also write the gradients of the smooth peak contact force after the last update "
        "(wear_sensitivity.csv), e.g. wear.coefficient_m2_per_N,joint.clearance_m",
    )
    we.add_argument("--force", action="store_true", help="delete another spec's evolution in DIR and start over")
    we.add_argument("--quiet", action="store_true", help="no progress messages")
    _cpu_option(we)
    we.set_defaults(func=cmd_wear)
    args = ap.parse_args(argv)
    if args.cmd in ("plan", "run", "sensitivity", "identify", "wear"):
        from . import parallel  # before JAX starts its backends

        try:
            parallel.set_cpu_devices(args.cpu_devices)
        except ValueError as e:
            print(f"jaxclear: error: --cpu-devices: {e}", file=sys.stderr)
            return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
