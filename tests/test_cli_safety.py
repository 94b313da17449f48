"""`jaxclear run` under real use: a sweep too large for the variant limit or the disk is refused
before anything is built or written, Ctrl-C keeps the finished chunks and says so, and the
example specs ship with the package (run by name from any folder, listed, copied, in the wheel)."""

import collections
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_spec import TINY_TOML

from jaxclear import cli, store, sweep
from jaxclear import spec as specmod

ROOT = Path(__file__).resolve().parents[1]
# test_spec's tiny spec (3 variants × 500 steps, 2 chunks of 2): its compiled chunk is shared.
HUGE_AXIS = '"joint.clearance_m" = { linspace = [0.02e-3, 0.5e-3, 10000000] }'
Usage = collections.namedtuple("Usage", "total used free")


def _spec(tmp_path, text=TINY_TOML, name="tiny.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


def _one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jaxclear: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_too_many_variants_refused_from_the_axes(tmp_path, capsys, monkeypatch):
    """An axis of 10⁷ values is counted from its arguments, never expanded, and refused above
    the default limit (the service's) in about the time the CLI takes to start."""

    def expanded(*a, **k):
        raise AssertionError("the axes were expanded")

    monkeypatch.setattr(specmod, "axes_values", expanded)
    f = _spec(tmp_path, TINY_TOML.replace('"joint.clearance_m" = { values = [0.5e-3, 0.1e-3, 0.02e-3] }', HUGE_AXIS))
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert cli.main(["run", str(f), "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 2.0
    line = _one_error_line(capsys.readouterr().err)
    assert "10000000 variants" in line and "axes.joint.clearance_m: 10000000" in line
    assert f"--max-variants = {specmod.MAX_VARIANTS} (the default)" in line and "--max-variants 10000000" in line
    assert not out.exists()
    # a product of axes and random samples, against a limit given on the command line
    f2 = _spec(
        tmp_path,
        TINY_TOML.replace("[axes]", '[sampling]\nn = 4\n[axes]\n"laws.restitution" = { uniform = [0.5, 0.9] }'),
        "two.toml",
    )
    assert cli.main(["run", str(f2), "--out", str(out), "--max-variants", "11"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "12 variants (axes.joint.clearance_m: 3 × sampling.n: 4)" in line and "--max-variants = 11;" in line
    assert cli.main(["run", str(f), "--max-variants", "0"]) == 2
    assert "--max-variants = 0: expected an integer >= 1" in _one_error_line(capsys.readouterr().err)
    from jaxclear import service

    assert service.Limits().max_variants == specmod.MAX_VARIANTS == 100_000  # one limit for CLI and service


def test_store_beyond_free_space_refused_unless_yes_then_ctrl_c_keeps_chunks(tmp_path, capsys, monkeypatch):
    """The store estimate is checked against the output folder's free space (both numbers named,
    nothing written) unless --yes; a KeyboardInterrupt after the first chunk exits 130 with one
    line, the chunk kept; the rerun resumes it and needs only the rest of the store's space."""
    f = _spec(tmp_path)
    out = tmp_path / "runs" / "tiny"
    est = sweep.store_estimate(specmod.load(f), sweep.plan(specmod.load(f)))["store_bytes"]
    assert est == 3 * 50 * 6 * 8 + 3 * (25 + 1) * 8  # 3 variants × 50 saves × 6 channels, + metrics
    free = {"bytes": est - 1}
    seen = []

    def usage(path):
        seen.append(Path(path))
        return Usage(10**12, 0, free["bytes"])

    monkeypatch.setattr(shutil, "disk_usage", usage)
    assert cli.main(["run", str(f), "--out", str(out), "--quiet"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"({est} bytes, uncompressed estimate: 3 variants" in line and f"({est - 1} bytes) free" in line
    assert "--yes" in line and str(tmp_path) in line
    assert seen == [tmp_path] and not out.exists()  # the nearest existing folder; nothing written

    calls, real = [], sweep.compute_chunk

    def interrupted_on_second_chunk(*a, **k):
        calls.append(a[2])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(sweep, "compute_chunk", interrupted_on_second_chunk)
    handler = signal.getsignal(signal.SIGINT)
    assert cli.main(["run", str(f), "--out", str(out), "--quiet", "--yes"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted: 1 of 2 chunks kept, rerun the same command to resume", err
    assert store.done_flags(store.open(out, mode="r")).tolist() == [True, False]
    assert signal.getsignal(signal.SIGINT) is handler  # restored for the caller

    monkeypatch.setattr(sweep, "compute_chunk", real)
    free["bytes"] = int(0.6 * est)  # the kept chunk's share of the store is not needed again
    assert cli.main(["run", str(f), "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "resuming" in cap.err and "1 of 2 chunks (2 variants) reused" in cap.err, cap.err
    res = sweep.load(out)
    assert res.complete and np.isfinite(res.metrics["peak_contact_force_N"]).all()
    assert res.summary["chunks_reused"] == 1 and res.summary["chunks_computed"] == 1


_SLOW_AFTER_FIRST_CHUNK = """
import sys, time
from jaxclear import cli, store
real = store.mark_done
def mark_done(g, ci):
    real(g, ci)
    open(sys.argv[1], "w").close()  # the test sends SIGINT now
    time.sleep(60)  # the next chunk waits: the signal lands between chunks, deterministically
store.mark_done = mark_done
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.slow  # a CLI process started (JAX import, chunk loaded from the compile cache) and interrupted: ~10 s
def test_sigint_in_a_real_process_keeps_the_finished_chunk(tmp_path):
    """SIGINT to a `jaxclear run` process after its first chunk's flag: exit status 130, one line
    on stderr and no traceback, the chunk in the store."""
    f = _spec(tmp_path)
    out, ready = tmp_path / "out", tmp_path / "ready"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_AFTER_FIRST_CHUNK, str(ready), "run", str(f), "--out", str(out), "--quiet"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no chunk finished in 120 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted: 1 of 2 chunks kept, rerun the same command to resume"
    assert store.done_flags(store.open(out, mode="r")).tolist() == [True, False]


def test_examples_listed_and_run_by_name_from_any_folder(tmp_path, capsys, monkeypatch):
    names = sorted(p.stem for p in specmod.EXAMPLES_DIR.glob("*.toml"))
    assert "default" in names and len(names) >= 20
    assert cli.main(["examples"]) == 0
    out = capsys.readouterr().out
    ex = specmod.examples()
    for n in names:
        assert f"{n} " in out and ex[n] and ex[n] in out and "\n" not in ex[n]
    assert ex["default"] == "slider-crank: clearance 0.02–0.5 mm × 1000–5000 rpm × wear 0–50 µm"

    monkeypatch.chdir(tmp_path)  # no sweeps/ here
    shipped = specmod.EXAMPLES_DIR / "default.toml"
    assert specmod.spec_file(None) == shipped and specmod.spec_file("default") == shipped
    assert specmod.spec_file("default.toml") == shipped and specmod.spec_file("sweeps/default.toml") == shipped
    # `jaxclear run` with no argument and `jaxclear run default` read the shipped spec (the limit
    # refuses it at once, after reading its axes)
    for argv in (["run"], ["run", "default"], ["run", "sweeps/default.toml"]):
        assert cli.main([*argv, "--max-variants", "1"]) == 2
        assert "200 variants (axes.joint.clearance_m: 10 × " in _one_error_line(capsys.readouterr().err)
    assert cli.main(["run", "no_such_spec"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "'no_such_spec' does not exist" in line and "default, flores_slider_crank" in line
    (tmp_path / "default").mkdir()  # a folder of that name is not the example
    with pytest.raises(specmod.SpecError):
        specmod.spec_file("default/")
    assert not Path("runs").exists()


def test_examples_copy(tmp_path, capsys):
    src = specmod.EXAMPLES_DIR / "flores_slider_crank.toml"
    assert cli.main(["examples", "--copy", "flores_slider_crank", str(tmp_path / "mine.toml")]) == 0
    assert (tmp_path / "mine.toml").read_bytes() == src.read_bytes()
    assert capsys.readouterr().out.strip() == str(tmp_path / "mine.toml")
    assert cli.main(["examples", "--copy", "flores_slider_crank.toml", str(tmp_path)]) == 0  # into a folder
    assert (tmp_path / "flores_slider_crank.toml").read_bytes() == src.read_bytes()
    capsys.readouterr()
    assert cli.main(["examples", "--copy", "flores_slider_crank", str(tmp_path / "mine.toml")]) == 2
    assert "exists already; pass --force" in _one_error_line(capsys.readouterr().err)
    (tmp_path / "mine.toml").write_text("edited")
    assert cli.main(["examples", "--copy", "flores_slider_crank", str(tmp_path / "mine.toml"), "--force"]) == 0
    assert (tmp_path / "mine.toml").read_bytes() == src.read_bytes()
    assert cli.main(["examples", "--copy", "nope"]) == 2
    assert "--copy 'nope': no example spec of that name; allowed: all, " in _one_error_line(capsys.readouterr().err)
    assert cli.main(["examples", str(tmp_path)]) == 2
    _one_error_line(capsys.readouterr().err)
    assert cli.main(["examples", "--copy", "all", str(tmp_path / "all")]) == 0
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == sorted(
        p.name for p in specmod.EXAMPLES_DIR.glob("*.toml")
    )


def test_sweeps_folder_is_the_shipped_examples():
    """sweeps/ of the repository (README, docs, tests, notebooks) is the package's example folder:
    one source of truth.  A checkout that made copies instead fails here as soon as they differ."""
    repo = ROOT / "sweeps"
    assert specmod.EXAMPLES_DIR == ROOT / "jaxclear" / "examples"
    assert sorted(p.name for p in repo.glob("*.toml")) == sorted(p.name for p in specmod.EXAMPLES_DIR.glob("*.toml"))
    for p in specmod.EXAMPLES_DIR.glob("*.toml"):
        assert (repo / p.name).read_bytes() == p.read_bytes(), p.name


@pytest.mark.slow  # a wheel built and installed into a folder, then the CLI started from it: ~5 s on 2 cores
def test_wheel_ships_the_examples(tmp_path):
    """A non-editable install has the examples: build a wheel from a copy of the sources, check
    its TOMLs, install it into a folder and list them from there (away from the repository)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "jaxclear", src / "jaxclear", ignore=shutil.ignore_patterns("__pycache__"))
    whl = tmp_path / "whl"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(whl), str(src)], check=True)
    (wheel,) = whl.glob("jaxclear-*.whl")
    with zipfile.ZipFile(wheel) as z:
        inside = {n: z.read(n) for n in z.namelist() if n.startswith("jaxclear/examples/")}
    shipped = {f"jaxclear/examples/{p.name}": p.read_bytes() for p in specmod.EXAMPLES_DIR.glob("*.toml")}
    assert inside == shipped
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True)
    r = subprocess.run(
        [sys.executable, "-P", "-m", "jaxclear.cli", "examples"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(target), JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "default " in r.stdout and f"example specs in {target / 'jaxclear' / 'examples'}" in r.stdout
