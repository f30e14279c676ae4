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

from harness import files
from harness.errors import UnknownChoice, UsageError
from harness.execute import runner
from harness.explore import injection
from harness.explore.tracer import DEFAULT_WINDOW, WIDEST

#: the ending whose run gives the card's window when none is discovered yet:
#: revert, the one 85 of the 92 known-findings entries and the CI campaign
#: sweep in the lifecycle window too (one run then serves both windows)
SLICED_FROM = "revert"
CACHE_DIR = os.path.abspath(os.environ.get("NOVA_CHAOS_CACHE")
                            or os.path.join(tempfile.gettempdir(), "nova-chaos-cache"))


def _cache_path(scen, backend: str, ending: str) -> str:
    """Where discovery of this exact input is cached; computed without importing Nova.

    The key covers the scenario file and every Python source the run
    executes that could change the trace: the harness, the fake host, and
    the whole Nova that ``import nova`` would load (its location and every
    module's content), so an edited checkout anywhere is noticed. One run
    per ending records the widest window; every window is a slice of it.
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
    h.update(f"{backend}|{WIDEST}|{ending}".encode())
    return os.path.join(CACHE_DIR, f"{scen.name}-{h.hexdigest()[:16]}.json")


def _parts(scen, backend: str, window: str, endings) -> dict:
    """Cache path -> the ending its run takes.

    A window that closes before the ending (the card's) is the same slice of
    every ending's run: an ending already discovered serves it, else
    :data:`SLICED_FROM` when asked for (the lifecycle ending most runs need
    as well), else the first one asked for.
    """
    from harness.explore.tracer import WINDOWS
    wanted = list(endings or scen.endings)
    paths = {_cache_path(scen, backend, e): e for e in wanted}
    if WINDOWS[window].per_ending:
        return paths
    path = next((p for p in paths if os.path.exists(p)),
                next((p for p, e in paths.items() if e == SLICED_FROM), next(iter(paths))))
    return {path: paths[path]}


@functools.lru_cache(maxsize=None)
def _tree_digest(top: str) -> bytes:
    """sha256 of every ``.py`` file under ``top`` (paths and contents, sorted).

    About 0.2 s for all of Nova 34 (1,500 files, 26 MB): cheap beside one
    discovery run, and once per process.
    """
    h = hashlib.sha256()
    for root, dirs, names in os.walk(top):
        dirs.sort()
        for name in sorted(names):
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


def discover(scen, window: str = DEFAULT_WINDOW, endings=None, *, use_cache: bool = True,
             here: bool = False) -> dict:
    """ending -> point ids reached, in order, by an uninjected run (imports Nova).

    The card's window closes before VERIFY_RESIZE, so one run serves every
    ending; a window reaching into the ending takes one run per ending, and
    only ``endings`` (default: all) are run. On
    the threads backend discovery runs on real threads, in a subprocess
    (``here``: this is that subprocess): Nova's pools outlive their cloud,
    and a process that is to fork must have no thread but its own
    (measured: "other threads are alive: Thread-14 (ThreadWorker)" on a
    cold cache).
    """
    from harness.cloud import nova_support
    check_window(window)
    backend = nova_support.current_backend()
    paths = _parts(scen, backend, window, endings)
    if not use_cache:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    if backend == "threads" and not here:
        return points_without_nova(scen, backend, window, endings)
    for path, ending in paths.items():
        with _discovery_lock(path):  # another process discovering the same input: wait, then read
            if not os.path.exists(path):
                _discover_and_cache(scen, ending, path)
    return _traces(scen, window, paths)


def _traces(scen, window: str, paths: dict) -> dict:
    """``{ending: trace}`` read from ``paths``; the card's window: the one trace for every ending."""
    from harness.explore.tracer import WINDOWS, narrowed
    traces = {}
    for path, ending in paths.items():
        with open(path) as fh:
            traces[ending] = narrowed(json.load(fh), window)
    if not WINDOWS[window].per_ending:
        (trace,) = traces.values()
        return {e: trace for e in scen.endings}
    return traces


@contextlib.contextmanager
def _discovery_lock(path: str):
    """Hold ``path``'s discovery lock: tests, xdist workers and shards that miss
    the cache at once (a cold CI) would otherwise each run the same discovery."""
    import fcntl
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _discover_and_cache(scen, ending: str, path: str) -> None:
    run = runner.Run(scen, ending, converge_every=False)
    result = run.execute(lambda r: injection.Injector(r, None, WIDEST))
    if not result.passed:
        raise UsageError(f"scenario {scen.name} ({ending}): the uninjected run fails, "
                         "nothing to sweep:\n" + result.report())
    files.atomic_write(path, json.dumps([(p.id, p.stage) for p in run.tracer.points]))


def points_without_nova(scen, backend: str, window: str = DEFAULT_WINDOW, endings=None) -> dict:
    """Like :func:`discover`, but never imports Nova in this process.

    pytest collection uses it: importing Nova (and eventlet's monkey
    patching) inside an xdist worker during collection hangs the worker's
    channel. A cache miss runs ``nova-chaos points`` in a subprocess.
    """
    check_window(window)
    paths = _parts(scen, backend, window, endings)
    missing = [e for path, e in paths.items() if not os.path.exists(path)]
    if missing:
        import subprocess
        import sys
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "points", scen.path, "--backend", backend,
             "--window", window, *(a for e in missing for a in ("--ending", e))],
            capture_output=True, text=True, timeout=900,
            env=dict(os.environ, PYTHONWARNINGS="ignore"))
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"discovery of {scen.name} failed: {last}")
        if not all(os.path.exists(p) for p in paths):  # it cached under another key
            raise UsageError(f"discovery of {scen.name} ran but cached under another key: "
                             "were Nova, fake_driver or the harness edited meanwhile?")
    return _traces(scen, window, paths)
