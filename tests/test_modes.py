"""Same ids and verdicts whatever the mode, backend or number of pytest workers."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

from tests.conftest import ROOT, cli

SAMPLE = [  # one point inside the race window, one after it
    "source:ComputeManager._resize_instance>compute_rpc.finish_resize#1",
    "dest:ComputeManager._finish_resize>Migration.save#1",
]


def _run(tmp_path, name, *extra):
    report = tmp_path / f"{name}.json"
    args = ["run", "pinned-hugepages", "--json", str(report), "--jobs", "2", *extra]
    for point in SAMPLE:
        args += ["--point", point]
    proc = cli(*args)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    data = json.loads(report.read_text())
    items = data["items"]
    assert data["meta"]["mode"] != "fork" or data["meta"]["fork_parents"]
    for parent in data["meta"].get("fork_parents", []):
        # the uninjected parent ran alongside its children: clean at every phase,
        # on exactly the recorded trace
        assert parent["passed"] and parent["trace_matches"], parent
    return {i["id"]: (i["verdict"], sorted((f["checkpoint"], f["check"], f["where"], f["expected"],
                                            f["seen"]) for f in i["findings"])) for i in items}


def test_fork_and_fresh_agree_on_passes_and_fails(tmp_path):
    """Both hosts injected, mutated, both endings (a fresh item costs 4-5 forked ones:
    CI keeps it to 4): the point in the race window fails (confirm trips, revert
    under-accounts), the one after it passes -- both verdicts, and the findings, equal.
    """
    narrow = ["--target", "both", "--ending", "confirm", "--ending", "revert",
              "--mutate", "1944759"]
    fork = _run(tmp_path, "fork", "--mode", "fork", *narrow)
    fresh = _run(tmp_path, "fresh", "--mode", "fresh", *narrow)
    assert len(fork) == len(SAMPLE) * 2
    assert fork == fresh
    assert sorted(v for v, _ in fork.values()) == ["fail", "fail", "pass", "pass"]


def test_point_ids_agree_between_backends():
    # each backend's discovery, cached under its own key (shared with the tests that sweep)
    eventlet = cli("points", "pinned-hugepages", "--backend", "eventlet")
    threads = cli("points", "pinned-hugepages", "--backend", "threads")
    assert eventlet.returncode == threads.returncode == 0, threads.stderr[-2000:]
    assert eventlet.stdout == threads.stdout
    assert len(eventlet.stdout.splitlines()) > 20


def test_threads_fork_matches_eventlet_fork(tmp_path):
    """Threads fork, the whole cloud on one thread: the findings eventlet gives.

    (Threads fork vs real threads, a fresh cloud per item: the test above,
    on the default backend.)
    """
    narrow = ["--ending", "revert", "--target", "source", "--target", "dest", "--mutate", "1944759"]
    eventlet = _run(tmp_path, "ev", "--mode", "fork", "--backend", "eventlet", *narrow)
    threads = _run(tmp_path, "th", "--mode", "fork", "--backend", "threads", *narrow)
    assert len(threads) == len(SAMPLE) * 2
    assert eventlet == threads
    assert {"fail", "pass"} <= {v for v, _ in threads.values()}  # both verdicts compared


def test_a_stray_thread_makes_threads_fork_an_error_naming_it(tmp_path):
    report = tmp_path / "stray.json"
    proc = cli("run", "pinned-hugepages", "--backend", "threads", "--mode", "fork",
               "--mutate", "selftest-stray-thread", "--point", SAMPLE[0], "--target", "source",
               "--ending", "confirm", "--json", str(report), timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    (item,) = json.loads(report.read_text())["items"]
    assert item["verdict"] == "error"
    assert item["problems"][0]["kind"] == "error"
    assert "other threads are alive: selftest-stray" in item["problems"][0]["text"], item["problems"]


def _pytest_outcomes(tmp_path, workers):
    xml = tmp_path / f"n{workers}.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers),
           "tests/test_campaign.py", f"--junitxml={xml}", "-W", "ignore"]
    cmd += ["--chaos-point", SAMPLE[0]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    return {(c.get("classname"), c.get("name")): [e.tag for e in c]
            for c in ET.parse(xml).getroot().iter("testcase")}


def test_pytest_xdist_collects_and_judges_like_serial(tmp_path):
    serial = _pytest_outcomes(tmp_path, 0)
    parallel = _pytest_outcomes(tmp_path, 2)
    # clean: source x revert, auto-confirm on both; mutated: source x revert
    assert len(serial) == 1 + 1 + 1
    assert serial == parallel


#: points of the revert ending (swept by an ending-parent forked at VERIFY_RESIZE)
IN_REVERT = [
    "source:SchedulerReportClient.get_allocs_for_consumer>placement.GET#1",
    "source:SchedulerReportClient.get_allocs_for_consumer>placement.GET#2",
    "source:SchedulerReportClient.get_allocs_for_consumer>placement.GET#3",
    "source:SchedulerReportClient.move_allocations>placement.POST#1",
    "source:ComputeManager._finish_revert_resize>network.setup_networks_on_host#1",
    "source:ComputeManager._finish_revert_resize>network.migrate_instance_finish#1",
    "source:ComputeManager._finish_revert_resize>network.get_instance_nw_info#1",
    "source:ShareManager.get_share_info>ShareMappingList.get_by_instance_uuid#1",
    "source:ComputeManager._finish_revert_resize>driver.finish_revert_migration#1",
    "source:LibvirtDriver._wait_for_running>driver.get_info#1",
    "source:ComputeManager._finish_revert_resize>Instance.drop_migration_context#1",
    "source:ComputeManager._finish_revert_resize>Instance.save#2",
]


def test_a_parent_outlives_the_item_bound_its_children_keep(tmp_path):
    """An ending-parent forks every item of its ending one after another: its own
    life is bounded by that work, not by one item's --timeout (which once killed it).

    Without the memo each of the 12 items runs its whole ending (~0.7 s idle), so the
    parent lives past the 4 s bound while no item comes near it (the memo's inherited
    items are too quick for the sum to pass the bound reliably: CI once saw it miss)."""
    report = tmp_path / "r.json"
    args = ["run", "pinned-hugepages", "--window", "lifecycle", "--ending", "revert",
            "--target", "source", "--jobs", "1", "--timeout", "4", "--no-memo",
            "--json", str(report)]
    for point in IN_REVERT:
        args += ["--point", point]
    proc = cli(*args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(report.read_text())
    assert [i["verdict"] for i in data["items"]] == ["pass"] * len(IN_REVERT)
    # the items ran one after another under one parent for longer than one item may
    assert sum(i["seconds"] for i in data["items"]) > 4


#: the shared-storage check hands a temp file's path across an RPC; then two later points
STORAGE_CHECK = [
    "dest:ComputeManager._is_instance_storage_shared>driver.check_instance_shared_storage_local#1",
    "dest:ComputeManager._is_instance_storage_shared>compute_rpc.check_instance_shared_storage#1",
    "source:ComputeManager.check_instance_shared_storage>driver.check_instance_shared_storage_remote#1",
    "dest:ShareManager.get_share_info>ShareMappingList.get_by_instance_uuid#2",
    "source:ComputeManager._finish_revert_resize>Instance.save#2",
]


def test_children_forked_inside_the_storage_check_leave_their_parent_alone(tmp_path):
    """Children forked between the temp file's creation and its removal once
    deleted their parent's file (absolute path), so the parent's revert took
    the unshared-storage path and every later item 'diverged' (9 of 18 here)."""
    report = tmp_path / "r.json"
    args = ["run", "pinned-hugepages", "--window", "lifecycle", "--ending", "revert",
            "--jobs", "2", "--json", str(report)]
    for point in STORAGE_CHECK:
        args += ["--point", point]
    proc = cli(*args)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    data = json.loads(report.read_text())
    assert len(data["items"]) == 3 * len(STORAGE_CHECK)
    problems = [p for i in data["items"] for p in i["problems"] if p["kind"] != "finding"]
    assert problems == []
    assert all(p["passed"] and p["trace_matches"] for p in data["meta"]["fork_parents"])
