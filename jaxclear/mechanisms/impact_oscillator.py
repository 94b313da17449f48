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

import jax.numpy as jnp

from .. import integrate, laws
from . import float_params

SCHEMES = ("moreau_midpoint",)

OUTPUT_CHANNELS = {
    "displacement_m": "mass position x (stops at +gap_right, −gap_left)",
    "velocity_m_per_s": "mass velocity ẋ",
    "contact_force_N": "stop force on the mass (+ from the left stop, − from the right)",
    "friction_force_N": "floor friction force on the mass",
    "stuck": "1 while the mass is held by static friction, else 0",
}
DEFAULT_OUTPUTS = ("displacement_m", "velocity_m_per_s", "contact_force_N", "friction_force_N", "stuck")


@dataclass(frozen=True)
class Config:
    """Static configuration (one compiled function per value).

    steps_per_period N (h = T/N of each variant), n_transient periods discarded, then
    n_saves × save_every recorded steps with a history sample every ``save_every`` steps
    (save_every = N: the Poincaré section, one point per period at t = n·T);
    normal_law: a name of laws.NORMAL_LAWS; friction: laws.STICK_SLIP_MODELS.
    ``dt`` is the step [s] of the highest-frequency variant (nominal: for the store's time
    axis and estimates; each variant steps with its own T/N).
    """

    steps_per_period: int = 1000
    n_transient: int = 100
    n_saves: int = 50
    save_every: int = 1000
    normal_law: str = "hunt_crossley"
    friction: str = "stick_slip"
    outputs: tuple = DEFAULT_OUTPUTS
    scheme: str = "moreau_midpoint"
    dt: float = 0.0

    @property
    def n_record_steps(self) -> int:
        return self.n_saves * self.save_every

    @property
    def n_record(self) -> int:
        """Whole forcing periods recorded."""
        return self.n_record_steps // self.steps_per_period

    @property
    def n_steps(self) -> int:
        return self.n_transient * self.steps_per_period + self.n_record_steps

    def validate(self):
        if self.normal_law not in laws.NORMAL_LAWS:
            raise ValueError(f"contact.law = {self.normal_law!r}; allowed: {', '.join(laws.NORMAL_LAWS)}")
        if self.friction not in laws.STICK_SLIP_MODELS:
            raise ValueError(f"friction.model = {self.friction!r}; allowed: {', '.join(laws.STICK_SLIP_MODELS)}")
        bad = [o for o in self.outputs if o not in OUTPUT_CHANNELS]
        if bad:
            raise ValueError(f"outputs.histories contains {bad}; allowed: {', '.join(OUTPUT_CHANNELS)}")
        return self

    @staticmethod
    def periods(steps_per_period=1000, n_transient=100, n_record=50, save_every=None, **kw):
        """Config recording ``n_record`` whole periods (save_every defaults to N: Poincaré)."""
        se = steps_per_period if save_every is None else save_every
        if (n_record * steps_per_period) % se:
            raise ValueError(f"save_every = {se} must divide the {n_record * steps_per_period} recorded steps")
        return Config(
            steps_per_period=steps_per_period,
            n_transient=n_transient,
            n_saves=n_record * steps_per_period // se,
            save_every=se,
            **kw,
        )


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
    base = dict(
        mass=1.0,
        stiffness=1000.0,
        damping=2 * 0.02 * (1000.0 * 1.0) ** 0.5,
        force_amplitude=20.0,
        forcing_frequency=30.0,
        gap_right=5e-3,
        gap_left=5e-3,
        contact_stiffness=1e8,
        contact_exponent=1.5,
        restitution=0.7,
        mu_static=0.25,
        mu_kinetic=0.18,
        normal_load=9.81,
        v_reg=1e-3,
        x0=0.0,
        v0=0.0,
    )
    return float_params(Params, base, kw, "oscillator")


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
    """history: {channel: (n_saves,)} over the recorded steps; poincare_x/v: (n_record,) state
    at the recorded period ends t = (n_transient + r + 1)·T; final state; reductions over the
    recorded steps (stuck_fraction, impacts per period, peaks, stick–slip transitions) and the
    works of each force over the whole run [J]."""

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
    finite: jnp.ndarray


