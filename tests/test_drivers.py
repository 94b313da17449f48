"""The shared crank driver (drivers.crank_ramp): ramp from rest, its inverse, the crank pin."""

import types

import jax
import jax.numpy as jnp
import numpy as np

import jaxclear  # noqa: F401  (float64)
from jaxclear import drivers


def test_ramp_time_inverts_the_ramp_and_the_pin_follows_it():
    w, tr, th0 = 300.0, 0.02, 0.4
    t = jnp.concatenate([jnp.linspace(0.0, 0.06, 61), jnp.array([tr])])
    # every piece jitted (compiled once each) rather than run op by op, which compiles each primitive
    th, thd, thdd = jax.jit(jax.vmap(lambda tt: drivers.crank_ramp(tt, w, tr, th0)))(t)
    ramp_time = jax.jit(drivers.crank_ramp_time)
    # the inverse gives back t from the travel, in the ramp (t² branch) and after it
    np.testing.assert_allclose(ramp_time(th - th0, w, tr), t, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ramp_time(-1.0, w, tr), 0.0)  # before the start
    # no ramp: θ = θ₀ + ω t, θ̈ = 0, and t = angle/ω
    th_c, thd_c, thdd_c = jax.jit(drivers.crank_ramp)(t, w, 0.0, th0)
    np.testing.assert_allclose(th_c, th0 + w * t, rtol=1e-15)
    assert np.all(np.asarray(thd_c) == w) and np.all(np.asarray(thdd_c) == 0.0)
    np.testing.assert_allclose(ramp_time(w * t, w, 0.0), t, rtol=1e-12)

    # crank pin from the carried pair: B = r u, Ḃ and B̈ are the t-derivatives of r u(θ(t))
    class P:
        crank_length, crank_speed, ramp_time = 0.05, w, tr

    def pin(tt):
        a, ad, _ = drivers.crank_ramp(tt, w, tr, th0)
        u = jnp.stack([jnp.cos(a), jnp.sin(a)])
        return drivers.crank_pin(P, types.SimpleNamespace(crank=u), types.SimpleNamespace(crank=ad), tt)

    pos = lambda tt: pin(tt)[0]  # noqa: E731
    pin_j, d_pos, dd_pos = jax.jit(pin), jax.jit(jax.jacfwd(pos)), jax.jit(jax.jacfwd(jax.jacfwd(pos)))
    for tt in (0.3 * tr, 2.0 * tr):
        b, vb, ab, alpha = pin_j(tt)
        np.testing.assert_allclose(vb, d_pos(tt), rtol=1e-12)
        np.testing.assert_allclose(ab, dd_pos(tt), rtol=1e-10, atol=1e-9)
        assert float(alpha) == (w / tr if tt < tr else 0.0)
