"""The mechanism registry: ``model.mechanism`` dispatch, and the protocol of
``jaxclear.mechanisms`` exercised by a model that is not a multibody one (this module itself
is a 1-DOF oscillator registered as ``toy_oscillator``): spec tables, axes, the store, resume."""

import json
import math
import sys
from dataclasses import dataclass
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import integrate, mechanisms, store, sweep
from jaxclear import spec as specmod
from jaxclear.schema import POSITIVE, Param, Table

# ---------------------------------------------------------------- a 1-DOF oscillator, protocol-complete

OUTPUT_CHANNELS = {"position_m": "x", "velocity_m_per_s": "ẋ"}
TABLES = [
    Table(
        "model",
        (
            Param("mechanism", "toy_oscillator"),
            Param("mass_kg", 1.0, range=POSITIVE, field="m"),
            Param("stiffness_N_per_m", 100.0, range=POSITIVE, field="k"),
            Param("initial_position_m", 0.01, range=(-1.0, 1.0, True), field="x0"),
        ),
    ),
    specmod.integrator_table(integrate.SCHEMES, "leapfrog", dt_s=1e-3, t_end_s=1.0, save_every=10),
    specmod.outputs_table(OUTPUT_CHANNELS, ["position_m"], plot_variants=0, plots=False),
]


@dataclass(frozen=True)
class Config:
    dt: float
    save_every: int
    n_saves: int
    scheme: str
    outputs: tuple

    @property
    def n_steps(self):
        return self.n_saves * self.save_every


Params = mechanisms.params_type("Params", TABLES[0])


class Result(NamedTuple):
    peak: jnp.ndarray
    energy: jnp.ndarray
    history: dict


def t_end(spec, cols):
    return spec["integrator"]["t_end_s"]


def make_config(spec, t_end):
    it = spec["integrator"]
    n = max(1, math.ceil(t_end / it["dt_s"] - 1e-9))
    return Config(
        it["dt_s"],
        it["save_every"],
        max(1, math.ceil(n / it["save_every"])),
        it["scheme"],
        tuple(spec["outputs"]["histories"]),
    )


def params(spec, cfg, flat, dtype, t_end):
    return Params(**mechanisms.declared(TABLES[0], flat, dtype))


def check_params(spec, cfg, p, name):
    bound = np.asarray(integrate.stability_bound(cfg.scheme, p.k, p.m))
    if np.any(cfg.dt > bound):
        i = int(np.argmin(bound))
        raise specmod.SpecError(
            f"integrator.dt_s = {cfg.dt:g} exceeds the stability bound {bound[i]:.3g} s ({name(i)})"
        )


def simulate(cfg, p):
    """m ẍ = −k x from rest at x0: peak |x| and the final energy ½mẋ² + ½kx² [J]."""

    def accel(pp, q, v, aux, t):
        a = -pp.k * q / pp.m
        return a, aux, (q, v)

    step = integrate.make_step(cfg.scheme, accel, lambda q, v, h: q + h * v, cfg.dt)
    q0 = jnp.stack([p.x0])
    s0 = integrate.State(q0, jnp.zeros_like(q0), -p.k * q0 / p.m, jnp.zeros(()))
    reduce = lambda acc, out, i: jnp.maximum(acc, jnp.abs(out[0][0]))
    save = lambda out: {"position_m": out[0][0], "velocity_m_per_s": out[1][0]}
    s, peak, hist = integrate.simulate(step, p, s0, jnp.abs(p.x0), reduce, cfg.n_saves, cfg.save_every, save=save)
    energy = 0.5 * p.m * s.v[0] ** 2 + 0.5 * p.k * s.q[0] ** 2
    return Result(peak, energy, {k: hist[k] for k in cfg.outputs})


def chunk_metrics(spec, cfg, p, res, n_real, t_end):
    e0 = 0.5 * np.asarray(p.k) * np.asarray(p.x0) ** 2
    energy = np.asarray(res.energy)
    return {
        "peak_position_m": np.asarray(res.peak)[:n_real],
        "energy_error": ((energy - e0) / e0)[:n_real],
        "finite": np.isfinite(energy)[:n_real],
    }


def joint_names(cfg):
    return ()


# ---------------------------------------------------------------- tests


@pytest.fixture(autouse=True, scope="module")
def toy():
    mechanisms.register("toy_oscillator", sys.modules[__name__])
    yield
    mechanisms.REGISTRY.pop("toy_oscillator")
    specmod.schema.cache_clear()


def toy_spec(**axes):
    return {
        "model": {"mechanism": "toy_oscillator"},
        "sweep": {"name": "toy"},
        "integrator": {"chunk_size": 2},
        "axes": axes,
    }


def test_unknown_mechanism_names_the_registered_ones():
    with pytest.raises(specmod.SpecError) as ei:
        specmod.load({"model": {"mechanism": "slider_cranck"}})
    msg = str(ei.value)
    assert "model.mechanism = 'slider_cranck'" in msg and "did you mean 'slider_crank'" in msg
    assert "slider_crank" in msg.split("allowed:")[1]


