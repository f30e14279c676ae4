"""pytest plugin: one test item per (scenario, point, target, ending).

A test opts in with ``@pytest.mark.chaos(scenario=..., mutation=None,
window="resize", endings=None, targets=None, fault="periodic")`` and
the ``chaos_item`` / ``chaos_result`` fixtures; the plugin parametrizes it
with every item of the scenario's campaign, ids being the item ids (so
``pytest -n auto`` collects identically on every worker: ids come from a
deterministic, cached discovery run, never from timing). Importing this
module does not import Nova; options all start with ``--chaos-``.

An ending whose uninjected run fails (discovery's own run, cached) is a
test of its own, ``SCENARIO/uninjected/none/ENDING``, that fails with the
run's checks; that ending's items are not swept (each would only repeat it).

Items are grouped in shards of consecutive points, one per xdist worker. The first item of a
shard to run, on whichever xdist worker, runs the whole shard in a worker
subprocess (by fork on eventlet) under a file lock; the shard's other items,
on any worker, read the results it wrote. A worker whose shard another is
running runs a shard nobody has started meanwhile: xdist hands out
consecutive items, so both workers of ``-n 2`` reach the same shard at
once, and one of them used to wait through it. Node ids are plain (no xdist
group suffix), so they are the same with ``-n 0`` and ``-n auto``.

Each shard's worker gets the cores shared among the xdist workers
(``--chaos-jobs``): ``-n 0`` gives one shard at a time every core, ``-n 2``
on two cores one each to two shards at once, never more processes than cores.
"""
from __future__ import annotations

import pytest

#: the backend chaos items run on (the option, else the Nova under test's default)
BACKEND = pytest.StashKey[str]()


def pytest_addoption(parser):
    group = parser.getgroup("nova-chaos", "Nova chaos harness")
    group.addoption("--chaos-backend", default=None, choices=("eventlet", "threads"),
                    help="Nova concurrency backend for this run (default: the one the Nova "
                    "under test runs nova-compute on, as for nova-chaos)")
    group.addoption("--chaos-target", action="append", default=None,
                    help="only these injection targets (source/dest/both)")
    group.addoption("--chaos-ending", action="append", default=None,
                    help="only these endings (confirm/revert/auto-confirm)")
    group.addoption("--chaos-point", action="append", default=None,
                    help="only these point ids")
    group.addoption("--chaos-shard", default=None, metavar="K/N",
                    help="only the K-th of N slices of each campaign (as nova-chaos run --shard)")
    group.addoption("--chaos-jobs", default="auto", metavar="N",
                    help="CPU slots of each shard's worker (default: this process's cores "
                    "shared among the xdist workers, at least 1)")


def workers(config) -> int:
    """This session's xdist workers (1 without xdist): every worker collects the same count."""
    return int(getattr(config, "workerinput", {}).get("workercount", 1))


class Shards:
    """This session's shards: filled at collection, read as their tests run."""

    def __init__(self):
        self.items: dict = {}    # shard name -> its items
        self.traces: dict = {}   # shard name -> {trace key: traces} its worker needs
        self.of: dict = {}       # item id -> shard name
        self.results: dict = {}  # item id -> record.Record, until its test takes it
        self.uninjected: dict = {}  # item id -> record.Record: a failing uninjected run


SHARDS_KEY = pytest.StashKey[Shards]()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "chaos(scenario, mutation=None, window='resize', endings=None, targets=None, "
        "fault='periodic'): "
        "parametrize with the scenario's campaign items")
    from harness.cloud import nova_support
    backend = config.getoption("--chaos-backend")
    if backend:
        nova_support.select_backend(backend)
    config.stash[BACKEND] = backend or nova_support.default_backend()[0]
    config.stash[SHARDS_KEY] = Shards()
    if not hasattr(config, "workerinput"):
        import os
        import uuid
        # name the run ourselves, so the controller knows where workers share results;
        # always anew: a pytest run inside a test inherits the outer run's environment,
        # and with its id would share (and, at its end, remove) the outer run's results
        run = getattr(config.option, "testrunuid", None) or uuid.uuid4().hex
        if getattr(config.option, "numprocesses", None):
            config.option.testrunuid = run
        os.environ["PYTEST_XDIST_TESTRUNUID"] = run


def shard_of(item, points, shards: int) -> str:
    """One of ``shards`` runs of consecutive points (one per xdist worker: each shard pays
    for a subprocess that imports Nova and runs the prefix; with -n 0, one shard runs
    everything as ``nova-chaos run`` would)."""
    index = points.index(item.point) * shards // max(len(points), 1)
    return f"{item.scenario}|{item.window}|{item.fault}|{item.mutation or 'clean'}|shard{index}"


def pytest_generate_tests(metafunc):
    if "chaos_item" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("chaos")
    if marker is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: chaos_item needs @pytest.mark.chaos")
    from harness import faults, scenario
    from harness.execute import campaign, discovery, plan
    config, opt = metafunc.config, metafunc.config.getoption
    scen = scenario.load(marker.kwargs["scenario"])
    window = marker.kwargs.get("window", campaign.DEFAULT_WINDOW)
    targets, endings = campaign.choose(scen, opt("--chaos-target") or marker.kwargs.get("targets"),
                                       opt("--chaos-ending") or marker.kwargs.get("endings"))
    backend = config.stash[BACKEND]
    planned = plan.plan([(scen, window, targets, endings)], opt("--chaos-point") or (),
                        marker.kwargs.get("mutation"),
                        lambda s, w, e, m: discovery.points_without_nova(s, backend, w, e, m),
                        fault=marker.kwargs.get("fault", faults.DEFAULT),
                        outcomes=lambda s, e, m: discovery.outcomes(s, backend, e, m))
    shards, params = config.stash[SHARDS_KEY], []
    for record in planned.failing:  # the first finding: a failing test, not a collection error
        shards.uninjected[record.item.id] = record
        params.append(pytest.param(record.item, id=record.item.id))
    chosen = planned.items
    if opt("--chaos-shard"):
        from harness.errors import UsageError
        from harness.execute import shards as slicing
        try:
            chosen = slicing.select(chosen, *slicing.parse(opt("--chaos-shard")))
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    for item in chosen:
        name = shard_of(item, campaign.union(planned.traces[campaign.trace_key(item.scenario,
                                                                               item.window)]),
                        workers(config))
        shards.items.setdefault(name, []).append(item)
        shards.traces.setdefault(name, {}).update(planned.traces)
        shards.of[item.id] = name
        params.append(pytest.param(item, id=item.id))
    metafunc.parametrize("chaos_item", params)


