"""model.mechanism = "rotor_two_bearings": a rigid rotor in two 3D cylindrical clearance bearings.
Static unbalance: cylindrical whirl (journals in phase), couple unbalance: conical (in opposition);
both synchronous (whirl rate = spin speed) with the journals on the bushing wall."""

import functools
import math

import numpy as np
import pytest

from jaxclear import spec as specmod
from jaxclear import sweep


def _spec():
    return {
        "sweep": {"name": "rotor_test"},
        "model": {"mechanism": "rotor_two_bearings"},
        "integrator": {"dt_s": 5e-6, "t_end_s": 0.04, "save_every": 10},
        "outputs": {"histories": ["journal_a_x_m", "journal_a_y_m", "journal_b_x_m", "journal_b_y_m"], "plots": False},
        "axes": {
            "model.static_unbalance_kg_m": {"values": [2e-3, 0.0], "zip": "u"},
            "model.couple_unbalance_kg_m2": {"values": [0.0, 5e-4], "zip": "u"},
        },
    }


def test_spec_error_names_the_field():
    with pytest.raises(specmod.SpecError, match=r"joint.length_m = 0.3 must be smaller than model.bearing_span_m"):
        specmod.load({**_spec(), "joint": {"length_m": 0.3}})
    with pytest.raises(specmod.SpecError, match=r"laws.impact_velocity = 'first'; allowed: episode_max, onset"):
        specmod.load({**_spec(), "laws": {"impact_velocity": "first"}})


def test_impact_velocity_reaches_the_joints():
    from jaxclear.mechanisms import rotor_two_bearings as rt

    absent = specmod.load(_spec())
    assert "impact_velocity" not in absent["laws"]  # optional: the hash of specs without it is kept
    assert rt.make_config(absent, 0.01).joint.impact_velocity == "episode_max"
    onset = specmod.load({**_spec(), "laws": {"impact_velocity": "onset"}})
    assert rt.make_config(onset, 0.01).joint.impact_velocity == "onset"
    assert specmod.spec_hash(onset) != specmod.spec_hash(absent)


@pytest.mark.slow  # 8000 steps of two variants through the sweep layer: ~9 s on 2 cores
def test_static_and_couple_unbalance_whirl_cylindrical_and_conical(tmp_path):
    table, summary, hists = sweep.run(_spec(), out=tmp_path / "r", log=None, compile_cache=False)
    assert np.all(table["finite"])
    rho = table["whirl_correlation"]
    assert rho[0] > 0.95 and rho[1] < -0.95, rho
    c = 50e-6
    t = np.asarray(sweep.load(tmp_path / "r").t_s)
    omega = 3000 * 2 * math.pi / 60
    half = len(t) // 2
    for i in range(2):
        for j in ("a", "b"):
            x, y = hists[f"journal_{j}_x_m"][i, half:], hists[f"journal_{j}_y_m"][i, half:]
            r = np.hypot(x, y)
            # static: the journal rides on the wall; conical: its mid-plane sits inside by the tilt
            assert (c < r.min() and r.max() < c + 1e-5) if i == 0 else (0.8 * c < r.min() and r.max() < c), r.min()
            rate = np.polyfit(t[half:], np.unwrap(np.arctan2(y, x)), 1)[0]
            assert abs(rate / omega - 1) < 0.02, rate  # synchronous forward whirl
        assert table["impacts_bearing_a"][i] >= 1 and table["mean_friction_torque_N_m"][i] > 0


def _base_spec(amplitudes, f_hz=50.0, t_end=0.08):
    return {
        "sweep": {"name": "rotor_base"},
        "model": {
            "mechanism": "rotor_two_bearings",
            "speed_rpm": 0.0,
            "static_unbalance_kg_m": 0.0,
            "base_frequency_hz": f_hz,
        },
        "integrator": {"dt_s": 1e-5, "t_end_s": t_end, "save_every": 2},
        "outputs": {"histories": ["base_y_m", "bearing_force_y_N", "journal_a_y_m", "journal_b_y_m"], "plots": False},
        "axes": {"model.base_amplitude_m": {"values": list(amplitudes)}},
    }


