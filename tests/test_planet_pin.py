"""model.mechanism = "planet_pin": a helical planet on the 3D cylindrical clearance joint (Virlez
et al. 2013's reduced Torsen test) through the sweep layer: spec checks, store, resume, plots,
plan, and the physics of the loaded planet (it rests on the wall on the side of the mesh load,
friction angle included, crosses over on the reversal, tilt within the geometric limit)."""

import dataclasses
import json
import math

import jax
import numpy as np
import pytest

from jaxclear import cli, sweep
from jaxclear import spec as specmod
from jaxclear.mechanisms import planet_pin as pp


def _spec(**model):
    return {
        "sweep": {"name": "planet_test"},
        "model": {
            "mechanism": "planet_pin",
            "ramp_time_s": 3e-3,
            "reversal_time_s": 3e-3,
            "hold_time_s": 3e-3,
            **model,
        },
        "integrator": {"dt_s": 1e-6, "save_every": 100, "chunk_size": 2},
        "outputs": {
            "histories": [
                "top_x_m",
                "top_y_m",
                "bottom_x_m",
                "bottom_y_m",
                "contact_force_N",
                "penetration_m",
                "tilt_rad",
                "resisting_torque_N_m",
                "sun_torque_N_m",
            ],
            "plot_variants": 2,
        },
        "axes": {"joint.clearance_m": {"values": [30e-6, 60e-6]}},
    }


def test_spec_errors_name_the_field():
    with pytest.raises(specmod.SpecError, match=r"joint.clearance_m = 0.005 must be smaller than joint.pin_radius_m"):
        specmod.load({**_spec(), "axes": {}, "joint": {"clearance_m": 0.005, "pin_radius_m": 0.004}})
    with pytest.raises(specmod.SpecError, match=r"model.initial_tilt_deg = 1.0 .*beyond joint.clearance_m"):
        specmod.load({**_spec(initial_tilt_deg=1.0), "axes": {}})
    with pytest.raises(specmod.SpecError, match=r"model.helix_angle_deg = 60.0 is outside the allowed range"):
        specmod.load({**_spec(helix_angle_deg=60.0), "axes": {}})
    with pytest.raises(specmod.SpecError, match=r"model.carrier_radius_m is given but model.carrier_speed_rpm is not"):
        specmod.load({**_spec(carrier_radius_m=0.05), "axes": {}})
    with pytest.raises(specmod.SpecError, match=r"model.carrier_speed_rpm = 2000000.0 is outside the allowed range"):
        specmod.load({**_spec(carrier_speed_rpm=2e6), "axes": {}})
    with pytest.raises(specmod.SpecError, match=r"integrator.dt_s = 0.0001 exceeds the stability bound"):
        sweep.plan(specmod.load({**_spec(), "integrator": {"dt_s": 1e-4}}))


# one jit for every run of the module: the Config (a frozen dataclass of static values) is the
# static argument, so the runs with equal configs share one trace and one compile
_SIM = jax.jit(pp.simulate, static_argnums=0)
CHANNELS = ("top_x_m", "contact_force_N")  # the channels of the 1.5 ms runs (one Config for them)


def _setup(model=None, laws=None, t_end=3e-3, outputs=(), integrator=None):
    """(params, cfg) of one variant (no sweep layer)."""
    sp = specmod.load(
        {
            "model": {
                "mechanism": "planet_pin",
                "ramp_time_s": 2e-3,
                "reversal_time_s": 2e-3,
                "hold_time_s": 1e-3,
                **(model or {}),
            },
            "laws": laws or {},
            "integrator": {"t_end_s": t_end, **(integrator or {})},
        }
    )
    cfg = dataclasses.replace(pp.make_config(sp, t_end), outputs=tuple(outputs))
    return pp.params(sp, cfg, sweep.flat_values(sp), np.float64, t_end), cfg


def _first_impacts(model=None, laws=None, t_end=3e-3, outputs=(), integrator=None):
    """(Result, params, cfg) of one variant run by simulate (no sweep layer)."""
    p, cfg = _setup(model, laws, t_end, outputs, integrator)
    return _SIM(cfg, p), p, cfg


