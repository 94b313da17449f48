"""The service under faults (issue 30, service items 1, 2, 3, 5): the job page's live results,
workers that keep dying or start beside a broken ``jaxclear`` folder, a full disk, and server
restarts mid-job.  Faults are injected in this process where they can be (the supervisor with a
stand-in worker, the worker loop with a stand-in ``sweep``, the app served from a thread); real
``jaxclear serve`` processes only where the process boundary is the subject (marked slow)."""

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from _service_helpers import (
    AppServer,
    CrashingWorkers,
    free_port,
    insert_job,
    job,
    request,
    wait_until,
)
from test_service import LONG, TINY, _browser, _chromium

from jaxclear import service

TOML = {"Content-Type": "application/toml"}


# ------------------------------------------------------------------------- item 1: the job page


class _BlockInPhrasing(HTMLParser):
    """Records block elements opened inside <p> or <span> (the parser would move them out)."""

    BLOCK = {"div", "p", "table", "ul", "ol", "pre", "h1", "h2", "details", "form"}
    VOID = {"img", "br", "meta", "input", "hr", "link"}

    def __init__(self):
        super().__init__()
        self.stack, self.bad, self.ids = [], [], {}

    def handle_starttag(self, tag, attrs):
        if tag in self.BLOCK and any(t in ("p", "span") for t, _ in self.stack):
            self.bad.append((tag, dict(attrs).get("id"), [t for t, _ in self.stack]))
        a = dict(attrs)
        if self.stack and self.stack[-1][1]:
            self.ids.setdefault(self.stack[-1][1], []).append(tag)
        if tag not in self.VOID:
            self.stack.append((tag, a.get("id")))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break


def test_pages_keep_block_elements_out_of_p_and_span(tmp_path):
    data = tmp_path / "data"
    con = service.connect(data)
    for status in ("running", "done"):
        jid = insert_job(con, data, status=status, variants_done=2)
        rec = service.job_record(con, con.execute("SELECT * FROM jobs WHERE id=?", (jid,)).fetchone())
        for page in (service._page_job(rec, data), service._page_index([rec])):
            chk = _BlockInPhrasing()
            chk.feed(page)
            assert chk.bad == [], (status, chk.bad)
        chk = _BlockInPhrasing()
        chk.feed(service._page_job(rec, data))
        assert chk.ids["progress"] == ["div"]  # the bar the script fills: #progress>div
    assert "catch(e){}" not in service._JOB_JS + service._JS
    assert "console.error" in service._JOB_JS and "console.error" in service._JS


@pytest.mark.slow  # headless Chromium, ~10 s
def test_job_page_shows_results_when_the_job_ends_without_a_reload(tmp_path):
    """The page of a running job fills its bar, then, when the job is done, shows the summary and
    the plots in place (a marker set in the page survives: no reload); a failed update is shown on
    the page and logged with console.error, not swallowed."""
    exe = _chromium()
    pw = pytest.importorskip("playwright.sync_api")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = tmp_path / "data"
    con = service.connect(data)
    jid = insert_job(con, data, "page", status="running", variants_done=1)
    gone = insert_job(con, data, "gone", status="running", variants_done=1)
    with AppServer(service.create_app(data)) as srv, pw.sync_playwright() as p:
        browser = _browser(p, exe, tmp_path)
        page = browser.new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
        page.goto(srv.url + f"/jobs/{jid}")
        assert page.evaluate("document.querySelector('#progress>div') !== null")
        page.evaluate("window.__kept = 1")
        con.execute("UPDATE jobs SET variants_done=2 WHERE id=?", (jid,))
        page.wait_for_function("parseFloat(document.querySelector('#progress>div').style.width) == 50", timeout=20000)
        # the job ends as a worker ends it: results written first, then the status
        out = data / "jobs" / jid / "out"
        (out / "metrics.csv").write_text(
            "clearance_m,peak_contact_force_N\n0.0001,120.5\n0.0002,180.25\n0.0003,240.0\n0.0005,300.0\n"
        )
        (out / "plots").mkdir()
        plt.imsave(out / "plots" / "peaks.png", np.linspace(0, 1, 40 * 60).reshape(40, 60))
        con.execute("UPDATE jobs SET status='done', variants_done=4, finished=? WHERE id=?", (time.time(), jid))
        page.wait_for_selector("#summary", timeout=20000)
        page.wait_for_function(
            "document.querySelectorAll('#plots img').length == 1 && "
            "Array.from(document.images).every(i => i.complete && i.naturalWidth == 60)",
            timeout=20000,
        )
        assert page.evaluate("window.__kept") == 1  # patched in place
        assert page.locator("#summary td", has_text="peak_contact_force_N").count() == 1
        assert page.locator("#status td.status").text_content() == "done"
        assert page.evaluate("parseFloat(document.querySelector('#progress>div').style.width)") == 100
        assert page.locator("#cancel").count() == 0 and page.locator("#page-error").is_hidden()
        assert errors == []
        # an update that fails is visible on the page and in the console
        page.goto(srv.url + f"/jobs/{gone}")
        con.execute("DELETE FROM jobs WHERE id=?", (gone,))
        page.wait_for_selector("#page-error:not([hidden])", timeout=20000)
        assert "HTTP 404" in page.locator("#page-error").text_content()
        assert any("update failed" in e for e in errors), errors
        browser.close()


