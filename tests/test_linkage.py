"""model.mechanism = "linkage": a linkage declared in the spec (finite particle method)."""

import copy
import functools
import tomllib
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxclear import spec as specmod
from jaxclear import sweep

ROOT = Path(__file__).resolve().parents[1]
SC = tomllib.loads((ROOT / "sweeps" / "linkage_slider_crank_flexible.toml").read_text())


def _short(raw, **over):
    """The flexible slider-crank spec over 6 ms at 1000 rpm (reached in 5 ms), rigid rod, the rod's
    mass and inertia kept exactly (the paper's lumping would double the rod's inertia)."""
    raw = copy.deepcopy(raw)
    raw.pop("axes", None)
    raw["model"].update(crank_speed_rpm=1000.0, ramp_time_s=0.005, exact_lumping=True)
    raw["integrator"].update(t_end_s=0.006, dt_s=4e-8, save_every=500, steady_revolutions=0.05)
    raw["outputs"] = {"histories": ["contact_force_N", "slider_x_m"], "plots": False}
    for k, v in over.items():
        specmod.apply_override(raw, f"{k}={v}")
    return raw


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r["links"]["rod"].update(points=["B", "D"]), "unknown point 'D'"),
        (lambda r: r["links"]["rod"].update(points=["B", "B"]), "its two points are the same"),
        (lambda r: r["joints"].pop("B"), "both end at point 'B' but no joint there joins them"),
        (
            lambda r: (
                r["points"].update(D={"x_m": 0.3, "y_m": 0.0}, E={"x_m": 0.4, "y_m": 0.0}),
                r["links"].update(extra={"points": ["D", "E"], "elements": 1}),
            ),
            "'extra' is connected to nothing",
        ),
        (lambda r: r["model"].update(crank=""), "model.crank"),
        (lambda r: r["joints"]["O"].update(type="revolute", members=["crank", "rod"], point="O"), "joins"),
        (lambda r: r["joints"]["C"].update(members=["rod"]), "journal, bearing"),
        (lambda r: r["joints"]["C"].update(members=["rod", "piston"]), "'piston' is neither a link"),
        (lambda r: r["bodies"]["slider"].update(point="Z"), "bodies.slider.point"),
        (lambda r: r["model"].update(amplified="link:wheel"), "model.amplified"),
        (lambda r: r["joints"]["O"].update(type="hinge"), "joints.O.type"),
        (lambda r: r["joints"]["guide"].pop("direction_deg"), "a slider needs its guide direction"),
    ],
)
def test_bad_topology_gets_a_clear_error(edit, message):
    raw = copy.deepcopy(SC)
    edit(raw)
    with pytest.raises(specmod.SpecError, match=message):
        specmod.load(raw)


def test_a_crank_not_pinned_to_the_ground_and_a_zero_length_link_are_refused():
    raw = copy.deepcopy(SC)
    raw["model"]["crank_pivot"] = "B"
    with pytest.raises(specmod.SpecError, match="pinned to the ground"):
        specmod.load(raw)
    raw = _short(SC, **{"points.C.x_m": 0.05})  # C on top of B: the rod has no length
    with pytest.raises(specmod.SpecError, match="links.rod.*length"):
        sweep.plan(specmod.load(raw))


def test_a_step_above_the_critical_step_is_refused_with_the_bound():
    with pytest.raises(specmod.SpecError, match=r"critical step .* use dt_s <= "):
        sweep.plan(specmod.load(_short(SC, **{"integrator.dt_s": 1e-6})))


def test_every_float_is_sweepable_by_its_dotted_path():
    raw = _short(SC)
    raw["axes"] = {
        "links.rod.youngs_modulus_Pa": {"values": [2.07e13, 2.07e11]},
        "joints.C.clearance_m": {"values": [0.25e-3, 0.5e-3]},
        "points.B.y_m": {"values": [0.0]},
    }
    pl = sweep.plan(specmod.load(raw))
    assert pl.n_variants == 4
    assert "links.rod.youngs_modulus_Pa" in pl.paths and "joints.C.clearance_m" in pl.paths


