"""Vibratory plate compactor on compliant ground with stick–slip friction (seed 003, Wang &
Wang 2015, "含摩擦与碰撞平面多刚体系统动力学线性互补算法", 力学学报 47(5):814-821).

A rigid box 2a × 2b (mass m1, inertia J_C1 about its centre of mass C1) carries, at the motor
axis A, an eccentric rotor (mass m2, inertia J_C2, eccentricity e) turned at a prescribed speed
ω relative to the box.  Box-frame coordinates from the geometric centre O1: C1 = (C_x, C_y),
A = (A_x, A_y), bottom corners P± = (±a, −b).  Generalised coordinates q = (x_C1, y_C1, θ1);
the rotor angle is θ2 = θ1 + ω t + ψ0 (so one fewer degree of freedom than the source's
Lagrange-multiplier form, whose motor constraint we satisfy exactly).

With s = R(θ1)(A − C), u = (cos θ2, sin θ2), d = s + e u (C1 → C2), d⊥ = (−d_y, d_x),
m = m1 + m2, the Newton–Euler equations of box + rotor (moments about C1) are

    [ m I      m2 d⊥ ] [ r̈1 ]   [ F_ground + m g − m2 b        ]
    [ m2 d⊥ᵀ   J     ] [ θ̈1 ] = [ M_ground + d × m2 g − m2 d × b ],
    J = J_C1 + J_C2 + m2 |d|²,   b = −θ̇1² s − θ̇2² e u,

solved in closed form (Schur complement).  Ground (y = 0) at each bottom corner:
F_N = K δ^1.5 + c δ δ̇ ≥ 0 (δ penetration; the source's units for c, N·s/m², imply this form),
and Coulomb friction with static μ0 and kinetic μ on the bottom face, whose resultant acts at the
centre of pressure of the corner loads, solved exactly per step on impulses
(``laws.stick_slip_friction``; the source poses the same law per corner as a linear
complementarity problem on accelerations at the instants of zero slip, eqs. 9-25).
Reactions: the hinge force on the rotor F_A = m2 r̈2 − m2 g, the motor torque on the rotor
M_e = J_C2 θ̈2 + e u × F_A.

Time stepping: Moreau's midpoint scheme (as in ``impact_oscillator``), h fixed; ground forces
explicit at the midpoint configuration; the step runs under ``integrate.simulate``'s save-block
scan (its own impulse-level stick–slip step, ``make_step``).

Rotor sense and start state are not in the source: ω > 0 turns the rotor counter-clockwise
(x forward, y up); at t = 0 the box rests in static equilibrium on the ground (rotor at rest
weight only) with C2 level with A on the +x side (ψ0 = 0) and the rotor already at speed ω.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .. import integrate, laws
from .._math import cross2, perp, safe_pow
from . import float_params

SCHEMES = ("moreau_midpoint",)

OUTPUT_CHANNELS = {
    "box_x_m": "x of the box centre O1 (advance)",
    "box_y_m": "y of the box centre O1 (hop)",
    "pitch_rad": "box angle θ1 (pitch)",
    "normal_force_N": "total ground normal force",
    "friction_force_N": "total ground friction force (along x)",
    "slip_velocity_m_per_s": "x velocity of the bottom face at the centre of pressure",
    "hinge_force_N": "|F_A| hinge reaction at the motor axis A",
    "motor_torque_N_m": "motor torque on the rotor M_e",
    "stuck": "1 while the bottom is in contact and held by static friction, else 0",
    "contact": "1 while at least one corner touches the ground, else 0",
}
DEFAULT_OUTPUTS = (
    "box_x_m",
    "box_y_m",
    "pitch_rad",
    "normal_force_N",
    "friction_force_N",
    "slip_velocity_m_per_s",
    "hinge_force_N",
    "motor_torque_N_m",
    "stuck",
)


@dataclass(frozen=True)
class Config:
    """Static configuration: dt [s], n_saves × save_every steps, steady window from step
    ``steady_start_step``; friction: laws.STICK_SLIP_MODELS."""

    dt: float = 1e-5
    n_saves: int = 1000
    save_every: int = 100
    steady_start_step: int = 50_000
    friction: str = "stick_slip"
    outputs: tuple = DEFAULT_OUTPUTS
    scheme: str = "moreau_midpoint"

    @property
    def n_steps(self) -> int:
        return self.n_saves * self.save_every

    def validate(self):
        if self.friction not in laws.STICK_SLIP_MODELS:
            raise ValueError(f"friction.model = {self.friction!r}; allowed: {', '.join(laws.STICK_SLIP_MODELS)}")
        bad = [o for o in self.outputs if o not in OUTPUT_CHANNELS]
        if bad:
            raise ValueError(f"outputs.histories contains {bad}; allowed: {', '.join(OUTPUT_CHANNELS)}")
        if not 0 <= self.steady_start_step < self.n_steps:
            raise ValueError(f"steady start step {self.steady_start_step} outside [0, {self.n_steps})")
        return self


class Params(NamedTuple):
    """SI parameters, batchable leaf by leaf (names as in the source, Wang & Wang 2015)."""

    m1: jnp.ndarray  # box mass [kg]
    J1: jnp.ndarray  # box inertia about C1 [kg·m²]
    m2: jnp.ndarray  # rotor mass [kg]
    J2: jnp.ndarray  # rotor inertia about C2 [kg·m²]
    e: jnp.ndarray  # rotor eccentricity |A C2| [m]
    a: jnp.ndarray  # box half length [m]
    b: jnp.ndarray  # box half height [m]
    Cx: jnp.ndarray  # C1 from O1, box frame [m]
    Cy: jnp.ndarray
    Ax: jnp.ndarray  # A from O1, box frame [m]
    Ay: jnp.ndarray
    omega: jnp.ndarray  # rotor speed relative to the box [rad/s], > 0 counter-clockwise
    psi0: jnp.ndarray  # rotor angle relative to the box at t = 0 [rad]
    K: jnp.ndarray  # ground stiffness [N/m^1.5]
    c: jnp.ndarray  # ground damping [N·s/m²]
    mu_static: jnp.ndarray  # μ0
    mu_kinetic: jnp.ndarray  # μ
    gravity: jnp.ndarray  # [m/s²]
    v_reg: jnp.ndarray  # regularisation / "zero slip" velocity [m/s] ("regularised", "lcp_acceleration")
    drop_height: jnp.ndarray  # start this high above the rest state [m] (0: on the ground)


CASES = {
    # Wang & Wang (2015), HZR-92 plate compactor: case 1 medium-hard road, case 2 hard road.
    1: dict(omega=420.0, K=3.1e6, c=23e3, mu_static=0.6, mu_kinetic=0.45, e=0.018),
    2: dict(omega=25.0, K=490e6, c=33e6, mu_static=0.7, mu_kinetic=0.52, e=0.10),
}


def source_params(case=1, **kw) -> Params:
    """Params of the source's case 1 or 2 (Wang & Wang 2015); keywords override fields."""
    base = dict(
        m1=92.0,
        J1=0.4423,
        m2=7.0,
        J2=0.00247,
        e=0.018,
        a=0.2,
        b=0.128,
        Cx=-0.033,
        Cy=0.032,
        Ax=0.03,
        Ay=0.124,
        omega=420.0,
        psi0=0.0,
        K=3.1e6,
        c=23e3,
        mu_static=0.6,
        mu_kinetic=0.45,
        gravity=9.81,
        v_reg=1e-3,
        drop_height=0.0,
    )
    base.update(CASES[case])
    return float_params(Params, base, kw, "plate-compactor")