# --------------------------------------------------------------- item 2: workers that keep dying


def test_a_worker_that_keeps_dying_fails_its_job_and_health_says_so(tmp_path, monkeypatch, capsys):
    """Each death is printed with the worker's last line; after MAX_ATTEMPTS deaths the job it held
    is failed with that line; /api/health answers ok: false naming the worker and its error."""
    monkeypatch.setattr(service, "RESPAWN_BACKOFF_S", (0.05, 0.2))
    data = tmp_path / "data"
    con = service.connect(data)
    jid = insert_job(con, data, "doomed")
    w = CrashingWorkers(data, 1)
    app = service.create_app(data, supervisor=w)
    w.start()
    try:
        wait_until(lambda: job(con, jid)["status"] == "failed", 30, "the job failed")
        j = job(con, jid)
        assert j["deaths"] == service.MAX_ATTEMPTS and j["resumed"] == service.MAX_ATTEMPTS - 1
        assert "died 3 times" in j["error"] and "RuntimeError: injected worker fault" in j["error"]
        assert "status 3" in j["error"] and "worker-0.log" in j["error"]
        with AppServer(app) as srv:
            code, h = request(srv.port, "GET", "/api/health")
            code2, rec = request(srv.port, "GET", f"/api/jobs/{jid}")
        assert code == 200 and h["ok"] is False and h["worker_deaths"] >= 3
        assert any("worker 0 died" in r and "injected worker fault" in r for r in h["reasons"]), h
        assert code2 == 200 and rec["status"] == "failed" and rec["deaths"] == 3
    finally:
        w.stop()
    err = capsys.readouterr().err
    assert err.count("RuntimeError: injected worker fault") >= 3
    assert "jaxclear serve: worker 0 (pid " in err and "death 3 in a row" in err