@pytest.mark.slow
def test_linkage_slider_crank_matches_the_hand_derived_one_and_a_batch_its_single_runs(tmp_path):
    # The stiff linkage slider-crank (rod E = 2.07e13 Pa, the crank one element) against the
    # slider_crank module with the same bodies and joint: the start-up peak contact force within
    # 3 % (the FPM links are elastic; measured 0.65 % by tests/test_fpm.py's engine-level twin).
    raw = _short(SC)
    raw["axes"] = {"joints.C.clearance_m": {"values": [0.25e-3, 0.5e-3]}}
    table, summary, _ = sweep.run(specmod.load(raw), log=lambda *a, **k: None)
    hand = sweep.run(
        specmod.load(
            {
                "model": {"mechanism": "slider_crank", "crank_speed_rpm": 1000.0, "ramp_time_s": 0.005},
                "integrator": {"dt_s": 1e-6, "t_end_s": 0.006, "steady_revolutions": 0.05},
                "outputs": {"histories": [], "plots": False},
                "axes": {"joint.clearance_m": {"values": [0.25e-3, 0.5e-3]}},
            }
        ),
        log=lambda *a, **k: None,
    )[0]
    ratio = np.asarray(table["peak_contact_force_N"]) / np.asarray(hand["peak_contact_force_N"])
    assert np.all(np.abs(ratio - 1.0) < 0.03), ratio
    # the batch of two equals each variant run alone
    for i, c in enumerate((0.25e-3, 0.5e-3)):
        one, _, _ = sweep.run(specmod.load(_short(SC, **{"joints.C.clearance_m": c})), log=lambda *a, **k: None)
        np.testing.assert_allclose(one["peak_contact_force_N"][0], table["peak_contact_force_N"][i], rtol=1e-10)
    # the ideal twin's reference: the same for both clearances (it has none), finite and positive
    ref = np.asarray(table["ideal_peak_reaction_N"])
    assert ref[0] == ref[1] and np.isfinite(ref[0]) and ref[0] > 0
    assert summary["mechanism"] == "linkage" and summary["reference"].startswith("the ideal twin")


@pytest.mark.slow
def test_gradients_of_the_smooth_peak_contact_force_match_finite_differences():
    # d(smooth peak contact force)/d(clearance) and /d(rod Young's modulus) over the first impact
    # (at ~1.36 ms), forward mode against central differences with small steps: the impact
    # memory is captured at the first contact step, so wide steps straddle a jump of that step
    # (h = 3e-8 m gives a 9 % different quotient; h = 1e-9 m agrees with autodiff to 1e-5).
    from jaxclear import study

    raw = _short(SC, **{"integrator.t_end_s": 0.0016})
    raw["integrator"]["steady_revolutions"] = 0.01
    spec = specmod.load(raw)
    keys = ["joints.C.clearance_m", "links.rod.youngs_modulus_Pa"]
    st, f = study.metric_function(spec, sweep.plan(spec), keys)
    i = st.metrics.index("smooth_peak_contact_force_N")
    g = jax.jit(lambda th: f(th, {})[i])
    theta = jax.numpy.array([0.5e-3, 2.07e13])
    ad = np.asarray(jax.jacfwd(g)(theta))
    for k, h, tol in ((0, 1e-9, 1e-4), (1, 2.07e9, 3e-3)):
        e = np.zeros(2)
        e[k] = h
        fd = float((g(theta + e) - g(theta - e)) / (2 * h))
        assert abs(ad[k] / fd - 1.0) < tol, (k, ad[k], fd)
    assert ad[0] > 0  # a larger clearance hits harder at start-up


def test_link_loads_are_columns_and_channels():
    # the rod's largest bending moment and axial force over the run (metrics) and at each save
    # (histories): the maxima of the saved channel never exceed the per-step peak
    table, hist = _loaded_run(("O", "B"), rest=False)
    for col, ch in (
        ("peak_bending_moment_rod_N_m", "rod_bending_moment_N_m"),
        ("peak_axial_force_rod_N", "rod_axial_force_N"),
    ):
        peak, saved = float(table[col][0]), float(np.max(hist[ch][0]))
        assert 0 < saved <= peak * (1 + 1e-12), (col, saved, peak)


