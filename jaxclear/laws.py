"""Contact and friction laws for clearance revolute joints (journal inside a bearing).

Everything here is a pure ``jax.numpy`` function: branch-free on traced values (the only
Python ``if`` is on the *static* model-name string), usable under ``jit``, ``vmap`` and
``grad``, with finite gradients everywhere, including at zero / negative penetration and at
a zero captured impact velocity.  SI units throughout: m, m/s, N, Pa.

Sign conventions
----------------
* ``delta``           penetration depth [m]; ``delta <= 0`` means no contact (force 0).
* ``delta_dot``       penetration rate [m/s]; positive while the bodies approach
                      (compression), negative while they separate (restitution).
* ``delta_dot_minus`` the penetration rate captured at contact onset (initial impact
                      velocity) [m/s]; only its magnitude is used.
* ``v_t``             tangential slip velocity [m/s]; the friction force opposes it.

The hysteresis-damping family (Hunt & Crossley 1975 and its descendants) is

    F_n = K delta^n (1 + chi(e) * delta_dot / delta_dot_minus),

where ``chi`` is the dimensionless hysteresis damping factor returned by
:func:`hysteresis_factor`.  See Machado, Moreira, Flores & Lankarani (2012), Mech. Mach.
Theory 53:99-121 and Alves, Peixinho, da Silva, Flores & Lankarani (2015), Mech. Mach.
Theory 85:172-188 for reviews and comparisons of these laws.
"""

import jax
import jax.numpy as jnp

from jaxclear._math import pow_fast_path, safe_pow, safe_pow_static, safe_sqrt

__all__ = [
    "IMPACT_VELOCITY_FLOOR",
    "RESTITUTION_FLOOR",
    "HYSTERESIS_MODELS",
    "NORMAL_LAWS",
    "FRICTION_MODELS",
    "material_sigma",
    "effective_modulus",
    "internal_cylinder_stiffness",
    "hysteresis_factor",
    "normal_force",
    "liu_force",
    "esdu78035_force",
    "esdu78035_penetration",
    "friction_force",
    "STICK_SLIP_MODELS",
    "stick_slip_friction",
    "stick_slip_friction_contacts",
    "stick_slip_friction_acceleration",
]

#: Floor [m/s] applied to |delta_dot_minus| in the hysteresis laws.  The damping term is
#: ``chi * delta_dot / max(|delta_dot_minus|, IMPACT_VELOCITY_FLOOR)``.  1e-4 m/s (0.1 mm/s)
#: is far below the impact velocities of interest in clearance joints (1e-2 .. 1 m/s), so
#: real impacts are unaffected, while a contact that starts quasi-statically (captured
#: velocity ~ 0) gets a bounded damping coefficient K delta^n chi / 1e-4 instead of an
#: infinite one: without a floor, micro-oscillations of the rate during persistent contact
#: would make the force explode.  Impacts slower than the floor are damped *less* than their
#: nominal restitution (they are treated as if they had hit at 1e-4 m/s); the energy
#: involved is negligible.  Override with the ``v_floor`` argument of :func:`normal_force`.