def test_worker_command_keeps_the_current_folder_off_sys_path(tmp_path, monkeypatch):
    """The worker's interpreter, run from a folder holding a broken ``jaxclear/``, imports the
    installed package (the command line the supervisor starts, its stand-in entry point)."""
    (tmp_path / "jaxclear").mkdir()
    (tmp_path / "jaxclear" / "__init__.py").write_text("raise ImportError('the broken copy in the cwd')\n")
    cmd = service.Workers(tmp_path / "data")._command(0)
    assert cmd[:3] == [sys.executable, "-P", "-c"]
    probe = "import importlib.util as u; print(u.find_spec('jaxclear').origin)"
    r = subprocess.run(cmd[:3] + [probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).parent == Path(service.__file__).parent
    bare = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert Path(bare.stdout.strip()).parent == tmp_path / "jaxclear"  # what `python -c` did


# ------------------------------------------------------------------------ item 3: a full disk


def _disk(free):
    return lambda path: shutil._ntuple_diskusage(10**12, 10**12 - free, free)


class FullDisk:
    """``service.connect`` replaced: its connections refuse writes with SQLite's disk-full error
    while ``on``, or the next ``fail`` writes."""

    def __init__(self):
        self.on, self.fail, self.refused, self._connect = False, 0, 0, service.connect

    def connect(self, data):
        return _Con(self._connect(data), self)


class _Con:
    def __init__(self, con, disk):
        self._con, self._disk = con, disk

    def execute(self, q, *a):
        d = self._disk
        if (d.on or d.fail) and q.split()[0].upper() in ("INSERT", "UPDATE", "BEGIN", "DELETE"):
            d.fail = max(0, d.fail - 1)
            d.refused += 1
            raise sqlite3.OperationalError("database or disk is full")
        return self._con.execute(q, *a)

    def __getattr__(self, k):
        return getattr(self._con, k)


def test_submit_on_a_full_disk_is_507_and_leaves_no_folder(tmp_path, monkeypatch):
    data = tmp_path / "data"
    disk = FullDisk()
    monkeypatch.setattr(service, "connect", disk.connect)
    app = service.create_app(data, limits=service.Limits(min_free_bytes=10**8))
    real_usage = shutil.disk_usage

    def nothing_left():
        assert not (data / "jobs").exists() or list((data / "jobs").iterdir()) == []
        con = disk._connect(data)
        assert con.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0

    with AppServer(app) as srv:
        # less than min_free_bytes: refused before anything is read or written
        monkeypatch.setattr(shutil, "disk_usage", _disk(10**6))
        code, b = request(srv.port, "POST", "/api/jobs", TINY.encode(), TOML)
        assert code == 507 and "1000000 bytes" in b["detail"] and "--min-free-bytes" in b["detail"], b
        code, h = request(srv.port, "GET", "/api/health")
        assert h["ok"] is False and h["free_bytes"] == 10**6 and h["min_free_bytes"] == 10**8
        assert "1000000 bytes" in h["reasons"][0] and "507" in h["reasons"][0]
        nothing_left()
        monkeypatch.setattr(shutil, "disk_usage", real_usage)
        # the disk fills while the job's files are written: 507, the folder removed
        write_text = Path.write_text

        def enospc(self, *a, **k):
            if self.name == "overrides.json":
                raise OSError(errno.ENOSPC, "No space left on device", str(self))
            return write_text(self, *a, **k)

        monkeypatch.setattr(Path, "write_text", enospc)
        code, b = request(srv.port, "POST", "/api/jobs", TINY.encode(), TOML)
        assert code == 507 and "full" in b["detail"] and "not queued" in b["detail"], b
        nothing_left()
        monkeypatch.setattr(Path, "write_text", write_text)
        # SQLite refuses the row: 507, the folder removed
        disk.on = True
        code, b = request(srv.port, "POST", "/api/jobs", TINY.encode(), TOML)
        assert code == 507 and "not queued" in b["detail"] and disk.refused >= 1, b
        nothing_left()
        disk.on = False
        # space is back
        code, b = request(srv.port, "POST", "/api/jobs", TINY.encode(), TOML)
        assert code == 201 and b["status"] == "queued"
        assert (data / "jobs" / b["id"] / "overrides.json").read_text() == "[]"
        code, h = request(srv.port, "GET", "/api/health")
        assert h["ok"] is True and h["reasons"] == [], h


class _FakeSweep:
    """``sweep`` for the worker loop: the real plan, a ``run`` given by the test."""

    def __init__(self, run):
        from jaxclear import sweep

        self.plan, self.run = sweep.plan, run


def _tiny_row(con, data, name):
    return insert_job(con, data, name, spec_json=json.dumps(tomllib.loads(TINY)))


def test_worker_waits_for_space_fails_a_job_on_a_full_disk_and_goes_on(tmp_path, monkeypatch):
    from jaxclear import spec as specmod

    monkeypatch.setattr(service, "RETRY_S", 0.01)
    data = tmp_path / "data"
    disk = FullDisk()
    con = disk.connect(data)
    log = service._Log(data / "worker-0.log")
    first, second = _tiny_row(con, data, "first"), _tiny_row(con, data, "second")

    def enospc(spec, out, progress, **_):
        (out / "store.zarr").mkdir(parents=True)
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "store.zarr" / "0.0"))

    def fine(spec, out, progress, **_):
        progress(4)
        return None, {"compile_s": 0.0, "wall_s": 0.01, "variant_steps_per_s": 1e6, "warnings": []}, None

    def turn(run, min_free=10**8):
        return service.work_once(con, data, 0, None, log, specmod, _FakeSweep(run), None, min_free)

    # short of space: nothing claimed, said once in the worker's log
    monkeypatch.setattr(shutil, "disk_usage", _disk(10**6))
    assert turn(fine) is None and turn(fine) is None
    assert job(con, first)["status"] == "queued"
    assert (data / "worker-0.log").read_text().count("not taking jobs") == 1
    monkeypatch.setattr(shutil, "disk_usage", _disk(10**9))
    # the queue cannot be written (claim refused): the turn ends, the worker lives
    disk.on = True
    assert turn(fine) is None and job(con, first)["status"] == "queued"
    assert "cannot take a job from the queue" in (data / "worker-0.log").read_text()
    disk.on = False
    # the disk fills mid-job: the job fails with a clear error (written once SQLite accepts it)
    real_finish = service._finish

    def finish_on_full_disk(c, *a, **k):
        disk.fail, disk.refused = 2, 0  # the first two tries to record the end are refused
        return real_finish(c, *a, **k)

    monkeypatch.setattr(service, "_finish", finish_on_full_disk)
    assert turn(enospc) == first
    assert disk.refused == 2
    j = job(con, first)
    assert j["status"] == "failed" and "the disk is full" in j["error"] and "No space left" in j["error"], j
    assert "finished chunks are kept" in j["error"]
    monkeypatch.setattr(service, "_finish", real_finish)
    # and the queue goes on
    assert turn(fine) == second and job(con, second)["status"] == "done"