ELEMENT_LOADS = ("axial_force_N", "bending_moment_start_N_m", "bending_moment_end_N_m")
P_PULL, Q_LOAD, R_CRANK, N_EL = 100.0, 10.0, 0.05, 4
ANGLES = ["crank_angle_rad", "link_crank_angle_rad", "link_rod_angle_rad", "rod_angle_rad", "O_x_m", "O_y_m"]
ANGLES += ["B_x_m", "B_y_m"]
PER_ELEMENT = {
    f"{link}_element_{k}_{q}": (link, k, q)
    for link in ("crank", "rod")
    for k in range(1, N_EL + 1)
    for q in ELEMENT_LOADS
}
WHOLE = [f"{link}_{q}" for link in ("crank", "rod") for q in ("bending_moment_N_m", "axial_force_N")]


@functools.cache
def _loaded_run(crank_points, rest):
    """(metrics, histories) of the slider-crank with steel links of four elements each (the
    paper's lumping, no gravity, dt = 3e-7 s over 1 ms, a save every 250 steps) and every element,
    link, angle and point channel.  ``rest``: held still (1 rpm after a 1000 s ramp), damped, a
    pull P along +x at C and a load Q along −y at B (the statics); else driven (1000 rpm reached
    in 5 ms) and loaded at B by 2000 N along −y.  Speeds, loads and damping are traced values:
    both runs of one crank declaration share one compiled function."""
    values = (
        {
            "model.crank_speed_rpm": 1.0,
            "model.ramp_time_s": 1000.0,
            "model.damping_per_s": 2.0e4,
            "points.B.force_y_N": -Q_LOAD,
            "points.C.force_x_N": P_PULL,
        }
        if rest
        else {"points.B.force_y_N": -2000.0}
    )
    raw = _short(
        SC,
        **{
            "model.exact_lumping": "false",
            "model.gravity_m_per_s2": 0.0,
            "links.crank.elements": N_EL,
            "links.crank.youngs_modulus_Pa": 2.07e11,
            "links.rod.youngs_modulus_Pa": 2.07e11,
            "integrator.t_end_s": 0.001,
            "integrator.dt_s": 3e-7,
            "integrator.save_every": 250,  # 14 saves: 3500 steps, the end at 1.05 ms
            **values,
        },
    )
    raw["links"]["crank"]["points"] = list(crank_points)
    raw["outputs"]["histories"] = list(PER_ELEMENT) + WHOLE + ANGLES
    table, _, hist = sweep.run(specmod.load(raw), log=lambda *a, **k: None)
    return table, hist


