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
    table, summary, _ = sweep.run(SMALL, out=tmp_path / "r", log=None, ticks=True, compile_cache=False,
                                  progress=calls.append, stage=lambda n, **i: stages.append((n, i)))
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
    return subprocess.run([sys.executable, "-m", "jaxclear.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def test_version_and_every_subcommand_help_has_an_example_and_documented_options():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"jaxclear {jaxclear.__version__}"
    from jaxclear import cli
    import argparse
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
    assert set(sub.choices) >= {"plan", "run", "show", "export", "serve", "submit", "status", "cancel",
                                "sensitivity", "identify"}
    for name, p in sub.choices.items():
        assert "example:" in (p.epilog or "") and f"jaxclear {name}" in p.epilog, name
        for a in p._actions:
            if a.option_strings and a.dest != "help":
                assert a.help, f"{name} {a.option_strings}"


@pytest.mark.slow
def test_cli_uses_the_requested_cpu_devices(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nname = "cores"\n[integrator]\ndt_s = 2e-6\nt_end_s = 5e-4\nchunk_size = 3\n'
                    '[outputs]\nplots = false\n[axes]\n"joint.clearance_m" = { values = [5e-4, 1e-4, 2e-5] }\n')
    r = _cli("run", str(spec), "--out", str(tmp_path / "o"), "--cpu-devices", "3", "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["device_count"] == 3 and s["executed_chunk_size"] == 3
    assert s["cpu_devices"]["requested"] == 3 and s["cpu_devices"]["source"] == "--cpu-devices"
