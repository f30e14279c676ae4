"""The upstream PCI mutations (harness.cloud.pci_mutations) are caught where predicted.

Each shows without any injection, so the campaign's uninjected run of the
ending that takes the broken path is the catch (its items are then not
swept); the other endings, and clean Nova on the same endings, are not:

* 1641750: a confirm (and auto-confirm) with no source periodic during the
  move leaves the old VF allocated on the source: the PCI oracle at the
  confirm's checkpoint (host-a's tracker and its domains); a revert is clean;
* 1607219: a revert frees the source's devices on the destination, so
  host-b keeps the new VF: the PCI oracle at after-revert; confirms as clean;
* 1622854: the device a confirm or revert frees stays in the tracker's
  mappings; the next periodic (the convergence oracle's, at after-delete)
  frees it again and fails with PciDeviceInvalidStatus;
* 2103636: the destination's live-migration claim refuses the flavor VF, so
  the migration is refused (NoValidHost) and the uninjected run errors
  before the window.

``--point`` bounds a run whose uninjected run unexpectedly passes; the
baseline command (text) runs the uninjected endings only.
"""
import json
import re

import pytest

from tests.conftest import cli

RESIZE_POINT = "source:ComputeManager._resize_instance>network.get_instance_nw_info#1"
HELD = "PCI devices held per server (tracker)"
ONE_VF = "{'vm1': {'VF 8086:1515': 1}}"


def _run(tmp_path, scenario, *args) -> dict:
    """``nova-chaos run`` at RESIZE_POINT: ending -> the uninjected item (verdict, findings)."""
    report = tmp_path / "run.json"
    proc = cli("run", scenario, "--point", RESIZE_POINT, "--jobs", "1", "--json", str(report),
               *args)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    data = json.loads(report.read_text())
    uninjected = {i["id"].split("/")[3]: i for i in data["items"] if "/uninjected/" in i["id"]}
    assert set(uninjected) == {i.split("/")[3] for i in data["meta"]["uninjected"]}, data["meta"]
    return uninjected


def _baseline(scenario, *args) -> dict:
    """``nova-chaos baseline``: ending -> (verdict, {checkpoint: 'ok' or 'N finding(s)'}, text)."""
    proc = cli("baseline", scenario, *args)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    endings, ending = {}, None
    for line in proc.stdout.splitlines():
        head = re.match(r"\S+ / (\S+)(?: \(mutation \S+\))?: (PASS|KNOWN|FAIL|ERROR) in ", line)
        if head:
            ending = head.group(1)
            endings[ending] = (head.group(2), {}, [])
            continue
        if ending is None:
            continue
        endings[ending][2].append(line)
        checkpoint = re.match(r"  ([\w-]+): (ok|\d+ finding\(s\))$", line)
        if checkpoint:
            endings[ending][1][checkpoint.group(1)] = checkpoint.group(2)
    return {e: (v, c, "\n".join(t)) for e, (v, c, t) in endings.items()}


def _at(item, checkpoint) -> list:
    return [(f["check"], f["where"], f["seen"]) for f in item["findings"]
            if f["checkpoint"] == checkpoint]


def test_the_catalogue_is_listed():
    """``nova-chaos mutations`` lists the built-in PCI mutations and every reviewed PCI bug."""
    from harness.cloud import pci_mutations
    proc = cli("mutations")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    for name, mutation in pci_mutations.MUTATIONS.items():
        assert any(line.split()[:2] == [name, mutation.operation] for line in lines), name
        assert mutation.bug.endswith(f"/+bug/{name}") and mutation.__doc__.count(name)
    for bug in pci_mutations.NOT_REPRODUCED:
        assert any(line.split()[:4] == [bug, "(not", "built", "in)"] for line in lines), bug
    assert not set(pci_mutations.MUTATIONS) & set(pci_mutations.NOT_REPRODUCED)


def test_1641750_caught_at_the_confirms(tmp_path):
    items = _run(tmp_path, "pci-vf-resize", "--mutate", "1641750",
                 "--ending", "confirm", "--ending", "auto-confirm")
    for ending in ("confirm", "auto-confirm"):
        item = items[ending]
        assert item["verdict"] == "fail", item["problems"][:6]
        assert _at(item, f"after-{ending}") == [
            ("pci", f"host-a {HELD}", ONE_VF),
            ("pci", "host-a PCI devices of defined domains (vs tracker)", "{'0000:82:00.2': 'vm1'}")]