@pytest.mark.parametrize("crank_points", [["O", "B"], pytest.param(["B", "O"], marks=pytest.mark.slow)])
def test_element_loads_of_a_loaded_linkage_at_rest_match_statics(crank_points):
    # The slider-crank held still (1 rpm after a 1000 s ramp), no gravity, damped, four steel
    # elements per link, a pull P along +x at C and a load Q along −y at B.  The rod (pinned at
    # B, its journal free in the bushing) is a two-force member: N = +P, M = 0 in every element.
    # The crank is a cantilever clamped at O (the driven rotation): N = +P and M = EI dθ/ds linear
    # from −Q r at O to 0 at B (hogging), i.e. −Q(r − s) at a distance s from O along O→B, and
    # +Q s at a distance s from B when the crank is declared B→O (elements numbered from the
    # first point, s and so the moment's sign turned round).
    P, Q, r, n = P_PULL, Q_LOAD, R_CRANK, N_EL
    _, hist = _loaded_run(tuple(crank_points), rest=True)
    last = {c: float(hist[c][0][-1]) for c in PER_ELEMENT}
    forward = crank_points[0] == "O"
    for k in range(1, n + 1):
        s0, s1 = (k - 1) * r / n, k * r / n  # the element's ends' distances from the first point
        moment = (lambda s: -Q * (r - s)) if forward else (lambda s: Q * s)
        assert abs(last[f"crank_element_{k}_bending_moment_start_N_m"] - moment(s0)) < 1e-3 * Q * r, k
        assert abs(last[f"crank_element_{k}_bending_moment_end_N_m"] - moment(s1)) < 1e-3 * Q * r, k
        for link in ("crank", "rod"):
            assert abs(last[f"{link}_element_{k}_axial_force_N"] / P - 1.0) < 1e-3, (link, k)
        for end in ("start", "end"):
            assert abs(last[f"rod_element_{k}_bending_moment_{end}_N_m"]) < 1e-4 * Q * r, k
    # the per-link channels are the largest magnitudes over the elements, at every save
    for link in ("crank", "rod"):
        h = {
            q: np.stack([np.asarray(hist[f"{link}_element_{k}_{q}"][0]) for k in range(1, n + 1)])
            for q in ELEMENT_LOADS
        }
        np.testing.assert_allclose(
            np.max(np.abs(h["axial_force_N"]), axis=0), hist[f"{link}_axial_force_N"][0], rtol=1e-12
        )
        bend = np.max(np.maximum(np.abs(h["bending_moment_start_N_m"]), np.abs(h["bending_moment_end_N_m"])), axis=0)
        np.testing.assert_allclose(bend, hist[f"{link}_bending_moment_N_m"][0], rtol=1e-12)


@pytest.mark.parametrize(
    "channel, message",
    [
        (
            "rod_element_5_axial_force_N",
            r"'rod_element_5_axial_force_N': link 'rod' has 4 element\(s\).*1\.\.4 from its first point 'B'",
        ),
        ("crank_element_0_bending_moment_start_N_m", r"link 'crank' has 1 element\(s\)"),
        ("rod_element_02_bending_moment_end_N_m", r"'rod_element_02_bending_moment_end_N_m': link 'rod' has 4"),
        ("rod_element_1_shear_force_N", r"outputs\.histories entry 'rod_element_1_shear_force_N'.*allowed"),
        ("wheel_element_1_axial_force_N", r"outputs\.histories entry 'wheel_element_1_axial_force_N'.*allowed"),
    ],
)
def test_an_unknown_or_out_of_range_element_channel_is_refused_naming_it(channel, message):
    raw = _short(SC)
    raw["outputs"]["histories"] = ["rod_element_4_axial_force_N", "crank_element_1_bending_moment_end_N_m", channel]
    with pytest.raises(specmod.SpecError, match=message):
        specmod.load(raw)
    raw["outputs"]["histories"] = raw["outputs"]["histories"][:2]
    specmod.load(raw)  # the element channels that exist are accepted


def test_element_channels_are_plotted_with_their_units():
    from jaxclear import plots

    assert plots._name_unit("rod_element_2_bending_moment_start_N_m") == ("rod element 2 bending moment start", "N·m")
    assert plots._name_unit("rod_element_2_axial_force_N") == ("rod element 2 axial force", "N")


def _flores_raw():
    """The shipped linkage (crank at 5000 rpm) started at speed, over the first impact (0.4 ms)."""
    raw = copy.deepcopy(SC)
    raw.pop("axes")
    raw["model"].update(ramp_time_s=0.0, exact_lumping=True)
    raw["integrator"].update(t_end_s=4e-4, dt_s=4e-8, save_every=500, steady_revolutions=0.01)
    raw["outputs"] = {"histories": ["rod_angular_velocity_rad_per_s"], "plots": False}
    return raw


