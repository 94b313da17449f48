"""Physics of the two-sided impact oscillator with stick–slip friction
(jaxclear.mechanisms.impact_oscillator): sticking threshold, Coulomb free decay against its
closed form, energy balance, convergence with dt, stick phases in forced motion, vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (float64)
from jaxclear import laws
from jaxclear.mechanisms import impact_oscillator as io

G = 9.81


# One cached jit (Config is a frozen dataclass: hashable, static): one compile per Config.
_sim = jax.jit(io.simulate, static_argnums=0)
_vsim = jax.jit(
    jax.vmap(
        io.simulate, in_axes=(None, io.Params(*[0 if f == "forcing_frequency" else None for f in io.Params._fields]))
    ),
    static_argnums=0,
)


def run(cfg, **kw):
    return _sim(cfg.validate(), io.reference_params(**kw))


# ------------------------------------------------------------------------------------------
# the law itself
# ------------------------------------------------------------------------------------------
def test_stick_slip_law_solves_coulomb_exactly():
    dt, w, fn, mu0, mu = 1e-3, 2.0, 10.0, 0.3, 0.2
    # below the static limit: held, force = what is needed to stop
    f, v1, st = laws.stick_slip_friction(0.9 * dt * w * mu0 * fn, w, fn, mu0, mu, dt)
    assert bool(st) and float(v1) == 0.0 and float(f) == pytest.approx(-0.9 * mu0 * fn)
    # above it: kinetic force, the slip keeps its sign
    f, v1, st = laws.stick_slip_friction(-1.1 * dt * w * mu0 * fn, w, fn, mu0, mu, dt)
    assert not bool(st) and float(f) == pytest.approx(mu * fn) and float(v1) < 0.0
    # no normal force: no friction, never "stuck"
    f, v1, st = laws.stick_slip_friction(0.0, w, 0.0, mu0, mu, dt)
    assert not bool(st) and float(f) == 0.0
    # two corners of one body (rank-one Delassus): the pair holds what either alone cannot
    G2 = dt * w * jnp.ones((2, 2))
    v = 1.5 * dt * w * mu0 * fn  # needs 1.5 μ0 F_N: more than one corner, less than both
    f, v1, st = laws.stick_slip_friction_contacts(jnp.array([v, v]), G2, jnp.array([fn, fn]), mu0, mu)
    assert bool(st.all()) and float(jnp.sum(f)) == pytest.approx(-1.5 * mu0 * fn)
    assert np.allclose(v1, 0.0, atol=1e-15)
    f, v1, st = laws.stick_slip_friction_contacts(jnp.array([v, v]) * 1.4, G2, jnp.array([fn, fn]), mu0, mu)
    assert not bool(st.any()) and float(jnp.sum(f)) == pytest.approx(-2 * mu * fn)


# ------------------------------------------------------------------------------------------
# sticking threshold F_applied < μ0 F_N
# ------------------------------------------------------------------------------------------
CFG_SHORT = io.Config.periods(steps_per_period=400, n_transient=0, n_record=6, save_every=4)


@pytest.mark.parametrize("friction", ["stick_slip", "regularised"])
def test_sticking_threshold_holds_the_mass_exactly(friction):
    cfg = io.Config(**{**CFG_SHORT.__dict__, "friction": friction})
    mu0 = 0.25
    below = run(cfg, force_amplitude=0.97 * mu0 * G, forcing_frequency=20.0)
    above = run(cfg, force_amplitude=1.05 * mu0 * G, forcing_frequency=20.0)
    x_below = np.asarray(below.history["displacement_m"])
    if friction == "stick_slip":
        assert np.all(x_below == 0.0) and float(below.stuck_fraction) == 1.0
        assert int(below.stick_slip_transitions) == 0
    else:  # the regularised law creeps below the static limit: why it is not enough
        assert np.max(np.abs(x_below)) > 1e-6
    x_above = np.asarray(above.history["displacement_m"])
    assert np.max(np.abs(x_above)) > 1e-5
    if friction == "stick_slip":
        assert 0.0 < float(above.stuck_fraction) < 1.0 and int(above.stick_slip_transitions) >= 4


def test_spring_preload_below_static_limit_is_held():
    mu0, k = 0.25, 1000.0
    x0 = 0.98 * mu0 * G / k
    held = run(CFG_SHORT, force_amplitude=0.0, x0=x0)
    assert np.all(np.asarray(held.history["displacement_m"]) == x0)
    assert np.all(np.asarray(held.history["friction_force_N"]) == pytest.approx(k * x0, rel=1e-12))
    freed = run(CFG_SHORT, force_amplitude=0.0, x0=1.02 * mu0 * G / k)
    assert float(freed.final.x) < 1.02 * mu0 * G / k - 1e-6


# ------------------------------------------------------------------------------------------
# Coulomb free decay: closed form (no stops, no viscous damping, no forcing)
# ------------------------------------------------------------------------------------------
def _coulomb_decay(t, x0, k, m, fk, fs):
    """x(t) of m x'' + k x = ∓fk from rest at x0: half periods about ±fk/k, the amplitude
    falls by 2 fk/k each, the mass stops at the first reversal with k|x| ≤ fs."""
    wn, a = np.sqrt(k / m), fk / k
    x_turn, t0, out = x0, 0.0, np.empty_like(t)
    centres, turns = [], [x0]
    while True:
        c = a * np.sign(x_turn)
        sel = t >= t0
        out[sel] = c + (x_turn - c) * np.cos(wn * (t[sel] - t0))
        if k * abs(x_turn) <= fs:
            out[sel] = x_turn
            break
        centres.append(c)
        x_turn = 2 * c - x_turn
        turns.append(x_turn)
        t0 += np.pi / wn
        if k * abs(x_turn) <= fs:
            out[t >= t0] = x_turn
            break
    return out, np.array(turns)


def test_coulomb_free_decay_matches_closed_form_and_converges():
    k, m, x0 = 1000.0, 1.0, 0.02
    mu0, mu = 0.25, 0.18
    errs = []
    for n in (400, 800, 1600):
        cfg = io.Config.periods(steps_per_period=n, n_transient=0, n_record=4, save_every=n // 200)
        r = run(
            cfg,
            force_amplitude=0.0,
            damping=0.0,
            x0=x0,
            gap_left=1.0,
            gap_right=1.0,
            mu_static=mu0,
            mu_kinetic=mu,
            forcing_frequency=2 * np.pi,
        )  # T = 1 s
        t = (np.arange(cfg.n_saves) + 1) * (cfg.save_every / n)
        ref, turns = _coulomb_decay(t, x0, k, m, mu * G, mu0 * G)
        x = np.asarray(r.history["displacement_m"])
        errs.append(np.max(np.abs(x - ref)))
        # it ends at rest exactly where the closed form says, and stays there bit for bit
        assert float(r.final.x) == pytest.approx(turns[-1], abs=2e-4 * 400 / n)
        assert float(r.final.v) == 0.0 and float(r.stuck_fraction) > 0.3
    assert errs[-1] < 2e-4 * x0 / 0.02 * 10
    assert errs[1] < 0.7 * errs[0] and errs[2] < 0.7 * errs[1]


# ------------------------------------------------------------------------------------------
# energy
# ------------------------------------------------------------------------------------------
def _energy(p, x, v):
    return 0.5 * p.mass * v**2 + 0.5 * p.stiffness * x**2


def test_conservative_impacts_conserve_energy_second_order():
    drifts = []
    for n in (1000, 4000):
        cfg = io.Config.periods(
            steps_per_period=n, n_transient=0, n_record=3, save_every=n // 100, normal_law="hertz", friction="none"
        )
        kw = dict(force_amplitude=0.0, damping=0.0, v0=0.4, mu_static=0.0, mu_kinetic=0.0)
        r = run(cfg, **kw)
        p = io.reference_params(**kw)
        assert float(r.impacts_per_period) >= 2.0  # it does hit both stops
        x, v = np.asarray(r.history["displacement_m"]), np.asarray(r.history["velocity_m_per_s"])
        free = np.abs(x) < 5e-3  # off the stops: E = ½mv² + ½kx²
        e = _energy(p, x[free], v[free])
        drifts.append(np.max(np.abs(e - e[0])) / e[0])
    assert drifts[1] < 1e-3
    assert drifts[1] < 0.35 * drifts[0]


def test_energy_balance_with_forcing_friction_damping_and_impacts():
    res = []
    for n in (1000, 2000):
        cfg = io.Config.periods(steps_per_period=n, n_transient=0, n_record=20, save_every=n)
        kw = dict(forcing_frequency=40.0)
        r = run(cfg, **kw)
        p = io.reference_params(**kw)
        assert float(r.impacts_per_period) > 0
        x1, v1 = float(r.final.x), float(r.final.v)
        # no stop penetrated at a period end in this regime: stop potential 0 there
        assert -p.gap_left < x1 < p.gap_right
        dE = _energy(p, x1, v1) - 0.0
        w = float(r.work_forcing + r.work_damping + r.work_friction + r.work_contact)
        assert float(r.work_friction) < 0 and float(r.work_damping) < 0 and float(r.work_contact) < 0
        res.append(abs(dE - w) / float(r.work_forcing))
    assert res[1] < 2e-3 and res[1] < 0.6 * res[0]


# ------------------------------------------------------------------------------------------
# forced response: convergence with dt, stick phases, Poincaré sampling, vmap
# ------------------------------------------------------------------------------------------
def test_poincare_point_converges_with_dt():
    pts = []
    for n in (1000, 2000, 4000):
        cfg = io.Config.periods(steps_per_period=n, n_transient=40, n_record=2, save_every=n)
        r = run(cfg, forcing_frequency=75.0)  # period-1 impacting orbit
        pts.append(np.array([float(r.poincare_x[-1]), float(r.poincare_v[-1])]))
        assert abs(float(r.poincare_x[-1] - r.poincare_x[-2])) < 1e-7  # period 1
    d1, d2 = np.linalg.norm(pts[1] - pts[0]), np.linalg.norm(pts[2] - pts[1])
    assert d2 < 0.6 * d1


def test_forced_motion_has_stick_phases_and_impacts():
    cfg = io.Config.periods(steps_per_period=1000, n_transient=20, n_record=5, save_every=5)
    r = run(cfg, forcing_frequency=20.0)
    stuck = np.asarray(r.history["stuck"])
    v = np.asarray(r.history["velocity_m_per_s"])
    assert 0.05 < float(r.stuck_fraction) < 0.95 and int(r.stick_slip_transitions) >= 10
    assert np.all(v[stuck == 1.0] == 0.0)  # held means ẋ = 0 exactly
    ft = np.asarray(r.history["friction_force_N"])
    assert np.all(np.abs(ft[stuck == 1.0]) <= 0.25 * G + 1e-9)
    assert np.allclose(np.abs(ft[stuck == 0.0]), 0.18 * G)
    assert float(r.impacts_per_period) > 0 and float(r.peak_contact_force) > 10.0


def test_vmap_over_frequencies_equals_single_runs_and_float32():
    cfg = io.Config.periods(steps_per_period=500, n_transient=5, n_record=3, save_every=500).validate()
    om = jnp.array([20.0, 45.0, 70.0])
    p = io.reference_params()._replace(forcing_frequency=om)
    batch = _vsim(cfg, p)
    for i in range(3):
        one = run(cfg, forcing_frequency=float(om[i]))
        np.testing.assert_allclose(batch.poincare_x[i], one.poincare_x, rtol=1e-12, atol=1e-15)
    p32 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), io.reference_params())
    r32 = _sim(cfg, p32)
    assert r32.poincare_x.dtype == jnp.float32 and np.all(np.isfinite(r32.poincare_x))


# ------------------------------------------------------------------------------------------
# through the sweep layer (registry)
# ------------------------------------------------------------------------------------------
def _spec(**axes):
    return {
        "sweep": {"name": "osc"},
        "model": {"mechanism": "impact_oscillator"},
        "integrator": {
            "steps_per_period": 1000,
            "transient_periods": 40,
            "record_periods": 6,
            "save_every": 1000,
            "chunk_size": 2,
        },
        "axes": axes,
    }


@pytest.mark.slow
def test_spec_sweep_runs_and_poincare_columns(tmp_path):
    from jaxclear import sweep

    table, summary, hists = sweep.run(
        _spec(**{"model.forcing_frequency_rad_per_s": {"values": [20.0, 75.0, 45.0]}}),
        out=tmp_path / "o",
        log=None,
        compile_cache=False,
    )
    assert summary["mechanism"] == "impact_oscillator" and summary["variants"] == 3
    assert hists["displacement_m"].shape == (3, 6)
    assert table["poincare_period"][1] == 1  # Ω = 75 rad/s: period-1 impacting orbit
    one = run(io.Config.periods(steps_per_period=1000, n_transient=40, n_record=6), forcing_frequency=20.0)
    np.testing.assert_allclose(hists["displacement_m"][0], one.poincare_x, rtol=1e-12)
    assert table["stick_time_fraction"][0] > 0 and np.all(table["finite"])
    assert "plots/bifurcation_forcing_frequency_rad_per_s.png" in summary.get("plots", [])


def test_spec_bad_inputs_name_the_field():
    from jaxclear import spec as specmod
    from jaxclear import sweep

    with pytest.raises(specmod.SpecError, match="friction.kinetic_coefficient"):
        specmod.load({**_spec(), "friction": {"static_coefficient": 0.1, "kinetic_coefficient": 0.2}})
    with pytest.raises(specmod.SpecError, match="laws.normal = 'hertzz'"):
        specmod.load({**_spec(), "laws": {"normal": "hertzz"}})
    # the deprecated [contact] keys are still read, with a warning naming the new key
    with pytest.warns(FutureWarning, match="contact.law is deprecated: use laws.normal"):
        with pytest.raises(specmod.SpecError, match="laws.normal = 'hertzz'"):
            specmod.load({**_spec(), "contact": {"law": "hertzz"}})
    with pytest.raises(specmod.SpecError, match=r"unknown key integrator.dt_s.*steps_per_period"):
        specmod.load({**_spec(), "integrator": {"dt_s": 1e-4}})  # the oscillator's step is T/N: dt_s does nothing
    with pytest.raises(specmod.SpecError, match="save_every"):
        specmod.load({**_spec(), "integrator": {"steps_per_period": 1000, "record_periods": 3, "save_every": 7}})
    with pytest.raises(specmod.SpecError, match=r"steps_per_period = 1000 .*variant 0"):
        sweep.plan(specmod.load(_spec(**{"model.forcing_frequency_rad_per_s": {"values": [2.0, 40.0]}})))
