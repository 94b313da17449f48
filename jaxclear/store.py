"""The result store of a sweep: a chunked zarr (v3) group in ``DIR/store.zarr``.

Layout (``n`` variants, ``s`` saved samples, ``C`` channels, ``K = ceil(n / chunk_size)``)::

    store.zarr/                 root attrs: format, spec (JSON text), spec_hash, version, name,
                                n_variants, chunk_size, n_chunks, axes, joints, dt_s, save_every
      t_s           (s,)        sample times [s]
      chunk_done    (K,) bool   completion flag of each sweep chunk; zarr chunks of 1 element
      inputs/<col>  (n,)        swept input values (``clearance_m``, ...), written at creation
      metrics/<col> (n,)        one array per metrics.csv column (attr ``column_index`` keeps the order)
      histories     (n, s, C)   dimension_names (variant, time, channel); attr ``channels`` names
                                the C columns: scalar channels by name (``crank_angle_rad``),
                                joint-wise channels once per clearance joint
                                (``contact_force_N[rod_slider]``); attr ``sources`` maps each
                                column back to [channel, joint or null]

Every variant-axis array is chunked by the sweep's ``chunk_size`` (full time and channel axes),
so sweep chunk ``ci`` owns exactly one file of each array plus one file of ``chunk_done``:
writers of different chunks (later: other hosts) never touch the same file.

Atomicity.  zarr's LocalStore (zarr 3.1, ``zarr/storage/_local.py``, ``_atomic_write``) writes
every file to ``<key>.<uuid>.partial`` and ``os.replace``s it into place, so a single file is
never seen half written (it is not fsync'ed).  A sweep chunk is several files, so a chunk is
written data first (every array) and its ``chunk_done[ci]`` flag last; only chunks whose flag is
set count as done, and a resumed run recomputes every other chunk and rewrites all of its files.
A process killed at any point therefore leaves either a done chunk whose data is complete, or a
not-done chunk whose (possibly partial, possibly stale) data is replaced entirely on resume.
This holds for killed processes; surviving an OS crash or power loss would also need fsync.
Data arrays (metrics, histories) are created by the first writer of a chunk, from its data;
every writer would create identical metadata and creation never overwrites an existing array.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import uuid
from pathlib import Path

import numpy as np


class _LazyZarr:
    """zarr, imported on first use: a spec error (which never touches the store) is reported
    without paying for zarr's import; None-like when zarr is missing (a GPU box with jax alone
    computes without it, the store needs it)."""

    _mod = False

    def _load(self):
        if _LazyZarr._mod is False:
            try:
                import zarr as z
                import zarr.errors  # noqa: F401

                _LazyZarr._mod = z
            except ImportError:
                _LazyZarr._mod = None
        return _LazyZarr._mod

    def __getattr__(self, name):
        mod = self._load()
        if mod is None:
            raise ImportError("the result store needs zarr: pip install 'zarr>=3'")
        return getattr(mod, name)

    @property
    def missing(self):
        return self._load() is None


zarr = _LazyZarr()

FORMAT = 1
NAME = "store.zarr"


def path_of(out) -> Path:
    """The store of an output directory (or the store path itself)."""
    p = Path(out)
    return p if p.name == NAME else p / NAME


def exists(out) -> bool:
    return (path_of(out) / "zarr.json").exists()


def create(
    out,
    *,
    spec_json,
    spec_hash,
    version,
    name,
    n_variants,
    chunk_size,
    t_s,
    inputs,
    joints,
    dt_s,
    save_every,
    base_dir=".",
):
    """A new empty store (an existing one at that path is deleted first)."""
    _need_zarr()
    n_chunks = math.ceil(n_variants / chunk_size)
    with built_in_place(
        path_of(out),
        {
            "format": FORMAT,
            "spec": spec_json,
            "spec_hash": spec_hash,
            "version": version,
            "name": name,
            "n_variants": int(n_variants),
            "chunk_size": int(chunk_size),
            "n_chunks": int(n_chunks),
            "axes": list(inputs),
            "joints": list(joints),
            "dt_s": float(dt_s),
            "save_every": int(save_every),
            "base_dir": str(base_dir),
        },
    ) as g:
        t_s = np.asarray(t_s, np.float64)
        g.create_array("t_s", shape=t_s.shape, dtype=t_s.dtype, chunks=(max(1, t_s.size),), dimension_names=("time",))[
            ...
        ] = t_s
        g.create_array(
            "chunk_done", shape=(n_chunks,), dtype=bool, chunks=(1,), fill_value=False, dimension_names=("chunk",)
        )
        gi = g.create_group("inputs")
        g.create_group("metrics")
        for col, v in inputs.items():
            v = np.asarray(v)
            gi.create_array(
                col, shape=v.shape, dtype=v.dtype, chunks=(chunk_size,), fill_value=np.nan, dimension_names=("variant",)
            )[...] = v
    return open(out)


@contextlib.contextmanager
def built_in_place(path: Path, attributes: dict):
    """A new zarr group for the block to fill, built under ``<path>.<uuid>.partial`` and renamed
    to ``path`` when the block ends (an existing store there deleted first): a store either
    exists whole or not at all.  An exception leaves the temporary for ``remove_partial``."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.partial")
    yield zarr.open_group(str(tmp), mode="w", zarr_format=3, attributes=attributes)
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)


