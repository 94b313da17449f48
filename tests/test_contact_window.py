"""Windowed contact detection (contact.detect_window, profile.window_points): equal to the full
Xu (2015) pass whenever it does not flag an overflow, and flagging when it should."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (float64)
from jaxclear import contact, joints, profiles, sweep
from jaxclear import spec as specmod
from jaxclear.mechanisms import slider_crank as sc

RJ = 0.010


@functools.cache  # the same sample for every parametrization (and test_contact_deepest's)
def _random_cases(n, n_points, seed):
    """Fourier bushings with harmonics up to 8 (several regions) and pins near contact."""
    rng = np.random.default_rng(seed)
    pts, cen = [], []
    for _ in range(n):
        amp = 1.5e-4 / np.arange(1, 9) ** rng.uniform(0.0, 1.0)
        a, b = rng.normal(0, 1, 8) * amp, rng.normal(0, 1, 8) * amp
        p = np.asarray(profiles.fourier(RJ + 5e-4, a, b, n_points))
        ang = rng.uniform(0, 2 * np.pi)
        u = np.array([np.cos(ang), np.sin(ang)])
        # eccentricity so that the deepest penetration is 0..30 µm (bisection on the true depth)
        target = rng.uniform(-2e-6, 30e-6)
        lo, hi = 0.0, 2e-3
        for _ in range(50):
            e = 0.5 * (lo + hi)
            d = RJ - np.min(np.linalg.norm(p - e * u, axis=1))
            lo, hi = (lo, e) if d > target else (e, hi)
        pts.append(p)
        cen.append(lo * u)
    return jnp.asarray(np.stack(pts)), jnp.asarray(np.stack(cen))


def _sorted_active(r, field):
    act = np.asarray(r.active)
    idx = np.asarray(r.index)
    out = []
    for i in range(act.shape[0]):
        order = np.argsort(idx[i][act[i]])
        out.append(np.asarray(getattr(r, field))[i][act[i]][order])
    return out


# cached jits of the batched detections (K, W, refine static)
_full = jax.jit(
    jax.vmap(lambda p, c, k, refine: contact.detect(p, c, RJ, k, refine=refine), in_axes=(0, 0, None, None)),
    static_argnums=(2, 3),
)
_win = jax.jit(
    jax.vmap(
        lambda p, c, k, w, refine: contact.detect_window(p, c, RJ, k, w, refine=refine),
        in_axes=(0, 0, None, None, None),
    ),
    static_argnums=(2, 3, 4),
)


@pytest.mark.parametrize("refine", [True, False])
def test_window_equals_full_detection_unless_overflow(refine):
    K, W = 4, 24
    pts, cen = _random_cases(300, 72, seed=3)
    full = _full(pts, cen, K, refine)
    win = _win(pts, cen, K, W, refine)
    ovf = np.asarray(win.overflow)
    ok = ~ovf
    n_full = np.asarray(full.n_regions)
    # the sample exercises the method: most cases fit, several hold 2+ regions, some overflow
    assert ok.sum() >= 150 and (n_full[ok] >= 2).sum() >= 8 and ovf.sum() >= 5
    np.testing.assert_array_equal(np.asarray(win.n_regions)[ok], n_full[ok])
    for field in ("depth", "normal", "point_bushing", "point_pin", "index"):
        a, b = _sorted_active(full, field), _sorted_active(win, field)
        for i in np.nonzero(ok)[0]:
            np.testing.assert_allclose(b[i], a[i], rtol=0, atol=1e-15, err_msg=f"{field}, case {i}")
    # an overflow is never a silent miss: the flagged cases are those whose contact the
    # window does not hold (a penetrating point outside it or on its ends)
    full_mask = np.asarray(jax.vmap(lambda p, c: jnp.sum((p - c) ** 2, -1) < RJ * RJ)(pts, cen))
    start = np.asarray(win.start)
    inside = np.zeros_like(full_mask)
    for i in range(len(start)):
        inside[i, (start[i] + np.arange(1, W - 1)) % 72] = True
    expect = (full_mask & ~inside).any(axis=1)
    np.testing.assert_array_equal(ovf, expect)


def test_window_overflow_flags_contact_outside_and_at_edges():
    p = profiles.circle(RJ + 5e-4, 72)
    c = jnp.array([5.05e-4, 0.0])  # 5 µm deep at point 0, a run of a few points around it
    r = contact.detect_window(p, c, RJ, 2, 12)
    assert not bool(r.overflow) and int(r.n_regions) == 1 and int(r.index[0]) == 0
    far = contact.detect_window(p, c, RJ, 2, 12, start=30)  # window on the far side
    assert bool(far.overflow) and int(far.n_regions) == 0
    edge = contact.detect_window(p, c, RJ, 2, 12, start=-1 % 72)  # run cut by the window start
    assert bool(edge.overflow)
    with pytest.raises(ValueError, match="window"):
        contact.detect_window(p, c, RJ, 2, 80)


def test_window_gradients_finite_through_onset():
    p = profiles.fourier(RJ + 5e-4, jnp.array([0.0, 1.5e-4]), jnp.array([1e-4]), 72)

    def depth(e):
        return jnp.sum(contact.detect_window(p, jnp.array([e, 0.3 * e]), RJ, 4, 16, refine=True).depth)

    grad = jax.jit(jax.grad(depth))  # one compile for the three points (eagerly: ~3 s of op dispatch)
    for e in (0.0, 4.0e-4, 6.0e-4):
        g = grad(e)
        assert np.isfinite(float(g))


def _bench_params(clearances, dtype=jnp.float64):
    """The benchmark's ovalised bushing: r = R_B + c/2 + 0.3c cos 2θ + 0.2c sin θ."""

    def one(c):
        pts = profiles.fourier(RJ + 1.5 * c, jnp.stack([0.0 * c, 0.3 * c]), jnp.stack([0.2 * c]), 72)
        return sc.benchmark_params(clearance=c, points=pts)

    p = jax.vmap(one)(jnp.asarray(clearances))
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, p)


