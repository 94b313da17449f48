"""The finite particle method engine (jaxclear.fpm): beam statics and dynamics against
Euler–Bernoulli, objectivity, energy conservation, the lumping of a link's mass and inertia."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxclear import fpm, integrate

# A steel strip 1 m × 20 mm × 10 mm (bending about the 10 mm side): EI = 333.3 N·m², m = 1.57 kg.
L, E, RHO, B, H = 1.0, 2.0e11, 7850.0, 0.02, 0.01
A, IZ = B * H, B * H**3 / 12


def _beam(n, clamped=True, forces=None, damping=0.0, gravity=0.0):
    """A straight beam along +x of n elements, node k = rotation k; clamped at node 0."""
    topo = fpm.Topology(
        n_nodes=n + 1,
        n_rotations=n + 1,
        elements=tuple((k, k + 1, k, k + 1) for k in range(n)),
        ground=(0,) if clamped else (),
        fixed_rotations=(0,) if clamped else (),
    )
    m, rot = fpm.link_lumping(RHO * A * L, RHO * IZ * L, L, n, exact=False)  # section rotary inertia
    f = jnp.asarray
    p = fpm.Params(
        EA=f(np.full(n, E * A)),
        EI=f(np.full(n, E * IZ)),
        l0=f(np.full(n, L / n)),
        offsets=f(np.tile([1.0, 0.0], (n, 2, 1))),
        mass=m,
        x0=f(np.stack([np.linspace(0, L, n + 1), np.zeros(n + 1)], -1)),
        inertia=rot,
        guides=f(np.zeros((0, 2))),
        damping=f(damping),
        gravity=f(gravity),
        crank_speed=f(0.0),
        ramp_time=f(0.0),
        joint=None,
        forces=f(np.zeros((n + 1, 2)) if forces is None else forces),
        torques=f(np.zeros(n + 1)),
    )
    return topo, p


def _keep(acc, out, i):
    return acc


def _tip_y(out):
    return out[2].nodes[-1, 1]


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _simulate(topo, dt, n_saves, k, save, p, state0):
    # one cached jit for every run of the module (Topology hashable, the rest static Python
    # values): equal beams over the same steps share one compile whatever their loads
    q0, v0, aux0 = state0
    a0, _, _ = fpm._accel_out(topo, p, q0, v0, aux0, 0.0)
    step = fpm.make_step(topo, dt)
    return integrate.simulate(step, p, integrate.State(q0, v0, a0, aux0), jnp.zeros(()), _keep, n_saves, k, save=save)


def _run(topo, p, dt, n_steps, save_every=None, state0=None):
    """Final state and (optionally) the tip's y every ``save_every`` steps."""
    state0 = fpm.initial_state(topo, p) if state0 is None else state0
    k = save_every or n_steps
    s, _, hist = _simulate(topo, float(dt), n_steps // k, k, _tip_y if save_every else None, p, state0)
    return s, hist


def _dt(topo, p):
    """Half the critical step; each element owns half of an interior particle, all of an end one."""
    n = len(topo.elements)
    share = lambda x: np.stack(
        [
            np.asarray(x)[:-1] / np.where(np.arange(n) == 0, 1, 2),
            np.asarray(x)[1:] / np.where(np.arange(n) == n - 1, 1, 2),
        ],
        -1,
    )
    return 0.5 * fpm.critical_step(topo, p, share(p.mass), share(p.inertia))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_cantilever_tip_load_gives_PL3_over_3EI(n):
    # Dynamic relaxation (damping near critical for the first mode) to the static deflection;
    # the Euler–Bernoulli element is exact for a tip load at any n.
    P = 1.0
    forces = np.zeros((n + 1, 2))
    forces[-1, 1] = -P
    topo, p = _beam(n, forces=forces, damping=80.0)
    s, _ = _run(topo, p, _dt(topo, p), int(1.0 / _dt(topo, p)))
    exact = P * L**3 / (3 * E * IZ)
    assert abs(-float(s.q.nodes[-1, 1]) / exact - 1.0) < 1e-4
    # the end slope PL²/(2EI) is the tip particle's rotation
    theta = np.arctan2(float(s.q.rotations[-1, 1]), float(s.q.rotations[-1, 0]))
    assert abs(-theta / (P * L**2 / (2 * E * IZ)) - 1.0) < 1e-4
    # the bending moment is P·(L − x) along the beam: P·L at the root, 0 at the tip
    _, Ma, Mb, _, _ = fpm.element_forces(topo, p, s.q)
    x = np.arange(n) * L / n
    np.testing.assert_allclose(np.abs(np.asarray(Ma)), P * (L - x), rtol=1e-3, atol=1e-4 * P * L)
    assert abs(float(Mb[-1])) < 1e-4 * P * L
    # signed, in the beam convention M = EI dθ/ds (hogging < 0): −P(L − x) at each element's start
    # (towards node 0) and end, continuous from one element to the next; an axial force only
    # from the load turned into the bent element's frame, |N| = P sin(chord slope) < P θ_tip
    N, M0, M1 = (np.asarray(z) for z in fpm.element_loads(topo, p, s.q))
    np.testing.assert_allclose(M0, -P * (L - x), rtol=1e-3, atol=1e-4 * P * L)
    np.testing.assert_allclose(M1, -P * (L - x - L / n), rtol=1e-3, atol=1e-4 * P * L)
    np.testing.assert_allclose(M1[:-1], M0[1:], rtol=1e-6)
    assert np.max(np.abs(N)) < P * P * L**2 / (2 * E * IZ)


def test_element_loads_of_a_bent_free_element_follow_its_curvature():
    # M = EI dθ/ds: an element bent to a circular arc of curvature κ (tangents at ∓κl/2 from the
    # chord) carries +EIκ at both ends, a stretched one N = EA Δ/l₀ (tension > 0); the same with
    # the element drawn from b to a flips the moments' sign (s runs the other way).
    topo, p = _beam(1, clamped=False)
    kappa, stretch = 0.02, 1e-5
    half = kappa * L / 2
    q = fpm.Coordinates(
        nodes=jnp.array([[0.0, 0.0], [L + stretch, 0.0]]),
        rotations=jnp.array([[np.cos(-half), np.sin(-half)], [np.cos(half), np.sin(half)]]),
    )
    N, M0, M1 = (float(z[0]) for z in fpm.element_loads(topo, p, q))
    EI, EA = E * IZ, E * A
    assert abs(M0 / (EI * kappa) - 1) < 1e-9 and abs(M1 / (EI * kappa) - 1) < 1e-9
    assert abs(N / (EA * stretch / L) - 1) < 1e-6
    rev = fpm.Topology(n_nodes=2, n_rotations=2, elements=((1, 0, 1, 0),))
    p_rev = p._replace(offsets=-p.offsets)  # the chord drawn along −x: tangents turned by π
    N2, M02, M12 = (float(z[0]) for z in fpm.element_loads(rev, p_rev, q))
    assert abs(N2 - N) < 1e-6 * abs(N) and abs(M02 + M1) < 1e-9 * EI * kappa and abs(M12 + M0) < 1e-9 * EI * kappa


def test_cantilever_under_its_weight_converges_to_wL4_over_8EI():
    # Lumped gravity loads: the error of the tip deflection falls as elements are added.
    exact = RHO * A * 9.81 * L**4 / (8 * E * IZ)
    errs = []
    for n in (2, 4, 8):
        topo, p = _beam(n, damping=80.0, gravity=9.81)
        s, _ = _run(topo, p, _dt(topo, p), int(1.0 / _dt(topo, p)))
        errs.append(abs(-float(s.q.nodes[-1, 1]) / exact - 1.0))
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.01, errs
    slope = np.polyfit(np.log([2, 4, 8]), np.log(errs), 1)[0]
    assert -2.4 < slope < -1.6, (errs, slope)  # second order in the element length


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _relax_and_release(topo, dt, n_relax, n_saves, k, p):
    """The tip's y every k steps of a beam relaxed for n_relax steps under p (its static shape
    under the tip load), then released at rest with no load and no damping: one program per beam
    (the two runs of _run compiled apart would be two)."""
    q0, v0, aux0 = fpm.initial_state(topo, p)
    a0, _, _ = fpm._accel_out(topo, p, q0, v0, aux0, 0.0)
    step = fpm.make_step(topo, dt)
    s, _, _ = integrate.simulate(step, p, integrate.State(q0, v0, a0, aux0), jnp.zeros(()), _keep, 1, n_relax)
    p0 = p._replace(forces=jnp.zeros_like(p.forces), damping=jnp.zeros_like(p.damping))
    q1 = s.q
    v1 = fpm.Coordinates(nodes=jnp.zeros_like(q1.nodes), rotations=jnp.zeros(topo.n_rotations))
    aux1 = jnp.zeros((1, 1))
    a1, _, _ = fpm._accel_out(topo, p0, q1, v1, aux1, 0.0)
    state1 = integrate.State(q1, v1, a1, aux1)
    return integrate.simulate(step, p0, state1, jnp.zeros(()), _keep, n_saves, k, save=_tip_y)[2]


@pytest.mark.slow  # relaxation and release of three beams, up to 280000 steps (physics, kept in full)
def test_first_bending_frequency_converges_to_euler_bernoulli():
    w_exact = 1.8751040687**2 * np.sqrt(E * IZ / (RHO * A * L**4))  # 51.2 rad/s
    errs = []
    for n in (4, 8, 16):
        forces = np.zeros((n + 1, 2))
        forces[-1, 1] = -1.0
        topo, p = _beam(n, forces=forces, damping=80.0)
        dt = _dt(topo, p)
        k = 10
        y = np.asarray(_relax_and_release(topo, float(dt), int(1.0 / dt), int(0.5 / (dt * k)), k, p))
        t = (np.arange(len(y)) + 1) * k * dt
        up = np.nonzero((y[:-1] < 0) & (y[1:] >= 0))[0]  # upward zero crossings, interpolated
        tc = t[up] + (0 - y[up]) / (y[up + 1] - y[up]) * (t[up + 1] - t[up])
        w = 2 * np.pi / np.mean(np.diff(tc))
        errs.append(abs(w / w_exact - 1.0))
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.005, errs


def test_rigid_motion_of_a_bent_beam_changes_no_internal_force():
    n = 4
    forces = np.zeros((n + 1, 2))
    forces[-1, 1] = -50.0
    topo, p = _beam(n, forces=forces, damping=80.0)
    # relaxed over 1 s as the tip-load test's n = 4 beam (its compiled function): any bent state will do
    s, _ = _run(topo, p, _dt(topo, p), int(1.0 / _dt(topo, p)))
    q = s.q
    N, Ma, Mb, F, T = fpm.element_forces(topo, p, q)
    assert float(jnp.max(jnp.abs(Ma))) > 1.0  # bent
    beta = 1.3
    R = jnp.array([[np.cos(beta), -np.sin(beta)], [np.sin(beta), np.cos(beta)]])
    moved = fpm.Coordinates(
        nodes=q.nodes @ R.T + jnp.array([3.0, -7.0]),
        rotations=fpm._rotate(q.rotations, jnp.array([np.cos(beta), np.sin(beta)])),
    )
    N2, Ma2, Mb2, F2, T2 = fpm.element_forces(topo, p, moved)
    # to round-off: a length of ~1 m carries 1e-16 m, times EA/l₀ = 1.6e8 N/m in the axial force
    round_off = 10 * np.finfo(float).eps * float(p.EA[0] / p.l0[0]) * L
    for a, b in ((N, N2), (Ma, Ma2), (Mb, Mb2), (T, T2), (F @ R.T, F2)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-9, atol=round_off)
    # and an unbent beam moved rigidly carries none
    rest = fpm.Coordinates(nodes=p.x0 @ R.T, rotations=jnp.tile(jnp.array([np.cos(beta), np.sin(beta)]), (n + 1, 1)))
    assert float(jnp.max(jnp.abs(fpm.element_forces(topo, p, rest)[3]))) < 1e-6


def test_free_undamped_beam_conserves_energy():
    # A free beam thrown spinning and bent: kinetic + strain energy constant (leapfrog: bounded
    # error, O(dt²)).
    n = 6
    topo, p = _beam(n, clamped=False)
    x = np.linspace(0, L, n + 1)
    v0 = fpm.Coordinates(
        nodes=jnp.asarray(np.stack([np.full(n + 1, 0.3), 4.0 * (x - 0.5) + 0.5 * np.sin(3 * x)], -1)),
        rotations=jnp.asarray(4.0 + 0.5 * np.cos(3 * x)),
    )
    q0, _, aux = fpm.initial_state(topo, p)
    e0 = float(_energy(topo, p, q0, v0))
    dt = _dt(topo, p)
    s, _ = _run(topo, p, dt, 40000, state0=(q0, v0, aux))
    e1 = float(_energy(topo, p, s.q, s.v))
    assert float(fpm.strain_energy(topo, p, s.q)) > 1e-4 * e0  # it does vibrate
    assert abs(e1 / e0 - 1.0) < 1e-3


@pytest.mark.parametrize("n", [2, 4, 8])
def test_exact_lumping_keeps_the_links_mass_and_inertia(n):
    m, Lk = 0.21, 0.12
    for inertia in (m * Lk**2 / 12, 2.5e-4, m * Lk**2 / 5):
        masses, rot = fpm.link_lumping(m, inertia, Lk, n)
        assert np.all(np.asarray(masses) > 0) and np.all(np.asarray(rot) > 0)
        tm, ti = fpm.rigid_inertia(masses, rot, Lk)
        np.testing.assert_allclose([float(tm), float(ti)], [m, inertia], rtol=1e-12)
    # the paper's lumping adds the point masses' own inertia, m L²/12 (1 + 2/n²), to the given I
    masses, rot = fpm.link_lumping(m, m * Lk**2 / 12, Lk, n, exact=False)
    ti = float(fpm.rigid_inertia(masses, rot, Lk)[1])
    np.testing.assert_allclose(ti, m * Lk**2 / 12 * (2 + 2 / n**2), rtol=1e-12)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 50])
