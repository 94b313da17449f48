"""The tutorial notebooks (notebooks/*.ipynb) run top to bottom at the small size.

Each notebook is executed with nbclient (the three concurrently) in a fresh kernel of this interpreter (a kernelspec
written into a temporary JUPYTER_PATH, so no user-installed "python3" kernel of another Python is
picked up), with matplotlib's Agg backend, JAXCLEAR_NB_SIZE=small and a fresh JAX compile cache.
A failing cell fails the test with the cell's traceback. The stored notebooks must carry no
outputs (they are the source, outputs are regenerated), and no output of the executed notebook
may exceed 1 MB.
"""

import asyncio
import json
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
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (jaxclear test)", "language": "python"}))
    env = {
        "JUPYTER_PATH": str(root),
        "MPLBACKEND": "Agg",
        "JAXCLEAR_NB_SIZE": "small",
        "JAXCLEAR_CACHE_DIR": str(tmp_path_factory.mktemp("xla_cache")),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    return env


async def _execute(name):
    """Execute one notebook in a fresh kernel; (name, executed notebook or None, error text, wall s)."""
    nb = nbformat.read(NB_DIR / name, as_version=4)
    # one cell appended in memory: which interpreter the kernel runs
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.perf_counter()
    try:
        await client.async_execute()
    except nbclient.exceptions.CellExecutionError as e:  # the failing cell and its traceback
        return name, None, str(e), time.perf_counter() - t0
    return name, nb, "", time.perf_counter() - t0


def test_notebooks_run_top_to_bottom(kernel_env, monkeypatch):
    """All three at once, one kernel each: JAX compiles on one core, so two cores run two
    notebooks' compiles side by side (one test, so that pytest-xdist does not run them twice)."""
    for k, v in kernel_env.items():
        monkeypatch.setenv(k, v)

    async def run_all():
        return await asyncio.gather(*(_execute(n) for n in NOTEBOOKS))

    t0 = time.perf_counter()
    results = asyncio.run(run_all())
    print(f"\nnotebooks executed in {time.perf_counter() - t0:.1f} s together: " +
          ", ".join(f"{n} {w:.1f} s" for n, _, _, w in results))
    failed = [f"{n}: a cell failed:\n{err}" for n, nb, err, _ in results if nb is None]
    assert not failed, "\n\n".join(failed)
    for name, nb, _, _ in results:
        probe = nb.cells.pop()
        assert Path(probe.outputs[0]["text"].strip()).resolve() == Path(sys.executable).resolve()
        ran = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count is not None for c in ran), name
        for i, c in enumerate(ran):
            for o in c.outputs:
                assert o.output_type != "error", f"{name}: code cell {i}: {o.get('ename')}: {o.get('evalue')}"
                assert _output_bytes(o) < MAX_OUTPUT_BYTES, f"{name}: code cell {i} has an output over 1 MB"
