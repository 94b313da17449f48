"""model.mechanism = "rotor_two_bearings": a rigid rotor in two 3D cylindrical clearance bearings.
Static unbalance: cylindrical whirl (journals in phase), couple unbalance: conical (in opposition);
both synchronous (whirl rate = spin speed) with the journals on the bushing wall."""

import math

import numpy as np
import pytest

from jaxclear import spec as specmod, sweep


def _spec():
    return {"sweep": {"name": "rotor_test"}, "model": {"mechanism": "rotor_two_bearings"},
            "integrator": {"dt_s": 5e-6, "t_end_s": 0.04, "save_every": 10},
            "outputs": {"histories": ["journal_a_x_m", "journal_a_y_m", "journal_b_x_m", "journal_b_y_m"],
                        "plots": False},
            "axes": {"model.static_unbalance_kg_m": {"values": [2e-3, 0.0], "zip": "u"},
                     "model.couple_unbalance_kg_m2": {"values": [0.0, 5e-4], "zip": "u"}}}


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
