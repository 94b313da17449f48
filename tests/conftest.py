"""Test-wide JAX configuration: float64 and strict dtype promotion.

x64 is jaxclear's default (importing it enables ``jax_enable_x64``); it is set here too so a test
module that imports jax before jaxclear still runs in float64.  Strict promotion (as the diffrax and
equinox suites use) makes any implicit mix of array dtypes — float32 with float64, int with float —
an error instead of a silent upcast, so a float32 run cannot quietly fall back to float64 and the
library's casts stay explicit.  Python scalars (weak types) still combine with arrays freely.
A test that checks a promotion behaviour on purpose scopes it with
``jax.numpy_dtype_promotion("standard")``.
"""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
