"""The zarr result store: layout, resume after a kill (real SIGKILL and between data and flag),
refusal of another spec in the same DIR, load / xarray / export / show (small sizes)."""

import json
import shutil
import signal
import subprocess
import sys
from types import SimpleNamespace

import jax
import numpy as np
import pytest
from killing import kill_after_first_chunk

from jaxclear import cli, store, sweep
from jaxclear import spec as specmod

TINY = {
    "sweep": {"name": "tiny"},
    "integrator": {"dt_s": 2e-6, "t_end_s": 1.0e-3, "save_every": 10, "chunk_size": 2},
    "outputs": {"plot_variants": 2},
    "axes": {
        "joint.clearance_m": {"values": [0.5e-3, 0.1e-3, 0.02e-3]},
        "model.crank_speed_rpm": {"values": [3000.0, 5000.0]},
    },
}

TINY_TOML = """
[sweep]
name = "tiny"
[integrator]
dt_s = 2e-6
t_end_s = {t_end}
save_every = {save_every}
chunk_size = 2
[outputs]
plot_variants = 2
plots = {plots}
[axes]
"joint.clearance_m" = {{ values = {clearances} }}
"model.crank_speed_rpm" = {{ values = [3000.0, 5000.0] }}
"""


def _toml(path, t_end=1.0e-3, save_every=10, plots="true", clearances="[0.5e-3, 0.1e-3, 0.02e-3]"):
    path.write_text(TINY_TOML.format(t_end=t_end, save_every=save_every, plots=plots, clearances=clearances))
    return path


@pytest.fixture
def run_cli(capsys):
    """`jaxclear ARGS` in this process (what it prints and its exit code), not a subprocess:
    these tests are about the output, not about process boundaries."""
    jax.devices()  # backends up first: an in-process `run` must not re-split this session's CPU

    def go(*args):
        capsys.readouterr()
        rc = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out, stderr=err)

    return go


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype.kind == b.dtype.kind and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def _assert_same_results(t1, h1, t2, h2):
    assert list(t1) == list(t2)
    for k in t1:
        assert _same(t1[k], t2[k]), k
    assert sorted(h1) == sorted(h2)
    for k in h1:
        assert _same(h1[k], h2[k]), k


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """One finished TINY run shared by the read-only tests: (DIR, table, summary, histories)."""
    out = tmp_path_factory.mktemp("ref") / "run"
    table, summary, hists = sweep.run(TINY, out=out, log=None)
    return out, table, summary, hists


def test_store_layout_and_load(ref):
    out, table, summary, hists = ref
    n_saves = summary["steps_per_variant"] // 10
    g = store.open(out, mode="r")
    at = dict(g.attrs)
    assert at["spec_hash"] == summary["spec_hash"] and at["version"] == summary["version"]
    assert (at["n_variants"], at["chunk_size"], at["n_chunks"], at["format"]) == (6, 2, 3, store.FORMAT)
    assert json.loads(at["spec"])["integrator"]["dt_s"] == 2e-6
    h = g["histories"]
    channels = h.attrs["channels"]
    assert "crank_angle_rad" in channels and "contact_force_N[rod_slider]" in channels
    assert h.shape == (6, n_saves, len(channels)) and h.chunks == (2, n_saves, len(channels))
    assert g["chunk_done"].chunks == (1,) and g["metrics"]["peak_contact_force_N"].chunks == (2,)
    assert (out / "store.zarr" / "chunk_done" / "c" / "2").is_file()  # one file per chunk flag
    assert not (out / "chunks").exists() and not (out / "histories").exists()

    r = sweep.load(out)
    assert r.complete and r.missing_chunks == [] and r["metrics"] is r.metrics
    assert r.t_s.shape == (n_saves,) and np.isclose(r.t_s[-1], summary["t_end_s"])
    assert r.histories["contact_force_N"].shape == (6, n_saves, 1)
    assert r.histories["crank_angle_rad"].shape == (6, n_saves)
    assert list(r.inputs) == ["clearance_m", "crank_speed_rpm"] and r.spec["sweep"]["name"] == "tiny"
    assert r.summary["spec_hash"] == summary["spec_hash"]
    _assert_same_results(r.table, r.histories, table, hists)
    # The in-memory run (no DIR) gives the same numbers.
    t_mem, _, h_mem = sweep.run(TINY, log=None)
    _assert_same_results(t_mem, h_mem, table, hists)

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
        "chunks_reused",
        "store",
    ):
        assert k in s, k
    assert s["chunks_reused"] == 0 and s["store"].endswith("store.zarr")
    lines = [json.loads(x) for x in (out / "progress.jsonl").read_text().splitlines()]
    assert [x["chunk"] for x in lines] == [0, 1, 2] and lines[-1]["variants_done"] == 6
    for k in ("variants_total", "elapsed_s", "variant_steps_per_s", "eta_s", "time"):
        assert k in lines[0], k


