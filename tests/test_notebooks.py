"""The tutorial notebooks (notebooks/*.ipynb) run top to bottom at the small size.

Each notebook is executed with nbclient (one test each) in a fresh kernel of this interpreter (a kernelspec
written into a temporary JUPYTER_PATH, so no user-installed "python3" kernel of another Python is
picked up), with matplotlib's Agg backend, JAXCLEAR_NB_SIZE=small and the session's JAX compile cache.
A failing cell fails the test with the cell's traceback. The stored notebooks must carry no
outputs (they are the source, outputs are regenerated), and no output of the executed notebook
may exceed 1 MB.  A check cell appended in memory to each notebook reports what it computed
(``CHECKS``), and the test asserts the physics and numerics the notebook's text claims: the
figures drawn, ideal reactions ∝ ω², the contact-region counts of the lobed bore, the orders of
the depth error, autodiff against finite differences, the identified parameters.
"""

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = ["01_amplification_factors.ipynb", "02_wear_profiles.ipynb", "03_sensitivity_identification.ipynb"]
MAX_OUTPUT_BYTES = 1_000_000


# Appended to each notebook (in memory): one printed JSON line of what the notebook computed.
_FIGS = """[sum(len(a.lines) + len(a.collections) + len(a.images) + len(a.patches) for a in plt.figure(n).axes)
 for n in plt.get_fignums()]"""
CHECKS = {
    "01_amplification_factors.ipynb": """
_speed = np.asarray(table["crank_speed_rpm"])
_ideal = np.asarray(table["ideal_peak_reaction_steady_N"])
_groups = [(_speed == v) & (rest == e) for v in S["speeds_rpm"] for e in S["restitutions"]]
_check = {
    "figures": %s,
    "n_variants": len(table["finite"]), "all_finite": bool(np.all(table["finite"])),
    "failed": list(summary["failed_variants"]),
    "force_ratio": [float(F[g][np.argmax(c[g])] / F[g][np.argmin(c[g])]) for g in _groups],
    "ideal_spread": {str(v): float(np.ptp(_ideal[_speed == v]) / np.max(_ideal[_speed == v])) for v in S["speeds_rpm"]},
    "ideal_speed_ratio": float(_ideal[_speed == max(S["speeds_rpm"])][0] / _ideal[_speed == min(S["speeds_rpm"])][0]),
    "speed_ratio_sq": (max(S["speeds_rpm"]) / min(S["speeds_rpm"])) ** 2,
}"""
    % _FIGS,
    "02_wear_profiles.ipynb": """
_check = {
    "figures": %s,
    "lobed_regions": [int(detect(lobed, jnp.asarray([e, 0.0]), R_J, max_regions=4, refine=True).n_regions)
                      for e in (90e-6, 115e-6, 140e-6)],
    "errors": {k: [float(x) for x in v] for k, v in errors.items()},
    "orders": {k: float(-np.polyfit(np.log(S["accuracy_n"]), np.log(e), 1)[0]) for k, e in errors.items()},
    "sims": {str(n): [float(t["peak_contact_force_N"][0]), int(t["max_contact_regions"][0]), bool(t["finite"][0])]
             for n, (t, _, _) in sims.items()},
    "wear_volume_m3": np.asarray(ev["metrics"]["worn_volume_m3"]).T.tolist(),
    "wear_k": ev["inputs"]["coefficient_m2_per_N"].tolist(),
    "wear_depth_range_m": [float(np.ptp(ev["depth_m"][-1, j, 0])) for j in range(ev["depth_m"].shape[1])],
}"""
    % _FIGS,
    "03_sensitivity_identification.ipynb": """
_ad, _fd = fd_and_ad("smooth_peak_contact_force_N")
_check = {
    "figures": %s,
    "all_finite": bool(res["finite"].all()),
    "ad_fd_rel": {k: min(abs(_fd[(k, r)] - _ad[k]) / abs(_ad[k]) for r in S["fd_steps"]) for k in KEYS},
    "fit_rel_error": {k: p["value"] / TRUE[k] - 1 for k, p in fit["parameters"].items()},
    "written": sorted(p.name for p in out.iterdir()),
    "wear_rel_error": {k: p["value"] / WEAR_TRUTH[k] - 1 for k, p in wfit["parameters"].items()},
    "wear_loss": wfit["loss"], "wear_screened_loss": wfit["screen"]["kept_losses"][0],
}"""
    % _FIGS,
}
CHECK_TAIL = "\nimport json as _json\nprint('NBCHECK ' + _json.dumps(_check))\n"


def _checked(nb, name):
    """The JSON the appended check cell printed."""
    out = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    line = [ln for ln in out.splitlines() if ln.startswith("NBCHECK ")]
    assert line, f"{name}: the check cell printed nothing: {out!r}"
    return json.loads(line[0][len("NBCHECK ") :])


def _n_subplots_calls(name):
    nb = nbformat.read(NB_DIR / name, as_version=4)
    return sum(c.source.count("plt.subplots(") for c in nb.cells if c.cell_type == "code")


def _output_bytes(output):
    return len(json.dumps(output, default=str).encode())


