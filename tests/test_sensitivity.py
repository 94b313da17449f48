"""Design sensitivities: autodiff against central finite differences, forward == reverse
(checkpointed or not), smooth peaks, finite gradients at contact onset, the CLI."""

import csv
import json
import math
from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import cli, metrics, sweep
from jaxclear import sensitivity as S
from jaxclear import spec as specmod

SPEC = "sweeps/sensitivity_slider_crank.toml"
# Circle (analytic contact) and 2 ms: through the first impacts, cheap to compile.
CIRCLE = ["profile.kind='circle'", "integrator.t_end_s=0.002"]


def _fd4(fj, x0, j, h):
    """Fourth-order central difference of fj along coordinate j (truncation O(h⁴))."""
    e = jnp.zeros_like(x0).at[j].set(h)
    return (8 * (fj(x0 + e) - fj(x0 - e)) - (fj(x0 + 2 * e) - fj(x0 - 2 * e))) / (12 * h)


def test_smooth_peak_bounds_and_gradient():
    """max·N^(−1/p) ≤ M_p ≤ max, and d M_p / dF is finite with exact zeros in the series."""
    rng = np.random.default_rng(0)
    F = np.abs(rng.normal(size=500)) * 1e3
    F[:100] = 0.0

    def sp(F):
        lse = jax.scipy.special.logsumexp(metrics.SMOOTH_EXPONENT * metrics._safe_log(F))
        return metrics.smooth_peak(lse, F.shape[0])

    m = float(sp(jnp.asarray(F)))
    assert F.max() * len(F) ** (-1 / metrics.SMOOTH_EXPONENT) <= m <= F.max()
    g = jax.grad(sp)(jnp.asarray(F))
    assert np.isfinite(np.asarray(g)).all() and (np.asarray(g)[:100] == 0).all()
    # homogeneous of degree 1: Σ F_i ∂M/∂F_i = M (Euler) — the weights of a power mean
    assert float(jnp.dot(jnp.asarray(F), g)) == pytest.approx(m, rel=1e-10)


@pytest.fixture(scope="module")
def circle_model():
    spec = specmod.load(SPEC, CIRCLE)
    keys = [
        "joint.clearance_m",
        "laws.restitution",
        "laws.friction_coefficient",
        "model.crank_speed_rpm",
        "model.rod_mass_kg",
        "laws.youngs_modulus_Pa",
        "joint.journal_radius_m",
    ]
    pl = sweep.plan(spec)
    f = S.metric_function(spec, pl, keys)
    x0 = jnp.asarray([sweep.flat_values(spec)[k] for k in keys])
    fj = jax.jit(lambda th: f(th, {}, None))
    J = np.asarray(jax.jit(jax.jacfwd(lambda th: f(th, {}, None)))(x0))
    return spec, pl, keys, x0, fj, J


def test_gradients_match_finite_differences(circle_model):
    """Smooth metrics: forward-mode Jacobian vs 4th-order central FD, relative error < 1e-4 for
    clearance, journal radius, restitution, friction, crank speed, rod mass, Young's modulus.
    (Steps: 3e-4 of the value; 1e-3 for friction and mass, whose effect is small enough that
    the FD roundoff of the simulation dominates below that.)"""
    spec, pl, keys, x0, fj, J = circle_model
    smooth = [S.METRICS.index(m) for m in S.METRICS if m.startswith("smooth_")]
    assert np.isfinite(J).all()
    for j, k in enumerate(keys):
        rel = 1e-3 if k in ("laws.friction_coefficient", "model.rod_mass_kg") else 3e-4
        fd = np.asarray(_fd4(fj, x0, j, rel * abs(float(x0[j]))))
        err = np.abs(fd[smooth] - J[smooth, j]) / np.abs(J[smooth, j])
        assert err.max() < 1e-4, (k, err)
        assert abs(J[1, j]) > 0, k  # every key moves the smooth peak


@pytest.mark.slow
def test_forward_reverse_checkpointed_agree(circle_model):
    """jacrev with and without jax.checkpoint equals jacfwd (same model, 1e-9 relative)."""
    spec, pl, keys, x0, fj, Jf = circle_model
    cfg = replace(pl.cfg, n_saves=40, save_every=50, outputs=())
    for ck in (False, True):
        f = S.metric_function(spec, pl, keys, cfg=replace(cfg, checkpoint=ck))
        Jr = np.asarray(jax.jit(jax.jacrev(lambda th: f(th, {}, None)))(x0))
        np.testing.assert_allclose(Jr, Jf, rtol=1e-9, atol=1e-12 * np.abs(Jf).max())


@pytest.mark.slow
def test_compute_batched_and_fourier_wear():
    """compute() over a vmapped batch of clearances equals per-variant FD, and the wear
    coefficient profile.fourier_a2_m (points geometry) has a gradient that matches FD.

    The FD step is 1 nm: laws with an impact-velocity memory (Lankarani–Nikravesh here) are
    piecewise C¹ in the parameters, the captured δ̇⁻ jumping by O(a·dt) when a parameter moves
    a contact onset by one step (seen here between 50 and 200 nm of a_2 at c = 0.3 mm)."""
    spec = specmod.load(SPEC, ["integrator.t_end_s=0.0015", "profile.n_points=32"])
    spec["axes"] = {"joint.clearance_m": {"values": [0.2e-3, 0.3e-3]}}
    specmod.validate(spec)
    keys = ["profile.fourier_a2_m", "joint.clearance_m"]
    res = S.compute(spec, keys, mode="forward")
    assert res["finite"].all() and res["inputs"]["clearance_m"].tolist() == [0.2e-3, 0.3e-3]
    pl = sweep.plan(spec)
    f = S.metric_function(spec, pl, keys)
    fj = jax.jit(lambda th: f(th, {}, None))  # one jit (one compile) for both clearances
    for i, c in enumerate([0.2e-3, 0.3e-3]):
        x0 = jnp.asarray([0.0, c])
        e = jnp.asarray([1e-9, 0.0])
        fd = np.asarray((fj(x0 + e) - fj(x0 - e)) / 2e-9)
        g = res["gradients"][S.column("smooth_peak_contact_force_N", "profile.fourier_a2_m")][i]
        assert g != 0 and abs(fd[1] - g) / abs(g) < 1e-4