def test_exact_lumping_is_feasible_exactly_above_its_bound(n):
    # I > m L² (n − 2)/(12 n (1 − κ)): every particle mass positive; just below it the end
    # masses are negative (the shipped crank, 0.3 kg, 0.05 m, 1e-5 kg·m², is feasible for n ≤ 2 only)
    m, Lk = 0.3, 0.05
    bound = float(fpm.exact_lumping_min_inertia(m, Lk, n))
    np.testing.assert_allclose(bound, m * Lk**2 * (n - 2) / (12 * n * (1 - fpm.KAPPA)), rtol=1e-15)
    below = bound * (1 - 1e-6) if n > 2 else 1e-12  # n = 2: the bound is 0, any I > 0 will do
    for inertia, ok in ((bound * (1 + 1e-6) + 1e-15, True), (below, n == 2)):
        masses, rot = fpm.link_lumping(m, inertia, Lk, n)
        assert bool(np.all(np.asarray(masses) > 0)) == ok, (n, inertia)
        assert np.all(np.asarray(rot) > 0)
    assert fpm.exact_lumping_max_elements(m, 1e-5, Lk) == 2
    nmax = fpm.exact_lumping_max_elements(m, 3e-5, Lk)  # r = 0.432: (n − 2)/n < r for n ≤ 3
    assert nmax == 3 and fpm.exact_lumping_min_inertia(m, Lk, nmax) < 3e-5 < fpm.exact_lumping_min_inertia(
        m, Lk, nmax + 1
    )