class State(NamedTuple):
    """q = (x_C1, y_C1, θ1) [m, m, rad], its rate [m/s, m/s, rad/s]."""

    q: jnp.ndarray
    qd: jnp.ndarray


def _rot(th, v):
    c, s = jnp.cos(th), jnp.sin(th)
    return jnp.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


def _corners_body(p):
    """Bottom corners P± − C in the box frame, shape (2, 2): rows (+a, −b), (−a, −b)."""
    return jnp.stack([jnp.stack([p.a - p.Cx, -p.b - p.Cy]), jnp.stack([-p.a - p.Cx, -p.b - p.Cy])])


def _pitch(p: Params, n_plus, n_minus):
    """Pitch θ1 of a box resting with corner loads N± (δ± = (N±/K)^(2/3), sin θ = (δ−−δ+)/2a)."""
    d_plus, d_minus = (n_plus / p.K) ** (2 / 3), (n_minus / p.K) ** (2 / 3)
    return jnp.arcsin((d_minus - d_plus) / (2 * p.a)), d_plus


def static_rest_state(p: Params) -> State:
    """The start state: box at rest, held by friction, in equilibrium with the weights and the
    centripetal force m2 e ω² of the rotor at ψ0 — the state the quasi-static stuck motion
    passes through, so a box that can stay stuck starts stuck without a step load.  With
    r± = R(θ)(P± − C), d = R(θ)(A − C) + e u, a2 = −ω² e u and friction at the centre of pressure,

        F_t = m2 a2x,   N+ + N− = n = m g + m2 a2y,
        Σ± N± (r±x − F_t r±y / n) = m2 (d × a2) + m2 g d_x,

    solved for N± by fixed-point iteration on θ (four passes; θ ~ 1e-3 rad).  Where friction
    could not hold that (|F_t| > μ0 n) or a corner would lift (case 1, ω = 420 rad/s), the box
    starts from rest under the weights only (a2 = 0).  O1 is put at x = 0; ``drop_height``
    lifts the whole box.
    """
    g, m = p.gravity, p.m1 + p.m2
    body = _corners_body(p)

    def loads(th, spin):
        u = jnp.stack([jnp.cos(th + p.psi0), jnp.sin(th + p.psi0)])
        d = _rot(th, jnp.stack([p.Ax - p.Cx, p.Ay - p.Cy])) + p.e * u
        a2 = -spin * p.omega**2 * p.e * u
        ft, n = p.m2 * a2[0], m * g + p.m2 * a2[1]
        r = _rot(th, body)
        arm = r[:, 0] - ft * r[:, 1] / n
        mom = p.m2 * cross2(d, a2) + p.m2 * g * d[0]
        n_plus = (mom - n * arm[1]) / (arm[0] - arm[1])
        return ft, n, n_plus, n - n_plus

    def solve(spin):
        th = jnp.zeros((), dtype=jnp.result_type(p.m1))
        for _ in range(4):
            ft, n, n_plus, n_minus = loads(th, spin)
            th, d_plus = _pitch(p, jnp.maximum(n_plus, 0.0), jnp.maximum(n_minus, 0.0))
        return ft, n, n_plus, n_minus, th, d_plus

    ft, n, n_plus, n_minus, th_s, dp_s = solve(1.0)
    ok = (jnp.abs(ft) <= p.mu_static * n) & (n_plus > 0) & (n_minus > 0)
    _, _, _, _, th_w, dp_w = solve(0.0)
    th, d_plus = jnp.where(ok, th_s, th_w), jnp.where(ok, dp_s, dp_w)
    rc = _rot(th, body)
    y1 = -d_plus - rc[0, 1]
    x1 = -_rot(th, jnp.stack([-p.Cx, -p.Cy]))[0]
    return State(jnp.stack([x1, y1 + p.drop_height, th]), jnp.zeros(3, dtype=jnp.result_type(p.m1)))