@pytest.mark.slow
def test_measured_points_directional_derivative(tmp_path):
    """d(metric)/d(profile.points[k]) (reverse mode, checkpointed) contracted with a radial
    displacement field v equals the FD of the metric along v."""
    n = 24
    th = np.arange(n) * 2 * np.pi / n
    rb = 0.010 + 0.25e-3 + 20e-6 * np.cos(2 * th)
    (tmp_path / "bush.csv").write_text(
        "x_m,y_m\n" + "".join(f"{float(r * math.cos(t))!r},{float(r * math.sin(t))!r}\n" for r, t in zip(rb, th))
    )
    spec = specmod.load(
        SPEC,
        [
            "profile.kind='measured'",
            f"profile.path='{tmp_path / 'bush.csv'}'",
            f"profile.n_points={n}",
            "integrator.t_end_s=0.0015",
        ],
    )
    res = S.compute(spec, ["profile.points"], mode="auto")
    assert res["mode"] == "reverse" and len(res["keys"]) == n and res["finite"].all()
    m = "smooth_peak_contact_force_N"
    g = np.array([res["gradients"][S.column(m, f"profile.points[{k}]")][0] for k in range(n)])
    pl = sweep.plan(spec)
    f = S.metric_function(spec, pl, ["profile.points"])
    v = jnp.asarray(np.random.default_rng(1).normal(size=n)) * 1e-6
    fj = jax.jit(lambda s: f(jnp.zeros(0), {}, s * v)[1])
    h = 1e-3  # ~1 nm per point (see test_compute_batched_and_fourier_wear)
    fd = float((fj(h) - fj(-h)) / (2 * h))
    assert abs(fd - float(g @ np.asarray(v))) < 1e-4 * abs(fd)


@pytest.mark.slow
def test_gradients_finite_through_contact_onset():
    """Runs that end just before, at, and just after the first contact onset (the onset inside
    the last step) and a run starting in exact contact give finite gradients."""
    spec = specmod.load(SPEC, CIRCLE)
    cfg0 = sweep.plan(spec).cfg
    # find the first onset step of this variant
    from jaxclear.mechanisms import slider_crank as sc

    p = sweep.batch_params(spec, sweep.plan(spec), np.arange(1))
    p1 = jax.tree_util.tree_map(lambda x: x[0], p)
    # jitted (the Config is frozen, hashable): one compile, not an eager scan plus ~100 small ops
    sim = jax.jit(sc.simulate, static_argnums=0)
    r = sim(replace(cfg0, outputs=("penetration_m",), n_saves=2000, save_every=1), p1)
    pen = np.asarray(r.history["penetration_m"])[:, 0]
    k = int(np.argmax(pen > 0))
    assert 0 < k < 2000
    keys = ["joint.clearance_m", "laws.restitution"]
    pl = sweep.plan(spec)
    for n in (k - 1, k, k + 1):  # just before, at (the onset inside the last step), just after
        f = S.metric_function(spec, pl, keys, cfg=replace(cfg0, outputs=(), n_saves=n, save_every=1))
        x0 = jnp.asarray([0.25e-3, 0.9])
        # one jitted program per run length (n is static), not eager op-by-op reverse mode
        J = np.asarray(jax.jit(jax.jacrev(lambda th, f=f: f(th, {}, None)))(x0))
        assert np.isfinite(J).all(), n


def test_cli_sensitivity_writes_csv_json_plot(tmp_path, capsys):
    rc = cli.main(
        [
            "sensitivity",
            SPEC,
            "--set",
            "profile.kind='circle'",
            "--set",
            "integrator.t_end_s=0.001",
            "--wrt",
            "joint.clearance_m,laws.restitution",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert rc == 0
    rows = list(csv.DictReader(open(tmp_path / "sensitivity.csv")))
    assert len(rows) == 1
    for col in (
        "peak_contact_force_N",
        "smooth_peak_contact_force_N",
        "d(peak_contact_force_N)/d(joint.clearance_m)",
        "d(smooth_peak_contact_force_N)/d(laws.restitution)",
        "d(daf_contact_force)/d(joint.clearance_m)",
    ):
        assert col in rows[0] and math.isfinite(float(rows[0][col]))
    doc = json.loads((tmp_path / "sensitivity.json").read_text())
    assert doc["variants"][0]["gradients"]["smooth_peak_contact_force_N"]["joint.clearance_m"] == pytest.approx(
        float(rows[0]["d(smooth_peak_contact_force_N)/d(joint.clearance_m)"])
    )
    assert (tmp_path / "tornado.png").stat().st_size > 1000
    rc = cli.main(["sensitivity", SPEC, "--wrt", "joint.clearnce_m", "--out", str(tmp_path)])
    assert rc == 2 and "joint.clearance_m" in capsys.readouterr().err