def test_critical_step_names_a_particle_without_a_positive_mass_or_inertia():
    # a negative, zero or NaN share gives a ParticleError naming the element, its end and the
    # variant (leading axis), never a LinAlgError from the eigenvalues
    topo, p = _beam(4)
    n = 4
    share = lambda x: np.stack([np.asarray(x)[:-1] / 2, np.asarray(x)[1:] / 2], -1)
    m, J = share(p.mass), share(p.inertia)
    assert np.isfinite(fpm.critical_step(topo, p, m, J))
    labels = [f"links.beam, element {k + 1} of {n}" for k in range(n)]
    for bad_m, bad_J, message in (
        (
            -1e-3,
            None,
            r"links\.beam, element 3 of 4: the mass of its end particle towards "
            r"the link's second point is -0\.001",
        ),
        (None, 0.0, r"element 3 of 4: the rotational inertia .* second point is 0 "),
        (np.nan, None, r"element 3 of 4: the mass .* is nan"),
    ):
        mb, Jb = np.stack([m, m]), np.stack([J, J])  # two variants, the second one bad
        if bad_m is not None:
            mb[1, 2, 1] = bad_m
        if bad_J is not None:
            Jb[1, 2, 1] = bad_J
        with pytest.raises(fpm.ParticleError, match=message) as e:
            fpm.critical_step(topo, p, mb, Jb, labels=labels)
        assert (e.value.variant, e.value.element, e.value.side) == (1, 2, 1)


