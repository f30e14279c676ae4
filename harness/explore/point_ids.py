"""Read a yield point's id, ``<role>:<function>><callee>#<occurrence>``, in one place.

The id is the harness's stable name for a call (:mod:`harness.explore.tracer`);
faults, recreate and bug texts take it apart, and must agree on how.
"""
from __future__ import annotations


def role(point_id: str) -> str:
    """The host role making the call: ``source``, ``dest``, ``host-a`` ..."""
    return point_id.split(":", 1)[0]


def function(point_id: str) -> str:
    """Nova's function making the call, e.g. ``ComputeManager._resize_instance``."""
    return point_id.split(":", 1)[1].split(">", 1)[0]


def callee(point_id: str) -> str:
    """What is called, without its occurrence, e.g. ``Instance.save``."""
    return point_id.split(">", 1)[1].rsplit("#", 1)[0]


def caller(point_id: str) -> str:
    """``<role>:<function>``: the call's host and Nova function."""
    return point_id.split(">", 1)[0]
