"""Small numerics shared by the engine: safe norms and smooth surrogates.

``safe_norm`` uses the double-where trick (jax#1052, jax#5798): the inner ``where`` keeps
the argument of ``sqrt`` away from zero so the gradient of the *unused* branch is finite,
the outer ``where`` returns the exact value.
"""

import jax.numpy as jnp


def safe_sqrt(x, eps=0.0):
    """sqrt(x) with a finite gradient at x <= eps (returns 0 there)."""
    pos = x > eps
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def safe_norm(v, axis=-1, keepdims=False):
    """Euclidean norm with a finite (zero) gradient at v = 0 (double-where)."""
    sq = jnp.sum(v * v, axis=axis, keepdims=keepdims)
    return safe_sqrt(sq)


def safe_pow(x, n):
    """max(x, 0)**n with a finite gradient at x <= 0 for any n > 0."""
    pos = x > 0
    return jnp.where(pos, jnp.where(pos, x, 1.0) ** n, 0.0)


def cross2(a, b):
    """z-component of the planar cross product a × b (last axis of length 2)."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def perp(a):
    """Rotate a planar vector by +90°: (x, y) -> (-y, x)."""
    return jnp.stack([-a[..., 1], a[..., 0]], axis=-1)
