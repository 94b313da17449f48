"""The static contact-law exponent (``mechanisms.static_law_exponent``): when a spec fixes
laws.exponent for every variant and joint, the laws compute δ^1.5 as δ·√δ; the same results as
the pow path, and the traced path wherever the exponent varies or is differentiated."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (float64)
from jaxclear import joints, sweep
from jaxclear import spec as specmod
from jaxclear.mechanisms import slider_crank as sc
from jaxclear.mechanisms import static_law_exponent

# one jit per Config (a frozen dataclass of static values, hence a static argument)
_SIM = jax.jit(sc.simulate, static_argnums=0)


def test_static_only_when_one_untraced_value():
    sp = specmod.load("sweeps/default.toml")
    assert static_law_exponent(sp) == 1.5 and sweep.plan(sp).cfg.joint.exponent == 1.5
    assert static_law_exponent({**sp, "_traced": ("laws.exponent",)}) is None
    sp2 = specmod.load({**sp, "axes": {"laws.exponent": {"values": [1.4, 1.5]}}})
    assert static_law_exponent(sp2) is None and sweep.plan(sp2).cfg.joint.exponent is None
    two = specmod.load("sweeps/two_joints_slider_crank.toml")
    assert static_law_exponent(two) == 1.5
    own = specmod.load({**two, "joints": {"crank_rod": {"laws": {"exponent": 1.3}}}})
    assert static_law_exponent(own) is None
    assert static_law_exponent({**two, "_traced": ("joints.crank_rod.laws.exponent",)}) is None


@pytest.mark.slow  # two slider-crank programs compiled (static and pow path): an equality to rounding
def test_slider_crank_static_exponent_equals_the_pow_path():
    """Impacts and contact over 2000 steps: the same forces to rounding; a params exponent that
    differs from the static one is a NaN run (flagged non-finite), never a silently wrong one."""
    cfg = sc.Config(dt=1e-6, n_saves=20, save_every=100, outputs=("contact_force_N",))
    fast = dataclasses.replace(cfg, joint=dataclasses.replace(cfg.joint, exponent=1.5))
    p = sc.benchmark_params(clearance=0.25e-3, restitution=0.9)
    run = _SIM  # the static path and the NaN run below share one compile
    r0, r1 = run(cfg, p), run(fast, p)
    f0 = np.asarray(r0.history["contact_force_N"])
    assert float(np.max(f0)) > 100.0
    np.testing.assert_allclose(np.asarray(r1.history["contact_force_N"]), f0, rtol=1e-9, atol=1e-9 * np.max(f0))
    bad = p._replace(joint=p.joint._replace(exponent=jnp.asarray(1.4)))
    assert not bool(run(fast, bad).acc.finite) and bool(r1.acc.finite)
    assert isinstance(fast.joint, joints.JointConfig)