class Forces(NamedTuple):
    fn: jnp.ndarray  # (2,) corner normal forces [N]
    corner_r: jnp.ndarray  # (2, 2) corner − C1, world
    corner_vx: jnp.ndarray  # (2,) corner x velocities [m/s]
    d: jnp.ndarray  # C1 → C2
    eu: jnp.ndarray  # e u
    b: jnp.ndarray  # velocity-dependent part of r̈2


def _forces(p: Params, q, qd, psi):
    with integrate.stage("kinematics"):
        th, thd = q[2], qd[2]
        r = _rot(th, _corners_body(p))  # (2, 2)
        pos_y = q[1] + r[:, 1]
        vel = qd[:2][None, :] + thd * perp(r)  # corner velocities
        delta = -pos_y
        delta_dot = -vel[:, 1]
    with integrate.stage("contact_laws"):
        f = p.K * safe_pow(delta, 1.5) + p.c * jnp.maximum(delta, 0.0) * delta_dot
        fn = jnp.where(delta > 0.0, jnp.maximum(f, 0.0), 0.0)
    with integrate.stage("kinematics"):
        s = _rot(th, jnp.stack([p.Ax - p.Cx, p.Ay - p.Cy]))
        th2 = th + psi
        eu = p.e * jnp.stack([jnp.cos(th2), jnp.sin(th2)])
        th2d = thd + p.omega
        b = -thd * thd * s - th2d * th2d * eu
    return Forces(fn, r, vel[:, 0], s + eu, eu, b)


def _mass_solve(p: Params, d, rhs):
    """Solve M x = rhs for the 3×3 mass matrix above (rhs (3,) or (3, k)), closed form."""
    m = p.m1 + p.m2
    dp = perp(d)
    J = p.J1 + p.J2 + p.m2 * jnp.dot(d, d)
    schur = J - p.m2 * p.m2 * jnp.dot(d, d) / m
    rxy, rth = rhs[:2], rhs[2]
    thdd = (rth - p.m2 * (dp @ rxy) / m) / schur
    xy = (rxy - p.m2 * dp.reshape((2,) + (1,) * (rxy.ndim - 1)) * thdd) / m
    return jnp.concatenate([xy, thdd[None]], axis=0)


