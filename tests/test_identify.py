"""Identification: recovery of a synthetic truth from ±30 % starts (Adam and L-BFGS, [truth]
and CSV measurement), bounds, Gauss–Newton uncertainty, bad input, the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import cli
from jaxclear import identify as I
from jaxclear import spec as specmod

TRUE_C = 0.25e-3


def _spec(**identify):
    """Benchmark slider-crank, circle bushing, 1 ms from top dead centre (the first impacts)."""
    d = {
        "sweep": {"name": "id_test"},
        "joint": {"clearance_m": 0.2e-3},
        "integrator": {"dt_s": 1e-6, "t_end_s": 0.001, "save_every": 10},
        "outputs": {"histories": ["slider_acceleration_m_per_s2"]},
        "identify": {
            "signal": "slider_acceleration_m_per_s2",
            "loss": "integral",
            "smooth_window": 1,
            "iterations": 40,
            "learning_rate": 0.2,
            "starts": 1,
            "parameters": {"joint.clearance_m": {"bounds": [0.05e-3, 0.6e-3]}},
        },
        "truth": {"joint.clearance_m": TRUE_C, "noise_relative": 0.05, "noise_seed": 3},
    }
    d["identify"].update(identify)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("start,optimizer", [(0.7 * TRUE_C, "adam"), (1.3 * TRUE_C, "lbfgs")])
def test_recovers_clearance_from_30_percent_off(start, optimizer):
    d = _spec(optimizer=optimizer, iterations=80 if optimizer == "adam" else 10)
    d["identify"]["parameters"]["joint.clearance_m"]["initial"] = start
    res = I.fit(specmod.load(d))
    p = res["parameters"]["joint.clearance_m"]
    assert p["initial"] == pytest.approx(start)
    assert abs(p["value"] - TRUE_C) < 0.02 * TRUE_C, p
    assert 0 < p["std"] < 0.02 * TRUE_C and abs(p["value"] - TRUE_C) < 4 * p["std"] + 1e-7, p
    assert res["loss"] < 0.5 * res["_history"][0].min()


@pytest.mark.slow
def test_csv_measurement_and_two_parameters(tmp_path):
    """A measured CSV (time_s, signal) on its own time grid; clearance and restitution fitted
    together by multi-start Adam (two starts under vmap)."""
    d = _spec(starts=2, iterations=50)
    truth = d.pop("truth")
    prob = I.Problem(
        specmod.load({**d, "truth": truth}), ["joint.clearance_m", "laws.restitution"], "slider_acceleration_m_per_s2"
    )
    # jitted: the same program as the fit's own jit(signal_of) (a cache hit there), not an eager
    # scan plus ~100 small eager ops
    y = np.asarray(jax.jit(prob.signal_of)(jnp.asarray([TRUE_C, 0.8])))
    y = y + np.random.default_rng(0).normal(size=y.shape) * 0.03 * np.sqrt(np.mean(y * y))
    t_meas = np.linspace(0.0, 0.0011, 400)
    y_meas = np.interp(t_meas, prob.t, y)  # a different, finer grid than the model's
    (tmp_path / "m.csv").write_text(
        "time_s,slider_acceleration_m_per_s2\n"
        + "".join(f"{a!r},{b!r}\n" for a, b in zip(t_meas.tolist(), y_meas.tolist()))
    )
    d["measurement"] = {"path": str(tmp_path / "m.csv")}
    d["identify"]["parameters"] = {
        "joint.clearance_m": {"initial": [0.18e-3, 0.32e-3], "bounds": [0.05e-3, 0.6e-3]},
        "laws.restitution": {"initial": [0.6, 0.95], "bounds": [0.3, 0.99]},
    }
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


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"identify": {"parameters": {"joint.clearnce_m": {"bounds": [1e-5, 1e-3]}}}}, "joint.clearance_m"),
        (
            {"identify": {"parameters": {"joint.clearance_m": {"bounds": [1e-5, 1e-3], "initial": 2e-3}}}},
            "strictly inside",
        ),
        ({"identify": {"optimizer": "sgd"}}, "adam, lbfgs, lm"),
        ({"identify": {"smooth_window": 0}}, "identify.smooth_window"),
        ({"truth": {"joint.clearance_m": "big"}}, "truth.joint.clearance_m"),
    ],
)
def test_bad_identify_input_names_the_key(change, needle):
    d = _spec()
    for sec, tab in change.items():
        if sec == "identify" and "parameters" in tab:
            d["identify"]["parameters"] = tab["parameters"]
        else:
            d[sec].update(tab)
    with pytest.raises(specmod.SpecError, match=needle.replace(".", r"\.")):
        I.fit(specmod.load(d))


def _png_size(path):
    """(width, height) [px] of a PNG from its signature and IHDR chunk (ValueError otherwise)."""
    b = path.read_bytes()
    if b[:8] != b"\x89PNG\r\n\x1a\n" or b[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(b[16:20], "big"), int.from_bytes(b[20:24], "big")


@pytest.mark.slow
def test_cli_identify_writes_json_history_plot(tmp_path):
    """`jaxclear identify` end to end: Levenberg–Marquardt on the integral loss from two starts
    (−20 %, +20 %) recovers the synthetic truth 0.25 mm within 2 % (and within 4 Gauss–Newton
    standard deviations); LM only takes steps that lower the loss, so the best loss of the
    history never increases; the JSON carries the fit, its source and the signal (SI units)."""
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
loss = "integral"
optimizer = "lm"
iterations = 5
starts = 2
[identify.parameters]
"joint.clearance_m" = { initial = [0.2e-3, 0.3e-3], bounds = [0.05e-3, 0.6e-3] }
[truth]
"joint.clearance_m" = 0.25e-3
noise_relative = 0.05
""")
    out = tmp_path / "o"
    assert cli.main(["identify", str(spec), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "identified.json").read_text())
    assert {
        "parameters",
        "loss",
        "loss_kind",
        "optimizer",
        "iterations",
        "starts",
        "best_start",
        "covariance",
        "signal",
        "source",
        "wall_s",
    } <= set(doc)
    assert (doc["signal"], doc["loss_kind"], doc["optimizer"], doc["iterations"]) == (
        "slider_acceleration_m_per_s2",
        "integral",
        "lm",
        5,
    )
    assert doc["source"]["truth"] == {"joint.clearance_m": TRUE_C}  # metres, as written
    assert doc["source"]["noise_std"] > 0  # 5 % of the signal RMS, in m/s²
    p = doc["parameters"]["joint.clearance_m"]
    assert set(p) == {"value", "std", "initial"}
    assert abs(p["value"] - TRUE_C) < 0.02 * TRUE_C, p  # metres, not mm or µm
    assert 0 < p["std"] < 0.02 * TRUE_C and abs(p["value"] - TRUE_C) < 4 * p["std"] + 1e-7, p
    assert p["std"] == pytest.approx(np.sqrt(doc["covariance"][0][0]), rel=1e-12)
    assert len(doc["starts"]) == 2
    assert all(0.2e-3 <= s["initial"]["joint.clearance_m"] <= 0.3e-3 for s in doc["starts"])
    assert doc["loss"] == min(s["loss"] for s in doc["starts"]) == doc["starts"][doc["best_start"]]["loss"]

    rows = (out / "loss_history.csv").read_text().splitlines()
    assert rows[0] == "iteration,loss_start0,loss_start1,best_loss" and len(rows) == 1 + 5 + 1
    h = np.array([[float(x) for x in r.split(",")] for r in rows[1:]])
    np.testing.assert_array_equal(h[:, 0], np.arange(6))
    np.testing.assert_array_equal(h[:, 3], h[:, 1:3].min(axis=1))
    assert np.all(np.diff(h[:, 3]) <= 0), h[:, 3]  # LM never accepts a step that raises the loss
    assert h[-1, 3] == pytest.approx(doc["loss"], rel=1e-12)
    # both starts reach the truth's basin: each ends within 2 %, the worse start's loss falls
    # more than 10× (measured: −15 % start, 1.3e-2 -> 1.9e-4, the noise floor)
    assert all(abs(s["value"]["joint.clearance_m"] - TRUE_C) < 0.02 * TRUE_C for s in doc["starts"]), doc["starts"]
    far = 1 + int(np.argmax(h[0, 1:3]))
    assert h[-1, far] < 0.1 * h[0, far], h

    png = out / "fit.png"
    assert _png_size(png) == (880, 715)  # figsize 8 × 6.5 in at 110 dpi
    assert png.stat().st_size > 20_000  # two panels of curves, not a blank canvas


