"""Helpers of the service tests: the app served in this process (uvicorn in a thread, loopback),
plain HTTP requests, jobs written straight into the queue, and a stand-in worker process."""

import http.client
import json
import socket
import sys
import threading
import time

from jaxclear import service


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    """``service.create_app(...)`` served by uvicorn in a daemon thread on a free loopback port."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="test-uvicorn")

    def __enter__(self):
        self.thread.start()
        t0 = time.monotonic()
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() - t0 < 20, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(20)


def request(port, method, path, body=None, headers=None):
    """One request: (status, parsed JSON or the raw bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body, headers=dict(headers or {}))
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw


def insert_job(con, data, name="fake", status="queued", variants_total=4, variants_done=0, **cols):
    """A job row (and its folder) written directly: no spec check, no JAX."""
    import secrets

    jid = secrets.token_urlsafe(16)
    (data / "jobs" / jid / "out").mkdir(parents=True)
    (data / "jobs" / jid / "spec.json").write_text(json.dumps({"sweep": {"name": name}}))
    now = time.time()
    fields = {
        "id": jid,
        "name": name,
        "status": status,
        "created": now,
        "started": now if status != "queued" else None,
        "spec_json": json.dumps({"sweep": {"name": name}}),
        "spec_hash": "0" * 16,
        "variants_total": variants_total,
        "steps_per_variant": 100,
        "variants_done": variants_done,
        "updated": now,
        **cols,
    }
    con.execute(
        f"INSERT INTO jobs ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})", tuple(fields.values())
    )
    return jid


def job(con, jid):
    return dict(con.execute("SELECT * FROM jobs WHERE id=?", (jid,)).fetchone())


# A worker that takes the oldest queued job, prints a traceback and exits with status 3 (a fault
# injected in place of the real worker, which would import JAX first).
CRASHING_WORKER = r"""
import sqlite3, sys
data, i = sys.argv[1], int(sys.argv[2])
con = sqlite3.connect(data + "/queue.sqlite", timeout=30, isolation_level=None)
con.execute("BEGIN IMMEDIATE")
r = con.execute("SELECT id FROM jobs WHERE status='queued' ORDER BY seq LIMIT 1").fetchone()
if r:
    con.execute("UPDATE jobs SET status='running', worker=?, attempts=attempts+1 WHERE id=?", (i, r[0]))
con.execute("COMMIT")
print("Traceback (most recent call last):\n  File \"worker\", line 1\nRuntimeError: injected worker fault", file=sys.stderr)
sys.exit(3)
"""


class CrashingWorkers(service.Workers):
    """The supervisor under test, its workers replaced by CRASHING_WORKER; fast ticks."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.tick_s = 0.05

    def _command(self, i):
        return [sys.executable, "-P", "-c", CRASHING_WORKER, str(self.data), str(i)]


def wait_until(cond, timeout=30.0, what="condition"):
    t0 = time.monotonic()
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() - t0 < timeout, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)
