"""Command line: ``jaxclear run [SPEC] [--out DIR] [--set key=value ...]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

DEFAULT_SPEC = Path("sweeps") / "default.toml"


class _Bar:
    """A plain progress bar on stderr: variants done, variant-steps/s, ETA."""

    def __init__(self, total, steps_per_variant, quiet=False):
        self.total, self.done, self.spv, self.quiet = total, 0, steps_per_variant, quiet
        self.t0 = time.perf_counter()

    def __call__(self, n):
        self.done += n
        if self.quiet:
            return
        el = time.perf_counter() - self.t0
        rate = self.done * self.spv / el if el > 0 else 0.0
        eta = (self.total - self.done) * el / self.done if self.done else 0.0
        w = 30
        fill = int(w * self.done / self.total)
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (w - fill)}] {self.done}/{self.total} variants "
                         f"{rate:.3g} variant-steps/s (incl. compile) ETA {eta:.0f}s ")
        sys.stderr.flush()
        if self.done >= self.total:
            sys.stderr.write("\n")


def _summary_table(table, summary):
    lines = [f"{summary['name']}: {summary['variants']} variants × {summary['steps_per_variant']} steps "
             f"(dt = {summary['dt_s']:g} s, {summary['precision']}, {summary['device_count']}× {summary['device_kind']})",
             f"wall {summary['wall_s']:.2f} s, compile {summary['compile_s']:.2f} s, "
             f"{(summary['variant_steps_per_s'] or 0):.4g} variant-steps/s (without compile); "
             f"failed variants: {len(summary['failed_variants'])}",
             f"{'metric':44s} {'min':>11s} {'median':>11s} {'max':>11s}"]
    import numpy as np
    for k in ("peak_contact_force_N", "peak_contact_force_steady_N", "daf_contact_force",
              "daf_contact_force_steady", "daf_slider_acceleration", "daf_slider_acceleration_steady",
              "impacts", "free_flight_fraction"):
        v = np.asarray(table[k], float)
        v = v[np.isfinite(v)]
        if v.size:
            lines.append(f"{k:44s} {v.min():11.4g} {np.median(v):11.4g} {v.max():11.4g}")
    return "\n".join(lines)


def cmd_run(args):
    from . import spec as specmod, sweep
    path = Path(args.spec) if args.spec else DEFAULT_SPEC
    try:
        spec = specmod.load(path, args.set or ())
        pl = sweep.plan(spec)
    except specmod.SpecError as e:
        print(f"jaxclear: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("runs") / spec["sweep"]["name"]
    bar = _Bar(pl.n_variants, pl.cfg.n_steps, quiet=args.quiet)
    if not args.quiet:
        print(f"running {path} -> {out}: {pl.n_variants} variants, {pl.cfg.n_steps} steps each, "
              f"chunk {pl.chunk_size}", file=sys.stderr)
    table, summary, _ = sweep.run(spec, out=out, progress=bar)
    print(_summary_table(table, summary))
    print(f"results in {out}/ (metrics.csv, summary.json, histories/, plots/)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="jaxclear", description="Dynamics of mechanisms with clearance joints.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a sweep spec (default: sweeps/default.toml)")
    r.add_argument("spec", nargs="?", help="TOML spec (default: sweeps/default.toml)")
    r.add_argument("--out", help="output directory (default: runs/<sweep.name>)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec value, e.g. joint.clearance_m=2.5e-4")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_run)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
