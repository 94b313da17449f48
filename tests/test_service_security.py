"""The service under hostile input and unbounded requests (issue 30, items 4, 6, 7): cross-site
requests, the default token and how it travels, deleting and retention, the chunk and store
limits, streamed downloads, the wall-time limit, nesting and length limits, the data-folder
lock, the port bound before anything starts, header timeout, connection limit, framing.

Most tests drive the ASGI app in process (``asgi``: no sockets) or call the functions directly;
the header timeout and the connection limit use the real uvicorn server in a thread on a
loopback port; one slow test starts ``jaxclear serve`` itself for its banner, token and lock."""

import asyncio
import http.client
import http.server
import io
import json
import os
import socket
import sys
import threading
import time
import tracemalloc
import zipfile

import pytest
from test_service import ROOT, TINY, _free_port

pytest.importorskip("fastapi")

from jaxclear import service  # noqa: E402
from jaxclear.service import BadRequest, Limits  # noqa: E402

HOST = "127.0.0.1:8642"
TOKEN = "sec-token-9d1e7a"


def asgi(app, method, path, body=b"", headers=None, host=HOST):
    """One request straight into the ASGI app: (status, {header: value}, body bytes)."""
    hdrs = {"host": host, **{k.lower(): v for k, v in (headers or {}).items()}}
    if body:
        hdrs.setdefault("content-length", str(len(body)))
    p, _, q = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": p,
        "raw_path": p.encode(),
        "query_string": q.encode(),
        "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in hdrs.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8642),
    }
    out = {"status": None, "headers": {}, "body": b""}

    async def run():
        sent = False

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)

        async def send(m):
            if m["type"] == "http.response.start":
                out["status"] = m["status"]
                out["headers"] = {k.decode().lower(): v.decode() for k, v in m["headers"]}
            elif m["type"] == "http.response.body":
                out["body"] += m.get("body", b"")

        await app(scope, receive, send)

    asyncio.run(run())
    return out["status"], out["headers"], out["body"]


def detail(body):
    return json.loads(body)["detail"]


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    service.connect(d).close()
    return d