def test_load_as_xarray(ref):
    """A grid sweep loads with one dimension per swept column (unstacked), so .sel by value
    picks the variant with those inputs; unstack=False keeps the flat variant dimension."""
    pytest.importorskip("xarray")
    out, table, summary, hists = ref
    n_t = summary["steps_per_variant"] // 10
    ds = sweep.load(out, as_xarray=True)
    cols = summary["axes"]
    assert len(cols) == 2
    sizes = {c: len(np.unique(table[c])) for c in cols}
    assert dict(ds.sizes) == {**sizes, "time": n_t, "joint": 1}
    assert ds["contact_force_N"].dims == (*cols, "time", "joint")
    for i in range(len(table["finite"])):
        sel = {c: table[c][i] for c in cols}
        assert int(ds["variant"].sel(sel)) == i
        assert float(ds["peak_contact_force_N"].sel(sel)) == table["peak_contact_force_N"][i]
        np.testing.assert_array_equal(ds["contact_force_N"].sel(sel).values, hists["contact_force_N"][i])
    assert ds.attrs["spec_hash"] == summary["spec_hash"] and list(ds["joint"].values) == ["rod_slider"]
    flat = sweep.load(out).to_xarray(unstack=False)
    assert dict(flat.sizes) == {"variant": 6, "time": n_t, "joint": 1}
    assert flat["crank_angle_rad"].dims == ("variant", "time")
    np.testing.assert_array_equal(flat["clearance_m"].values, table["clearance_m"])


def test_results_to_pandas(ref):
    pytest.importorskip("pandas")
    out, table, _, _ = ref
    df = sweep.load(out, histories=False).to_pandas()
    assert list(df.columns) == list(table) and df.index.name == "variant"
    np.testing.assert_array_equal(df["peak_contact_force_N"].to_numpy(), table["peak_contact_force_N"])


def test_export_csv_and_parquet(ref, tmp_path):
    out, table, _, _ = ref
    dest = sweep.export(out, "csv", tmp_path / "m.csv")
    assert dest.read_text() == (out / "metrics.csv").read_text()
    pytest.importorskip("pyarrow")
    assert (out / "metrics.parquet").exists()
    back = sweep.read_parquet(sweep.export(out, "parquet", tmp_path / "m.parquet"))
    assert list(back) == list(table)
    for k in table:
        assert _same(back[k], table[k]), k


def test_cli_show_and_export(ref, tmp_path, run_cli):
    out, _, summary, _ = ref
    shutil.rmtree(out / "plots")
    r = run_cli("show", out)
    assert r.returncode == 0, r.stderr
    assert "tiny" in r.stdout and summary["spec_hash"] in r.stdout and "6/6" in r.stdout
    assert "daf_contact_force_steady" in r.stdout
    assert (out / "plots" / "journal_orbits.png").exists()
    r = run_cli("export", out, "--format", "csv", "--output", tmp_path / "e.csv")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "e.csv").read_text() == (out / "metrics.csv").read_text()
    r = run_cli("show", tmp_path / "nothing")
    assert r.returncode == 2 and "jaxclear: error:" in r.stderr and "Traceback" not in r.stderr


def test_kill_between_data_and_flag_then_resume(ref, tmp_path, monkeypatch, run_cli):
    """A run dies after writing chunk 1's data but before its flag: chunk 1 is not done, loads
    as missing, and the resume recomputes it (over deliberately corrupted data) bit-identically."""
    _, table, _, hists = ref
    out = tmp_path / "run"
    real, marked = store.mark_done, []

    def dies_on_second_flag(g, ci):
        if marked:
            raise RuntimeError("killed")
        marked.append(ci)
        real(g, ci)

    monkeypatch.setattr(store, "mark_done", dies_on_second_flag)
    with pytest.raises(RuntimeError, match="killed"):
        sweep.run(TINY, out=out, log=None)
    monkeypatch.undo()
    g = store.open(out)
    assert store.done_flags(g).tolist() == [True, False, False]
    assert not (out / "summary.json").exists() and not (out / "metrics.csv").exists()
    # A torn chunk: some of its data written, some stale.
    g["metrics"]["peak_contact_force_N"][2:4] = -1.0
    g["histories"][2:3] = 0.0

    part = sweep.load(out)
    assert part.missing_chunks == [1, 2] and not part.complete and part.summary is None
    assert part.variant_done.tolist() == [True, True, False, False, False, False]
    assert np.isnan(part.metrics["peak_contact_force_N"][2:]).all()
    assert part.metrics["finite"].tolist() == [True, True, False, False, False, False]
    assert part.metrics["impacts"].dtype.kind == "f" and np.isnan(part.metrics["impacts"][2:]).all()
    assert np.isnan(part.histories["contact_force_N"][2:]).all()
    np.testing.assert_array_equal(part.metrics["peak_contact_force_N"][:2], table["peak_contact_force_N"][:2])
    r = run_cli("show", out)
    assert r.returncode == 0 and "2/6" in r.stdout and "1/3" in r.stdout and "1-2" in r.stdout, r.stdout + r.stderr

    logs = []
    t2, s2, h2 = sweep.run(TINY, out=out, log=logs.append)
    assert s2["chunks_reused"] == 1 and s2["chunks_computed"] == 2
    assert any("1 of 3 chunks" in m for m in logs), logs
    _assert_same_results(t2, h2, table, hists)
    assert sweep.load(out).complete


