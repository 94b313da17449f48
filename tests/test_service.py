"""The sweep service end to end: the real server (``jaxclear serve``) in a subprocess on a free
localhost port, its worker, the SQLite queue, the client, the CLI and the HTML page in headless
Chromium.  Jobs are tiny (a few variants, 2e3–1e5 steps) so the file runs in ~2 minutes on 2 cores."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from _service_helpers import request

from jaxclear.client import Client, ServiceError, parse_csv

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token-3f9a2c"

# Two structures: TINY (2000 steps, 4 variants, 2 chunks) and LONG (1e5 steps, 10 chunks).
TINY = """
[sweep]
name = "tiny"
[integrator]
dt_s = 2e-6
t_end_s = 4e-3
save_every = 100
chunk_size = 2
[outputs]
plots = false
[axes]
"joint.clearance_m" = { values = [1e-4, 2e-4, 3e-4, 5e-4] }
"""
LONG = """
[sweep]
name = "long"
[integrator]
dt_s = 2e-6
t_end_s = 0.2
save_every = 1000
chunk_size = 2
[outputs]
plots = false
[axes]
"joint.clearance_m" = { logspace = [5e-5, 5e-4, 20] }
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``jaxclear serve`` in a subprocess; ``kill()`` is SIGKILL."""

    def __init__(self, data, cache, *extra):
        self.data, self.cache, self.extra = Path(data), Path(cache), extra
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        self.log = open(self.data.parent / f"serve-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jaxclear.cli",
                "serve",
                "--port",
                str(self.port),
                "--data",
                str(self.data),
                "--cache-dir",
                str(self.cache),
                *self.extra,
            ],
            cwd=ROOT,
            stdout=self.log,
            stderr=self.log,
        )
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            assert self.proc.poll() is None, (self.data.parent / f"serve-{self.port}.log").read_text()
            try:
                with urllib.request.urlopen(self.url + "/api/health", timeout=2) as r:
                    h = json.loads(r.read())
                    if all(h["workers"]):
                        return h
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("server did not start")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("service")
    return base / "data", base / "xla-cache", base


@pytest.fixture(scope="module")
def server(dirs):
    data, cache, _ = dirs
    s = Server(data, cache, "--token", TOKEN, "--max-variants", "50", "--max-spec-bytes", "20000")
    s.start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return Client(server.url, token=TOKEN)


def _raw(server, method, path, body=None, headers=None, token=TOKEN):
    """One request sent as written (no URL normalisation): (status, parsed JSON or bytes)."""
    h = dict(headers or {})
    if token:
        h["Authorization"] = f"Bearer {token}"
    return request(server.port, method, path, body, h)


@pytest.mark.slow
def test_submit_poll_fetch_equals_local_run(client, tmp_path, monkeypatch, capsys):
    spec_file = tmp_path / "tiny.toml"
    spec_file.write_text(TINY)
    sets = ["laws.restitution=0.85"]
    job = client.submit(str(spec_file), set=sets)
    seen = set()
    while True:
        p = job.progress()
        seen.add(p["status"])
        assert 0 <= p["variants_done"] <= p["variants_total"] == 4
        if p["status"] in ("done", "failed", "cancelled"):
            break
        time.sleep(0.05)
    assert p["status"] == "done", p
    assert job.wait()["variants_done"] == 4
    remote = job.metrics()
    assert len(remote) == 4 and "peak_contact_force_N" in remote.columns
    # the same spec run locally by the CLI
    out = tmp_path / "local"
    from jaxclear import cli

    assert cli.main(["run", str(spec_file), "--set", sets[0], "--out", str(out), "--quiet"]) == 0
    local = parse_csv((out / "metrics.csv").read_text())
    assert list(local) == remote.columns
    for k in local:
        np.testing.assert_array_equal(remote[k], local[k], err_msg=k)
    assert job.summary()["spec_hash"] == json.loads((out / "summary.json").read_text())["spec_hash"]
    # the store travels too, and loads with sweep.load
    from jaxclear import sweep

    st = job.download_store(tmp_path / "dl")
    r = sweep.load(st / "store.zarr")
    assert r.complete
    np.testing.assert_array_equal(r.metrics["peak_contact_force_N"], local["peak_contact_force_N"])
    # a second job of the same structure (other values, JSON) compiles nothing in the warm worker
    job2 = client.submit(
        {
            "sweep": {"name": "tiny2"},
            "integrator": {"dt_s": 2e-6, "t_end_s": 4e-3, "save_every": 100, "chunk_size": 2},
            "outputs": {"plots": False},
            "axes": {"joint.clearance_m": {"values": [1.5e-4, 2.5e-4, 3.5e-4, 4.5e-4]}},
        }
    )
    s2 = job2.wait(timeout=120)
    assert s2["compile_s"] == 0.0 and job.status()["compile_s"] > 0.0
    assert not np.array_equal(job2.metrics()["peak_contact_force_N"], remote["peak_contact_force_N"])
    # CLI submit / status against the server (client commands: in process)
    monkeypatch.setenv("JAXCLEAR_TOKEN", TOKEN)
    capsys.readouterr()
    rc = cli.main(["submit", str(spec_file), "--server", client.url, "--set", "laws.restitution=0.8", "--wait"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    jid = out.split()[0]
    assert cli.main(["status", jid, "--server", client.url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "done"


PLANET = """
[sweep]
name = "planet"
[model]
mechanism = "planet_pin"
ramp_time_s = 1e-3
reversal_time_s = 1e-3
hold_time_s = 1e-3
[integrator]
save_every = 100
chunk_size = 2
[outputs]
plots = false
[axes]
"model.carrier_speed_rpm" = { values = [0.0, 1000.0] }
"""


@pytest.mark.slow
def test_planet_pin_sweep_through_the_service(client):
    """A 3D mechanism runs through the service like the planar ones: a tiny planet_pin sweep
    (2 variants × 3000 steps: the carrier clamped and turning) finishes with its metric columns."""
    job = client.submit(PLANET)
    st = job.wait(timeout=300)
    assert st["status"] == "done" and st["variants_done"] == 2, st
    m = job.metrics()
    assert len(m) == 2 and job.summary()["mechanism"] == "planet_pin"
    np.testing.assert_array_equal(m["carrier_speed_rpm"], [0.0, 1000.0])
    finite = [f"peak_contact_force_{c}_N" for c in ("top", "bottom", "axial_top", "axial_bottom")] + [
        "smooth_peak_contact_force_N",
        "impacts_top",
        "impacts_bottom",
        "impacts_axial",
        "max_penetration_m",
        "max_tilt_rad",
        "first_impact_time_s",
        "settle_time_after_loading_s",
        "settle_time_after_reversal_s",
        "hold_resisting_torque_N_m",
        "peak_resisting_torque_N_m",
    ]
    assert set(m.columns) == {"carrier_speed_rpm", "finite", *finite}
    for k in finite:
        assert np.all(np.isfinite(np.asarray(m[k], float))), (k, m[k])
    assert np.all(m["finite"])
    assert np.all(np.asarray(m["peak_contact_force_top_N"], float) > 100.0)  # the planet hit the wall
    assert np.all(np.asarray(m["impacts_top"]) >= 1)


def test_bad_requests_are_4xx_naming_the_problem(server, client, monkeypatch, capsys):
    ok_spec = TINY.encode()
    toml = {"Content-Type": "application/toml"}
    # bad specs: 422 naming the key
    code, b = _raw(server, "POST", "/api/jobs", TINY.replace("clearance_m", "clearence_m").encode(), toml)
    assert code == 422 and "clearence_m" in b["detail"] and "did you mean" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", (TINY + "\n[laws]\nrestitution = 1.5\n").encode(), toml)
    assert code == 422 and "laws.restitution" in b["detail"] and "1.5" in b["detail"]
    with pytest.raises(ServiceError) as e:
        client.submit(TINY, set=["integrator.dt_s=1e-3"])
    assert e.value.status == 422 and "integrator.dt_s" in e.value.detail and "stability" in e.value.detail
    code, b = _raw(server, "POST", "/api/jobs", b"[sweep\nname=1", toml)
    assert code == 422 and "TOML" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", b'{"spec": ', {"Content-Type": "application/json"})
    assert code == 400 and "JSON" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", b'{"spec": {}, "priority": 1}', {"Content-Type": "application/json"})
    assert code == 422 and "priority" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", ok_spec, {"Content-Type": "image/png"})
    assert code == 415 and "application/toml" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", ok_spec + b"#" * 20000, toml)
    assert code == 413 and "20000" in b["detail"]
    big = TINY.replace("{ values = [1e-4, 2e-4, 3e-4, 5e-4] }", "{ logspace = [1e-4, 5e-4, 64] }")
    code, b = _raw(server, "POST", "/api/jobs", big.encode(), toml)
    assert code == 422 and "64 variants" in b["detail"] and "--max-variants" in b["detail"]
    huge = TINY.replace("{ values = [1e-4, 2e-4, 3e-4, 5e-4] }", "{ logspace = [1e-4, 5e-4, 100000000] }")
    code, b = _raw(server, "POST", "/api/jobs", huge.encode(), toml)  # counted, not built
    assert code == 422 and "100000000 variants" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", TINY.replace("t_end_s = 4e-3", "t_end_s = 1e5").encode(), toml)
    assert code == 422 and "GiB" in b["detail"] and "--max-store-bytes" in b["detail"]
    code, b = _raw(
        server, "POST", "/api/jobs", (TINY + '\n[profile]\nkind = "measured"\npath = "/etc/passwd"\n').encode(), toml
    )
    assert code == 422 and "profile.path" in b["detail"]
    # tokens
    for path in ("/api/jobs", "/", "/openapi.json"):
        code, b = _raw(server, "GET", path, token=None)
        assert code == 401 and "token" in b["detail"]
    code, b = _raw(server, "POST", "/api/jobs", ok_spec, toml, token="wrong-token-123")
    assert code == 401 and "wrong" in b["detail"]
    # unknown jobs, bad parameters, path traversal: 404 / 409 / 422, never a file outside out/
    job = client.submit(TINY)
    job.wait(timeout=120)
    jid = job.id
    assert _raw(server, "GET", "/api/jobs/AAAAAAAAAAAAAAAAAAAAAA")[0] == 404
    assert _raw(server, "GET", "/api/jobs/../../etc/passwd")[0] == 404
    for p in (
        "../spec.json",
        "..%2Fspec.json",
        "%2e%2e/%2e%2e/queue.sqlite",
        "..%5c..%5cqueue.sqlite",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "plots/../../spec.json",
        "store.zarr/../../spec.json",
        "nonexistent.csv",
        "store.zarr",
        "plots",
    ):
        code, b = _raw(server, "GET", f"/api/jobs/{jid}/files/{p}")
        assert code == 404, (p, code, b)
        assert isinstance(b, dict) and "detail" in b
    code, b = _raw(server, "GET", f"/api/jobs/{jid}/files/summary.json")
    assert code == 200 and b["variants"] == 4
    code, b = _raw(server, "POST", f"/api/jobs/{jid}/cancel")
    assert code == 409 and "done" in b["detail"]
    code, b = _raw(server, "GET", "/api/jobs?limit=0")
    assert code == 422 and "limit" in b["detail"]
    code, b = _raw(server, "GET", "/api/jobs?limit=abc")
    assert code == 422 and "limit" in b["detail"]
    code, b = _raw(server, "GET", "/api/jobs?status=sleeping")
    assert code == 422 and "sleeping" in b["detail"]
    code, b = _raw(server, "GET", "/openapi.json")
    assert code == 200 and "/api/jobs/{job_id}" in b["paths"]
    # binding beyond localhost without a token is refused before anything starts (in process: the
    # refusal comes before any server or worker exists; monkeypatch undoes the CLI's worker settings)
    from jaxclear import cli

    for k in ("JAXCLEAR_TOKEN", "JAXCLEAR_CPU_DEVICES", "JAXCLEAR_CPU_DEVICES_SOURCE"):
        monkeypatch.setenv(k, "")
    monkeypatch.delenv("JAXCLEAR_TOKEN")
    capsys.readouterr()
    rc = cli.main(
        ["serve", "--host", "0.0.0.0", "--port", "1", "--no-token", "--data", str(server.data.parent / "never")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "token" in err and "0.0.0.0" in err
    assert not (server.data.parent / "never").exists()


@pytest.mark.slow  # 20 jobs through the queue, ~7 s
def test_twenty_concurrent_submissions(client):
    specs = [TINY.replace('name = "tiny"', f'name = "c{i}"') for i in range(20)]
    with ThreadPoolExecutor(20) as ex:
        jobs = list(ex.map(lambda s: client.submit(s, set=[f"laws.restitution={0.8 + 0.005 * specs.index(s)}"]), specs))
    assert len({j.id for j in jobs}) == 20
    assert any(j.info["status"] == "queued" for j in jobs)
    listed = {j.id for j in client.jobs()}
    assert {j.id for j in jobs} <= listed
    done = [j.wait(timeout=300) for j in jobs]
    assert all(d["status"] == "done" and d["variants_done"] == 4 for d in done)
    # the queue is first in, first out (seq: the order the submissions were queued in)
    starts = [d["started"] for d in sorted(done, key=lambda d: d["seq"])]
    assert starts == sorted(starts)
    # and each job computed its own variants (restitution differs, so the forces do)
    peaks = {tuple(j.metrics()["peak_contact_force_N"]) for j in jobs}
    assert len(peaks) == 20


def _wait_status(job, statuses, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        s = job.status()
        if s["status"] in statuses:
            return s
        time.sleep(0.05)
    raise TimeoutError(f"{job} not in {statuses}")


@pytest.mark.slow  # a LONG job under 2000 polls, ~10 s
def test_status_poll_burst_while_running_and_cancel(server, client):
    job = client.submit(LONG)
    queued = client.submit(LONG)
    _wait_status(job, ("running",))
    path = f"/api/jobs/{job.id}"

    def poll(n):
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        out = []
        for _ in range(n):
            c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
            r = c.getresponse()
            out.append((r.status, json.loads(r.read())))
        c.close()
        return out

    with ThreadPoolExecutor(8) as ex:
        results = [x for part in ex.map(poll, [250] * 8) for x in part]
    assert len(results) == 2000 and all(code == 200 for code, _ in results)
    assert all(b["id"] == job.id and b["variants_total"] == 20 for _, b in results)
    assert any(b["status"] == "running" for _, b in results)
    running = [b for _, b in results if b["status"] == "running"]
    # progress never runs ahead of the total; 20/20 while still running is the
    # summary and plots being written after the last chunk
    assert all(0 <= b["variants_done"] <= 20 for b in running)
    # cancel: the queued job at once, the running one after its current chunk
    assert queued.cancel()["status"] == "cancelled"
    job.cancel()
    s = _wait_status(job, ("cancelled", "done"))
    if s["status"] == "cancelled":
        assert s["variants_done"] < 20
    assert queued.status()["status"] == "cancelled" and queued.status()["started"] is None


@pytest.mark.slow  # the 5 s cancel grace, a worker killed and restarted, ~13 s
def test_cancel_kills_a_chunk_that_runs_too_long(client):
    """One chunk of 1e7 steps (minutes): cancel cannot wait for its end, the worker is killed and
    replaced, and the queue goes on."""
    job = client.submit(
        TINY.replace("t_end_s = 4e-3", "t_end_s = 20.0").replace("save_every = 100", "save_every = 100000")
    )
    _wait_status(job, ("running",))
    pids = client.health()["worker_pids"]
    t0 = time.monotonic()
    job.cancel()
    s = _wait_status(job, ("cancelled", "done", "failed"), timeout=60)
    assert s["status"] == "cancelled" and s["variants_done"] == 0
    assert time.monotonic() - t0 < 30
    nxt = client.submit(TINY)
    assert nxt.wait(timeout=120)["status"] == "done"
    assert client.health()["worker_pids"] != pids


@pytest.mark.slow
def test_sigkill_mid_job_then_restart_resumes_with_identical_metrics(server, client):
    job = client.submit(LONG)
    t0 = time.monotonic()
    while True:
        s = job.status()
        if s["status"] == "running" and 4 <= s["variants_done"] < 16:
            break
        assert s["status"] in ("queued", "compiling", "running") and time.monotonic() - t0 < 300, s
        time.sleep(0.02)
    worker_pids = client.health()["worker_pids"]
    server.kill()
    time.sleep(0.5)
    for pid in worker_pids:  # the worker died with the server
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    from jaxclear import store

    flags = store.done_flags(store.open(server.data / "jobs" / job.id / "out", mode="r"))
    assert 2 <= flags.sum() < len(flags)
    assert any(server.cache.rglob("*")), "the persistent compile cache is empty"
    server.start()
    s = job.wait(timeout=300)
    assert s["resumed"] == 1 and s["attempts"] == 2
    summ = job.summary()
    assert summ["chunks_reused"] >= 2 and summ["chunks_computed"] == 10 - summ["chunks_reused"]
    # an uninterrupted run of the same spec gives the same metrics, bit for bit
    ref = client.submit(LONG)
    ref.wait(timeout=300)
    a, b = job.metrics(), ref.metrics()
    assert a.columns == b.columns
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _chromium():
    for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(p).exists():
            return p
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed (.ci/run installs the Debian package)")
    pytest.skip("no /usr/bin/chromium (apt-get install chromium)")


def _browser(p, exe, tmp_path):
    """Headless Chromium with a fresh profile (Playwright passes it as --user-data-dir)."""
    return p.chromium.launch_persistent_context(
        str(tmp_path / "profile"),
        executable_path=exe,
        headless=True,
        viewport={"width": 1200, "height": 900},
        args=[
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )


@pytest.mark.slow  # ~40-75 s on 2 cores
def test_html_pages_in_headless_chromium(server, client, tmp_path):
    exe = _chromium()
    pw = pytest.importorskip("playwright.sync_api")
    import matplotlib.image as mpimg

    with_plots = TINY.replace("plots = false", "plots = true\nplot_variants = 2").replace('"tiny"', '"page"')
    with pw.sync_playwright() as p:
        browser = _browser(p, exe, tmp_path)
        page = browser.new_page()
        page.goto(server.url + f"/?token={TOKEN}")  # token -> cookie, then redirected to /
        assert page.url.rstrip("/") == server.url and "jaxclear sweep service" in page.content()
        job = client.submit(with_plots)
        # the new job appears and its row reaches 'done' by live updates, without a manual reload
        row = page.locator(f"#job-{job.id} .status")
        row.wait_for(timeout=60000)
        page.wait_for_function(f"document.querySelector('#job-{job.id} .status').textContent == 'done'", timeout=120000)
        assert page.locator(f"#job-{job.id} .done").text_content() == "4/4"
        # summary.json records the compile time the API reports (the worker no longer compiles apart)
        summ = job.summary()
        assert summ["compile_s"] == pytest.approx(job.status()["compile_s"], rel=1e-9)
        page.screenshot(path=str(tmp_path / "jobs.png"), full_page=True)
        page.click(f"a[href='/jobs/{job.id}']")
        page.wait_for_selector("#summary")
        assert page.locator("#summary td", has_text="peak_contact_force_N").count() >= 1
        imgs = page.locator("#plots a > img")  # plots are links to the full-size files
        assert imgs.count() >= 2
        page.wait_for_function("Array.from(document.images).every(i => i.complete && i.naturalWidth > 100)")
        page.screenshot(path=str(tmp_path / "job.png"), full_page=True)
        browser.close()
    for name in ("jobs.png", "job.png"):
        img = mpimg.imread(tmp_path / name)
        assert img.shape[0] > 300 and img.shape[1] == 1200
        assert img[..., :3].std() > 0.02  # not a blank page


def test_without_token_only_localhost_names_are_served(dirs):
    """No token: bound to 127.0.0.1 and answering only Host: localhost / 127.0.0.1 / [::1] (a page
    that rebinds its own name to 127.0.0.1 gets 403)."""
    _, cache, base = dirs
    s = Server(base / "data-open", cache, "--no-token")
    s.start()
    try:
        code, b = _raw(s, "GET", "/api/jobs", token=None)
        assert code == 200 and b["jobs"] == []
        code, b = _raw(s, "GET", "/api/jobs", headers={"Host": f"localhost:{s.port}"}, token=None)
        assert code == 200
        code, b = _raw(s, "GET", "/api/jobs", headers={"Host": f"evil.example:{s.port}"}, token=None)
        assert code == 403 and "evil.example" in b["detail"]
        code, b = _raw(
            s,
            "POST",
            "/api/jobs",
            TINY.encode(),
            {"Host": "evil.example", "Content-Type": "application/toml"},
            token=None,
        )
        assert code == 403
        assert Client(s.url).jobs() == []
    finally:
        s.stop()


@pytest.mark.slow  # Chromium following a LONG job, ~7 s
def test_job_page_follows_a_running_job_cancels_it_and_docs_work_offline(server, client, tmp_path):
    """The job page patches its status while the job runs (no reload: a marker set in the page
    survives), shows the submitted spec and its overrides, and its Cancel button stops the job;
    /docs is a self-contained page (no CDN)."""
    exe = _chromium()
    pw = pytest.importorskip("playwright.sync_api")
    job = client.submit(LONG.replace('"long"', '"follow"'), set=["laws.restitution=0.55"])
    with pw.sync_playwright() as p:
        browser = _browser(p, exe, tmp_path)
        page = browser.new_page()
        external = []
        page.on("request", lambda r: external.append(r.url) if not r.url.startswith(server.url) else None)
        page.goto(server.url + f"/jobs/{job.id}?token={TOKEN}")
        assert "laws.restitution=0.55" in page.locator("#overrides").text_content()
        assert "restitution = 0.55" in page.locator("#spec").text_content()
        page.evaluate("window.__kept = 1")
        page.wait_for_function(
            "document.querySelector('#status td.status').textContent == 'running' && "
            "Number(document.querySelector('#status td.variants_done').textContent) >= 2",
            timeout=180000,
        )
        assert page.evaluate("window.__kept") == 1  # patched in place, not reloaded
        page.click("#cancel")
        page.wait_for_function(
            "document.querySelector('#status td.status') && "
            "document.querySelector('#status td.status').textContent == 'cancelled'",
            timeout=60000,
        )
        page.goto(server.url + "/docs")
        rows = page.locator("#endpoints tr")
        assert rows.count() > 8 and page.locator("#endpoints", has_text="/api/jobs/{job_id}/cancel").count() == 1
        browser.close()
    assert external == []
    s = job.status()
    assert s["status"] == "cancelled" and 0 < s["variants_done"] < s["variants_total"]
    log = (Path(server.data) / "jobs" / job.id / "job.log").read_text()
    assert "compiling" in log and "running compile_s=" in log


def test_job_reports_questionable_results_as_warnings(server, client):
    # 4 ms at 5000 rpm: the steady window (the last revolution, 12 ms) is the whole run, and
    # c = 0.02 mm goes deeper than 0.5·c at its first impact; c = 0.1 mm does not.  dt, t_end, save_every
    # and chunk_size are TINY's, so the worker reuses TINY's compiled chunk.
    questionable = """
