"""Exported Nova regression tests (issue 18) are tests that can fail.

* the export of a 1944759 race-window item passes on clean Nova and fails
  when the harness's 1944759 mutation is applied while it runs;
* the export of a hard finding (the revert gap) fails on clean Nova with
  the values the harness reported for the item;
* what export cannot write is refused in one line.
"""
import ast
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cli
from tests.test_cli import assert_one_line_error

RACE = "pinned-hugepages/source:ComputeManager._resize_instance>compute_rpc.finish_resize#1/source/confirm"
REVERT_GAP = ("pinned-hugepages/dest:Instance._load_migration_context>"
              "MigrationContext.get_by_instance_uuid#1/source/revert/window=lifecycle")
UPSTREAM = os.path.join(ROOT, "docs", "upstream")
#: run one test module; with a mutation name, Nova is broken that way first
RUNNER = """
import sys, unittest
sys.path[:0] = [{root!r}, '.']
import nova.tests.functional  # first, as the exported module does: Nova's concurrency mode
if {mutation!r}:
    from harness.cloud import mutations
    mutations.get({mutation!r})().setUp()
result = unittest.TextTestRunner(stream=sys.stdout).run(
    unittest.defaultTestLoader.loadTestsFromName({module!r}))
sys.exit(0 if result.wasSuccessful() else 1)
"""


def export(tmp_path, item_id) -> str:
    proc = cli("export", item_id, "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return re.search(r"wrote \S+/(test_chaos_\w+)\.py", proc.stdout).group(1)


def run_exported(directory, module, mutation=None):
    code = RUNNER.format(root=ROOT, mutation=mutation, module=module)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=directory, timeout=600, env=dict(os.environ, PYTHONWARNINGS="ignore"))


def failure_lines(proc) -> list:
    """``(checkpoint, what, expected, seen)`` of each accounting line the test failed with."""
    return re.findall(r"^  ([\w@-]+): ((?:host|placement)[^:]*): expected (.*), seen (.*)$",
                      proc.stdout + proc.stderr, re.M)


def constant(path, name):
    tree = ast.parse(open(path).read())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == name)
    return ast.literal_eval(node.value)


def test_race_window_export_passes_clean_and_fails_with_1944759(tmp_path):
    module = export(tmp_path, RACE)
    clean = run_exported(tmp_path, module)
    assert clean.returncode == 0, clean.stdout[-3000:]
    mutated = run_exported(tmp_path, module, mutation="1944759")
    assert mutated.returncode == 1, mutated.stdout[-3000:]
    # confirm trips on the pins the source's periodic dropped (the bug's own symptom)
    assert "confirm of vm1: the API refused" in mutated.stdout and \
        "CPUUnpinningInvalid" in mutated.stdout, mutated.stdout[-3000:]


def test_hard_finding_export_fails_clean_with_the_harness_values(tmp_path):
    module = export(tmp_path, REVERT_GAP)
    proc = run_exported(tmp_path, module)
    assert proc.returncode == 1, proc.stdout[-3000:]
    seen = failure_lines(proc)
    assert ("after-revert", "host-a pinned pCPUs", "2", "0") in seen, proc.stdout[-3000:]
    harness = {(cp, where, expected, got) for cp, _, where, expected, got
               in constant(tmp_path / f"{module}.py", "HARNESS_SAW")}
    # every value the export reports at a checkpoint the harness checked the same way
    # (host totals of the resource tracker) is what the harness reported there
    rt = [line for line in seen if not line[1].startswith("placement")]
    assert rt and set(rt) <= harness, (rt, sorted(harness))


@pytest.mark.parametrize("item, fragment", [
    (RACE + "/fault=split", "export supports the whole periodic only"),
    (RACE + "/mutate=1944759", "a mutation is the harness's"),
    (RACE.replace("/confirm", "/auto-confirm"), "export supports the endings confirm, revert"),
    ("live-migration/dest:x#1/dest/success", "export supports resize and cold migration scenarios"),
])
def test_what_export_cannot_write_is_one_line(item, fragment):
    assert_one_line_error(cli("export", item, "--out", "/tmp/never-written"), fragment)
    assert not os.path.exists("/tmp/never-written")


def test_export_needs_an_item():
    assert_one_line_error(cli("export"), "export needs an item id or --cause NAME (not both)")