def test_a_start_at_speed_starts_every_particle_at_the_rigid_mechanisms_velocity():
    # model.ramp_time_s = 0, crank at top dead centre (along +x): the crank's particles at ω × x,
    # the rod's at v_B + ω_rod × (x − x_B) with ω_rod = −r ω / L, the slider at rest; checked on
    # the start state itself (nothing compiled), the run is test_a_start_at_speed_reproduces_...
    from jaxclear.mechanisms import linkage

    with pytest.warns(UserWarning, match="a start at speed loads the elastic links suddenly"):
        spec = specmod.load(_flores_raw())
    pl = sweep.plan(spec)
    p = sweep.params_from_flat(spec, pl.cfg, sweep.flat_values(spec), jax.numpy.float64, pl.t_end)
    q, v, _ = linkage._initial_state(pl.cfg, p)
    x, vn, wr = np.asarray(q.nodes), np.asarray(v.nodes), np.asarray(v.rotations)
    w, r, L = 5000 * 2 * np.pi / 60, 0.05, 0.12
    w_rod, x_b = -r * w / L, np.array([r, 0.0])
    turn = lambda om, d: om * np.array([-d[1], d[0]])  # ω ẑ × d
    lay = pl.cfg.layout
    tol = 1e-9 * w * r
    for link, om, v_of in (
        ("crank", w, lambda xn: turn(w, xn)),
        ("rod", w_rod, lambda xn: turn(w, x_b) + turn(w_rod, xn - x_b)),
    ):
        for node, rot in lay.particles(link):
            np.testing.assert_allclose(vn[node], v_of(x[node]), rtol=0, atol=tol, err_msg=link)
            assert abs(wr[rot] - om) < 1e-9 * w, (link, wr[rot], om)
    node, rot = lay.body("slider")
    np.testing.assert_allclose(vn[node], 0.0, atol=tol)
    assert abs(wr[rot]) < 1e-9 * w


@pytest.mark.slow  # a 10000-step stiff linkage run and the hand-derived model (physics, kept in full)
def test_a_start_at_speed_reproduces_the_flores_first_impact():
    # model.ramp_time_s = 0: every particle starts at the rigid ideal mechanism's velocity (crank
    # at 5000 rpm at top dead centre, journal centred), as slider_crank does; the first impact
    # (at ~0.23 ms) of the stiff linkage against the hand-derived model (46.8 kN).
    raw = _flores_raw()
    table, _, hist = sweep.run(specmod.load(raw), log=lambda *a, **k: None)
    # the rod starts at the ideal rate −r ω / L (crank along +x)
    w_rod = -0.05 * 5000 * 2 * np.pi / 60 / 0.12
    assert abs(float(hist["rod_angular_velocity_rad_per_s"][0][0]) / w_rod - 1.0) < 0.01
    hand = sweep.run(
        specmod.load(
            {
                "model": {"mechanism": "slider_crank"},
                "integrator": {"dt_s": 2.5e-7, "t_end_s": 4e-4, "steady_revolutions": 0.01},
                "outputs": {"histories": [], "plots": False},
            }
        ),
        log=lambda *a, **k: None,
    )[0]
    ratio = float(table["peak_contact_force_N"][0] / hand["peak_contact_force_N"][0])
    assert abs(ratio - 1.0) < 0.02, ratio


def test_a_crank_pinned_at_both_ends_cannot_move():
    raw = copy.deepcopy(SC)
    raw["joints"]["Bg"] = {"type": "ground", "point": "B", "members": ["crank"]}
    raw["joints"]["B"]["members"] = ["crank", "rod"]
    with pytest.raises(specmod.SpecError, match="cannot move"):
        specmod.load(raw)


@pytest.mark.slow
def test_linkage_four_bar_matches_the_four_bar_module_over_the_start_up():
    # The shipped FPM four-bar (links of four_bar, exact lumping, 'rigid' E = 2.07e13 Pa) against
    # the hand-derived four_bar over a 5 ms start-up (2 ms ramp to 1500 rpm) at c = 0.5 mm: the
    # peak follower angular acceleration and contact force within 5 % (measured 1-3 %; the FPM
    # links are elastic and their start-up vibration is part of the response).
    raw = tomllib.loads((ROOT / "sweeps" / "linkage_four_bar.toml").read_text())
    raw.pop("axes")
    raw["model"]["ramp_time_s"] = 0.002
    raw["integrator"].update(t_end_s=0.005, save_every=2000, steady_revolutions=0.05)
    raw["outputs"] = {"histories": [], "plots": False}
    table, _, _ = sweep.run(specmod.load(raw), log=lambda *a, **k: None)
    hand, _, _ = sweep.run(
        specmod.load(
            {
                "model": {"mechanism": "four_bar", "ramp_time_s": 0.002},
                "integrator": {"dt_s": 2.5e-7, "t_end_s": 0.005, "steady_revolutions": 0.05},
                "outputs": {"histories": [], "plots": False},
            }
        ),
        log=lambda *a, **k: None,
    )
    for col in ("peak_contact_force_N", "peak_follower_angular_acceleration_rad_per_s2"):
        r = float(table[col][0] / hand[col][0])
        assert abs(r - 1.0) < 0.05, (col, r)