[sweep]
name = "questionable"
[integrator]
dt_s = 2e-6
t_end_s = 4e-3
save_every = 100
chunk_size = 2
[outputs]
plots = false
[axes]
"joint.clearance_m" = { values = [1e-4, 2e-5] }
"""
    job = client.submit(questionable)
    # the same run with a steady window of 0.1 revolution (1.2 ms of the 4 ms) and c = 0.1 mm only
    fine = client.submit(
        questionable.replace("chunk_size = 2", "chunk_size = 2\nsteady_revolutions = 0.1")
        .replace("[1e-4, 2e-5]", "[1e-4, 1.5e-4]")
        .replace('"questionable"', '"fine"')
    )
    s = job.wait(timeout=180)
    codes = {w["code"]: w for w in job.summary()["warnings"]}
    assert set(codes) == {"steady_window_is_whole_run", "deep_penetration"}
    assert codes["steady_window_is_whole_run"]["variants"] == [0, 1] and codes["deep_penetration"]["variants"] == [1]
    # the job's warnings (API and page) carry them, code first, naming the variants
    steady = [w for w in s["warnings"] if w.startswith("steady_window_is_whole_run: ")]
    deep = [w for w in s["warnings"] if w.startswith("deep_penetration: ")]
    assert len(steady) == 1 and "in 2 of 2 variants: 0 (clearance_m = 0.0001); 1 (clearance_m = 2e-05)" in steady[0]
    assert len(deep) == 1 and "in 1 of 2 variants: 1 (clearance_m = 2e-05, δ/c = " in deep[0]
    status, page = _raw(server, "GET", f"/jobs/{job.id}")
    assert status == 200 and b"<ul id='warnings'>" in page and b"deep_penetration: penetration" in page
    log = (server.data / "jobs" / job.id / "job.log").read_text()
    assert "warning: steady window = the whole run in 2 of 2 variants" in log
    f = fine.wait(timeout=180)
    assert f["status"] == "done" and f["warnings"] == [] and fine.summary()["warnings"] == []