@pytest.fixture
def chaos_result(chaos_item, request):
    """The item's judged result (a ``record.Record``).

    The first item of a shard runs the whole shard in a worker subprocess
    (by fork, on either backend) and the others read their result: pytest's
    own processes never import Nova, whose eventlet monkey patching does not
    mix with xdist's channel threads.
    """
    shards = request.config.stash[SHARDS_KEY]
    if chaos_item.id in shards.uninjected:  # judged by discovery: nothing to run again
        return shards.uninjected[chaos_item.id]
    results = shards.results
    if chaos_item.id not in results:
        _shard_once(chaos_item, request.config)
    if chaos_item.id not in results:
        pytest.fail(f"the worker running {chaos_item.id} gave no result")
    return results.pop(chaos_item.id)


def _shared_dir() -> str:
    """Results shared by the xdist workers of one test run (per-process otherwise)."""
    import os
    import tempfile
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    path = os.path.join(tempfile.gettempdir(), f"nova-chaos-pytest-{run}")
    os.makedirs(path, exist_ok=True)
    return path


def _shard_once(chaos_item, config):
    """Run the item's shard unless another worker did; then load its results.

    While another worker holds the shard's lock (it is running it), run
    shards nobody has started, then wait: the wait is bounded by that
    worker's own bound on its shard's subprocess."""
    import fcntl
    import json

    from harness.execute.record import Record
    shards = config.stash[SHARDS_KEY]
    base = _shard_base(shards.of[chaos_item.id], config)
    with open(base + ".lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # another worker runs it: keep this core busy meanwhile
                if not _run_unstarted(config):
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    break
        _run_locked(shards.of[chaos_item.id], base, config)
    with open(base + ".jsonl") as fh:
        for line in fh:
            if line.startswith("{"):
                record = Record.from_json(json.loads(line))
                shards.results[record.item.id] = record


def _shard_base(name, config) -> str:
    import hashlib
    import os
    backend = config.stash[BACKEND]
    return os.path.join(_shared_dir(), hashlib.sha1(f"{name}|{backend}".encode()).hexdigest())


def _run_locked(name, base, config) -> None:
    """With the shard's lock held: run it, unless a worker did (its results are there)."""
    import os
    shards = config.stash[SHARDS_KEY]
    if not os.path.exists(base + ".jsonl"):
        lines = _run_shard(shards.items[name], shards.traces[name], config.stash[BACKEND],
                           _jobs(config))
        with open(base + ".tmp", "w") as fh:
            fh.write("\n".join(lines))
        os.replace(base + ".tmp", base + ".jsonl")


def _run_unstarted(config) -> bool:
    """Run the first shard, in plan order, that no worker has started: False if none is left."""
    import fcntl
    import os
    for name in config.stash[SHARDS_KEY].items:
        base = _shard_base(name, config)
        if os.path.exists(base + ".jsonl"):
            continue
        with open(base + ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # running elsewhere
                continue
            if os.path.exists(base + ".jsonl"):
                continue
            try:
                _run_locked(name, base, config)
            except pytest.fail.Exception:  # that shard's own items run it again and say why
                pass
            return True
    return False


def _jobs(config) -> int:
    """CPU slots for one shard's worker: ``--chaos-jobs``, else the cores per xdist worker."""
    from harness.execute.executor import cores, jobs_value
    text = config.getoption("--chaos-jobs")
    if text != "auto":
        try:
            return jobs_value(text)
        except ValueError:
            raise pytest.UsageError(f"--chaos-jobs {text!r}: a number >= 1 or auto") from None
    return max(1, cores() // workers(config))


def _run_shard(shard, traces, backend, jobs) -> list:
    import json
    import os
    import subprocess
    import sys
    mode = "fork" if hasattr(os, "fork") else "fresh"
    bound = 300 + 120 * len(shard)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.front.worker", "--backend", backend, "--mode", mode,
             "--jobs", str(jobs)],
            input=json.dumps({"items": [i.id for i in shard], "traces": traces}),
            capture_output=True, text=True, timeout=bound,
            env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        pytest.fail(f"shard worker of {len(shard)} items stuck past its {bound} s bound")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if len(lines) != len(shard):
        from harness.errors import reason_of
        pytest.fail(f"shard worker gave {len(lines)} of {len(shard)} results: "
                    f"{reason_of(proc.returncode, proc.stderr)}")
    return lines


def pytest_sessionfinish(session):
    import shutil
    if not hasattr(session.config, "workerinput"):  # controller or -n 0: tidy up
        shutil.rmtree(_shared_dir(), ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    chaos = getattr(item, "callspec", None) and item.callspec.params.get("chaos_item")
    if chaos is not None and report.when == "call" and report.failed:
        text = f"reproduce: {chaos.replay_command()}\n        or: pytest '{item.nodeid}'"
        report.sections.append(("nova-chaos reproducer", text))
