"""Test helper: SIGKILL a ``jaxclear run`` subprocess as soon as its first chunk is done."""

import os
import signal
import time


def kill_after_first_chunk(proc, out, timeout_s=400):
    """Wait until ``out/progress.jsonl`` has a line, then SIGKILL ``proc`` (AssertionError when
    the run ends first or no chunk finishes within ``timeout_s``)."""
    plog = out / "progress.jsonl"
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no chunk finished in time"
            if plog.exists() and plog.read_text().count("\n") >= 1:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