class Step(NamedTuple):
    q: jnp.ndarray
    qd: jnp.ndarray
    o1: jnp.ndarray  # box centre O1 (x, y)
    fn: jnp.ndarray  # (2,)
    ft: jnp.ndarray  # (2,)
    slip_v: jnp.ndarray  # bottom x-velocity at the centre of pressure after the step
    hinge: jnp.ndarray  # |F_A|
    motor_torque: jnp.ndarray
    contact: jnp.ndarray  # any corner in contact
    stuck: jnp.ndarray  # in contact and held by static friction


def make_step(cfg: Config):
    h = cfg.dt

    def step(p: Params, s: State, i):
        g = p.gravity
        with integrate.stage("integrator_update"):
            q_m = s.q + 0.5 * h * s.qd
        psi = p.omega * ((jnp.asarray(i, dtype=float) + 0.5) * h).astype(s.q.dtype) + p.psi0
        fr = _forces(p, q_m, s.qd, psi)
        with integrate.stage("equations_of_motion"):
            grav = jnp.stack([0.0 * g, -g])
            f_xy = jnp.stack([0.0 * g, jnp.sum(fr.fn)]) + (p.m1 + p.m2) * grav - p.m2 * fr.b
            m_th = jnp.sum(fr.corner_r[:, 0] * fr.fn) + cross2(fr.d, p.m2 * grav) - p.m2 * cross2(fr.d, fr.b)
            # The flat bottom is one friction contact: its resultant acts at the centre of pressure
            # of the corner loads.  (Two stick constraints at corners a hair apart in height would
            # also lock the pitch, through a nearly singular 2×2 Delassus matrix.)
            n_tot = jnp.sum(fr.fn)
            wk = jnp.where(n_tot > 0.0, fr.fn / jnp.where(n_tot > 0.0, n_tot, 1.0), 0.5)
            r_cp = wk @ fr.corner_r
            W = jnp.stack([jnp.ones_like(r_cp[0]), jnp.zeros_like(r_cp[0]), -r_cp[1]])
            rhs = jnp.concatenate([f_xy, m_th[None]])
            MinvW = _mass_solve(p, fr.d, W)
        with integrate.stage("contact_laws"):  # friction on the impulse h·F_t (with its mass solves)
            if cfg.friction == "regularised":
                f_t = laws.friction_force("coulomb", W @ s.qd, n_tot, p.mu_kinetic, v0=p.v_reg)
                qd1 = s.qd + h * (_mass_solve(p, fr.d, rhs) + MinvW * f_t)
                stuck = (jnp.abs(W @ qd1) < p.v_reg) & (n_tot > 0)
            else:
                qd_free = s.qd + h * _mass_solve(p, fr.d, rhs)
                if cfg.friction == "stick_slip":
                    f_t, _, stuck = laws.stick_slip_friction(
                        W @ qd_free, W @ MinvW, n_tot, p.mu_static, p.mu_kinetic, h
                    )
                    qd1 = qd_free + h * MinvW * f_t
                elif cfg.friction == "lcp_acceleration":
                    a_free = (qd_free - s.qd) / h
                    f_t, stuck = laws.stick_slip_friction_acceleration(
                        W @ s.qd, W @ a_free, W @ MinvW, n_tot, p.mu_static, p.mu_kinetic, p.v_reg
                    )
                    qd1 = qd_free + h * MinvW * f_t
                else:
                    f_t, qd1, stuck = jnp.zeros_like(n_tot), qd_free, jnp.zeros((), bool)
            ft = wk * f_t
        with integrate.stage("integrator_update"):
            q1 = q_m + 0.5 * h * qd1
        with integrate.stage("equations_of_motion"):
            # reactions from the step's mean accelerations
            acc = (qd1 - s.qd) / h
            r2dd = acc[:2] + acc[2] * perp(fr.d) + fr.b
            f_a = p.m2 * (r2dd - grav)
            torque = p.J2 * acc[2] + cross2(fr.eu, f_a)
        contact = n_tot > 0.0
        stuck = contact & stuck
        o1 = q1[:2] - _rot(q1[2], jnp.stack([p.Cx, p.Cy]))
        vx_corner = W @ qd1
        out = Step(q1, qd1, o1, fr.fn, ft, vx_corner, jnp.sqrt(jnp.sum(f_a * f_a)), torque, contact, stuck)
        return State(q1, qd1), out

    return step


