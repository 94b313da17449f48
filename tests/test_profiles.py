"""Bushing profiles: analytic identities, smoothness, measured round trip, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (enables float64)
from jaxclear import profiles

RB = 0.01
N = 72


def _radii(p):
    p = np.asarray(p)
    return np.hypot(p[:, 0], p[:, 1])


def test_angles_and_polar():
    th = np.asarray(profiles.angles(8))
    np.testing.assert_allclose(th, 2 * np.pi * np.arange(8) / 8)
    p = np.asarray(profiles.polar(jnp.arange(1.0, 9.0)))
    assert p.shape == (8, 2) and p.dtype == np.float64
    np.testing.assert_allclose(_radii(p), np.arange(1.0, 9.0))
    np.testing.assert_allclose(np.arctan2(p[:, 1], p[:, 0]) % (2 * np.pi), th, atol=1e-15)


def test_circle_counter_clockwise():
    p = np.asarray(profiles.circle(RB, N))
    np.testing.assert_allclose(_radii(p), RB, rtol=1e-15)
    area = 0.5 * np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) * p[:, 1])
    np.testing.assert_allclose(area, 0.5 * N * RB**2 * np.sin(2 * np.pi / N), rtol=1e-12)  # > 0: CCW
    np.testing.assert_allclose(float(profiles.min_radius(p)), RB, rtol=1e-15)


def test_fourier_zero_coefficients_is_circle():
    np.testing.assert_allclose(
        np.asarray(profiles.fourier(RB, jnp.zeros(5), jnp.zeros(3), N)), np.asarray(profiles.circle(RB, N)), atol=0
    )


def test_fourier_harmonics():
    a, b = np.array([0.0, 2e-5, 0.0]), np.array([1e-5, 0.0, -3e-6])
    r = _radii(profiles.fourier(RB, a, b, N))
    th = 2 * np.pi * np.arange(N) / N
    expect = RB + 2e-5 * np.cos(2 * th) + 1e-5 * np.sin(th) - 3e-6 * np.sin(3 * th)
    np.testing.assert_allclose(r, expect, rtol=1e-14)
    # harmonics recovered by a discrete Fourier transform of r(θ_k)
    spec = np.fft.rfft(r) / N
    np.testing.assert_allclose(spec[0].real, RB, rtol=1e-14)
    np.testing.assert_allclose(2 * spec[2].real, 2e-5, atol=1e-18)
    np.testing.assert_allclose(-2 * spec[1].imag, 1e-5, atol=1e-18)


@pytest.mark.parametrize("psi", [0.0, 0.4, 2.0])
def test_ellipse_semi_axes_recovered(psi):
    a, b, n = 0.0102, 0.0100, 360
    p = np.asarray(profiles.ellipse(a, b, n, orientation=psi))
    # every point satisfies the implicit equation in the rotated frame
    u = p[:, 0] * np.cos(psi) + p[:, 1] * np.sin(psi)
    v = -p[:, 0] * np.sin(psi) + p[:, 1] * np.cos(psi)
    np.testing.assert_allclose((u / a) ** 2 + (v / b) ** 2, 1.0, rtol=1e-13)
    # on a grid containing ψ and ψ + π/2 the extreme radii are the semi-axes
    r = _radii(p)
    if psi == 0.0:
        np.testing.assert_allclose([r.max(), r.min()], [a, b], rtol=1e-14)
        assert np.argmax(r) in (0, n // 2)
    np.testing.assert_allclose(r.max(), a, rtol=1e-4)
    np.testing.assert_allclose(r.min(), b, rtol=1e-4)
    # semi_minor > semi_major is allowed: long axis turns by π/2
    q = np.asarray(profiles.ellipse(b, a, n, orientation=psi))
    np.testing.assert_allclose(_radii(q).max(), a, rtol=1e-4)


def test_wear_patch_c1_and_local():
    depth, th_c, w, n = 5e-5, 0.2, 0.6, 2048  # patch straddles θ = 0 (wrapping)
    r = _radii(profiles.wear_patch(RB, depth, th_c, w, n))
    th = 2 * np.pi * np.arange(n) / n
    dlt = (th - th_c + np.pi) % (2 * np.pi) - np.pi
    outside = np.abs(dlt) >= w
    np.testing.assert_allclose(r[outside], RB, rtol=1e-15)
    k_c = np.argmin(np.abs(dlt))
    np.testing.assert_allclose(r.max(), RB + depth * 0.5 * (1 + np.cos(np.pi * dlt[k_c] / w)), rtol=1e-14)
    assert r.max() > RB + 0.999 * depth
    # C¹: the discrete slope is continuous (no jump at the patch edges); the second difference
    # is bounded by the analytic curvature depth·π²/(2w²)·h², i.e. no kink of size O(h)
    h = th[1]
    d1 = np.diff(np.concatenate([r, r[:1]])) / h
    jumps = np.abs(np.diff(np.concatenate([d1, d1[:1]])))
    assert jumps.max() <= 1.05 * depth * np.pi**2 / (2 * w**2) * h
    # slope at the edges tends to zero (continuous derivative)
    edge = np.abs(np.abs(dlt) - w) < 2 * h
    assert np.abs(d1[edge]).max() < 10 * depth * np.pi**2 / (2 * w**2) * h
    # negative depth (deposit) also allowed
    r2 = _radii(profiles.wear_patch(RB, -2e-5, 3.0, 0.3, 64))
    assert r2.min() < RB


def test_profiles_differentiable():
    def loss(d, a, ab, w):
        p1 = profiles.wear_patch(RB, d, 1.0, w, 64)
        p2 = profiles.fourier(RB, a, jnp.zeros(2), 64)
        p3 = profiles.ellipse(ab[0], ab[1], 64, 0.3)
        return profiles.min_radius(p1) + p1[10, 0] + jnp.sum(p2**2) + jnp.sum(p3) + profiles.min_radius(p3)

    g = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(
        3e-5, jnp.array([1e-5, 2e-5, 0.0]), jnp.array([0.0102, 0.01]), 0.5
    )
    assert all(np.all(np.isfinite(np.asarray(x))) for x in g)
    # d r / d depth at θ_10 is the patch shape ½(1 + cos(πΔ/w)) times cos θ_10
    th, dl = 2 * np.pi * 10 / 64, 2 * np.pi * 10 / 64 - 1.0
    np.testing.assert_allclose(
        float(g[0]), 0.5 * (1 + np.cos(np.pi * dl / 0.5)) * np.cos(th) if abs(dl) < 0.5 else 0.0, atol=1e-12
    )
    # tracing skips the checks on values
    out = jax.vmap(lambda r: profiles.circle(r, 12))(jnp.array([0.01, 0.02]))
    assert out.shape == (2, 12, 2)
    out = jax.jit(lambda p: profiles.measured(points=p, n_points=24))(profiles.circle(RB, 40))
    np.testing.assert_allclose(_radii(out), RB, rtol=1e-3)


def test_measured_csv_round_trip(tmp_path):
    pts = np.asarray(profiles.fourier(RB, [0, 1e-5], [3e-6], 50))
    f = tmp_path / "bush.csv"
    with open(f, "w") as fh:
        fh.write("# measured on a CMM\n")
        fh.write("id,x_m,y_m\n")
        for i, (x, y) in enumerate(pts):
            fh.write(f"{i},{float(x)!r},{float(y)!r}  # point {i}\n")
    back = np.asarray(profiles.measured(path=str(f)))
    np.testing.assert_array_equal(back, pts)
    np.testing.assert_array_equal(np.asarray(profiles.measured(points=pts)), pts)
    # clockwise input is returned counter-clockwise
    np.testing.assert_array_equal(np.asarray(profiles.measured(points=pts[::-1])), pts)


def test_measured_resampling_recovers_circle_and_profile():
    rng = np.random.default_rng(0)
    m = 2880
    th = np.sort(rng.uniform(0, 2 * np.pi, m))
    pts = RB * np.stack([np.cos(th), np.sin(th)], -1)
    rng.shuffle(pts)  # order must not matter
    res = profiles.measured(points=pts, n_points=N)
    np.testing.assert_allclose(_radii(res), RB, rtol=1e-5)  # chord sag only: ≤ Δθ_max²/8
    np.testing.assert_allclose(np.asarray(res)[:, 1] / _radii(res), np.sin(2 * np.pi * np.arange(N) / N), atol=1e-14)
    # a fine uniform Fourier profile resampled onto a coarser grid that it contains is exact; and
    # shifted by half a fine step the linear interpolation error is O(h²) (small)
    fine = profiles.fourier(RB, [0, 2e-5], [1e-5], m)
    coarse = np.asarray(profiles.fourier(RB, [0, 2e-5], [1e-5], N))
    np.testing.assert_allclose(np.asarray(profiles.measured(points=fine, n_points=N)), coarse, atol=1e-15)
    rot = np.pi / m
    fine_rot = np.asarray(fine) @ np.array([[np.cos(rot), np.sin(rot)], [-np.sin(rot), np.cos(rot)]])
    out = profiles.measured(points=fine_rot, n_points=N)
    t = 2 * np.pi * np.arange(N) / N - rot  # r of the rotated profile at θ_k is r(θ_k − rot)
    exact = RB + 2e-5 * np.cos(2 * t) + 1e-5 * np.sin(t)
    err = np.abs(_radii(out) - exact)
    assert err.max() <= 5e-5 * (np.pi / m) ** 2 and err.max() > 0  # ≈ r'' (h/2)² / 2


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: profiles.circle(RB, 2), "n_points"),
        (lambda: profiles.circle(RB, 10.0), "n_points"),
        (lambda: profiles.circle(-1.0, 10), "radius"),
        (lambda: profiles.circle(0.0, 10), "radius"),
        (lambda: profiles.ellipse(0.01, 0.0, 10), "semi_minor"),
        (lambda: profiles.ellipse(-0.01, 0.01, 10), "semi_major"),
        (lambda: profiles.fourier(RB, [0.02], [], 10), "fourier"),
        (lambda: profiles.fourier(RB, np.zeros((2, 2)), [], 10), "a"),
        (lambda: profiles.wear_patch(RB, 1e-5, 0.0, 0.0, 10), "half_width"),
        (lambda: profiles.wear_patch(RB, 1e-5, 0.0, 4.0, 10), "half_width"),
        (lambda: profiles.wear_patch(RB, -0.02, 0.0, 1.0, 10), "depth"),
        (lambda: profiles.polar(np.ones((3, 3))), "radii"),
        (lambda: profiles.measured(), "points or path"),
        (lambda: profiles.measured(points=np.ones((5, 3))), "points"),
        (lambda: profiles.measured(points=np.ones((2, 2))), "points"),
        (lambda: profiles.measured(path="/nonexistent/bush.csv"), "path"),
        (lambda: profiles.measured(points=np.asarray(profiles.circle(RB, 8)), n_points=1), "n_points"),
    ],
)
def test_bad_inputs_raise_value_error_naming_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_csv_missing_columns(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("x,y\n0.01,0\n0,0.01\n-0.01,0\n")
    with pytest.raises(ValueError, match=r"path.*x_m"):
        profiles.measured(path=str(f))
