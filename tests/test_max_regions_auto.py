"""profile.max_regions = "auto" (issue 22, part 1): one slot where the curvature test proves one
contact region at a time (contact.region_bound), the multi-region path elsewhere, one static
choice per sweep (sweep.plan), written to summary.json and `jaxclear plan`."""

import json

import jax
import numpy as np
import pytest

from jaxclear import contact, profiles, sweep
from jaxclear import spec as specmod
from jaxclear.spec import SpecError

R = 10e-3
# regions found for each pin centre, over a batch of centres (jitted once per shape)
_N_REGIONS = jax.jit(jax.vmap(lambda pts, c: contact.detect(pts, c, R, 16).n_regions, in_axes=(None, 0)))


def _raw(profile, axes=None, steps=1500, joint=None):
    """A short slider-crank run (dt 1 µs, 1500 steps) with a bushing ``profile``."""
    raw = {
        "model": {"crank_speed_rpm": 5000.0},
        "joint": {"journal_radius_m": R, "clearance_m": 0.5e-3, **(joint or {})},
        "profile": {"n_points": 72, **profile},
        "integrator": {"dt_s": 1e-6, "t_end_s": steps * 1e-6, "save_every": steps // 10},
        "outputs": {"histories": ["contact_force_N"], "plots": False},
    }
    if axes:
        raw["axes"] = axes
    return raw


def _run(raw):
    table, summary, hists = sweep.run(raw, log=None, compile_cache=False)
    return table, summary, hists


# ----------------------------------------------------------------------------- the curvature test
def test_ellipse_with_radius_of_curvature_above_the_journal_is_single():
    # ellipse 10.6 × 10.5 mm: ρ_min = b²/a = 10.40 mm > R_J = 10 mm
    b = contact.region_bound(profiles.ellipse(10.6e-3, 10.5e-3, 72), R)
    assert b.single and b.slots == 1 and b.needed == 1 and not b.concave
    assert b.rho_ratio == pytest.approx(10.5**2 / 10.6 / 10.0, rel=1e-3)
    assert "1 slot" in b.reason(72)


def test_curvature_estimate_is_conservative_and_orientation_free():
    # κ_up >= the exact a/b² at the vertex of the ellipse, for coarse and fine sampling
    for n in (36, 72, 144):
        for a, bb in ((10.6e-3, 10.5e-3), (14e-3, 10e-3)):
            p = np.asarray(profiles.ellipse(a, bb, n))
            assert np.max(contact.curvature(p)) < a / bb**2  # the 3-point value alone underestimates
            assert np.max(contact.curvature_bound(p)) >= a / bb**2
            np.testing.assert_allclose(contact.curvature(p[::-1]), contact.curvature(p)[::-1], rtol=1e-12)


@pytest.mark.parametrize(
    "name,pts",
    [
        ("3 lobes", profiles.fourier(10.5e-3, np.array([0.0, 0.0, 0.3e-3]), np.zeros(3), 72)),
        ("wear patch", profiles.wear_patch(10.5e-3, 0.3e-3, 0.0, np.deg2rad(30.0), 72)),
        ("ellipse 12 × 10.5 (ρ_min 9.19 mm)", profiles.ellipse(12e-3, 10.5e-3, 72)),
    ],
)
def test_profiles_that_can_hold_two_regions_are_not_declared_single(name, pts):
    b = contact.region_bound(pts, R)
    assert not b.single and 2 <= b.slots <= contact.REGION_CAP, name
    assert "multi-region" in b.reason(72)


@pytest.mark.parametrize(
    "pts",
    [
        profiles.fourier(10.5e-3, np.array([0.0, 0.0, 0.3e-3]), np.zeros(3), 72),
        profiles.wear_patch(10.5e-3, 0.3e-3, 0.0, np.deg2rad(30.0), 72),
    ],
)
def test_the_failing_test_is_not_a_false_alarm_and_the_bound_holds(pts):
    # brute force over pin positions (penetration below 0.1 mm): two regions do occur, never more
    # than the slots the bound asks for
    pts = np.asarray(pts)
    b = contact.region_bound(pts, R)
    cs = np.random.default_rng(0).uniform(-1.2e-3, 1.2e-3, (8000, 2))
    depth = R - np.min(np.linalg.norm(pts[None] - cs[:, None], axis=-1), axis=-1)
    # every position detected (one shape: one compile for both profiles), the deep ones then dropped
    n = np.asarray(_N_REGIONS(pts, cs))[depth < 1e-4]
    assert n.max() >= 2 and n.max() <= b.slots


def test_concave_points_count_as_more_regions():
    # a dent pushed into the bore (radius smaller there): concave around it
    th = np.asarray(profiles.angles(72))
    r = 10.5e-3 - 0.4e-3 * np.exp(-(((th - np.pi) / 0.15) ** 2))
    b = contact.region_bound(np.asarray(profiles.polar(r)), R)
    assert b.concave and not b.single and b.rho_ratio == -np.inf


def test_region_bound_refuses_bad_input():
    with pytest.raises(ValueError, match="points"):
        contact.region_bound(np.zeros((2, 2)), R)
    with pytest.raises(ValueError, match="journal_radius"):
        contact.region_bound(profiles.circle(10.5e-3, 72), -1.0)


def test_merge_folds_blocks():
    e = contact.region_bound(profiles.ellipse(10.6e-3, 10.5e-3, 72), R)
    lobes = contact.region_bound(profiles.fourier(10.5e-3, np.array([0.0, 0.0, 0.3e-3]), np.zeros(3), 72), R)
    m = e.merge(lobes, offset=5)
    assert not m.single and m.slots == lobes.slots and m.worst == 5 and m.count == 2


# ----------------------------------------------------------------------------- the spec key
def test_spec_key_values():
    assert specmod.load(_raw({"kind": "ellipse"}))["profile"]["max_regions"] == "auto"  # the default
    for bad, words in (
        (0, "[1, 64]"),
        (65, "[1, 64]"),
        ("four", '"auto" or an integer'),
        (True, '"auto" or an integer'),
        (2.0, '"auto" or an integer'),
    ):
        with pytest.raises(SpecError) as e:
            specmod.load(_raw({"kind": "ellipse", "max_regions": bad}))
        assert "profile.max_regions" in str(e.value) and words in str(e.value), str(e.value)


def test_plan_resolves_auto_once_for_the_sweep():
    ell = {"kind": "ellipse", "ellipse_ratio": 10.6 / 10.5}
    pl = sweep.plan(specmod.load(_raw(ell)))
    assert pl.cfg.joint.max_regions == 1 and "1 slot" in pl.cfg.joint.regions_choice
    # one lobed variant among near-circular ones: the whole sweep takes the multi-region path
    raw = _raw({"kind": "fourier", "wear_order": 3}, axes={"profile.wear_depth_m": {"values": [0.0, 1e-6, 0.6e-3]}})
    pl = sweep.plan(specmod.load(raw))
    assert pl.cfg.joint.max_regions >= 2 and "variant 2" in pl.cfg.joint.regions_choice
    # an integer is kept; the circle geometry is untouched
    assert sweep.plan(specmod.load(_raw({**ell, "max_regions": 4}))).cfg.joint.max_regions == 4
    assert sweep.plan(specmod.load(_raw({**ell, "max_regions": 4}))).cfg.joint.regions_choice == ""
    circ = sweep.plan(specmod.load(_raw({"kind": "circle"}))).cfg.joint
    assert circ.geometry == "circle" and circ.max_regions == 1 and circ.regions_choice == ""


def test_plan_cli_shows_the_choice(tmp_path, capsys):
    from jaxclear import cli

    f = tmp_path / "ell.toml"
    f.write_text('[profile]\nkind = "ellipse"\nellipse_ratio = 1.0095238095238095\nn_points = 72\n')
    assert cli.main(["plan", str(f), "--no-probe"]) == 0
    out = capsys.readouterr().out
    assert "contact regions: 1 slot" in out and 'max_regions = "auto"' in out
    assert cli.main(["plan", str(f), "--no-probe", "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["max_regions"] == 1 and e["max_regions_choice"].startswith("auto: 1 slot")


# ----------------------------------------------------------------------------- whole runs
def _same(a, b, keys=None):
    for k in keys or a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.shape == y.shape and x.dtype == y.dtype, k
        assert np.array_equal(x, y, equal_nan=True), (k, x, y)


@pytest.mark.slow
def test_auto_on_a_single_region_bushing_is_bit_identical_to_four_slots():
    # ellipse 10.6 × 10.5 mm (a mildly ovalised bore) around a 10 mm journal, two clearances
    prof = {"kind": "ellipse", "ellipse_ratio": 10.6 / 10.5}
    axes = {"joint.clearance_m": {"values": [0.5e-3, 0.3e-3]}}  # ρ_min 10.40 and 10.21 mm
    ta, sa, ha = _run(_raw(prof, axes))
    t4, s4, h4 = _run(_raw({**prof, "max_regions": 4}, axes))
    assert sa["max_regions"] == 1 and s4["max_regions"] == 4
    assert sa["max_regions_choice"].startswith("auto: 1 slot") and "max_regions_choice" not in s4
    assert np.all(np.asarray(ta["impacts"]) >= 1)  # it does touch
    _same(ta, t4)
    _same(ha, h4)


@pytest.mark.slow
def test_auto_on_a_lobed_bushing_keeps_every_region():
    # 3 lobes of 0.3 mm at 0.5 mm clearance: ρ_min ≈ 8.6 mm < R_J; the pin touches two lobes at once
    prof = {"kind": "fourier", "wear_order": 3}
    axes = {"profile.wear_depth_m": {"values": [0.6e-3, 0.8e-3]}}
    ta, sa, ha = _run(_raw(prof, axes, steps=3000))
    tf, sf, hf = _run(_raw({**prof, "max_regions": 16}, axes, steps=3000))  # the full pass
    assert 2 <= sa["max_regions"] <= contact.REGION_CAP and "multi-region" in sa["max_regions_choice"]
    seen = np.asarray(tf["max_contact_regions"])
    assert seen.max() >= 2  # several regions at once do occur
    assert seen.max() <= sa["max_regions"]  # ... and every one of them has a slot
    np.testing.assert_array_equal(np.asarray(ta["max_contact_regions"]), seen)
    for k in ("peak_contact_force_N", "impacts"):
        np.testing.assert_allclose(np.asarray(ta[k]), np.asarray(tf[k]), rtol=1e-12, err_msg=k)
    np.testing.assert_allclose(
        np.asarray(ha["contact_force_N"]), np.asarray(hf["contact_force_N"]), rtol=1e-12, atol=1e-9
    )


def test_every_joint_counts():
    # two clearance joints sharing the structural keys; only the crank–rod bushing is lobed (its own
    # wear depth): the sweep takes the multi-region path and the reason names that joint
    raw = _raw({"kind": "fourier", "wear_order": 3, "wear_depth_m": 1e-6})
    raw["model"]["clearance_joint"] = "both"
    raw["joints"] = {"crank_rod": {"profile": {"wear_depth_m": 0.6e-3}}}
    j = sweep.plan(specmod.load(raw)).cfg.joint
    assert j.max_regions >= 2 and "joint 'crank_rod'" in j.regions_choice, j.regions_choice
    raw["joints"] = {"crank_rod": {"profile": {"wear_depth_m": 2e-6}}}
    assert sweep.plan(specmod.load(raw)).cfg.joint.max_regions == 1
