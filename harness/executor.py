"""Run campaign items: in this process, or spread over worker processes.

Workers are plain subprocesses (``python -m harness.worker``) that get a
deterministic share of the items (round-robin by position) and answer one
JSON line per item, so verdicts do not depend on the number of workers.
The backend is passed down, since Nova fixes it at import time.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading

from harness.campaign import Item, run_item, trace_key


@dataclasses.dataclass
class Record:
    """A finished item as the parent sees it (from JSON, wherever it ran)."""

    item: Item
    verdict: str
    problems: list
    known: list
    seconds: float
    data: dict

    @classmethod
    def from_json(cls, data: dict) -> "Record":
        return cls(Item.parse(data["id"]), data["verdict"], data["problems"], data["known"],
                   data["seconds"], data)

    def to_json(self) -> dict:
        return self.data

    @classmethod
    def error(cls, item: Item, why: str) -> "Record":
        """An item that produced no judged result (its process died, its point was missed)."""
        return cls(item, "error", [f"error: {why}"], [], 0.0,
                   {"id": item.id, "verdict": "error", "problems": [f"error: {why}"],
                    "known": [], "seconds": 0.0})

    @property
    def fired(self) -> list:
        return self.data.get("fired", [])


#: seconds one item may take before it is a reported failure (``run --timeout``)
ITEM_TIMEOUT = 120.0


def cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def jobs_value(text: str) -> int:
    if text == "auto":
        return cores()
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def run_local(items, traces, on_result, timeout=ITEM_TIMEOUT):
    """``traces``: ``{trace_key: {ending: [point ids]}}`` from discovery."""
    out = []
    for item in items:
        record = Record.from_json(
            run_item(item, traces.get(trace_key(item.scenario, item.window)),
                     timeout=timeout).to_json())
        on_result(record)
        out.append(record)
    return out


MODES = ("fork", "fresh")


def default_mode() -> str:
    from harness import forking
    return "fork" if forking.fork_supported() else "fresh"


def run_items(items, traces, jobs, backend, on_result, mode=None, timeout=ITEM_TIMEOUT):
    """Run ``items`` in ``mode``: ``fork`` (prefix reuse, eventlet) or ``fresh``.

    ``fork`` runs each scenario's prefix once here and forks up to ``jobs``
    children at a time; ``fresh`` builds a new environment per item, spread
    over ``jobs`` worker processes.
    """
    from harness import forking
    mode = mode or default_mode()
    if mode == "fork":
        if not forking.fork_supported():
            from harness.errors import UsageError
            raise UsageError("--mode fork needs os.fork (not on this platform); use --mode fresh")
        return forking.sweep(items, lambda scen, window: traces[trace_key(scen.name, window)],
                             jobs, on_result, timeout)
    return run_parallel(items, traces, jobs, backend, on_result, timeout)


def run_parallel(items, traces, jobs, backend, on_result, timeout=ITEM_TIMEOUT):
    """Run ``items`` (fresh environments) over ``jobs`` workers, calling ``on_result``."""
    if jobs <= 1 or len(items) <= 1:
        return run_local(items, traces, on_result, timeout)
    timeout_per_item = 2 * timeout  # a fresh environment's setup comes on top
    shares = [items[i::jobs] for i in range(jobs)]
    results, lock = {}, threading.Lock()
    procs = []
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    for share in shares:
        if not share:
            continue
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.worker", "--backend", backend],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env)
        proc.stdin.write(json.dumps({"items": [i.id for i in share], "traces": traces,
                                     "timeout": timeout}))
        proc.stdin.close()
        procs.append((proc, share))

    def reader(proc, share):
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            record = Record.from_json(json.loads(line))
            with lock:
                results[record.item.id] = record
                on_result(record)
        proc.wait()
        with lock:  # a worker that died leaves its remaining items as errors
            for item in share:
                if item.id not in results:
                    record = Record.error(item, f"worker exited with {proc.returncode} "
                                                "before finishing this item")
                    results[item.id] = record
                    on_result(record)

    threads = [threading.Thread(target=reader, args=p, daemon=True) for p in procs]
    for t in threads:
        t.start()
    try:
        for t, (proc, share) in zip(threads, procs):
            t.join(timeout_per_item * len(share) + 60)
            if t.is_alive():
                proc.kill()
                t.join(10)
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
    return [results[i.id] for i in items if i.id in results]