def _channels(cfg, o: Step):
    full = {
        "box_x_m": o.o1[0],
        "box_y_m": o.o1[1],
        "pitch_rad": o.q[2],
        "normal_force_N": jnp.sum(o.fn),
        "friction_force_N": jnp.sum(o.ft),
        "slip_velocity_m_per_s": o.slip_v,
        "hinge_force_N": o.hinge,
        "motor_torque_N_m": o.motor_torque,
        "stuck": o.stuck.astype(o.q.dtype),
        "contact": o.contact.astype(o.q.dtype),
    }
    return {c: full[c] for c in cfg.outputs}


class Acc(NamedTuple):
    """Running reductions: whole run (contact/slip steps, transitions, last mode) and steady
    window (start O1 x, extrema, peaks, motor work)."""

    n_contact: jnp.ndarray
    n_slip: jnp.ndarray
    transitions: jnp.ndarray
    last_mode: jnp.ndarray  # −1 none yet, 0 slip, 1 stick (flight keeps the last)
    x_start: jnp.ndarray
    y_min: jnp.ndarray
    y_max: jnp.ndarray
    th_min: jnp.ndarray
    th_max: jnp.ndarray
    n_flight: jnp.ndarray
    peak_fn: jnp.ndarray
    peak_hinge: jnp.ndarray
    peak_torque: jnp.ndarray
    sum_torque: jnp.ndarray
    finite: jnp.ndarray


class Result(NamedTuple):
    history: dict
    final: State
    final_o1: jnp.ndarray
    acc: Acc


def simulate(cfg: Config, p: Params) -> Result:
    """Run cfg.n_steps steps from :func:`static_rest_state` (pure; vmap over ``p``)."""
    step = make_step(cfg)
    i_ss = cfg.steady_start_step
    s0 = static_rest_state(p)
    dt = s0.q.dtype
    z, big = jnp.zeros((), dt), jnp.asarray(jnp.inf, dt)
    acc0 = Acc(z, z, z, -jnp.ones((), dt), z, big, -big, big, -big, z, z, z, z, z, jnp.ones((), bool))

    def reduce(a: Acc, o: Step, i):
        ss = i >= i_ss
        mode = jnp.where(o.stuck, 1.0, 0.0).astype(dt)
        changed = o.contact & (a.last_mode >= 0) & (mode != a.last_mode)
        w = lambda v: jnp.where(ss, v, 0.0)
        return Acc(
            a.n_contact + o.contact.astype(dt),
            a.n_slip + (o.contact & ~o.stuck).astype(dt),
            a.transitions + changed.astype(dt),
            jnp.where(o.contact, mode, a.last_mode),
            jnp.where(i == i_ss, _bottom_x(p, o.o1, o.q[2]), a.x_start),
            jnp.where(ss, jnp.minimum(a.y_min, o.o1[1]), a.y_min),
            jnp.where(ss, jnp.maximum(a.y_max, o.o1[1]), a.y_max),
            jnp.where(ss, jnp.minimum(a.th_min, o.q[2]), a.th_min),
            jnp.where(ss, jnp.maximum(a.th_max, o.q[2]), a.th_max),
            a.n_flight + w((~o.contact).astype(dt)),
            jnp.maximum(a.peak_fn, w(jnp.sum(o.fn))),
            jnp.maximum(a.peak_hinge, w(o.hinge)),
            jnp.maximum(a.peak_torque, w(jnp.abs(o.motor_torque))),
            a.sum_torque + w(o.motor_torque),
            a.finite & jnp.all(jnp.isfinite(o.q)),
        )

    s, a, hist = integrate.simulate(
        step, p, s0, acc0, reduce, cfg.n_saves, cfg.save_every, save=lambda o: _channels(cfg, o)
    )
    o1 = s.q[:2] - _rot(s.q[2], jnp.stack([p.Cx, p.Cy]))
    return Result(hist, s, o1, a)


def _bottom_x(p: Params, o1, th):
    """x of the bottom-face centre O1 + R(θ)(0, −b): the point whose mean speed is the advance
    (it does not sway with the pitch as O1 does)."""
    return o1[..., 0] + p.b * jnp.sin(th)


