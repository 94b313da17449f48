"""jaxclear: dynamics of mechanisms with clearance joints, branch-free and batched with JAX.

float64 is the default (µm penetrations on 0.1 m mechanisms need it): importing jaxclear
enables ``jax_enable_x64``.  Pass ``precision="float32"`` to a model to run in single precision.
"""

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"