def _fpm_slider_crank(clearance, c=0.5e-3, rpm=1000.0, ramp=0.005):
    """The slider-crank of Flores et al. (2008) as a stiff FPM linkage (E = 2.07e13 Pa, the
    paper's 'rigid' value): crank one element, rod four (its m and I kept exactly), the slider a
    lumped particle on a horizontal guide; clearance (or an ideal pin) at the rod–slider joint."""
    from jaxclear.mechanisms import _clearance

    links = {"crank": ("O", "B", 1), "rod": ("B", "C", 4)}
    jts = {
        "O": ("ground", "O", ("crank",), None),
        "B": ("revolute", "B", ("crank", "rod"), None),
        "C": ("clearance" if clearance else "revolute", "C", ("rod", "slider"), None),
        "guide": ("slider", "C", ("slider",), "fixed"),
    }
    lay = fpm.assemble(links, jts, {"crank": ("crank", "O")}, bodies={"slider": "C"})
    jp = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], _clearance.benchmark_joint(clearance=c))
    steel = dict(youngs_modulus=2.07e13, density=7850.0)
    p = fpm.linkage_params(
        lay,
        {"O": (0.0, 0.0), "B": (0.05, 0.0), "C": (0.17, 0.0)},
        {
            "crank": dict(points=("O", "B"), mass=0.30, inertia=1e-4, **steel),
            "rod": dict(points=("B", "C"), mass=0.21, inertia=2.5e-4, **steel),
        },
        bodies={"slider": ("C", 0.14, 1e-4)},
        guides={"guide": (1.0, 0.0)},
        joint=jp if clearance else None,
        crank_speed=rpm * 2 * np.pi / 60,
        ramp_time=ramp,
    )
    return lay, p


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _sc_run(topo, dt, n, k, slider, p):
    """(state, peak contact force, slider x every k steps) of n·k steps from the start state: the
    start state (its eager ops would compile one by one) inside the one program per topology."""
    step = fpm.make_step(topo, dt)
    q0, v0, aux0 = fpm.initial_state(topo, p)
    s0 = integrate.State(q0, v0, fpm._accel_out(topo, p, q0, v0, aux0, 0.0)[0], aux0)
    peak = lambda acc, o, i: jnp.maximum(acc, jnp.linalg.norm(o[1][0].force)) if o[1] else acc
    return integrate.simulate(step, p, s0, jnp.zeros(()), peak, n, k, save=lambda o: o[2].nodes[slider, 0])


