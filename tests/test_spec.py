"""Spec language: validation messages, zipped axes, sampling methods, Fourier axes, ``sweep.estimate``
and ``jaxclear plan`` (tiny sizes: dt 2e-6, t_end 1e-3, chunk_size 2)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from jaxclear import cli, sweep
from jaxclear import spec as specmod

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "sweep": {"name": "tiny"},
    "integrator": {"dt_s": 2e-6, "t_end_s": 1.0e-3, "save_every": 10, "chunk_size": 2},
    "outputs": {"plots": False},
    "axes": {"joint.clearance_m": {"values": [0.5e-3, 0.1e-3, 0.02e-3]}},
}
TINY_TOML = """
[sweep]
name = "tiny"
[integrator]
dt_s = 2e-6
t_end_s = 1.0e-3
save_every = 10
chunk_size = 2
[outputs]
plots = false
[axes]
"joint.clearance_m" = { values = [0.5e-3, 0.1e-3, 0.02e-3] }
"""
FOURIER = {"profile": {"kind": "fourier", "n_points": 72}, "integrator": {"t_end_s": 1e-4}}


def _error(spec):
    with pytest.raises(specmod.SpecError) as ei:
        sweep.plan(specmod.load(spec))
    return str(ei.value)


@pytest.mark.parametrize(
    "bad, words",
    [
        # unknown keys / tables / choices, with did-you-mean
        ({"profile": {"n_point": 72}}, ["profile.n_point", "did you mean 'n_points'"]),
        ({"profile": {"fourier_a2": 1e-5}}, ["profile.fourier_a2", "did you mean 'fourier_a2_m'"]),
        ({"sampling": {"method": "lhc"}}, ["sampling.method", "'lhc'", "did you mean 'lhs'", "random, lhs"]),
        ({"integrator": {"scheme": "leapfrg"}}, ["integrator.scheme", "did you mean 'leapfrog'"]),
        ({"outputs": {"histories": ["contact_force"]}}, ["outputs.histories", "did you mean 'contact_force_N'"]),
        (
            {"axes": {"joint.clearence_m": {"values": [1e-4]}}},
            ["axes.joint.clearence_m", "did you mean 'joint.clearance_m'"],
        ),
        # wrong types: ints vs floats vs strings vs bools
        ({"profile": {"n_points": 72.5}}, ["profile.n_points", "72.5", "an integer"]),
        ({"profile": {"refine": "yes"}}, ["profile.refine", "'yes'", "true/false"]),
        ({"joint": {"clearance_m": "0.5mm"}}, ["joint.clearance_m", "'0.5mm'", "a number"]),
        ({"model": {"crank_speed_rpm": True}}, ["model.crank_speed_rpm", "True", "a number"]),
        ({"laws": {"normal": 3}}, ["laws.normal", "3", "a string"]),
        ({"sampling": {"n": 10.0}}, ["sampling.n", "10.0", "an integer"]),
        ({"outputs": {"histories": "contact_force_N"}}, ["outputs.histories", "'contact_force_N'", "a list"]),
        ({"profile": {"fourier_a_m": [0.0, "1e-5"]}}, ["profile.fourier_a_m", "'1e-5'", "list of numbers"]),
        # detectable unit mistakes
        ({"joint": {"clearance_m": 0.5}}, ["joint.clearance_m = 0.5", ">= 0.01", "did you give mm?"]),
        (
            {"joint": {"journal_radius_m": 4e-3, "clearance_m": 5e-3}},
            ["joint.clearance_m = 0.005", "not smaller than joint.journal_radius_m = 0.004", "did you give mm?"],
        ),
        ({"joint": {"journal_radius_m": 10.0}}, ["joint.journal_radius_m = 10.0", "did you give mm?"]),
        ({"model": {"rod_length_m": 120.0}}, ["model.rod_length_m = 120.0", "did you give mm?"]),
        ({"model": {"crank_speed_rpm": 0.5}}, ["model.crank_speed_rpm = 0.5", "< 1", "rev/s"]),
        ({"laws": {"youngs_modulus_Pa": 207.0}}, ["laws.youngs_modulus_Pa = 207.0", "GPa"]),
        (
            {"axes": {"joint.clearance_m": {"values": [5e-4, 0.25]}}},
            ["axes.joint.clearance_m.values", "joint.clearance_m = 0.25", "did you give mm?"],
        ),
        # physically invalid values
        ({"joint": {"clearance_m": -1e-4}}, ["joint.clearance_m = -0.0001", "allowed range (0, inf]"]),
        ({"laws": {"restitution": 1.5}}, ["laws.restitution = 1.5", "allowed range (0, 1]"]),
        ({"model": {"rod_length_m": 0.04}}, ["model.rod_length_m = 0.04", "must exceed model.crank_length_m = 0.05"]),
        (
            {"laws": {"friction_v0_m_per_s": 1e-2}},
            ["laws.friction_v1_m_per_s", "must exceed laws.friction_v0_m_per_s = 0.01"],
        ),
        (
            {"integrator": {"dt_s": 1e-4, "t_end_s": 1e-3}},
            ["integrator.dt_s = 0.0001", "exceeds the stability bound", "verlet_predicted"],
        ),
        ({"integrator": {"t_end_s": -1.0}}, ["integrator.t_end_s = -1.0", "allowed range [0, inf]"]),
        (
            {
                "sampling": {"n": 4},
                "integrator": {"t_end_s": 1e-4},
                "axes": {"joint.clearance_m": {"normal": [1e-5, 1e-3]}},
            },
            ["joint.clearance_m = -", "allowed range", "variant"],
        ),
        (
            {"profile": {"kind": "fourier", "fourier_a_m": [0.0, -8e-4]}, "integrator": {"t_end_s": 1e-4}},
            ["journal must be smaller than the bearing", "joint.journal_radius_m"],
        ),
        # integer ranges
        ({"profile": {"n_points": 4}}, ["profile.n_points = 4", "[8, 4096]"]),
        ({"profile": {"n_points": 5000}}, ["profile.n_points = 5000", "[8, 4096]"]),
        ({"profile": {"max_regions": 0}}, ["profile.max_regions = 0", "[1, 64]"]),
        ({"profile": {"max_regions": 65}}, ["profile.max_regions = 65", "[1, 64]"]),
        ({"integrator": {"save_every": 0}}, ["integrator.save_every = 0", "[1, "]),
        ({"integrator": {"chunk_size": -1}}, ["integrator.chunk_size = -1", "[0, "]),
        ({"sampling": {"seed": -1}}, ["sampling.seed = -1", "[0, "]),
        # axes
        (
            {"axes": {"joint.clearance_m": {"linspce": [1e-4, 2e-4, 3]}}},
            ["axes.joint.clearance_m", "'linspce'", "did you mean 'linspace'", "allowed: linspace"],
        ),
        (
            {"axes": {"joint.clearance_m": {"linspace": [1e-4, 2e-4, 3.0]}}},
            ["axes.joint.clearance_m.linspace", "3.0", "integer n"],
        ),
        (
            {"axes": {"joint.clearance_m": {"values": [1e-4], "logspace": [1e-4, 2e-4, 2]}}},
            ["axes.joint.clearance_m", "exactly one"],
        ),
        (
            {"axes": {"laws.restitution": {"normal": [0.9, 0.0]}}, "sampling": {"n": 2}},
            ["axes.laws.restitution.normal", "std must be > 0"],
        ),
        ({"axes": {"laws.restitution": {"uniform": [0.8, 0.9]}}}, ["sampling.n = 0", "laws.restitution"]),
        (
            {"axes": {"joint.clearance_m": {"values": [1e-4]}, "clearance_m": {"values": [2e-4]}}},
            ["axes.clearance_m", "already an axis"],
        ),
        ({"axes": {"profile.n_points": {"values": [8]}}}, ["profile.n_points", "cannot be swept"]),
        # zipped groups
        (
            {
                "axes": {
                    "joint.clearance_m": {"values": [1e-4, 2e-4, 3e-4], "zip": "g"},
                    "model.crank_speed_rpm": {"linspace": [1000, 5000, 4], "zip": "g"},
                }
            },
            ["zip group 'g'", "same length", "axes.joint.clearance_m: 3", "axes.model.crank_speed_rpm: 4"],
        ),
        (
            {
                "axes": {
                    "joint.clearance_m": {"values": [1e-4, 2e-4], "zip": "g"},
                    "model.crank_speed_rpm": {"values": [1000.0, 2000.0], "zip": "h"},
                }
            },
            ["axes.joint.clearance_m.zip = 'g'", "only this axis"],
        ),
        (
            {"sampling": {"n": 2}, "axes": {"laws.restitution": {"uniform": [0.8, 0.9], "zip": "g"}}},
            ["axes.laws.restitution.zip", "always drawn together"],
        ),
        (
            {"axes": {"joint.clearance_m": {"values": [1e-4, 2e-4], "zip": 1}}},
            ["axes.joint.clearance_m.zip = 1", "group name"],
        ),
        # Fourier harmonics need a Fourier bushing (profile points)
        (
            {"axes": {"profile.fourier_a2_m": {"values": [0.0, 1e-5]}}},
            ["axes.profile.fourier_a2_m", "profile.kind = 'fourier'", "'circle'"],
        ),
        (
            {"profile": {"kind": "wear_patch", "fourier_b3_m": 1e-5}},
            ["profile.fourier_b3_m = 1e-05", "profile.kind = 'fourier'"],
        ),
        (
            {"axes": {"profile.fourier_a9_m": {"values": [0.0]}}, "profile": {"kind": "fourier"}},
            ["axes.profile.fourier_a9_m", "unknown key"],
        ),
    ],
)
def test_each_class_of_bad_input_names_key_and_value(bad, words):
    msg = _error(bad)
    for w in words:
        assert w in msg, msg


def test_stability_error_shows_the_bound():
    msg = _error({"integrator": {"dt_s": 1e-4, "t_end_s": 1e-3}})
    bound = float(re.search(r"stability bound ([0-9.e+-]+) s", msg).group(1))
    assert 1e-7 < bound < 1e-4


def test_fourier_axis_outside_journal_names_the_variant():
    msg = _error({**FOURIER, "axes": {"profile.fourier_a2_m": {"values": [0.0, 1e-4, -6e-4]}}})
    assert "variant 2" in msg and "profile.fourier_a2_m = -0.0006" in msg and "smaller than the bearing" in msg


def test_zipped_groups_vary_together_and_cross_the_grid():
    sp = specmod.load(
        {
            "axes": {
                "laws.restitution": {"values": [0.8, 0.9]},
                "joint.clearance_m": {"values": [1e-4, 2e-4, 3e-4], "zip": "op"},
                "model.crank_speed_rpm": {"linspace": [1000, 3000, 3], "zip": "op"},
            }
        }
    )
    paths, vals = specmod.axes_values(sp)
    assert paths == ["laws.restitution", "joint.clearance_m", "model.crank_speed_rpm"]
    assert vals.shape == (6, 3)
    pairs = {(c, w) for _, c, w in vals}
    assert pairs == {(1e-4, 1000.0), (2e-4, 2000.0), (3e-4, 3000.0)}  # zipped, never crossed
    np.testing.assert_array_equal(vals[:, 0], [0.8] * 3 + [0.9] * 3)  # first factor slowest
    info = {a["name"]: a for a in specmod.axes_info(sp)}
    assert info["joint.clearance_m"]["zip"] == "op" and info["joint.clearance_m"]["count"] == 3
    # The group's place is its first member's: a grid axis written between members comes after.
    sp2 = specmod.load(
        {
            "axes": {
                "joint.clearance_m": {"values": [1e-4, 2e-4], "zip": "op"},
                "laws.restitution": {"values": [0.8, 0.85, 0.9]},
                "model.crank_speed_rpm": {"values": [1000.0, 2000.0], "zip": "op"},
            }
        }
    )
    paths2, vals2 = specmod.axes_values(sp2)
    assert paths2 == ["joint.clearance_m", "model.crank_speed_rpm", "laws.restitution"]
    np.testing.assert_array_equal(vals2[:, 0], [1e-4] * 3 + [2e-4] * 3)
    # Zipped group × random samples.
    sp3 = specmod.load(
        {
            "sampling": {"n": 4, "seed": 3},
            "axes": {
                "joint.clearance_m": {"values": [1e-4, 2e-4], "zip": "op"},
                "model.crank_speed_rpm": {"values": [1000.0, 2000.0], "zip": "op"},
                "laws.restitution": {"uniform": [0.8, 0.9]},
            },
        }
    )
    _, vals3 = specmod.axes_values(sp3)
    assert vals3.shape == (8, 3)
    np.testing.assert_array_equal(vals3[:4, 2], vals3[4:, 2])  # same samples at each grid point


def test_random_method_draws_are_unchanged():
    # sampling.method = "random" (the default): one rng.random(n) per random axis in order,
    # exactly as before methods existed (existing sweeps keep bit-identical variants).
    axes = {"joint.clearance_m": {"loguniform": [2e-5, 5e-4]}, "laws.restitution": {"uniform": [0.8, 0.95]}}
    _, v = specmod.axes_values(specmod.load({"sampling": {"n": 7, "seed": 11}, "axes": axes}))
    _, v2 = specmod.axes_values(specmod.load({"sampling": {"n": 7, "seed": 11, "method": "random"}, "axes": axes}))
    rng = np.random.default_rng(11)
    u0, u1 = rng.random(7), rng.random(7)
    np.testing.assert_array_equal(v[:, 0], np.exp(np.log(2e-5) + (np.log(5e-4) - np.log(2e-5)) * u0))
    np.testing.assert_array_equal(v[:, 1], 0.8 + (0.95 - 0.8) * u1)
    np.testing.assert_array_equal(v, v2)


def test_latin_hypercube_is_stratified_and_seeded():
    n = 64
    axes = {
        "laws.restitution": {"uniform": [0.5, 1.0]},
        "joint.clearance_m": {"loguniform": [1e-5, 1e-3]},
        "laws.friction_coefficient": {"uniform": [0.0, 0.1]},
    }
    sp = specmod.load({"sampling": {"n": n, "seed": 5, "method": "lhs"}, "axes": axes})
    _, v = specmod.axes_values(sp)
    strata = [
        np.floor((v[:, 0] - 0.5) / 0.5 * n),
        np.floor(np.log(v[:, 1] / 1e-5) / np.log(100.0) * n),
        np.floor(v[:, 2] / 0.1 * n),
    ]
    for s in strata:  # every stratum of every dimension holds exactly one sample
        np.testing.assert_array_equal(np.sort(s), np.arange(n))
    assert not np.array_equal(strata[0], strata[2])  # permuted independently per dimension
    _, again = specmod.axes_values(sp)
    np.testing.assert_array_equal(v, again)
    _, other = specmod.axes_values(specmod.load({"sampling": {"n": n, "seed": 6, "method": "lhs"}, "axes": axes}))
    assert not np.array_equal(v, other)
    u = specmod.latin_hypercube(10, 2, np.random.default_rng(0))
    assert u.shape == (10, 2) and np.all((u >= 0) & (u < 1))
    for j in range(2):
        np.testing.assert_array_equal(np.sort(np.floor(u[:, j] * 10)), np.arange(10))


def test_normal_axis_with_lhs():
    sp = specmod.load(
        {"sampling": {"n": 400, "seed": 1, "method": "lhs"}, "axes": {"laws.restitution": {"normal": [0.85, 0.02]}}}
    )
    _, v = specmod.axes_values(sp)
    assert abs(v[:, 0].mean() - 0.85) < 1e-3 and abs(v[:, 0].std() - 0.02) < 1e-3


def _radii(spec, variant):
    sp = specmod.load(spec)
    pl = sweep.plan(sp)
    p = sweep.batch_params(sp, pl, np.array([variant]))
    return np.linalg.norm(np.asarray(p.joint.points)[0], axis=-1), float(
        p.joint.journal_radius[0] + p.joint.clearance[0]
    )


def test_fourier_axes_change_the_profile_points():
    th = 2 * np.pi * np.arange(72) / 72
    spec = {
        **FOURIER,
        "axes": {"profile.fourier_a2_m": {"values": [0.0, 2e-5]}, "profile.fourier_b3_m": {"values": [-1e-5, 1e-5]}},
    }
    r, rb = _radii(spec, 3)  # a2 = 2e-5, b3 = 1e-5
    analytic = rb + 2e-5 * np.cos(2 * th) + 1e-5 * np.sin(3 * th)
    np.testing.assert_allclose(r, analytic, rtol=0, atol=1e-15)
    assert abs(r.min() - analytic.min()) < 1e-15 and r.min() < rb - 1e-5
    r0, _ = _radii(spec, 0)  # a2 = 0, b3 = -1e-5
    np.testing.assert_allclose(r0, rb - 1e-5 * np.sin(3 * th), rtol=0, atol=1e-15)
    # On top of the explicit lists and of the wear term; a [profile] scalar acts like a one-value axis.
    base = {
        "profile": {**FOURIER["profile"], "fourier_a_m": [0.0, 1e-5], "wear_depth_m": 1e-5, "wear_order": 2},
        "integrator": FOURIER["integrator"],
    }
    r_ax, _ = _radii({**base, "axes": {"profile.fourier_a2_m": {"values": [1e-5]}}}, 0)
    r_sc, _ = _radii({**base, "profile": {**base["profile"], "fourier_a2_m": 1e-5}}, 0)
    np.testing.assert_allclose(r_ax, rb + 0.5e-5 + (1e-5 + 1e-5 + 0.5e-5) * np.cos(2 * th), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(r_ax, r_sc)


def test_fourier_axes_with_lhs_shipped_family():
    sp = specmod.load(ROOT / "sweeps" / "wear_family.toml")
    pl = sweep.plan(sp)
    assert pl.n_variants == 32 and pl.cfg.joint.n_points == 72 and sp["sampling"]["method"] == "lhs"
    assert all(p.startswith("profile.fourier_") for p in pl.paths)
    p = sweep.batch_params(sp, pl, np.arange(pl.n_variants))
    r = np.linalg.norm(np.asarray(p.joint.points), axis=-1)
    assert np.all(np.ptp(r, axis=1) > 1e-6)  # every variant worn differently from a circle
    assert len({tuple(np.round(x, 12)) for x in r}) == 32


def test_estimate_on_a_tiny_spec():
    e = sweep.estimate(TINY, probe_steps=100)
    assert e["n_variants"] == 3 and e["chunk_size"] == 2 and e["n_chunks"] == 2 and e["padding"] == 1
    assert e["steps_per_variant"] == 500 and e["n_saves"] == 50 and e["dt_s"] == 2e-6
    assert abs(e["t_end_s"] - 1e-3) < 1e-12
    # chunk × saves × channels × float64: the 5 default channels and contact_force_block_max_N
    assert e["history_bytes_per_chunk"] == 2 * 50 * 6 * 8
    assert e["history_bytes"] == 3 * 50 * 6 * 8 and e["store_bytes"] > e["history_bytes"]
    assert e["params_bytes_per_chunk"] > 0 and e["memory_bytes_per_chunk"] > e["output_bytes_per_chunk"] > 0
    assert e["probe_steps"] == 100 and e["compile_s"] >= 0 and e["probe_run_s"] > 0
    assert e["run_s"] > 0 and e["total_s"] >= e["run_s"] and e["variant_steps_per_s"] > 0
    np.testing.assert_allclose(e["run_s"], e["probe_run_s"] * 5 * 2)  # 500/100 steps × 2 chunks
    assert e["axes"] == [
        {"name": "joint.clearance_m", "kind": "values", "count": 3, "zip": None, "min": 0.02e-3, "max": 0.5e-3}
    ]
    json.dumps(e)  # JSON-able for --json


def test_cli_plan(tmp_path, capsys):
    f = tmp_path / "tiny.toml"
    f.write_text(TINY_TOML)
    assert cli.main(["plan", str(f), "--probe-steps", "100"]) == 0
    out = capsys.readouterr().out
    assert "3 variants" in out and "joint.clearance_m" in out and "2 × 2 variants" in out
    assert "memory per chunk" in out and "compile" in out
    assert cli.main(["plan", str(f), "--json", "--no-probe", "--set", "integrator.chunk_size=3"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["n_variants"] == 3 and e["n_chunks"] == 1 and e["run_s"] is None
    assert cli.main(["plan", str(f), "--set", "joint.clearance_m=0.5", "--no-probe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxclear: error:") and "did you give mm?" in err
    assert cli.main(["plan", str(ROOT / "sweeps" / "wear_family.toml"), "--no-probe"]) == 0
    assert "32 variants" in capsys.readouterr().out
