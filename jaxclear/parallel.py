"""Execution across devices and hosts: local device mesh, jax.distributed, the compile cache.

Devices.  A sweep chunk (the variant axis of every params leaf) is split over all *local*
devices with ``NamedSharding(Mesh(local_devices, ("variant",)), P("variant"))``; variants are
independent, so the jitted ``vmap(simulate)`` runs without any collective and XLA (GSPMD) keeps
each device's slice on that device.  A chunk is padded to a multiple of the device count by
repeating its last variant (the padding rows are dropped before anything is stored), so the
store's chunking does not depend on the device count and a run can resume on another machine.

Hosts.  ``initialize`` calls ``jax.distributed.initialize`` (one process per host; with no
arguments JAX detects SLURM, Open MPI and the JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES /
JAX_PROCESS_ID environment).  Every process computes on its own local devices only: process i
takes pending chunks i, i + P, i + 2P, ... and writes them into the shared store itself, so no
data crosses hosts except through the (shared) file system; ``barrier`` keeps the phases of a
run in step (store created → chunks written → outputs).

Compile cache.  ``enable_compile_cache`` points JAX's persistent compilation cache at a
directory (``$JAXCLEAR_CACHE_DIR``, default ``~/.cache/jaxclear/xla``), so a second run of the
same model structure loads the executable instead of compiling it again.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = [
    "initialize",
    "process_index",
    "process_count",
    "local_mesh",
    "variant_sharding",
    "padded_size",
    "my_chunks",
    "barrier",
    "gather_rows",
    "enable_compile_cache",
    "default_cache_dir",
    "auto_chunk_size",
]

AXIS = "variant"


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    timeout_s: int = 300,
):
    """Join a multi-process run (``jax.distributed.initialize``); call before any computation.

    coordinator: "host:port" of process 0; num_processes, process_id: this run's size and rank.
    All None: JAX auto-detects the cluster (SLURM, Open MPI, JAX_* environment variables).
    """
    if num_processes is not None and num_processes < 1:
        raise ValueError(f"num_processes = {num_processes!r}: must be >= 1")
    if process_id is not None and num_processes is not None and not 0 <= process_id < num_processes:
        raise ValueError(f"process_id = {process_id!r}: allowed 0..{num_processes - 1}")
    kw = dict(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)
    try:
        jax.distributed.initialize(**kw, initialization_timeout=int(timeout_s))
    except TypeError:  # older jax without initialization_timeout
        jax.distributed.initialize(**kw)


_CPU_CHOICE: dict = {}


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask; os.cpu_count() elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


def set_cpu_devices(n: int | None = None, source: str | None = None) -> dict:
    """Split the host CPU into ``n`` XLA devices (default: every usable core) so a sweep chunk is
    sharded over the cores (``variant_sharding``), before JAX initialises its backends.

    The CPU backend runs one device's computation on one thread at a time for this sequential
    step loop; N host devices run N slices of the chunk side by side.  Returns the choice
    {"requested", "source", "applied"} (also in summary.json); ``applied`` is False when JAX had
    already started (the count in effect is then ``jax.device_count()``).  Without effect on
    GPU/TPU runs, which use their accelerators."""
    source = source or ("--cpu-devices" if n else "usable cores")
    n = int(n) if n else usable_cores()
    if n < 1:
        raise ValueError(f"cpu_devices = {n}: expected >= 1")
    applied = not _backends_started()
    if applied:
        try:
            jax.config.update("jax_num_cpu_devices", n)
        except (AttributeError, KeyError):  # older jax: the XLA flag
            flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
            os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={n}"])
    _CPU_CHOICE.clear()
    _CPU_CHOICE.update({"requested": n, "source": source, "applied": applied, "usable_cores": usable_cores()})
    return dict(_CPU_CHOICE)


def cpu_devices_choice() -> dict | None:
    """The last ``set_cpu_devices`` choice, None when the library ran with JAX's default."""
    return dict(_CPU_CHOICE) if _CPU_CHOICE else None