def test_a_joints_own_clearance_above_its_journal_radius_is_refused_naming_it():
    raw = copy.deepcopy(SC)
    raw["joint"]["journal_radius_m"] = 0.005
    raw["axes"] = {"joints.C.clearance_m": {"values": [1e-4, 0.006]}}
    with pytest.raises(specmod.SpecError, match=r"joints\.C\.clearance_m = 0\.006 .* joint 'C' \(variant 1\)"):
        sweep.plan(specmod.load(raw))


def test_external_forces_and_torques_reach_their_particles():
    # points.<p>.force_x_N / force_y_N act on the first member's particle at the point (the rod's
    # end at B), links.<l>.torque_N_m on the link's first particle; the engine's response to such
    # loads is tested in tests/test_fpm.py (a cantilever's PL³/3EI and P(L − x)).
    from jaxclear import fpm

    raw = _short(SC, **{"points.B.force_y_N": -25.0, "points.C.force_x_N": 40.0, "links.rod.torque_N_m": 0.5})
    spec = specmod.load(raw)
    pl = sweep.plan(spec)
    p = sweep.params_from_flat(spec, pl.cfg, sweep.flat_values(spec), jax.numpy.float64, pl.t_end)
    lay = pl.cfg.layout
    F, T = np.asarray(p.fpm.forces), np.asarray(p.fpm.torques)
    node_b, node_c = lay.particles("crank")[-1][0], lay.particles("rod")[-1][0]
    assert F[node_b].tolist() == [0.0, -25.0] and F[node_c].tolist() == [40.0, 0.0]
    assert abs(F).sum() == 65.0 and T[lay.particles("rod")[0][1]] == 0.5 and abs(T).sum() == 0.5
    assert fpm.node_of(lay, lay.particles("rod")[0][1]) == node_b  # B is one node for crank and rod


def test_a_linkage_without_a_clearance_joint_is_refused():
    raw = copy.deepcopy(SC)
    raw["joints"]["C"]["type"] = "revolute"
    with pytest.raises(specmod.SpecError, match="at least one clearance joint"):
        specmod.load(raw)


def test_exact_lumping_of_a_crank_too_light_in_rotation_is_refused_before_compiling():
    # the shipped crank (0.3 kg, 0.05 m, 1e-5 kg·m²) exact-lumped over 4 elements needs I > m L² (n − 2)/
    # (12 n (1 − κ)) = 3.47e-5 kg·m²: refused at load (no LinAlgError from the critical step), naming the
    # link, its values, the bound and the remedies; also where only a swept variant falls below it
    raw = _short(SC, **{"links.crank.elements": 4})
    message = (
        r"links\.crank: model\.exact_lumping = true cannot keep its mass and inertia.*mass_kg = 0\.3, "
        r"inertia_kg_m2 = 1e-05, length 0\.05 m .*elements = 4 need inertia_kg_m2 > m L² \(n − 2\)/\(12 n \(1 − κ\)\) "
        r"= 3\.472e-05.*links\.crank\.elements <= 2, or model\.exact_lumping = false"
    )
    with pytest.raises(specmod.SpecError, match=message):
        specmod.load(raw)
    raw["links"]["crank"]["inertia_kg_m2"] = 1e-4
    raw["axes"] = {"links.crank.inertia_kg_m2": {"values": [1e-4, 1e-5]}}
    with pytest.raises(specmod.SpecError, match=r"links\.crank: .*\(variant 1: links\.crank\.inertia_kg_m2 = 1e-05\)"):
        specmod.load(raw)
    raw.pop("axes")
    specmod.load(raw)  # 1e-4 > 3.47e-5: feasible
    specmod.load(_short(SC, **{"links.crank.elements": 4, "model.exact_lumping": "false"}))  # the paper's lumping