def _run_and_dpeak(cfg, p):
    """(Result, d(smooth peak)/dn) of one run, forward mode: the primal is the run itself, so one
    compile per Config serves the history checks and the derivative check."""
    from jaxclear import metrics

    def f(n):
        r = pp.simulate(cfg, p._replace(exponent=n))
        a = metrics.unpack(r.acc)
        return r, metrics.smooth_peak(a.lse_force, a.steps)

    (r, _), (_, dpeak) = jax.jvp(f, (p.exponent,), (jax.numpy.ones_like(p.exponent),))
    return r, dpeak


_RUN_DPEAK = jax.jit(_run_and_dpeak, static_argnums=0)


@pytest.fixture(scope="module")
def exponent_runs():
    """The 1.5 ms first impacts (outputs CHANNELS) on the static exponent's path and on the pow
    path (exponent=None, n traced), each with its d(smooth peak)/dn: shared by the exponent, the
    impact-velocity and the clamped-carrier tests (two compiles in all)."""
    p, cfg = _setup(t_end=1.5e-3, outputs=CHANNELS)
    return p, cfg, {k: _RUN_DPEAK(c, p) for k, c in (("static", cfg), ("pow", dataclasses.replace(cfg, exponent=None)))}


def test_impact_velocity_key_is_checked():
    with pytest.raises(specmod.SpecError, match=r"laws.impact_velocity = 'max'; allowed: episode_max, onset"):
        specmod.load({**_spec(), "laws": {"impact_velocity": "max"}})


@pytest.mark.slow  # one compile (the onset rule's); the default rule's run is the shared fixture's
def test_impact_velocity_key_onset_and_episode_max(exponent_runs):
    from jaxclear import metrics

    # 1.5 ms: the first impacts at both ends and on the top end face are all over by then (the
    # peaks of 3 ms runs are the same to the last digit)
    p0, cfg0, runs = exponent_runs
    r_onset, _, cfg = _first_impacts(laws={"impact_velocity": "onset"}, t_end=1.5e-3, outputs=CHANNELS)
    assert cfg.joint.impact_velocity == "onset" and cfg0.joint.impact_velocity == "episode_max"
    peaks = {}
    for iv, r in (("episode_max", runs["static"][0]), ("onset", r_onset)):
        assert bool(r.finite)
        peaks[iv] = np.asarray(metrics.unpack(r.acc).peak_force)[:3]  # top, bottom, axial_top
    # the same impacts (the rule only changes the damping term's δ̇⁻), yet not bit-identical
    np.testing.assert_allclose(peaks["onset"], peaks["episode_max"], rtol=0.02)
    assert np.max(np.abs(peaks["onset"] - peaks["episode_max"])) > 1e-3


def test_static_exponent_when_fixed_and_the_traced_path_otherwise():
    """laws.exponent fixed by the spec becomes static (δ^1.5 as δ·√δ); swept, or a key of a
    sensitivity or an identification (the spec's ``_traced``), it stays a traced value."""
    _, cfg = _setup(t_end=1.5e-3, outputs=CHANNELS)
    assert cfg.exponent == 1.5 and cfg.joint.exponent == 1.5
    sp = specmod.load({**_spec(), "axes": {"laws.exponent": {"values": [1.4, 1.5]}}})
    assert sweep.plan(sp).cfg.exponent is None
    sp = specmod.load({**_spec(), "axes": {}})
    assert sweep.plan(sp).cfg.exponent == 1.5 and sweep.plan({**sp, "_traced": ("laws.exponent",)}).cfg.exponent is None


@pytest.mark.slow  # the static and the pow path: the shared fixture's two compiles
def test_static_exponent_is_the_pow_path_to_rounding(exponent_runs):
    """The static exponent's run (δ·√δ) is the pow path's (δ^n, n traced) to rounding."""
    _, cfg, runs = exponent_runs
    assert cfg.exponent == 1.5
    r, r0 = runs["static"][0], runs["pow"][0]
    assert float(np.max(r0.history["contact_force_N"])) > 100.0
    np.testing.assert_allclose(
        r.history["contact_force_N"],
        r0.history["contact_force_N"],
        rtol=1e-9,
        atol=1e-9 * float(np.max(r0.history["contact_force_N"])),
    )


