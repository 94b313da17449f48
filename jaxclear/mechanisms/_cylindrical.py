"""What the two cylindrical-clearance-joint mechanisms (``planet_pin``, ``rotor_two_bearings``)
share: their static Config, its check and its construction from a spec."""

from __future__ import annotations

from dataclasses import dataclass

from .. import cylindrical_joint as cj, integrate


@dataclass(frozen=True)
class Config:
    """dt [s], save_every, n_saves, scheme, outputs, normal_law, friction (static)."""

    dt: float
    save_every: int
    n_saves: int
    scheme: str
    outputs: tuple
    normal_law: str = "flores"
    friction: str = "coulomb"
    checkpoint: bool = False

    @property
    def n_steps(self):
        return self.n_saves * self.save_every

    @property
    def joint(self):
        return cj.Config(self.normal_law, self.friction, True)


def validate_spec(spec):
    Config(1.0, 1, 1, spec["integrator"]["scheme"], (), spec["laws"]["normal"], spec["friction"]["model"]).joint.validate()


def make_config(spec, t_end):
    it = spec["integrator"]
    _, n_saves = integrate.steps_and_saves(t_end, it["dt_s"], it["save_every"])
    return Config(it["dt_s"], it["save_every"], n_saves, it["scheme"], tuple(spec["outputs"]["histories"]),
                  spec["laws"]["normal"], spec["friction"]["model"])
