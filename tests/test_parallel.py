"""Devices, hosts and the compile cache: two forced host devices and a two-process
jax.distributed run on localhost give the results of one device; a non-finite variant is
flagged without touching its neighbours; chunk sharing and automatic chunk sizes."""

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxclear import parallel, store, sweep

TOML = """
[sweep]
name = "par"
[integrator]
dt_s = 2e-6
t_end_s = 1.0e-3
save_every = 10
chunk_size = 3
[outputs]
plots = false
[axes]
"joint.clearance_m" = { values = [0.5e-3, 0.1e-3, 0.02e-3] }
"model.crank_speed_rpm" = { values = [3000.0, 5000.0, 4000.0] }
"""


def _env(devices=1):
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "").replace("--xla_force_host_platform_device_count", "--_unused")
    env["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count={devices}").strip()
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        env.pop(k, None)
    return env


def _cli(args, devices=1, cache=None):
    cache_args = ["--cache-dir", str(cache)] if cache else ["--no-compile-cache"]
    return subprocess.Popen(
        [sys.executable, "-m", "jaxclear.cli", "run", *map(str, args), "--quiet", *cache_args],
        env=_env(devices),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(p, timeout=400):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    return out


def _close(a, b, key):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc":
        # same per-variant program; allow last-bit differences from a differently vectorised loop
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=0, equal_nan=True, err_msg=key)
    else:
        np.testing.assert_array_equal(a, b, err_msg=key)


def _compare(r1, r2):
    assert list(r1.metrics) == list(r2.metrics)
    for k in r1.metrics:
        _close(r1.metrics[k], r2.metrics[k], k)
    for k in r1.histories:
        _close(r1.histories[k], r2.histories[k], k)


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("spec") / "par.toml"
    p.write_text(TOML)
    return p


@pytest.fixture(scope="module")
def single(spec_file, tmp_path_factory):
    """The reference: one process, one device (9 variants, 3 chunks of 3), run in this process
    (its chunk function then serves the non-finite test too)."""
    assert jax.local_device_count() == 1
    out = tmp_path_factory.mktemp("one") / "run"
    sweep.run(spec_file, out=out, log=None)
    return sweep.load(out)


@pytest.mark.slow
def test_two_host_devices_give_the_results_of_one(spec_file, single, tmp_path):
    out = tmp_path / "two"
    _wait(_cli([spec_file, "--out", out], devices=2))
    two = sweep.load(out)
    s = json.loads((out / "summary.json").read_text())
    assert s["local_device_count"] == 2 and s["device_count"] == 2
    assert s["executed_chunk_size"] == 4  # chunks of 3 padded to a multiple of 2 devices
    assert two.complete and two.metrics["finite"].all()
    _compare(single, two)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_distributed_run_fills_one_store(spec_file, single, tmp_path):
    out = tmp_path / "dist"
    port = _free_port()
    procs = [
        _cli([spec_file, "--out", out, "--coordinator", f"localhost:{port}", "--num-processes", 2, "--process-id", i])
        for i in (0, 1)
    ]
    for p in procs:
        _wait(p)
    g = store.open(out, mode="r")
    assert store.done_flags(g).all()  # the store is whole
    res = sweep.load(out)
    _compare(single, res)
    s = json.loads((out / "summary.json").read_text())
    assert s["process_count"] == 2 and s["chunks_computed"] == 3
    by_proc = {}
    for f in ("progress.jsonl", "progress.1.jsonl"):
        for line in (out / f).read_text().splitlines():
            rec = json.loads(line)
            by_proc.setdefault(rec["process"], []).append(rec["chunk"])
    assert by_proc == {0: [0, 2], 1: [1]}  # chunks i, i + P, ... per process


@pytest.mark.slow
def test_non_finite_variant_is_flagged_and_leaves_its_chunk_alone(tmp_path, monkeypatch):
    # one chunk of 3 with the poisoned variant in the middle; the integrator of TOML, so the chunk
    # function is the one `single` compiled
    spec = {
        "sweep": {"name": "nan"},
        "outputs": {"plots": False},
        "integrator": {"dt_s": 2e-6, "t_end_s": 1e-3, "save_every": 10, "chunk_size": 3},
        "axes": {"joint.clearance_m": {"values": [0.5e-3, 0.25e-3, 0.1e-3]}},
    }
    clean, _, hc = sweep.run(spec, log=None, compile_cache=False)
    orig = sweep.batch_params

    def poisoned(sp, pl, idx):
        p = orig(sp, pl, idx)
        k = p.joint.stiffness
        bad = np.asarray(idx) == 1  # variant 1 gets K = NaN
        return p._replace(joint=p.joint._replace(stiffness=np.where(bad, np.nan, np.asarray(k))))

    monkeypatch.setattr(sweep, "batch_params", poisoned)
    table, summary, hists = sweep.run(spec, out=tmp_path / "nan", log=None, compile_cache=False)
    assert summary["failed_variants"] == [1] and summary["chunks"] == 1
    assert list(table["finite"]) == [True, False, True]
    for k, v in clean.items():
        if np.asarray(v).dtype.kind in "fciub":
            np.testing.assert_array_equal(np.asarray(table[k])[[0, 2]], np.asarray(v)[[0, 2]], err_msg=k)
    for k in hc:
        np.testing.assert_array_equal(hists[k][[0, 2]], hc[k][[0, 2]], err_msg=k)


@pytest.mark.slow
def test_compile_cache_is_reused_by_a_second_process(spec_file, tmp_path):
    cache = tmp_path / "xla"
    _wait(_cli([spec_file, "--out", tmp_path / "a"], cache=cache))
    first = sorted(os.listdir(cache))
    assert first, "the first run wrote no compile-cache entry"
    _wait(_cli([spec_file, "--out", tmp_path / "b"], cache=cache))
    assert sorted(os.listdir(cache)) == first  # everything came from the cache: no new entry
    s = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert s["compile_cache"] == str(cache)


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_every_pending_chunk_has_exactly_one_process(count):
    pending = [0, 2, 3, 7, 8, 9, 11]
    shares = [parallel.my_chunks(pending, i, count) for i in range(count)]
    assert sorted(c for s in shares for c in s) == pending


class _FakeGPU:
    platform = "gpu"

    def __init__(self, limit):
        self.limit = limit

    def memory_stats(self):
        return {"bytes_limit": self.limit}


def test_automatic_chunk_size():
    cpu = jax.devices("cpu")[:1]
    assert parallel.auto_chunk_size(10, 1e5, cpu) == 10
    assert parallel.auto_chunk_size(100000, 1e5, cpu) == parallel.CPU_CHUNK
    # 0.4 × 1 GB / 100 kB = 4000 per device, two devices
    assert parallel.auto_chunk_size(10**6, 1e5, [_FakeGPU(1e9)] * 2) == 8000
    assert parallel.auto_chunk_size(10**6, 1.0, [_FakeGPU(1e12)]) == parallel.ACCELERATOR_CHUNK_MAX
    assert parallel.auto_chunk_size(7, 1e5, [_FakeGPU(1e9)] * 2) == 6  # a multiple of the devices
    assert parallel.padded_size(3, 2) == 4 and parallel.padded_size(4, 2) == 4
