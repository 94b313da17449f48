"""Python client of the sweep service (``jaxclear serve``), standard library + NumPy only (no JAX
import), for notebooks and scripts::

    from jaxclear.client import Client
    c = Client("http://127.0.0.1:8642", token=None)
    job = c.submit("sweeps/default.toml", set=["integrator.t_end_s=0.01"])   # path, TOML text or dict
    job.wait()                       # until done (raises JobFailed when failed / cancelled)
    job.progress()                   # {"status", "variants_done", "variants_total", "variant_steps_per_s", "eta_s", ...}
    m = job.metrics()                # Metrics: m["peak_contact_force_N"] -> np.ndarray, m.to_pandas()
    job.download("plots/contact_force.png", "cf.png")
"""

from __future__ import annotations

import csv
import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np


class ServiceError(Exception):
    """An HTTP error from the service: ``status`` and the server's ``detail`` message."""

    def __init__(self, status, detail):
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class JobFailed(Exception):
    """Job.wait() on a job that ended failed or cancelled."""


def parse_csv(text: str) -> dict:
    """metrics.csv text -> {column: np.ndarray} (true/false columns as bool, others float)."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return {}
    keys, body = rows[0], [r for r in rows[1:] if r]
    out = {}
    for j, k in enumerate(keys):
        col = [r[j] for r in body]
        if col and all(c in ("true", "false") for c in col):
            out[k] = np.array([c == "true" for c in col])
        else:
            out[k] = np.array([float(c) for c in col], dtype=float)
    return out


class Metrics(dict):
    """The metrics table: {column: np.ndarray (n_variants,)} in metrics.csv order, plus
    ``columns``, ``len()`` (rows), ``row(i)``, ``to_numpy()`` (structured array) and
    ``to_pandas()`` (needs pandas)."""

    @property
    def columns(self):
        return list(self)

    def __len__(self):  # rows, like a data frame
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def row(self, i):
        return {k: v[i] for k, v in self.items()}

    def to_numpy(self):
        return np.rec.fromarrays(list(self.values()), names=list(self))

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(dict(self))


def _origin(url):
    u = urllib.parse.urlsplit(url)
    return u.scheme, (u.hostname or "").lower(), u.port or {"http": 80, "https": 443}.get(u.scheme)


class _SameOriginAuth(urllib.request.HTTPRedirectHandler):
    """Redirects followed as urllib does, but the Authorization header goes only to the origin
    (scheme, host, port) it was meant for: a redirect elsewhere never carries the token."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            for k in list(new.headers):
                if k.lower() == "authorization":
                    del new.headers[k]
            for k in list(new.unredirected_hdrs):
                if k.lower() == "authorization":
                    del new.unredirected_hdrs[k]
        return new


class Client:
    """A connection to a jaxclear service at ``url`` (``http://host:port``), with an optional
    bearer ``token``.  Redirects to another host or port are followed without the token."""

    def __init__(self, url="http://127.0.0.1:8642", token=None, timeout=60.0):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout
        self._opener = urllib.request.build_opener(_SameOriginAuth)

    def _request(self, method, path, body=None, content_type=None):
        req = urllib.request.Request(self.url + path, data=body, method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if content_type:
            req.add_header("Content-Type", content_type)
        try:
            with self._opener.open(req, timeout=self.timeout) as r:
                return r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                detail = json.loads(raw).get("detail", raw.decode(errors="replace"))
            except ValueError:
                detail = raw.decode(errors="replace")
            raise ServiceError(e.code, detail) from None

    def _json(self, method, path, body=None, content_type=None):
        raw, _ = self._request(method, path, body, content_type)
        return json.loads(raw)

    def submit(self, spec, set=()) -> Job:
        """Submit a spec: a path to a TOML file, TOML text, or a dict of tables; ``set``: overrides
        ``["key=value", ...]`` as in ``jaxclear run --set``.  Returns the queued Job (ServiceError
        422 naming the key for a bad spec)."""
        if isinstance(spec, dict):
            body = {"spec": spec, "set": list(set)}
        else:
            text = str(spec)
            if "\n" not in text and Path(text).is_file():
                text = Path(text).read_text()
            body = {"spec": text, "set": list(set)}
        rec = self._json("POST", "/api/jobs", json.dumps(body).encode(), "application/json")
        return Job(self, rec["id"], rec)

    def job(self, job_id) -> Job:
        return Job(self, job_id)

    def jobs(self, status=None):
        q = f"?status={urllib.parse.quote(status)}" if status else ""
        return [Job(self, r["id"], r) for r in self._json("GET", "/api/jobs" + q)["jobs"]]

    def health(self):
        return self._json("GET", "/api/health")


class Job:
    """A submitted job; ``info`` is the last status fetched."""

    def __init__(self, client: Client, job_id: str, info=None):
        self.client, self.id, self.info = client, job_id, info

    def __repr__(self):
        st = self.info["status"] if self.info else "?"
        return f"Job({self.id!r}, {st})"

    def status(self) -> dict:
        self.info = self.client._json("GET", f"/api/jobs/{self.id}")
        return self.info

    def progress(self) -> dict:
        """status, variants_done, variants_total, progress (0..1), variant_steps_per_s, eta_s, error."""
        s = self.status()
        return {
            k: s.get(k)
            for k in (
                "status",
                "variants_done",
                "variants_total",
                "progress",
                "variant_steps_per_s",
                "eta_s",
                "error",
                "queue_position",
            )
        }

    def wait(self, timeout=None, poll_s=0.5, raise_on_failure=True) -> dict:
        """Poll until the job is done, failed or cancelled; returns its status.  TimeoutError after
        ``timeout`` seconds; JobFailed (with the server's error) when it did not finish done."""
        t0 = time.monotonic()
        while True:
            s = self.status()
            if s["status"] in ("done", "failed", "cancelled"):
                if raise_on_failure and s["status"] != "done":
                    raise JobFailed(f"job {self.id} {s['status']}: {s.get('error') or ''}".rstrip(": "))
                return s
            if timeout is not None and time.monotonic() - t0 > timeout:
                raise TimeoutError(
                    f"job {self.id} still {s['status']} after {timeout} s "
                    f"({s['variants_done']}/{s['variants_total']} variants)"
                )
            time.sleep(poll_s)

    def cancel(self) -> dict:
        self.info = self.client._json("POST", f"/api/jobs/{self.id}/cancel")
        return self.info

    def delete(self) -> dict:
        """Delete the job and its files on the server (ServiceError 409 while it runs: cancel first)."""
        return self.client._json("DELETE", f"/api/jobs/{self.id}")

    def files(self):
        return [f["path"] for f in self.client._json("GET", f"/api/jobs/{self.id}/files")["files"]]

    def fetch(self, path) -> bytes:
        """The bytes of one result file (``metrics.csv``, ``summary.json``, ``plots/<name>.png``)."""
        return self.client._request("GET", f"/api/jobs/{self.id}/files/{urllib.parse.quote(path)}")[0]

    def download(self, path, dest) -> Path:
        dest = Path(dest)
        dest.write_bytes(self.fetch(path))
        return dest

    def download_store(self, dest) -> Path:
        """The job's store.zarr, unpacked into ``dest`` (a folder): ``jaxclear.sweep.load(dest)`` reads it."""
        import zipfile

        raw = self.client._request("GET", f"/api/jobs/{self.id}/store.zip")[0]
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            z.extractall(dest)
        return dest

    def metrics(self) -> Metrics:
        return Metrics(parse_csv(self.fetch("metrics.csv").decode()))

    def summary(self) -> dict:
        return json.loads(self.fetch("summary.json"))
