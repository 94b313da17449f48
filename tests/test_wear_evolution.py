"""Wear that evolves with the dynamics as a sweep (jaxclear.wear_evolution, `jaxclear wear`):
the run equals the engine's loop, zero wear changes nothing, a killed run resumes to the same
results, the gradients through the loop match central differences, bad input is refused."""

import json
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from killing import kill_after_first_chunk

from jaxclear import cli, sweep, wear
from jaxclear import spec as specmod
from jaxclear import wear_evolution as W

# The benchmark slider-crank at 5000 rpm, c = 0.1 mm, a 36-point bushing; runs of 3 ms (a quarter
# of a crank cycle after the start at speed), the last 0.1 cycle the wear window.
RAW = {
    "sweep": {"name": "tiny_wear"},
    "model": {"clearance_joint": "rod_slider", "crank_speed_rpm": 5000.0},
    "joint": {"clearance_m": 1e-4},
    "profile": {"method": "points", "n_points": 36},
    "integrator": {"dt_s": 2e-6, "t_end_s": 0.003, "steady_revolutions": 0.1, "chunk_size": 2},
    "outputs": {"histories": [], "plots": False},
    "wear": {"coefficient_m2_per_N": 1e-13, "updates": 3, "cycles_per_update": 3000.0},
}


def _spec(**over):
    raw = {k: dict(v) for k, v in RAW.items()}
    for k, v in over.items():
        raw[k] = {**raw.get(k, {}), **v}
    return specmod.load(raw)


def test_the_run_equals_the_engine_loop_and_zero_wear_changes_nothing(tmp_path):
    # Axis over k_w with 0 in it: the worn variant's depths equal wear.evolve's with the same
    # window (the sweep's store, padding and chunking add nothing); the unworn one keeps the new
    # bushing bit for bit and gives the same dynamics at every update.
    spec = _spec(axes={"wear.coefficient_m2_per_N": {"values": [0.0, 1e-13, 3e-13]}})
    table, summary = W.run(spec, tmp_path / "ev", log=lambda m: None)
    ev = W.read(tmp_path / "ev")
    assert summary["complete"] and ev["done"].all() and ev["depth_m"].shape == (4, 3, 1, 36)
    U = spec["wear"]["updates"]
    upd = np.asarray(table["update"])
    peak = np.asarray(table["peak_contact_force_N"])
    v0 = np.asarray(table["variant"]) == 0
    assert not np.any(ev["depth_m"][:, 0]) and len(set(peak[v0].tolist())) == 1
    assert np.all(np.isnan(np.asarray(table["max_wear_depth_angle_deg"])[v0]))

    pl = sweep.plan(spec)
    cfg = pl.cfg
    mech = pl.mech
    p = sweep.batch_params(spec, pl, np.array([1]))
    p = jax.tree_util.tree_map(lambda x: x[0], p)
    pts0 = W.initial_points(mech, cfg, p)

    jp = mech.joint_tree(p)

    @jax.jit
    def window(points):
        r = mech.simulate(cfg, mech.with_joint_tree(p, jp._replace(points=points.reshape(jp.points.shape))))
        return r.wear, {}

    depths, _ = wear.evolve(window, pts0, U, 3000.0, 0.1)
    np.testing.assert_allclose(ev["depth_m"][1:, 1], np.asarray(depths), rtol=1e-10, atol=1e-18)
    # the wear grows the clearance and the worn volume update by update; k_w ×3 wears more
    for col in ("max_radial_clearance_m", "worn_volume_m3", "max_wear_depth_m"):
        x = np.asarray(table[col]).reshape(3, U + 1)
        assert np.all(np.diff(x[1]) > 0) and np.all(x[2, 1:] > x[1, 1:]), col
    assert upd.tolist() == list(range(U + 1)) * 3
    assert np.asarray(table["crank_cycles"]).tolist()[: U + 1] == [0.0, 3000.0, 6000.0, 9000.0]
    assert (tmp_path / "ev" / "wear_metrics.csv").exists() and (tmp_path / "ev" / "wear_summary.json").exists()