def _need_zarr():
    if zarr.missing:
        raise ImportError(
            "the result store (--out DIR) needs zarr >= 3: pip install 'zarr>=3' "
            "(a sweep without an output directory runs without it)"
        )


def open(out, mode="r+"):  # noqa: A001 (module-level, like zarr.open)
    path = path_of(out)
    if not (path / "zarr.json").exists():
        raise FileNotFoundError(f"no result store at {path}")
    _need_zarr()
    g = zarr.open_group(str(path), mode=mode, zarr_format=3)
    if g.attrs.get("format") != FORMAT:
        raise ValueError(f"{path}: store format {g.attrs.get('format')!r}, this jaxclear reads format {FORMAT}")
    return g


def remove_partial_files(out):
    """Delete the ``*.partial`` temporaries a killed writer left behind (zarr never reads them):
    files inside the store, half-built stores next to it.  Single-writer only: with several
    concurrent writers (multi-host) this would delete another writer's file in flight, so a
    multi-host runner calls it once, from the coordinator, before the workers start."""
    remove_partial(path_of(out))


def remove_partial(path: Path):
    """``remove_partial_files`` of the store at ``path`` (any zarr store built by
    ``built_in_place``)."""
    for d in path.parent.glob(f"{path.name}.*.partial"):
        shutil.rmtree(d, ignore_errors=True)
    if path.exists():
        for f in path.rglob("*.partial"):
            f.unlink(missing_ok=True)


def attrs(g) -> dict:
    return dict(g.attrs)


def done_flags(g) -> np.ndarray:
    return np.asarray(g["chunk_done"][...], bool)


def chunk_range(g, ci):
    cs, n = g.attrs["chunk_size"], g.attrs["n_variants"]
    return ci * cs, min(n, (ci + 1) * cs)


def _require(g, name, shape, dtype, chunks, fill, dims, attributes):
    try:
        return g[name]
    except KeyError:
        pass
    try:
        return g.create_array(
            name,
            shape=shape,
            dtype=dtype,
            chunks=chunks,
            fill_value=fill,
            dimension_names=dims,
            attributes=attributes,
            overwrite=False,
        )
    except (zarr.errors.ContainsArrayError, zarr.errors.ContainsGroupError, FileExistsError):
        return g[name]


def _fill(dtype):
    dtype = np.dtype(dtype)
    return False if dtype.kind == "b" else (np.nan if dtype.kind in "fc" else 0)


