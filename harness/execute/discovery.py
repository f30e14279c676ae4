"""Discovery: the uninjected run of each ending -- the yield points it reaches
(the *traces*) and its own verdict.

The uninjected run is the path every item of its ending starts from, and the
first thing a campaign checks: a Nova that fails it needs no injection to
show a defect (``harness.execute.campaign.judge_uninjected``). A failing run
is recorded like a passing one, never raised: the campaign reports it first
and still sweeps the endings whose run passes.

Cached on disk, keyed on everything that could change the answer (the
scenario file, the harness, the fake host, the whole Nova that would be
imported, and the mutation applied to it), and run once per input across
processes.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import tempfile
import time

from harness import files
from harness.errors import EXIT_USAGE, SubprocessFailed, UnknownChoice, UsageError, reason_of
from harness.execute import runner
from harness.explore import injection
from harness.explore.tracer import DEFAULT_WINDOW, WIDEST

#: the ending whose run the card's window is sliced from when it passes: revert,
#: the one 85 of the 92 known-findings entries and the CI campaign sweep in
#: the lifecycle window too (``nova-chaos known`` samples it first)
SLICED_FROM = "revert"
#: seconds one ending's discovery run may take (its own run has the item bound, 180 s)
DISCOVERY_TIMEOUT = 300.0
#: when this process started: an uninjected run that stopped short (``error``: a bound
#: ran out on a loaded machine, say) is kept for this process only, then run again
_STARTED = time.time()
CACHE_DIR = os.path.abspath(os.environ.get("NOVA_CHAOS_CACHE")
                            or os.path.join(tempfile.gettempdir(), "nova-chaos-cache"))


def _cache_path(scen, backend: str, ending: str, mutation: str | None = None) -> str:
    """Where discovery of this exact input is cached; computed without importing Nova.

    The key covers the scenario file and every Python source the run
    executes that could change the trace: the harness, the fake host, and
    the whole Nova that ``import nova`` would load (its location and every
    module's content), so an edited checkout anywhere is noticed; and the
    mutation, applied at run time to that Nova. One run per ending records
    the widest window; every window is a slice of it.
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
    h.update(f"{backend}|{WIDEST}|{ending}|{mutation or ''}".encode())
    return os.path.join(CACHE_DIR, f"{scen.name}-{h.hexdigest()[:16]}.json")


def _parts(scen, backend: str, endings, mutation=None) -> dict:
    """Cache path -> the ending its run takes: one run per wanted ending, in the
    scenario's order, whatever the window (each ending's own verdict is wanted)."""
    wanted = [e for e in scen.endings if e in (endings or scen.endings)]
    return {_cache_path(scen, backend, e, mutation): e for e in wanted}


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


def discover(scen, window: str = DEFAULT_WINDOW, endings=None, mutation=None, *,
             use_cache: bool = True, here: bool = False) -> dict:
    """ending -> point ids reached, in order, by an uninjected run (imports Nova).

    One run per wanted ending (default: all), ``mutation`` applied; each
    run's verdict is kept beside its trace (:func:`outcomes`). The card's
    window closes before VERIFY_RESIZE, so every ending's trace of it is the
    same slice: the first passing run's is used. On
    the threads backend discovery runs on real threads, never in this
    process unless ``here``: Nova's pools outlive their cloud, and a process
    that is to fork must have no thread but its own (measured: "other
    threads are alive: Thread-14 (ThreadWorker)" on a cold cache). Each
    missing ending runs in a child forked from here if Nova is imported and
    no thread runs yet (no interpreter to start and no Nova to import again,
    nor the modules a cloud imports on first use if this process has them);
    else, and for what a child could not cache, in a ``nova-chaos points``
    subprocess (a failing run fails there as it would have anyway).
    """
    from harness.cloud import mutations, nova_support
    check_window(window)
    mutation = mutations.discovered_as(mutation)
    backend = nova_support.current_backend()
    paths = _parts(scen, backend, endings, mutation)
    if not use_cache:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    missing = [(path, ending) for path, ending in paths.items() if _missing(path)]
    if backend == "threads" and not here:
        if missing and _alone() and "nova.compute.manager" in sys.modules:
            _discover_forked(scen, missing, mutation)  # children of this process: no new one
        return points_without_nova(scen, backend, window, endings, mutation)
    if backend == "threads" and len(missing) > 1 and _alone():
        _discover_forked(scen, missing, mutation)
    for path, ending in paths.items():
        _discover_once(scen, ending, path, mutation)
    return _traces(scen, window, paths)


def _discover_once(scen, ending: str, path: str, mutation) -> None:
    with _discovery_lock(path):  # another process discovering the same input: wait, then read
        if _missing(path):
            _discover_and_cache(scen, ending, path, mutation)


def _alone() -> bool:
    """This process may fork (no thread but this one: Nova imported, no cloud up yet)."""
    import threading
    return hasattr(os, "fork") and threading.active_count() == 1


def _discover_forked(scen, missing: list, mutation) -> None:
    """Each missing ending's run in a child of this process, as many at once as it has cores.

    Nova is imported once, here, before any thread starts; each child runs
    its ending on real threads and leaves (3 endings one after another took
    20 s cold, paid by the first run after any edit of the harness). A child
    that fails or outlives :data:`DISCOVERY_TIMEOUT` is killed and its ending
    run again here, where it fails as it would have anyway.
    """
    import signal
    from harness.execute.executor import cores
    pending, running = list(missing), {}
    try:
        while pending or running:
            while pending and len(running) < cores():
                path, ending = pending.pop(0)
                pid = os.fork()
                if pid == 0:  # pragma: no cover - the child
                    code = 3
                    try:
                        signal.alarm(int(DISCOVERY_TIMEOUT))  # ends it if stuck
                        _discover_once(scen, ending, path, mutation)
                        code = 0
                    finally:
                        os._exit(code)
                running[pid] = time.monotonic() + DISCOVERY_TIMEOUT + 30
            for pid, deadline in list(running.items()):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:  # still running
                    if time.monotonic() < deadline:
                        continue
                    os.kill(pid, signal.SIGKILL)  # its alarm did not end it
                    os.waitpid(pid, 0)
                running.pop(pid)
            time.sleep(0.05)
    finally:
        for pid in running:  # interrupted: no orphan
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _missing(path: str) -> bool:
    """Not cached, or cached by an earlier process as an uninjected run that stopped
    short: a verdict of ``fail`` is Nova's and kept, an ``error`` may be the machine's."""
    if not os.path.exists(path):
        return True
    if os.path.getmtime(path) >= _STARTED:
        return False
    try:
        return _read(path)["uninjected"]["verdict"] == "error"
    except (OSError, ValueError, KeyError, TypeError):
        return True


def _read(path: str) -> dict:
    with open(path) as fh:
        return json.load(fh)


def _traces(scen, window: str, paths: dict) -> dict:
    """``{ending: trace}`` read from ``paths``; the card's window: one trace for every ending
    (the first passing run's slice; every run's, if none passed)."""
    from harness.explore.tracer import WINDOWS, narrowed
    found = {ending: _read(path) for path, ending in paths.items()}
    traces = {ending: narrowed(data["points"], window) for ending, data in found.items()}
    if not WINDOWS[window].per_ending:
        passing = [e for e, data in found.items() if data["uninjected"]["verdict"] == "pass"]
        trace = traces[(passing or list(found))[0]]
        return {e: trace for e in scen.endings}
    return traces


def outcomes(scen, backend: str, endings=None, mutation=None) -> dict:
    """``{ending: Record}``: each discovered ending's uninjected run, judged
    (read from the cache :func:`discover` filled; never imports Nova)."""
    from harness.cloud import mutations
    from harness.execute.record import Record
    mutation = mutations.discovered_as(mutation)
    return {ending: Record.from_json(_read(path)["uninjected"])
            for path, ending in _parts(scen, backend, endings, mutation).items()}


@contextlib.contextmanager
def _discovery_lock(path: str):
    """Hold ``path``'s discovery lock: tests, xdist workers and shards that miss
    the cache at once (a cold CI) would otherwise each run the same discovery."""
    import fcntl
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def uninjected_run(scen, ending: str, mutation: str | None = None,
                   keep_evidence: bool = False) -> runner.Run:
    """The scenario run with ``ending`` and no fault (``mutation`` applied), traced in the
    widest window: exactly the path every item of that ending starts from.

    The harness runs no periodic of its own before the deletes (no
    convergence at the move's checkpoint nor at the ending's): one there would
    rebuild the trackers and hide what the next step trips on (measured: the
    1818914 leak on confirm; a server deleted right after its move ends
    leaves its usage on the destination's tracker). The deletes' checkpoint
    converges. The items converge at the ending too: their deletes follow a
    periodic.
    """
    run = runner.Run(scen, ending, converge_every=False)
    run.converge_ending = False
    run.keep_evidence = keep_evidence  # what every checkpoint read (a recreate test's steps)
    run.execute(lambda r: injection.Injector(r, None, WIDEST, mutation=mutation))
    return run


def _discover_and_cache(scen, ending: str, path: str, mutation=None) -> None:
    from harness.execute import campaign
    run = uninjected_run(scen, ending, mutation)
    record = campaign.judge_uninjected(scen.name, ending, mutation, run)
    points = run.tracer.staged() if run.tracer else []
    files.atomic_write(path, json.dumps({"points": points, "uninjected": record.to_json()}))


def points_without_nova(scen, backend: str, window: str = DEFAULT_WINDOW, endings=None,
                        mutation=None) -> dict:
    """Like :func:`discover`, but never imports Nova in this process.

    pytest collection uses it: importing Nova (and eventlet's monkey
    patching) inside an xdist worker during collection hangs the worker's
    channel. A cache miss runs ``nova-chaos points`` in a subprocess.
    """
    from harness.cloud import mutations
    check_window(window)
    mutation = mutations.discovered_as(mutation)
    paths = _parts(scen, backend, endings, mutation)
    missing = [e for path, e in paths.items() if _missing(path)]
    if missing:
        import subprocess
        import sys
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "harness", "points", scen.path, "--backend", backend,
                 "--window", window, *(a for e in missing for a in ("--ending", e)),
                 *(("--mutate", mutation) if mutation else ())],
                capture_output=True, text=True, timeout=DISCOVERY_TIMEOUT * len(missing) + 60,
                env=dict(os.environ, PYTHONWARNINGS="ignore"))
        except subprocess.TimeoutExpired:
            raise SubprocessFailed(f"discovery of {scen.name} ({', '.join(missing)}) took over "
                             f"{DISCOVERY_TIMEOUT * len(missing) + 60:.0f} s: stopped") from None
        # a failing uninjected run is cached like a passing one (the subprocess exits 1)
        if any(_missing(p) for p in paths) and proc.returncode not in (0, 1):
            why = f"discovery of {scen.name} failed: {reason_of(proc.returncode, proc.stderr)}"
            raise UsageError(why) if proc.returncode == EXIT_USAGE else SubprocessFailed(why)
        if any(_missing(p) for p in paths):  # it cached under another key
            raise UsageError(f"discovery of {scen.name} ran but cached under another key: "
                             "were Nova, fake_driver or the harness edited meanwhile?")
    return _traces(scen, window, paths)
