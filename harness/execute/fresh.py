"""The fresh strategy: a new in-process cloud per item, in worker subprocesses.

Workers (``python -m harness.front.worker``) get a deterministic share of
the items (round-robin by position) and answer one JSON line per item, so
verdicts do not depend on the number of workers. The backend is passed
down, since Nova fixes it at import time.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading

from harness.errors import reason_of
from harness.execute.campaign import run_item, trace_key
from harness.execute.record import Record


def run_here(items, traces, on_result, timeout):
    """One item after another in this process (a worker's share)."""
    out = []
    for item in items:
        record = run_item(item, traces.get(trace_key(item.scenario, item.window)), timeout=timeout)
        on_result(record)
        out.append(record)
    return out


def sweep(items, traces, jobs, backend, on_result, timeout, parents=None, memo=False) -> list:
    """Run ``items`` (fresh environments) over ``jobs`` workers, calling ``on_result``.

    Every item builds its own cloud: no prefix is shared, so ``parents``
    gets nothing.
    """
    if jobs <= 1 or len(items) <= 1:
        return run_here(items, traces, on_result, timeout)
    timeout_per_item = 2 * timeout  # a fresh environment's setup comes on top
    shares = [items[i::jobs] for i in range(jobs)]
    results, lock = {}, threading.Lock()
    procs = []
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    for share in shares:
        if not share:
            continue
        # its stderr is kept (in a file: Nova's chatter must not fill a pipe) for its reason
        errors = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.front.worker", "--backend", backend],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            text=True, env=env)
        proc.stdin.write(json.dumps({"items": [i.id for i in share], "traces": traces,
                                     "timeout": timeout}))
        proc.stdin.close()
        procs.append((proc, share, errors))

    def reader(proc, share, errors):
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            record = Record.from_json(json.loads(line))
            with lock:
                results[record.item.id] = record
                on_result(record)
        proc.wait()
        errors.seek(0)
        why = reason_of(proc.returncode, errors.read())
        with lock:  # a worker that died leaves its remaining items as errors, saying why
            for item in share:
                if item.id not in results:
                    record = Record.error(item, f"its worker stopped before it: {why}")
                    results[item.id] = record
                    on_result(record)

    threads = [threading.Thread(target=reader, args=p, daemon=True) for p in procs]
    for t in threads:
        t.start()
    try:
        for t, (proc, share, _) in zip(threads, procs):
            t.join(timeout_per_item * len(share) + 60)
            if t.is_alive():
                proc.kill()
                t.join(10)
    finally:
        for proc, _, errors in procs:
            if proc.poll() is None:
                proc.kill()
            errors.close()
    return [results[i.id] for i in items if i.id in results]
