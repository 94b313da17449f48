"""Test-wide set-up: float64, strict dtype promotion, one persistent compilation cache.

x64 is jaxclear's default (importing it enables ``jax_enable_x64``); it is set here too so a test
module that imports jax before jaxclear still runs in float64.  Strict promotion (as the diffrax and
equinox suites use) makes any implicit mix of array dtypes — float32 with float64, int with float —
an error instead of a silent upcast, so a float32 run cannot quietly fall back to float64 and the
library's casts stay explicit.  Python scalars (weak types) still combine with arrays freely.
A test that checks a promotion behaviour on purpose scopes it with
``jax.numpy_dtype_promotion("standard")``.

Compile cache.  The whole session — both xdist workers and every subprocess a test starts (the
CLI, the service, a second process of a resume) — shares one persistent XLA compilation cache in
``<repo>/.pytest_cache/jaxclear-xla`` (``JAXCLEAR_CACHE_DIR``), so a structure compiled by one
process is loaded by the next and the timings no longer depend on which test ran first or on the
user's ``~/.cache``.  ``JAXCLEAR_TEST_CACHE_DIR`` points it elsewhere (a fresh folder measures a
cold run).  A test of the cache itself (``test_parallel``) uses its own folder.
"""

import os
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("JAXCLEAR_TEST_CACHE_DIR") or ROOT / ".pytest_cache" / "jaxclear-xla")
os.environ["JAXCLEAR_CACHE_DIR"] = str(CACHE_DIR)

from jaxclear import parallel  # noqa: E402  (after the environment it reads)

parallel.enable_compile_cache(CACHE_DIR)