def summary(cfg: Config, p: Params, res: Result) -> dict:
    """Metrics of (batched or single) results as numpy-able arrays, SI units in the names."""
    a = res.acc
    n_ss = cfg.n_steps - cfg.steady_start_step
    t_ss = n_ss * cfg.dt
    speed = (_bottom_x(p, res.final_o1, res.final.q[..., 2]) - a.x_start) / ((n_ss - 1) * cfg.dt)
    return {
        "mean_advance_speed_m_per_min": 60.0 * speed,  # bottom-centre x over the steady window
        "slip_time_fraction": jnp.where(a.n_contact > 0, a.n_slip / jnp.maximum(a.n_contact, 1), 0.0),
        "stick_slip_transitions": a.transitions,
        "flight_time_fraction": a.n_flight / n_ss,
        "hop_amplitude_m": 0.5 * (a.y_max - a.y_min),
        "pitch_amplitude_rad": 0.5 * (a.th_max - a.th_min),
        "peak_normal_force_N": a.peak_fn,
        "peak_hinge_force_N": a.peak_hinge,
        "peak_motor_torque_N_m": a.peak_torque,
        "steady_window_s": jnp.full_like(speed, t_ss),
        "finite": a.finite & jnp.isfinite(speed),
    }


def rigid_ground_stick_margin(p: Params, n=3600):
    """Quasi-static stick test on rigid ground (the source's "trial method" for case 2).

    With the box held (no slip, no lift, no pitch) the ground must supply the rotor's
    inertial force: F_x = −m2 e ω² cos ψ, F_N = m g − m2 e ω² sin ψ (ψ = ω t + ψ0).  Returns
    min over ψ of μ0 F_N − |F_x| [N]: positive means the box sticks throughout.
    """
    psi = jnp.linspace(0.0, 2 * jnp.pi, n, endpoint=False, dtype=jnp.result_type(p.omega))
    f = p.m2 * p.e * p.omega**2
    fx = jnp.abs(f * jnp.cos(psi))
    fn = (p.m1 + p.m2) * p.gravity - f * jnp.sin(psi)
    return jnp.min(p.mu_static * fn - fx)


# ------------------------------------------------------------------------------------------
# Sweep protocol (jaxclear.mechanisms): `jaxclear run sweeps/plate_compactor.toml`
# ------------------------------------------------------------------------------------------

import numpy as np  # noqa: E402

from .. import spec as specmod  # noqa: E402
from ..schema import NONNEGATIVE, POSITIVE, Param, Table  # noqa: E402
from ..spec import SpecError  # noqa: E402
from . import declared  # noqa: E402

_L10 = (-10.0, 10.0, True)
MODEL = Table(
    "model",
    (
        Param("mechanism", "plate_compactor", "registered mechanism name"),
        Param("box_mass_kg", 92.0, "box (plate) mass m₁", range=POSITIVE, field="m1"),
        Param("box_inertia_kg_m2", 0.4423, "box inertia J₁ about its centre of mass C₁", range=POSITIVE, field="J1"),
        Param("rotor_mass_kg", 7.0, "eccentric rotor mass m₂", range=NONNEGATIVE, field="m2"),
        Param(
            "rotor_inertia_kg_m2", 0.00247, "rotor inertia J₂ about its centre of mass", range=NONNEGATIVE, field="J2"
        ),
        Param("eccentricity_m", 0.018, "rotor eccentricity |A C₂|", range=(0.0, 1.0, True), field="e"),
        Param("half_length_m", 0.2, "box half length a", range=(0.0, 10.0, False), field="a"),
        Param("half_height_m", 0.128, "box half height b", range=(0.0, 10.0, False), field="b"),
        Param("com_x_m", -0.033, "C₁ from the box centre O₁, x (box frame)", range=_L10, field="Cx"),
        Param("com_y_m", 0.032, "C₁ from O₁, y", range=_L10, field="Cy"),
        Param("axis_x_m", 0.03, "rotor axis A from O₁, x", range=_L10, field="Ax"),
        Param("axis_y_m", 0.124, "rotor axis A from O₁, y", range=_L10, field="Ay"),
        Param(
            "rotor_speed_rad_per_s",
            420.0,
            "rotor speed relative to the box (> 0 counter-clockwise)",
            range=(-1e4, 1e4, True),
            field="omega",
        ),
        Param(
            "rotor_phase_rad",
            0.0,
            "rotor angle relative to the box at t = 0",
            range=(-100.0, 100.0, True),
            field="psi0",
        ),
        Param("gravity_m_per_s2", 9.81, "gravity g", range=(0.0, 100.0, True), field="gravity"),
        Param(
            "drop_height_m",
            0.0,
            "start this high above the rest state (0: on the ground)",
            range=(0.0, 10.0, True),
            field="drop_height",
        ),
    ),
    doc="plate, rotor and drive (Wang & Wang 2015, HZR-92)",
)
GROUND = Table(
    "ground",
    (
        Param("stiffness_N_per_m1_5", 3.1e6, "ground stiffness K of K δ^1.5", range=POSITIVE, field="K"),
        Param("damping_N_s_per_m2", 23e3, "ground damping c of c δ δ̇", range=NONNEGATIVE, field="c"),
        Param("static_friction", 0.6, "static coefficient μ0", range=(0.0, 10.0, True), field="mu_static"),
        Param("kinetic_friction", 0.45, "kinetic coefficient μ (≤ μ0)", range=(0.0, 10.0, True), field="mu_kinetic"),
        Param("friction_model", "stick_slip", "dry-friction model", choices=laws.STICK_SLIP_MODELS),
        Param(
            "regularisation_velocity_m_per_s",
            1e-3,
            "regularisation / zero-slip velocity",
            range=(0.0, 1.0, False),
            field="v_reg",
        ),
    ),
    doc="ground contact at the plate's corners",
)
TABLES = [
    MODEL,
    GROUND,
    specmod.integrator_table(
        SCHEMES,
        "moreau_midpoint",
        dt_s=1e-5,
        t_end_s=2.0,
        extra=(
            Param(
                "steady_start_s", 1.0, "start of the steady window [steady_start_s, t_end_s]", range=(0.0, 1e4, True)
            ),
        ),
    ),
    specmod.outputs_table(OUTPUT_CHANNELS, DEFAULT_OUTPUTS),
]


