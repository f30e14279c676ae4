"""Cold discovery runs each missing ending in a child of one process (Nova imported
once), cores at a time; a child that fails leaves its ending to the serial pass."""
import json
import os
import time

from harness.execute import discovery


def _fake(monkeypatch, tmp_path, fail_in_child=()):
    parent, runs = os.getpid(), str(tmp_path / "runs")
    os.makedirs(runs)

    def discover_and_cache(scen, ending, path, mutation=None):
        if os.getpid() != parent and ending in fail_in_child:
            raise RuntimeError("a child's run broke")
        started = time.monotonic()
        time.sleep(0.6)
        with open(os.path.join(runs, f"{ending}-{os.getpid()}"), "w") as fh:
            json.dump([started, time.monotonic()], fh)
        with open(path, "w") as fh:
            json.dump({"points": [ending], "uninjected": {}}, fh)
    monkeypatch.setattr(discovery, "_discover_and_cache", discover_and_cache)
    monkeypatch.setattr(discovery, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("harness.execute.executor.cores", lambda: 3)
    missing = [(str(tmp_path / f"{e}.json"), e) for e in ("confirm", "revert", "auto-confirm")]
    return parent, runs, missing


def _runs(runs):
    return {name.split("-")[0] if not name.startswith("auto") else "auto-confirm":
            (int(name.rsplit("-", 1)[1]), json.load(open(os.path.join(runs, name))))
            for name in os.listdir(runs)}


def test_each_missing_ending_runs_in_its_own_child_at_once(monkeypatch, tmp_path):
    parent, runs, missing = _fake(monkeypatch, tmp_path)
    discovery._discover_forked(None, missing, None)
    done = _runs(runs)
    assert set(done) == {"confirm", "revert", "auto-confirm"}
    pids = {pid for pid, _ in done.values()}
    assert parent not in pids and len(pids) == 3
    spans = [span for _, span in done.values()]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # all three ran at once
    assert all(os.path.exists(path) for path, _ in missing)


def test_a_child_that_fails_leaves_its_ending_to_the_serial_pass(monkeypatch, tmp_path):
    parent, runs, missing = _fake(monkeypatch, tmp_path, fail_in_child=("revert",))
    discovery._discover_forked(None, missing, None)
    assert not os.path.exists(tmp_path / "revert.json")
    for path, ending in missing:  # what discover() does next
        discovery._discover_once(None, ending, path, None)
    assert _runs(runs)["revert"][0] == parent