def expand_channels(hists, joints):
    """{channel: (b, s) | (b, s, J)} -> (names, sources, (b, s, C) array)."""
    names, sources, cols = [], [], []
    for k, v in hists.items():
        v = np.asarray(v)
        if v.ndim == 2:
            names.append(k)
            sources.append([k, None])
            cols.append(v)
        else:
            for j in range(v.shape[2]):
                jn = joints[j] if j < len(joints) else str(j)
                names.append(f"{k}[{jn}]")
                sources.append([k, jn])
                cols.append(v[:, :, j])
    return names, sources, np.stack(cols, axis=-1)


def write_chunk(g, ci, metrics, hists):
    """Write chunk ``ci``'s metrics and histories (all of its rows). Does not mark it done."""
    a, b = chunk_range(g, ci)
    cs, n = g.attrs["chunk_size"], g.attrs["n_variants"]
    gm = g["metrics"]
    for i, (col, v) in enumerate(metrics.items()):
        v = np.asarray(v)
        assert v.shape == (b - a,), (col, v.shape)
        arr = _require(gm, col, (n,), v.dtype, (cs,), _fill(v.dtype), ("variant",), {"column_index": i})
        arr[a:b] = v
    if hists:
        names, sources, data = expand_channels(hists, g.attrs["joints"])
        arr = _require(
            g,
            "histories",
            (n,) + data.shape[1:],
            data.dtype,
            (cs,) + data.shape[1:],
            np.nan,
            ("variant", "time", "channel"),
            {"channels": names, "sources": sources},
        )
        if list(arr.attrs["channels"]) != names:
            raise ValueError(f"histories channels {names} differ from the store's {arr.attrs['channels']}")
        arr[a:b] = data


def mark_done(g, ci):
    """Set chunk ``ci``'s completion flag: call only after ``write_chunk`` returned."""
    g["chunk_done"][ci] = True


def read(g, histories=True):
    """Everything in the store as numpy: dict with attrs, t_s, chunk_done, variant_done (n,) bool,
    inputs, metrics ({col: (n,)}, NaN / False / (int -> float NaN) where not done),
    histories ({channel: (n, s) | (n, s, J)}, NaN where not done)."""
    at = attrs(g)
    n, cs = at["n_variants"], at["chunk_size"]
    done = done_flags(g)
    vdone = np.repeat(done, cs)[:n]
    inputs = {c: np.asarray(g["inputs"][c][...]) for c in at["axes"]}
    gm = g["metrics"]
    cols = sorted(gm.array_keys(), key=lambda c: gm[c].attrs.get("column_index", 0))
    metrics = {}
    for c in cols:
        v = np.asarray(gm[c][...])
        if not vdone.all():
            if v.dtype == bool:
                v = v & vdone
            else:
                v = v.astype(np.float64) if v.dtype.kind in "iu" else v.copy()
                v[~vdone] = np.nan
        metrics[c] = v
    hists = {}
    if histories and "histories" in g:
        arr = g["histories"]
        data = np.asarray(arr[...])
        if not vdone.all():
            data[~vdone] = np.nan
        hists = collapse_channels(data, arr.attrs["sources"])
    return {
        "attrs": at,
        "t_s": np.asarray(g["t_s"][...]),
        "chunk_done": done,
        "variant_done": vdone,
        "inputs": inputs,
        "metrics": metrics,
        "histories": hists,
    }


def collapse_channels(data, sources):
    """Inverse of ``expand_channels``: (n, s, C) -> {channel: (n, s) | (n, s, J)}."""
    out, idx = {}, {}
    for c, (ch, jn) in enumerate(sources):
        idx.setdefault(ch, []).append((c, jn))
    for ch, lst in idx.items():
        if lst[0][1] is None:
            out[ch] = data[:, :, lst[0][0]]
        else:
            out[ch] = data[:, :, [c for c, _ in lst]]
    return out


def spec_of(g) -> dict:
    return json.loads(g.attrs["spec"])
