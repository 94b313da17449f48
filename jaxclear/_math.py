"""Small numerics shared by the engine: safe norms and smooth surrogates.

``safe_norm`` uses the double-where trick (jax#1052, jax#5798): the inner ``where`` keeps
the argument of ``sqrt`` away from zero so the gradient of the *unused* branch is finite,
the outer ``where`` returns the exact value.
"""

import jax
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


def pow_fast_path(n) -> bool:
    """Whether ``safe_pow_static`` computes x^n by multiplications: 2n an integer in [1, 8]."""
    return isinstance(n, (int, float)) and float(2 * n).is_integer() and 1 <= 2 * n <= 8


def safe_pow_static(x, n, n_static):
    """max(x, 0)**n for a traced n known at trace time to equal the Python float ``n_static``
    (``pow_fast_path``): x^⌊n⌋ by multiplications times √x when n is a half-integer (a float64
    pow costs ~15 sqrts on XLA's CPU backend).  Where n ≠ n_static the result is NaN: a mismatch
    is loud, never a silently wrong value.  Derivatives with respect to n, of every order, are
    those of x^n (``_at_static``), and x's derivative is finite at x <= 0."""
    pos = x > 0
    xs = jnp.where(pos, x, 1.0)
    m = int(n_static)
    y = jnp.sqrt(xs) if n_static != m else jnp.ones_like(xs)
    for _ in range(m):
        y = y * xs
    return jnp.where(pos, y * _at_static(n, xs, n_static), 0.0)


@jax.custom_jvp
def _at_static_impl(n, x, n_static):
    return jnp.where(n == n_static, jnp.ones_like(x), jnp.nan)


def _at_static(n, x, n_static):
    """x^(n − n_static) at n = n_static: 1 (NaN elsewhere), with the derivatives of x^(n − n_s)
    (d/dn = log x·itself, d/dx = (n − n_s)/x·itself), so x^n_static times it has the
    derivatives of x^n to every order (x > 0)."""
    return _at_static_impl(n, x, jnp.asarray(n_static, jnp.result_type(n)))


@_at_static_impl.defjvp
def _at_static_jvp(primals, tangents):
    n, x, ns = primals
    dn, dx = tangents[0], tangents[1]
    y = _at_static_impl(n, x, ns)
    # d(x^(n − ns)) = x^(n − ns)·(log x dn + (n − ns)/x dx): the dx term is 0 at n = ns but its
    # derivative in n is not (the mixed second derivative of x^n)
    return y, y * (jnp.log(x) * dn + (n - ns) / x * dx)


def cross2(a, b):
    """z-component of the planar cross product a × b (last axis of length 2)."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def perp(a):
    """Rotate a planar vector by +90°: (x, y) -> (-y, x)."""
    return jnp.stack([-a[..., 1], a[..., 0]], axis=-1)