def test_other_spec_is_refused_and_force_rebuilds(ref, tmp_path, run_cli):
    src, _, summary, _ = ref
    out = tmp_path / "run"
    shutil.copytree(src, out)
    # as many variants as TINY (the same shapes: nothing new to compile), other values
    other = dict(TINY, axes=dict(TINY["axes"], **{"joint.clearance_m": {"values": [0.4e-3, 0.2e-3, 0.3e-3]}}))
    new_hash = specmod.spec_hash(specmod.load(other))
    with pytest.raises(specmod.SpecError) as ei:
        sweep.run(other, out=out, log=None)
    msg = str(ei.value)
    assert "--force" in msg and summary["spec_hash"] in msg and new_hash in msg, msg
    assert store.open(out).attrs["spec_hash"] == summary["spec_hash"]  # untouched

    spec_file = _toml(tmp_path / "other.toml", clearances="[0.4e-3, 0.2e-3, 0.3e-3]")
    r = run_cli("run", spec_file, "--out", out, "--quiet")
    assert r.returncode == 2 and "jaxclear: error:" in r.stderr and "--force" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr

    t, s, _ = sweep.run(other, out=out, log=None, force=True)
    assert s["chunks_reused"] == 0 and s["variants"] == 6
    res = sweep.load(out)
    assert res.attrs["spec_hash"] == new_hash and res.complete
    assert sorted(set(res.inputs["clearance_m"])) == [0.2e-3, 0.3e-3, 0.4e-3]
    _, s_again, _ = sweep.run(other, out=out, log=None)  # same spec: everything reused
    # the figures stay those of the run that computed the chunks; the rerun is reported apart
    assert s_again["rerun"]["chunks_reused"] == 3 and s_again["rerun"]["chunks_computed"] == 0
    assert s_again["chunks_computed"] == s["chunks_computed"] == 3 and s_again["wall_s"] == s["wall_s"]


@pytest.mark.slow  # a CLI process started, SIGKILLed mid-run and resumed, ~9 s
def test_resume_after_sigkill_is_bit_identical(ref, tmp_path):
    """Kill -9 a CLI run after its first finished chunk; resume in process; same numbers as an
    uninterrupted run."""
    # TINY's chunk (2 variants × 500 steps, compiled by ``ref``) 12 times over: each chunk (its
    # compute and its store writes) lasts long enough to be killed in flight after the first, and
    # the subprocess (one CPU device, as this process) loads the chunk from the compile cache
    # while the resume and the reference reuse it in memory.
    clearances = [float(c) for c in np.round(np.linspace(0.5e-3, 0.05e-3, 12), 12)]
    spec_file = _toml(tmp_path / "long.toml", plots="false", clearances=str(clearances))
    n_chunks = 12
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxclear.cli",
            "run",
            str(spec_file),
            "--out",
            str(out),
            "--quiet",
            "--cpu-devices",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    kill_after_first_chunk(proc, out)
    assert proc.returncode == -signal.SIGKILL
    done = store.done_flags(store.open(out, mode="r"))
    assert 1 <= done.sum() < n_chunks, done
    assert not (out / "summary.json").exists()

    t_res, s_res, h_res = sweep.run(spec_file, out=out, log=None)
    assert s_res["chunks_reused"] >= 1 and s_res["chunks_reused"] + s_res["chunks_computed"] == n_chunks
    t_ref, s_ref, h_ref = sweep.run(spec_file, out=tmp_path / "uninterrupted", log=None)
    assert s_ref["chunks_reused"] == 0
    _assert_same_results(t_res, h_res, t_ref, h_ref)
    assert (
        sweep.read_csv(out / "metrics.csv").keys() == sweep.read_csv(tmp_path / "uninterrupted" / "metrics.csv").keys()
    )
    assert (out / "metrics.csv").read_text() == (tmp_path / "uninterrupted" / "metrics.csv").read_text()
