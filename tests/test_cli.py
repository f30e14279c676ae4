"""Bad input gets one clear line and exit code 2, never a traceback wall."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cli


def assert_one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("nova-chaos: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in last


@pytest.mark.parametrize("args, fragments", [
    (["run", "nope"], ["unknown scenario 'nope'", "pinned-hugepages"]),
    (["run", "pinned-hugepages", "--target", "sideways"], ["unknown target for pinned-hugepages 'sideways'", "both"]),
    (["run", "pinned-hugepages", "--ending", "shelve"], ["unknown ending", "'shelve'", "revert"]),
    (["run", "pinned-hugepages", "--mutate", "999"], ["unknown mutation '999'", "1944759"]),
    (["run", "pinned-hugepages", "--jobs", "zero"], ["--jobs must be a positive integer"]),
    (["replay", "garbage"], ["bad item id 'garbage'"]),
    (["run", "/no/such/scenario.toml"], ["scenario file /no/such/scenario.toml does not exist"]),
    (["frobnicate"], ["invalid choice: 'frobnicate'"]),
    (["run", "pinned-hugepages", "--window", "sideways"], ["unknown window 'sideways'", "lifecycle"]),
    (["points", "pinned-hugepages", "--window", "sideways"], ["unknown window 'sideways'"]),
    (["run", "same-host", "--target", "dest"], ["unknown target for same-host 'dest'", "source"]),
    (["run", "all", "--point", "x#1"], ["--point needs one scenario and one window"]),
    (["replay", "pinned-hugepages/p#1/source/confirm/window=sideways"], ["unknown window"]),
    (["run", "pinned-hugepages", "--timeout", "0"], ["--timeout must be a positive number"]),
    (["run", "pinned-hugepages", "--timeout", "soon"], ["not a number of seconds: 'soon'"]),
    (["rejudge", "r.json", "--known", "/no/known.toml"], ["point-list file /no/known.toml does not exist"]),
    (["run", "pinned-hugepages", "--resume"], ["--resume needs --json FILE"]),
])
def test_bad_input_before_nova_loads(args, fragments):
    assert_one_line_error(cli(*args), *fragments)


def test_unknown_point_names_valid_ones():
    proc = cli("run", "pinned-hugepages", "--point", "source:nowhere#1")
    assert_one_line_error(proc, "unknown point of pinned-hugepages (window resize) 'source:nowhere#1'", "valid:")


def test_malformed_topology_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(open(os.path.join(os.path.dirname(__file__), "..", "scenarios",
                                     "pinned-hugepages.toml")).read().replace("cells = 2", "cells = -1"))
    assert_one_line_error(cli("run", str(bad)), "bad.toml: hosts[0] 'host-a': 'cells' must be")


@pytest.mark.parametrize("nova_init, fragment", [
    ("raise ImportError('broken on purpose')", "cannot import nova (broken on purpose)"),
    ("", "is unusable: importing nova.tests.functional.libvirt.base failed"),
])
def test_missing_or_unusable_nova(tmp_path, nova_init, fragment):
    (tmp_path / "nova").mkdir()
    (tmp_path / "nova" / "__init__.py").write_text(nova_init)
    proc = cli("baseline", "pinned-hugepages", env={"PYTHONPATH": f"{tmp_path}{os.pathsep}."})
    assert_one_line_error(proc, fragment)


def test_scenarios_and_points_listing():
    proc = cli("scenarios")
    assert proc.returncode == 0 and "pinned-hugepages" in proc.stdout
    proc = cli("points", "pinned-hugepages")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("  1. source:")
    assert any("source:ComputeManager._resize_instance>Instance.save#2" in ln for ln in lines)


def test_run_one_point_writes_reports_and_replay_reproduces(tmp_path):
    point = "source:ComputeManager._resize_instance>compute_rpc.finish_resize#1"
    report = tmp_path / "r.json"
    proc = cli("run", "pinned-hugepages", "--point", point, "--target", "source",
               "--ending", "revert", "--mutate", "1944759", "--json", str(report))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    item_id = f"pinned-hugepages/{point}/source/revert/mutate=1944759"
    assert f"reproduce: nova-chaos replay '{item_id}'" in proc.stdout
    data = json.loads(report.read_text())
    assert [i["verdict"] for i in data["items"]] == ["fail"]
    # a failure keeps what Nova warned of: its only evidence if it does not replay
    assert any(" WARNING [nova." in line for line in data["items"][0]["log"])
    replay = cli("replay", item_id)
    assert replay.returncode == 1
    assert f">>  17. {point}" in replay.stdout
    assert "what the periodic changed on host-a's watch:" in replay.stdout
    assert "host-a pinned pCPUs: expected 2, seen 0" in replay.stdout


def test_list_prints_the_plan_and_runs_nothing(tmp_path):
    proc = cli("run", "pinned-hugepages", "--target", "source", "--ending", "confirm", "--list",
               "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    ids = proc.stdout.split()
    assert len(ids) == 43 and all(i.endswith("/source/confirm") for i in ids)
    assert "43 items" in proc.stderr and not (tmp_path / "r.json").exists()


def test_a_stopped_run_resumes_where_it_stopped(tmp_path):
    points = ["source:ComputeManager._resize_instance>compute_rpc.finish_resize#1",
              "dest:ComputeManager._finish_resize>Instance.save#1"]
    report = tmp_path / "r.json"
    args = ["run", "pinned-hugepages", "--target", "source", "--ending", "confirm",
            "--json", str(report), "--point", points[0], "--point", points[1]]
    proc = cli(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    whole = json.loads(report.read_text())
    # as a run stopped after its first item leaves it
    report.write_text(json.dumps({"meta": dict(whole["meta"], partial=True),
                                  "items": whole["items"][:1]}))
    proc = cli(*args, "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "resuming " in proc.stderr and ": 1 of 2 items judged already" in proc.stderr
    assert "1/1" in proc.stderr  # one item ran
    again = json.loads(report.read_text())
    assert "partial" not in again["meta"]
    assert [i["id"] for i in again["items"]] == [i["id"] for i in whole["items"]]
    assert [i["verdict"] for i in again["items"]] == ["pass", "pass"]
    assert not any("log" in i for i in again["items"])  # only failures keep Nova's log
    # another run's report is not resumed
    other = cli(*args, "--resume", "--mutate", "1944759")
    assert_one_line_error(other, "was made by another run (mutation: None", "not resuming it")


#: inside the resource tracker's critical section: the periodic must wait for the lock
IN_RT_LOCK = "source:ResourceTracker.drop_move_claim_at_source>Migration.save#1"


#: a call of the card's window, by its lifecycle id (its card's-window id ends in #1)
CORE_CALL = "dest:Flavor.obj_load_attr>Flavor._load_projects#4"


def test_lifecycle_point_inside_the_rt_lock_is_deferred_and_reported(tmp_path):
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    proc = cli("run", "pinned-hugepages", "--window", "lifecycle", "--point", IN_RT_LOCK,
               "--point", CORE_CALL, "--target", "source", "--ending", "confirm",
               "--ending", "auto-confirm", "--json", str(report), "--junit", str(junit))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    items = json.loads(report.read_text())["items"]
    in_lock = [i for i in items if i["id"].endswith("/window=lifecycle")]
    # the source drops its claim on confirm only (auto-confirm included), not on revert
    assert sorted(i["id"].split("/")[3] for i in in_lock) == ["auto-confirm", "confirm"]
    for item in in_lock:
        assert item["fired"] == ["host-a (deferred)"], item
    # one call, one id: a lifecycle-only run names the core's calls as the card's window does
    assert sorted(i["id"] for i in items if i not in in_lock) == [
        f"pinned-hugepages/{CORE_CALL[:-1]}1/source/{e}" for e in ("auto-confirm", "confirm")]
    import xml.etree.ElementTree as ET
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 4 and not any(len(c) for c in cases)  # no failure elements


def _problem(kind, text):
    return {"kind": kind, "text": text}


def _report(tmp_path, findings, problems, verdict="fail"):
    item = "pinned-hugepages/dest:f>Instance.save#1/both/revert/window=lifecycle"
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"meta": {"scenario": "pinned-hugepages"}, "items": [{
        "id": item, "verdict": verdict, "seconds": 1.0, "fired": ["host-b (now)"],
        "problems": problems, "known": [], "findings": findings,
        "replay": f"nova-chaos replay '{item}'"}]}))
    return path


KNOWN = """
[[finding]]
scenario = "pinned-hugepages"
window = "lifecycle"
points = ["dest:f>*"]
targets = ["both"]
endings = ["revert"]
expect = [{ checkpoint = "after-revert", check = "rt", where = "host-a pinned pCPUs", seen = "0" }]
class = "hard"
reason = "reviewed"
"""


def test_rejudge_applies_a_new_known_entry_without_running_anything(tmp_path):
    finding = {"checkpoint": "after-revert", "check": "rt", "where": "host-a pinned pCPUs",
               "expected": "2", "seen": "0", "class": "hard"}
    missed = _problem("missed-injection", "injection did not fire on host-b: its periodic was "
                      "deferred to a lock release that never came")
    report = _report(tmp_path, [finding], [
        _problem("finding", "hard finding at after-revert: [rt] host-a pinned pCPUs: expected 2, "
                 "seen 0"), missed])
    known_file = tmp_path / "known.toml"
    known_file.write_text(KNOWN)
    out = tmp_path / "again.json"
    proc = cli("rejudge", str(report), "--known", str(known_file), "--json", str(out))
    # the finding is now known; the missed injection did not come from a finding and stays
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fail 1 -> 1" in proc.stdout
    # what it cannot do is said where it matters: a cause written since is not applied
    assert "a root cause written or changed since the run is not applied" in proc.stdout
    # failures are shown grouped by what they found, with one replay command per group
    assert "1 items of pinned-hugepages, window lifecycle: points 0..0" in proc.stdout
    assert "    missed-injection" in proc.stdout and "e.g. nova-chaos replay 'pinned" in proc.stdout
    item = json.loads(out.read_text())["items"][0]
    assert item["problems"] == [missed]
    assert item["known"] and "reviewed" in item["known"][0]
    clean = _report(tmp_path, [finding], [_problem(
        "finding", "hard finding at after-revert: [rt] host-a pinned pCPUs: expected 2, seen 0")])
    proc = cli("rejudge", str(clean), "--known", str(known_file))
    assert proc.returncode == 0 and "known 0 -> 1" in proc.stdout, proc.stdout + proc.stderr
    assert "not applied" not in proc.stdout  # nothing fails: nothing to say
    # value-exact: the same place with another value is a new finding
    other = _report(tmp_path, [dict(finding, seen="1")], [_problem(
        "finding", "hard finding at after-revert: [rt] host-a pinned pCPUs: expected 2, seen 1")])
    proc = cli("rejudge", str(other), "--known", str(known_file), "--json", str(out))
    assert proc.returncode == 1 and "fail 1 -> 1" in proc.stdout, proc.stdout + proc.stderr
    assert json.loads(out.read_text())["items"][0]["problems"] == [
        _problem("finding", "hard finding at after-revert: [rt] host-a pinned pCPUs: expected 2, "
                 "seen 1"),
        _problem("stale-known", "known finding no longer reproduces: hard [rt] host-a pinned "
                 "pCPUs = 0 at after-revert: reviewed")]


def test_rejudge_reports_an_entry_that_no_longer_reproduces(tmp_path):
    known_file = tmp_path / "known.toml"
    known_file.write_text(KNOWN)
    proc = cli("rejudge", str(_report(tmp_path, [], [], verdict="pass")), "--known", str(known_file))
    assert proc.returncode == 1
    assert "known finding no longer reproduces: hard [rt] host-a pinned pCPUs" in proc.stdout


@pytest.mark.parametrize("text", ["not json", "[]", '{"items": [{"id": 3}]}'])
def test_rejudge_of_something_else_is_one_line(tmp_path, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert_one_line_error(cli("rejudge", str(bad)), "bad.json: not a nova-chaos JSON report")


def test_proposed_entries_cover_exactly_the_failing_items(tmp_path):
    hard = {"checkpoint": "after-injection@host-a", "check": "rt", "where": "host-a pinned pCPUs",
            "expected": "2", "seen": "0", "class": "hard"}
    lag = {"checkpoint": "after-revert", "check": "rt", "where": "host-b vcpus_used",
           "expected": "0", "seen": "4", "class": "transient"}
    report = _report(tmp_path, [hard, lag], [
        _problem("finding", "hard finding at after-injection@host-a: [rt] host-a pinned pCPUs: "
                 "expected 2, seen 0"),
        _problem("finding", "transient finding at after-revert: [rt] host-b vcpus_used: "
                 "expected 0, seen 4")])
    empty = tmp_path / "none.toml"
    empty.write_text("")
    proposal = cli("rejudge", str(report), "--known", str(empty), "--propose")
    assert proposal.returncode == 0, proposal.stderr
    # one entry per class (an entry covers findings of its own class), the host left open
    assert proposal.stdout.count("[[finding]]") == 2
    assert 'checkpoint = "after-injection@*"' in proposal.stdout
    assert 'where = "host-a pinned pCPUs", seen = ["0"]' in proposal.stdout  # the value seen
    assert 'reason = "TODO' in proposal.stdout
    accepted = tmp_path / "accepted.toml"
    accepted.write_text(proposal.stdout)
    proc = cli("rejudge", str(report), "--known", str(accepted))
    assert proc.returncode == 0 and "fail 1 -> 0" in proc.stdout and "known 0 -> 1" in proc.stdout


def test_a_reader_that_goes_away_ends_the_output_quietly(tmp_path):
    """`nova-chaos ... | head` must not end in a BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "harness", "scenarios"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_nova_tree_on_pythonpath_is_the_one_driven_and_named(tmp_path):
    """A Nova developer's tree (here a copy of the installed package) runs on both backends."""
    import importlib.util
    import shutil
    installed = importlib.util.find_spec("nova").submodule_search_locations[0]  # not imported here
    shutil.copytree(installed, tmp_path / "nova", ignore=shutil.ignore_patterns("__pycache__"))
    for backend in ("threads", "eventlet"):
        proc = cli("run", "pinned-hugepages", "--backend", backend, "--point",
                   "source:ComputeManager._resize_instance>compute_rpc.finish_resize#1",
                   "--target", "source", "--ending", "revert", "--mutate", "1944759",
                   env={"PYTHONPATH": f"{tmp_path}{os.pathsep}.",
                        "NOVA_CHAOS_CACHE": str(tmp_path / f"cache-{backend}")})
        banner = next(ln for ln in proc.stderr.splitlines() if ln.startswith("nova "))
        assert f"from {tmp_path / 'nova'} ({backend} backend" in banner, banner
        assert "not the installed distribution (nova 34.0.0)" in banner
        assert proc.returncode == 1 and "FAILED pinned-hugepages/" in proc.stdout  # caught there too
