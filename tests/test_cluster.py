"""Sweeps on a Dask cluster (``jaxclear.cluster``), localhost only: a LocalCluster of two spawned
worker processes fills the same store as a local run, bit for bit; a worker SIGKILLed while it
executes a chunk -> the chunk is rescheduled, the store is whole and identical; the client
SIGKILLed -> a rerun resumes from the store."""

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from killing import kill_after_first_chunk

distributed = pytest.importorskip("distributed")

from jaxclear import cluster, store, sweep  # noqa: E402

TINY = {
    "sweep": {"name": "tiny"},
    "integrator": {"dt_s": 2e-6, "t_end_s": 1.0e-3, "save_every": 10, "chunk_size": 2},
    "outputs": {"plots": False},
    "axes": {
        "joint.clearance_m": {"values": [0.5e-3, 0.1e-3, 0.02e-3]},
        "model.crank_speed_rpm": {"values": [3000.0, 5000.0]},
    },
}

# Four chunks of one variant, ~0.5 s of execution each on one core: long enough to kill in flight
# (the victim is looked for every 50 ms).
LONG_TOML = """
[sweep]
name = "long"
[integrator]
dt_s = 2e-6
t_end_s = 0.15
save_every = 1000
chunk_size = 1
[outputs]
plots = false
[axes]
"joint.clearance_m" = { values = [0.5e-3, 0.25e-3, 0.1e-3, 0.05e-3] }
"""


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def _assert_same_store(out_a, out_b):
    """Both stores whole and equal array by array, and the derived metrics.csv equal as text."""
    ra, rb = sweep.load(out_a), sweep.load(out_b)
    assert ra.complete and rb.complete
    assert list(ra.metrics) == list(rb.metrics)
    for k in ra.metrics:
        assert _same(ra.metrics[k], rb.metrics[k]), k
    assert sorted(ra.histories) == sorted(rb.histories)
    for k in ra.histories:
        assert _same(ra.histories[k], rb.histories[k]), k
    assert (Path(out_a) / "metrics.csv").read_text() == (Path(out_b) / "metrics.csv").read_text()
    assert not list(store.path_of(out_b).rglob("*.partial"))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(lc)
    c.wait_for_workers(2, timeout=120)
    yield c
    c.close()
    lc.close()


@pytest.fixture(scope="module")
def cache():
    """The session's compile cache (conftest): the workers load what this process (or an earlier
    test) compiled, and this process keeps using the session's cache after the module."""
    return Path(os.environ["JAXCLEAR_CACHE_DIR"])


def _pids(client):
    return sorted(s["pid"] for s in client.run(cluster.worker_state).values())


def test_workers_are_spawned_not_forked(client):
    """JAX must not be forked after it initialised: the workers are fresh interpreters."""
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs /proc")
    read = functools.partial(Path.read_bytes, Path("/proc/self/cmdline"))
    cmdlines = client.run(read).values()
    assert len(cmdlines) == 2
    assert all(b"spawn_main" in c for c in cmdlines), cmdlines


def test_local_cluster_spawns_even_when_dask_is_set_to_fork():
    import dask

    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs /proc")
    with dask.config.set({"distributed.worker.multiprocessing-method": "fork"}):
        c, close = cluster.connect("local:1")
    try:
        (cmd,) = c.run(functools.partial(Path.read_bytes, Path("/proc/self/cmdline"))).values()
    finally:
        close()
    assert b"spawn_main" in cmd


@pytest.mark.slow  # two dask worker processes compiling and filling one store, ~15 s
def test_two_workers_fill_the_store_of_a_local_run_bit_for_bit(client, cache, tmp_path):
    sweep.run(TINY, out=tmp_path / "local", log=None, compile_cache=cache)
    table, summary, hists = sweep.run(TINY, out=tmp_path / "cl", log=None, compile_cache=cache, cluster=client)
    _assert_same_store(tmp_path / "local", tmp_path / "cl")
    assert summary["chunks_computed"] == 3 and summary["cluster_workers"] == 2
    lines = [json.loads(x) for x in (tmp_path / "cl" / "progress.jsonl").read_text().splitlines()]
    assert sorted(r["chunk"] for r in lines) == [0, 1, 2]
    assert [r["variants_done"] for r in lines] == [2, 4, 6]
    assert {r["worker_pid"] for r in lines} == set(_pids(client))  # both workers took chunks
    for pid in {r["worker_pid"] for r in lines}:  # warm workers: only a worker's first chunk compiles
        assert all(r["compile_s"] == 0.0 for r in [x for x in lines if x["worker_pid"] == pid][1:])
    # a rerun on the same DIR reuses everything and submits nothing
    _, s2, _ = sweep.run(TINY, out=tmp_path / "cl", log=None, compile_cache=cache, cluster=client)
    assert s2["rerun"]["chunks_reused"] == 3 and s2["rerun"]["chunks_computed"] == 0


def test_bad_cluster_arguments_are_refused():
    with pytest.raises(ValueError, match="out"):
        sweep.run(TINY, log=None, compile_cache=False, cluster="local:1")
    for bad in ("local:0", "local:two"):
        with pytest.raises(ValueError, match=bad):
            cluster.connect(bad)