@pytest.mark.slow
def test_exponent_derivative_through_the_static_path(exponent_runs):
    """d(smooth peak)/dn through the static exponent equals the pow path's (forward mode); the
    sensitivity command, which marks its keys traced, differentiates n."""
    from jaxclear import sensitivity

    _, _, runs = exponent_runs
    g_fast, g_slow = float(runs["static"][1]), float(runs["pow"][1])
    assert abs(g_fast) > 0 and g_fast == pytest.approx(g_slow, rel=1e-8)
    sp = specmod.load({**_spec(), "axes": {}})
    res = sensitivity.compute({**sp, "integrator": {**sp["integrator"], "t_end_s": 3e-4}}, ["laws.exponent"])
    assert np.all(res["finite"]) and res["keys"] == ["laws.exponent"]


@pytest.mark.slow  # three programs compiled: the written-out model, the step, the carrier at rest (the rest is shared)
def test_clamped_carrier_is_todays_model_bit_for_bit(exponent_runs):
    """Without model.carrier_speed_rpm the step is the clamped-housing model (cylindrical_joint.
    fixed_housing_loads, the spin held in the world frame) bit for bit; carrier_speed_rpm = 0
    given (the rotating-carrier path at Ω = 0) equals it to rounding."""
    import jax.numpy as jnp

    from jaxclear import cylindrical_joint as cj
    from jaxclear import integrate, rigid3d

    model = {"misalignment_y_deg": 0.05, "initial_tilt_deg": 0.01}
    t_end = 1.5e-3
    sp = specmod.load(
        {
            "model": {
                "mechanism": "planet_pin",
                "ramp_time_s": 1e-3,
                "reversal_time_s": 1e-3,
                "hold_time_s": 1e-3,
                **model,
            },
            "integrator": {"t_end_s": t_end},
        }
    )
    cfg = pp.make_config(sp, t_end)
    assert not cfg.carrier
    p = pp.params(sp, cfg, sweep.flat_values(sp), np.float64, t_end)

    def external(p, q, v, t):  # the pre-carrier model written out
        f, m = pp.mesh_load(p, t)
        k = p.mesh_stiffness * (p.r_p * jnp.cos(p.pressure)) ** 2
        c = 2.0 * p.mesh_damping * jnp.sqrt(k * p.inertia_axial)
        e = 2.0 * jnp.arctan2(q.quat[0, 3], q.quat[0, 0]) - p.spin * t
        e = jnp.arctan2(jnp.sin(e), jnp.cos(e))
        b = rigid3d.quat_to_matrix(q.quat[0])[:, 2]
        return f, m + (-k * e - c * (v.w[0, 2] - p.spin)) * b

    loads = cj.fixed_housing_loads(cfg.joint, pp.joint_params, external)

    def run(step, s0):
        save = lambda o: (o[0].normal_force, o[0].offset)
        s, _, h = integrate.simulate(step, p, s0, jnp.zeros(()), lambda a, o, i: a, 100, 15, save=save)
        return s.q.x, s.q.quat, s.v.w, h

    def ref_run():  # the start state inside the program too (eagerly, its ops compile one by one)
        mass, inertia = p.mass[None], jnp.stack([p.inertia_transverse, p.inertia_transverse, p.inertia_axial])[None]
        quat = rigid3d.quat_exp(jnp.stack([p.tilt0, 0.0, 0.0]))[None]
        s0 = rigid3d.initial_state(
            rigid3d.make_accel(mass, inertia, loads),
            p,
            rigid3d.Pose(jnp.zeros((1, 3)), quat),
            rigid3d.Twist(jnp.zeros((1, 3)), jnp.stack([0.0 * p.spin, 0.0 * p.spin, p.spin])[None]),
            cj.initial_memory(cfg.joint),
        )
        return run(rigid3d.make_step(cfg.scheme, mass, inertia, loads, cfg.dt), s0)

    ref = jax.jit(ref_run)()
    ours = jax.jit(lambda: run(pp.make_step(cfg), pp.initial_state(cfg, p)))()
    assert float(jnp.max(ref[3][0])) > 100.0  # the planet has hit the wall
    for a, b in zip(jax.tree_util.tree_leaves(ref), jax.tree_util.tree_leaves(ours)):
        np.testing.assert_array_equal(a, b)
    # the rotating-carrier path at Ω = 0, and any carrier radius at rest: the same to rounding
    p0, cfg0 = _setup({**model}, t_end=t_end, outputs=CHANNELS)
    assert cfg0 == exponent_runs[1]  # the fixture's static-path program (the params are traced)
    r0 = _RUN_DPEAK(cfg0, p0)[0]
    r1, _, c1 = _first_impacts(
        {**model, "carrier_speed_rpm": 0.0, "carrier_radius_m": 0.4},
        t_end=t_end,
        outputs=CHANNELS,
    )
    assert c1.carrier
    for k in CHANNELS:
        np.testing.assert_allclose(r1.history[k], r0.history[k], rtol=1e-9, atol=1e-9 * np.max(np.abs(r0.history[k])))