def test_supervisor_survives_a_full_disk(tmp_path, monkeypatch, capsys):
    """The watch thread meets 'database or disk is full': it reports it (stderr, health) and
    keeps going; once space is back the dead worker's job is requeued and the queue goes on."""
    monkeypatch.setattr(service, "RESPAWN_BACKOFF_S", (0.05, 0.2))
    data = tmp_path / "data"
    con = service.connect(data)
    jid = insert_job(con, data, "held")
    disk = FullDisk()
    disk.on = True
    monkeypatch.setattr(service, "connect", disk.connect)
    w = CrashingWorkers(data, 1)
    w.start()
    try:
        wait_until(lambda: disk.refused >= 1 and w.error, 20, "a refused write")
        assert "database or disk is full" in w.error
        assert any("disk is full" in p for p in w.problems())
        time.sleep(0.3)  # several ticks with a full disk
        assert job(con, jid)["status"] == "running"  # the dead worker's job, not requeued yet
        assert w.alive() == [False]
        disk.on = False
        wait_until(lambda: job(con, jid)["status"] == "failed", 30, "the job failed after 3 deaths")
        assert w.error is None and job(con, jid)["deaths"] == 3
    finally:
        w.stop()
    err = capsys.readouterr().err
    assert err.count("worker supervisor error, trying again") == 1  # reported once, not every tick
    assert "the worker supervisor works again" in err


# ------------------------------------------------------------------------------ item 5: restarts


def test_restarts_count_no_worker_deaths(tmp_path):
    """Stopping or restarting the server (requeue_interrupted with no death) requeues a running
    job however often it happens; only deaths a running server saw count toward failing it."""
    data = tmp_path / "data"
    con = service.connect(data)
    jid = insert_job(con, data, status="running", worker=0, attempts=1)
    for _ in range(5):
        assert service.requeue_interrupted(con) == [jid]
        assert service.claim(con, 0) == jid
    j = job(con, jid)
    assert j["status"] == "compiling" and j["deaths"] == 0 and j["attempts"] == 6 and j["resumed"] == 5
    for k in (1, 2):
        assert service.requeue_interrupted(con, worker=0, died="worker 0 exited with status 1: MemoryError") == [jid]
        assert job(con, jid)["deaths"] == k and service.claim(con, 0) == jid
    assert service.requeue_interrupted(con, worker=1, died="x") == []  # another worker's death
    assert service.requeue_interrupted(con, worker=0, died="worker 0 exited with status 1: MemoryError") == []
    j = job(con, jid)
    assert j["status"] == "failed" and j["deaths"] == 3 and "died 3 times" in j["error"]
    assert "MemoryError" in j["error"]
    # a queue of an older version (no deaths column) gets one
    con.execute("ALTER TABLE jobs DROP COLUMN deaths")
    con = service.connect(data)
    assert job(con, jid)["deaths"] == 0


# ------------------------------------------------------------------------- real server processes