@pytest.fixture(scope="module")
def long_ref(tmp_path_factory, cache):
    d = tmp_path_factory.mktemp("long")
    spec = d / "long.toml"
    spec.write_text(LONG_TOML)
    sweep.run(spec, out=d / "ref", log=None, compile_cache=cache)
    return spec, d / "ref"


@pytest.mark.slow
def test_worker_killed_mid_chunk_is_rescheduled(client, cache, long_ref, tmp_path):
    spec, ref = long_ref
    out = tmp_path / "killed-worker"
    got = {}

    def go():
        try:
            got["summary"] = sweep.run(spec, out=out, log=None, compile_cache=cache, cluster=client)[1]
        except BaseException as e:  # reported by the main thread
            got["error"] = e

    th = threading.Thread(target=go)
    th.start()
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and th.is_alive() and time.monotonic() < deadline:
        # a worker executing a chunk with its function already compiled (it finished one before)
        for st in client.run(cluster.worker_state).values():
            if st["phase"] == "compute" and st["tasks"] >= 1:
                victim = st
                os.kill(st["pid"], signal.SIGKILL)
                break
        time.sleep(0.05)
    th.join(600)
    assert "error" not in got, got.get("error")
    assert victim is not None, "no worker was caught executing a chunk"
    s = got["summary"]
    assert s["chunks_computed"] == 4 and s["chunks_retried"] >= 1
    lines = [json.loads(x) for x in (out / "progress.jsonl").read_text().splitlines()]
    by_chunk = {r["chunk"]: r["worker_pid"] for r in lines}
    assert sorted(by_chunk) == [0, 1, 2, 3]
    assert by_chunk[victim["chunk"]] != victim["pid"]  # finished elsewhere (or by the restarted worker)
    _assert_same_store(ref, out)


@pytest.mark.slow
def test_client_killed_then_rerun_resumes(client, cache, long_ref, tmp_path):
    spec, ref = long_ref
    out = tmp_path / "killed-client"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxclear.cli",
            "run",
            str(spec),
            "--out",
            str(out),
            "--quiet",
            "--cache-dir",
            str(cache),
            "--cluster",
            client.scheduler.address,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    kill_after_first_chunk(proc, out)
    done = store.done_flags(store.open(out, mode="r"))
    assert 1 <= done.sum() < 4, done
    assert not (out / "summary.json").exists()
    _, s, _ = sweep.run(spec, out=out, log=None, compile_cache=cache, cluster=client)
    assert s["chunks_reused"] >= 1 and s["chunks_reused"] + s["chunks_computed"] == 4
    _assert_same_store(ref, out)


@pytest.mark.slow
def test_service_jobs_run_on_the_cluster(client, cache, tmp_path):
    """``jaxclear serve --cluster ADDRESS``: a job's chunks are tasks of the cluster's workers."""
    import socket
    import urllib.request

    from jaxclear.client import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "serve.log", "wb")
    srv = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxclear.cli",
            "serve",
            "--port",
            str(port),
            "--data",
            str(tmp_path / "data"),
            "--cache-dir",
            str(cache),
            "--cluster",
            client.scheduler.address,
            "--no-token",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert srv.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                    if all(json.loads(r.read())["workers"]):
                        break
            except OSError:
                time.sleep(0.2)
        job = Client(f"http://127.0.0.1:{port}").submit(TINY)
        st = job.wait(timeout=300)
        assert st["status"] == "done", st
    finally:
        srv.terminate()
        srv.wait(30)
        log.close()
    out = tmp_path / "data" / "jobs" / job.id / "out"
    s = json.loads((out / "summary.json").read_text())
    assert s["cluster"] == client.scheduler.address and s["chunks_computed"] == 3
    pids = {json.loads(x)["worker_pid"] for x in (out / "progress.jsonl").read_text().splitlines()}
    assert pids <= set(_pids(client))  # computed by the cluster's workers, not the service's own
    sweep.run(TINY, out=tmp_path / "local", log=None, compile_cache=cache)
    _assert_same_store(tmp_path / "local", out)


def test_unreachable_scheduler_is_a_clear_cli_error(tmp_path, capsys):
    # the CLI in this process: its exit code and message are the subject, not the process
    import dask
    import jax

    from jaxclear import cli

    spec = tmp_path / "tiny.toml"
    spec.write_text(LONG_TOML.replace("t_end_s = 0.15", "t_end_s = 1e-4"))
    jax.devices()  # backends up first: the in-process `run` must not re-split this session's CPU
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        rc = cli.main(
            [
                "run",
                str(spec),
                "--out",
                str(tmp_path / "o"),
                "--quiet",
                "--no-compile-cache",
                "--cluster",
                "tcp://127.0.0.1:9",
            ]
        )
    err = capsys.readouterr().err
    assert rc == 2, err[-2000:]
    assert "--cluster tcp://127.0.0.1:9" in err and "Traceback" not in err
