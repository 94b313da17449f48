"""The generic mechanism layer: per-joint tables with dotted paths of any depth, deprecated keys,
and the study (simulate + metrics + reference) that makes ``sensitivity`` and ``identify`` work
for every registered mechanism (the four-bar and the impact oscillator here)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import identify as I
from jaxclear import sensitivity as S
from jaxclear import spec as specmod
from jaxclear import study, sweep

BOTH = {
    "sweep": {"name": "both"},
    "model": {"clearance_joint": "both"},
    "integrator": {"t_end_s": 0.0005, "save_every": 50},
    "outputs": {"plots": False},
}


def test_each_clearance_joint_has_its_own_tables():
    d = {**BOTH, "joints": {"crank_rod": {"clearance_m": 2e-4, "laws": {"restitution": 0.5}}}}
    sp = specmod.load(d, ["joints.rod_slider.profile.wear_depth_m=0.0"])
    assert sp["joints"]["crank_rod"] == {"clearance_m": 2e-4, "laws": {"restitution": 0.5}}
    assert sp["joints"]["rod_slider"] == {"profile": {"wear_depth_m": 0.0}}
    pl = sweep.plan(specmod.load({**d, "axes": {"joints.rod_slider.clearance_m": {"values": [1e-4, 3e-4]}}}))
    p = sweep.batch_params(
        specmod.load({**d, "axes": {"joints.rod_slider.clearance_m": {"values": [1e-4, 3e-4]}}}), pl, np.arange(2)
    )
    # leading axes (variant, joint) with joints = (crank_rod, rod_slider)
    np.testing.assert_array_equal(np.asarray(p.joint.clearance), [[2e-4, 1e-4], [2e-4, 3e-4]])
    np.testing.assert_array_equal(np.asarray(p.joint.restitution), [[0.5, 0.9], [0.5, 0.9]])
    assert pl.paths == ("joints.rod_slider.clearance_m",)
    assert specmod.column_name(pl.paths[0]) == "rod_slider.clearance_m"


@pytest.mark.parametrize(
    "bad,words",
    [
        ({"joints": {"crank_rod": {"clearance_m": 0.02}}}, ["joints.crank_rod.clearance_m = 0.02", "did you give mm"]),
        (
            {"joints": {"crank_rod": {"clearence_m": 1e-4}}},
            ["unknown key joints.crank_rod.clearence_m", "did you mean 'clearance_m'"],
        ),
        ({"joints": {"crank_rodd": {"clearance_m": 1e-4}}}, ["unknown table [joints.crank_rodd]", "crank_rod"]),
        ({"joints": {"crank_rod": {"profile": {"kind": "ellipse"}}}}, ["unknown key joints.crank_rod.profile.kind"]),
        (
            {"joints": {"crank_rod": {"journal_radius_m": 4e-4}}},
            ["joints.crank_rod.clearance_m = 0.0005", "not smaller than", "joints.crank_rod.journal_radius_m = 0.0004"],
        ),
    ],
)
def test_bad_per_joint_values_name_the_deep_path(bad, words):
    with pytest.raises(specmod.SpecError) as ei:
        sweep.plan(specmod.load({**BOTH, **bad}))
    for w in words:
        assert w in str(ei.value), str(ei.value)


def test_per_joint_tables_need_several_clearance_joints():
    with pytest.raises(specmod.SpecError, match=r"unknown table \[joints\]"):
        specmod.load({"joints": {"rod_slider": {"clearance_m": 1e-4}}})


def test_a_joints_own_value_equal_to_the_shared_one_changes_nothing():
    base = sweep.run(BOTH, log=None, compile_cache=False)[0]
    own = sweep.run(
        {**BOTH, "joints": {"crank_rod": {"clearance_m": 5e-4}, "rod_slider": {"laws": {"restitution": 0.9}}}},
        log=None,
        compile_cache=False,
    )[0]
    for k in ("peak_contact_force_N", "peak_contact_force_crank_rod_N", "peak_slider_acceleration_m_per_s2"):
        np.testing.assert_array_equal(own[k], base[k])
    # and a smaller clearance at the crank-rod joint alone changes that joint's peak
    small = sweep.run({**BOTH, "joints": {"crank_rod": {"clearance_m": 1e-4}}}, log=None, compile_cache=False)[0]
    assert small["peak_contact_force_crank_rod_N"][0] != base["peak_contact_force_crank_rod_N"][0]
    assert small["finite"].all()


def test_deprecated_keys_still_work_with_a_warning():
    with pytest.warns(FutureWarning, match="model.crank_speed_rad_per_s is deprecated: use model.crank_speed_rpm"):
        sp = specmod.load({"model": {"mechanism": "four_bar", "crank_speed_rad_per_s": 50 * np.pi}})
    assert sp["model"]["crank_speed_rpm"] == pytest.approx(1500.0, rel=1e-15)
    with pytest.warns(FutureWarning, match="contact.restitution is deprecated: use laws.restitution"):
        sp = specmod.load({"model": {"mechanism": "impact_oscillator"}, "contact": {"restitution": 0.5}})
    assert sp["laws"]["restitution"] == 0.5 and "contact" not in sp


def test_keys_a_mechanism_does_not_use_are_refused():
    with pytest.raises(specmod.SpecError, match="model.crank_mass_kg is not a key .* driving torque"):
        specmod.load({"model": {"crank_mass_kg": 0.3}})  # the crank is driven: its mass does nothing
    with pytest.raises(specmod.SpecError, match="model.slider_inertia_kg_m2 .* never rotates"):
        specmod.load({"model": {"slider_inertia_kg_m2": 1e-4}})
    for d, key in (
        ({"model": {"mechanism": "impact_oscillator"}, "integrator": {"revolutions": 2.0}}, "integrator.revolutions"),
        (
            {"model": {"mechanism": "plate_compactor"}, "integrator": {"continuous_contact_s": 1e-3}},
            "integrator.continuous_contact_s",
        ),
    ):
        with pytest.raises(specmod.SpecError, match=f"unknown key {key}"):
            specmod.load(d)


def _central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


FOUR_BAR = {
    "sweep": {"name": "fb_sens"},
    "model": {"mechanism": "four_bar", "ramp_time_s": 0.0},
    "integrator": {"t_end_s": 0.002, "save_every": 100},
    "outputs": {"plots": False},
}


@pytest.mark.slow  # forward-mode and plain compiles of the four-bar: ~9 s on 2 cores
def test_four_bar_sensitivity_matches_central_differences():
    keys = ["joint.clearance_m", "laws.restitution"]
    res = S.compute(specmod.load(FOUR_BAR), keys, mode="forward")
    assert res["metric_names"][2] == "peak_follower_angular_acceleration_rad_per_s2" and res["finite"].all()
    sp = specmod.load(FOUR_BAR)
    pl = sweep.plan(sp)
    f = jax.jit(S.metric_function(sp, pl, keys))
    x0 = np.array([5e-4, 0.9])
    i = res["metric_names"].index("smooth_peak_contact_force_N")
    # the same primal from two compilations (with and without tangents, fused differently):
    # round-off over 2000 steps, 2.6e-12 measured with verlet_predicted (the leapfrog's < 1e-12)
    assert float(f(jnp.asarray(x0), {})[i]) == pytest.approx(
        res["metrics"]["smooth_peak_contact_force_N"][0], rel=1e-11
    )
    for j, k in enumerate(keys):
        h = 1e-4 * x0[j]
        e = np.zeros(2)
        e[j] = 1.0
        fd = _central(lambda x: float(f(jnp.asarray(x0 + (x - x0[j]) * e), {})[i]), x0[j], h)
        ad = res["gradients"][S.column("smooth_peak_contact_force_N", k)][0]
        assert ad == pytest.approx(fd, rel=2e-3), k


OSC = {
    "sweep": {"name": "osc_sens"},
    "model": {"mechanism": "impact_oscillator", "gap_m": 0.5},
    "integrator": {"steps_per_period": 800, "transient_periods": 0, "record_periods": 3, "save_every": 20},
    "outputs": {"plots": False},
}


@pytest.mark.slow  # sensitivity, metric and Levenberg–Marquardt compiles: ~10 s on 2 cores
def test_impact_oscillator_sensitivity_and_identification():
    """Without impacts (a wide gap) and with the friction sliding throughout, the peak displacement is
    smooth in the force amplitude: AD = central FD; then the amplitude is identified from a
    synthetic displacement history."""
    sp = specmod.load(OSC)
    res = S.compute(sp, ["model.force_amplitude_N"])
    assert tuple(res["metric_names"]) == ("peak_contact_force_N", "peak_displacement_m", "friction_work_J")
    assert res["metrics"]["peak_contact_force_N"][0] == 0.0  # no impact: the gap is wide
    f = jax.jit(S.metric_function(sp, sweep.plan(sp), ["model.force_amplitude_N"]))
    fd = _central(lambda a: float(f(jnp.asarray([a]), {})[1]), 20.0, 1e-3)
    ad = res["gradients"][S.column("peak_displacement_m", "model.force_amplitude_N")][0]
    assert ad > 0 and ad == pytest.approx(fd, rel=1e-4)

    d = {
        **OSC,
        "outputs": {"histories": ["displacement_m"], "plots": False},
        "identify": {
            "signal": "displacement_m",
            "optimizer": "lm",
            "iterations": 8,
            "starts": 1,
            "parameters": {"model.force_amplitude_N": {"bounds": [5.0, 40.0], "initial": 14.0}},
        },
        "truth": {"model.force_amplitude_N": 20.0},
    }
    out = I.fit(specmod.load(d))
    assert out["parameters"]["model.force_amplitude_N"]["value"] == pytest.approx(20.0, rel=1e-4)


def test_identify_signal_must_be_a_channel_of_the_mechanism():
    d = {
        **OSC,
        "identify": {"parameters": {"model.force_amplitude_N": {"bounds": [5.0, 40.0]}}},
        "truth": {"model.force_amplitude_N": 20.0},
    }
    with pytest.raises(specmod.SpecError, match=r"'slider_acceleration_m_per_s2' \(the default\).*displacement_m"):
        I.fit(specmod.load(d))


def test_one_reference_sample_count_for_the_whole_sweep():
    """The amplification reference of a variant does not depend on the chunk it falls in."""
    # 1000 rpm alone in the second chunk (with the padding) against 1000 rpm sharing its chunk
    # with the fastest variant; one chunk size for both sweeps, so both run one compiled chunk
    d = {
        "sweep": {"name": "ref"},
        "integrator": {"t_end_s": 0.0004, "chunk_size": 2, "save_every": 50},
        "outputs": {"plots": False, "histories": []},
        "axes": {"model.crank_speed_rpm": {"values": [5000.0, 3000.0, 1000.0]}},
    }
    pl = sweep.plan(specmod.load(d))
    assert pl.cfg.ideal_samples == pl.mech.n_ideal_samples(5000.0 * (2 * np.pi / 60), pl.t_end)
    table = sweep.run(d, log=None, compile_cache=False)[0]
    alone = sweep.run(
        {**d, "axes": {"model.crank_speed_rpm": {"values": [1000.0, 5000.0]}}},
        log=None,
        compile_cache=False,
    )[0]
    np.testing.assert_allclose(table["ideal_peak_reaction_N"][[2, 0]], alone["ideal_peak_reaction_N"], rtol=1e-13)
    assert study.of(specmod.load(d), pl).primary == "smooth_peak_contact_force_N"


def test_an_override_of_an_axis_is_refused_and_structural_axes_say_what_to_do():
    with pytest.raises(specmod.SpecError, match=r"--set joint.clearance_m: joint.clearance_m is an axis"):
        specmod.load("sweeps/default.toml", ["joint.clearance_m=0.009"])
    with pytest.raises(specmod.SpecError, match=r"--set model.crank_speed_rpm: .*is an axis"):  # deprecated name too
        specmod.load(
            {"model": {"mechanism": "four_bar"}, "axes": {"crank_speed_rpm": {"values": [1000.0, 1500.0]}}},
            ["model.crank_speed_rad_per_s=100.0"],
        )
    with pytest.raises(specmod.SpecError, match=r"laws.normal is structural .*one spec per value .*hunt_crossley"):
        specmod.load({"axes": {"laws.normal": {"values": [1.0]}}})
