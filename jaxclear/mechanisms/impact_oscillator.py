"""Two-sided clearance impact oscillator with dry friction (seed 003, first part).

A mass m on a spring k and dashpot c, forced by F0 cos(Ω t), slides on a rough floor and
moves in a clearance between two stops at x = +g_r and x = −g_l:

    m ẍ + c ẋ + k x = F0 cos(Ω t) + F_c(x, ẋ) + F_t,
    F_c = −F_n(x − g_r) + F_n(−g_l − x),   F_n(δ) = K δ^n (1 + χ(e) δ̇/δ̇⁻)  (Hunt–Crossley)
                                             or K δ^n (Hertz),  δ̇⁻ the impact velocity,
    F_t ∈ −μ N Sgn(ẋ) while slipping, |F_t| ≤ μ0 N while stuck (ẋ = 0),  N the floor load.

The seed gives only the title of this problem ("干摩擦下含双侧间隙碰撞振动系统的动力学分析");
the model above is the standard one of that literature and the parameters of
``reference_params`` are our choice (README, "Impact oscillator").

Time stepping (Moreau's midpoint scheme, Moreau 1988; Jean 1999): with h = T/N, T = 2π/Ω,

    x_m = x + h/2·v,   v_free = v + h/m·(F0 cos Ω t_m − k x_m − c v + F_c(x_m, v)),
    (F_t, v⁺) = stick–slip solution of v⁺ = v_free + h/m·F_t   (laws.stick_slip_friction),
    x⁺ = x_m + h/2·v⁺.

The friction law is solved exactly every step (no regularisation band), branch-free: a mass
held by friction gets v⁺ = 0 and x⁺ = x bit for bit.  The contact force is the compliant
penalty law evaluated explicitly, as in the source.  Because h divides the forcing period,
t = n·T falls on steps and the Poincaré section is sampled exactly (no interpolation); the
phase Ω t_m = 2π (j + ½)/N depends only on the step j within a period (no drift).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import laws

SCHEMES = ("moreau_midpoint",)

OUTPUT_CHANNELS = {
    "displacement_m": "mass position x (stops at +gap_right, −gap_left)",
    "velocity_m_per_s": "mass velocity ẋ",
    "contact_force_N": "stop force on the mass (+ from the left stop, − from the right)",
    "friction_force_N": "floor friction force on the mass",
    "stuck": "1 while the mass is held by static friction, else 0",
}
DEFAULT_OUTPUTS = ("displacement_m", "velocity_m_per_s", "contact_force_N", "friction_force_N",
                   "stuck")


@dataclass(frozen=True)
class Config:
    """Static configuration (one compiled function per value).

    steps_per_period N (h = T/N), n_transient periods discarded, n_record periods recorded
    (Poincaré points and histories), histories every ``save_every`` steps (must divide N);
    normal_law: a name of laws.NORMAL_LAWS; friction: laws.STICK_SLIP_MODELS.
    ``dt`` is the nominal step [s] at the reference frequency (the actual one is T/N per
    variant).
    """

    steps_per_period: int = 1000
    n_transient: int = 100
    n_record: int = 50
    save_every: int = 10
    normal_law: str = "hunt_crossley"
    friction: str = "stick_slip"
    outputs: tuple = DEFAULT_OUTPUTS
    scheme: str = "moreau_midpoint"
    dt: float = 0.0

    @property
    def n_saves(self) -> int:
        return self.n_record * (self.steps_per_period // self.save_every)

    @property
    def n_steps(self) -> int:
        return (self.n_transient + self.n_record) * self.steps_per_period

    def validate(self):
        if self.normal_law not in laws.NORMAL_LAWS:
            raise ValueError(f"contact.law = {self.normal_law!r}; allowed: {', '.join(laws.NORMAL_LAWS)}")
        if self.friction not in laws.STICK_SLIP_MODELS:
            raise ValueError(f"friction.model = {self.friction!r}; allowed: {', '.join(laws.STICK_SLIP_MODELS)}")
        if self.steps_per_period % self.save_every:
            raise ValueError(f"outputs.save_every = {self.save_every} must divide "
                             f"integrator.steps_per_period = {self.steps_per_period}")
        bad = [o for o in self.outputs if o not in OUTPUT_CHANNELS]
        if bad:
            raise ValueError(f"outputs.histories contains {bad}; allowed: {', '.join(OUTPUT_CHANNELS)}")
        return self


class Params(NamedTuple):
    """Numeric parameters (SI), batchable leaf by leaf.

    mass m [kg], stiffness k [N/m], damping c [N·s/m], force_amplitude F0 [N],
    forcing_frequency Ω [rad/s], gap_right g_r / gap_left g_l [m] (stops at +g_r, −g_l),
    contact_stiffness K [N/m^n], contact_exponent n, restitution e (Hunt–Crossley χ = 1.5(1−e)),
    mu_static μ0, mu_kinetic μ, normal_load N [N] (floor reaction, e.g. m g),
    v_reg [m/s] (velocity of the regularised law only), x0 [m], v0 [m/s] initial state.
    """

    mass: jnp.ndarray
    stiffness: jnp.ndarray
    damping: jnp.ndarray
    force_amplitude: jnp.ndarray
    forcing_frequency: jnp.ndarray
    gap_right: jnp.ndarray
    gap_left: jnp.ndarray
    contact_stiffness: jnp.ndarray
    contact_exponent: jnp.ndarray
    restitution: jnp.ndarray
    mu_static: jnp.ndarray
    mu_kinetic: jnp.ndarray
    normal_load: jnp.ndarray
    v_reg: jnp.ndarray
    x0: jnp.ndarray
    v0: jnp.ndarray


def reference_params(**kw) -> Params:
    """Our reference oscillator (SI): 1 kg on 1 kN/m (ω_n = 31.6 rad/s, 5.03 Hz), ζ = 2 %,
    F0 = 20 N, symmetric gap 5 mm, steel-like Hertz stop K = 1e8 N/m^1.5 with Hunt–Crossley
    e = 0.7, floor friction μ0 = 0.25, μ = 0.18 under N = m g, Ω = 30 rad/s.  Any field can be
    overridden by keyword (arrays allowed)."""
    base = dict(mass=1.0, stiffness=1000.0, damping=2 * 0.02 * (1000.0 * 1.0) ** 0.5,
                force_amplitude=20.0, forcing_frequency=30.0, gap_right=5e-3, gap_left=5e-3,
                contact_stiffness=1e8, contact_exponent=1.5, restitution=0.7, mu_static=0.25,
                mu_kinetic=0.18, normal_load=9.81, v_reg=1e-3, x0=0.0, v0=0.0)
    unknown = set(kw) - set(base)
    if unknown:
        raise TypeError(f"unknown oscillator parameters {sorted(unknown)}; known: {', '.join(base)}")
    base.update(kw)
    f = lambda x: jnp.asarray(x, dtype=jnp.result_type(float))
    return Params(**{k: f(v) for k, v in base.items()})


class State(NamedTuple):
    """x [m], v [m/s], impact-velocity memory δ̇⁻ of the (right, left) stops [m/s] and their
    previous contact flags."""

    x: jnp.ndarray
    v: jnp.ndarray
    v_minus: jnp.ndarray
    in_contact: jnp.ndarray


class Step(NamedTuple):
    """Per-step outputs: state after the step, forces over it, works over it [J]."""

    x: jnp.ndarray
    v: jnp.ndarray
    contact_force: jnp.ndarray
    friction_force: jnp.ndarray
    stuck: jnp.ndarray
    impact: jnp.ndarray  # a stop is hit (contact onset) in this step
    work_forcing: jnp.ndarray
    work_damping: jnp.ndarray
    work_friction: jnp.ndarray
    work_contact: jnp.ndarray


class Result(NamedTuple):
    """history: {channel: (n_saves,)} over the recorded periods; poincare_x/v: (n_record,)
    state at t = (n_transient + r + 1)·T; final state; per-run reductions over the recorded
    periods (stuck_fraction, impacts per period, peaks) and works over the whole run [J]."""

    history: dict
    poincare_x: jnp.ndarray
    poincare_v: jnp.ndarray
    final: State
    stuck_fraction: jnp.ndarray
    impacts_per_period: jnp.ndarray
    peak_contact_force: jnp.ndarray
    peak_displacement: jnp.ndarray
    stick_slip_transitions: jnp.ndarray
    work_forcing: jnp.ndarray
    work_damping: jnp.ndarray
    work_friction: jnp.ndarray
    work_contact: jnp.ndarray


def initial_state(p: Params) -> State:
    z2 = jnp.zeros(2, dtype=jnp.result_type(p.x0))
    return State(p.x0 + 0 * p.v0, p.v0 + 0 * p.x0, z2, jnp.zeros(2, bool))


def contact_force(cfg: Config, p: Params, x, v, v_minus):
    """Stop forces on the mass at (x, v): (F_c [N], penetrations (right, left) [m],
    penetration rates [m/s]).  δ_r = x − g_r, δ̇_r = v;  δ_l = −g_l − x, δ̇_l = −v."""
    delta = jnp.stack([x - p.gap_right, -p.gap_left - x])
    rate = jnp.stack([v, -v])
    fn = laws.normal_force(cfg.normal_law, delta, rate, v_minus, p.contact_stiffness,
                           p.contact_exponent, p.restitution)
    return fn[1] - fn[0], delta, rate


def period(p: Params):
    return 2.0 * jnp.pi / p.forcing_frequency


def make_step(cfg: Config):
    """``step(p, state, j) -> (state, Step)`` for step j (0 ≤ j < N) of a forcing period."""
    N = cfg.steps_per_period

    def step(p: Params, s: State, j):
        h = period(p) / N
        x_m = s.x + 0.5 * h * s.v
        fc, delta, rate = contact_force(cfg, p, x_m, s.v, s.v_minus)
        contact = delta > 0.0
        onset = contact & ~s.in_contact
        v_minus = jnp.where(onset, rate, s.v_minus)
        fc, _, _ = contact_force(cfg, p, x_m, s.v, v_minus)
        f_force = p.force_amplitude * jnp.cos(2.0 * jnp.pi * (j + 0.5) / N)
        f_damp = -p.damping * s.v
        v_free = s.v + h / p.mass * (f_force - p.stiffness * x_m + f_damp + fc)
        if cfg.friction == "stick_slip":
            ft, v1, stuck = laws.stick_slip_friction(v_free, 1.0 / p.mass, p.normal_load,
                                                     p.mu_static, p.mu_kinetic, h)
        elif cfg.friction == "regularised":
            ft = laws.friction_force("coulomb", s.v, p.normal_load, p.mu_kinetic, v0=p.v_reg)
            v1 = v_free + h / p.mass * ft
            stuck = jnp.abs(v1) < p.v_reg
        else:
            ft, v1, stuck = jnp.zeros_like(v_free), v_free, jnp.zeros_like(v_free, bool)
        x1 = x_m + 0.5 * h * v1
        dx = x1 - s.x
        out = Step(x1, v1, fc, ft, stuck, jnp.any(onset), f_force * dx, f_damp * dx, ft * dx,
                   fc * dx)
        return State(x1, v1, v_minus, contact), out

    return step


def _channels(cfg: Config, o: Step):
    full = {"displacement_m": o.x, "velocity_m_per_s": o.v, "contact_force_N": o.contact_force,
            "friction_force_N": o.friction_force, "stuck": o.stuck.astype(o.x.dtype)}
    return {c: full[c] for c in cfg.outputs}


def simulate(cfg: Config, p: Params) -> Result:
    """Run n_transient + n_record forcing periods of one variant (pure; vmap over ``p``)."""
    N, k = cfg.steps_per_period, cfg.save_every
    step = make_step(cfg)
    dtype = jnp.result_type(p.x0)
    zero = jnp.zeros((), dtype)
    works0 = (zero, zero, zero, zero)

    def add_works(w, o):
        return (w[0] + o.work_forcing, w[1] + o.work_damping, w[2] + o.work_friction,
                w[3] + o.work_contact)

    def transient_period(carry, _):
        def inner(c, j):
            s, w = c
            s, o = step(p, s, j)
            return (s, add_works(w, o)), None
        return jax.lax.scan(inner, carry, jnp.arange(N))[0], None

    carry = (initial_state(p), works0)
    if cfg.n_transient:
        carry, _ = jax.lax.scan(transient_period, carry, jnp.arange(cfg.n_transient))

    # acc: works, n stuck steps, n impacts, peak |F_c|, peak |x|, transitions, last stuck
    acc0 = (carry[1], zero, zero, zero, zero, zero, -jnp.ones((), dtype))  # last: -1 = none yet

    def inner(c, j):
        s, a = c
        s, o = step(p, s, j)
        a = (add_works(a[0], o), a[1] + o.stuck, a[2] + o.impact,
             jnp.maximum(a[3], jnp.abs(o.contact_force)), jnp.maximum(a[4], jnp.abs(o.x)),
             a[5] + ((a[6] >= 0) & (o.stuck != (a[6] > 0))), o.stuck.astype(dtype))
        return (s, a), o

    def block(c, jj):
        c, _ = jax.lax.scan(lambda c, j: (inner(c, j)[0], None), c, jj * k + jnp.arange(k - 1))
        c, o = inner(c, jj * k + k - 1)
        return c, _channels(cfg, o)

    def record_period(c, _):
        c, hist = jax.lax.scan(block, c, jnp.arange(N // k))
        return c, (hist, c[0].x, c[0].v)

    (s, acc), (hist, px, pv) = jax.lax.scan(record_period, (carry[0], acc0),
                                           jnp.arange(cfg.n_record))
    hist = {ch: h.reshape(-1) for ch, h in hist.items()}
    n_rec = cfg.n_record * N
    w = acc[0]
    return Result(hist, px, pv, s, acc[1] / n_rec, acc[2] / cfg.n_record, acc[3], acc[4], acc[5],
                  *w)