@pytest.mark.slow  # ~40-75 s on 2 cores
def test_a_killed_evolution_resumes_to_the_uninterrupted_results(tmp_path):
    # SIGKILL once the first (update, chunk) row is stored; the rerun on the same DIR computes only
    # the rows not flagged, and every file equals an uninterrupted run's.
    spec_file = tmp_path / "wear.toml"
    spec_file.write_text("""
[sweep]
name = "tiny_wear"
[model]
clearance_joint = "rod_slider"
[joint]
clearance_m = 1e-4
[profile]
method = "points"
n_points = 36
[integrator]
dt_s = 2e-6
t_end_s = 0.003
steady_revolutions = 0.1
chunk_size = 1
[outputs]
histories = []
plots = false
[wear]
coefficient_m2_per_N = 1e-13
updates = 4
cycles_per_update = 3000.0
[axes]
"joint.clearance_m" = { values = [1e-4, 2e-4] }
""")
    out = tmp_path / "killed"
    args = lambda d: ["wear", str(spec_file), "--out", str(d), "--quiet", "--cpu-devices", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxclear.cli", *args(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    kill_after_first_chunk(proc, out)
    assert proc.returncode == -signal.SIGKILL
    ev = W.read(out)
    assert 1 <= ev["done"].sum() < ev["done"].size and not (out / "wear_metrics.csv").exists()
    # the resumed and the reference runs in this process, one CPU device as the killed one had
    # (the same device count for every row); the second reuses the first's compiled windows
    jax.devices()  # backends up first: the in-process CLI must not re-split this session's CPU
    assert jax.local_device_count() == 1
    for d in (out, tmp_path / "uninterrupted"):
        assert cli.main(args(d)) == 0
    s_res, s_ref = (json.loads((d / "wear_summary.json").read_text()) for d in (out, tmp_path / "uninterrupted"))
    assert s_res["windows_computed"] == ev["done"].size - ev["done"].sum()
    assert s_ref["windows_computed"] == ev["done"].size
    assert (out / "wear_metrics.csv").read_text() == (tmp_path / "uninterrupted" / "wear_metrics.csv").read_text()
    np.testing.assert_array_equal(W.read(out)["depth_m"], W.read(tmp_path / "uninterrupted")["depth_m"])


@pytest.mark.slow
def test_gradients_through_the_evolution_match_central_differences():
    # d(smooth peak after 2 updates)/d(k_w) and /d(c) by reverse mode through both updates, against
    # central differences with small steps: the laws with an impact-velocity memory are piecewise
    # C¹ (a parameter that moves a contact onset by one step jumps the captured δ̇⁻), so the steps
    # stay below that (measured: 1e-5 relative at h = 1e-6·k_w and 1e-7·c; noise from 1e-2·k_w).
    spec = _spec(
        joint={"clearance_m": 2.5e-4},
        profile={"n_points": 32},
        integrator={"dt_s": 1e-6, "t_end_s": 0.0015},
        wear={"updates": 2, "cycles_per_update": 2000.0},
    )
    keys = ("wear.coefficient_m2_per_N", "joint.clearance_m")
    rows = W.sensitivity(spec, keys)
    g = [rows[f"d({W.PEAK})/d({k})"][0] for k in keys]
    f = jax.jit(W.peak_after_updates(spec, sweep.plan(spec), keys))
    x0 = np.array([1e-13, 2.5e-4])
    assert float(f(jnp.asarray(x0), {})) == pytest.approx(rows[W.PEAK][0], rel=1e-8)  # another program
    for j, h in enumerate((1e-19, 2.5e-11)):
        e = np.zeros(2)
        e[j] = h
        fd = float(f(jnp.asarray(x0 + e), {}) - f(jnp.asarray(x0 - e), {})) / (2 * h)
        assert g[j] != 0 and abs(fd - g[j]) < 1e-4 * abs(g[j]), (keys[j], fd, g[j])


def test_bad_input_is_refused_with_the_field_named(tmp_path, capsys):
    with pytest.raises(specmod.SpecError, match="wear.coefficient_m2_per_N = 0.0"):
        W.load_spec(_spec(wear={"coefficient_m2_per_N": 0.0}))
    with pytest.raises(specmod.SpecError, match="wear.updates"):
        _spec(wear={"updates": 0})
    with pytest.raises(specmod.SpecError, match="wear.smoothing"):
        _spec(wear={"smoothing": 1.5})
    osc = specmod.load({"model": {"mechanism": "impact_oscillator"}})
    with pytest.raises(specmod.SpecError, match="impact_oscillator"):
        W.load_spec(osc)
    rc = cli.main(["wear", "sweeps/wear_evolution.toml", "--out", str(tmp_path), "--wrt", "wear.cycles_per_updat"])
    assert rc == 2 and "wear.cycles_per_updat" in capsys.readouterr().err
    # another spec's evolution in the same DIR is refused, not overwritten (the axis of the test
    # above: the same chunk shapes, so its compiled window serves here too)
    axes = {"wear.coefficient_m2_per_N": {"values": [0.0, 1e-13, 3e-13]}}
    W.run(_spec(wear={"updates": 1}, axes=axes), tmp_path / "ev", log=lambda m: None)
    with pytest.raises(specmod.SpecError, match="another spec"):
        W.run(_spec(wear={"updates": 2}, axes=axes), tmp_path / "ev", log=lambda m: None)
