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

Each test process runs on one CPU device (started here); tests of the device count start subprocesses.
"""

import os
from pathlib import Path

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("JAXCLEAR_TEST_CACHE_DIR") or ROOT / ".pytest_cache" / "jaxclear-xla")
os.environ["JAXCLEAR_CACHE_DIR"] = str(CACHE_DIR)

from jaxclear import parallel  # noqa: E402  (after the environment it reads)

parallel.enable_compile_cache(CACHE_DIR)
# Start the CPU backend now, with its one device: an in-process ``cli.main(["run", ...])`` would otherwise,
# as the first JAX user of its worker, split the host into every core for all later tests of that worker
# (``parallel.set_cpu_devices`` applies only before the backend starts).  Device-count tests use subprocesses.
jax.devices()


# Compile-time accounting: XLA compile (or cache load) seconds per test, from JAX's monitoring events.
# ``JAXCLEAR_COMPILE_REPORT=N pytest ...`` lists the N tests that spent most in compiles (works under xdist:
# the figures travel in each report's user_properties).
_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_compile = {"s": 0.0, "n": 0}


def _on_duration(event, duration, **_):
    if event == _BACKEND_COMPILE:
        _compile["s"] += duration
        _compile["n"] += 1


jax.monitoring.register_event_duration_secs_listener(_on_duration)


def _accounted(item, phase):
    s0, n0 = _compile["s"], _compile["n"]
    yield
    if _compile["n"] > n0:
        item.user_properties.append((f"compile_{phase}", (_compile["s"] - s0, _compile["n"] - n0)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _accounted(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _accounted(item, "call")


def pytest_terminal_summary(terminalreporter):
    n = int(os.environ.get("JAXCLEAR_COMPILE_REPORT") or 0)
    if n <= 0:
        return
    rows = []
    for reports in terminalreporter.stats.values():
        for r in reports:
            if getattr(r, "when", None) == "call":
                props = dict(r.user_properties)
                s = sum(v[0] for k, v in props.items() if k.startswith("compile_"))
                c = sum(v[1] for k, v in props.items() if k.startswith("compile_"))
                rows.append((s, c, r.duration, r.nodeid))
    rows.sort(reverse=True)
    terminalreporter.write_sep(
        "=", f"compile seconds per test (top {n} of {len(rows)}; total {sum(r[0] for r in rows):.1f} s)"
    )
    for s, c, d, nodeid in rows[:n]:
        terminalreporter.write_line(f"{s:7.2f} s in {c:3d} compiles  (test {d:6.2f} s)  {nodeid}")


@pytest.hookimpl(optionalhook=True)  # absent without pytest-xdist (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n`` (whose default is ``--dist load``) schedule by work stealing: each worker starts on a
    contiguous half of the tests, so a module's fixtures are mostly built once, and a worker that runs out
    takes tests from the other's tail, so one long test does not leave a core idle.  An explicit other
    ``--dist`` is kept."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import WorkStealingScheduling

    return WorkStealingScheduling(config, log)