def validate_spec(spec):
    it = spec["integrator"]
    if it["steady_start_s"] >= it["t_end_s"]:
        raise SpecError(
            f"integrator.steady_start_s = {it['steady_start_s']!r} must be below "
            f"integrator.t_end_s = {it['t_end_s']!r} (the steady window is [steady_start_s, t_end_s])"
        )


def check_values(cols):
    a = lambda k: np.asarray(cols[k], float)
    if np.any(a("ground.kinetic_friction") > a("ground.static_friction")):
        raise SpecError(
            f"ground.kinetic_friction = {float(np.max(a('ground.kinetic_friction')))!r} must not "
            f"exceed ground.static_friction = {float(np.min(a('ground.static_friction')))!r}"
        )
    if np.any(np.abs(a("model.com_x_m")) >= a("model.half_length_m")):
        raise SpecError(
            f"model.com_x_m = {float(np.max(np.abs(a('model.com_x_m'))))!r} must lie inside the box "
            f"(|com_x_m| < half_length_m = {float(np.min(a('model.half_length_m')))!r})"
        )


def t_end(spec, cols):
    return float(spec["integrator"]["t_end_s"])


def make_config(spec, t_end) -> Config:
    it = spec["integrator"]
    dt, se = it["dt_s"], it["save_every"]
    n_saves = integrate.steps_and_saves(t_end, dt, se)[1]
    ss = min(int(round(it["steady_start_s"] / dt)), n_saves * se - 1)
    return Config(
        dt=dt,
        n_saves=n_saves,
        save_every=se,
        steady_start_step=ss,
        friction=spec["ground"]["friction_model"],
        outputs=tuple(spec["outputs"]["histories"]),
        scheme=it["scheme"],
    ).validate()


def params(spec, cfg: Config, flat, dtype, t_end) -> Params:
    return Params(**declared(MODEL, flat, dtype), **declared(GROUND, flat, dtype))


def stability_dt(p: Params):
    """Conservative stable dt [s]: ω·dt < 0.5 for one corner on the ground linearised at
    F_ref = 10 (m g + m2 e ω²) (k = 1.5 K^(2/3) F_ref^(1/3)) carrying the box's pitch mass
    J_ground / a² (J_ground ≈ J1 + m (b + C_y)² about a corner line), and c δ_ref·dt/m < 0.5."""
    m = p.m1 + p.m2
    f_ref = 10.0 * (m * p.gravity + p.m2 * p.e * p.omega**2)
    k_lin = 1.5 * p.K ** (2.0 / 3.0) * f_ref ** (1.0 / 3.0)
    m_eff = jnp.minimum(m, (p.J1 + m * (p.b + p.Cy) ** 2) / p.a**2)
    delta = (f_ref / p.K) ** (2.0 / 3.0)
    return jnp.minimum(0.5 / jnp.sqrt(k_lin / m_eff), 0.5 * m_eff / jnp.maximum(p.c * delta, 1e-300))


def check_params(spec, cfg: Config, p: Params, name):
    bound = np.asarray(stability_dt(p))
    if np.any(cfg.dt > bound):
        i = int(np.argmin(bound))
        raise SpecError(
            f"integrator.dt_s = {cfg.dt:g} exceeds the stable step {bound[i]:.3g} s of the ground "
            f"contact ({name(i)}); reduce dt_s"
        )