@pytest.mark.slow
def test_stiff_fpm_slider_crank_reproduces_the_hand_derived_model():
    # Ideal pins: the slider follows the closed-form ideal mechanism to < 1 µm (the stiff beams'
    # elastic vibration); a clearance at the rod–slider joint: the largest contact force over the
    # start-up (1000 rpm reached over 5 ms; first impact at ~1.4 ms) within 2 % of the hand-derived
    # slider_crank (measured 0.65 % over 20 ms; the FPM rod and crank are elastic, E = 2.07e13 Pa).
    from jaxclear.mechanisms import slider_crank as sc

    psc = sc.benchmark_params(clearance=0.5e-3, crank_speed_rpm=1000.0, ramp_time=0.005)
    T, k = 0.008, 50
    for clearance in (False, True):
        lay, p = _fpm_slider_crank(clearance)
        dt = 0.5 * fpm.critical_step(lay.topology, p, *fpm.element_shares(lay, p))
        assert 2e-8 < dt < 2e-7  # half the element bound; the paper ran its links at 1.59e-7 s
        n = int(T / dt) // k
        _, pk, x = _sc_run(lay.topology, float(dt), n, k, lay.body("slider")[0], p)
        t = (np.arange(n) + 1) * k * dt
        if not clearance:
            ideal = np.asarray(jax.jit(sc.ideal)(psc, jnp.asarray(t))["slider_position"])  # one program
            assert np.max(np.abs(np.asarray(x) - ideal)) < 1e-6
        else:
            cfg = sc.Config(dt=1e-6, n_saves=int(round(T / 1e-4)), save_every=100, outputs=())
            hand = float(jax.jit(sc.simulate, static_argnums=0)(cfg, psc).acc.peak_force[0])
            assert hand > 1000.0 and abs(float(pk) / hand - 1.0) < 0.02, (float(pk), hand)


