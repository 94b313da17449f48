"""What the two cylindrical-clearance-joint mechanisms (``planet_pin``, ``rotor_two_bearings``)
share: their static Config, its check and its construction from a spec, the spec keys of the
joint's static choices that both declare (``IMPACT_VELOCITY``), and the rule for optional model
keys that switch a static feature on (given or swept: ``given``; one needs another:
``refuse_unpaired``)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import cylindrical_joint as cj
from .. import integrate
from .. import spec as specmod
from ..schema import Param
from ..spec import SpecError
from . import static_law_exponent

#: δ̇⁻ rules of ``cylindrical_joint.Config.impact_velocity``.
IMPACT_VELOCITIES = ("episode_max", "onset")
_IMPACT_VELOCITY_DEFAULT = "episode_max"

#: ``laws.impact_velocity``: optional, so that specs written without it keep their hash.
IMPACT_VELOCITY = Param(
    "impact_velocity",
    _IMPACT_VELOCITY_DEFAULT,
    'impact velocity δ̇⁻ of the hysteresis laws: "episode_max" (when absent) the largest approach rate since '
    'the contact began, "onset" the rate at its first step (the planar joints\' rule)',
    choices=IMPACT_VELOCITIES,
    optional=True,
)


@dataclass(frozen=True)
class Config:
    """dt [s], save_every, n_saves, scheme, outputs, normal_law, friction, impact_velocity (static)."""

    dt: float
    save_every: int
    n_saves: int
    scheme: str
    outputs: tuple
    normal_law: str = "flores"
    friction: str = "coulomb"
    checkpoint: bool = False
    impact_velocity: str = _IMPACT_VELOCITY_DEFAULT
    exponent: float | None = None  # cylindrical_joint.Config.exponent (static_exponent)

    @property
    def n_steps(self):
        return self.n_saves * self.save_every

    @property
    def joint(self):
        return cj.Config(self.normal_law, self.friction, True, self.impact_velocity, self.exponent)


def _impact_velocity(spec):
    return spec["laws"].get("impact_velocity", _IMPACT_VELOCITY_DEFAULT)


def validate_spec(spec):
    """The joint's static choices (their values are checked against the declared choices first,
    ``spec.validate``, with the key's path in the message)."""
    Config(
        1.0,
        1,
        1,
        spec["integrator"]["scheme"],
        (),
        spec["laws"]["normal"],
        spec["friction"]["model"],
        impact_velocity=_impact_velocity(spec),
    ).joint.validate()


def make_config(spec, t_end):
    it = spec["integrator"]
    _, n_saves = integrate.steps_and_saves(t_end, it["dt_s"], it["save_every"])
    return Config(
        it["dt_s"],
        it["save_every"],
        n_saves,
        it["scheme"],
        tuple(spec["outputs"]["histories"]),
        spec["laws"]["normal"],
        spec["friction"]["model"],
        impact_velocity=_impact_velocity(spec),
        exponent=static_law_exponent(spec),
    )


def swept(spec, path):
    """Whether an axis sweeps the dotted ``path``."""
    return path in specmod.axis_paths(spec)


def given(spec, key):
    """Whether the optional ``model.<key>`` is given: written in the spec or swept by an axis."""
    return key in spec["model"] or swept(spec, f"model.{key}")


def refuse_unpaired(spec, key, needs, why):
    """SpecError when ``model.<key>`` is given (``given``) but ``model.<needs>`` is not; ``why``
    ends the message (what the lone key would, or would not, do and the remedy)."""
    if given(spec, key) and not given(spec, needs):
        raise SpecError(f"model.{key} is given but model.{needs} is not: {why}")
