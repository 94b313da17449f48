"""Independent cross-check: the relative-coordinate slider-crank against the general Cartesian
multibody engine (Baumgarte, dense KKT solve) with the same clearance-joint force element."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclear  # noqa: F401
from jaxclear import joints
from jaxclear import multibody as mb
from jaxclear.mechanisms import slider_crank as sc

R, L = 0.05, 0.12


def _pivot(p):
    return (-R / 2, 0.0)


def _pin(p):
    return (R / 2, 0.0)


def _big_end(p):
    return (-L / 2, 0.0)


# The rod–slider revolute is replaced by the clearance force element (it cuts the loop).
SYSTEM = mb.System(
    3,
    (
        mb.revolute(0, _pivot, -1, (0.0, 0.0)),
        mb.revolute(0, _pin, 1, _big_end),
        mb.translational(2),
        mb.driver(0, "omega"),
    ),
)
JC = joints.JointConfig(normal_law="hertz", friction="ambrosio")


def _applied(jp):
    def applied(q, qd, t, params):
        r_rod, phi = q[3:5], q[5]
        u = jnp.stack([jnp.cos(phi), jnp.sin(phi)])
        c = r_rod + 0.5 * L * u
        vc = qd[3:5] + 0.5 * L * qd[5] * jnp.stack([-u[1], u[0]])
        kin = joints.JointKinematics(c, vc, qd[5], q[6:8], qd[6:8], jnp.array([1.0, 0.0]), 0.0)
        jf, _ = joints.evaluate(JC, jp, kin, jnp.zeros(1))
        f = jf.force
        a = jnp.array([[jnp.cos(phi), jnp.sin(phi)], [-jnp.sin(phi), jnp.cos(phi)]])
        s_rod = a @ (jf.p_j[0] - r_rod)
        return mb.point_force(q, 1, s_rod, f) + mb.point_force(q, 2, jnp.zeros(2), -f)

    return applied


@pytest.mark.slow  # two engines compiled (RK4 both), through the first impact (physics, kept in full)
def test_relative_coordinates_match_cartesian_multibody():
    w = 5000 * 2 * np.pi / 60
    c = 0.5e-3
    p_sc = sc.benchmark_params(clearance=c, normal_law="hertz")
    dt, n = 1e-6, 450  # through the first impact (t ≈ 0.23 ms)
    cfg = sc.Config(
        dt=dt, n_saves=n, save_every=1, scheme="rk4", joint=JC, outputs=("contact_force_N", "slider_position_m")
    )
    r_fast = jax.jit(lambda p: sc.simulate(cfg, p))(p_sc)

    params = mb.make_params((0.30, 0.21, 0.14), (1e-5, 2.5e-4, 1e-4), alpha=1000.0, beta=1000.0, omega=w)
    q0 = jnp.array([R / 2, 0, 0, R + L / 2, 0, 0, R + L, 0, 0])
    qd0 = jnp.array([0, w * R / 2, w, 0, w * R / 2, -R * w / L, 0, 0, 0])
    rhs = mb.make_rhs(SYSTEM, _applied(p_sc.joint))

    a, b = jnp.array([0.0, 0.5, 0.5, 1.0]), jnp.array([1 / 6, 1 / 3, 1 / 3, 1 / 6])

    def step(y, i):
        # classical RK4, its four stages in a fori_loop: the KKT right-hand side is traced and
        # compiled once instead of four times
        t = jnp.asarray(i, float) * dt

        def stage(s, carry):
            k, acc = carry
            k = rhs(y + a[s] * dt * k, t + a[s] * dt, params)
            return k, acc + b[s] * k

        _, acc = jax.lax.fori_loop(0, 4, stage, (jnp.zeros_like(y), jnp.zeros_like(y)))
        return y + dt * acc, y

    _, ys = jax.jit(lambda y: jax.lax.scan(step, y, jnp.arange(n)))(jnp.concatenate([q0, qd0]))
    x_cart = np.asarray(ys[:, 6])
    # Contact force along the Cartesian path, from the same force element (one jit, not op by op).
    f_cart = np.asarray(
        jax.jit(jax.vmap(lambda y: jnp.linalg.norm(_applied(p_sc.joint)(y[:9], y[9:], 0.0, params)[6:8])))(ys)
    )
    x_fast = np.asarray(r_fast.history["slider_position_m"])
    f_fast = np.asarray(r_fast.history["contact_force_N"][:, 0])
    # The fast model's outputs are at step starts (RK4), like ys.
    assert f_cart.max() > 1e4  # the impact happened
    assert abs(f_fast.max() - f_cart.max()) / f_cart.max() < 2e-3, (f_fast.max(), f_cart.max())
    assert np.max(np.abs(x_fast - x_cart)) < 2e-3 * c, np.max(np.abs(x_fast - x_cart))