def test_base_excitation_spec_errors_and_hash():
    from jaxclear.mechanisms import rotor_two_bearings as rt

    model = {"mechanism": "rotor_two_bearings"}
    with pytest.raises(specmod.SpecError, match=r"model.base_amplitude_m is given but model.base_frequency_hz is not"):
        specmod.load({"model": {**model, "base_amplitude_m": 1e-4}})
    with pytest.raises(specmod.SpecError, match=r"model.base_frequency_hz is given but model.base_amplitude_m is not"):
        specmod.load({"model": {**model, "base_frequency_hz": 50.0}})
    with pytest.raises(
        specmod.SpecError, match=r"model.base_amplitude_m = -0.0001 is outside the allowed range \[0, 1\]"
    ):
        specmod.load({"model": {**model, "base_amplitude_m": -1e-4, "base_frequency_hz": 50.0}})
    with pytest.raises(specmod.SpecError, match=r"model.base_frequency_hz = -50.0 is outside the allowed range"):
        specmod.load({"model": {**model, "base_amplitude_m": 1e-4, "base_frequency_hz": -50.0}})
    with pytest.raises(specmod.SpecError, match=r"resolves model.base_frequency_hz = 20000 by 10 steps a period"):
        sweep.plan(specmod.load({"model": {**model, "base_amplitude_m": 1e-9, "base_frequency_hz": 2e4}}))
    # swept amplitude with a given frequency: the moving-frame path; absent: the clamped frame, hash kept
    assert rt.make_config(specmod.load(_base_spec([0.0, 1e-4])), 0.01).base
    absent = specmod.load(_spec())
    assert "base_amplitude_m" not in absent["model"] and not rt.make_config(absent, 0.01).base
    from pathlib import Path

    shipped = specmod.load(Path(__file__).resolve().parent.parent / "sweeps" / "rotor_two_bearings.toml")
    assert specmod.spec_hash(shipped) == "d109db6ee179570c"  # before the base keys were declared


_RAW = {
    "model": {"mechanism": "rotor_two_bearings", "static_unbalance_kg_m": 2e-3, "misalignment_y_deg": 0.05},
    "integrator": {"t_end_s": 2e-3},
}


def _run_rotor(cfg, p, step, s0):
    """(x, quat, v, w, (normal forces, offsets A, offsets B) every 10 steps) over 400 steps."""
    import jax
    import jax.numpy as jnp

    from jaxclear import integrate

    def run():
        save = lambda o: (jnp.concatenate([o[0].normal_force, o[1].normal_force]), o[0].offset, o[1].offset)
        s, _, h = integrate.simulate(step, p, s0, jnp.zeros(()), lambda a, o, i: a, 40, 10, save=save)
        return s.q.x, s.q.quat, s.v.v, s.v.w, h

    return jax.tree_util.tree_leaves(jax.jit(run)())


@functools.cache
def _library_run(model_items=()):
    """(cfg.base, ``_run_rotor`` of the library's step) for _RAW with the extra model keys
    ``model_items``; cached: the clamped run serves both tests below (one compile)."""
    from jaxclear.mechanisms import rotor_two_bearings as rt

    sp = specmod.load({**_RAW, "model": {**_RAW["model"], **dict(model_items)}})
    cfg = rt.make_config(sp, 2e-3)
    p = rt.params(sp, cfg, sweep.flat_values(sp), np.float64, 2e-3)
    return cfg.base, _run_rotor(cfg, p, rt.make_step(cfg), rt.initial_state(cfg, p))


@pytest.mark.slow  # two compiles of the 3D rotor step (written out, library): ~12 s on 2 cores
def test_clamped_frame_is_todays_model_bit_for_bit():
    """Without the base keys the step is the clamped-frame model (today's loads written out) bit
    for bit."""
    import jax.numpy as jnp

    from jaxclear import cylindrical_joint as cj
    from jaxclear import rigid3d
    from jaxclear.mechanisms import rotor_two_bearings as rt

    t_end = 2e-3
    sp = specmod.load(_RAW)
    cfg = rt.make_config(sp, t_end)
    assert not cfg.base
    p = rt.params(sp, cfg, sweep.flat_values(sp), np.float64, t_end)

    def loads(p, q, v, memory, t):  # the pre-base-excitation model written out
        z3, eye = jnp.zeros(3, q.x.dtype), jnp.eye(3, dtype=q.x.dtype)
        R = rigid3d.quat_to_matrix(q.quat[0])
        kin = cj.Kinematics(z3, eye, z3, z3, q.x[0], R, v.v[0], rigid3d.rotate(q.quat[0], v.w[0]))
        fa, ma = cj.evaluate(cfg.joint, rt._joint_params(p, 0), kin, memory[:4])
        fb, mb = cj.evaluate(cfg.joint, rt._joint_params(p, 1), kin, memory[4:])
        k, w2 = p.motor_stiffness, p.speed**2
        c = 2.0 * p.motor_damping * jnp.sqrt(k * p.inertia_polar)
        e = 2.0 * jnp.arctan2(q.quat[0, 3], q.quat[0, 0]) - p.speed * t
        e = jnp.arctan2(jnp.sin(e), jnp.cos(e))
        grav = jnp.stack([0.0 * p.gravity, -p.gravity * p.mass, 0.0 * p.gravity])
        F = fa.force_b + fb.force_b + p.unbalance * w2 * R[:, 0] + grav
        M = fa.moment_b + fb.moment_b + p.couple * w2 * R[:, 1] + (-k * e - c * (v.w[0, 2] - p.speed)) * R[:, 2]
        return F[None], M[None], jnp.concatenate([ma, mb]), (fa, fb)

    mass, inertia = p.mass[None], jnp.stack([p.inertia_transverse, p.inertia_transverse, p.inertia_polar])[None]
    s0 = rigid3d.initial_state(
        rigid3d.make_accel(mass, inertia, loads),
        p,
        rigid3d.Pose(jnp.zeros((1, 3)), jnp.array([[1.0, 0.0, 0.0, 0.0]])),
        rigid3d.Twist(jnp.zeros((1, 3)), jnp.stack([0.0, 0.0, p.speed])[None]),
        jnp.zeros(8),
    )
    ref = _run_rotor(cfg, p, rigid3d.make_step(cfg.scheme, mass, inertia, loads, cfg.dt), s0)
    base, ours = _library_run()  # the same spec (_RAW) and t_end: the library's clamped run
    assert not base
    assert float(np.max(ref[4])) > 10.0  # the journals have hit the bushings
    for a, b in zip(ref, ours):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # the moving-frame compile (the clamped run is shared with the test above): ~4 s
