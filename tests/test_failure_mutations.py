"""The failure-path mutations (2044235, 2000069, 1628606) are caught at the points their
mechanism predicts, by the findings it predicts; clean Nova is not, there.

Read from Nova (see each class in harness.cloud.mutations):

* 2044235: the destination's call of the source's ``check_can_live_migrate_source``
  lost (``--fault rpc``): the fixed destination wraps the timeout in
  ``MigrationPreCheckError`` and the server stays ACTIVE; without the fix the
  conductor's catch-all puts it in ERROR, its guest untouched on the source
  (the recovery oracle's ``vm_state``);
* 2000069 and 1628606: the source's call of ``post_live_migration_at_destination``
  lost once the guest runs on the destination. Clean Nova 34 already fails
  this item on its own finding (the errored migration's source allocation is
  never freed: placement and the source's RT), which neither mutation hides;
  2000069 leaves the instance MIGRATING on the source, 1628606 leaves it on
  the source with its migration context; either way the delete misses the
  guest still running on the destination (truth).

Only the success ending: the lost message is on its path (2044235's point is
before the outcome, so both endings show it alike).
"""
from tests.conftest import sweep

CHECK_SOURCE = ("dest:ComputeManager.check_can_live_migrate_destination"
                ">compute_rpc.check_can_live_migrate_source#1")
POST_AT_DEST = ("source:ComputeManager._post_live_migration"
                ">compute_rpc.post_live_migration_at_destination#1")


def _item(tmp_path, point, *extra):
    (item,) = sweep(tmp_path, "live-migration", [point], "--window", "lifecycle",
                    "--ending", "success", "--fault", "rpc", *extra).values()
    return item


def _seen(item, check, where):
    """``(checkpoint, seen)`` of each finding of ``check`` whose place starts with ``where``
    (a report keeps what a finding saw as its repr)."""
    return [(f["checkpoint"], f["seen"]) for f in item["findings"]
            if f["check"] == check and f["where"].startswith(where)]


def _mutations_marks(item) -> list:
    """What 2000069 or 1628606 leave (clean Nova leaves none of it): the server still
    moving or on the source with its context, its guest left running on the destination."""
    return (_seen(item, "recovery", "server vm1 task_state")
            + _seen(item, "recovery", "server vm1 migration context")
            + _seen(item, "truth", "host-b"))


def test_2044235_caught_where_the_source_check_is_lost(tmp_path):
    item = _item(tmp_path, CHECK_SOURCE, "--mutate", "2044235")
    assert item["verdict"] == "fail", item
    assert _seen(item, "recovery", "server vm1 vm_state") == [
        ("after-failure", "'error (its guest runs untouched on host-a, where its move started)'")]
    assert {f["check"] for f in item["findings"]} == {"recovery"}, item["findings"]


def test_2044235_point_passes_on_clean_nova(tmp_path):
    item = _item(tmp_path, CHECK_SOURCE)
    assert item["verdict"] == "pass", item["findings"]


def test_2000069_caught_where_post_at_destination_is_lost(tmp_path):
    item = _item(tmp_path, POST_AT_DEST, "--mutate", "2000069")
    assert item["verdict"] == "fail", item
    assert _seen(item, "recovery", "server vm1 task_state") == [("after-failure", "'migrating'")]
    assert ("after-delete", "[6, 7]") in _seen(item, "truth", "host-b cell 0 pCPUs pinned")


def test_1628606_caught_where_post_at_destination_is_lost(tmp_path):
    item = _item(tmp_path, POST_AT_DEST, "--mutate", "1628606")
    assert item["verdict"] == "fail", item
    assert _seen(item, "recovery", "server vm1 migration context") == [
        ("after-failure", "'set (migration 1)'")]
    assert not _seen(item, "recovery", "server vm1 task_state")  # ERROR, not MIGRATING
    assert ("after-delete", "[6, 7]") in _seen(item, "truth", "host-b cell 0 pCPUs pinned")


def test_post_at_destination_lost_on_clean_nova_has_only_its_own_finding(tmp_path):
    item = _item(tmp_path, POST_AT_DEST)
    assert _mutations_marks(item) == [], item["findings"]
    # clean Nova 34's own: the errored migration's allocation on the source outlives the delete
    assert _seen(item, "placement", "host-a provider usages")[-1][0] == "after-delete"
