"""Identification: recovery of a synthetic truth from ±30 % starts (Adam and L-BFGS, [truth]
and CSV measurement), bounds, Gauss–Newton uncertainty, bad input, the CLI."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import cli, identify as I, spec as specmod

TRUE_C = 0.25e-3


def _spec(**identify):
    """Benchmark slider-crank, circle bushing, 1 ms from top dead centre (the first impacts)."""
    d = {
        "sweep": {"name": "id_test"},
        "joint": {"clearance_m": 0.2e-3},
        "integrator": {"dt_s": 1e-6, "t_end_s": 0.001, "save_every": 10},
        "outputs": {"histories": ["slider_acceleration_m_per_s2"]},
        "identify": {"signal": "slider_acceleration_m_per_s2", "loss": "integral", "smooth_window": 1, "iterations": 40,
                     "learning_rate": 0.2, "starts": 1,
                     "parameters": {"joint.clearance_m": {"bounds": [0.05e-3, 0.6e-3]}}},
        "truth": {"joint.clearance_m": TRUE_C, "noise_relative": 0.05, "noise_seed": 3},
    }
    d["identify"].update(identify)
    return d


@pytest.mark.parametrize("start,optimizer", [(0.7 * TRUE_C, "adam"), (1.3 * TRUE_C, "lbfgs")])
def test_recovers_clearance_from_30_percent_off(start, optimizer):
    d = _spec(optimizer=optimizer, iterations=80 if optimizer == "adam" else 15)
    d["identify"]["parameters"]["joint.clearance_m"]["initial"] = start
    res = I.fit(specmod.load(d))
    p = res["parameters"]["joint.clearance_m"]
    assert p["initial"] == pytest.approx(start)
    assert abs(p["value"] - TRUE_C) < 0.02 * TRUE_C, p
    assert 0 < p["std"] < 0.02 * TRUE_C and abs(p["value"] - TRUE_C) < 4 * p["std"] + 1e-7, p
    assert res["loss"] < 0.5 * res["_history"][0].min()


def test_csv_measurement_and_two_parameters(tmp_path):
    """A measured CSV (time_s, signal) on its own time grid; clearance and restitution fitted
    together by multi-start Adam (two starts under vmap)."""
    d = _spec(starts=2, iterations=50)
    truth = d.pop("truth")
    prob = I.Problem(specmod.load({**d, "truth": truth}), ["joint.clearance_m", "laws.restitution"],
                     "slider_acceleration_m_per_s2")
    y = np.asarray(prob.signal_of(jnp.asarray([TRUE_C, 0.8])))
    y = y + np.random.default_rng(0).normal(size=y.shape) * 0.03 * np.sqrt(np.mean(y * y))
    t_meas = np.linspace(0.0, 0.0011, 400)
    y_meas = np.interp(t_meas, prob.t, y)  # a different, finer grid than the model's
    (tmp_path / "m.csv").write_text("time_s,slider_acceleration_m_per_s2\n" +
                                    "".join(f"{a!r},{b!r}\n" for a, b in zip(t_meas.tolist(), y_meas.tolist())))
    d["measurement"] = {"path": str(tmp_path / "m.csv")}
    d["identify"]["parameters"] = {"joint.clearance_m": {"initial": [0.18e-3, 0.32e-3], "bounds": [0.05e-3, 0.6e-3]},
                                   "laws.restitution": {"initial": [0.6, 0.95], "bounds": [0.3, 0.99]}}
    res = I.fit(specmod.load(d))
    assert len(res["starts"]) == 2
    c = res["parameters"]["joint.clearance_m"]["value"]
    assert abs(c - TRUE_C) < 0.03 * TRUE_C, res["parameters"]
    assert all(np.isfinite(v["std"]) for v in res["parameters"].values())


def test_bounds_reparametrisation_roundtrip_and_limits():
    lo, hi = jnp.asarray(1e-5), jnp.asarray(1e-3)
    th = jnp.asarray([2e-5, 5e-4, 9.9e-4])
    np.testing.assert_allclose(I.to_bounded(I.to_unbounded(th, lo, hi), lo, hi), th, rtol=1e-12)
    assert float(I.to_bounded(jnp.asarray(-1e3), lo, hi)) >= 1e-5
    assert float(I.to_bounded(jnp.asarray(1e3), lo, hi)) <= 1e-3


@pytest.mark.parametrize("change,needle", [
    ({"identify": {"parameters": {"joint.clearnce_m": {"bounds": [1e-5, 1e-3]}}}}, "joint.clearance_m"),
    ({"identify": {"parameters": {"joint.clearance_m": {"bounds": [1e-5, 1e-3], "initial": 2e-3}}}}, "strictly inside"),
    ({"identify": {"optimizer": "sgd"}}, "adam, lbfgs"),
    ({"identify": {"smooth_window": 0}}, "identify.smooth_window"),
    ({"truth": {"joint.clearance_m": "big"}}, "truth.joint.clearance_m"),
])
def test_bad_identify_input_names_the_key(change, needle):
    d = _spec()
    for sec, tab in change.items():
        if sec == "identify" and "parameters" in tab:
            d["identify"]["parameters"] = tab["parameters"]
        else:
            d[sec].update(tab)
    with pytest.raises(specmod.SpecError, match=needle.replace(".", r"\.")):
        I.fit(specmod.load(d))


def test_cli_identify_writes_json_history_plot(tmp_path):
    import tomllib  # noqa: F401  (the spec is written as TOML below)
    spec = tmp_path / "id.toml"
    spec.write_text("""
[sweep]
name = "id_cli"
[integrator]
dt_s = 1e-6
t_end_s = 0.001
save_every = 10
[outputs]
histories = ["slider_acceleration_m_per_s2"]
[identify]
smooth_window = 30
iterations = 5
learning_rate = 0.2
starts = 2
[identify.parameters]
"joint.clearance_m" = { initial = [0.2e-3, 0.3e-3], bounds = [0.05e-3, 0.6e-3] }
[truth]
"joint.clearance_m" = 0.25e-3
noise_relative = 0.05
""")
    assert cli.main(["identify", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    doc = json.loads((tmp_path / "o" / "identified.json").read_text())
    p = doc["parameters"]["joint.clearance_m"]
    assert set(p) == {"value", "std", "initial"} and 0.05e-3 < p["value"] < 0.6e-3
    assert np.isfinite(doc["loss"])
    rows = (tmp_path / "o" / "loss_history.csv").read_text().splitlines()
    assert rows[0] == "iteration,loss_start0,loss_start1,best_loss" and len(rows) == 1 + 5 + 1
    assert (tmp_path / "o" / "fit.png").stat().st_size > 1000