@pytest.mark.slow  # 4000 steps to the settled state (physics, kept in full)
def test_rotating_carrier_presses_the_planet_outward_with_the_centrifugal_force():
    """Carrier at Ω = 1000 rpm about its axis at r_c, no mesh load, no spin relative to the carrier:
    the planet, started with the carrier's motion, flies out, bounces and rests on the outward
    side of the hole (+x in the carrier frame) with the normal force m Ω² (r_c + |d|) (|d| ≈ c
    its offset), both ends sharing it."""
    t_end = 8e-3
    r, p, cfg = _first_impacts(
        {"sun_torque_N_m": 0.0, "planet_speed_rpm": 0.0, "carrier_speed_rpm": 1000.0},
        t_end=t_end,
        integrator={"dt_s": 2e-6, "save_every": 100},
        outputs=("top_x_m", "top_y_m", "bottom_x_m", "bottom_y_m", "contact_force_N"),
    )
    assert cfg.carrier and bool(r.finite)
    h = {k: np.asarray(v) for k, v in r.history.items()}
    omega, rc, m, c = float(p.carrier_speed), float(p.carrier_radius), float(p.mass), float(p.clearance)
    assert abs(omega - 1000 * 2 * math.pi / 60) < 1e-12 and rc == 0.03
    last = slice(-10, None)  # the last 2 ms: settled
    for end in ("top", "bottom"):
        x, y = h[f"{end}_x_m"][last], h[f"{end}_y_m"][last]
        assert np.all(x > c) and np.all(x < c + 1e-6) and np.all(np.abs(y) < 0.02 * c), (x, y)  # outward, on the wall
    fn = h["contact_force_N"][last]
    total = fn[:, 0] + fn[:, 1]
    expect = m * omega**2 * (rc + float(np.mean(h["top_x_m"][last])))
    np.testing.assert_allclose(total, expect, rtol=2e-3)
    np.testing.assert_allclose(fn[:, 0], fn[:, 1], rtol=1e-3)
    assert abs(np.mean(total) / (m * omega**2 * rc) - 1.0) < 0.01  # the brief's m Ω² r within 1 %
    assert np.all(fn[:, 2:] < 1e-6)  # no axial load