def test_tables_come_from_the_mechanism():
    sp = specmod.load(toy_spec())
    assert set(sp) - {"_base_dir"} == {"sweep", "model", "integrator", "outputs", "sampling", "axes"}
    assert sp["integrator"]["dt_s"] == 1e-3  # the toy's own integrator defaults
    with pytest.raises(specmod.SpecError, match=r"unknown table \[joint\]"):
        specmod.load({**toy_spec(), "joint": {"clearance_m": 1e-4}})
    with pytest.raises(specmod.SpecError, match="model.crank_length_m"):
        specmod.load({"model": {"mechanism": "toy_oscillator", "crank_length_m": 0.05}})
    with pytest.raises(specmod.SpecError, match=r"model.mass_kg = -1.0 is outside the allowed range"):
        specmod.load(toy_spec(mass_kg={"values": [1.0, -1.0]}))
    with pytest.raises(specmod.SpecError, match="outputs.histories entry 'contact_force_N'"):
        specmod.load({**toy_spec(), "outputs": {"histories": ["contact_force_N"]}})
    with pytest.raises(specmod.SpecError, match=r"stability bound .*variant 1 \(model.stiffness_N_per_m = 1e\+07\)"):
        sweep.plan(specmod.load(toy_spec(stiffness_N_per_m={"values": [100.0, 1e7]})))


def test_toy_sweep_runs_stores_and_resumes(tmp_path):
    sp = toy_spec(stiffness_N_per_m={"values": [100.0, 400.0, 900.0]})
    out = tmp_path / "toy"
    table, summary, hists = sweep.run(sp, out=out, log=None, compile_cache=False)
    assert summary["mechanism"] == "toy_oscillator" and summary["variants"] == 3 and summary["chunks"] == 2
    assert list(table) == ["stiffness_N_per_m", "peak_position_m", "energy_error", "finite"]
    # leapfrog conserves a shadow energy: |ΔE/E| = O((ω dt)²), ω = √(k/m) = 10, 20, 30 rad/s
    w_dt = np.sqrt(table["stiffness_N_per_m"]) * 1e-3
    assert np.all(np.abs(table["energy_error"]) < w_dt**2) and np.all(table["finite"])
    np.testing.assert_allclose(table["peak_position_m"], 0.01, rtol=1e-12)
    assert hists["position_m"].shape == (3, 100)
    x = hists["position_m"][0]
    t = (np.arange(100) + 1) * 10e-3
    np.testing.assert_allclose(x, 0.01 * np.cos(10.0 * t), atol=2e-6)  # the analytic response
    g = store.open(out, mode="r")
    assert list(g.attrs["joints"]) == [] and g.attrs["spec_hash"] == summary["spec_hash"]
    again, s2, _ = sweep.run(sp, out=out, log=None, compile_cache=False)
    assert s2["rerun"]["chunks_reused"] == 2 and s2["rerun"]["chunks_computed"] == 0
    for k in table:
        np.testing.assert_array_equal(again[k], table[k])
    res = sweep.load(out)
    assert res.complete and res.histories["position_m"].shape == (3, 100)


def test_estimate_without_probe(tmp_path, capsys):
    """`jaxclear plan --json --no-probe` on the toy: every figure follows from the spec (3
    variants in chunks of 2, 1 s at 1 ms, a save every 10 steps of one float64 channel)."""
    path = tmp_path / "toy.toml"
    path.write_text(
        '[sweep]\nname = "toy"\n[model]\nmechanism = "toy_oscillator"\n'
        "[integrator]\nchunk_size = 2\n"
        '[axes]\n"model.stiffness_N_per_m" = { values = [100.0, 400.0, 900.0] }\n'
    )
    from jaxclear import cli

    assert cli.main(["plan", str(path), "--json", "--no-probe"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e == sweep.estimate(specmod.load(path), probe_steps=0)  # the printed JSON is the estimate
    assert (e["name"], e["mechanism"], e["precision"], e["scheme"]) == ("toy", "toy_oscillator", "float64", "leapfrog")
    assert e["axes"] == [
        {"name": "model.stiffness_N_per_m", "kind": "values", "count": 3, "zip": None, "min": 100.0, "max": 900.0}
    ]
    assert (e["n_variants"], e["chunk_size"], e["n_chunks"], e["padding"]) == (3, 2, 2, 1)
    assert (e["steps_per_variant"], e["dt_s"], e["t_end_s"]) == (1000, 1e-3, pytest.approx(1.0, rel=1e-12))
    assert (e["save_every"], e["n_saves"], e["channels"]) == (10, 100, ["position_m"])
    ex = sweep.exec_size(2)  # the executed chunk (padded to the device count)
    assert e["params_bytes_per_chunk"] == ex * 3 * 8  # m, k, x0 in float64
    assert e["history_bytes_per_chunk"] == ex * 100 * 8
    assert e["output_bytes_per_chunk"] == ex * (1 + 1 + 100) * 8  # peak, energy, history
    assert e["memory_bytes_per_chunk"] == e["params_bytes_per_chunk"] + e["output_bytes_per_chunk"]
    assert e["history_bytes"] == 3 * 100 * 8 and e["store_bytes"] == e["history_bytes"] + e["metrics_bytes"]
    # nothing probed: no compile, no time, no temporaries
    assert e["probe_steps"] == 0 and all(
        e[k] is None
        for k in (
            "compile_s",
            "probe_run_s",
            "variant_steps_per_s",
            "run_s_per_chunk",
            "run_s",
            "total_s",
            "temp_bytes_per_chunk",
        )
    )
    assert e["device_count"] >= 1 and isinstance(e["device_kind"], str)