def test_frame_at_rest_on_the_moving_frame_path_is_the_clamped_model():
    """The base keys given with A = 0 (the moving-frame path at rest) equal the clamped model to
    rounding."""
    out = []
    for model in ({}, {"base_amplitude_m": 0.0, "base_frequency_hz": 50.0}):
        base, run = _library_run(tuple(model.items()))
        assert base == bool(model)
        out.append(run)
    assert float(np.max(out[0][4])) > 10.0
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9 * max(float(np.max(np.abs(a))), 1e-30))


@pytest.mark.slow  # 8000 steps of two variants through the sweep layer: ~8 s on 2 cores
def test_base_excitation_bearing_force_follows_the_frame_and_lifts_off_above_g(tmp_path):
    """Frame y_b = A sin(2π f t) at f = 50 Hz (far below the rotor-on-contact resonance, ~1 kHz),
    the rotor not spinning, no unbalance, resting on the bottom under gravity.  A (2π f)² = g/2:
    it follows the frame, always in contact, and the bearings' force along y is m (g + ÿ_b) =
    m g − m A (2π f)² sin(2π f t); A (2π f)² = 2 g: it lifts off and lands each period."""
    f_hz = 50.0
    om = 2 * math.pi * f_hz
    g, m = 9.81, 3.930428  # the default rotor
    amps = [0.5 * g / om**2, 2.0 * g / om**2]
    table, summary, hists = sweep.run(_base_spec(amps, f_hz), out=tmp_path / "r", log=None, compile_cache=False)
    assert np.all(table["finite"])
    t = np.asarray(sweep.load(tmp_path / "r").t_s)
    last = t >= t[-1] - 2.0 / f_hz  # the last two periods: settled after the first drop (~30 ms)
    for i, a in enumerate(amps):
        np.testing.assert_allclose(hists["base_y_m"][i], a * np.sin(om * t), rtol=0, atol=1e-12 * a)
    fy = np.asarray(hists["bearing_force_y_N"])
    X = np.stack([np.ones(last.sum()), np.sin(om * t[last]), np.cos(om * t[last])], 1)
    mean, s, c = np.linalg.lstsq(X, fy[0, last], rcond=None)[0]
    assert abs(mean / (m * g) - 1) < 0.01, mean
    assert abs(-s / (m * amps[0] * om**2) - 1) < 0.03 and abs(c) < 0.03 * m * amps[0] * om**2, (s, c)
    assert fy[0, last].min() > 0.4 * m * g  # never off the bottom
    # offsets relative to the moving bushings: the journals stay on the bottom (y ≈ −c) while the frame moves ±A
    clear = 50e-6
    for j in ("a", "b"):
        assert np.all(np.abs(np.asarray(hists[f"journal_{j}_y_m"])[0, last] + clear) < 2e-6)
    # above g: in flight (no force) part of each period, and a landing (a new contact) each period
    on = np.abs(fy[1, last]) > 1e-9
    landings = int(np.sum(on[1:] & ~on[:-1]))
    assert 0.05 < 1.0 - on.mean() and landings >= 2, (on.mean(), landings)
    assert table["impacts_bearing_a"][1] > table["impacts_bearing_a"][0]
