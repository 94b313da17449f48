"""Physics of the plate compactor (jaxclear.mechanisms.plate_compactor, Wang & Wang 2015):
the source's case 2 (e = 0.10 m stuck throughout, e = 0.15 m stick–slip) in both rotor senses,
the stick threshold against the rigid-ground trial method, free flight of the system centre of
mass (parabola, conserved angular momentum), static equilibrium, convergence with dt."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (float64)
from jaxclear._math import cross2, perp
from jaxclear.mechanisms import plate_compactor as pc

FIELDS = pc.Params._fields

# Cached jits (Config is a frozen dataclass: hashable, static): one compile per distinct Config
# (and batched keys), shared by every test that runs it.
_sim = jax.jit(pc.simulate, static_argnums=0)


@functools.cache
def _vsim(keys):
    axes = pc.Params(*[0 if f in keys else None for f in FIELDS])
    return jax.jit(jax.vmap(pc.simulate, in_axes=(None, axes)), static_argnums=0)


def batch(case, rows, cfg):
    """Run variants ``rows`` (list of override dicts, same keys) in one vmap."""
    keys = tuple(sorted(rows[0]))
    base = pc.source_params(case)
    p = base._replace(**{k: jnp.array([r[k] for r in rows], dtype=float) for k in keys})
    res = _vsim(keys)(cfg.validate(), p)
    return res, {k: np.asarray(v) for k, v in pc.summary(cfg, p, res).items()}


CFG2 = pc.Config(
    dt=1e-5,
    n_saves=500,
    save_every=100,
    steady_start_step=25_000,
    outputs=("box_x_m", "stuck", "friction_force_N", "normal_force_N", "slip_velocity_m_per_s"),
)


# case 2, e = 0.10 / 0.15 m in both senses (the stick–slip runs of the slow LCP test are rows 0, 2)
ROWS2 = [dict(e=0.10, omega=25.0), dict(e=0.10, omega=-25.0), dict(e=0.15, omega=25.0), dict(e=0.15, omega=-25.0)]


@functools.cache
def _case2():
    return batch(2, ROWS2, CFG2)


@pytest.mark.slow  # 4 variants × 50 000 steps and their compile: ~4 s on 2 cores
def test_case2_light_eccentric_sticks_throughout_heavy_one_switches_both_senses():
    res, m = _case2()
    assert np.all(m["finite"])
    for i in (0, 1):  # e = 0.10 m: held the whole 0.5 s, the box does not creep
        assert m["slip_time_fraction"][i] == 0.0 and m["stick_slip_transitions"][i] == 0
        assert np.max(np.abs(np.asarray(res.history["slip_velocity_m_per_s"][i]))) < 1e-12
        x = np.asarray(res.history["box_x_m"][i])  # O1 only sways with the pitch
        assert np.max(np.abs(x - x[0])) < 0.128 * 1e-3
        ft, fn = (np.asarray(res.history[c][i]) for c in ("friction_force_N", "normal_force_N"))
        assert np.all(np.abs(ft) <= 0.7 * fn + 1e-9) and np.max(np.abs(ft)) > 300.0
    for i in (2, 3):  # e = 0.15 m: switches between stick and slip, and advances
        assert 0.05 < m["slip_time_fraction"][i] < 0.95
        assert m["stick_slip_transitions"][i] >= 4
        assert abs(m["mean_advance_speed_m_per_min"][i]) > 0.1
        st = np.asarray(res.history["stuck"][i])
        assert 0 < st.mean() < 1


@pytest.mark.slow  # 2 variants × 30 000 steps and their compile: ~3.5 s on 2 cores
def test_stick_threshold_matches_rigid_ground_trial_method():
    """Quasi-static regime (forcing far below the ground rocking mode): the box sticks when the
    rigid-ground margin min_ψ (μ0 F_N − |F_x|) is positive and slips when it is negative."""
    p = pc.source_params(2, e=0.10)
    # jitted: the 40 bisection steps run one compiled margin (eagerly, op by op, ~0.1 s each)
    margin_fn = jax.jit(lambda mu0: pc.rigid_ground_stick_margin(p._replace(mu_static=mu0)))
    margin = lambda mu0: float(margin_fn(jnp.asarray(mu0)))
    lo, hi = 0.1, 1.0  # bisection for the critical μ0 of the trial method
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if margin(mid) > 0 else (mid, hi)
    mu_c = 0.5 * (lo + hi)
    assert 0.5 < mu_c < 0.7  # the source's μ0 = 0.7 holds e = 0.10 m with some margin
    cfg = pc.Config(dt=1e-5, n_saves=300, save_every=100, steady_start_step=0, outputs=("stuck",))
    rows = [dict(mu_static=f * mu_c, mu_kinetic=0.75 * f * mu_c) for f in (1.12, 0.88)]
    _, m = batch(2, [dict(r, e=0.10) for r in rows], cfg)
    assert m["slip_time_fraction"][0] == 0.0
    assert m["slip_time_fraction"][1] > 0.0 and m["stick_slip_transitions"][1] >= 2


def _system_com_and_momentum(p, s, t):
    """Centre of mass of box + rotor, its velocity, and angular momentum about it."""
    q, qd = s.q, s.qd
    th2 = q[2] + p.omega * t + p.psi0
    sA = pc._rot(q[2], jnp.stack([p.Ax - p.Cx, p.Ay - p.Cy]))
    eu = p.e * jnp.stack([jnp.cos(th2), jnp.sin(th2)])
    d = sA + eu
    th2d = qd[2] + p.omega
    r1, v1 = q[:2], qd[:2]
    r2, v2 = r1 + d, v1 + qd[2] * perp(sA) + th2d * perp(eu)
    m = p.m1 + p.m2
    rg, vg = (p.m1 * r1 + p.m2 * r2) / m, (p.m1 * v1 + p.m2 * v2) / m
    L = p.J1 * qd[2] + p.J2 * th2d + p.m1 * cross2(r1 - rg, v1 - vg) + p.m2 * cross2(r2 - rg, v2 - vg)
    return rg, vg, L


@functools.partial(jax.jit, static_argnums=2)
def _flight_scan(p, dt, n):
    """(rg, vg, L, ΣF_N) after each of n steps at step dt (traced: one compile for every dt)."""
    cfg = pc.Config(dt=dt, n_saves=1, save_every=n, steady_start_step=0)
    step = pc.make_step(cfg)

    def body(s, i):
        s, o = step(p, s, i)
        rg, vg, L = _system_com_and_momentum(p, s, (jnp.asarray(i, float) + 1) * dt)
        return s, (rg, vg, L, jnp.sum(o.fn))

    return jax.lax.scan(body, pc.static_rest_state(p), jnp.arange(n))[1]


def _flight(p, dt, n):
    # every dt runs the longest flight (20 000 steps, 0.1–0.2 s: still falling from 0.5 m) and
    # keeps its first n steps, the same steps as a run of n
    out = _flight_scan(p, dt, 20_000)
    return map(np.asarray, _system_com_and_momentum(p, pc.static_rest_state(p), 0.0)), (np.asarray(x)[:n] for x in out)


def test_free_flight_com_parabola_and_angular_momentum_converge():
    """In flight (rotor at 420 rad/s) the system COM moves on the free-fall parabola and the
    angular momentum about it is constant; the scheme's error in both is first order in dt
    (the rotor's velocity-dependent inertia is taken at the start of each step)."""
    p = pc.source_params(1, drop_height=0.5)
    errs = []
    for dt in (1e-5, 5e-6):
        n = int(round(0.1 / dt))
        assert n <= 20_000
        (rg0, vg0, L0), (rg, vg, L, fn) = _flight(p, dt, n)
        assert np.all(fn == 0.0)
        t = (np.arange(n) + 1) * dt
        e_v = max(np.max(np.abs(vg[:, 0] - vg0[0])), np.max(np.abs(vg[:, 1] - vg0[1] + 9.81 * t)))
        e_y = np.max(np.abs(rg[:, 1] - (rg0[1] + vg0[1] * t - 0.5 * 9.81 * t**2)))
        e_L = np.max(np.abs(L - L0)) / abs(float(p.J2 * p.omega))
        errs.append((e_v, e_y, e_L))
    (v1, y1, l1), (v2, y2, l2) = errs
    assert v2 < 2e-3 and y2 < 1e-4 and l2 < 2e-2  # rotor momentum m2 e ω = 53 kg·m/s
    assert 1.6 < v1 / v2 < 2.4 and 1.6 < y1 / y2 < 2.4 and 1.6 < l1 / l2 < 2.4


# 10 000 steps of 1e-5 s from rest, the channels of both tests below (one compile serves the
# static equilibrium and the stick–slip run of the regularised-friction test)
CFG_SHORT = pc.Config(
    dt=1e-5,
    n_saves=100,
    save_every=100,
    steady_start_step=0,
    outputs=("box_x_m", "box_y_m", "pitch_rad", "normal_force_N", "stuck", "slip_velocity_m_per_s"),
)


def test_static_equilibrium_with_rotor_at_rest():
    cfg = CFG_SHORT
    p = pc.source_params(1, omega=0.0)
    r = _sim(cfg, p)
    h = {k: np.asarray(v) for k, v in r.history.items()}
    W = float((p.m1 + p.m2) * p.gravity)
    np.testing.assert_allclose(h["normal_force_N"], W, rtol=1e-6)
    assert np.ptp(h["box_y_m"]) < 1e-9 and np.ptp(h["pitch_rad"]) < 1e-8
    assert np.all(h["stuck"] == 1.0) and np.ptp(h["box_x_m"]) < 1e-10


@pytest.mark.slow  # three compiles (n_steps is static) and 175 000 steps: ~6 s on 2 cores
def test_case2_advance_converges_with_dt():
    """e = 0.15 m: the stick–slip advance speed agrees to 0.1 % over a 4x range of dt (what is
    left is the O(dt) timing of the stick/slip switches, of either sign)."""
    speeds = []
    for dt in (2e-5, 1e-5, 5e-6):
        n = int(round(0.5 / dt))
        cfg = pc.Config(dt=dt, n_saves=100, save_every=n // 100, steady_start_step=n // 2, outputs=("stuck",))
        p = pc.source_params(2, e=0.15)
        r = _sim(cfg, p)
        speeds.append(float(pc.summary(cfg, p, r)["mean_advance_speed_m_per_min"]))
    assert speeds[-1] > 0.3
    assert np.ptp(speeds) < 1e-3 * abs(speeds[-1])


def test_regularised_friction_creeps_where_stick_slip_holds():
    out = {}
    for fr in ("stick_slip", "regularised"):
        r = _sim(pc.Config(**{**CFG_SHORT.__dict__, "friction": fr}), pc.source_params(2, e=0.10))
        out[fr] = np.max(np.abs(np.asarray(r.history["slip_velocity_m_per_s"])))
    assert out["stick_slip"] < 1e-12 and out["regularised"] > 1e-5


@pytest.mark.slow  # ~40-75 s on 2 cores
def test_acceleration_level_lcp_reproduces_case2_stick_and_slip_phases():
    """The source's formulation (friction from the acceleration-level complementarity at zero
    slip, ``lcp_acceleration``) and ours (impulses per step) agree on case 2: e = 0.10 m never
    slips, e = 0.15 m slips the same fraction of the time; the regularised law slips at both."""
    rows = [dict(e=0.10), dict(e=0.15)]
    # ours: the case-2 batch of the test above, e = 0.10 and 0.15 m at the source's ω = +25 rad/s
    assert [ROWS2[i] for i in (0, 2)] == [dict(r, omega=float(pc.CASES[2]["omega"])) for r in rows]
    frac = {"stick_slip": _case2()[1]["slip_time_fraction"][[0, 2]]}
    for fr in ("lcp_acceleration", "regularised"):
        cfg = pc.Config(**{**CFG2.__dict__, "friction": fr, "outputs": ("stuck",)})
        _, m = batch(2, rows, cfg)
        frac[fr] = m["slip_time_fraction"]
    assert frac["stick_slip"][0] == 0.0 and frac["lcp_acceleration"][0] == 0.0
    assert abs(frac["stick_slip"][1] - frac["lcp_acceleration"][1]) < 0.01
    assert frac["regularised"][0] > 0.1


# ------------------------------------------------------------------------------------------
# through the sweep layer (registry): the column names, both senses, bad input
# ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_hard_ground_spec_columns_and_source_result(tmp_path):
    from jaxclear import spec as specmod
    from jaxclear import sweep

    sp = specmod.load(
        "sweeps/plate_compactor_hard_ground.toml", overrides=["integrator.t_end_s=0.6", "integrator.steady_start_s=0.3"]
    )
    table, summary, hists = sweep.run(sp, out=tmp_path / "pc", log=None, compile_cache=False)
    for col in (
        "rotor_speed_rad_per_s",
        "eccentricity_m",
        "mean_advance_speed_m_per_min",
        "slip_time_fraction",
        "stick_slip_transitions",
        "finite",
    ):
        assert col in table
    stuck = table["eccentricity_m"] == 0.10
    assert set(table["rotor_speed_rad_per_s"]) == {25.0, -25.0}
    assert np.all(table["slip_time_fraction"][stuck] == 0.0) and np.all(table["stick_slip_transitions"][stuck] == 0)
    assert np.all(table["slip_time_fraction"][~stuck] > 0.05) and np.all(table["stick_slip_transitions"][~stuck] >= 4)
    assert np.all(np.abs(table["mean_advance_speed_m_per_min"][stuck]) < 1e-4)
    assert summary["mechanism"] == "plate_compactor" and hists["box_x_m"].shape[0] == 4


def test_spec_bad_inputs_name_the_field():
    from jaxclear import spec as specmod
    from jaxclear import sweep

    base = {"sweep": {"name": "pc"}, "model": {"mechanism": "plate_compactor"}}
    with pytest.raises(specmod.SpecError, match="ground.kinetic_friction"):
        specmod.load({**base, "ground": {"static_friction": 0.3, "kinetic_friction": 0.5}})
    with pytest.raises(specmod.SpecError, match="ground.friction_model"):
        specmod.load({**base, "ground": {"friction_model": "lcp"}})
    with pytest.raises(specmod.SpecError, match="steady_start_s"):
        specmod.load({**base, "integrator": {"t_end_s": 1.0, "steady_start_s": 1.5}})
    with pytest.raises(specmod.SpecError, match=r"dt_s = 0.009 exceeds .*variant"):
        sweep.plan(specmod.load({**base, "integrator": {"dt_s": 9e-3}}))