def test_the_three_notebooks_are_there():
    assert sorted(p.name for p in NB_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_stored_notebook_has_no_outputs(name):
    nb = nbformat.read(NB_DIR / name, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, name
    for i, c in enumerate(code):
        assert not c.get("outputs") and c.get("execution_count") is None, f"{name}: code cell {i} has stored outputs"
    # the size knob is read in the first code cell
    assert "JAXCLEAR_NB_SIZE" in code[0].source and "small" in code[0].source, name


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A python3 kernelspec running this interpreter, found first on JUPYTER_PATH."""
    root = tmp_path_factory.mktemp("jupyter")
    kdir = root / "kernels" / "python3"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (jaxclear test)",
                "language": "python",
            }
        )
    )
    env = {
        "JUPYTER_PATH": str(root),
        "MPLBACKEND": "Agg",
        "JAXCLEAR_NB_SIZE": "small",
        "JAXCLEAR_CACHE_DIR": os.environ["JAXCLEAR_CACHE_DIR"],  # the session's cache (conftest.py)
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    return env


async def _execute(name):
    """Execute one notebook in a fresh kernel; (name, executed notebook or None, error text, wall s)."""
    nb = nbformat.read(NB_DIR / name, as_version=4)
    # two cells appended in memory: what the notebook computed, which interpreter the kernel runs
    nb.cells.append(nbformat.v4.new_code_cell(CHECKS[name] + CHECK_TAIL))
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NB_DIR)}}
    )
    t0 = time.perf_counter()
    try:
        await client.async_execute()
    except nbclient.exceptions.CellExecutionError as e:  # the failing cell and its traceback
        return name, None, str(e), time.perf_counter() - t0
    return name, nb, "", time.perf_counter() - t0


def _claims_01(c1):
    assert c1["n_variants"] == 16 and c1["all_finite"] and c1["failed"] == []
    # a larger clearance gives a larger steady peak contact force at every speed and restitution
    assert all(r > 1.0 for r in c1["force_ratio"]), c1["force_ratio"]
    # the ideal (clearance-free) reaction ignores clearance and restitution, and is inertial:
    # ∝ ω² (gravity, the only other load, is why it is not exact: measured 5e-6 relative)
    assert all(v < 1e-12 for v in c1["ideal_spread"].values()), c1["ideal_spread"]
    assert c1["ideal_speed_ratio"] == pytest.approx(c1["speed_ratio_sq"], rel=1e-3), c1


def _claims_02(c2):
    # the lobed bore (8-lobe wear): one region, then three, then one merged region (the text's claim)
    assert c2["lobed_regions"] == [1, 3, 1], c2["lobed_regions"]
    raw, ref = c2["errors"]["raw deepest point"], c2["errors"]["sub-grid refinement"]
    assert all(b < a for a, b in zip(raw, ref)), c2["errors"]
    # the deepest grid point misses the true deepest point by O(h): depth error O(h²); the
    # parabola through three points removes that term
    assert 1.5 < c2["orders"]["raw deepest point"] < 2.5, c2["orders"]
    assert c2["orders"]["sub-grid refinement"] > c2["orders"]["raw deepest point"] + 0.7, c2["orders"]
    assert all(f > 0 and r >= 1 and ok for f, r, ok in c2["sims"].values()), c2["sims"]
    # the evolved bushing: the worn volume grows at every update, faster for the larger k_w, and the
    # bore is no longer round (the depth varies around it by more than 1 µm)
    vol, k = c2["wear_volume_m3"], c2["wear_k"]
    assert all(all(b > a for a, b in zip(v, v[1:])) for v in vol), vol
    assert (vol[0][-1] < vol[1][-1]) == (k[0] < k[1]), (vol, k)
    assert all(r > 1e-6 for r in c2["wear_depth_range_m"]), c2["wear_depth_range_m"]


def _claims_03(c3):
    assert c3["all_finite"]
    # forward-mode derivative of the smooth peak vs the best of the central differences: < 1e-4
    # relative, as the text and README claim (measured <= 1.5e-6)
    assert all(e < 1e-4 for e in c3["ad_fd_rel"].values()), c3["ad_fd_rel"]
    assert all(abs(e) < 0.02 for e in c3["fit_rel_error"].values()), c3["fit_rel_error"]
    assert c3["written"] == ["fit.png", "identified.json", "loss_history.csv"], c3["written"]
    # clearance + wear at the small size (128 candidates, 2 LM starts × 8 iterations, starts
    # within ±30 %): measured errors −3.3 %, +13.6 %, −3.7 %; LM improves on the screening
    w = c3["wear_rel_error"]
    assert (
        abs(w["joint.clearance_m"]) < 0.05
        and abs(w["profile.fourier_a2_m"]) < 0.2
        and abs(w["profile.fourier_b2_m"]) < 0.2
    ), w
    assert c3["wear_loss"] < c3["wear_screened_loss"], c3


CLAIMS = {
    "01_amplification_factors.ipynb": _claims_01,
    "02_wear_profiles.ipynb": _claims_02,
    "03_sensitivity_identification.ipynb": _claims_03,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, kernel_env, monkeypatch):
    """One notebook in a fresh kernel; a test each, so that pytest-xdist spreads the three over
    its workers next to the other slow tests instead of one test holding both cores."""
    for k, v in kernel_env.items():
        monkeypatch.setenv(k, v)
    _, nb, err, wall = asyncio.run(_execute(name))
    print(f"\n{name} executed in {wall:.1f} s")
    assert nb is not None, f"{name}: a cell failed:\n{err}"
    probe = nb.cells.pop()
    assert Path(probe.outputs[0]["text"].strip()).resolve() == Path(sys.executable).resolve()
    check = _checked(nb, name)
    nb.cells.pop()
    ran = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in ran), name
    for i, c in enumerate(ran):
        for o in c.outputs:
            assert o.output_type != "error", f"{name}: code cell {i}: {o.get('ename')}: {o.get('evalue')}"
            assert _output_bytes(o) < MAX_OUTPUT_BYTES, f"{name}: code cell {i} has an output over 1 MB"
    # every figure the notebook makes exists and has something drawn in it
    figs = check["figures"]
    assert len(figs) == _n_subplots_calls(name) and all(n > 0 for n in figs), (name, figs)
    print(json.dumps(check, indent=1))
    CLAIMS[name](check)
