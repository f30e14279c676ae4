"""pytest plugin: one test item per (scenario, point, target, ending).

A test opts in with ``@pytest.mark.chaos(scenario=..., mutation=None,
window="resize", endings=None, targets=None)`` and
the ``chaos_item`` / ``chaos_result`` fixtures; the plugin parametrizes it
with every item of the scenario's campaign, ids being the item ids (so
``pytest -n auto`` collects identically on every worker: ids come from a
deterministic, cached discovery run, never from timing). Importing this
module does not import Nova; options all start with ``--chaos-``.

Items are grouped in shards of consecutive points. The first item of a
shard to run, on whichever xdist worker, runs the whole shard in a worker
subprocess (by fork on eventlet) under a file lock; the shard's other items,
on any worker, read the results it wrote. Node ids are plain (no xdist
group suffix), so they are the same with ``-n 0`` and ``-n auto``.
"""
from __future__ import annotations

import pytest

#: where the project's campaign tests live (for reproducer commands), and what
#: each of its tests sweeps: (test, scenario, window, mutation, endings, targets)
CAMPAIGN_TESTS = "tests/test_campaign.py"
CAMPAIGN_TEST_ITEMS = (
    ("test_clean_nova", "pinned-hugepages", "resize", None, ("confirm", "revert"),
     ("source", "dest")),
    ("test_clean_nova_auto_confirm", "pinned-hugepages", "resize", None, ("auto-confirm",),
     ("both",)),
    ("test_mutation_1944759", "pinned-hugepages", "resize", "1944759", ("revert",), None),
)


def node_id(item) -> str | None:
    """The project's pytest node id running ``item``, if one does (else None)."""
    for test, scen, window, mutation, endings, targets in CAMPAIGN_TEST_ITEMS:
        if ((scen, window, mutation) == (item.scenario, item.window, item.mutation)
                and item.ending in endings and (targets is None or item.target in targets)):
            return f"{CAMPAIGN_TESTS}::{test}[{item.id}]"
    return None


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


#: shards per (scenario, mutation): a shard shares one scenario prefix
SHARDS = 4
_SHARD_ITEMS: dict = {}    # shard name -> items (filled at collection)
_SHARD_RESULTS: dict = {}  # item id -> executor.Record (filled when a shard runs)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "chaos(scenario, mutation=None, window='resize', endings=None, targets=None): "
        "parametrize with the scenario's campaign items")
    from harness import nova_support
    backend = config.getoption("--chaos-backend")
    if backend:
        nova_support.select_backend(backend)
    config.stash[BACKEND] = backend or nova_support.default_backend()[0]
    if (getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
            and not getattr(config.option, "testrunuid", None)):
        import os
        import uuid
        # name the run ourselves, so the controller knows where workers share results
        config.option.testrunuid = uuid.uuid4().hex
        os.environ["PYTEST_XDIST_TESTRUNUID"] = config.option.testrunuid


def shard_of(item, points) -> str:
    index = points.index(item.point) * SHARDS // max(len(points), 1)
    return f"{item.scenario}|{item.window}|{item.mutation or 'clean'}|shard{index}"


def pytest_generate_tests(metafunc):
    if "chaos_item" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("chaos")
    if marker is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: chaos_item needs @pytest.mark.chaos")
    from harness import campaign, scenario
    scen = scenario.load(marker.kwargs["scenario"])
    window = marker.kwargs.get("window", campaign.DEFAULT_WINDOW)
    traces = campaign.points_without_nova(scen, metafunc.config.stash[BACKEND], window)
    points = campaign.union(traces)
    opt = metafunc.config.getoption
    chosen = [p for p in points if not opt("--chaos-point") or p in opt("--chaos-point")]
    targets, endings = campaign.choose(scen, opt("--chaos-target") or marker.kwargs.get("targets"),
                                       opt("--chaos-ending") or marker.kwargs.get("endings"))
    items = campaign.items(scen, traces, targets, endings, marker.kwargs.get("mutation"),
                           chosen, window)
    params = []
    for item in items:
        shard = shard_of(item, points)
        _SHARD_ITEMS.setdefault(shard, []).append(item)
        params.append(pytest.param(item, id=item.id))
    metafunc.parametrize("chaos_item", params)


@pytest.fixture
def chaos_result(chaos_item, request):
    """The item's judged result (an ``executor.Record``).

    The first item of a shard runs the whole shard in a worker subprocess
    (by fork, on either backend) and the others read their result: pytest's
    own processes never import Nova, whose eventlet monkey patching does not
    mix with xdist's channel threads.
    """
    if chaos_item.id not in _SHARD_RESULTS:
        _shard_once(chaos_item, request.config.stash[BACKEND])
    if chaos_item.id not in _SHARD_RESULTS:
        pytest.fail(f"the worker running {chaos_item.id} gave no result")
    return _SHARD_RESULTS.pop(chaos_item.id)


def _shared_dir() -> str:
    """Results shared by the xdist workers of one test run (per-process otherwise)."""
    import os
    import tempfile
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    path = os.path.join(tempfile.gettempdir(), f"nova-chaos-pytest-{run}")
    os.makedirs(path, exist_ok=True)
    return path


def _shard_once(chaos_item, backend):
    """Run the item's shard unless another worker did; then load its results."""
    import fcntl
    import hashlib
    import json
    import os

    from harness import campaign, executor, scenario
    traces = campaign.points_without_nova(scenario.load(chaos_item.scenario), backend,
                                          chaos_item.window)
    name = shard_of(chaos_item, campaign.union(traces))
    base = os.path.join(_shared_dir(), hashlib.sha1(f"{name}|{backend}".encode()).hexdigest())
    with open(base + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a worker running this shard holds it
        if not os.path.exists(base + ".jsonl"):
            key = campaign.trace_key(chaos_item.scenario, chaos_item.window)
            lines = _run_shard(_SHARD_ITEMS.get(name, [chaos_item]), {key: traces}, backend)
            with open(base + ".tmp", "w") as fh:
                fh.write("\n".join(lines))
            os.replace(base + ".tmp", base + ".jsonl")
    with open(base + ".jsonl") as fh:
        for line in fh:
            if line.startswith("{"):
                record = executor.Record.from_json(json.loads(line))
                _SHARD_RESULTS[record.item.id] = record


def _run_shard(shard, traces, backend) -> list:
    import json
    import os
    import subprocess
    import sys
    mode = "fork" if hasattr(os, "fork") else "fresh"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.worker", "--backend", backend, "--mode", mode,
         "--jobs", str(os.cpu_count() or 1)],
        input=json.dumps({"items": [i.id for i in shard], "traces": traces}),
        capture_output=True, text=True, timeout=300 + 120 * len(shard),
        env=dict(os.environ, PYTHONWARNINGS="ignore"))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if len(lines) != len(shard):
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        pytest.fail(f"shard worker exited {proc.returncode} with {len(lines)} of "
                    f"{len(shard)} results:\n{tail}")
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
        text = f"reproduce: {chaos.replay_command()}"
        if node_id(chaos):
            text += f"\n        or: pytest '{node_id(chaos)}'"
        report.sections.append(("nova-chaos reproducer", text))
