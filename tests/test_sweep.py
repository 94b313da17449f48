"""Spec validation, the sweep runner and the CLI end to end (small sizes)."""

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxclear import cli, sweep
from jaxclear import spec as specmod

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "sweep": {"name": "tiny"},
    "integrator": {"dt_s": 2e-6, "t_end_s": 1.0e-3, "save_every": 10, "chunk_size": 2},
    "outputs": {"plot_variants": 2},
    "axes": {
        "joint.clearance_m": {"values": [0.5e-3, 0.1e-3, 0.02e-3]},
        "model.crank_speed_rpm": {"values": [3000.0, 5000.0]},
    },
}


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"joint": {"clearence_m": 1e-4}}, ["joint.clearence_m", "did you mean 'clearance_m'"]),
        ({"joint": {"clearance_m": -1e-4}}, ["joint.clearance_m", "-0.0001", "allowed range"]),
        ({"laws": {"restitution": "high"}}, ["laws.restitution", "'high'", "a number"]),
        ({"laws": {"normal": "hertzz"}}, ["laws.normal", "did you mean 'hertz'"]),
        ({"modle": {}}, ["[modle]", "did you mean 'model'"]),
        ({"axes": {"profile.n_points": {"values": [8]}}}, ["profile.n_points", "cannot be swept"]),
        ({"axes": {"joint.clearance_m": {"logspace": [0.0, 1e-3, 3]}}}, ["axes.joint.clearance_m", "> 0"]),
        ({"axes": {"laws.restitution": {"values": [0.9, 1.5]}}}, ["laws.restitution", "1.5"]),
        ({"integrator": {"dt_s": 1e-4}}, ["integrator.dt_s", "stability bound"]),
        (
            {"profile": {"kind": "fourier", "fourier_a_m": [0.0, -8e-4]}, "joint": {"clearance_m": 5e-4}},
            ["journal must be smaller than the bearing", "journal_radius_m"],
        ),
    ],
)
def test_bad_specs_name_the_key_and_value(bad, words):
    with pytest.raises(specmod.SpecError) as ei:
        sp = specmod.load(bad)
        sweep.plan(sp)
    msg = str(ei.value)
    for w in words:
        assert w in msg, msg


def test_axes_grid_and_random_samples():
    sp = specmod.load(
        {
            "sampling": {"n": 5, "seed": 1},
            "axes": {
                "joint.clearance_m": {"loguniform": [2e-5, 5e-4]},
                "model.crank_speed_rpm": {"linspace": [1000, 5000, 3]},
            },
        }
    )
    paths, vals = specmod.axes_values(sp)
    assert paths == ["model.crank_speed_rpm", "joint.clearance_m"]
    assert vals.shape == (15, 2)
    assert np.all((vals[:, 1] >= 2e-5) & (vals[:, 1] <= 5e-4))
    assert sorted(set(vals[:, 0])) == [1000, 3000, 5000]
    _, again = specmod.axes_values(sp)
    np.testing.assert_array_equal(vals, again)  # seeded


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """One TINY run to a directory (plots included), shared: (DIR, table, summary, histories).
    Its chunk function is the one every TINY-shaped sweep of this module reuses."""
    out = tmp_path_factory.mktemp("golden") / "run"
    table, summary, hists = sweep.run(TINY, out=out)
    return out, table, summary, hists