def _sim(window, p, steps=1500):
    jc = joints.JointConfig(geometry="points", n_points=72, max_regions=4, refine=True, window=window)
    cfg = sc.Config(dt=1e-6, n_saves=10, save_every=steps // 10, joint=jc, outputs=())
    return jax.jit(jax.vmap(lambda q: sc.simulate(cfg, q)))(p)


@pytest.mark.slow
def test_window_simulation_equals_full_on_ovalised_bushing():
    p = _bench_params([0.5e-3, 0.1e-3, 0.03e-3])
    full, win = _sim(0, p), _sim(32, p)
    assert np.all(np.asarray(win.acc.window_overflow_steps) == 0)
    assert np.all(np.asarray(full.acc.impacts) >= 1)  # contact happened
    for f in ("peak_force", "peak_acc", "impacts", "contact_steps", "max_regions"):
        np.testing.assert_allclose(
            np.asarray(getattr(win.acc, f)), np.asarray(getattr(full.acc, f)), rtol=1e-9, err_msg=f
        )
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12), win.q, full.q
    )


@pytest.mark.slow
def test_window_simulation_reports_overflow_and_runs_in_float32():
    p = _bench_params([0.1e-3])
    narrow = _sim(5, p)  # 5 points cannot hold the contact of a 0.1 mm bushing
    assert int(np.asarray(narrow.acc.window_overflow_steps).sum()) > 0
    r32 = _sim(16, _bench_params([0.5e-3], jnp.float32))
    assert r32.q.slider.dtype == jnp.float32 and np.all(np.isfinite(np.asarray(r32.q.slider)))
    assert float(np.asarray(r32.acc.peak_force)[0, 0]) > 0


@pytest.mark.parametrize(
    "profile, words",
    [
        ({"kind": "circle", "window_points": 16}, ["profile.window_points", "point method"]),
        ({"kind": "fourier", "n_points": 72, "window_points": 3}, ["profile.window_points = 3", "[5, "]),
        ({"kind": "fourier", "n_points": 72, "window_points": 100}, ["profile.window_points = 100"]),
    ],
)
def test_window_spec_errors(profile, words):
    with pytest.raises(specmod.SpecError) as ei:
        sweep.plan(specmod.load({"profile": profile, "integrator": {"t_end_s": 1e-4}}))
    for w in words:
        assert w in str(ei.value)