def joint_names(cfg: Config):
    return ()


def describe(spec, cfg: Config):
    return {
        "friction": cfg.friction,
        "steady_start_s": cfg.steady_start_step * cfg.dt,
        "rotor_sense": "rotor_speed_rad_per_s > 0: counter-clockwise (x forward, y up)",
        "start_state": "at rest in static equilibrium with the rotor's weight and centripetal "
        "force at rotor_phase_rad (weights only where friction could not hold)",
    }


STUDY_METRICS = (
    "mean_advance_speed_m_per_min",
    "hop_amplitude_m",
    "pitch_amplitude_rad",
    "peak_normal_force_N",
    "peak_hinge_force_N",
    "peak_motor_torque_N_m",
)


def study(spec, cfg: Config, t_end):
    """The differentiable metrics of one variant (``jaxclear.study``): the ``summary`` columns
    that are continuous in the parameters (advance speed, amplitudes, peaks)."""
    from ..study import Study

    def evaluate(p):
        m = summary(cfg, p, simulate(cfg, p))
        return jnp.stack([jnp.asarray(m[k], p.m1.dtype) for k in STUDY_METRICS])

    return Study(STUDY_METRICS, evaluate, "mean_advance_speed_m_per_min")


def chunk_metrics(spec, cfg: Config, p, res, n_real, t_end):
    r = slice(0, n_real)
    m = {k: np.asarray(v)[r] for k, v in summary(cfg, p, res).items()}
    m["stick_slip_transitions"] = m["stick_slip_transitions"].astype(int)
    m["finite"] = m["finite"].astype(bool)
    m.pop("steady_window_s")
    return {
        "omega_rad_per_s": np.broadcast_to(np.asarray(p.omega), (len(np.asarray(p.m1)),))[r],
        "rigid_ground_stick_margin_N": np.asarray(jax.vmap(rigid_ground_stick_margin)(p))[r],
        **m,
    }


def plots(outdir, spec, table, summary_, hists, t):
    """Compactor motion of chosen variants (advance, hop, pitch, ground force, friction and
    stick phases, hinge force, motor torque) and, over two swept axes, the advance-speed map."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    from .. import plots as _p

    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    written = []
    t = np.asarray(t)
    B = len(table["finite"])
    idx = list(range(min(B, max(1, int(spec["outputs"]["plot_variants"])))))
    chans = [
        c
        for c in (
            "box_x_m",
            "box_y_m",
            "pitch_rad",
            "normal_force_N",
            "friction_force_N",
            "slip_velocity_m_per_s",
            "hinge_force_N",
            "motor_torque_N_m",
        )
        if c in hists
    ]
    if chans:
        axes_cols = [c for c in summary_.get("axes", []) if c in table]
        for i in idx:
            fig, axs = plt.subplots(len(chans), 1, figsize=(9, 1.7 * len(chans)), sharex=True)
            axs = np.atleast_1d(axs)
            st = np.asarray(hists["stuck"][i]) if "stuck" in hists else None
            for ax, c in zip(axs, chans):
                y = np.asarray(hists[c][i])
                ax.plot(t, y, lw=0.6)
                if st is not None and c in ("friction_force_N", "slip_velocity_m_per_s"):
                    ax.fill_between(
                        t, y.min(), y.max(), where=st > 0, color="tab:green", alpha=0.2, lw=0, label="stuck"
                    )
                    ax.legend(fontsize=7, loc="upper right")
                ax.set_ylabel(c.replace("_", " "), fontsize=7)
            lab = ", ".join(f"{c} = {float(table[c][i]):.4g}" for c in axes_cols)
            v = float(table["mean_advance_speed_m_per_min"][i])
            axs[0].set_title(f"{summary_['name']} #{i} ({lab}): advance {v:.3g} m/min", fontsize=9)
            axs[-1].set_xlabel("t [s]")
            fig.tight_layout()
            name = f"plots/compactor_motion_{i}.png"
            fig.savefig(Path(outdir) / name, dpi=110)
            plt.close(fig)
            written.append(name)
    axes = summary_.get("axes", [])
    if len(axes) >= 2:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        _p.amplification_map(ax, table, axes[0], axes[1], "mean_advance_speed_m_per_min")
        fig.tight_layout()
        fig.savefig(pdir / "map_mean_advance_speed_m_per_min.png", dpi=110)
        plt.close(fig)
        written.append("plots/map_mean_advance_speed_m_per_min.png")
    return written