def test_run_writes_everything_and_resumes(golden, tmp_path):
    src, table, summary, _ = golden
    out = tmp_path / "run"
    shutil.copytree(src, out)  # the resume below rewrites the store: a copy, the golden run stays
    for f in (
        "metrics.csv",
        "summary.json",
        "store.zarr/zarr.json",
        "progress.jsonl",
        "plots/contact_force_vs_crank_angle.png",
        "plots/journal_orbits.png",
        "plots/map_daf_contact_force_steady.png",
    ):
        assert (out / f).exists(), f
    m = sweep.read_csv(out / "metrics.csv")
    for col in (
        "clearance_m",
        "crank_speed_rpm",
        "peak_contact_force_N",
        "daf_contact_force",
        "daf_slider_acceleration",
        "impacts",
        "free_flight_fraction",
        "finite",
        "peak_contact_force_steady_N",
    ):
        assert col in m, col
    assert len(m["clearance_m"]) == 6 and m["finite"].all()
    # Every step is free flight, impact or continuous contact.
    total = m["free_flight_fraction"] + m["impact_fraction"] + m["continuous_contact_fraction"]
    np.testing.assert_allclose(total, 1.0, rtol=0, atol=1e-12)
    s = json.loads((out / "summary.json").read_text())
    for k in (
        "variants",
        "steps_per_variant",
        "dt_s",
        "wall_s",
        "compile_s",
        "variant_steps_per_s",
        "device_kind",
        "device_count",
        "precision",
        "failed_variants",
        "steady_window",
    ):
        assert k in s, k
    assert s["variants"] == 6 and s["failed_variants"] == []
    h = sweep.load(out).histories["contact_force_N"]
    assert h.shape == (6, s["steps_per_variant"] // 10, 1)
    # Bigger clearance, bigger first-impact peak (at each speed).
    for rpm in (3000.0, 5000.0):
        sel = m["crank_speed_rpm"] == rpm
        order = np.argsort(m["clearance_m"][sel])
        assert np.all(np.diff(m["peak_contact_force_N"][sel][order]) > 0)
    # Resume: clear one chunk's done flag; the rerun recomputes only that one, same metrics.
    from jaxclear import store

    store.open(out)["chunk_done"][1] = False
    table2, summary2, _ = sweep.run(TINY, out=out)
    assert summary2["chunks_reused"] == 2 and summary2["chunks_computed"] == 1
    for k in table:
        np.testing.assert_array_equal(table[k], table2[k])


def test_float32_precision_option(golden):
    t64 = golden[1]
    spec = dict(TINY, integrator=dict(TINY["integrator"], precision="float32"))
    t32, s32, _ = sweep.run(spec)
    assert s32["precision"] == "float32"
    rel = np.abs(t32["peak_contact_force_N"] / t64["peak_contact_force_N"] - 1)
    assert rel.max() < 0.05, rel


def test_cli_run_with_set_override(tmp_path, capsys):
    # in process (the output and the exit code are the subject, not the process); TINY's
    # integrator, so the chunk function is the one already compiled
    spec = tmp_path / "s.toml"
    spec.write_text("""
[sweep]
name = "cli"
[integrator]
dt_s = 2e-6
t_end_s = 1e-3
save_every = 10
[axes]
"joint.clearance_m" = { values = [0.5e-3, 0.25e-3] }
""")
    out = tmp_path / "o"
    jax.devices()  # backends up first: the in-process `run` must not re-split this session's CPU
    rc = cli.main(["run", str(spec), "--out", str(out), "--set", "model.crank_speed_rpm=3000", "--quiet"])
    r = capsys.readouterr()
    assert rc == 0, r.err
    assert "peak_contact_force_N" in r.out
    m = sweep.read_csv(out / "metrics.csv")
    assert list(m["clearance_m"]) == [0.5e-3, 0.25e-3]
    assert sweep.load(out).spec["model"]["crank_speed_rpm"] == 3000.0  # the override was applied
    rc = cli.main(["run", str(spec), "--out", str(tmp_path / "bad"), "--set", "joint.clearance_m=-1"])
    err = capsys.readouterr().err
    assert rc == 2 and "joint.clearance_m" in err and "Traceback" not in err
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # ~22 plans, each compiling its own eager parameter checks: ~15 s warm, ~90 s cold
def test_shipped_specs_validate():
    for f in sorted((ROOT / "sweeps").glob("*.toml")):
        pl = sweep.plan(specmod.load(f))
        assert pl.n_variants >= 1, f
    assert sweep.plan(specmod.load(ROOT / "sweeps" / "bench_slider_crank.toml")).n_variants == 1024
    fl = sweep.plan(specmod.load(ROOT / "sweeps" / "flores_slider_crank.toml"))
    assert abs(fl.t_end - 2 * 60 / 5000) < 2e-6


@pytest.mark.parametrize("kind", ["measured", "wear_patch"])
def test_non_circular_profiles_through_a_sweep(tmp_path, kind):
    # A measured CSV (an ovalised bore, 5 µm out of round) and a local wear patch, run by spec;
    # both 72 points with two region slots (what "auto" picks for the patch), so one compiled
    # chunk serves the two.
    th = np.linspace(0, 2 * np.pi, 200, endpoint=False)
    r = 10.1e-3 + 5e-6 * np.cos(2 * th)
    csv = tmp_path / "bore.csv"
    csv.write_text(
        "# measured bore\nx_m,y_m\n" + "\n".join(f"{x:.12e},{y:.12e}" for x, y in zip(r * np.cos(th), r * np.sin(th)))
    )
    prof = (
        {"kind": "measured", "path": str(csv), "n_points": 72, "max_regions": 2}
        if kind == "measured"
        else {"kind": "wear_patch", "wear_depth_m": 2e-5, "wear_angle_deg": 0.0, "n_points": 72, "max_regions": 2}
    )
    spec = {
        "sweep": {"name": kind},
        "profile": prof,
        "joint": {"clearance_m": 1e-4},
        "integrator": {"dt_s": 1e-6, "t_end_s": 6e-4, "save_every": 10},
        "outputs": {"plots": False},
        "axes": {"model.crank_speed_rpm": {"values": [3000.0, 5000.0]}},
    }
    table, summary, _ = sweep.run(spec)
    assert summary["geometry"] == "points" and table["finite"].all()
    assert np.all(table["impacts"] >= 1) and np.all(table["max_contact_regions"] >= 1)
    assert np.all(table["peak_contact_force_N"] > 1e3)


def test_bad_measured_profile_is_a_spec_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    with pytest.raises(specmod.SpecError, match="profile.path"):
        sweep.plan(specmod.load({"profile": {"kind": "measured", "path": str(bad)}}))


def test_float32_warns_when_it_cannot_resolve_the_clearance():
    base = {"integrator": {"precision": "float32", "t_end_s": 1e-4}}
    with pytest.warns(UserWarning, match="float32"):
        sweep.plan(specmod.load({**base, "joint": {"clearance_m": 2e-6}}))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sweep.plan(specmod.load({**base, "joint": {"clearance_m": 5e-4}}))


class _CompileCounter:
    """Counts JAX traces and backend compilations (``jax.monitoring`` duration events), with a
    mark after every chunk of a sweep (``progress`` callback)."""

    EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/backend_compile_duration")

    def __init__(self):
        self.events, self.marks = [], []

    def __call__(self, event, duration, **kw):
        if event in self.EVENTS:
            self.events.append((event.rsplit("/", 1)[1], kw.get("fun_name")))

    def progress(self, n):
        self.marks.append(len(self.events))

    def __enter__(self):
        import jax.monitoring

        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        import jax.monitoring

        jax.monitoring.unregister_event_duration_listener(self)


def _chunked_spec(axes, t_end_s):
    # 3 full chunks of 2 variants; a t_end no other test uses, so the chunk function is not
    # already in this process's cache and the first chunk compiles it
    return {
        "sweep": {"name": "chunks"},
        "outputs": {"plots": False, "histories": ["contact_force_N"]},
        "integrator": {"dt_s": 2e-6, "t_end_s": t_end_s, "save_every": 10, "chunk_size": 2},
        "axes": axes,
    }


def _compiles_per_chunk(spec):
    with _CompileCounter() as cc:
        # ticks off: progress is then called once per finished chunk (the marks between chunks)
        table, summary, _ = sweep.run(spec, progress=cc.progress, log=None, compile_cache=False, ticks=False)
    assert summary["chunks"] == 3 and len(cc.marks) == 3 and table["finite"].all()
    first = cc.events[: cc.marks[0]]
    later = cc.events[cc.marks[0] :]
    return first, later


def test_second_chunk_of_the_same_structure_does_not_recompile():
    """Chunks 2 and 3 (same shapes, same static config) reuse chunk 1's compiled simulation and
    metrics: not one trace or XLA compilation after the first chunk.  A chunk-dependent Python
    value in the trace (a chunk index, the number of real variants, a per-chunk sample count)
    or a chunk-dependent shape would show up here as a compile in chunk 2 or 3."""
    first, later = _compiles_per_chunk(
        _chunked_spec({"joint.clearance_m": {"values": [0.5e-3, 0.4e-3, 0.3e-3, 0.2e-3, 0.1e-3, 0.05e-3]}}, 3.02e-4)
    )
    # chunk 1 compiles the vmapped simulation (jit of sweep.compiled's lambda), once
    sim = [f for e, f in first if e == "backend_compile_duration" and ("<lambda>" in f or "simulate" in f)]
    assert len(sim) == 1, first
    assert later == [], later


def test_chunks_with_other_crank_speeds_do_not_recompile():
    """As above with the crank speed swept so that each chunk has its own top speed (2.4 and 0.25
    crank revolutions in 5 ms would need 3073 and 2049 ideal samples): the reference uses one
    sample count for the whole sweep (its fastest variant), so no chunk recompiles."""
    first, later = _compiles_per_chunk(
        _chunked_spec({"model.crank_speed_rpm": {"values": [3000.0, 3000.0, 29000.0, 29000.0, 3000.0, 3000.0]}}, 5e-3)
    )
    assert later == [], later