@functools.partial(jax.jit, static_argnums=0)
def _energy(topo, p, q, v):
    """Kinetic + strain energy [J] as one program (eagerly, each of their ops compiles alone)."""
    return fpm.kinetic_energy(p, v) + fpm.strain_energy(topo, p, q)


@pytest.mark.slow  # a 20 ms run of its own topology (physics, kept in full)
def test_undriven_frictionless_four_bar_conserves_energy():
    # A flexible four-bar (ideal pins, no driver, no gravity, no damping) thrown into motion at
    # its rigid velocities with the crank at 20 rad/s: kinetic + strain energy constant to 1e-3
    # over 20 ms (the pins are shared nodes: they do no work).
    links = {"crank": ("O2", "B", 2), "coupler": ("B", "C", 3), "follower": ("O4", "C", 3)}
    jts = {
        "O2": ("ground", "O2", ("crank",), None),
        "B": ("revolute", "B", ("crank", "coupler"), None),
        "C": ("revolute", "C", ("coupler", "follower"), None),
        "O4": ("ground", "O4", ("follower",), None),
    }
    lay = fpm.assemble(links, jts, need_driver=False)
    steel = dict(youngs_modulus=2.07e11, density=7850.0)
    pts = {"O2": (0.0, 0.0), "B": (0.0, 0.05), "C": (0.1093461926484556, 0.09943086235629348), "O4": (0.12, 0.0)}
    p = fpm.linkage_params(
        lay,
        pts,
        {
            "crank": dict(points=("O2", "B"), mass=0.0785, inertia=1.635e-5, **steel),
            "coupler": dict(points=("B", "C"), mass=0.1884, inertia=2.261e-4, **steel),
            "follower": dict(points=("O4", "C"), mass=0.157, inertia=1.308e-4, **steel),
        },
        gravity=0.0,
    )
    lay_driven = fpm.assemble(links, jts, {"crank": ("crank", "O2")})  # only for the start velocities
    v0 = fpm.rigid_velocities(lay, lay_driven, p, 20.0)
    q0, _, aux = fpm.initial_state(lay.topology, p)
    e0 = float(_energy(lay.topology, p, q0, v0))
    dt = 0.5 * fpm.critical_step(lay.topology, p, *fpm.element_shares(lay, p))
    s, _ = _run(lay.topology, p, dt, int(0.02 / dt), state0=(q0, v0, aux))
    e1 = float(_energy(lay.topology, p, s.q, s.v))
    assert abs(float(jnp.arctan2(s.q.rotations[0, 1], s.q.rotations[0, 0]))) > 0.1  # it turned
    assert abs(e1 / e0 - 1.0) < 1e-3, (e0, e1)
