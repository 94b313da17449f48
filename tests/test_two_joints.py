"""Several clearance joints at once (Zheng et al., §3.2, Fig. 9): the slider-crank with clearance at
the crank–rod and rod–slider joints against the rod–slider joint alone, on the run of Zheng et al.
(5000 rpm after a 0.024 s ramp, 0.096 s), through the two specs of sweeps/."""

import tomllib
from pathlib import Path

import numpy as np
import pytest

from jaxclear import sweep

ROOT = Path(__file__).resolve().parents[1]


def _run(name, clearance):
    raw = tomllib.loads((ROOT / "sweeps" / f"{name}.toml").read_text())
    raw["axes"] = {"joint.clearance_m": {"values": [clearance]}}
    raw["outputs"] = {"histories": [], "plots": False}
    table, _, _ = sweep.run(raw, log=None, compile_cache=False)
    return {k: np.asarray(v)[0] for k, v in table.items()}


@pytest.fixture(scope="module")
def runs():
    return _run("one_joint_slider_crank", 0.25e-3), _run("two_joints_slider_crank", 0.25e-3)


def test_two_joints_raise_the_peaks(runs):
    # Zheng et al.: "multiple clearance joints increase the peaks of the slider acceleration and of
    # the contact force considerably".  Measured at c = 0.25 mm: 8.72e4 -> 1.05e5 m/s² and
    # 1.36e4 -> 2.91e4 N over the last two revolutions.
    one, two = runs
    assert two["peak_slider_acceleration_steady_m_per_s2"] > 1.1 * one["peak_slider_acceleration_steady_m_per_s2"]
    assert two["peak_contact_force_steady_N"] > 1.5 * one["peak_contact_force_steady_N"]
    assert one["finite"] and two["finite"]


def test_journal_motion_is_classified_per_joint(runs):
    # Zheng et al.: with two clearance joints the rod–slider journal (joint 3) flies freely more and
    # over a wider range, the crank–rod journal (joint 2) stays mainly in contact.
    one, two = runs
    for nm in ("crank_rod", "rod_slider"):
        parts = [two[f"{m}_fraction_{nm}"] for m in ("free_flight", "impact", "continuous_contact")]
        assert all(0.0 <= x <= 1.0 for x in parts) and sum(parts) == pytest.approx(1.0, abs=1e-12)
    assert two["free_flight_fraction_rod_slider"] > two["free_flight_fraction_crank_rod"]
    assert two["continuous_contact_fraction_crank_rod"] > two["continuous_contact_fraction_rod_slider"]
    assert two["continuous_contact_fraction_crank_rod"] > 0.5
    assert two["free_flight_fraction_rod_slider"] > one["free_flight_fraction"]