def initial_state(p: Params) -> State:
    z2 = jnp.zeros(2, dtype=jnp.result_type(p.x0))
    return State(p.x0 + 0 * p.v0, p.v0 + 0 * p.x0, z2, jnp.zeros(2, bool))


def contact_force(cfg: Config, p: Params, x, v, v_minus):
    """Stop forces on the mass at (x, v): (F_c [N], penetrations (right, left) [m],
    penetration rates [m/s]).  δ_r = x − g_r, δ̇_r = v;  δ_l = −g_l − x, δ̇_l = −v."""
    delta = jnp.stack([x - p.gap_right, -p.gap_left - x])
    rate = jnp.stack([v, -v])
    fn = laws.normal_force(cfg.normal_law, delta, rate, v_minus, p.contact_stiffness, p.contact_exponent, p.restitution)
    return fn[1] - fn[0], delta, rate


def period(p: Params):
    return 2.0 * jnp.pi / p.forcing_frequency


def make_step(cfg: Config):
    """``step(p, state, j) -> (state, Step)`` for step j (0 ≤ j < N) of a forcing period."""
    N = cfg.steps_per_period

    def step(p: Params, s: State, j):
        h = period(p) / N
        with integrate.stage("integrator_update"):
            x_m = s.x + 0.5 * h * s.v
        with integrate.stage("contact_laws"):  # stop penetrations, onset memory, normal law
            fc, delta, rate = contact_force(cfg, p, x_m, s.v, s.v_minus)
            contact = delta > 0.0
            onset = contact & ~s.in_contact
            v_minus = jnp.where(onset, rate, s.v_minus)
            fc, _, _ = contact_force(cfg, p, x_m, s.v, v_minus)
        with integrate.stage("equations_of_motion"):
            f_force = p.force_amplitude * jnp.cos(2.0 * jnp.pi * (jnp.asarray(j, dtype=float) + 0.5) / N).astype(
                s.x.dtype
            )
            f_damp = -p.damping * s.v
            v_free = s.v + h / p.mass * (f_force - p.stiffness * x_m + f_damp + fc)
        with integrate.stage("contact_laws"):  # set-valued friction on the impulse h·F_t
            if cfg.friction == "stick_slip":
                ft, v1, stuck = laws.stick_slip_friction(
                    v_free, 1.0 / p.mass, p.normal_load, p.mu_static, p.mu_kinetic, h
                )
            elif cfg.friction == "lcp_acceleration":
                ft, stuck = laws.stick_slip_friction_acceleration(
                    s.v, (v_free - s.v) / h, 1.0 / p.mass, p.normal_load, p.mu_static, p.mu_kinetic, p.v_reg
                )
                v1 = v_free + h / p.mass * ft
            elif cfg.friction == "regularised":
                ft = laws.friction_force("coulomb", s.v, p.normal_load, p.mu_kinetic, v0=p.v_reg)
                v1 = v_free + h / p.mass * ft
                stuck = jnp.abs(v1) < p.v_reg
            else:
                ft, v1, stuck = jnp.zeros_like(v_free), v_free, jnp.zeros_like(v_free, bool)
        with integrate.stage("integrator_update"):
            x1 = x_m + 0.5 * h * v1
            dx = x1 - s.x
        out = Step(x1, v1, fc, ft, stuck, jnp.any(onset), f_force * dx, f_damp * dx, ft * dx, fc * dx)
        return State(x1, v1, v_minus, contact), out

    return step


def _channels(cfg: Config, o: Step):
    full = {
        "displacement_m": o.x,
        "velocity_m_per_s": o.v,
        "contact_force_N": o.contact_force,
        "friction_force_N": o.friction_force,
        "stuck": o.stuck.astype(o.x.dtype),
    }
    return {c: full[c] for c in cfg.outputs}