def test_plan_without_probe(tmp_path, capsys):
    path = tmp_path / "p.toml"
    path.write_text(
        '[sweep]\nname = "p"\n[model]\nmechanism = "planet_pin"\nramp_time_s = 0.002\n'
        "reversal_time_s = 0.002\nhold_time_s = 0.001\n"
        '[axes]\n"friction.coefficient" = { values = [0.05, 0.1, 0.15] }\n'
    )
    assert cli.main(["plan", str(path), "--json", "--no-probe"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert (e["mechanism"], e["n_variants"], e["steps_per_variant"], e["scheme"]) == (
        "planet_pin",
        3,
        5000,
        "verlet_predicted",
    )


def test_sweep_store_resume_and_plots(tmp_path):
    # the sweep layer on a short run (1500 steps, a ramp, reversal and hold of 0.5 ms each): the
    # columns, the plots, the store and its resume; the physics at steady load is the next test
    sp = _spec(ramp_time_s=5e-4, reversal_time_s=5e-4, hold_time_s=5e-4)
    out = tmp_path / "pp"
    table, summary, hists = sweep.run(sp, out=out, log=None, compile_cache=False)
    assert summary["mechanism"] == "planet_pin" and summary["variants"] == 2 and np.all(table["finite"])
    assert summary["steps_per_variant"] == 1500 and hists["contact_force_N"].shape[:2] == (2, 15)
    for c in (
        "peak_contact_force_top_N",
        "peak_contact_force_bottom_N",
        "peak_contact_force_axial_top_N",
        "peak_contact_force_axial_bottom_N",
        "impacts_top",
        "max_tilt_rad",
        "settle_time_after_reversal_s",
        "hold_resisting_torque_N_m",
    ):
        assert c in table, c
    assert sorted(summary["plots"]) == [
        "plots/end_centre_trajectories.png",
        "plots/first_impact_hysteresis.png",
        "plots/histories.png",
    ]
    again, s2, _ = sweep.run(sp, out=out, log=None, compile_cache=False)
    assert s2["rerun"]["chunks_reused"] == 1 and s2["rerun"]["chunks_computed"] == 0
    for k in table:
        np.testing.assert_array_equal(again[k], table[k])


@pytest.mark.slow  # 9000 steps: 3 ms ramp, reversal and hold (physics, kept in full)
def test_sweep_physics_at_steady_load(tmp_path):
    sp = _spec()
    sp["outputs"] = {**sp["outputs"], "plots": False}  # the plots are the previous test's
    out = tmp_path / "pp"
    table, summary, hists = sweep.run(sp, out=out, log=None, compile_cache=False)
    assert summary["mechanism"] == "planet_pin" and summary["variants"] == 2 and np.all(table["finite"])
    t = np.asarray(sweep.load(out).t_s)
    p = pp.params(sp, None, {**sweep.flat_values(specmod.load(sp)), "joint.clearance_m": 30e-6}, np.float64, 0)
    mu, R, L = 0.1, float(p.pin_radius), float(p.length)
    before = np.searchsorted(t, 3.0e-3 - 1e-9)  # T = +10 N·m at the end of the ramp, settled
    for i, c in enumerate(table["clearance_m"]):
        # steady load: both ends on the wall, the contact normal turned from the load by the
        # friction angle atan μ (the spin's friction pushes the planet along the wall)
        for k, sign in ((before, 1.0), (-1, -1.0)):
            for end in ("top", "bottom"):
                x, y = hists[f"{end}_x_m"][i, k], hists[f"{end}_y_m"][i, k]
                r = math.hypot(x, y)
                assert c < r < c + 2e-6, (end, r)
                assert sign * y > 0  # on the side of the tangential load: +y, then −y after the reversal
            T = hists["sun_torque_N_m"][i, k]
            wt = T / float(p.r_s)
            load = np.array([abs(wt) * math.tan(float(p.pressure)) / math.cos(float(p.helix)), wt])
            nrm = np.array(
                [hists["top_x_m"][i, k] + hists["bottom_x_m"][i, k], hists["top_y_m"][i, k] + hists["bottom_y_m"][i, k]]
            )
            ang = math.acos(load @ nrm / np.linalg.norm(load) / np.linalg.norm(nrm))
            assert abs(ang - math.atan(mu)) < 0.35 * math.atan(mu), ang
            # resisting torque: the radial friction μ N R_B plus the end face's, which acts nearer the
            # axis (at steady load, not while the planet slides along the wall)
            fn = hists["contact_force_N"][i, k]
            lo, hi = mu * (fn[0] + fn[1]) * R, mu * fn.sum() * R
            assert 0.97 * lo < hists["resisting_torque_N_m"][i, k] < 1.03 * hi
        # the tilt never exceeds the geometric limit of the clearance (plus the largest penetration)
        assert table["max_tilt_rad"][i] < math.asin(2 * (c + table["max_penetration_m"][i]) / L)
        assert table["impacts_top"][i] >= 1 and 0 < table["settle_time_after_reversal_s"][i] < 3e-3