@pytest.mark.slow
def test_screening_then_levenberg_marquardt_from_a_wide_box():
    """The forward-only screening stage finds the basin in a box far wider than ±30 %
    (−60 % … +100 % of the clearance); Levenberg–Marquardt (forward-mode J) then converges in a
    few steps, and no start ends worse than where screening put it."""
    d = _spec(optimizer="lm", iterations=6, starts=2, screen=48)
    d["identify"]["parameters"]["joint.clearance_m"] = {"initial": [0.1e-3, 0.5e-3], "bounds": [0.05e-3, 0.6e-3]}
    # the noise draw of the CLI test (seed 0): the same measurement, so the same residual program,
    # and its compiled LM step and loss serve both tests (they bake y_meas in as a constant)
    d["truth"]["noise_seed"] = 0
    res = I.fit(specmod.load(d))
    p = res["parameters"]["joint.clearance_m"]
    assert res["screen"]["candidates"] == 48 and len(res["screen"]["kept_losses"]) == 2
    assert abs(p["value"] - TRUE_C) < 0.02 * TRUE_C, p
    assert res["loss"] <= res["screen"]["kept_losses"][0] * (1 + 1e-12)
    # the screened starts are the best of the candidates, so the kept losses are sorted
    assert res["screen"]["kept_losses"] == sorted(res["screen"]["kept_losses"])
    assert res["screen"]["kept_losses"][0] <= res["screen"]["median_loss"]