def simulate(cfg: Config, p: Params) -> Result:
    """n_transient periods, then n_saves × save_every recorded steps (pure; vmap over ``p``);
    both phases under ``integrate.simulate``'s save-block scan (step i is step i mod N of its
    forcing period)."""
    N = cfg.steps_per_period
    period_step = make_step(cfg)
    step = lambda p_, s, i: period_step(p_, s, jnp.remainder(i, N))
    dtype = jnp.result_type(p.x0)
    zero = jnp.zeros((), dtype)
    works0 = (zero, zero, zero, zero)

    def add_works(w, o):
        return (w[0] + o.work_forcing, w[1] + o.work_damping, w[2] + o.work_friction, w[3] + o.work_contact)

    s = initial_state(p)
    works = works0
    if cfg.n_transient:
        s, works, _ = integrate.simulate(step, p, s, works0, lambda w, o, i: add_works(w, o), cfg.n_transient, N)

    # acc: works, n stuck steps, n impacts, peak |F_c|, peak |x|, transitions, last stuck
    acc0 = (works, zero, zero, zero, zero, zero, -jnp.ones((), dtype))  # last: -1 = none yet

    def reduce(a, o, i):
        return (
            add_works(a[0], o),
            a[1] + o.stuck.astype(dtype),
            a[2] + o.impact.astype(dtype),
            jnp.maximum(a[3], jnp.abs(o.contact_force)),
            jnp.maximum(a[4], jnp.abs(o.x)),
            a[5] + ((a[6] >= 0) & (o.stuck != (a[6] > 0))).astype(dtype),
            o.stuck.astype(dtype),
        )

    s, acc, (hist, xs, vs) = integrate.simulate(
        step, p, s, acc0, reduce, cfg.n_saves, cfg.save_every, save=lambda o: (_channels(cfg, o), o.x, o.v)
    )
    # Poincaré points: the saves that fall on period ends (every N/k-th when k divides N)
    k = cfg.save_every
    if N % k == 0:
        sel = slice(N // k - 1, None, N // k)
        px, pv = xs[sel], vs[sel]
    else:
        px, pv = xs[:0], vs[:0]
    n_rec = cfg.n_record_steps
    w = acc[0]
    fin = jnp.isfinite(s.x) & jnp.isfinite(s.v)
    return Result(hist, px, pv, s, acc[1] / n_rec, acc[2] * N / n_rec, acc[3], acc[4], acc[5], *w, fin)


# ------------------------------------------------------------------------------------------
# Sweep protocol (jaxclear.mechanisms): `jaxclear run sweeps/impact_oscillator_*.toml`
# ------------------------------------------------------------------------------------------
import math  # noqa: E402

import numpy as np  # noqa: E402

from .. import spec as specmod  # noqa: E402
from ..schema import NONNEGATIVE, POSITIVE, Param, Table  # noqa: E402
from ..spec import SpecError  # noqa: E402
from . import declared  # noqa: E402

MODEL = Table(
    "model",
    (
        Param("mechanism", "impact_oscillator", "registered mechanism name"),
        Param("mass_kg", 1.0, "mass m", range=POSITIVE, field="mass"),
        Param("stiffness_N_per_m", 1000.0, "spring stiffness k", range=NONNEGATIVE, field="stiffness"),
        Param(
            "damping_N_s_per_m", 2 * 0.02 * math.sqrt(1000.0), "viscous damping c", range=NONNEGATIVE, field="damping"
        ),
        Param(
            "force_amplitude_N",
            20.0,
            "harmonic force amplitude F0",
            range=(-math.inf, math.inf, True),
            field="force_amplitude",
        ),
        Param(
            "forcing_frequency_rad_per_s",
            30.0,
            "forcing frequency Ω",
            range=(0.0, 1e6, False),
            field="forcing_frequency",
        ),
        Param("gap_m", 5e-3, "half distance g between the stops", range=(0.0, 1.0, False)),
        Param("gap_offset_m", 0.0, "offset of the stops' centre (stops at offset ± gap)", range=(-1.0, 1.0, True)),
        Param("initial_position_m", 0.0, "x(0)", range=(-1.0, 1.0, True), field="x0"),
        Param("initial_velocity_m_per_s", 0.0, "ẋ(0)", range=(-1e3, 1e3, True), field="v0"),
    ),
    doc="oscillator and forcing (Wang & Wang 2015)",
)
LAWS = Table(
    "laws",
    (
        Param(
            "normal",
            "hunt_crossley",
            "normal-force law at the stops",
            choices=laws.NORMAL_LAWS,
            aliases=("contact.law",),
        ),
        Param(
            "stiffness_N_per_m_n",
            1e8,
            "contact stiffness K of K δⁿ",
            range=POSITIVE,
            field="contact_stiffness",
            aliases=("contact.stiffness_N_per_m_n",),
        ),
        Param(
            "exponent",
            1.5,
            "exponent n",
            range=(1.0, 3.0, True),
            field="contact_exponent",
            aliases=("contact.exponent",),
        ),
        Param(
            "restitution",
            0.7,
            "coefficient of restitution e",
            range=(0.0, 1.0, False),
            field="restitution",
            aliases=("contact.restitution",),
        ),
    ),
    doc="contact law at the stops (the [laws] of every mechanism; was [contact])",
)
FRICTION = Table(
    "friction",
    (
        Param("model", "stick_slip", "dry-friction model", choices=laws.STICK_SLIP_MODELS),
        Param("static_coefficient", 0.25, "static coefficient μ0", range=(0.0, 10.0, True), field="mu_static"),
        Param("kinetic_coefficient", 0.18, "kinetic coefficient μ (≤ μ0)", range=(0.0, 10.0, True), field="mu_kinetic"),
        Param("normal_load_N", 9.81, "floor reaction N", range=NONNEGATIVE, field="normal_load"),
        Param(
            "regularisation_velocity_m_per_s",
            1e-3,
            "velocity of the regularised law",
            range=(0.0, 1.0, False),
            field="v_reg",
        ),
    ),
    doc="dry friction on the floor",
)
INTEGRATOR = Table(
    "integrator",
    (
        Param("scheme", "moreau_midpoint", "time-stepping scheme", choices=SCHEMES),
        Param("steps_per_period", 2000, "steps per forcing period (h = T/N)", range=(16, 10**7)),
        Param("transient_periods", 200, "periods discarded before recording", range=(0, 10**6)),
        Param("record_periods", 60, "periods recorded", range=(1, 10**6)),
        Param("save_every", 2000, "save every N steps (= steps_per_period: Poincaré section)", range=(1, 10**9)),
        Param("precision", "float64", "floating-point precision", choices=specmod.PRECISIONS),
        Param("chunk_size", 0, "variants per compiled batch (0: automatic)", range=(0, 10**7)),
    ),
    doc="periods, not seconds: the step is T/N of each variant",
    sweepable=False,
)
TABLES = [
    MODEL,
    LAWS,
    FRICTION,
    INTEGRATOR,
    specmod.outputs_table(OUTPUT_CHANNELS, ["displacement_m", "velocity_m_per_s"]),
]


def validate_spec(spec):
    it = spec["integrator"]
    rec = it["record_periods"] * it["steps_per_period"]
    if rec % it["save_every"]:
        raise SpecError(
            f"integrator.save_every = {it['save_every']} must divide the recorded steps "
            f"record_periods × steps_per_period = {rec} (save_every = steps_per_period "
            "gives the Poincaré section)"
        )


def check_values(cols):
    a = lambda k: np.asarray(cols[k], float)
    if np.any(a("friction.kinetic_coefficient") > a("friction.static_coefficient")):
        raise SpecError(
            f"friction.kinetic_coefficient = {float(np.max(a('friction.kinetic_coefficient')))!r} "
            f"must not exceed friction.static_coefficient = {float(np.min(a('friction.static_coefficient')))!r}"
        )
    gap, off, x0 = a("model.gap_m"), a("model.gap_offset_m"), a("model.initial_position_m")
    if np.any(np.abs(off) >= gap):
        raise SpecError(
            f"model.gap_offset_m = {float(np.max(np.abs(off)))!r} must be smaller than "
            f"model.gap_m = {float(np.min(gap))!r} in magnitude (x = 0 between the stops)"
        )
    if np.any(x0 >= gap + off) or np.any(x0 <= off - gap):
        raise SpecError(
            f"model.initial_position_m = {float(np.max(np.abs(x0)))!r} must lie between the "
            "stops at gap_offset_m ± gap_m"
        )


def t_end(spec, cols):
    """Transient + recorded periods of the highest-frequency variant [s]."""
    it = spec["integrator"]
    om = float(np.max(np.asarray(cols["model.forcing_frequency_rad_per_s"], float)))
    return (it["transient_periods"] + it["record_periods"]) * 2 * math.pi / om


def make_config(spec, t_end) -> Config:
    it = spec["integrator"]
    N = it["steps_per_period"]
    n_per = it["transient_periods"] + it["record_periods"]
    return Config(
        steps_per_period=N,
        n_transient=it["transient_periods"],
        n_saves=integrate.steps_and_saves(it["record_periods"] * N, 1, it["save_every"])[1],
        save_every=it["save_every"],
        normal_law=spec["laws"]["normal"],
        friction=spec["friction"]["model"],
        outputs=tuple(spec["outputs"]["histories"]),
        scheme=it["scheme"],
        dt=t_end / (n_per * N),
    ).validate()


def params(spec, cfg: Config, flat, dtype, t_end) -> Params:
    gap, off = (jnp.asarray(flat[k], dtype) for k in ("model.gap_m", "model.gap_offset_m"))
    return Params(
        **declared(MODEL, flat, dtype),
        **declared(LAWS, flat, dtype),
        **declared(FRICTION, flat, dtype),
        gap_right=gap + off,
        gap_left=gap - off,
    )


def stability_h(p: Params):
    """Conservative stable step [s]: ω·h < 1 for the spring and for the stop linearised at a
    force F_ref = 100 (|F0| + μ0 N + k g) (k_lin = n K^(1/n) F_ref^((n−1)/n))."""
    n, K = p.contact_exponent, p.contact_stiffness
    f_ref = 100.0 * (
        jnp.abs(p.force_amplitude) + p.mu_static * p.normal_load + p.stiffness * jnp.maximum(p.gap_right, p.gap_left)
    )
    k_lin = n * K ** (1.0 / n) * f_ref ** ((n - 1.0) / n) + p.stiffness
    return 1.0 / jnp.sqrt(k_lin / p.mass)


def check_params(spec, cfg: Config, p: Params, name):
    h = np.asarray(2 * np.pi / np.asarray(p.forcing_frequency) / cfg.steps_per_period)
    bound = np.asarray(stability_h(p))
    bad = h > bound
    if np.any(bad):
        i = int(np.argmax(h / bound))
        raise SpecError(
            f"integrator.steps_per_period = {cfg.steps_per_period} gives h = T/N = {h[i]:.3g} s, "
            f"above the stable step {bound[i]:.3g} s of the stops ({name(i)}); raise "
            f"steps_per_period to at least {int(math.ceil(cfg.steps_per_period * h[i] / bound[i]))}"
        )


def joint_names(cfg: Config):
    return ()


def describe(spec, cfg: Config):
    return {
        "steps_per_period": cfg.steps_per_period,
        "transient_periods": cfg.n_transient,
        "record_periods": cfg.n_record,
        "contact_law": cfg.normal_law,
        "friction": cfg.friction,
        "time_axis": "t_s is the time after the transient of the highest-frequency variant; "
        "each variant samples t = (transient + (k+1)·save_every/N)·T",
    }


def poincare_period(px, max_period=8, rtol=1e-6):
    """Smallest p ≤ max_period with x_{k+p} = x_k (to rtol of the spread scale) over the
    recorded Poincaré points (rows = variants); 0 when none (quasi-periodic or chaotic)."""
    px = np.atleast_2d(np.asarray(px, float))
    scale = np.maximum(np.max(np.abs(px), axis=1), 1e-12)
    out = np.zeros(px.shape[0], int)
    n = px.shape[1]
    for p_ in range(max_period, 0, -1):
        if n < 2 * p_ + 1:
            continue
        ok = np.max(np.abs(px[:, p_:] - px[:, :-p_]), axis=1) <= rtol * scale
        out = np.where(ok, p_, out)
    return out


STUDY_METRICS = ("peak_contact_force_N", "peak_displacement_m", "friction_work_J")


def study(spec, cfg: Config, t_end):
    """The differentiable metrics of one variant (``jaxclear.study``): peak stop force, peak
    displacement and friction work over the recorded periods (exact maxima: subgradients; no
    ideal reference, the oscillator has no clearance-free twin)."""
    from ..study import Study

    def evaluate(p):
        r = simulate(cfg, p)
        return jnp.stack([r.peak_contact_force, r.peak_displacement, r.work_friction])

    return Study(STUDY_METRICS, evaluate, "peak_contact_force_N")


def chunk_metrics(spec, cfg: Config, p, res, n_real, t_end):
    r = slice(0, n_real)
    a = lambda x: np.asarray(x)[r]
    px = np.asarray(res.poincare_x)[r]
    return {
        "poincare_period": poincare_period(px) if px.shape[-1] else np.zeros(n_real, int),
        "poincare_mean_displacement_m": px.mean(axis=-1) if px.shape[-1] else np.full(n_real, np.nan),
        "stick_time_fraction": a(res.stuck_fraction),
        "stick_slip_transitions": a(res.stick_slip_transitions).astype(int),
        "impacts_per_period": a(res.impacts_per_period),
        "peak_contact_force_N": a(res.peak_contact_force),
        "peak_displacement_m": a(res.peak_displacement),
        "friction_work_J": a(res.work_friction),
        "finite": a(res.finite) & np.isfinite(a(res.peak_displacement)),
    }


def plots(outdir, spec, table, summary, hists, t):
    """Bifurcation diagrams (Poincaré displacement against each swept axis) and the Poincaré
    section (x, ẋ at t = nT) of the least periodic variant."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    from .. import plots as _p  # noqa: F401  (Agg backend)

    if "displacement_m" not in hists:
        return []
    N, se = spec["integrator"]["steps_per_period"], spec["integrator"]["save_every"]
    if N % se:
        return []
    stride = N // se
    x = np.asarray(hists["displacement_m"])[:, stride - 1 :: stride]
    v = np.asarray(hists["velocity_m_per_s"])[:, stride - 1 :: stride] if "velocity_m_per_s" in hists else None
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    written = []
    for col in summary.get("axes", []):
        if col not in table:
            continue
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.plot(np.repeat(np.asarray(table[col], float), x.shape[1]), 1e3 * x.ravel(), ",k", alpha=0.6)
        ax.set_xlabel(col.replace("_", " "))
        ax.set_ylabel("x(nT) [mm]")
        ax.set_title(f"{summary['name']}: bifurcation diagram ({len(table[col])} variants × {x.shape[1]} periods)")
        fig.tight_layout()
        name = f"plots/bifurcation_{col}.png"
        fig.savefig(Path(outdir) / name, dpi=130)
        plt.close(fig)
        written.append(name)
    if v is not None:
        per = np.asarray(table["poincare_period"])
        spread = np.ptp(x, axis=1)
        i = int(np.argmax(np.where(per == 0, spread, -1.0))) if np.any(per == 0) else int(np.argmax(spread))
        fig, ax = plt.subplots(figsize=(5.5, 5))
        ax.plot(1e3 * x[i], v[i], ".k", ms=2)
        lab = ", ".join(f"{c} = {float(table[c][i]):.4g}" for c in summary.get("axes", []) if c in table)
        ax.set_xlabel("x(nT) [mm]")
        ax.set_ylabel("ẋ(nT) [m/s]")
        ax.set_title(f"Poincaré section ({lab or 'variant 0'})", fontsize=9)
        fig.tight_layout()
        fig.savefig(pdir / "poincare_section.png", dpi=130)
        plt.close(fig)
        written.append("plots/poincare_section.png")
    return written