def _f(x):
    """x as a JAX float array that keeps a float32 caller in float32 (ints -> default float)."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(float)


IMPACT_VELOCITY_FLOOR = 1e-4

#: Lower clip for the coefficient of restitution inside :func:`hysteresis_factor`, so that
#: the laws with 1/e (Flores, Gonthier, Hu-Guo) stay finite at e = 0.
RESTITUTION_FLOOR = 1e-6


# ----------------------------------------------------------------------------------------
# Materials and stiffness
# ----------------------------------------------------------------------------------------
def material_sigma(E, nu):
    """Material compliance parameter sigma = (1 - nu^2) / E  [1/Pa].

    E: Young's modulus [Pa]; nu: Poisson's ratio [-].
    Source: Lankarani & Nikravesh (1990), J. Mech. Des. 112:369-376 (their sigma_i,
    following Goldsmith 1960, "Impact").
    """
    return (1.0 - nu * nu) / E


def effective_modulus(E1, nu1, E2, nu2):
    """Composite (plane-strain) modulus E* = 1 / (sigma_1 + sigma_2)  [Pa].

    1/E* = (1 - nu1^2)/E1 + (1 - nu2^2)/E2 (Johnson 1985, "Contact Mechanics", eq. 4.22).
    This is the E* used by the Liu et al. (2006/2007) cylindrical law.
    """
    return 1.0 / (material_sigma(E1, nu1) + material_sigma(E2, nu2))


def internal_cylinder_stiffness(R_journal, R_bearing, E_journal, nu_journal, E_bearing, nu_bearing):
    """Hertz-type stiffness of a journal inside a bearing [N/m^1.5].

        K = 4 / (3 (sigma_J + sigma_B)) * sqrt(R_J R_B / (R_B - R_J)),
        sigma_k = (1 - nu_k^2) / E_k,

    i.e. the sphere-sphere Hertz stiffness with the equivalent radius of an *internal*
    (concave-convex) contact, R_eq = R_J R_B / (R_B - R_J).  Used with F = K delta^1.5.
    Radii in m, moduli in Pa.  The radial clearance R_B - R_J is floored at 1e-12 m.
    Sources: Lankarani & Nikravesh (1990), J. Mech. Des. 112:369-376; Flores, Ambrosio,
    Claro & Lankarani (2008), "Kinematics and Dynamics of Multibody Systems with
    Imperfect Joints", Springer, eq. (4.20).
    Example: R_J = 10.0 mm, R_B = 10.5 mm, steel (207 GPa, 0.3) both: K ~ 6.95e10.
    """
    sig = material_sigma(E_journal, nu_journal) + material_sigma(E_bearing, nu_bearing)
    clearance = jnp.maximum(R_bearing - R_journal, 1e-12)
    return 4.0 / (3.0 * sig) * jnp.sqrt(R_journal * R_bearing / clearance)


# ----------------------------------------------------------------------------------------
# Hysteresis damping factors chi(e)
# ----------------------------------------------------------------------------------------
def _chi_hunt_crossley(e):
    return 1.5 * (1.0 - e)


def _chi_herbert_mcwhannell(e):
    return 6.0 * (1.0 - e) / ((2.0 * e - 1.0) ** 2 + 3.0)


def _chi_lee_wang(e):
    return 0.75 * (1.0 - e)


def _chi_lankarani_nikravesh(e):
    return 0.75 * (1.0 - e * e)


def _chi_gonthier(e):
    return (1.0 - e * e) / e


def _chi_zhiying_qishao(e):
    return 0.75 * (1.0 - e * e) * jnp.exp(2.0 * (1.0 - e))


def _chi_flores(e):
    return 8.0 * (1.0 - e) / (5.0 * e)


def _chi_hu_guo(e):
    return 1.5 * (1.0 - e) / e


_CHI = {
    "hunt_crossley": _chi_hunt_crossley,
    "herbert_mcwhannell": _chi_herbert_mcwhannell,
    "lee_wang": _chi_lee_wang,
    "lankarani_nikravesh": _chi_lankarani_nikravesh,
    "gonthier": _chi_gonthier,
    "zhiying_qishao": _chi_zhiying_qishao,
    "flores": _chi_flores,
    "hu_guo": _chi_hu_guo,
}

#: Names accepted by :func:`hysteresis_factor` (and, as normal laws, by :func:`normal_force`).
HYSTERESIS_MODELS = tuple(_CHI)

#: Names accepted by :func:`normal_force`.
NORMAL_LAWS = ("linear", "kelvin_voigt", "hertz") + HYSTERESIS_MODELS


def hysteresis_factor(model, restitution):
    """Dimensionless hysteresis damping factor chi(e) of F = K d^n (1 + chi d_dot / d_dot^-).

    ``model`` is a static Python string, ``restitution`` e in (0, 1] (clipped to
    [RESTITUTION_FLOOR, 1]).  chi = 0 at e = 1 for every law.

    Table (model: chi(e) -- source):

    * hunt_crossley:       3 (1 - e) / 2 -- Hunt & Crossley (1975), J. Appl. Mech. 42:440-445
    * herbert_mcwhannell:  6 (1 - e) / ((2e - 1)^2 + 3) -- Herbert & McWhannell (1977),
      J. Eng. Ind. 99:513-520
    * lee_wang:            3 (1 - e) / 4 -- Lee & Wang (1983), J. Mech. Transm. Autom. Des.
      105:534-540
    * lankarani_nikravesh: 3 (1 - e^2) / 4 -- Lankarani & Nikravesh (1990), J. Mech. Des.
      112:369-376
    * gonthier:            (1 - e^2) / e -- Gonthier, McPhee, Lange & Piedboeuf (2004),
      Multibody Syst. Dyn. 11:209-233
    * zhiying_qishao:      3 (1 - e^2) exp(2 (1 - e)) / 4 -- Zhiying & Qishao (2006),
      J. Dyn. Control 4:294-298 (as tabulated by Machado et al. 2012, Mech. Mach. Theory
      53:99-121)
    * flores:              8 (1 - e) / (5 e) -- Flores, Machado, Silva & Martins (2011),
      Multibody Syst. Dyn. 25:357-375
    * hu_guo:              3 (1 - e) / (2 e) -- Hu & Guo (2015), Multibody Syst. Dyn.
      35:131-151

    Measured accuracy |e_eff - e| in a single impact (n = 1.5, tests/test_laws.py):
    Hunt-Crossley, Lankarani-Nikravesh < 0.015 and Herbert-McWhannell, Zhiying-Qishao
    < 0.005 for e >= 0.9, all far off at low e (LN gives e_eff = 0.73 for e = 0.5);
    Hu-Guo < 0.015 for e >= 0.5 (0.035 at e = 0.2); Flores < 0.012 for e >= 0.9, < 0.035
    for e >= 0.5, 0.045 at e = 0.2; Gonthier < 0.035 on [0.2, 0.95] (best at low e);
    Lee-Wang under-damps everywhere (e_eff = 0.95 for e = 0.9).
    Raises ValueError for an unknown model name.
    """
    try:
        chi = _CHI[model]
    except (KeyError, TypeError):
        raise ValueError(f"unknown hysteresis model {model!r}; allowed: {', '.join(HYSTERESIS_MODELS)}") from None
    e = jnp.clip(_f(restitution), RESTITUTION_FLOOR, 1.0)
    return chi(e)


# ----------------------------------------------------------------------------------------
# Normal force laws (point-contact / Hertz-type family)
# ----------------------------------------------------------------------------------------
def normal_force(
    model,
    delta,
    delta_dot,
    delta_dot_minus,
    stiffness,
    exponent=1.5,
    restitution=1.0,
    damping=0.0,
    v_floor=IMPACT_VELOCITY_FLOOR,
    static_exponent=None,
):
    """Normal contact force F_n [N] >= 0 for penetration ``delta`` [m].

    Models (``model`` is a static string, see NORMAL_LAWS):

    * ``"linear"`` / ``"kelvin_voigt"``: F = K delta + c delta_dot (Kelvin-Voigt spring-
      dashpot; ``stiffness`` K in N/m, ``damping`` c in N s/m; ``exponent`` ignored).
      Note the force jumps to c delta_dot at contact onset (a known defect of this law).
    * ``"hertz"``: F = K delta^n (Hertz 1882; K in N/m^n, purely elastic, no damping).
    * any name in HYSTERESIS_MODELS: F = K delta^n (1 + chi(e) delta_dot / v_minus) with
      v_minus = max(|delta_dot_minus|, v_floor); chi from :func:`hysteresis_factor`
      (Hunt & Crossley 1975, J. Appl. Mech. 42:440-445, and descendants).

    delta_dot [m/s] is positive when approaching.  For delta <= 0 the force is exactly 0
    with a zero (finite) gradient; delta^n uses ``safe_pow``.  The total is clipped at 0:
    no adhesive pull is produced when the dashpot term exceeds the spring term late in the
    restitution phase (so F_n >= 0 always).  v_floor: see IMPACT_VELOCITY_FLOOR (1e-4 m/s).
    static_exponent: the value of ``exponent`` when it is known at trace time (a Python float;
    None: not known): δ^n by multiplications and a square root where ``_math.pow_fast_path``
    allows (n = 1, 1.5, 2, ...; ``_math.safe_pow_static``: NaN if the traced exponent differs,
    derivatives in n kept).
    """
    delta = _f(delta)
    fast = static_exponent is not None and pow_fast_path(static_exponent)
    power = (lambda d: safe_pow_static(d, exponent, static_exponent)) if fast else (lambda d: safe_pow(d, exponent))
    in_contact = delta > 0.0
    if model in ("linear", "kelvin_voigt"):
        f = stiffness * delta + damping * delta_dot
    elif model == "hertz":
        f = stiffness * power(delta)
    elif model in _CHI:
        chi = hysteresis_factor(model, restitution)
        v_minus = jnp.maximum(jnp.abs(delta_dot_minus), v_floor)
        f = stiffness * power(delta) * (1.0 + chi * delta_dot / v_minus)
    else:
        raise ValueError(f"unknown normal law {model!r}; allowed: {', '.join(NORMAL_LAWS)}")
    return jnp.where(in_contact, jnp.maximum(f, 0.0), 0.0)


# ----------------------------------------------------------------------------------------
# Line-contact laws for cylindrical joints of axial length L
# ----------------------------------------------------------------------------------------
def liu_force(delta, length, R_journal, R_bearing, E_star):
    """Liu et al. internal cylindrical (line) contact law, F [N] >= 0.

        F = (pi/2) E* L delta sqrt(delta / (2 (dR + delta))),   dR = R_B - R_J,

    with E* from :func:`effective_modulus` [Pa], L axial length [m], delta [m].  Small
    delta: F ~ delta^1.5 (Hertz-like); delta >> dR: F ~ delta (conformal, linear).
    F = 0 with zero gradient for delta <= 0.
    Source: Liu, Zhang & Yang (2007), "The FEM analysis and approximate model for
    cylindrical joints with clearances", Mech. Mach. Theory 42:183-197 (approximating
    Liu, Zhang, Yang & Fan 2006); as reviewed by Pereira, Ramalho & Ambrosio (2011),
    Nonlinear Dyn. 63:681-697.  Formula recalled from those reviews, not re-derived here.
    """
    d = jnp.maximum(_f(delta), 0.0)
    clearance = jnp.maximum(R_bearing - R_journal, 1e-12)
    root = safe_sqrt(d / (2.0 * (clearance + d)))
    return 0.5 * jnp.pi * E_star * length * d * root


def _esdu_sigma(E, nu):
    return (1.0 - nu * nu) / (jnp.pi * E)


def esdu78035_penetration(force, length, R_journal, R_bearing, E_journal, nu_journal, E_bearing, nu_bearing):
    """ESDU-78035 penetration of a cylinder in a cylindrical bore, delta(F) [m].

        delta = F (s_J + s_B) / L * [ ln(4 L dR / (F (s_J + s_B))) + 1 ],
        s_k = (1 - nu_k^2) / (pi E_k),   dR = R_B - R_J.

    F [N] > 0, L [m].  Source: ESDU-78035 Tech. Rep. (1978), "Contact phenomena I: stresses,
    deflections and contact dimensions for normally loaded unlubricated elastic
    components"; as reviewed by Pereira, Ramalho & Ambrosio (2011), Nonlinear Dyn.
    63:681-697.  Valid for F (s_J+s_B)/L < 4 dR, i.e. delta < 4 dR.
    """
    a = (_esdu_sigma(E_journal, nu_journal) + _esdu_sigma(E_bearing, nu_bearing)) / length
    clearance = R_bearing - R_journal
    aF = a * force
    return aF * (jnp.log(4.0 * clearance / aF) + 1.0)


def esdu78035_force(delta, length, R_journal, R_bearing, E_journal, nu_journal, E_bearing, nu_bearing, iterations=8):
    """ESDU-78035 cylindrical contact force F(delta) [N] >= 0, inverting the implicit law.

    The law (see :func:`esdu78035_penetration`) is delta = a F [ln(4 dR/(a F)) + 1] with
    a = (s_J + s_B)/L, s_k = (1 - nu_k^2)/(pi E_k).  With x = a F / (4 dR) it reads
    d := delta/(4 dR) = x (1 - ln x), monotone for 0 < x < 1.  We solve for u = ln x the
    equation h(u) = u + ln(1 - u) - ln d = 0 by a fixed number of Newton steps (branch-free,
    ``lax.fori_loop``), from the asymptotic guess u0 = ln d - ln(1 - ln d); 8 steps reach
    machine precision for 1e-12 < d < 0.9.  The iterations run under ``stop_gradient`` and
    one final differentiable Newton step gives the exact implicit-function gradient.
    F = 0 (zero gradient) for delta <= 0; d is capped at 0.9 (delta <= 3.6 dR), beyond the
    law's validity.  Source: ESDU-78035 (1978); Pereira, Ramalho & Ambrosio (2011),
    Nonlinear Dyn. 63:681-697.
    """
    delta = _f(delta)
    a = (_esdu_sigma(E_journal, nu_journal) + _esdu_sigma(E_bearing, nu_bearing)) / length
    clearance = jnp.maximum(R_bearing - R_journal, 1e-12)
    pos = delta > 0.0
    d = jnp.where(pos, delta, 1e-3 * clearance) / (4.0 * clearance)  # inner where: dummy
    d = jnp.clip(d, 1e-300, 0.9)
    log_d = jnp.log(d)

    def h(u, log_d):
        return u + jnp.log1p(-u) - log_d

    def dh(u):
        return -u / (1.0 - u)

    def step(_, u):
        u = u - h(u, log_d_ng) / dh(u)
        return jnp.minimum(u, -1e-12)  # keep x < 1 (stays on the monotone branch)

    log_d_ng = jax.lax.stop_gradient(log_d)
    u0 = log_d_ng - jnp.log1p(-log_d_ng)
    u = jax.lax.stop_gradient(jax.lax.fori_loop(0, iterations, step, u0))
    u = u - h(u, log_d) / dh(u)  # differentiable last step: du/dlog_d = 1/h'(u*)
    force = 4.0 * clearance * jnp.exp(u) / a
    return jnp.where(pos, force, 0.0)


# ----------------------------------------------------------------------------------------
# Friction
# ----------------------------------------------------------------------------------------
#: Names accepted by :func:`friction_force`.
FRICTION_MODELS = ("none", "coulomb", "ambrosio", "threlfall")


def friction_force(model, v_t, normal_force, mu, v0=1e-4, v1=1e-3):
    """Tangential friction force F_t [N] opposing the slip velocity v_t [m/s].

        F_t = -mu max(F_n, 0) c_d(v_t) sign(v_t),   |F_t| <= mu F_n.

    * ``"none"``: F_t = 0.
    * ``"coulomb"``: regularised Coulomb, c_d sign(v) = tanh(v / v0).
    * ``"ambrosio"``: modified Coulomb with dynamic correction coefficient
      c_d = 0 for |v| <= v0, (|v| - v0)/(v1 - v0) for v0 < |v| < v1, 1 for |v| >= v1.
      Source: Ambrosio (2003), "Impact of rigid and flexible multibody systems: deformation
      description and contact models", in Virtual Nonlinear Multibody Systems, NATO Sci.
      Ser. II 103:57-81, Kluwer; used by Flores et al. (2008, Springer, eq. 4.33).
    * ``"threlfall"``: c_d = 1 - exp(-3 |v| / v1).  Source: Threlfall (1978), "The inclusion
      of Coulomb friction in mechanisms programs with particular reference to DRAM",
      Mech. Mach. Theory 13:475-483.

    v0, v1 [m/s] are the regularisation velocities (v1 > v0).  mu [-] is the kinetic
    friction coefficient; F_n [N].  All laws are odd in v_t and have finite gradients at
    v_t = 0 (the Coulomb and Threlfall laws have their true slopes mu F_n / v0 and
    3 mu F_n / v1 there; Ambrosio's dead zone has slope 0).
    """
    v = _f(v_t)
    fn = jnp.maximum(normal_force, 0.0)
    if model == "none":
        return jnp.zeros_like(v * fn * mu)
    if model == "coulomb":
        g = jnp.tanh(v / v0)
    elif model == "ambrosio":
        cd = jnp.clip((jnp.abs(v) - v0) / (v1 - v0), 0.0, 1.0)
        g = jnp.sign(v) * cd
    elif model == "threlfall":
        # double-where so that neither branch can overflow and the slope at 0 is exact.
        vp = jnp.where(v >= 0.0, v, 0.0)
        vn = jnp.where(v < 0.0, -v, 0.0)
        g = jnp.where(v >= 0.0, -jnp.expm1(-3.0 * vp / v1), jnp.expm1(-3.0 * vn / v1))
    else:
        raise ValueError(f"unknown friction model {model!r}; allowed: {', '.join(FRICTION_MODELS)}")
    return -mu * fn * g


# ----------------------------------------------------------------------------------------
# Stick–slip (set-valued Coulomb friction with static and kinetic coefficients)
# ----------------------------------------------------------------------------------------
#: Names accepted by the ``friction`` option of the stick–slip mechanisms
#: (impact_oscillator, plate_compactor): the set-valued law solved on impulses per step
#: (:func:`stick_slip_friction`), the source's acceleration-level complementarity rule
#: (:func:`stick_slip_friction_acceleration`, for comparison), or the regularised law
#: tanh(v/v0) of :func:`friction_force` (kinetic coefficient only).
STICK_SLIP_MODELS = ("stick_slip", "lcp_acceleration", "regularised", "none")


def stick_slip_friction(v_free, inv_mass, normal_force, mu_static, mu_kinetic, dt):
    """Coulomb friction over one step of length dt, solved exactly at velocity level.

    One contact with generalised inverse mass w = W M⁻¹ Wᵀ [1/kg] along the slip direction:
    the end-of-step slip velocity is v⁺ = v_free + dt·w·F_t, where v_free [m/s] includes every
    force but friction.  Coulomb's law with static μ0 and kinetic μ (μ ≤ μ0),

        stick:  v⁺ = 0,  |F_t| ≤ μ0 F_N          (F_t = −v_free / (dt w)),
        slip:   F_t = −μ F_N sign(v⁺),  v⁺ ≠ 0,

    has exactly one solution: stick when |v_free|/(dt w) ≤ μ0 F_N, slip otherwise (then
    |v_free| > dt w μ0 F_N ≥ dt w μ F_N, so v⁺ keeps the sign of v_free).  This is the
    one-contact linear complementarity problem of the event-driven formulation (Pfeiffer &
    Glocker 1996; Wang & Wang 2015, eqs. 9-12) posed on impulses over the step
    (Moreau's time stepping) instead of accelerations at the instant v = 0: as dt → 0 the
    stick test becomes |F_applied| ≤ μ0 F_N.  Branch-free (``where``): a held mass gets
    v⁺ = 0 exactly, so its position does not drift.

    Returns (F_t [N], v⁺ [m/s], stuck [bool]); ``stuck`` is False without contact (F_N ≤ 0).
    """
    v_free = _f(v_free)
    fn = jnp.maximum(normal_force, 0.0)
    f_stick = -v_free / (dt * inv_mass)
    stuck = (jnp.abs(f_stick) <= mu_static * fn) & (fn > 0.0)
    f_slip = -mu_kinetic * fn * jnp.sign(v_free)
    f_t = jnp.where(stuck, f_stick, f_slip)
    v_new = jnp.where(stuck, jnp.zeros_like(v_free), v_free + dt * inv_mass * f_slip)
    return f_t, v_new, stuck


def stick_slip_friction_contacts(v_free, delassus, normal_force, mu_static, mu_kinetic, iterations=8):
    """Coulomb stick–slip at k coupled contacts over one step (projected Gauss–Seidel).

    ``v_free`` (k,) slip velocities at the end of the step without friction [m/s];
    ``delassus`` G = dt·W M⁻¹ Wᵀ (k, k) [m/(N·s)] so that v⁺ = v_free + G·F_t;
    ``normal_force`` (k,) [N]; μ0, μ scalars or (k,).  Each sweep solves contact i's 1-D law
    (:func:`stick_slip_friction` with dt·w = G_ii) given the others' current forces; a fixed
    number of sweeps (static, unrolled over contacts) keeps it branch-free.  For two corners of
    one rigid body on the ground (identical slip rows, G of rank one) the first sweep already
    gives the exact total: the first corner takes what it can hold, the second the rest.

    Returns (F_t (k,) [N], v⁺ (k,) [m/s], stuck (k,) bool).
    """
    v_free = _f(v_free)
    k = v_free.shape[-1]
    fn = jnp.maximum(normal_force, 0.0)
    mu0 = jnp.broadcast_to(mu_static, fn.shape)
    mu = jnp.broadcast_to(mu_kinetic, fn.shape)
    diag = jnp.diagonal(delassus)

    def sweep(_, carry):
        f, stuck = carry
        for i in range(k):
            r = v_free[i] + delassus[i] @ f - diag[i] * f[i]
            fi, _, si = stick_slip_friction(r, diag[i], fn[i], mu0[i], mu[i], 1.0)
            f, stuck = f.at[i].set(fi), stuck.at[i].set(si)
        return f, stuck

    f, stuck = jax.lax.fori_loop(0, iterations, sweep, (jnp.zeros_like(v_free), jnp.zeros(v_free.shape, bool)))
    return f, v_free + delassus @ f, stuck


def stick_slip_friction_acceleration(v_t, a_free, inv_mass, normal_force, mu_static, mu_kinetic, v_eps):
    """Coulomb stick–slip at acceleration level, as the event-driven LCP of the source.

    Wang & Wang 2015 (eqs. 9-25): at a contact with zero slip velocity the static
    force follows from the complementarity of the friction reserves μ0 F_N ± F_t with the
    tangential accelerations; for one contact it has the closed form

        |v_t| < v_eps, |F_s| ≤ μ0 F_N:  stick, F_t = F_s = −a_free / w   (then a_t = 0),
        |v_t| < v_eps, |F_s| > μ0 F_N:  slip starts, F_t = −μ F_N sign(a_free),
        |v_t| ≥ v_eps:                  slip, F_t = −μ F_N sign(v_t),

    with a_free [m/s²] the slip acceleration without friction and w = W M⁻¹ Wᵀ [1/kg].  In a
    fixed-step integrator the slip velocity never lands on 0, so "zero" is |v_t| < v_eps [m/s]
    (an event-driven code would locate the crossing and restart there); a stuck contact keeps
    the slip velocity it had when caught (a_t = 0), i.e. it may creep at up to v_eps.  Used to
    compare with :func:`stick_slip_friction` (README, "Stick–slip: impulses vs LCP").
    Returns (F_t [N], stuck [bool]).
    """
    fn = jnp.maximum(normal_force, 0.0)
    f_s = -_f(a_free) / inv_mass
    slow = jnp.abs(v_t) < v_eps
    stuck = slow & (jnp.abs(f_s) <= mu_static * fn) & (fn > 0.0)
    f_slip = -mu_kinetic * fn * jnp.where(slow, jnp.sign(a_free), jnp.sign(v_t))
    return jnp.where(stuck, f_s, f_slip), stuck
