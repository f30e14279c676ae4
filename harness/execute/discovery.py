"""Discovery: the yield points an uninjected run reaches, per ending (the *traces*).

Cached on disk, keyed on everything that could change the answer (the
scenario file, the harness, the fake host and the whole Nova that would be
imported), and run once per input across processes.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile

from harness.errors import UnknownChoice, UsageError
from harness.execute import runner
from harness.explore import injection
from harness.explore.tracer import DEFAULT_WINDOW

CACHE_DIR = os.path.abspath(os.environ.get("NOVA_CHAOS_CACHE")
                            or os.path.join(tempfile.gettempdir(), "nova-chaos-cache"))


def _cache_path(scen, backend: str, window: str) -> str:
    """Where discovery for this exact input is cached; computed without importing Nova.

    The key covers the scenario file and every Python source the run
    executes that could change the trace: the harness, the fake host, and
    the whole Nova that ``import nova`` would load (its location and every
    module's content), so an edited checkout anywhere is noticed.
    """
    import importlib.util
    h = hashlib.sha256()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the harness package
    with open(scen.path, "rb") as fh:
        h.update(fh.read())
    trees = [here, os.path.join(os.path.dirname(here), "fake_driver")]
    spec = importlib.util.find_spec("nova")
    if spec and spec.origin:
        trees.append(os.path.dirname(os.path.abspath(spec.origin)))
    for tree in trees:
        h.update(tree.encode())
        h.update(_tree_digest(tree))
    h.update(f"{backend}|{window}".encode())
    return os.path.join(CACHE_DIR, f"{scen.name}-{h.hexdigest()[:16]}.json")


@functools.lru_cache(maxsize=None)
def _tree_digest(top: str) -> bytes:
    """sha256 of every ``.py`` file under ``top`` (paths and contents, sorted).

    About 0.2 s for all of Nova 34 (1,500 files, 26 MB): cheap beside one
    discovery run, and once per process.
    """
    h = hashlib.sha256()
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                h.update(os.path.relpath(path, top).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.digest()


def check_window(window: str) -> None:
    from harness.explore.tracer import WINDOWS
    if window not in WINDOWS:
        raise UnknownChoice("window", window, WINDOWS)


def discover(scen, window: str = DEFAULT_WINDOW, use_cache: bool = True,
             here: bool = False) -> dict:
    """ending -> point ids reached, in order, by an uninjected run (imports Nova).

    The card's window closes before VERIFY_RESIZE, so one run serves every
    ending; a window reaching into the ending takes one run per ending. On
    the threads backend discovery runs on real threads, in a subprocess
    (``here``: this is that subprocess): Nova's pools outlive their cloud,
    and a process that is to fork must have no thread but its own
    (measured: "other threads are alive: Thread-14 (ThreadWorker)" on a
    cold cache).
    """
    from harness.cloud import nova_support
    check_window(window)
    backend = nova_support.current_backend()
    path = _cache_path(scen, backend, window)
    if use_cache and os.path.exists(path):
        with open(path) as fh:
            return json.load(fh)
    if backend == "threads" and not here:
        if not use_cache and os.path.exists(path):
            os.unlink(path)
        return points_without_nova(scen, backend, window)
    with _discovery_lock(path):  # another process discovering the same input: wait, then read
        if use_cache and os.path.exists(path):
            with open(path) as fh:
                return json.load(fh)
        return _discover_and_cache(scen, window, path)


@contextlib.contextmanager
def _discovery_lock(path: str):
    """Hold ``path``'s discovery lock: tests, xdist workers and shards that miss
    the cache at once (a cold CI) would otherwise each run the same discovery."""
    import fcntl
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _discover_and_cache(scen, window: str, path: str) -> dict:
    from harness.explore.tracer import WINDOWS
    traces = {}
    for ending in (scen.endings if WINDOWS[window].per_ending else scen.endings[:1]):
        run = runner.Run(scen, ending, converge_every=False)
        result = run.execute(lambda r: injection.Injector(r, None, window))
        if not result.passed:
            raise UsageError(f"scenario {scen.name} ({ending}): the uninjected run fails, "
                             "nothing to sweep:\n" + result.report())
        traces[ending] = [p.id for p in run.tracer.points]
    traces = {e: traces.get(e, traces[scen.endings[0]]) for e in scen.endings}
    os.makedirs(CACHE_DIR, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=CACHE_DIR)
    with os.fdopen(fd, "w") as fh:
        json.dump(traces, fh)
    os.replace(tmp, path)  # atomic: parallel workers may race here
    return traces


def points_without_nova(scen, backend: str, window: str = DEFAULT_WINDOW) -> dict:
    """Like :func:`discover`, but never imports Nova in this process.

    pytest collection uses it: importing Nova (and eventlet's monkey
    patching) inside an xdist worker during collection hangs the worker's
    channel. A cache miss runs ``nova-chaos points`` in a subprocess.
    """
    check_window(window)
    path = _cache_path(scen, backend, window)
    if not os.path.exists(path):
        import subprocess
        import sys
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "points", scen.path, "--backend", backend,
             "--window", window],
            capture_output=True, text=True, timeout=900,
            env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if proc.returncode != 0 or not os.path.exists(path):
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"discovery of {scen.name} failed: {last}")
    with open(path) as fh:
        return json.load(fh)
