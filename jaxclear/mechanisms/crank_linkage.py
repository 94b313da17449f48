"""Crank-driven planar linkages with revolute clearance joints: the sweep protocol shared by the
slider-crank and the four-bar (``jaxclear.mechanisms``).

A linkage module keeps its physics and its declarations — the ``[model]`` table, named
coordinates (``mechanisms.state_type``), one ``accel`` per clearance configuration, the
initial state, the closed-form ideal mechanism and the effective mass of its stability bound —
and hands them to ``CrankLinkage``, which supplies everything else: the spec tables, the static
configuration, the params of a variant with its steady window, the stability check, the
simulation (``integrate``'s save-block scan, every step folded into ``metrics``), the per-joint
history channels, the study (``jaxclear.study``: the amplification reference is the ideal
twin's peak, DE = (peak − ideal)/ideal, Flores et al. 2008), the metrics.csv columns and the
plots.  The module registers ``MECHANISM = CrankLinkage(...)``; ``schema.mechanism_module``
returns that object, so the protocol lives here once.
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import integrate, laws, metrics, wear
from .. import spec as specmod
from .._math import safe_norm
from . import _clearance, declared

# The default scheme of the crank linkages: their contact damping and friction depend on the
# velocity, under which the leapfrog is first order and verlet_predicted second (``integrate``).
DEFAULT_SCHEME = "verlet_predicted"

# Per-joint channels every crank linkage saves (one entry per clearance joint).
JOINT_CHANNELS = {
    "contact_force_N": ("|F| total contact force of each clearance joint", lambda j: safe_norm(j.force)),
    "normal_force_N": ("Σ F_n over the joint's regions", lambda j: jnp.sum(j.normal_force)),
    "penetration_m": ("largest penetration δ over the joint's regions", lambda j: jnp.max(j.depth)),
    "journal_x_m": ("journal centre x in the bearing frame", lambda j: j.e_local[0]),
    "journal_y_m": ("journal centre y in the bearing frame", lambda j: j.e_local[1]),
    "n_regions": ("number of contact regions", lambda j: j.n_regions),
}
CRANK_ANGLE = {
    "crank_angle_rad": (
        "crank angle θ (atan2 of the carried (cos, sin) pair)",
        lambda q, v, a: jnp.arctan2(q.crank[1], q.crank[0]),
    )
}


def config_type(module, joints, default_outputs, channels):
    """The static Config of a linkage (one compiled function per distinct value): the fields of
    ``_clearance.ClearanceConfig`` plus ``clearance_joint`` (a key of ``joints``, the first by
    default) and ``outputs`` (saved channels: the per-joint ones, the crank angle, ``channels``)."""
    known = {**CRANK_ANGLE, **JOINT_CHANNELS, **channels}
    first = next(iter(joints))

    @dataclass(frozen=True)
    class Config(_clearance.ClearanceConfig):
        clearance_joint: str = first
        outputs: tuple = tuple(default_outputs)

        @property
        def n_joints(self) -> int:
            return len(joints[self.clearance_joint])

        def validate(self):
            from .. import laws

            for key, value, allowed in (
                ("model.clearance_joint", self.clearance_joint, joints),
                ("integrator.scheme", self.scheme, integrate.SCHEMES),
                ("laws.normal", self.joint.normal_law, laws.NORMAL_LAWS),
                ("laws.friction", self.joint.friction, laws.FRICTION_MODELS),
            ):
                if value not in allowed:
                    raise ValueError(f"{key} = {value!r}; allowed: {', '.join(allowed)}")
            bad = [o for o in self.outputs if o not in known]
            if bad:
                raise ValueError(f"outputs.histories contains {bad}; allowed: {', '.join(known)}")
            return self

    Config.__module__, Config.__qualname__ = module, "Config"  # picklable as <module>.Config
    return Config


def _registered(module):
    """The ``MECHANISM`` of ``module`` (unpickling)."""
    return importlib.import_module(module).MECHANISM


class Result(NamedTuple):
    """One variant's result: accumulated metrics, saved histories ({channel: (n_saves,) or
    (n_saves, J)}), final positions q and velocities v (the linkage's named coordinates)."""

    acc: metrics.Accumulator
    history: dict
    q: object
    v: object
    peaks: object = None  # (K,) running maxima of ``step_peaks`` (None: the mechanism has none)
    wear: object = None  # (J, N) Archard wear depth [m] of each bushing point over the steady window (cfg.wear)


@dataclass(frozen=True, eq=False)
class CrankLinkage:
    """The sweep protocol of one crank-driven linkage (see the module docstring).

    name: registry name; model: its ``[model]`` Table; joints: {clearance_joint: joint names};
    config: its static Config class; params_cls: its Params; accel: {clearance_joint:
    accel(cfg, p, q, v, aux, t) -> (a, aux, joint forces)}; initial_state(cfg, p) -> (q, v, aux);
    channels: {name: (doc, f(q, v, a))} beyond the per-joint ones; default_outputs;
    acc_key, acc_unit, acc_of(a): the amplified motion quantity (``slider_acceleration``,
    ``_m_per_s2``, a -> a.slider); ideal_peaks(p, t_end, t_steady, n_samples, **ideal_kw(cfg));
    samples: (per revolution, minimum) of the ideal reference; steady_start(spec, p, t_end);
    effective_mass(p, clearance_joint) of the stability bound; check_geometry(cols);
    extra_params(flat, dtype) -> {field: value} beyond the declared ones; steady_doc (summary);
    integrator: defaults of ``_clearance.crank_integrator``; profile: the ``[profile]`` table;
    float32_scale(cols) -> largest coordinate [m] (None: no float32 warning); versus_ideal:
    ((channel, ideal key, axis label), ...) drawn over the last crank revolution against the
    ideal twin (``plots.versus_ideal``; ideal key "reaction": the first clearance joint's).
    """

    name: str
    model: object
    joints: dict
    config: type
    params_cls: type
    accel: dict
    initial_state: Callable
    channels: dict
    default_outputs: tuple
    acc_key: str
    acc_unit: str
    acc_of: Callable
    ideal_peaks: Callable
    samples: tuple
    steady_start: Callable
    effective_mass: Callable
    check_geometry: Callable
    steady_doc: str
    extra_params: Callable = lambda flat, dtype: {}
    ideal_kw: Callable = lambda cfg: {}
    integrator: dict = None
    profile: object = _clearance.PROFILE
    float32_scale: Callable | None = None
    versus_ideal: tuple = ()
    versus_ideal_title: str = ""

    def __getattr__(self, name):
        # the rest of the linkage's module (Config, benchmark_params, ideal, ...) through the registry
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(sys.modules[self.config.__module__], name)

    def __reduce__(self):
        return _registered, (self.config.__module__,)

    # ------------------------------------------------------------------ spec
    @property
    def OUTPUT_CHANNELS(self):
        return {
            **CRANK_ANGLE,
            **{k: d for k, (d, _) in JOINT_CHANNELS.items()},
            **{k: d for k, (d, _) in self.channels.items()},
        }

    @property
    def default_joint(self):
        return next(iter(self.joints))

    def tables(self, model):
        """[model], the clearance-joint tables (each joint's own with several), [integrator], [outputs]."""
        names = self.joints.get(model.get("clearance_joint", self.default_joint), self.joints[self.default_joint])
        return [
            self.model,
            *_clearance.joint_tables(names, profile=self.profile),
            _clearance.WEAR,
            _clearance.crank_integrator(integrate.SCHEMES, DEFAULT_SCHEME, **(self.integrator or {})),
            specmod.outputs_table(self.OUTPUT_CHANNELS, self.default_outputs),
        ]

    validate_spec = staticmethod(_clearance.validate_spec)
    check_axis = staticmethod(_clearance.check_axis)
    differentiable_keys = staticmethod(_clearance.differentiable_keys)

    def check_values(self, cols):
        every = tuple(dict.fromkeys(n for names in self.joints.values() for n in names))
        _clearance.check_values(cols, every)
        self.check_geometry(cols)

    # ------------------------------------------------------------------ run
    def t_end(self, spec, cols):
        """integrator.t_end_s, or (when 0) the ramp plus integrator.revolutions at the slowest speed."""
        it = spec["integrator"]
        if it["t_end_s"] > 0:
            return float(it["t_end_s"])
        rpm = np.asarray(cols["model.crank_speed_rpm"], float)
        return float(np.max(np.asarray(cols["model.ramp_time_s"], float) + it["revolutions"] * 60.0 / rpm))

    def make_config(self, spec, t_end):
        return self.config(
            clearance_joint=spec["model"]["clearance_joint"], **_clearance.config_fields(spec, t_end)
        ).validate()

    def params(self, spec, cfg, flat, dtype, t_end):
        """Params of one variant from {dotted path: scalar} (traceable), steady window from
        ``steady_start`` over the last integrator.steady_revolutions crank revolutions."""
        p = self.params_cls(
            **declared(self.model, flat, dtype),
            **self.extra_params(flat, dtype),
            steady_start=jnp.zeros((), dtype),
            joint=_clearance.joints_params(spec, cfg.joint, flat, dtype, self.joint_names(cfg)),
        )
        return p._replace(steady_start=jnp.asarray(self.steady_start(spec, p, t_end), dtype))

    def stability_dt(self, p, scheme, clearance_joint=None, normal_law=None):
        """Conservative stable dt [s] per variant: the linearised Hertz stiffness k = n K δ^(n−1)
        at the penetration δ reached when the effective mass m hits at the crank-pin speed r·ω
        (½ m v² = K δ^(n+1)/(n+1)), ω_c = √(k/m) (``integrate.stability_bound``); with a
        hysteresis ``normal_law`` its damping ratio there (``integrate.hysteresis_damping_ratio``)
        lowers the bound of the leapfrog and verlet_predicted."""
        jp = p.joint
        m = self.effective_mass(p, clearance_joint or self.default_joint)
        v = p.crank_length * p.crank_speed
        n, K = jp.exponent, jp.stiffness
        if K.ndim > m.ndim:  # two joints: take the stiffer
            K, n = jnp.max(K, axis=-1), jnp.max(n, axis=-1)
        delta = (0.5 * m * v * v * (n + 1) / K) ** (1.0 / (n + 1))
        zeta = 0.0
        if normal_law in laws.HYSTERESIS_MODELS:
            e = jp.restitution if jp.restitution.ndim == m.ndim else jnp.min(jp.restitution, axis=-1)
            zeta = integrate.hysteresis_damping_ratio(laws.hysteresis_factor(normal_law, e), n)
        return integrate.stability_bound(scheme, n * K * delta ** (n - 1), m, zeta)

    def check_params(self, spec, cfg, p, name):
        """The bushing stays outside the journal; dt is under the stability bound."""
        _clearance.check_bushing(cfg.joint, p.joint, name)
        _clearance.check_dt(
            cfg, np.asarray(self.stability_dt(p, cfg.scheme, cfg.clearance_joint, cfg.joint.normal_law)), name
        )

    def joint_names(self, cfg):
        """The clearance joints of a configuration (the per-joint axis of outputs and columns)."""
        return self.joints[cfg.clearance_joint]

    def joint_tree(self, p):
        """The clearance joints' ``joints.JointParams`` in the params ``p`` (None: none)."""
        return p.joint

    def with_joint_tree(self, p, jp):
        """The params ``p`` with the clearance joints' ``joints.JointParams`` replaced by ``jp``
        (a worn bushing, ``jaxclear.wear_evolution``)."""
        return p._replace(joint=jp)

    def joint_clearance(self, p):
        """Each variant's nominal radial clearance [m] ((B,) or (B, J)) for the penetration columns."""
        jp = self.joint_tree(p)
        return None if jp is None else jp.clearance

    def resolve_config(self, spec, cfg, p, acc, offset):
        """``profile.max_regions = "auto"``: the slots from every variant's profiles
        (``_clearance.resolve_config``, called by ``sweep.plan`` block by block)."""
        jp = self.joint_tree(p)
        if jp is None:
            return cfg, acc
        return _clearance.resolve_config(spec, cfg, jp, acc, offset, self.joint_names(cfg))

    def accel_of(self, cfg):
        """accel(cfg, p, q, v, aux, t) -> (a, memory, joint forces) of a configuration."""
        return self.accel[cfg.clearance_joint]

    def amplified(self, cfg):
        """(name, unit suffix) of the amplified motion quantity (metrics.csv column stems)."""
        return self.acc_key, self.acc_unit

    def acc_value(self, cfg, q, v, a):
        """The amplified motion quantity at one step."""
        return self.acc_of(a)

    def describe(self, spec, cfg):
        return {
            "clearance_joint": cfg.clearance_joint,
            **_clearance.describe(cfg.joint),
            "steady_window": f"last {spec['integrator']['steady_revolutions']:g} crank revolution(s) "
            + self.steady_doc,
            "continuous_contact_s": spec["integrator"]["continuous_contact_s"],
        }

    def bytes_per_variant(self, cfg, precision):
        """Rough device bytes of one variant (automatic chunk size): the saved histories twice
        (result + scan stacking) plus params, carry and per-step temporaries (~16 kB, more with
        profile points)."""
        item = 4 if precision == "float32" else 8
        hist = cfg.n_saves * max(1, len(cfg.outputs)) * cfg.n_joints * item
        return 2.0 * hist + 16384 + 64 * cfg.joint.n_points * item

    def warn_float32(self, spec, cols):
        """Warn when float32 cannot resolve µm penetrations: a coordinate of size s carries a
        rounding of eps₃₂·s; above 1 % of the clearance the contact force is noise."""
        if self.float32_scale is None:
            return
        c = float(np.min(cols["joint.clearance_m"]))
        res = float(np.finfo(np.float32).eps) * float(self.float32_scale(cols))
        if res > 0.01 * c:
            warnings.warn(
                f"integrator.precision = 'float32' resolves positions to {res:.2g} m, more than 1% of "
                f"joint.clearance_m = {c:g}: penetrations and contact forces will be noisy; use float64",
                stacklevel=4,
            )

    # ------------------------------------------------------------------ simulation
    def _outputs(self, cfg, q, v, a, jfs, p=None):
        per = lambda f: jnp.stack([f(j) for j in jfs]).astype(q.crank.dtype)  # one entry per joint
        ch = {}
        for k in cfg.outputs:
            if k in JOINT_CHANNELS:
                ch[k] = per(JOINT_CHANNELS[k][1])
            else:
                ch[k] = {**CRANK_ANGLE, **self.channels}[k][1](q, v, a)
        return ch

    def simulate(self, cfg, p, state0=None) -> Result:
        """Integrate one variant over cfg.n_steps steps (pure; jit/vmap/grad at the caller).
        state0: optional (q, v) replacing ``initial_state`` (named coordinates)."""
        accel_impl = self.accel_of(cfg)

        def accel(params, q, v, aux, t):
            a, aux1, jfs = accel_impl(cfg, params, q, v, aux, t)
            return a, aux1, (a, jfs, q, v, t)

        step = integrate.make_step(cfg.scheme, accel, integrate.drift, cfg.dt)
        q0, v0, aux0 = self.initial_state(cfg, p)
        dtype = jax.tree_util.tree_leaves(q0)[0].dtype
        if state0 is not None:
            q0, v0 = (jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), x) for x in state0)
        a0, _, _ = accel(p, q0, v0, aux0, 0.0)
        s0 = integrate.State(q0, v0, a0, aux0)
        per = lambda jfs, f: jnp.stack([f(j) for j in jfs])

        def reduce_metrics(acc, out, i):
            a, jfs, q, v, t = out
            ovf = per(jfs, lambda j: j.window_overflow) if cfg.joint.window else None
            return metrics.update(
                acc,
                per(jfs, lambda j: safe_norm(j.force)),
                self.acc_value(cfg, q, v, a),
                per(jfs, lambda j: jnp.any(j.active)),
                per(jfs, lambda j: j.new_impacts),
                per(jfs, lambda j: j.n_regions),
                t >= p.steady_start,
                cfg.min_continuous_steps,
                window_overflow=ovf,
                penetration=per(jfs, lambda j: jnp.max(j.depth)),
            )

        n_peaks = len(self.peak_names(cfg))
        jp_all = self.joint_tree(p)
        stacked = cfg.wear and jp_all.points.ndim == 3
        arcs = wear.arc_lengths(jp_all.points) if cfg.wear else None  # the run's profile is fixed

        def wear_step(out):
            """(J, N) Archard depth of this step, in the steady window only (jaxclear.wear)."""
            _, jfs, _, _, t = out
            rows = []
            for j, jf in enumerate(jfs):
                jp = jax.tree_util.tree_map(lambda x: x[j], jp_all) if stacked else jp_all
                fn = jnp.sum(jf.normal_force)
                slip = jnp.sum(jf.normal_force * jf.slip_speed) / jnp.where(fn > 0, fn, 1.0)
                rows.append(
                    wear.increment(
                        jp.points,
                        jf.e_local,
                        jp.journal_radius,
                        fn,
                        slip,
                        cfg.dt,
                        jp.wear_coefficient,
                        jp.bushing_length,
                        arcs[j] if stacked else arcs,
                    )
                )
            return jnp.where(t >= p.steady_start, jnp.stack(rows), 0.0)

        def reduce(acc_x, out, i):  # the metrics, then the mechanism's running maxima and the wear
            if not (n_peaks or cfg.wear):
                return reduce_metrics(acc_x, out, i)
            acc, pk, w = acc_x
            pk = jnp.maximum(pk, self.step_peaks(cfg, p, out[2])) if n_peaks else pk
            return reduce_metrics(acc, out, i), pk, (w + wear_step(out) if cfg.wear else w)

        def save(out):
            a, jfs, q, v, t = out
            return self._outputs(cfg, q, v, a, jfs, p=p)

        def block_max(out):
            # the contact force's maximum over each save block: the impact peaks between samples
            return {"contact_force_block_max_N": per(out[1], lambda j: safe_norm(j.force))}

        acc0 = metrics.init(cfg.n_joints, dtype)
        if n_peaks or cfg.wear:
            n_pts = jp_all.points.shape[-2] if cfg.wear else 0
            acc0 = (acc0, jnp.zeros(max(n_peaks, 1), dtype), jnp.zeros((cfg.n_joints, max(n_pts, 1)), dtype))
        s, acc, hist = integrate.simulate(
            step,
            p,
            s0,
            acc0,
            reduce,
            cfg.n_saves,
            cfg.save_every,
            save=save if cfg.outputs else None,
            checkpoint=cfg.checkpoint,
            block_max=block_max if "contact_force_N" in cfg.outputs else None,
        )
        acc, peaks, worn = acc if (n_peaks or cfg.wear) else (acc, None, None)
        acc = metrics.finalize(acc, cfg.min_continuous_steps)
        return Result(
            acc, hist if hist is not None else {}, s.q, s.v, peaks if n_peaks else None, worn if cfg.wear else None
        )

    def peak_names(self, cfg):
        """metrics.csv columns of the mechanism's own running maxima (``step_peaks``; none here)."""
        return ()

    def step_peaks(self, cfg, p, q):
        """The quantities whose maxima over every step ``peak_names`` reports (per step)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ study and metrics
    @property
    def STUDY_METRICS(self):
        """The differentiable metrics (``metrics.peak_vector``)."""
        return metrics.peak_vector_names(self.acc_key, self.acc_unit)

    def n_ideal_samples(self, max_crank_speed_rad_per_s, t_end):
        """Samples of the ideal mechanism over [0, t_end]: ``samples[0]`` per crank revolution of
        the fastest variant, at least ``samples[1]`` + 1, at most 2^18 + 1."""
        return _clearance.ideal_sample_count(max_crank_speed_rad_per_s, t_end, *self.samples)

    def ideal_samples(self, cols, t_end):
        """One reference sample count for the whole sweep, from its fastest variant."""
        return self.n_ideal_samples(_clearance.fastest_crank_speed(cols), t_end)

    def reference(self, cfg, p, t_end, n_samples):
        """The amplification references of one variant: ({key: ideal peak over [0, t_end]},
        {key: over the steady window}), with ``reaction`` the largest ideal reaction over the
        configuration's clearance joints."""
        full, steady = self.ideal_peaks(p, t_end, p.steady_start, n_samples=n_samples, **self.ideal_kw(cfg))
        names = self.joint_names(cfg)
        react = lambda d: functools.reduce(jnp.maximum, [d["reaction_" + n] for n in names])
        return {**full, "reaction": react(full)}, {**steady, "reaction": react(steady)}

    def study(self, spec, cfg, t_end):
        """``jaxclear.study.Study``: ``metrics.peak_vector`` of one variant's run against its
        ideal twin; its ``reference`` also gives ``run``'s DAF columns (``chunk_metrics``)."""
        from ..study import Study

        n = cfg.ideal_samples or self.ideal_samples(specmod.flat_values(spec), t_end)

        def evaluate(p):
            ideal, _ = self.reference(cfg, p, t_end, n)
            return metrics.peak_vector(self.simulate(cfg, p).acc, ideal["reaction"], ideal[self.amplified(cfg)[0]])

        return Study(
            metrics.peak_vector_names(*self.amplified(cfg)),
            evaluate,
            "smooth_peak_contact_force_N",
            reference=functools.partial(self._reference_batch, cfg, t_end=t_end, n_samples=n),
        )

    @functools.partial(jax.jit, static_argnums=(0, 1), static_argnames=("n_samples",))
    def _reference_batch(self, cfg, p, t_end, n_samples):
        # the reference in float64 whatever the run's precision
        p = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x, p)
        return jax.vmap(lambda pp: self.reference(cfg, pp, t_end, n_samples))(p)

    def chunk_metrics(self, spec, cfg, p, res, n_real, t_end):
        """metrics.csv rows of one chunk: peaks of the contact force and of the amplified motion,
        their ideal values and amplification factors (the study's reference), the smooth
        (differentiable) peaks, impacts and motion fractions per joint, ``finite``."""
        acc = jax.tree_util.tree_map(lambda x: np.asarray(x)[:n_real], res.acc)
        full, steady = self.study(spec, cfg, t_end).reference(p)
        full = {k: np.asarray(v)[:n_real] for k, v in full.items()}
        steady = {k: np.asarray(v)[:n_real] for k, v in steady.items()}
        out = {}
        ak, au = self.amplified(cfg)
        metrics.peak_columns(
            out,
            "contact_force",
            "_N",
            "ideal_peak_reaction_N",
            acc.peak_force.max(axis=1),
            acc.peak_force_steady.max(axis=1),
            full["reaction"],
            steady["reaction"],
        )
        metrics.peak_columns(
            out, ak, au, f"ideal_peak_{ak}{au}", acc.peak_acc, acc.peak_acc_steady, full[ak], steady[ak]
        )
        # Smooth (power-mean, p = metrics.SMOOTH_EXPONENT) peaks over the run: the differentiable
        # twins that jaxclear sensitivity / identify use.
        sm_f = np.asarray(metrics.smooth_peak(acc.lse_force, acc.steps))
        sm_a = np.asarray(metrics.smooth_peak(acc.lse_acc, acc.steps))
        out["smooth_peak_contact_force_N"] = sm_f
        out[f"smooth_peak_{ak}{au}"] = sm_a
        out["smooth_daf_contact_force"] = metrics.amplification(sm_f, full["reaction"])
        out[f"smooth_daf_{ak}"] = metrics.amplification(sm_a, full[ak])
        c = self.joint_clearance(p)
        metrics.motion_columns(
            out, acc, self.joint_names(cfg), full, clearance=None if c is None else np.asarray(c)[:n_real]
        )
        if cfg.joint.window:
            out["window_overflow_steps"] = acc.window_overflow_steps.sum(axis=1)
        if getattr(res, "wear", None) is not None:
            self._wear_columns(out, spec, p, res, n_real)
        if res.peaks is not None:
            for k, name in enumerate(self.peak_names(cfg)):
                out[name] = np.asarray(res.peaks)[:n_real, k]
        finite = lambda tree: np.all(
            [
                np.isfinite(np.asarray(x)[:n_real]).reshape(n_real, -1).all(axis=1)
                for x in jax.tree_util.tree_leaves(tree)
            ],
            axis=0,
        )
        out["finite"] = acc.finite & finite(res.q) & finite(res.v)
        return out

    def _wear_columns(self, out, spec, p, res, n_real):
        """Wear rates over the steady window, per crank cycle: the worn volume [m³] of all the
        joints' bushings, the deepest wear [m] and its angle in the bearing frame [deg]."""
        revs = spec["integrator"]["steady_revolutions"]
        jp = self.joint_tree(p)
        depth = np.asarray(res.wear)[:n_real] / revs  # (B, J, N)
        pts = np.asarray(jp.points)[:n_real].reshape(depth.shape + (2,))
        length = np.asarray(jp.bushing_length)[:n_real].reshape(depth.shape[0], -1)[:, :1]
        out["worn_volume_per_cycle_m3"] = np.asarray(wear.worn_volume(pts, depth, length)).sum(axis=1)
        out["max_wear_depth_per_cycle_m"], out["max_wear_angle_deg"] = wear.deepest(pts, depth)

    def plots(self, outdir, spec, table, summary, hists, t):
        """The shared sweep PNGs (contact force vs crank angle, orbits, DAF maps) and the linkage's own."""
        from .. import plots as plots_

        written = []
        if "journal_x_m" in hists:
            written += plots_.sweep_plots(
                outdir,
                table,
                summary,
                hists,
                t,
                spec,
                amplified=("contact_force", self.amplified(self.make_config(spec, float(np.asarray(t)[-1])))[0]),
            )
        if self.versus_ideal:
            written += plots_.versus_ideal(
                self,
                outdir,
                spec,
                table,
                summary,
                hists,
                t,
                self.versus_ideal,
                f"{self.acc_key.split('_')[0]}_vs_crank_angle.png",
                self.versus_ideal_title,
            )
        return written
