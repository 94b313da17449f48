"""contact.detect against an independent brute force, analytic limits, transforms and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401  (enables float64)
from jaxclear import contact, laws, profiles

RB = 0.01  # nominal bearing radius (m)


# ----------------------------------------------------------------------------- brute force
def brute_force(points, center, radius):
    """Plain loop: walk the closed profile, collect circular runs of d > 0, max per run.

    Returns a list of regions sorted by the smallest index they contain, each a dict with the
    point indices, max depth and the deepest index (ties -> lowest index).
    """
    pts = np.asarray(points, dtype=np.float64)
    cx, cy = float(center[0]), float(center[1])
    n = len(pts)
    d = [radius - np.sqrt((pts[k, 0] - cx) ** 2 + (pts[k, 1] - cy) ** 2) for k in range(n)]
    inside = [dk > 0 for dk in d]
    if not any(inside):
        return [], d
    if all(inside):
        runs = [list(range(n))]
    else:
        k0 = inside.index(False)  # start walking just after an out-of-contact point
        runs, cur = [], []
        for j in range(1, n + 1):
            k = (k0 + j) % n
            if inside[k]:
                cur.append(k)
            elif cur:
                runs.append(cur)
                cur = []
        if cur:
            runs.append(cur)
    regions = []
    for run in runs:
        best = max(d[k] for k in run)
        deepest = min(k for k in run if d[k] == best)
        regions.append({"points": sorted(run), "depth": best, "index": deepest})
    regions.sort(key=lambda r: min(r["points"]))
    return regions, d


_detect = jax.jit(contact.detect, static_argnums=(3, 4))


def check_against_brute(points, center, radius, K, refine=False, res=None, brute=None):
    """brute: ``brute_force(points, center, radius)`` when already computed (it does not
    depend on K or refine)."""
    if res is None:
        res = _detect(jnp.asarray(points), jnp.asarray(center), radius, K, refine)
    regions, d = brute_force(points, center, radius) if brute is None else brute
    n = len(d)
    assert int(res.n_regions) == len(regions)
    np.testing.assert_array_equal(np.asarray(res.mask), np.asarray(d) > 0)
    labels = np.full(n, K)
    for j, reg in enumerate(regions[:K]):
        labels[reg["points"]] = j
    np.testing.assert_array_equal(np.asarray(res.labels), labels)
    m = min(K, len(regions))
    np.testing.assert_array_equal(np.asarray(res.active), np.arange(K) < m)
    pts = np.asarray(points)
    for j in range(m):
        reg = regions[j]
        i = int(res.index[j])
        # exact ties are broken to the lowest index; near-ties may differ by rounding only
        assert i == reg["index"] or abs(d[i] - reg["depth"]) < 1e-17, (j, i, reg["index"])
        if not refine:
            np.testing.assert_allclose(float(res.depth[j]), reg["depth"], rtol=0, atol=1e-17)
            e = pts[i] - np.asarray(center)
            np.testing.assert_allclose(np.asarray(res.normal[j]), e / np.linalg.norm(e), atol=1e-12)
            np.testing.assert_allclose(np.asarray(res.point_bushing[j]), pts[i], atol=0)
        else:
            assert float(res.depth[j]) >= reg["depth"] - 1e-17  # vertex of a concave parabola
        np.testing.assert_allclose(
            np.asarray(res.point_pin[j]), np.asarray(center) + radius * np.asarray(res.normal[j]), atol=1e-15
        )
    assert np.all(np.asarray(res.depth)[m:] == 0)
    assert np.all(np.asarray(res.index)[m:] == 0)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(res.normal), axis=-1), 1.0, atol=1e-12)
    return res, regions


def random_case(rng, n):
    """A random non-circular bushing (n points) and a pin position giving 0..many regions."""
    kind = rng.choice(["fourier", "patch", "ellipse", "all", "none", "wrap"])
    if kind in ("fourier", "wrap"):
        k = int(rng.integers(3, 9))
        a = np.zeros(8)
        b = np.zeros(8)
        a[:k] = rng.normal(0, 1.5e-5, k)
        b[:k] = rng.normal(0, 1.5e-5, k)
        pts = _fourier(RB, a, b, n)
    elif kind == "patch":
        pts = _patch(RB, rng.uniform(1e-5, 8e-5), rng.uniform(0, 2 * np.pi), rng.uniform(0.2, 1.5), n)
    else:
        pts = _ellipse(RB * (1 + rng.uniform(0.0005, 0.005)), RB, n, rng.uniform(0, np.pi))
    pts = np.asarray(pts)
    r = np.hypot(pts[:, 0], pts[:, 1])
    if kind == "all":
        return pts, np.zeros(2), float(r.max()) * 1.001
    if kind == "none":
        return pts, rng.normal(0, 1e-6, 2), float(r.min()) * 0.99
    if kind == "wrap":  # push the pin towards theta = 0 so a run straddles points N-1 and 0
        ang = rng.uniform(-0.5, 0.5) * 2 * np.pi / n
        e = rng.uniform(2e-5, 6e-5)
        return pts, e * np.array([np.cos(ang), np.sin(ang)]), float(r.min()) - rng.uniform(0, 2e-5)
    rp = float(np.median(r)) - rng.uniform(-1e-5, 2e-5)
    return pts, rng.normal(0, 1.5e-5, 2), rp


_fourier = jax.jit(profiles.fourier, static_argnums=3)
_patch = jax.jit(profiles.wear_patch, static_argnums=4)
_ellipse = jax.jit(profiles.ellipse, static_argnums=2)
_vdetect = jax.jit(jax.vmap(contact.detect, in_axes=(0, 0, 0, None, None)), static_argnums=(3, 4))


def test_detect_matches_brute_force_random_profiles():
    rng = np.random.default_rng(1234)
    seen = {"none": 0, "all": 0, "wrap": 0, "multi": 0, "overflow": 0}
    for n in (97,):
        cases = [random_case(rng, n) for _ in range(150)]
        pts = jnp.asarray(np.stack([c[0] for c in cases]))
        cen = jnp.asarray(np.stack([c[1] for c in cases]))
        rps = jnp.asarray(np.array([c[2] for c in cases]))
        brutes = [brute_force(p, c, rp) for p, c, rp in cases]  # once per case, for every K
        for K, refine in ((2, False), (8, False), (3, True)):
            batch = jax.tree_util.tree_map(np.asarray, _vdetect(pts, cen, rps, K, refine))
            for i, (p, c, rp) in enumerate(cases):
                res = jax.tree_util.tree_map(lambda x: x[i], batch)
                res, regions = check_against_brute(p, c, rp, K, refine, res=res, brute=brutes[i])
                if refine:
                    continue
                mask = np.asarray(res.mask)
                seen["none"] += not mask.any()
                seen["all"] += bool(mask.all())
                seen["wrap"] += bool(mask[0] and mask[-1] and not mask.all())
                seen["multi"] += len(regions) >= 2
                seen["overflow"] += len(regions) > K
    for _k, v in seen.items():
        assert v >= 5, seen  # every situation was actually exercised


def test_overflow_counts_all_regions_and_keeps_first_slots():
    # 8-lobed bushing, centred pin touching every lobe valley -> 8 regions
    n = 96
    pts = profiles.fourier(RB, np.array([0, 0, 0, 0, 0, 0, 0, 2e-5]), np.zeros(8), n)
    rp = RB - 1e-5
    res, regions = check_against_brute(pts, np.array([1e-7, 2e-7]), rp, 3)
    assert int(res.n_regions) == 8 and len(regions) == 8
    assert np.all(np.asarray(res.active))
    # regions beyond the slots are labelled K
    assert np.sum(np.asarray(res.labels) == 3) == n - sum(len(r["points"]) for r in regions[:3])


def test_wrapped_run_is_region_zero():
    n = 72
    pts = profiles.circle(RB, n)
    res, regions = check_against_brute(pts, np.array([5e-5, 0.0]), RB - 3e-5, 4)
    mask = np.asarray(res.mask)
    assert mask[0] and mask[-1]
    assert int(res.n_regions) == 1
    labels = np.asarray(res.labels)
    assert np.all(labels[mask] == 0) and np.all(labels[~mask] == 4)
    assert int(res.index[0]) == 0
    np.testing.assert_allclose(np.asarray(res.normal[0]), [1.0, 0.0], atol=1e-12)


def test_all_points_in_contact_is_one_region():
    pts = profiles.ellipse(RB * 1.002, RB, 64, orientation=0.3)
    res, regions = check_against_brute(pts, np.array([1e-6, -2e-6]), RB * 1.01, 3)
    assert np.all(np.asarray(res.mask)) and int(res.n_regions) == 1
    assert np.all(np.asarray(res.labels) == 0)


# ----------------------------------------------------------------------------- convergence
NS = np.array([36, 72, 144, 288, 576, 1152])
E_PIN, RP = 1.5e-4, RB - 1e-4  # eccentricity and pin radius: clearance c = 1e-4, δ = e − c = 5e-5


def _circle_run(n, c):
    pts = profiles.circle(RB, n)
    raw = contact.detect(pts, c, RP, 2)
    ref = contact.detect(pts, c, RP, 2, refine=True)
    return raw.depth[0], ref.depth[0], raw.normal[0], ref.normal[0], raw.n_regions, ref.n_regions


_circle_run = jax.jit(_circle_run, static_argnums=0)


@pytest.fixture(scope="module")
def circle_errors():
    """|depth − (e − c)| and normal errors, pin direction 0.3 Δθ past a grid angle (generic offset)."""
    out = {k: [] for k in ("raw", "ref", "n_raw", "n_ref")}
    for n in NS:
        h = 2 * np.pi / n
        phi = 0.7 - (0.7 % h) + 0.3 * h
        exact_n = np.array([np.cos(phi), np.sin(phi)])
        d_raw, d_ref, n_raw, n_ref, k1, k2 = _circle_run(int(n), jnp.asarray(E_PIN * exact_n))
        assert int(k1) == 1 and int(k2) == 1
        out["raw"].append(abs(float(d_raw) - (E_PIN - (RB - RP))))
        out["ref"].append(abs(float(d_ref) - (E_PIN - (RB - RP))))
        out["n_raw"].append(np.linalg.norm(np.asarray(n_raw) - exact_n))
        out["n_ref"].append(np.linalg.norm(np.asarray(n_ref) - exact_n))
    return {k: np.asarray(v) for k, v in out.items()}


def _slope(errs):
    return np.polyfit(np.log(NS), np.log(errs), 1)[0]


def test_raw_depth_converges_second_order(circle_errors):
    errs = circle_errors["raw"]
    slope = _slope(errs)
    assert -2.2 < slope < -1.8, slope
    # magnitude: e (f Δθ)² / 2 · R_b/(R_b − e) for an offset f·Δθ (≈ e Δθ²/8 at the worst f = ½)
    h = 2 * np.pi / NS
    pred = E_PIN * (0.3 * h) ** 2 / 2 * RB / (RB - E_PIN)
    np.testing.assert_allclose(errs, pred, rtol=0.01)


def test_refined_depth_converges_fourth_order(circle_errors):
    slope = _slope(circle_errors["ref"])
    assert -4.3 < slope < -3.7, slope
    assert np.all(circle_errors["ref"] < circle_errors["raw"] / 100)


def test_normal_converges(circle_errors):
    s_raw, s_ref = _slope(circle_errors["n_raw"]), _slope(circle_errors["n_ref"])
    assert -1.2 < s_raw < -0.8, s_raw  # raw normal points at a grid point: angle error ~ f Δθ
    assert -3.3 < s_ref < -2.7, s_ref


# ----------------------------------------------------------------------------- transforms
def test_jit_and_vmap_match_per_case():
    rng = np.random.default_rng(7)
    pts = profiles.fourier(RB, rng.normal(0, 1.5e-5, 6), rng.normal(0, 1.5e-5, 6), 90)
    centers = jnp.asarray(rng.normal(0, 2e-5, (16, 2)))
    centers = centers.at[0].set(0.0)
    rp = RB - 1e-5
    for refine in (False, True):
        batch = _vdetect(pts[None].repeat(centers.shape[0], 0), centers, jnp.full(centers.shape[0], rp), 4, refine)
        for i in range(centers.shape[0]):
            one = _detect(pts, centers[i], rp, 4, refine)  # jitted single case
            if i == 1 and not refine:  # eager (unjitted) once
                eager = contact.detect(pts, centers[i], rp, 4, refine=refine)
                for name in contact.ContactRegions._fields:
                    np.testing.assert_allclose(
                        np.asarray(getattr(eager, name)), np.asarray(getattr(one, name)), atol=1e-18
                    )
            for name in contact.ContactRegions._fields:
                np.testing.assert_allclose(
                    np.asarray(getattr(batch, name))[i], np.asarray(getattr(one, name)), atol=1e-18
                )


def _loss(points, c, rp, refine):
    r = contact.detect(points, c, rp, 3, refine=refine)
    return jnp.sum(r.depth**2) * 1e6 + jnp.sum(r.normal * jnp.array([0.3, 0.7])) + jnp.sum(r.point_pin)


_grad_loss = jax.jit(jax.grad(_loss, argnums=(0, 1, 2)), static_argnums=3)
_vgrad_loss = jax.jit(jax.vmap(jax.grad(_loss, argnums=1), in_axes=(None, 0, None, None)), static_argnums=3)


@pytest.mark.parametrize("refine", [False, True])
@pytest.mark.parametrize(
    "case",
    ["centred_no_contact", "just_touching", "all_in_contact", "centred_all_in", "two_regions"],
)
def test_gradients_finite(case, refine):
    n = 64
    pts = profiles.ellipse(RB * 1.003, RB, n)
    if case == "centred_no_contact":
        c, rp = jnp.zeros(2), RB * 0.99
    elif case == "just_touching":  # exactly on one point: d = 0 there -> no contact; and a hair inside
        c, rp = jnp.zeros(2), RB
    elif case == "all_in_contact":
        c, rp = jnp.array([1e-6, 0.0]), RB * 1.01
    elif case == "centred_all_in":
        pts = profiles.circle(RB, n)
        c, rp = jnp.zeros(2), RB * 1.001
    else:
        c, rp = jnp.array([0.0, 1e-6]), RB * 1.0005
    for rp_ in (rp, rp * (1 + 1e-12)):
        g = _grad_loss(pts, c, rp_, refine)
        for gi in g:
            assert np.all(np.isfinite(np.asarray(gi))), (case, gi)
        # jit + vmap of grad too
        out = _vgrad_loss(pts, jnp.stack([c, c + 1e-7]), rp_, refine)
        assert np.all(np.isfinite(np.asarray(out)))


def test_depth_gradient_matches_finite_difference():
    rng = np.random.default_rng(3)
    pts = profiles.fourier(RB, rng.normal(0, 1e-5, 5), rng.normal(0, 1e-5, 5), 128)
    c0 = jnp.array([1.2e-5, -0.7e-5])
    rp = RB - 5e-6
    for refine in (False, True):
        vg = jax.jit(jax.value_and_grad(lambda c: jnp.sum(contact.detect(pts, c, rp, 4, refine=refine).depth)))
        g = np.asarray(vg(c0)[1])
        h = 1e-10
        fd = np.array([(vg(c0 + h * u)[0] - vg(c0 - h * u)[0]) / (2 * h) for u in np.eye(2)])
        np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-8)
        # the depth moves like −n·dc for the raw method (point fixed, pin moves)
        if not refine:
            r = _detect(pts, c0, rp, 4, False)
            expect = np.sum(np.asarray(r.normal)[np.asarray(r.active)], axis=0)
            np.testing.assert_allclose(g, expect, rtol=1e-9)


# ----------------------------------------------------------------------------- impact memory
_update = jax.jit(contact.update_impact_memory)


def test_impact_memory_overlap():
    n = 72
    pts = profiles.circle(RB, n)
    rp = RB - 2e-5
    K = 3
    c1 = jnp.array([4e-5, 0.0])
    r1 = _detect(pts, c1, rp, K, False)
    zeros = jnp.zeros(n)
    # step 1: new impact, takes its current approach speed (floored)
    v1, mem1 = _update(r1, jnp.zeros(n, bool), zeros, jnp.array([0.3, 0.9, 0.9]))
    np.testing.assert_allclose(np.asarray(v1), [0.3, 0.0, 0.0])
    np.testing.assert_allclose(np.asarray(mem1), np.where(np.asarray(r1.mask), 0.3, 0.0))
    # step 2: the pin slides so the deepest point jumps many indices but the region overlaps
    c2 = 5e-5 * jnp.array([np.cos(0.35), np.sin(0.35)])
    r2 = _detect(pts, c2, rp, K, False)
    assert abs(int(r2.index[0]) - int(r1.index[0])) >= 3
    v2, mem2 = _update(r2, r1.mask, mem1, jnp.array([0.01, 0.0, 0.0]))
    np.testing.assert_allclose(np.asarray(v2), [0.3, 0.0, 0.0])  # continuing contact, not a new impact
    np.testing.assert_allclose(np.asarray(mem2), np.where(np.asarray(r2.mask), 0.3, 0.0))
    # step 3: contact on the opposite side -> new impact; a negative speed is floored at the
    # laws' impact-velocity floor (one constant for the memory and the hysteresis laws)
    c3 = jnp.array([-4e-5, 0.0])
    r3 = _detect(pts, c3, rp, K, False)
    v3, mem3 = _update(r3, r2.mask, mem2, jnp.array([-1.0, 0.0, 0.0]))
    assert float(v3[0]) == laws.IMPACT_VELOCITY_FLOOR
    assert np.all(np.asarray(mem3)[~np.asarray(r3.mask)] == 0)


def test_impact_memory_two_regions_merge_takes_max():
    n = 96
    pts = profiles.fourier(RB, np.array([0, 0, 0, 2e-5]), np.zeros(4), n)  # 4 valleys at 45° + k 90°
    rp = RB - 1.5e-5
    K = 6
    r = _detect(pts, jnp.array([1e-7, 2e-7]), rp, K, False)
    assert int(r.n_regions) == 4
    mem = jnp.where(r.mask, jnp.asarray(r.labels, float) + 1.0, 0.0)  # region j remembers j+1
    # a larger pin: the valleys widen (no merge at this size) -> each region keeps its own memory
    r2 = _detect(pts, jnp.array([1e-7, 2e-7]), rp + 5e-6, K, False)
    v, m2 = _update(r2, r.mask, mem, jnp.full(K, 5.0))
    np.testing.assert_allclose(np.asarray(v)[:4], [1, 2, 3, 4])
    # all in contact -> one region inheriting the max memory 4
    r3 = _detect(pts, jnp.zeros(2), RB + 3e-5, K, False)
    assert int(r3.n_regions) == 1
    v3, m3 = _update(r3, r2.mask, m2, jnp.full(K, 5.0))
    np.testing.assert_allclose(np.asarray(v3), [4, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(np.asarray(m3), 4.0)
    # jit / grad finite
    f = jax.jit(lambda m, vd: jnp.sum(_update(r3, r2.mask, m, vd)[0]))
    g = jax.grad(f, argnums=(0, 1))(m2, jnp.full(K, 5.0))
    assert all(np.all(np.isfinite(np.asarray(x))) for x in g)


def test_bad_max_regions():
    with pytest.raises(ValueError, match="max_regions"):
        contact.detect(profiles.circle(RB, 36), jnp.zeros(2), RB * 0.9, 0)