def _row(data, status="done", finished=None, started=None, name="j", spec=None, vsps=None, variants=4, **files):
    """A job in the queue without running it: its row and its folder (``files``: out/ relative path -> bytes)."""
    import secrets

    con = service.connect(data)
    jid = secrets.token_urlsafe(16)
    now = time.time()
    con.execute(
        "INSERT INTO jobs (id, name, status, created, started, finished, spec_json, spec_hash, variants_total, "
        "steps_per_variant, variant_steps_per_s, updated) VALUES (?, ?, ?, ?, ?, ?, ?, 'h', ?, 2000, ?, ?)",
        (jid, name, status, now, started, finished, json.dumps(spec or {}), variants, vsps, now),
    )
    out = service.job_dir(data, jid) / "out"
    out.mkdir(parents=True)
    for rel, b in files.items():
        f = out / rel.replace("__", "/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b)
    con.close()
    return jid


# ------------------------------------------------------------------------------------ item 4


def test_cross_site_requests_and_simple_content_types_are_refused(data):
    """Before: a text/plain or typeless POST from any Origin queued a job (an HTML form on any
    site makes valid TOML).  Now: other origins and Sec-Fetch-Site cross-site/same-site are 403,
    text/plain, form types and no type are 415 (only types that force a CORS preflight)."""
    app = service.create_app(data, token=None, local_only=True)
    toml = {"Content-Type": "application/toml"}
    for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        code, _, b = asgi(app, "POST", "/api/jobs", TINY.encode(), {"Content-Type": ct})
        assert code == 415 and ct.split(";")[0] in detail(b) and "application/toml" in detail(b), (ct, b)
    code, _, b = asgi(app, "POST", "/api/jobs", TINY.encode())
    assert code == 415 and "no Content-Type" in detail(b)
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8642"):
        code, _, b = asgi(app, "POST", "/api/jobs", TINY.encode(), {**toml, "Origin": origin})
        assert code == 403 and repr(origin) in detail(b), (origin, b)
    for site in ("cross-site", "same-site"):
        code, _, b = asgi(app, "POST", "/api/jobs", TINY.encode(), {**toml, "Sec-Fetch-Site": site})
        assert code == 403 and site in detail(b)
    jid = _row(data, status="queued")
    for method, path in (("POST", f"/api/jobs/{jid}/cancel"), ("DELETE", f"/api/jobs/{jid}")):
        code, _, b = asgi(app, method, path, headers={"Origin": "http://evil.example"})
        assert code == 403 and "evil.example" in detail(b)
    assert json.loads(asgi(app, "GET", f"/api/jobs/{jid}")[2])["status"] == "queued"
    # the server's own page (same origin) and programs (no Origin) may
    code, _, b = asgi(
        app,
        "POST",
        f"/api/jobs/{jid}/cancel",
        headers={"Origin": "http://127.0.0.1:8642", "Sec-Fetch-Site": "same-origin"},
    )
    assert code == 200 and json.loads(b)["status"] == "cancelled"
    code, _, b = asgi(app, "POST", "/api/jobs", TINY.encode(), {**toml, "Origin": "http://127.0.0.1:8642"})
    assert code == 201, b
    code, _, b = asgi(app, "POST", "/api/jobs", TINY.encode(), {"Content-Type": "text/toml"})
    assert code == 201, b
    # reading is not refused (a page of another site cannot read the answer: no CORS headers)
    code, h, _ = asgi(app, "GET", "/api/jobs", headers={"Origin": "http://evil.example"})
    assert code == 200 and "access-control-allow-origin" not in h


def test_url_token_only_logs_in_on_the_html_pages(data):
    app = service.create_app(data, token=TOKEN)
    code, _, b = asgi(app, "GET", f"/api/jobs?token={TOKEN}")
    assert code == 401 and "URL token" in detail(b) and "Authorization: Bearer" in detail(b)
    code, _, b = asgi(app, "POST", f"/api/jobs?token={TOKEN}", TINY.encode(), {"Content-Type": "application/toml"})
    assert code == 401 and "URL token" in detail(b)
    code, h, _ = asgi(app, "GET", f"/?token={TOKEN}")
    assert code == 303 and h["location"] == "http://127.0.0.1:8642/" and "jaxclear_token=" in h["set-cookie"]
    assert "httponly" in h["set-cookie"].lower() and "samesite=strict" in h["set-cookie"].lower()
    cookie = h["set-cookie"].split(";")[0]
    assert asgi(app, "GET", "/api/jobs", headers={"Cookie": cookie})[0] == 200
    assert asgi(app, "GET", "/api/jobs", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert asgi(app, "GET", "/api/jobs")[0] == 401
    assert asgi(app, "GET", "/?token=wrong-token-000")[0] == 401


class _FakeWorkers:
    made = []

    def __init__(self, *a, **k):
        self.started = False
        _FakeWorkers.made.append(self)

    def start(self):
        self.started = True

    def stop(self):
        pass

    def alive(self):
        return [True]

    def pids(self):
        return [0]


@pytest.fixture
def fake_serve(monkeypatch):
    """``jaxclear serve`` in process, its workers and its HTTP loop replaced: what serve() would
    run (app, token) is recorded in ``seen``."""
    seen = {}

    class FakeServer:
        def __init__(self, app, **kw):
            seen.update(app=app, **kw)

        def run(self, sockets):
            seen["sockets"] = sockets
            seen["workers_started_before_run"] = [w.started for w in _FakeWorkers.made]

    _FakeWorkers.made = []
    monkeypatch.setattr(service, "Workers", _FakeWorkers)
    monkeypatch.setattr(service, "make_server", FakeServer)
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", "cpu"))
    for k in ("JAXCLEAR_TOKEN", "JAXCLEAR_CPU_DEVICES", "JAXCLEAR_CPU_DEVICES_SOURCE"):
        monkeypatch.setenv(k, "")
        monkeypatch.delenv(k)
    return seen


def test_default_token_is_random_and_printed_once_in_a_login_url(fake_serve, tmp_path, capsys, monkeypatch):
    from jaxclear import cli

    port = _free_port()
    assert cli.main(["serve", "--port", str(port), "--data", str(tmp_path / "d1")]) == 0
    err = capsys.readouterr().err
    logins = [ln for ln in err.splitlines() if "?token=" in ln]
    assert len(logins) == 1 and f"http://127.0.0.1:{port}/?token=" in logins[0], err
    tok = logins[0].split("?token=")[1].strip()
    assert len(tok) >= 32
    app = fake_serve["app"]
    assert asgi(app, "GET", "/api/jobs")[0] == 401
    assert asgi(app, "GET", "/api/jobs", headers={"Authorization": f"Bearer {tok}"})[0] == 200
    assert fake_serve["workers_started_before_run"] == [True]
    # another start, another token
    assert cli.main(["serve", "--port", str(_free_port()), "--data", str(tmp_path / "d2")]) == 0
    assert tok not in capsys.readouterr().err
    # --no-token: a trusted setup, loopback names only, no token printed
    assert cli.main(["serve", "--port", str(_free_port()), "--data", str(tmp_path / "d3"), "--no-token"]) == 0
    err = capsys.readouterr().err
    assert "?token=" not in err and "no token" in err
    app = fake_serve["app"]
    assert asgi(app, "GET", "/api/jobs")[0] == 200
    assert asgi(app, "GET", "/api/jobs", host="evil.example")[0] == 403
    # from $JAXCLEAR_TOKEN or a file: used as given, never printed
    monkeypatch.setenv("JAXCLEAR_TOKEN", "env-token-4711")
    assert cli.main(["serve", "--port", str(_free_port()), "--data", str(tmp_path / "d4")]) == 0
    err = capsys.readouterr().err
    assert "env-token-4711" not in err and "?token=" not in err
    assert asgi(fake_serve["app"], "GET", "/api/jobs", headers={"Authorization": "Bearer env-token-4711"})[0] == 200
    rc = cli.main(["serve", "--port", str(_free_port()), "--data", str(tmp_path / "d5"), "--no-token"])
    assert rc == 2 and "JAXCLEAR_TOKEN" in capsys.readouterr().err
    monkeypatch.delenv("JAXCLEAR_TOKEN")
    tf = tmp_path / "token"
    tf.write_text("file-token-0815\n")
    assert (
        cli.main(["serve", "--port", str(_free_port()), "--data", str(tmp_path / "d6"), "--token-file", str(tf)]) == 0
    )
    assert "file-token-0815" not in capsys.readouterr().err
    assert asgi(fake_serve["app"], "GET", "/api/jobs", headers={"Authorization": "Bearer file-token-0815"})[0] == 200
    (tmp_path / "empty").write_text("\n")
    rc = cli.main(["serve", "--port", "1", "--data", str(tmp_path / "d7"), "--token-file", str(tmp_path / "empty")])
    assert rc == 2 and "empty" in capsys.readouterr().err
    # --token still works, with a warning that the process list shows it
    assert (
        cli.main(["serve", "--port", str(_free_port()), "--data", str(tmp_path / "d8"), "--token", "cli-tok-123"]) == 0
    )
    err = capsys.readouterr().err
    assert "warning" in err and "process list" in err and "cli-tok-123" not in err


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Loopback HTTP server: /go redirects to ``target``; anything else records its headers."""

    target = None
    seen = []

    def do_GET(self):
        if self.path.startswith("/go") and type(self).target:
            self.send_response(302)
            self.send_header("Location", type(self).target)
            self.end_headers()
            return
        type(self).seen.append((self.server.server_address[1], self.path, dict(self.headers)))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_client_drops_the_token_when_a_redirect_changes_host_or_port():
    """Before: urllib carried 'Authorization: Bearer …' to wherever a redirect pointed."""
    from jaxclear.client import Client

    servers = []
    for _ in range(2):
        h = type("H", (_Recorder,), {"seen": _Recorder.seen})
        s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
    a, b = (s.server_address[1] for s in servers)
    try:
        cases = (
            (f"http://127.0.0.1:{b}/api/health", False),  # another port
            (f"http://localhost:{a}/api/health", False),  # another host name
            (f"http://127.0.0.1:{a}/api/health", True),  # the same origin
        )
        for target, kept in cases:
            _Recorder.seen.clear()
            servers[0].RequestHandlerClass.target = target
            assert Client(f"http://127.0.0.1:{a}/go", token=TOKEN).health() == {"ok": True}
            (port, _, hdrs) = _Recorder.seen[-1]
            assert port == int(target.split(":")[2].split("/")[0])
            assert ("Authorization" in hdrs) == kept, (target, hdrs)
            if kept:
                assert hdrs["Authorization"] == f"Bearer {TOKEN}"
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


# ------------------------------------------------------------------------------------ item 6


def test_delete_a_job_and_retention(data):
    app = service.create_app(data, token=None, local_only=True)
    done = _row(
        data, status="done", finished=time.time(), **{"metrics.csv": b"a\n1\n", "store.zarr__c__0": b"x" * 5000}
    )
    running = _row(data, status="running", started=time.time())
    code, _, b = asgi(app, "DELETE", f"/api/jobs/{done}")
    rec = json.loads(b)
    assert code == 200 and rec["deleted"] and rec["status"] == "done" and rec["bytes_freed"] == 5004
    assert not service.job_dir(data, done).exists()
    assert asgi(app, "GET", f"/api/jobs/{done}")[0] == 404
    assert asgi(app, "DELETE", f"/api/jobs/{done}")[0] == 404
    code, _, b = asgi(app, "DELETE", f"/api/jobs/{running}")
    assert code == 409 and "running" in detail(b) and "cancel" in detail(b)
    assert service.job_dir(data, running).exists()
    queued = _row(data, status="queued")
    assert asgi(app, "DELETE", f"/api/jobs/{queued}")[0] == 200
    # retention: finished jobs older than the limit go, newer and unfinished ones stay
    now = time.time()
    old = [_row(data, status=s, finished=now - 31 * 86400) for s in ("done", "failed", "cancelled")]
    new = _row(data, status="done", finished=now - 29 * 86400)
    con = service.connect(data)
    assert sorted(service.purge_expired(con, data, 30 * 86400, now=now)) == sorted(old)
    left = {r["id"] for r in con.execute("SELECT id FROM jobs")}
    assert left == {new, running}
    assert all(not service.job_dir(data, j).exists() for j in old) and service.job_dir(data, new).exists()


def _plan_of(text, limits=None, set=(), rate=None):
    limits = limits or Limits()
    raw = service.parse_spec(json.dumps({"spec": text, "set": list(set)}).encode(), "application/json", limits)
    return service.validate_submission(raw, limits, rate)


MANY = TINY.replace("{ values = [1e-4, 2e-4, 3e-4, 5e-4] }", "{ linspace = [1e-4, 5e-4, 1000] }")


def test_chunk_count_and_file_overhead_are_limited():
    """Before: 1000 variants with chunk_size 1 were accepted and wrote 32k files, 134 MB (4 KiB
    blocks: the histories alone are small).  Now: more than --max-chunks chunks are refused,
    naming the smallest chunk size that fits, and the files' overhead counts in --max-store-bytes."""
    lim = Limits(max_variants=100_000)
    with pytest.raises(BadRequest) as e:
        _plan_of(MANY, lim, set=["integrator.chunk_size=1"])
    m = e.value.message
    assert e.value.status == 422
    assert "integrator.chunk_size = 1" in m and "1000 chunks" in m and "256" in m and ">= 4" in m, m
    _, _, pl, _ = _plan_of(MANY, lim, set=["integrator.chunk_size=4"])
    b, files = service.store_estimate(pl, 1)
    assert files == 250 * 35 and b >= files * 4096
    small = Limits(max_variants=100_000, max_store_bytes=8 * 2**20)
    with pytest.raises(BadRequest) as e:
        _plan_of(MANY, small, set=["integrator.chunk_size=4"])
    assert "8750 files" in e.value.message and "--max-store-bytes" in e.value.message
    _plan_of(MANY, small, set=["integrator.chunk_size=100"])  # 10 chunks: 350 files fit


def test_listing_never_walks_the_store(data, monkeypatch):
    big = {f"store.zarr__m__c{i}__0": b"." for i in range(300)}
    jid = _row(data, **{"metrics.csv": b"a\n", "plots__a.png": b"png", "summary.json": b"{}", **big})
    visited = []
    real = os.scandir

    def spy(p="."):
        visited.append(str(p))
        return real(p)

    monkeypatch.setattr(os, "scandir", spy)
    files = service.list_files(data, jid)
    assert [f["path"] for f in files] == ["metrics.csv", "plots/a.png", "summary.json"]
    assert visited and not any("store.zarr" in v for v in visited), visited


def test_store_zip_is_streamed_in_bounded_memory(data):
    """Before: store.zip was built in a BytesIO (peak RAM above the store's size per download).
    Now: yielded in ~1 MiB pieces; a 16 MiB store zips with a peak of a few MiB."""
    rnd = os.urandom(2**20)
    files = {f"store.zarr__h__c{i}__0": rnd[i:] + rnd[:i] for i in range(16)}
    files["store.zarr__zarr.json"] = b'{"zarr_format": 3}'
    jid = _row(data, **files)
    root = service.job_dir(data, jid) / "out" / "store.zarr"
    dest = data / "dl.zip"
    tracemalloc.start()
    try:
        with open(dest, "wb") as f:
            for piece in service.zip_stream(root):
                f.write(piece)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert dest.stat().st_size > 16 * 2**20
    assert peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    with zipfile.ZipFile(dest) as z:
        assert z.testzip() is None
        assert len(z.namelist()) == 17 and z.read("store.zarr/h/c7/0") == files["store.zarr__h__c7__0"]
    # the endpoint streams the same archive
    app = service.create_app(data, token=None, local_only=True)
    code, h, body = asgi(app, "GET", f"/api/jobs/{jid}/store.zip")
    assert code == 200 and h["content-type"] == "application/zip" and "content-length" not in h
    with zipfile.ZipFile(io.BytesIO(body)) as z:
        assert sorted(z.namelist()) == sorted(zipfile.ZipFile(dest).namelist())


def test_wall_time_limit_estimated_at_submit_and_enforced_while_running(data):
    """Before: no wall-time limit (1e12 variant-steps, ~41 days at the measured rate, accepted).
    Now: the estimate from this server's fastest recent chunk rate is refused above
    --max-job-seconds, and a job running past it is stopped and failed naming the limit."""
    con = service.connect(data)
    assert service.chunk_step_rate(con) is None  # nothing measured: no estimate, the run-time limit holds
    _row(data, status="done", vsps=8000.0, variants=4, spec={"integrator": {"chunk_size": 2}})
    _row(data, status="done", vsps=9000.0, variants=100, spec={"integrator": {"chunk_size": 0}})
    _row(data, status="failed", vsps=1e9, variants=1)
    rate = service.chunk_step_rate(con)
    assert rate == pytest.approx(4000.0)  # 8000 variant-steps/s over 2 variants per chunk
    lim = Limits(max_job_seconds=60)
    _plan_of(TINY, lim, rate=rate)  # 2 chunks × 2000 steps: ~1 s
    with pytest.raises(BadRequest) as e:
        _plan_of(TINY, lim, rate=rate, set=["integrator.t_end_s=0.4"])  # 2 chunks × 2e5 steps: 100 s
    m = e.value.message
    assert "~1.67 min" in m and "2 chunks × 200000 steps" in m and "--max-job-seconds" in m and "60 s" in m, m
    # through the API: the server's own rates are used; the estimate comes back with the job
    app = service.create_app(data, token=None, local_only=True)
    for text, code_ in ((TINY.replace("t_end_s = 4e-3", "t_end_s = 0.4"), 422), (TINY, 201)):
        code, _, b = asgi(
            service.create_app(data, token=None, local_only=True, limits=lim),
            "POST",
            "/api/jobs",
            text.encode(),
            {"Content-Type": "application/toml"},
        )
        assert code == code_, b
    assert json.loads(b)["estimated_s"] == pytest.approx(1.0)
    # while running: past the limit the job is asked to stop, then ends failed saying why
    now = time.time()
    slow = _row(data, status="running", started=now - 100)
    fresh = _row(data, status="running", started=now - 10)
    assert service.enforce_job_seconds(con, 60, now=now) == [slow]
    assert con.execute("SELECT cancel_requested FROM jobs WHERE id=?", (fresh,)).fetchone()[0] == 0
    service._finish(con, slow, "cancelled")  # what the worker does at its next chunk boundary
    service.enforce_job_seconds(con, 60, now=now + 1)
    r = con.execute("SELECT status, error FROM jobs WHERE id=?", (slow,)).fetchone()
    assert r["status"] == "failed" and "60 s" in r["error"] and "--max-job-seconds" in r["error"]
    assert json.loads(asgi(app, "GET", f"/api/jobs/{slow}")[2])["status"] == "failed"


# ------------------------------------------------------------------------------------ item 7


def test_deep_nesting_is_a_422_not_a_traceback(data, capsys):
    """Before: a deeply nested spec gave 500 and a 3,600-line traceback per request."""
    app = service.create_app(data, token=None, local_only=True)
    deep_json = b'{"spec": {"sweep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    deep_toml = b"a = " + b"[" * 20_000 + b"]" * 20_000 + b"\n"
    mid_toml = b'[sweep]\nname = "x"\n[model]\nk = ' + b"[" * 20 + b"1" + b"]" * 20 + b"\n"
    for body, ct in (
        (deep_json, "application/json"),
        (deep_toml, "application/toml"),
        (mid_toml, "application/toml"),
        (json.dumps({"spec": mid_toml.decode()}).encode(), "application/json"),
    ):
        code, _, b = asgi(app, "POST", "/api/jobs", body, {"Content-Type": ct})
        assert code == 422 and "limit of 16" in detail(b) and "nested" in detail(b), (code, b[:300])
        assert len(b) < 1000
    code, _, b = asgi(app, "POST", "/api/jobs", mid_toml, {"Content-Type": "application/toml"})
    assert detail(b).startswith("model.k[0]")
    assert "Traceback" not in capsys.readouterr().err


def test_name_and_description_are_capped_and_underscore_keys_refused_after_set():
    big = TINY.replace('name = "tiny"', 'name = "' + "n" * 200_000 + '"')
    with pytest.raises(BadRequest) as e:
        _plan_of(big, Limits(max_spec_bytes=300_000))
    assert e.value.status == 422 and "sweep.name" in e.value.message and "200000 characters" in e.value.message
    assert "limit is 200" in e.value.message
    with pytest.raises(BadRequest) as e:
        _plan_of(TINY, set=["sweep.description=" + "d" * 2001])
    assert "sweep.description" in e.value.message and "2001 characters" in e.value.message
    _plan_of(TINY, set=["sweep.name=" + "n" * 200, "sweep.description=" + "d" * 2000])
    # '_' keys: refused in the spec and when a 'set' makes one (before: kept silently in spec.json)
    for sets, key in ((["_base_dir.x=/etc"], "_base_dir:"), (["sweep._hidden=1"], "sweep._hidden")):
        with pytest.raises(BadRequest) as e:
            _plan_of(TINY, set=sets)
        assert e.value.status == 422 and e.value.message.startswith(key) and repr(sets[0]) in e.value.message
    with pytest.raises(BadRequest) as e:
        _plan_of(TINY.replace("[outputs]", "[outputs]\n_x = 1"))
    assert e.value.message.startswith("outputs._x")


def test_a_refused_second_server_leaves_the_lock_file_alone(tmp_path):
    """Before: the second server opened server.lock with 'w' (truncating it) before trying the lock."""
    d = tmp_path / "d"
    d.mkdir()
    held = service._lock_data(d)
    assert (d / "server.lock").read_text() == str(os.getpid())
    with pytest.raises(service.DataDirBusy) as e:
        service._lock_data(d)
    assert f"pid {os.getpid()}" in str(e.value)
    assert (d / "server.lock").read_text() == str(os.getpid())
    held.close()
    service._lock_data(d).close()  # free again once the first one let go


def test_busy_port_is_reported_before_workers_or_banner(fake_serve, tmp_path, capsys):
    """Before: the workers started and the banner was printed, then uvicorn failed to bind."""
    from jaxclear import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        rc = cli.main(["serve", "--port", str(port), "--data", str(tmp_path / "d"), "--no-token"])
    err = capsys.readouterr().err
    assert rc == 2 and f"--port {port}" in err and "cannot listen" in err, err
    assert "jaxclear serve: http" not in err and _FakeWorkers.made == []
    service._lock_data(tmp_path / "d").close()  # the data folder was let go


@pytest.fixture
def live(tmp_path):
    """The real uvicorn server of ``serve`` (make_server) in a thread on a loopback port:
    start(header_timeout, max_connections) -> port."""
    running = []

    def start(**kw):
        app = service.create_app(tmp_path / "data", token=None, local_only=True)
        srv = service.make_server(app, **kw)
        sock = service._bind("127.0.0.1", 0)
        t = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
        t.start()
        running.append((srv, t))
        t0 = time.monotonic()
        while not srv.started:
            assert time.monotonic() - t0 < 10
            time.sleep(0.02)
        return sock.getsockname()[1]

    yield start
    for srv, t in running:
        srv.should_exit = True
        t.join(10)


def _get(port, path="/api/health"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path)
    r = c.getresponse()
    out = r.status, r.getheader("Content-Security-Policy"), r.read()
    c.close()
    return out


def test_header_timeout_and_connection_limit(live):
    """Before: a connection that never finished its request head stayed open for good, and
    connections were unlimited."""
    port = live(header_timeout=0.5, max_connections=2)
    assert _get(port)[0] == 200
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # ... and never the end
    t0 = time.monotonic()
    assert s.recv(100) == b""  # closed by the server
    assert 0.3 < time.monotonic() - t0 < 3
    s.close()
    # a kept-alive connection gets the same time for its next request head
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/api/health")
    assert c.getresponse().read()
    t0 = time.monotonic()
    assert c.sock.recv(100) == b""
    assert time.monotonic() - t0 < 3
    c.close()
    # at most 2 connections: a third gets 503; once they are gone it is served
    port = live(header_timeout=5, max_connections=2)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    time.sleep(0.2)
    assert _get(port)[0] == 503
    for s in idle:
        s.close()
    time.sleep(0.2)
    assert _get(port)[0] == 200


def test_pages_cannot_be_framed(data):
    app = service.create_app(data, token=TOKEN)
    jid = _row(data)
    for path, hdrs in (
        ("/", {"Authorization": f"Bearer {TOKEN}"}),
        (f"/jobs/{jid}", {"Authorization": f"Bearer {TOKEN}"}),
        ("/api/jobs", {}),  # 401
        ("/nowhere", {"Authorization": f"Bearer {TOKEN}"}),  # 404
    ):
        code, h, _ = asgi(app, "GET", path, headers=hdrs)
        assert h["content-security-policy"] == "frame-ancestors 'none'" and h["x-frame-options"] == "DENY", (path, h)


# ---------------------------------------------------------------------------- the real server


@pytest.mark.slow  # one real `jaxclear serve` and a refused second one, ~10 s
def test_real_server_token_banner_and_lock(tmp_path):
    import subprocess

    port = _free_port()
    data = tmp_path / "data"
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k != "JAXCLEAR_TOKEN"}
    cmd = [sys.executable, "-m", "jaxclear.cli", "serve", "--data", str(data), "--cache-dir", str(tmp_path / "c")]
    with open(log, "wb") as f:
        p = subprocess.Popen([*cmd, "--port", str(port)], cwd=ROOT, stdout=f, stderr=f, env=env)
    try:
        t0 = time.monotonic()
        while "?token=" not in log.read_text():
            assert p.poll() is None and time.monotonic() - t0 < 60, log.read_text()
            time.sleep(0.1)
        lines = log.read_text().splitlines()
        login = [ln for ln in lines if "?token=" in ln]
        assert len(login) == 1, lines
        tok = login[0].split("?token=")[1].strip()
        url = f"http://127.0.0.1:{port}"
        assert login[0].endswith(f"{url}/?token={tok}")
        # the port answers as soon as the banner is out
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/api/jobs")
        r = c.getresponse()
        assert r.status == 401 and r.getheader("Content-Security-Policy") == "frame-ancestors 'none'"
        r.read()
        c.request("GET", "/api/jobs", headers={"Authorization": f"Bearer {tok}"})
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.read())["jobs"] == []
        c.close()
        lock = (data / "server.lock").read_text()
        assert lock == str(p.pid)
        second = subprocess.run(
            [*cmd, "--port", str(_free_port())], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
        )
        assert second.returncode == 2 and "in use" in second.stderr and f"pid {p.pid}" in second.stderr
        assert (data / "server.lock").read_text() == lock
        assert "?token=" not in second.stderr  # refused before any token or banner
        assert "?token=" not in log.read_text().split(login[0], 1)[1]  # printed once
    finally:
        p.terminate()
        p.wait(20)
