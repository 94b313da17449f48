"""The four-bar with a coupler–follower clearance joint (Zheng et al.): ideal kinematics and
inverse dynamics, the small-clearance limit, static equilibrium, and the sweep entry point."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (float64)
from jaxclear import joints, store, sweep
from jaxclear import spec as specmod
from jaxclear.mechanisms import _clearance
from jaxclear.mechanisms import four_bar as fb

# One cached jit (Config is a frozen dataclass: hashable, static): one compile per Config.
_sim = jax.jit(fb.simulate, static_argnums=0)
# The inverse dynamics as one program per shape of t (eagerly, its ~70 ops compile one by one)
_ideal = jax.jit(fb.ideal)


def test_ideal_loop_closes_and_rates_are_derivatives():
    p = fb.benchmark_params(ramp_time=0.02)
    t = np.linspace(0.0, 0.05, 20001)
    k = jax.vmap(lambda tt: fb.ideal_kinematics(p, tt))(jnp.asarray(t))
    psi = np.asarray(k["psi"])
    d = np.stack([0.12 + 0.10 * np.cos(psi), 0.10 * np.sin(psi)], -1)
    assert np.abs(np.asarray(k["C"]) - d).max() < 1e-14  # C = D: coupler end on the follower end
    assert np.abs(np.linalg.norm(np.asarray(k["C"] - k["B"]), axis=-1) - 0.12).max() < 1e-14
    for x, xd in (("psi", "psi_dot"), ("psi_dot", "psi_ddot"), ("phi", "phi_dot"), ("phi_dot", "phi_ddot")):
        y = np.unwrap(np.asarray(k[x])) if x in ("psi", "phi") else np.asarray(k[x])
        fd = np.gradient(y, t)[2:-2]
        ref = np.asarray(k[xd])[2:-2]
        m = np.abs(t[2:-2] - 0.02) > 1e-4  # θ̈ jumps at the end of the ramp
        assert np.abs(fd - ref)[m].max() < 2e-4 * np.abs(ref).max(), x


@pytest.mark.slow
def test_amplification_vanishes_as_the_clearance_closes():
    # The run of Zheng et al. (ramp to 50π rad/s over 0.12 s, 0.14 s): the amplification factors of
    # the last crank revolution fall towards 0 as c -> 0 (measured DE_F = 6.3, 0.61, 0.002 and
    # DE_α = 8.6, 0.90, 0.012 at c = 100, 5, 1 µm).  A sudden start at full speed rings the
    # contact instead (no convergence within a few ms), hence the full ramp.
    sp = {
        "model": {"mechanism": "four_bar"},
        "sweep": {"name": "fb_limit"},
        "outputs": {"plots": False, "histories": []},
        "axes": {"joint.clearance_m": {"values": [1e-4, 5e-6, 1e-6]}},
    }
    table, _, _ = sweep.run(sp, log=None, compile_cache=False)
    for col in ("daf_contact_force_steady", "daf_follower_angular_acceleration_steady"):
        de = table[col]
        assert de[0] > de[1] > abs(de[2]), (col, de)
        assert abs(de[2]) < 0.05, (col, de)
    assert table["ideal_peak_reaction_N"][0] == pytest.approx(510.2, rel=1e-3)


@pytest.mark.parametrize(
    "joint",
    [
        # one compile and 30 000 steps each (~3 s on 2 cores, ~6 s for the two joints of
        # coupler_ends): the default joint stays in the fast subset, the others are slow
        j if j == "coupler_follower" else pytest.param(j, marks=pytest.mark.slow)
        for j in sorted(fb.JOINTS)
    ],
)
def test_crank_at_rest_settles_on_the_static_reaction(joint):
    # Gravity only, crank held at θ₀: the journal drops onto the bearing, the impacts die out
    # (e = 0.3) and friction stops the journal rolling along the bearing wall (without it that
    # mode is an undamped pendulum); the total contact force then carries the static reaction
    # at each clearance joint of the inverse dynamics with zero rates (to O(c/L)).  The three
    # joints carry different static loads (0.86, 1.02, 2.39 N), so a force routed to the wrong
    # body or point fails.
    names = fb.JOINTS[joint]
    p = fb.benchmark_params(clearance=1e-5, crank_speed=0.0, ramp_time=0.0, restitution=0.3, friction_coefficient=0.3)
    p = p._replace(joint=_clearance.stacked(p.joint, len(names)))
    cfg = fb.Config(
        clearance_joint=joint,
        dt=1e-6,
        n_saves=30,
        save_every=1000,
        outputs=("contact_force_N",),
        joint=joints.JointConfig(friction="ambrosio"),
    )
    r = _sim(cfg, p)
    ide = _ideal(p, 0.0)
    for i, name in enumerate(names):
        static = float(ide[f"reaction_{name}"][0])
        others = [
            float(ide[f"reaction_{j}"][0])
            for j in ("coupler_follower", "crank_coupler", "follower_ground")
            if j != name
        ]
        assert min(abs(o / static - 1) for o in others) > 0.1
        f = np.asarray(r.history["contact_force_N"][:, i])
        assert 0.5 < static < 5.0  # link weights ~ 1.5 N + 1.8 N shared between the pivots
        assert int(r.acc.impacts[i]) >= 1
        assert abs(np.mean(f[-10:]) / static - 1) < 1e-3  # measured 2e-5 .. 4e-4
        assert np.all(np.abs(f[-10:] / static - 1) < 1e-2)  # measured 1e-3 .. 6e-3


@pytest.mark.parametrize("joint", ["crank_coupler", "follower_ground"])
def test_hanging_chain_under_the_ideal_reaction_moves_as_the_ideal_loop(joint):
    # A cut at `joint` leaves a two-link chain (virtual work, fb._chain2); loaded by the ideal
    # reaction at that joint (Newton per link, fb.ideal) it must have the closed loop's
    # angular accelerations, during the ramp and at full speed.
    p = fb.benchmark_params()
    ts = jnp.asarray([0.013, 0.05, 0.09, 0.119, 0.125, 0.1333, 0.139])
    ide = fb.ideal(p, ts)
    g = jnp.asarray([0.0, -9.81])
    b, c = 0.12, 0.10
    m2, m3, j2, j3 = p.coupler_mass, p.follower_mass, p.coupler_inertia, p.follower_inertia
    scale = float(np.max(np.abs(np.asarray(ide["follower_angular_acceleration"]))))
    assert scale > 1e3
    for i, t in enumerate(ts):
        k = fb.ideal_kinematics(p, t)
        uf = jnp.stack([jnp.cos(k["phi"]), jnp.sin(k["phi"])])
        up = jnp.stack([jnp.cos(k["psi"]), jnp.sin(k["psi"])])
        r = jnp.stack([ide[f"reaction_{joint}_x"][i], ide[f"reaction_{joint}_y"][i]])
        if joint == "crank_coupler":  # O₄ → follower → coupler, R_B at B on the coupler
            q1, q2 = c * cross(up, r), cross(k["B"] - k["C"], r)
            psidd, phidd = fb._chain2(
                g, jnp.zeros(2), up, k["psi_dot"], c, c / 2, m3, j3, -uf, k["phi_dot"], b / 2, m2, j2, q1, q2
            )
        else:  # B → coupler → follower, R_O4 at O₄ on the follower
            q1, q2 = b * cross(uf, r), cross(jnp.asarray([0.12, 0.0]) - k["C"], r)
            phidd, psidd = fb._chain2(
                g, k["a_B"], uf, k["phi_dot"], b, b / 2, m2, j2, -up, k["psi_dot"], c / 2, m3, j3, q1, q2
            )
        assert abs(float(psidd - k["psi_ddot"])) < 1e-9 * scale, (joint, float(t))
        assert abs(float(phidd - k["phi_ddot"])) < 1e-9 * scale, (joint, float(t))


def cross(a, b):
    return a[0] * b[1] - a[1] * b[0]


@pytest.mark.slow
def test_four_bar_spec_runs_through_the_sweep(tmp_path):
    sp = {
        "model": {"mechanism": "four_bar", "ramp_time_s": 0.0},
        "sweep": {"name": "fb_tiny"},
        "integrator": {"t_end_s": 2e-3, "save_every": 20},
        "outputs": {"plots": True, "plot_variants": 2},
        "axes": {"joint.clearance_m": {"values": [0.5e-3, 0.1e-3]}},
    }
    table, summary, hists = sweep.run(sp, out=tmp_path / "fb", log=None, compile_cache=False)
    assert summary["mechanism"] == "four_bar" and summary["clearance_joint"] == "coupler_follower"
    for col in (
        "peak_follower_angular_acceleration_rad_per_s2",
        "daf_follower_angular_acceleration_steady",
        "ideal_peak_reaction_N",
        "daf_contact_force",
        "free_flight_fraction",
        "continuous_contact_fraction",
    ):
        assert col in table and np.all(np.isfinite(table[col])), col
    assert np.all(table["finite"])
    assert hists["journal_x_m"].shape == (2, 100, 1)
    assert list(store.open(tmp_path / "fb", mode="r").attrs["joints"]) == ["coupler_follower"]
    assert (tmp_path / "fb" / "plots" / "journal_orbits.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("joint", ["follower_ground", "coupler_ends"])
def test_four_bar_spec_with_clearance_at_other_joints(tmp_path, joint):
    sp = {
        "model": {"mechanism": "four_bar", "clearance_joint": joint, "ramp_time_s": 0.0},
        "sweep": {"name": "fb_ground"},
        "integrator": {"t_end_s": 1e-3, "save_every": 20},
        "outputs": {"plots": False, "histories": ["contact_force_N"]},
        "axes": {"joint.clearance_m": {"values": [0.1e-3]}},
    }
    table, summary, hists = sweep.run(sp, out=tmp_path / "fb", log=None, compile_cache=False)
    names = list(fb.JOINTS[joint])
    assert summary["clearance_joint"] == joint
    assert list(store.open(tmp_path / "fb", mode="r").attrs["joints"]) == names
    p = fb.benchmark_params(clearance=0.1e-3, ramp_time=0.0)
    ide = _ideal(p, jnp.linspace(0.0, 1e-3, 2001))
    ref = max(float(jnp.max(ide[f"reaction_{n}"])) for n in names)
    assert table["ideal_peak_reaction_N"][0] == pytest.approx(ref, rel=1e-3)
    assert np.all(table["finite"]) and np.all(np.isfinite(hists["contact_force_N"]))
    assert hists["contact_force_N"].shape[-1] == len(names)
    if len(names) > 1:
        for n in names:
            assert np.isfinite(table[f"peak_contact_force_{n}_N"][0]) and f"free_flight_fraction_{n}" in table
    with pytest.raises(specmod.SpecError, match="model.clearance_joint = 'rod_slider'"):
        specmod.load({"model": {"mechanism": "four_bar", "clearance_joint": "rod_slider"}})


def test_four_bar_spec_refuses_a_non_grashof_linkage():
    with pytest.raises(specmod.SpecError, match="model.crank_length_m = 0.2.*Grashof"):
        specmod.load({"model": {"mechanism": "four_bar", "crank_length_m": 0.2}})
    with pytest.raises(specmod.SpecError, match="model.crank_speed_rpm = 0.5 < 1: .*revolutions per minute"):
        specmod.load({"model": {"mechanism": "four_bar", "crank_speed_rpm": 0.5}})  # the unit guard of every crank
