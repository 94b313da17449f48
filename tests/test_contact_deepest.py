"""One-slot contact detection (contact.detect_deepest, the joint's path for max_regions = 1):
against the brute-force walk of test_contact, equal to contact.detect wherever there is at most
one region, and a whole simulation equal to the full four-slot pass on the benchmark's bushing."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_contact import brute_force
from test_contact_window import _bench_params, _random_cases

import jaxclear  # noqa: F401  (float64)
from jaxclear import contact, joints, profiles
from jaxclear.mechanisms import slider_crank as sc

RJ = 0.010
_deep = jax.jit(jax.vmap(contact.detect_deepest, in_axes=(0, 0, None, None)), static_argnums=3)
_full = jax.jit(jax.vmap(contact.detect, in_axes=(0, 0, None, None, None)), static_argnums=(3, 4))


@functools.cache
def _brute_cases():
    """The sample and its brute-force walks (the same for both parametrizations)."""
    pts, cen = _random_cases(300, 72, seed=11)
    return pts, cen, [brute_force(p, c, RJ) for p, c in zip(np.asarray(pts), np.asarray(cen))]


@pytest.mark.parametrize("refine", [True, False])
def test_deepest_matches_brute_force_and_full_detection(refine):
    pts, cen, brutes = _brute_cases()
    r = jax.tree_util.tree_map(np.asarray, _deep(pts, cen, RJ, refine))
    f = jax.tree_util.tree_map(np.asarray, _full(pts, cen, RJ, 8, refine))
    pts, cen = np.asarray(pts), np.asarray(cen)
    n_multi = 0
    for i in range(pts.shape[0]):
        regions, d = brutes[i]
        assert int(r.n_regions[i]) == len(regions)
        assert bool(r.active[i, 0]) == (len(regions) > 0)
        if not regions:
            assert float(r.depth[i, 0]) == 0.0
            continue
        deepest = max(regions, key=lambda g: (g["depth"], -g["index"]))
        # the index is the deepest point of the whole profile (near-ties within 1e-14 relative
        # of d² may go either way: compare depths)
        assert abs(d[int(r.index[i, 0])] - deepest["depth"]) <= 1e-15
        if not refine:
            np.testing.assert_allclose(float(r.depth[i, 0]), deepest["depth"], rtol=0, atol=1e-15)
        n_multi += len(regions) >= 2
        if len(regions) == 1:  # one region: every field equals the full pass
            assert int(r.index[i, 0]) == int(f.index[i, 0])
            # same formulas; the compiled rounding differs (1e-15 on a unit normal)
            for fld, tol in (("depth", 1e-15), ("normal", 1e-13), ("point_bushing", 1e-15), ("point_pin", 1e-15)):
                np.testing.assert_allclose(
                    np.asarray(getattr(r, fld))[i, 0], np.asarray(getattr(f, fld))[i, 0], rtol=0, atol=tol, err_msg=fld
                )
    assert n_multi >= 8  # the sample has several multi-region cases


def test_word_run_count_matches_a_loop():
    rng = np.random.default_rng(5)
    for n in (3, 8, 23, 24, 25, 47, 48, 72, 100, 241):
        m = rng.random((40, n)) < rng.uniform(0.05, 0.95, (40, 1))
        m[:2] = [[False] * n, [True] * n]  # none / all in contact
        words, count = jax.jit(
            jax.vmap(
                lambda x: (contact.pack_mask(x, jnp.int32), contact._word_starts(contact.pack_mask(x, jnp.int32), n))
            )
        )(m)
        words, count = np.asarray(words), np.asarray(count)
        for i in range(m.shape[0]):
            starts = sum(bool(m[i, k] and not m[i, k - 1]) for k in range(n))
            assert int(count[i]) == starts, (n, m[i].astype(int))
            # the words hold the mask bit by bit
            bits = [(int(words[i, k // 24]) >> (k % 24)) & 1 for k in range(n)]
            assert bits == list(m[i].astype(int))


def test_wrapped_and_all_in_contact_are_one_region():
    pts = profiles.circle(RJ + 5e-4, 72)
    r = contact.detect_deepest(pts, jnp.array([5e-4 + 3e-5, 1e-7]), RJ, refine=True)
    m = np.asarray(r.mask)
    assert m[0] and m[-1] and int(r.n_regions) == 1 and int(r.index[0]) == 0
    # analytic depth of a circle, |e| − c, to the refinement's accuracy
    np.testing.assert_allclose(float(r.depth[0]), np.hypot(5.3e-4, 1e-7) - 5e-4, rtol=1e-4)
    allin = contact.detect_deepest(pts, jnp.array([1e-6, -2e-6]), (RJ + 5e-4) * 1.01)
    assert np.all(np.asarray(allin.mask)) and int(allin.n_regions) == 1
    none = contact.detect_deepest(pts, jnp.array([1e-5, 0.0]), RJ)
    assert int(none.n_regions) == 0 and not bool(none.active[0]) and float(none.depth[0]) == 0.0


def test_packed_argmin_both_forms_pick_the_first_minimum():
    rng = np.random.default_rng(2)
    for n in (5, 72, 300):
        for _ in range(20):
            d2 = rng.uniform(1e-5, 2e-4, n)
            if rng.random() < 0.5:  # exact ties: the lowest index wins
                d2[rng.integers(0, n, 3)] = d2.min()
            want = int(np.argmin(d2))
            for dt in (jnp.float64, jnp.float32):
                x = jnp.asarray(d2, dt)
                assert int(contact._first_argmin(x)) == int(np.argmin(np.asarray(x))), (n, dt)
                assert int(contact._first_argmin(x, packed=False)) == int(np.argmin(np.asarray(x)))
            assert int(contact._first_argmin(jnp.asarray(d2))) == want


def test_deepest_gradients_match_finite_differences():
    p = profiles.fourier(RJ + 5e-4, jnp.array([0.0, 1.5e-4]), jnp.array([1e-4]), 72)

    def depth(e):
        return contact.detect_deepest(p, jnp.array([e, 0.3 * e]), RJ, refine=True).depth[0]

    depth, grad = jax.jit(depth), jax.jit(jax.grad(depth))  # one compile each, not op by op
    for e in (0.0, 4.0e-4):  # centred pin and no contact: finite zero gradients
        assert np.isfinite(float(grad(e)))
    e0, h = 6.6e-4, 1e-9
    assert float(depth(e0)) > 1e-6
    g = float(grad(e0))
    fd = (float(depth(e0 + h)) - float(depth(e0 - h))) / (2 * h)
    assert g > 0 and abs(g - fd) <= 1e-4 * abs(fd)


def _sim(max_regions, p, steps=1500):
    jc = joints.JointConfig(geometry="points", n_points=72, max_regions=max_regions, refine=True)
    cfg = sc.Config(dt=1e-6, n_saves=10, save_every=steps // 10, joint=jc, outputs=())
    return jax.jit(jax.vmap(lambda q: sc.simulate(cfg, q)))(p)


@pytest.mark.slow
def test_one_slot_simulation_equals_the_full_pass_on_ovalised_bushing():
    p = _bench_params([0.5e-3, 0.1e-3, 0.03e-3])
    full, one = _sim(4, p), _sim(1, p)
    assert np.all(np.asarray(full.acc.max_regions) == 1)  # one region at a time on this bushing
    assert np.all(np.asarray(full.acc.impacts) >= 1)
    assert joints.JointConfig(geometry="points", n_points=72, max_regions=1).memory_size == 4
    for f in ("peak_force", "peak_acc", "impacts", "contact_steps", "max_regions"):
        np.testing.assert_allclose(
            np.asarray(getattr(one.acc, f)), np.asarray(getattr(full.acc, f)), rtol=1e-9, err_msg=f
        )
    jax.tree_util.tree_map(
        lambda a, b: np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12), one.q, full.q
    )
    r32 = _sim(1, _bench_params([0.5e-3], jnp.float32))
    assert r32.q.slider.dtype == jnp.float32 and np.all(np.isfinite(np.asarray(r32.q.slider)))
    assert float(np.asarray(r32.acc.peak_force)[0, 0]) > 0


def test_one_slot_memory_sees_a_new_impact_only_without_overlap():
    pts = profiles.circle(RJ + 5e-4, 72)
    reg0 = contact.detect_deepest(pts, jnp.array([5.2e-4, 0.0]), RJ)
    mem = jnp.zeros(1 + contact.mask_words(72))
    out0, mem1, inh0 = contact.deepest_impact_memory(reg0, mem, jnp.array([0.3]))
    assert float(out0[0]) == pytest.approx(0.3) and not bool(inh0[0])
    # next step, overlapping contact: keeps δ̇⁻ = 0.3 whatever the current approach speed
    reg1 = contact.detect_deepest(pts, jnp.array([5.2e-4, 2e-6]), RJ)
    out1, mem2, inh1 = contact.deepest_impact_memory(reg1, mem1, jnp.array([0.01]))
    assert bool(inh1[0]) and float(out1[0]) == pytest.approx(0.3)
    # contact jumps to the opposite side (no point in common): a new impact
    reg2 = contact.detect_deepest(pts, jnp.array([-5.2e-4, 0.0]), RJ)
    out2, _, inh2 = contact.deepest_impact_memory(reg2, mem2, jnp.array([0.05]))
    assert not bool(inh2[0]) and float(out2[0]) == pytest.approx(0.05)