def _jaxclear_cmd():
    exe = Path(sys.executable).with_name("jaxclear")  # the console script a user runs
    return [str(exe)] if exe.exists() else [sys.executable, "-P", "-m", "jaxclear.cli"]


class _Serve:
    """``jaxclear serve`` started from ``cwd`` on a free loopback port; ``stop()`` is SIGTERM."""

    def __init__(self, data, cwd):
        self.data, self.cwd, self.port = Path(data), Path(cwd), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc, self.logs = None, []

    def start(self, timeout=90):
        log = self.data.parent / f"serve-{len(self.logs)}.log"
        self.logs.append(log)
        cache = os.environ.get("JAXCLEAR_CACHE_DIR") or str(self.data.parent / "xla-cache")
        self.proc = subprocess.Popen(
            _jaxclear_cmd()
            + ["serve", "--no-token", "--port", str(self.port), "--data", str(self.data), "--cache-dir", cache],
            cwd=self.cwd,
            stdout=open(log, "wb"),
            stderr=subprocess.STDOUT,
        )
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            assert self.proc.poll() is None, log.read_text()
            try:
                h = self.health()
                if h["workers"] and all(h["workers"]):
                    return h
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not start: {log.read_text()}")

    def health(self):
        with urllib.request.urlopen(self.url + "/api/health", timeout=5) as r:
            return json.loads(r.read())

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return None

    def console(self):
        return "".join(p.read_text() for p in self.logs)


@pytest.mark.slow  # a server process and one TINY job, ~20 s
def test_server_started_beside_a_broken_jaxclear_folder_runs_jobs(tmp_path):
    """From a folder holding a broken ``jaxclear/`` (or the clone), the worker used to die at its
    import every half second while the job stayed queued; now it imports the installed package."""
    from jaxclear.client import Client

    cwd = tmp_path / "cwd"
    (cwd / "jaxclear").mkdir(parents=True)
    (cwd / "jaxclear" / "__init__.py").write_text("raise ImportError('the broken copy in the cwd')\n")
    s = _Serve(tmp_path / "data", cwd)
    s.start()
    try:
        job = Client(s.url).submit(TINY)
        st = job.wait(timeout=180)
        assert st["status"] == "done" and st["variants_done"] == 4, st
        h = s.health()
        assert h["ok"] is True and h["worker_deaths"] == 0, h
    finally:
        s.stop()
    assert "broken copy" not in (tmp_path / "data" / "worker-0.log").read_text()
    assert "exited with" not in s.console()


@pytest.mark.slow  # four server starts and a LONG job twice, ~60-90 s
def test_three_sigterm_restarts_mid_job_resume_it(tmp_path):
    """A job interrupted by three graceful restarts is not failed: each restart queues it again,
    its finished chunks are kept, and it ends with the metrics of an uninterrupted run."""
    from jaxclear import store
    from jaxclear.client import Client

    s = _Serve(tmp_path / "data", tmp_path)
    s.start()
    job = Client(s.url).submit(LONG)
    out = tmp_path / "data" / "jobs" / job.id / "out"
    kept = 0
    try:
        for _ in range(3):
            t0 = time.monotonic()
            while True:  # at least one more chunk finished since the last restart
                st = job.status()
                assert st["status"] in ("queued", "compiling", "running"), st
                if st["status"] == "running" and st["variants_done"] >= 2 * (kept + 1):
                    break
                assert time.monotonic() - t0 < 240, st
                time.sleep(0.05)
            assert s.stop() == 0  # SIGTERM: a graceful stop
            flags = store.done_flags(store.open(out, mode="r"))
            assert flags.sum() >= kept  # nothing discarded
            kept = int(flags.sum())
            s.start()
        st = job.wait(timeout=300)
        assert st["status"] == "done" and st["resumed"] == 3 and st["deaths"] == 0, st
        summ = job.summary()
        assert summ["chunks_reused"] >= kept >= 3 and summ["chunks_computed"] == 10 - summ["chunks_reused"]
        ref = Client(s.url).submit(LONG)
        assert ref.wait(timeout=300)["status"] == "done"
        a, b = job.metrics(), ref.metrics()
        assert a.columns == b.columns
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    finally:
        s.stop()
    assert "exited with" not in s.console()  # no restart was taken for a worker death
