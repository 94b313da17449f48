"""What a user sees while a sweep runs: stages, progress within a chunk, reruns, --version,
--help, the CPU device choice (small sizes)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxclear
from jaxclear import sweep

ROOT = Path(__file__).resolve().parents[1]

SMALL = {
    "sweep": {"name": "small"},
    "integrator": {"dt_s": 2e-6, "t_end_s": 1.0e-3, "save_every": 10, "chunk_size": 2},
    "outputs": {"plots": False},
    "axes": {"joint.clearance_m": {"values": [0.5e-3, 0.1e-3, 0.02e-3]}},
}


def test_progress_moves_within_a_chunk_and_stages_come_in_order(tmp_path):
    calls, stages = [], []
    table, summary, _ = sweep.run(
        SMALL,
        out=tmp_path / "r",
        log=None,
        ticks=True,
        compile_cache=False,
        progress=calls.append,
        stage=lambda n, **i: stages.append((n, i)),
    )
    names = [n for n, _ in stages]
    assert names == ["compiling", "running", "plotting", "done"]
    assert stages[1][1]["compile_s"] == pytest.approx(summary["compile_s"])
    # 2 chunks of (2, 1) variants, 50 save blocks each: fractional reports inside each chunk
    assert len(calls) > 4 and any(0 < c < 1 for c in calls)
    assert sum(calls) == pytest.approx(3.0)
    cs = np.cumsum(calls)
    assert np.all(cs <= 3.0 + 1e-9)
    assert np.any((cs > 1.75) & (cs < 2.0 - 1e-9))  # the first chunk reported ~all of itself while running


def test_rerun_of_a_finished_directory_keeps_the_computing_runs_figures(tmp_path):
    out = tmp_path / "r"
    _, first, _ = sweep.run(SMALL, out=out, log=None)
    _, again, _ = sweep.run(SMALL, out=out, log=None)
    on_disk = json.loads((out / "summary.json").read_text())
    for k in ("wall_s", "compile_s", "run_s", "variant_steps_per_s", "chunks_computed"):
        assert on_disk[k] == first[k], k
    assert first["chunks_computed"] == 2 and on_disk["rerun"]["chunks_computed"] == 0
    assert on_disk["rerun"]["wall_s"] != first["wall_s"] and again["rerun"] == on_disk["rerun"]


def _cli(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "jaxclear.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def test_version_and_every_subcommand_help_has_an_example_and_documented_options(capsys):
    import argparse

    from jaxclear import cli

    with pytest.raises(SystemExit) as ei:  # argparse's version action exits 0 after printing
        cli.main(["--version"])
    assert ei.value.code == 0 and capsys.readouterr().out.strip() == f"jaxclear {jaxclear.__version__}"

    ap_calls = {}
    orig = argparse.ArgumentParser.parse_args

    def grab(self, argv=None, namespace=None):  # capture the parser main() builds
        ap_calls["p"] = self
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = grab
    try:
        with pytest.raises(SystemExit):
            cli.main(["--help"])
    finally:
        argparse.ArgumentParser.parse_args = orig
    sub = next(a for a in ap_calls["p"]._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) >= {
        "plan",
        "run",
        "show",
        "export",
        "serve",
        "submit",
        "status",
        "cancel",
        "sensitivity",
        "identify",
    }
    for name, p in sub.choices.items():
        assert "example:" in (p.epilog or "") and f"jaxclear {name}" in p.epilog, name
        for a in p._actions:
            if a.option_strings and a.dest != "help":
                assert a.help, f"{name} {a.option_strings}"


@pytest.mark.slow
def test_cli_uses_the_requested_cpu_devices(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[sweep]\nname = "cores"\n[integrator]\ndt_s = 2e-6\nt_end_s = 5e-4\nchunk_size = 3\n'
        '[outputs]\nplots = false\n[axes]\n"joint.clearance_m" = { values = [5e-4, 1e-4, 2e-5] }\n'
    )
    r = _cli("run", str(spec), "--out", str(tmp_path / "o"), "--cpu-devices", "3", "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["device_count"] == 3 and s["executed_chunk_size"] == 3
    assert s["cpu_devices"]["requested"] == 3 and s["cpu_devices"]["source"] == "--cpu-devices"


# ----------------------------------------------------------------------------- questionable results

FLORES = ROOT / "sweeps" / "flores_slider_crank.toml"


def test_flores_warns_deep_penetration_for_the_smallest_clearance_only(tmp_path):
    # Flores et al. 2008 as shipped (two revolutions, c = 0.5, 0.25, 0.1, 0.02 mm): the steady window
    # is the last revolution, and only c = 0.02 mm goes deeper than PENETRATION_WARN_FRACTION·c
    from jaxclear import metrics

    out = tmp_path / "flores"
    table, summary, _ = sweep.run(FLORES, out=out, overrides=("outputs.plots=false",), log=None)
    frac = table["max_penetration_fraction"]
    np.testing.assert_allclose(frac, table["max_penetration_m"] / table["clearance_m"], rtol=1e-12)
    assert np.all(frac[:3] < metrics.PENETRATION_WARN_FRACTION) and frac[3] > metrics.PENETRATION_WARN_FRACTION
    assert np.all(table["steady_window_fraction"] < 0.6)  # the last of two revolutions
    assert [w["code"] for w in summary["warnings"]] == ["deep_penetration"]
    w = summary["warnings"][0]
    assert w["variants"] == [3] and w["count"] == 1
    assert "3 (clearance_m = 2e-05, δ/c = " in w["message"] and "0.5·c" in w["message"]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["warnings"] == summary["warnings"]


def test_short_run_warns_that_the_steady_window_is_the_whole_run_in_the_cli_log(tmp_path, capsys):
    # t_end = 2 ms at 5000 rpm (a revolution takes 12 ms): the window of the last revolution
    # would start before t = 0, so the *_steady columns are the whole-run ones.  The CLI runs in
    # this process: what it prints is the subject, not the process.
    import jax

    from jaxclear import cli

    out = tmp_path / "short"
    jax.devices()  # backends up first: the in-process `run` must not re-split this session's CPU
    rc = cli.main(
        ["run", str(FLORES), "--out", str(out), "--set", "integrator.t_end_s=0.002", "--set", "outputs.plots=false"]
    )
    r = capsys.readouterr()
    assert rc == 0, r.err
    lines = [ln for ln in r.err.splitlines() if ln.startswith("warning: steady window = the whole run")]
    assert len(lines) == 1 and "in 4 of 4 variants: 0 (clearance_m = 0.0005); 1 (" in lines[0], r.err
    assert "integrator.steady_revolutions" in lines[0]
    assert "warning steady_window_is_whole_run: 4 variant(s)" in r.out
    s = json.loads((out / "summary.json").read_text())
    steady = next(w for w in s["warnings"] if w["code"] == "steady_window_is_whole_run")
    assert steady["variants"] == [0, 1, 2, 3] and steady["count"] == 4
    m = sweep.read_csv(out / "metrics.csv")
    assert np.all(m["steady_window_fraction"] == 1.0)
    np.testing.assert_array_equal(m["peak_contact_force_steady_N"], m["peak_contact_force_N"])
    # the deepest first impact of c = 0.02 mm comes within these 2 ms: warned here too
    assert any(w["code"] == "deep_penetration" and w["variants"] == [3] for w in s["warnings"])
    # show repeats them from summary.json
    assert cli.main(["show", str(out)]) == 0
    assert "warning: steady window = the whole run in 4 of 4" in capsys.readouterr().out


def test_max_penetration_is_the_maximum_over_every_step(tmp_path):
    # every step saved: the accumulator's running maximum equals the saved channel's maximum
    spec = dict(
        SMALL,
        integrator=dict(SMALL["integrator"], save_every=1),
        outputs={"plots": False, "histories": ["penetration_m"]},
    )
    table, _, hists = sweep.run(spec, log=None)
    exact = hists["penetration_m"].max(axis=(1, 2))
    assert np.all(exact > 0)
    np.testing.assert_array_equal(table["max_penetration_m"], exact)


def test_table_warnings_threshold_cap_and_non_finite():
    from jaxclear import metrics

    n = 25
    frac = np.full(n, 0.2)
    frac[[4, 7]] = [metrics.PENETRATION_WARN_FRACTION, np.nextafter(metrics.PENETRATION_WARN_FRACTION, 1.0)]
    table = {
        "clearance_m": np.linspace(1e-5, 1e-4, n),
        "steady_window_fraction": np.ones(n),
        "max_penetration_fraction": frac,
        "finite": np.arange(n) != 9,
    }
    ws = {w["code"]: w for w in metrics.table_warnings(table, ["clearance_m"])}
    assert list(ws) == ["non_finite", "steady_window_is_whole_run", "deep_penetration"]
    assert ws["deep_penetration"]["variants"] == [7]  # exactly 0.5·c is not above it
    assert ws["non_finite"]["variants"] == [9] and "9 (clearance_m = " in ws["non_finite"]["message"]
    st = ws["steady_window_is_whole_run"]
    assert st["count"] == n and st["variants"] == list(range(n))
    listed = st["message"].split(": ", 1)[1]
    assert listed.count("(clearance_m = ") == metrics.WARN_LISTED and f"… and {n - metrics.WARN_LISTED} more" in listed
    table["steady_window_fraction"] = np.full(n, 0.5)
    table["max_penetration_fraction"] = np.full(n, 0.1)
    table["finite"] = np.ones(n, bool)
    assert metrics.table_warnings(table, ["clearance_m"]) == []
    assert metrics.table_warnings({"impacts": np.zeros(3)}) == []  # a mechanism without the columns


def test_a_spec_error_is_reported_before_the_heavy_imports(tmp_path):
    # The time to the first error message is the import of jax (~1 s); the store (zarr), the
    # plots (matplotlib), the service and the cluster engine load only when a run needs them.
    bad = tmp_path / "bad.toml"
    bad.write_text("[joint]\nclearance_m = -1\n")
    code = (
        "import sys\nfrom jaxclear import cli\n"
        f"try:\n    rc = cli.main(['run', {str(bad)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        "except SystemExit as e:\n    rc = e.code\n"
        "print('exit', rc)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'zarr', 'matplotlib', 'dask', 'xarray'}),"
        " sorted(m for m in sys.modules if m in ('jaxclear.service', 'jaxclear.plots', 'jaxclear.cluster')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "joint.clearance_m = -1" in r.stderr, r.stderr
    assert r.stdout.splitlines()[-2:] == ["exit 2", "[] []"], r.stdout
    assert not (tmp_path / "out").exists()