def test_levenberg_marquardt_step_solves_a_linear_least_squares_problem():
    """On r(u) = A u − b one undamped LM step is the Gauss–Newton step: the exact solution."""
    A = jnp.asarray([[2.0, 0.5], [0.3, 1.5], [1.0, -1.0]])
    b = jnp.asarray([1.0, -2.0, 0.5])
    u, lam, val = I._lm_step(lambda u: A @ u - b, jnp.zeros(2), jnp.asarray(1e-14))
    np.testing.assert_allclose(u, np.linalg.lstsq(np.asarray(A), np.asarray(b), rcond=None)[0], rtol=1e-10)
    assert float(val) == pytest.approx(float(b @ b)) and float(lam) < 1e-14
    # a step that would raise the loss is refused and the damping grows
    u2, lam2, _ = I._lm_step(lambda u: A @ u - b, u, jnp.asarray(1e-14))
    np.testing.assert_allclose(u2, u)
    assert float(lam2) == pytest.approx(4e-14)


@pytest.mark.slow
def test_recovers_clearance_and_two_wear_coefficients():
    """The 3-parameter problem of sweeps/identify_clearance.toml (clearance + wear Fourier
    coefficients a2, b2 from 2 ms of 5 %-noisy slider acceleration), with starts anywhere in
    ±30 % of the truth: screening + Levenberg–Marquardt recovers all three (c within 2 %,
    a2 and b2 within 5 % of their size)."""
    truth = {"joint.clearance_m": 0.25e-3, "profile.fourier_a2_m": 30e-6, "profile.fourier_b2_m": -20e-6}
    spec = specmod.load(
        "sweeps/identify_clearance.toml", ["identify.screen=256", "identify.starts=2", "identify.iterations=8"]
    )
    for k, v in truth.items():
        lo, hi = sorted((0.7 * v, 1.3 * v))
        spec["identify"]["parameters"][k]["initial"] = [lo, hi]
    res = I.fit(spec)
    assert res["source"]["truth"] == pytest.approx(truth)
    got = {k: v["value"] for k, v in res["parameters"].items()}
    assert abs(got["joint.clearance_m"] - 0.25e-3) < 0.02 * 0.25e-3, got
    assert abs(got["profile.fourier_a2_m"] - 30e-6) < 0.05 * 30e-6, got
    assert abs(got["profile.fourier_b2_m"] + 20e-6) < 0.05 * 20e-6, got
