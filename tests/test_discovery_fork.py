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


def test_a_process_with_nova_imported_forks_its_discovery_and_starts_no_interpreter(
        monkeypatch, tmp_path):
    """The CLI (threads backend, no thread yet) forks each missing ending; only what a
    child could not cache goes to a ``nova-chaos points`` subprocess."""
    import subprocess
    import sys

    from harness import scenario
    from harness.cloud import nova_support
    parent, runs, _ = _fake(monkeypatch, tmp_path, fail_in_child=("revert",))
    monkeypatch.setattr(nova_support, "current_backend", lambda: "threads")
    monkeypatch.setitem(sys.modules, "nova.compute.manager", sys)  # "Nova is imported"
    scen = scenario.load("pinned-only")
    asked = []

    def points(argv, **kwargs):  # the subprocess: it runs what is still missing
        asked.append([a for a in argv if a in scen.endings])
        for path, ending in discovery._parts(scen, "threads", None).items():
            if not os.path.exists(path):
                discovery._discover_and_cache(scen, ending, path)
        return subprocess.CompletedProcess(argv, 0, "", "")
    monkeypatch.setattr(subprocess, "run", points)
    monkeypatch.setattr(discovery, "_traces", lambda scen, window, paths: {
        e: discovery._read(p)["points"] for p, e in paths.items()})
    assert discovery.discover(scen, "lifecycle") == {e: [e] for e in scen.endings}
    assert asked == [["revert"]]  # the one ending a child could not cache, nothing else
    done = _runs(runs)
    assert done["revert"][0] == parent and parent not in (done["confirm"][0],
                                                          done["auto-confirm"][0])
