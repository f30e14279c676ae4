"""The fault an item injects is part of its id, checked like the rest of it."""
import pytest

from harness.errors import UsageError
from harness.execute.item import Item
from harness.explore import faults


def test_a_split_item_id_round_trips_and_the_default_fault_is_not_written():
    item = Item("evacuate", "dest:A>b#1", "dest", "source-restart", fault="split:2")
    assert item.id == "evacuate/dest:A>b#1/dest/source-restart/fault=split:2"
    assert Item.parse(item.id) == item
    plain = Item("evacuate", "dest:A>b#1", "dest", "source-restart")
    assert plain.id == "evacuate/dest:A>b#1/dest/source-restart"


@pytest.mark.parametrize("fault", ["split:0", "split:x", "splat", "split:"])
def test_an_unknown_fault_is_one_line_naming_it(fault):
    with pytest.raises(UsageError, match=f"unknown fault '{fault}'"):
        Item.parse(f"evacuate/dest:A>b#1/dest/source-restart/fault={fault}")


def test_distances():
    assert faults.split_distance("periodic") is None
    assert faults.split_distance("split") == 1
    assert faults.split_distance("split:3") == 3