def test_1607219_caught_at_the_revert(tmp_path):
    (item,) = _run(tmp_path, "pci-vf-resize", "--mutate", "1607219", "--ending", "revert").values()
    assert item["verdict"] == "fail", item["problems"][:6]
    assert _at(item, "after-revert") == [
        ("pci", f"host-b {HELD}", ONE_VF),
        ("pci", "host-b PCI devices of defined domains (vs tracker)", "{'0000:81:00.3': 'vm1'}")]


def test_1622854_caught_at_the_next_periodic(tmp_path):
    (item,) = _run(tmp_path, "pci-vf-resize", "--mutate", "1622854", "--ending", "revert").values()
    assert item["verdict"] == "fail", item["problems"][:6]
    ((check, where, seen),) = [(f["check"], f["where"], f["seen"]) for f in item["findings"]]
    assert (check, where) == ("convergence", "log lines matching 'Error updating resources for node'")
    assert "node host-b" in seen and "PciDeviceInvalidStatus" in seen, seen
    assert item["findings"][0]["checkpoint"] == "after-delete"


@pytest.mark.breadth  # CI: each mutation's own ending is checked where it bites and where not
def test_mutations_leave_the_other_endings_as_clean_nova():
    """1641750 never touches a revert, 1607219 never a confirm."""
    assert _baseline("pci-vf-resize", "--mutate", "1641750", "--ending", "revert")["revert"][0] \
        == "PASS"
    verdict, checkpoints, _ = _baseline("pci-vf-resize", "--mutate", "1607219",
                                        "--ending", "confirm")["confirm"]
    assert verdict == "KNOWN" and checkpoints["after-confirm"] == "ok", checkpoints


@pytest.mark.breadth  # CI: tests/test_scenarios.py runs each PCI scenario clean
def test_clean_nova_passes_the_resize_endings():
    endings = _baseline("pci-vf-resize")
    assert endings["revert"][0] == "PASS", endings["revert"]
    for ending in ("confirm", "auto-confirm"):  # the known deleted-after-move-dest-untracked only
        verdict, checkpoints, text = endings[ending]
        assert verdict == "KNOWN" and checkpoints[f"after-{ending}"] == "ok", text
    assert not any("Error updating resources" in text for _, _, text in endings.values())


def test_2103636_caught_as_a_refused_live_migration():
    verdict, checkpoints, text = _baseline("pci-live-migration", "--mutate", "2103636",
                                           "--ending", "success")["success"]
    assert verdict == "ERROR", text
    assert "API refused" in text and "NoValidHost" in text, text
    assert "Non-VIF related PCI requests are not supported for live migration" in text, text
    assert checkpoints == {"after-boot": "ok"}, checkpoints


@pytest.mark.breadth  # CI: tests/test_scenarios.py runs each PCI scenario clean
def test_clean_nova_live_migrates_the_vf():
    verdict, checkpoints, text = _baseline("pci-live-migration", "--ending", "success")["success"]
    assert verdict in ("PASS", "KNOWN"), text
    assert "Non-VIF related PCI requests" not in text
    assert "after-success" in checkpoints, checkpoints


#: 1622854's reach: every ending of a cold move frees a device through free_device (caught at
#: the next periodic); evacuation, unshelve and live migration free through other paths
REACH_1622854 = {"pci-pf-cold-migration": {"confirm": "FAIL", "revert": "FAIL",
                                           "auto-confirm": "FAIL"},
                 "pci-asymmetric": {"confirm": "FAIL"},
                 "pci-vf-resize-placement": {"confirm": "FAIL"},
                 "pci-evacuate": {"source-restart": "KNOWN"},
                 "pci-unshelve": {"unshelve": "PASS"},
                 "pci-live-migration": {"success": "KNOWN", "rollback": "KNOWN"}}


@pytest.mark.breadth
@pytest.mark.parametrize("scenario", sorted(REACH_1622854))
def test_1622854_reach(scenario):
    endings = _baseline(scenario, "--mutate", "1622854",
                        *(a for e in REACH_1622854[scenario] for a in ("--ending", e)))
    assert {e: v for e, (v, _, _) in endings.items()} == REACH_1622854[scenario]
    for ending, (verdict, _, text) in endings.items():
        assert (verdict == "FAIL") == ("PciDeviceInvalidStatus" in text), (ending, text)


@pytest.mark.breadth
def test_2103636_leaves_a_live_migration_without_pci_as_clean_nova():
    mutated = _baseline("live-migration", "--mutate", "2103636")
    clean = _baseline("live-migration")
    assert {e: (v, c) for e, (v, c, _) in mutated.items()} \
        == {e: (v, c) for e, (v, c, _) in clean.items()}
