"""jaxclear: dynamics of mechanisms with clearance joints, branch-free and batched with JAX.

float64 is the default (µm penetrations on 0.1 m mechanisms need it): importing jaxclear
enables ``jax_enable_x64``.  Cast a model's params to float32 (or set
``integrator.precision = "float32"`` in a spec) to run in single precision.

Modules: ``profiles`` (bushing curves), ``contact`` (Xu (2015) region detection), ``laws``
(normal and friction laws), ``joints`` (clearance joint force element), ``drivers``
(prescribed crank motion), ``multibody``
(general Cartesian engine), ``mechanisms`` (slider-crank, ...), ``integrate`` (fixed-step
schemes under lax.scan), ``metrics``, ``spec`` and ``sweep`` (TOML sweeps), ``plots``.
"""

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"

from . import contact, drivers, integrate, joints, laws, metrics, multibody, profiles, spec, sweep  # noqa: E402  # noqa: E402
from .contact import ContactRegions, detect  # noqa: E402
from .mechanisms import slider_crank  # noqa: E402

__all__ = [
    "contact",
    "drivers",
    "integrate",
    "joints",
    "laws",
    "metrics",
    "multibody",
    "profiles",
    "slider_crank",
    "spec",
    "sweep",
    "detect",
    "ContactRegions",
    "__version__",
]
