"""Cost of one gradient relative to one forward simulation, and reverse-mode memory vs steps.

    python benchmarks/bench_gradient.py [--steps 10000] [--memory-steps 1e4,1e5,1e6]

Benchmark slider-crank (circle, 0.25 mm, dt = 1 µs).  Times: forward simulation (metrics
only), forward mode (jacfwd, K keys) and reverse mode (jacrev, checkpointed), each the best of
3 runs after compiling, printed as ratios to the forward run of the same process.  Memory: the
temporaries XLA reserves for the compiled reverse-mode gradient (``memory_analysis()``), plain
and checkpointed (save blocks of √steps), for each step count (compile only, nothing runs).
"""

import argparse
import math
import time
from dataclasses import replace

import jax
import jax.numpy as jnp

from jaxclear import sensitivity as S
from jaxclear import spec as specmod
from jaxclear import sweep

KEYS = ["joint.clearance_m", "laws.restitution", "laws.friction_coefficient", "model.rod_mass_kg"]


def model(steps, save_every, checkpoint):
    spec = specmod.load("sweeps/sensitivity_slider_crank.toml", ["profile.kind='circle'"])
    pl = sweep.plan(spec)
    cfg = replace(pl.cfg, n_saves=steps // save_every, save_every=save_every, outputs=(), checkpoint=checkpoint)
    f = S.metric_function(spec, pl, KEYS, cfg=cfg)
    x0 = jnp.asarray([sweep.flat_values(spec)[k] for k in KEYS])
    return (lambda th: f(th, {}, None)), x0


def best(fn, x, n=3):
    jax.block_until_ready(fn(x))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(x))
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--memory-steps", default="1e4,1e5,1e6")
    a = ap.parse_args()
    se = int(math.sqrt(a.steps))
    f, x0 = model(a.steps, se, True)
    t_fwd = best(jax.jit(f), x0)
    t_jf = best(jax.jit(jax.jacfwd(f)), x0)
    t_jr = best(jax.jit(jax.jacrev(f)), x0)
    print(f"{a.steps} steps, {len(KEYS)} keys, 8 metrics: forward {t_fwd:.3g} s")
    print(f"  jacfwd / forward = {t_jf / t_fwd:.2f}   jacrev (checkpointed) / forward = {t_jr / t_fwd:.2f}")
    print("reverse-mode temporaries (XLA memory_analysis):")
    for n in (int(float(s)) for s in a.memory_steps.split(",")):
        se = int(round(math.sqrt(n)))
        row = []
        for ck in (False, True):
            f, x0 = model(se * se, se, ck)
            m = jax.jit(jax.jacrev(f)).lower(x0).compile().memory_analysis()
            row.append(getattr(m, "temp_size_in_bytes", float("nan")) if m is not None else float("nan"))
        print(
            f"  {se * se:>8d} steps: plain {row[0] / 2**20:9.2f} MiB   checkpointed (blocks of {se}) "
            f"{row[1] / 2**20:7.2f} MiB   ratio {row[0] / row[1]:.1f}"
        )


if __name__ == "__main__":
    main()