def test_a_particle_without_a_positive_mass_is_refused_by_the_step_check_naming_it(monkeypatch):
    # the critical step's own guard (behind the validation): a negative particle mass is named,
    # link, element and end, instead of numpy's LinAlgError
    from jaxclear.mechanisms import linkage

    monkeypatch.setattr(linkage, "_check_lumping", lambda spec: None)
    with pytest.raises(
        specmod.SpecError,
        match=r"links\.crank, element 1 of 4: the mass of its end particle towards "
        r"the link's first point is -0\.0213.*\(variant 0\)",
    ):
        sweep.plan(specmod.load(_short(SC, **{"links.crank.elements": 4})))


def test_a_link_named_crank_gives_the_crank_angle_and_its_chord_angle_on_separate_channels():
    # crank_angle_rad stays the crank angle (the driven particle: the ramp's θ = ω t²/(2 T) exactly);
    # the link's chord angle is link_crank_angle_rad (atan2 of B − O). The crank, flexible (steel,
    # four elements) and loaded at B, bends: the two differ, and the run goes through.
    from jaxclear.mechanisms import linkage

    doc = linkage.output_channels(_short(SC))
    assert doc["crank_angle_rad"].startswith("crank angle θ") and "link_crank_angle_rad" in doc["crank_angle_rad"]
    assert doc["link_crank_angle_rad"].startswith("crank chord angle")
    _, hist = _loaded_run(("O", "B"), rest=False)
    h = {k: np.asarray(hist[k][0]) for k in ANGLES}
    t = np.arange(1, len(h["crank_angle_rad"]) + 1) * 250 * 3e-7
    np.testing.assert_allclose(h["crank_angle_rad"], 1000 * np.pi / 30 * t**2 / (2 * 0.005), rtol=1e-9)
    chord = np.arctan2(h["B_y_m"] - h["O_y_m"], h["B_x_m"] - h["O_x_m"])
    np.testing.assert_allclose(h["link_crank_angle_rad"], chord, atol=1e-12)
    assert np.max(np.abs(h["link_crank_angle_rad"] - h["crank_angle_rad"])) > 1e-4  # the crank bends
    np.testing.assert_array_equal(h["link_rod_angle_rad"], h["rod_angle_rad"])


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda r: r["points"].update(journal={"x_m": 0.3}),
            r"channel 'journal_x_m' is produced by both the clearance joints and points\.journal.*rename points\.journal",
        ),
        (
            lambda r: r["points"].update(slider={"x_m": 0.3}),
            r"channel 'slider_x_m' is produced by both points\.slider and bodies\.slider",
        ),
        (
            lambda r: (
                r["links"].update(rod_element_1=r["links"].pop("rod")),
                r["joints"]["B"].update(members=["crank", "rod_element_1"]),
                r["joints"]["C"].update(members=["rod_element_1", "slider"]),
            ),
            r"links\.rod_element_1: a link name may not contain '_element_'.*rename the link, e\.g\. 'rod_el_1'",
        ),
    ],
)
def test_a_channel_name_two_entries_would_produce_is_refused_naming_both(edit, message):
    raw = _short(SC)
    edit(raw)
    with pytest.raises(specmod.SpecError, match=message):
        specmod.load(raw)


def test_the_link_angle_alias_cannot_shadow_another_links_chord_angle():
    from jaxclear.mechanisms import linkage

    with pytest.raises(
        specmod.SpecError, match=r"channel 'link_rod_angle_rad' is produced by both links\.rod and links\.link_rod"
    ):
        linkage._check_channel_names({"links": {"rod": {}, "link_rod": {}}, "points": {}, "bodies": {}})
    linkage._check_channel_names({"links": {"crank": {}, "rod": {}}, "points": {"O": {}}, "bodies": {"slider": {}}})
