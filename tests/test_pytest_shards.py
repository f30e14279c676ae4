"""The pytest plugin's shards, without Nova: a worker whose shard another worker is
running runs one nobody has started meanwhile, and each shard's worker gets its
share of the cores."""
import fcntl
import json
import tempfile
import threading
import time

import pytest

from harness.execute.item import Item
from harness.front import pytest_plugin as plugin


class Config:
    def __init__(self, jobs="auto", workers=None):
        self.stash = pytest.Stash()
        self.jobs = jobs
        if workers is not None:  # an xdist worker's
            self.workerinput = {"workercount": workers}

    def getoption(self, name):
        assert name == "--chaos-jobs"
        return self.jobs


def _config(monkeypatch, tmp_path, ran):
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", f"unit-{tmp_path.name}")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the shared directory's parent
    config = Config()
    config.stash[plugin.BACKEND] = "threads"
    shards = config.stash[plugin.SHARDS_KEY] = plugin.Shards()
    for n in range(3):
        item = Item("s", f"p{n}", "source", "revert")
        shards.items[f"shard{n}"], shards.traces[f"shard{n}"] = [item], {}
        shards.of[item.id] = f"shard{n}"

    def run_shard(shard, traces, backend, jobs):
        ran.append(shard[0].point)
        return [json.dumps({"id": shard[0].id, "verdict": "pass", "problems": [], "known": [],
                            "seconds": 0.0})]
    monkeypatch.setattr(plugin, "_run_shard", run_shard)
    return config, shards


def test_a_worker_waiting_for_a_running_shard_runs_an_unstarted_one(monkeypatch, tmp_path):
    ran = []
    config, shards = _config(monkeypatch, tmp_path, ran)
    first = shards.items["shard0"][0]
    base = plugin._shard_base("shard0", config)
    other = open(base + ".lock", "w")  # another worker is running shard0
    fcntl.flock(other, fcntl.LOCK_EX)

    def the_other_finishes():
        time.sleep(0.5)
        with open(base + ".jsonl", "w") as fh:
            fh.write(json.dumps({"id": first.id, "verdict": "known", "problems": [],
                                 "known": [], "seconds": 0.0}))
        other.close()
    threading.Thread(target=the_other_finishes).start()
    plugin._shard_once(first, config)
    assert ran == ["p1", "p2"]  # the unstarted shards, in plan order, while it waited
    assert shards.results[first.id].verdict == "known"  # the other worker's result, read
    plugin._shard_once(shards.items["shard1"][0], config)  # already run: nothing runs again
    assert ran == ["p1", "p2"] and set(shards.results) >= {shards.items["shard1"][0].id}


def test_a_free_shard_is_run_by_the_first_worker_to_need_it(monkeypatch, tmp_path):
    ran = []
    config, shards = _config(monkeypatch, tmp_path, ran)
    plugin._shard_once(shards.items["shard2"][0], config)
    assert ran == ["p2"]


@pytest.mark.parametrize("workers, option, expected", [
    (None, "auto", 2), (2, "auto", 1), (4, "auto", 1), (2, "3", 3)])
def test_a_shard_worker_gets_the_cores_per_xdist_worker(monkeypatch, workers, option, expected):
    monkeypatch.setattr("harness.execute.executor.cores", lambda: 2)
    assert plugin._jobs(Config(option, workers)) == expected


def test_a_bad_jobs_option_is_a_usage_error():
    with pytest.raises(pytest.UsageError, match="--chaos-jobs"):
        plugin._jobs(Config("0"))


def test_one_shard_per_worker_of_consecutive_points():
    points = [f"p{n}" for n in range(7)]
    items = [Item("s", p, "source", "revert") for p in points]
    assert {plugin.shard_of(i, points, 1) for i in items} == {"s|resize|periodic|clean|shard0"}
    two = [plugin.shard_of(i, points, 2)[-1] for i in items]
    assert two == ["0", "0", "0", "0", "1", "1", "1"]
    assert plugin.workers(Config()) == 1 and plugin.workers(Config(workers=3)) == 3