def process_index() -> int:
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def local_mesh() -> Mesh:
    """1-D mesh over this process's devices, axis "variant"."""
    return Mesh(np.array(jax.local_devices()), (AXIS,))


def variant_sharding(mesh: Mesh | None = None) -> NamedSharding:
    """Leading (variant) axis split over the mesh, everything else replicated."""
    return NamedSharding(mesh if mesh is not None else local_mesh(), PartitionSpec(AXIS))


def padded_size(chunk_size: int, n_devices: int) -> int:
    """Smallest multiple of n_devices ≥ chunk_size: the executed (padded) chunk length."""
    return int(math.ceil(chunk_size / n_devices) * n_devices)


def my_chunks(pending, index: int | None = None, count: int | None = None):
    """This process's share of the pending chunk indices: every count-th, starting at index."""
    index = process_index() if index is None else index
    count = process_count() if count is None else count
    return list(pending)[index::count]


def barrier(name: str):
    """Wait until every process reaches ``name`` (no-op in a single-process run)."""
    if process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def gather_rows(values):
    """A small float vector from every process, stacked: (process_count, len(values))."""
    v = np.asarray(values, np.float64).reshape(1, -1)
    if process_count() == 1:
        return v
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(v[0])).reshape(process_count(), -1)


def default_cache_dir() -> Path:
    env = os.environ.get("JAXCLEAR_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxclear" / "xla"


_CACHE_DIR: list = [None]


def enable_compile_cache(path=None) -> Path | None:
    """Turn on JAX's persistent compilation cache in ``path`` (default ``default_cache_dir()``);
    ``path`` = "off" / "none" / False disables it.  Entries of any compile time are kept.
    Returns the directory in use.  JAX reads the setting when it first compiles: set it once,
    before the first computation of the process (``sweep.run`` and the CLI do)."""
    if path is False or (isinstance(path, str) and path.lower() in ("off", "none", "")):
        return None
    d = Path(path) if path not in (None, True) else default_cache_dir()
    if _CACHE_DIR[0] == d:
        return d
    d.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(d))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    try:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except AttributeError:  # older jax: no size threshold
        pass
    try:  # JAX latches "no cache" at its first compile: re-arm it for a dir set later
        from jax._src import compilation_cache as _cc

        if hasattr(_cc, "reset_cache"):
            _cc.reset_cache()
    except ImportError:
        pass
    _CACHE_DIR[0] = d
    return d


# Measured (benchmarks/README.md): on a 2-core CPU 1024 variants per chunk is the sweet spot;
# at 4096 the working set leaves the cache and the rate drops ~3x.
CPU_CHUNK = 1024
ACCELERATOR_CHUNK_MAX = 65536


def auto_chunk_size(n_variants: int, bytes_per_variant: float, devices=None, memory_fraction: float = 0.4) -> int:
    """Chunk size when ``integrator.chunk_size = 0``: CPU: 1024 variants per process (cache
    sweet spot); accelerators: per device as many as ``memory_fraction`` of its memory holds
    (``bytes_per_variant``: outputs + params + carry), at most 65536; never above n_variants,
    and a multiple of the local device count where n_variants allows."""
    devices = list(devices) if devices is not None else jax.local_devices()
    nd = len(devices)
    if devices[0].platform == "cpu":
        cs = CPU_CHUNK
    else:
        limit = None
        try:
            limit = (devices[0].memory_stats() or {}).get("bytes_limit")
        except Exception:  # backend without memory stats
            limit = None
        per_dev = ACCELERATOR_CHUNK_MAX if not limit else int(memory_fraction * limit / max(bytes_per_variant, 1.0))
        cs = max(1, min(ACCELERATOR_CHUNK_MAX, per_dev)) * nd
    cs = min(cs, n_variants)
    if cs >= nd:
        cs = cs // nd * nd
    return max(1, cs)
